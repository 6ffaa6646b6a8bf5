//! The Rust client's resilience over real loopback sockets (issue 21, item
//! 5): the keepalive that notices a path gone dead, over TCP and WebSocket,
//! plain and secure, and the bound on what the client holds for a server
//! that does not read.
//!
//! The misbehaving servers are scripted here on a `TcpListener`; the
//! well-behaved one is the test server of `ternio_tests`. The timers' own
//! rules (a silent server, the delays between attempts, the count of
//! attempts) run on tokio's paused clock over in-memory pipes, in
//! `sdk-client/tests/timers.rs`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use ternio::protocol::Encode;
use ternio_client::{
    Client, ClientConfig, ClientError, CloseReason, ConnectionState, Keepalive, ReconnectPolicy,
    SecureConfig,
};
use ternio_tests::*;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
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

fn keepalive(interval_ms: u64, timeout_ms: u64) -> Option<Keepalive> {
    Some(Keepalive::new(
        Duration::from_millis(interval_ms),
        Duration::from_millis(timeout_ms),
    ))
}

#[tokio::test]
async fn the_keepalive_is_on_by_default() {
    let config = ClientConfig::default();
    let keepalive = config.keepalive.expect("on by default");
    assert!(keepalive.interval > Duration::ZERO && keepalive.interval < Duration::from_secs(60));
    assert!(keepalive.timeout > Duration::ZERO);
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
    let mut reconnect = ReconnectPolicy::default();
    reconnect.initial_delay = Duration::from_millis(20);
    let mut config = ClientConfig::default();
    config.keepalive = keepalive(200, 400);
    config.secure = secure.then(SecureConfig::anonymous);
    config.reconnect = Some(reconnect);
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
        .request_with_timeout(
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
        let mut config = ClientConfig::default();
        // A PING every 50 ms of silence; 2 s for each PONG.
        config.keepalive = keepalive(50, 2000);
        config.secure = secure.then(SecureConfig::anonymous);
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
    let mut reconnect = ReconnectPolicy::default();
    reconnect.initial_delay = Duration::from_millis(20);
    let mut config = ClientConfig::default();
    config.max_outbound = limit;
    config.keepalive = None;
    config.reconnect = Some(reconnect);
    let client = Client::connect_tcp_with(address, config).await.unwrap();
    let mut deaf = deaf.await.unwrap();
    // On the wire: a length prefix and a header, then the body.
    let wire_len = |echo: &Echo| (4 + 7 + echo.encoded_len()) as u64;

    // A request in flight, which will never be answered: its first poll
    // registers it and writes it.
    let question = Echo {
        payload: Bytes::from_static(b"waiting"),
    };
    let mut in_flight = Box::pin(client.request_with_timeout(&question, Duration::from_secs(60)));
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
