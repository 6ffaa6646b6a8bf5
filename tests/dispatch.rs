//! Dispatch over real sockets: replies, every error code of the core, pushes,
//! context, state, and many requests in flight on one connection.

use std::time::Duration;

use bytes::Bytes;
use ternio::Packet;
use ternio::protocol::frame::{Flags, Header};
use ternio::protocol::system::{self, ErrorBody, Ping, Pong};
use ternio::protocol::{Decode, ErrorCode};
use ternio_client::{Client, ClientError};
use ternio_tests::*;

fn remote_code(result: Result<impl std::fmt::Debug, ClientError>) -> (ErrorCode, String) {
    match result {
        Err(ClientError::Remote { code, message }) => (code, message),
        other => panic!("expected a remote error, got {other:?}"),
    }
}

/// `request_async` returns the response a request declares with
/// `response = ...`, with no annotation: `Sum` for `Add`, `()` for the
/// acknowledged `Bump`. `request_as` names a response itself, and a wrong
/// one fails at run time.
#[tokio::test]
async fn a_request_returns_its_declared_response() {
    let (address, _server) = start_server(|b| b);
    let client = Client::connect_tcp(address).await.unwrap();
    let sum = client.request_async(&Add { a: 2, b: 3 }).await.unwrap();
    assert_eq!(sum.0, 5);
    let before = client.request_async(&GetCount).await.unwrap().0;
    client.request_async(&Bump { by: 4 }).await.unwrap();
    let after = client
        .request_with_timeout(&GetCount, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(after.0 - before, 4);

    let () = client.request_as::<()>(&Bump { by: 1 }).await.unwrap();
    let sum = client.request_as::<Sum>(&Add { a: 1, b: 1 }).await.unwrap();
    assert_eq!(sum, Sum(2));
    match client.request_as::<Count>(&Add { a: 1, b: 1 }).await {
        Err(ClientError::UnexpectedResponse(error)) => assert_eq!(
            error.to_string(),
            "expected a response with opcode 0x0042, got 0x0011"
        ),
        other => panic!("expected an unexpected response, got {other:?}"),
    }
}

#[tokio::test]
async fn a_handler_answers_with_its_packet() {
    let (address, _server) = start_server(|b| b);
    let client = Client::connect_tcp(address).await.unwrap();
    let sum: Sum = client.request_async(&Add { a: 40, b: 2 }).await.unwrap();
    assert_eq!(sum, Sum(42));
    assert_echoed(&client, Bytes::from_static(b"hello")).await;
}

#[tokio::test]
async fn an_unknown_opcode_is_error_1() {
    let (address, _server) = start_server(|b| b);
    let client = Client::connect_tcp(address).await.unwrap();
    let (code, message) = remote_code(client.request_as::<()>(&Unhandled).await);
    assert_eq!(code, ErrorCode::UnknownOpcode);
    assert!(message.contains("0x0099"), "{message}");
    // The connection still serves.
    let sum: Sum = client.request_async(&Add { a: 1, b: 1 }).await.unwrap();
    assert_eq!(sum, Sum(2));
}

#[tokio::test]
async fn an_undecodable_body_is_error_2_and_so_are_trailing_bytes() {
    let (address, _server) = start_server(|b| b);
    let mut raw = RawConnection::connect(address).await;
    // Add needs 16 bytes: send 3.
    raw.send(Header::new(0x0010, Flags::NONE, 7), &[1u8, 2, 3])
        .await;
    // And 17: one trailing byte (an array encodes with no length).
    raw.send(Header::new(0x0010, Flags::NONE, 8), &[9u8; 17])
        .await;
    for id in [7, 8] {
        let frame = raw.recv().await.expect("an answer");
        assert_eq!(frame.header.request_id, id);
        assert_eq!(frame.header.flags, Flags::RESPONSE_ERROR);
        assert_eq!(
            frame.header.opcode, 0x0010,
            "an error carries the request's opcode"
        );
        let error = ErrorBody::parse(&frame.body).unwrap();
        assert_eq!(error.code, ErrorCode::Malformed, "{}", error.message);
    }
}

#[tokio::test]
async fn a_handler_error_carries_its_code_and_message() {
    let (address, _server) = start_server(|b| b);
    let client = Client::connect_tcp(address).await.unwrap();
    let (code, message) = remote_code(
        client
            .request_async(&Fail {
                code: 404,
                message: "no such room".into(),
            })
            .await,
    );
    assert_eq!(code, ErrorCode::from_u16(404));
    assert_eq!(message, "no such room");
    // A contract code used on purpose passes; an unassigned one becomes INTERNAL.
    let (code, _) = remote_code(
        client
            .request_async(&Fail {
                code: 3,
                message: "who?".into(),
            })
            .await,
    );
    assert_eq!(code, ErrorCode::Unauthorized);
    let (code, _) = remote_code(
        client
            .request_async(&Fail {
                code: 42,
                message: "x".into(),
            })
            .await,
    );
    assert_eq!(code, ErrorCode::Internal);
}

#[tokio::test]
async fn a_panicking_handler_is_error_7_and_the_connection_stays_up() {
    let (address, _server) = start_server(|b| b);
    let client = Client::connect_tcp(address).await.unwrap();
    for _ in 0..3 {
        let (code, message) = remote_code(client.request_async(&Panic).await);
        assert_eq!(code, ErrorCode::Internal);
        assert!(
            !message.contains("on purpose"),
            "the panic text stays in the server log"
        );
        let (code, _) = remote_code(client.request_async(&AsyncPanic).await);
        assert_eq!(code, ErrorCode::Internal);
        let sum: Sum = client.request_async(&Add { a: 2, b: 3 }).await.unwrap();
        assert_eq!(sum, Sum(5));
    }
}

#[tokio::test]
async fn an_encrypted_handler_refuses_a_plain_request_with_error_6() {
    let (address, _server) = start_server(|b| b);
    let client = Client::connect_tcp(address).await.unwrap();
    let (code, _) = remote_code(client.request_async(&Secret).await);
    assert_eq!(code, ErrorCode::EncryptionRequired);
}

#[tokio::test]
async fn a_unit_handler_acknowledges_and_state_is_shared() {
    let (address, _server) = start_server(|b| b);
    let first = Client::connect_tcp(address).await.unwrap();
    let second = Client::connect_tcp(address).await.unwrap();
    let () = first.request_async(&Bump { by: 5 }).await.unwrap();
    let () = second.request_async(&Bump { by: 2 }).await.unwrap();
    let count: Count = first.request_async(&GetCount).await.unwrap();
    assert_eq!(count, Count(7));
}

#[tokio::test]
async fn fire_and_forget_runs_the_handler_without_a_reply() {
    let (address, _server) = start_server(|b| b);
    let mut raw = RawConnection::connect(address).await;
    raw.request(&Bump { by: 3 }, 0).await;
    raw.request(&GetCount, 9).await;
    // The only frame that comes back answers request 9: the send got none.
    let frame = raw.recv().await.unwrap();
    assert_eq!(frame.header.request_id, 9);
    assert_eq!(Count::decode_body(&frame.body).unwrap(), Count(3));

    let client = Client::connect_tcp(address).await.unwrap();
    client.send(&Bump { by: 4 }).unwrap();
    let count: Count = client.request_async(&GetCount).await.unwrap();
    assert_eq!(
        count,
        Count(7),
        "a send before a request on one connection runs first"
    );
}

#[tokio::test]
async fn a_failed_send_is_reported_with_request_id_0() {
    let (address, _server) = start_server(|b| b);
    let mut raw = RawConnection::connect(address).await;
    raw.request(&Unhandled, 0).await;
    let frame = raw.recv().await.unwrap();
    assert_eq!(frame.header.request_id, 0);
    assert_eq!(frame.header.flags, Flags::RESPONSE_ERROR);
    assert_eq!(
        ErrorBody::parse(&frame.body).unwrap().code,
        ErrorCode::UnknownOpcode
    );
}

#[tokio::test]
async fn the_context_knows_the_connection() {
    let (address, _server) = start_server(|b| b);
    let first = Client::connect_tcp(address).await.unwrap();
    let second = Client::connect_tcp(address).await.unwrap();
    let a: YouAre = first.request_async(&WhoAmI).await.unwrap();
    let b: YouAre = second.request_async(&WhoAmI).await.unwrap();
    assert_ne!(a.connection_id, b.connection_id);
    assert_eq!(a.transport, "Tcp");
    assert!(a.peer.starts_with("127.0.0.1:"), "{}", a.peer);
    let again: YouAre = first.request_async(&WhoAmI).await.unwrap();
    assert_eq!(again, a);
}

#[tokio::test]
async fn a_handler_pushes_to_its_connection() {
    let (address, _server) = start_server(|b| b);
    let mut raw = RawConnection::connect(address).await;
    raw.request(&PushMe { count: 3 }, 1).await;
    let mut notes = Vec::new();
    let mut acknowledged = false;
    while notes.len() < 3 || !acknowledged {
        let frame = raw.recv().await.unwrap();
        if frame.header.request_id == 0 {
            assert_eq!(frame.header.opcode, Note::OPCODE);
            assert_eq!(frame.header.flags, Flags::NONE);
            notes.push(Note::decode_body(&frame.body).unwrap().seq);
        } else {
            assert_eq!(
                frame.header,
                Header::new(PushMe::OPCODE, Flags::RESPONSE, 1)
            );
            assert!(frame.body.is_empty());
            acknowledged = true;
        }
    }
    assert_eq!(notes, [0, 1, 2]);

    // The SDK counts pushes nobody handles and goes on.
    let client = Client::connect_tcp(address).await.unwrap();
    let () = client.request_async(&PushMe { count: 2 }).await.unwrap();
    let count: Count = client.request_async(&GetCount).await.unwrap();
    assert_eq!(count, Count(0));
    assert_eq!(client.unhandled_pushes(), 2);
}

#[tokio::test]
async fn ping_is_answered_with_the_same_value() {
    let (address, _server) = start_server(|b| b);
    let mut raw = RawConnection::connect(address).await;
    raw.send(
        Header::new(system::PING, Flags::NONE, 77),
        &Ping { value: 0xABCD },
    )
    .await;
    let frame = raw.recv().await.unwrap();
    assert_eq!(frame.header, Header::new(system::PONG, Flags::RESPONSE, 77));
    assert_eq!(Pong::decode_body(&frame.body).unwrap().value, 0xABCD);

    let client = Client::connect_tcp(address).await.unwrap();
    let rtt = client.ping().await.unwrap();
    assert!(rtt < Duration::from_secs(5));
}

#[tokio::test]
async fn a_thousand_pipelined_requests_complete_out_of_order() {
    let (address, _server) = start_server(|b| b);
    let client = Client::connect_tcp(address).await.unwrap();
    // Later requests sleep less, so they finish first. Each call records the
    // tag the server put in its answer, in the order the answers came.
    let answered = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let calls = (0..1000u32).map(|tag| {
        let client = client.clone();
        let answered = std::sync::Arc::clone(&answered);
        async move {
            let reply: Slept = client
                .request_async(&Sleep {
                    ms: (1000 - tag) / 10,
                    tag,
                })
                .await
                .unwrap();
            answered.lock().unwrap().push((tag, reply.tag));
        }
    });
    let tasks: Vec<_> = calls.map(tokio::spawn).collect();
    for task in tasks {
        task.await.unwrap();
    }
    let answered = std::mem::take(&mut *answered.lock().unwrap());
    // Each call got the answer to its own request...
    for (tag, answer) in &answered {
        assert_eq!(answer, tag, "a call got another request's answer");
    }
    // ...every request was answered once, and not in the order sent.
    let order: Vec<u32> = answered.iter().map(|(_, answer)| *answer).collect();
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
    assert_ne!(order, sorted, "the quick requests overtook the slow ones");

    // On the wire: every id answered once, not in the order sent.
    let mut raw = RawConnection::connect(address).await;
    for tag in 1..=200u32 {
        raw.request(
            &Sleep {
                ms: (200 - tag) / 4,
                tag,
            },
            tag,
        )
        .await;
    }
    let mut order = Vec::new();
    for _ in 0..200 {
        let frame = raw.recv().await.unwrap();
        let slept = Slept::decode_body(&frame.body).unwrap();
        assert_eq!(slept.tag, frame.header.request_id);
        order.push(frame.header.request_id);
    }
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (1..=200).collect::<Vec<_>>());
    assert_ne!(order, sorted, "the quick requests overtook the slow ones");
}

#[tokio::test]
async fn payloads_from_0_bytes_to_the_frame_limit_echo() {
    let (address, _server) = start_server(|b| b);
    let client = Client::connect_tcp(address).await.unwrap();
    // The largest payload that fits: 1 MiB minus header (7) and varint (3).
    let largest = 1024 * 1024 - 7 - 3;
    for size in [0, 1, 127, 128, 4096, 65_536, 300_000, largest] {
        let payload = Bytes::from((0..size).map(|i| (i % 251) as u8).collect::<Vec<_>>());
        let echo: Echo = client
            .request_async(&Echo {
                payload: payload.clone(),
            })
            .await
            .unwrap();
        assert_eq!(echo.payload, payload, "size {size}");
    }
}
