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

/// Reads to the server's DISCONNECT and checks the clean close after it.
async fn expect_disconnect(raw: &mut RawConnection, reason: DisconnectReason) {
    loop {
        let frame = raw.recv().await.expect("a DISCONNECT before the close");
        if frame.header.opcode == system::DISCONNECT {
            assert!(
                !frame.header.flags.is_encrypted(),
                "DISCONNECT goes out plain"
            );
            assert_eq!(Disconnect::decode_body(&frame.body).unwrap().reason, reason);
            assert!(raw.recv().await.is_none());
            return;
        }
    }
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
    // ...refuses a plain one with error 6...
    conn.raw.request(&Secret, 3).await;
    let refused = conn.recv().await.unwrap();
    assert_eq!(refused.header.flags, Flags::RESPONSE_ERROR);
    assert_eq!(
        ErrorBody::parse(&refused.body).unwrap().code,
        ErrorCode::EncryptionRequired
    );
    // ...while other handlers still answer plain requests in plain.
    conn.raw.request(&Add { a: 1, b: 1 }, 4).await;
    let plain = conn.recv().await.unwrap();
    assert_eq!(plain.header, Header::new(Sum::OPCODE, Flags::RESPONSE, 4));
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

    let mut conn = SecureConnection::open(address, None).await;
    let error = handshake(&mut conn.raw, None).await.unwrap_err();
    assert_eq!(error.code, ErrorCode::HandshakeFailed);

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
async fn a_tampered_ciphertext_is_decrypt_failed() {
    let (address, _server) = start_server(|b| b);
    let neighbour = Client::connect_tcp(address).await.unwrap();
    let mut conn = SecureConnection::open(address, None).await;
    let mut sealed = conn.seal(
        &Echo {
            payload: Bytes::from_static(b"tamper me"),
        },
        1,
    );
    let last = sealed.len() - 20;
    sealed[last] ^= 0x80;
    conn.raw.send_raw(&sealed).await.unwrap();
    expect_disconnect(&mut conn.raw, DisconnectReason::DecryptFailed).await;
    let sum: Sum = neighbour.request_async(&Add { a: 1, b: 1 }).await.unwrap();
    assert_eq!(sum, Sum(2));
}

#[tokio::test]
async fn a_tampered_header_is_decrypt_failed() {
    let (address, _server) = start_server(|b| b);
    let mut conn = SecureConnection::open(address, None).await;
    let mut sealed = conn.seal(&Add { a: 1, b: 1 }, 1);
    // The request id is byte 7 of the frame (after the 4-byte prefix).
    sealed[7] = 2;
    conn.raw.send_raw(&sealed).await.unwrap();
    expect_disconnect(&mut conn.raw, DisconnectReason::DecryptFailed).await;
}

#[tokio::test]
async fn a_replayed_frame_is_decrypt_failed() {
    let (address, _server) = start_server(|b| b);
    let mut conn = SecureConnection::open(address, None).await;
    let sealed = conn.seal(&Add { a: 1, b: 1 }, 1);
    conn.raw.send_raw(&sealed).await.unwrap();
    assert_eq!(
        Sum::decode_body(&conn.recv().await.unwrap().body).unwrap(),
        Sum(2)
    );
    conn.raw.send_raw(&sealed).await.unwrap();
    expect_disconnect(&mut conn.raw, DisconnectReason::DecryptFailed).await;
}

#[tokio::test]
async fn a_counter_that_goes_back_is_decrypt_failed() {
    let (address, _server) = start_server(|b| b);
    let mut conn = SecureConnection::open(address, None).await;
    let first = conn.seal(&Add { a: 1, b: 1 }, 1);
    let second = conn.seal(&Add { a: 2, b: 2 }, 2);
    conn.raw.send_raw(&second).await.unwrap();
    assert_eq!(
        Sum::decode_body(&conn.recv().await.unwrap().body).unwrap(),
        Sum(4)
    );
    conn.raw.send_raw(&first).await.unwrap();
    expect_disconnect(&mut conn.raw, DisconnectReason::DecryptFailed).await;
}

#[tokio::test]
async fn required_encryption_refuses_plain_requests_and_times_out_handshakes() {
    let (address, _server) = start_server(|b| {
        b.require_encryption(true)
            .handshake_timeout(Duration::from_millis(300))
    });
    let mut conn = SecureConnection::open(address, None).await;
    conn.raw.request(&Add { a: 1, b: 1 }, 1).await;
    assert_eq!(
        ErrorBody::parse(&conn.recv().await.unwrap().body)
            .unwrap()
            .code,
        ErrorCode::EncryptionRequired
    );
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
    expect_disconnect(&mut idle, DisconnectReason::HandshakeTimeout).await;
    assert!(started.elapsed() < Duration::from_secs(2));
    // The secure one is still served after the deadline.
    tokio::time::sleep(Duration::from_millis(300)).await;
    conn.send_sealed(&Add { a: 2, b: 2 }, 3).await;
    assert_eq!(
        Sum::decode_body(&conn.recv().await.unwrap().body).unwrap(),
        Sum(4)
    );
}

#[tokio::test]
async fn sealed_frames_over_websocket() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;

    let (_, ws_address, _server) = start_server_with_ws(|b| b);
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
