//! The Rust client's resilience over real loopback sockets (issue 21, item
//! 5): the keepalive that notices a server gone silent, the backoff that
//! does not hammer a server which accepts and then refuses, and the bound
//! on what the client holds for a server that does not read.
//!
//! The misbehaving servers are scripted here on a `TcpListener`; the
//! well-behaved one is the test server of `ternio_tests`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ternio::DisconnectReason;
use ternio::protocol::frame::{self, Flags, FrameDecoder, Framing, Header};
use ternio::protocol::system::{self, Disconnect};
use ternio::protocol::{DEFAULT_MAX_FRAME_SIZE, Encode};
use ternio_client::{
    Client, ClientConfig, ClientError, CloseReason, ConnectionState, Keepalive, ReconnectPolicy,
    SecureConfig,
};
use ternio_tests::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

/// Waits up to `limit` for a state that `accept` accepts; returns it.
async fn wait_for_state(
    client: &Client,
    limit: Duration,
    accept: impl FnMut(&ConnectionState) -> bool,
) -> ConnectionState {
    let mut states = client.state_changes();
    let state = tokio::time::timeout(limit, states.wait_for(accept))
        .await
        .unwrap_or_else(|_| panic!("state still {:?} after {limit:?}", client.state()));
    state
        .expect("the client's state lives as long as the client")
        .clone()
}

/// The plain, length-prefixed bytes of `DISCONNECT reason`.
fn disconnect_frame(reason: DisconnectReason) -> BytesMut {
    let mut out = BytesMut::new();
    frame::write_frame(
        &mut out,
        Framing::LengthPrefixed,
        Header::new(system::DISCONNECT, Flags::NONE, 0),
        &Disconnect::new(reason, "scripted"),
        usize::MAX,
    )
    .unwrap();
    out
}

/// Reads `stream` to its end (or an error), returning how many bytes came.
async fn drain(stream: &mut TcpStream) -> u64 {
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0;
    while let Ok(n @ 1..) = stream.read(&mut buf).await {
        total += n as u64;
    }
    total
}

// ---------------------------------------------------------------- keepalive

/// A server that accepts and then never sends a byte (a half-open
/// connection, as after a crash of the server's host): it reads and
/// decodes what the client sends, and reports each frame's opcode and id.
async fn silent_server() -> (SocketAddr, tokio::sync::mpsc::UnboundedReceiver<(u16, u32)>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (frames, received) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let frames = frames.clone();
            tokio::spawn(async move {
                let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_SIZE);
                let mut buf = BytesMut::new();
                while matches!(stream.read_buf(&mut buf).await, Ok(1..)) {
                    while let Ok(Some(frame)) = decoder.decode(&mut buf) {
                        let _ = frames.send((frame.header.opcode, frame.header.request_id));
                    }
                }
                // Held open, silent, until the client goes.
            });
        }
    });
    (address, received)
}

fn keepalive(interval_ms: u64, timeout_ms: u64) -> Option<Keepalive> {
    Some(Keepalive {
        interval: Duration::from_millis(interval_ms),
        timeout: Duration::from_millis(timeout_ms),
    })
}

#[tokio::test]
async fn the_keepalive_is_on_by_default() {
    let config = ClientConfig::default();
    let keepalive = config.keepalive.expect("on by default");
    assert!(keepalive.interval > Duration::ZERO && keepalive.interval < Duration::from_secs(60));
    assert!(keepalive.timeout > Duration::ZERO);
}

/// On the code before the keepalive, the client stays `Connected` to this
/// server forever.
#[tokio::test]
async fn a_silent_server_is_noticed_within_interval_and_timeout() {
    let (address, mut frames) = silent_server().await;
    let config = ClientConfig {
        keepalive: keepalive(300, 500),
        ..ClientConfig::default()
    };
    let started = Instant::now();
    let client = Client::connect_tcp_with(address, config).await.unwrap();
    assert_eq!(client.state(), ConnectionState::Connected);

    // 800 ms are due; the rest is room for a loaded machine.
    let state = wait_for_state(&client, Duration::from_secs(5), ConnectionState::is_closed).await;
    let elapsed = started.elapsed();
    match state {
        ConnectionState::Closed(CloseReason::KeepaliveTimeout { interval, timeout }) => {
            assert_eq!(interval, Duration::from_millis(300));
            assert_eq!(timeout, Duration::from_millis(500));
        }
        other => panic!("expected a keepalive timeout, got {other:?}"),
    }
    assert!(elapsed >= Duration::from_millis(800), "{elapsed:?}");
    // The client sent a PING as a request (a non-zero id: it wants a PONG).
    let (opcode, id) = frames.recv().await.expect("the PING arrived");
    assert_eq!(opcode, system::PING);
    assert_ne!(id, 0);
}

/// A proxy on loopback in front of `target` that forwards both ways until
/// [`cut`](Self::cut): the connections open then stay open but go silent
/// both ways (a path that died), while connections made later are forwarded.
struct Proxy {
    address: SocketAddr,
    /// Connections numbered below this are cut.
    cut_below: watch::Sender<u64>,
    next: Arc<AtomicU64>,
}

impl Proxy {
    async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let cut_below = watch::Sender::new(0);
        let next = Arc::new(AtomicU64::new(0));
        let (cuts, numbers) = (cut_below.clone(), Arc::clone(&next));
        tokio::spawn(async move {
            loop {
                let (client, _) = listener.accept().await.unwrap();
                let number = numbers.fetch_add(1, Ordering::SeqCst);
                let server = TcpStream::connect(target).await.unwrap();
                let mut cut = cuts.subscribe();
                tokio::spawn(async move {
                    let (mut client_in, mut client_out) = client.into_split();
                    let (mut server_in, mut server_out) = server.into_split();
                    let forward = async {
                        tokio::select! {
                            _ = tokio::io::copy(&mut client_in, &mut server_out) => {}
                            _ = tokio::io::copy(&mut server_in, &mut client_out) => {}
                        }
                    };
                    // (The watch's guard is not `Send`: dropped at once.)
                    let cut_now =
                        async move { cut.wait_for(|below| number < *below).await.is_ok() };
                    tokio::select! {
                        () = forward => {}
                        true = cut_now => {
                            // Silent both ways, and held open.
                            std::future::pending::<()>().await;
                        }
                    }
                });
            }
        });
        Self {
            address,
            cut_below,
            next,
        }
    }

    /// Cuts every connection open now.
    fn cut(&self) {
        self.cut_below
            .send_replace(self.next.load(Ordering::SeqCst));
    }
}

/// A request in flight when the path dies fails with the keepalive's
/// reason, and the client reconnects (here through the proxy, whose new
/// connections work). Over TCP and WebSocket, plain and secure.
async fn a_dead_path_is_noticed_and_the_client_reconnects(ws: bool, secure: bool) {
    let (tcp, ws_address, _server) = start_server_with_ws(|b| b);
    let proxy = Proxy::start(if ws { ws_address } else { tcp }).await;
    let config = ClientConfig {
        keepalive: keepalive(200, 400),
        secure: secure.then(SecureConfig::anonymous),
        reconnect: Some(ReconnectPolicy {
            initial_delay: Duration::from_millis(20),
            ..ReconnectPolicy::default()
        }),
        ..ClientConfig::default()
    };
    let client = if ws {
        let url = format!("ws://{}/ws", proxy.address);
        Client::connect_ws_with(&url, config).await.unwrap()
    } else {
        Client::connect_tcp_with(proxy.address, config)
            .await
            .unwrap()
    };
    assert_echoed(&client, Bytes::from_static(b"before")).await;

    proxy.cut();
    let started = Instant::now();
    let lost = client
        .request_with_timeout::<_, Echo>(
            &Echo {
                payload: Bytes::from_static(b"into the void"),
            },
            Duration::from_secs(30),
        )
        .await;
    match lost {
        Err(ClientError::Closed(CloseReason::KeepaliveTimeout { .. })) => {}
        other => panic!("expected the keepalive's reason, got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    assert_echoed(&client, Bytes::from_static(b"after")).await;
    assert_eq!(client.is_secure(), secure);
}

#[tokio::test]
async fn a_dead_tcp_path_is_noticed_and_the_client_reconnects() {
    a_dead_path_is_noticed_and_the_client_reconnects(false, false).await;
}

#[tokio::test]
async fn a_dead_websocket_path_is_noticed_and_the_client_reconnects() {
    a_dead_path_is_noticed_and_the_client_reconnects(true, false).await;
}

#[tokio::test]
async fn a_dead_secure_path_is_noticed_and_the_client_reconnects() {
    a_dead_path_is_noticed_and_the_client_reconnects(false, true).await;
    a_dead_path_is_noticed_and_the_client_reconnects(true, true).await;
}

/// A healthy but idle connection survives many keepalive rounds: the
/// server's PONGs (sealed, on a secure session) count as life.
#[tokio::test]
async fn an_idle_healthy_connection_stays_up() {
    let (tcp, ws, _server) = start_server_with_ws(|b| b);
    for (transport, secure) in [(0, false), (1, false), (0, true), (1, true)] {
        let config = ClientConfig {
            // A PING every 50 ms of silence; 2 s for each PONG.
            keepalive: keepalive(50, 2000),
            secure: secure.then(SecureConfig::anonymous),
            ..ClientConfig::default()
        };
        let client = if transport == 0 {
            Client::connect_tcp_with(tcp, config).await.unwrap()
        } else {
            Client::connect_ws_with(&format!("ws://{ws}/ws"), config)
                .await
                .unwrap()
        };
        let mut states = client.state_changes();
        states.borrow_and_update();
        // Real time must pass here: dozens of rounds.
        let changed = tokio::time::timeout(Duration::from_millis(1500), states.changed()).await;
        assert!(changed.is_err(), "the state changed: {:?}", client.state());
        assert_eq!(client.state(), ConnectionState::Connected);
        assert_echoed(&client, Bytes::from_static(b"still here")).await;
    }
}

// ------------------------------------------------------------------ backoff

/// A server whose first connection works until `refuse` is notified and is
/// then told `reason`; every later connection is told `reason` at once
/// (a full server). Records when each connection was accepted.
struct RefusingServer {
    address: SocketAddr,
    refuse: Arc<Notify>,
    accepted: Arc<Mutex<Vec<Instant>>>,
}

impl RefusingServer {
    async fn start(reason: DisconnectReason, after: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let refuse = Arc::new(Notify::new());
        let accepted = Arc::new(Mutex::new(Vec::new()));
        let (told, times) = (Arc::clone(&refuse), Arc::clone(&accepted));
        tokio::spawn(async move {
            loop {
                let (mut stream, _) = listener.accept().await.unwrap();
                let first = {
                    let mut times = times.lock().unwrap();
                    times.push(Instant::now());
                    times.len() == 1
                };
                let told = Arc::clone(&told);
                tokio::spawn(async move {
                    if first {
                        told.notified().await;
                    } else {
                        tokio::time::sleep(after).await;
                    }
                    let _ = stream.write_all(&disconnect_frame(reason)).await;
                    let _ = stream.shutdown().await;
                    drain(&mut stream).await;
                });
            }
        });
        Self {
            address,
            refuse,
            accepted,
        }
    }

    fn accepted(&self) -> Vec<Instant> {
        self.accepted.lock().unwrap().clone()
    }
}

/// On the code before the fix, each connection that was installed started
/// the attempts again at 1: about ten connections a second, forever.
#[tokio::test]
async fn a_server_that_refuses_every_connection_is_not_hammered() {
    let server = RefusingServer::start(DisconnectReason::TooManyConnections, Duration::ZERO).await;
    let config = ClientConfig {
        reconnect: Some(ReconnectPolicy {
            max_attempts: None,
            ..ReconnectPolicy::default()
        }),
        ..ClientConfig::default()
    };
    let client = Client::connect_tcp_with(server.address, config)
        .await
        .unwrap();
    let started = Instant::now();
    server.refuse.notify_one();
    // Real time must pass: the window over which connections are counted.
    let window = Duration::from_secs(6);
    tokio::time::sleep(window).await;
    let times: Vec<_> = server
        .accepted()
        .into_iter()
        .filter(|time| *time >= started && *time <= started + window)
        .collect();
    // After TOO_MANY_CONNECTIONS each attempt waits at least busy_delay
    // (1 s): at most 6 in 6 s. The old code made about 60.
    assert!(
        (2..=6).contains(&times.len()),
        "{} connections in {window:?}",
        times.len()
    );
    for pair in times.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(gap >= Duration::from_secs(1), "{gap:?} between attempts");
    }
    assert!(matches!(
        client.state(),
        ConnectionState::Reconnecting { attempt } if attempt >= 2
    ));
}

/// Without the floor and the jitter, the delays between connections that
/// are refused at once grow as the policy says, and the attempts run out:
/// installed connections that did not last do not start the count again.
#[tokio::test]
async fn delays_grow_across_connections_that_do_not_last() {
    let server = RefusingServer::start(DisconnectReason::TooManyConnections, Duration::ZERO).await;
    let policy = ReconnectPolicy {
        initial_delay: Duration::from_millis(50),
        max_delay: Duration::from_secs(2),
        multiplier: 2.0,
        jitter: 0.0,
        max_attempts: Some(5),
        healthy_after: Duration::from_secs(10),
        busy_delay: Duration::ZERO,
    };
    let config = ClientConfig {
        reconnect: Some(policy.clone()),
        ..ClientConfig::default()
    };
    let client = Client::connect_tcp_with(server.address, config)
        .await
        .unwrap();
    server.refuse.notify_one();
    let state = wait_for_state(&client, Duration::from_secs(10), ConnectionState::is_closed).await;
    match state {
        ConnectionState::Closed(CloseReason::ReconnectFailed { attempts, .. }) => {
            assert_eq!(attempts, 5)
        }
        other => panic!("expected the attempts to run out, got {other:?}"),
    }
    let times = server.accepted();
    assert_eq!(times.len(), 6, "the first connection and 5 attempts");
    // Attempt n waited 50 ms * 2^(n-1) before connecting.
    for (n, pair) in (1..).zip(times[1..].windows(2)) {
        let gap = pair[1] - pair[0];
        let (shortest, _) = policy.delay_range(n + 1, false);
        assert!(gap >= shortest, "attempt {}: {gap:?} < {shortest:?}", n + 1);
    }
}

/// Connections that stay up for `healthy_after` start the count again:
/// the client keeps coming back to a server that works for a while each
/// time. With a `healthy_after` they do not reach, the same server makes
/// the client give up after `max_attempts`.
#[tokio::test]
async fn only_a_connection_that_stayed_up_starts_the_count_again() {
    for (healthy_after, gives_up) in [
        (Duration::from_millis(100), false),
        (Duration::from_secs(30), true),
    ] {
        // Every connection is told IDLE_TIMEOUT after 400 ms.
        let server =
            RefusingServer::start(DisconnectReason::IdleTimeout, Duration::from_millis(400)).await;
        let config = ClientConfig {
            reconnect: Some(ReconnectPolicy {
                initial_delay: Duration::from_millis(20),
                multiplier: 1.0,
                jitter: 0.0,
                max_attempts: Some(2),
                healthy_after,
                ..ReconnectPolicy::default()
            }),
            ..ClientConfig::default()
        };
        let client = Client::connect_tcp_with(server.address, config)
            .await
            .unwrap();
        server.refuse.notify_one();
        if gives_up {
            let state =
                wait_for_state(&client, Duration::from_secs(10), ConnectionState::is_closed).await;
            assert!(
                matches!(
                    state,
                    ConnectionState::Closed(CloseReason::ReconnectFailed { attempts: 2, .. })
                ),
                "{state:?}"
            );
            assert_eq!(server.accepted().len(), 3);
        } else {
            // Five connections in a row, each lost after 400 ms.
            let deadline = Instant::now() + Duration::from_secs(10);
            while server.accepted().len() < 6 {
                assert!(Instant::now() < deadline, "{:?}", client.state());
                assert!(!client.state().is_closed(), "{:?}", client.state());
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

// ----------------------------------------------------------- outbound bound

/// A server that accepts and never reads its first connection; it reads
/// later ones to their end. Hands out the first one's stream when told.
async fn deaf_server() -> (
    SocketAddr,
    tokio::sync::oneshot::Receiver<TcpStream>,
    Arc<AtomicUsize>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (first, deaf) = tokio::sync::oneshot::channel();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        count.fetch_add(1, Ordering::SeqCst);
        let _ = first.send(stream);
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move { drain(&mut stream).await });
        }
    });
    (address, deaf, accepted)
}

/// On the code before the bound, the client queues without end: the loop
/// below reaches its cap of 64 MiB without an error.
#[tokio::test]
async fn a_server_that_does_not_read_fails_the_link_at_the_bound() {
    let (address, deaf, accepted) = deaf_server().await;
    let limit = 2 * 1024 * 1024;
    let config = ClientConfig {
        max_outbound: limit,
        keepalive: None,
        reconnect: Some(ReconnectPolicy {
            initial_delay: Duration::from_millis(20),
            ..ReconnectPolicy::default()
        }),
        ..ClientConfig::default()
    };
    let client = Client::connect_tcp_with(address, config).await.unwrap();
    let mut deaf = deaf.await.unwrap();
    // On the wire: a length prefix and a header, then the body.
    let wire_len = |echo: &Echo| (4 + 7 + echo.encoded_len()) as u64;

    // A request in flight, which will never be answered: its first poll
    // registers it and writes it.
    let question = Echo {
        payload: Bytes::from_static(b"waiting"),
    };
    let mut in_flight =
        Box::pin(client.request_with_timeout::<_, Echo>(&question, Duration::from_secs(60)));
    let first = std::future::poll_fn(|cx| Poll::Ready(in_flight.as_mut().poll(cx))).await;
    assert!(first.is_pending());
    let mut sent = wire_len(&question);

    let echo = Echo {
        payload: Bytes::from(vec![7u8; 64 * 1024]),
    };
    let frame_bytes = wire_len(&echo);
    let cap = 64 * 1024 * 1024;
    let failure = loop {
        match client.send(&echo) {
            Ok(()) => sent += frame_bytes,
            Err(error) => break error,
        }
        assert!(sent < cap, "{sent} bytes queued and no failure");
    };
    let (limit_seen, queued) = match failure {
        ClientError::Closed(CloseReason::OutboundFull { limit, queued }) => (limit, queued),
        other => panic!("expected OutboundFull, got {other:?}"),
    };
    assert_eq!(limit_seen, limit);
    // Refused when the body and at most 128 bytes of framing could pass it.
    let body = echo.encoded_len() as u64;
    assert!(
        queued <= limit && queued as u64 + body + 128 > limit as u64,
        "{queued}"
    );

    // The request in flight failed with the same reason.
    match in_flight.await {
        Err(ClientError::Closed(CloseReason::OutboundFull { .. })) => {}
        other => panic!("expected OutboundFull, got {other:?}"),
    }

    // What the client held never passed the bound: everything it took is
    // either what reached the server or what it held when the link failed.
    let read = tokio::time::timeout(Duration::from_secs(10), drain(&mut deaf))
        .await
        .expect("the client closed the connection");
    let held = sent.saturating_sub(read);
    assert!(held <= limit as u64, "held {held} > {limit}");

    // The reconnect policy applies: a new connection, which works.
    let state = wait_for_state(
        &client,
        Duration::from_secs(5),
        ConnectionState::is_connected,
    )
    .await;
    assert_eq!(state, ConnectionState::Connected);
    assert!(accepted.load(Ordering::SeqCst) >= 2);
    client.send(&echo).unwrap();
}
