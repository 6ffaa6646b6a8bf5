//! The client SDK against a real server, and against hand-written servers
//! that close or disconnect on purpose. (Request timeouts run on tokio's
//! paused clock over in-memory pipes: `sdk-client/tests/timers.rs`.)

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ternio::DisconnectReason;
use ternio::protocol::frame::{self, Flags, Framing, Header};
use ternio::protocol::system::{self, Disconnect};
use ternio_client::{Client, ClientError, CloseReason};
use ternio_tests::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[tokio::test]
async fn thousands_of_requests_in_flight_on_one_connection() {
    let (address, _server) = start_server(|b| b);
    let client = Client::connect_tcp(address).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..5000i64 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let sum: Sum = client.request_async(&Add { a: i, b: i }).await.unwrap();
            assert_eq!(sum, Sum(2 * i));
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

#[tokio::test]
async fn the_in_flight_limit_is_an_error_and_a_dropped_request_frees_its_slot() {
    let (address, _server) = start_server(|b| b);
    let client = Client::builder()
        .tcp(address.to_string())
        .max_in_flight(1)
        .connect()
        .await
        .unwrap();
    let slow = client.clone();
    let waiting =
        spawn_started(async move { slow.request_async(&Sleep { ms: 1000, tag: 1 }).await }).await;
    let result = client.request_async(&Add { a: 1, b: 2 }).await;
    assert!(
        matches!(result, Err(ClientError::TooManyInFlight(1))),
        "{result:?}"
    );
    assert_eq!(waiting.await.unwrap().unwrap().tag, 1);

    // A request abandoned by its caller does not keep its slot.
    let abandoned = tokio::time::timeout(
        Duration::from_millis(20),
        client.request_async(&Sleep { ms: 500, tag: 2 }),
    )
    .await;
    assert!(abandoned.is_err());
    let sum: Sum = client.request_async(&Add { a: 1, b: 2 }).await.unwrap();
    assert_eq!(sum, Sum(3));
}

#[tokio::test]
async fn a_request_too_large_for_a_frame_fails_locally() {
    let (address, _server) = start_server(|b| b);
    let client = Client::connect_tcp(address).await.unwrap();
    let payload = Bytes::from(vec![0; 2 * 1024 * 1024]);
    let result = client.request_async(&Echo { payload }).await;
    assert!(
        matches!(result, Err(ClientError::FrameTooLarge(_))),
        "{result:?}"
    );
    let sum: Sum = client.request_async(&Add { a: 1, b: 2 }).await.unwrap();
    assert_eq!(sum, Sum(3));
}

#[tokio::test]
async fn a_response_of_another_type_is_an_error() {
    let (address, _server) = start_server(|b| b);
    let client = Client::connect_tcp(address).await.unwrap();
    let result = client.request_as::<Echo>(&Add { a: 1, b: 2 }).await;
    assert!(
        matches!(result, Err(ClientError::UnexpectedResponse(_))),
        "{result:?}"
    );
}

/// A server that accepts one connection, reads until it has `read` bytes,
/// writes `reply`, and closes.
async fn one_shot_server(reply: Vec<u8>) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 64];
        // Wait for the first request, then answer and close.
        let _ = stream.read(&mut buf).await;
        let _ = stream.write_all(&reply).await;
        let _ = stream.shutdown().await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    });
    address
}

#[tokio::test]
async fn pending_requests_fail_promptly_when_the_server_closes() {
    let address = one_shot_server(Vec::new()).await;
    let client = Client::connect_tcp(address).await.unwrap();
    let started = Instant::now();
    let result = client.request_async(&Add { a: 1, b: 2 }).await;
    assert!(
        matches!(result, Err(ClientError::Closed(CloseReason::PeerClosed))),
        "{result:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "failed after {:?}",
        started.elapsed()
    );
    let result = client.request_async(&Add { a: 1, b: 2 }).await;
    assert!(matches!(result, Err(ClientError::Closed(_))), "{result:?}");
    assert!(matches!(
        client.send(&Bump { by: 1 }),
        Err(ClientError::Closed(_))
    ));
}

#[tokio::test]
async fn a_disconnect_reason_reaches_every_pending_request() {
    let mut goodbye = BytesMut::new();
    frame::write_frame(
        &mut goodbye,
        Framing::LengthPrefixed,
        Header::new(system::DISCONNECT, Flags::NONE, 0),
        &Disconnect::new(DisconnectReason::Shutdown, "maintenance"),
        usize::MAX,
    )
    .unwrap();
    let address = one_shot_server(goodbye.to_vec()).await;
    let client = Client::connect_tcp(address).await.unwrap();
    let calls: Vec<_> = (0..10)
        .map(|tag| {
            let client = client.clone();
            tokio::spawn(async move { client.request_async(&Sleep { ms: 0, tag }).await })
        })
        .collect();
    for call in calls {
        match call.await.unwrap() {
            Err(ClientError::Closed(CloseReason::Disconnected(disconnect))) => {
                assert_eq!(disconnect.reason, DisconnectReason::Shutdown);
                assert_eq!(disconnect.message, "maintenance");
            }
            other => panic!("expected the server's DISCONNECT, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn close_fails_pending_requests_and_tells_the_server() {
    let (address, _server) = start_server(|b| b);
    let client = Client::connect_tcp(address).await.unwrap();
    let pending = {
        let client = client.clone();
        spawn_started(async move { client.request_async(&Sleep { ms: 3000, tag: 1 }).await }).await
    };
    let started = Instant::now();
    client.close().await;
    let result = pending.await.unwrap();
    assert!(
        matches!(result, Err(ClientError::Closed(CloseReason::Local))),
        "{result:?}"
    );
    // At once, not after the request's 3 s.
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(client.close_reason(), Some(CloseReason::Local));
    // The server is unaffected.
    let other = Client::connect_tcp(address).await.unwrap();
    let sum: Sum = other.request_async(&Add { a: 1, b: 2 }).await.unwrap();
    assert_eq!(sum, Sum(3));
}

#[tokio::test]
async fn connecting_to_a_closed_port_is_a_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let result = Client::connect_tcp(address).await;
    assert!(
        matches!(result, Err(ClientError::Connect(_))),
        "{:?}",
        result.err()
    );
}

/// `Client::builder()`: each transport with settings in one chain, and a
/// clear error when no transport was chosen.
#[tokio::test]
async fn the_builder_connects_over_tcp_websocket_and_a_stream() {
    let (tcp, ws, server) = start_server_with_ws(|b| b);
    let over_tcp = Client::builder()
        .tcp(tcp.to_string())
        .request_timeout(Duration::from_secs(3))
        .max_in_flight(8)
        .connect()
        .await
        .unwrap();
    assert_echoed(&over_tcp, "tcp".into()).await;

    let over_ws = Client::builder()
        .websocket(format!("ws://{ws}/ws"))
        .connect()
        .await
        .unwrap();
    assert_echoed(&over_ws, "ws".into()).await;

    let pipe_server = server.clone();
    let over_pipe = Client::builder()
        .stream(move || {
            let pipe = pipe_server.connect_in_memory();
            async move { Ok(pipe) }
        })
        .connect()
        .await
        .unwrap();
    assert_echoed(&over_pipe, "pipe".into()).await;

    // Settings reach the client: a second request with room for one.
    let tight = Client::builder()
        .tcp(tcp.to_string())
        .max_in_flight(1)
        .connect()
        .await
        .unwrap();
    let slow = {
        let tight = tight.clone();
        tokio::spawn(async move { tight.request_async(&Sleep { ms: 300, tag: 1 }).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let refused = tight.request_async(&Sleep { ms: 0, tag: 2 }).await;
    assert!(
        matches!(refused, Err(ClientError::TooManyInFlight(1))),
        "{refused:?}"
    );
    slow.await.unwrap().unwrap();

    let nowhere = Client::builder().connect().await;
    assert!(
        matches!(nowhere, Err(ClientError::NoTransport)),
        "{nowhere:?}"
    );
}
