//! Frames (section 1): the 7-byte header, its flags, the length-prefixed
//! stream form of TCP (section 1.1) and the message form of WebSocket
//! (section 1.2).

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::codec::Encode;
use crate::compression::{self, DecompressError};
use crate::error::FrameError;

/// Size of a frame header in bytes.
pub const HEADER_LEN: usize = 7;

/// Size of the TCP length prefix in bytes.
pub const LENGTH_PREFIX_LEN: usize = 4;

/// The maximum frame size (header + body) a receiver accepts unless configured otherwise: 1 MiB.
pub const DEFAULT_MAX_FRAME_SIZE: usize = 1024 * 1024;

/// The WebSocket subprotocol of wire contract v2 (section 1.2).
pub const WEBSOCKET_SUBPROTOCOL: &str = "ternio.v2";

/// The first opcode of the system range (section 4).
pub const SYSTEM_OPCODE_START: u16 = 0xFF00;

/// The `flags` byte of a header. Bits 4 to 7 are reserved: a frame with one
/// of them set is refused ([`FrameError::ReservedFlags`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(u8);

impl Flags {
    /// No flag set: a request, a push or a fire-and-forget send.
    pub const NONE: Self = Self(0);
    /// Bit 0: this frame answers the request with the same id.
    pub const RESPONSE: Self = Self(0x01);
    /// Bit 1: the body is an error (`code: u16` then a UTF-8 message).
    pub const ERROR: Self = Self(0x02);
    /// Bit 2: the body is sealed (section 5).
    pub const ENCRYPTED: Self = Self(0x04);
    /// Bit 3: the body is compressed (section 6): `uncompressed_len: u32`
    /// then an LZ4 block. On a sealed frame, compressed before sealing.
    pub const COMPRESSED: Self = Self(0x08);
    /// `RESPONSE | ERROR`: an error response.
    pub const RESPONSE_ERROR: Self = Self(0x03);
    const KNOWN: u8 = 0x0F;

    /// Flags from a wire byte, or `None` if a reserved bit is set.
    pub const fn from_bits(bits: u8) -> Option<Self> {
        if bits & !Self::KNOWN == 0 {
            Some(Self(bits))
        } else {
            None
        }
    }

    /// The wire byte.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Whether every flag of `other` is set here.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// These flags with those of `other` added.
    pub const fn with(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// These flags with those of `other` removed.
    pub const fn without(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }

    /// Whether `RESPONSE` is set.
    pub const fn is_response(self) -> bool {
        self.contains(Self::RESPONSE)
    }

    /// Whether `ERROR` is set.
    pub const fn is_error(self) -> bool {
        self.contains(Self::ERROR)
    }

    /// Whether `ENCRYPTED` is set.
    pub const fn is_encrypted(self) -> bool {
        self.contains(Self::ENCRYPTED)
    }

    /// Whether `COMPRESSED` is set.
    pub const fn is_compressed(self) -> bool {
        self.contains(Self::COMPRESSED)
    }
}

/// The 7-byte frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    /// The packet's opcode: `0x0000..=0xFEFF` application, `0xFF00..` system.
    pub opcode: u16,
    /// `RESPONSE`, `ERROR`, `ENCRYPTED`, `COMPRESSED`.
    pub flags: Flags,
    /// 0 when no reply is expected; otherwise the id that the reply carries.
    pub request_id: u32,
}

impl Header {
    /// A header with the given fields.
    pub const fn new(opcode: u16, flags: Flags, request_id: u32) -> Self {
        Self {
            opcode,
            flags,
            request_id,
        }
    }

    /// Reads a header from the first 7 bytes of `bytes`.
    ///
    /// Fails with [`FrameError::TooShort`] when fewer than 7 bytes are given
    /// and with [`FrameError::ReservedFlags`] when a reserved bit is set.
    pub fn parse(bytes: &[u8]) -> Result<Self, FrameError> {
        let Some(raw) = bytes.get(..HEADER_LEN) else {
            return Err(FrameError::TooShort(bytes.len()));
        };
        let flags = Flags::from_bits(raw[2]).ok_or(FrameError::ReservedFlags(raw[2]))?;
        Ok(Self {
            opcode: u16::from_le_bytes([raw[0], raw[1]]),
            flags,
            request_id: u32::from_le_bytes([raw[3], raw[4], raw[5], raw[6]]),
        })
    }

    /// The header as its 7 wire bytes.
    pub const fn to_bytes(self) -> [u8; HEADER_LEN] {
        let op = self.opcode.to_le_bytes();
        let id = self.request_id.to_le_bytes();
        [op[0], op[1], self.flags.bits(), id[0], id[1], id[2], id[3]]
    }

    /// This header with `ENCRYPTED` cleared.
    pub const fn without_encryption(self) -> Self {
        Self {
            flags: self.flags.without(Flags::ENCRYPTED),
            ..self
        }
    }

    /// Whether the opcode is in the system range (section 4).
    pub const fn is_system(&self) -> bool {
        self.opcode >= SYSTEM_OPCODE_START
    }

    /// Whether the frame is counted for resumption (section 4.2): an
    /// application opcode or a stream opcode
    /// ([`system::is_counted`](crate::system::is_counted)).
    pub const fn is_counted(&self) -> bool {
        crate::system::is_counted(self.opcode)
    }

    /// Whether this frame is a request: a non-zero id and `RESPONSE` clear.
    pub const fn is_request(&self) -> bool {
        self.request_id != 0 && !self.flags.is_response()
    }
}

/// One decoded frame: its header and its body, a view of the bytes received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The header.
    pub header: Header,
    /// The body (sealed when `header.flags` has `ENCRYPTED`).
    pub body: Bytes,
}

impl Frame {
    /// This frame with its body decompressed and `COMPRESSED` cleared, when
    /// it is set (section 6); as it is otherwise. The uncompressed frame
    /// (header and body) may be at most `max_frame_size`: that is checked
    /// before anything is allocated. Call it on an opened body, never on a
    /// sealed one.
    pub fn decompressed(self, max_frame_size: usize) -> Result<Self, DecompressError> {
        if !self.header.flags.is_compressed() {
            return Ok(self);
        }
        let body = compression::decompress(&self.body, max_frame_size.saturating_sub(HEADER_LEN))?;
        Ok(Self {
            header: Header {
                flags: self.header.flags.without(Flags::COMPRESSED),
                ..self.header
            },
            body: body.freeze(),
        })
    }

    /// Parses a frame that arrived whole with no length prefix, as in a
    /// WebSocket binary message. The body is a view of `bytes`, not a copy.
    pub fn parse(mut bytes: Bytes, max_frame_size: usize) -> Result<Self, FrameError> {
        if bytes.len() > max_frame_size {
            return Err(FrameError::TooLarge {
                len: bytes.len(),
                max: max_frame_size,
            });
        }
        let header = Header::parse(&bytes)?;
        bytes.advance(HEADER_LEN);
        Ok(Self {
            header,
            body: bytes,
        })
    }
}

/// How frames are delimited on a transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Framing {
    /// Each frame is preceded by a u32 length (TCP, section 1.1).
    LengthPrefixed,
    /// Each frame travels alone in one message (WebSocket, section 1.2).
    Message,
}

impl Framing {
    /// Bytes written before the header.
    pub const fn prefix_len(self) -> usize {
        match self {
            Self::LengthPrefixed => LENGTH_PREFIX_LEN,
            Self::Message => 0,
        }
    }
}

/// Appends one frame to `out`: the length prefix when `framing` asks for one,
/// the header, then whatever `body` writes.
///
/// Returns the frame's size (header + body, without the prefix). When it
/// exceeds `max_frame_size`, `out` is restored to its former length and
/// [`FrameError::TooLarge`] is returned.
pub fn write_frame_with(
    out: &mut BytesMut,
    framing: Framing,
    header: Header,
    max_frame_size: usize,
    body: impl FnOnce(&mut BytesMut),
) -> Result<usize, FrameError> {
    let start = out.len();
    let prefix = framing.prefix_len();
    out.reserve(prefix + HEADER_LEN);
    if prefix > 0 {
        out.put_u32_le(0);
    }
    out.put_slice(&header.to_bytes());
    body(out);
    let len = out.len() - start - prefix;
    if len > max_frame_size || len > u32::MAX as usize {
        out.truncate(start);
        return Err(FrameError::TooLarge {
            len,
            max: max_frame_size,
        });
    }
    if prefix > 0 {
        crate::prefix::set(out, start, len);
    }
    Ok(len)
}

/// [`write_frame_with`], then the body compressed in place when
/// `compress` gives a threshold that the body reaches and compressing makes
/// it smaller ([`compress_written`]). With `None` it is
/// [`write_frame_with`] and one branch.
pub fn write_frame_compressing(
    out: &mut BytesMut,
    framing: Framing,
    header: Header,
    max_frame_size: usize,
    compress: Option<usize>,
    body: impl FnOnce(&mut BytesMut),
) -> Result<usize, FrameError> {
    let start = out.len();
    let len = write_frame_with(out, framing, header, max_frame_size, body)?;
    match compress {
        None => Ok(len),
        Some(threshold) => Ok(compress_written(out, start, framing, threshold)),
    }
}

/// Compresses the body of the plain frame written at `out[start..]` (the
/// last thing in `out`, with its prefix when `framing` has one) when it is
/// at least `threshold` bytes and compressing makes it smaller: sets
/// `COMPRESSED` and the prefix. Returns the frame's size (header + body).
pub fn compress_written(
    out: &mut BytesMut,
    start: usize,
    framing: Framing,
    threshold: usize,
) -> usize {
    let header_at = start + framing.prefix_len();
    if compression::compress_tail(out, header_at + HEADER_LEN, threshold) {
        out[header_at + 2] |= Flags::COMPRESSED.bits();
        if framing.prefix_len() > 0 {
            let len = out.len() - header_at;
            crate::prefix::set(out, start, len);
        }
    }
    out.len() - header_at
}

/// Appends one frame whose body is `body`'s encoding. See [`write_frame_with`].
pub fn write_frame<E: Encode + ?Sized>(
    out: &mut BytesMut,
    framing: Framing,
    header: Header,
    body: &E,
    max_frame_size: usize,
) -> Result<usize, FrameError> {
    write_frame_with(out, framing, header, max_frame_size, |out| {
        out.reserve(body.encoded_len());
        body.encode(out);
    })
}

/// Splits a length-prefixed byte stream (TCP, section 1.1) into frames.
///
/// Feed it whatever arrived, in chunks of any size, and call
/// [`decode`](Self::decode) until it returns `Ok(None)`. It checks an
/// announced length before anything else and never reserves memory for it:
/// a peer that announces more than the maximum gets an error at once.
#[derive(Debug, Clone)]
pub struct FrameDecoder {
    max_frame_size: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_FRAME_SIZE)
    }
}

impl FrameDecoder {
    /// A decoder that rejects frames above `max_frame_size` bytes (header + body).
    pub const fn new(max_frame_size: usize) -> Self {
        Self { max_frame_size }
    }

    /// The largest frame accepted.
    pub const fn max_frame_size(&self) -> usize {
        self.max_frame_size
    }

    /// Takes the next whole frame off the front of `buf`, if there is one.
    ///
    /// The returned body is a view of `buf`'s memory (no copy). On an error
    /// the stream cannot be resynchronised: the caller closes the connection.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        Ok(self.decode_mut(buf)?.map(|(header, body)| Frame {
            header,
            body: body.freeze(),
        }))
    }

    /// Like [`decode`](Self::decode), with the body still mutable (a sealed
    /// body is opened in place). It is split off `buf`: no copy.
    pub fn decode_mut(
        &mut self,
        buf: &mut BytesMut,
    ) -> Result<Option<(Header, BytesMut)>, FrameError> {
        let Some(len) = self.announced_len(buf)? else {
            return Ok(None);
        };
        if buf.len() < LENGTH_PREFIX_LEN + len {
            return Ok(None);
        }
        // The header is validated before the frame leaves the buffer.
        let header = Header::parse(&buf[LENGTH_PREFIX_LEN..])?;
        buf.advance(LENGTH_PREFIX_LEN + HEADER_LEN);
        Ok(Some((header, buf.split_to(len - HEADER_LEN))))
    }

    /// The total bytes (prefix included) that the next frame occupies, once
    /// its length prefix has arrived and passed the size checks.
    pub fn next_frame_len(&self, buf: &[u8]) -> Result<Option<usize>, FrameError> {
        Ok(self.announced_len(buf)?.map(|len| LENGTH_PREFIX_LEN + len))
    }

    fn announced_len(&self, buf: &[u8]) -> Result<Option<usize>, FrameError> {
        let Some(len) = crate::prefix::peek(buf) else {
            return Ok(None);
        };
        if len < HEADER_LEN {
            return Err(FrameError::TooShort(len));
        }
        if len > self.max_frame_size {
            return Err(FrameError::TooLarge {
                len,
                max: self.max_frame_size,
            });
        }
        Ok(Some(len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_rejects_reserved_bits() {
        let header = Header::new(0x1234, Flags::RESPONSE_ERROR, 0xDEAD_BEEF);
        let bytes = header.to_bytes();
        assert_eq!(bytes, [0x34, 0x12, 0x03, 0xEF, 0xBE, 0xAD, 0xDE]);
        assert_eq!(Header::parse(&bytes), Ok(header));
        for bit in 4..8 {
            let mut bad = bytes;
            bad[2] |= 1 << bit;
            assert_eq!(Header::parse(&bad), Err(FrameError::ReservedFlags(bad[2])));
        }
        assert_eq!(Header::parse(&bytes[..6]), Err(FrameError::TooShort(6)));
    }

    #[test]
    fn decoder_checks_the_announced_length_first() {
        let mut decoder = FrameDecoder::new(64);
        let mut buf = BytesMut::from(&[0xFF, 0xFF, 0xFF, 0x7F][..]);
        assert_eq!(
            decoder.decode(&mut buf),
            Err(FrameError::TooLarge {
                len: 0x7FFF_FFFF,
                max: 64
            })
        );
        // Nothing was reserved for the announced two gigabytes.
        assert!(buf.capacity() < 1024);
        let mut short = BytesMut::from(&[6, 0, 0, 0][..]);
        assert_eq!(decoder.decode(&mut short), Err(FrameError::TooShort(6)));
    }

    #[test]
    fn write_frame_restores_the_buffer_when_too_large() {
        let mut out = BytesMut::from(&b"keep"[..]);
        let header = Header::new(1, Flags::NONE, 0);
        let err = write_frame_with(&mut out, Framing::LengthPrefixed, header, 8, |out| {
            out.put_slice(&[0; 2])
        });
        assert_eq!(err, Err(FrameError::TooLarge { len: 9, max: 8 }));
        assert_eq!(&out[..], b"keep");
        let len = write_frame_with(&mut out, Framing::LengthPrefixed, header, 9, |out| {
            out.put_slice(&[7; 2])
        });
        assert_eq!(len, Ok(9));
        assert_eq!(&out[4..], &[9, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 7, 7]);
    }
}
