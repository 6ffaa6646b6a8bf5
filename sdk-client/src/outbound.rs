//! A link's outbound buffer, whatever carries its bytes: frames are checked,
//! sealed once the secure channel is up and framed for the wire into one
//! buffer, which the transport then writes. Sealing happens here, under the
//! transport's outbound lock, so that counters reach the wire in order.

use std::io;

use bytes::BufMut;
use ternio_protocol::buffers::empty;
use ternio_protocol::frame::{self, Flags, Framing, HEADER_LEN, Header};
use ternio_protocol::secure::{COUNTER_LEN, Sealer, TAG_LEN};
use ternio_protocol::system;
use ternio_protocol::{BytesMut, Encode, FrameError};

use crate::config::MAX_FRAMING;
use crate::error::CloseReason;
use crate::send::{Mode, SendError, TakeAck};

/// How frames are wrapped on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wire {
    /// A u32 length prefix per frame (contract section 1.1).
    Tcp,
    /// One masked binary WebSocket message per frame (section 1.2).
    WebSocket,
}

impl Wire {
    fn framing(self) -> Framing {
        match self {
            Self::Tcp => Framing::LengthPrefixed,
            Self::WebSocket => Framing::Message,
        }
    }
}

/// Frames encoded but not yet written, and how the next ones are encoded.
#[derive(Default)]
pub(crate) struct Outbound {
    /// The bytes to write, in order.
    pub(crate) buf: BytesMut,
    /// A WebSocket frame is encoded here first, then masked into `buf`.
    scratch: BytesMut,
    /// The writer task owns the flushing until the buffer is empty.
    pub(crate) writer_active: bool,
    /// No more frames are taken (the link is shutting).
    pub(crate) stopped: bool,
    /// Seals every frame once the secure channel is up.
    sealer: Option<Sealer>,
    /// A `HANDSHAKE` went out and its answer has not been read: nothing
    /// else goes out until then (contract section 5.1).
    handshaking: bool,
    /// A frame was encoded: an `ACK` alone is never a link's first frame
    /// (a link that resumes a session starts with its `RESUME`).
    framed: bool,
}

impl Outbound {
    /// Encodes one frame as `mode` says into `buf`, framed for `wire`; the
    /// caller writes it. Once the secure channel is up every frame but
    /// [`Mode::PlainFinal`] is sealed (after a `REKEY`, when one is due).
    /// Nothing but that one goes out while a handshake waits for its
    /// answer. A frame that could take `buf` past `limit` is not encoded:
    /// the link must then be lost ([`CloseReason::OutboundFull`]), and the
    /// buffer takes nothing more.
    pub(crate) fn encode<E: Encode + ?Sized>(
        &mut self,
        wire: Wire,
        limit: usize,
        mode: Mode,
        header: Header,
        body: &E,
        max_frame_size: usize,
    ) -> Result<(), SendError> {
        if self.stopped {
            return Err(SendError::Gone);
        }
        if self.handshaking && mode != Mode::PlainFinal {
            return Err(SendError::Handshaking);
        }
        let sealer = match (mode, self.sealer.as_mut()) {
            (Mode::Sealable { .. }, Some(sealer)) => Some(sealer),
            (Mode::Sealable { required: true, .. }, None) => return Err(SendError::NotSecure),
            (Mode::Handshake, Some(_)) => return Err(SendError::NotSecure),
            _ => None,
        };
        // Both checks before encoding: the buffer never holds more than
        // its bound, even for a moment.
        let body_len = body.encoded_len();
        let (len, max) = match sealer {
            Some(_) => (
                HEADER_LEN + COUNTER_LEN + body_len,
                max_frame_size.saturating_sub(TAG_LEN),
            ),
            None => (HEADER_LEN + body_len, max_frame_size),
        };
        if len > max {
            return Err(SendError::TooLarge(FrameError::TooLarge { len, max }));
        }
        // The body and a bound on its framing (a REKEY included).
        if self.buf.len() + body_len + MAX_FRAMING > limit {
            self.stopped = true;
            return Err(SendError::Lost(CloseReason::OutboundFull {
                limit,
                queued: self.buf.len(),
            }));
        }
        let compress = match mode {
            Mode::Sealable { compress, .. } => compress,
            _ => None,
        };
        let encoded = match sealer {
            Some(sealer) => seal_into(
                sealer,
                wire,
                (&mut self.buf, &mut self.scratch),
                header,
                (body, compress),
                max_frame_size,
            ),
            None => {
                let target = match wire {
                    Wire::Tcp => &mut self.buf,
                    Wire::WebSocket => &mut self.scratch,
                };
                frame::write_frame_compressing(
                    target,
                    wire.framing(),
                    header,
                    max_frame_size,
                    compress,
                    |out| {
                        out.reserve(body_len);
                        body.encode(out);
                    },
                )
                .map(|_| ())
            }
        };
        if let Err(error) = encoded {
            empty(&mut self.scratch);
            return Err(SendError::TooLarge(error));
        }
        if mode == Mode::Handshake {
            self.handshaking = true;
        }
        self.framed = true;
        if wire == Wire::WebSocket {
            write_masked(&mut self.buf, &self.scratch);
            empty(&mut self.scratch);
        }
        Ok(())
    }

    /// [`encode`](Self::encode), after the session's `ACK` when one rides
    /// along: `take_ack` takes its count, and is called only when nothing
    /// keeps the `ACK` from being queued now (the buffer takes frames, no
    /// handshake waits), so that a count taken always leaves with the
    /// link. Both then go out in one write, and the server reads them
    /// together, rather than a system call and a wake-up on each side for
    /// the `ACK` alone. Should the frame be refused, the `ACK` stays
    /// queued: the caller writes it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn encode_after<E: Encode + ?Sized>(
        &mut self,
        take_ack: Option<TakeAck<'_>>,
        wire: Wire,
        limit: usize,
        mode: Mode,
        header: Header,
        body: &E,
        max_frame_size: usize,
    ) -> Result<(), SendError> {
        if let Some(take_ack) = take_ack {
            match self.queue_ack(take_ack, wire, limit, max_frame_size) {
                // The frame cannot go either: `encode` says why.
                Ok(()) | Err(SendError::Handshaking | SendError::Gone) => {}
                Err(error) => return Err(error),
            }
        }
        self.encode(wire, limit, mode, header, body, max_frame_size)
    }

    /// Queues the session's `ACK`, its count taken by `take_ack` only when
    /// nothing keeps it from being queued now: refused (nothing taken)
    /// while the buffer takes no frames or a handshake (or a `RESUME`)
    /// waits for its answer; `Ok` with nothing queued or taken before the
    /// link's first frame; `Ok` when queued, or when nothing was left to
    /// acknowledge.
    pub(crate) fn queue_ack(
        &mut self,
        take_ack: TakeAck<'_>,
        wire: Wire,
        limit: usize,
        max_frame_size: usize,
    ) -> Result<(), SendError> {
        if self.stopped {
            return Err(SendError::Gone);
        }
        if self.handshaking {
            return Err(SendError::Handshaking);
        }
        if !self.framed {
            return Ok(());
        }
        let Some(ack) = take_ack() else {
            return Ok(());
        };
        let mode = Mode::Sealable {
            required: false,
            compress: None,
        };
        let header = Header::new(system::ACK, Flags::NONE, 0);
        // Fails only when the buffer is full: the link is lost, and the
        // `RESUME` that follows reports the count.
        self.encode(wire, limit, mode, header, &ack, max_frame_size)
    }

    /// Appends bytes already framed (tungstenite's control frames and the
    /// upgrade request), within `limit`.
    pub(crate) fn push_raw(&mut self, bytes: &[u8], limit: usize) -> io::Result<()> {
        if self.buf.len().saturating_add(bytes.len()) > limit {
            self.stopped = true;
            return Err(io::Error::other(format!(
                "the outbound buffer is full ({} of {} bytes)",
                self.buf.len(),
                limit
            )));
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    /// Ends the wait for a handshake's answer: with a sealer, every frame
    /// from now on is sealed; without one (the handshake failed), frames go
    /// plain again.
    pub(crate) fn end_handshake(&mut self, sealer: Option<Sealer>) {
        self.handshaking = false;
        if let Some(sealer) = sealer {
            self.sealer = Some(sealer);
        }
    }
}

/// Seals one frame into `buf` (TCP) or `scratch` (WebSocket, masked into
/// `buf` by the caller), after a `REKEY` when one is due: a WebSocket
/// `REKEY` goes into `buf` at once, as a message of its own. The body is
/// compressed before sealing when `compress` gives a threshold it reaches.
fn seal_into<E: Encode + ?Sized>(
    sealer: &mut Sealer,
    wire: Wire,
    (buf, scratch): (&mut BytesMut, &mut BytesMut),
    header: Header,
    (body, compress): (&E, Option<usize>),
    max_frame_size: usize,
) -> Result<(), FrameError> {
    let framing = wire.framing();
    let target = match wire {
        Wire::Tcp => &mut *buf,
        Wire::WebSocket => &mut *scratch,
    };
    let rekeyed = sealer.rekey_if_due(target, framing);
    if rekeyed == Ok(true) && wire == Wire::WebSocket {
        write_masked(buf, scratch);
        scratch.clear();
    }
    let target = match wire {
        Wire::Tcp => buf,
        Wire::WebSocket => scratch,
    };
    rekeyed.and_then(|_| {
        sealer
            .write_frame_compressing(
                target,
                framing,
                header,
                max_frame_size,
                compress,
                |out| {
                    out.reserve(body.encoded_len() + TAG_LEN);
                    body.encode(out);
                },
                |_| {},
            )
            .map(|_| ())
    })
}

/// The first header byte of a whole binary message: FIN and opcode 0x2.
const FIN_BINARY: u8 = 0x82;
/// The mask bit of the second header byte: every client frame is masked.
const MASKED: u8 = 0x80;

/// Appends `payload` as one whole binary WebSocket message, masked with a
/// fresh random key as RFC 6455 requires of a client (section 5.3).
fn write_masked(out: &mut BytesMut, payload: &[u8]) {
    let len = payload.len();
    out.reserve(14 + len);
    out.put_u8(FIN_BINARY);
    if len < 126 {
        out.put_u8(MASKED | len as u8);
    } else if let Ok(len) = u16::try_from(len) {
        out.put_u8(MASKED | 126);
        out.put_u16(len);
    } else {
        out.put_u8(MASKED | 127);
        out.put_u64(len as u64);
    }
    let key: [u8; 4] = rand::random();
    out.put_slice(&key);
    let key8 = u64::from_ne_bytes([
        key[0], key[1], key[2], key[3], key[0], key[1], key[2], key[3],
    ]);
    let mut chunks = payload.chunks_exact(8);
    for chunk in &mut chunks {
        let word = u64::from_ne_bytes(chunk.try_into().expect("8 bytes")) ^ key8;
        out.put_slice(&word.to_ne_bytes());
    }
    for (i, byte) in chunks.remainder().iter().enumerate() {
        out.put_u8(byte ^ key[i & 3]);
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use ternio_protocol::Bytes;
    use ternio_protocol::frame::Flags;
    use ternio_protocol::system::Ack;
    use tokio_tungstenite::tungstenite::protocol::frame::FrameHeader;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};

    use super::*;

    #[test]
    fn masked_frames_parse_back_at_every_length_encoding() {
        for len in [0, 1, 7, 8, 125, 126, 127, 1000, 65_535, 65_536, 70_001] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let mut out = BytesMut::new();
            write_masked(&mut out, &payload);
            let mut cursor = Cursor::new(&out[..]);
            let (header, length) = FrameHeader::parse(&mut cursor).unwrap().unwrap();
            assert!(header.is_final);
            assert_eq!(header.opcode, OpCode::Data(Data::Binary));
            assert_eq!(length, len as u64);
            let key = header.mask.expect("client frames are masked");
            let body = &out[cursor.position() as usize..];
            assert_eq!(body.len(), len);
            let unmasked: Vec<u8> = body
                .iter()
                .enumerate()
                .map(|(i, byte)| byte ^ key[i % 4])
                .collect();
            assert_eq!(unmasked, payload, "length {len}");
        }
    }

    /// The frames in `buf` (TCP framing): opcode and body of each.
    fn frames(buf: &[u8]) -> Vec<(u16, Vec<u8>)> {
        let mut rest = BytesMut::from(buf);
        let mut decoder = frame::FrameDecoder::new(1 << 20);
        let mut frames = Vec::new();
        while let Some((header, body)) = decoder.decode_mut(&mut rest).unwrap() {
            frames.push((header.opcode, body.to_vec()));
        }
        assert!(rest.is_empty());
        frames
    }

    /// An `ACK` that rides along goes just before the frame; its count is
    /// taken only when it can be queued (not while a handshake waits); a
    /// frame refused leaves it queued.
    #[test]
    fn an_ack_rides_ahead_of_its_frame_and_its_count_is_taken_only_when_it_can_go() {
        let mode = Mode::Sealable {
            required: false,
            compress: None,
        };
        let header = Header::new(7, Flags::NONE, 0);
        let taken = std::cell::Cell::new(0);
        let take = || {
            taken.set(taken.get() + 1);
            Some(Ack { received: 20 })
        };
        // A link that sent its first frame already.
        let started = || {
            let mut out = Outbound::default();
            out.encode(Wire::Tcp, 1 << 20, mode, header, &4u8, 1 << 20)
                .unwrap();
            out.buf.clear();
            out
        };
        let mut out = started();
        out.encode_after(Some(&take), Wire::Tcp, 1 << 20, mode, header, &5u8, 1 << 20)
            .unwrap();
        let ack = (system::ACK, 20u64.to_le_bytes().to_vec());
        assert_eq!(frames(&out.buf), [ack.clone(), (7, vec![5])]);
        // A frame too large: refused, the `ACK` queued all the same.
        let mut out = started();
        let large = Bytes::from(vec![0u8; 100]);
        let refused = out.encode_after(Some(&take), Wire::Tcp, 1 << 20, mode, header, &large, 50);
        assert!(matches!(refused, Err(SendError::TooLarge(_))));
        assert_eq!(frames(&out.buf), [ack]);
        // A handshake waits: nothing queued, and no count taken.
        let mut out = Outbound::default();
        let hello = Header::new(system::HANDSHAKE, Flags::NONE, 1);
        out.encode(Wire::Tcp, 1 << 20, Mode::Handshake, hello, &1u8, 1 << 20)
            .unwrap();
        let queued = out.buf.len();
        taken.set(0);
        let waiting =
            out.encode_after(Some(&take), Wire::Tcp, 1 << 20, mode, header, &5u8, 1 << 20);
        assert!(matches!(waiting, Err(SendError::Handshaking)));
        assert_eq!((taken.get(), out.buf.len()), (0, queued));
    }

    /// An `ACK` alone is never a link's first frame (a link that resumes a
    /// session must start with its `RESUME`), nor queued while a `RESUME`
    /// waits for its answer: its count is not even taken; then it goes.
    #[test]
    fn an_ack_alone_is_never_a_links_first_frame() {
        let taken = std::cell::Cell::new(0);
        let take = || {
            taken.set(taken.get() + 1);
            Some(Ack { received: 3 })
        };
        let mut out = Outbound::default();
        out.queue_ack(&take, Wire::Tcp, 1 << 20, 1 << 20).unwrap();
        assert_eq!(
            (taken.get(), out.buf.len()),
            (0, 0),
            "nothing before a first frame"
        );
        let resume = Header::new(system::RESUME, Flags::NONE, 1);
        out.encode(Wire::Tcp, 1 << 20, Mode::Handshake, resume, &1u8, 1 << 20)
            .unwrap();
        let waiting = out.queue_ack(&take, Wire::Tcp, 1 << 20, 1 << 20);
        assert!(matches!(waiting, Err(SendError::Handshaking)));
        assert_eq!(taken.get(), 0);
        out.end_handshake(None);
        out.queue_ack(&take, Wire::Tcp, 1 << 20, 1 << 20).unwrap();
        assert_eq!(taken.get(), 1);
        let ack = (system::ACK, 3u64.to_le_bytes().to_vec());
        assert_eq!(frames(&out.buf), [(system::RESUME, vec![1]), ack]);
    }

    /// A frame too large is refused before a byte of it is queued, even
    /// when the queue has room for it.
    #[test]
    fn a_frame_too_large_is_refused_before_it_is_encoded() {
        let mut out = Outbound::default();
        let body = Bytes::from(vec![1u8; 1000]);
        let header = Header::new(1, Flags::NONE, 0);
        let mode = Mode::Sealable {
            required: false,
            compress: None,
        };
        match out.encode(Wire::Tcp, 1 << 20, mode, header, &body, 1000) {
            Err(SendError::TooLarge(FrameError::TooLarge { len, max })) => {
                assert_eq!((len, max), (HEADER_LEN + body.encoded_len(), 1000));
            }
            _ => panic!("expected TooLarge"),
        }
        assert!(out.buf.is_empty());
        // The buffer is not harmed: a frame that fits goes in.
        assert!(
            out.encode(Wire::Tcp, 1 << 20, mode, header, &body, 2000)
                .is_ok()
        );
    }
}
