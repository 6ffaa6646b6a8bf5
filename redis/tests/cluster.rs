//! Two (or three) Ternio nodes joined by a real `redis-server`: group
//! broadcasts, sends and kicks across nodes, cluster-wide membership, a
//! Redis restart in the middle of the traffic (and `/readyz` answering 503
//! while Redis is down, 200 once it is back), and a node killed with
//! SIGKILL whose members disappear after the heartbeat TTL.
//!
//! Each test starts and owns its `redis-server` (Debian's `redis-server`
//! package; `TERNIO_REDIS_SERVER` names another program). With
//! `TERNIO_REDIS_URL` set, the tests that need no restart use that server
//! instead, each under its own key prefix.

use std::collections::BTreeSet;

use std::net::SocketAddr;

use std::time::{Duration, Instant};

use ternio::backplane::Backplane;
use ternio::{
    AppCode, ConnectionId, Context, HandlerError, Packet, PushError, Server, ServerBuilder,
    ServerHandle, packet_controller,
};
use ternio_client::{Client, ErrorCode, Subscription};
use ternio_examples::chat::{
    self, ChatMessage, JoinRoom, RoomInfo, Say, SetNick, UserJoined, UserLeft,
};
use ternio_redis::{RedisBackplane, RedisBackplaneError, RedisConfig};
use ternio_testkit::redis_server::RedisServer;

mod common;
use common::{ChildNode, config, next, nothing_more, prefix};

/// 0x0500: asks for the connection's id.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0500, response = Me)]
struct WhoAmI;

/// 0x0501: the answer to [`WhoAmI`].
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0501)]
struct Me(u64);

/// 0x0502: push [`Told`] to the connection `to`, wherever it is.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0502, response = ())]
struct Tell {
    to: u64,
    text: String,
}

/// 0x0503, pushed: what someone said, to a connection or a room.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0503)]
struct Told {
    from: u64,
    text: String,
}

/// 0x0504: joins a room.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0504, response = ())]
struct Enter {
    room: String,
}

/// 0x0505: broadcasts [`Told`] to a room.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0505, response = ())]
struct Shout {
    room: String,
    text: String,
}

/// 0x0506: broadcasts `count` [`Told`]s to a room at once, "chorus 0"
/// to "chorus {count - 1}".
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0506, response = ())]
struct Chorus {
    room: String,
    count: u32,
}

#[derive(Default)]
struct RoomController;

#[packet_controller(explicit)]
impl RoomController {
    fn who_am_i(_request: WhoAmI, ctx: &Context) -> Me {
        Me(ctx.connection_id().0)
    }

    fn tell(request: Tell, ctx: &Context) -> Result<(), HandlerError> {
        let told = Told {
            from: ctx.connection_id().0,
            text: request.text,
        };
        ctx.hub()
            .send(ConnectionId(request.to), &told)
            .map_err(|error| HandlerError::new(AppCode::new(100), error.to_string()))
    }

    fn enter(request: Enter, ctx: &Context) {
        ctx.hub().join(&request.room, ctx.connection_id());
    }

    fn chorus(request: Chorus, ctx: &Context) -> Result<(), HandlerError> {
        for verse in 0..request.count {
            let told = Told {
                from: ctx.connection_id().0,
                text: format!("chorus {verse}"),
            };
            ctx.hub()
                .broadcast_group(&request.room, &told)
                .map_err(|error| HandlerError::new(AppCode::new(100), error.to_string()))?;
        }
        Ok(())
    }

    fn shout(request: Shout, ctx: &Context) -> Result<(), HandlerError> {
        let told = Told {
            from: ctx.connection_id().0,
            text: request.text,
        };
        ctx.hub()
            .broadcast_group(&request.room, &told)
            .map(|_| ())
            .map_err(|error| HandlerError::new(AppCode::new(100), error.to_string()))
    }
}

/// A Redis for a test: its own server, or `TERNIO_REDIS_URL`'s.
struct Redis {
    url: String,
    _server: Option<RedisServer>,
}

fn redis() -> Redis {
    match std::env::var("TERNIO_REDIS_URL") {
        Ok(url) if !url.is_empty() => Redis { url, _server: None },
        _ => {
            let server = RedisServer::start();
            Redis {
                url: server.url(),
                _server: Some(server),
            }
        }
    }
}

/// One server node with its backplane.
struct Node {
    address: SocketAddr,
    server: ServerHandle,
    backplane: RedisBackplane,
}

impl Node {
    async fn start(
        url: &str,
        prefix: &str,
        service: impl FnOnce(ServerBuilder) -> ServerBuilder,
    ) -> Self {
        Self::start_with(url, prefix, |config| config, service).await
    }

    /// [`start`](Self::start), its backplane's settings changed by `change`.
    async fn start_with(
        url: &str,
        prefix: &str,
        change: impl FnOnce(RedisConfig) -> RedisConfig,
        service: impl FnOnce(ServerBuilder) -> ServerBuilder,
    ) -> Self {
        let backplane = RedisBackplane::connect(change(config(url, prefix)))
            .await
            .expect("the backplane connects");
        let server = service(Server::builder().discover_controllers(false))
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

    async fn rooms(url: &str, prefix: &str) -> Self {
        Self::start(url, prefix, |builder| builder.controller(RoomController)).await
    }

    /// The members of `room` on every node, as this node sees them.
    async fn cluster_members(&self, room: &str) -> BTreeSet<u64> {
        self.server
            .hub()
            .cluster_members(room)
            .await
            .expect("the membership query succeeds")
            .into_iter()
            .map(|id| id.0)
            .collect()
    }

    /// Waits until this node sees exactly `expected` in `room`.
    async fn await_members(&self, room: &str, expected: &[u64]) {
        let expected: BTreeSet<u64> = expected.iter().copied().collect();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let members = self.cluster_members(room).await;
            if members == expected {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{room} has {members:?}, expected {expected:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A client of the room service, with its id and its pushes.
struct Member {
    client: Client,
    id: u64,
    told: Subscription<Told>,
}

impl Member {
    async fn connect(node: &Node) -> Self {
        let client = Client::connect_tcp(node.address).await.expect("connects");
        let told = client.subscribe();
        let Me(id) = client.request_async(&WhoAmI).await.expect("an id");
        Self { client, id, told }
    }

    async fn enter(&self, room: &str) {
        self.client
            .request_async(&Enter { room: room.into() })
            .await
            .expect("enters");
    }

    async fn shout(&self, room: &str, text: &str) {
        self.client
            .request_async(&Shout {
                room: room.into(),
                text: text.into(),
            })
            .await
            .expect("shouts");
    }

    async fn tell(&self, to: u64, text: &str) -> Result<(), ternio_client::ClientError> {
        self.client
            .request_async(&Tell {
                to,
                text: text.into(),
            })
            .await
    }

    async fn next(&mut self) -> Told {
        next(&mut self.told).await
    }
}

fn told(from: u64, text: &str) -> Told {
    Told {
        from,
        text: text.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_users_on_two_nodes_share_a_room() {
    let redis = redis();
    let prefix = prefix("chat");
    let one = Node::start(&redis.url, &prefix, chat::serve).await;
    let two = Node::start(&redis.url, &prefix, chat::serve).await;
    assert_ne!(one.backplane.node_id(), two.backplane.node_id());

    let ann = Client::connect_tcp(one.address).await.unwrap();
    let bob = Client::connect_tcp(two.address).await.unwrap();
    let (mut ann_messages, mut ann_joins) = (
        ann.subscribe::<ChatMessage>(),
        ann.subscribe::<UserJoined>(),
    );
    let mut bob_messages = bob.subscribe::<ChatMessage>();
    for (client, nick) in [(&ann, "ann"), (&bob, "bob")] {
        client
            .request_async(&SetNick { nick: nick.into() })
            .await
            .unwrap();
    }
    let join = JoinRoom {
        room: "lobby".into(),
    };
    let _: chat::RoomInfo = ann.request_async(&join).await.unwrap();
    assert_eq!(
        next(&mut ann_joins).await,
        UserJoined {
            room: "lobby".into(),
            nick: "ann".into()
        }
    );
    // Once node two sees ann, node one is subscribed to the room.
    let ann_id = one.server.hub().members("lobby")[0].0;
    two.await_members("lobby", &[ann_id]).await;

    let _: chat::RoomInfo = bob.request_async(&join).await.unwrap();
    // Bob's join, announced on node two, reaches ann on node one.
    assert_eq!(
        next(&mut ann_joins).await,
        UserJoined {
            room: "lobby".into(),
            nick: "bob".into()
        }
    );
    let bob_id = two.server.hub().members("lobby")[0].0;
    one.await_members("lobby", &[ann_id, bob_id]).await;

    let say = |text: &str| Say {
        room: "lobby".into(),
        text: text.into(),
    };
    let message = |nick: &str, text: &str| ChatMessage {
        room: "lobby".into(),
        nick: nick.into(),
        text: text.into(),
    };
    ann.request_async(&say("hi bob")).await.unwrap();
    assert_eq!(next(&mut bob_messages).await, message("ann", "hi bob"));
    assert_eq!(next(&mut ann_messages).await, message("ann", "hi bob"));
    bob.request_async(&say("hi ann")).await.unwrap();
    assert_eq!(next(&mut ann_messages).await, message("bob", "hi ann"));
    assert_eq!(next(&mut bob_messages).await, message("bob", "hi ann"));
    // Each message arrives once: a node does not deliver its own twice.
    nothing_more(&mut ann_messages).await;
    nothing_more(&mut bob_messages).await;

    // Each node published its message, and received the other's. (Joins
    // are not broadcasts: each node tells its own members of them, from
    // the presence the backplane keeps.)
    let stats = one.server.hub().backplane_stats().expect("a backplane");
    assert!(
        stats.connected && stats.published >= 1 && stats.received >= 1,
        "{stats:?}"
    );
}

/// A chat client: its requests, and the joins and leaves pushed to it.
struct Chatter {
    client: Client,
    joins: Subscription<UserJoined>,
    leaves: Subscription<UserLeft>,
}

impl Chatter {
    async fn connect(node: &Node) -> Self {
        let client = Client::connect_tcp(node.address).await.expect("connects");
        Self {
            joins: client.subscribe(),
            leaves: client.subscribe(),
            client,
        }
    }

    async fn nick(&self, nick: &str) -> Result<(), ternio_client::ClientError> {
        self.client
            .request_async(&SetNick { nick: nick.into() })
            .await
    }

    async fn join(&self, room: &str) -> RoomInfo {
        self.client
            .request_async(&JoinRoom { room: room.into() })
            .await
            .expect("joins")
    }
}

fn joined(nick: &str) -> UserJoined {
    UserJoined {
        room: "lobby".into(),
        nick: nick.into(),
    }
}

fn left(nick: &str) -> UserLeft {
    UserLeft {
        room: "lobby".into(),
        nick: nick.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_nicknames_member_lists_joins_and_leaves_span_the_nodes() {
    let redis = redis();
    let prefix = prefix("chat-presence");
    let one = Node::start(&redis.url, &prefix, chat::serve).await;
    let two = Node::start(&redis.url, &prefix, chat::serve).await;
    let mut ann = Chatter::connect(&one).await;
    let mut bob = Chatter::connect(&two).await;

    // A nickname taken on node one is refused on node two.
    ann.nick("ann").await.unwrap();
    let taken = bob.nick("ann").await.unwrap_err();
    assert_eq!(
        taken.code(),
        Some(ErrorCode::Application(chat::errors::BAD_NICK))
    );
    assert!(taken.to_string().contains("ann is taken"), "{taken}");
    bob.nick("bob").await.unwrap();

    let info = ann.join("lobby").await;
    assert_eq!(info.members, ["ann"]);
    assert_eq!(next(&mut ann.joins).await, joined("ann"));
    // Node one has written its member to Redis once node two sees it.
    let ann_id = one.server.hub().members("lobby")[0].0;
    two.await_members("lobby", &[ann_id]).await;

    // Bob's list names ann, on the other node; ann hears of bob from it.
    let info = bob.join("lobby").await;
    assert_eq!(info.members, ["ann", "bob"]);
    assert_eq!(next(&mut bob.joins).await, joined("bob"));
    assert_eq!(next(&mut ann.joins).await, joined("bob"));
    // Ann's list (a JoinRoom again changes nothing else) names bob.
    let info = ann.join("lobby").await;
    assert_eq!(info.members, ["ann", "bob"]);
    // Each join was told to each member once, by its own node.
    nothing_more(&mut ann.joins).await;
    nothing_more(&mut bob.joins).await;

    // Bob's connection closes: ann hears that he left, from node two.
    bob.client.close().await;
    assert_eq!(next(&mut ann.leaves).await, left("bob"));
    nothing_more(&mut ann.leaves).await;
    assert_eq!(ann.join("lobby").await.members, ["ann"]);
    // And his nickname is free again, on every node.
    let carol = Chatter::connect(&one).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while let Err(refused) = carol.nick("bob").await {
        assert!(Instant::now() < deadline, "bob is still taken: {refused}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(bob.leaves.try_next(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_without_redis_lists_the_local_members_and_refuses_new_nicknames() {
    // This test stops its Redis, so it always owns one.
    let mut redis = RedisServer::start();
    let url = redis.url();
    let one = Node::start(&url, &prefix("chat-down"), chat::serve).await;
    let mut ann = Chatter::connect(&one).await;
    let cara = Chatter::connect(&one).await;
    let dan = Chatter::connect(&one).await;
    ann.nick("ann").await.unwrap();
    cara.nick("cara").await.unwrap();
    assert_eq!(ann.join("lobby").await.members, ["ann"]);
    assert_eq!(next(&mut ann.joins).await, joined("ann"));

    redis.kill();
    let deadline = Instant::now() + Duration::from_secs(5);
    while one.backplane.is_connected() {
        assert!(Instant::now() < deadline, "the loss is noticed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // No one can say whether a new nickname is free: refused, and why.
    let refused = dan.nick("dan").await.unwrap_err();
    assert_eq!(
        refused.code(),
        Some(ErrorCode::Application(chat::errors::UNAVAILABLE))
    );
    // A join still works, and lists the members this node knows.
    assert_eq!(cara.join("lobby").await.members, ["ann", "cara"]);
    assert_eq!(next(&mut ann.joins).await, joined("cara"));

    // Redis comes back: nicknames can be taken again.
    redis.restart();
    assert!(one.backplane.wait_connected(Duration::from_secs(10)).await);
    let deadline = Instant::now() + Duration::from_secs(5);
    while let Err(refused) = dan.nick("dan").await {
        assert!(Instant::now() < deadline, "still refused: {refused}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_broadcasts_and_kicks_reach_the_other_node() {
    let redis = redis();
    let prefix = prefix("send");
    let one = Node::rooms(&redis.url, &prefix).await;
    let two = Node::rooms(&redis.url, &prefix).await;
    let mut ann = Member::connect(&one).await;
    let mut bob = Member::connect(&two).await;

    // Ids carry their node in the high 16 bits.
    assert_eq!(ConnectionId(ann.id).node(), one.backplane.node_id());
    assert_eq!(ConnectionId(bob.id).node(), two.backplane.node_id());
    assert_eq!(ConnectionId(bob.id).local(), 1);
    assert_eq!(
        ConnectionId(bob.id).to_string(),
        format!("#{}:1", two.backplane.node_id())
    );

    ann.tell(bob.id, "psst").await.expect("sent across");
    assert_eq!(bob.next().await, told(ann.id, "psst"));
    bob.tell(ann.id, "what?").await.expect("sent back");
    assert_eq!(ann.next().await, told(bob.id, "what?"));

    // A send from outside a handler, through the other node's hub.
    two.server
        .hub()
        .send(ConnectionId(ann.id), &told(0, "from node two"))
        .expect("published");
    assert_eq!(ann.next().await, told(0, "from node two"));

    // A broadcast to everyone reaches every node's connections, once each.
    let delivery = one
        .server
        .hub()
        .broadcast(&told(0, "to everyone"))
        .expect("broadcasts");
    assert_eq!(delivery.queued, 1, "the Delivery counts this node's");
    assert_eq!(ann.next().await, told(0, "to everyone"));
    assert_eq!(bob.next().await, told(0, "to everyone"));
    nothing_more(&mut ann.told).await;
    nothing_more(&mut bob.told).await;

    // An unknown id on this node is refused at once, as without a backplane.
    let unknown = ConnectionId::new(one.backplane.node_id(), 999_999);
    assert_eq!(
        one.server.hub().send(unknown, &told(0, "nobody")),
        Err(PushError::Closed)
    );

    // A kick for a connection of node two, ordered on node one.
    let mut state = bob.client.state_changes();
    assert!(one.server.hub().kick(ConnectionId(bob.id), "go away"));
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let ternio_client::ConnectionState::Closed(reason) =
                state.borrow_and_update().clone()
            {
                return reason;
            }
            state.changed().await.expect("state changes");
        }
    })
    .await
    .expect("bob is closed within 5 s");
    match closed {
        ternio_client::CloseReason::Disconnected(disconnect) => {
            assert_eq!(disconnect.reason, ternio::DisconnectReason::Kicked);
            assert_eq!(disconnect.message, "go away");
        }
        other => panic!("bob closed for {other:?}"),
    }
    let _ = &mut ann;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn membership_spans_the_nodes_and_broadcasts_reach_every_member_once() {
    let redis = redis();
    let prefix = prefix("members");
    let nodes = [
        Node::rooms(&redis.url, &prefix).await,
        Node::rooms(&redis.url, &prefix).await,
        Node::rooms(&redis.url, &prefix).await,
    ];
    let mut members = Vec::new();
    for node in &nodes {
        for _ in 0..2 {
            let member = Member::connect(node).await;
            member.enter("lobby").await;
            members.push(member);
        }
    }
    // One more member on node 0, in another room only.
    let outsider = Member::connect(&nodes[0]).await;
    outsider.enter("other").await;
    let ids: Vec<u64> = members.iter().map(|member| member.id).collect();
    for node in &nodes {
        node.await_members("lobby", &ids).await;
        node.await_members("other", &[outsider.id]).await;
    }
    let backplane_ids: BTreeSet<u16> = nodes.iter().map(|node| node.backplane.node_id()).collect();
    let live: BTreeSet<u16> = nodes[0]
        .backplane
        .live_nodes()
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert!(
        backplane_ids.is_subset(&live),
        "{backplane_ids:?} ⊄ {live:?}"
    );

    let speaker = members[2].id;
    members[2].shout("lobby", "all hands").await;
    for member in &mut members {
        assert_eq!(member.next().await, told(speaker, "all hands"));
    }
    for member in &mut members {
        nothing_more(&mut member.told).await;
    }
    let mut outsider = outsider;
    nothing_more(&mut outsider.told).await;

    // A member that leaves (here: disconnects) leaves every node's view.
    let gone = members.pop().expect("a member");
    gone.client.close().await;
    let remaining: Vec<u64> = members.iter().map(|member| member.id).collect();
    nodes[0].await_members("lobby", &remaining).await;
}

/// What a plain Redis subscriber hears on a group's channel: every
/// payload, to look for a broadcast's text in (envelopes are authenticated,
/// not encrypted).
struct ChannelTap {
    heard: std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl ChannelTap {
    async fn start(url: &str, channel: &str) -> Self {
        use futures_util::StreamExt as _;
        let client = redis::Client::open(url).expect("a redis url");
        let mut pubsub = client.get_async_pubsub().await.expect("a subscriber");
        pubsub.subscribe(channel).await.expect("subscribes");
        let heard = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = std::sync::Arc::clone(&heard);
        let task = tokio::spawn(async move {
            let mut messages = pubsub.into_on_message();
            while let Some(message) = messages.next().await {
                sink.lock()
                    .unwrap()
                    .push(message.get_payload_bytes().to_vec());
            }
        });
        Self { heard, task }
    }

    /// How many payloads heard so far hold `text`.
    fn count(&self, text: &str) -> usize {
        let text = text.as_bytes();
        self.heard
            .lock()
            .unwrap()
            .iter()
            .filter(|payload| payload.windows(text.len()).any(|window| window == text))
            .count()
    }
}

impl Drop for ChannelTap {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_broadcast_is_published_only_while_another_node_has_a_member() {
    let redis = redis();
    let prefix = prefix("only-where-members");
    let one = Node::rooms(&redis.url, &prefix).await;
    let two = Node::rooms(&redis.url, &prefix).await;
    let tap = ChannelTap::start(&redis.url, &format!("{prefix}:group:lobby")).await;
    let mut ann = Member::connect(&one).await;
    let mut bob = Member::connect(&two).await;
    ann.enter("lobby").await;
    // Node one has read the other nodes' views of the room: none has a member.
    one.await_members("lobby", &[ann.id]).await;

    // Nobody elsewhere: delivered here, not published.
    for text in ["alone 1", "alone 2", "alone 3"] {
        ann.shout("lobby", text).await;
        assert_eq!(ann.next().await, told(ann.id, text));
    }
    // A broadcast after them that is published would arrive after them.
    let published_before = one.backplane.stats().published;
    bob.enter("lobby").await;
    // Once node one sees bob, its broadcasts reach him.
    one.await_members("lobby", &[ann.id, bob.id]).await;
    ann.shout("lobby", "together").await;
    assert_eq!(bob.next().await, told(ann.id, "together"));
    assert_eq!(ann.next().await, told(ann.id, "together"));
    let deadline = Instant::now() + Duration::from_secs(5);
    while tap.count("together") == 0 {
        assert!(Instant::now() < deadline, "the broadcast was not published");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for text in ["alone 1", "alone 2", "alone 3"] {
        assert_eq!(tap.count(text), 0, "{text:?} was published");
    }
    assert_eq!(one.backplane.skipped(), 3);
    // Counted once Redis answered the `PUBLISH`, which may come after the
    // subscribers had the message.
    while one.backplane.stats().published <= published_before {
        assert!(Instant::now() < deadline, "the broadcast was not counted");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // Bob's node loses its last member: node one stops publishing once it
    // sees that.
    bob.client.close().await;
    one.await_members("lobby", &[ann.id]).await;
    ann.shout("lobby", "alone again").await;
    assert_eq!(ann.next().await, told(ann.id, "alone again"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        tap.count("alone again"),
        0,
        "published with nobody elsewhere"
    );
    assert_eq!(one.backplane.skipped(), 4);
    // Node two, with no member, still publishes its broadcasts to the room
    // (it does not follow the room's members).
    let mut cara = Member::connect(&two).await;
    cara.shout("lobby", "from outside").await;
    assert_eq!(ann.next().await, told(cara.id, "from outside"));
    assert_eq!(two.backplane.skipped(), 0);
    nothing_more(&mut cara.told).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_broadcasts_crosses_in_fewer_messages_whole_and_in_order() {
    const VERSES: u32 = 300;
    let redis = redis();
    let prefix = prefix("burst");
    let one = Node::rooms(&redis.url, &prefix).await;
    let two = Node::rooms(&redis.url, &prefix).await;
    let tap = ChannelTap::start(&redis.url, &format!("{prefix}:group:lobby")).await;
    let ann = Member::connect(&one).await;
    let mut bob = Member::connect(&two).await;
    ann.enter("lobby").await;
    bob.enter("lobby").await;
    one.await_members("lobby", &[ann.id, bob.id]).await;
    let received_before = two.backplane.stats().received;

    ann.client
        .request_async(&Chorus {
            room: "lobby".into(),
            count: VERSES,
        })
        .await
        .expect("sings");
    for verse in 0..VERSES {
        assert_eq!(bob.next().await, told(ann.id, &format!("chorus {verse}")));
    }
    nothing_more(&mut bob.told).await;
    // Every broadcast counted as received (a presence notice on the
    // room's channel may count too).
    let received = two.backplane.stats().received - received_before;
    assert!(
        (u64::from(VERSES)..u64::from(VERSES) + 4).contains(&received),
        "{received} received"
    );
    // The broadcasts the publisher found queued together left in one
    // envelope: fewer Redis messages than broadcasts.
    let last = format!("chorus {}", VERSES - 1);
    let deadline = Instant::now() + Duration::from_secs(5);
    while tap.count(&last) == 0 {
        assert!(Instant::now() < deadline, "the tap heard nothing");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let payloads = tap.count("chorus ");
    assert!(
        payloads < VERSES as usize,
        "{VERSES} broadcasts took {payloads} Redis messages"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_takes_its_first_member_of_a_group_soon_receives_its_broadcasts() {
    let redis = redis();
    let prefix = prefix("first-member");
    let one = Node::rooms(&redis.url, &prefix).await;
    let two = Node::rooms(&redis.url, &prefix).await;
    let ann = Member::connect(&one).await;
    ann.enter("lobby").await;
    one.await_members("lobby", &[ann.id]).await;
    // Bob joins on node two; node one has not read his membership yet.
    // Broadcasts made from then on may miss him only for the moment his
    // node takes to subscribe and announce him: one reaches him within 5 s.
    let mut bob = Member::connect(&two).await;
    bob.enter("lobby").await;
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut sent = 0;
    let first = loop {
        assert!(Instant::now() < deadline, "no broadcast reached bob");
        sent += 1;
        ann.shout("lobby", &format!("try {sent}")).await;
        if let Ok(Some(told)) =
            tokio::time::timeout(Duration::from_millis(20), bob.told.next()).await
        {
            break told;
        }
    };
    // Then every one does, in order.
    let first: u32 = first.text["try ".len()..].parse().unwrap();
    for attempt in first + 1..=sent {
        assert_eq!(bob.next().await, told(ann.id, &format!("try {attempt}")));
    }
    ann.shout("lobby", "after").await;
    assert_eq!(bob.next().await, told(ann.id, "after"));
}

/// A flood from Redis faster than a node takes it, past the node's
/// `subscription_backlog`: dropped, and the node reconnects (before, the
/// Redis client held it all, without bound), then hears the others again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_past_the_subscription_backlog_makes_the_node_reconnect() {
    let redis = redis();
    let prefix = prefix("flood");
    let small = |config: RedisConfig| config.max_envelope_size(4096).subscription_backlog(8192);
    let one = Node::start_with(&redis.url, &prefix, small, |builder| {
        builder.controller(RoomController)
    })
    .await;
    let two = Node::rooms(&redis.url, &prefix).await;
    let mut ann = Member::connect(&one).await;
    let bob = Member::connect(&two).await;
    ann.enter("lobby").await;
    bob.enter("lobby").await;
    one.await_members("lobby", &[ann.id, bob.id]).await;
    // 400 messages of 3 KB to every node in one write: forged (Redis
    // takes anyone's), so each is refused once read, but they arrive
    // faster than that.
    let client = redis::Client::open(redis.url.as_str()).unwrap();
    let mut publisher = client.get_multiplexed_async_connection().await.unwrap();
    let mut flood = redis::pipe();
    for _ in 0..400 {
        flood
            .cmd("PUBLISH")
            .arg(format!("{prefix}:everyone"))
            .arg(vec![7u8; 3000])
            .ignore();
    }
    let _: () = flood.query_async(&mut publisher).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while one.server.hub().backplane_stats().unwrap().reconnects == 0 {
        assert!(Instant::now() < deadline, "no reconnection after the flood");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(one.backplane.wait_connected(Duration::from_secs(10)).await);
    one.await_members("lobby", &[ann.id, bob.id]).await;
    bob.shout("lobby", "after the flood").await;
    assert_eq!(ann.next().await, told(bob.id, "after the flood"));
}

/// The subscription's connection (RESP3) killed alone, the command
/// connection up: each node notices, reconnects and hears the others
/// again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_subscription_alone_is_killed_reconnects() {
    // This test kills clients of its Redis, so it always owns one.
    let redis = RedisServer::start();
    let url = redis.url();
    let prefix = prefix("subscription-killed");
    let one = Node::rooms(&url, &prefix).await;
    let two = Node::rooms(&url, &prefix).await;
    let mut ann = Member::connect(&one).await;
    let bob = Member::connect(&two).await;
    ann.enter("lobby").await;
    bob.enter("lobby").await;
    one.await_members("lobby", &[ann.id, bob.id]).await;
    two.await_members("lobby", &[ann.id, bob.id]).await;

    let admin = redis::Client::open(url.as_str()).unwrap();
    let mut admin = admin.get_multiplexed_async_connection().await.unwrap();
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut admin)
        .await
        .unwrap();
    let subscriptions: Vec<&str> = clients
        .lines()
        .filter(|line| line.split(' ').any(|field| field == "resp=3"))
        .filter_map(|line| line.split(' ').find_map(|field| field.strip_prefix("id=")))
        .collect();
    assert_eq!(subscriptions.len(), 2, "{clients}");
    for id in subscriptions {
        let _: () = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("ID")
            .arg(id)
            .query_async(&mut admin)
            .await
            .unwrap();
    }
    for node in [&one, &two] {
        let deadline = Instant::now() + Duration::from_secs(10);
        while node.server.hub().backplane_stats().unwrap().reconnects == 0 {
            assert!(Instant::now() < deadline, "the loss is noticed");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            node.backplane.wait_connected(Duration::from_secs(10)).await,
            "node {} reconnects",
            node.backplane.node_id()
        );
    }
    one.await_members("lobby", &[ann.id, bob.id]).await;
    bob.shout("lobby", "heard again").await;
    assert_eq!(ann.next().await, told(bob.id, "heard again"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traffic_resumes_after_redis_restarts() {
    // This test restarts its Redis, so it always owns one.
    let mut redis = RedisServer::start();
    let url = redis.url();
    let prefix = prefix("restart");
    let one = Node::rooms(&url, &prefix).await;
    let two = Node::rooms(&url, &prefix).await;
    let mut ann = Member::connect(&one).await;
    let mut cara = Member::connect(&one).await;
    let mut bob = Member::connect(&two).await;
    for member in [&ann, &cara, &bob] {
        member.enter("lobby").await;
    }
    let all = [ann.id, cara.id, bob.id];
    one.await_members("lobby", &all).await;
    two.await_members("lobby", &all).await;

    ann.shout("lobby", "before").await;
    let ann_id = ann.id;
    for member in [&mut ann, &mut cara, &mut bob] {
        assert_eq!(member.next().await, told(ann_id, "before"));
    }

    redis.kill();
    for node in [&one, &two] {
        let deadline = Instant::now() + Duration::from_secs(5);
        while node.backplane.is_connected() {
            assert!(Instant::now() < deadline, "the loss is noticed");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let stats = node.server.hub().backplane_stats().unwrap();
        assert!(!stats.connected && stats.disconnects >= 1, "{stats:?}");
    }
    // Local traffic goes on while Redis is down.
    ann.shout("lobby", "during").await;
    assert_eq!(ann.next().await, told(ann.id, "during"));
    assert_eq!(cara.next().await, told(ann.id, "during"));
    ann.tell(cara.id, "still here").await.expect("a local send");
    assert_eq!(cara.next().await, told(ann.id, "still here"));
    // A send to the other node cannot go, and says so.
    let refused = ann.tell(bob.id, "lost").await.expect_err("no backplane");
    assert_eq!(refused.code(), Some(ErrorCode::from_u16(100)));
    assert!(
        one.server.hub().cluster_members("lobby").await.is_err(),
        "no cluster view without Redis"
    );

    // Redis comes back empty; the nodes reconnect, register, resubscribe.
    redis.restart();
    for node in [&one, &two] {
        assert!(
            node.backplane.wait_connected(Duration::from_secs(10)).await,
            "node {} reconnects",
            node.backplane.node_id()
        );
    }
    one.await_members("lobby", &all).await;
    two.await_members("lobby", &all).await;

    bob.shout("lobby", "after").await;
    // Bob never gets "during": pub/sub is at most once, nothing is replayed.
    let bob_id = bob.id;
    for member in [&mut bob, &mut ann, &mut cara] {
        assert_eq!(member.next().await, told(bob_id, "after"));
    }
    ann.tell(bob.id, "welcome back").await.expect("sent across");
    assert_eq!(bob.next().await, told(ann.id, "welcome back"));
    nothing_more(&mut bob.told).await;

    for node in [&one, &two] {
        let stats = node.server.hub().backplane_stats().unwrap();
        assert!(stats.connected && stats.reconnects >= 1, "{stats:?}");
    }
}

/// Set in the child process that [`a_killed_node_leaves_no_ghost_members`]
/// and [`the_chat_tells_the_members_of_a_killed_node_as_left`] start: the
/// Redis URL and key prefix of the parent's cluster.
const CHILD_URL: &str = "TERNIO_REDIS_TEST_CHILD_URL";
const CHILD_PREFIX: &str = "TERNIO_REDIS_TEST_CHILD_PREFIX";
/// The parent's member of "lobby", which the child waits to see with its own.
const CHILD_PEER: &str = "TERNIO_REDIS_TEST_CHILD_PEER";
/// When set, the child runs the chat, and its member is a chat user with
/// this nickname.
const CHILD_CHAT_NICK: &str = "TERNIO_REDIS_TEST_CHILD_CHAT_NICK";

/// Not a test on its own: in the child process, a node with one member in
/// "lobby" (of the room service, or of the chat with `CHILD_CHAT_NICK`),
/// which prints `READY <member id> <node id>` and waits to be killed.
#[test]
fn child_node() {
    let (Ok(url), Ok(prefix), Ok(peer)) = (
        std::env::var(CHILD_URL),
        std::env::var(CHILD_PREFIX),
        std::env::var(CHILD_PEER),
    ) else {
        return;
    };
    let peer: u64 = peer.parse().expect("the peer's id");
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let (node, id, _client) = match std::env::var(CHILD_CHAT_NICK) {
            Ok(nick) => {
                let node = Node::start(&url, &prefix, chat::serve).await;
                let chatter = Chatter::connect(&node).await;
                chatter.nick(&nick).await.expect("a nickname");
                chatter.join("lobby").await;
                let id = node.server.hub().members("lobby")[0].0;
                (node, id, chatter.client)
            }
            Err(_) => {
                let node = Node::rooms(&url, &prefix).await;
                let member = Member::connect(&node).await;
                member.enter("lobby").await;
                (node, member.id, member.client)
            }
        };
        node.await_members("lobby", &[peer, id]).await;
        println!("READY {id} {}", node.backplane.node_id());
        // Killed by the parent long before this.
        tokio::time::sleep(Duration::from_secs(60)).await;
    });
}

/// Starts [`child_node`] in a process of its own, in the cluster of `url`
/// and `prefix`, with `peer` in "lobby" (a chat user named `chat_nick`
/// with it); returns it once ready, with its member's id and its node id.
async fn start_child(
    url: &str,
    prefix: &str,
    peer: u64,
    chat_nick: Option<&str>,
) -> (ChildNode, u64, u16) {
    let mut env = vec![
        (CHILD_URL, url.to_owned()),
        (CHILD_PREFIX, prefix.to_owned()),
        (CHILD_PEER, peer.to_string()),
    ];
    if let Some(nick) = chat_nick {
        env.push((CHILD_CHAT_NICK, nick.to_owned()));
    }
    let (child, ready) = ChildNode::start("child_node", &env).await;
    let mut words = ready
        .split_whitespace()
        .map(|word| word.parse::<u64>().unwrap());
    let (member, node) = (words.next().unwrap(), words.next().unwrap() as u16);
    (child, member, node)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_leaves_no_ghost_members() {
    let redis = redis();
    let prefix = prefix("kill");
    let one = Node::rooms(&redis.url, &prefix).await;
    let ann = Member::connect(&one).await;
    ann.enter("lobby").await;

    let (mut child, child_member, child_node) =
        start_child(&redis.url, &prefix, ann.id, None).await;
    assert_eq!(ConnectionId(child_member).node(), child_node);
    one.await_members("lobby", &[ann.id, child_member]).await;
    assert!(
        one.backplane
            .live_nodes()
            .await
            .unwrap()
            .contains(&child_node)
    );

    // SIGKILL: no clean-up, no goodbye. Only the TTL can tell.
    child.0.kill().expect("killed");
    let killed = Instant::now();
    let _ = child.0.wait();
    one.await_members("lobby", &[ann.id]).await;
    let gone_after = killed.elapsed();
    // The TTL is 3 s, refreshed every 250 ms.
    assert!(
        gone_after < Duration::from_secs(8),
        "ghost members stayed {gone_after:?}"
    );
    assert!(
        !one.backplane
            .live_nodes()
            .await
            .unwrap()
            .contains(&child_node)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chat_tells_the_members_of_a_killed_node_as_left() {
    let redis = redis();
    let prefix = prefix("chat-kill");
    let one = Node::start(&redis.url, &prefix, chat::serve).await;
    let mut ann = Chatter::connect(&one).await;
    ann.nick("ann").await.unwrap();
    ann.join("lobby").await;
    assert_eq!(next(&mut ann.joins).await, joined("ann"));
    let ann_id = one.server.hub().members("lobby")[0].0;

    // Cat, on a node in another process, joins: ann hears of it.
    let (mut child, _, _) = start_child(&redis.url, &prefix, ann_id, Some("cat")).await;
    assert_eq!(next(&mut ann.joins).await, joined("cat"));
    assert_eq!(ann.join("lobby").await.members, ["ann", "cat"]);
    let refused = Chatter::connect(&one).await.nick("cat").await.unwrap_err();
    assert_eq!(
        refused.code(),
        Some(ErrorCode::Application(chat::errors::BAD_NICK))
    );

    // SIGKILL: cat's node says nothing. Once its heartbeat has expired
    // (3 s), ann is told that cat left, and the nickname is free.
    child.0.kill().expect("killed");
    let killed = Instant::now();
    let _ = child.0.wait();
    let gone = tokio::time::timeout(Duration::from_secs(10), ann.leaves.next())
        .await
        .expect("cat is told as left within 10 s")
        .expect("the subscription is open");
    assert_eq!(gone, left("cat"));
    assert!(
        killed.elapsed() < Duration::from_secs(8),
        "{:?}",
        killed.elapsed()
    );
    assert_eq!(ann.join("lobby").await.members, ["ann"]);
    Chatter::connect(&one).await.nick("cat").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_shutdown_removes_the_members_at_once_and_live_ids_stay_taken() {
    let redis = redis();
    let prefix = prefix("shutdown");
    let one = Node::rooms(&redis.url, &prefix).await;
    let two = Node::rooms(&redis.url, &prefix).await;
    let ann = Member::connect(&one).await;
    let bob = Member::connect(&two).await;
    ann.enter("lobby").await;
    bob.enter("lobby").await;
    one.await_members("lobby", &[ann.id, bob.id]).await;

    // A fixed node id that a live node holds is refused (after waiting
    // out the TTL, in case its holder had just died).
    let taken =
        RedisBackplane::connect(config(&redis.url, &prefix).node_id(two.backplane.node_id()))
            .await
            .expect_err("the id is taken");
    assert!(
        matches!(taken, RedisBackplaneError::NodeIdTaken(_)),
        "{taken}"
    );

    two.server.shutdown();
    two.backplane.shutdown().await;
    let started = Instant::now();
    one.await_members("lobby", &[ann.id]).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "gone at once, not after the 3 s TTL"
    );
    assert!(!two.backplane.is_connected());
    assert_eq!(two.backplane.stats().dropped, 0);
}

/// `GET path` on a health listener: the status code and the body.
async fn probe(address: SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: probe\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut answer))
        .await
        .expect("an answer, then the close")
        .unwrap();
    let status = answer
        .get(9..12)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {answer:?}"));
    let body = answer.split_once("\r\n\r\n").map(|(_, body)| body);
    (status, body.unwrap_or_default().to_owned())
}

/// Polls `/readyz` every 20 ms until it answers `status`, within `within`.
async fn await_readyz(health: SocketAddr, status: u16, within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        let (answered, body) = probe(health, "/readyz").await;
        if answered == status {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "/readyz still answers {answered} ({body:?}), not {status}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_answers_503_while_redis_is_down_and_200_once_it_is_back() {
    // This test stops its Redis, so it always owns one.
    let mut redis = RedisServer::start();
    let url = redis.url();
    let backplane = RedisBackplane::connect(config(&url, &prefix("readyz")))
        .await
        .expect("the backplane connects");
    let server = Server::builder()
        .discover_controllers(false)
        .controller(RoomController)
        .backplane(backplane.clone())
        .map_tcp("127.0.0.1:0")
        .health("127.0.0.1:0")
        .build()
        .expect("the node builds");
    let health = server.health_addr().expect("a health listener");
    let handle = server.handle();
    tokio::spawn(server.run());
    assert!(backplane.wait_connected(Duration::from_secs(5)).await);
    assert_eq!(probe(health, "/readyz").await, (200, "ready\n".into()));

    redis.kill();
    let body = await_readyz(health, 503, Duration::from_secs(5)).await;
    assert_eq!(body, "backplane disconnected\n");
    // Alive all the same: the process serves its own clients.
    assert_eq!(probe(health, "/healthz").await.0, 200);
    assert!(!handle.is_ready());

    redis.restart();
    await_readyz(health, 200, Duration::from_secs(10)).await;
    assert!(backplane.is_connected() && handle.is_ready());
    handle.shutdown_and_wait().await;
}
