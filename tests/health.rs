//! The health endpoints (`/healthz`, `/readyz`) on their own listener, the
//! Prometheus page (`/metrics`) on that same listener when given its
//! address, and a real process stopped by SIGTERM.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use ternio::{DisconnectReason, ServerConfig, ServerHandle};
use ternio_tests::*;

/// A test server with a health listener: its TCP and health addresses, its
/// handle and its `run` task.
fn start_with_health(
    config: ServerConfig,
) -> (
    SocketAddr,
    SocketAddr,
    ServerHandle,
    JoinHandle<std::io::Result<()>>,
) {
    let server = test_server_builder()
        .map_tcp("127.0.0.1:0")
        .config(config)
        .health("127.0.0.1:0")
        .build()
        .unwrap();
    let tcp = server.tcp_addrs()[0];
    let health = server.health_addr().expect("a health listener");
    let handle = server.handle();
    let running = tokio::spawn(server.run());
    (tcp, health, handle, running)
}

/// Sends `request` as is and reads the whole answer (the server closes).
async fn exchange(address: SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(PATIENCE, stream.read_to_string(&mut answer))
        .await
        .expect("an answer, then the close")
        .unwrap();
    answer
}

/// `GET path`: the status code and the body.
async fn get(address: SocketAddr, path: &str) -> (u16, String) {
    let request = format!("GET {path} HTTP/1.1\r\nHost: probe\r\nUser-Agent: test\r\n\r\n");
    let answer = exchange(address, &request).await;
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
    let status = head
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {head:?}"));
    let length = head
        .lines()
        .find_map(|line| line.strip_prefix("Content-Length: "))
        .expect("a Content-Length");
    assert_eq!(length.parse::<usize>().unwrap(), body.len(), "{answer:?}");
    (status, body.to_owned())
}

#[tokio::test]
async fn healthz_and_readyz_answer_200_then_readyz_503_while_draining() {
    let (tcp, health, handle, running) = start_with_health(ServerConfig::default());
    assert_eq!(get(health, "/healthz").await, (200, "ok\n".into()));
    assert_eq!(get(health, "/readyz").await, (200, "ready\n".into()));
    assert_eq!(get(health, "/readyz?verbose=1").await.0, 200);
    assert!(handle.is_ready());

    // A request in flight holds the drain open.
    let mut raw = RawConnection::connect(tcp).await;
    raw.request(&Sleep { ms: 2000, tag: 1 }, 1).await;
    raw.request(&Add { a: 1, b: 2 }, 2).await;
    assert_eq!(raw.recv().await.unwrap().header.request_id, 2);
    handle.shutdown();
    assert!(!handle.is_ready());
    assert_eq!(get(health, "/readyz").await, (503, "draining\n".into()));
    assert_eq!(get(health, "/healthz").await, (200, "ok\n".into()));
    assert_eq!(handle.connection_count(), 1, "still draining");

    let answer = raw.recv().await.unwrap();
    assert_eq!(answer.header.request_id, 1);
    raw.expect_disconnect(DisconnectReason::Shutdown).await;
    assert!(handle.drained().await);
    // Once drained, `run` returns, and the health listener closes.
    running.await.unwrap().unwrap();
    eventually_async(PATIENCE, "the health listener closes", async || {
        TcpStream::connect(health).await.is_err()
    })
    .await;
}

#[tokio::test]
async fn the_responder_answers_what_it_does_not_serve_and_head() {
    let (_, health, _handle, _running) = start_with_health(ServerConfig::default());
    assert_eq!(get(health, "/metrics").await.0, 404);
    let head = exchange(health, "HEAD /healthz HTTP/1.1\r\n\r\n").await;
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head:?}");
    assert!(head.ends_with("\r\n\r\n"), "no body after HEAD: {head:?}");
    let post = exchange(health, "POST /healthz HTTP/1.1\r\n\r\n").await;
    assert!(post.starts_with("HTTP/1.1 405 "), "{post:?}");
    let junk = exchange(health, "hello\r\n\r\n").await;
    assert!(junk.starts_with("HTTP/1.1 400 "), "{junk:?}");
    // A head split across writes is read whole.
    let mut stream = TcpStream::connect(health).await.unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\n\r")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    stream.write_all(b"\n").await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer:?}");
}

#[tokio::test]
async fn a_request_head_over_the_limit_gets_431() {
    let (_, health, _handle, _running) = start_with_health(ServerConfig::default());
    let mut stream = TcpStream::connect(health).await.unwrap();
    let mut request = b"GET /healthz HTTP/1.1\r\nX-Fill: ".to_vec();
    request.resize(8 * 1024, b'a');
    // The server answers after 4 KiB; the rest may meet a closed socket.
    let _ = stream.write_all(&request).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(PATIENCE, stream.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer:?}");
}

#[tokio::test]
async fn a_silent_peer_on_the_health_port_is_closed_at_the_timeout() {
    let timeout = Duration::from_millis(300);
    let mut config = ServerConfig::default();
    config.health_timeout = timeout;
    let (_, health, _handle, _running) = start_with_health(config);
    let started = Instant::now();
    let mut silent = TcpStream::connect(health).await.unwrap();
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(PATIENCE, silent.read(&mut byte))
        .await
        .expect("closed by the server");
    assert!(matches!(read, Ok(0)), "a close, no answer: {read:?}");
    let waited = started.elapsed();
    assert!(waited >= timeout - Duration::from_millis(20), "{waited:?}");
    assert!(waited < timeout + Duration::from_secs(2), "{waited:?}");
    // Meanwhile, probes are answered.
    assert_eq!(get(health, "/healthz").await.0, 200);
}

#[tokio::test]
async fn sigterm_stops_the_echo_server_cleanly() {
    let mut child = Command::new(echo_server_binary())
        .args(["--tcp", "127.0.0.1:0", "--health", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the echo server starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut tcp = None;
    let mut health = None;
    for line in lines.by_ref().map_while(Result::ok) {
        if let Some(address) = line.strip_prefix("tcp listening on ") {
            tcp = address.parse::<SocketAddr>().ok();
        }
        if let Some(rest) = line.strip_prefix("health on http://") {
            health = rest.split('/').next().and_then(|a| a.parse().ok());
        }
        if line.starts_with("public key: ") {
            break;
        }
    }
    std::thread::spawn(move || lines.for_each(drop));
    let stderr = child.stderr.take().unwrap();
    let logged = std::thread::spawn(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<_>>()
    });
    let (tcp, health) = (
        tcp.expect("a TCP address"),
        health.expect("a health address"),
    );
    assert_eq!(get(health, "/readyz").await.0, 200);

    let mut raw = RawConnection::connect(tcp).await;
    raw.request(
        &ternio_tests::Echo {
            payload: "hi".into(),
        },
        1,
    )
    .await;
    assert_eq!(raw.recv().await.unwrap().header.request_id, 1);

    let started = Instant::now();
    ternio_tests::terminate(child.id());
    raw.expect_disconnect(DisconnectReason::Shutdown).await;
    drop(raw);
    // The drain bound: the default shutdown grace (5 s) and close linger
    // (2 s), and some time to start and stop the process.
    let bound = Duration::from_secs(7) + Duration::from_secs(3);
    let status = ternio_tests::exit_within(child, bound, "the echo server").await;
    assert!(started.elapsed() < bound);
    assert_eq!(status.code(), Some(0), "a clean exit: {status:?}");
    let logged = logged.join().unwrap();
    assert!(
        logged.iter().all(|line| !line.contains('\x1b')),
        "no ANSI colour codes in a log written to a pipe: {logged:?}"
    );
    assert!(
        logged.iter().any(|line| line.contains("SIGTERM received")),
        "the signal is logged: {logged:?}"
    );
    assert!(
        logged
            .iter()
            .any(|line| line.contains("echo server stopped")),
        "the stop is logged: {logged:?}"
    );
}

/// `GET path` without the Content-Length check of [`get`]'s callers: the
/// status, the Content-Type and the body.
async fn get_typed(address: SocketAddr, path: &str) -> (u16, String, String) {
    let request = format!("GET {path} HTTP/1.1\r\nHost: probe\r\n\r\n");
    let answer = exchange(address, &request).await;
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
    let status = head[9..12].parse().unwrap();
    let content_type = head
        .lines()
        .find_map(|line| line.strip_prefix("Content-Type: "))
        .expect("a Content-Type")
        .to_owned();
    (status, content_type, body.to_owned())
}

#[tokio::test]
async fn the_prometheus_endpoint_on_the_health_address_shares_its_listener() {
    let server = test_server_builder()
        .map_tcp("127.0.0.1:0")
        .health("127.0.0.1:0")
        .prometheus("127.0.0.1:0".parse().unwrap())
        .build()
        .unwrap();
    let tcp = server.tcp_addrs()[0];
    let health = server.health_addr().expect("a health listener");
    let handle = server.handle();
    let running = tokio::spawn(server.run());

    // Some traffic to count.
    let mut raw = RawConnection::connect(tcp).await;
    raw.request(&Add { a: 1, b: 2 }, 1).await;
    assert_eq!(raw.recv().await.unwrap().header.request_id, 1);

    assert_eq!(get(health, "/healthz").await, (200, "ok\n".into()));
    assert_eq!(get(health, "/readyz").await, (200, "ready\n".into()));
    let (status, content_type, body) = get_typed(health, "/metrics").await;
    assert_eq!(status, 200, "{body}");
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    assert!(
        body.contains("# HELP ternio_requests_total")
            && body.contains("ternio_requests_total{opcode=\"0x0010\""),
        "the page counts the request: {body}"
    );
    // HEAD gets the head only.
    let head = exchange(health, "HEAD /metrics HTTP/1.1\r\n\r\n").await;
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head:?}");
    assert!(head.ends_with("\r\n\r\n"), "{head:?}");

    // Through the drain, the one listener still answers all three.
    raw.request(&Sleep { ms: 2000, tag: 2 }, 2).await;
    raw.request(&Add { a: 1, b: 2 }, 3).await;
    assert_eq!(raw.recv().await.unwrap().header.request_id, 3);
    handle.shutdown();
    assert_eq!(get(health, "/readyz").await.0, 503);
    assert_eq!(get_typed(health, "/metrics").await.0, 200);
    assert_eq!(raw.recv().await.unwrap().header.request_id, 2);
    raw.expect_disconnect(DisconnectReason::Shutdown).await;
    running.await.unwrap().unwrap();
}
