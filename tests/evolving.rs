//! Evolving packets (docs/PROTOCOL.md, section 3, "Evolving packets") over
//! real sockets: two versions of the same packets in one binary, version 1
//! without the field version 2 added at the end. An old client talks to a
//! new server and a new client to an old server, requests, answers and
//! pushes: the side that lacks a field reads its default, the side that
//! does not know a field ignores it.

use std::net::SocketAddr;
use std::time::Duration;

use ternio::{Context, Server, ServerHandle, packet_controller};
use ternio_client::Client;

/// Version 1, as an older client or server was built.
mod v1 {
    use ternio::Packet;

    /// 0x0B00: sets the player's profile.
    #[derive(Debug, Clone, PartialEq, Eq, Packet)]
    #[packet(opcode = 0x0B00, evolving, response = Seen)]
    pub struct SetProfile {
        pub name: String,
    }

    /// 0x0B01: the profile as the server saw it.
    #[derive(Debug, Clone, PartialEq, Eq, Packet)]
    #[packet(opcode = 0x0B01, evolving)]
    pub struct Seen {
        pub name: String,
    }

    /// 0x0B02: pushed after each `SetProfile`.
    #[derive(Debug, Clone, PartialEq, Eq, Packet)]
    #[packet(opcode = 0x0B02, evolving)]
    pub struct Changed {
        pub name: String,
    }
}

/// Version 2: each packet gained optional fields at its end.
mod v2 {
    use ternio::Packet;

    /// 0x0B00: sets the player's profile, now with an avatar.
    #[derive(Debug, Clone, PartialEq, Eq, Packet)]
    #[packet(opcode = 0x0B00, evolving, response = Seen)]
    pub struct SetProfile {
        pub name: String,
        #[packet(optional)]
        pub avatar: Option<String>,
    }

    /// 0x0B01: the profile as the server saw it, now saying whether it had
    /// an avatar and how many profiles were set.
    #[derive(Debug, Clone, PartialEq, Eq, Packet)]
    #[packet(opcode = 0x0B01, evolving)]
    pub struct Seen {
        pub name: String,
        #[packet(optional)]
        pub has_avatar: bool,
        #[packet(optional)]
        pub count: u32,
    }

    /// 0x0B02: pushed after each `SetProfile`, now with the avatar.
    #[derive(Debug, Clone, PartialEq, Eq, Packet)]
    #[packet(opcode = 0x0B02, evolving)]
    pub struct Changed {
        pub name: String,
        #[packet(optional)]
        pub avatar: Option<String>,
    }
}

/// The server as version 1 was built.
#[derive(Default)]
struct OldServer;

#[packet_controller(explicit)]
impl OldServer {
    fn set_profile(request: v1::SetProfile, ctx: &Context) -> v1::Seen {
        let _ = ctx.connection().push(&v1::Changed {
            name: request.name.clone(),
        });
        v1::Seen { name: request.name }
    }
}

/// The server as version 2 was built.
#[derive(Default)]
struct NewServer;

#[packet_controller(explicit)]
impl NewServer {
    fn set_profile(request: v2::SetProfile, ctx: &Context) -> v2::Seen {
        let _ = ctx.connection().push(&v2::Changed {
            name: request.name.clone(),
            avatar: request.avatar.clone(),
        });
        v2::Seen {
            name: request.name,
            has_avatar: request.avatar.is_some(),
            count: 7,
        }
    }
}

fn start(builder: ternio::ServerBuilder) -> (SocketAddr, ServerHandle) {
    let server = builder
        .discover_controllers(false)
        .map_tcp("127.0.0.1:0")
        .build()
        .expect("the server builds");
    let address = server.tcp_addrs()[0];
    let handle = server.handle();
    tokio::spawn(server.run());
    (address, handle)
}

const PATIENCE: Duration = Duration::from_secs(5);

#[tokio::test]
async fn an_old_client_talks_to_a_new_server() {
    let (address, _server) = start(Server::builder().controller(NewServer));
    let client = Client::connect_tcp(address).await.unwrap();
    let mut changes = client.subscribe::<v1::Changed>();
    // The request lacks `avatar`: the server reads None. The answer and the
    // push carry fields the old client does not know: ignored.
    let seen: v1::Seen = client
        .request_async(&v1::SetProfile { name: "ann".into() })
        .await
        .expect("the new server reads the old request, the old client its answer");
    assert_eq!(seen, v1::Seen { name: "ann".into() });
    let changed = tokio::time::timeout(PATIENCE, changes.next())
        .await
        .expect("the push arrives")
        .expect("the subscription is open");
    assert_eq!(changed, v1::Changed { name: "ann".into() });
    assert_eq!(changes.undecodable(), 0);

    // What the new server answered, read by a new client on the same
    // server: the server did see no avatar.
    let new_client = Client::connect_tcp(address).await.unwrap();
    let seen: v2::Seen = new_client
        .request_async(&v2::SetProfile {
            name: "bob".into(),
            avatar: Some("cat.png".into()),
        })
        .await
        .unwrap();
    assert_eq!(
        seen,
        v2::Seen {
            name: "bob".into(),
            has_avatar: true,
            count: 7
        }
    );
}

#[tokio::test]
async fn a_new_server_reads_the_old_request_with_defaults() {
    let (address, _server) = start(Server::builder().controller(NewServer));
    // A raw old request, read by a new client's types: the server saw no
    // avatar (has_avatar false), and says so in the field it added.
    let client = Client::connect_tcp(address).await.unwrap();
    let seen: v2::Seen = client
        .request_as(&v1::SetProfile { name: "cy".into() })
        .await
        .unwrap();
    assert_eq!(
        seen,
        v2::Seen {
            name: "cy".into(),
            has_avatar: false,
            count: 7
        }
    );
}

#[tokio::test]
async fn a_new_client_talks_to_an_old_server() {
    let (address, _server) = start(Server::builder().controller(OldServer));
    let client = Client::connect_tcp(address).await.unwrap();
    let mut changes = client.subscribe::<v2::Changed>();
    // The request carries `avatar`, which the old server ignores; its answer
    // and push lack the new fields: the new client reads their defaults.
    let seen: v2::Seen = client
        .request_async(&v2::SetProfile {
            name: "dee".into(),
            avatar: Some("dog.png".into()),
        })
        .await
        .expect("the old server ignores the new field, the new client fills in defaults");
    assert_eq!(
        seen,
        v2::Seen {
            name: "dee".into(),
            has_avatar: false,
            count: 0
        }
    );
    let changed = tokio::time::timeout(PATIENCE, changes.next())
        .await
        .expect("the push arrives")
        .expect("the subscription is open");
    assert_eq!(
        changed,
        v2::Changed {
            name: "dee".into(),
            avatar: None
        }
    );
    assert_eq!(changes.undecodable(), 0);
}

/// 0x0B10: every field optional.
#[derive(Debug, Clone, PartialEq, Eq, ternio::Packet)]
#[packet(opcode = 0x0B10, evolving)]
struct AllOptional {
    #[packet(optional)]
    score: u32,
}

/// 0x0B11: a list of [`AllOptional`] (not evolving itself).
#[derive(Debug, Clone, PartialEq, Eq, ternio::Packet)]
#[packet(opcode = 0x0B11)]
struct Many {
    items: Vec<AllOptional>,
}

/// An attacker's three bytes (a count of 65,536 and nothing else) do not
/// make 65,536 defaulted elements: an optional field still counts in the
/// least size of its type, which bounds what a count may claim.
#[test]
fn a_count_cannot_claim_elements_made_of_missing_optional_fields() {
    use ternio::Packet as _;
    let body = ternio::Bytes::from_static(&[0x80, 0x80, 0x04]);
    let decoded = Many::decode_packet(&body);
    assert!(
        decoded.is_err(),
        "decoded {} elements",
        decoded.unwrap().items.len()
    );
    // A whole element still decodes, and a top-level body may still end
    // before its optional field.
    let body = ternio::Bytes::from_static(&[0x01, 7, 0, 0, 0]);
    assert_eq!(
        Many::decode_packet(&body).unwrap(),
        Many {
            items: vec![AllOptional { score: 7 }]
        }
    );
    let empty = ternio::Bytes::new();
    assert_eq!(
        AllOptional::decode_packet(&empty).unwrap(),
        AllOptional { score: 0 }
    );
}
