//! `ternio::testing`: handlers called as plain functions, with a context,
//! extractors and the pushes they sent, and no socket.

use ternio::testing::TestServer;
use ternio::{AppCode, Context, DisconnectReason, Hub, Packet, Stored, packet_controller};

#[derive(Debug, PartialEq, Packet)]
#[packet(opcode = 0x0810, response = ())]
struct Login {
    name: String,
}

#[derive(Debug, PartialEq, Packet)]
#[packet(opcode = 0x0811, response = ())]
struct Kick {
    name: String,
}

#[derive(Debug, PartialEq, Packet)]
#[packet(opcode = 0x0812)]
struct Hello {
    name: String,
}

#[derive(Clone, Debug, PartialEq)]
struct Name(String);

struct Lobby;

#[packet_controller(explicit)]
impl Lobby {
    fn login(request: Login, ctx: &Context) {
        ctx.store().insert(Name(request.name.clone()));
        ctx.hub().join("lobby", ctx.connection_id());
        let _ = ctx
            .hub()
            .broadcast_group("lobby", &Hello { name: request.name });
    }

    #[handler(permission = 2)]
    fn kick(request: Kick, hub: Hub, me: Stored<Name>) -> Result<(), ternio::HandlerError> {
        let me =
            me.0.ok_or_else(|| ternio::HandlerError::new(AppCode::new(100), "log in first"))?;
        for id in hub.members("lobby") {
            let handle = hub.connection(id).expect("a member is open");
            if handle.store().get::<Name>() == Some(Name(request.name.clone())) {
                handle.kick(&format!("kicked by {}", me.0));
            }
        }
        Ok(())
    }
}

#[test]
fn handlers_run_as_functions_with_the_context_the_store_and_the_hub() {
    let server = TestServer::new();
    let (ann, bob) = (server.connect(), server.connect());
    Lobby::login(Login { name: "ann".into() }, &ann.context());
    Lobby::login(Login { name: "bob".into() }, &bob.context());
    assert_eq!(
        ann.pushes::<Hello>(),
        [Hello { name: "ann".into() }, Hello { name: "bob".into() }]
    );
    assert_eq!(bob.pushes::<Hello>(), [Hello { name: "bob".into() }]);
    assert!(ann.pushes::<Hello>().is_empty(), "taken once");

    let stored: Stored<Name> = ann.extract();
    assert_eq!(stored.0, Some(Name("ann".into())));
    Lobby::kick(Kick { name: "bob".into() }, ann.extract(), ann.extract()).unwrap();
    assert_eq!(
        bob.closed(),
        Some((DisconnectReason::Kicked, "kicked by ann".to_owned()))
    );
    assert_eq!(ann.closed(), None);

    // A connection that has not logged in gets the handler's error.
    let carol = server.connect();
    let refused = Lobby::kick(
        Kick { name: "ann".into() },
        carol.extract(),
        carol.extract(),
    );
    assert_eq!(refused.unwrap_err().to_string(), "log in first");

    // A dropped connection leaves the hub and its groups.
    drop(bob);
    assert_eq!(server.hub().members("lobby").len(), 1);
}
