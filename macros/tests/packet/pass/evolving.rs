#![deny(warnings)]

//! An evolving packet (docs/PROTOCOL.md, "Evolving packets"): an older
//! body (without the optional fields) decodes with their defaults, and a
//! newer body (with fields this version does not know) decodes with them
//! ignored. A packet that is not evolving still refuses trailing bytes.

use ternio_macros::Packet;
use ternio_protocol::{Bytes, BytesMut, Decode, DecodeError, Encode, Packet as _};

/// Version 1.
#[derive(Packet, Debug, PartialEq)]
#[packet(opcode = 0x0020, evolving)]
struct ScoreV1 {
    points: u32,
}

/// Version 2: the same opcode, two optional fields at the end.
#[derive(Packet, Debug, PartialEq)]
#[packet(opcode = 0x0020, evolving)]
struct ScoreV2 {
    points: u32,
    #[packet(optional)]
    bonus: u16,
    #[packet(optional)]
    note: Option<String>,
}

/// A tuple struct, evolving too.
#[derive(Packet, Debug, PartialEq)]
#[packet(opcode = 0x0021, evolving)]
struct Pair(u8, #[packet(optional)] Vec<u8>);

/// Not evolving.
#[derive(Packet, Debug, PartialEq)]
#[packet(opcode = 0x0022)]
struct Fixed {
    points: u32,
}

fn body(value: &impl Encode) -> Bytes {
    let mut out = BytesMut::new();
    value.encode(&mut out);
    out.freeze()
}

fn main() {
    assert!(ScoreV1::EVOLVING && ScoreV2::EVOLVING && !Fixed::EVOLVING);
    // The optional fields count in the least size (it bounds list counts).
    assert_eq!(<ScoreV2 as Decode>::MIN_LEN, 4 + 2 + 1);

    // Old body, new type: defaults.
    let old = body(&ScoreV1 { points: 7 });
    assert_eq!(
        ScoreV2::decode_packet(&old),
        Ok(ScoreV2 { points: 7, bonus: 0, note: None })
    );
    // New body, old type: the new fields are ignored.
    let new = body(&ScoreV2 { points: 7, bonus: 3, note: Some("x".into()) });
    assert_eq!(new.len(), 4 + 2 + 1 + 2);
    assert_eq!(ScoreV1::decode_packet(&new), Ok(ScoreV1 { points: 7 }));
    assert_eq!(
        ScoreV2::decode_packet(&new),
        Ok(ScoreV2 { points: 7, bonus: 3, note: Some("x".into()) })
    );
    // A body that ends within an optional field is malformed.
    assert!(matches!(
        ScoreV2::decode_packet(&new.slice(..5)),
        Err(DecodeError::UnexpectedEnd { .. })
    ));
    // The required fields stay required.
    assert!(ScoreV1::decode_packet(&Bytes::from_static(&[1, 2])).is_err());
    assert_eq!(Pair::decode_packet(&Bytes::from_static(&[5])), Ok(Pair(5, Vec::new())));
    assert_eq!(Pair::decode_packet(&Bytes::from_static(&[5, 1, 9, 0xFF])), Ok(Pair(5, vec![9])));

    // Not evolving: trailing bytes are refused, as before.
    let fixed = body(&ScoreV2 { points: 7, bonus: 3, note: None });
    assert_eq!(Fixed::decode_packet(&fixed), Err(DecodeError::TrailingBytes(3)));
    assert_eq!(Fixed::decode_packet(&old), Ok(Fixed { points: 7 }));
}
