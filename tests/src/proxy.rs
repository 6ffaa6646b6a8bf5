//! A TCP proxy that cuts the connections it carries: the network of a
//! player on a train. Each connection through it is forwarded byte for byte
//! to the target until a budget of bytes, drawn at random for it, runs out
//! (counted over both directions, so a cut lands anywhere: inside a frame,
//! between frames, in the middle of a handshake); then both sides are
//! reset. [`CuttingProxy::cut_all`] cuts every live connection at once.

use std::net::SocketAddr;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The proxy; it stops when dropped.
#[derive(Debug)]
pub struct CuttingProxy {
    address: SocketAddr,
    shared: Arc<Shared>,
    accept: tokio::task::JoinHandle<()>,
}

#[derive(Debug)]
struct Shared {
    target: SocketAddr,
    /// Where budgets are drawn from (xorshift: reproducible from the seed).
    random: Mutex<u64>,
    /// The budget range; an empty range: never cut on its own.
    budget: Mutex<Range<usize>>,
    cuts: AtomicU64,
    /// Bumped by `cut_all`: every connection open then is cut.
    generation: watch::Sender<u64>,
    /// When false, connections are refused (closed at once).
    open: AtomicBool,
    /// When true, what clients send is read and dropped, not forwarded.
    losing_up: AtomicBool,
}

impl CuttingProxy {
    /// A proxy on a free port of 127.0.0.1 to `target`, cutting each
    /// connection after a number of bytes drawn from `budget` with `seed`.
    pub async fn start(target: SocketAddr, seed: u64, budget: Range<usize>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            target,
            random: Mutex::new(seed.max(1)),
            budget: Mutex::new(budget),
            cuts: AtomicU64::new(0),
            generation: watch::channel(0).0,
            open: AtomicBool::new(true),
            losing_up: AtomicBool::new(false),
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

    /// How many connections were cut so far.
    pub fn cuts(&self) -> u64 {
        self.shared.cuts.load(Ordering::SeqCst)
    }

    /// Cuts every connection open now.
    pub fn cut_all(&self) {
        self.shared
            .generation
            .send_modify(|generation| *generation += 1);
    }

    /// From now on, cuts connections after a number of bytes drawn from
    /// `budget` (an empty range: only `cut_all` cuts).
    pub fn set_budget(&self, budget: Range<usize>) {
        *self.shared.budget.lock().unwrap() = budget;
    }

    /// While `losing` is true, the bytes clients send are read and dropped
    /// (a path that loses what it carries before it breaks): the client
    /// believes they went.
    pub fn set_losing_up(&self, losing: bool) {
        self.shared.losing_up.store(losing, Ordering::SeqCst);
    }

    /// Refuses new connections (closes them at once) while `open` is false:
    /// a network that is down.
    pub fn set_open(&self, open: bool) {
        self.shared.open.store(open, Ordering::SeqCst);
    }
}

impl Drop for CuttingProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut_all();
    }
}

impl Shared {
    /// The byte budget of a new connection, or `None` for no budget.
    fn draw(&self) -> Option<usize> {
        let budget = self.budget.lock().unwrap().clone();
        if budget.is_empty() {
            return None;
        }
        let mut state = self.random.lock().unwrap();
        // xorshift64
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        let span = (budget.end - budget.start) as u64;
        Some(budget.start + (*state % span) as usize)
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        if !shared.open.load(Ordering::SeqCst) {
            reset(&client);
            continue;
        }
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(shared.target).await else {
                reset(&client);
                return;
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            carry(client, server, &shared).await;
        });
    }
}

/// Forwards both ways until the budget runs out, `cut_all`, or either side
/// closes; then resets both.
async fn carry(client: TcpStream, server: TcpStream, shared: &Shared) {
    let mut budget = shared.draw();
    let mut generation = shared.generation.subscribe();
    generation.borrow_and_update();
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let mut up = vec![0u8; 16 * 1024];
    let mut down = vec![0u8; 16 * 1024];
    let mut cut = false;
    loop {
        tokio::select! {
            read = client_read.read(&mut up) => {
                let Ok(read) = read else { break };
                if read == 0 { break; }
                if shared.losing_up.load(Ordering::SeqCst) { continue; }
                let (take, ends) = spend(&mut budget, read);
                if server_write.write_all(&up[..take]).await.is_err() { break; }
                if ends { cut = true; break; }
            }
            read = server_read.read(&mut down) => {
                let Ok(read) = read else { break };
                if read == 0 { break; }
                let (take, ends) = spend(&mut budget, read);
                if client_write.write_all(&down[..take]).await.is_err() { break; }
                if ends { cut = true; break; }
            }
            changed = generation.changed() => {
                cut = changed.is_ok();
                break;
            }
        }
    }
    if cut {
        shared.cuts.fetch_add(1, Ordering::SeqCst);
    }
    let client = client_read.reunite(client_write).ok();
    let server = server_read.reunite(server_write).ok();
    if let Some(client) = client {
        reset(&client);
    }
    if let Some(server) = server {
        reset(&server);
    }
}

/// How much of `read` bytes to forward, and whether the budget ran out
/// with them.
fn spend(budget: &mut Option<usize>, read: usize) -> (usize, bool) {
    match budget {
        None => (read, false),
        Some(left) if *left > read => {
            *left -= read;
            (read, false)
        }
        Some(left) => {
            let take = *left;
            *left = 0;
            (take, true)
        }
    }
}

/// Closes `stream` with a reset (linger 0), as a dropped network path does
/// not, but as abruptly as a test can make it.
fn reset(stream: &TcpStream) {
    let _ = stream.set_zero_linger();
}
