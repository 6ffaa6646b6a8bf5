//! The backplane against someone who can reach Redis: forged, replayed and
//! oversized envelopes published with a raw Redis client on the cluster's
//! channels reach no connection and are counted; a node with another
//! secret is not heard; and the nodes talk over TLS to a Redis whose
//! certificate a private CA signed, refusing a server their CA did not sign.
//!
//! Real `redis-server` processes (each test owns its own), real sockets,
//! real clients. Every "was not delivered" is shown by ordering: the
//! attack is published (and acknowledged by Redis) before a genuine
//! message, and the victim's next push must be the genuine one.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use ternio::backplane::Backplane;
use ternio::protocol::{BytesMut, Encode, Flags, Header, Packet};
use ternio::{ConnectionId, Server, ServerHandle};
use ternio_client::{Client, ConnectionState, Subscription};
use ternio_examples::chat::{self, ChatMessage, JoinRoom, RoomInfo, Say, SetNick};
use ternio_redis::{ClusterSecret, RedisBackplane, RedisConfig, Rejected};
use ternio_testkit::redis_server::{RedisServer, TlsFiles};

const SECRET: &str = "the security tests' secret, 32 B";
const ROOM: &str = "lobby";

fn config(url: &str, prefix: &str) -> RedisConfig {
    RedisConfig::new(url, ClusterSecret::new(SECRET).unwrap())
        .prefix(prefix)
        .heartbeat(Duration::from_millis(250), Duration::from_secs(3))
        .response_timeout(Duration::from_secs(2))
}

/// A chat server node with its backplane.
struct Node {
    address: SocketAddr,
    server: ServerHandle,
    backplane: RedisBackplane,
}

impl Node {
    async fn start(config: RedisConfig) -> Self {
        let backplane = RedisBackplane::connect(config)
            .await
            .expect("the backplane connects");
        let server = chat::serve(Server::builder().discover_controllers(false))
            .backplane(backplane.clone())
            .map_tcp("127.0.0.1:0")
            .build()
            .expect("the node builds");
        let address = server.tcp_addrs()[0];
        let handle = server.handle();
        tokio::spawn(server.run());
        assert!(backplane.wait_connected(Duration::from_secs(5)).await);
        Self {
            address,
            server: handle,
            backplane,
        }
    }

    fn id(&self) -> u16 {
        self.backplane.node_id()
    }

    /// Waits until this node sees exactly `expected` in the room.
    async fn await_members(&self, expected: &[u64]) {
        let mut expected = expected.to_vec();
        expected.sort_unstable();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut members: Vec<u64> = self
                .server
                .hub()
                .cluster_members(ROOM)
                .await
                .expect("the membership query succeeds")
                .into_iter()
                .map(|id| id.0)
                .collect();
            members.sort_unstable();
            if members == expected {
                return;
            }
            assert!(Instant::now() < deadline, "{members:?} ≠ {expected:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until `done` holds for this node's rejection counts.
    async fn await_rejected(&self, done: impl Fn(&Rejected) -> bool) -> Rejected {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let rejected = self.backplane.rejected();
            if done(&rejected) {
                return rejected;
            }
            assert!(Instant::now() < deadline, "counted only {rejected:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A chat client in the room, with its connection id and its messages.
struct Chatter {
    client: Client,
    id: u64,
    messages: Subscription<ChatMessage>,
}

impl Chatter {
    async fn join(node: &Node, nick: &str) -> Self {
        let client = Client::connect_tcp(node.address).await.expect("connects");
        let messages = client.subscribe::<ChatMessage>();
        client
            .request_async(&SetNick { nick: nick.into() })
            .await
            .expect("a nickname");
        let _: RoomInfo = client
            .request_async(&JoinRoom { room: ROOM.into() })
            .await
            .expect("joins");
        let id = node
            .server
            .hub()
            .members(ROOM)
            .into_iter()
            .map(|id| id.0)
            .max()
            .expect("a member");
        Self {
            client,
            id,
            messages,
        }
    }

    async fn say(&self, text: &str) {
        self.client
            .request_async(&Say {
                room: ROOM.into(),
                text: text.into(),
            })
            .await
            .expect("says");
    }

    /// The text of the next chat message this client gets.
    async fn next_text(&mut self) -> String {
        tokio::time::timeout(Duration::from_secs(5), self.messages.next())
            .await
            .expect("a message within 5 s")
            .expect("the subscription is open")
            .text
    }

    fn is_connected(&self) -> bool {
        matches!(
            *self.client.state_changes().borrow(),
            ConnectionState::Connected
        )
    }
}

/// Someone with a plain Redis client, and no cluster secret.
struct Attacker {
    connection: redis::aio::MultiplexedConnection,
}

impl Attacker {
    async fn connect(url: &str) -> Self {
        let client = redis::Client::open(url).expect("a redis url");
        Self {
            connection: client
                .get_multiplexed_async_connection()
                .await
                .expect("connects to redis"),
        }
    }

    /// Publishes `payload` on `channel`; returns how many subscribers Redis
    /// handed it to (once it returns, it is queued to every one of them).
    async fn publish(&mut self, channel: &str, payload: &[u8]) -> u64 {
        redis::cmd("PUBLISH")
            .arg(channel)
            .arg(payload)
            .query_async(&mut self.connection)
            .await
            .expect("redis accepts the PUBLISH")
    }
}

/// A push frame (header + body, as the hub encodes them) of `message`.
fn push_frame(message: &ChatMessage) -> Vec<u8> {
    let mut body = BytesMut::new();
    message.encode(&mut body);
    [
        &Header::new(ChatMessage::OPCODE, Flags::NONE, 0).to_bytes()[..],
        &body[..],
    ]
    .concat()
}

fn chat_message(text: &str) -> ChatMessage {
    ChatMessage {
        room: ROOM.into(),
        nick: "admin".into(),
        text: text.into(),
    }
}

/// A group push in the envelope of version 1 (no MAC), which nodes
/// delivered before this version: what an attacker would write for them.
fn v1_group(origin: u16, frame: &[u8]) -> Vec<u8> {
    let mut out = vec![1, 1];
    out.extend_from_slice(&origin.to_le_bytes());
    out.push(0);
    out.extend_from_slice(&(ROOM.len() as u16).to_le_bytes());
    out.extend_from_slice(ROOM.as_bytes());
    out.extend_from_slice(frame);
    out
}

/// A kick in the envelope of version 1.
fn v1_kick(origin: u16, id: u64) -> Vec<u8> {
    let mut out = vec![1, 4];
    out.extend_from_slice(&origin.to_le_bytes());
    out.push(0);
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(b"forged kick");
    out
}

/// A version 2 envelope of `kind` with `body`, a fresh stamp, and a MAC
/// the attacker made up (it has no secret).
fn v2_forged(kind: u8, origin: u16, body: &[u8]) -> Vec<u8> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let mut out = vec![2, kind];
    out.extend_from_slice(&origin.to_le_bytes());
    out.push(0);
    out.extend_from_slice(&0x5eed_u64.to_le_bytes());
    out.extend_from_slice(&now.to_le_bytes());
    out.extend_from_slice(body);
    out.extend_from_slice(&[0xa5; 32]);
    out
}

/// Two nodes, ann on node one and bob on node two, both in the room, each
/// node seeing both.
async fn two_chatters(url: &str, prefix: &str) -> (Node, Node, Chatter, Chatter) {
    two_chatters_with(config(url, prefix), config(url, prefix)).await
}

async fn two_chatters_with(one: RedisConfig, two: RedisConfig) -> (Node, Node, Chatter, Chatter) {
    let one = Node::start(one).await;
    let two = Node::start(two).await;
    let ann = Chatter::join(&one, "ann").await;
    let bob = Chatter::join(&two, "bob").await;
    one.await_members(&[ann.id, bob.id]).await;
    two.await_members(&[ann.id, bob.id]).await;
    (one, two, ann, bob)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_group_push_is_dropped_and_counted() {
    let redis = RedisServer::start();
    let prefix = "forge";
    let (one, two, mut ann, bob) = two_chatters(&redis.url(), prefix).await;
    let mut attacker = Attacker::connect(&redis.url()).await;
    let group = format!("{prefix}:group:{ROOM}");

    // A group push claiming to come from node two: in the old envelope, and
    // in the new one with a made-up MAC. Node one hears the channel.
    let frame = push_frame(&chat_message("forged push"));
    let mut v2_body = (ROOM.len() as u16).to_le_bytes().to_vec();
    v2_body.extend_from_slice(ROOM.as_bytes());
    v2_body.extend_from_slice(&frame);
    for payload in [v1_group(two.id(), &frame), v2_forged(1, two.id(), &v2_body)] {
        assert!(attacker.publish(&group, &payload).await >= 1);
    }

    // What node two genuinely publishes afterwards arrives, and first.
    bob.say("genuine").await;
    assert_eq!(ann.next_text().await, "genuine");
    // The old envelope is not an envelope of this version; the new one
    // fails its MAC.
    let rejected = one
        .await_rejected(|rejected| rejected.malformed >= 1 && rejected.forged >= 1)
        .await;
    assert_eq!(
        (rejected.malformed, rejected.forged, rejected.total()),
        (1, 1, 2),
        "{rejected:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merged_group_frames_are_authenticated_and_only_push_frames_are_delivered() {
    let redis = RedisServer::start();
    let prefix = "frames";
    let (one, two, mut ann, bob) = two_chatters(&redis.url(), prefix).await;
    let mut attacker = Attacker::connect(&redis.url()).await;
    let group = format!("{prefix}:group:{ROOM}");
    let frames_body = |frames: &[Vec<u8>]| {
        let mut body = (ROOM.len() as u16).to_le_bytes().to_vec();
        body.extend_from_slice(ROOM.as_bytes());
        for frame in frames {
            body.extend_from_slice(&(frame.len() as u32).to_le_bytes());
            body.extend_from_slice(frame);
        }
        body
    };

    // Without the secret: merged frames (kind 8) fail their MAC as any
    // other kind does.
    let forged = frames_body(&[push_frame(&chat_message("forged"))]);
    assert!(
        attacker
            .publish(&group, &v2_forged(8, two.id(), &forged))
            .await
            >= 1
    );

    // With it (a node, or whoever holds the secret): a frame that is not a
    // plain push (here a system frame, a `DISCONNECT` that would close the
    // member's connection) is not delivered; the frames around it are, in
    // order.
    let mut disconnect = Header::new(0xFF04, Flags::NONE, 0).to_bytes().to_vec();
    disconnect.extend_from_slice(&[0x01, 0x00]);
    disconnect.extend_from_slice(b"pushed by the backplane");
    let message = ternio_redis::fuzzing::Message::GroupFrames {
        group: ROOM.into(),
        frames: [
            push_frame(&chat_message("inside 1")),
            disconnect,
            push_frame(&chat_message("inside 2")),
        ]
        .into_iter()
        .map(Into::into)
        .collect(),
        droppable: false,
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let sealed = ternio_redis::fuzzing::seal(
        &ClusterSecret::new(SECRET).unwrap(),
        group.as_bytes(),
        (two.id(), 0x1a51de7, now),
        &message,
    );
    assert!(attacker.publish(&group, &sealed).await >= 1);
    assert_eq!(ann.next_text().await, "inside 1");
    assert_eq!(ann.next_text().await, "inside 2");

    // The node serves on: what node two publishes next arrives, and only it.
    bob.say("genuine").await;
    assert_eq!(ann.next_text().await, "genuine");
    let rejected = one.await_rejected(|rejected| rejected.forged >= 1).await;
    assert_eq!((rejected.forged, rejected.total()), (1, 1), "{rejected:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_kick_is_dropped_and_counted() {
    let redis = RedisServer::start();
    let prefix = "kick";
    let (one, two, mut ann, _bob) = two_chatters(&redis.url(), prefix).await;
    let mut attacker = Attacker::connect(&redis.url()).await;
    let to_one = format!("{prefix}:to-node:{}", one.id());

    // A kick of ann's connection, sent to her node's channel as node two
    // would: in the old envelope, and in the new one with a made-up MAC.
    let mut kick_body = ann.id.to_le_bytes().to_vec();
    kick_body.extend_from_slice(b"forged kick");
    for payload in [
        v1_kick(two.id(), ann.id),
        v2_forged(4, two.id(), &kick_body),
    ] {
        assert_eq!(attacker.publish(&to_one, &payload).await, 1);
    }

    // A genuine send through the same channel, published afterwards,
    // reaches ann: she is still connected.
    two.server
        .hub()
        .send(ConnectionId(ann.id), &chat_message("genuine send"))
        .expect("published");
    assert_eq!(ann.next_text().await, "genuine send");
    assert!(ann.is_connected(), "ann was not kicked");
    let rejected = one
        .await_rejected(|rejected| rejected.malformed >= 1 && rejected.forged >= 1)
        .await;
    assert_eq!(
        (rejected.malformed, rejected.forged, rejected.total()),
        (1, 1, 2),
        "{rejected:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_another_secret_is_not_heard() {
    let redis = RedisServer::start();
    let prefix = "secret";
    let (one, _two, mut ann, bob) = two_chatters(&redis.url(), prefix).await;
    // A node of the same cluster (prefix), with another secret and no
    // client of its own: it publishes only what it is told to here.
    let rogue = Node::start(
        RedisConfig::new(
            redis.url(),
            ClusterSecret::new("not the cluster's secret, 32 B..").unwrap(),
        )
        .prefix(prefix),
    )
    .await;
    let hub = rogue.server.hub();
    hub.send(
        ConnectionId(ann.id),
        &chat_message("sent with the wrong secret"),
    )
    .expect("published");
    hub.broadcast_group(ROOM, &chat_message("broadcast with the wrong secret"))
        .expect("published");

    bob.say("from the right one").await;
    assert_eq!(ann.next_text().await, "from the right one");
    // Both of the rogue's envelopes reached node one (its own channel, and
    // the room's, to which it is subscribed) and were refused, not delivered.
    let rejected = one.await_rejected(|rejected| rejected.forged >= 2).await;
    assert_eq!((rejected.forged, rejected.total()), (2, 2), "{rejected:?}");
}

/// A raw subscriber: what anyone who can read Redis's traffic sees.
async fn spy(url: &str, channel: &str) -> redis::aio::PubSub {
    let client = redis::Client::open(url).expect("a redis url");
    let mut pubsub = client.get_async_pubsub().await.expect("connects to redis");
    pubsub.subscribe(channel).await.expect("subscribes");
    pubsub
}

/// The next message `spy` gets that contains `needle`: its payload.
async fn capture(spy: &mut redis::aio::PubSub, needle: &[u8]) -> Vec<u8> {
    let mut messages = spy.on_message();
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let message = messages.next().await.expect("the spy's subscription");
            let payload = message.get_payload_bytes().to_vec();
            if payload.windows(needle.len()).any(|window| window == needle) {
                return payload;
            }
        }
    })
    .await
    .expect("captured within 5 s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_envelope_is_dropped_and_counted() {
    let redis = RedisServer::start();
    let prefix = "replay";
    let (one, _two, mut ann, bob) = two_chatters(&redis.url(), prefix).await;
    let group = format!("{prefix}:group:{ROOM}");
    let mut spy = spy(&redis.url(), &group).await;

    bob.say("pay alice 100").await;
    assert_eq!(ann.next_text().await, "pay alice 100");
    let captured = capture(&mut spy, b"pay alice 100").await;

    let mut attacker = Attacker::connect(&redis.url()).await;
    // Again, on its own channel: a replay.
    assert!(attacker.publish(&group, &captured).await >= 1);
    // On other channels that node one hears: the MAC covers the channel.
    for channel in [
        format!("{prefix}:to-node:{}", one.id()),
        format!("{prefix}:everyone"),
    ] {
        assert!(attacker.publish(&channel, &captured).await >= 1);
    }
    // With a flipped bit in its text: forged.
    let mut changed = captured.clone();
    let at = changed
        .windows(3)
        .position(|window| window == b"100")
        .expect("the text");
    changed[at] = b'9';
    assert!(attacker.publish(&group, &changed).await >= 1);

    bob.say("and nothing more").await;
    assert_eq!(ann.next_text().await, "and nothing more");
    let rejected = one
        .await_rejected(|rejected| rejected.replayed >= 1 && rejected.forged >= 3)
        .await;
    assert_eq!(
        (rejected.replayed, rejected.forged, rejected.total()),
        (1, 3, 4),
        "{rejected:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_after_a_reconnection_is_still_dropped() {
    let mut redis = RedisServer::start();
    let prefix = "replay-reconnect";
    let (one, two, mut ann, bob) = two_chatters(&redis.url(), prefix).await;
    let group = format!("{prefix}:group:{ROOM}");
    let mut spy = spy(&redis.url(), &group).await;
    bob.say("before the restart").await;
    assert_eq!(ann.next_text().await, "before the restart");
    let captured = capture(&mut spy, b"before the restart").await;
    drop(spy);

    // Redis restarts empty; both links are lost and come back.
    redis.restart();
    for node in [&one, &two] {
        let deadline = Instant::now() + Duration::from_secs(10);
        while node.backplane.stats().reconnects == 0 {
            assert!(Instant::now() < deadline, "node {} reconnects", node.id());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    one.await_members(&[ann.id, bob.id]).await;
    two.await_members(&[ann.id, bob.id]).await;

    let mut attacker = Attacker::connect(&redis.url()).await;
    assert!(attacker.publish(&group, &captured).await >= 1);
    bob.say("after the restart").await;
    assert_eq!(ann.next_text().await, "after the restart");
    let rejected = one.await_rejected(|rejected| rejected.replayed >= 1).await;
    assert_eq!(
        (rejected.replayed, rejected.total()),
        (1, 1),
        "{rejected:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_envelope_is_dropped_and_counted() {
    let redis = RedisServer::start();
    let prefix = "oversized";
    let limit = 1024;
    // The nodes share the limit, as docs/SCALING.md asks: node two merges
    // runs of broadcasts only within it, so "small" below never travels
    // with the message that is too large (a node with a lower limit than
    // its publishers drops their merged runs whole).
    let (one, two, mut ann, bob) = two_chatters_with(
        config(&redis.url(), prefix).max_envelope_size(limit),
        config(&redis.url(), prefix).max_envelope_size(limit),
    )
    .await;
    let group = format!("{prefix}:group:{ROOM}");
    let mut attacker = Attacker::connect(&redis.url()).await;

    // 64 KiB pushes: in the old envelope, and in the new one (the size is
    // checked before the MAC, so it counts as oversized, not forged).
    let frame = push_frame(&chat_message(&"x".repeat(64 * 1024)));
    let mut v2_body = (ROOM.len() as u16).to_le_bytes().to_vec();
    v2_body.extend_from_slice(ROOM.as_bytes());
    v2_body.extend_from_slice(&frame);
    for payload in [v1_group(two.id(), &frame), v2_forged(1, two.id(), &v2_body)] {
        assert!(payload.len() > limit);
        assert!(attacker.publish(&group, &payload).await >= 1);
    }
    // A genuine message above node one's limit is dropped there too.
    bob.say(&"y".repeat(1500)).await;

    bob.say("small").await;
    assert_eq!(ann.next_text().await, "small");
    let rejected = one.await_rejected(|rejected| rejected.oversized >= 3).await;
    assert_eq!(
        (rejected.oversized, rejected.total()),
        (3, 3),
        "{rejected:?}"
    );
}

/// Certificates for a TLS Redis, in a directory removed when dropped.
struct Certificates {
    dir: PathBuf,
    ca_pem: String,
}

impl Certificates {
    /// A CA, and a certificate for 127.0.0.1 and localhost that it signed.
    fn new() -> Self {
        static COUNT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "ternio-redis-tls-{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let (ca_params, ca_key, ca_pem) = ca("Ternio test CA");
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        std::fs::write(dir.join("ca.pem"), &ca_pem).unwrap();
        std::fs::write(dir.join("redis.pem"), cert.pem()).unwrap();
        std::fs::write(dir.join("redis.key"), key.serialize_pem()).unwrap();
        Self { dir, ca_pem }
    }

    fn files(&self) -> TlsFiles {
        TlsFiles {
            cert: self.dir.join("redis.pem"),
            key: self.dir.join("redis.key"),
            ca: self.dir.join("ca.pem"),
        }
    }
}

impl Drop for Certificates {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A self-signed CA: its parameters, key and certificate (PEM).
fn ca(name: &str) -> (rcgen::CertificateParams, rcgen::KeyPair, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    let pem = params.self_signed(&key).unwrap().pem();
    (params, key, pem)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_talk_over_tls_and_refuse_a_server_their_ca_did_not_sign() {
    let certificates = Certificates::new();
    let redis = RedisServer::start_tls(certificates.files());
    let url = redis.url();
    assert!(url.starts_with("rediss://127.0.0.1:"), "{url}");
    let prefix = "tls";
    let tls = |url: &str| config(url, prefix).tls_ca_certificate(certificates.ca_pem.clone());

    let (one, _two, mut ann, bob) = two_chatters_with(tls(&url), tls(&url)).await;
    bob.say("over tls").await;
    assert_eq!(ann.next_text().await, "over tls");
    assert_eq!(one.backplane.rejected(), Rejected::default());

    // Another CA, or the system's roots: the server's certificate is refused.
    let (_, _, other_ca) = ca("Someone else's CA");
    let refused = RedisBackplane::connect(config(&url, prefix).tls_ca_certificate(other_ca))
        .await
        .expect_err("a certificate the CA did not sign");
    assert!(refused.to_string().contains("certificate"), "{refused}");
    RedisBackplane::connect(config(&url, prefix))
        .await
        .expect_err("not signed by a system root");
    // A CA certificate needs a rediss:// URL.
    let plain = url.replacen("rediss://", "redis://", 1);
    let misconfigured = RedisBackplane::connect(
        config(&plain, prefix).tls_ca_certificate(certificates.ca_pem.clone()),
    )
    .await
    .expect_err("no TLS in the URL");
    assert!(
        matches!(
            misconfigured,
            ternio_redis::RedisBackplaneError::TlsNeedsRediss
        ),
        "{misconfigured}"
    );
    assert!(ann.is_connected());
}
