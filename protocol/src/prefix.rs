//! The u32 little-endian length prefix of the stream framing (section 1.1),
//! for buffers that hold whole frames one behind the other: appended in
//! front of a frame as it is written, read to take the frames out again.
//!
//! A peer's prefixes are read by [`FrameDecoder`](crate::FrameDecoder),
//! which checks them; these helpers are for buffers a program filled itself.

use bytes::{Buf, BufMut, BytesMut};

use crate::frame::LENGTH_PREFIX_LEN;

/// Appends `frame` (header + body) behind its length prefix.
#[inline]
pub fn append(out: &mut BytesMut, frame: &[u8]) {
    out.reserve(LENGTH_PREFIX_LEN + frame.len());
    out.put_u32_le(frame.len() as u32);
    out.put_slice(frame);
}

/// Appends a length prefix and whatever `write` appends behind it, then
/// sets the prefix to that length, which it returns. `len` (the frame's
/// expected size) is reserved first.
#[inline]
pub fn append_with(out: &mut BytesMut, len: usize, write: impl FnOnce(&mut BytesMut)) -> usize {
    out.reserve(LENGTH_PREFIX_LEN + len);
    let at = out.len();
    out.put_u32_le(0);
    write(out);
    let written = out.len() - at - LENGTH_PREFIX_LEN;
    set(out, at, written);
    written
}

/// Sets the prefix that starts at `at` in `out` to `len`.
#[inline]
pub(crate) fn set(out: &mut [u8], at: usize, len: usize) {
    out[at..at + LENGTH_PREFIX_LEN].copy_from_slice(&(len as u32).to_le_bytes());
}

/// The length announced by the prefix at the front of `buf`, or `None`
/// while `buf` holds fewer than its 4 bytes.
#[inline]
pub fn peek(buf: &[u8]) -> Option<usize> {
    let prefix = buf.get(..LENGTH_PREFIX_LEN)?;
    Some(u32::from_le_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize)
}

/// Takes the first frame (header + body, without its prefix) off the front
/// of `buf`, without copying it; `None` when no whole frame is there.
#[inline]
pub fn split(buf: &mut BytesMut) -> Option<BytesMut> {
    let len = peek(buf)?;
    if buf.len() < LENGTH_PREFIX_LEN + len {
        return None;
    }
    buf.advance(LENGTH_PREFIX_LEN);
    Some(buf.split_to(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_go_in_and_come_out_whole() {
        let mut buf = BytesMut::new();
        append(&mut buf, b"first");
        let written = append_with(&mut buf, 2, |out| out.put_slice(b"second"));
        assert_eq!(written, 6);
        append(&mut buf, b"");
        assert_eq!(&buf[..4], [5, 0, 0, 0]);
        assert_eq!(peek(&buf), Some(5));
        assert_eq!(peek(&buf[..3]), None);
        assert_eq!(split(&mut buf).as_deref(), Some(&b"first"[..]));
        assert_eq!(split(&mut buf).as_deref(), Some(&b"second"[..]));
        assert_eq!(split(&mut buf).as_deref(), Some(&b""[..]));
        assert!(buf.is_empty());
        assert_eq!(split(&mut buf), None);
    }

    #[test]
    fn an_unfinished_frame_stays_in_the_buffer() {
        let mut buf = BytesMut::new();
        append(&mut buf, b"whole");
        buf.truncate(7);
        assert_eq!(split(&mut buf), None);
        assert_eq!(buf.len(), 7);
    }
}
