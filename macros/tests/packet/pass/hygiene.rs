//! Fields and variants named like the generated code's locals, raw
//! identifiers, and types reached through `ternio_protocol` renamed.
#![deny(warnings)]

use ternio_macros::{Codec, Packet};
use ternio_protocol::{BytesMut, Decode, Encode, Packet as _};

#[derive(Packet, Debug, PartialEq)]
#[packet(opcode = 0x0001)]
struct r#Type {
    out: u8,
    reader: u8,
    index: u8,
    r#type: u8,
    field0: u8,
}

#[derive(Codec, Debug, PartialEq)]
enum Locals {
    Out { out: u8, reader: u8 },
    Index(u8),
}

fn main() {
    assert_eq!(r#Type::NAME, "Type");
    let value = r#Type {
        out: 1,
        reader: 2,
        index: 3,
        r#type: 4,
        field0: 5,
    };
    let mut out = BytesMut::new();
    value.encode(&mut out);
    assert_eq!(&out[..], [1, 2, 3, 4, 5]);
    assert_eq!(r#Type::decode_body(&out.freeze()), Ok(value));

    for value in [Locals::Out { out: 1, reader: 2 }, Locals::Index(3)] {
        let mut out = BytesMut::new();
        value.encode(&mut out);
        assert_eq!(Locals::decode_body(&out.freeze()), Ok(value));
    }
}
