//! The floor a sealed echo cannot go below: the four ChaCha20-Poly1305
//! operations of one echo (the client seals the request and the server
//! opens it, the server seals the answer and the client opens it), timed
//! in the harness with Ternio's own `Sealer` and `Opener` (the same AEAD
//! backend as the sessions), at the echo's payload size. Issue 27's sealed
//! budget holds the distance between the sealed and the plain echo to
//! 1.15 × this, measured in the same run.

use std::time::Instant;

use bytes::BytesMut;
use ternio_protocol::frame::{Flags, Framing, HEADER_LEN, Header};
use ternio_protocol::secure::{Opener, Sealer};

/// Frames sealed and opened per timing.
const FRAMES: usize = 2_000;
/// Timings; the fastest is kept (the least disturbed by other work).
const TIMINGS: usize = 5;

/// Microseconds of two seals and two opens of a frame carrying `size`
/// bytes of payload (an echo's body: the payload and its length prefix).
pub fn four_ops_us(size: usize) -> f64 {
    let key = [7u8; 32];
    let body = vec![0xA5u8; size + 2];
    let header = Header::new(0x0001, Flags::NONE, 1);
    let mut best_seal = f64::MAX;
    let mut best_open = f64::MAX;
    for _ in 0..TIMINGS {
        let mut sealer = Sealer::new(&key);
        let mut opener = Opener::new(&key);
        // Each frame its own buffer, allocated before the clock starts.
        let mut frames: Vec<BytesMut> = (0..FRAMES)
            .map(|_| BytesMut::with_capacity(body.len() + 64))
            .collect();
        let started = Instant::now();
        for out in &mut frames {
            sealer
                .write_frame_with(out, Framing::Message, header, usize::MAX, |out| {
                    out.extend_from_slice(&body)
                })
                .expect("a frame within its size");
        }
        let sealed = started.elapsed();
        let frames: Vec<(Header, BytesMut)> = frames
            .into_iter()
            .map(|mut frame| {
                let header = Header::parse(&frame).expect("a header");
                (header, frame.split_off(HEADER_LEN))
            })
            .collect();
        let started = Instant::now();
        for (header, mut body) in frames {
            opener.open(&header, &mut body).expect("it opens");
            std::hint::black_box(&body);
        }
        let opened = started.elapsed();
        best_seal = best_seal.min(sealed.as_secs_f64() / FRAMES as f64);
        best_open = best_open.min(opened.as_secs_f64() / FRAMES as f64);
    }
    2.0 * (best_seal + best_open) * 1e6
}
