//! The echo path allocates nothing per frame in steady state.
//!
//! A counting global allocator watches the whole process while a blocking
//! client thread (which itself allocates nothing in its loop) sends
//! pre-encoded echo requests to a server on a current-thread runtime.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{Bytes, BytesMut};
use ternio::protocol::frame::{self, Flags, Framing, Header};
use ternio::{Server, packet_controller};
use ternio_tests::Echo;

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

#[derive(Default)]
struct EchoOnly;

#[packet_controller(explicit)]
impl EchoOnly {
    fn echo(request: Echo) -> Echo {
        request
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

#[test]
fn the_echo_path_allocates_nothing_per_frame() {
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
