//! A client gives back the memory a large message needed once the message
//! is gone, over TCP and over WebSocket: its read and write buffers do not
//! stay at their largest size.
//!
//! A global allocator counts the bytes held by allocations made and freed
//! outside the server's thread (the server keeps its buffers while the
//! connection is busy, by design, and runs on a thread of its own here).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, Ordering};

use bytes::Bytes;
use ternio_client::Client;
use ternio_tests::{Echo, start_server_with_ws};

struct LiveBytes;

static LIVE: AtomicI64 = AtomicI64::new(0);

thread_local! {
    /// Set on the server's thread: its allocations are not counted.
    static SERVER_THREAD: Cell<bool> = const { Cell::new(false) };
}

fn counted() -> bool {
    // `try_with`: the thread-local may be gone while a thread exits.
    SERVER_THREAD
        .try_with(|server| !server.get())
        .unwrap_or(false)
}

// SAFETY: defers to the system allocator and only counts sizes.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for LiveBytes {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if counted() {
            LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if counted() {
            LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if counted() {
            LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: LiveBytes = LiveBytes;

/// Runs the test server on a thread of its own until `stop` is dropped;
/// returns its TCP and WebSocket addresses.
fn server_thread() -> (
    (std::net::SocketAddr, std::net::SocketAddr),
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
    let payload = Bytes::from(vec![0x5A; len]);
    let answer: Echo = client
        .request_async(&Echo {
            payload: payload.clone(),
        })
        .await
        .unwrap();
    assert_eq!(answer.payload, payload);
}

/// Echoes small messages, one large one, small ones again, and returns
/// how many bytes the client holds more than before the large one.
async fn held_after_a_large_echo(client: &Client, large: usize) -> i64 {
    for _ in 0..3 {
        echo(client, 64).await;
    }
    let before = LIVE.load(Ordering::Relaxed);
    echo(client, large).await;
    for _ in 0..3 {
        echo(client, 64).await;
    }
    LIVE.load(Ordering::Relaxed) - before
}

/// The tests share the counter: one runs at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn check(connect: impl AsyncFnOnce((std::net::SocketAddr, std::net::SocketAddr)) -> Client) {
    const LARGE: usize = 768 * 1024;
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
        let held = held_after_a_large_echo(&client, LARGE).await;
        assert!(
            held < (LARGE / 4) as i64,
            "the client still holds {held} bytes more than before a {LARGE}-byte echo"
        );
        client.close().await;
    });
    drop(stop);
    server.join().unwrap();
}

#[test]
fn a_large_message_does_not_leave_a_tcp_client_holding_its_size() {
    check(async |(tcp, _)| Client::connect_tcp(tcp).await.unwrap());
}

#[test]
fn a_large_message_does_not_leave_a_websocket_client_holding_its_size() {
    check(async |(_, ws)| Client::connect_ws(&format!("ws://{ws}/ws")).await.unwrap());
}
