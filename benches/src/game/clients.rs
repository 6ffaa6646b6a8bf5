//! The clients of `ternio-bench game`: the echoes and the rooms workload.

use std::collections::HashSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail};
use hdrhistogram::Histogram;
use ternio_client::{Client, ClientConfig, Route, SecureConfig, Subscription};
use tokio::net::UdpSocket;
use tokio::time::Instant;

use super::packets::{Echo, Echoed, JoinRoom, RoomSnapshot, Snapshot, StreamEcho, StreamSnapshot};
use super::{GameArgs, GameServer, RoomCounts, loopback_bytes};
use crate::usage;

/// An echo not back within this long is lost.
const ECHO_WAIT: Duration = Duration::from_millis(100);

/// One echo row: round trips in µs, and what was lost.
pub(super) struct EchoRow {
    pub(super) what: &'static str,
    pub(super) size: usize,
    pub(super) round_trips: Histogram<u64>,
    pub(super) lost: u64,
    /// The server child's CPU time per echo.
    pub(super) server_cpu: Duration,
}

/// How the rooms send their snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Variant {
    /// Unreliable, by datagram (every client bound a channel).
    Datagrams,
    /// Reliable, on the TCP stream, not compressed.
    Stream,
    /// Reliable, on the TCP stream, compressed from this many bytes.
    Compressed(usize),
}

impl Variant {
    /// The server child's `--reliable` argument.
    pub(super) fn reliable(self) -> Option<usize> {
        match self {
            Self::Datagrams => None,
            Self::Stream => Some(0),
            Self::Compressed(threshold) => Some(threshold),
        }
    }
}

/// One rooms row.
pub(super) struct RoomsRow {
    pub(super) variant: Variant,
    pub(super) clients: usize,
    pub(super) window: Duration,
    /// Snapshots received in the window, over all clients.
    pub(super) received: u64,
    /// Ticks a client missed between the first and last it saw.
    pub(super) lost: u64,
    /// Snapshots received twice.
    pub(super) duplicates: u64,
    /// From the tick's start on the server to the arrival, in µs.
    pub(super) lateness: Histogram<u64>,
    pub(super) server_cpu: Duration,
    pub(super) client_cpu: Duration,
    pub(super) loopback_bytes: u64,
    pub(super) counts: RoomCounts,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds")
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_micros() as u64)
}

/// A client with a secure session (Noise NN) to the child.
async fn secure_client(server: &GameServer) -> Result<Client> {
    let mut config = ClientConfig::default();
    config.secure = Some(SecureConfig::anonymous());
    config.push_buffer = 1024;
    Ok(Client::connect_tcp_with(server.tcp, config).await?)
}

/// The datagram echo, the raw UDP echo and the stream echo, at 32 B and
/// 1 KiB, `count` each.
pub(super) async fn echoes(server: &GameServer, count: usize) -> Result<Vec<EchoRow>> {
    let client = secure_client(server).await?;
    let bound = client.bind_datagrams().await?;
    if bound != server.udp {
        bail!(
            "the channel bound to {bound}, not the server's {}",
            server.udp
        );
    }
    let mut echoed = client.subscribe::<Echoed>();
    let raw = UdpSocket::bind("127.0.0.1:0").await?;
    raw.connect(server.raw_udp).await?;
    let mut rows = Vec::new();
    for size in [32, 1024] {
        let payload = vec![0x5A; size];
        // Warm up each path, then measure it.
        for (index, what) in ["raw-udp", "ternio-datagram", "ternio-stream"]
            .into_iter()
            .enumerate()
        {
            let mut row = EchoRow {
                what,
                size,
                round_trips: histogram(),
                lost: 0,
                server_cpu: Duration::ZERO,
            };
            let mut seq = 0u64;
            for measuring in [false, true] {
                let rounds = if measuring { count } else { count / 10 };
                let cpu_before = server.cpu();
                for _ in 0..rounds {
                    seq += 1;
                    let started = Instant::now();
                    let back = match index {
                        0 => raw_echo(&raw, &payload).await?,
                        1 => datagram_echo(&client, &mut echoed, seq, &payload).await?,
                        _ => {
                            client.request_async(&StreamEcho(payload.clone())).await?;
                            true
                        }
                    };
                    if !measuring {
                        continue;
                    }
                    if back {
                        row.round_trips
                            .record(started.elapsed().as_micros().max(1) as u64)?;
                    } else {
                        row.lost += 1;
                    }
                }
                if measuring {
                    row.server_cpu = (server.cpu() - cpu_before) / rounds as u32;
                }
            }
            rows.push(row);
        }
    }
    Ok(rows)
}

/// One raw UDP echo; false when it did not come back in time.
async fn raw_echo(socket: &UdpSocket, payload: &[u8]) -> Result<bool> {
    socket.send(payload).await?;
    let mut buffer = [0u8; 2048];
    match tokio::time::timeout(ECHO_WAIT, socket.recv(&mut buffer)).await {
        Ok(read) => Ok(read? == payload.len()),
        Err(_) => Ok(false),
    }
}

/// One echo by datagram; false when it did not come back in time (stale
/// answers to earlier, lost-in-time echoes are skipped).
async fn datagram_echo(
    client: &Client,
    echoed: &mut Subscription<Echoed>,
    seq: u64,
    payload: &[u8],
) -> Result<bool> {
    let echo = Echo {
        seq,
        payload: payload.to_vec(),
    };
    if client.send_unreliable(&echo)? != Route::Datagram {
        bail!("the echo went on the stream: no datagram channel");
    }
    let deadline = Instant::now() + ECHO_WAIT;
    loop {
        match tokio::time::timeout_at(deadline, echoed.next()).await {
            Ok(Some(answer)) if answer.seq == seq => return Ok(true),
            Ok(Some(_)) => continue,
            Ok(None) => bail!("the subscription closed"),
            Err(_) => return Ok(false),
        }
    }
}

/// What one client saw in the window.
#[derive(Default)]
struct Seen {
    lateness: Vec<u32>,
    ticks: HashSet<u64>,
    duplicates: u64,
}

/// Receives snapshots until `end`, keeping those that arrive from `start`.
async fn watch<S: RoomSnapshot>(
    mut snapshots: Subscription<S>,
    start: Instant,
    end: Instant,
) -> Seen {
    let mut seen = Seen::default();
    while let Ok(Some(snapshot)) = tokio::time::timeout_at(end, snapshots.next()).await {
        let arrived = now_us();
        if Instant::now() < start {
            continue;
        }
        let (tick, started_us) = snapshot.stamp();
        if !seen.ticks.insert(tick) {
            seen.duplicates += 1;
            continue;
        }
        let late = arrived.saturating_sub(started_us);
        seen.lateness.push(late.min(u64::from(u32::MAX)) as u32);
    }
    seen
}

/// The rooms workload, by datagram or on the stream.
pub(super) async fn rooms(
    server: &mut GameServer,
    args: &GameArgs,
    variant: Variant,
    window: Duration,
) -> Result<RoomsRow> {
    let datagrams = variant == Variant::Datagrams;
    // Connect and join, a few at a time.
    let mut clients = Vec::with_capacity(args.clients);
    for index in 0..args.clients {
        let client = secure_client(server)
            .await
            .with_context(|| format!("client {index}"))?;
        if datagrams {
            client.bind_datagrams().await?;
        }
        clients.push(client);
    }
    let warm_up = Duration::from_secs(2);
    let start = Instant::now() + warm_up;
    let end = start + window;
    let mut watchers = Vec::with_capacity(args.clients);
    for (index, client) in clients.iter().enumerate() {
        let watcher = if datagrams {
            tokio::spawn(watch(client.subscribe::<Snapshot>(), start, end))
        } else {
            tokio::spawn(watch(client.subscribe::<StreamSnapshot>(), start, end))
        };
        let room = (index % usize::from(args.rooms)) as u16;
        client.request_async(&JoinRoom { room }).await?;
        watchers.push(watcher);
    }
    if datagrams {
        // A client's channel is reachable once its first datagram came in.
        let reachable = clients
            .iter()
            .filter(|client| client.has_datagrams())
            .count();
        if reachable != clients.len() {
            bail!(
                "{} of {} clients have a datagram channel",
                reachable,
                clients.len()
            );
        }
    }
    tokio::time::sleep_until(start).await;
    let (server_cpu, client_cpu, bytes) = (server.cpu(), usage::cpu_time(), loopback_bytes());
    let counts_before = server.counts()?;
    tokio::time::sleep_until(end).await;
    let server_cpu = server.cpu() - server_cpu;
    let client_cpu = usage::cpu_time() - client_cpu;
    let loopback = loopback_bytes() - bytes;
    let counts_after = server.counts()?;
    let mut row = RoomsRow {
        variant,
        clients: clients.len(),
        window,
        received: 0,
        lost: 0,
        duplicates: 0,
        lateness: histogram(),
        server_cpu,
        client_cpu,
        loopback_bytes: loopback,
        counts: RoomCounts {
            ticks: counts_after.ticks - counts_before.ticks,
            late: counts_after.late - counts_before.late,
            overruns: counts_after.overruns - counts_before.overruns,
            skipped: counts_after.skipped - counts_before.skipped,
            snapshots: counts_after.snapshots - counts_before.snapshots,
        },
    };
    for watcher in watchers {
        let seen = watcher.await?;
        row.received += seen.lateness.len() as u64;
        row.duplicates += seen.duplicates;
        if let (Some(first), Some(last)) = (seen.ticks.iter().min(), seen.ticks.iter().max()) {
            row.lost += last - first + 1 - seen.ticks.len() as u64;
        }
        for late in seen.lateness {
            row.lateness.record(u64::from(late).max(1))?;
        }
    }
    drop(clients);
    // Let the rooms see the members leave before the next workload.
    tokio::time::sleep(Duration::from_millis(500)).await;
    Ok(row)
}
