//! The chat example end to end, over real sockets: the service of
//! `examples/chat_server` (`ternio_examples::chat::serve`) in-process, with
//! SDK clients over TCP and WebSocket (and one with a secure session) in a
//! room: messages both ways, join and leave pushes, errors, and a nickname
//! freed when its connection goes or it takes another. (The same service
//! on two nodes of a Redis cluster: `redis/tests/cluster.rs`.)

use std::net::SocketAddr;
use std::time::Duration;

use ternio::{Packet, Server, ServerHandle};
use ternio_client::{Client, ClientConfig, ClientError, ErrorCode, SecureConfig, Subscription};
use ternio_examples::chat::{
    self, ChatMessage, JoinRoom, LeaveRoom, RoomInfo, Say, SetNick, UserJoined, UserLeft, errors,
};

fn start_chat() -> (SocketAddr, SocketAddr, ServerHandle) {
    let server = chat::serve(Server::builder().discover_controllers(false))
        .map_tcp("127.0.0.1:0")
        .map_websocket("127.0.0.1:0", "/ws")
        .build()
        .expect("the chat server builds");
    let (tcp, ws) = (server.tcp_addrs()[0], server.websocket_addrs()[0]);
    let handle = server.handle();
    tokio::spawn(server.run());
    (tcp, ws, handle)
}

/// A chat user: a client and its subscriptions to the chat's pushes.
struct User {
    client: Client,
    messages: Subscription<ChatMessage>,
    joins: Subscription<UserJoined>,
    leaves: Subscription<UserLeft>,
}

impl User {
    fn new(client: Client) -> Self {
        Self {
            messages: client.subscribe(),
            joins: client.subscribe(),
            leaves: client.subscribe(),
            client,
        }
    }

    async fn nick(&self, nick: &str) -> Result<(), ClientError> {
        self.client
            .request_async(&SetNick {
                nick: nick.to_owned(),
            })
            .await
    }

    async fn join(&self, room: &str) -> RoomInfo {
        self.client
            .request_async(&JoinRoom {
                room: room.to_owned(),
            })
            .await
            .unwrap()
    }

    async fn say(&self, room: &str, text: &str) -> Result<(), ClientError> {
        self.client
            .request_async(&Say {
                room: room.to_owned(),
                text: text.to_owned(),
            })
            .await
    }
}

async fn next<P: Packet>(subscription: &mut Subscription<P>) -> P {
    tokio::time::timeout(Duration::from_secs(5), subscription.next())
        .await
        .unwrap_or_else(|_| panic!("no {} push within 5 s", P::NAME))
        .expect("the subscription is open")
}

fn message(room: &str, nick: &str, text: &str) -> ChatMessage {
    ChatMessage {
        room: room.into(),
        nick: nick.into(),
        text: text.into(),
    }
}

fn joined(room: &str, nick: &str) -> UserJoined {
    UserJoined {
        room: room.into(),
        nick: nick.into(),
    }
}

fn left(room: &str, nick: &str) -> UserLeft {
    UserLeft {
        room: room.into(),
        nick: nick.into(),
    }
}

#[tokio::test]
async fn two_users_over_tcp_and_websocket_chat_in_a_room() {
    let (tcp, ws, _server) = start_chat();
    let mut ann = User::new(Client::connect_tcp(tcp).await.unwrap());
    let mut bob = User::new(Client::connect_ws(&format!("ws://{ws}/ws")).await.unwrap());

    // Nicknames: one each, taken ones refused.
    ann.nick("ann").await.unwrap();
    let taken = bob.nick("ann").await.unwrap_err();
    assert_eq!(taken.code(), Some(ErrorCode::Application(errors::BAD_NICK)));
    for bad in ["", "   ", "a\tb", &"x".repeat(33)] {
        let refused = bob.nick(bad).await.unwrap_err();
        assert_eq!(
            refused.code(),
            Some(ErrorCode::Application(errors::BAD_NICK)),
            "{bad:?}"
        );
    }
    // Taking one's own nickname again changes nothing.
    ann.nick("ann").await.unwrap();
    bob.nick("bob").await.unwrap();

    // Saying before joining is refused.
    let refused = bob.say("lobby", "too early").await.unwrap_err();
    assert_eq!(
        refused.code(),
        Some(ErrorCode::Application(errors::NOT_IN_ROOM))
    );

    // Joins: each member hears of each join, the joiner included.
    let info = ann.join("lobby").await;
    assert_eq!(info.members, ["ann"]);
    assert_eq!(next(&mut ann.joins).await, joined("lobby", "ann"));
    let info = bob.join("lobby").await;
    assert_eq!(info.members, ["ann", "bob"]);
    assert_eq!(next(&mut ann.joins).await, joined("lobby", "bob"));
    assert_eq!(next(&mut bob.joins).await, joined("lobby", "bob"));

    // Messages both ways, each heard by both (the speaker too).
    ann.say("lobby", "hi bob").await.unwrap();
    bob.say("lobby", "hi ann, from a browser-ish client")
        .await
        .unwrap();
    for user in [&mut ann, &mut bob] {
        assert_eq!(
            next(&mut user.messages).await,
            message("lobby", "ann", "hi bob")
        );
        assert_eq!(
            next(&mut user.messages).await,
            message("lobby", "bob", "hi ann, from a browser-ish client")
        );
    }

    // Leaving: the others hear it; the leaver hears nothing more.
    bob.client
        .request_async(&LeaveRoom {
            room: "lobby".into(),
        })
        .await
        .unwrap();
    assert_eq!(next(&mut ann.leaves).await, left("lobby", "bob"));
    ann.say("lobby", "alone now").await.unwrap();
    assert_eq!(
        next(&mut ann.messages).await,
        message("lobby", "ann", "alone now")
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(bob.messages.try_next(), None);
    assert_eq!(bob.leaves.try_next(), None);

    // Back in; then ann goes away: bob hears it, and the nickname is free.
    bob.join("lobby").await;
    assert_eq!(next(&mut ann.joins).await, joined("lobby", "bob"));
    assert_eq!(next(&mut bob.joins).await, joined("lobby", "bob"));
    ann.client.close().await;
    assert_eq!(next(&mut bob.leaves).await, left("lobby", "ann"));
    let mut carol = User::new(Client::connect_tcp(tcp).await.unwrap());
    carol.nick("ann").await.unwrap();
    let info = carol.join("lobby").await;
    assert_eq!(info.members, ["ann", "bob"]);
    assert_eq!(next(&mut bob.joins).await, joined("lobby", "ann"));
    assert_eq!(next(&mut carol.joins).await, joined("lobby", "ann"));

    // A new nickname frees the old one; the room hears the old one leave
    // and the new one join, and knows the member by the new one from then on.
    bob.nick("robert").await.unwrap();
    for member in [&mut bob, &mut carol] {
        assert_eq!(next(&mut member.leaves).await, left("lobby", "bob"));
        assert_eq!(next(&mut member.joins).await, joined("lobby", "robert"));
    }
    carol.nick("bob").await.unwrap();
    for member in [&mut bob, &mut carol] {
        assert_eq!(next(&mut member.leaves).await, left("lobby", "ann"));
        assert_eq!(next(&mut member.joins).await, joined("lobby", "bob"));
    }
    let info = carol.join("lobby").await;
    assert_eq!(info.members, ["bob", "robert"]);
    bob.client
        .request_async(&LeaveRoom {
            room: "lobby".into(),
        })
        .await
        .unwrap();
    assert_eq!(next(&mut carol.leaves).await, left("lobby", "robert"));

    // No push went unhandled or undecoded on the way.
    for client in [&ann.client, &bob.client, &carol.client] {
        assert_eq!(client.unhandled_pushes(), 0);
        assert_eq!(client.undecodable_pushes(), 0);
    }
}

#[tokio::test]
async fn a_secure_user_and_a_plain_user_share_a_room() {
    let (tcp, ws, _server) = start_chat();
    let mut secure = ClientConfig::default();
    secure.secure = Some(SecureConfig::anonymous());
    let mut dana = User::new(
        Client::connect_ws_with(&format!("ws://{ws}/ws"), secure)
            .await
            .unwrap(),
    );
    assert!(dana.client.is_secure());
    let mut eve = User::new(Client::connect_tcp(tcp).await.unwrap());
    dana.nick("dana").await.unwrap();
    eve.nick("eve").await.unwrap();
    dana.join("den").await;
    eve.join("den").await;
    assert_eq!(next(&mut dana.joins).await, joined("den", "dana"));
    assert_eq!(next(&mut dana.joins).await, joined("den", "eve"));
    assert_eq!(next(&mut eve.joins).await, joined("den", "eve"));
    // The broadcast reaches the secure connection sealed and the plain one plain.
    eve.say("den", "plain words").await.unwrap();
    dana.say("den", "sealed words").await.unwrap();
    for user in [&mut dana, &mut eve] {
        assert_eq!(
            next(&mut user.messages).await,
            message("den", "eve", "plain words")
        );
        assert_eq!(
            next(&mut user.messages).await,
            message("den", "dana", "sealed words")
        );
    }
    assert!(dana.client.state().is_connected());
    eve.client.close().await;
    assert_eq!(next(&mut dana.leaves).await, left("den", "eve"));
}
