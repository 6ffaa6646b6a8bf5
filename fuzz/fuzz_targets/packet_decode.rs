//! Decoding the example packets from arbitrary bodies: never a panic, and
//! whatever decodes encodes to bytes that decode to the same value.
#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use ternio_examples::{chat, echo};
use ternio_macros::{Codec, Packet};
use ternio_protocol::{Decode, Encode};

#[derive(Debug, PartialEq, Codec)]
enum Shape {
    Dot,
    Circle(f32),
    Rect { w: u16, h: u16 },
}

/// Every field type of the contract in one packet.
#[derive(Debug, PartialEq, Packet)]
#[packet(opcode = 0x0F00)]
struct Everything {
    a: u8,
    b: i64,
    c: bool,
    d: String,
    e: Bytes,
    f: Vec<u32>,
    g: Option<Vec<String>>,
    h: [i16; 3],
    i: Vec<Shape>,
    j: f64,
}

fn check<T: Decode + Encode + std::fmt::Debug + PartialEq>(data: &Bytes) {
    if let Ok(value) = T::decode_body(data) {
        let mut out = BytesMut::new();
        value.encode(&mut out);
        assert_eq!(out.len(), value.encoded_len());
        let again = T::decode_body(&out.freeze()).expect("an encoding decodes");
        // NaN is not equal to itself: compare encodings then.
        if value == value {
            assert_eq!(again, value);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let data = Bytes::copy_from_slice(data);
    check::<echo::Echo>(&data);
    check::<echo::SecureEcho>(&data);
    check::<chat::SetNick>(&data);
    check::<chat::RoomInfo>(&data);
    check::<chat::Say>(&data);
    check::<chat::ChatMessage>(&data);
    check::<Everything>(&data);
});
