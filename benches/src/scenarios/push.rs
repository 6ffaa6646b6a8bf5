//! Push throughput: the server pushes 64 B messages to one client as fast
//! as the client drains them; the figure is messages received per second.
//!
//! Ternio pushes from a task holding the connection's `ConnectionHandle`
//! (waiting for the connection to drain its push queue when it is above
//! 512 KiB, `ConnectionHandle::queue_below`); the raw server encodes
//! frames into a 64 KiB batch and writes it. Ternio is read both by its SDK
//! (pushes counted as unhandled) and by a raw socket that only counts
//! frames, which isolates the server's side.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Result;
use tokio::net::TcpStream;
use tokio::runtime::Runtime;

use crate::child::ServerChild;
use crate::participants::raw_tcp::{self, FrameCounter};
use crate::participants::ternio::{self, Pushed, StartPush};
use crate::participants::{Participant, ServerKind};
use crate::window::{Load, Window, counted_window};
use crate::workload::run_on;

/// Payload bytes of each pushed message.
pub const PUSH_SIZE: usize = 64;

/// Who pushes, and who reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushTarget {
    /// The raw push server, read by a frame-counting socket.
    RawTcp,
    /// Ternio over TCP, read by `ternio-client` (`Client::on`).
    TernioTcp,
    /// Ternio over TCP, read by a frame-counting socket.
    TernioTcpSocket,
    /// Ternio over WebSocket, read by `ternio-client` (`Client::on`).
    TernioWs,
    /// Ternio over TCP with resumption on (the server keeps each push until
    /// the client acknowledges it), read by `ternio-client`.
    TernioTcpResume,
}

impl PushTarget {
    /// Every target, in report order.
    pub const ALL: [PushTarget; 5] = [
        PushTarget::RawTcp,
        PushTarget::TernioTcpSocket,
        PushTarget::TernioTcp,
        PushTarget::TernioWs,
        PushTarget::TernioTcpResume,
    ];

    /// Its name in the results.
    pub fn name(self) -> &'static str {
        match self {
            PushTarget::RawTcp => "raw-tcp",
            PushTarget::TernioTcp => "ternio-tcp",
            PushTarget::TernioTcpSocket => "ternio-tcp-socket",
            PushTarget::TernioWs => "ternio-ws",
            PushTarget::TernioTcpResume => "ternio-tcp-resume",
        }
    }

    /// The participant it belongs to (for `--only`).
    pub fn participant(self) -> Participant {
        match self {
            PushTarget::RawTcp => Participant::RawTcp,
            PushTarget::TernioTcp | PushTarget::TernioTcpSocket => Participant::TernioTcp,
            PushTarget::TernioWs => Participant::TernioWs,
            PushTarget::TernioTcpResume => Participant::TernioTcpResume,
        }
    }

    /// The server child it needs.
    pub fn server(self) -> ServerKind {
        match self {
            PushTarget::RawTcp => ServerKind::RawTcpPush,
            other => ServerKind::Echo(other.participant()),
        }
    }
}

/// What counts the messages received.
enum Receiver {
    /// A socket counting frames into the counter.
    Socket(Arc<AtomicU64>),
    /// `ternio-client`, whose push callback counts into the counter.
    Client(
        ternio_client::Client,
        ternio_client::SubscriptionGuard,
        Arc<AtomicU64>,
    ),
}

impl Load for Receiver {
    /// Messages received so far.
    fn count(&self) -> u64 {
        match self {
            Receiver::Socket(count) | Receiver::Client(_, _, count) => {
                count.load(Ordering::Relaxed)
            }
        }
    }
}

/// Starts the push, waits `warmup`, then counts messages over `window`.
pub fn run(
    runtime: &Runtime,
    child: &mut ServerChild,
    target: PushTarget,
    warmup: Duration,
    window: Duration,
) -> Result<Window> {
    let addr = child.endpoint.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let task_stop = Arc::clone(&stop);
    let receiver = run_on(runtime, Duration::from_secs(30), async move {
        let start_frame = match target {
            PushTarget::RawTcp => raw_tcp::frame(&(PUSH_SIZE as u32).to_le_bytes()),
            PushTarget::TernioTcpSocket => ternio::request_frame(
                &StartPush {
                    size: PUSH_SIZE as u32,
                },
                1,
            ),
            PushTarget::TernioTcp | PushTarget::TernioWs | PushTarget::TernioTcpResume => {
                let client = ternio::connect_client(target.participant(), addr).await?;
                let count = Arc::new(AtomicU64::new(0));
                let callback_count = Arc::clone(&count);
                let guard = client.on(move |_: Pushed| {
                    callback_count.fetch_add(1, Ordering::Relaxed);
                });
                client
                    .request_async(&StartPush {
                        size: PUSH_SIZE as u32,
                    })
                    .await?;
                return Ok((Receiver::Client(client, guard, count), None));
            }
        };
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let mut counter = FrameCounter::new(stream);
        counter.send(&start_frame).await?;
        let count = Arc::new(AtomicU64::new(0));
        let task_count = Arc::clone(&count);
        let task = tokio::spawn(async move {
            while !task_stop.load(Ordering::Relaxed) {
                let frames = counter.count_more().await?;
                task_count.fetch_add(frames, Ordering::Relaxed);
            }
            anyhow::Ok(())
        });
        Ok((Receiver::Socket(count), Some(task)))
    });
    let (receiver, task) = receiver?;
    let measured = counted_window(child, &receiver, warmup, window);
    stop.store(true, Ordering::Relaxed);
    let stopped = run_on(runtime, Duration::from_secs(30), async move {
        match receiver {
            Receiver::Client(client, guard, _) => {
                drop(guard);
                client.close().await;
            }
            Receiver::Socket(_) => {}
        }
        match task {
            Some(task) => task.await?,
            None => Ok(()),
        }
    });
    let window = measured?;
    if window.ops == 0 {
        stopped?;
        anyhow::bail!("no push arrived in the window");
    }
    Ok(window)
}
