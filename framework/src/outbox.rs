//! A connection's outbox: what other tasks send to it, pushed frames
//! (bounded in bytes) and an order to close, and what a push answers
//! ([`PushError`], [`Delivery`]). The connection's task takes them when its
//! waker fires, beside its socket, so a push costs that task nothing until
//! it arrives.
//!
//! Frames wait in one buffer, each behind its u32 length (the TCP
//! framing): a push copies or encodes its frame into it, with no allocation
//! of its own once the buffer has grown to the connection's usual burst. A
//! connection that goes quiet gives the buffer back.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::Context as TaskContext;

use bytes::{Buf, Bytes, BytesMut};
use futures_util::task::AtomicWaker;
use ternio_protocol::frame::{self, Flags, Framing, HEADER_LEN, Header, LENGTH_PREFIX_LEN};
use ternio_protocol::{DisconnectReason, Packet, buffers, prefix};
use tokio::sync::Notify;

use crate::close::CloseNotice;
use crate::config::SlowConsumerPolicy;
use crate::sync::lock;

/// Why a push was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PushError {
    /// The connection is closed (or no connection has that id).
    #[error("the connection is closed")]
    Closed,
    /// The connection's outbox was full: it is being disconnected
    /// with `SLOW_CONSUMER`.
    #[error("the connection does not read fast enough and is being disconnected")]
    SlowConsumer,
    /// The connection's outbox was full and the packet is droppable:
    /// this one was dropped, the connection stays.
    #[error("the connection is behind; the droppable packet was dropped")]
    Dropped,
    /// The packet encodes to more than the maximum frame size.
    #[error("the packet exceeds the maximum frame size")]
    TooLarge,
    /// The connection is on another node and the backplane that reaches it
    /// is down (or its outgoing queue is full): the packet was not sent.
    #[error("the connection is on another node and the backplane is unavailable")]
    Unavailable,
}

/// Which way a push went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Route {
    /// In a datagram (docs/PROTOCOL.md section 4.4): it may be lost.
    Datagram,
    /// On the stream, in order, with the connection's other frames.
    Stream,
}

/// How many connections a broadcast reached, and how many it missed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Delivery {
    /// Connections whose outbox took the frame.
    pub queued: usize,
    /// Connections that were behind: the droppable frame was dropped for them.
    pub dropped: usize,
    /// Connections that were too far behind and are being disconnected
    /// (`SLOW_CONSUMER`), or had just closed.
    pub failed: usize,
    /// Of the `queued`, those that took it in a datagram (an unreliable
    /// packet to a connection with a datagram channel; see
    /// [`Route::Datagram`]).
    pub datagrams: usize,
}

impl Delivery {
    /// Adds `other`'s counts to these.
    pub(crate) fn add(&mut self, other: Delivery) {
        self.queued += other.queued;
        self.dropped += other.dropped;
        self.failed += other.failed;
        self.datagrams += other.datagrams;
    }

    /// Counts one outbox's answer to a push.
    pub(crate) fn count(&mut self, pushed: Result<(), PushError>) {
        match pushed {
            Ok(()) => self.queued += 1,
            Err(PushError::Dropped) => self.dropped += 1,
            Err(_) => self.failed += 1,
        }
    }
}

/// A push that did not fit in the queue's limit.
enum Full {
    /// A droppable frame, dropped.
    Dropped,
    /// The connection is to be disconnected.
    Disconnect,
}

/// An order to close, from outside the connection's task.
pub(crate) struct CloseOrder {
    pub(crate) notice: CloseNotice,
    /// Let running requests finish first (shutdown), or not (kick, slow consumer).
    pub(crate) graceful: bool,
}

/// A connection's outbox, kept in its shared state.
pub(crate) struct Outbox {
    /// Encoded frames (header + body) in the order pushed, each behind its
    /// u32 little-endian length.
    frames: Mutex<BytesMut>,
    /// The first order to close, if any (later ones are ignored).
    close: Mutex<Option<CloseOrder>>,
    /// Wakes the connection's task.
    waker: AtomicWaker,
    /// Set when a frame or an order may be waiting: the connection's task
    /// looks at the locks only then, not on every poll.
    signal: AtomicBool,
    queued_bytes: AtomicUsize,
    limit: usize,
    policy: SlowConsumerPolicy,
    dropped: AtomicU64,
    /// Set once the connection's task has finished.
    closed: AtomicBool,
    /// Tasks waiting for the queue to drain ([`Outbox::drained_below`]).
    drained: Notify,
    /// How many of them there are: the connection's task notifies only
    /// when someone waits.
    drain_waiters: AtomicUsize,
}

impl Outbox {
    pub(crate) fn new(limit: usize, policy: SlowConsumerPolicy) -> Self {
        Self {
            frames: Mutex::default(),
            close: Mutex::default(),
            waker: AtomicWaker::new(),
            signal: AtomicBool::new(false),
            queued_bytes: AtomicUsize::new(0),
            limit,
            policy,
            dropped: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            drained: Notify::new(),
            drain_waiters: AtomicUsize::new(0),
        }
    }

    /// Queues `packet` as a push frame (request id 0), encoded straight
    /// into the buffer; one above `max_frame_size` is refused.
    pub(crate) fn push_packet<P: Packet>(
        &self,
        packet: &P,
        max_frame_size: usize,
        compression: Option<usize>,
    ) -> Result<(), PushError> {
        let len = HEADER_LEN + packet.encoded_len();
        if len > max_frame_size {
            return Err(PushError::TooLarge);
        }
        if let Some(threshold) = compression
            && len - HEADER_LEN >= threshold
            && compressible::<P>()
        {
            let frame = encode_push(packet, max_frame_size, compression)?;
            return self.push(&frame, P::DROPPABLE);
        }
        let header = Header::new(P::OPCODE, Flags::NONE, 0);
        self.push_with(len, P::DROPPABLE, |out| {
            out.extend_from_slice(&header.to_bytes());
            packet.encode(out);
        })
    }

    /// Queues a copy of one encoded frame (header + body, no prefix), such
    /// as a broadcast encoded once for every member. See
    /// [`push_with`](Self::push_with).
    pub(crate) fn push(&self, frame: &[u8], droppable: bool) -> Result<(), PushError> {
        self.push_with(frame.len(), droppable, |out| out.extend_from_slice(frame))
    }

    /// Queues one frame of about `len` bytes (header + body, no prefix),
    /// which `write` appends to the queue's buffer. When the queue is full,
    /// the slow-consumer policy decides: drop a droppable frame, or
    /// disconnect the connection with `SLOW_CONSUMER`.
    pub(crate) fn push_with(
        &self,
        len: usize,
        droppable: bool,
        write: impl FnOnce(&mut BytesMut),
    ) -> Result<(), PushError> {
        if self.is_closed() {
            return Err(PushError::Closed);
        }
        if let Err(full) = self.admit(len, droppable) {
            return Err(self.refused(full));
        }
        let written = prefix::append_with(&mut lock(&self.frames), len, write);
        // `len` was the encoder's word; the count keeps what was written.
        if written != len {
            self.queued_bytes.fetch_add(written, Ordering::AcqRel);
            self.queued_bytes.fetch_sub(len, Ordering::AcqRel);
        }
        self.signal_task();
        Ok(())
    }

    /// Queues copies of several encoded frames in order, as
    /// [`push`](Self::push) does each, but under one lock and with at most
    /// one wake-up: a batch of broadcasts. A full queue
    /// drops a droppable frame and goes on with the next (a later, smaller
    /// one may fit); a frame that is not droppable disconnects the
    /// connection, and the frames after it count as failed.
    pub(crate) fn push_frames(&self, frames: &[Bytes], droppable: bool, delivery: &mut Delivery) {
        if self.is_closed() {
            delivery.failed += frames.len();
            return;
        }
        let mut queued = 0;
        let mut full = None;
        {
            let mut buffer = lock(&self.frames);
            let bytes: usize = frames
                .iter()
                .map(|frame| LENGTH_PREFIX_LEN + frame.len())
                .sum();
            buffer.reserve(bytes);
            for (index, frame) in frames.iter().enumerate() {
                match self.admit(frame.len(), droppable) {
                    Ok(()) => {
                        let written = prefix::append_with(&mut buffer, frame.len(), |out| {
                            out.extend_from_slice(frame)
                        });
                        debug_assert_eq!(written, frame.len());
                        queued += 1;
                    }
                    Err(Full::Dropped) => delivery.dropped += 1,
                    Err(Full::Disconnect) => {
                        full = Some(frames.len() - index);
                        break;
                    }
                }
            }
        }
        delivery.queued += queued;
        if let Some(failed) = full {
            self.refused(Full::Disconnect);
            delivery.failed += failed;
        }
        if queued > 0 {
            self.signal_task();
        }
    }

    /// Counts `len` more bytes as queued, unless that goes past the limit:
    /// then what the slow-consumer policy makes of it (nothing counted).
    fn admit(&self, len: usize, droppable: bool) -> Result<(), Full> {
        let before = self.queued_bytes.fetch_add(len, Ordering::AcqRel);
        if before + len <= self.limit {
            return Ok(());
        }
        self.queued_bytes.fetch_sub(len, Ordering::AcqRel);
        if droppable && self.policy == SlowConsumerPolicy::DropDroppable {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return Err(Full::Dropped);
        }
        Err(Full::Disconnect)
    }

    /// What a push that did not fit answers; one that was not droppable
    /// orders the connection closed (`SLOW_CONSUMER`).
    fn refused(&self, full: Full) -> PushError {
        match full {
            Full::Dropped => PushError::Dropped,
            Full::Disconnect => {
                self.close(
                    CloseNotice::new(
                        DisconnectReason::SlowConsumer,
                        // The wire text predates the name `outbox`: kept as sent.
                        "the outbound queue is full: read faster",
                    ),
                    false,
                );
                PushError::SlowConsumer
            }
        }
    }

    /// Tells the connection's task that frames wait. The task is woken once
    /// per batch: a push that finds the signal already set knows that a
    /// wake-up is on its way, and that the task's next take (after it
    /// clears the signal) sees its frames.
    fn signal_task(&self) {
        if !self.signal.swap(true, Ordering::AcqRel) {
            self.waker.wake();
        }
    }

    /// Asks the connection to close with `notice`'s `DISCONNECT`.
    pub(crate) fn close(&self, notice: CloseNotice, graceful: bool) {
        let mut close = lock(&self.close);
        if close.is_none() {
            *close = Some(CloseOrder { notice, graceful });
        }
        drop(close);
        self.signal.store(true, Ordering::Release);
        self.waker.wake();
    }

    /// Wakes the connection's task for work that is not in the outbox (a
    /// frame that came by datagram).
    pub(crate) fn wake(&self) {
        self.signal.store(true, Ordering::Release);
        self.waker.wake();
    }

    /// Registers the connection task's waker, for the next push or order.
    pub(crate) fn register(&self, cx: &TaskContext<'_>) {
        self.waker.register(cx.waker());
    }

    /// Whether a frame or an order may have come since the last call (which
    /// follows [`register`](Self::register), so that nothing is missed).
    pub(crate) fn take_signal(&self) -> bool {
        self.signal.load(Ordering::Acquire) && self.signal.swap(false, Ordering::AcqRel)
    }

    /// The order to close, if one came.
    pub(crate) fn take_close(&self) -> Option<CloseOrder> {
        lock(&self.close).take()
    }

    /// Takes queued frames (header + body), oldest first, while `take`
    /// accepts them. Returns whether any was taken.
    pub(crate) fn take_frames(&self, mut take: impl FnMut(&[u8]) -> bool) -> bool {
        let mut frames = lock(&self.frames);
        let (mut at, mut taken_bytes) = (0, 0);
        while at < frames.len() {
            let len =
                prefix::peek(&frames[at..]).expect("a whole prefix: pushes write whole frames");
            let start = at + LENGTH_PREFIX_LEN;
            if !take(&frames[start..start + len]) {
                break;
            }
            at = start + len;
            taken_bytes += len;
        }
        if taken_bytes > 0 {
            // SeqCst here and in `drained_below`: each side stores one
            // atomic and then loads the other, which only a total order
            // keeps both from missing the other's store.
            self.queued_bytes.fetch_sub(taken_bytes, Ordering::SeqCst);
            if self.drain_waiters.load(Ordering::SeqCst) > 0 {
                self.drained.notify_waiters();
            }
        }
        if at == frames.len() {
            // A burst larger than the kept capacity gives its allocation back.
            buffers::empty(&mut frames);
        } else {
            frames.advance(at);
            // Frames left for later (the socket's buffer is full): the next
            // poll must come back for them.
            self.signal.store(true, Ordering::Release);
        }
        at > 0
    }

    /// Gives the buffer back if nothing waits in it (the connection went
    /// quiet).
    pub(crate) fn release(&self) {
        let mut frames = lock(&self.frames);
        if frames.is_empty() {
            *frames = BytesMut::new();
        }
    }

    /// Called when the connection's task ends: later pushes fail at once,
    /// and what was queued is dropped.
    pub(crate) fn finish(&self) {
        self.closed.store(true, Ordering::Release);
        *lock(&self.frames) = BytesMut::new();
        self.queued_bytes.store(0, Ordering::Release);
        self.drained.notify_waiters();
    }

    /// Waits until fewer than `bytes` are queued, or the connection closed
    /// (then [`PushError::Closed`]).
    pub(crate) async fn drained_below(&self, bytes: usize) -> Result<(), PushError> {
        loop {
            let notified = self.drained.notified();
            tokio::pin!(notified);
            // Registered before the check, so a take in between is not missed.
            notified.as_mut().enable();
            // Counted before the check: a take after it sees this waiter.
            let _waiting = Waiting::on(&self.drain_waiters);
            if self.is_closed() {
                return Err(PushError::Closed);
            }
            if self.queued_bytes.load(Ordering::SeqCst) < bytes {
                return Ok(());
            }
            notified.await;
        }
    }

    /// Bytes waiting in the queue.
    pub(crate) fn queued_bytes(&self) -> usize {
        self.queued_bytes.load(Ordering::Acquire)
    }

    /// Droppable frames dropped because the queue was full.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

/// One task counted among an outbox's drain waiters while it lives.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn on(waiters: &'a AtomicUsize) -> Self {
        waiters.fetch_add(1, Ordering::SeqCst);
        Self(waiters)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Whether pushes of `P` may be compressed: the type allows it, and they
/// never go by datagram (frames in datagrams stay uncompressed).
const fn compressible<P: Packet>() -> bool {
    P::COMPRESS && !P::UNRELIABLE
}

/// Encodes `packet` once as a push frame (header + body, no prefix), to be
/// shared by every connection it goes to; its body compressed when
/// `compression` gives a threshold it reaches, the type allows it, and it
/// shrinks (contract section 6). A sealed session seals it as it is: the
/// body is compressed before it is sealed.
pub(crate) fn encode_push<P: Packet>(
    packet: &P,
    max_frame_size: usize,
    compression: Option<usize>,
) -> Result<Bytes, PushError> {
    // One allocation of the exact size: the header and the body.
    let mut frame = BytesMut::with_capacity(HEADER_LEN + packet.encoded_len());
    let header = Header::new(P::OPCODE, Flags::NONE, 0);
    frame::write_frame(&mut frame, Framing::Message, header, packet, max_frame_size)
        .map_err(|_| PushError::TooLarge)?;
    if let Some(threshold) = compression.filter(|_| compressible::<P>()) {
        frame::compress_written(&mut frame, 0, Framing::Message, threshold);
    }
    Ok(frame.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taken(queue: &Outbox, max: usize) -> Vec<Vec<u8>> {
        let mut frames = Vec::new();
        queue.take_frames(|frame| {
            if frames.len() == max {
                return false;
            }
            frames.push(frame.to_vec());
            true
        });
        frames
    }

    #[test]
    fn frames_come_out_whole_in_order_and_what_is_left_stays_signalled() {
        let queue = Outbox::new(1024, SlowConsumerPolicy::Disconnect);
        assert!(!queue.take_signal());
        queue.push(b"first", false).unwrap();
        queue
            .push_with(6, false, |out| out.extend_from_slice(b"second"))
            .unwrap();
        queue.push(b"", false).unwrap();
        queue.push(b"fourth", false).unwrap();
        assert_eq!(queue.queued_bytes(), 5 + 6 + 6);
        assert!(queue.take_signal());

        assert_eq!(taken(&queue, 2), [b"first".to_vec(), b"second".to_vec()]);
        assert_eq!(queue.queued_bytes(), 6);
        assert!(queue.take_signal(), "frames left behind keep the signal");
        assert_eq!(taken(&queue, 9), [b"".to_vec(), b"fourth".to_vec()]);
        assert_eq!(queue.queued_bytes(), 0);
        assert!(!queue.take_signal());
        assert!(taken(&queue, 9).is_empty());
    }

    #[test]
    fn a_writer_that_writes_other_than_it_said_is_counted_as_written() {
        let queue = Outbox::new(1024, SlowConsumerPolicy::Disconnect);
        queue
            .push_with(2, false, |out| out.extend_from_slice(b"longer"))
            .unwrap();
        assert_eq!(queue.queued_bytes(), 6);
        assert_eq!(taken(&queue, 9), [b"longer".to_vec()]);
        assert_eq!(queue.queued_bytes(), 0);
    }

    #[test]
    fn a_full_queue_drops_droppable_frames_or_orders_a_close() {
        let queue = Outbox::new(8, SlowConsumerPolicy::DropDroppable);
        queue.push(b"12345678", false).unwrap();
        assert_eq!(queue.push(b"x", true), Err(PushError::Dropped));
        assert_eq!(queue.dropped(), 1);
        assert_eq!(queue.push(b"x", false), Err(PushError::SlowConsumer));
        let order = queue.take_close().expect("an order to close");
        assert!(!order.graceful);
        assert_eq!(queue.queued_bytes(), 8);
        assert_eq!(taken(&queue, 9), [b"12345678".to_vec()]);

        queue.finish();
        assert_eq!(queue.push(b"x", false), Err(PushError::Closed));
    }

    #[test]
    fn frames_pushed_together_come_out_in_order_with_one_signal() {
        let queue = Outbox::new(1024, SlowConsumerPolicy::Disconnect);
        let frames = [
            Bytes::from_static(b"one"),
            Bytes::from_static(b""),
            Bytes::from_static(b"three"),
        ];
        let mut delivery = Delivery::default();
        queue.push_frames(&frames, false, &mut delivery);
        assert_eq!(delivery.queued, 3);
        assert_eq!(queue.queued_bytes(), 8);
        assert!(queue.take_signal());
        assert!(!queue.take_signal(), "signalled once for the batch");
        assert_eq!(
            taken(&queue, 9),
            [b"one".to_vec(), b"".to_vec(), b"three".to_vec()]
        );

        queue.finish();
        let mut delivery = Delivery::default();
        queue.push_frames(&frames, false, &mut delivery);
        assert_eq!(delivery.failed, 3);
        assert!(!queue.take_signal());
    }

    #[test]
    fn frames_pushed_together_past_the_limit_are_dropped_or_close_as_one_by_one() {
        let queue = Outbox::new(8, SlowConsumerPolicy::DropDroppable);
        let frames = [
            Bytes::from_static(b"12345"),
            Bytes::from_static(b"6789"),
            Bytes::from_static(b"ab"),
        ];
        let mut delivery = Delivery::default();
        queue.push_frames(&frames, true, &mut delivery);
        // The second does not fit and is dropped; the third still fits.
        assert_eq!((delivery.queued, delivery.dropped), (2, 1));
        assert_eq!(queue.dropped(), 1);
        assert!(queue.take_close().is_none());
        assert_eq!(taken(&queue, 9), [b"12345".to_vec(), b"ab".to_vec()]);

        let mut delivery = Delivery::default();
        queue.push_frames(&frames, false, &mut delivery);
        // Not droppable: the connection is ordered closed at the second,
        // and the frames from there count as failed.
        assert_eq!((delivery.queued, delivery.failed), (1, 2));
        assert!(!queue.take_close().expect("an order to close").graceful);
        assert_eq!(taken(&queue, 9), [b"12345".to_vec()]);
    }

    #[test]
    fn an_emptied_queue_gives_a_large_buffer_back() {
        let queue = Outbox::new(1 << 20, SlowConsumerPolicy::Disconnect);
        queue.push(&[7; 100], false).unwrap();
        taken(&queue, 9);
        assert!(lock(&queue.frames).capacity() > 0, "a small buffer is kept");
        queue.release();
        assert_eq!(lock(&queue.frames).capacity(), 0);

        queue
            .push(&vec![7; buffers::MAX_KEPT_CAPACITY + 1], false)
            .unwrap();
        taken(&queue, 9);
        assert_eq!(lock(&queue.frames).capacity(), 0);
    }
}
