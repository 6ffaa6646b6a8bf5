//! Shutting a server down: running requests finish, every connection gets
//! DISCONNECT SHUTDOWN and a clean close, and `run` returns.

use std::time::{Duration, Instant};

use ternio::protocol::Decode;
use ternio::protocol::system::{self, Disconnect};
use ternio::{DisconnectReason, Server};
use ternio_client::{Client, ClientError, CloseReason};
use ternio_tests::*;

#[tokio::test]
async fn running_requests_finish_before_the_disconnect() {
    let server = Server::builder()
        .discover_controllers(false)
        .controller(TestController)
        .state(Counter::default())
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
        spawn_started(async move {
            client
                .request_async::<_, Slept>(&Sleep { ms: 200, tag: 2 })
                .await
        })
        .await
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
    let after = client.request_async::<_, Sum>(&Add { a: 1, b: 1 }).await;
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
