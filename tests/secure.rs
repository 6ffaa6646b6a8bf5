//! Secure sessions on the server, over real sockets: NN and NK handshakes,
//! sealed requests, replies and pushes, every failure of section 5, and
//! the encryption policies. The client side speaks through the protocol
//! crate's own `Initiator`, byte by byte.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ternio::protocol::frame::{Flags, Frame, Framing, Header};
use ternio::protocol::secure::{Initiator, SecureChannel};
use ternio::protocol::system::{self, Disconnect, ErrorBody};
use ternio::protocol::{Decode, Encode, ErrorCode, Packet};
use ternio::{DisconnectReason, Identity};
use ternio_client::Client;
use ternio_tests::*;

/// A raw connection after a handshake.
struct SecureConnection {
    raw: RawConnection,
    channel: SecureChannel,
}

/// Runs the handshake (NK when `pin` is given) with request id 1000.
async fn handshake(
    raw: &mut RawConnection,
    pin: Option<&[u8; 32]>,
) -> Result<SecureChannel, ErrorBody> {
    let mut initiator = Initiator::new(pin).unwrap();
    let body = initiator.request_body().unwrap();
    raw.send_body(Header::new(system::HANDSHAKE, Flags::NONE, 1000), &body)
        .await;
    let answer = raw.recv().await.expect("an answer to the handshake");
    assert_eq!(answer.header.opcode, system::HANDSHAKE);
    assert_eq!(answer.header.request_id, 1000);
    assert!(
        !answer.header.flags.is_encrypted(),
        "the handshake answer is plain"
    );
    if answer.header.flags.is_error() {
        return Err(ErrorBody::parse(&answer.body).unwrap());
    }
    Ok(initiator
        .finish(&answer.body)
        .expect("the server's message completes the handshake"))
}

impl SecureConnection {
    async fn open(address: std::net::SocketAddr, pin: Option<&[u8; 32]>) -> Self {
        let mut raw = RawConnection::connect(address).await;
        let channel = handshake(&mut raw, pin)
            .await
            .expect("the handshake succeeds");
        Self { raw, channel }
    }

    /// The sealed bytes of a request, as a TCP frame.
    fn seal<P: Packet>(&mut self, packet: &P, request_id: u32) -> BytesMut {
        let mut out = BytesMut::new();
        self.channel
            .sealer
            .write_frame_with(
                &mut out,
                Framing::LengthPrefixed,
                Header::new(P::OPCODE, Flags::NONE, request_id),
                usize::MAX,
                |out| packet.encode(out),
            )
            .unwrap();
        out
    }

    async fn send_sealed<P: Packet>(&mut self, packet: &P, request_id: u32) {
        let sealed = self.seal(packet, request_id);
        self.raw.send_raw(&sealed).await.unwrap();
    }

    /// The next frame, opened if sealed; `None` at the end of the stream.
    async fn recv(&mut self) -> Option<Frame> {
        let frame = self.raw.recv().await?;
        if !frame.header.flags.is_encrypted() {
            return Some(frame);
        }
        let mut body = BytesMut::from(&frame.body[..]);
        self.channel
            .opener
            .open(&frame.header, &mut body)
            .expect("the server's frame opens");
        Some(Frame {
            header: frame.header,
            body: body.freeze(),
        })
    }
}

/// The server-wide count of `Bump`s, read on a fresh connection.
async fn count(address: std::net::SocketAddr) -> u64 {
    let client = Client::connect_tcp(address).await.unwrap();
    let count: Count = client.request_async(&GetCount).await.unwrap();
    count.0
}

#[tokio::test]
async fn an_nn_session_seals_requests_and_replies() {
    let (address, _server) = start_server(|b| b);
    let mut conn = SecureConnection::open(address, None).await;
    conn.send_sealed(&Add { a: 2, b: 40 }, 1).await;
    let reply = conn.recv().await.unwrap();
    assert_eq!(
        reply.header,
        Header::new(Sum::OPCODE, Flags::RESPONSE.with(Flags::ENCRYPTED), 1)
    );
    assert_eq!(Sum::decode_body(&reply.body).unwrap(), Sum(42));
    // A handler that requires encryption answers a sealed request...
    conn.send_sealed(&Secret, 2).await;
    assert_eq!(
        conn.recv().await.unwrap().header,
        Header::new(Secret::OPCODE, Flags::RESPONSE.with(Flags::ENCRYPTED), 2)
    );
    // Errors to sealed requests are sealed too.
    conn.send_sealed(
        &Fail {
            code: 100,
            message: "sealed failure".into(),
        },
        5,
    )
    .await;
    let failed = conn.recv().await.unwrap();
    assert_eq!(
        failed.header.flags,
        Flags::RESPONSE_ERROR.with(Flags::ENCRYPTED)
    );
    assert_eq!(
        ErrorBody::parse(&failed.body).unwrap().message,
        "sealed failure"
    );
}

#[tokio::test]
async fn pushes_to_a_secure_connection_are_sealed() {
    let (address, _server) = start_server(|b| b);
    let mut conn = SecureConnection::open(address, None).await;
    conn.send_sealed(&PushMe { count: 3 }, 1).await;
    let mut seqs = Vec::new();
    for _ in 0..4 {
        let frame = conn.recv().await.unwrap();
        assert!(frame.header.flags.is_encrypted(), "{:?}", frame.header);
        if frame.header.request_id == 0 {
            seqs.push(Note::decode_body(&frame.body).unwrap().seq);
        }
    }
    assert_eq!(seqs, [0, 1, 2]);
}

#[tokio::test]
async fn nk_completes_only_with_the_servers_key() {
    let identity = Identity::generate();
    let public = *identity.public_key();
    let (address, _server) = start_server(|b| b.identity(identity));
    let mut conn = SecureConnection::open(address, Some(&public)).await;
    conn.send_sealed(
        &Echo {
            payload: Bytes::from_static(b"pinned"),
        },
        1,
    )
    .await;
    assert_eq!(
        Echo::decode_body(&conn.recv().await.unwrap().body)
            .unwrap()
            .payload,
        "pinned"
    );

    let impostor = Identity::generate();
    let mut raw = RawConnection::connect(address).await;
    let error = handshake(&mut raw, Some(impostor.public_key()))
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::HandshakeFailed);
    // The connection stays up (plain), and a second try is refused.
    raw.request(&Add { a: 1, b: 2 }, 1).await;
    assert_eq!(
        Sum::decode_body(&raw.recv().await.unwrap().body).unwrap(),
        Sum(3)
    );
    let error = handshake(&mut raw, Some(&public)).await.unwrap_err();
    assert_eq!(error.code, ErrorCode::HandshakeFailed);
}

#[tokio::test]
async fn nk_without_an_identity_and_second_handshakes_are_error_9() {
    let (address, _server) = start_server(|b| b);
    let mut raw = RawConnection::connect(address).await;
    let error = handshake(&mut raw, Some(Identity::generate().public_key()))
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::HandshakeFailed);
    assert!(error.message.contains("identity"), "{}", error.message);

    // A second handshake on a secure session: sealed, it is error 9, sealed...
    let mut conn = SecureConnection::open(address, None).await;
    let mut second = BytesMut::new();
    let body = Initiator::new(None).unwrap().request_body().unwrap();
    conn.channel
        .sealer
        .write_frame_with(
            &mut second,
            Framing::LengthPrefixed,
            Header::new(system::HANDSHAKE, Flags::NONE, 2),
            usize::MAX,
            |out| out.extend_from_slice(&body),
        )
        .unwrap();
    conn.raw.send_raw(&second).await.unwrap();
    let answer = conn.recv().await.unwrap();
    assert_eq!(
        answer.header.flags,
        Flags::RESPONSE_ERROR.with(Flags::ENCRYPTED)
    );
    assert_eq!(
        ErrorBody::parse(&answer.body).unwrap().code,
        ErrorCode::HandshakeFailed
    );
    // ...and plain, it is a frame an attacker inserted.
    conn.raw
        .send_body(Header::new(system::HANDSHAKE, Flags::NONE, 3), &body)
        .await;
    conn.raw
        .expect_disconnect(DisconnectReason::DecryptFailed)
        .await;

    let mut raw = RawConnection::connect(address).await;
    raw.send_body(Header::new(system::HANDSHAKE, Flags::NONE, 5), &[3; 33])
        .await;
    let answer = raw.recv().await.unwrap();
    assert_eq!(
        ErrorBody::parse(&answer.body).unwrap().code,
        ErrorCode::HandshakeFailed
    );
}

#[tokio::test]
async fn a_tampered_ciphertext_is_decrypt_failed_and_not_run() {
    let (address, _server) = start_server(|b| b);
    let neighbour = Client::connect_tcp(address).await.unwrap();
    for request_id in [0, 1] {
        let mut conn = SecureConnection::open(address, None).await;
        let mut sealed = conn.seal(&Bump { by: 1000 }, request_id);
        // A bit of the ciphertext (the 8-byte counter precedes it, the
        // 16-byte tag follows it).
        let at = sealed.len() - 17;
        sealed[at] ^= 0x80;
        conn.raw.send_raw(&sealed).await.unwrap();
        conn.raw
            .expect_disconnect(DisconnectReason::DecryptFailed)
            .await;
    }
    // And a bit of the tag.
    let mut conn = SecureConnection::open(address, None).await;
    let mut sealed = conn.seal(&Bump { by: 1000 }, 1);
    let last = sealed.len() - 1;
    sealed[last] ^= 0x01;
    conn.raw.send_raw(&sealed).await.unwrap();
    conn.raw
        .expect_disconnect(DisconnectReason::DecryptFailed)
        .await;
    assert_eq!(count(address).await, 0, "no tampered Bump ran");
    let sum: Sum = neighbour.request_async(&Add { a: 1, b: 1 }).await.unwrap();
    assert_eq!(sum, Sum(2));
}

#[tokio::test]
async fn a_tampered_header_is_decrypt_failed_and_not_run() {
    let (address, _server) = start_server(|b| b);
    // The request id is byte 7 of the frame (after the 4-byte prefix); a
    // send turned into a request, a request into a send, another id.
    for (sent, forged) in [(0u8, 2u8), (1, 0), (1, 2)] {
        let mut conn = SecureConnection::open(address, None).await;
        let mut sealed = conn.seal(&Bump { by: 1000 }, u32::from(sent));
        sealed[7] = forged;
        conn.raw.send_raw(&sealed).await.unwrap();
        conn.raw
            .expect_disconnect(DisconnectReason::DecryptFailed)
            .await;
    }
    assert_eq!(count(address).await, 0, "no tampered frame ran");
}

#[tokio::test]
async fn a_replayed_frame_is_decrypt_failed_and_not_run_again() {
    let (address, _server) = start_server(|b| b);
    // A request, and a send (which nothing answers: only the count tells).
    for (request_id, before) in [(1, 0), (0, 1)] {
        let mut conn = SecureConnection::open(address, None).await;
        let sealed = conn.seal(&Bump { by: 1 }, request_id);
        conn.raw.send_raw(&sealed).await.unwrap();
        if request_id != 0 {
            assert_eq!(conn.recv().await.unwrap().header.request_id, request_id);
        }
        // Once it ran, the original is replayed twice.
        while count(address).await != before + 1 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        conn.raw
            .send_raw(&[&sealed[..], &sealed[..]].concat())
            .await
            .unwrap();
        conn.raw
            .expect_disconnect(DisconnectReason::DecryptFailed)
            .await;
        assert_eq!(count(address).await, before + 1, "id {request_id}");
    }
    // A frame of one session replayed into another does not open there.
    let mut first = SecureConnection::open(address, None).await;
    let sealed = first.seal(&Bump { by: 1000 }, 1);
    let mut second = SecureConnection::open(address, None).await;
    second.raw.send_raw(&sealed).await.unwrap();
    second
        .raw
        .expect_disconnect(DisconnectReason::DecryptFailed)
        .await;
    assert_eq!(count(address).await, 2);
}

#[tokio::test]
async fn a_reordered_frame_is_decrypt_failed_and_not_run() {
    let (address, _server) = start_server(|b| b);
    let mut conn = SecureConnection::open(address, None).await;
    let first = conn.seal(&Bump { by: 1 }, 1);
    let second = conn.seal(&Bump { by: 10 }, 2);
    conn.raw.send_raw(&second).await.unwrap();
    conn.raw.send_raw(&first).await.unwrap();
    conn.raw
        .expect_disconnect(DisconnectReason::DecryptFailed)
        .await;
    assert_eq!(count(address).await, 0);
}

/// Contract v2, section 5.1: counters are exact, so an attacker on the path
/// cannot delete a sealed frame (say, a "ban" request) unnoticed.
#[tokio::test]
async fn a_deleted_frame_is_decrypt_failed_and_what_follows_is_not_run() {
    let (address, _server) = start_server(|b| b);
    let mut conn = SecureConnection::open(address, None).await;
    let kept = conn.seal(&Bump { by: 1 }, 1);
    let _deleted = conn.seal(&Bump { by: 10 }, 2);
    let after = conn.seal(&Bump { by: 100 }, 3);
    conn.raw.send_raw(&kept).await.unwrap();
    let ack = conn.recv().await.unwrap();
    assert_eq!(ack.header.request_id, 1);
    conn.raw.send_raw(&after).await.unwrap();
    conn.raw
        .expect_disconnect(DisconnectReason::DecryptFailed)
        .await;
    assert_eq!(count(address).await, 1);
}

/// Contract v2, section 5.1: once the session is up, a plain frame is what
/// an attacker inserted into the stream. It must not run with the
/// connection's permissions, even as a fire-and-forget send whose answer
/// nobody would see.
#[tokio::test]
async fn a_plain_request_injected_into_a_secure_session_is_refused_and_not_run() {
    let (address, _server) = start_server(|b| b);
    for request_id in [0, 7] {
        let before = count(address).await;
        let mut conn = SecureConnection::open(address, None).await;
        conn.send_sealed(&Bump { by: 1 }, 1).await;
        assert_eq!(conn.recv().await.unwrap().header.request_id, 1);
        // The injected request.
        conn.raw
            .send(
                Header::new(Bump::OPCODE, Flags::NONE, request_id),
                &Bump { by: 1000 },
            )
            .await;
        conn.raw
            .expect_disconnect(DisconnectReason::DecryptFailed)
            .await;
        assert_eq!(count(address).await, before + 1, "id {request_id}");
    }
    // A plain PING and a plain DISCONNECT are refused the same way.
    let mut conn = SecureConnection::open(address, None).await;
    conn.raw
        .send(
            Header::new(system::PING, Flags::NONE, 9),
            &system::Ping { value: 1 },
        )
        .await;
    conn.raw
        .expect_disconnect(DisconnectReason::DecryptFailed)
        .await;
    let mut conn = SecureConnection::open(address, None).await;
    conn.raw
        .send(
            Header::new(system::DISCONNECT, Flags::NONE, 0),
            &Disconnect::new(DisconnectReason::Normal, "forged"),
        )
        .await;
    conn.raw
        .expect_disconnect(DisconnectReason::DecryptFailed)
        .await;
}

/// Everything the server writes after its handshake answer is sealed:
/// keepalive PINGs, the answer to a request that came plain before the
/// handshake, error answers, and its DISCONNECT.
#[tokio::test]
async fn everything_the_server_writes_after_the_handshake_is_sealed() {
    let (address, _server) = start_server(|b| b.idle_timeout(Some(Duration::from_millis(800))));
    let mut raw = RawConnection::connect(address).await;
    // A plain request that is still running when the handshake completes.
    raw.request(&Sleep { ms: 300, tag: 1 }, 7).await;
    let channel = handshake(&mut raw, None).await.unwrap();
    let mut conn = SecureConnection { raw, channel };
    let slept = conn.recv().await.unwrap();
    assert_eq!(slept.header.request_id, 7);
    assert!(slept.header.flags.is_encrypted(), "{:?}", slept.header);
    conn.send_sealed(&Unhandled, 8).await;
    let error = conn.recv().await.unwrap();
    assert_eq!(
        error.header.flags,
        Flags::RESPONSE_ERROR.with(Flags::ENCRYPTED)
    );
    // Quiet now: the keepalive PING at half the idle timeout, then
    // IDLE_TIMEOUT, both sealed.
    let ping = conn.recv().await.unwrap();
    assert_eq!(ping.header.opcode, system::PING);
    assert!(ping.header.flags.is_encrypted(), "{:?}", ping.header);
    let bye = conn.recv().await.unwrap();
    assert_eq!(
        bye.header,
        Header::new(system::DISCONNECT, Flags::ENCRYPTED, 0)
    );
    assert_eq!(
        Disconnect::decode_body(&bye.body).unwrap().reason,
        DisconnectReason::IdleTimeout
    );
    assert!(conn.recv().await.is_none());
}

/// Section 5.2: the server rekeys by its policy, and follows the client's
/// REKEY; a REKEY that carries anything is MALFORMED.
#[tokio::test]
async fn both_sides_rekey_and_counters_go_on() {
    let policy = ternio::RekeyPolicy::new(2, Duration::from_secs(3600));
    let (address, _server) = start_server(|b| b.rekey(policy));
    let mut conn = SecureConnection::open(address, None).await;
    let mut rekeys = 0;
    for id in 1..=6u32 {
        if id == 3 {
            // The client's own REKEY: what follows is sealed with the new key.
            let mut out = BytesMut::new();
            conn.channel
                .sealer
                .write_rekey(&mut out, Framing::LengthPrefixed)
                .unwrap();
            conn.raw.send_raw(&out).await.unwrap();
        }
        conn.send_sealed(&Add { a: id as i64, b: 1 }, id).await;
        let answer = loop {
            let frame = conn.recv().await.unwrap();
            if frame.header.opcode == system::REKEY {
                assert_eq!(
                    frame.header,
                    Header::new(system::REKEY, Flags::ENCRYPTED, 0)
                );
                rekeys += 1;
                continue;
            }
            break frame;
        };
        assert_eq!(answer.header.request_id, id);
        assert_eq!(Sum::decode_body(&answer.body).unwrap(), Sum(id as i64 + 1));
    }
    // Six answers, a REKEY before the third and the fifth.
    assert_eq!(rekeys, 2);
    assert_eq!(conn.channel.opener.next_counter(), 8);

    let mut out = BytesMut::new();
    conn.channel
        .sealer
        .write_frame_with(
            &mut out,
            Framing::LengthPrefixed,
            Header::new(system::REKEY, Flags::NONE, 0),
            usize::MAX,
            |out| out.extend_from_slice(b"junk"),
        )
        .unwrap();
    conn.raw.send_raw(&out).await.unwrap();
    let mut bye = conn.recv().await.unwrap();
    if bye.header.opcode == system::REKEY {
        // Its third frame under this key: the DISCONNECT comes after a REKEY.
        bye = conn.recv().await.unwrap();
    }
    assert_eq!(
        bye.header,
        Header::new(system::DISCONNECT, Flags::ENCRYPTED, 0)
    );
    assert_eq!(
        Disconnect::decode_body(&bye.body).unwrap().reason,
        DisconnectReason::Malformed
    );
}

#[tokio::test]
async fn required_encryption_refuses_plain_requests_and_times_out_handshakes() {
    let (address, _server) = start_server(|b| {
        b.require_encryption(true)
            .handshake_timeout(Duration::from_millis(300))
    });
    // (Plain requests before the handshake: the tests below.)
    let mut raw = RawConnection::connect(address).await;
    let channel = handshake(&mut raw, None).await.unwrap();
    let mut conn = SecureConnection { raw, channel };
    conn.send_sealed(&Add { a: 1, b: 1 }, 2).await;
    assert_eq!(
        Sum::decode_body(&conn.recv().await.unwrap().body).unwrap(),
        Sum(2)
    );

    // A connection that never completes a handshake is closed in time;
    // PINGs are still answered meanwhile.
    let mut idle = RawConnection::connect(address).await;
    idle.send(
        Header::new(system::PING, Flags::NONE, 1),
        &system::Ping { value: 1 },
    )
    .await;
    assert_eq!(idle.recv().await.unwrap().header.opcode, system::PONG);
    let started = std::time::Instant::now();
    idle.expect_disconnect(DisconnectReason::HandshakeTimeout)
        .await;
    assert!(started.elapsed() < Duration::from_secs(2));
    // A failed handshake ends the connection at once: none can follow.
    let mut failed = RawConnection::connect(address).await;
    let error = handshake(&mut failed, Some(Identity::generate().public_key()))
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::HandshakeFailed);
    failed
        .expect_disconnect(DisconnectReason::HandshakeTimeout)
        .await;
    // The secure one is still served after the deadline.
    tokio::time::sleep(Duration::from_millis(300)).await;
    conn.send_sealed(&Add { a: 2, b: 2 }, 3).await;
    assert_eq!(
        Sum::decode_body(&conn.recv().await.unwrap().body).unwrap(),
        Sum(4)
    );
}

/// Asserts that `answer` refuses the plain request `request_id` of
/// `opcode` with error 6, in plain.
fn assert_encryption_required(answer: &Frame, opcode: u16, request_id: u32) {
    assert_eq!(
        answer.header,
        Header::new(opcode, Flags::RESPONSE_ERROR, request_id)
    );
    assert_eq!(
        ErrorBody::parse(&answer.body).unwrap().code,
        ErrorCode::EncryptionRequired
    );
}

/// Under `require_encryption`, a plain request (or send) that comes before
/// any handshake is answered with error 6 and its handler does not run.
#[tokio::test]
async fn required_encryption_refuses_plain_requests_before_the_handshake_and_runs_none() {
    let (address, _server) = start_server(|b| b.require_encryption(true));
    let mut raw = RawConnection::connect(address).await;
    raw.request(&Bump { by: 1 }, 1).await;
    raw.request(&Bump { by: 10 }, 0).await;
    raw.request(&GetCount, 2).await;
    for (opcode, id) in [(Bump::OPCODE, 1), (Bump::OPCODE, 0), (GetCount::OPCODE, 2)] {
        assert_encryption_required(&raw.recv().await.unwrap(), opcode, id);
    }
    // After the handshake, the same connection reads the count: nothing
    // ran. Then a sealed Bump does.
    let channel = handshake(&mut raw, None).await.unwrap();
    let mut conn = SecureConnection { raw, channel };
    conn.send_sealed(&GetCount, 3).await;
    assert_eq!(
        Count::decode_body(&conn.recv().await.unwrap().body).unwrap(),
        Count(0)
    );
    conn.send_sealed(&Bump { by: 100 }, 4).await;
    assert_eq!(conn.recv().await.unwrap().header.request_id, 4);
    conn.send_sealed(&GetCount, 5).await;
    assert_eq!(
        Count::decode_body(&conn.recv().await.unwrap().body).unwrap(),
        Count(100)
    );
}

/// A WebSocket message holding one frame sealed by `channel`.
fn ws_sealed<P: Packet>(
    channel: &mut SecureChannel,
    packet: &P,
    request_id: u32,
) -> tokio_tungstenite::tungstenite::Message {
    let mut out = BytesMut::new();
    channel
        .sealer
        .write_frame_with(
            &mut out,
            Framing::Message,
            Header::new(P::OPCODE, Flags::NONE, request_id),
            usize::MAX,
            |out| packet.encode(out),
        )
        .unwrap();
    tokio_tungstenite::tungstenite::Message::Binary(out.freeze())
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The next binary message's frame, opened by `channel` when sealed.
async fn ws_recv(ws: &mut Ws, channel: Option<&mut SecureChannel>) -> Frame {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    let message = tokio::time::timeout(Duration::from_secs(5), ws.next())
        .await
        .expect("an answer within 5 s");
    let Some(Ok(Message::Binary(bytes))) = message else {
        panic!("expected a binary message, got {message:?}")
    };
    let frame = Frame::parse(bytes, usize::MAX).unwrap();
    if !frame.header.flags.is_encrypted() {
        return frame;
    }
    let mut body = BytesMut::from(&frame.body[..]);
    channel
        .expect("a secure session for a sealed frame")
        .opener
        .open(&frame.header, &mut body)
        .expect("the server's frame opens");
    Frame {
        header: frame.header,
        body: body.freeze(),
    }
}

/// Runs an NN handshake over `ws`.
async fn ws_handshake(ws: &mut Ws) -> SecureChannel {
    use futures_util::SinkExt;
    let mut initiator = Initiator::new(None).unwrap();
    let mut hello = BytesMut::new();
    ternio::protocol::frame::write_frame_with(
        &mut hello,
        Framing::Message,
        Header::new(system::HANDSHAKE, Flags::NONE, 1000),
        usize::MAX,
        |out| out.extend_from_slice(&initiator.request_body().unwrap()),
    )
    .unwrap();
    ws.send(tokio_tungstenite::tungstenite::Message::Binary(
        hello.freeze(),
    ))
    .await
    .unwrap();
    let answer = ws_recv(ws, None).await;
    assert_eq!(
        answer.header,
        Header::new(system::HANDSHAKE, Flags::RESPONSE, 1000)
    );
    initiator.finish(&answer.body).unwrap()
}

/// The same over WebSocket: plain requests before any handshake get error
/// 6 and run nothing.
#[tokio::test]
async fn required_encryption_refuses_plain_websocket_requests_before_the_handshake() {
    use futures_util::SinkExt;
    let (_, ws_address, _server) = start_server_with_ws(|b| b.require_encryption(true));
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{ws_address}/ws"))
        .await
        .unwrap();
    ws.send(ws_request(&Bump { by: 1 }, 1)).await.unwrap();
    ws.send(ws_request(&Bump { by: 10 }, 0)).await.unwrap();
    ws.send(ws_request(&GetCount, 2)).await.unwrap();
    for (opcode, id) in [(Bump::OPCODE, 1), (Bump::OPCODE, 0), (GetCount::OPCODE, 2)] {
        assert_encryption_required(&ws_recv(&mut ws, None).await, opcode, id);
    }
    let mut channel = ws_handshake(&mut ws).await;
    ws.send(ws_sealed(&mut channel, &GetCount, 3))
        .await
        .unwrap();
    let count = ws_recv(&mut ws, Some(&mut channel)).await;
    assert_eq!(count.header.request_id, 3);
    assert_eq!(Count::decode_body(&count.body).unwrap(), Count(0));
    ws.send(ws_sealed(&mut channel, &Bump { by: 100 }, 4))
        .await
        .unwrap();
    assert_eq!(
        ws_recv(&mut ws, Some(&mut channel)).await.header.request_id,
        4
    );
    ws.send(ws_sealed(&mut channel, &GetCount, 5))
        .await
        .unwrap();
    let count = ws_recv(&mut ws, Some(&mut channel)).await;
    assert_eq!(Count::decode_body(&count.body).unwrap(), Count(100));
}

#[tokio::test]
async fn sealed_frames_over_websocket() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;

    let (tcp_address, ws_address, _server) = start_server_with_ws(|b| b);
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{ws_address}/ws"))
        .await
        .unwrap();
    let mut initiator = Initiator::new(None).unwrap();
    let mut hello = BytesMut::new();
    ternio::protocol::frame::write_frame_with(
        &mut hello,
        Framing::Message,
        Header::new(system::HANDSHAKE, Flags::NONE, 1),
        usize::MAX,
        |out| out.extend_from_slice(&initiator.request_body().unwrap()),
    )
    .unwrap();
    ws.send(Message::Binary(hello.freeze())).await.unwrap();
    let Some(Ok(Message::Binary(answer))) = ws.next().await else {
        panic!("no handshake answer")
    };
    let answer = Frame::parse(answer, usize::MAX).unwrap();
    let mut channel = initiator.finish(&answer.body).unwrap();
    let mut sealed = BytesMut::new();
    channel
        .sealer
        .write_frame_with(
            &mut sealed,
            Framing::Message,
            Header::new(Echo::OPCODE, Flags::NONE, 2),
            usize::MAX,
            |out| {
                Echo {
                    payload: Bytes::from_static(b"over ws"),
                }
                .encode(out)
            },
        )
        .unwrap();
    ws.send(Message::Binary(sealed.freeze())).await.unwrap();
    let Some(Ok(Message::Binary(reply))) = ws.next().await else {
        panic!("no sealed reply")
    };
    let reply = Frame::parse(reply, usize::MAX).unwrap();
    assert!(reply.header.flags.is_encrypted());
    let mut body = BytesMut::from(&reply.body[..]);
    channel.opener.open(&reply.header, &mut body).unwrap();
    assert_eq!(
        Echo::decode_body(&body.freeze()).unwrap().payload,
        "over ws"
    );
    // A plain message on the secure session is refused, not run.
    let mut plain = BytesMut::new();
    ternio::protocol::frame::write_frame(
        &mut plain,
        Framing::Message,
        Header::new(Bump::OPCODE, Flags::NONE, 0),
        &Bump { by: 5 },
        usize::MAX,
    )
    .unwrap();
    ws.send(Message::Binary(plain.freeze())).await.unwrap();
    let Some(Ok(Message::Binary(bye))) = ws.next().await else {
        panic!("no DISCONNECT")
    };
    let bye = Frame::parse(bye, usize::MAX).unwrap();
    assert_eq!(bye.header, Header::new(system::DISCONNECT, Flags::NONE, 0));
    assert_eq!(
        Disconnect::decode_body(&bye.body).unwrap().reason,
        DisconnectReason::DecryptFailed
    );
    let Some(Ok(Message::Close(Some(close)))) = ws.next().await else {
        panic!("no close frame")
    };
    assert_eq!(u16::from(close.code), 1008);
    assert_eq!(count(tcp_address).await, 0);
}

#[tokio::test]
async fn a_group_broadcast_reaches_plain_members_plain_and_secure_members_sealed() {
    let (address, server) = start_server(|b| b);
    let mut plain = RawConnection::connect(address).await;
    let mut secure = SecureConnection::open(address, None).await;
    plain.request(&WhoAmI, 1).await;
    let plain_id = YouAre::decode_body(&plain.recv().await.unwrap().body)
        .unwrap()
        .connection_id;
    secure.send_sealed(&WhoAmI, 1).await;
    let secure_id = YouAre::decode_body(&secure.recv().await.unwrap().body)
        .unwrap()
        .connection_id;
    let hub = server.hub();
    assert!(hub.join("room", ternio::ConnectionId(plain_id)));
    assert!(hub.join("room", ternio::ConnectionId(secure_id)));
    let delivery = hub.broadcast_group("room", &Note { seq: 7 }).unwrap();
    assert_eq!(delivery.queued, 2);
    let to_plain = plain.recv().await.unwrap();
    assert_eq!(to_plain.header, Header::new(Note::OPCODE, Flags::NONE, 0));
    assert_eq!(Note::decode_body(&to_plain.body).unwrap(), Note { seq: 7 });
    // `recv` opens the sealed copy: the secure member's is sealed for it alone.
    let to_secure = secure.recv().await.unwrap();
    assert_eq!(
        to_secure.header,
        Header::new(Note::OPCODE, Flags::ENCRYPTED, 0)
    );
    assert_eq!(Note::decode_body(&to_secure.body).unwrap(), Note { seq: 7 });
}
