//! The AWS-LC backend (`aead-aws-lc`): `aws-lc-rs`'s ChaCha20-Poly1305 and
//! random source. AWS-LC keeps each key in a context it allocates and
//! wipes when freed, and wipes each message's one-time Poly1305 key.

use aws_lc_rs::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};

use super::{BadTag, nonce};
use crate::secure::{KEY_LEN, TAG_LEN};

/// One direction's ChaCha20-Poly1305 key, held by AWS-LC.
pub(crate) struct Key(LessSafeKey);

impl Key {
    /// The AEAD key of `key`.
    pub(crate) fn new(key: &[u8; KEY_LEN]) -> Self {
        let key = UnboundKey::new(&CHACHA20_POLY1305, key)
            .expect("a 32-byte key is a valid ChaCha20-Poly1305 key");
        Self(LessSafeKey::new(key))
    }

    /// Encrypts `in_out` in place with the nonce of `counter`; returns the tag.
    pub(crate) fn seal(&self, counter: u64, aad: &[u8], in_out: &mut [u8]) -> [u8; TAG_LEN] {
        let tag = self
            .0
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce(counter)),
                Aad::from(aad),
                in_out,
            )
            .expect("a frame is far below ChaCha20-Poly1305's message limit");
        tag.as_ref().try_into().expect("a 16-byte tag")
    }

    /// Checks and decrypts `in_out` (ciphertext, then the tag) in place: on
    /// success its first `len - TAG_LEN` bytes are the plain text.
    pub(crate) fn open(&self, counter: u64, aad: &[u8], in_out: &mut [u8]) -> Result<(), BadTag> {
        self.0
            .open_in_place(
                Nonce::assume_unique_for_key(nonce(counter)),
                Aad::from(aad),
                in_out,
            )
            .map(|_| ())
            .map_err(|_| BadTag)
    }
}

/// Fills `bytes` from AWS-LC's random source (seeded by the system's).
pub(crate) fn fill_random(bytes: &mut [u8]) {
    aws_lc_rs::rand::fill(bytes).expect("the system random source works");
}
