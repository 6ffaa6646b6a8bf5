//! Compressed frames (contract section 6) over real sockets: what an
//! attacker sends (a bomb, a corrupt block, a block of another length, a
//! flipped `COMPRESSED` flag on a sealed frame) and round trips, plain and
//! sealed, over TCP and WebSocket, with the Rust client and with frames
//! written by hand; a packet type that opts out, and a body that does not
//! shrink, go uncompressed.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::{SinkExt, StreamExt};
use ternio::protocol::compression;
use ternio::protocol::frame::{self, Flags, Frame, Framing, Header};
use ternio::protocol::system::{self, Disconnect, ErrorBody};
use ternio::protocol::{DEFAULT_MAX_FRAME_SIZE, Decode, Encode, FrameDecoder};
use ternio::{Context, DisconnectReason, ErrorCode, HandlerError, Packet, packet_controller};
use ternio_client::{Client, ClientConfig, SecureConfig};
use ternio_tests::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

/// 0x0301: echoed back, never compressed (`compress = false`).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0301, response = PlainEcho, compress = false)]
pub struct PlainEcho {
    /// The bytes.
    pub payload: Bytes,
}

/// 0x0302: the server pushes a [`Blob`] and a [`PlainBlob`] of `len`
/// compressible bytes each, then acknowledges.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0302, response = ())]
pub struct PushBlobs {
    /// How many bytes in each.
    pub len: u32,
}

/// 0x0303: a push that may be compressed.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0303)]
pub struct Blob(pub Bytes);

/// 0x0304: a push that is never compressed.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0304, compress = false)]
pub struct PlainBlob(pub Bytes);

/// 0x0305: the server counts it (per session), pushes a [`Blob`] whose
/// first 8 bytes are the count (LE) followed by compressible bytes, and
/// answers with the same blob.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0305, response = Blob)]
pub struct NextBlob {
    /// Compressible padding, so that the request compresses too.
    pub padding: Bytes,
}

/// The count of `NextBlob`s a session sent, in its store.
#[derive(Debug, Clone, Copy, Default)]
struct Seen(u64);

/// The blob of count `seq`.
fn numbered(seq: u64) -> Blob {
    let mut bytes = seq.to_le_bytes().to_vec();
    bytes.extend_from_slice(&compressible(600));
    Blob(bytes.into())
}

/// Answers the packets of this file.
#[derive(Default)]
pub struct ZipController;

#[packet_controller(explicit)]
impl ZipController {
    fn plain_echo(request: PlainEcho) -> PlainEcho {
        request
    }

    fn next_blob(request: NextBlob, ctx: &Context) -> Result<Blob, HandlerError> {
        assert_eq!(request.padding, compressible(600));
        let Seen(seen) = ctx.store().get::<Seen>().unwrap_or_default();
        ctx.store().insert(Seen(seen + 1));
        let blob = numbered(seen + 1);
        ctx.push(&blob)
            .map_err(|error| HandlerError::new(ErrorCode::Internal, error.to_string()))?;
        Ok(blob)
    }

    fn push_blobs(request: PushBlobs, ctx: &Context) -> Result<(), HandlerError> {
        let bytes = compressible(request.len as usize);
        ctx.push(&Blob(bytes.clone()))
            .map_err(|error| HandlerError::new(ErrorCode::Internal, error.to_string()))?;
        ctx.push(&PlainBlob(bytes))
            .map_err(|error| HandlerError::new(ErrorCode::Internal, error.to_string()))?;
        Ok(())
    }
}

/// `len` bytes that compress well (a short text, repeated).
fn compressible(len: usize) -> Bytes {
    b"the quick brown fox jumps over the lazy dog. "
        .iter()
        .copied()
        .cycle()
        .take(len)
        .collect::<Vec<u8>>()
        .into()
}

/// `len` bytes that do not compress (xorshift noise).
fn noise(len: usize) -> Bytes {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 32) as u8
        })
        .collect::<Vec<u8>>()
        .into()
}

/// The encoded body of `packet`.
fn encoded<P: Encode>(packet: &P) -> Vec<u8> {
    let mut out = BytesMut::new();
    packet.encode(&mut out);
    out.to_vec()
}

/// A test server with compression at `threshold` and [`ZipController`],
/// over TCP and WebSocket (`/ws`).
fn server(
    threshold: Option<usize>,
) -> (
    std::net::SocketAddr,
    std::net::SocketAddr,
    ternio::ServerHandle,
) {
    start_server_with_ws(|b| b.controller(ZipController).compression(threshold))
}

/// `frame` with its body decompressed when `COMPRESSED` is set; whether it was.
fn decompressed(frame: Frame) -> (Frame, bool) {
    let was = frame.header.flags.is_compressed();
    (frame.decompressed(DEFAULT_MAX_FRAME_SIZE).unwrap(), was)
}

/// The error code and message of an error answer.
fn error_of(frame: &Frame) -> ErrorBody {
    assert!(frame.header.flags.is_error(), "an error: {frame:?}");
    ErrorBody::parse(&frame.body).unwrap()
}

#[tokio::test]
async fn a_bomb_is_frame_too_large_before_anything_is_allocated() {
    let (address, _, _server) = server(None);
    let neighbour = Client::connect_tcp(address).await.unwrap();
    // 4 GiB announced in a frame of a few bytes: had the server allocated
    // it before checking, this test would not get its answer.
    for announced in [
        u32::MAX,
        (DEFAULT_MAX_FRAME_SIZE - frame::HEADER_LEN + 1) as u32,
    ] {
        let mut raw = RawConnection::connect(address).await;
        raw.request(&Add { a: 1, b: 2 }, 1).await;
        let mut body = announced.to_le_bytes().to_vec();
        body.extend_from_slice(&[0x1F, 0, 0, 0, 0, 0]);
        raw.send_body(Header::new(Echo::OPCODE, Flags::COMPRESSED, 2), &body)
            .await;
        assert_eq!(raw.recv().await.unwrap().header.request_id, 1);
        let disconnect = raw.expect_disconnect(DisconnectReason::FrameTooLarge).await;
        assert!(
            disconnect.message.contains("maximum"),
            "{}",
            disconnect.message
        );
    }
    // One byte less is within the limit: a valid block of that size runs.
    // 3 bytes of varint length, then the payload.
    let payload = compressible(DEFAULT_MAX_FRAME_SIZE - frame::HEADER_LEN - 3);
    let body = encoded(&Echo {
        payload: payload.clone(),
    });
    assert_eq!(body.len(), DEFAULT_MAX_FRAME_SIZE - frame::HEADER_LEN);
    let mut raw = RawConnection::connect(address).await;
    raw.send_body(
        Header::new(Echo::OPCODE, Flags::COMPRESSED, 3),
        &compression::compress(&body),
    )
    .await;
    let answer = raw.recv().await.unwrap();
    assert_eq!(answer.header.request_id, 3);
    assert_eq!(Echo::decode_body(&answer.body).unwrap().payload, payload);
    assert_echoed(&neighbour, "still here".into()).await;
}

#[tokio::test]
async fn a_bomb_over_websocket_is_frame_too_large() {
    let (_, ws_address, _server) = server(None);
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{ws_address}/ws"))
        .await
        .unwrap();
    let mut message = Header::new(Echo::OPCODE, Flags::COMPRESSED, 1)
        .to_bytes()
        .to_vec();
    message.extend_from_slice(&u32::MAX.to_le_bytes());
    message.extend_from_slice(&[0x1F, 0, 0, 0, 0, 0]);
    ws.send(Message::Binary(message.into())).await.unwrap();
    let disconnect = loop {
        match tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            Message::Binary(bytes) => break Frame::parse(bytes, usize::MAX).unwrap(),
            Message::Pong(_) => continue,
            other => panic!("expected the DISCONNECT, got {other:?}"),
        }
    };
    assert_eq!(
        disconnect.header,
        Header::new(ternio::protocol::system::DISCONNECT, Flags::NONE, 0)
    );
    let disconnect = ternio::protocol::system::Disconnect::decode_body(&disconnect.body).unwrap();
    assert_eq!(disconnect.reason, DisconnectReason::FrameTooLarge);
}

#[tokio::test]
async fn a_corrupt_block_is_malformed_and_the_connection_goes_on() {
    let (address, _, _server) = server(None);
    let mut raw = RawConnection::connect(address).await;
    let body = compression::compress(&encoded(&Echo {
        payload: compressible(300),
    }));
    // A block cut short, and one whose first token promises literals that
    // never come.
    let mut cut = body.clone();
    cut.truncate(body.len() - 3);
    let mut garbage = 50u32.to_le_bytes().to_vec();
    garbage.extend_from_slice(&[0xF0, 0xFF, 0xFF, 1, 2, 3]);
    for (id, bad) in [(1, cut), (2, garbage)] {
        raw.send_body(Header::new(Echo::OPCODE, Flags::COMPRESSED, id), &bad)
            .await;
        let answer = raw.recv().await.unwrap();
        assert_eq!(answer.header.request_id, id);
        assert_eq!(answer.header.flags, Flags::RESPONSE_ERROR);
        assert_eq!(error_of(&answer).code, ErrorCode::Malformed);
    }
    // A one-way frame (request id 0): the error carries id 0 (section 2),
    // and the Bump never runs.
    let mut bad = compression::compress(&encoded(&Bump { by: 1000 }));
    bad.truncate(bad.len() - 1);
    raw.send_body(Header::new(Bump::OPCODE, Flags::COMPRESSED, 0), &bad)
        .await;
    let answer = raw.recv().await.unwrap();
    assert_eq!(answer.header.request_id, 0);
    assert_eq!(error_of(&answer).code, ErrorCode::Malformed);
    // The connection goes on: a valid compressed request is answered.
    raw.send_body(Header::new(Echo::OPCODE, Flags::COMPRESSED, 3), &body)
        .await;
    let answer = raw.recv().await.unwrap();
    assert_eq!(answer.header.request_id, 3);
    assert_eq!(
        Echo::decode_body(&answer.body).unwrap().payload,
        compressible(300)
    );
    raw.request(&GetCount, 4).await;
    let count = raw.recv().await.unwrap();
    assert_eq!(Count::decode_body(&count.body).unwrap(), Count(0));
}

#[tokio::test]
async fn a_block_of_another_length_than_announced_is_malformed() {
    let (address, _, _server) = server(None);
    let mut raw = RawConnection::connect(address).await;
    let plain = encoded(&Echo {
        payload: compressible(500),
    });
    let good = compression::compress(&plain);
    for (id, announced) in [(1u32, plain.len() + 1), (2, plain.len() - 1), (3, 0)] {
        let mut body = good.clone();
        body[..4].copy_from_slice(&(announced as u32).to_le_bytes());
        raw.send_body(Header::new(Echo::OPCODE, Flags::COMPRESSED, id), &body)
            .await;
        let answer = raw.recv().await.unwrap();
        assert_eq!(answer.header.request_id, id);
        assert_eq!(error_of(&answer).code, ErrorCode::Malformed, "{announced}");
    }
    // Shorter than its length field.
    raw.send_body(Header::new(Echo::OPCODE, Flags::COMPRESSED, 4), &[1, 0])
        .await;
    assert_eq!(
        error_of(&raw.recv().await.unwrap()).code,
        ErrorCode::Malformed
    );
}

/// A sealed, compressed frame as a client writes it: `(prefix + header,
/// the rest)` offsets let a test flip the flag.
fn sealed_compressed(
    channel: &mut ternio::protocol::secure::SecureChannel,
    header: Header,
    body: &[u8],
) -> BytesMut {
    let mut out = BytesMut::new();
    channel
        .sealer
        .write_frame_compressing(
            &mut out,
            Framing::LengthPrefixed,
            header,
            usize::MAX,
            Some(0),
            |out| out.extend_from_slice(body),
            |_| {},
        )
        .unwrap();
    out
}

#[tokio::test]
async fn a_flipped_compressed_flag_on_a_sealed_frame_fails_authentication() {
    let (address, _, _server) = server(None);
    let body = encoded(&Echo {
        payload: compressible(400),
    });
    // The flag cleared by an attacker: the tag no longer matches.
    let mut connection = SealedConnection::secure(address).await;
    let channel = connection.channel.as_mut().unwrap();
    let good = sealed_compressed(channel, Header::new(Echo::OPCODE, Flags::NONE, 1), &body);
    assert_eq!(
        good[4 + 2],
        (Flags::ENCRYPTED.with(Flags::COMPRESSED)).bits()
    );
    connection.raw.send_raw(&good).await.unwrap();
    let answer = connection.recv().await.unwrap();
    assert_eq!(answer.header.request_id, 1);
    let (answer, _) = decompressed(answer.clone());
    assert_eq!(
        Echo::decode_body(&answer.body).unwrap().payload,
        compressible(400)
    );
    let channel = connection.channel.as_mut().unwrap();
    let mut flipped = sealed_compressed(channel, Header::new(Echo::OPCODE, Flags::NONE, 2), &body);
    flipped[4 + 2] &= !Flags::COMPRESSED.bits();
    connection.raw.send_raw(&flipped).await.unwrap();
    connection
        .raw
        .expect_disconnect(DisconnectReason::DecryptFailed)
        .await;

    // The flag set by an attacker on a frame sealed uncompressed.
    let mut connection = SealedConnection::secure(address).await;
    let channel = connection.channel.as_mut().unwrap();
    let mut out = BytesMut::new();
    channel
        .sealer
        .write_frame_with(
            &mut out,
            Framing::LengthPrefixed,
            Header::new(Echo::OPCODE, Flags::NONE, 1),
            usize::MAX,
            |out| out.extend_from_slice(&body),
        )
        .unwrap();
    out[4 + 2] |= Flags::COMPRESSED.bits();
    connection.raw.send_raw(&out).await.unwrap();
    connection
        .raw
        .expect_disconnect(DisconnectReason::DecryptFailed)
        .await;
}

#[tokio::test]
async fn raw_frames_round_trip_compressed_plain_and_sealed_over_tcp() {
    let (address, _, _server) = server(Some(64));
    let payload = compressible(2000);
    let body = encoded(&Echo {
        payload: payload.clone(),
    });
    // Plain.
    let mut raw = RawConnection::connect(address).await;
    raw.send_body(
        Header::new(Echo::OPCODE, Flags::COMPRESSED, 1),
        &compression::compress(&body),
    )
    .await;
    let answer = raw.recv().await.unwrap();
    assert_eq!(
        answer.header,
        Header::new(Echo::OPCODE, Flags::RESPONSE.with(Flags::COMPRESSED), 1)
    );
    assert!(answer.body.len() < body.len() / 4, "{}", answer.body.len());
    let (answer, _) = decompressed(answer);
    assert_eq!(Echo::decode_body(&answer.body).unwrap().payload, payload);

    // Sealed: compressed, then sealed, both ways.
    let mut connection = SealedConnection::secure(address).await;
    let channel = connection.channel.as_mut().unwrap();
    let out = sealed_compressed(channel, Header::new(Echo::OPCODE, Flags::NONE, 2), &body);
    assert!(out.len() < body.len() / 4);
    connection.raw.send_raw(&out).await.unwrap();
    let answer = connection.recv().await.unwrap();
    assert_eq!(
        answer.header.flags,
        Flags::RESPONSE
            .with(Flags::ENCRYPTED)
            .with(Flags::COMPRESSED)
    );
    let (answer, _) = decompressed(answer);
    assert_eq!(Echo::decode_body(&answer.body).unwrap().payload, payload);
}

#[tokio::test]
async fn raw_frames_round_trip_compressed_over_websocket() {
    let (_, ws_address, _server) = server(Some(64));
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{ws_address}/ws"))
        .await
        .unwrap();
    let payload = compressible(3000);
    let mut message = BytesMut::new();
    frame::write_frame_compressing(
        &mut message,
        Framing::Message,
        Header::new(Echo::OPCODE, Flags::NONE, 7),
        usize::MAX,
        Some(0),
        |out| {
            Echo {
                payload: payload.clone(),
            }
            .encode(out)
        },
    )
    .unwrap();
    assert!(Header::parse(&message).unwrap().flags.is_compressed());
    ws.send(Message::Binary(message.freeze())).await.unwrap();
    let answer = loop {
        match tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            Message::Binary(bytes) => break Frame::parse(bytes, usize::MAX).unwrap(),
            Message::Pong(_) => continue,
            other => panic!("expected the answer, got {other:?}"),
        }
    };
    assert_eq!(answer.header.request_id, 7);
    let (answer, was) = decompressed(answer);
    assert!(was, "the answer came compressed");
    assert_eq!(Echo::decode_body(&answer.body).unwrap().payload, payload);
}

#[tokio::test]
async fn the_rust_client_round_trips_compressed_plain_and_sealed_over_tcp_and_websocket() {
    let (tcp, ws, _server) = server(Some(128));
    let mut config = ClientConfig::default();
    config.compression = Some(128);
    for secure in [false, true] {
        let mut config = config.clone();
        if secure {
            config.secure = Some(SecureConfig::anonymous());
        }
        let over_tcp = Client::connect_tcp_with(tcp, config.clone()).await.unwrap();
        let over_ws = Client::connect_ws_with(&format!("ws://{ws}/ws"), config)
            .await
            .unwrap();
        for client in [&over_tcp, &over_ws] {
            for len in [0, 10, 127, 128, 5000, 200_000] {
                assert_echoed(client, compressible(len)).await;
                assert_echoed(client, noise(len)).await;
            }
            let plain: PlainEcho = client
                .request_async(&PlainEcho {
                    payload: compressible(4000),
                })
                .await
                .unwrap();
            assert_eq!(plain.payload, compressible(4000));
            // Pushes, compressed once for their connection.
            let mut blobs = client.subscribe::<Blob>();
            let mut plain_blobs = client.subscribe::<PlainBlob>();
            client
                .request_async(&PushBlobs { len: 10_000 })
                .await
                .unwrap();
            assert_eq!(blobs.next().await.unwrap().0, compressible(10_000));
            assert_eq!(plain_blobs.next().await.unwrap().0, compressible(10_000));
        }
    }
}

#[tokio::test]
async fn the_opt_out_and_a_body_that_does_not_shrink_go_uncompressed() {
    const { assert!(!PlainEcho::COMPRESS && !PlainBlob::COMPRESS && Echo::COMPRESS) };
    let (address, _, _server) = server(Some(0));
    let mut raw = RawConnection::connect(address).await;
    // The type that opts out: its answer is not compressed, however large.
    raw.request(
        &PlainEcho {
            payload: compressible(5000),
        },
        1,
    )
    .await;
    let answer = raw.recv().await.unwrap();
    assert_eq!(answer.header.flags, Flags::RESPONSE);
    assert_eq!(
        PlainEcho::decode_body(&answer.body).unwrap().payload,
        compressible(5000)
    );
    // Noise does not shrink: sent as it is, even with a threshold of 0.
    raw.request(
        &Echo {
            payload: noise(5000),
        },
        2,
    )
    .await;
    let answer = raw.recv().await.unwrap();
    assert_eq!(answer.header.flags, Flags::RESPONSE);
    assert_eq!(
        Echo::decode_body(&answer.body).unwrap().payload,
        noise(5000)
    );
    // Nor do the few bytes of an acknowledgement or a small answer.
    raw.request(&Add { a: 1, b: 2 }, 3).await;
    assert_eq!(raw.recv().await.unwrap().header.flags, Flags::RESPONSE);
    // Pushes: the one that may be compressed is, the one that opts out is not.
    raw.request(&PushBlobs { len: 3000 }, 4).await;
    let mut seen = Vec::new();
    for _ in 0..3 {
        let frame = raw.recv().await.unwrap();
        seen.push((frame.header.opcode, frame.header.flags));
    }
    assert!(
        seen.contains(&(Blob::OPCODE, Flags::COMPRESSED)),
        "{seen:?}"
    );
    assert!(seen.contains(&(PlainBlob::OPCODE, Flags::NONE)), "{seen:?}");
    assert!(
        seen.contains(&(PushBlobs::OPCODE, Flags::RESPONSE)),
        "{seen:?}"
    );
}

#[tokio::test]
async fn a_server_without_compression_sends_nothing_compressed() {
    let (address, _, _server) = server(None);
    let mut raw = RawConnection::connect(address).await;
    raw.request(
        &Echo {
            payload: compressible(5000),
        },
        1,
    )
    .await;
    assert_eq!(raw.recv().await.unwrap().header.flags, Flags::RESPONSE);
}

/// Accepts one connection on a listener of its own and returns the first
/// frame the client sends, as it came.
async fn first_frame_from(config: ClientConfig, packet: Echo, opt_out: bool) -> Frame {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_SIZE);
        let mut buf = BytesMut::new();
        loop {
            if let Some(frame) = decoder.decode(&mut buf).unwrap() {
                // Answer it, so that the client's request returns.
                let mut out = BytesMut::new();
                let header = Header::new(
                    frame.header.opcode,
                    Flags::RESPONSE,
                    frame.header.request_id,
                );
                let body = frame
                    .clone()
                    .decompressed(DEFAULT_MAX_FRAME_SIZE)
                    .unwrap()
                    .body;
                frame::write_frame_with(
                    &mut out,
                    Framing::LengthPrefixed,
                    header,
                    usize::MAX,
                    |out| out.extend_from_slice(&body),
                )
                .unwrap();
                stream.write_all(&out).await.unwrap();
                return frame;
            }
            assert!(stream.read_buf(&mut buf).await.unwrap() > 0);
        }
    });
    let client = Client::connect_tcp_with(address, config).await.unwrap();
    if opt_out {
        let answer: PlainEcho = client
            .request_async(&PlainEcho {
                payload: packet.payload.clone(),
            })
            .await
            .unwrap();
        assert_eq!(answer.payload, packet.payload);
    } else {
        let answer: Echo = client.request_async(&packet).await.unwrap();
        assert_eq!(answer, packet);
    }
    server.await.unwrap()
}

#[tokio::test]
async fn the_rust_client_compresses_what_it_sends_by_its_threshold() {
    let mut on = ClientConfig::default();
    on.compression = Some(100);
    let big = Echo {
        payload: compressible(1000),
    };
    let frame = first_frame_from(on.clone(), big.clone(), false).await;
    assert_eq!(frame.header.flags, Flags::COMPRESSED);
    assert!(frame.body.len() < 200, "{}", frame.body.len());
    let (frame, _) = decompressed(frame);
    assert_eq!(Echo::decode_body(&frame.body).unwrap(), big);
    // Below the threshold, noise, the opt-out, and compression off: plain.
    let small = Echo {
        payload: compressible(50),
    };
    let frame = first_frame_from(on.clone(), small, false).await;
    assert_eq!(frame.header.flags, Flags::NONE);
    let frame = first_frame_from(
        on.clone(),
        Echo {
            payload: noise(1000),
        },
        false,
    )
    .await;
    assert_eq!(frame.header.flags, Flags::NONE);
    let frame = first_frame_from(on, big.clone(), true).await;
    assert_eq!(frame.header.flags, Flags::NONE);
    let frame = first_frame_from(ClientConfig::default(), big, false).await;
    assert_eq!(frame.header.flags, Flags::NONE);
}

/// `examples/echo_server --compress 64`: what an outside client checks,
/// over TCP plain and sealed: a compressed request answered compressed.
#[tokio::test]
async fn the_echo_server_compresses_with_its_flag() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let mut child = Command::new(echo_server_binary())
        .args(["--tcp", "127.0.0.1:0", "--compress", "64"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the echo server starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let address: std::net::SocketAddr = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|line| line.strip_prefix("tcp listening on ")?.parse().ok())
        .expect("the TCP address");
    std::thread::spawn(move || lines.for_each(drop));

    let payload = compressible(1000);
    let body = encoded(&Echo {
        payload: payload.clone(),
    });
    let mut raw = RawConnection::connect(address).await;
    raw.send_body(
        Header::new(Echo::OPCODE, Flags::COMPRESSED, 1),
        &compression::compress(&body),
    )
    .await;
    let (answer, was) = decompressed(raw.recv().await.unwrap());
    assert!(was, "answered compressed");
    assert_eq!(Echo::decode_body(&answer.body).unwrap().payload, payload);

    let mut connection = SealedConnection::secure(address).await;
    let channel = connection.channel.as_mut().unwrap();
    let out = sealed_compressed(channel, Header::new(Echo::OPCODE, Flags::NONE, 2), &body);
    connection.raw.send_raw(&out).await.unwrap();
    let answer = connection.recv().await.unwrap();
    assert!(answer.header.flags.is_encrypted());
    let (answer, was) = decompressed(answer);
    assert!(was, "answered compressed, then sealed");
    assert_eq!(Echo::decode_body(&answer.body).unwrap().payload, payload);
    let _ = child.kill();
    let _ = child.wait();
}

/// Resumption with compression on both sides, through a proxy that cuts
/// connections anywhere: compressed requests, replies and pushes, replayed
/// after each resumption (pushes as they were encoded, compressed), each
/// once and in order, plain over TCP and sealed over WebSocket.
#[tokio::test]
async fn compressed_sessions_resume_through_random_cuts() {
    use ternio_client::SessionEvent;

    let (tcp, ws, _server) = start_server_with_ws(|b| {
        b.controller(ZipController)
            .compression(Some(64))
            .resumable(Duration::from_secs(30), 64 * 1024)
    });
    for (target, secure, seed) in [(tcp, false, 0x5EEDu64), (ws, true, 0xC0DE)] {
        let proxy = CuttingProxy::start(target, seed, 2_000..6_000).await;
        let mut config = ClientConfig::default();
        config.reconnect = Some(quick_reconnect());
        config.request_timeout = Duration::from_secs(20);
        config.compression = Some(64);
        if secure {
            config.secure = Some(SecureConfig::anonymous());
        }
        let client = if secure {
            Client::connect_ws_with(&format!("ws://{}/ws", proxy.address()), config).await
        } else {
            Client::connect_tcp_with(proxy.address(), config).await
        }
        .unwrap();
        let mut blobs = client.subscribe::<Blob>();
        for seq in 1..=150u64 {
            let answer = client
                .request_async(&NextBlob {
                    padding: compressible(600),
                })
                .await
                .unwrap_or_else(|error| panic!("request {seq}: {error}"));
            assert_eq!(answer, numbered(seq), "each request runs once, in order");
        }
        for seq in 1..=150u64 {
            let blob = tokio::time::timeout(Duration::from_secs(10), blobs.next())
                .await
                .expect("the push within 10 s")
                .expect("a push");
            assert_eq!(blob, numbered(seq), "each push once, in order");
        }
        assert!(proxy.cuts() >= 3, "only {} cuts", proxy.cuts());
        match &*client.session_events().borrow() {
            SessionEvent::Resumed { count } => assert!(*count >= 3, "{count} resumptions"),
            other => panic!("the session was not resumed: {other:?}"),
        }
    }
}

/// A server that answers the client's first request with a compressed
/// `body` (as it comes: the test chooses it), then waits: the client's
/// error, and the `DISCONNECT` it sent before it closed.
async fn answers_with(body: Vec<u8>) -> (ternio_client::ClientError, Disconnect) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_SIZE);
        let mut buf = BytesMut::new();
        let request = loop {
            if let Some(frame) = decoder.decode(&mut buf).unwrap() {
                break frame;
            }
            assert!(stream.read_buf(&mut buf).await.unwrap() > 0);
        };
        let mut out = BytesMut::new();
        let header = Header::new(
            Echo::OPCODE,
            Flags::RESPONSE.with(Flags::COMPRESSED),
            request.header.request_id,
        );
        frame::write_frame_with(
            &mut out,
            Framing::LengthPrefixed,
            header,
            usize::MAX,
            |out| out.extend_from_slice(&body),
        )
        .unwrap();
        stream.write_all(&out).await.unwrap();
        // Keeps the connection open: the client must end it on its own,
        // with a DISCONNECT that says why.
        loop {
            if let Some(frame) = decoder.decode(&mut buf).unwrap()
                && frame.header.opcode == system::DISCONNECT
            {
                return Disconnect::decode_body(&frame.body).unwrap();
            }
            assert!(
                stream.read_buf(&mut buf).await.unwrap() > 0,
                "the client closed without a DISCONNECT"
            );
        }
    });
    let client = Client::connect_tcp(address).await.unwrap();
    let error = client
        .request_async(&Echo {
            payload: "x".into(),
        })
        .await
        .expect_err("no answer from a broken frame");
    let disconnect = tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("the client said why within 5 s")
        .unwrap();
    (error, disconnect)
}

#[tokio::test]
async fn the_rust_client_refuses_a_bomb_and_a_corrupt_block_from_the_server() {
    // 4 GiB announced: refused before allocating, the link lost.
    let mut bomb = u32::MAX.to_le_bytes().to_vec();
    bomb.extend_from_slice(&[0x1F, 0, 0, 0, 0, 0]);
    let (error, disconnect) = answers_with(bomb).await;
    assert!(
        matches!(&error, ternio_client::ClientError::Closed(ternio_client::CloseReason::Protocol(why)) if why.contains("maximum")),
        "{error:?}"
    );
    assert_eq!(disconnect.reason, DisconnectReason::FrameTooLarge);
    let mut corrupt = compression::compress(&encoded(&Echo {
        payload: compressible(300),
    }));
    corrupt.truncate(corrupt.len() - 2);
    let (error, disconnect) = answers_with(corrupt).await;
    assert!(
        matches!(&error, ternio_client::ClientError::Closed(ternio_client::CloseReason::Protocol(why)) if why.contains("LZ4")),
        "{error:?}"
    );
    assert_eq!(disconnect.reason, DisconnectReason::Malformed);
}
