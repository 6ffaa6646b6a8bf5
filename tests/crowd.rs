//! A crowd: the echo server (examples/echo_server, a child process, with
//! its default limits) holds 10,000 connections at once from 100 loopback
//! addresses (100 from each, opened together), every one of them
//! answering; the server's memory per idle connection is measured and held
//! to 16 KiB.
//!
//! Its own harness (`harness = false`): it prints the figures it measures.
//! `TERNIO_CROWD` sets the number of connections (default 10,000).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ternio::protocol::frame::{self, Flags, FrameDecoder, Framing, Header};
use ternio_tests::echo_server_binary;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The budget of server memory per idle connection.
const BUDGET_PER_CONNECTION: f64 = 16.0 * 1024.0;

/// The echo request the crowd sends: `Echo { payload }` at opcode 0x0001.
fn echo_request(id: u32) -> Bytes {
    #[derive(ternio::Packet)]
    #[packet(opcode = 0x0001)]
    struct Echo {
        payload: Bytes,
    }
    let mut out = BytesMut::new();
    let echo = Echo {
        payload: Bytes::from_static(b"are you there?"),
    };
    frame::write_frame(
        &mut out,
        Framing::LengthPrefixed,
        Header::new(0x0001, Flags::NONE, id),
        &echo,
        usize::MAX,
    )
    .unwrap();
    out.freeze()
}

/// Raises this process's open-file limit to its hard limit (the child inherits it).
#[allow(unsafe_code)]
fn raise_file_limit() -> u64 {
    // SAFETY: getrlimit and setrlimit with a valid pointer to a local struct.
    unsafe {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        limit.rlim_cur = limit.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        limit.rlim_cur
    }
}

/// A value from /proc/<pid>/status, such as `VmRSS` (kB) or `Threads`.
fn status(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the server's status");
    text.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// Starts examples/echo_server (built by `cargo test --workspace`, or named
/// by `TERNIO_ECHO_SERVER`) on a free port; returns it and its address.
fn start_echo_server() -> (Child, SocketAddr) {
    let binary = echo_server_binary();
    let mut child = Command::new(&binary)
        .args(["--tcp", "127.0.0.1:0"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the echo server starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let address = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|line| line.strip_prefix("tcp listening on ")?.parse().ok())
        .expect("the echo server says where it listens");
    // Keep reading what it prints: a closed pipe would fail its next line.
    std::thread::spawn(move || lines.for_each(drop));
    (child, address)
}

/// The loopback address connection `i` of the crowd comes from: 100
/// connections from each address, one address after the other.
fn crowd_source(i: usize) -> std::net::Ipv4Addr {
    let n = i / 100;
    std::net::Ipv4Addr::new(127, 0, (n / 250) as u8, (n % 250 + 2) as u8)
}

/// A connection to `address` from `source`.
async fn connect_from(source: std::net::Ipv4Addr, address: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind((source, 0).into()).unwrap();
    socket.connect(address).await.unwrap()
}

/// Sends one echo on `stream` and checks the answer.
async fn echo(stream: &mut TcpStream, id: u32, request: &Bytes) {
    stream.write_all(request).await.unwrap();
    let mut decoder = FrameDecoder::default();
    let mut buf = BytesMut::with_capacity(64);
    loop {
        if let Some(frame) = decoder.decode(&mut buf).unwrap() {
            assert_eq!(frame.header, Header::new(0x0001, Flags::RESPONSE, id));
            assert_eq!(&frame.body[..], &request[11..]);
            return;
        }
        let read = stream
            .read_buf(&mut buf)
            .await
            .unwrap_or_else(|error| panic!("request {id}: {error}"));
        assert_ne!(read, 0, "the server closed a connection");
    }
}

fn main() {
    let count: usize = std::env::var("TERNIO_CROWD")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let limit = raise_file_limit();
    assert!(
        limit as usize > count + 100,
        "the open-file limit {limit} is too low for {count} connections"
    );
    let (mut server, address) = start_echo_server();
    let pid = server.id();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let result = runtime.block_on(async move {
        let request = echo_request(1);
        // Warm the server up, then take the baseline.
        let mut first = TcpStream::connect(address).await.unwrap();
        echo(&mut first, 1, &request).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let (rss_before, threads_before) = (status(pid, "VmRSS"), status(pid, "Threads"));

        let started = Instant::now();
        let mut crowd = Vec::with_capacity(count);
        for batch in (0..count).collect::<Vec<_>>().chunks(250) {
            let connects: Vec<_> = batch
                .iter()
                .map(|&i| {
                    let request = request.clone();
                    tokio::spawn(async move {
                        let mut stream = connect_from(crowd_source(i), address).await;
                        echo(&mut stream, 1, &request).await;
                        stream
                    })
                })
                .collect();
            for connect in connects {
                crowd.push(connect.await.unwrap());
            }
        }
        let connected_in = started.elapsed();
        // Idle now: the server gives quiet connections' buffers back after
        // 1 s. Read the memory from then on until it is within the budget,
        // for up to 20 s (a loaded machine may be slow to run the give-back):
        // the lowest reading is the one reported.
        let quiet = Instant::now();
        let mut rss_after = u64::MAX;
        loop {
            tokio::time::sleep(Duration::from_millis(250)).await;
            rss_after = rss_after.min(status(pid, "VmRSS"));
            let per_connection =
                (rss_after.saturating_sub(rss_before) * 1024) as f64 / count as f64;
            let given_back = quiet.elapsed() >= Duration::from_millis(1500);
            if (given_back && per_connection <= BUDGET_PER_CONNECTION)
                || quiet.elapsed() > Duration::from_secs(20)
            {
                break;
            }
        }
        let threads_after = status(pid, "Threads");

        // Every connection still answers.
        let request = echo_request(2);
        let mut answered = 0;
        for chunk in crowd.chunks_mut(500) {
            let echoes: Vec<_> = chunk
                .iter_mut()
                .map(|stream| echo(stream, 2, &request))
                .collect();
            futures_util::future::join_all(echoes).await;
            answered += chunk.len();
        }
        (
            rss_before,
            rss_after,
            threads_before,
            threads_after,
            connected_in,
            answered,
        )
    });
    let _ = server.kill();
    let (rss_before, rss_after, threads_before, threads_after, connected_in, answered) = result;
    let per_connection = (rss_after.saturating_sub(rss_before) * 1024) as f64 / count as f64;
    println!(
        "crowd: {count} connections opened and echoed in {connected_in:?}; {answered} answered again once idle"
    );
    println!(
        "crowd: server RSS {rss_before} kB -> {rss_after} kB: {per_connection:.0} B per idle connection (budget {BUDGET_PER_CONNECTION:.0} B); threads {threads_before} -> {threads_after}"
    );
    assert_eq!(answered, count);
    assert!(
        per_connection <= BUDGET_PER_CONNECTION,
        "{per_connection:.0} B per idle connection is over the budget of {BUDGET_PER_CONNECTION:.0} B"
    );
    println!("1 passed, 0 failed");
}
