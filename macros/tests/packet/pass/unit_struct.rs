#![deny(warnings)]

use ternio_macros::Packet;
use ternio_protocol::{Bytes, BytesMut, Decode, DecodeError, Encode, Packet as _};

#[derive(Packet, Debug, PartialEq)]
#[packet(opcode = 0xFEFF)]
struct Leave;

#[derive(Packet, Debug, PartialEq)]
#[packet(opcode = 0x0000u16)]
struct Empty {}

#[derive(Packet, Debug, PartialEq)]
#[packet(opcode = 1)]
struct EmptyTuple();

fn main() {
    assert_eq!((Leave::OPCODE, Leave::NAME), (0xFEFF, "Leave"));
    assert_eq!(<Leave as Decode>::MIN_LEN, 0);
    assert_eq!(<Empty as Decode>::MIN_LEN, 0);

    let mut out = BytesMut::new();
    Leave.encode(&mut out);
    Empty {}.encode(&mut out);
    EmptyTuple().encode(&mut out);
    assert!(out.is_empty());
    assert_eq!(Leave.encoded_len(), 0);
    assert_eq!(Leave::decode_body(&Bytes::new()), Ok(Leave));
    assert_eq!(Empty::decode_body(&Bytes::new()), Ok(Empty {}));
    assert_eq!(EmptyTuple::decode_body(&Bytes::new()), Ok(EmptyTuple()));
    assert_eq!(
        Leave::decode_body(&Bytes::from_static(&[0])),
        Err(DecodeError::TrailingBytes(1))
    );
}
