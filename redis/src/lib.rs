//! A Redis backplane for Ternio: several server nodes behind a load
//! balancer act as one hub.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use ternio::Server;
//! use ternio_redis::{ClusterSecret, RedisBackplane, RedisConfig};
//!
//! // Every node of the cluster has the same secret (at least 16 bytes).
//! let secret = ClusterSecret::new(std::env::var("TERNIO_CLUSTER_SECRET")?)?;
//! let config = RedisConfig::new("rediss://redis.internal:6380/", secret);
//! let backplane = RedisBackplane::connect(config).await?;
//! let server = Server::builder()
//!     .backplane(backplane.clone())
//!     .map_tcp("0.0.0.0:7101")
//!     .build()?;
//! server.run().await?;
//! backplane.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! With it, `Hub::broadcast_group`, `Hub::broadcast`, `Hub::send`,
//! `Hub::kick`, `Hub::send_user` and `Hub::kick_user` reach the connections
//! of every node; `Hub::cluster_presence` lists a group's members on every
//! node with their users, and the presence hook
//! (`ServerBuilder::on_presence`) hears of every change, the members of a
//! node that died included; `Hub::claim_name` takes a name in the whole
//! cluster; `Hub::cluster_user_connections` counts a user's connections.
//!
//! # How
//!
//! - **Node ids.** Each node claims an id from 1 to 65,535 in Redis (or is
//!   given one); it is the high 16 bits of its connection ids, so a send or
//!   kick goes straight to the owning node's channel.
//! - **Pub/sub.** A group broadcast is published once on the group's
//!   channel, to which exactly the nodes with a local member of the group
//!   subscribe — or not at all when the node knows from Redis that no
//!   other node has a member (see the delivery guarantee); sends and kicks go to the owning node's channel; broadcasts
//!   to everyone go to one channel all nodes hear. The payload is the push
//!   frame the hub encoded once (see the envelope below), shared by every
//!   local member of a receiving node and sealed per receiver there.
//! - **Membership and liveness** are keys that expire: a node refreshes its
//!   liveness key, its membership hashes and its users every heartbeat. A
//!   node that dies stops refreshing them; within the TTL (5 s by default)
//!   its members vanish from `cluster_members`, the other nodes report
//!   them lost, its names are free, and nobody is left subscribed for them.
//! - **Presence.** A node writes its members of a group with a version and
//!   publishes a notice on the group's channel in one transaction; the
//!   nodes with members in the group keep the others' views, read again
//!   when a notice is newer, and report the differences to the presence
//!   hook (`docs/SCALING.md` says why this stays consistent).
//! - **Faults.** When Redis goes away, every node keeps serving its local
//!   traffic: local members still get every broadcast. It logs the loss at
//!   `warn`, counts it ([`BackplaneStats`](ternio::backplane::BackplaneStats),
//!   through `Hub::backplane_stats`, and the `ternio_backplane_*` metrics
//!   through the `metrics` facade), refuses cross-node sends with
//!   `PushError::Unavailable`, and reconnects with backoff. On reconnection
//!   it registers again, rewrites its memberships and resubscribes.
//! - **Trust.** Envelopes are authenticated under the cluster secret and
//!   checked for replays and size (see Security below).
//!
//! # Delivery guarantee
//!
//! Redis pub/sub delivers **at most once**: a message published while a
//! node is not subscribed (Redis down, the node reconnecting, or in the
//! moment between a first local join and its subscription) is lost for
//! that node, and nothing replays it. Within one publishing node, messages
//! to one channel arrive in the order they were published. What the hub
//! delivers locally does not depend on Redis.
//!
//! A node with members of a group follows the other nodes' members of it;
//! when none has any, it does not publish the group's broadcasts
//! ([`RedisBackplane::skipped`] counts them). A node that takes its first
//! member of a group announces it as it subscribes, and the others publish
//! again from the moment they hear that: the new member may miss what is
//! broadcast before its node subscribed, as above, and what a publishing
//! node broadcasts before the announcement reaches it (one pub/sub hop,
//! longer if the publishing node is behind reading its subscriber
//! connection; a Redis round trip more if both nodes take their first
//! member of the group at the same moment: docs/SCALING.md). A node whose
//! liveness key expired (it lost Redis for longer than its time to live)
//! still counts as having members for a time to live after its last
//! announcement, so that it is published to while it comes back.
//! What a node sees in `Hub::cluster_presence` or a presence event, its
//! broadcasts reach. A node with no member of a group publishes every
//! broadcast to it. Applications that need every
//! message must number them and let clients ask for what they missed.
//!
//! Redis 6.2 or later is needed (`SET … GET`); it needs no persistence.
//! Deployment, faults and measured figures: `docs/SCALING.md`.
//!
//! # Keys and channels
//!
//! All under the configured prefix (`ternio` by default):
//! `{prefix}:node-seq`, `{prefix}:node:{n}` (expires), `{prefix}:nodes`,
//! `{prefix}:members:{n}:{group}` (a hash, expires),
//! `{prefix}:users:{n}` (a hash, expires), `{prefix}:name:{name}`;
//! channels `{prefix}:group:{group}` (broadcasts and presence notices),
//! `{prefix}:everyone` (broadcasts, user sends and kicks),
//! `{prefix}:to-node:{n}`.
//!
//! # Security
//!
//! Every node of a cluster shares a [`ClusterSecret`]; every envelope
//! carries an HMAC-SHA256 under it, over the envelope and its channel. A
//! node drops (and counts, see [`RedisBackplane::rejected`]) what is
//! larger than [`RedisConfig::max_envelope_size`] (checked before anything
//! is copied), what fails its MAC, and what replays a sequence it saw or is
//! stamped further than [`RedisConfig::max_message_age`] from its clock. So
//! someone who can publish on Redis without the secret can neither push to
//! a client nor kick one. `rediss://` URLs speak TLS to Redis
//! ([`RedisConfig::tls_ca_certificate`] for a private CA), so that nobody
//! on the way reads the pushes. The trust model in full: `docs/SCALING.md`.
//!
//! # Settings files
//!
//! With the `serde` feature (off by default), `RedisSettings` holds every
//! setting of [`RedisConfig`] but the cluster secret, read from a settings
//! file (every key optional, unknown keys refused, durations written
//! `"30s"`); `RedisSettings::into_config(secret)` adds the secret, which
//! comes from the environment or a key file, never from the settings
//! file. Every key and its default: `docs/CONFIGURATION.md`.
//!
//! # Envelope
//!
//! `version u8 = 2, kind u8, origin node u16 LE, flags u8 (bit 0
//! droppable), instance u64 LE, sequence u64 LE`, then for a group
//! broadcast `name length u16 LE, name, frame`; for everyone `frame`; for
//! a send `connection id u64 LE, frame`; for a kick `connection id u64 LE,
//! reason`; for a user send `user id length u16 LE, user id, frame`; for a
//! user kick `user id length u16 LE, user id, reason`; for a presence
//! notice `name length u16 LE, name, version u64 LE`; then the 32-byte MAC: `HMAC-SHA256(secret, "ternio-redis
//! envelope v2\0" ‖ channel length u32 LE ‖ channel ‖ every byte before
//! it)`. Version 1 (no instance, sequence or MAC) is refused: upgrade every
//! node of a cluster together.

mod backlog;
mod backplane;
mod config;
mod counters;
mod envelope;
mod keys;
mod link;
mod presence;
mod replay;
mod secret;
#[cfg(feature = "serde")]
mod settings;

pub use backplane::{RedisBackplane, RedisBackplaneError};
pub use config::{DEFAULT_MAX_ENVELOPE_SIZE, DEFAULT_SUBSCRIPTION_BACKLOG, RedisConfig};
pub use counters::Rejected;
#[doc(hidden)]
pub use envelope::fuzzing;
pub use secret::{ClusterSecret, MIN_SECRET_LEN, SecretTooShort};
#[cfg(feature = "serde")]
pub use settings::RedisSettings;

/// `docs/SCALING.md`'s examples, compiled as doc tests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../../docs/SCALING.md")]
mod scaling_guide {}
