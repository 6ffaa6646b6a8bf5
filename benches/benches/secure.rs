//! Secure sessions: sealing and opening frames at several sizes, and whole
//! NN and NK handshakes (both sides, in one thread).
//!
//! `cargo bench -p ternio-bench --bench secure`

use bytes::BytesMut;
use divan::{Bencher, black_box};
use ternio_protocol::frame::{Flags, Framing, Header};
use ternio_protocol::secure::{Initiator, Opener, Responder, Sealer, StaticKeypair};

fn main() {
    divan::main();
}

const SIZES: [usize; 4] = [32, 1024, 8 * 1024, 64 * 1024];
const KEY: [u8; 32] = [7; 32];

/// Seals a frame with a `size`-byte body into a reused buffer.
#[divan::bench(args = SIZES)]
fn seal(bencher: Bencher, size: usize) {
    let plain = vec![0xA5u8; size];
    let mut sealer = Sealer::new(&KEY);
    let mut out = BytesMut::with_capacity(size + 64);
    let header = Header::new(0x0001, Flags::NONE, 1);
    bencher
        .counter(divan::counter::BytesCount::new(size))
        .bench_local(|| {
            out.clear();
            sealer
                .write_frame_with(
                    &mut out,
                    Framing::LengthPrefixed,
                    header,
                    usize::MAX,
                    |out| out.extend_from_slice(&plain),
                )
                .unwrap();
            black_box(&out);
        });
}

/// Opens frames sealed beforehand, each with its own (increasing) counter.
#[divan::bench(args = SIZES)]
fn open(bencher: Bencher, size: usize) {
    let plain = vec![0xA5u8; size];
    let header = Header::new(0x0001, Flags::NONE, 1);
    let mut sealer = Sealer::new(&KEY);
    let mut opener = Opener::new(&KEY);
    bencher
        .counter(divan::counter::BytesCount::new(size))
        .with_inputs(|| {
            let mut out = BytesMut::new();
            sealer
                .write_frame_with(&mut out, Framing::Message, header, usize::MAX, |out| {
                    out.extend_from_slice(&plain)
                })
                .unwrap();
            let header = Header::parse(&out).unwrap();
            (header, out.split_off(7))
        })
        .bench_local_values(|(header, mut body)| {
            opener.open(&header, &mut body).unwrap();
            body
        });
}

/// A whole NN handshake: both messages, both sides, keys derived.
#[divan::bench]
fn handshake_nn() {
    let mut initiator = Initiator::new(None).unwrap();
    let request = initiator.request_body().unwrap();
    let (reply, server) = Responder::respond(&request, None).unwrap();
    black_box((initiator.finish(&reply).unwrap(), server));
}

/// A whole NK handshake against a fixed server identity.
#[divan::bench]
fn handshake_nk(bencher: Bencher) {
    let identity = StaticKeypair::generate();
    bencher.bench_local(|| {
        let mut initiator = Initiator::new(Some(identity.public())).unwrap();
        let request = initiator.request_body().unwrap();
        let (reply, server) = Responder::respond(&request, Some(&identity)).unwrap();
        black_box((initiator.finish(&reply).unwrap(), server));
    });
}
