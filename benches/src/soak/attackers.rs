//! The attackers, each kind bounded in count, each connection from its own
//! range of 127.0.0.0/8 (at most [`PER_ADDRESS`] connections per address):
//!
//! - slow-frame: a TCP length prefix announcing 1,000,000 bytes, then one
//!   byte every 2 s;
//! - upgrade-flood: TCP to the WebSocket port, all opened at once; a third
//!   trickle the HTTP upgrade a byte every 2 s, a third send all of it but
//!   the final blank line, a third send nothing;
//! - never-reading: `Echo` requests of 64 KiB written as fast as the server
//!   takes them (at most 16 MiB a connection), answers never read;
//! - handshake-flood: connect, one NK `HANDSHAKE`, read the answer, close,
//!   again at once (100 ms pause after a refusal).
//!
//! Each connection is opened again 1 s after the server closes it. What is
//! counted: connections opened, connect failures, connections the server
//! closed and how long they had lived, connections still open at the end.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use hdrhistogram::Histogram;
use serde::Serialize;
use ternio::protocol::frame::{self, Flags, Framing, Header};
use ternio::protocol::secure::Initiator;
use ternio::protocol::system;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::clients::{connect_from, source_ip, spread};
use crate::participants::ternio::Echo;

/// Attacker connections per source address.
pub const PER_ADDRESS: usize = 50;
/// Payload of a never-reading client's requests.
const NEVER_READING_PAYLOAD: usize = 64 * 1024;
/// Requests a never-reading connection writes at most.
const NEVER_READING_REQUESTS: usize = 256;
/// Pause before opening a connection again.
const REOPEN_PAUSE: Duration = Duration::from_secs(1);

/// A kind of attacker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A frame trickled a byte every 2 s.
    SlowFrame,
    /// WebSocket upgrades trickled, left unfinished, or never started.
    UpgradeFlood,
    /// Large requests, answers never read.
    NeverReading,
    /// Handshakes as fast as the server answers them.
    HandshakeFlood,
}

impl Kind {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::SlowFrame => "slow-frame",
            Kind::UpgradeFlood => "upgrade-flood",
            Kind::NeverReading => "never-reading",
            Kind::HandshakeFlood => "handshake-flood",
        }
    }

    /// The second byte of its source addresses (127.N.x.y).
    fn address_range(self) -> u8 {
        match self {
            Kind::SlowFrame => 21,
            Kind::UpgradeFlood => 22,
            Kind::NeverReading => 23,
            Kind::HandshakeFlood => 24,
        }
    }
}

/// What one kind of attacker saw.
pub struct AttackStats {
    /// Which kind.
    pub kind: Kind,
    /// Concurrent connections it keeps.
    pub connections: usize,
    /// Connections opened.
    pub opened: AtomicU64,
    /// Connect attempts that failed.
    pub connect_failures: AtomicU64,
    /// Connections the server closed (or reset).
    pub closed_by_server: AtomicU64,
    /// Handshakes answered (handshake-flood), requests written (never-reading).
    pub work: AtomicU64,
    /// How long (ms) each connection the server closed had lived.
    pub lifetimes: Mutex<Histogram<u64>>,
}

impl AttackStats {
    fn new(kind: Kind, connections: usize) -> Self {
        Self {
            kind,
            connections,
            opened: AtomicU64::new(0),
            connect_failures: AtomicU64::new(0),
            closed_by_server: AtomicU64::new(0),
            work: AtomicU64::new(0),
            lifetimes: Mutex::new(
                Histogram::new_with_bounds(1, 24 * 3_600_000, 3).expect("valid histogram bounds"),
            ),
        }
    }

    fn closed(&self, opened: Instant) {
        self.closed_by_server.fetch_add(1, Ordering::Relaxed);
        let ms = opened.elapsed().as_millis() as u64;
        let _ = self
            .lifetimes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(ms.max(1));
    }

    /// Its figures now, `still_open` being the connections open at the end.
    pub fn figures(&self, still_open: u64) -> AttackFigures {
        let lifetimes = self.lifetimes.lock().unwrap_or_else(|e| e.into_inner());
        let seconds = |ms: u64| ms as f64 / 1000.0;
        let any = !lifetimes.is_empty();
        AttackFigures {
            kind: self.kind,
            connections: self.connections,
            opened: self.opened.load(Ordering::Relaxed),
            connect_failures: self.connect_failures.load(Ordering::Relaxed),
            closed_by_server: self.closed_by_server.load(Ordering::Relaxed),
            still_open,
            work: self.work.load(Ordering::Relaxed),
            closed_after_min_s: any.then(|| seconds(lifetimes.min())),
            closed_after_p50_s: any.then(|| seconds(lifetimes.value_at_quantile(0.5))),
            closed_after_max_s: any.then(|| seconds(lifetimes.max())),
        }
    }
}

/// One kind of attacker's figures, as written to the results.
#[derive(Debug, Clone, Serialize)]
pub struct AttackFigures {
    /// Which kind.
    pub kind: Kind,
    /// Concurrent connections it keeps.
    pub connections: usize,
    /// Connections opened.
    pub opened: u64,
    /// Connect attempts that failed.
    pub connect_failures: u64,
    /// Connections the server closed.
    pub closed_by_server: u64,
    /// Connections still open when the phase ended.
    pub still_open: u64,
    /// Handshakes answered, or requests written without reading.
    pub work: u64,
    /// Shortest life of a connection the server closed, s.
    pub closed_after_min_s: Option<f64>,
    /// Median life, s.
    pub closed_after_p50_s: Option<f64>,
    /// Longest life, s.
    pub closed_after_max_s: Option<f64>,
}

/// Where the attackers aim.
#[derive(Clone, Copy)]
pub struct Target {
    /// The TCP listener.
    pub tcp: SocketAddr,
    /// The WebSocket listener.
    pub ws: SocketAddr,
    /// The server's public key, for NK handshakes.
    pub public_key: [u8; 32],
}

/// Connections still open at the end, per kind.
#[derive(Default)]
pub struct OpenNow(pub [AtomicU64; 4]);

/// Starts `count` connections of `kind`; they run until `stop`.
pub fn spawn(
    kind: Kind,
    count: usize,
    target: Target,
    stop: watch::Receiver<bool>,
    open_now: Arc<OpenNow>,
) -> (Arc<AttackStats>, Vec<tokio::task::JoinHandle<()>>) {
    let stats = Arc::new(AttackStats::new(kind, count));
    let handshake_bodies: Arc<Vec<Bytes>> = Arc::new(if kind == Kind::HandshakeFlood {
        // A few first messages, replayed: the server's work per handshake
        // is the same, the attacker's is nothing.
        (0..16)
            .filter_map(|_| Initiator::new(Some(&target.public_key)).ok())
            .filter_map(|mut initiator| initiator.request_body().ok())
            .map(Bytes::from)
            .collect()
    } else {
        Vec::new()
    });
    let tasks = (0..count)
        .map(|index| {
            let stats = stats.clone();
            let stop = stop.clone();
            let open_now = open_now.clone();
            let bodies = handshake_bodies.clone();
            tokio::spawn(async move {
                attacker(kind, index, target, stats, stop, open_now, bodies).await;
            })
        })
        .collect();
    (stats, tasks)
}

/// Why a connection ended.
enum End {
    /// The server closed or reset it.
    Closed,
    /// The phase ended.
    Stopped,
    /// It did what it came for (a handshake answered): open another.
    Done,
}

async fn attacker(
    kind: Kind,
    index: usize,
    target: Target,
    stats: Arc<AttackStats>,
    mut stop: watch::Receiver<bool>,
    open_now: Arc<OpenNow>,
    bodies: Arc<Vec<Bytes>>,
) {
    let source = source_ip(kind.address_range(), index / PER_ADDRESS);
    let server = if kind == Kind::UpgradeFlood {
        target.ws
    } else {
        target.tcp
    };
    let slot = &open_now.0[kind as usize];
    let mut round = 0u64;
    while !*stop.borrow() {
        round += 1;
        let stream = tokio::select! {
            stream = tokio::time::timeout(Duration::from_secs(10), connect_from(source, server)) => stream,
            _ = stop.changed() => break,
        };
        let Ok(Ok(stream)) = stream else {
            stats.connect_failures.fetch_add(1, Ordering::Relaxed);
            pause(&mut stop, Duration::from_millis(100)).await;
            continue;
        };
        stats.opened.fetch_add(1, Ordering::Relaxed);
        slot.fetch_add(1, Ordering::Relaxed);
        let opened = Instant::now();
        let end = tokio::select! {
            end = behave(kind, index, round, stream, &stats, &bodies) => end,
            _ = stop.changed() => End::Stopped,
        };
        match end {
            End::Stopped => break,
            End::Closed => {
                slot.fetch_sub(1, Ordering::Relaxed);
                stats.closed(opened);
                let wait = if kind == Kind::HandshakeFlood {
                    Duration::from_millis(100)
                } else {
                    REOPEN_PAUSE.mul_f64(1.0 + spread(index as u64 ^ round << 20))
                };
                pause(&mut stop, wait).await;
            }
            End::Done => {
                slot.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

async fn pause(stop: &mut watch::Receiver<bool>, wait: Duration) {
    tokio::select! {
        _ = tokio::time::sleep(wait) => {}
        _ = stop.changed() => {}
    }
}

/// Sends `bytes`, one every 2 s, then waits; `Closed` when the server closes.
async fn trickle(stream: &mut TcpStream, bytes: &[u8]) -> End {
    let mut sink = [0u8; 512];
    let mut next = 0;
    loop {
        tokio::select! {
            read = stream.read(&mut sink) => match read {
                Ok(0) | Err(_) => return End::Closed,
                Ok(_) => {}
            },
            _ = tokio::time::sleep(Duration::from_secs(2)) => {
                if next < bytes.len() {
                    if stream.write_all(&bytes[next..next + 1]).await.is_err() {
                        return End::Closed;
                    }
                    next += 1;
                }
            }
        }
    }
}

/// Reads (and drops) until the server closes.
async fn wait_closed(stream: &mut TcpStream) -> End {
    let mut sink = [0u8; 512];
    loop {
        match stream.read(&mut sink).await {
            Ok(0) | Err(_) => return End::Closed,
            Ok(_) => {}
        }
    }
}

fn upgrade_request(ws: SocketAddr) -> String {
    format!(
        "GET /ws HTTP/1.1\r\nHost: {ws}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Protocol: {}\r\n\r\n",
        frame::WEBSOCKET_SUBPROTOCOL
    )
}

async fn behave(
    kind: Kind,
    index: usize,
    round: u64,
    mut stream: TcpStream,
    stats: &AttackStats,
    bodies: &[Bytes],
) -> End {
    match kind {
        Kind::SlowFrame => {
            let prefix = 1_000_000u32.to_le_bytes();
            if stream.write_all(&prefix).await.is_err() {
                return End::Closed;
            }
            trickle(&mut stream, &[0u8; 1_000_000 / 2]).await
        }
        Kind::UpgradeFlood => {
            let request = upgrade_request(stream.peer_addr().unwrap_or(([127, 0, 0, 1], 0).into()));
            match index % 3 {
                0 => trickle(&mut stream, request.as_bytes()).await,
                1 => {
                    let unfinished = &request.as_bytes()[..request.len() - 2];
                    if stream.write_all(unfinished).await.is_err() {
                        return End::Closed;
                    }
                    wait_closed(&mut stream).await
                }
                _ => wait_closed(&mut stream).await,
            }
        }
        Kind::NeverReading => {
            let payload = super::clients::spread(round).to_bits().to_le_bytes();
            let request = Echo {
                payload: payload.repeat(NEVER_READING_PAYLOAD / 8).into(),
            };
            let mut out = BytesMut::new();
            for id in 1..=NEVER_READING_REQUESTS as u32 {
                out.clear();
                if frame::write_frame(
                    &mut out,
                    Framing::LengthPrefixed,
                    Header::new(0x0001, Flags::NONE, id),
                    &request,
                    usize::MAX,
                )
                .is_err()
                {
                    break;
                }
                if stream.write_all(&out).await.is_err() {
                    return End::Closed;
                }
                stats.work.fetch_add(1, Ordering::Relaxed);
            }
            // Never read; a PING every 2 s keeps the connection busy and
            // finds out when the server has closed it (the write fails,
            // or blocks until it does).
            let mut ping = BytesMut::new();
            let _ = frame::write_frame(
                &mut ping,
                Framing::LengthPrefixed,
                Header::new(system::PING, Flags::NONE, u32::MAX),
                &system::Ping { value: 0 },
                usize::MAX,
            );
            loop {
                tokio::time::sleep(Duration::from_secs(2)).await;
                if stream.write_all(&ping).await.is_err() {
                    return End::Closed;
                }
            }
        }
        Kind::HandshakeFlood => {
            let Some(body) = bodies.get((index + round as usize) % bodies.len().max(1)) else {
                return End::Closed;
            };
            let mut out = BytesMut::new();
            let _ = frame::write_frame_with(
                &mut out,
                Framing::LengthPrefixed,
                Header::new(system::HANDSHAKE, Flags::NONE, 1),
                usize::MAX,
                |out| out.extend_from_slice(body),
            );
            if stream.write_all(&out).await.is_err() {
                return End::Closed;
            }
            let mut input = BytesMut::with_capacity(128);
            let answered = tokio::time::timeout(Duration::from_secs(10), async {
                loop {
                    if input.len() >= 4 {
                        let len =
                            u32::from_le_bytes([input[0], input[1], input[2], input[3]]) as usize;
                        if input.len() >= 4 + len {
                            let header = Header::parse(&input[4..]).ok()?;
                            return Some(
                                header.opcode == system::HANDSHAKE && !header.flags.is_error(),
                            );
                        }
                    }
                    match stream.read_buf(&mut input).await {
                        Ok(0) | Err(_) => return None,
                        Ok(_) => {}
                    }
                }
            })
            .await;
            // Close with a reset, as a flood would: no TIME_WAIT left on
            // this side to make the next bind scan the port range.
            let _ = stream.set_zero_linger();
            match answered {
                Ok(Some(true)) => {
                    stats.work.fetch_add(1, Ordering::Relaxed);
                    End::Done
                }
                _ => End::Closed,
            }
        }
    }
}
