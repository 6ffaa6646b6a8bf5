//! The room game (`ternio_examples::rooms`) over TCP: what the guide's
//! doctests do not show. A player who changes rooms leaves the old one,
//! names and rooms are checked, a connection logs in once, and a second
//! player's board comes from the answer to `JoinRoom`.

use std::time::Duration;

use ternio::Server;
use ternio::protocol::ErrorCode;
use ternio_client::{Client, ClientError};
use ternio_examples::rooms::{
    self, JoinRoom, Left, Login, Move, Moved, Player, RoomState, Settings, Welcome, errors,
};

async fn server() -> std::net::SocketAddr {
    let server = rooms::serve(
        Server::builder().discover_controllers(false),
        Settings::default(),
    )
    .map_tcp("127.0.0.1:0")
    .build()
    .expect("the rooms server builds");
    let address = server.tcp_addrs()[0];
    tokio::spawn(server.run());
    address
}

async fn player(address: std::net::SocketAddr, name: &str) -> Client {
    let client = Client::connect_tcp(address).await.expect("connects");
    let welcome: Welcome = client
        .request_async(&Login {
            name: name.into(),
            token: String::new(),
        })
        .await
        .expect("logs in");
    assert_eq!(welcome.level, rooms::PLAYER);
    client
}

fn code(result: Result<impl std::fmt::Debug, ClientError>) -> ErrorCode {
    match result {
        Err(ClientError::Remote { code, .. }) => code,
        other => panic!("an error answer, not {other:?}"),
    }
}

async fn join(client: &Client, room: &str) -> RoomState {
    client
        .request_async(&JoinRoom { room: room.into() })
        .await
        .expect("joins")
}

#[tokio::test]
async fn a_player_who_changes_rooms_leaves_the_old_one() {
    let address = server().await;
    let ann = player(address, "ann").await;
    let mut left = ann.subscribe::<Left>();
    join(&ann, "lobby").await;
    let bob = player(address, "bob").await;
    join(&bob, "lobby").await;
    bob.request_async(&Move { dx: -1, dy: 1 }).await.unwrap();

    // Carol's board comes from the answer: Ann and Bob where they are.
    let carol = player(address, "carol").await;
    let state = join(&carol, "lobby").await;
    assert_eq!(
        state.players,
        [
            Player {
                name: "ann".into(),
                x: 8,
                y: 8
            },
            Player {
                name: "bob".into(),
                x: 7,
                y: 9
            },
            Player {
                name: "carol".into(),
                x: 8,
                y: 8
            },
        ]
    );

    // Bob goes to another room: the lobby is told, the arena has him alone.
    let arena = join(&bob, "arena").await;
    assert_eq!(
        arena.players,
        [Player {
            name: "bob".into(),
            x: 8,
            y: 8
        }]
    );
    let gone = tokio::time::timeout(Duration::from_secs(5), left.next())
        .await
        .expect("a Left push")
        .unwrap();
    assert_eq!(
        gone,
        Left {
            room: "lobby".into(),
            name: "bob".into()
        }
    );

    // His moves now go to the arena only.
    let mut moves = carol.subscribe::<Moved>();
    bob.request_async(&Move { dx: 1, dy: 0 }).await.unwrap();
    carol.request_async(&Move { dx: 0, dy: -1 }).await.unwrap();
    let seen = moves.next().await.unwrap();
    assert_eq!(
        seen.player.name, "carol",
        "Carol sees her own move, not Bob's"
    );
    assert_eq!(
        seen.moves, 2,
        "the lobby's count: Bob's first move and Carol's"
    );
}

#[tokio::test]
async fn names_rooms_and_steps_are_checked() {
    let address = server().await;
    let client = Client::connect_tcp(address).await.unwrap();
    let long = Login {
        name: "x".repeat(17),
        token: String::new(),
    };
    assert_eq!(
        code(client.request_async(&long).await),
        ErrorCode::Application(errors::BAD_NAME)
    );
    let ann = player(address, "ann").await;
    let again = Login {
        name: "ann2".into(),
        token: String::new(),
    };
    assert_eq!(
        code(ann.request_async(&again).await),
        ErrorCode::Application(errors::BAD_NAME),
        "a connection logs in once"
    );
    assert_eq!(
        code(ann.request_async(&JoinRoom { room: " ".into() }).await),
        ErrorCode::Application(errors::BAD_ROOM)
    );
    assert_eq!(
        code(ann.request_async(&Move { dx: 1, dy: 0 }).await),
        ErrorCode::Application(errors::NOT_IN_ROOM)
    );
    join(&ann, "lobby").await;
    assert_eq!(
        code(ann.request_async(&Move { dx: 0, dy: -2 }).await),
        ErrorCode::Application(errors::BAD_MOVE)
    );
    // The board has edges: 20 steps left from the middle end at column 0.
    let mut moves = ann.subscribe::<Moved>();
    for _ in 0..20 {
        ann.request_async(&Move { dx: -1, dy: 0 }).await.unwrap();
    }
    let mut last = None;
    for _ in 0..20 {
        last = moves.next().await;
    }
    assert_eq!(
        last.unwrap().player,
        Player {
            name: "ann".into(),
            x: 0,
            y: 8
        }
    );
}
