//! System packets (section 4) and the body of error responses (section 2).
//!
//! Error and `DISCONNECT` messages take the rest of the body as UTF-8 text
//! with no length in front. A receiver reads invalid UTF-8 there lossily
//! rather than failing: the text is for people, the code is for programs.

use std::fmt::{self, Write};

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{Decode, Encode, Reader};
use crate::error::{DecodeError, DisconnectReason, ErrorCode};
use crate::frame::{Flags, Header};
use crate::packet::Packet;

/// Opcode of `HANDSHAKE` (section 5).
pub const HANDSHAKE: u16 = 0xFF01;
/// Opcode of `PING`.
pub const PING: u16 = 0xFF02;
/// Opcode of `PONG`.
pub const PONG: u16 = 0xFF03;
/// Opcode of `DISCONNECT`.
pub const DISCONNECT: u16 = 0xFF04;
/// Opcode of `REKEY` (section 5.2): empty, request id 0, only ever sealed.
pub const REKEY: u16 = 0xFF05;
/// Opcode of `CANCEL` (project allocation, docs/PROTOCOL.md section 4.1):
/// one-way, the requester no longer waits for a request.
pub const CANCEL: u16 = 0xFF06;
/// Opcode of `DEADLINE` (project allocation, docs/PROTOCOL.md section 4.1):
/// one-way, how long the requester will wait for a request it sends next.
pub const DEADLINE: u16 = 0xFF07;

/// `PING`: an opaque value (a timestamp) that the peer sends back in a `PONG`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ping {
    /// The value to echo.
    pub value: u64,
}

/// `PONG`: the `RESPONSE` to a `PING`, carrying its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pong {
    /// The value of the `PING` answered.
    pub value: u64,
}

macro_rules! u64_packet {
    ($ty:ident, $opcode:expr, $name:literal) => {
        impl Encode for $ty {
            fn encode(&self, out: &mut BytesMut) {
                self.value.encode(out);
            }
            fn encoded_len(&self) -> usize {
                8
            }
        }
        impl Decode for $ty {
            const MIN_LEN: usize = 8;
            fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
                u64::decode(reader).map(|value| Self { value })
            }
        }
        impl Packet for $ty {
            const OPCODE: u16 = $opcode;
            const NAME: &'static str = $name;
        }
    };
}

u64_packet!(Ping, PING, "PING");
u64_packet!(Pong, PONG, "PONG");

impl Ping {
    /// What a received `PING` frame asks for: `None` when nothing (id 0),
    /// else the `PONG` to send back (its header, `RESPONSE` with the same
    /// id, and its body, the same value), or why the body is unreadable.
    pub fn answer(header: Header, body: &Bytes) -> Option<Result<(Header, Pong), DecodeError>> {
        if header.request_id == 0 {
            return None;
        }
        let pong = Self::decode_body(body).map(|ping| Pong { value: ping.value });
        Some(pong.map(|pong| (Header::new(PONG, Flags::RESPONSE, header.request_id), pong)))
    }
}

/// `CANCEL`: the requester stopped waiting for request `request_id` (its
/// timeout passed, or it dropped the request); the peer may stop working on
/// it and sends no answer. Sent with request id 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancel {
    /// The id of the request given up.
    pub request_id: u32,
}

impl Encode for Cancel {
    fn encode(&self, out: &mut BytesMut) {
        self.request_id.encode(out);
    }
    fn encoded_len(&self) -> usize {
        4
    }
}

impl Decode for Cancel {
    const MIN_LEN: usize = 4;
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        u32::decode(reader).map(|request_id| Self { request_id })
    }
}

impl Packet for Cancel {
    const OPCODE: u16 = CANCEL;
    const NAME: &'static str = "CANCEL";
}

/// `DEADLINE`: the requester waits at most `budget_ms` milliseconds, from
/// when this frame is read, for the answer to request `request_id`, which
/// it sends next. Sent with request id 0, before the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    /// The id of the request it is for.
    pub request_id: u32,
    /// How long the requester waits, in milliseconds.
    pub budget_ms: u32,
}

impl Encode for Deadline {
    fn encode(&self, out: &mut BytesMut) {
        self.request_id.encode(out);
        self.budget_ms.encode(out);
    }
    fn encoded_len(&self) -> usize {
        8
    }
}

impl Decode for Deadline {
    const MIN_LEN: usize = 8;
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            request_id: u32::decode(reader)?,
            budget_ms: u32::decode(reader)?,
        })
    }
}

impl Packet for Deadline {
    const OPCODE: u16 = DEADLINE;
    const NAME: &'static str = "DEADLINE";
}

/// `DISCONNECT`: sent before closing on purpose, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disconnect {
    /// Why the connection closes.
    pub reason: DisconnectReason,
    /// Words for people.
    pub message: String,
}

impl Disconnect {
    /// A `DISCONNECT` with the given reason and text.
    pub fn new(reason: DisconnectReason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}

impl Encode for Disconnect {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u16_le(self.reason.to_u16());
        out.put_slice(self.message.as_bytes());
    }
    fn encoded_len(&self) -> usize {
        2 + self.message.len()
    }
}

impl Disconnect {
    /// Reads a received `DISCONNECT`'s body. The peer closes whatever it
    /// says, so an unreadable body is no error: it reads as `MALFORMED`,
    /// "unreadable DISCONNECT".
    pub fn decode_lossy(body: &Bytes) -> Self {
        Self::decode_body(body)
            .unwrap_or_else(|_| Self::new(DisconnectReason::Malformed, "unreadable DISCONNECT"))
    }
}

impl Decode for Disconnect {
    const MIN_LEN: usize = 2;
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let reason = DisconnectReason::from_u16(u16::decode(reader)?);
        let message = String::from_utf8_lossy(&reader.read_rest()).into_owned();
        Ok(Self { reason, message })
    }
}

impl Packet for Disconnect {
    const OPCODE: u16 = DISCONNECT;
    const NAME: &'static str = "DISCONNECT";
}

/// The body of an error response: `code: u16`, then a UTF-8 message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorBody {
    /// The error code.
    pub code: ErrorCode,
    /// Words for people.
    pub message: String,
}

impl ErrorBody {
    /// Parses the body of a `RESPONSE | ERROR` frame.
    pub fn parse(body: &Bytes) -> Result<Self, DecodeError> {
        let mut reader = Reader::new(body);
        let code = ErrorCode::from_u16(u16::decode(&mut reader)?);
        let message = String::from_utf8_lossy(&reader.read_rest()).into_owned();
        Ok(Self { code, message })
    }

    /// Appends an error body to `out`, formatting `message` in place.
    pub fn write(out: &mut BytesMut, code: u16, message: &dyn fmt::Display) {
        out.put_u16_le(code);
        // Writing into a BytesMut cannot fail.
        let _ = write!(out, "{message}");
    }
}

impl fmt::Display for ErrorBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disconnect_text_has_no_length_prefix() {
        let mut out = BytesMut::new();
        Disconnect::new(DisconnectReason::FrameTooLarge, "big").encode(&mut out);
        assert_eq!(&out[..], [4, 0, b'b', b'i', b'g']);
        let back = Disconnect::decode_body(&out.freeze()).unwrap();
        assert_eq!(back.reason, DisconnectReason::FrameTooLarge);
        assert_eq!(back.message, "big");
    }

    #[test]
    fn cancel_and_deadline_bodies_match_the_vectors() {
        // docs/PROTOCOL.md, "Cancellation and deadlines" vectors.
        let mut out = BytesMut::new();
        Cancel { request_id: 42 }.encode(&mut out);
        assert_eq!(&out[..], [0x2A, 0, 0, 0]);
        assert_eq!(
            Cancel::decode_body(&out.freeze()),
            Ok(Cancel { request_id: 42 })
        );
        let mut out = BytesMut::new();
        Deadline {
            request_id: 42,
            budget_ms: 1500,
        }
        .encode(&mut out);
        assert_eq!(&out[..], [0x2A, 0, 0, 0, 0xDC, 0x05, 0, 0]);
        assert_eq!(
            Deadline::decode_body(&out.freeze()),
            Ok(Deadline {
                request_id: 42,
                budget_ms: 1500
            })
        );
        assert!(Cancel::decode_body(&Bytes::from_static(&[1, 0, 0])).is_err());
        assert!(Deadline::decode_body(&Bytes::from_static(&[1, 0, 0, 0, 1, 0, 0, 0, 9])).is_err());
    }

    #[test]
    fn a_ping_with_an_id_gets_its_pong() {
        let mut body = BytesMut::new();
        Ping { value: 0x0102 }.encode(&mut body);
        let body = body.freeze();
        let ping = Header::new(PING, Flags::NONE, 3);
        assert_eq!(
            Ping::answer(ping, &body),
            Some(Ok((
                Header::new(PONG, Flags::RESPONSE, 3),
                Pong { value: 0x0102 }
            )))
        );
        assert_eq!(Ping::answer(Header::new(PING, Flags::NONE, 0), &body), None);
        let short = body.slice(..7);
        assert!(matches!(Ping::answer(ping, &short), Some(Err(_))));
    }

    #[test]
    fn an_unreadable_disconnect_reads_as_malformed() {
        let mut out = BytesMut::new();
        Disconnect::new(DisconnectReason::Kicked, "bye").encode(&mut out);
        let read = Disconnect::decode_lossy(&out.freeze());
        assert_eq!(read, Disconnect::new(DisconnectReason::Kicked, "bye"));
        let read = Disconnect::decode_lossy(&Bytes::from_static(&[1]));
        assert_eq!(
            read,
            Disconnect::new(DisconnectReason::Malformed, "unreadable DISCONNECT")
        );
    }

    #[test]
    fn error_body_round_trips() {
        let mut out = BytesMut::new();
        ErrorBody::write(&mut out, 1, &"no handler for 0x0042");
        assert_eq!(&out[..2], [1, 0]);
        let body = ErrorBody::parse(&out.freeze()).unwrap();
        assert_eq!(body.code, ErrorCode::UnknownOpcode);
        assert_eq!(body.message, "no handler for 0x0042");
    }
}
