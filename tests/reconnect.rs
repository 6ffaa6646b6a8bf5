//! Reconnect supervision over real sockets: servers restarted under
//! connected TCP and WebSocket clients, requests that wait for the new
//! connection, attempts that run out, the order of state changes, and the
//! closes that must not reconnect (`close()`, a dropped client, `KICKED`,
//! `NORMAL`).
//!
//! The delays between attempts themselves are measured on tokio's paused
//! clock over in-memory pipes: `sdk-client/tests/timers.rs`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ternio::protocol::frame::{self, Flags, Framing, Header};
use ternio::protocol::system::{self, Disconnect};
use ternio::{DisconnectReason, ServerConfig, ServerHandle};
use ternio_client::{
    Client, ClientConfig, ClientError, CloseReason, ConnectionState, ReconnectPolicy,
};
use ternio_tests::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

#[derive(Debug, Clone, Copy)]
enum Transport {
    Tcp,
    Ws,
}

/// A server with both listeners, and where a client of `transport` goes.
struct Setup {
    tcp: SocketAddr,
    ws: SocketAddr,
    server: ServerHandle,
}

impl Setup {
    fn start(configure: impl FnOnce(ternio::ServerBuilder) -> ternio::ServerBuilder) -> Self {
        let (tcp, ws, server) = start_server_with_ws(configure);
        Self { tcp, ws, server }
    }

    async fn client(&self, transport: Transport, config: ClientConfig) -> Client {
        match transport {
            Transport::Tcp => Client::connect_tcp_with(self.tcp, config).await.unwrap(),
            Transport::Ws => Client::connect_ws_with(&format!("ws://{}/ws", self.ws), config)
                .await
                .unwrap(),
        }
    }

    /// Shuts the server down and starts another on the same ports.
    async fn restart(&mut self) {
        self.server.shutdown();
        self.server = restart_server(self.tcp, Some(self.ws), |b| b).await;
    }
}

/// Reconnects quickly, at a fixed pace (no growth, no jitter, no floor
/// after `SHUTDOWN`, the count of attempts starting again after every
/// connection) unless changed.
fn policy(delay_ms: u64, max_attempts: Option<u32>) -> ClientConfig {
    let mut reconnect = ReconnectPolicy::default();
    reconnect.initial_delay = Duration::from_millis(delay_ms);
    reconnect.max_delay = Duration::from_millis(delay_ms);
    reconnect.multiplier = 1.0;
    reconnect.jitter = 0.0;
    reconnect.max_attempts = max_attempts;
    reconnect.healthy_after = Duration::ZERO;
    reconnect.busy_delay = Duration::ZERO;
    let mut config = ClientConfig::default();
    config.reconnect = Some(reconnect);
    config
}

/// Waits (up to 5 s) for a state that `accept` accepts.
async fn wait_for_state(client: &Client, accept: impl FnMut(&ConnectionState) -> bool) {
    let mut states = client.state_changes();
    tokio::time::timeout(Duration::from_secs(5), states.wait_for(accept))
        .await
        .unwrap_or_else(|_| panic!("state still {:?} after 5 s", client.state()))
        .unwrap();
}

fn is_reconnecting(state: &ConnectionState) -> bool {
    matches!(state, ConnectionState::Reconnecting { .. })
}

async fn a_client_reconnects_after_a_server_restart(transport: Transport) {
    let mut setup = Setup::start(|b| b);
    let client = setup.client(transport, policy(50, Some(100))).await;
    let before: YouAre = client.request_async(&WhoAmI).await.unwrap();

    setup.server.shutdown();
    wait_for_state(&client, is_reconnecting).await;
    assert_eq!(client.close_reason(), None, "reconnecting is not closed");
    setup.server = restart_server(setup.tcp, Some(setup.ws), |b| b).await;

    let after: YouAre = client.request_async(&WhoAmI).await.unwrap();
    assert_eq!(after.transport, before.transport);
    assert_ne!(after.peer, before.peer, "a new connection");
    assert_eq!(client.state(), ConnectionState::Connected);
    let sum: Sum = client.request_async(&Add { a: 2, b: 3 }).await.unwrap();
    assert_eq!(sum, Sum(5));
    assert!(client.ping().await.is_ok());
    client.send(&Bump { by: 4 }).unwrap();
    assert_eq!(client.request_async(&GetCount).await.unwrap(), Count(4));
    assert_eq!(setup.server.connection_count(), 1);
}

#[tokio::test]
async fn a_tcp_client_reconnects_after_a_server_restart() {
    a_client_reconnects_after_a_server_restart(Transport::Tcp).await;
}

#[tokio::test]
async fn a_websocket_client_reconnects_after_a_server_restart() {
    a_client_reconnects_after_a_server_restart(Transport::Ws).await;
}

#[tokio::test]
async fn tcp_and_websocket_clients_come_back_through_the_same_restarts() {
    let mut setup = Setup::start(|b| b);
    let tcp = setup.client(Transport::Tcp, policy(30, Some(200))).await;
    let ws = setup.client(Transport::Ws, policy(30, Some(200))).await;
    for round in 0..3i64 {
        setup.restart().await;
        let (over_tcp, over_ws) = (Add { a: round, b: 1 }, Add { a: round, b: 2 });
        let (a, b) = tokio::join!(tcp.request_async(&over_tcp), ws.request_async(&over_ws),);
        assert_eq!(a.unwrap(), Sum(round + 1));
        assert_eq!(b.unwrap(), Sum(round + 2));
    }
    assert_eq!(setup.server.connection_count(), 2);
}

async fn requests_issued_while_reconnecting_wait_then_succeed(transport: Transport) {
    let mut setup = Setup::start(|b| b);
    let client = setup.client(transport, policy(50, Some(100))).await;
    setup.server.shutdown();
    wait_for_state(&client, is_reconnecting).await;

    let waiting: Vec<_> = (0..20i64)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move { client.request_async(&Add { a: i, b: i }).await })
        })
        .collect();
    // A request whose own timeout ends first times out; a send is refused at once.
    let short = client
        .request_with_timeout(&Add { a: 0, b: 0 }, Duration::from_millis(150))
        .await;
    assert!(
        matches!(short, Err(ClientError::Timeout(t)) if t == Duration::from_millis(150)),
        "{short:?}"
    );
    assert!(
        matches!(client.send(&Bump { by: 1 }), Err(ClientError::Reconnecting { attempt }) if attempt >= 1)
    );
    assert!(
        waiting.iter().all(|task| !task.is_finished()),
        "requests wait for the connection instead of failing"
    );

    setup.server = restart_server(setup.tcp, Some(setup.ws), |b| b).await;
    for (i, task) in (0..20i64).zip(waiting) {
        assert_eq!(task.await.unwrap().unwrap(), Sum(2 * i));
    }
    assert_eq!(client.state(), ConnectionState::Connected);
}

#[tokio::test]
async fn tcp_requests_issued_while_reconnecting_wait_then_succeed() {
    requests_issued_while_reconnecting_wait_then_succeed(Transport::Tcp).await;
}

#[tokio::test]
async fn websocket_requests_issued_while_reconnecting_wait_then_succeed() {
    requests_issued_while_reconnecting_wait_then_succeed(Transport::Ws).await;
}

async fn requests_in_flight_fail_with_the_reason_of_the_loss(transport: Transport) {
    let mut grace = ServerConfig::default();
    grace.shutdown_grace = Duration::from_millis(100);
    let mut setup = Setup::start(|b| b.config(grace));
    let client = setup.client(transport, policy(50, Some(100))).await;
    let in_flight = {
        let client = client.clone();
        spawn_started(async move { client.request_async(&Sleep { ms: 10_000, tag: 1 }).await })
            .await
    };
    // Answered after the sleep was read: the sleep is running.
    let Sum(2) = client.request_async(&Add { a: 1, b: 1 }).await.unwrap() else {
        panic!("1 + 1")
    };
    let started = Instant::now();
    setup.server.shutdown();
    match in_flight.await.unwrap() {
        Err(ClientError::Closed(CloseReason::Disconnected(disconnect))) => {
            assert_eq!(disconnect.reason, DisconnectReason::Shutdown)
        }
        other => panic!("expected DISCONNECT SHUTDOWN, got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    setup.server = restart_server(setup.tcp, Some(setup.ws), |b| b).await;
    let slept: Slept = client
        .request_async(&Sleep { ms: 0, tag: 2 })
        .await
        .unwrap();
    assert_eq!(slept.tag, 2);
}

#[tokio::test]
async fn tcp_requests_in_flight_fail_with_the_reason_of_the_loss() {
    requests_in_flight_fail_with_the_reason_of_the_loss(Transport::Tcp).await;
}

#[tokio::test]
async fn websocket_requests_in_flight_fail_with_the_reason_of_the_loss() {
    requests_in_flight_fail_with_the_reason_of_the_loss(Transport::Ws).await;
}

async fn exhausted_attempts_close_the_client(transport: Transport) {
    let setup = Setup::start(|b| b);
    let client = setup.client(transport, policy(30, Some(3))).await;
    setup.server.shutdown();
    wait_for_state(&client, is_reconnecting).await;
    let started = Instant::now();
    // Waiting requests with a long timeout fail as soon as the attempts are over.
    let result = client
        .request_with_timeout(&Add { a: 1, b: 1 }, Duration::from_secs(30))
        .await;
    match result {
        Err(ClientError::Closed(CloseReason::ReconnectFailed {
            attempts,
            last_error,
        })) => {
            assert_eq!(attempts, 3);
            assert!(!last_error.is_empty());
        }
        other => panic!("expected ReconnectFailed, got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(matches!(
        client.state(),
        ConnectionState::Closed(CloseReason::ReconnectFailed { attempts: 3, .. })
    ));
    assert!(matches!(
        client.close_reason(),
        Some(CloseReason::ReconnectFailed { .. })
    ));
    let result = client.request_async(&Add { a: 1, b: 1 }).await;
    assert!(matches!(result, Err(ClientError::Closed(_))), "{result:?}");
}

#[tokio::test]
async fn exhausted_tcp_attempts_close_the_client() {
    exhausted_attempts_close_the_client(Transport::Tcp).await;
}

#[tokio::test]
async fn exhausted_websocket_attempts_close_the_client() {
    exhausted_attempts_close_the_client(Transport::Ws).await;
}

/// Every state a client goes through, from now until it is `Connected`
/// again after something else (or 10 s).
fn record_states(client: &Client) -> tokio::task::JoinHandle<Vec<ConnectionState>> {
    let mut states: watch::Receiver<ConnectionState> = client.state_changes();
    tokio::spawn(async move {
        let mut seen = vec![states.borrow_and_update().clone()];
        let _ = tokio::time::timeout(Duration::from_secs(10), async {
            while states.changed().await.is_ok() {
                let state = states.borrow_and_update().clone();
                let done = state.is_connected();
                seen.push(state);
                if done {
                    break;
                }
            }
        })
        .await;
        seen
    })
}

#[tokio::test]
async fn state_changes_arrive_in_order() {
    let setup = Setup::start(|b| b);
    let client = setup.client(Transport::Tcp, policy(100, Some(50))).await;
    let recorder = record_states(&client);
    tokio::task::yield_now().await;
    setup.server.shutdown();
    // Down for a few attempts.
    wait_for_state(
        &client,
        |state| matches!(state, ConnectionState::Reconnecting { attempt } if *attempt >= 3),
    )
    .await;
    let _server = restart_server(setup.tcp, Some(setup.ws), |b| b).await;
    let seen = recorder.await.unwrap();
    assert_eq!(seen.first(), Some(&ConnectionState::Connected), "{seen:?}");
    assert_eq!(seen.last(), Some(&ConnectionState::Connected), "{seen:?}");
    let attempts: Vec<u32> = seen[1..seen.len() - 1]
        .iter()
        .map(|state| match state {
            ConnectionState::Reconnecting { attempt } => *attempt,
            other => panic!("expected only Reconnecting in between: {seen:?} ({other:?})"),
        })
        .collect();
    assert!(attempts.len() >= 3, "{seen:?}");
    assert_eq!(attempts, (1..=attempts.len() as u32).collect::<Vec<_>>());
}

async fn close_never_reconnects(transport: Transport) {
    // Connected, then closed: the server sees the connection go and no other.
    let setup = Setup::start(|b| b);
    let client = setup.client(transport, policy(20, None)).await;
    client.request_async(&Add { a: 1, b: 1 }).await.unwrap();
    client.close().await;
    assert_eq!(client.state(), ConnectionState::Closed(CloseReason::Local));
    eventually("the server sees the connection go", || {
        setup.server.connection_count() == 0
    })
    .await;
    // And no other comes (at 20 ms between attempts, several would have).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(setup.server.connection_count(), 0);
    assert_eq!(client.state(), ConnectionState::Closed(CloseReason::Local));

    // Reconnecting, then closed: the attempts stop, waiting requests fail,
    // and a server back on the port is not contacted.
    let setup = Setup::start(|b| b);
    let client = setup.client(transport, policy(50, None)).await;
    setup.server.shutdown();
    wait_for_state(&client, is_reconnecting).await;
    let waiting = {
        let client = client.clone();
        spawn_started(async move {
            client
                .request_with_timeout(&Add { a: 1, b: 1 }, Duration::from_secs(30))
                .await
        })
        .await
    };
    let started = Instant::now();
    client.close().await;
    // At once: not after the request's 30 s or another attempt.
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(matches!(
        waiting.await.unwrap(),
        Err(ClientError::Closed(CloseReason::Local))
    ));
    let server = restart_server(setup.tcp, Some(setup.ws), |b| b).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(server.connection_count(), 0);
    assert_eq!(client.state(), ConnectionState::Closed(CloseReason::Local));
}

#[tokio::test]
async fn closing_a_tcp_client_never_reconnects() {
    close_never_reconnects(Transport::Tcp).await;
}

#[tokio::test]
async fn closing_a_websocket_client_never_reconnects() {
    close_never_reconnects(Transport::Ws).await;
}

#[tokio::test]
async fn a_dropped_client_stops_reconnecting() {
    let setup = Setup::start(|b| b);
    let client = setup.client(Transport::Ws, policy(50, None)).await;
    setup.server.shutdown();
    wait_for_state(&client, is_reconnecting).await;
    drop(client);
    let server = restart_server(setup.tcp, Some(setup.ws), |b| b).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(server.connection_count(), 0);
}

#[tokio::test]
async fn without_a_policy_a_lost_connection_closes_for_good() {
    let setup = Setup::start(|b| b);
    let client = setup.client(Transport::Ws, ClientConfig::default()).await;
    setup.server.shutdown();
    wait_for_state(&client, ConnectionState::is_closed).await;
    match client.state() {
        ConnectionState::Closed(CloseReason::Disconnected(disconnect)) => {
            assert_eq!(disconnect.reason, DisconnectReason::Shutdown)
        }
        other => panic!("expected Closed by DISCONNECT SHUTDOWN, got {other:?}"),
    }
    let server = restart_server(setup.tcp, Some(setup.ws), |b| b).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.connection_count(), 0);
}

/// A TCP server that counts its connections. The first one is ended after
/// the client's first bytes: with `goodbye` (a DISCONNECT) or silently.
/// Later ones stay open until the client goes.
async fn ending_server(goodbye: Option<Disconnect>) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let first = count.fetch_add(1, Ordering::SeqCst) == 0;
            let goodbye = goodbye.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 256];
                if first {
                    let _ = stream.read(&mut buf).await;
                    if let Some(goodbye) = goodbye {
                        let mut out = BytesMut::new();
                        frame::write_frame(
                            &mut out,
                            Framing::LengthPrefixed,
                            Header::new(system::DISCONNECT, Flags::NONE, 0),
                            &goodbye,
                            usize::MAX,
                        )
                        .unwrap();
                        let _ = stream.write_all(&out).await;
                    }
                    let _ = stream.shutdown().await;
                } else {
                    while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
                }
            });
        }
    });
    (address, accepted)
}

#[tokio::test]
async fn kicked_and_normal_do_not_reconnect() {
    for reason in [DisconnectReason::Kicked, DisconnectReason::Normal] {
        let (address, accepted) = ending_server(Some(Disconnect::new(reason, "bye"))).await;
        let client = Client::connect_tcp_with(address, policy(20, None))
            .await
            .unwrap();
        let result = client.ping().await;
        match result {
            Err(ClientError::Closed(CloseReason::Disconnected(disconnect))) => {
                assert_eq!(disconnect.reason, reason)
            }
            other => panic!("expected DISCONNECT {reason}, got {other:?}"),
        }
        match client.state() {
            ConnectionState::Closed(CloseReason::Disconnected(disconnect)) => {
                assert_eq!(disconnect.reason, reason)
            }
            other => panic!("expected Closed, got {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            1,
            "{reason}: no new connection"
        );
    }
}

#[tokio::test]
async fn other_reasons_and_a_silent_close_reconnect() {
    let reasons = [
        Some(DisconnectReason::Shutdown),
        Some(DisconnectReason::IdleTimeout),
        Some(DisconnectReason::SlowConsumer),
        None,
    ];
    for reason in reasons {
        let (address, accepted) =
            ending_server(reason.map(|reason| Disconnect::new(reason, "bye"))).await;
        let client = Client::connect_tcp_with(address, policy(20, Some(20)))
            .await
            .unwrap();
        let result = client.ping().await;
        assert!(matches!(result, Err(ClientError::Closed(_))), "{result:?}");
        wait_for_state(&client, ConnectionState::is_connected).await;
        // Connected once the kernel accepted: the server's task counts it
        // in its own time.
        eventually("the server accepted the new connection", || {
            accepted.load(Ordering::SeqCst) >= 2
        })
        .await;
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            2,
            "{reason:?}: one new connection"
        );
    }
}

/// A WebSocket server whose first connection is upgraded (selecting
/// `ternio.v2`) and closed after the client's first message; later
/// connections are accepted but never answered (the upgrade hangs). Counts
/// connections, and reports when a hanging one is closed by the client.
async fn hanging_ws_server() -> (String, Arc<AtomicUsize>, mpsc::UnboundedReceiver<()>) {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
    use tokio_tungstenite::tungstenite::http::HeaderValue;

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/ws", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    let (ended, ends) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let first = count.fetch_add(1, Ordering::SeqCst) == 0;
            let ended = ended.clone();
            tokio::spawn(async move {
                if first {
                    // The signature is tungstenite's.
                    #[allow(clippy::result_large_err)]
                    let select = |_: &Request, mut response: Response| {
                        response.headers_mut().insert(
                            "Sec-WebSocket-Protocol",
                            HeaderValue::from_static("ternio.v2"),
                        );
                        Ok(response)
                    };
                    let mut ws = tokio_tungstenite::accept_hdr_async(stream, select)
                        .await
                        .unwrap();
                    let _ = ws.next().await;
                    let _ = ws.close(None).await;
                    while let Some(Ok(_)) = ws.next().await {}
                } else {
                    let mut buf = [0u8; 1024];
                    while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
                    let _ = ended.send(());
                }
            });
        }
    });
    (url, accepted, ends)
}

#[tokio::test]
async fn each_attempt_is_bounded_by_the_connect_timeout() {
    let (url, accepted, _) = hanging_ws_server().await;
    let mut config = policy(20, Some(2));
    config.connect_timeout = Duration::from_millis(200);
    let client = Client::connect_ws_with(&url, config).await.unwrap();
    let started = Instant::now();
    assert!(matches!(client.ping().await, Err(ClientError::Closed(_))));
    wait_for_state(&client, ConnectionState::is_closed).await;
    match client.state() {
        ConnectionState::Closed(CloseReason::ReconnectFailed {
            attempts,
            last_error,
        }) => {
            assert_eq!(attempts, 2);
            assert!(last_error.contains("200ms"), "{last_error}");
        }
        other => panic!("expected ReconnectFailed, got {other:?}"),
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(400) && elapsed < Duration::from_secs(5),
        "{elapsed:?}"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn close_stops_an_attempt_under_way() {
    let (url, accepted, mut ends) = hanging_ws_server().await;
    let mut config = policy(20, None);
    config.connect_timeout = Duration::from_secs(30);
    let client = Client::connect_ws_with(&url, config).await.unwrap();
    assert!(matches!(client.ping().await, Err(ClientError::Closed(_))));
    eventually("the second connection is accepted", || {
        accepted.load(Ordering::SeqCst) >= 2
    })
    .await;
    assert_eq!(client.state(), ConnectionState::Reconnecting { attempt: 1 });
    let started = Instant::now();
    client.close().await;
    // At once: not after the attempt's 30 s connect timeout.
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(client.state(), ConnectionState::Closed(CloseReason::Local));
    // The half-opened connection is dropped, and no other is made.
    tokio::time::timeout(Duration::from_secs(2), ends.recv())
        .await
        .expect("the attempt's connection closes")
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

/// Through a proxy that cuts each connection after a random number of
/// bytes (inside frames too), a client with a reconnect policy keeps
/// working: every request either gets its answer or fails with the loss,
/// never with a wrong answer, and the server ends up holding the one
/// connection that is open. (With resumption, none would fail: issue 24.)
#[tokio::test]
async fn a_client_behind_a_cutting_proxy_reconnects_through_cuts_mid_frame() {
    let setup = Setup::start(|b| b);
    let proxy = CuttingProxy::start(setup.tcp, 0x5eed, 200..2_000).await;
    let client = Client::connect_tcp_with(proxy.address(), policy(5, None))
        .await
        .unwrap();
    let (mut answered, mut lost) = (0, 0);
    for i in 0..300u32 {
        let payload = bytes::Bytes::from(format!("echo {i} {}", "x".repeat(i as usize % 97)));
        match client
            .request_async(&Echo {
                payload: payload.clone(),
            })
            .await
        {
            Ok(echo) => {
                assert_eq!(echo.payload, payload);
                answered += 1;
            }
            Err(ClientError::Closed(_)) => lost += 1,
            Err(other) => panic!("request {i}: {other}"),
        }
    }
    assert!(proxy.cuts() >= 5, "only {} cuts", proxy.cuts());
    assert!(answered > 100, "{answered} answered, {lost} lost");
    proxy.set_budget(0..0);
    client.request_async(&Add { a: 1, b: 2 }).await.unwrap();
    eventually("the server holds only the open connection", || {
        setup.server.connection_count() == 1
    })
    .await;
}
