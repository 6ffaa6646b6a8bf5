//! The SDK client over WebSocket: the same API as over TCP against a real
//! server (beside a TCP client), and against hand-written WebSocket servers
//! for the subprotocol, the close handshake, pings, text and oversized
//! messages.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures_util::{SinkExt, StreamExt};
use ternio::protocol::frame::{self, Flags, Frame, Framing, Header};
use ternio::protocol::system::{self, Disconnect};
use ternio::protocol::{Decode, Packet};
use ternio::{DisconnectReason, ErrorCode};
use ternio_client::{Client, ClientConfig, ClientError, CloseReason, ConnectionState};
use ternio_tests::*;
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

fn url(address: std::net::SocketAddr) -> String {
    format!("ws://{address}/ws")
}

#[tokio::test]
async fn tcp_and_websocket_clients_share_one_server() {
    let (tcp, ws, _server) = start_server_with_ws(|b| b);
    let tcp_client = Client::connect_tcp(tcp).await.unwrap();
    let ws_client = Client::connect_ws(&url(ws)).await.unwrap();
    let over_tcp: YouAre = tcp_client.request_async(&WhoAmI).await.unwrap();
    let over_ws: YouAre = ws_client.request_async(&WhoAmI).await.unwrap();
    assert_eq!(over_tcp.transport, "Tcp");
    assert_eq!(over_ws.transport, "WebSocket");
    assert_ne!(over_tcp.connection_id, over_ws.connection_id);

    // Both at once, on the same shared state.
    let mut tasks = Vec::new();
    for client in [tcp_client.clone(), ws_client.clone()] {
        for _ in 0..100 {
            let client = client.clone();
            tasks.push(tokio::spawn(async move {
                client.request_async(&Bump { by: 1 }).await
            }));
        }
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let seen_by_tcp: Count = tcp_client.request_async(&GetCount).await.unwrap();
    let seen_by_ws: Count = ws_client.request_async(&GetCount).await.unwrap();
    assert_eq!(seen_by_tcp, Count(200));
    assert_eq!(seen_by_ws, Count(200));
}

#[tokio::test]
async fn a_websocket_client_has_the_whole_api() {
    let (_, ws, _server) = start_server_with_ws(|b| b);
    let client = Client::connect_ws(&url(ws)).await.unwrap();
    assert_eq!(client.state(), ConnectionState::Connected);
    assert_eq!(client.close_reason(), None);

    // Typed requests, a large body, an acknowledgement.
    let sum: Sum = client.request_async(&Add { a: 40, b: 2 }).await.unwrap();
    assert_eq!(sum, Sum(42));
    assert_echoed(&client, Bytes::from(vec![7u8; 512 * 1024])).await;
    client.request_async(&Bump { by: 10 }).await.unwrap();

    // Fire-and-forget, then a request behind it on the same connection.
    client.send(&Bump { by: 5 }).unwrap();
    let count: Count = client.request_async(&GetCount).await.unwrap();
    assert_eq!(count, Count(15));

    // PING/PONG.
    let rtt = client.ping().await.unwrap();
    assert!(rtt < Duration::from_secs(2), "{rtt:?}");

    // Pushes nothing handles are counted.
    client.request_async(&PushMe { count: 7 }).await.unwrap();
    eventually("7 unhandled pushes", || client.unhandled_pushes() >= 7).await;
    assert_eq!(client.unhandled_pushes(), 7);

    // Error codes.
    let result = client
        .request_async(&Fail {
            code: 150,
            message: "nope".into(),
        })
        .await;
    match result {
        Err(ClientError::Remote { code, message }) => {
            assert_eq!(code, ErrorCode::from_u16(150));
            assert_eq!(message, "nope");
        }
        other => panic!("expected error 150, got {other:?}"),
    }
    let result = client.request_as::<()>(&Unhandled).await;
    assert_eq!(result.unwrap_err().code(), Some(ErrorCode::UnknownOpcode));
    let result = client.request_async(&Panic).await;
    assert_eq!(result.unwrap_err().code(), Some(ErrorCode::Internal));
    let result = client.request_as::<Echo>(&Add { a: 1, b: 2 }).await;
    assert!(
        matches!(result, Err(ClientError::UnexpectedResponse(_))),
        "{result:?}"
    );

    // Local errors leave the connection up.
    let too_large = Bytes::from(vec![0; 2 * 1024 * 1024]);
    let result = client.request_async(&Echo { payload: too_large }).await;
    assert!(
        matches!(result, Err(ClientError::FrameTooLarge(_))),
        "{result:?}"
    );
    let result = client
        .request_with_timeout(&Sleep { ms: 2000, tag: 1 }, Duration::from_millis(50))
        .await;
    assert!(
        matches!(result, Err(ClientError::Timeout(t)) if t == Duration::from_millis(50)),
        "{result:?}"
    );
    let sum: Sum = client.request_async(&Add { a: 1, b: 1 }).await.unwrap();
    assert_eq!(sum, Sum(2));

    // Close: a pending request fails, and everything after it.
    let pending = {
        let client = client.clone();
        spawn_started(async move { client.request_async(&Sleep { ms: 3000, tag: 2 }).await }).await
    };
    let started = Instant::now();
    client.close().await;
    // At once, not after the request's 3 s.
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let result = pending.await.unwrap();
    assert!(
        matches!(result, Err(ClientError::Closed(CloseReason::Local))),
        "{result:?}"
    );
    assert_eq!(client.close_reason(), Some(CloseReason::Local));
    assert_eq!(client.state(), ConnectionState::Closed(CloseReason::Local));
    assert!(matches!(
        client.send(&Bump { by: 1 }),
        Err(ClientError::Closed(CloseReason::Local))
    ));
    assert!(matches!(client.ping().await, Err(ClientError::Closed(_))));
}

#[tokio::test]
async fn a_thousand_pipelined_requests_over_websocket() {
    let (_, ws, _server) = start_server_with_ws(|b| b);
    let client = Client::connect_ws(&url(ws)).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..1000i64 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let sum: Sum = client.request_async(&Add { a: i, b: 1 }).await.unwrap();
            assert_eq!(sum, Sum(i + 1));
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    // Slow and fast requests on one connection come back out of order.
    let slow = {
        let client = client.clone();
        tokio::spawn(async move { client.request_async(&Sleep { ms: 200, tag: 1 }).await })
    };
    let fast: Slept = client
        .request_async(&Sleep { ms: 0, tag: 2 })
        .await
        .unwrap();
    assert_eq!(fast.tag, 2);
    assert!(!slow.is_finished());
    assert_eq!(slow.await.unwrap().unwrap().tag, 1);
}

/// Large answers among a stream of pushes: the client gives its read
/// buffer back after large messages (when it holds nothing unread), and
/// loses nothing doing it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_answers_among_pushes_lose_nothing() {
    const PUSHES: u32 = 3000;
    let (_, ws, _server) = start_server_with_ws(|b| b);
    let client = Client::connect_ws(&url(ws)).await.unwrap();
    let mut notes = client.subscribe_with_buffer::<Note>(PUSHES as usize);
    let pusher = {
        let client = client.clone();
        tokio::spawn(async move { client.request_async(&PushMe { count: PUSHES }).await })
    };
    // Answers back to back: a large one often ends inside a read, with
    // the next message's first bytes behind it in tungstenite's buffer.
    let mut echoes = Vec::new();
    for task in 0..8u8 {
        let client = client.clone();
        echoes.push(tokio::spawn(async move {
            for round in 0..8u8 {
                let len = 70 * 1024 + usize::from(task) * 1000 + usize::from(round);
                assert_echoed(&client, Bytes::from(vec![task ^ round; len])).await;
            }
        }));
    }
    for echo in echoes {
        echo.await.unwrap();
    }
    pusher.await.unwrap().unwrap();
    for seq in 0..PUSHES {
        let note = tokio::time::timeout(Duration::from_secs(5), notes.next())
            .await
            .expect("every push arrives")
            .unwrap();
        assert_eq!(note, Note { seq });
    }
    client.close().await;
}

#[tokio::test]
async fn bad_urls_and_paths_are_reported_as_such() {
    let result = Client::connect_ws("http://127.0.0.1:1/ws").await;
    assert!(
        matches!(result, Err(ClientError::InvalidUrl(_))),
        "{:?}",
        result.err()
    );
    // wss:// is a URL the client takes (feature `tls`): nothing listens there.
    let result = Client::connect_ws("wss://127.0.0.1:1/ws").await;
    assert!(
        matches!(result, Err(ClientError::Connect(_) | ClientError::Tls(_))),
        "{:?}",
        result.err()
    );
    let result = Client::connect_ws("not a url").await;
    assert!(
        matches!(result, Err(ClientError::InvalidUrl(_))),
        "{:?}",
        result.err()
    );
    let (_, ws, _server) = start_server_with_ws(|b| b);
    let result = Client::connect_ws(&format!("ws://{ws}/elsewhere")).await;
    assert!(
        matches!(result, Err(ClientError::UpgradeRefused(404))),
        "{:?}",
        result.err()
    );
    // A server whose limits refuse the client answers 503 before the
    // upgrade: the error a reconnect takes as "busy".
    let (_, ws, _server) = start_server_with_ws(|b| b.max_connections_per_ip(1));
    let _first = Client::connect_ws(&format!("ws://{ws}/ws")).await.unwrap();
    let result = Client::connect_ws(&format!("ws://{ws}/ws")).await;
    assert!(
        matches!(result, Err(ClientError::UpgradeRefused(503))),
        "{:?}",
        result.err()
    );
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = closed.local_addr().unwrap();
    drop(closed);
    let result = Client::connect_ws(&url(address)).await;
    assert!(
        matches!(result, Err(ClientError::Connect(_))),
        "{:?}",
        result.err()
    );
}

type ServerWs = WebSocketStream<TcpStream>;

/// A one-connection WebSocket server that answers the upgrade with
/// `selected` as its subprotocol (or none), records what the client offered,
/// and hands the connection to `serve`.
async fn hand_server<F, Fut>(
    selected: Option<&'static str>,
    serve: F,
) -> (std::net::SocketAddr, Arc<Mutex<Option<String>>>)
where
    F: FnOnce(ServerWs) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let offered = Arc::new(Mutex::new(None));
    let record = Arc::clone(&offered);
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        // The signature is tungstenite's.
        #[allow(clippy::result_large_err)]
        let callback = move |request: &Request, mut response: Response| {
            *record.lock().unwrap() = request
                .headers()
                .get("Sec-WebSocket-Protocol")
                .map(|value| value.to_str().unwrap().to_owned());
            if let Some(selected) = selected {
                response
                    .headers_mut()
                    .insert("Sec-WebSocket-Protocol", HeaderValue::from_static(selected));
            }
            Ok(response)
        };
        if let Ok(ws) = tokio_tungstenite::accept_hdr_async(stream, callback).await {
            serve(ws).await;
        }
    });
    (address, offered)
}

/// Reads until the client's Close (returned) or the end of the stream.
async fn messages_until_close(ws: &mut ServerWs) -> Vec<Message> {
    let mut messages = Vec::new();
    while let Ok(Some(Ok(message))) = tokio::time::timeout(Duration::from_secs(5), ws.next()).await
    {
        let close = message.is_close();
        messages.push(message);
        if close {
            break;
        }
    }
    messages
}

fn frame_of(message: &Message) -> Frame {
    match message {
        Message::Binary(bytes) => Frame::parse(bytes.clone(), usize::MAX).unwrap(),
        other => panic!("expected a binary message, got {other:?}"),
    }
}

fn reply_to<P: Packet>(request: &Frame, packet: &P) -> Message {
    let mut out = BytesMut::new();
    let header = Header::new(P::OPCODE, Flags::RESPONSE, request.header.request_id);
    frame::write_frame(&mut out, Framing::Message, header, packet, usize::MAX).unwrap();
    Message::Binary(out.freeze())
}

#[tokio::test]
async fn the_client_offers_ternio_v2_and_requires_the_server_to_select_it() {
    for selected in [Some("other.v1"), None] {
        let (address, offered) = hand_server(selected, |_ws| async {}).await;
        let result = Client::connect_ws(&url(address)).await;
        assert!(
            matches!(result, Err(ClientError::Subprotocol(_))),
            "selected {selected:?}: {:?}",
            result.err()
        );
        assert_eq!(offered.lock().unwrap().as_deref(), Some("ternio.v2"));
    }
}

#[tokio::test]
async fn close_sends_disconnect_then_a_close_frame_and_waits_for_the_answer() {
    let (done, seen) = tokio::sync::oneshot::channel();
    let (address, _) = hand_server(Some("ternio.v2"), |mut ws| async move {
        let messages = messages_until_close(&mut ws).await;
        // Reading on lets tungstenite send the Close reply.
        let _ = tokio::time::timeout(Duration::from_secs(1), ws.next()).await;
        let _ = done.send(messages);
    })
    .await;
    let client = Client::connect_ws(&url(address)).await.unwrap();
    let started = Instant::now();
    client.close().await;
    // The linger is 2 s.
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "the close handshake completed at once, not after the linger: {:?}",
        started.elapsed()
    );
    let messages = seen.await.unwrap();
    assert_eq!(messages.len(), 2, "{messages:?}");
    let disconnect = frame_of(&messages[0]);
    assert_eq!(disconnect.header.opcode, system::DISCONNECT);
    assert_eq!(
        Disconnect::decode_body(&disconnect.body).unwrap().reason,
        DisconnectReason::Normal
    );
    match &messages[1] {
        Message::Close(Some(close)) => assert_eq!(close.code, CloseCode::Normal),
        other => panic!("expected a Close frame, got {other:?}"),
    }
    assert_eq!(client.state(), ConnectionState::Closed(CloseReason::Local));
}

#[tokio::test]
async fn websocket_pings_are_answered_while_the_client_is_idle() {
    let (done, pong) = tokio::sync::oneshot::channel();
    let (address, _) = hand_server(Some("ternio.v2"), |mut ws| async move {
        ws.send(Message::Ping(Bytes::from_static(b"are you there")))
            .await
            .unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(2), ws.next()).await;
        let _ = done.send(answer.ok().flatten().and_then(Result::ok));
        let _ = messages_until_close(&mut ws).await;
    })
    .await;
    let client = Client::connect_ws(&url(address)).await.unwrap();
    match pong.await.unwrap() {
        Some(Message::Pong(payload)) => assert_eq!(&payload[..], b"are you there"),
        other => panic!("expected a pong, got {other:?}"),
    }
    assert_eq!(client.state(), ConnectionState::Connected);
}

#[tokio::test]
async fn a_text_message_is_a_protocol_error_closed_with_1003() {
    let (done, seen) = tokio::sync::oneshot::channel();
    let (address, _) = hand_server(Some("ternio.v2"), |mut ws| async move {
        let request = ws.next().await.unwrap().unwrap();
        assert!(request.is_binary());
        ws.send(Message::text("hello")).await.unwrap();
        let _ = done.send(messages_until_close(&mut ws).await);
    })
    .await;
    let client = Client::connect_ws(&url(address)).await.unwrap();
    let result = client.request_async(&Add { a: 1, b: 2 }).await;
    assert!(
        matches!(result, Err(ClientError::Closed(CloseReason::Protocol(_)))),
        "{result:?}"
    );
    let messages = seen.await.unwrap();
    match messages.last() {
        Some(Message::Close(Some(close))) => assert_eq!(close.code, CloseCode::Unsupported),
        other => panic!("expected a Close frame with 1003, got {other:?}"),
    }
}

#[tokio::test]
async fn a_message_above_the_frame_limit_closes_the_connection() {
    let (address, _) = hand_server(Some("ternio.v2"), |mut ws| async move {
        let request = frame_of(&ws.next().await.unwrap().unwrap());
        let big = Echo {
            payload: Bytes::from(vec![1; 4096]),
        };
        ws.send(reply_to(&request, &big)).await.unwrap();
        let _ = messages_until_close(&mut ws).await;
    })
    .await;
    let mut config = ClientConfig::default();
    config.max_frame_size = 1024;
    let client = Client::connect_ws_with(&url(address), config)
        .await
        .unwrap();
    let result = client
        .request_async(&Echo {
            payload: Bytes::from_static(b"x"),
        })
        .await;
    assert!(
        matches!(result, Err(ClientError::Closed(CloseReason::Protocol(_)))),
        "{result:?}"
    );
}

#[tokio::test]
async fn a_server_close_without_disconnect_fails_pending_requests() {
    let (address, _) = hand_server(Some("ternio.v2"), |mut ws| async move {
        let _ = ws.next().await;
        let _ = ws.close(None).await;
        let _ = messages_until_close(&mut ws).await;
    })
    .await;
    let client = Client::connect_ws(&url(address)).await.unwrap();
    let started = Instant::now();
    let result = client.request_async(&Add { a: 1, b: 2 }).await;
    assert!(
        matches!(result, Err(ClientError::Closed(CloseReason::PeerClosed))),
        "{result:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
}
