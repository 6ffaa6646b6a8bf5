//! The pure-Rust backend (`aead-rustcrypto`): RustCrypto's
//! `chacha20poly1305` (the version snow's handshake uses) and `getrandom`.
//! The cipher wipes its key when dropped (`ZeroizeOnDrop`); it is boxed so
//! that replacing a key (`REKEY`) moves a pointer, not the key. Per frame,
//! the ChaCha20 state and the one-time Poly1305 key are wiped too (the
//! latter by `poly1305`'s `zeroize` feature, which `Cargo.toml` turns on).

use chacha20poly1305::{AeadInPlace, ChaCha20Poly1305, KeyInit, Nonce, Tag};

use super::{BadTag, nonce};
use crate::secure::{KEY_LEN, TAG_LEN};

// The promise of the module doc, checked at build time: the cipher (and so
// the key inside it) is wiped when dropped.
const _: fn() = || {
    fn wiped_on_drop<T: zeroize::ZeroizeOnDrop>() {}
    wiped_on_drop::<ChaCha20Poly1305>();
};

/// One direction's ChaCha20-Poly1305 key, on the heap.
pub(crate) struct Key(Box<ChaCha20Poly1305>);

impl Key {
    /// The AEAD key of `key`.
    pub(crate) fn new(key: &[u8; KEY_LEN]) -> Self {
        Self(Box::new(ChaCha20Poly1305::new(key.into())))
    }

    /// Encrypts `in_out` in place with the nonce of `counter`; returns the tag.
    pub(crate) fn seal(&self, counter: u64, aad: &[u8], in_out: &mut [u8]) -> [u8; TAG_LEN] {
        self.0
            .encrypt_in_place_detached(&Nonce::from(nonce(counter)), aad, in_out)
            .expect("a frame is far below ChaCha20-Poly1305's message limit")
            .into()
    }

    /// Checks and decrypts `in_out` (ciphertext, then the tag) in place: on
    /// success its first `len - TAG_LEN` bytes are the plain text.
    pub(crate) fn open(&self, counter: u64, aad: &[u8], in_out: &mut [u8]) -> Result<(), BadTag> {
        let tag_at = in_out.len().checked_sub(TAG_LEN).ok_or(BadTag)?;
        let (text, tag) = in_out.split_at_mut(tag_at);
        self.0
            .decrypt_in_place_detached(
                &Nonce::from(nonce(counter)),
                aad,
                text,
                Tag::from_slice(tag),
            )
            .map_err(|_| BadTag)
    }
}

/// Fills `bytes` from the system's random source (`getrandom`; on
/// `wasm32-unknown-unknown`, the Web Crypto API through its `wasm_js`
/// feature, which the application turns on).
pub(crate) fn fill_random(bytes: &mut [u8]) {
    getrandom::fill(bytes).expect("the system random source works");
}
