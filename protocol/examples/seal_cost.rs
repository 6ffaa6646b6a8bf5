//! The cost of sealing one frame on the AEAD backend this build uses, so
//! that the two backends can be compared (the bench crate always has
//! AWS-LC, since `ternio` enables it):
//!
//! ```sh
//! cargo run -p ternio-protocol --release --example seal_cost
//! cargo run -p ternio-protocol --release --example seal_cost \
//!     --no-default-features --features aead-rustcrypto
//! ```
//!
//! Prints, per body size, the median and fastest of 200 samples of 2,000
//! seals each (a whole length-prefixed frame: header, counter, ciphertext,
//! tag), as `benches/benches/aead.rs`'s `ternio_seal_frame` does.

use std::hint::black_box;
use std::time::Instant;

use bytes::BytesMut;
use ternio_protocol::frame::{Flags, Framing, Header};
use ternio_protocol::secure::{AEAD_BACKEND, Sealer};

const SAMPLES: usize = 200;
const SEALS_PER_SAMPLE: u32 = 2_000;

fn main() {
    println!("backend: {AEAD_BACKEND}");
    for size in [32usize, 1024, 8 * 1024] {
        let plain = vec![0xA5u8; size];
        let mut sealer = Sealer::new(&[7; 32]);
        let mut out = BytesMut::with_capacity(size + 64);
        let header = Header::new(0x0001, Flags::NONE, 1);
        let mut samples: Vec<f64> = (0..SAMPLES)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..SEALS_PER_SAMPLE {
                    out.clear();
                    sealer
                        .write_frame_with(
                            &mut out,
                            Framing::LengthPrefixed,
                            header,
                            usize::MAX,
                            |out| out.extend_from_slice(&plain),
                        )
                        .expect("a frame below the size limit seals");
                    black_box(&out);
                }
                start.elapsed().as_secs_f64() * 1e9 / f64::from(SEALS_PER_SAMPLE)
            })
            .collect();
        samples.sort_by(f64::total_cmp);
        println!(
            "{size:>5} B: median {:>6.0} ns, fastest {:>6.0} ns",
            samples[SAMPLES / 2],
            samples[0]
        );
    }
}
