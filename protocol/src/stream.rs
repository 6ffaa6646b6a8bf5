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
}

impl Encode for StreamCredit {
    fn encode(&self, out: &mut BytesMut) {
        self.items.encode(out);
    }
    fn encoded_len(&self) -> usize {
        4
    }
}

impl Decode for StreamCredit {
    const MIN_LEN: usize = 4;
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        u32::decode(reader).map(|items| Self { items })
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

    /// Asks the source to keep each item's body within `bytes` from now on
    /// where it can: a byte stream cuts its chunks to that size (a
    /// resumable session's server keeps every item it sends until the
    /// client acknowledges it, in a bounded replay buffer). Other sources
    /// ignore it (the default).
    fn limit_item_bytes(&mut self, bytes: usize) {
        let _ = bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_match_the_vectors() {
        // docs/PROTOCOL.md, "Stream vectors".
        let mut out = BytesMut::new();
        StreamCredit { items: 16 }.encode(&mut out);
        assert_eq!(&out[..], [0x10, 0, 0, 0]);
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
        assert!(StreamCredit::decode_body(&Bytes::from_static(&[1, 0, 0, 0, 0])).is_err());
        assert!(StreamEnd::decode_body(&Bytes::from_static(&[1])).is_err());
    }
}
