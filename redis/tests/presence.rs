//! Users, presence and names across nodes joined by a real `redis-server`:
//! presence events reach every node's members once, `send_user` reaches
//! each connection of a user once on every node, names are unique in the
//! cluster; a node killed with SIGKILL loses its members (and frees its
//! names) after its heartbeat TTL; after Redis restarts, presence is
//! rebuilt and what changed during the outage is reported.
//!
//! Each test starts and owns its `redis-server` (see `redis/tests/cluster.rs`).

use std::collections::BTreeSet;

use std::net::SocketAddr;

use std::time::{Duration, Instant};

use ternio::{
    AppCode, ConnectionId, Context, HandlerError, Hub, Packet, PresenceChange, Server,
    ServerHandle, UserId, packet_controller,
};
use ternio_client::{Client, Subscription};
use ternio_redis::RedisBackplane;
use ternio_testkit::redis_server::RedisServer;

mod common;
use common::{ChildNode, config, next, nothing_more};

/// 0x0600: asks for the connection's id.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0600, response = Me)]
struct WhoAmI;

/// 0x0601: the answer to [`WhoAmI`].
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0601)]
struct Me(u64);

/// 0x0602: signs the connection in as `user` (empty: signs it out).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0602, response = ())]
struct SignIn {
    user: String,
}

/// 0x0603: joins a room.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0603, response = ())]
struct Enter {
    room: String,
}

/// 0x0604: leaves a room.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0604, response = ())]
struct Exit {
    room: String,
}

/// 0x0605: pushes [`Note`] to every connection of `user`, on every node.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0605, response = ())]
struct TellUser {
    user: String,
    text: String,
}

/// 0x0606: closes every connection of `user`, on every node.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0606, response = ())]
struct KickUser {
    user: String,
}

/// 0x0607: claims a name for the connection; answers whether it holds it.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0607, response = Claimed)]
struct ClaimName {
    name: String,
}

/// 0x0608: the answer to [`ClaimName`].
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0608)]
struct Claimed(bool);

/// 0x0609, pushed: a note to a user.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0609)]
struct Note {
    text: String,
}

/// 0x060A, pushed by the presence hook to a room's members on each node.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x060A)]
struct Presence {
    room: String,
    id: u64,
    user: String,
    /// 1 joined, 2 left, 3 lost, 4 updated.
    change: u8,
}

const JOINED: u8 = 1;
const LEFT: u8 = 2;
const LOST: u8 = 3;
const UPDATED: u8 = 4;

fn refused(message: impl Into<String>) -> HandlerError {
    HandlerError::new(AppCode::new(100), message)
}

#[derive(Default)]
struct PresenceController;

#[packet_controller(explicit)]
impl PresenceController {
    fn who_am_i(_request: WhoAmI, ctx: &Context) -> Me {
        Me(ctx.connection_id().0)
    }

    fn sign_in(request: SignIn, ctx: &Context) -> Result<(), HandlerError> {
        if request.user.is_empty() {
            ctx.sign_out();
        } else {
            let user = UserId::new(&request.user).map_err(|error| refused(error.to_string()))?;
            ctx.sign_in(user);
        }
        Ok(())
    }

    fn enter(request: Enter, ctx: &Context) {
        ctx.hub().join(&request.room, ctx.connection_id());
    }

    fn exit(request: Exit, ctx: &Context) {
        ctx.hub().leave(&request.room, ctx.connection_id());
    }

    fn tell_user(request: TellUser, hub: Hub) -> Result<(), HandlerError> {
        let user = UserId::new(&request.user).map_err(|error| refused(error.to_string()))?;
        hub.send_user(&user, &Note { text: request.text })
            .map(|_| ())
            .map_err(|error| refused(error.to_string()))
    }

    fn kick_user(request: KickUser, hub: Hub) -> Result<(), HandlerError> {
        let user = UserId::new(&request.user).map_err(|error| refused(error.to_string()))?;
        hub.kick_user(&user, "kicked everywhere");
        Ok(())
    }

    async fn claim_name(request: ClaimName, ctx: Context) -> Result<Claimed, HandlerError> {
        ctx.hub()
            .claim_name(&request.name, ctx.connection_id())
            .await
            .map(Claimed)
            .map_err(|error| refused(error.to_string()))
    }
}

/// One server node with its backplane; its presence hook pushes
/// [`Presence`] to the room's members on this node.
struct Node {
    address: SocketAddr,
    server: ServerHandle,
    backplane: RedisBackplane,
}

impl Node {
    async fn start(url: &str, prefix: &str) -> Self {
        let backplane = RedisBackplane::connect(config(url, prefix))
            .await
            .expect("the backplane connects");
        let server = Server::builder()
            .discover_controllers(false)
            .controller(PresenceController)
            .on_presence(|event, hub| {
                let change = match event.change {
                    PresenceChange::Joined => JOINED,
                    PresenceChange::Left => LEFT,
                    PresenceChange::Lost => LOST,
                    PresenceChange::Updated => UPDATED,
                    _ => 0,
                };
                let notice = Presence {
                    room: event.group.to_string(),
                    id: event.member.id.0,
                    user: event.member.user.as_deref().unwrap_or("").to_owned(),
                    change,
                };
                let _ = hub.broadcast_group_local(&event.group, &notice);
            })
            .backplane(backplane.clone())
            .map_tcp("127.0.0.1:0")
            .build()
            .expect("the node builds");
        let address = server.tcp_addrs()[0];
        let handle = server.handle();
        tokio::spawn(server.run());
        assert!(
            backplane.wait_connected(Duration::from_secs(5)).await,
            "the backplane is up"
        );
        Self {
            address,
            server: handle,
            backplane,
        }
    }

    fn hub(&self) -> Hub {
        self.server.hub()
    }

    /// The members of `room` on every node as this node sees them: (id, user).
    async fn presence(&self, room: &str) -> BTreeSet<(u64, String)> {
        self.hub()
            .cluster_presence(room)
            .await
            .expect("the presence query succeeds")
            .into_iter()
            .map(|member| {
                let user = member.user.map(|user| user.to_string()).unwrap_or_default();
                (member.id.0, user)
            })
            .collect()
    }

    /// Waits until this node sees exactly `expected` in `room`.
    async fn await_presence(&self, room: &str, expected: &[(u64, &str)]) {
        let expected: BTreeSet<(u64, String)> = expected
            .iter()
            .map(|(id, user)| (*id, (*user).to_owned()))
            .collect();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let presence = self.presence(room).await;
            if presence == expected {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{room} has {presence:?}, expected {expected:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until `user` has `expected` connections in the cluster, as
    /// this node counts them.
    async fn await_user_connections(&self, user: &str, expected: usize) {
        let user = UserId::new(user).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let count = self
                .hub()
                .cluster_user_connections(&user)
                .await
                .expect("the count query succeeds");
            if count == expected {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{user} has {count} connections, expected {expected}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A client of the presence service, with its id and its pushes.
struct Member {
    client: Client,
    id: u64,
    presence: Subscription<Presence>,
    notes: Subscription<Note>,
}

impl Member {
    async fn connect(node: &Node, user: &str) -> Self {
        let client = Client::connect_tcp(node.address).await.expect("connects");
        let presence = client.subscribe();
        let notes = client.subscribe();
        let Me(id) = client.request_async(&WhoAmI).await.expect("an id");
        let member = Self {
            client,
            id,
            presence,
            notes,
        };
        member.sign_in(user).await;
        member
    }

    async fn sign_in(&self, user: &str) {
        self.client
            .request_async(&SignIn { user: user.into() })
            .await
            .expect("signs in");
    }

    async fn enter(&self, room: &str) {
        self.client
            .request_async(&Enter { room: room.into() })
            .await
            .expect("enters");
    }

    async fn exit(&self, room: &str) {
        self.client
            .request_async(&Exit { room: room.into() })
            .await
            .expect("exits");
    }

    async fn claim(&self, name: &str) -> bool {
        let Claimed(claimed) = self
            .client
            .request_async(&ClaimName { name: name.into() })
            .await
            .expect("the claim is answered");
        claimed
    }

    /// The next presence push: (id, user, change).
    async fn next_presence(&mut self) -> (u64, String, u8) {
        let push = next(&mut self.presence).await;
        (push.id, push.user, push.change)
    }

    /// Takes presence pushes until `expected` comes; fails on any other
    /// about a member other than `ignore` (this member's own joins).
    async fn expect_presence(&mut self, expected: (u64, &str, u8)) {
        let expected = (expected.0, expected.1.to_owned(), expected.2);
        loop {
            let got = self.next_presence().await;
            if got == expected {
                return;
            }
            assert_eq!(got.0, self.id, "unexpected {got:?} before {expected:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presence_events_reach_the_members_of_every_node_once() {
    let redis = RedisServer::start();
    let prefix = common::prefix("events");
    let one = Node::start(&redis.url(), &prefix).await;
    let two = Node::start(&redis.url(), &prefix).await;
    let mut ann = Member::connect(&one, "ann").await;
    let mut cara = Member::connect(&one, "cara").await;
    ann.enter("lobby").await;
    cara.enter("lobby").await;
    // Ann hears of her own join, then of Cara's (same node).
    ann.expect_presence((ann.id, "ann", JOINED)).await;
    ann.expect_presence((cara.id, "cara", JOINED)).await;
    // What a joiner does: read the list (the events then tell the rest).
    one.await_presence("lobby", &[(ann.id, "ann"), (cara.id, "cara")])
        .await;

    let mut bob = Member::connect(&two, "bob").await;
    bob.enter("lobby").await;
    bob.expect_presence((bob.id, "bob", JOINED)).await;
    // From the other node, once each.
    ann.expect_presence((bob.id, "bob", JOINED)).await;
    cara.expect_presence((bob.id, "bob", JOINED)).await;
    nothing_more(&mut ann.presence).await;
    let everyone = [(ann.id, "ann"), (cara.id, "cara"), (bob.id, "bob")];
    one.await_presence("lobby", &everyone).await;
    two.await_presence("lobby", &everyone).await;

    // A sign-in under another name while in the room.
    bob.sign_in("robert").await;
    ann.expect_presence((bob.id, "robert", UPDATED)).await;
    bob.expect_presence((bob.id, "robert", UPDATED)).await;
    // Bob hears of what happens on node one.
    cara.exit("lobby").await;
    bob.expect_presence((cara.id, "cara", LEFT)).await;
    ann.expect_presence((cara.id, "cara", LEFT)).await;
    // A connection that closes leaves.
    bob.client.close().await;
    ann.expect_presence((bob.id, "robert", LEFT)).await;
    nothing_more(&mut ann.presence).await;
    one.await_presence("lobby", &[(ann.id, "ann")]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_user_reaches_each_connection_of_the_user_once_on_every_node() {
    let redis = RedisServer::start();
    let prefix = common::prefix("users");
    let one = Node::start(&redis.url(), &prefix).await;
    let two = Node::start(&redis.url(), &prefix).await;
    // A phone on node one, a browser on node two; someone else on each.
    let mut phone = Member::connect(&one, "player-42").await;
    let mut browser = Member::connect(&two, "player-42").await;
    let mut other = Member::connect(&two, "player-7").await;
    let sender = Member::connect(&one, "admin").await;
    one.await_user_connections("player-42", 2).await;
    two.await_user_connections("player-42", 2).await;
    two.await_user_connections("player-7", 1).await;

    sender
        .client
        .request_async(&TellUser {
            user: "player-42".into(),
            text: "your turn".into(),
        })
        .await
        .expect("sent");
    for member in [&mut phone, &mut browser] {
        assert_eq!(next(&mut member.notes).await.text, "your turn");
    }
    for member in [&mut phone, &mut browser, &mut other] {
        nothing_more(&mut member.notes).await;
    }

    // Signing in as someone else moves the connection to that user.
    browser.sign_in("player-7").await;
    one.await_user_connections("player-42", 1).await;
    one.await_user_connections("player-7", 2).await;

    // A kick from node two closes the user's connection on node one.
    browser
        .client
        .request_async(&KickUser {
            user: "player-42".into(),
        })
        .await
        .expect("kicked");
    let deadline = Instant::now() + Duration::from_secs(5);
    while phone.client.close_reason().is_none() {
        assert!(Instant::now() < deadline, "the phone is kicked");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(browser.client.close_reason().is_none() && other.client.close_reason().is_none());
    two.await_user_connections("player-42", 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_are_unique_across_the_cluster_and_free_when_their_holder_goes() {
    let redis = RedisServer::start();
    let prefix = common::prefix("names");
    let one = Node::start(&redis.url(), &prefix).await;
    let two = Node::start(&redis.url(), &prefix).await;
    let ann = Member::connect(&one, "ann").await;
    let bob = Member::connect(&two, "bob").await;
    let cara = Member::connect(&one, "cara").await;
    assert!(ann.claim("Ann").await);
    assert!(ann.claim("Ann").await, "claimed again by its holder");
    assert!(!bob.claim("Ann").await, "held on the other node");
    assert!(!cara.claim("Ann").await, "held on this node");
    assert!(bob.claim("Bob").await);
    assert_eq!(one.hub().name_holder("Ann"), Some(ConnectionId(ann.id)));

    ann.client.close().await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !bob.claim("Ann").await {
        assert!(Instant::now() < deadline, "the name is freed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!cara.claim("Ann").await);
}

/// A release that reaches Redis late (after the same connection claimed
/// the name again) frees nothing: it names the exact claim it undoes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_release_does_not_free_a_later_claim_of_the_same_name() {
    use ternio::backplane::Backplane;
    let redis = RedisServer::start();
    let prefix = common::prefix("late-release");
    let one = Node::start(&redis.url(), &prefix).await;
    let two = Node::start(&redis.url(), &prefix).await;
    let ann = Member::connect(&one, "ann").await;
    let bob = Member::connect(&two, "bob").await;
    let id = ConnectionId(ann.id);
    // Claim 1, released; claim 2 by the same connection; then the release
    // of claim 1 arrives.
    assert!(matches!(
        one.backplane.claim_name("Zed", id, 1).await,
        Ok(true)
    ));
    assert!(matches!(
        one.backplane.claim_name("Zed", id, 2).await,
        Ok(true)
    ));
    one.backplane.release_name("Zed", id, 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!bob.claim("Zed").await, "claim 2 still holds it");
    // A late claim 1 (its EVAL overtaken by claim 2's) does not replace
    // claim 2 either: a release of claim 1 still frees nothing.
    assert!(matches!(
        one.backplane.claim_name("Zed", id, 1).await,
        Ok(true)
    ));
    one.backplane.release_name("Zed", id, 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!bob.claim("Zed").await, "claim 2 holds it still");
    // Its own release frees it.
    one.backplane.release_name("Zed", id, 2);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !bob.claim("Zed").await {
        assert!(Instant::now() < deadline, "the name is freed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Through the hub: released and claimed again, many times over, each
    // release queued behind the claims; the name stays claimed.
    let cara = Member::connect(&one, "cara").await;
    let hub = one.hub();
    let cara_id = ConnectionId(cara.id);
    assert!(cara.claim("Cara").await);
    for _ in 0..50 {
        assert!(hub.release_name("Cara", cara_id));
        assert_eq!(hub.claim_name("Cara", cara_id).await, Ok(true));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!bob.claim("Cara").await, "still held by cara");
}

/// A claim dropped while the backplane was asked (its caller gave up)
/// leaves nothing claimed: not here, not in Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_dropped_half_way_leaves_nothing_claimed() {
    let redis = RedisServer::start();
    let prefix = common::prefix("dropped-claim");
    let one = Node::start(&redis.url(), &prefix).await;
    let two = Node::start(&redis.url(), &prefix).await;
    let ann = Member::connect(&one, "ann").await;
    let bob = Member::connect(&two, "bob").await;
    let hub = one.hub();
    // Polled once (the local reservation taken, Redis asked), then dropped.
    // (Ready at once only when the link to Redis is down for a moment, on
    // a loaded machine: then again.)
    let mut attempts = 0;
    loop {
        attempts += 1;
        let mut claim = Box::pin(hub.claim_name("Ann", ConnectionId(ann.id)));
        let polled =
            std::future::poll_fn(|cx| std::task::Poll::Ready(claim.as_mut().poll(cx))).await;
        if polled.is_pending() {
            assert_eq!(hub.name_holder("Ann"), Some(ConnectionId(ann.id)));
            break;
        }
        assert!(
            attempts < 20,
            "the claim never waited for redis: {polled:?}"
        );
        hub.release_name("Ann", ConnectionId(ann.id));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(hub.name_holder("Ann"), None, "undone here");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !bob.claim("Ann").await {
        assert!(Instant::now() < deadline, "undone in redis");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Set in the child process that [`a_killed_node_loses_its_members_and_frees_its_names`]
/// starts: the Redis URL and key prefix of the parent's cluster.
const CHILD_URL: &str = "TERNIO_PRESENCE_TEST_CHILD_URL";
const CHILD_PREFIX: &str = "TERNIO_PRESENCE_TEST_CHILD_PREFIX";

/// Not a test on its own: in the child process, a node with one member,
/// "dora", in "lobby", holding the name "Dora"; it prints
/// `READY <member id>` and waits to be killed.
#[test]
fn child_node() {
    let (Ok(url), Ok(prefix)) = (std::env::var(CHILD_URL), std::env::var(CHILD_PREFIX)) else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let node = Node::start(&url, &prefix).await;
        let dora = Member::connect(&node, "dora").await;
        assert!(dora.claim("Dora").await);
        dora.enter("lobby").await;
        println!("READY {}", dora.id);
        // Killed by the parent long before this.
        tokio::time::sleep(Duration::from_secs(60)).await;
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_loses_its_members_and_frees_its_names() {
    let redis = RedisServer::start();
    let url = redis.url();
    let prefix = common::prefix("kill");
    let one = Node::start(&url, &prefix).await;
    let mut ann = Member::connect(&one, "ann").await;
    ann.enter("lobby").await;
    ann.expect_presence((ann.id, "ann", JOINED)).await;
    one.await_presence("lobby", &[(ann.id, "ann")]).await;

    let env = [(CHILD_URL, url.clone()), (CHILD_PREFIX, prefix.clone())];
    let (mut child, ready) = ChildNode::start("child_node", &env).await;
    let dora: u64 = ready.trim().parse().expect("an id");
    ann.expect_presence((dora, "dora", JOINED)).await;
    one.await_presence("lobby", &[(ann.id, "ann"), (dora, "dora")])
        .await;
    one.await_user_connections("dora", 1).await;
    let thief = Member::connect(&one, "eve").await;
    assert!(!thief.claim("Dora").await, "held by a live node");

    // SIGKILL: no clean-up, no goodbye. Only the TTL can tell.
    child.0.kill().expect("killed");
    let killed = Instant::now();
    let _ = child.0.wait();
    ann.expect_presence((dora, "dora", LOST)).await;
    let lost_after = killed.elapsed();
    // The TTL is 3 s, refreshed every 250 ms.
    assert!(
        lost_after < Duration::from_secs(8),
        "lost only after {lost_after:?}"
    );
    one.await_presence("lobby", &[(ann.id, "ann")]).await;
    one.await_user_connections("dora", 0).await;
    assert!(thief.claim("Dora").await, "a dead node's names are free");
    nothing_more(&mut ann.presence).await;
}

/// A node id whose process died and that a new process claimed again
/// (a configured `node_id`) before this node saw its key missing: the old
/// process's members are lost all the same, in the groups the new one has
/// no member in too. (The other node is played by hand in Redis.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_id_taken_over_by_a_new_process_loses_the_old_ones_members() {
    let redis = RedisServer::start();
    let url = redis.url();
    let prefix = common::prefix("takeover");
    let client = redis::Client::open(url.as_str()).expect("a redis url");
    let mut raw = client
        .get_multiplexed_async_connection()
        .await
        .expect("connects to redis");
    // Node 900, as its process writes it: alive, "dora" in "lobby".
    let node = 900u16;
    let dora = ConnectionId::new(node, 1);
    let node_key = format!("{prefix}:node:{node}");
    let lobby_key = format!("{prefix}:members:{node}:lobby");
    let _: () = redis::cmd("SET")
        .arg(&node_key)
        .arg("old-process")
        .arg("PX")
        .arg(3000)
        .query_async(&mut raw)
        .await
        .unwrap();
    let _: () = redis::cmd("SADD")
        .arg(format!("{prefix}:nodes"))
        .arg(node)
        .query_async(&mut raw)
        .await
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg(&lobby_key)
        .arg("v")
        .arg(1)
        .arg(dora.0)
        .arg("dora")
        .query_async(&mut raw)
        .await
        .unwrap();
    // Its heartbeat, whichever process holds the id.
    let mut beating = raw.clone();
    let heartbeat_key = node_key.clone();
    let heartbeat = tokio::spawn(async move {
        loop {
            let _: Result<(), _> = redis::cmd("PEXPIRE")
                .arg(&heartbeat_key)
                .arg(3000)
                .query_async(&mut beating)
                .await;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });

    let one = Node::start(&url, &prefix).await;
    let mut ann = Member::connect(&one, "ann").await;
    ann.enter("lobby").await;
    ann.expect_presence((ann.id, "ann", JOINED)).await;
    one.await_presence("lobby", &[(ann.id, "ann"), (dora.0, "dora")])
        .await;

    // The old process dies; a new one claims node 900 at once, deletes the
    // old membership keys, and has no member in "lobby": it never writes
    // that group, and never publishes a notice of it.
    let _: () = redis::cmd("SET")
        .arg(&node_key)
        .arg("new-process")
        .arg("PX")
        .arg(3000)
        .query_async(&mut raw)
        .await
        .unwrap();
    let _: () = redis::cmd("DEL")
        .arg(&lobby_key)
        .query_async(&mut raw)
        .await
        .unwrap();
    ann.expect_presence((dora.0, "dora", LOST)).await;
    one.await_presence("lobby", &[(ann.id, "ann")]).await;
    heartbeat.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presence_is_rebuilt_after_redis_restarts() {
    let mut redis = RedisServer::start();
    let url = redis.url();
    let prefix = common::prefix("restart");
    let one = Node::start(&url, &prefix).await;
    let two = Node::start(&url, &prefix).await;
    let mut ann = Member::connect(&one, "ann").await;
    let bob = Member::connect(&two, "bob").await;
    let cara = Member::connect(&two, "cara").await;
    ann.enter("lobby").await;
    one.await_presence("lobby", &[(ann.id, "ann")]).await;
    bob.enter("lobby").await;
    cara.enter("lobby").await;
    let before = [(ann.id, "ann"), (bob.id, "bob"), (cara.id, "cara")];
    one.await_presence("lobby", &before).await;
    two.await_presence("lobby", &before).await;
    assert!(ann.claim("Ann").await);
    // Her own join, then Bob's and Cara's in the order node one read them.
    ann.expect_presence((ann.id, "ann", JOINED)).await;
    let mut heard = vec![ann.next_presence().await, ann.next_presence().await];
    heard.sort();
    assert_eq!(
        heard,
        [
            (bob.id, "bob".to_owned(), JOINED),
            (cara.id, "cara".to_owned(), JOINED)
        ]
    );

    redis.kill();
    for node in [&one, &two] {
        let deadline = Instant::now() + Duration::from_secs(5);
        while node.backplane.is_connected() {
            assert!(Instant::now() < deadline, "the loss is noticed");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    // While Redis is down, Bob leaves and Dan arrives on node two.
    bob.exit("lobby").await;
    let dan = Member::connect(&two, "dan").await;
    dan.enter("lobby").await;

    // Redis comes back empty; the nodes write everything again, and node
    // one reports what changed on node two meanwhile.
    redis.restart();
    for node in [&one, &two] {
        assert!(node.backplane.wait_connected(Duration::from_secs(10)).await);
    }
    let after = [(ann.id, "ann"), (cara.id, "cara"), (dan.id, "dan")];
    one.await_presence("lobby", &after).await;
    two.await_presence("lobby", &after).await;
    let mut heard = vec![ann.next_presence().await, ann.next_presence().await];
    heard.sort();
    let mut expected = vec![
        (bob.id, "bob".to_owned(), LEFT),
        (dan.id, "dan".to_owned(), JOINED),
    ];
    expected.sort();
    assert_eq!(heard, expected);
    nothing_more(&mut ann.presence).await;
    // Users and names are written again too.
    two.await_user_connections("ann", 1).await;
    assert!(!dan.claim("Ann").await, "Ann's name is claimed again");
}
