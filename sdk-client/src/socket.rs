//! The sending half of a TCP socket, for both transports that run on one
//! (length-prefixed frames and WebSocket): frames are encoded (and sealed)
//! into one outbound buffer and written straight to the socket from the
//! caller's task when nothing is queued before them. The writer task only
//! takes over when the socket would block.

use std::future::Future;
use std::io;
use std::net::Shutdown;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Buf;
use ternio_protocol::BytesMut;
use ternio_protocol::Encode;
use ternio_protocol::buffers::{ReadSize, Spares, empty};
use ternio_protocol::frame::FrameDecoder;
use ternio_protocol::frame::Header;
use ternio_protocol::secure::Sealer;
use tokio::io::Interest;
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::CloseReason;
use crate::events::LinkEvents;
use crate::outbound::{Outbound, Wire};
use crate::send::{Mode, SendError, TakeAck};
use crate::sync::lock;

/// How many reads brought bytes (for the keepalive). Only the reader
/// counts: a counter costs less than a clock read per read.
#[derive(Default)]
pub(crate) struct Reads(AtomicU64);

impl Reads {
    /// Counts a read that brought bytes. Called by the link's reader only
    /// (one writer: no read-modify-write needed).
    pub(crate) fn note(&self) {
        let reads = self.0.load(Ordering::Relaxed);
        self.0.store(reads.wrapping_add(1), Ordering::Relaxed);
    }

    /// How many reads brought bytes so far.
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A link's writing side, whatever the stream under it: an outbound
/// buffer that callers queue frames into and write from their own task
/// ([`SocketOut`] on a TCP socket, `StreamOut` on any other stream).
pub(crate) trait OutboundWriter {
    /// How frames are framed on the stream.
    fn wire(&self) -> Wire;

    /// The most bytes the outbound buffer may hold.
    fn limit(&self) -> usize;

    /// Runs `queue` on the outbound buffer, then writes what it queued, if
    /// anything (an `ACK` before a frame refused goes all the same).
    fn queue_and_write(
        &self,
        queue: impl FnOnce(&mut Outbound) -> Result<(), SendError>,
    ) -> Result<(), SendError>;

    /// Encodes one frame as `mode` says into the outbound buffer, after
    /// the session's `ACK` if one rides along (see
    /// [`Outbound::encode_after`]), and writes them at once if nothing is
    /// queued before.
    fn send_as<E: Encode + ?Sized>(
        &self,
        take_ack: Option<TakeAck<'_>>,
        mode: Mode,
        header: Header,
        body: &E,
        max_frame_size: usize,
    ) -> Result<(), SendError> {
        let (wire, limit) = (self.wire(), self.limit());
        self.queue_and_write(|outbound| {
            outbound.encode_after(take_ack, wire, limit, mode, header, body, max_frame_size)
        })
    }

    /// Queues the session's `ACK` alone (see [`Outbound::queue_ack`]) and
    /// writes it at once if nothing is queued before.
    fn send_ack(&self, take_ack: TakeAck<'_>, max_frame_size: usize) -> Result<(), SendError> {
        let (wire, limit) = (self.wire(), self.limit());
        self.queue_and_write(|outbound| outbound.queue_ack(take_ack, wire, limit, max_frame_size))
    }
}

/// A connection's socket and its outbound buffer.
pub(crate) struct SocketOut {
    stream: TcpStream,
    wire: Wire,
    outbound: Mutex<Outbound>,
    writer_wake: Notify,
    /// The most bytes `outbound.buf` may hold.
    limit: usize,
    reads: Reads,
}

/// Why a link ended, from an I/O error.
pub(crate) fn io_reason(error: &io::Error) -> CloseReason {
    CloseReason::Io(error.kind(), error.to_string())
}

impl OutboundWriter for SocketOut {
    fn wire(&self) -> Wire {
        self.wire
    }

    fn limit(&self) -> usize {
        self.limit
    }

    fn queue_and_write(
        &self,
        queue: impl FnOnce(&mut Outbound) -> Result<(), SendError>,
    ) -> Result<(), SendError> {
        let mut outbound = lock(&self.outbound);
        let queued = outbound.buf.len();
        let outcome = queue(&mut outbound);
        if outbound.buf.len() > queued {
            self.write_now(&mut outbound)
                .map_err(|error| SendError::Lost(io_reason(&error)))?;
        }
        outcome
    }
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
            reads: Reads::default(),
        }
    }

    /// Counts a read that brought bytes (the link's reader only).
    pub(crate) fn note_received(&self) {
        self.reads.note();
    }

    /// How many reads brought bytes so far: when it changes, the server
    /// sent something.
    pub(crate) fn reads(&self) -> u64 {
        self.reads.get()
    }

    /// The socket, for the reader.
    pub(crate) fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Appends bytes already framed (tungstenite's control frames and the
    /// upgrade request) and writes them at once if nothing is queued. The
    /// bound holds for them too; in practice they only join a short queue
    /// (see `MAX_QUEUED_CONTROL` in the WebSocket transport).
    pub(crate) fn send_raw(&self, bytes: &[u8]) -> io::Result<()> {
        let mut outbound = lock(&self.outbound);
        outbound.push_raw(bytes, self.limit)?;
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

    /// Ends the wait for a handshake's answer (see [`Outbound::end_handshake`]).
    pub(crate) fn end_handshake(&self, sealer: Option<Sealer>) {
        lock(&self.outbound).end_handshake(sealer);
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

/// How long a reader keeps its spare read allocations ([`Spares`]) once
/// large frames stop coming.
pub(crate) const SPARES_LINGER: Duration = Duration::from_secs(1);

/// A reader's spare read allocations, released once no large frame came
/// for [`SPARES_LINGER`] (whatever small frames came meanwhile).
#[derive(Default)]
pub(crate) struct ReadSpares {
    spares: Spares,
    /// The count of kept allocations when last looked at.
    seen: u64,
    /// When the spares go, unless a large frame comes first.
    release_at: Option<Instant>,
}

impl ReadSpares {
    /// Makes room in `buf` before a read ([`ReadSize::reserve_from`]).
    pub(crate) fn reserve(
        &mut self,
        rule: &mut ReadSize,
        decoder: &FrameDecoder,
        buf: &mut BytesMut,
    ) {
        rule.reserve_from(decoder, buf, &mut self.spares);
        self.note_use();
    }

    /// Gives `buf` back once a large frame is out of it
    /// ([`ReadSize::give_back_to`]).
    pub(crate) fn give_back(&mut self, rule: &mut ReadSize, buf: &mut BytesMut) {
        rule.give_back_to(buf, &mut self.spares);
        self.note_use();
    }

    /// Moves the release on if an allocation was kept since last time.
    fn note_use(&mut self) {
        let count = self.spares.kept_count();
        if count != self.seen {
            self.seen = count;
            self.release_at = Some(Instant::now() + SPARES_LINGER);
        }
    }

    /// Waits for `ready`; drops the spares when their time comes
    /// meanwhile (or came already), and waits on.
    pub(crate) async fn wait<T>(&mut self, ready: impl Future<Output = T>) -> T {
        let Some(release_at) = self.release_at.filter(|_| self.spares.holds()) else {
            return ready.await;
        };
        let mut ready = pin!(ready);
        match tokio::time::timeout_at(release_at, ready.as_mut()).await {
            Ok(value) => value,
            Err(_) => {
                self.spares.release();
                self.release_at = None;
                ready.await
            }
        }
    }

    /// Whether any allocation is kept.
    #[cfg(test)]
    fn holds(&self) -> bool {
        self.spares.holds()
    }
}

/// A link's writing side as its writer task sees it.
pub(crate) trait Flush: Send + Sync + 'static {
    /// Woken when a caller found the stream not ready and left bytes queued.
    fn writer_wake(&self) -> &Notify;
    /// Writes what is queued.
    fn flush(&self) -> impl Future<Output = io::Result<()>> + Send;
}

impl Flush for SocketOut {
    fn writer_wake(&self) -> &Notify {
        &self.writer_wake
    }

    fn flush(&self) -> impl Future<Output = io::Result<()>> + Send {
        SocketOut::flush(self)
    }
}

/// The writer task: flushes whenever a caller found the socket (or
/// stream) not ready, until the link is lost and what was queued is written.
pub(crate) async fn write_loop(events: impl LinkEvents, out: Arc<impl Flush>) {
    loop {
        out.writer_wake().notified().await;
        if let Err(error) = out.flush().await {
            events.lost(io_reason(&error));
            return;
        }
        if events.is_lost() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use ternio_protocol::frame::Flags;
    use ternio_protocol::{Bytes, Encode};
    use tokio::net::TcpListener;

    use super::*;

    /// A reader keeps its spare allocations while large frames keep
    /// coming, and drops them once none came for [`SPARES_LINGER`], even
    /// while small ones do.
    #[tokio::test(start_paused = true)]
    async fn spare_read_allocations_go_once_large_frames_stop() {
        use bytes::BufMut;
        let decoder = FrameDecoder::new(1 << 20);
        let mut rule = ReadSize::whole_frames();
        let mut spares = ReadSpares::default();
        let mut buf = BytesMut::new();
        // A frame of `len` bytes read as the reader reads one.
        let mut frame = |spares: &mut ReadSpares, buf: &mut BytesMut, len: usize| {
            buf.put_u32_le(len as u32);
            spares.reserve(&mut rule, &decoder, buf);
            buf.put_bytes(1, len);
            let frame = buf.split().freeze();
            spares.give_back(&mut rule, buf);
            frame
        };
        let large = 100 * 1024;
        let held = frame(&mut spares, &mut buf, large);
        let also = frame(&mut spares, &mut buf, large);
        assert!(spares.holds());
        let read_in = |after: Duration, value: u32| async move {
            tokio::time::sleep(after).await;
            value
        };
        // Reads within the linger of a large frame keep them.
        assert_eq!(spares.wait(read_in(SPARES_LINGER / 2, 1)).await, 1);
        let more = frame(&mut spares, &mut buf, large);
        assert_eq!(spares.wait(read_in(SPARES_LINGER * 3 / 4, 2)).await, 2);
        assert!(spares.holds(), "released while large frames kept coming");
        // Small frames only, read all along (the large ones dropped, so
        // that their allocations are free): released once the linger is
        // over, the wait for the read going on to its end.
        drop((held, also, more));
        let started = tokio::time::Instant::now();
        for round in 0..8 {
            let _small = frame(&mut spares, &mut buf, 100);
            assert_eq!(spares.wait(read_in(SPARES_LINGER / 4, round)).await, round);
        }
        assert!(!spares.holds(), "kept past the linger");
        assert!(started.elapsed() >= SPARES_LINGER * 2, "a wait was cut");
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
            let mode = Mode::Sealable {
                required: false,
                compress: None,
            };
            let header = Header::new(1, Flags::NONE, 0);
            let mut frames = 0;
            let reason = loop {
                match out.send_as(None, mode, header, &body, 1 << 20) {
                    Ok(()) => frames += 1,
                    Err(SendError::Lost(reason)) => break reason,
                    Err(_) => panic!("{wire:?}: an unexpected error"),
                }
                assert!(out.queued() <= limit, "{wire:?}: {} queued", out.queued());
                assert!(frames < 100_000, "{wire:?}: no bound after {frames} frames");
            };
            let queued = out.queued();
            // Refused when the body and its framing (at most 128 bytes) could pass it.
            assert!(queued <= limit && queued + body.encoded_len() + 128 > limit);
            assert_eq!(reason, CloseReason::OutboundFull { limit, queued });
            // It takes nothing more, even what would fit.
            let small = Bytes::from_static(b"x");
            assert!(matches!(
                out.send_as(None, mode, header, &small, 1 << 20),
                Err(SendError::Gone)
            ));
        }
    }
}
