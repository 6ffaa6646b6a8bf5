//! A TCP proxy that delays what it carries: every chunk of bytes read from
//! one side is written to the other `delay` later (a latency, not a
//! bandwidth limit: chunks read meanwhile follow on their own schedule, in
//! order). The delays of the two directions may differ, to test what an
//! asymmetric path does to a clock estimate.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// The proxy; it stops accepting when dropped (connections through it end
/// with either side).
#[derive(Debug)]
pub struct DelayProxy {
    address: SocketAddr,
    accept: tokio::task::JoinHandle<()>,
}

impl DelayProxy {
    /// A proxy on a free port of 127.0.0.1 to `target`: what goes to the
    /// target is delayed by `up`, what comes back by `down`.
    pub async fn start(target: SocketAddr, up: Duration, down: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let _ = client.set_nodelay(true);
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(target).await else {
                        return;
                    };
                    let _ = server.set_nodelay(true);
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::join!(
                        carry(client_read, server_write, up),
                        carry(server_read, client_write, down),
                    );
                });
            }
        });
        Self { address, accept }
    }

    /// Where clients connect.
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Copies `from` to `to`, each chunk `delay` after it was read; shuts `to`
/// down once `from` ends and everything is written.
async fn carry(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin + Send + 'static,
    delay: Duration,
) {
    let (chunks, mut due) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let writer = tokio::spawn(async move {
        while let Some((at, chunk)) = due.recv().await {
            tokio::time::sleep_until(at).await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    });
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(read) => {
                if chunks
                    .send((Instant::now() + delay, buffer[..read].to_vec()))
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
