#![deny(warnings)]

use ternio_macros::Packet;
use ternio_protocol::{BytesMut, Decode, Encode, Packet as _};

#[derive(Packet, Debug, PartialEq)]
#[packet(opcode = 7)]
struct Move(i32, f64, u8);

fn main() {
    assert_eq!((Move::OPCODE, Move::NAME), (7, "Move"));
    assert_eq!(<Move as Decode>::MIN_LEN, 13);

    let value = Move(-2, 0.5, 9);
    let mut out = BytesMut::new();
    value.encode(&mut out);
    assert_eq!(out.len(), value.encoded_len());
    assert_eq!(&out[..4], (-2i32).to_le_bytes());
    assert_eq!(&out[4..12], 0.5f64.to_le_bytes());
    assert_eq!(out[12], 9);
    assert_eq!(Move::decode_body(&out.freeze()), Ok(value));
}
