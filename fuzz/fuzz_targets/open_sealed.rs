//! Opening arbitrary sealed frames: never a panic, never a forgery; and a
//! frame sealed by the matching key always opens to its plain body.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use ternio_protocol::frame::{Flags, Framing, Header};
use ternio_protocol::secure::{Opener, Sealer};

const KEY: [u8; 32] = [9; 32];

fuzz_target!(|input: (u16, u32, &[u8])| {
    let (opcode, request_id, data) = input;
    let header = Header::new(opcode, Flags::ENCRYPTED, request_id);
    // Arbitrary bytes as a sealed body: without the key they cannot open.
    let mut forged = BytesMut::from(data);
    assert!(Opener::new(&KEY).open(&header, &mut forged).is_err());

    // The same bytes as a plain body, sealed then opened.
    let mut sealer = Sealer::new(&KEY);
    let mut out = BytesMut::new();
    sealer
        .write_frame_with(
            &mut out,
            Framing::Message,
            Header::new(opcode, Flags::NONE, request_id),
            usize::MAX,
            |out| out.extend_from_slice(data),
        )
        .unwrap();
    let sent = Header::parse(&out).unwrap();
    let mut body = out.split_off(7);
    Opener::new(&KEY).open(&sent, &mut body).unwrap();
    assert_eq!(&body[..], data);
});
