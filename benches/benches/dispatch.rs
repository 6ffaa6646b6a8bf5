//! One frame through Ternio's dispatch table, through public APIs only: a
//! server on a current-thread runtime in its own thread, and a blocking
//! socket sending pre-encoded echo frames. One round trip includes the
//! loopback syscalls on both sides; a batch of 64 pipelined frames (one
//! write, every answer read) spreads them, leaving mostly the per-frame
//! work of decoding, dispatching and encoding the reply.
//!
//! `cargo bench -p ternio-bench --bench dispatch`

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use bytes::{Bytes, BytesMut};
use divan::{Bencher, black_box};
use ternio::protocol::frame::{self, Flags, Framing, Header};
use ternio::{Packet, Server, packet_controller};

fn main() {
    divan::main();
}

/// The echo request.
#[derive(Packet)]
#[packet(opcode = 0x0001, response = Echo)]
struct Echo {
    payload: Bytes,
}

#[derive(Default)]
struct EchoOnly;

#[packet_controller(explicit)]
impl EchoOnly {
    fn echo(request: Echo) -> Echo {
        request
    }
}

/// Starts a server on a current-thread runtime in a thread of its own.
fn start_server() -> SocketAddr {
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

/// `count` echo requests of `size` bytes, one after the other, as TCP frames.
fn requests(size: usize, count: u32) -> Vec<u8> {
    let echo = Echo {
        payload: Bytes::from(vec![0x5A; size]),
    };
    let mut out = BytesMut::new();
    for id in 1..=count {
        frame::write_frame(
            &mut out,
            Framing::LengthPrefixed,
            Header::new(0x0001, Flags::NONE, id),
            &echo,
            usize::MAX,
        )
        .unwrap();
    }
    out.to_vec()
}

fn connect(address: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(address).unwrap();
    stream.set_nodelay(true).unwrap();
    stream
}

/// One echo frame in, its answer out: a whole round trip.
#[divan::bench(args = [32, 1024])]
fn round_trip(bencher: Bencher, size: usize) {
    let mut stream = connect(start_server());
    let request = requests(size, 1);
    let mut answer = vec![0u8; request.len()];
    bencher.bench_local(|| {
        stream.write_all(&request).unwrap();
        stream.read_exact(&mut answer).unwrap();
        black_box(&answer);
    });
}

/// 64 echo frames in one write, then all 64 answers: the cost per frame.
#[divan::bench(args = [32, 1024])]
fn pipelined_64(bencher: Bencher, size: usize) {
    let mut stream = connect(start_server());
    let batch = requests(size, 64);
    let mut answers = vec![0u8; batch.len()];
    bencher
        .counter(divan::counter::ItemsCount::new(64usize))
        .bench_local(|| {
            stream.write_all(&batch).unwrap();
            stream.read_exact(&mut answers).unwrap();
            black_box(&answers);
        });
}
