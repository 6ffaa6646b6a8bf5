//! What a peer can make the server hold on the heap: many large replies it
//! never reads stop at the outbound high-water mark (replies of finished
//! handlers are taken only below it); a frame announced large and sent a
//! little at a time costs what arrived, not what was announced.
//!
//! A global allocator counts the bytes alive in the whole process (the
//! server runs in it), so what the server holds is measured, not guessed.
//! The count is process-wide: one test measures at a time.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ternio::protocol::Decode;
use ternio::protocol::frame::{self, Flags, Framing, Header};
use ternio::{Packet, Server, packet_controller};
use ternio_tests::Echo;

struct LiveBytes;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: defers to the system allocator and only counts sizes.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for LiveBytes {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: LiveBytes = LiveBytes;

static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Starts a server of `LargeReplies` with `config` on a current-thread
/// runtime of its own thread.
fn run(config: ternio::ServerConfig) -> std::net::SocketAddr {
    run_both(config).0
}

/// As [`run`], with a WebSocket listener too (path `/ws`): the TCP and
/// WebSocket addresses.
fn run_both(config: ternio::ServerConfig) -> (std::net::SocketAddr, std::net::SocketAddr) {
    let server = Server::builder()
        .discover_controllers(false)
        .controller(LargeReplies)
        .map_tcp("127.0.0.1:0")
        .map_websocket("127.0.0.1:0", "/ws")
        .config(config)
        .build()
        .unwrap();
    let address = (server.tcp_addrs()[0], server.websocket_addrs()[0]);
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(server.run()).unwrap();
    });
    address
}

/// Waits (up to 10 s) until the bytes alive are back near `baseline`: the
/// server freed what the test's connections held, so the next test
/// measures only its own.
fn settle(baseline: usize) {
    let started = Instant::now();
    while LIVE.load(Ordering::SeqCst) > baseline + 256 * 1024
        && started.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The most bytes alive above `baseline` while `for_how_long` passes.
fn most_alive(baseline: usize, for_how_long: Duration) -> usize {
    let mut most = 0;
    let started = Instant::now();
    while started.elapsed() < for_how_long {
        most = most.max(LIVE.load(Ordering::SeqCst).saturating_sub(baseline));
        std::thread::sleep(Duration::from_millis(5));
    }
    most
}

/// 0x0500: answered, after a yield, with an `Echo` of `size` bytes.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0500, response = Echo)]
struct Large {
    size: u32,
}

#[derive(Default)]
struct LargeReplies;

#[packet_controller(explicit)]
impl LargeReplies {
    async fn large(request: Large) -> Echo {
        tokio::task::yield_now().await;
        Echo {
            payload: Bytes::from(vec![7; request.size as usize]),
        }
    }
}

const REPLY: u32 = 256 * 1024;
const REQUESTS: u32 = 64;
const HIGH_WATER: usize = 256 * 1024;

#[test]
fn replies_a_peer_does_not_read_stop_at_the_high_water_mark() {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut config = ternio::ServerConfig::default();
    config.outbound_high_water = HIGH_WATER;
    config.write_timeout = Duration::from_secs(60);
    let address = run(config);
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    let mut requests = BytesMut::new();
    for id in 1..=REQUESTS {
        frame::write_frame(
            &mut requests,
            Framing::LengthPrefixed,
            Header::new(Large::OPCODE, Flags::NONE, id),
            &Large { size: REPLY },
            usize::MAX,
        )
        .unwrap();
    }
    let baseline = LIVE.load(Ordering::SeqCst);
    // 16 MiB of replies asked for, none read.
    stream.write_all(&requests).unwrap();
    let most = most_alive(baseline, Duration::from_secs(2));
    println!("held at most {most} bytes for {REQUESTS} unread replies of {REPLY} bytes");
    // The high-water mark, one reply past it, and the connection's buffers;
    // not the 16 MiB asked for.
    assert!(
        most < 4 * 1024 * 1024,
        "the server held {most} bytes of replies nobody reads"
    );
    drop(stream);
    settle(baseline);
}

#[test]
fn a_frame_announced_large_costs_what_arrived() {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let address = run(ternio::ServerConfig::default());
    // 50 connections, each announcing a 1 MiB frame (the default maximum)
    // and sending 100 bytes of it.
    let mut start = (1024u32 * 1024).to_le_bytes().to_vec();
    start.extend_from_slice(&Header::new(Large::OPCODE, Flags::NONE, 1).to_bytes());
    start.extend(std::iter::repeat_n(0u8, 93));
    let baseline = LIVE.load(Ordering::SeqCst);
    let streams: Vec<_> = (0..50)
        .map(|_| {
            let mut stream = std::net::TcpStream::connect(address).unwrap();
            stream.write_all(&start).unwrap();
            stream
        })
        .collect();
    let most = most_alive(baseline, Duration::from_secs(1));
    println!("held at most {most} bytes for 50 frames announced at 1 MiB, 100 bytes sent");
    // A read buffer of a few KiB each, not the 50 MiB announced.
    assert!(
        most < 4 * 1024 * 1024,
        "the server held {most} bytes for frames that did not arrive"
    );
    drop(streams);
    settle(baseline);
}

/// A WebSocket connection to `/ws` upgraded (its 101 read), its request
/// preceded by `before` (empty lines, which HTTP parsers skip), then the
/// start of one binary frame (masked, as every client frame) that
/// announces `len` bytes of payload, of which `sent` follow.
fn ws_frame_announced(
    address: std::net::SocketAddr,
    before: &str,
    len: u64,
    sent: usize,
) -> std::net::TcpStream {
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    let request = format!(
        "{before}GET /ws HTTP/1.1\r\nHost: {address}\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: ternio.v2\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        std::io::Read::read_exact(&mut stream, &mut byte).expect("the upgrade's answer");
        head.push(byte[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 101"), "{head:?}");
    let mut frame = vec![0x82, 0x80 | 127];
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&[1, 2, 3, 4]);
    frame.extend(std::iter::repeat_n(0u8, sent));
    stream.write_all(&frame).unwrap();
    stream
}

#[test]
fn a_websocket_frame_announced_large_costs_what_arrived() {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let (_, address) = run_both(ternio::ServerConfig::default());
    // 50 connections, each announcing a frame of 1,000,000 bytes (within
    // the default maximum) and sending 100 bytes of it; half of them after
    // a request that starts with empty lines.
    let baseline = LIVE.load(Ordering::SeqCst);
    let streams: Vec<_> = (0..50)
        .map(|n| ws_frame_announced(address, ["", "\r\n\r\n"][n % 2], 1_000_000, 100))
        .collect();
    let most = most_alive(baseline, Duration::from_secs(1));
    println!("held at most {most} bytes for 50 WebSocket frames announced at 1 MB, 100 bytes sent");
    assert!(
        most < 8 * 1024 * 1024,
        "the server held {most} bytes for frames that did not arrive"
    );
    drop(streams);
    settle(baseline);
}

#[test]
fn before_the_handshake_a_websocket_frame_is_held_to_the_smaller_limit() {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut config = ternio::ServerConfig::default();
    config.require_encryption = true;
    let (_, address) = run_both(config);
    // A frame announced past the 4 KiB allowed before the handshake closes
    // the connection at its header, before its payload comes; also after
    // a request that starts with empty lines (which the HTTP parser skips,
    // and which once made the server look for frames inside the request).
    for before in ["", "\r\n\r\n", "\n\n\r\n"] {
        refused_at_its_header(ws_frame_announced(address, before, 5_000, 10));
    }
}

/// Reads what the server sends until it closes (within 3 s), and checks
/// that it is a `DISCONNECT FRAME_TOO_LARGE`.
fn refused_at_its_header(mut stream: std::net::TcpStream) {
    let started = Instant::now();
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match std::io::Read::read(&mut stream, &mut chunk) {
            Ok(0) => break,
            Ok(read) => answer.extend_from_slice(&chunk[..read]),
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(error) => panic!("the connection stayed open: {error}"),
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "closed only after {:?}",
        started.elapsed()
    );
    // A binary message, the DISCONNECT, whose frame follows the two bytes
    // of the WebSocket header.
    assert_eq!(answer.first(), Some(&0x82), "{answer:?}");
    let disconnect = frame::Frame::parse(
        Bytes::copy_from_slice(&answer[2..2 + usize::from(answer[1] & 0x7F)]),
        usize::MAX,
    )
    .unwrap();
    let reason = ternio::protocol::system::Disconnect::decode_body(&disconnect.body)
        .unwrap()
        .reason;
    assert_eq!(reason, ternio::DisconnectReason::FrameTooLarge);
}
