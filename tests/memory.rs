//! A large message's memory is given back once the message is gone, on
//! both transports: the client drops what grew as soon as the message is
//! through, the server once the connection has been quiet for a second.
//! No buffer stays at the largest message's size for a connection's life.
//!
//! A global allocator counts the bytes held by allocations made and freed
//! on the server's thread (the server runs on a thread of its own here)
//! and, apart, on every other thread (the client's).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use ternio_client::Client;
use ternio_tests::{assert_echoed, start_server_with_ws};

struct LiveBytes;

/// Bytes held by the server's allocations, then by everybody else's.
static LIVE: [AtomicI64; 2] = [AtomicI64::new(0), AtomicI64::new(0)];

thread_local! {
    /// Set on the server's thread.
    static SERVER_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Whose allocations are counted where.
#[derive(Clone, Copy)]
enum Side {
    Server = 0,
    Client = 1,
}

fn counter() -> Option<&'static AtomicI64> {
    // `try_with`: the thread-local may be gone while a thread exits.
    let side = match SERVER_THREAD.try_with(Cell::get) {
        Ok(true) => Side::Server,
        Ok(false) => Side::Client,
        Err(_) => return None,
    };
    Some(&LIVE[side as usize])
}

// SAFETY: defers to the system allocator and only counts sizes.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for LiveBytes {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if let Some(live) = counter() {
            live.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if let Some(live) = counter() {
            live.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if let Some(live) = counter() {
            live.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: LiveBytes = LiveBytes;

/// A large message: far above every buffer's usual size.
const LARGE: usize = 768 * 1024;
/// Longer than the server waits before it calls a connection quiet (1 s).
const QUIET: Duration = Duration::from_millis(1600);

/// The tests share the counters: one runs at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs the test server (TCP and WebSocket) on a thread of its own until
/// `stop` is dropped; returns its TCP and WebSocket addresses.
fn server_thread() -> (
    (SocketAddr, SocketAddr),
    tokio::sync::oneshot::Sender<()>,
    std::thread::JoinHandle<()>,
) {
    let (address_tx, address_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        SERVER_THREAD.with(|server| server.set(true));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let (tcp, ws, _handle) = start_server_with_ws(|b| b);
            address_tx.send((tcp, ws)).unwrap();
            let _ = stopped.await;
        });
    });
    (address_rx.recv().unwrap(), stop, thread)
}

async fn echo(client: &Client, len: usize) {
    assert_echoed(client, Bytes::from(vec![0x5A; len])).await;
}

/// Echoes small messages, one large one, small ones again (on the server,
/// then lets the connection go quiet), and checks that `side` holds less
/// than a quarter of the large message more than before it.
fn check(side: Side, connect: impl AsyncFnOnce((SocketAddr, SocketAddr)) -> Client) {
    let _alone = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let (addresses, stop, server) = server_thread();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = connect(addresses).await;
        for _ in 0..3 {
            echo(&client, 64).await;
        }
        let live = &LIVE[side as usize];
        let before = live.load(Ordering::Relaxed);
        echo(&client, LARGE).await;
        for _ in 0..3 {
            echo(&client, 64).await;
        }
        if let Side::Server = side {
            tokio::time::sleep(QUIET).await;
        }
        let held = live.load(Ordering::Relaxed) - before;
        let who = match side {
            Side::Server => "server",
            Side::Client => "client",
        };
        assert!(
            held < (LARGE / 4) as i64,
            "the {who} still holds {held} bytes more than before a {LARGE}-byte echo"
        );
        client.close().await;
    });
    drop(stop);
    server.join().unwrap();
}

async fn over_tcp((tcp, _): (SocketAddr, SocketAddr)) -> Client {
    Client::connect_tcp(tcp).await.unwrap()
}

async fn over_websocket((_, ws): (SocketAddr, SocketAddr)) -> Client {
    Client::connect_ws(&format!("ws://{ws}/ws")).await.unwrap()
}

#[test]
fn a_tcp_client_gives_a_large_message_s_memory_back() {
    check(Side::Client, over_tcp);
}

#[test]
fn a_websocket_client_gives_a_large_message_s_memory_back() {
    check(Side::Client, over_websocket);
}

#[test]
fn a_quiet_tcp_connection_gives_a_large_message_s_memory_back() {
    check(Side::Server, over_tcp);
}

#[test]
fn a_quiet_websocket_connection_gives_a_large_message_s_memory_back() {
    check(Side::Server, over_websocket);
}
