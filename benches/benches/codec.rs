//! The wire format: frame encoding and decoding, and packet field codecs.
//!
//! `cargo bench -p ternio-bench --bench codec`

use bytes::{Bytes, BytesMut};
use divan::{Bencher, black_box};
use ternio_macros::Packet;
use ternio_protocol::frame::{self, Flags, FrameDecoder, Framing, Header};
use ternio_protocol::{Decode, Encode};

fn main() {
    divan::main();
}

#[derive(Packet)]
#[packet(opcode = 0x0001)]
struct Echo {
    payload: Bytes,
}

#[derive(Packet)]
#[packet(opcode = 0x0002)]
struct PlayerState {
    id: u32,
    name: String,
    position: [f32; 3],
    velocity: [f32; 3],
    health: u16,
    flags: u8,
    inventory: Vec<u16>,
    guild: Option<String>,
}

fn player() -> PlayerState {
    PlayerState {
        id: 42,
        name: "ternio".into(),
        position: [1.0, 2.0, 3.0],
        velocity: [0.5, 0.0, -0.5],
        health: 100,
        flags: 3,
        inventory: (0..16).collect(),
        guild: Some("builders".into()),
    }
}

/// Encodes an echo frame (length prefix, header, body) into a reused buffer.
#[divan::bench(args = [32, 1024])]
fn encode_echo_frame(bencher: Bencher, size: usize) {
    let echo = Echo {
        payload: Bytes::from(vec![1u8; size]),
    };
    let mut out = BytesMut::with_capacity(size + 64);
    bencher.bench_local(|| {
        out.clear();
        frame::write_frame(
            &mut out,
            Framing::LengthPrefixed,
            Header::new(1, Flags::NONE, 1),
            &echo,
            usize::MAX,
        )
        .unwrap();
        black_box(&out);
    });
}

/// Splits 64 frames off a stream and decodes each echo (a view, no copy).
#[divan::bench(args = [32, 1024])]
fn decode_echo_frames(bencher: Bencher, size: usize) {
    let echo = Echo {
        payload: Bytes::from(vec![1u8; size]),
    };
    let mut stream = BytesMut::new();
    for id in 1..=64 {
        frame::write_frame(
            &mut stream,
            Framing::LengthPrefixed,
            Header::new(1, Flags::NONE, id),
            &echo,
            usize::MAX,
        )
        .unwrap();
    }
    let stream = stream.freeze();
    let mut decoder = FrameDecoder::default();
    bencher
        .counter(divan::counter::ItemsCount::new(64usize))
        .with_inputs(|| BytesMut::from(&stream[..]))
        .bench_local_values(|mut buf| {
            while let Some(frame) = decoder.decode(&mut buf).unwrap() {
                black_box(Echo::decode_body(&frame.body).unwrap());
            }
        });
}

/// Encodes a game-state packet with strings, arrays, a vector and an option.
#[divan::bench]
fn encode_player_state(bencher: Bencher) {
    let state = player();
    let mut out = BytesMut::with_capacity(256);
    bencher.bench_local(|| {
        out.clear();
        state.encode(&mut out);
        black_box(&out);
    });
}

/// Decodes the same packet.
#[divan::bench]
fn decode_player_state(bencher: Bencher) {
    let mut out = BytesMut::new();
    player().encode(&mut out);
    let body = out.freeze();
    bencher.bench_local(|| black_box(PlayerState::decode_body(&body).unwrap()));
}

/// `size` bytes of text that compress (a sentence, repeated).
fn text(size: usize) -> Vec<u8> {
    b"the quick brown fox jumps over the lazy dog. "
        .iter()
        .copied()
        .cycle()
        .take(size)
        .collect()
}

/// Writes an echo frame compressed in place (contract section 6), with a
/// threshold of 0: what a sender with compression on pays per frame.
#[divan::bench(args = [1024, 16 * 1024])]
fn encode_compressed_echo_frame(bencher: Bencher, size: usize) {
    let echo = Echo {
        payload: Bytes::from(text(size)),
    };
    let mut out = BytesMut::with_capacity(2 * size + 64);
    bencher.bench_local(|| {
        out.clear();
        frame::write_frame_compressing(
            &mut out,
            Framing::LengthPrefixed,
            Header::new(1, Flags::NONE, 1),
            usize::MAX,
            Some(0),
            |out| black_box(&echo).encode(out),
        )
        .unwrap();
        black_box(out.len())
    });
}

/// Decompresses the body of a compressed echo frame: what a receiver pays.
#[divan::bench(args = [1024, 16 * 1024])]
fn decompress_echo_body(bencher: Bencher, size: usize) {
    let mut body = BytesMut::new();
    Echo {
        payload: Bytes::from(text(size)),
    }
    .encode(&mut body);
    let compressed = ternio_protocol::compression::compress(&body);
    bencher.bench_local(|| {
        ternio_protocol::compression::decompress(black_box(&compressed), usize::MAX).unwrap()
    });
}
