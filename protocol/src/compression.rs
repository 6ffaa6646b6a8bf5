//! Compressed bodies (contract section 6): `uncompressed_len: u32`
//! (little-endian) followed by an LZ4 block (the block format, no frame
//! header), in a frame with the `COMPRESSED` flag.
//!
//! A sender compresses a body only when it is at least its threshold and
//! the compressed form is smaller ([`compress_tail`]); a receiver checks the
//! announced length against its maximum before it allocates, and accepts
//! only a block that decodes to exactly that length ([`decompress`]).
//! On a sealed frame the body is compressed before it is sealed and
//! decompressed after it is opened ([`crate::secure`]).

use bytes::BytesMut;

/// Size of the `uncompressed_len` field that starts a compressed body.
pub const LEN_FIELD: usize = 4;

/// A compressed body that cannot be accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecompressError {
    /// `uncompressed_len` is above what the receiver accepts: `DISCONNECT
    /// FRAME_TOO_LARGE`. Nothing of that size was allocated.
    #[error("compressed body announces {len} bytes, above the maximum of {max}")]
    TooLarge {
        /// The announced uncompressed length.
        len: usize,
        /// The largest uncompressed body accepted.
        max: usize,
    },
    /// The body is shorter than its `uncompressed_len` field: `MALFORMED`.
    #[error("compressed body of {0} bytes has no room for its length")]
    TooShort(usize),
    /// The LZ4 block does not decode, or decodes to more bytes than
    /// announced: `MALFORMED`.
    #[error("the LZ4 block does not decode to the announced {0} bytes")]
    Corrupt(usize),
    /// The LZ4 block decodes to fewer bytes than announced: `MALFORMED`.
    #[error("the LZ4 block decodes to {actual} bytes, not the announced {expected}")]
    WrongLength {
        /// The announced uncompressed length.
        expected: usize,
        /// What the block decoded to.
        actual: usize,
    },
}

impl DecompressError {
    /// Whether the receiver closes with `DISCONNECT FRAME_TOO_LARGE` (the
    /// other errors are `MALFORMED`).
    pub const fn is_too_large(&self) -> bool {
        matches!(self, Self::TooLarge { .. })
    }
}

/// Compresses `out[at..]` in place when it is at least `threshold` bytes
/// and its compressed form (length field and block) is smaller; returns
/// whether it did. Otherwise `out` is left as it was.
///
/// It works in `out`'s own spare room (the block is written after the
/// body, then moved over it): no buffer of its own.
pub fn compress_tail(out: &mut BytesMut, at: usize, threshold: usize) -> bool {
    let len = out.len() - at;
    if len < threshold || len > u32::MAX as usize {
        return false;
    }
    let bound = LEN_FIELD + lz4_flex::block::get_maximum_output_size(len);
    out.resize(at + len + bound, 0);
    let (body, room) = out[at..].split_at_mut(len);
    room[..LEN_FIELD].copy_from_slice(&(len as u32).to_le_bytes());
    let written = match lz4_flex::block::compress_into(body, &mut room[LEN_FIELD..]) {
        Ok(block) => LEN_FIELD + block,
        Err(_) => usize::MAX,
    };
    if written >= len {
        out.truncate(at + len);
        return false;
    }
    out.copy_within(at + len..at + len + written, at);
    out.truncate(at + written);
    true
}

/// `body` compressed (length field and block), whatever its size: for test
/// vectors and tools. Senders use [`compress_tail`], which keeps a body that
/// does not shrink.
pub fn compress(body: &[u8]) -> Vec<u8> {
    let mut out =
        Vec::with_capacity(LEN_FIELD + lz4_flex::block::get_maximum_output_size(body.len()));
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&lz4_flex::block::compress(body));
    out
}

/// Decompresses a compressed body whose uncompressed length may be at most
/// `max_len`. The length is checked before anything is allocated; the
/// block must decode to exactly that length.
pub fn decompress(body: &[u8], max_len: usize) -> Result<BytesMut, DecompressError> {
    let Some((len, block)) = body.split_first_chunk::<LEN_FIELD>() else {
        return Err(DecompressError::TooShort(body.len()));
    };
    let len = u32::from_le_bytes(*len) as usize;
    if len > max_len {
        return Err(DecompressError::TooLarge { len, max: max_len });
    }
    let mut out = BytesMut::zeroed(len);
    match lz4_flex::block::decompress_into(block, &mut out) {
        Ok(actual) if actual == len => Ok(out),
        Ok(actual) => Err(DecompressError::WrongLength {
            expected: len,
            actual,
        }),
        Err(_) => Err(DecompressError::Corrupt(len)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_that_shrinks_is_compressed_and_comes_back() {
        let body = b"hello hello hello hello hello hello hello hello".repeat(4);
        let mut out = BytesMut::from(&b"head"[..]);
        out.extend_from_slice(&body);
        assert!(compress_tail(&mut out, 4, 16));
        assert_eq!(&out[..4], b"head");
        assert!(out.len() - 4 < body.len());
        assert_eq!(&out[4..], &compress(&body)[..]);
        let back = decompress(&out[4..], body.len()).unwrap();
        assert_eq!(&back[..], &body[..]);
        assert_eq!(
            decompress(&out[4..], body.len() - 1),
            Err(DecompressError::TooLarge {
                len: body.len(),
                max: body.len() - 1
            })
        );
    }

    #[test]
    fn a_small_or_incompressible_body_is_kept() {
        let mut out = BytesMut::from(&b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"[..]);
        assert!(!compress_tail(&mut out, 0, 33));
        assert_eq!(out.len(), 32);
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let noise: Vec<u8> = (0..200)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect();
        let mut out = BytesMut::from(&noise[..]);
        assert!(!compress_tail(&mut out, 0, 0));
        assert_eq!(&out[..], &noise[..]);
    }

    #[test]
    fn corrupt_and_wrong_length_blocks_are_refused() {
        assert_eq!(decompress(&[1, 0], 10), Err(DecompressError::TooShort(2)));
        let mut body = compress(&[7; 100]);
        body[..4].copy_from_slice(&101u32.to_le_bytes());
        assert!(matches!(
            decompress(&body, 1000),
            Err(DecompressError::WrongLength {
                expected: 101,
                actual: 100
            }) | Err(DecompressError::Corrupt(101))
        ));
        body[..4].copy_from_slice(&99u32.to_le_bytes());
        assert!(decompress(&body, 1000).is_err());
        assert!(decompress(&[4, 0, 0, 0, 0xF0], 1000).is_err());
    }
}
