//! Users, names and presence on one node, over real sockets: signing in
//! and out, `#[handler(signed_in)]` and the `SignedIn` extractor, what
//! middleware sees, `send_user` and `kick_user`, the name registry, the
//! presence hook; the ticket login of `ternio_examples::tickets`; and the
//! same through `ternio::testing`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use ternio::extract::SignedIn;
use ternio::middleware::{Middleware, Rejection, RequestInfo};
use ternio::protocol::ErrorCode;
use ternio::testing::TestServer;
use ternio::users::MAX_NAME_LEN;
use ternio::{
    AppCode, ClaimError, ConnectionId, Context, Delivery, HandlerError, InvalidName, Member,
    Packet, PresenceChange, PresenceEvent, Server, ServerBuilder, ServerHandle, UserId,
    packet_controller,
};
use ternio_client::{Client, ClientError, CloseReason, DisconnectReason};
use ternio_examples::tickets::{LoggedIn, Login, TicketController, TicketKey};
use ternio_tests::eventually;

/// 0x0600: signs the connection in; answered with the user it was before.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0600, response = Previous)]
struct SignIn {
    user: String,
}

/// 0x0601: signs the connection out; answered with the user it was.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0601, response = Previous)]
struct SignOut;

/// 0x0602: the user a connection was signed in as before.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0602)]
struct Previous(Option<String>);

/// 0x0603: served to signed-in connections only (`#[handler(signed_in)]`).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0603, response = Name)]
struct Secret;

/// 0x0604: its handler takes `SignedIn`.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0604, response = Name)]
struct Profile;

/// 0x0605: a user id.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0605)]
struct Name(String);

/// 0x0606: its handler takes `Option<SignedIn>`.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0606, response = Previous)]
struct MaybeProfile;

/// 0x0607: the connection's id.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0607, response = Id)]
struct MyId;

/// 0x0608: a connection id.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0608)]
struct Id(u64);

/// 0x0609: joins a group.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0609, response = ())]
struct Join {
    room: String,
}

/// 0x060A: leaves a group.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x060A, response = ())]
struct Leave {
    room: String,
}

/// 0x060B: claims a name; answered with whether the connection holds it,
/// or error 101 with the claim's error.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x060B, response = Held)]
struct Claim {
    name: String,
}

/// 0x060C: releases a name; answered with whether it was held.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x060C, response = Held)]
struct Release {
    name: String,
}

/// 0x060D: whether a name is held.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x060D)]
struct Held(bool);

/// 0x060E: a push: a text.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x060E)]
struct Notice(String);

/// 0x060F: a push of the presence hook: what changed in a group.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x060F)]
struct Presence {
    room: String,
    id: u64,
    user: Option<String>,
    change: String,
}

/// A user id refused by `UserId::new`.
const BAD_USER: AppCode = AppCode::new(100);
/// A name refused by `claim_name`.
const BAD_CLAIM: AppCode = AppCode::new(101);

#[derive(Default)]
struct UsersController;

#[packet_controller(explicit)]
impl UsersController {
    fn sign_in(request: SignIn, ctx: &Context) -> Result<Previous, HandlerError> {
        let user = UserId::new(&request.user)
            .map_err(|error| HandlerError::new(BAD_USER, error.to_string()))?;
        Ok(Previous(ctx.sign_in(user).map(|user| user.to_string())))
    }

    fn sign_out(_request: SignOut, ctx: &Context) -> Previous {
        Previous(ctx.sign_out().map(|user| user.to_string()))
    }

    #[handler(signed_in)]
    fn secret(_request: Secret, ctx: &Context) -> Name {
        Name(ctx.user().expect("signed in").to_string())
    }

    fn profile(_request: Profile, user: SignedIn) -> Name {
        Name(user.to_string())
    }

    fn maybe_profile(_request: MaybeProfile, user: Option<SignedIn>) -> Previous {
        Previous(user.map(|SignedIn(user)| user.to_string()))
    }

    fn my_id(_request: MyId, ctx: &Context) -> Id {
        Id(ctx.connection_id().0)
    }

    fn join(request: Join, ctx: &Context) {
        ctx.hub().join(&request.room, ctx.connection_id());
    }

    fn leave(request: Leave, ctx: &Context) {
        ctx.hub().leave(&request.room, ctx.connection_id());
    }

    async fn claim(request: Claim, ctx: Context) -> Result<Held, HandlerError> {
        ctx.hub()
            .claim_name(&request.name, ctx.connection_id())
            .await
            .map(Held)
            .map_err(|error| HandlerError::new(BAD_CLAIM, error.to_string()))
    }

    fn release(request: Release, ctx: &Context) -> Held {
        Held(ctx.hub().release_name(&request.name, ctx.connection_id()))
    }
}

fn start(configure: impl FnOnce(ServerBuilder) -> ServerBuilder) -> (SocketAddr, ServerHandle) {
    let builder = Server::builder()
        .discover_controllers(false)
        .controller(UsersController)
        .map_tcp("127.0.0.1:0");
    let server = configure(builder).build().expect("builds");
    let address = server.tcp_addrs()[0];
    let handle = server.handle();
    tokio::spawn(server.run());
    (address, handle)
}

/// A client and its connection's id.
async fn connect(address: SocketAddr) -> (Client, ConnectionId) {
    let client = Client::connect_tcp(address).await.unwrap();
    let Id(id) = client.request_async(&MyId).await.unwrap();
    (client, ConnectionId(id))
}

async fn sign_in(client: &Client, user: &str) -> Option<String> {
    let Previous(previous) = client
        .request_async(&SignIn { user: user.into() })
        .await
        .unwrap();
    previous
}

fn user(id: &str) -> UserId {
    UserId::new(id).unwrap()
}

fn code<T: std::fmt::Debug>(result: Result<T, ClientError>) -> ErrorCode {
    result
        .expect_err("an error")
        .code()
        .expect("a remote error code")
}

/// The next push, within a few seconds.
async fn next<P: Packet + std::fmt::Debug>(subscription: &mut ternio_client::Subscription<P>) -> P {
    tokio::time::timeout(Duration::from_secs(10), subscription.next())
        .await
        .expect("a push in time")
        .expect("the client is open")
}

/// Whether `client` was closed with `DISCONNECT KICKED` and `reason`.
fn kicked(client: &Client, reason: &str) -> bool {
    matches!(
        client.close_reason(),
        Some(CloseReason::Disconnected(disconnect))
            if disconnect.reason == DisconnectReason::Kicked && disconnect.message == reason
    )
}

#[tokio::test]
async fn a_signed_in_handler_is_served_only_between_sign_in_and_sign_out() {
    let (address, _server) = start(|b| b);
    let (client, _) = connect(address).await;
    // What an attacker's client tries first: the handler, without signing in.
    assert_eq!(
        code(client.request_async(&Secret).await),
        ErrorCode::Unauthorized
    );
    assert_eq!(
        code(client.request_async(&Profile).await),
        ErrorCode::Unauthorized
    );
    assert_eq!(
        client.request_async(&MaybeProfile).await.unwrap(),
        Previous(None)
    );

    assert_eq!(sign_in(&client, "ann").await, None);
    assert_eq!(
        client.request_async(&Secret).await.unwrap(),
        Name("ann".into())
    );
    assert_eq!(
        client.request_async(&Profile).await.unwrap(),
        Name("ann".into())
    );
    assert_eq!(
        client.request_async(&MaybeProfile).await.unwrap(),
        Previous(Some("ann".into()))
    );
    // Another connection is not signed in by it.
    let (other, _) = connect(address).await;
    assert_eq!(
        code(other.request_async(&Secret).await),
        ErrorCode::Unauthorized
    );

    let Previous(was) = client.request_async(&SignOut).await.unwrap();
    assert_eq!(was.as_deref(), Some("ann"));
    assert_eq!(
        code(client.request_async(&Secret).await),
        ErrorCode::Unauthorized
    );
    assert_eq!(
        code(client.request_async(&Profile).await),
        ErrorCode::Unauthorized
    );
    assert_eq!(
        client.request_async(&MaybeProfile).await.unwrap(),
        Previous(None)
    );
    // Signing out twice is harmless.
    assert_eq!(
        client.request_async(&SignOut).await.unwrap(),
        Previous(None)
    );
}

#[tokio::test]
async fn a_user_id_with_a_control_character_or_out_of_bounds_signs_nobody_in() {
    let (address, server) = start(|b| b);
    let (client, id) = connect(address).await;
    for bad in [
        "ann\nadmin".to_owned(),
        "ann\0".to_owned(),
        "\u{1b}[31mred".to_owned(),
        String::new(),
        "a".repeat(MAX_NAME_LEN + 1),
    ] {
        let error = client
            .request_async(&SignIn { user: bad.clone() })
            .await
            .expect_err("refused");
        assert_eq!(error.code(), Some(BAD_USER.into()), "{bad:?}");
        assert_eq!(
            code(client.request_async(&Secret).await),
            ErrorCode::Unauthorized,
            "{bad:?}"
        );
    }
    // The longest id is fine.
    let longest = "a".repeat(MAX_NAME_LEN);
    assert_eq!(sign_in(&client, &longest).await, None);
    assert_eq!(server.hub().user_connections(&user(&longest)), [id]);
}

/// Each request's handler and the user middleware saw for it.
type SeenLog = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// Records the user each request's middleware saw, by handler.
#[derive(Default)]
struct SeenUsers(SeenLog);

impl Middleware for SeenUsers {
    fn before(&self, request: &RequestInfo<'_>) -> Result<(), Rejection> {
        let user = request.user().map(|user| user.to_string());
        // Middleware of the application's own: no guests for `Profile`.
        let refused = request.header().opcode == Profile::OPCODE && user.is_none();
        self.0
            .lock()
            .unwrap()
            .push((request.handler().to_owned(), user));
        if refused {
            return Err(Rejection::new(ErrorCode::from_u16(120), "guests may not"));
        }
        Ok(())
    }
}

#[tokio::test]
async fn middleware_sees_the_user_of_each_request() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorder = SeenUsers(Arc::clone(&seen));
    let (address, _server) = start(move |b| b.middleware(recorder));
    let (client, _) = connect(address).await;
    assert_eq!(
        code(client.request_async(&Profile).await),
        ErrorCode::from_u16(120)
    );
    sign_in(&client, "ann").await;
    client.request_async(&Profile).await.unwrap();
    client.request_async(&SignOut).await.unwrap();
    client.request_async(&MaybeProfile).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    let guest = |handler: &str| (format!("UsersController::{handler}"), None);
    let ann = |handler: &str| {
        (
            format!("UsersController::{handler}"),
            Some("ann".to_owned()),
        )
    };
    assert_eq!(
        seen,
        [
            guest("my_id"),
            guest("profile"),
            guest("sign_in"),
            ann("profile"),
            ann("sign_out"),
            guest("maybe_profile"),
        ]
    );
}

#[tokio::test]
async fn send_user_reaches_every_connection_of_the_user_and_no_other() {
    let (address, server) = start(|b| b);
    let hub = server.hub();
    let (phone, phone_id) = connect(address).await;
    let (laptop, laptop_id) = connect(address).await;
    let (bob, _) = connect(address).await;
    let (guest, _) = connect(address).await;
    let mut heard: Vec<_> = [&phone, &laptop, &bob, &guest]
        .iter()
        .map(|client| client.subscribe::<Notice>())
        .collect();
    sign_in(&phone, "ann").await;
    sign_in(&laptop, "ann").await;
    sign_in(&bob, "bob").await;
    // A user id is compared byte for byte: "Ann" is someone else.
    sign_in(&guest, "Ann").await;

    let mut ids = hub.user_connections(&user("ann"));
    ids.sort();
    assert_eq!(ids, [phone_id, laptop_id]);
    assert_eq!(hub.cluster_user_connections(&user("ann")).await.unwrap(), 2);
    let delivery = hub
        .send_user(&user("ann"), &Notice("for ann".into()))
        .unwrap();
    assert_eq!(
        delivery,
        Delivery {
            queued: 2,
            dropped: 0,
            failed: 0,
            datagrams: 0
        }
    );
    // Then one push each to the others: the first they hear is their own.
    hub.send_user(&user("bob"), &Notice("for bob".into()))
        .unwrap();
    hub.send_user(&user("Ann"), &Notice("for Ann".into()))
        .unwrap();
    assert_eq!(next(&mut heard[0]).await, Notice("for ann".into()));
    assert_eq!(next(&mut heard[1]).await, Notice("for ann".into()));
    assert_eq!(next(&mut heard[2]).await, Notice("for bob".into()));
    assert_eq!(next(&mut heard[3]).await, Notice("for Ann".into()));
    // A user with no connection: nothing queued, no error.
    let nobody = hub
        .send_user(&user("nobody"), &Notice("lost".into()))
        .unwrap();
    assert_eq!(nobody.queued, 0);

    // A connection that closes is no longer the user's.
    phone.close().await;
    eventually("the closed phone leaves ann's connections", || {
        hub.user_connections(&user("ann")) == [laptop_id]
    })
    .await;
    let delivery = hub
        .send_user(&user("ann"), &Notice("again".into()))
        .unwrap();
    assert_eq!(delivery.queued, 1);
    assert_eq!(next(&mut heard[1]).await, Notice("again".into()));
}

#[tokio::test]
async fn kick_user_closes_every_connection_of_the_user() {
    let (address, server) = start(|b| b);
    let hub = server.hub();
    let (phone, _) = connect(address).await;
    let (laptop, _) = connect(address).await;
    let (bob, _) = connect(address).await;
    sign_in(&phone, "ann").await;
    sign_in(&laptop, "ann").await;
    sign_in(&bob, "bob").await;

    assert_eq!(hub.kick_user(&user("ann"), "banned"), 2);
    eventually("both of ann's connections are kicked", || {
        kicked(&phone, "banned") && kicked(&laptop, "banned")
    })
    .await;
    eventually("ann has no connection left", || {
        hub.user_connections(&user("ann")).is_empty()
    })
    .await;
    // Bob is untouched.
    assert_eq!(
        bob.request_async(&Secret).await.unwrap(),
        Name("bob".into())
    );
    assert!(bob.close_reason().is_none());
    assert_eq!(hub.kick_user(&user("ann"), "again"), 0);
    assert_eq!(hub.len(), 1);
}

#[tokio::test]
async fn signing_in_as_another_user_moves_the_connection() {
    let (address, server) = start(|b| b);
    let hub = server.hub();
    let (client, id) = connect(address).await;
    let mut heard = client.subscribe::<Notice>();
    assert_eq!(sign_in(&client, "ann").await, None);
    assert_eq!(sign_in(&client, "bob").await.as_deref(), Some("ann"));
    // Signing in as the same user again changes nothing.
    assert_eq!(sign_in(&client, "bob").await.as_deref(), Some("bob"));
    assert_eq!(
        client.request_async(&Secret).await.unwrap(),
        Name("bob".into())
    );
    assert!(hub.user_connections(&user("ann")).is_empty());
    assert_eq!(hub.user_connections(&user("bob")), [id]);

    // Ann no longer reaches it, nor kicks it.
    let delivery = hub.send_user(&user("ann"), &Notice("old".into())).unwrap();
    assert_eq!(delivery.queued, 0);
    assert_eq!(hub.kick_user(&user("ann"), "not you"), 0);
    hub.send_user(&user("bob"), &Notice("new".into())).unwrap();
    assert_eq!(next(&mut heard).await, Notice("new".into()));
    assert_eq!(
        client.request_async(&Secret).await.unwrap(),
        Name("bob".into())
    );
    assert!(client.close_reason().is_none());
}

async fn claim(client: &Client, name: &str) -> Result<bool, ClientError> {
    client
        .request_async(&Claim { name: name.into() })
        .await
        .map(|Held(held)| held)
}

async fn release(client: &Client, name: &str) -> bool {
    let Held(held) = client
        .request_async(&Release { name: name.into() })
        .await
        .unwrap();
    held
}

#[tokio::test]
async fn a_name_has_one_holder_and_is_freed_when_it_closes() {
    let (address, server) = start(|b| b);
    let hub = server.hub();
    let (ann, ann_id) = connect(address).await;
    let (bob, bob_id) = connect(address).await;
    assert!(claim(&ann, "zed").await.unwrap());
    // Claimed again by its holder: still held.
    assert!(claim(&ann, "zed").await.unwrap());
    assert!(!claim(&bob, "zed").await.unwrap());
    assert_eq!(hub.name_holder("zed"), Some(ann_id));
    // Byte for byte: "Zed" is another name.
    assert!(claim(&bob, "Zed").await.unwrap());
    // Only the holder releases it.
    assert!(!release(&bob, "zed").await);
    assert_eq!(hub.name_holder("zed"), Some(ann_id));

    ann.close().await;
    eventually("ann's name is freed when she closes", || {
        hub.name_holder("zed").is_none()
    })
    .await;
    assert!(claim(&bob, "zed").await.unwrap());
    assert_eq!(hub.name_holder("zed"), Some(bob_id));

    // Released, then free for another.
    assert!(release(&bob, "zed").await);
    assert!(!release(&bob, "zed").await);
    assert_eq!(hub.name_holder("zed"), None);
    let (carol, carol_id) = connect(address).await;
    assert!(claim(&carol, "zed").await.unwrap());
    assert_eq!(hub.name_holder("zed"), Some(carol_id));
    assert_eq!(hub.name_holder("Zed"), Some(bob_id));
}

#[tokio::test]
async fn an_invalid_name_or_a_closed_connection_claims_nothing() {
    let (address, server) = start(|b| b);
    let hub = server.hub();
    let (client, id) = connect(address).await;
    for bad in ["zed\n", "\0", "\u{7f}", ""] {
        assert_eq!(code(claim(&client, bad).await), BAD_CLAIM, "{bad:?}");
        assert_eq!(hub.name_holder(bad), None);
    }
    let long = "n".repeat(MAX_NAME_LEN + 1);
    assert_eq!(code(claim(&client, &long).await), BAD_CLAIM);
    assert_eq!(
        hub.claim_name("zed\r\n", id).await,
        Err(ClaimError::Invalid(InvalidName::ControlCharacter))
    );
    assert_eq!(
        hub.claim_name("", id).await,
        Err(ClaimError::Invalid(InvalidName::Empty))
    );
    assert_eq!(
        hub.claim_name(&long, id).await,
        Err(ClaimError::Invalid(InvalidName::TooLong(MAX_NAME_LEN + 1)))
    );
    // A connection that is not open holds nothing.
    assert_eq!(
        hub.claim_name("zed", ConnectionId(999_999)).await,
        Err(ClaimError::Closed)
    );
    assert_eq!(hub.name_holder("zed"), None);
    // From outside a handler, for an open connection.
    assert_eq!(hub.claim_name("zed", id).await, Ok(true));
    assert_eq!(hub.name_holder("zed"), Some(id));
    assert!(!hub.release_name("zed", ConnectionId(999_999)));
    assert!(hub.release_name("zed", id));
}

/// One event of the presence hook, as the test compares it.
type Seen = (String, ConnectionId, Option<String>, PresenceChange);

fn seen(event: &PresenceEvent) -> Seen {
    (
        event.group.to_string(),
        event.member.id,
        event.member.user.as_ref().map(|user| user.to_string()),
        event.change,
    )
}

#[tokio::test]
async fn the_presence_hook_hears_joins_sign_ins_leaves_and_closes() {
    let events = Arc::new(Mutex::new(Vec::<Seen>::new()));
    let recorded = Arc::clone(&events);
    let (address, server) = start(move |b| {
        b.on_presence(move |event, hub| {
            recorded.lock().unwrap().push(seen(event));
            let _ = hub.broadcast_group_local(
                &event.group,
                &Presence {
                    room: event.group.to_string(),
                    id: event.member.id.0,
                    user: event.member.user.as_ref().map(|user| user.to_string()),
                    change: format!("{:?}", event.change),
                },
            );
        })
    });
    let (ann, a) = connect(address).await;
    let (bob, b) = connect(address).await;
    let (outsider, _) = connect(address).await;
    let mut ann_heard = ann.subscribe::<Presence>();
    let mut bob_heard = bob.subscribe::<Presence>();
    let mut outsider_heard = outsider.subscribe::<Presence>();
    let room = |id: ConnectionId, user: Option<&str>, change: &str| Presence {
        room: "lobby".into(),
        id: id.0,
        user: user.map(str::to_owned),
        change: change.into(),
    };

    // Signed in while in no group: no event.
    sign_in(&outsider, "olga").await;
    ann.request_async(&Join {
        room: "lobby".into(),
    })
    .await
    .unwrap();
    bob.request_async(&Join {
        room: "lobby".into(),
    })
    .await
    .unwrap();
    // Joining again changes nothing.
    bob.request_async(&Join {
        room: "lobby".into(),
    })
    .await
    .unwrap();
    sign_in(&ann, "ann").await;
    bob.request_async(&Leave {
        room: "lobby".into(),
    })
    .await
    .unwrap();
    // Leaving a group one is not in changes nothing.
    bob.request_async(&Leave {
        room: "lobby".into(),
    })
    .await
    .unwrap();
    let lobby =
        |id, user: Option<&str>, change| ("lobby".to_owned(), id, user.map(str::to_owned), change);
    assert_eq!(
        *events.lock().unwrap(),
        [
            lobby(a, None, PresenceChange::Joined),
            lobby(b, None, PresenceChange::Joined),
            lobby(a, Some("ann"), PresenceChange::Updated),
            lobby(b, None, PresenceChange::Left),
        ]
    );
    // Without a backplane, the cluster's presence is this node's.
    assert_eq!(
        server.hub().cluster_presence("lobby").await.unwrap(),
        [Member {
            id: a,
            user: Some(user("ann"))
        }]
    );

    // The hook's local broadcasts reached the members of the moment.
    assert_eq!(next(&mut ann_heard).await, room(a, None, "Joined"));
    assert_eq!(next(&mut ann_heard).await, room(b, None, "Joined"));
    assert_eq!(next(&mut ann_heard).await, room(a, Some("ann"), "Updated"));
    assert_eq!(next(&mut ann_heard).await, room(b, None, "Left"));
    assert_eq!(next(&mut bob_heard).await, room(b, None, "Joined"));
    assert_eq!(next(&mut bob_heard).await, room(a, Some("ann"), "Updated"));

    // Bob comes back; ann closes: she leaves the group, as the user she was.
    bob.request_async(&Join {
        room: "lobby".into(),
    })
    .await
    .unwrap();
    assert_eq!(next(&mut bob_heard).await, room(b, None, "Joined"));
    ann.close().await;
    assert_eq!(next(&mut bob_heard).await, room(a, Some("ann"), "Left"));
    assert_eq!(
        events.lock().unwrap()[4..],
        [
            lobby(b, None, PresenceChange::Joined),
            lobby(a, Some("ann"), PresenceChange::Left),
        ]
    );
    // Nothing was pushed to the connection outside the group, nor is
    // anything pending for bob.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(outsider_heard.try_next(), None);
    assert_eq!(bob_heard.try_next(), None);
}

/// The key of the ticket tests.
fn ticket_key() -> TicketKey {
    TicketKey::new(b"the ticket secret of the users test").unwrap()
}

#[tokio::test]
async fn a_valid_ticket_signs_in_and_a_bad_one_never_does() {
    let (address, server) = start(|b| b.state(ticket_key()).controller(TicketController));
    let hub = server.hub();
    let key = ticket_key();
    let now = SystemTime::now();
    let soon = now + Duration::from_secs(60);
    let ann = key.issue(&user("ann"), soon);
    let bob = key.issue(&user("bob"), soon);
    let (ann_mac, bob_mac) = (
        ann.rsplit_once('.').unwrap().1,
        bob.rsplit_once('.').unwrap().1,
    );
    let other_key = TicketKey::new(b"another secret, that nobody shared").unwrap();
    let refused = [
        // Expired a minute ago.
        key.issue(&user("ann"), now - Duration::from_secs(60)),
        // A MAC made up.
        format!("{}.{}", ann.rsplit_once('.').unwrap().0, "0".repeat(64)),
        // Ann's ticket with bob's id ("626f62"), and with bob's MAC.
        ann.replace("616e6e", "626f62"),
        ann.replace(ann_mac, bob_mac),
        // Ann's ticket with a later expiry.
        key.issue(&user("ann"), soon).replacen(
            &format!(
                ".{}.",
                soon.duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap()
                    .as_secs()
            ),
            ".99999999999.",
            1,
        ),
        // Signed with another key.
        other_key.issue(&user("ann"), soon),
        // Not a ticket; an oversized one.
        "ann".to_owned(),
        "v1.".repeat(10_000),
    ];
    let (client, _) = connect(address).await;
    for ticket in &refused {
        let error = client
            .request_async(&Login {
                ticket: ticket.clone(),
            })
            .await
            .expect_err("refused");
        assert_eq!(error.code(), Some(ErrorCode::Unauthorized), "{ticket}");
        assert_eq!(
            code(client.request_async(&Secret).await),
            ErrorCode::Unauthorized,
            "{ticket}"
        );
    }
    assert!(hub.user_connections(&user("ann")).is_empty());
    assert!(hub.user_connections(&user("bob")).is_empty());

    let LoggedIn { user: signed } = client.request_async(&Login { ticket: ann }).await.unwrap();
    assert_eq!(signed, "ann");
    assert_eq!(
        client.request_async(&Secret).await.unwrap(),
        Name("ann".into())
    );
    // A bad ticket later leaves the connection as it was.
    let error = client
        .request_async(&Login {
            ticket: refused[2].clone(),
        })
        .await
        .expect_err("refused");
    assert_eq!(error.code(), Some(ErrorCode::Unauthorized));
    assert_eq!(
        client.request_async(&Secret).await.unwrap(),
        Name("ann".into())
    );
    // Bob's own ticket moves it to bob.
    let LoggedIn { user: signed } = client.request_async(&Login { ticket: bob }).await.unwrap();
    assert_eq!(signed, "bob");
    assert_eq!(
        client.request_async(&Secret).await.unwrap(),
        Name("bob".into())
    );
}

#[test]
fn handlers_under_test_sign_in_through_the_connection_handle() {
    let server = TestServer::new();
    let (ann, guest) = (server.connect(), server.connect());
    let refused = ann.extract::<Result<SignedIn, Rejection>>().unwrap_err();
    assert_eq!(refused.code, ErrorCode::Unauthorized);
    assert_eq!(ann.extract::<Option<SignedIn>>(), None);
    assert_eq!(
        UsersController::maybe_profile(MaybeProfile, ann.extract()),
        Previous(None)
    );

    assert_eq!(ann.handle().sign_in(user("ann")), None);
    assert_eq!(
        UsersController::profile(Profile, ann.extract()),
        Name("ann".into())
    );
    assert_eq!(
        UsersController::secret(Secret, &ann.context()),
        Name("ann".into())
    );
    assert_eq!(guest.extract::<Option<SignedIn>>(), None);

    let hub = server.hub();
    assert_eq!(hub.user_connections(&user("ann")), [ann.handle().id()]);
    hub.send_user(&user("ann"), &Notice("hi".into())).unwrap();
    assert_eq!(ann.pushes::<Notice>(), [Notice("hi".into())]);
    assert!(guest.pushes::<Notice>().is_empty());
    assert_eq!(hub.kick_user(&user("ann"), "bye"), 1);
    assert_eq!(
        ann.closed(),
        Some((DisconnectReason::Kicked, "bye".to_owned()))
    );
    assert_eq!(guest.closed(), None);

    assert_eq!(ann.handle().sign_out(), Some(user("ann")));
    assert!(hub.user_connections(&user("ann")).is_empty());
}

#[test]
fn concurrent_sign_ins_leave_the_connection_under_one_user_only() {
    // Two requests of one connection sign it in at once (async handlers
    // run side by side), as two different users: afterwards the user index
    // must agree with the connection, or `send_user` to the user it is no
    // longer signed in as still reaches it (and, once it closes, the index
    // keeps its id under that user for good). On a 2-core machine, one run in
    // two or three fails.
    let server = TestServer::new();
    let connection = server.connect();
    let hub = server.hub();
    let (ann, bob) = (user("ann"), user("bob"));
    // As many rounds as fit in a few seconds (a hundred thousand or so).
    let budget = std::time::Instant::now() + Duration::from_secs(5);
    // Each round the test signs the connection out and opens the round
    // (`go`); the two signers sign in at once and count themselves done.
    // `go` at `usize::MAX` stops them.
    let (go, done) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let wait_until = |condition: &dyn Fn() -> bool| {
        let mut spins = 0u32;
        while !condition() {
            spins += 1;
            if spins < 100 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    };
    std::thread::scope(|scope| {
        for who in [&ann, &bob] {
            let (handle, go, done) = (connection.handle(), &go, &done);
            scope.spawn(move || {
                for round in 1.. {
                    wait_until(&|| go.load(Ordering::Acquire) >= round);
                    if go.load(Ordering::Acquire) == usize::MAX {
                        return;
                    }
                    handle.sign_in(who.clone());
                    done.fetch_add(1, Ordering::AcqRel);
                }
            });
        }
        for round in 1.. {
            if std::time::Instant::now() > budget {
                go.store(usize::MAX, Ordering::Release);
                break;
            }
            connection.handle().sign_out();
            go.store(round, Ordering::Release);
            wait_until(&|| done.load(Ordering::Acquire) >= 2 * round);
            let now = connection.handle().user().expect("signed in");
            let other = if now == ann { &bob } else { &ann };
            let misdelivered = hub.send_user(other, &Notice("not yours".into())).unwrap();
            if misdelivered.queued > 0 || hub.user_connections(&now).len() != 1 {
                go.store(usize::MAX, Ordering::Release);
                panic!(
                    "round {round}: signed in as {now}, yet indexed under {other} \
                     ({misdelivered:?} of its push)"
                );
            }
            connection.pushes::<Notice>();
        }
    });
}

#[tokio::test]
async fn a_presence_hook_may_use_the_hub_itself() {
    // A hook that moves a member on: whoever joins "door" is put in
    // "hall" and taken out of "door", and a signed-in member of "hall" is
    // told so with send_user; all from inside the hook, which must not
    // deadlock on the registry it was called from.
    let events = Arc::new(Mutex::new(Vec::<Seen>::new()));
    let recorded = Arc::clone(&events);
    let (address, server) = start(move |b| {
        b.on_presence(move |event, hub| {
            recorded.lock().unwrap().push(seen(event));
            let id = event.member.id;
            match (&*event.group, event.change) {
                ("door", PresenceChange::Joined) => {
                    hub.join("hall", id);
                    hub.leave("door", id);
                }
                ("hall", PresenceChange::Updated) => {
                    if let Some(user) = &event.member.user {
                        let _ = hub.send_user(user, &Notice("welcome to the hall".into()));
                    }
                }
                _ => {}
            }
        })
    });
    let (client, id) = connect(address).await;
    let mut heard = client.subscribe::<Notice>();
    tokio::time::timeout(
        Duration::from_secs(10),
        client.request_async(&Join {
            room: "door".into(),
        }),
    )
    .await
    .expect("no deadlock")
    .unwrap();
    assert_eq!(server.hub().members("hall"), [id]);
    assert!(server.hub().members("door").is_empty());
    tokio::time::timeout(Duration::from_secs(10), sign_in(&client, "ann"))
        .await
        .expect("no deadlock");
    assert_eq!(next(&mut heard).await, Notice("welcome to the hall".into()));
    let event = |group: &str, user: Option<&str>, change| {
        (group.to_owned(), id, user.map(str::to_owned), change)
    };
    assert_eq!(
        *events.lock().unwrap(),
        [
            event("door", None, PresenceChange::Joined),
            event("hall", None, PresenceChange::Joined),
            event("door", None, PresenceChange::Left),
            event("hall", Some("ann"), PresenceChange::Updated),
        ]
    );
}
