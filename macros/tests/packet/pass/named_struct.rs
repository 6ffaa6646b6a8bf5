#![deny(warnings)]

use ternio_macros::Packet;
use ternio_protocol::{Bytes, BytesMut, Decode, Encode, Packet as _};

#[derive(Packet, Debug, Clone, PartialEq)]
#[packet(opcode = 0x0102)]
struct Join {
    room: String,
    seat: Option<u16>,
    tags: Vec<u8>,
    avatar: Bytes,
    flags: [bool; 2],
}

fn main() {
    assert_eq!(Join::OPCODE, 0x0102);
    assert_eq!(Join::NAME, "Join");
    // 1 (String) + 1 (Option) + 1 (Vec) + 1 (Bytes) + 2 (two bools).
    assert_eq!(<Join as Decode>::MIN_LEN, 6);

    let join = Join {
        room: "hé".to_owned(),
        seat: Some(0x0304),
        tags: vec![7, 8],
        avatar: Bytes::from_static(b"png"),
        flags: [true, false],
    };
    let mut out = BytesMut::new();
    join.encode(&mut out);
    assert_eq!(out.len(), join.encoded_len());
    assert_eq!(
        &out[..],
        [
            3, b'h', 0xC3, 0xA9, 1, 0x04, 0x03, 2, 7, 8, 3, b'p', b'n', b'g', 1, 0
        ]
    );
    assert_eq!(Join::decode_body(&out.freeze()), Ok(join));
}
