//! The AEAD of sealed frames (ChaCha20-Poly1305, RFC 8439) and the random
//! source of key generation, behind one seam with two backends:
//!
//! - `aead-aws-lc` (the default): AWS-LC through `aws-lc-rs`, BoringSSL's
//!   stitched assembly. A C build.
//! - `aead-rustcrypto`: RustCrypto's `chacha20poly1305` (the crate snow's
//!   handshake already uses) and `getrandom`. Pure Rust, for targets where
//!   AWS-LC does not build, such as `wasm32-unknown-unknown`; slower per
//!   frame (figures in `protocol/README.md`).
//!
//! The features are additive: with both on, AWS-LC seals and opens, and the
//! RustCrypto backend is compiled only to be tested against it. Both wipe
//! their keys when dropped.

#[cfg(not(any(feature = "aead-aws-lc", feature = "aead-rustcrypto")))]
compile_error!(
    "ternio-protocol needs an AEAD backend: enable the feature `aead-aws-lc` \
     (the default, AWS-LC) or `aead-rustcrypto` (pure Rust, for wasm32 or a \
     build without a C compiler)"
);

#[cfg(feature = "aead-aws-lc")]
mod aws_lc;
#[cfg(feature = "aead-rustcrypto")]
// With both features on, only the tests use it.
#[cfg_attr(feature = "aead-aws-lc", allow(dead_code))]
mod rustcrypto;

#[cfg(feature = "aead-aws-lc")]
pub(crate) use aws_lc::{Key, fill_random};
#[cfg(all(feature = "aead-rustcrypto", not(feature = "aead-aws-lc")))]
pub(crate) use rustcrypto::{Key, fill_random};

use zeroize::Zeroizing;

use crate::secure::{KEY_LEN, TAG_LEN};

/// The backend in use ([`crate::secure::AEAD_BACKEND`]).
#[cfg(feature = "aead-aws-lc")]
pub(crate) const BACKEND: &str = "aws-lc";
/// The backend in use ([`crate::secure::AEAD_BACKEND`]).
#[cfg(all(feature = "aead-rustcrypto", not(feature = "aead-aws-lc")))]
pub(crate) const BACKEND: &str = "rustcrypto";

/// A tag that does not authenticate the ciphertext and associated data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BadTag;

/// The nonce of a frame's counter: four zero bytes, then the counter
/// little-endian (section 5.1).
fn nonce(counter: u64) -> [u8; 12] {
    let mut nonce = [0u8; 12];
    nonce[4..].copy_from_slice(&counter.to_le_bytes());
    nonce
}

/// Noise's `REKEY(k)` (section 5.2): the first 32 bytes of the encryption,
/// under `key`, of 32 zero bytes with the nonce of counter 2^64 - 1 and
/// empty associated data; no frame ever uses that counter.
pub(crate) fn rekey(key: &Key) -> Zeroizing<[u8; KEY_LEN]> {
    let mut next = Zeroizing::new([0u8; KEY_LEN]);
    let _tag: [u8; TAG_LEN] = key.seal(u64::MAX, &[], &mut next[..]);
    next
}

#[cfg(all(test, feature = "aead-aws-lc", feature = "aead-rustcrypto"))]
mod tests {
    use super::{aws_lc, rustcrypto};
    use crate::secure::{KEY_LEN, TAG_LEN};

    /// A xorshift stream: varied keys and messages without a dependency.
    struct Stream(u64);

    impl Stream {
        fn fill(&mut self, bytes: &mut [u8]) {
            for byte in bytes {
                self.0 ^= self.0 << 13;
                self.0 ^= self.0 >> 7;
                self.0 ^= self.0 << 17;
                *byte = self.0 as u8;
            }
        }
    }

    #[test]
    fn both_backends_seal_the_same_bytes_and_open_each_other() {
        let mut stream = Stream(0x9E37_79B9_7F4A_7C15);
        for len in [
            0, 1, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 255, 256, 1024, 4099,
        ] {
            let mut key = [0u8; KEY_LEN];
            stream.fill(&mut key);
            let mut aad = vec![0u8; len % 9];
            stream.fill(&mut aad);
            let mut plain = vec![0u8; len];
            stream.fill(&mut plain);
            let counter = u64::from(key[0]) << (len % 57);
            let (fast, pure) = (aws_lc::Key::new(&key), rustcrypto::Key::new(&key));

            let mut by_fast = plain.clone();
            let tag = fast.seal(counter, &aad, &mut by_fast);
            by_fast.extend_from_slice(&tag);
            let mut by_pure = plain.clone();
            let tag = pure.seal(counter, &aad, &mut by_pure);
            by_pure.extend_from_slice(&tag);
            assert_eq!(by_fast, by_pure, "{len} bytes");
            assert_eq!(by_fast.len(), len + TAG_LEN);

            let mut opened = by_fast.clone();
            pure.open(counter, &aad, &mut opened).unwrap();
            assert_eq!(opened[..len], plain[..]);
            let mut opened = by_pure.clone();
            fast.open(counter, &aad, &mut opened).unwrap();
            assert_eq!(opened[..len], plain[..]);

            // Both refuse the same forgeries: a flipped bit, another counter.
            let mut forged = by_fast.clone();
            let at = stream.0 as usize % forged.len();
            forged[at] ^= 0x40;
            assert!(fast.open(counter, &aad, &mut forged.clone()).is_err());
            assert!(pure.open(counter, &aad, &mut forged).is_err());
            assert!(fast.open(counter + 1, &aad, &mut by_fast.clone()).is_err());
            assert!(pure.open(counter + 1, &aad, &mut by_fast.clone()).is_err());

            // REKEY (AWS-LC here) against the same steps on RustCrypto.
            let mut next = [0u8; KEY_LEN];
            let _tag = pure.seal(u64::MAX, &[], &mut next);
            assert_eq!(*super::rekey(&fast), next);
        }
        let mut short = [0u8; TAG_LEN - 1];
        assert!(
            aws_lc::Key::new(&[1; KEY_LEN])
                .open(0, &[], &mut short)
                .is_err()
        );
        assert!(
            rustcrypto::Key::new(&[1; KEY_LEN])
                .open(0, &[], &mut short)
                .is_err()
        );
    }
}
