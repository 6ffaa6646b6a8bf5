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
/// Opcode of `RESUME_TICKET` (project allocation, docs/PROTOCOL.md section
/// 4.2): the client asks for a [`ResumeTicket`]; counting starts.
pub const RESUME_TICKET: u16 = 0xFF08;
/// Opcode of `ACK` (project allocation, docs/PROTOCOL.md section 4.2):
/// one-way, how many counted frames the sender has received.
pub const ACK: u16 = 0xFF09;
/// Opcode of `RESUME` (project allocation, docs/PROTOCOL.md section 4.2):
/// the first request of a new connection that takes a session over.
pub const RESUME: u16 = 0xFF0A;
/// Opcode of `DATAGRAM_BIND` (project allocation, docs/PROTOCOL.md section
/// 4.4): on the stream, the client asks for a datagram channel
/// ([`DatagramBinding`]); in a datagram, a keepalive that tells the server
/// where the client is.
pub const DATAGRAM_BIND: u16 = 0xFF0C;
/// Opcode of `TIME` (project allocation, docs/PROTOCOL.md section 4.3):
/// the client asks for the server's clock ([`TimeRequest`], [`TimeResponse`]).
pub const TIME: u16 = 0xFF0B;

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

/// Bytes of a [`Ticket`].
pub const TICKET_LEN: usize = 32;

/// A resumption ticket (section 4.2): 32 random bytes that name a session
/// on the server that issued it. It carries no node id and no key.
///
/// It is a credential: on a plain session it alone resumes the session (a
/// bearer token); on a secure one it must come with a handshake keyed by
/// the session's secret. So its `Debug` shows only its first four
/// bytes, and comparing two takes the same time wherever they differ.
#[derive(Clone)]
pub struct Ticket(pub [u8; TICKET_LEN]);

impl Ticket {
    /// A new ticket from the operating system's random source (the one
    /// that generates static keys).
    pub fn generate() -> Self {
        let mut bytes = [0u8; TICKET_LEN];
        crate::aead::fill_random(&mut bytes);
        Self(bytes)
    }

    /// The ticket's bytes.
    pub fn as_bytes(&self) -> &[u8; TICKET_LEN] {
        &self.0
    }
}

/// Constant time: how far two tickets agree does not show in how long the
/// comparison takes.
impl PartialEq for Ticket {
    fn eq(&self, other: &Self) -> bool {
        let mut difference = 0u8;
        for (a, b) in self.0.iter().zip(other.0.iter()) {
            difference |= a ^ b;
        }
        std::hint::black_box(difference) == 0
    }
}

impl Eq for Ticket {}

/// Hashes all 32 bytes, so a server can key its sessions by ticket. With
/// std's `HashMap` (SipHash under a random key) a lookup's timing says
/// nothing useful of the bytes; the final comparison is constant-time.
impl std::hash::Hash for Ticket {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

/// The first four bytes in hex and "…": enough to tell tickets apart in a
/// log, not enough to use one.
impl fmt::Debug for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Ticket({}…)", crate::secure::to_hex(&self.0[..4]))
    }
}

impl Encode for Ticket {
    fn encode(&self, out: &mut BytesMut) {
        out.put_slice(&self.0);
    }
    fn encoded_len(&self) -> usize {
        TICKET_LEN
    }
}

impl Decode for Ticket {
    const MIN_LEN: usize = TICKET_LEN;
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        reader.read_array().map(Self)
    }
}

/// `RESUME_TICKET`'s request: empty, or (Ternio's clients since 2026-12)
/// the one byte [`TicketRequest::ASK_BOUND`], which asks the server to say
/// its replay buffer's bound in the answer ([`ResumeTicket::replay_bytes`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TicketRequest {
    /// Whether the answer is to carry the server's replay bound.
    pub ask_bound: bool,
}

impl TicketRequest {
    /// The request body's one byte that asks for the replay bound.
    pub const ASK_BOUND: u8 = 1;
}

impl Encode for TicketRequest {
    fn encode(&self, out: &mut BytesMut) {
        if self.ask_bound {
            out.put_u8(Self::ASK_BOUND);
        }
    }
    fn encoded_len(&self) -> usize {
        usize::from(self.ask_bound)
    }
}

impl Decode for TicketRequest {
    const MIN_LEN: usize = 0;
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        if reader.remaining() == 0 {
            return Ok(Self { ask_bound: false });
        }
        match u8::decode(reader)? {
            Self::ASK_BOUND => Ok(Self { ask_bound: true }),
            _ => Err(DecodeError::Invalid(
                "a RESUME_TICKET request body is empty or the byte 1",
            )),
        }
    }
}

impl Packet for TicketRequest {
    const OPCODE: u16 = RESUME_TICKET;
    const NAME: &'static str = "RESUME_TICKET";
}

/// `RESUME_TICKET`'s response: the ticket that resumes this session, and
/// how long the server keeps the session once the connection is lost; and,
/// when the request asked ([`TicketRequest`]), the bound of the server's
/// replay buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeTicket {
    /// The ticket to send in `RESUME`.
    pub ticket: Ticket,
    /// How long, in milliseconds, the server keeps the session after it
    /// loses the connection.
    pub ttl_ms: u32,
    /// The bound of the server's replay buffer, in bytes (7 of header plus
    /// the plain body per frame): only in the answer to a request that
    /// asked for it. A client that knows it acknowledges by it.
    pub replay_bytes: Option<u32>,
}

impl Encode for ResumeTicket {
    fn encode(&self, out: &mut BytesMut) {
        self.ticket.encode(out);
        self.ttl_ms.encode(out);
        if let Some(bound) = self.replay_bytes {
            bound.encode(out);
        }
    }
    fn encoded_len(&self) -> usize {
        TICKET_LEN + 4 + if self.replay_bytes.is_some() { 4 } else { 0 }
    }
}

impl Decode for ResumeTicket {
    const MIN_LEN: usize = TICKET_LEN + 4;
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let ticket = Ticket::decode(reader)?;
        let ttl_ms = u32::decode(reader)?;
        let replay_bytes = match reader.remaining() {
            0 => None,
            _ => Some(u32::decode(reader)?),
        };
        Ok(Self {
            ticket,
            ttl_ms,
            replay_bytes,
        })
    }
}

impl Packet for ResumeTicket {
    const OPCODE: u16 = RESUME_TICKET;
    const NAME: &'static str = "RESUME_TICKET";
}

/// `ACK`: the sender has received `received` counted frames so far on this
/// session (section 4.2); the peer may drop those from its replay buffer.
/// Sent with request id 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    /// Counted frames received so far, over the session's life.
    pub received: u64,
}

impl Encode for Ack {
    fn encode(&self, out: &mut BytesMut) {
        self.received.encode(out);
    }
    fn encoded_len(&self) -> usize {
        8
    }
}

impl Decode for Ack {
    const MIN_LEN: usize = 8;
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        u64::decode(reader).map(|received| Self { received })
    }
}

impl Packet for Ack {
    const OPCODE: u16 = ACK;
    const NAME: &'static str = "ACK";
}

/// The answer to a `DATAGRAM_BIND` request (section 4.4): the binding's
/// token, the server's UDP port (on the stream's host) and its largest
/// datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatagramBinding {
    /// What starts every datagram of the binding.
    pub token: crate::datagram::Token,
    /// The server's UDP port.
    pub port: u16,
    /// The largest datagram (UDP payload) the server sends or takes.
    pub max_datagram: u16,
}

impl Encode for DatagramBinding {
    fn encode(&self, out: &mut BytesMut) {
        out.extend_from_slice(&self.token);
        self.port.encode(out);
        self.max_datagram.encode(out);
    }
    fn encoded_len(&self) -> usize {
        crate::datagram::TOKEN_LEN + 4
    }
}

impl Decode for DatagramBinding {
    const MIN_LEN: usize = crate::datagram::TOKEN_LEN + 4;
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let token = <[u8; crate::datagram::TOKEN_LEN]>::decode(reader)?;
        Ok(Self {
            token,
            port: u16::decode(reader)?,
            max_datagram: u16::decode(reader)?,
        })
    }
}

impl Packet for DatagramBinding {
    const OPCODE: u16 = DATAGRAM_BIND;
    const NAME: &'static str = "DATAGRAM_BIND";
}

/// `RESUME` request (section 4.2): the first frame of a new connection,
/// taking over the session of `ticket`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume {
    /// The session's current ticket.
    pub ticket: Ticket,
    /// Counted frames the client has received from the server.
    pub received: u64,
    /// 0 plain, 3 `NNpsk0`, 4 `NKpsk0` ([`ResumePattern`](crate::resume::ResumePattern)).
    pub pattern: u8,
    /// The first Noise message (empty on a plain session): the rest of the
    /// body, with no length in front.
    pub message: Bytes,
}

impl Encode for Resume {
    fn encode(&self, out: &mut BytesMut) {
        self.ticket.encode(out);
        self.received.encode(out);
        self.pattern.encode(out);
        out.put_slice(&self.message);
    }
    fn encoded_len(&self) -> usize {
        TICKET_LEN + 8 + 1 + self.message.len()
    }
}

impl Decode for Resume {
    const MIN_LEN: usize = TICKET_LEN + 8 + 1;
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            ticket: Ticket::decode(reader)?,
            received: u64::decode(reader)?,
            pattern: u8::decode(reader)?,
            message: reader.read_rest(),
        })
    }
}

impl Packet for Resume {
    const OPCODE: u16 = RESUME;
    const NAME: &'static str = "RESUME";
}

/// `RESUME`'s response (same opcode, `RESPONSE` set): the session is taken
/// over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resumed {
    /// Counted frames the server has received from the client.
    pub received: u64,
    /// The session's new ticket: the one just used is dead.
    pub ticket: Ticket,
    /// How long, in milliseconds, the server keeps the session after it
    /// loses this connection.
    pub ttl_ms: u32,
    /// The second Noise message (empty on a plain session): the rest of the
    /// body, with no length in front.
    pub message: Bytes,
}

impl Encode for Resumed {
    fn encode(&self, out: &mut BytesMut) {
        self.received.encode(out);
        self.ticket.encode(out);
        self.ttl_ms.encode(out);
        out.put_slice(&self.message);
    }
    fn encoded_len(&self) -> usize {
        8 + TICKET_LEN + 4 + self.message.len()
    }
}

impl Decode for Resumed {
    const MIN_LEN: usize = 8 + TICKET_LEN + 4;
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            received: u64::decode(reader)?,
            ticket: Ticket::decode(reader)?,
            ttl_ms: u32::decode(reader)?,
            message: reader.read_rest(),
        })
    }
}

impl Packet for Resumed {
    const OPCODE: u16 = RESUME;
    const NAME: &'static str = "RESUME";
}

/// `TIME` request (section 4.3): sent by the client with a non-zero id;
/// `client_time` is opaque to the server, which echoes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeRequest {
    /// The client's clock when it sent the request (the client's business:
    /// Ternio's client sends microseconds since the Unix epoch).
    pub client_time: u64,
}

impl Encode for TimeRequest {
    fn encode(&self, out: &mut BytesMut) {
        self.client_time.encode(out);
    }
    fn encoded_len(&self) -> usize {
        8
    }
}

impl Decode for TimeRequest {
    const MIN_LEN: usize = 8;
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        u64::decode(reader).map(|client_time| Self { client_time })
    }
}

impl Packet for TimeRequest {
    const OPCODE: u16 = TIME;
    const NAME: &'static str = "TIME";
}

/// `TIME` response (section 4.3): the request's `client_time`, and the
/// server's wall clock, in microseconds since the Unix epoch, when it read
/// the request and when it wrote this answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeResponse {
    /// The request's `client_time`, echoed.
    pub client_time: u64,
    /// The server's clock when it read the request (µs since the epoch).
    pub server_receive: u64,
    /// The server's clock when it wrote the answer (µs since the epoch).
    pub server_send: u64,
}

impl TimeResponse {
    /// The microseconds since the Unix epoch of `time` (0 before the epoch,
    /// saturated past `u64::MAX`): how `TIME` writes a wall clock.
    pub fn micros(time: std::time::SystemTime) -> u64 {
        time.duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| {
                u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
            })
    }

    /// What a received `TIME` request frame asks for: the answer's header
    /// (`RESPONSE`, same id) and body, stamped with `clock` (read twice:
    /// on receipt and on writing), or why the frame is refused (id 0, or a
    /// body that is not exactly a `u64`).
    pub fn answer(
        header: Header,
        body: &Bytes,
        mut clock: impl FnMut() -> u64,
    ) -> Result<(Header, TimeResponse), DecodeError> {
        let server_receive = clock();
        if header.request_id == 0 {
            return Err(DecodeError::Invalid("TIME is a request: non-zero id"));
        }
        let request = TimeRequest::decode_body(body)?;
        let response = TimeResponse {
            client_time: request.client_time,
            server_receive,
            server_send: clock(),
        };
        Ok((
            Header::new(TIME, Flags::RESPONSE, header.request_id),
            response,
        ))
    }
}

impl Encode for TimeResponse {
    fn encode(&self, out: &mut BytesMut) {
        self.client_time.encode(out);
        self.server_receive.encode(out);
        self.server_send.encode(out);
    }
    fn encoded_len(&self) -> usize {
        24
    }
}

impl Decode for TimeResponse {
    const MIN_LEN: usize = 24;
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            client_time: u64::decode(reader)?,
            server_receive: u64::decode(reader)?,
            server_send: u64::decode(reader)?,
        })
    }
}

impl Packet for TimeResponse {
    const OPCODE: u16 = TIME;
    const NAME: &'static str = "TIME";
}

/// Whether frames under `opcode` are counted for resumption (section 4.2):
/// application opcodes `0x0000..=0xFEFF` and the stream opcodes
/// `STREAM_ITEM`, `STREAM_CREDIT`, `STREAM_END` and `STREAM_ITEMS`
/// (`0xFF0D..=0xFF10`, since 2026-12: streams resume with the session,
/// section 4.5) are, in either direction and whatever their flags; the
/// other system opcodes never are.
pub const fn is_counted(opcode: u16) -> bool {
    opcode < 0xFF00 || crate::stream::is_stream_opcode(opcode)
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

    fn encoded<T: Encode>(value: &T) -> Bytes {
        let mut out = BytesMut::new();
        value.encode(&mut out);
        assert_eq!(out.len(), value.encoded_len());
        out.freeze()
    }

    #[test]
    fn resumption_packets_round_trip() {
        let ticket = Ticket(std::array::from_fn(|i| i as u8));
        let answer = ResumeTicket {
            ticket: ticket.clone(),
            ttl_ms: 30_000,
            replay_bytes: None,
        };
        let body = encoded(&answer);
        assert_eq!(body.len(), 36);
        assert_eq!(&body[32..], 30_000u32.to_le_bytes());
        assert_eq!(ResumeTicket::decode_body(&body), Ok(answer));
        // Asked for, the bound follows.
        let answer = ResumeTicket {
            ticket: ticket.clone(),
            ttl_ms: 30_000,
            replay_bytes: Some(65_536),
        };
        let body = encoded(&answer);
        assert_eq!(&body[32..], [0x30, 0x75, 0, 0, 0, 0, 1, 0]);
        assert_eq!(ResumeTicket::decode_body(&body), Ok(answer));
        for ask_bound in [false, true] {
            let request = TicketRequest { ask_bound };
            let body = encoded(&request);
            assert_eq!(&body[..], if ask_bound { &[1][..] } else { &[] });
            assert_eq!(TicketRequest::decode_body(&body), Ok(request));
        }
        let ack = Ack { received: 7 };
        assert_eq!(Ack::decode_body(&encoded(&ack)), Ok(ack));
        for message in [Bytes::new(), Bytes::from_static(&[9; 48])] {
            let resume = Resume {
                ticket: ticket.clone(),
                received: 3,
                pattern: 3,
                message: message.clone(),
            };
            let body = encoded(&resume);
            assert_eq!(&body[32..41], [3, 0, 0, 0, 0, 0, 0, 0, 3]);
            assert_eq!(Resume::decode_body(&body), Ok(resume));
            let resumed = Resumed {
                received: 5,
                ticket: ticket.clone(),
                ttl_ms: 1,
                message,
            };
            assert_eq!(Resumed::decode_body(&encoded(&resumed)), Ok(resumed));
        }
        assert_eq!(<Resumed as Packet>::OPCODE, RESUME);
        assert!(is_counted(0x0000) && is_counted(0xFEFF));
        assert!(!is_counted(ACK) && !is_counted(0xFF00));
        // Stream frames resume with the session; other system frames do not.
        assert!(is_counted(0xFF0D) && is_counted(0xFF0E) && is_counted(0xFF0F));
        assert!(is_counted(0xFF10));
        assert!(!is_counted(CANCEL) && !is_counted(0xFF0C) && !is_counted(0xFF11));
    }

    #[test]
    fn resumption_packets_refuse_short_and_trailing_bodies() {
        let body = encoded(&ResumeTicket {
            ticket: Ticket([1; 32]),
            ttl_ms: 5,
            replay_bytes: Some(1024),
        });
        assert!(ResumeTicket::decode_body(&body.slice(..35)).is_err());
        // Between the short answer and the long one: neither.
        for len in 37..40 {
            assert!(ResumeTicket::decode_body(&body.slice(..len)).is_err());
        }
        let mut long = BytesMut::from(&body[..]);
        long.put_u8(0);
        assert!(ResumeTicket::decode_body(&long.freeze()).is_err());
        for bad in [&[0u8][..], &[2], &[1, 0]] {
            let body = Bytes::copy_from_slice(bad);
            assert!(TicketRequest::decode_body(&body).is_err(), "{bad:?}");
        }
        assert!(Ack::decode_body(&Bytes::from_static(&[1; 7])).is_err());
        assert!(Ack::decode_body(&Bytes::from_static(&[1; 9])).is_err());
        // Resume and Resumed take the rest as the message, but not less than
        // their fixed fields.
        assert!(Resume::decode_body(&Bytes::from_static(&[0; 40])).is_err());
        assert!(Resume::decode_body(&Bytes::from_static(&[0; 41])).is_ok());
        assert!(Resumed::decode_body(&Bytes::from_static(&[0; 43])).is_err());
        assert!(Resumed::decode_body(&Bytes::from_static(&[0; 44])).is_ok());
    }

    #[test]
    fn a_ticket_shows_little_and_compares_whole() {
        let mut bytes = [0xAB; 32];
        bytes[..4].copy_from_slice(&[0xDE, 0xAD, 0xBE, 0xEF]);
        let ticket = Ticket(bytes);
        assert_eq!(format!("{ticket:?}"), "Ticket(deadbeef…)");
        let mut other = bytes;
        other[31] = 0;
        assert_ne!(ticket, Ticket(other));
        assert_eq!(ticket, Ticket(bytes));
        assert_ne!(Ticket::generate(), Ticket::generate());
    }

    #[test]
    fn a_time_request_gets_its_stamps_or_is_refused() {
        let mut body = BytesMut::new();
        TimeRequest { client_time: 7 }.encode(&mut body);
        let body = body.freeze();
        let mut now = 100;
        let mut clock = || {
            now += 1;
            now
        };
        let request = Header::new(TIME, Flags::NONE, 9);
        let (header, response) = TimeResponse::answer(request, &body, &mut clock).unwrap();
        assert_eq!(header, Header::new(TIME, Flags::RESPONSE, 9));
        assert_eq!(
            response,
            TimeResponse {
                client_time: 7,
                server_receive: 101,
                server_send: 102
            }
        );
        let zero = Header::new(TIME, Flags::NONE, 0);
        assert!(TimeResponse::answer(zero, &body, &mut clock).is_err());
        for bad in [&body[..7], &[0u8; 9][..], &[][..]] {
            let bad = Bytes::copy_from_slice(bad);
            assert!(TimeResponse::answer(request, &bad, &mut clock).is_err());
        }
        assert_eq!(TimeResponse::micros(std::time::UNIX_EPOCH), 0);
        let later = std::time::UNIX_EPOCH + std::time::Duration::from_micros(1_234_567);
        assert_eq!(TimeResponse::micros(later), 1_234_567);
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
