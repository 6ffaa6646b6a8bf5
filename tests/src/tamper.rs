//! A TCP proxy that acts as an attacker on the path: it forwards every
//! frame, but rewrites the plain `received` field of the server's answer
//! to `RESUME` (docs/PROTOCOL.md section 4.2), which travels outside the
//! sealed frames. [`TamperingProxy::cut_all`] cuts every live connection.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use ternio::protocol::frame::{Flags, Header};
use ternio::protocol::system;

/// How the proxy changes a `received` count.
pub type Rewrite = fn(u64) -> u64;

/// The proxy; it stops when dropped.
#[derive(Debug)]
pub struct TamperingProxy {
    address: SocketAddr,
    shared: Arc<Shared>,
    accept: tokio::task::JoinHandle<()>,
}

#[derive(Debug)]
struct Shared {
    target: SocketAddr,
    /// Applied to the `received` of every `RESUME` answer that is not an
    /// error, while set.
    rewrite: Mutex<Option<Rewrite>>,
    /// How many answers were rewritten.
    rewritten: AtomicU64,
    /// Bumped by `cut_all`: every connection open then is cut.
    generation: watch::Sender<u64>,
}

impl TamperingProxy {
    /// A proxy on a free port of 127.0.0.1 to `target`, forwarding as is
    /// until [`set_rewrite`](Self::set_rewrite).
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            target,
            rewrite: Mutex::new(None),
            rewritten: AtomicU64::new(0),
            generation: watch::channel(0).0,
        });
        let accept = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        Self {
            address,
            shared,
            accept,
        }
    }

    /// Where clients connect.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// From now on, the `received` of the server's `RESUME` answers goes
    /// through `rewrite` (`None`: forwarded as is).
    pub fn set_rewrite(&self, rewrite: Option<Rewrite>) {
        *self.shared.rewrite.lock().unwrap() = rewrite;
    }

    /// How many `RESUME` answers were rewritten so far.
    pub fn rewritten(&self) -> u64 {
        self.shared.rewritten.load(Ordering::SeqCst)
    }

    /// Cuts every connection open now.
    pub fn cut_all(&self) {
        self.shared
            .generation
            .send_modify(|generation| *generation += 1);
    }
}

impl Drop for TamperingProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut_all();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(shared.target).await else {
                let _ = client.set_zero_linger();
                return;
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            carry(client, server, &shared).await;
        });
    }
}

/// Forwards the client's bytes as they come, and the server's frame by
/// frame (rewriting `RESUME` answers), until either side closes or
/// `cut_all`; then resets both.
async fn carry(client: TcpStream, server: TcpStream, shared: &Shared) {
    let mut generation = shared.generation.subscribe();
    generation.borrow_and_update();
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let up = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(read) => {
                    if server_write.write_all(&buf[..read]).await.is_err() {
                        return;
                    }
                }
            }
        }
    };
    let down = async {
        loop {
            let mut prefix = [0u8; 4];
            if server_read.read_exact(&mut prefix).await.is_err() {
                return;
            }
            let len = u32::from_le_bytes(prefix) as usize;
            let mut frame = vec![0u8; len];
            if server_read.read_exact(&mut frame).await.is_err() {
                return;
            }
            shared.tamper(&mut frame);
            if client_write.write_all(&prefix).await.is_err()
                || client_write.write_all(&frame).await.is_err()
            {
                return;
            }
        }
    };
    tokio::select! {
        () = up => {}
        () = down => {}
        _ = generation.changed() => {}
    }
    if let Ok(client) = client_read.reunite(client_write) {
        let _ = client.set_zero_linger();
    }
    if let Ok(server) = server_read.reunite(server_write) {
        let _ = server.set_zero_linger();
    }
}

impl Shared {
    /// Rewrites `frame` (header and body, no length prefix) when it is a
    /// `RESUME` answer that is not an error.
    fn tamper(&self, frame: &mut [u8]) {
        let Some(rewrite) = *self.rewrite.lock().unwrap() else {
            return;
        };
        let Ok(header) = Header::parse(frame) else {
            return;
        };
        let body = ternio::protocol::frame::HEADER_LEN;
        if header.opcode != system::RESUME
            || !header.flags.contains(Flags::RESPONSE)
            || header.flags.is_error()
            || frame.len() < body + 8
        {
            return;
        }
        let field: &mut [u8; 8] = (&mut frame[body..body + 8]).try_into().unwrap();
        let received = u64::from_le_bytes(*field);
        *field = rewrite(received).to_le_bytes();
        self.rewritten.fetch_add(1, Ordering::SeqCst);
    }
}
