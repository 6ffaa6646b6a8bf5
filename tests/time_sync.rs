//! Time sync (docs/PROTOCOL.md section 4.3): the server's `TIME` answers,
//! plain and sealed, scripted byte by byte; the client's estimate against a
//! fake server whose clock is 5 s ahead and whose answers are delayed, and
//! against the real server through a delaying proxy.

use std::time::SystemTime;

use bytes::BytesMut;
use ternio::protocol::frame::{Flags, Frame, Framing, Header};
use ternio::protocol::secure::{Initiator, SecureChannel};
use ternio::protocol::system::{self, ErrorBody, TimeRequest, TimeResponse};
use ternio::protocol::{Decode, Encode, ErrorCode};
use ternio_tests::*;

fn now_micros() -> u64 {
    TimeResponse::micros(SystemTime::now())
}

/// Checks a `TIME` answer to request `id` sent with `client_time`, between
/// the wall-clock readings `before` and `after`.
fn check_answer(frame: &Frame, id: u32, client_time: u64, before: u64, after: u64) {
    let header = frame.header;
    assert_eq!((header.opcode, header.request_id), (system::TIME, id));
    assert!(header.flags.is_response() && !header.flags.is_error());
    let time = TimeResponse::decode_body(&frame.body).expect("a TIME answer");
    assert_eq!(time.client_time, client_time, "client_time is echoed");
    assert!(
        before <= time.server_receive
            && time.server_receive <= time.server_send
            && time.server_send <= after,
        "{before} <= {} <= {} <= {after}",
        time.server_receive,
        time.server_send
    );
}

fn error_code(frame: &Frame) -> ErrorCode {
    assert!(
        frame.header.flags.is_error(),
        "an error: {:?}",
        frame.header
    );
    ErrorBody::parse(&frame.body).unwrap().code
}

#[tokio::test]
async fn the_server_answers_time_with_its_clock() {
    let (address, _handle) = start_server(|builder| builder);
    let mut raw = RawConnection::connect(address).await;
    for id in 1..=3u32 {
        let client_time = 0xDEAD_0000 + u64::from(id);
        let before = now_micros();
        raw.send(
            Header::new(system::TIME, Flags::NONE, id),
            &TimeRequest { client_time },
        )
        .await;
        let answer = raw.recv().await.expect("an answer");
        let after = now_micros();
        check_answer(&answer, id, client_time, before, after);
    }
    // Still up: an echo goes through.
    raw.request(
        &Echo {
            payload: "after".into(),
        },
        9,
    )
    .await;
    assert_eq!(raw.recv().await.unwrap().header.request_id, 9);
}

#[tokio::test]
async fn malformed_time_requests_are_malformed_and_change_nothing() {
    let (address, _handle) = start_server(|builder| builder);
    let mut raw = RawConnection::connect(address).await;
    // Short, long and empty bodies.
    for (id, body) in [(1u32, &[0u8; 7][..]), (2, &[0u8; 9][..]), (3, &[][..])] {
        raw.send_body(Header::new(system::TIME, Flags::NONE, id), body)
            .await;
        let answer = raw.recv().await.expect("an answer");
        assert_eq!(answer.header.opcode, system::TIME);
        assert_eq!(answer.header.request_id, id);
        assert_eq!(error_code(&answer), ErrorCode::Malformed);
    }
    // Id 0: a request that cannot be answered is malformed (error under id 0).
    raw.send(
        Header::new(system::TIME, Flags::NONE, 0),
        &TimeRequest { client_time: 1 },
    )
    .await;
    let answer = raw.recv().await.expect("an error");
    assert_eq!(answer.header.request_id, 0);
    assert_eq!(error_code(&answer), ErrorCode::Malformed);
    // A TIME "answer" from the client answers nothing: ignored.
    raw.send(
        Header::new(system::TIME, Flags::RESPONSE, 4),
        &TimeResponse {
            client_time: 1,
            server_receive: 2,
            server_send: 3,
        },
    )
    .await;
    // The connection goes on, and the next TIME is answered.
    let before = now_micros();
    raw.send(
        Header::new(system::TIME, Flags::NONE, 5),
        &TimeRequest { client_time: 5 },
    )
    .await;
    let answer = raw.recv().await.expect("an answer");
    check_answer(&answer, 5, 5, before, now_micros());
}

#[tokio::test]
async fn a_secure_session_seals_time_both_ways() {
    let (address, _handle) = start_server(|builder| builder);
    let mut raw = RawConnection::connect(address).await;
    let mut initiator = Initiator::new(None).unwrap();
    let body = initiator.request_body().unwrap();
    raw.send_body(Header::new(system::HANDSHAKE, Flags::NONE, 1000), &body)
        .await;
    let answer = raw.recv().await.expect("the handshake's answer");
    let mut channel: SecureChannel = initiator.finish(&answer.body).unwrap();

    // A sealed TIME gets a sealed answer.
    let before = now_micros();
    let mut out = BytesMut::new();
    channel
        .sealer
        .write_frame_with(
            &mut out,
            Framing::LengthPrefixed,
            Header::new(system::TIME, Flags::NONE, 7),
            usize::MAX,
            |out| TimeRequest { client_time: 77 }.encode(out),
        )
        .unwrap();
    raw.send_raw(&out).await.unwrap();
    let frame = raw.recv().await.expect("the sealed answer");
    assert!(frame.header.flags.is_encrypted(), "the answer is sealed");
    let mut body = BytesMut::from(&frame.body[..]);
    channel.opener.open(&frame.header, &mut body).unwrap();
    let frame = Frame {
        header: frame.header,
        body: body.freeze(),
    };
    check_answer(&frame, 7, 77, before, now_micros());
}
