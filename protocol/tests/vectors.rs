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
