//! Backplane: group broadcasts across two Ternio nodes joined by a Redis
//! backplane (`ternio-redis`), against the same broadcasts delivered on
//! one node.
//!
//! The harness starts one `redis-server` for the run, on a free loopback
//! port with no persistence (Debian's `redis-server` on the PATH, or the
//! program `TERNIO_REDIS_SERVER` names), and fresh server children for
//! every cell: node A and node B, each a `ternio-bench serve
//! ternio-backplane-node` process with its own `RedisBackplane`, under a
//! key prefix of the cell's own. A sender connected to node A sends
//! `Broadcast` requests whose 32-byte payload starts with the harness's
//! clock; node A's handler calls `Hub::broadcast_group`. Members are raw
//! sockets that join the group with a `JoinGroup` request, then decode
//! every pushed packet. Before the first broadcast, node A must count every
//! member in `Hub::cluster_members` (a member is reachable from another
//! node once its node has subscribed to the group).
//!
//! Three cases, the same server code in each:
//! - **standalone**: members on a `ternio-tcp` server without a backplane;
//! - **local**: members on node A, which has a backplane (and, knowing
//!   from Redis that node B has no member of the group, publishes nothing);
//! - **cross-node**: members on node B; every broadcast goes node A →
//!   Redis → node B.
//!
//! Throughput cells broadcast as fast as the members take them, at most
//! `backplane_ahead` broadcasts ahead of the members (so that no queue
//! overflows); the figure is deliveries per second over the window, and at
//! the end every broadcast must have reached every member. Latency cells
//! broadcast `backplane_rate` times a second and time every delivery of the
//! window, from the sender stamping it to the member decoding it: the
//! cross-node latency minus the local one is what crossing nodes adds.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail};
use bytes::{BufMut, Bytes, BytesMut};
use hdrhistogram::Histogram;
use ternio::Packet;
use ternio::protocol::Decode;
use ternio::protocol::frame::{self, Flags, FrameDecoder, Framing, Header};
use ternio_testkit::redis_server::{self, RedisServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::runtime::Runtime;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::child::{ServerChild, ServerReport};
use crate::participants::ternio::{
    Broadcast, BroadcastReply, GroupMembers, GroupMembersReply, JoinGroup, Pushed,
};
use crate::participants::{Participant, ServerKind};
use crate::plan::Plan;
use crate::results::{BackplaneFigures, BackplaneMeasure, LatencyFigures};
use crate::usage;
use crate::window::{Load, Servers, Window, counted_window};
use crate::workload::run_on;

/// Payload bytes of each broadcast (the sender's timestamp, then padding).
pub const BACKPLANE_SIZE: usize = 32;
/// The environment variable that gives a backplane node its Redis URL.
pub const REDIS_URL_VAR: &str = "TERNIO_BENCH_REDIS_URL";
/// The environment variable that gives a backplane node its key prefix.
pub const REDIS_PREFIX_VAR: &str = "TERNIO_BENCH_REDIS_PREFIX";
/// The environment variable that gives a backplane node its cluster secret.
pub const REDIS_SECRET_VAR: &str = "TERNIO_BENCH_CLUSTER_SECRET";

/// The group the members join.
const GROUP: &str = "bench";
/// How long the members may take to receive anything before a cell fails.
const STALL_LIMIT: Duration = Duration::from_secs(10);
/// How long opening the members and seeing them all may take.
const SETUP_LIMIT: Duration = Duration::from_secs(60);
/// Broadcasts written at once by the throughput sender.
const BATCH: u64 = 64;
/// Bytes after the timestamp in each payload.
const PAD: [u8; BACKPLANE_SIZE - 8] = [0x5A; BACKPLANE_SIZE - 8];

/// Cells started so far: each gets its own key prefix in Redis.
static CELLS: AtomicU64 = AtomicU64::new(0);

/// Where the members sit, relative to the sender's node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackplaneCase {
    /// One server without a backplane: the baseline.
    Standalone,
    /// On the sender's node, which has a backplane.
    Local,
    /// On the other node: through Redis.
    CrossNode,
}

impl BackplaneCase {
    /// Every case, in report order.
    pub const ALL: [BackplaneCase; 3] = [
        BackplaneCase::Standalone,
        BackplaneCase::Local,
        BackplaneCase::CrossNode,
    ];

    /// Its name in the results.
    pub fn name(self) -> &'static str {
        match self {
            BackplaneCase::Standalone => "standalone",
            BackplaneCase::Local => "local",
            BackplaneCase::CrossNode => "cross-node",
        }
    }

    /// The participant it belongs to (for `--only`).
    pub fn participant(self) -> Participant {
        Participant::TernioTcp
    }

    /// Whether it needs Redis.
    pub fn needs_redis(self) -> bool {
        self != BackplaneCase::Standalone
    }
}

/// The run's `redis-server`, killed when dropped.
pub struct Redis {
    server: RedisServer,
    version: String,
}

impl Redis {
    /// Whether a `redis-server` can run here: starts one and stops it.
    /// The error says what to install.
    pub fn check() -> std::result::Result<(), String> {
        RedisServer::try_start().map(drop)
    }

    /// Starts one on a free loopback port.
    pub fn start() -> Result<Self> {
        let server = RedisServer::try_start().map_err(|error| anyhow!(error))?;
        let version = std::process::Command::new(redis_server::program())
            .arg("--version")
            .output()
            .ok()
            .and_then(|output| {
                String::from_utf8_lossy(&output.stdout)
                    .split_whitespace()
                    .find_map(|field| field.strip_prefix("v=").map(str::to_owned))
            })
            .unwrap_or_else(|| "?".to_owned());
        Ok(Self { server, version })
    }

    /// Its CPU time so far.
    fn cpu(&self) -> Option<Duration> {
        usage::process_cpu_time(self.server.pid()?)
    }
}

/// What one cell measured.
pub struct Measured {
    /// Deliveries in the window, with both nodes' and the harness's costs.
    pub window: Window,
    /// Every delivery of the window, timed (latency cells).
    pub latency: Option<LatencyFigures>,
    /// The backplane's own figures.
    pub figures: BackplaneFigures,
    /// What else the report should say.
    pub notes: Vec<String>,
}

/// The server children of one cell.
struct Nodes {
    /// Node A: the sender's.
    sender: ServerChild,
    /// Node B (none in the standalone case).
    other: Option<ServerChild>,
}

/// A cluster secret for one cell's two nodes: 32 hex digits from the
/// standard library's randomly seeded hasher (the bench's loopback cluster
/// needs no more).
fn cluster_secret() -> String {
    use std::hash::{BuildHasher, RandomState};
    let state = RandomState::new();
    format!("{:016x}{:016x}", state.hash_one(1u8), state.hash_one(2u8))
}

impl Nodes {
    fn start(case: BackplaneCase, redis: Option<&Redis>) -> Result<Self> {
        let Some(redis) = redis.filter(|_| case.needs_redis()) else {
            return Ok(Self {
                sender: ServerChild::spawn(ServerKind::Echo(Participant::TernioTcp), None)?,
                other: None,
            });
        };
        let url = redis.server.url();
        let prefix = format!(
            "ternio-bench-{}-{}",
            std::process::id(),
            CELLS.fetch_add(1, Ordering::Relaxed)
        );
        let secret = cluster_secret();
        let env = [
            (REDIS_URL_VAR, url.as_str()),
            (REDIS_PREFIX_VAR, prefix.as_str()),
            (REDIS_SECRET_VAR, secret.as_str()),
        ];
        let sender = ServerChild::spawn_with_env(ServerKind::BackplaneNode, None, &env)?;
        let other = ServerChild::spawn_with_env(ServerKind::BackplaneNode, None, &env)?;
        Ok(Self {
            sender,
            other: Some(other),
        })
    }

    /// Where the members connect.
    fn members_addr(&self, case: BackplaneCase) -> SocketAddr {
        match (&self.other, case) {
            (Some(other), BackplaneCase::CrossNode) => other.endpoint.addr,
            _ => self.sender.endpoint.addr,
        }
    }

    fn reset(&mut self) -> Result<()> {
        self.sender.reset()?;
        if let Some(other) = &mut self.other {
            other.reset()?;
        }
        Ok(())
    }

    /// Both nodes' usage since `reset`, added up.
    fn report(&mut self) -> Result<ServerReport> {
        let mut report = self.sender.report()?;
        if let Some(other) = &mut self.other {
            let more = other.report()?;
            report.cpu += more.cpu;
            report.alloc.count += more.alloc.count;
            report.alloc.bytes += more.alloc.bytes;
            report.live_bytes += more.live_bytes;
            report.connections = match (report.connections, more.connections) {
                (Some(one), Some(two)) => Some(one + two),
                (one, two) => one.or(two),
            };
            report.backplane_dropped += more.backplane_dropped;
        }
        Ok(report)
    }
}

/// A cell's nodes and the run's `redis-server`, as a counted window sees
/// them: Redis's CPU time is read after the nodes' reset and after their
/// report.
struct NodesAndRedis<'a> {
    nodes: &'a mut Nodes,
    redis: Option<&'a Redis>,
    redis_before: Option<Duration>,
    redis_after: Option<Duration>,
}

impl Servers for NodesAndRedis<'_> {
    fn reset(&mut self) -> Result<()> {
        self.nodes.reset()?;
        self.redis_before = self.redis.and_then(Redis::cpu);
        Ok(())
    }

    fn report(&mut self) -> Result<ServerReport> {
        let report = self.nodes.report()?;
        self.redis_after = self.redis.and_then(Redis::cpu);
        Ok(report)
    }
}

/// The sender's broadcasts, as a counted window sees them.
struct Sending<'a, T> {
    task: &'a JoinHandle<T>,
    deliveries: &'a Deliveries,
    measure: BackplaneMeasure,
}

impl<T> Load for Sending<'_, T> {
    /// Deliveries to the members so far.
    fn count(&self) -> u64 {
        self.deliveries.count.load(Ordering::Relaxed)
    }

    fn check_running(&self) -> Result<()> {
        if self.task.is_finished() {
            bail!("the sender stopped during the warm-up");
        }
        Ok(())
    }

    /// The members time deliveries inside the window of a latency cell.
    fn timing(&self, on: bool) {
        let on = on && self.measure == BackplaneMeasure::Latency;
        self.deliveries.timing.store(on, Ordering::Relaxed);
    }
}

/// What the members have received.
struct Deliveries {
    count: AtomicU64,
    /// Woken when deliveries arrive (the throughput sender waits on it).
    progress: Notify,
    /// Whether members time what they receive.
    timing: AtomicBool,
    /// The clock the sender stamps and the members read.
    epoch: Instant,
}

/// A raw connection speaking Ternio's TCP framing.
struct Connection {
    stream: TcpStream,
    input: BytesMut,
    decoder: FrameDecoder,
}

impl Connection {
    async fn open(addr: SocketAddr) -> Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            input: BytesMut::with_capacity(64 * 1024),
            decoder: FrameDecoder::default(),
        })
    }

    /// Reads whatever has arrived; fails at the end of the stream.
    async fn read_more(&mut self) -> Result<()> {
        read_more(&mut self.stream, &mut self.input).await
    }

    /// Sends `request` with id `id` and returns the body of its answer.
    async fn call<P: Packet>(&mut self, request: &P, id: u32) -> Result<Bytes> {
        self.stream
            .write_all(&crate::participants::ternio::request_frame(request, id))
            .await?;
        loop {
            while let Some(frame) = self.decoder.decode(&mut self.input)? {
                if frame.header.flags.is_response() && frame.header.request_id == id {
                    if frame.header.flags.is_error() {
                        bail!("the node answered request {id} with an error");
                    }
                    return Ok(frame.body);
                }
            }
            self.read_more().await?;
        }
    }
}

async fn read_more<R: AsyncReadExt + Unpin>(stream: &mut R, input: &mut BytesMut) -> Result<()> {
    if input.capacity() - input.len() < 16 * 1024 {
        input.reserve(64 * 1024);
    }
    if stream.read_buf(input).await? == 0 {
        bail!("the node closed the connection");
    }
    Ok(())
}

/// Opens a member: connects to `addr` and joins the group.
async fn join(addr: SocketAddr) -> Result<Connection> {
    let mut member = Connection::open(addr).await?;
    member
        .call(
            &JoinGroup {
                group: GROUP.to_owned(),
            },
            1,
        )
        .await
        .context("a member could not join")?;
    Ok(member)
}

/// Counts (and, while timing, times) every push a member receives until
/// told to stop.
async fn receive(
    mut member: Connection,
    deliveries: Arc<Deliveries>,
    mut stop: watch::Receiver<bool>,
) -> Result<Histogram<u64>> {
    let mut latencies = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
    loop {
        tokio::select! {
            read = member.read_more() => read.context("a member lost its connection")?,
            _ = stop.changed() => return Ok(latencies),
        }
        let timing = deliveries.timing.load(Ordering::Relaxed);
        let mut count = 0;
        while let Some(frame) = member.decoder.decode(&mut member.input)? {
            if frame.header.opcode != Pushed::OPCODE {
                continue;
            }
            if timing {
                let now = deliveries.epoch.elapsed().as_nanos() as u64;
                let pushed = Pushed::decode_body(&frame.body)?;
                let stamp = pushed
                    .payload
                    .first_chunk::<8>()
                    .context("a broadcast without its timestamp")?;
                latencies.saturating_record(now.saturating_sub(u64::from_le_bytes(*stamp)).max(1));
            }
            count += 1;
        }
        if count > 0 {
            deliveries.count.fetch_add(count, Ordering::Relaxed);
            deliveries.progress.notify_one();
        }
    }
}

/// Node A's answers to the broadcasts.
#[derive(Default)]
struct Replies {
    /// Local members that missed a broadcast (their queue was full).
    missed: AtomicU64,
    /// Broadcasts answered with an error.
    errors: AtomicU64,
}

/// Reads node A's answers until the connection closes (or is aborted).
async fn read_replies(
    mut read: OwnedReadHalf,
    mut input: BytesMut,
    replies: Arc<Replies>,
) -> Result<()> {
    let mut decoder = FrameDecoder::default();
    loop {
        while let Some(frame) = decoder.decode(&mut input)? {
            if !frame.header.flags.is_response() {
                continue;
            }
            if frame.header.flags.is_error() {
                replies.errors.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let reply = BroadcastReply::decode_body(&frame.body)?;
            replies
                .missed
                .fetch_add(u64::from(reply.missed), Ordering::Relaxed);
        }
        read_more(&mut read, &mut input).await?;
    }
}

/// The sender's side of its connection to node A.
struct Sender {
    write: OwnedWriteHalf,
    request: Broadcast,
    out: BytesMut,
    id: u32,
    epoch: Instant,
}

impl Sender {
    /// Encodes one broadcast, stamped now, after what `out` holds.
    fn encode(&mut self) -> Result<()> {
        let mut payload = BytesMut::with_capacity(BACKPLANE_SIZE);
        payload.put_u64_le(self.epoch.elapsed().as_nanos() as u64);
        payload.put_slice(&PAD);
        self.request.payload = payload.freeze();
        self.id = self.id.wrapping_add(1).max(1);
        frame::write_frame(
            &mut self.out,
            Framing::LengthPrefixed,
            Header::new(Broadcast::OPCODE, Flags::NONE, self.id),
            &self.request,
            usize::MAX,
        )?;
        Ok(())
    }

    /// Writes what `out` holds.
    async fn flush(&mut self) -> Result<()> {
        self.write.write_all(&self.out).await?;
        self.out.clear();
        Ok(())
    }
}

/// Broadcasts as fast as the members take them, at most `ahead` ahead of
/// them, until `stop`; returns how many it sent.
async fn flood(
    mut sender: Sender,
    deliveries: Arc<Deliveries>,
    members: u64,
    ahead: u64,
    stop: Arc<AtomicBool>,
) -> Result<u64> {
    let mut sent = 0;
    while !stop.load(Ordering::Relaxed) {
        let allowed = deliveries.count.load(Ordering::Relaxed) / members + ahead;
        if sent >= allowed {
            tokio::time::timeout(STALL_LIMIT, deliveries.progress.notified())
                .await
                .map_err(|_| {
                    anyhow!(
                        "the members received nothing for {STALL_LIMIT:?} ({} of {} deliveries)",
                        deliveries.count.load(Ordering::Relaxed),
                        sent * members
                    )
                })?;
            continue;
        }
        let batch = (allowed - sent).min(BATCH);
        for _ in 0..batch {
            sender.encode()?;
        }
        sender.flush().await?;
        sent += batch;
    }
    Ok(sent)
}

/// Broadcasts `rate` times a second until `stop` (missed ticks are
/// skipped, not caught up in a burst); returns how many it sent.
async fn paced(mut sender: Sender, rate: u64, stop: Arc<AtomicBool>) -> Result<u64> {
    let mut ticker = tokio::time::interval(Duration::from_nanos(1_000_000_000 / rate.max(1)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut sent = 0;
    while !stop.load(Ordering::Relaxed) {
        ticker.tick().await;
        sender.encode()?;
        sender.flush().await?;
        sent += 1;
    }
    Ok(sent)
}

/// Asks node A until it counts `members` members in the group (on every
/// node), for at most 30 s.
async fn await_members(control: &mut Connection, members: usize) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut id = 0u32;
    loop {
        id = id.wrapping_add(1).max(1);
        let request = GroupMembers {
            group: GROUP.to_owned(),
        };
        let body = control.call(&request, id).await?;
        let seen = GroupMembersReply::decode_body(&body)?.members as usize;
        if seen >= members {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("node A counts {seen} of {members} members after 30 s");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Runs one cell: fresh nodes, `members` members, then the measure.
pub fn run(
    runtime: &Runtime,
    redis: Option<&Redis>,
    case: BackplaneCase,
    measure: BackplaneMeasure,
    members: usize,
    plan: &Plan,
) -> Result<Measured> {
    if case.needs_redis() && redis.is_none() {
        bail!("the {} case needs a redis-server", case.name());
    }
    let mut nodes = Nodes::start(case, redis)?;
    let deliveries = Arc::new(Deliveries {
        count: AtomicU64::new(0),
        progress: Notify::new(),
        timing: AtomicBool::new(false),
        epoch: Instant::now(),
    });
    let (stop_members, stopped) = watch::channel(false);
    let (receivers, control) = open_members(runtime, &nodes, case, members, &deliveries, stopped)?;
    let stop = Arc::new(AtomicBool::new(false));
    let shape = Shape { measure, members };
    let (task, reader, replies) = start_sender(runtime, control, &deliveries, shape, plan, &stop);

    let mut servers = NodesAndRedis {
        nodes: &mut nodes,
        redis,
        redis_before: None,
        redis_after: None,
    };
    let load = Sending {
        task: &task,
        deliveries: &deliveries,
        measure,
    };
    let measured = counted_window(&mut servers, &load, plan.warmup, plan.window);
    let redis_cpu = match (servers.redis_before, servers.redis_after) {
        (Some(before), Some(after)) if case.needs_redis() => Some(after.saturating_sub(before)),
        _ => None,
    };
    stop.store(true, Ordering::Relaxed);

    let finished = runtime.block_on(finish(
        task,
        Arc::clone(&deliveries),
        members,
        receivers,
        stop_members,
        reader,
    ));
    drop(nodes);
    let latencies = finished?;
    let window = measured?;
    if replies.errors.load(Ordering::Relaxed) > 0 {
        bail!(
            "node A answered {} broadcasts with an error",
            replies.errors.load(Ordering::Relaxed)
        );
    }
    if window.ops == 0 {
        bail!("no delivery in the window");
    }
    let missed = replies.missed.load(Ordering::Relaxed);
    let redis = redis.filter(|_| case.needs_redis());
    measured_of(window, redis_cpu, &latencies, redis, missed, shape, plan)
}

/// What a cell's sender does: throughput or latency, to how many members.
#[derive(Clone, Copy)]
struct Shape {
    measure: BackplaneMeasure,
    members: usize,
}

/// Splits the control connection to node A: a task reads node A's
/// answers, another sends the broadcasts (flooding or paced, as `shape`
/// says) until `stop`. Returns the sender's task, the reader's, and the
/// answers it reads.
fn start_sender(
    runtime: &Runtime,
    control: Connection,
    deliveries: &Arc<Deliveries>,
    shape: Shape,
    plan: &Plan,
    stop: &Arc<AtomicBool>,
) -> (
    JoinHandle<Result<u64>>,
    JoinHandle<Result<()>>,
    Arc<Replies>,
) {
    let Connection { stream, input, .. } = control;
    let (read, write) = stream.into_split();
    let replies = Arc::new(Replies::default());
    let reader = runtime.spawn(read_replies(read, input, Arc::clone(&replies)));
    let sender = Sender {
        write,
        request: Broadcast {
            group: GROUP.to_owned(),
            payload: Bytes::new(),
        },
        out: BytesMut::with_capacity(BATCH as usize * 64),
        id: 0,
        epoch: deliveries.epoch,
    };
    let task = match shape.measure {
        BackplaneMeasure::Throughput => runtime.spawn(flood(
            sender,
            Arc::clone(deliveries),
            shape.members as u64,
            plan.backplane_ahead,
            Arc::clone(stop),
        )),
        BackplaneMeasure::Latency => {
            runtime.spawn(paced(sender, plan.backplane_rate, Arc::clone(stop)))
        }
    };
    (task, reader, replies)
}

/// The members' tasks, each returning the deliveries it timed.
type Receivers = Vec<JoinHandle<Result<Histogram<u64>>>>;

/// Opens `members` members where `case` puts them (each counting into
/// `deliveries` until `stopped`), then a control connection to node A,
/// which it returns once node A counts every member.
fn open_members(
    runtime: &Runtime,
    nodes: &Nodes,
    case: BackplaneCase,
    members: usize,
    deliveries: &Arc<Deliveries>,
    stopped: watch::Receiver<bool>,
) -> Result<(Receivers, Connection)> {
    let members_addr = nodes.members_addr(case);
    let sender_addr = nodes.sender.endpoint.addr;
    let member_deliveries = Arc::clone(deliveries);
    run_on(runtime, SETUP_LIMIT, async move {
        let mut receivers = Vec::with_capacity(members);
        for _ in 0..members {
            let member = join(members_addr).await?;
            receivers.push(tokio::spawn(receive(
                member,
                Arc::clone(&member_deliveries),
                stopped.clone(),
            )));
        }
        let mut control = Connection::open(sender_addr).await?;
        await_members(&mut control, members).await?;
        Ok((receivers, control))
    })
}

/// Waits for the sender to stop, then until every broadcast it sent has
/// reached every member, once; stops the members and returns what they
/// timed.
async fn finish(
    task: JoinHandle<Result<u64>>,
    deliveries: Arc<Deliveries>,
    members: usize,
    receivers: Receivers,
    stop_members: watch::Sender<bool>,
    reader: JoinHandle<Result<()>>,
) -> Result<Histogram<u64>> {
    let sent = tokio::time::timeout(STALL_LIMIT * 2, task)
        .await
        .context("the sender did not stop")?
        .context("the sender panicked")??;
    let expected = sent * members as u64;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let count = deliveries.count.load(Ordering::Relaxed);
        if count == expected {
            break;
        }
        if count > expected {
            bail!("{count} deliveries of {sent} broadcasts to {members} members: duplicates");
        }
        if Instant::now() > deadline {
            bail!(
                "{count} of {expected} deliveries arrived ({sent} broadcasts to {members} members)"
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stop_members.send_replace(true);
    let mut latencies = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
    for receiver in receivers {
        latencies.add(receiver.await.context("a member panicked")??)?;
    }
    reader.abort();
    Ok(latencies)
}

/// The cell's figures from its window, Redis's CPU time over it, the
/// members' latencies, the run's Redis (when the case uses it) and the
/// local members' missed broadcasts.
fn measured_of(
    window: Window,
    redis_cpu: Option<Duration>,
    latencies: &Histogram<u64>,
    redis: Option<&Redis>,
    missed: u64,
    shape: Shape,
    plan: &Plan,
) -> Result<Measured> {
    let Shape { measure, members } = shape;
    let broadcasts = window.ops as f64 / members as f64;
    let figures = BackplaneFigures {
        measure,
        broadcasts_per_sec: window.rate() / members as f64,
        paced_rate: (measure == BackplaneMeasure::Latency).then_some(plan.backplane_rate),
        redis_cpu_us_per_broadcast: redis_cpu.map(|cpu| cpu.as_secs_f64() * 1e6 / broadcasts),
        backplane_dropped: window.server.backplane_dropped,
    };
    let latency = match measure {
        BackplaneMeasure::Latency if latencies.is_empty() => bail!("no delivery was timed"),
        BackplaneMeasure::Latency => Some(LatencyFigures::from_histogram(latencies)),
        BackplaneMeasure::Throughput => None,
    };
    let mut notes = Vec::new();
    if let Some(redis) = redis {
        notes.push(format!("redis-server {}", redis.version));
    }
    if missed > 0 {
        notes.push(format!("local members that missed a broadcast: {missed}"));
    }
    if figures.backplane_dropped > 0 {
        notes.push(format!(
            "backplane messages dropped: {}",
            figures.backplane_dropped
        ));
    }
    Ok(Measured {
        window,
        latency,
        figures,
        notes,
    })
}
