//! The test vectors of docs/PROTOCOL.md, checked against the code: each
//! named block there must equal what the code encodes, and decode back.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use ternio_macros::{Codec, Packet};
use ternio_protocol::codec::put_varint;
use ternio_protocol::frame::{self, Flags, FrameDecoder, Framing, Header};
use ternio_protocol::system::{self, Disconnect, ErrorBody, Ping, Pong};
use ternio_protocol::{Decode, DisconnectReason, Encode, ErrorCode};

const DOC: &str = include_str!("../../docs/PROTOCOL.md");

#[derive(Debug, Clone, PartialEq, Packet)]
#[packet(opcode = 0x0001)]
struct Echo {
    payload: Bytes,
}

#[derive(Debug, Clone, PartialEq, Codec)]
enum Kind {
    Stop,
    Move { x: i16, y: i16 },
}

#[derive(Debug, Clone, PartialEq, Packet)]
#[packet(opcode = 0x0123)]
struct Sample {
    a: u8,
    b: i16,
    c: u32,
    d: f32,
    e: bool,
    s: String,
    v: Vec<u16>,
    o: Option<i8>,
    n: Option<u64>,
    arr: [u8; 3],
    k: Kind,
}

/// The named hex blocks of the document.
fn documented() -> BTreeMap<String, Vec<u8>> {
    let mut vectors = BTreeMap::new();
    let mut lines = DOC.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line.strip_prefix("vector: ") else {
            continue;
        };
        let mut bytes = Vec::new();
        for line in lines.by_ref().take_while(|line| !line.starts_with("```")) {
            for byte in line.split_whitespace() {
                bytes.push(
                    u8::from_str_radix(byte, 16)
                        .unwrap_or_else(|_| panic!("{name}: bad hex {byte}")),
                );
            }
        }
        assert!(
            vectors.insert(name.to_owned(), bytes).is_none(),
            "vector {name} twice"
        );
    }
    vectors
}

fn tcp<E: Encode + ?Sized>(header: Header, body: &E) -> Vec<u8> {
    let mut out = BytesMut::new();
    frame::write_frame(&mut out, Framing::LengthPrefixed, header, body, usize::MAX).unwrap();
    out.to_vec()
}

fn sample() -> Sample {
    Sample {
        a: 0xFF,
        b: -2,
        c: 300,
        d: 1.5,
        e: true,
        s: "hé".into(),
        v: vec![1, 2],
        o: Some(-1),
        n: None,
        arr: [9, 8, 7],
        k: Kind::Move { x: 3, y: -4 },
    }
}

/// The same vectors, built by the code.
fn encoded() -> BTreeMap<String, Vec<u8>> {
    let echo = Echo {
        payload: Bytes::from_static(b"ping"),
    };
    let mut vectors = BTreeMap::new();
    vectors.insert(
        "echo-request".into(),
        tcp(Header::new(0x0001, Flags::NONE, 1), &echo),
    );
    vectors.insert(
        "echo-response".into(),
        tcp(Header::new(0x0001, Flags::RESPONSE, 1), &echo),
    );
    let mut message = BytesMut::new();
    frame::write_frame(
        &mut message,
        Framing::Message,
        Header::new(0x0001, Flags::NONE, 1),
        &echo,
        usize::MAX,
    )
    .unwrap();
    vectors.insert("echo-request-message".into(), message.to_vec());
    vectors.insert(
        "ack".into(),
        tcp(Header::new(0x0040, Flags::RESPONSE, 5), &()),
    );
    let mut error = BytesMut::new();
    let header = Header::new(0x0099, Flags::RESPONSE_ERROR, 2);
    frame::write_frame_with(
        &mut error,
        Framing::LengthPrefixed,
        header,
        usize::MAX,
        |out| ErrorBody::write(out, ErrorCode::UnknownOpcode.to_u16(), &"no handler"),
    )
    .unwrap();
    vectors.insert("error-unknown-opcode".into(), error.to_vec());
    let value = 0x0102_0304_0506_0708;
    vectors.insert(
        "ping".into(),
        tcp(Header::new(system::PING, Flags::NONE, 3), &Ping { value }),
    );
    vectors.insert(
        "pong".into(),
        tcp(
            Header::new(system::PONG, Flags::RESPONSE, 3),
            &Pong { value },
        ),
    );
    let disconnect = Disconnect::new(DisconnectReason::FrameTooLarge, "too big");
    vectors.insert(
        "disconnect".into(),
        tcp(Header::new(system::DISCONNECT, Flags::NONE, 0), &disconnect),
    );
    let mut varints = BytesMut::new();
    for value in [0, 127, 128, 300, 16_384, u32::MAX] {
        put_varint(&mut varints, value);
    }
    vectors.insert("varints".into(), varints.to_vec());
    vectors.insert(
        "sample-push".into(),
        tcp(Header::new(0x0123, Flags::NONE, 0), &sample()),
    );
    secure_vectors::vectors(&mut vectors);
    vectors
}

#[test]
fn every_documented_vector_matches_the_code() {
    let documented = documented();
    let encoded = encoded();
    assert_eq!(
        documented.keys().collect::<Vec<_>>(),
        encoded.keys().collect::<Vec<_>>(),
        "the document and the test name the same vectors"
    );
    for (name, bytes) in &encoded {
        assert_eq!(&documented[name], bytes, "vector {name}");
    }
}

#[test]
fn documented_frames_decode_back() {
    let documented = documented();
    let mut decoder = FrameDecoder::default();

    let mut buf = BytesMut::from(&documented["sample-push"][..]);
    let frame = decoder.decode(&mut buf).unwrap().unwrap();
    assert_eq!(frame.header, Header::new(0x0123, Flags::NONE, 0));
    assert_eq!(Sample::decode_body(&frame.body).unwrap(), sample());

    let mut buf = BytesMut::from(&documented["error-unknown-opcode"][..]);
    let frame = decoder.decode(&mut buf).unwrap().unwrap();
    let error = ErrorBody::parse(&frame.body).unwrap();
    assert_eq!(
        (error.code, error.message.as_str()),
        (ErrorCode::UnknownOpcode, "no handler")
    );

    let mut buf = BytesMut::from(&documented["disconnect"][..]);
    let frame = decoder.decode(&mut buf).unwrap().unwrap();
    assert_eq!(
        Disconnect::decode_body(&frame.body).unwrap(),
        Disconnect::new(DisconnectReason::FrameTooLarge, "too big")
    );
}

mod secure_vectors {
    use super::*;
    use ternio_protocol::secure::{Initiator, KEY_LEN, PROLOGUE, Responder, Sealer, StaticKeypair};

    fn sequence(start: u8) -> [u8; KEY_LEN] {
        std::array::from_fn(|i| start + i as u8)
    }

    /// Fixed keys: the server's static key 00..1f, the client's ephemeral
    /// 20..3f, the server's ephemeral 40..5f.
    pub(super) fn server_static() -> StaticKeypair {
        StaticKeypair::from_private(sequence(0x00))
    }

    /// The handshake of `pattern` with the fixed keys, run by snow directly:
    /// (request body, response body, client-to-server key, server-to-client key).
    fn reference_handshake(nk: bool) -> (Vec<u8>, Vec<u8>, [u8; 32], [u8; 32]) {
        let name = if nk {
            "Noise_NK_25519_ChaChaPoly_BLAKE2s"
        } else {
            "Noise_NN_25519_ChaChaPoly_BLAKE2s"
        };
        let server = server_static();
        let (client_e, server_e) = (sequence(0x20), sequence(0x40));
        let mut builder = snow::Builder::new(name.parse().unwrap())
            .prologue(PROLOGUE)
            .unwrap();
        if nk {
            builder = builder.remote_public_key(server.public()).unwrap();
        }
        let mut client = builder
            .fixed_ephemeral_key_for_testing_only(&client_e)
            .build_initiator()
            .unwrap();
        let mut builder = snow::Builder::new(name.parse().unwrap())
            .prologue(PROLOGUE)
            .unwrap();
        if nk {
            builder = builder.local_private_key(server.private()).unwrap();
        }
        let mut responder = builder
            .fixed_ephemeral_key_for_testing_only(&server_e)
            .build_responder()
            .unwrap();
        let mut first = vec![0u8; 128];
        let len = client.write_message(&[], &mut first).unwrap();
        first.truncate(len);
        responder.read_message(&first, &mut [0u8; 128]).unwrap();
        let mut second = vec![0u8; 128];
        let len = responder.write_message(&[], &mut second).unwrap();
        second.truncate(len);
        client.read_message(&second, &mut [0u8; 128]).unwrap();
        let (c2s, s2c) = client.dangerously_get_raw_split();
        let mut request = vec![if nk { 2 } else { 1 }];
        request.extend_from_slice(&first);
        (request, second, c2s, s2c)
    }

    pub(super) fn vectors(vectors: &mut BTreeMap<String, Vec<u8>>) {
        let server = server_static();
        vectors.insert("server-static-public".into(), server.public().to_vec());
        for (nk, prefix) in [(false, "nn"), (true, "nk")] {
            let (request, response, c2s, s2c) = reference_handshake(nk);
            // Ternio's own handshake must produce the same bytes.
            let pin = nk.then(|| *server.public());
            let mut initiator = Initiator::with_ephemeral(pin.as_ref(), &sequence(0x20)).unwrap();
            assert_eq!(
                initiator.request_body().unwrap(),
                request,
                "{prefix} request"
            );
            let (reply, mut server_channel) =
                Responder::respond_with(&request, Some(&server), Some(&sequence(0x40))).unwrap();
            assert_eq!(reply, response, "{prefix} response");
            let mut client_channel = initiator.finish(&reply).unwrap();
            vectors.insert(format!("{prefix}-handshake-request-body"), request);
            vectors.insert(format!("{prefix}-handshake-response-body"), response);
            vectors.insert(format!("{prefix}-client-to-server-key"), c2s.to_vec());
            vectors.insert(format!("{prefix}-server-to-client-key"), s2c.to_vec());
            if !nk {
                continue;
            }
            // The first sealed request and its sealed response, as TCP frames.
            let echo = Echo {
                payload: Bytes::from_static(b"ping"),
            };
            let mut request_frame = BytesMut::new();
            client_channel
                .sealer
                .write_frame_with(
                    &mut request_frame,
                    Framing::LengthPrefixed,
                    Header::new(0x0001, Flags::NONE, 1),
                    usize::MAX,
                    |out| echo.encode(out),
                )
                .unwrap();
            let mut response_frame = BytesMut::new();
            server_channel
                .sealer
                .write_frame_with(
                    &mut response_frame,
                    Framing::LengthPrefixed,
                    Header::new(0x0001, Flags::RESPONSE, 1),
                    usize::MAX,
                    |out| echo.encode(out),
                )
                .unwrap();
            // A sealer built from the documented key seals the same bytes.
            let mut again = BytesMut::new();
            Sealer::new(&c2s)
                .write_frame_with(
                    &mut again,
                    Framing::LengthPrefixed,
                    Header::new(0x0001, Flags::NONE, 1),
                    usize::MAX,
                    |out| echo.encode(out),
                )
                .unwrap();
            assert_eq!(again, request_frame);
            vectors.insert("nk-sealed-echo-request".into(), request_frame.to_vec());
            vectors.insert("nk-sealed-echo-response".into(), response_frame.to_vec());
        }
    }
}
