//! A TCP proxy that conditions what it carries, per direction: a delay
//! with jitter, and a bandwidth limit. Every chunk of bytes read from one
//! side is written to the other once its bytes have crossed the link at
//! the bandwidth (one chunk after the other) and its delay has passed. The
//! delays of the two directions may differ, to test what an asymmetric
//! path does to a clock estimate.
//!
//! A stream is never reordered: a chunk whose jitter would let it overtake
//! the one before waits for it (TCP's head-of-line blocking), so jitter
//! only ever adds delay. At most [`IN_FLIGHT`] chunks wait in a direction;
//! past that the proxy stops reading, and the sender's own buffers fill
//! (back-pressure, as a slow link exerts).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::conditioner::Rng;

/// How many chunks (of up to 16 KiB) may wait in one direction.
pub const IN_FLIGHT: usize = 64;

/// What one direction of a stream suffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamLink {
    /// The base one-way delay.
    pub delay: Duration,
    /// Each chunk's delay is `delay ± jitter`, uniformly (but never lets
    /// it overtake the chunk before).
    pub jitter: Duration,
    /// Bytes per second the link carries; `None`: no limit.
    pub bytes_per_second: Option<u64>,
}

impl StreamLink {
    /// A fixed delay, nothing else.
    pub fn delay(delay: Duration) -> Self {
        Self {
            delay,
            ..Self::default()
        }
    }

    /// When a chunk of `len` bytes read at `now` is due, given when the
    /// link is next free (updated) and when the chunk before was due.
    fn due(
        &self,
        len: usize,
        now: Instant,
        free: &mut Instant,
        before: Instant,
        rng: &mut Rng,
    ) -> Instant {
        let start = now.max(*free);
        let crossed = match self.bytes_per_second {
            Some(rate) => start + Duration::from_secs_f64(len as f64 / rate.max(1) as f64),
            None => start,
        };
        *free = crossed;
        let low = self.delay.saturating_sub(self.jitter);
        let spread = (self.delay + self.jitter).saturating_sub(low);
        (crossed + low + spread.mul_f64(rng.unit())).max(before)
    }
}

/// The proxy; it stops accepting when dropped (connections through it end
/// with either side). When a test fails while it is alive, it prints its
/// seed (if it has jitter).
#[derive(Debug)]
pub struct DelayProxy {
    address: SocketAddr,
    accept: tokio::task::JoinHandle<()>,
    seed: Option<u64>,
}

impl DelayProxy {
    /// A proxy on a free port of 127.0.0.1 to `target`: what goes to the
    /// target is delayed by `up`, what comes back by `down`.
    pub async fn start(target: SocketAddr, up: Duration, down: Duration) -> Self {
        Self::conditioned(target, StreamLink::delay(up), StreamLink::delay(down), 0).await
    }

    /// A proxy on a free port of 127.0.0.1 to `target`: what goes to the
    /// target suffers `up`, what comes back `down`; the jitter of the
    /// `n`-th connection's directions comes from generators seeded from
    /// `seed` and `n`.
    pub async fn conditioned(
        target: SocketAddr,
        up: StreamLink,
        down: StreamLink,
        seed: u64,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let accept = tokio::spawn(async move {
            let mut connections = 0u64;
            while let Ok((client, _)) = listener.accept().await {
                let _ = client.set_nodelay(true);
                let seeds = Rng::new(seed ^ connections.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                connections += 1;
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(target).await else {
                        return;
                    };
                    let _ = server.set_nodelay(true);
                    let mut seeds = seeds;
                    let (up_rng, down_rng) =
                        (Rng::new(seeds.next_u64()), Rng::new(seeds.next_u64()));
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::join!(
                        carry(client_read, server_write, up, up_rng),
                        carry(server_read, client_write, down, down_rng),
                    );
                });
            }
        });
        let jittery = !up.jitter.is_zero() || !down.jitter.is_zero();
        Self {
            address,
            accept,
            seed: jittery.then_some(seed),
        }
    }

    /// Where clients connect.
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.accept.abort();
        if let Some(seed) = self.seed
            && std::thread::panicking()
        {
            eprintln!(
                "the stream conditioner ran with seed {seed} (TERNIO_SEED={seed} replays it)"
            );
        }
    }
}

/// Copies `from` to `to` through `link`; shuts `to` down once `from` ends
/// and everything is written.
async fn carry(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin + Send + 'static,
    link: StreamLink,
    mut rng: Rng,
) {
    let (chunks, mut due) = mpsc::channel::<(Instant, Vec<u8>)>(IN_FLIGHT);
    let writer = tokio::spawn(async move {
        while let Some((at, chunk)) = due.recv().await {
            tokio::time::sleep_until(at).await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    });
    let mut buffer = vec![0u8; 16 * 1024];
    let (mut free, mut before) = (Instant::now(), Instant::now());
    loop {
        match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(read) => {
                before = link.due(read, Instant::now(), &mut free, before, &mut rng);
                if chunks
                    .send((before, buffer[..read].to_vec()))
                    .await
                    .is_err()
                {
                    break;
                }
            }
        }
    }
    drop(chunks);
    let _ = writer.await;
}
