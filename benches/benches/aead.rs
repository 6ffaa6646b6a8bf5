//! ChaCha20-Poly1305 at frame sizes: Ternio's sealer (through
//! `ternio_protocol::secure`, a whole frame with header and counter, on the
//! backend this build uses: AWS-LC, since `ternio` enables `aead-aws-lc`)
//! beside the bare AEAD of `ring` (a yardstick) and of RustCrypto's
//! `chacha20poly1305` (what the `aead-rustcrypto` backend calls), for the
//! per-frame cost of secure sessions on either backend.
//!
//! `cargo bench -p ternio-bench --bench aead`

use bytes::BytesMut;
use divan::{Bencher, black_box};
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
use ternio_protocol::frame::{Flags, Framing, Header};
use ternio_protocol::secure::{AEAD_BACKEND, Sealer};

fn main() {
    println!("ternio_seal_frame runs on the {AEAD_BACKEND} backend");
    divan::main();
}

const SIZES: [usize; 3] = [32, 1024, 8 * 1024];
const KEY: [u8; 32] = [7; 32];

/// Ternio's sealer: a whole sealed frame (header, counter, ciphertext, tag).
#[divan::bench(args = SIZES)]
fn ternio_seal_frame(bencher: Bencher, size: usize) {
    let plain = vec![0xA5u8; size];
    let mut sealer = Sealer::new(&KEY);
    let mut out = BytesMut::with_capacity(size + 64);
    let header = Header::new(0x0001, Flags::NONE, 1);
    bencher.bench_local(|| {
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

/// `ring`'s ChaCha20-Poly1305 sealing the same bytes in place, with the
/// 7-byte header as associated data.
#[divan::bench(args = SIZES)]
fn ring_seal_in_place(bencher: Bencher, size: usize) {
    let key = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &KEY).unwrap());
    let mut buffer = vec![0xA5u8; size];
    let header = [1u8, 0, 4, 1, 0, 0, 0];
    let mut counter = 0u64;
    bencher.bench_local(|| {
        counter += 1;
        let mut nonce = [0u8; 12];
        nonce[4..].copy_from_slice(&counter.to_le_bytes());
        let tag = key
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(header),
                &mut buffer,
            )
            .unwrap();
        let _ = black_box(tag);
    });
}

/// RustCrypto's ChaCha20-Poly1305 sealing the same bytes in place, as the
/// `aead-rustcrypto` backend does (its key boxed, the tag detached).
#[divan::bench(args = SIZES)]
fn rustcrypto_seal_in_place(bencher: Bencher, size: usize) {
    use chacha20poly1305::{AeadInPlace, ChaCha20Poly1305, KeyInit};
    let key = Box::new(ChaCha20Poly1305::new(&KEY.into()));
    let mut buffer = vec![0xA5u8; size];
    let header = [1u8, 0, 4, 1, 0, 0, 0];
    let mut counter = 0u64;
    bencher.bench_local(|| {
        counter += 1;
        let mut nonce = [0u8; 12];
        nonce[4..].copy_from_slice(&counter.to_le_bytes());
        let tag = key
            .encrypt_in_place_detached(&nonce.into(), &header, &mut buffer)
            .unwrap();
        let _ = black_box(tag);
    });
}
