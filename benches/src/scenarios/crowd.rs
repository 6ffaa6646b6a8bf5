//! Crowd: 10,000 idle connections held open against one server. The
//! figures are the server's resident memory per connection (VmRSS before
//! and after), its live heap per connection (the counting allocator), and
//! its thread count. Each run gets a fresh server child.
//!
//! WebSocket connections complete their upgrade (with raw-ws's client and
//! its 8 KiB read buffer, which keeps the harness's own memory down); TCP
//! ones only connect.
//! The harness waits until the server counts every connection before it
//! reads the figures.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use futures_util::{StreamExt, TryStreamExt};
use tokio::net::TcpStream;
use tokio::runtime::Runtime;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::child::ServerChild;
use crate::participants::{Participant, ServerKind, raw_ws};
use crate::results::CrowdFigures;
use crate::workload::run_on;

/// Participants the crowd runs against. tonic is left out: holding 10,000
/// HTTP/2 channels would measure the harness's client more than the server.
pub const CROWD_PARTICIPANTS: [Participant; 4] = [
    Participant::RawTcp,
    Participant::TernioTcp,
    Participant::RawWs,
    Participant::TernioWs,
];

/// Connections opened at once.
const CONNECTING_AT_ONCE: usize = 64;

/// An open idle connection, kept only to be held.
#[allow(dead_code)]
enum Held {
    Tcp(TcpStream),
    Ws(Box<WebSocketStream<MaybeTlsStream<TcpStream>>>),
}

async fn open(participant: Participant, addr: SocketAddr) -> Result<Held> {
    Ok(match participant {
        Participant::RawWs | Participant::TernioWs => {
            Held::Ws(Box::new(raw_ws::connect(addr, None).await?))
        }
        _ => Held::Tcp(TcpStream::connect(addr).await?),
    })
}

/// Opens `connections` idle connections to a fresh `participant` server.
pub fn run(
    runtime: &Runtime,
    participant: Participant,
    connections: usize,
) -> Result<CrowdFigures> {
    let mut child = ServerChild::spawn(ServerKind::Echo(participant), None)?;
    std::thread::sleep(Duration::from_millis(200));
    let before = child.status();
    let heap_before = child.report()?.live_bytes;
    let addr = child.endpoint.addr;
    let started = Instant::now();
    let held = run_on(runtime, Duration::from_secs(300), async move {
        futures_util::stream::iter(0..connections)
            .map(|_| open(participant, addr))
            .buffer_unordered(CONNECTING_AT_ONCE)
            .try_collect::<Vec<Held>>()
            .await
    });
    let figures = held.and_then(|held| {
        let figures = (|| {
            loop {
                let seen = child.report()?.connections;
                match seen {
                    Some(seen) if seen >= connections => break,
                    None => break,
                    Some(seen) if started.elapsed() > Duration::from_secs(120) => {
                        bail!("the server sees {seen} of {connections} connections")
                    }
                    Some(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
            let connect_seconds = started.elapsed().as_secs_f64();
            std::thread::sleep(Duration::from_millis(500));
            let after = child.status();
            let heap_after = child.report()?.live_bytes;
            let per =
                |before: u64, after: u64| after.saturating_sub(before) as f64 / connections as f64;
            Ok(CrowdFigures {
                connections,
                rss_before_kib: before.rss_kib,
                rss_after_kib: after.rss_kib,
                rss_per_connection: per(before.rss_kib * 1024, after.rss_kib * 1024),
                heap_per_connection: per(heap_before, heap_after),
                threads_before: before.threads,
                threads_after: after.threads,
                connect_seconds,
            })
        })();
        runtime.block_on(async move { drop(held) });
        figures
    });
    drop(child);
    figures
}
