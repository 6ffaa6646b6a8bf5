//! The sending half of a connection, for both transports: frames are
//! encoded (and sealed) into one outbound buffer and written straight to
//! the socket from the caller's task when nothing is queued before them.
//! The writer task only takes over when the socket would block.

use std::io;
use std::net::Shutdown;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Buf, BufMut};
use ternio_protocol::buffers::empty;
use ternio_protocol::frame::{self, Framing, HEADER_LEN, Header};
use ternio_protocol::secure::{COUNTER_LEN, Sealer, TAG_LEN};
use ternio_protocol::{BytesMut, Encode, FrameError};
use tokio::io::Interest;
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::config::MAX_FRAMING;
use crate::error::CloseReason;
use crate::link::{Link, SendError};
use crate::shared::Shared;
use crate::sync::lock;

/// How frames are wrapped on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wire {
    /// A u32 length prefix per frame (contract section 1.1).
    Tcp,
    /// One masked binary WebSocket message per frame (section 1.2).
    WebSocket,
}

/// Frames encoded but not yet written.
#[derive(Default)]
struct Outbound {
    buf: BytesMut,
    /// A WebSocket frame is encoded here first, then masked into `buf`.
    scratch: BytesMut,
    /// The writer task owns the flushing until the buffer is empty.
    writer_active: bool,
    /// No more frames are taken (the link is shutting).
    stopped: bool,
    /// Seals every frame once the secure session is up: under this lock,
    /// so that counters reach the socket in order.
    sealer: Option<Sealer>,
    /// A `HANDSHAKE` went out and its answer has not been read: nothing
    /// else goes out until then (contract section 5.1).
    handshaking: bool,
}

/// How one frame goes out.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Sealed once the link's secure channel is up, plain before; with
    /// `required`, refused before.
    Sealable { required: bool },
    /// The `HANDSHAKE` request: plain, and nothing else goes out after it
    /// until the answer is read.
    Handshake,
    /// Plain whatever the session: `DISCONNECT DECRYPT_FAILED` only.
    PlainFinal,
}

/// A connection's socket and its outbound buffer.
pub(crate) struct SocketOut {
    stream: TcpStream,
    wire: Wire,
    outbound: Mutex<Outbound>,
    writer_wake: Notify,
    /// The most bytes `outbound.buf` may hold.
    limit: usize,
    /// How many reads brought bytes (for the keepalive). Only the reader
    /// counts: a counter costs less than a clock read per read.
    reads: AtomicU64,
}

pub(crate) fn io_reason(error: &io::Error) -> CloseReason {
    CloseReason::Io(error.kind(), error.to_string())
}

impl SocketOut {
    /// A socket whose outbound buffer holds at most `limit` bytes.
    pub(crate) fn new(stream: TcpStream, wire: Wire, limit: usize) -> Self {
        Self {
            stream,
            wire,
            outbound: Mutex::default(),
            writer_wake: Notify::new(),
            limit,
            reads: AtomicU64::new(0),
        }
    }

    /// Counts a read that brought bytes. Called by the link's reader only
    /// (one writer: no read-modify-write needed).
    pub(crate) fn note_received(&self) {
        let reads = self.reads.load(Ordering::Relaxed);
        self.reads.store(reads.wrapping_add(1), Ordering::Relaxed);
    }

    /// How many reads brought bytes so far: when it changes, the server
    /// sent something.
    pub(crate) fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// The socket, for the reader.
    pub(crate) fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Encodes one frame as `mode` says into the outbound buffer and writes
    /// it at once if nothing is queued before it. Once the secure session is
    /// up every frame but [`Mode::PlainFinal`] is sealed (after a `REKEY`,
    /// when one is due). Nothing but that one goes out while a handshake
    /// waits for its answer. A frame that could take the buffer past its
    /// bound is not encoded: the link must then be lost
    /// ([`CloseReason::OutboundFull`]), and the buffer takes nothing more.
    pub(crate) fn send_as<E: Encode + ?Sized>(
        &self,
        mode: Mode,
        header: Header,
        body: &E,
        max_frame_size: usize,
    ) -> Result<(), SendError> {
        let mut outbound = lock(&self.outbound);
        let outbound = &mut *outbound;
        if outbound.stopped {
            return Err(SendError::Gone);
        }
        if outbound.handshaking && mode != Mode::PlainFinal {
            return Err(SendError::Handshaking);
        }
        let framing = match self.wire {
            Wire::Tcp => Framing::LengthPrefixed,
            Wire::WebSocket => Framing::Message,
        };
        let sealer = match (mode, outbound.sealer.as_mut()) {
            (Mode::Sealable { .. }, Some(sealer)) => Some(sealer),
            (Mode::Sealable { required: true }, None) => return Err(SendError::NotSecure),
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
        if outbound.buf.len() + body_len + MAX_FRAMING > self.limit {
            outbound.stopped = true;
            return Err(SendError::Lost(CloseReason::OutboundFull {
                limit: self.limit,
                queued: outbound.buf.len(),
            }));
        }
        let target = match self.wire {
            Wire::Tcp => &mut outbound.buf,
            Wire::WebSocket => &mut outbound.scratch,
        };
        let encoded = match sealer {
            Some(sealer) => {
                // A due REKEY goes out first, as a frame (message) of its own.
                let rekeyed = sealer.rekey_if_due(target, framing);
                if rekeyed == Ok(true) && self.wire == Wire::WebSocket {
                    write_masked(&mut outbound.buf, &outbound.scratch);
                    outbound.scratch.clear();
                }
                let target = match self.wire {
                    Wire::Tcp => &mut outbound.buf,
                    Wire::WebSocket => &mut outbound.scratch,
                };
                rekeyed.and_then(|_| {
                    sealer.write_frame_with(target, framing, header, max_frame_size, |out| {
                        out.reserve(body.encoded_len() + TAG_LEN);
                        body.encode(out);
                    })
                })
            }
            None => frame::write_frame(target, framing, header, body, max_frame_size),
        };
        if let Err(error) = encoded {
            empty(&mut outbound.scratch);
            return Err(SendError::TooLarge(error));
        }
        if mode == Mode::Handshake {
            outbound.handshaking = true;
        }
        if self.wire == Wire::WebSocket {
            write_masked(&mut outbound.buf, &outbound.scratch);
            empty(&mut outbound.scratch);
        }
        self.write_now(outbound)
            .map_err(|error| SendError::Lost(io_reason(&error)))
    }

    /// Appends bytes already framed (tungstenite's control frames and the
    /// upgrade request) and writes them at once if nothing is queued. The
    /// bound holds for them too; in practice they only join a short queue
    /// (see `MAX_QUEUED_CONTROL` in the WebSocket transport).
    pub(crate) fn send_raw(&self, bytes: &[u8]) -> io::Result<()> {
        let mut outbound = lock(&self.outbound);
        if outbound.buf.len().saturating_add(bytes.len()) > self.limit {
            outbound.stopped = true;
            return Err(io::Error::other(format!(
                "the outbound buffer is full ({} of {} bytes)",
                outbound.buf.len(),
                self.limit
            )));
        }
        outbound.buf.extend_from_slice(bytes);
        self.write_now(&mut outbound)
    }

    /// Bytes waiting to be written.
    pub(crate) fn queued(&self) -> usize {
        lock(&self.outbound).buf.len()
    }

    /// Writes what it can now; the writer task takes the rest.
    fn write_now(&self, outbound: &mut Outbound) -> io::Result<()> {
        if outbound.writer_active {
            return Ok(());
        }
        self.write_some(outbound)?;
        if !outbound.buf.is_empty() {
            outbound.writer_active = true;
            self.writer_wake.notify_one();
        }
        Ok(())
    }

    /// One non-blocking write of what is queued.
    fn write_some(&self, outbound: &mut Outbound) -> io::Result<()> {
        match self.stream.try_write(&outbound.buf) {
            Ok(n) if n == outbound.buf.len() => empty(&mut outbound.buf),
            Ok(n) => outbound.buf.advance(n),
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
            Err(error) => return Err(error),
        }
        Ok(())
    }

    /// Ends the wait for a handshake's answer: with a sealer, every frame
    /// from now on is sealed; without one (the handshake failed), frames go
    /// plain again.
    pub(crate) fn end_handshake(&self, sealer: Option<Sealer>) {
        let mut outbound = lock(&self.outbound);
        outbound.handshaking = false;
        if let Some(sealer) = sealer {
            outbound.sealer = Some(sealer);
        }
    }

    /// Writes once what is queued: `true` when nothing is left.
    pub(crate) fn try_flush(&self) -> io::Result<bool> {
        let mut outbound = lock(&self.outbound);
        self.write_some(&mut outbound)?;
        if outbound.buf.is_empty() {
            outbound.writer_active = false;
            return Ok(true);
        }
        Ok(false)
    }

    /// Writes what is queued, waiting for the socket each time it would block.
    pub(crate) async fn flush(&self) -> io::Result<()> {
        while !self.try_flush()? {
            self.stream.writable().await?;
        }
        Ok(())
    }

    /// Takes no more frames; the writer task writes what is queued and ends.
    pub(crate) fn stop(&self) {
        lock(&self.outbound).stopped = true;
        self.writer_wake.notify_one();
    }

    /// Shuts the socket down both ways: the reader sees the end, the server
    /// sees the connection close. Wakes the writer so that it ends.
    pub(crate) fn shutdown(&self) {
        self.stop();
        let _ = socket2::SockRef::from(&self.stream).shutdown(Shutdown::Both);
    }
}

/// Runs `read`, one read from `stream` into a buffer with `room` bytes
/// free. A read that leaves room unused drained the socket: its readiness is
/// cleared then (as tokio's own `AsyncRead` does), so the next wait does not
/// begin with a read that can only fail with `WouldBlock`, one system call
/// per answer. The readiness cleared is the one seen before the read: an
/// event that came since keeps it set.
pub(crate) fn read_draining(
    stream: &TcpStream,
    room: usize,
    read: impl FnOnce() -> io::Result<usize>,
) -> io::Result<usize> {
    let mut got = 0;
    let outcome = stream.try_io(Interest::READABLE, || {
        got = read()?;
        if got > 0 && got < room {
            // Not an error: it tells `try_io` to clear the readiness.
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(got)
    });
    match outcome {
        Err(error) if error.kind() == io::ErrorKind::WouldBlock && got > 0 => Ok(got),
        outcome => outcome,
    }
}

/// The writer task: flushes whenever a caller found the socket full, until
/// the link is lost and what was queued is written.
pub(crate) async fn write_loop(shared: Arc<Shared>, link: Arc<Link>, out: Arc<SocketOut>) {
    loop {
        out.writer_wake.notified().await;
        if let Err(error) = out.flush().await {
            shared.lose(&link, io_reason(&error));
            return;
        }
        if link.lost_reason().is_some() {
            return;
        }
    }
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
    use tokio::net::TcpListener;

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

    /// A peer that never reads: the socket takes what the kernel buffers
    /// hold, then the queue fills up to its bound and no further.
    #[tokio::test]
    async fn the_outbound_queue_never_passes_its_bound() {
        for wire in [Wire::Tcp, Wire::WebSocket] {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let stream = TcpStream::connect(listener.local_addr().unwrap())
                .await
                .unwrap();
            let (_deaf, _) = listener.accept().await.unwrap();
            let limit = 100_000;
            let out = SocketOut::new(stream, wire, limit);
            let body = Bytes::from(vec![1u8; 9_000]);
            let mode = Mode::Sealable { required: false };
            let header = Header::new(1, Flags::NONE, 0);
            let mut frames = 0;
            let reason = loop {
                match out.send_as(mode, header, &body, 1 << 20) {
                    Ok(()) => frames += 1,
                    Err(SendError::Lost(reason)) => break reason,
                    Err(_) => panic!("{wire:?}: an unexpected error"),
                }
                assert!(out.queued() <= limit, "{wire:?}: {} queued", out.queued());
                assert!(frames < 100_000, "{wire:?}: no bound after {frames} frames");
            };
            let queued = out.queued();
            assert!(queued <= limit && queued + body.encoded_len() + MAX_FRAMING > limit);
            assert_eq!(reason, CloseReason::OutboundFull { limit, queued });
            // It takes nothing more, even what would fit.
            let small = Bytes::from_static(b"x");
            assert!(matches!(
                out.send_as(mode, header, &small, 1 << 20),
                Err(SendError::Gone)
            ));
        }
    }

    /// A frame too large is refused before a byte of it is queued, even
    /// when the queue has room for it.
    #[tokio::test]
    async fn a_frame_too_large_is_refused_before_it_is_encoded() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let stream = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let out = SocketOut::new(stream, Wire::Tcp, 1 << 20);
        let body = Bytes::from(vec![1u8; 1000]);
        let header = Header::new(1, Flags::NONE, 0);
        match out.send_as(Mode::Sealable { required: false }, header, &body, 1000) {
            Err(SendError::TooLarge(FrameError::TooLarge { len, max })) => {
                assert_eq!((len, max), (HEADER_LEN + body.encoded_len(), 1000));
            }
            _ => panic!("expected TooLarge"),
        }
        assert_eq!(out.queued(), 0);
        // The link is not harmed: a frame that fits goes out.
        assert!(
            out.send_as(Mode::Sealable { required: false }, header, &body, 2000)
                .is_ok()
        );
    }
}
