#![deny(warnings)]

use ternio_macros::{Codec, Packet};
use ternio_protocol::{Bytes, BytesMut, Decode, DecodeError, Encode, Packet as _};

#[derive(Packet, Debug, Clone, PartialEq)]
#[packet(opcode = 0x0040)]
enum Command {
    Stop,
    Say(String),
    Move { x: i16, y: i16 },
    Nested(Point, Option<Point>),
}

/// A nested type with no opcode.
#[derive(Codec, Debug, Clone, Copy, PartialEq)]
struct Point {
    x: u8,
    y: u8,
}

fn round_trip(value: Command, expected: &[u8]) {
    let mut out = BytesMut::new();
    value.encode(&mut out);
    assert_eq!(&out[..], expected);
    assert_eq!(out.len(), value.encoded_len());
    assert_eq!(Command::decode_body(&out.freeze()), Ok(value));
}

fn main() {
    assert_eq!((Command::OPCODE, Command::NAME), (0x0040, "Command"));
    assert_eq!(<Command as Decode>::MIN_LEN, 1);
    assert_eq!(<Point as Decode>::MIN_LEN, 2);

    round_trip(Command::Stop, &[0]);
    round_trip(Command::Say("hi".to_owned()), &[1, 2, b'h', b'i']);
    round_trip(Command::Move { x: -1, y: 2 }, &[2, 0xFF, 0xFF, 2, 0]);
    round_trip(
        Command::Nested(Point { x: 1, y: 2 }, Some(Point { x: 3, y: 4 })),
        &[3, 1, 2, 1, 3, 4],
    );

    assert_eq!(
        Command::decode_body(&Bytes::from_static(&[4])),
        Err(DecodeError::InvalidVariant {
            index: 4,
            type_name: "Command"
        })
    );
    assert_eq!(
        Command::decode_body(&Bytes::from_static(&[2, 0])),
        Err(DecodeError::UnexpectedEnd { needed: 1 })
    );
}
