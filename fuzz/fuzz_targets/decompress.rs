//! Compressed bodies (contract section 6): arbitrary bytes as a compressed
//! body never panic, never decode to more than the limit, and decode to
//! exactly the announced length or fail; arbitrary bytes compressed (as a
//! sender does, when they shrink) decompress to themselves, and a frame so
//! written decompresses to its body.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use ternio_protocol::compression::{DecompressError, compress, compress_tail, decompress};
use ternio_protocol::frame::{self, Flags, Frame, Framing, Header};

const MAX: usize = 1 << 16;

fuzz_target!(|input: (u8, &[u8])| {
    let (threshold, data) = input;
    // As received: an attacker's body.
    match decompress(data, MAX) {
        Ok(body) => {
            let announced = u32::from_le_bytes(data[..4].try_into().unwrap()) as usize;
            assert_eq!(body.len(), announced);
            assert!(body.len() <= MAX);
        }
        Err(DecompressError::TooLarge { len, max }) => assert!(len > max),
        Err(_) => {}
    }

    // As sent: compressed, then back.
    let packed = compress(data);
    assert_eq!(&decompress(&packed, data.len()).unwrap()[..], data);
    let mut out = BytesMut::from(&b"keep"[..]);
    out.extend_from_slice(data);
    if compress_tail(&mut out, 4, usize::from(threshold)) {
        assert!(out.len() - 4 < data.len());
        assert_eq!(&decompress(&out[4..], data.len()).unwrap()[..], data);
    } else {
        assert_eq!(&out[4..], data);
    }
    assert_eq!(&out[..4], b"keep");

    let mut message = BytesMut::new();
    frame::write_frame_compressing(
        &mut message,
        Framing::Message,
        Header::new(1, Flags::NONE, 2),
        usize::MAX,
        Some(usize::from(threshold)),
        |out| out.extend_from_slice(data),
    )
    .unwrap();
    let received = Frame::parse(message.freeze(), usize::MAX).unwrap();
    let opened = received.decompressed(frame::HEADER_LEN + data.len()).unwrap();
    assert_eq!(opened.header, Header::new(1, Flags::NONE, 2));
    assert_eq!(&opened.body[..], data);
});
