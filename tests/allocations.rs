//! The echo path and the push path allocate nothing per frame in steady
//! state.
//!
//! A counting global allocator watches the whole process while a blocking
//! client thread (which itself allocates nothing in its loop) sends
//! pre-encoded requests to a server on a current-thread runtime.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{Bytes, BytesMut};
use ternio::protocol::frame::{self, Flags, Framing, Header};
use ternio::{Context, Server, packet_controller};
use ternio_tests::{Echo, Note, PushMe};

struct CountingAllocator;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: defers to the system allocator and only counts calls.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// The count is process-wide: one test counts at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[derive(Default)]
struct EchoOnly;

#[packet_controller(explicit)]
impl EchoOnly {
    fn echo(request: Echo) -> Echo {
        request
    }

    fn push_me(request: PushMe, ctx: &Context) {
        for seq in 0..request.count {
            ctx.push(&Note { seq }).unwrap();
        }
    }
}

/// Sends `count` echoes one at a time and checks each answer, allocating nothing.
fn echo_round_trips(stream: &mut TcpStream, request: &[u8], answer: &mut [u8], count: usize) {
    for _ in 0..count {
        stream.write_all(request).unwrap();
        stream.read_exact(answer).unwrap();
        // The answer is the request with RESPONSE set (byte 6 = flags after the prefix).
        assert_eq!(answer[6], Flags::RESPONSE.bits());
        assert_eq!(answer[11..], request[11..]);
    }
}

/// Starts the server on a current-thread runtime of its own thread.
fn start() -> std::net::SocketAddr {
    let server = Server::builder()
        .discover_controllers(false)
        .controller(EchoOnly)
        .map_tcp("127.0.0.1:0")
        .build()
        .unwrap();
    let address = server.tcp_addrs()[0];
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(server.run()).unwrap();
    });
    address
}

#[test]
fn the_echo_path_allocates_nothing_per_frame() {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let address = start();
    for size in [32usize, 1024] {
        let mut request = BytesMut::new();
        let echo = Echo {
            payload: Bytes::from(vec![0x5A; size]),
        };
        frame::write_frame(
            &mut request,
            Framing::LengthPrefixed,
            Header::new(0x0001, Flags::NONE, 1),
            &echo,
            usize::MAX,
        )
        .unwrap();
        let mut answer = vec![0u8; request.len()];
        let mut stream = TcpStream::connect(address).unwrap();
        stream.set_nodelay(true).unwrap();

        echo_round_trips(&mut stream, &request, &mut answer, 2_000);
        let before = ALLOCATIONS.load(Ordering::SeqCst);
        echo_round_trips(&mut stream, &request, &mut answer, 10_000);
        let allocations = ALLOCATIONS.load(Ordering::SeqCst) - before;
        println!("{size} B echo: {allocations} allocations in 10,000 round trips");
        assert_eq!(
            allocations, 0,
            "{size} B echo allocated {allocations} times in 10,000 round trips"
        );
    }
}

/// Asks for `count` pushes `rounds` times; reads the answer and every
/// push into a buffer it already has.
fn push_rounds(stream: &mut TcpStream, request: &[u8], count: u32, rounds: usize) {
    let mut frame = [0u8; 64];
    for _ in 0..rounds {
        stream.write_all(request).unwrap();
        // The answer and the pushes, in whichever order they come.
        let (mut pushes, mut answered) = (0, false);
        while pushes < count || !answered {
            let mut prefix = [0u8; 4];
            stream.read_exact(&mut prefix).unwrap();
            let len = u32::from_le_bytes(prefix) as usize;
            stream.read_exact(&mut frame[..len]).unwrap();
            // Flags are the header's third byte (after the opcode).
            if frame[2] & Flags::RESPONSE.bits() != 0 {
                answered = true;
            } else {
                assert_eq!(u16::from_le_bytes([frame[0], frame[1]]), 0x0061);
                pushes += 1;
            }
        }
        assert_eq!(pushes, count);
    }
}

#[test]
fn the_push_path_allocates_nothing_per_frame() {
    const COUNT: u32 = 500;
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let address = start();
    let mut request = BytesMut::new();
    frame::write_frame(
        &mut request,
        Framing::LengthPrefixed,
        Header::new(0x0060, Flags::NONE, 1),
        &PushMe { count: COUNT },
        usize::MAX,
    )
    .unwrap();
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_nodelay(true).unwrap();

    push_rounds(&mut stream, &request, COUNT, 10);
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    push_rounds(&mut stream, &request, COUNT, 20);
    let allocations = ALLOCATIONS.load(Ordering::SeqCst) - before;
    println!("push: {allocations} allocations in 10,000 pushes");
    assert_eq!(
        allocations, 0,
        "pushing allocated {allocations} times in 10,000 pushes"
    );
}
