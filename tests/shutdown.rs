//! Shutting a server down: running requests finish, every connection gets
//! DISCONNECT SHUTDOWN and a clean close, and `run` returns.

use std::time::{Duration, Instant};

use ternio::DisconnectReason;
use ternio::protocol::Decode;
use ternio::protocol::system::{self, Disconnect};
use ternio_client::{Client, ClientError, CloseReason};
use ternio_tests::*;

#[tokio::test]
async fn running_requests_finish_before_the_disconnect() {
    let server = test_server_builder()
        .map_tcp("127.0.0.1:0")
        .build()
        .unwrap();
    let address = server.tcp_addrs()[0];
    let handle = server.handle();
    let running = tokio::spawn(server.run());

    let mut raw = RawConnection::connect(address).await;
    let client = Client::connect_tcp(address).await.unwrap();
    raw.request(&Sleep { ms: 200, tag: 1 }, 1).await;
    let slow = {
        let client = client.clone();
        spawn_started(async move { client.request_async(&Sleep { ms: 200, tag: 2 }).await }).await
    };
    // An inline request behind each sleep: once it is answered, the server
    // has read the sleep before it (one task reads a connection in order).
    raw.request(&Add { a: 1, b: 2 }, 2).await;
    assert_eq!(raw.recv().await.unwrap().header.request_id, 2);
    let Sum(3) = client.request_async(&Add { a: 1, b: 2 }).await.unwrap() else {
        panic!("1 + 2")
    };
    let started = Instant::now();
    handle.shutdown();

    // The raw connection: its answer, then DISCONNECT SHUTDOWN, then a clean end.
    let answer = raw.recv().await.unwrap();
    assert_eq!(Slept::decode_body(&answer.body).unwrap().tag, 1);
    let goodbye = raw.recv().await.unwrap();
    assert_eq!(goodbye.header.opcode, system::DISCONNECT);
    assert_eq!(
        Disconnect::decode_body(&goodbye.body).unwrap().reason,
        DisconnectReason::Shutdown
    );
    assert!(raw.recv().await.is_none());

    // The SDK client: its request answered, then the connection closed with the reason.
    assert_eq!(slow.await.unwrap().unwrap().tag, 2);
    let after = client.request_async(&Add { a: 1, b: 1 }).await;
    match after {
        Err(ClientError::Closed(CloseReason::Disconnected(disconnect))) => {
            assert_eq!(disconnect.reason, DisconnectReason::Shutdown)
        }
        other => panic!("expected DISCONNECT SHUTDOWN, got {other:?}"),
    }
    running.await.unwrap().unwrap();
    // The running requests (200 ms), well within the default 5 s grace.
    assert!(started.elapsed() < Duration::from_secs(4));
    assert_eq!(handle.connection_count(), 0);
    assert!(
        Client::connect_tcp(address).await.is_err(),
        "the listener is closed"
    );
}

#[tokio::test]
async fn idle_connections_close_at_once_and_new_ones_are_refused() {
    let (address, handle) = start_server(|b| b);
    let mut idle = Vec::new();
    for _ in 0..50 {
        idle.push(RawConnection::connect(address).await);
    }
    eventually("50 connections open", || handle.connection_count() == 50).await;
    handle.shutdown();
    for raw in &mut idle {
        let goodbye = raw.recv().await.unwrap();
        assert_eq!(
            Disconnect::decode_body(&goodbye.body).unwrap().reason,
            DisconnectReason::Shutdown
        );
        assert!(raw.recv().await.is_none());
    }
}

#[tokio::test]
async fn run_until_shuts_down_when_its_future_resolves() {
    let server = test_server_builder()
        .map_tcp("127.0.0.1:0")
        .build()
        .unwrap();
    let address = server.tcp_addrs()[0];
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(server.run_until(async {
        let _ = stopped.await;
    }));
    let mut raw = RawConnection::connect(address).await;
    raw.request(&Add { a: 2, b: 2 }, 1).await;
    assert_eq!(raw.recv().await.unwrap().header.request_id, 1);
    assert!(!running.is_finished(), "serving until the future resolves");

    stop.send(()).unwrap();
    raw.expect_disconnect(DisconnectReason::Shutdown).await;
    tokio::time::timeout(Duration::from_secs(5), running)
        .await
        .expect("run_until returns once drained")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn an_awaited_shutdown_resolves_once_the_running_request_is_answered() {
    let (address, handle) = start_server(|b| b);
    let mut raw = RawConnection::connect(address).await;
    raw.request(&Sleep { ms: 400, tag: 7 }, 1).await;
    // The sleep was read when the inline request behind it is answered.
    raw.request(&Add { a: 1, b: 2 }, 2).await;
    assert_eq!(raw.recv().await.unwrap().header.request_id, 2);

    let started = Instant::now();
    let waiting = {
        let handle = handle.clone();
        tokio::spawn(async move { handle.shutdown().await })
    };
    // The answer, then DISCONNECT SHUTDOWN, then the close; the wait still runs.
    let answer = raw.recv().await.unwrap();
    assert_eq!(Slept::decode_body(&answer.body).unwrap().tag, 7);
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "the sleep ran on"
    );
    raw.expect_disconnect(DisconnectReason::Shutdown).await;
    assert!(waiting.await.unwrap(), "drained within the bound");
    assert_eq!(handle.connection_count(), 0);
    assert!(started.elapsed() < Duration::from_secs(4));
    // Another handle's wait, after the fact, resolves at once.
    assert!(handle.drained().await);
}

#[tokio::test]
async fn drained_does_not_resolve_before_the_connections_close() {
    let (address, handle) = start_server(|b| b);
    let mut raw = RawConnection::connect(address).await;
    // Long enough to outlast the two waits below on a loaded machine.
    raw.request(&Sleep { ms: 2000, tag: 1 }, 1).await;
    raw.request(&Add { a: 1, b: 2 }, 2).await;
    assert_eq!(raw.recv().await.unwrap().header.request_id, 2);

    // No shutdown yet: nothing to wait for.
    assert!(
        tokio::time::timeout(Duration::from_millis(100), handle.drained())
            .await
            .is_err(),
        "drained waits for a shutdown to start"
    );
    handle.shutdown();
    let draining = handle.drained();
    tokio::pin!(draining);
    // While the request runs, the connection is open and the wait pending.
    assert!(
        tokio::time::timeout(Duration::from_millis(200), &mut draining)
            .await
            .is_err(),
        "drained resolved with a request still running"
    );
    assert_eq!(handle.connection_count(), 1);
    assert!(draining.await);
    assert_eq!(handle.connection_count(), 0);
    let answer = raw.recv().await.unwrap();
    assert_eq!(Slept::decode_body(&answer.body).unwrap().tag, 1);
    raw.expect_disconnect(DisconnectReason::Shutdown).await;
}

#[tokio::test]
async fn a_request_that_outlives_the_grace_ends_the_wait_at_the_drain_bound() {
    let grace = Duration::from_millis(300);
    let linger = Duration::from_millis(200);
    let mut config = ternio::ServerConfig::default();
    config.shutdown_grace = grace;
    config.close_linger = linger;
    let (address, handle) = start_server(|b| b.config(config));
    let mut raw = RawConnection::connect(address).await;
    raw.request(&Sleep { ms: 30_000, tag: 1 }, 1).await;
    raw.request(&Add { a: 1, b: 2 }, 2).await;
    assert_eq!(raw.recv().await.unwrap().header.request_id, 2);

    let started = Instant::now();
    let _ = handle.shutdown_and_wait().await;
    let waited = started.elapsed();
    assert!(waited >= grace, "the request had its grace: {waited:?}");
    assert!(
        waited < grace + linger + Duration::from_millis(500),
        "the wait ends at the drain bound: {waited:?}"
    );
    // The request never answered; the connection was told why and closed.
    raw.expect_disconnect(DisconnectReason::Shutdown).await;
}

#[tokio::test]
async fn streams_served_through_the_handle_are_waited_for() {
    let handle = start_in_memory_server(|b| b);
    let mut raw = connect_in_memory(&handle, 64 * 1024);
    raw.request(&Sleep { ms: 300, tag: 3 }, 1).await;
    raw.request(&Add { a: 1, b: 2 }, 2).await;
    assert_eq!(raw.recv().await.unwrap().header.request_id, 2);

    let started = Instant::now();
    assert!(handle.shutdown_and_wait().await);
    assert!(started.elapsed() >= Duration::from_millis(200));
    let answer = raw.recv().await.unwrap();
    assert_eq!(Slept::decode_body(&answer.body).unwrap().tag, 3);
    raw.expect_disconnect(DisconnectReason::Shutdown).await;
}
