//! The [`Packet`] trait: a type with a field encoding and an opcode.

use crate::codec::{Decode, Encode};

/// A message type with its own opcode. Derive it with `#[derive(Packet)]`
/// and `#[packet(opcode = 0x0001)]`.
///
/// Application opcodes are `0x0000..=0xFEFF`; the derive refuses the system
/// range `0xFF00..=0xFFFF`, which only [`system`](crate::system) packets use.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a Ternio packet",
    label = "expected a type with #[derive(Packet)]",
    note = "add #[derive(Packet)] and #[packet(opcode = 0x....)] to the type"
)]
pub trait Packet: Encode + Decode + Send + Sync + 'static {
    /// The opcode in the frame header.
    const OPCODE: u16;
    /// The type's name, for logs and error messages.
    const NAME: &'static str;
    /// Whether a push of this type may be dropped for a connection that
    /// falls behind (a state update the next one replaces), when the server's
    /// slow-consumer policy allows it. Set with `#[packet(opcode = …, droppable)]`.
    const DROPPABLE: bool = false;
    /// Whether a push of this type goes over the datagram channel when the
    /// connection has one (docs/PROTOCOL.md section 4.4): it may then be
    /// lost, duplicated (and dropped) or reordered, and must fit one
    /// datagram. Over the stream otherwise. Set with
    /// `#[packet(opcode = …, unreliable)]`.
    const UNRELIABLE: bool = false;
    /// Whether a frame of this type may be sent compressed (contract
    /// section 6) when the sender compresses: its body is compressed when it
    /// reaches the sender's threshold and shrinks. Turn it off with
    /// `#[packet(opcode = …, compress = false)]` for a packet that mixes
    /// secrets with what an attacker controls (compression would leak their
    /// length, as in CRIME). Packets sent `UNRELIABLE` are never compressed
    /// when they go by datagram.
    const COMPRESS: bool = true;
    /// How many nested `Box` or `Vec` levels a body of this type may hold;
    /// deeper is `MALFORMED`. Set with `#[packet(opcode = …, max_depth = N)]`.
    const MAX_DEPTH: usize = crate::codec::DEFAULT_MAX_DEPTH;
    /// Whether the packet may gain fields at its end without breaking older
    /// peers (docs/PROTOCOL.md, section 3.1, "Evolving packets"): a body may
    /// end before its trailing `#[packet(optional)]` fields, which then take
    /// their default, and bytes after its known fields are ignored. Set with
    /// `#[packet(opcode = …, evolving)]`.
    const EVOLVING: bool = false;

    /// The response this packet declares (`response = T`) for the schema,
    /// adding it to `schema`; `None` when it declares none. The derive
    /// generates it.
    fn describe_response(
        schema: &mut crate::schema::SchemaBuilder,
    ) -> Option<crate::schema::ResponseRef> {
        let _ = schema;
        None
    }

    /// Decodes a whole body of this packet, within [`MAX_DEPTH`](Self::MAX_DEPTH).
    /// An [evolving](Self::EVOLVING) packet ignores bytes after its known
    /// fields (a newer peer's fields); any other packet refuses them
    /// ([`DecodeError::TrailingBytes`](crate::DecodeError::TrailingBytes)).
    fn decode_packet(body: &crate::Bytes) -> Result<Self, crate::DecodeError> {
        if Self::EVOLVING {
            let mut reader = crate::codec::Reader::with_max_depth(body, Self::MAX_DEPTH);
            Self::decode(&mut reader)
        } else {
            Self::decode_body_within(body, Self::MAX_DEPTH)
        }
    }

    /// [`decode_packet`](Self::decode_packet) of `body[range]`: one item of
    /// a `STREAM_ITEMS` batch, decoded without a view of its own.
    ///
    /// # Panics
    ///
    /// When `range` is not within `body`.
    #[inline]
    fn decode_packet_within(
        body: &crate::Bytes,
        range: std::ops::Range<usize>,
    ) -> Result<Self, crate::DecodeError> {
        let mut reader = crate::codec::Reader::within(body, range, Self::MAX_DEPTH);
        let value = Self::decode(&mut reader)?;
        if !Self::EVOLVING {
            reader.finish()?;
        }
        Ok(value)
    }
}
