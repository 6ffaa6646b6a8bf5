//! [`RedisBackplane`]: the handle the server holds, and the state it shares
//! with its link task.

use std::collections::HashSet;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::aio::MultiplexedConnection;
use redis::io::tcp::TcpSettings;
use redis::{
    AsyncConnectionConfig, Client, ConnectionAddr, ConnectionInfo, IntoConnectionInfo,
    ProtocolVersion, RedisError, TlsCertificates,
};
use ternio::backplane::{
    Backplane, BackplaneError, BackplaneMessage, BackplaneStats, BoxFuture, LocalHub,
};
use ternio::{ConnectionId, Member, UserId};
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;

use crate::config::RedisConfig;
use crate::counters::{Counters, Rejected};
use crate::envelope::EnvelopeKey;
use crate::keys::Keys;
use crate::link;
use crate::presence::{Mirror, View};

/// Why a [`RedisBackplane`] could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedisBackplaneError {
    /// Redis refused, failed or could not be reached.
    #[error("redis: {0}")]
    Redis(#[from] RedisError),
    /// Redis did not answer within the response timeout.
    #[error("redis did not answer within {0:?}")]
    Timeout(Duration),
    /// The fixed node id is held by a live node.
    #[error("node id {0} is in use by a live node")]
    NodeIdTaken(u16),
    /// Node id 0 was asked for: it means "no backplane".
    #[error("node id 0 is reserved; use 1 to 65535")]
    ReservedNodeId,
    /// Every node id is held by a live node.
    #[error("no node id is free: 65,535 nodes are alive")]
    NoFreeNodeId,
    /// A CA certificate was given for a URL that is not `rediss://`.
    #[error("a TLS CA certificate needs a rediss:// URL")]
    TlsNeedsRediss,
}

/// What the handle and the link task share.
pub(crate) struct Shared {
    pub(crate) config: RedisConfig,
    pub(crate) keys: Keys,
    /// The cluster secret, ready to seal and open envelopes.
    pub(crate) key: EnvelopeKey,
    pub(crate) node: u16,
    /// Tells this process's node key from another's that claimed the same id.
    pub(crate) token: String,
    pub(crate) client: Client,
    /// The same server in RESP3, for the subscription: its messages come
    /// as pushes, through a bounded backlog (`crate::backlog`).
    pub(crate) subscriber: Client,
    /// The server's local side, once attached.
    pub(crate) hub: OnceLock<LocalHub>,
    pub(crate) queue: mpsc::Sender<BackplaneMessage>,
    /// Whether the link is up (publishing is refused at once when it is
    /// not), and what was counted.
    pub(crate) counters: Counters,
    /// Groups whose local membership changed since it was last written.
    pub(crate) dirty: Mutex<HashSet<String>>,
    pub(crate) dirty_signal: Notify,
    /// Users whose local count of connections changed since it was written.
    pub(crate) dirty_users: Mutex<HashSet<UserId>>,
    /// Names freed here, to free in Redis: each with its holder and the
    /// generation of the claim freed.
    pub(crate) releases: Mutex<Vec<(String, ConnectionId, u64)>>,
    /// The other nodes' members of the groups with a member here.
    pub(crate) mirror: Mutex<Mirror>,
    /// Rings when a presence notice made a view stale.
    pub(crate) presence_signal: Notify,
    /// Rings (every waiter) when a group's views were read.
    pub(crate) presence_loaded: Notify,
    /// The command connection while the link is up, for membership queries.
    pub(crate) commands: Mutex<Option<MultiplexedConnection>>,
    pub(crate) shutdown: watch::Sender<bool>,
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // No code panics while holding these locks; recover the data if one did.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    /// Marks `groups` for writing to Redis, and wakes the link task.
    pub(crate) fn mark_dirty(&self, groups: impl IntoIterator<Item = String>) {
        lock(&self.dirty).extend(groups);
        self.dirty_signal.notify_one();
    }

    /// Marks every group with a local member, and every signed-in user.
    pub(crate) fn mark_all_dirty(&self) {
        let Some(hub) = self.hub.get() else {
            return;
        };
        lock(&self.dirty_users).extend(hub.users().into_iter().map(|(user, _)| user));
        self.mark_dirty(hub.memberships().into_iter().map(|(group, _)| group));
    }

    /// The value of a name key held by the connection `id` of this node
    /// under the claim `generation`: `id|node|token|generation`.
    pub(crate) fn name_value(&self, id: ConnectionId, generation: u64) -> String {
        format!("{}|{}", self.name_holder(id), generation)
    }

    /// The part of a name key's value that says who holds it, whatever
    /// the claim: `id|node|token`.
    pub(crate) fn name_holder(&self, id: ConnectionId) -> String {
        format!("{}|{}|{}", id.0, self.node, self.token)
    }

    pub(crate) fn connection_config(&self) -> AsyncConnectionConfig {
        AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.config.response_timeout))
            .set_response_timeout(Some(self.config.response_timeout))
    }

    pub(crate) fn ttl_ms(&self) -> u64 {
        self.config.node_ttl.as_millis() as u64
    }
}

/// A [`Backplane`] over Redis: pub/sub carries group broadcasts,
/// broadcasts, sends and kicks between nodes; keys with an expiry hold
/// each node's liveness and group membership.
///
/// Give it to `Server::builder().backplane(...)`; keep a clone to read its
/// [`stats`](Backplane::stats) or to [`shutdown`](Self::shutdown) cleanly.
/// One backplane serves one server.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use ternio::Server;
/// use ternio_redis::{ClusterSecret, RedisBackplane, RedisConfig};
///
/// let secret = ClusterSecret::new(std::env::var("TERNIO_CLUSTER_SECRET")?)?;
/// let config = RedisConfig::new("redis://127.0.0.1:6379/", secret);
/// let backplane = RedisBackplane::connect(config).await?;
/// let server = Server::builder()
///     .backplane(backplane.clone())
///     .map_tcp("0.0.0.0:7101")
///     .build()?;
/// println!("node {}", backplane.node_id());
/// server.run().await?;
/// backplane.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisBackplane {
    shared: Arc<Shared>,
    task: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl fmt::Debug for RedisBackplane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBackplane")
            .field("node", &self.shared.node)
            .field("prefix", &self.shared.config.prefix)
            .field("connected", &self.shared.counters.is_connected())
            .finish()
    }
}

impl RedisBackplane {
    /// Connects to Redis, claims a node id (the configured one, or a free
    /// one), and starts the link task that keeps it alive. Must run inside a
    /// tokio runtime.
    ///
    /// A fixed node id still held by a node that just died is waited for,
    /// for at most the node TTL; one held by a live node is refused.
    ///
    /// For a `rediss://` URL, TLS uses rustls: if the application has not
    /// installed a process-wide rustls crypto provider, this installs
    /// ring's.
    pub async fn connect(config: RedisConfig) -> Result<Self, RedisBackplaneError> {
        let config = config.normalized();
        if config.node_id == Some(0) {
            return Err(RedisBackplaneError::ReservedNodeId);
        }
        let subscriber = client(&config, ProtocolVersion::RESP3)?;
        let client = client(&config, ProtocolVersion::RESP2)?;
        let keys = Keys::new(&config.prefix);
        let token = token();
        let timeout = config.response_timeout;
        let connection_config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout));
        let mut connection = tokio::time::timeout(
            timeout,
            client.get_multiplexed_async_connection_with_config(&connection_config),
        )
        .await
        .map_err(|_| RedisBackplaneError::Timeout(timeout))??;
        let node = claim(&mut connection, &keys, &config, &token).await?;
        forget_stale_memberships(&mut connection, &keys, node).await?;
        tracing::info!(node, prefix = %config.prefix, "backplane node registered in redis");

        let (queue, receiver) = mpsc::channel(config.queue_capacity);
        let (shutdown, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            key: EnvelopeKey::new(&config.secret),
            config,
            keys,
            node,
            token,
            client,
            subscriber,
            hub: OnceLock::new(),
            queue,
            counters: Counters::new(node),
            dirty: Mutex::default(),
            dirty_signal: Notify::new(),
            dirty_users: Mutex::default(),
            releases: Mutex::default(),
            mirror: Mutex::default(),
            presence_signal: Notify::new(),
            presence_loaded: Notify::new(),
            commands: Mutex::new(None),
            shutdown,
        });
        let task = tokio::spawn(link::run(Arc::clone(&shared), receiver));
        Ok(Self {
            shared,
            task: Arc::new(Mutex::new(Some(task))),
        })
    }

    /// This node's id: the high 16 bits of its connection ids.
    pub fn node_id(&self) -> u16 {
        self.shared.node
    }

    /// Whether the link to Redis is up now.
    pub fn is_connected(&self) -> bool {
        self.shared.counters.is_connected()
    }

    /// Waits until the link to Redis is up, for at most `timeout`; returns
    /// whether it is.
    pub async fn wait_connected(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.is_connected() {
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }

    /// The envelopes received from Redis and dropped so far, by reason
    /// (forged, replayed, oversized…). Never delivered to a connection.
    pub fn rejected(&self) -> Rejected {
        self.shared.counters.rejections()
    }

    /// The group broadcasts not published so far because no other node
    /// had a member of the group (as this node knew from Redis; see the
    /// crate's delivery guarantee). Also the metric
    /// `ternio_backplane_skipped_total`.
    pub fn skipped(&self) -> u64 {
        self.shared.counters.skips()
    }

    /// The ids of the nodes alive now, as Redis knows them (sorted).
    pub async fn live_nodes(&self) -> Result<Vec<u16>, BackplaneError> {
        let mut connection = self.commands()?;
        let (alive, _dead) = live_nodes(&mut connection, &self.shared.keys).await?;
        Ok(alive)
    }

    /// Leaves the cluster cleanly: deletes this node's liveness and
    /// membership keys (its members disappear from every node's view at
    /// once, not after the TTL) and stops the link task. Messages still
    /// queued are dropped. Call it after the server stopped.
    pub async fn shutdown(&self) {
        self.shared.shutdown.send_replace(true);
        let task = lock(&self.task).take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }

    fn commands(&self) -> Result<MultiplexedConnection, BackplaneError> {
        lock(&self.shared.commands)
            .clone()
            .ok_or_else(|| BackplaneError::Unavailable("the link to redis is down".into()))
    }
}

impl Backplane for RedisBackplane {
    fn node_id(&self) -> u16 {
        self.shared.node
    }

    fn is_connected(&self) -> bool {
        self.shared.counters.is_connected()
    }

    fn attach(&self, hub: LocalHub) -> Result<(), BackplaneError> {
        self.shared
            .hub
            .set(hub)
            .map_err(|_| BackplaneError::AlreadyAttached)?;
        // The server's recorder is installed by now (see `counters`).
        self.shared.counters.register_metrics();
        self.shared.mark_all_dirty();
        Ok(())
    }

    fn publish(&self, message: BackplaneMessage) -> Result<(), BackplaneError> {
        let counters = &self.shared.counters;
        if !counters.is_connected() {
            counters.dropped(1);
            return Err(BackplaneError::Unavailable(
                "the link to redis is down".into(),
            ));
        }
        if let BackplaneMessage::Group { group, .. } = &message
            && lock(&self.shared.mirror).alone(group)
        {
            // No other node has a member: nobody would receive it.
            counters.skipped(1);
            return Ok(());
        }
        self.shared.queue.try_send(message).map_err(|error| {
            counters.dropped(1);
            match error {
                mpsc::error::TrySendError::Full(_) => BackplaneError::Full,
                mpsc::error::TrySendError::Closed(_) => {
                    BackplaneError::Unavailable("the backplane was shut down".into())
                }
            }
        })
    }

    fn joined(&self, group: &str, _id: ConnectionId) {
        self.shared.mark_dirty([group.to_owned()]);
    }

    fn left(&self, group: &str, _id: ConnectionId) {
        self.shared.mark_dirty([group.to_owned()]);
    }

    fn remote_presence(
        &self,
        group: &str,
    ) -> BoxFuture<'static, Result<Vec<Member>, BackplaneError>> {
        let shared = Arc::clone(&self.shared);
        let group = group.to_owned();
        let connection = self.commands();
        Box::pin(async move {
            let mut connection = connection?;
            // A group with members here: the mirror's list, which agrees
            // with the presence events (see `presence`).
            let followed = shared
                .hub
                .get()
                .is_some_and(|hub| !hub.members(&group).is_empty());
            if followed && let Some(members) = mirrored(&shared, &group).await {
                return Ok(members);
            }
            remote_presence(&shared, &mut connection, &group).await
        })
    }

    fn user_changed(&self, user: &UserId) {
        lock(&self.shared.dirty_users).insert(user.clone());
        self.shared.dirty_signal.notify_one();
    }

    fn remote_user_connections(
        &self,
        user: &UserId,
    ) -> BoxFuture<'static, Result<usize, BackplaneError>> {
        let shared = Arc::clone(&self.shared);
        let user = user.clone();
        let connection = self.commands();
        Box::pin(async move {
            let mut connection = connection?;
            let others = other_live_nodes(&shared, &mut connection).await?;
            if others.is_empty() {
                return Ok(0);
            }
            let mut pipe = redis::pipe();
            for node in &others {
                pipe.cmd("HGET")
                    .arg(shared.keys.users(*node))
                    .arg(user.as_str());
            }
            let counts: Vec<Option<u64>> = pipe
                .query_async(&mut connection)
                .await
                .map_err(unavailable)?;
            Ok(counts.into_iter().flatten().sum::<u64>() as usize)
        })
    }

    fn claim_name(
        &self,
        name: &str,
        id: ConnectionId,
        generation: u64,
    ) -> BoxFuture<'static, Result<bool, BackplaneError>> {
        let shared = Arc::clone(&self.shared);
        let name = name.to_owned();
        let connection = self.commands();
        // A release of this name still queued goes first, or it would free
        // the name just claimed.
        let pending: Vec<(String, ConnectionId, u64)> = {
            let mut releases = lock(&self.shared.releases);
            let (these, others) = releases
                .drain(..)
                .partition(|(queued, _, _)| *queued == name);
            *releases = others;
            these
        };
        Box::pin(async move {
            let mut connection = match connection {
                Ok(connection) => connection,
                Err(error) => {
                    lock(&shared.releases).extend(pending);
                    return Err(error);
                }
            };
            for (index, (queued, holder, claim)) in pending.iter().enumerate() {
                if let Err(error) =
                    release_name(&shared, &mut connection, queued, *holder, *claim).await
                {
                    // Not lost: the link task sends them when it can.
                    lock(&shared.releases).extend(pending[index..].iter().cloned());
                    shared.dirty_signal.notify_one();
                    return Err(unavailable(error));
                }
            }
            claim_name(&shared, &mut connection, &name, id, generation)
                .await
                .map_err(unavailable)
        })
    }

    fn release_name(&self, name: &str, id: ConnectionId, generation: u64) {
        lock(&self.shared.releases).push((name.to_owned(), id, generation));
        self.shared.dirty_signal.notify_one();
    }

    fn stats(&self) -> BackplaneStats {
        self.shared.counters.stats()
    }
}

/// The Redis client for `config`'s URL, over TLS for `rediss://`, speaking
/// `protocol`.
fn client(config: &RedisConfig, protocol: ProtocolVersion) -> Result<Client, RedisBackplaneError> {
    // Nagle's algorithm would hold small publishes back: no delay.
    let info = config
        .url
        .as_str()
        .into_connection_info()?
        .set_tcp_settings(TcpSettings::default().set_nodelay(true));
    let settings = info.redis_settings().clone().set_protocol(protocol);
    let info = info.set_redis_settings(settings);
    if !is_tls(&info) {
        if config.tls_ca_certificate.is_some() {
            return Err(RedisBackplaneError::TlsNeedsRediss);
        }
        return Ok(Client::open(info)?);
    }
    // rustls needs a crypto provider; the application may have chosen one.
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Fails only if another thread installed one in between: fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    match &config.tls_ca_certificate {
        Some(pem) => Ok(Client::build_with_tls(
            info,
            TlsCertificates {
                client_tls: None,
                root_cert: Some(pem.clone()),
            },
        )?),
        None => Ok(Client::open(info)?),
    }
}

fn is_tls(info: &ConnectionInfo) -> bool {
    matches!(info.addr(), ConnectionAddr::TcpTls { .. })
}

/// A token that tells this process's claim on a node id from any other's.
fn token() -> String {
    static BACKPLANES: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    let count = BACKPLANES.fetch_add(1, Ordering::Relaxed);
    format!("{}-{nanos:x}-{count}", std::process::id())
}

/// Claims a node id: the configured one (waiting out a dead holder's TTL),
/// or the next free one after the cluster's counter.
async fn claim(
    connection: &mut MultiplexedConnection,
    keys: &Keys,
    config: &RedisConfig,
    token: &str,
) -> Result<u16, RedisBackplaneError> {
    let ttl = config.node_ttl.as_millis() as u64;
    if let Some(node) = config.node_id {
        // A node that died a moment ago still holds it until its key expires.
        let deadline = Instant::now() + config.node_ttl + config.heartbeat_interval;
        loop {
            if try_claim(connection, keys, token, ttl, node).await? {
                return Ok(node);
            }
            if Instant::now() >= deadline {
                return Err(RedisBackplaneError::NodeIdTaken(node));
            }
            tokio::time::sleep(config.heartbeat_interval).await;
        }
    }
    for _ in 0..u16::MAX {
        let sequence: u64 = redis::cmd("INCR")
            .arg(keys.node_seq())
            .query_async(connection)
            .await?;
        let node = ((sequence.saturating_sub(1)) % u64::from(u16::MAX) + 1) as u16;
        if try_claim(connection, keys, token, ttl, node).await? {
            return Ok(node);
        }
    }
    Err(RedisBackplaneError::NoFreeNodeId)
}

/// Takes node id `node` if no live node holds it, and registers it.
async fn try_claim(
    connection: &mut MultiplexedConnection,
    keys: &Keys,
    token: &str,
    ttl_ms: u64,
    node: u16,
) -> Result<bool, RedisError> {
    let set: Option<String> = redis::cmd("SET")
        .arg(keys.node(node))
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(ttl_ms)
        .query_async(connection)
        .await?;
    if set.is_some() {
        redis::cmd("SADD")
            .arg(keys.nodes())
            .arg(node)
            .exec_async(connection)
            .await?;
    }
    Ok(set.is_some())
}

/// Deletes the membership and user keys a previous process with the same
/// node id left. (Its names hold its token, which is no longer the node's:
/// they are free.)
async fn forget_stale_memberships(
    connection: &mut MultiplexedConnection,
    keys: &Keys,
    node: u16,
) -> Result<(), RedisError> {
    redis::cmd("DEL")
        .arg(keys.users(node))
        .exec_async(connection)
        .await?;
    let pattern = keys.members_pattern(node);
    let mut cursor: u64 = 0;
    loop {
        let (next, found): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(connection)
            .await?;
        if !found.is_empty() {
            redis::cmd("DEL").arg(found).exec_async(connection).await?;
        }
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}

/// The registered nodes, split into the alive and the dead (sorted).
pub(crate) async fn live_nodes(
    connection: &mut MultiplexedConnection,
    keys: &Keys,
) -> Result<(Vec<u16>, Vec<u16>), BackplaneError> {
    let mut nodes: Vec<u16> = redis::cmd("SMEMBERS")
        .arg(keys.nodes())
        .query_async(connection)
        .await
        .map_err(unavailable)?;
    nodes.sort_unstable();
    if nodes.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let mut pipe = redis::pipe();
    for node in &nodes {
        pipe.cmd("EXISTS").arg(keys.node(*node));
    }
    let exists: Vec<bool> = pipe.query_async(connection).await.map_err(unavailable)?;
    let (mut alive, mut dead) = (Vec::new(), Vec::new());
    for (node, exists) in nodes.into_iter().zip(exists) {
        if exists {
            alive.push(node);
        } else {
            dead.push(node);
        }
    }
    Ok((alive, dead))
}

/// The live nodes but this one. Dead nodes are pruned from the node set on
/// the way.
pub(crate) async fn other_live_nodes(
    shared: &Shared,
    connection: &mut MultiplexedConnection,
) -> Result<Vec<u16>, BackplaneError> {
    let keys = &shared.keys;
    let (alive, dead) = live_nodes(connection, keys).await?;
    if !dead.is_empty() {
        // Best effort: a node that comes back registers itself again.
        let _ = redis::cmd("SREM")
            .arg(keys.nodes())
            .arg(&dead)
            .exec_async(connection)
            .await;
    }
    Ok(alive
        .into_iter()
        .filter(|node| *node != shared.node)
        .collect())
}

/// The views of `group` of each node of `nodes`.
pub(crate) async fn read_views(
    shared: &Shared,
    connection: &mut MultiplexedConnection,
    group: &str,
    nodes: &[u16],
) -> Result<Vec<(u16, View)>, RedisError> {
    if nodes.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for node in nodes {
        pipe.cmd("HGETALL").arg(shared.keys.members(*node, group));
    }
    let hashes: Vec<Vec<(String, String)>> = pipe.query_async(connection).await?;
    Ok(nodes
        .iter()
        .zip(hashes)
        .map(|(node, fields)| (*node, View::parse(*node, fields)))
        .collect())
}

/// A node's liveness token and one of its membership hashes, as read.
type OwnedHash = (Option<String>, Vec<(String, String)>);

/// The views of `group` of each node of `nodes`, each with the token of
/// the process that holds the node id now (`None`: no live process), read
/// together (one transaction): a view read belongs to that process.
pub(crate) async fn read_owned_views(
    shared: &Shared,
    connection: &mut MultiplexedConnection,
    group: &str,
    nodes: &[u16],
) -> Result<Vec<(u16, Option<String>, View)>, RedisError> {
    if nodes.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    pipe.atomic();
    for node in nodes {
        pipe.cmd("GET").arg(shared.keys.node(*node));
        pipe.cmd("HGETALL").arg(shared.keys.members(*node, group));
    }
    // Each node's two replies, a pair.
    let replies: Vec<OwnedHash> = pipe.query_async(connection).await?;
    let views = nodes
        .iter()
        .zip(replies)
        .map(|(node, (token, fields))| (*node, token, View::parse(*node, fields)))
        .collect();
    Ok(views)
}

/// The token of the process that holds each node id of `nodes` now
/// (`None`: none, the node is dead).
pub(crate) async fn node_tokens(
    shared: &Shared,
    connection: &mut MultiplexedConnection,
    nodes: &[u16],
) -> Result<Vec<(u16, Option<String>)>, RedisError> {
    if nodes.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for node in nodes {
        pipe.cmd("GET").arg(shared.keys.node(*node));
    }
    let tokens: Vec<Option<String>> = pipe.query_async(connection).await?;
    Ok(nodes.iter().copied().zip(tokens).collect())
}

/// The other nodes' members of `group` as the mirror holds them, once it
/// has read them: waits for that first read, for at most the response
/// timeout (`None` then).
async fn mirrored(shared: &Shared, group: &str) -> Option<Vec<Member>> {
    let deadline = tokio::time::Instant::now() + shared.config.response_timeout;
    loop {
        // Created before the check: a read that ends in between wakes it.
        let loaded = shared.presence_loaded.notified();
        if let Some(members) = lock(&shared.mirror).members(group) {
            return Some(members);
        }
        if tokio::time::timeout_at(deadline, loaded).await.is_err() {
            return None;
        }
    }
}

/// The members of `group` on every live node but this one, read from Redis.
async fn remote_presence(
    shared: &Shared,
    connection: &mut MultiplexedConnection,
    group: &str,
) -> Result<Vec<Member>, BackplaneError> {
    let others = other_live_nodes(shared, connection).await?;
    let views = read_views(shared, connection, group, &others)
        .await
        .map_err(unavailable)?;
    Ok(views.iter().flat_map(|(_, view)| view.members()).collect())
}

/// Takes `name` for a claim (`ARGV[1]`, `id|node|token|generation`, the
/// generation also in `ARGV[4]`) of the holder `ARGV[3]` (`id|node|token`)
/// unless a live holder other than this one has it: the holder's node key
/// (`ARGV[2]` and the node) must still carry the token it was claimed
/// under. The same holder's earlier claim (a lower generation) is replaced
/// by this one; a later one is left in place (this claim came late, and
/// its caller finds it superseded). A value of the form before
/// generations, `id|node|token`, is read too. The one key declared is
/// `KEYS[1]`, the name's; the holder's node key is read too (see
/// docs/SCALING.md on Redis Cluster).
const CLAIM_NAME: &str = r"
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then return 1 end
if current then
  local holder, node, token, generation =
    string.match(current, '^(%d+|(%d+)|(.*))|(%d+)$')
  if not holder then
    holder, node, token = string.match(current, '^(%d+|(%d+)|(.*))$')
  end
  if node and holder == ARGV[3] then
    if generation and tonumber(generation) > tonumber(ARGV[4]) then return 1 end
  elseif node and redis.call('GET', ARGV[2] .. node) == token then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[1])
return 1
";

/// Deletes a name key if it still holds this exact claim (holder and
/// generation): a late release never frees a later claim.
const RELEASE_NAME: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
";

/// Claims `name` in Redis for the connection `id` of this node, as its
/// claim `generation`.
pub(crate) async fn claim_name(
    shared: &Shared,
    connection: &mut MultiplexedConnection,
    name: &str,
    id: ConnectionId,
    generation: u64,
) -> Result<bool, RedisError> {
    let claimed: i64 = redis::cmd("EVAL")
        .arg(CLAIM_NAME)
        .arg(1)
        .arg(shared.keys.name(name))
        .arg(shared.name_value(id, generation))
        .arg(shared.keys.node_prefix())
        .arg(shared.name_holder(id))
        .arg(generation)
        .query_async(connection)
        .await?;
    Ok(claimed == 1)
}

/// Frees `name` in Redis if the connection `id` of this node holds it
/// under the claim `generation`.
pub(crate) async fn release_name(
    shared: &Shared,
    connection: &mut MultiplexedConnection,
    name: &str,
    id: ConnectionId,
    generation: u64,
) -> Result<(), RedisError> {
    redis::cmd("EVAL")
        .arg(RELEASE_NAME)
        .arg(1)
        .arg(shared.keys.name(name))
        .arg(shared.name_value(id, generation))
        .exec_async(connection)
        .await
}

pub(crate) fn unavailable(error: RedisError) -> BackplaneError {
    BackplaneError::Unavailable(error.to_string())
}
