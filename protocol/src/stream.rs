//! Streams (docs/PROTOCOL.md section 4.5): a request answered by many
//! items, or a request that carries many items (an upload), with
//! credit-based flow control per stream.
//!
//! - `STREAM_ITEM` ([`STREAM_ITEM`]): one item of stream `request_id` (the
//!   header's id is the id of the request that opened the stream), its body
//!   the item encoded as the stream's declared item type; no flags.
//! - `STREAM_CREDIT` ([`StreamCredit`]): the receiver of stream
//!   `request_id` grants its sender `items` more items.
//! - `STREAM_END` ([`StreamEnd`]): the uploader's last frame of upload
//!   `request_id`: code 0 when it is complete, else an error code.
//! - `STREAM_ITEMS` ([`STREAM_ITEMS`]): several items of stream
//!   `request_id` in one frame ([`put_batch_item`], [`batch_len`],
//!   [`BatchItems`]), sent only to a receiver that accepted batches
//!   ([`StreamCredit::batches`]).
//!
//! A stream's sender may send [`INITIAL_CREDIT`] items before any grant.
//! A download (server to client) ends with the opening request's ordinary
//! answer: an acknowledgement (complete) or an error.

use std::fmt::{self, Write};
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{Decode, Encode, Reader};
use crate::error::DecodeError;
use crate::packet::Packet;
use crate::reply::{HandlerError, Request};

/// Opcode of `STREAM_ITEM`: one item of a stream, under the id of the
/// request that opened it.
pub const STREAM_ITEM: u16 = 0xFF0D;
/// Opcode of `STREAM_CREDIT`: more items granted to a stream's sender.
pub const STREAM_CREDIT: u16 = 0xFF0E;
/// Opcode of `STREAM_END`: the end of an upload, complete or failed.
pub const STREAM_END: u16 = 0xFF0F;
/// Opcode of `STREAM_ITEMS`: several items of a stream in one frame, each a
/// varint length then the item's body; sent only once the receiver accepted
/// batches on that stream ([`StreamCredit::batches`]).
pub const STREAM_ITEMS: u16 = 0xFF10;

/// Whether `opcode` is one of the stream frames' (`STREAM_ITEM`,
/// `STREAM_CREDIT`, `STREAM_END`, `STREAM_ITEMS`).
pub const fn is_stream_opcode(opcode: u16) -> bool {
    matches!(
        opcode,
        STREAM_ITEM | STREAM_CREDIT | STREAM_END | STREAM_ITEMS
    )
}

/// The items a stream's sender may send before any `STREAM_CREDIT`: the
/// receiver has room for this many when it opens the stream.
pub const INITIAL_CREDIT: u32 = 32;

/// The size of the chunks [`Chunk`] streams are cut into by Ternio's
/// senders (a sender may choose any size that fits a frame).
pub const CHUNK_SIZE: usize = 64 * 1024;

/// A request answered by a stream of [`Item`](Self::Item)s, ended by an
/// acknowledgement (or an error). Its handler returns a stream reply.
pub trait StreamRequest: Request<Response = ()> {
    /// The type of each item.
    type Item: Packet;
}

/// A request that carries a stream of [`Item`](Self::Item)s from the
/// client (an upload); it is answered once, as any request, with
/// [`Request::Response`].
pub trait UploadRequest: Request {
    /// The type of each item the client sends.
    type Item: Packet;
}

/// `STREAM_CREDIT`: the receiver of a stream grants its sender `items`
/// more items. The stream is the header's request id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamCredit {
    /// How many more items the sender may send (added to what is left).
    pub items: u32,
    /// Whether the receiver accepts `STREAM_ITEMS` on this stream from now
    /// on (a fifth body byte, 1). `false` changes nothing: a stream that
    /// accepted batches keeps accepting them. On the wire only when `true`.
    pub batches: bool,
}

impl StreamCredit {
    /// A grant of `items` more items, without accepting batches.
    pub const fn items(items: u32) -> Self {
        Self {
            items,
            batches: false,
        }
    }
}

impl Encode for StreamCredit {
    fn encode(&self, out: &mut BytesMut) {
        self.items.encode(out);
        if self.batches {
            out.put_u8(1);
        }
    }
    fn encoded_len(&self) -> usize {
        4 + usize::from(self.batches)
    }
}

impl Decode for StreamCredit {
    const MIN_LEN: usize = 4;
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let items = u32::decode(reader)?;
        let batches = match reader.remaining() {
            0 => false,
            _ => match u8::decode(reader)? {
                0 => false,
                1 => true,
                other => return Err(DecodeError::InvalidBool(other)),
            },
        };
        Ok(Self { items, batches })
    }
}

/// Appends one item to a `STREAM_ITEMS` body: its varint length, then the
/// body `encode` writes. The length is written after the item (the item is
/// moved when its length takes more than one byte).
#[inline]
pub fn put_batch_item(out: &mut BytesMut, encode: impl FnOnce(&mut BytesMut)) {
    let start = out.len();
    out.put_u8(0);
    encode(out);
    let len = out.len() - start - 1;
    let prefix = crate::codec::len_varint_len(len);
    if prefix > 1 {
        out.resize(out.len() + prefix - 1, 0);
        out.copy_within(start + 1..start + 1 + len, start + prefix);
    }
    let mut value = len;
    for byte in &mut out[start..start + prefix] {
        *byte = (value as u8 & 0x7F) | if value >= 0x80 { 0x80 } else { 0 };
        value >>= 7;
    }
}

/// The room a [`Chunk`]'s length is given before its bytes
/// ([`put_chunk_with`]): three varint bytes, enough for 2 MiB - 1.
pub const CHUNK_LEN_ROOM: usize = 3;

/// Appends a [`Chunk`]'s body whose bytes `fill` appends to `out`
/// (at most 2 MiB - 1 of them): room for its length is kept before them
/// and filled in after, and the bytes move down only when their length
/// takes fewer than [`CHUNK_LEN_ROOM`] bytes (under 16 KiB). Returns how
/// many bytes `fill` appended; when none, `out` is as it was.
///
/// # Panics
///
/// When `fill` appends 2 MiB or more.
pub fn put_chunk_with(out: &mut BytesMut, fill: impl FnOnce(&mut BytesMut)) -> usize {
    let start = out.len();
    out.put_bytes(0, CHUNK_LEN_ROOM);
    fill(out);
    let len = out.len() - start - CHUNK_LEN_ROOM;
    assert!(
        len < 1 << 21,
        "a chunk of {len} bytes past its length's room"
    );
    if len == 0 {
        out.truncate(start);
        return 0;
    }
    let prefix = crate::codec::len_varint_len(len);
    if prefix < CHUNK_LEN_ROOM {
        out.copy_within(start + CHUNK_LEN_ROOM.., start + prefix);
        out.truncate(out.len() - (CHUNK_LEN_ROOM - prefix));
    }
    // Within 2 MiB: the cast is exact.
    crate::codec::write_varint(&mut &mut out[start..start + prefix], len as u32);
    len
}

/// Checks a `STREAM_ITEMS` body (one or more items, each a varint length
/// then that many bytes, filling the body exactly) and counts its items.
pub fn batch_len(body: &Bytes) -> Result<u32, DecodeError> {
    if body.is_empty() {
        return Err(DecodeError::UnexpectedEnd { needed: 1 });
    }
    let mut pos = 0usize;
    let mut count = 0u32;
    while let Some(&first) = body.get(pos) {
        // Items under 128 bytes (one length byte) walk without a reader.
        let len = if first < 0x80 {
            pos += 1;
            usize::from(first)
        } else {
            let mut reader = Reader::within(body, pos..body.len(), 0);
            let len = reader.read_varint()? as usize;
            pos = body.len() - reader.remaining();
            len
        };
        let remaining = body.len() - pos;
        if len > remaining {
            return Err(DecodeError::LengthTooLarge { len, remaining });
        }
        pos += len;
        count = count.saturating_add(1);
    }
    Ok(count)
}

/// The items of a `STREAM_ITEMS` body that [`batch_len`] checked: where
/// each lies in the body ([`Packet::decode_packet_within`] decodes it).
#[derive(Debug, Clone)]
pub struct BatchItems {
    body: Bytes,
    pos: usize,
}

impl BatchItems {
    /// Walks `body`, a `STREAM_ITEMS` body [`batch_len`] accepted.
    pub fn new(body: Bytes) -> Self {
        Self { body, pos: 0 }
    }

    /// The whole body the items lie in.
    pub fn body(&self) -> &Bytes {
        &self.body
    }
}

impl Iterator for BatchItems {
    type Item = std::ops::Range<usize>;

    #[inline]
    fn next(&mut self) -> Option<std::ops::Range<usize>> {
        let mut len = 0usize;
        let mut shift = 0;
        loop {
            let byte = *self.body.get(self.pos)?;
            self.pos += 1;
            len |= usize::from(byte & 0x7F) << shift;
            shift += 7;
            if byte < 0x80 || shift > 28 {
                break;
            }
        }
        let start = self.pos;
        self.pos = start.saturating_add(len).min(self.body.len());
        Some(start..self.pos)
    }
}

impl Packet for StreamCredit {
    const OPCODE: u16 = STREAM_CREDIT;
    const NAME: &'static str = "STREAM_CREDIT";
}

/// `STREAM_END`: the uploader's last frame of an upload: `code` 0 when it
/// is complete, else why it failed (an error code of section 2), with a
/// UTF-8 message to the end of the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEnd {
    /// 0: complete; otherwise an error code.
    pub code: u16,
    /// Words for people (empty when complete).
    pub message: String,
}

impl StreamEnd {
    /// The end of a complete upload.
    pub fn complete() -> Self {
        Self {
            code: 0,
            message: String::new(),
        }
    }

    /// Appends the body of a `STREAM_END` to `out`, formatting `message` in place.
    pub fn write(out: &mut BytesMut, code: u16, message: &dyn fmt::Display) {
        out.put_u16_le(code);
        let _ = write!(out, "{message}");
    }
}

impl Encode for StreamEnd {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u16_le(self.code);
        out.extend_from_slice(self.message.as_bytes());
    }
    fn encoded_len(&self) -> usize {
        2 + self.message.len()
    }
}

impl Decode for StreamEnd {
    const MIN_LEN: usize = 2;
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let code = u16::decode(reader)?;
        let message = String::from_utf8_lossy(&reader.read_rest()).into_owned();
        Ok(Self { code, message })
    }
}

impl Packet for StreamEnd {
    const OPCODE: u16 = STREAM_END;
    const NAME: &'static str = "STREAM_END";
}

/// One piece of a byte stream: a stream of `Chunk`s carries a payload of
/// any size (a file) without ever holding it whole. Its body is `data` as
/// bytes (a varint length, then the bytes).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Chunk {
    /// The bytes of this piece.
    pub data: Bytes,
}

impl Encode for Chunk {
    fn encode(&self, out: &mut BytesMut) {
        self.data.encode(out);
    }
    fn encoded_len(&self) -> usize {
        self.data.encoded_len()
    }
}

impl Decode for Chunk {
    const MIN_LEN: usize = 1;
    fn describe(schema: &mut crate::schema::SchemaBuilder) -> crate::schema::TypeRef {
        use crate::schema::{Field, TypeDef, TypeRef};
        if schema.begin("Chunk", "ternio_protocol::stream::Chunk") {
            let fields = vec![Field {
                name: "data",
                ty: TypeRef::Builtin("bytes"),
                optional: false,
            }];
            schema.define(
                "Chunk",
                TypeDef::Struct {
                    fields,
                    evolving: false,
                },
            );
        }
        TypeRef::Named("Chunk")
    }
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Bytes::decode(reader).map(|data| Self { data })
    }
}

impl Packet for Chunk {
    // Items travel as STREAM_ITEM frames: this opcode is never on the wire.
    const OPCODE: u16 = STREAM_ITEM;
    const NAME: &'static str = "Chunk";
}

/// Encodes one item's body into the buffer it is given.
pub type EncodeItem<'a> = &'a dyn Fn(&mut BytesMut);

/// Takes an item (its encoder) and writes it as a frame.
pub type WriteItem<'a> = &'a mut dyn FnMut(EncodeItem<'_>);

/// The items of a stream reply with their type erased: what a server's
/// connection polls, one item at a time, only while the stream has credit.
pub trait ItemSource: Send {
    /// Polls the next item. On `Ready(Some(Ok(())))` the item was handed to
    /// `write` (which encodes it into the frame); `Ready(Some(Err(_)))`
    /// ends the stream with that error; `Ready(None)` ends it complete.
    fn poll_item(
        &mut self,
        cx: &mut Context<'_>,
        write: WriteItem<'_>,
    ) -> Poll<Option<Result<(), HandlerError>>>;

    /// Polls items while they are ready and appends each to `out` as an
    /// entry of a `STREAM_ITEMS` body ([`put_batch_item`]): at most
    /// `max_items`, and none once `out` grew by `max_bytes` or more.
    /// Implementations may override it to poll without a call per item.
    fn poll_batch(
        &mut self,
        cx: &mut Context<'_>,
        max_items: u32,
        max_bytes: usize,
        out: &mut BytesMut,
    ) -> BatchPoll {
        let start = out.len();
        let mut batch = BatchPoll {
            items: 0,
            last: start,
            polled: Poll::Ready(Some(Ok(()))),
        };
        while batch.items < max_items && out.len() - start < max_bytes {
            let mark = out.len();
            let polled = self.poll_item(cx, &mut |encode| put_batch_item(out, encode));
            if !matches!(polled, Poll::Ready(Some(Ok(())))) {
                // Nothing of a poll that gave no item stays in the batch.
                out.truncate(mark);
                batch.polled = polled;
                break;
            }
            batch.items += 1;
            batch.last = mark;
        }
        batch
    }

    /// Whether this is a byte stream that can read its next chunk
    /// straight into the frame ([`poll_read_chunk`](Self::poll_read_chunk)).
    fn reads_bytes(&self) -> bool {
        false
    }

    /// For a byte stream read from a reader ([`reads_bytes`](Self::reads_bytes)):
    /// reads the next chunk, of at most `max` bytes (one if `max` is 0:
    /// an empty read would say the end), straight into `out`
    /// as a [`Chunk`]'s body (its length, then the bytes: no copy from a
    /// buffer of the source's own). On anything but `Ready(Some(Ok(())))`
    /// the caller takes the frame back out of `out`. Other sources are
    /// never asked; the default ends the stream with `INTERNAL`.
    fn poll_read_chunk(
        &mut self,
        cx: &mut Context<'_>,
        out: &mut BytesMut,
        max: usize,
    ) -> Poll<Option<Result<(), HandlerError>>> {
        let _ = (cx, out, max);
        Poll::Ready(Some(Err(HandlerError::new(
            crate::ErrorCode::Internal,
            "a stream that is not a byte stream read into its frame",
        ))))
    }

    /// Asks the source to keep each item's body within `bytes` from now on
    /// where it can: a byte stream cuts its chunks to that size (a
    /// resumable session's server keeps every item it sends until the
    /// client acknowledges it, in a bounded replay buffer). Other sources
    /// ignore it (the default).
    fn limit_item_bytes(&mut self, bytes: usize) {
        let _ = bytes;
    }
}

/// What [`ItemSource::poll_batch`] appended, and why it stopped.
#[derive(Debug)]
pub struct BatchPoll {
    /// How many items it appended.
    pub items: u32,
    /// Where the last item appended begins in `out` (at its length).
    pub last: usize,
    /// `Ready(Some(Ok(())))` when it stopped at a limit; otherwise what the
    /// poll that stopped it gave (`Pending`, the end, an error).
    pub polled: Poll<Option<Result<(), HandlerError>>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_filled_in_place_decodes_as_one_encoded_whole() {
        for len in [1usize, 127, 128, 16_383, 16_384, 65_536, (1 << 21) - 1] {
            let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut out = BytesMut::from(&b"before"[..]);
            let filled = put_chunk_with(&mut out, |out| out.extend_from_slice(&data));
            assert_eq!(filled, len);
            let mut encoded = BytesMut::from(&b"before"[..]);
            Chunk {
                data: Bytes::from(data),
            }
            .encode(&mut encoded);
            assert_eq!(out, encoded, "{len} bytes");
        }
        // Nothing filled: nothing appended.
        let mut out = BytesMut::from(&b"before"[..]);
        assert_eq!(put_chunk_with(&mut out, |_| {}), 0);
        assert_eq!(&out[..], b"before");
    }

    #[test]
    fn bodies_match_the_vectors() {
        // docs/PROTOCOL.md, "Stream vectors".
        let mut out = BytesMut::new();
        StreamCredit::items(16).encode(&mut out);
        assert_eq!(&out[..], [0x10, 0, 0, 0]);
        let mut out = BytesMut::new();
        StreamCredit {
            items: 0,
            batches: true,
        }
        .encode(&mut out);
        assert_eq!(&out[..], [0, 0, 0, 0, 1]);
        let mut out = BytesMut::new();
        StreamEnd::write(&mut out, 0, &"");
        assert_eq!(&out[..], [0, 0]);
        let back = StreamEnd::decode_body(&out.freeze()).unwrap();
        assert_eq!(back, StreamEnd::complete());
        let mut out = BytesMut::new();
        Chunk {
            data: Bytes::from_static(b"abc"),
        }
        .encode(&mut out);
        assert_eq!(&out[..], [3, b'a', b'b', b'c']);
        assert!(StreamCredit::decode_body(&Bytes::from_static(&[1, 0, 0])).is_err());
        assert_eq!(
            StreamCredit::decode_body(&Bytes::from_static(&[1, 0, 0, 0, 1])),
            Ok(StreamCredit {
                items: 1,
                batches: true
            })
        );
        assert!(StreamCredit::decode_body(&Bytes::from_static(&[1, 0, 0, 0, 2])).is_err());
        assert!(StreamCredit::decode_body(&Bytes::from_static(&[1, 0, 0, 0, 1, 0])).is_err());
        assert!(StreamEnd::decode_body(&Bytes::from_static(&[1])).is_err());
    }

    #[test]
    fn batches_match_the_vectors() {
        // docs/PROTOCOL.md, "Stream vectors": two items, `ab` and 200 bytes.
        let mut out = BytesMut::new();
        put_batch_item(&mut out, |out: &mut BytesMut| out.put_slice(b"ab"));
        let long = [7u8; 200];
        put_batch_item(&mut out, |out: &mut BytesMut| out.put_slice(&long));
        assert_eq!(&out[..3], [2, b'a', b'b']);
        assert_eq!(&out[3..5], [0xC8, 0x01]);
        assert_eq!(out.len(), 3 + 2 + 200);
        let body = out.freeze();
        assert_eq!(batch_len(&body), Ok(2));
        let items: Vec<_> = BatchItems::new(body.clone()).collect();
        assert_eq!(items, [1..3, 5..205]);
        assert_eq!(&body[5..205], long);
        // An empty item is an item.
        assert_eq!(batch_len(&Bytes::from_static(&[0, 0])), Ok(2));
    }

    /// The walk of [`batch_len`] as the codec's reader does it, item by item.
    fn batch_len_by_reader(body: &Bytes) -> Option<u32> {
        let mut reader = Reader::new(body);
        let mut count = 0;
        while reader.remaining() > 0 {
            let len = reader.read_varint().ok()? as usize;
            reader.read_slice(len).ok()?;
            count += 1;
        }
        (count > 0).then_some(count)
    }

    #[test]
    fn batch_len_agrees_with_the_reader_on_every_short_body() {
        // Every body of up to four bytes over lengths of one byte and the
        // bytes that begin, continue or overflow a longer varint.
        let alphabet = [0u8, 1, 2, 3, 0x7F, 0x80, 0x81, 0xFF];
        let mut bodies = vec![Vec::new()];
        let mut shorter = bodies.clone();
        for _ in 0..4 {
            // Each length once: the bodies one byte longer than the last.
            shorter = shorter
                .iter()
                .flat_map(|body| {
                    alphabet.iter().map(move |&byte| {
                        let mut body = body.clone();
                        body.push(byte);
                        body
                    })
                })
                .collect();
            bodies.extend_from_slice(&shorter);
        }
        assert_eq!(bodies.len(), 1 + 8 + 64 + 512 + 4096);
        // And items with lengths of two and five varint bytes.
        let mut two = vec![0x80, 0x01];
        two.extend([9; 128]);
        bodies.push(two.clone());
        two.push(0);
        bodies.push(two);
        bodies.push(vec![0x80, 0x80, 0x80, 0x80, 0x10]);
        for body in bodies {
            let body = Bytes::from(body);
            assert_eq!(
                batch_len(&body).ok(),
                batch_len_by_reader(&body),
                "{body:?}"
            );
        }
    }

    #[test]
    fn malformed_batches_are_refused() {
        // Empty, a length past the end, a varint cut short.
        for body in [&[][..], &[3, 1, 2][..], &[1, 9, 0x80][..]] {
            assert!(
                batch_len(&Bytes::copy_from_slice(body)).is_err(),
                "{body:?}"
            );
        }
    }
}
