//! The frame decoder fed arbitrary bytes in arbitrary chunks: it never
//! panics, never yields a frame above its limit, and yields the same frames
//! whatever the chunking.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use ternio_protocol::frame::{Frame, FrameDecoder, HEADER_LEN};

const MAX: usize = 4096;

/// Every frame the stream holds, fed `chunk` bytes at a time, and whether it ended on an error.
fn decode(data: &[u8], chunk: usize) -> (Vec<Frame>, bool) {
    let mut decoder = FrameDecoder::new(MAX);
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    for piece in data.chunks(chunk.max(1)) {
        buf.extend_from_slice(piece);
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) => {
                    assert!(frame.body.len() + HEADER_LEN <= MAX);
                    frames.push(frame);
                }
                Ok(None) => break,
                Err(_) => return (frames, true),
            }
        }
    }
    (frames, false)
}

fuzz_target!(|input: (u8, &[u8])| {
    let (chunk, data) = input;
    let whole = decode(data, data.len());
    let chunked = decode(data, usize::from(chunk));
    assert_eq!(whole, chunked);
});
