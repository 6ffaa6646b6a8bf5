//! Fan-out: one broadcast reaching every member of a group of 1,000
//! connections (`--fanout-members` sets another count, e.g. 10,000). A broadcaster sends one broadcast at a time and waits until
//! every member has received it; the figures are deliveries per second and
//! the time from sending a broadcast to its last delivery.
//!
//! Members are raw sockets that join (Ternio: a `JoinGroup` request frame;
//! raw: an `S` frame), wait for the answer, then only count frames, so the
//! harness's cost per delivery is the same for both servers. The
//! broadcaster is `ternio-client` for Ternio and a raw socket for raw.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use bytes::Bytes;
use hdrhistogram::Histogram;
use tokio::net::TcpStream;
use tokio::runtime::Runtime;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::child::ServerChild;
use crate::participants::raw_tcp::{self, FrameCounter};
use crate::participants::ternio::{self, Broadcast, BroadcastReply, JoinGroup};
use crate::participants::{Participant, ServerKind};
use crate::results::LatencyFigures;
use crate::window::{Load, Window, counted_window};
use crate::workload::{payload, run_on};

/// The group every member joins.
const GROUP: &str = "bench";
/// Payload bytes of each broadcast.
pub const FANOUT_SIZE: usize = 64;
/// How long one broadcast may take to reach everyone.
const ROUND_LIMIT: Duration = Duration::from_secs(10);

/// Whose broadcast.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FanoutTarget {
    /// The raw fan-out server.
    RawTcp,
    /// Ternio's hub, over TCP.
    TernioTcp,
}

impl FanoutTarget {
    /// Every target, in report order.
    pub const ALL: [FanoutTarget; 2] = [FanoutTarget::RawTcp, FanoutTarget::TernioTcp];

    /// Its name in the results.
    pub fn name(self) -> &'static str {
        self.participant().name()
    }

    /// The participant it belongs to (for `--only`).
    pub fn participant(self) -> Participant {
        match self {
            FanoutTarget::RawTcp => Participant::RawTcp,
            FanoutTarget::TernioTcp => Participant::TernioTcp,
        }
    }

    /// The server child it needs.
    pub fn server(self) -> ServerKind {
        match self {
            FanoutTarget::RawTcp => ServerKind::RawTcpFanout,
            FanoutTarget::TernioTcp => ServerKind::Echo(Participant::TernioTcp),
        }
    }
}

/// What the members have received, and who to wake when a round completes.
#[derive(Default)]
struct Deliveries {
    count: AtomicU64,
    goal: AtomicU64,
    reached: Notify,
}

/// Who sends the broadcasts.
enum Broadcaster {
    Raw(FrameCounter, Vec<u8>),
    Ternio(ternio_client::Client, Broadcast),
}

impl Broadcaster {
    /// Sends one broadcast; returns how many members the server queued it for.
    async fn broadcast(&mut self) -> Result<u32> {
        match self {
            Broadcaster::Raw(socket, frame) => {
                socket.send(frame).await?;
                let answer = socket.next_frame().await?;
                if answer.len() != 9 || answer[4] != b'A' {
                    bail!("unexpected answer from the raw fan-out server");
                }
                Ok(u32::from_le_bytes([
                    answer[5], answer[6], answer[7], answer[8],
                ]))
            }
            Broadcaster::Ternio(client, request) => {
                let reply: BroadcastReply = client.request_async(&*request).await?;
                Ok(reply.queued)
            }
        }
    }
}

/// The broadcasts of a fan-out cell, as a counted window sees them.
struct Broadcasts<'a, T> {
    broadcaster: &'a JoinHandle<T>,
    /// Whether the broadcaster times its rounds.
    measuring: &'a AtomicBool,
    deliveries: &'a Deliveries,
}

impl<T> Load for Broadcasts<'_, T> {
    /// Deliveries to the members so far.
    fn count(&self) -> u64 {
        self.deliveries.count.load(Ordering::Relaxed)
    }

    fn check_running(&self) -> Result<()> {
        if self.broadcaster.is_finished() {
            bail!("the broadcaster stopped during the warm-up");
        }
        Ok(())
    }

    fn timing(&self, on: bool) {
        self.measuring.store(on, Ordering::Relaxed);
    }
}

/// Opens `members` member connections, then broadcasts one at a time:
/// `warmup`, then deliveries counted over `window`.
pub fn run(
    runtime: &Runtime,
    child: &mut ServerChild,
    target: FanoutTarget,
    members: usize,
    warmup: Duration,
    window: Duration,
) -> Result<(Window, LatencyFigures)> {
    let addr = child.endpoint.addr;
    let deliveries = Arc::new(Deliveries::default());
    deliveries.goal.store(u64::MAX, Ordering::Relaxed);
    let readers = run_on(
        runtime,
        Duration::from_secs(120),
        join_members(target, addr, members, Arc::clone(&deliveries)),
    )?;

    let stop = Arc::new(AtomicBool::new(false));
    let measuring = Arc::new(AtomicBool::new(false));
    let message = payload(FANOUT_SIZE, 7);
    let broadcaster = runtime.spawn(broadcast_rounds(
        target,
        addr,
        members,
        message,
        Arc::clone(&deliveries),
        Arc::clone(&stop),
        Arc::clone(&measuring),
    ));

    let load = Broadcasts {
        broadcaster: &broadcaster,
        measuring: &measuring,
        deliveries: &deliveries,
    };
    let measured = counted_window(child, &load, warmup, window);
    stop.store(true, Ordering::Relaxed);
    let histogram = runtime.block_on(async move {
        let histogram = tokio::time::timeout(ROUND_LIMIT * 2, broadcaster).await;
        for reader in readers {
            reader.abort();
        }
        histogram
            .context("the broadcaster did not stop")?
            .context("the broadcaster failed")?
    });
    let histogram = histogram?;
    Ok((measured?, LatencyFigures::from_histogram(&histogram)))
}

/// Opens `members` members, each joined to the group and then counting
/// the frames it receives into `deliveries` (waking the broadcaster when a
/// round's goal is reached).
async fn join_members(
    target: FanoutTarget,
    addr: SocketAddr,
    members: usize,
    deliveries: Arc<Deliveries>,
) -> Result<Vec<JoinHandle<Result<()>>>> {
    let join = match target {
        FanoutTarget::RawTcp => raw_tcp::frame(b"S"),
        FanoutTarget::TernioTcp => ternio::request_frame(
            &JoinGroup {
                group: GROUP.to_owned(),
            },
            1,
        ),
    };
    let mut readers = Vec::with_capacity(members);
    for _ in 0..members {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let mut member = FrameCounter::new(stream);
        member.send(&join).await?;
        member.next_frame().await.context("no answer to the join")?;
        let deliveries = Arc::clone(&deliveries);
        readers.push(tokio::spawn(async move {
            loop {
                let frames = member.count_more().await?;
                let total = deliveries.count.fetch_add(frames, Ordering::Relaxed) + frames;
                if total >= deliveries.goal.load(Ordering::Relaxed) {
                    deliveries.reached.notify_one();
                }
            }
        }));
    }
    Ok(readers)
}

/// Broadcasts `message` one at a time until `stop`, each round waiting
/// until every member has it; returns the rounds timed while `measuring`.
async fn broadcast_rounds(
    target: FanoutTarget,
    addr: SocketAddr,
    members: usize,
    message: Bytes,
    deliveries: Arc<Deliveries>,
    stop: Arc<AtomicBool>,
    measuring: Arc<AtomicBool>,
) -> Result<Histogram<u64>> {
    let mut broadcaster = connect_broadcaster(target, addr, message).await?;
    let mut histogram = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
    let mut goal = deliveries.count.load(Ordering::Relaxed);
    while !stop.load(Ordering::Relaxed) {
        goal += members as u64;
        deliveries.goal.store(goal, Ordering::Relaxed);
        let started = Instant::now();
        let queued = broadcaster.broadcast().await?;
        if queued as usize != members {
            bail!("a broadcast reached {queued} of {members} members");
        }
        while deliveries.count.load(Ordering::Relaxed) < goal {
            tokio::time::timeout(ROUND_LIMIT, deliveries.reached.notified())
                .await
                .context("a broadcast did not reach every member in time")?;
        }
        if measuring.load(Ordering::Relaxed) {
            histogram.saturating_record(started.elapsed().as_nanos() as u64);
        }
    }
    Ok(histogram)
}

async fn connect_broadcaster(
    target: FanoutTarget,
    addr: SocketAddr,
    message: Bytes,
) -> Result<Broadcaster> {
    Ok(match target {
        FanoutTarget::RawTcp => {
            let stream = TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            let mut body = Vec::with_capacity(1 + message.len());
            body.push(b'B');
            body.extend_from_slice(&message);
            Broadcaster::Raw(FrameCounter::new(stream), raw_tcp::frame(&body))
        }
        FanoutTarget::TernioTcp => Broadcaster::Ternio(
            ternio::connect_client(Participant::TernioTcp, addr).await?,
            Broadcast {
                group: GROUP.to_owned(),
                payload: message,
            },
        ),
    })
}
