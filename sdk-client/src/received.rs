//! The count of frames a resumable session received (docs/PROTOCOL.md
//! section 4.2), kept without a lock: a reader counts the frames of one
//! read in its [`Batch`] and adds them to the session's count once, at the
//! end of the read (or before an `ACK`), rather than with a
//! compare-and-swap per frame.
//!
//! Which link's frames count is part of the same word as the count, and a
//! reader looks at that word before it takes each frame: once the client
//! stops accepting a link (it was lost, or another took its place), no
//! frame of that link is counted or delivered. A frame taken just before
//! is still counted: the count a `RESUME` reports is taken only once no
//! reader is inside a read ([`Received::settled`]), so it is the number of
//! frames the application got.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Bits of the frame count.
const COUNT_BITS: u32 = 40;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
/// Bits of the accepted link's tag, above the count.
const TAG_BITS: u32 = 23;
const TAG_MASK: u64 = (1 << TAG_BITS) - 1;
/// The top bit: frames are counted (the session has a ticket).
const COUNTING: u64 = 1 << 63;

/// How many frames (or bytes, header included) may go unacknowledged before
/// the reader sends an `ACK` itself; see [`ternio_protocol::replay`].
const EVERY_FRAMES: u64 = ternio_protocol::replay::CLIENT_ACK_EVERY_FRAMES;
const EVERY_BYTES: u64 = ternio_protocol::replay::CLIENT_ACK_EVERY_BYTES as u64;
/// Bytes at which an idle reader acknowledges, if pushes or stream frames
/// are among them, when the server did not say its replay bound; see
/// [`ternio_protocol::replay`].
const IDLE_BYTES: u64 = ternio_protocol::replay::CLIENT_IDLE_ACK_BYTES as u64;

/// A link's tag: what [`Received`] knows it by (never 0, which accepts no
/// link; tags repeat after 2^23 links).
pub(crate) fn next_tag() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    loop {
        let tag = NEXT.fetch_add(1, Ordering::Relaxed) & TAG_MASK;
        if tag != 0 {
            return tag;
        }
    }
}

/// Whether `word` (see [`Received`]) takes the frames of the link tagged
/// `tag`.
#[inline]
fn takes_link(word: u64, tag: u64) -> bool {
    word & (TAG_MASK << COUNT_BITS) == (tag & TAG_MASK) << COUNT_BITS
}

/// What [`Received::take`] did with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taken {
    /// The frame's link is not the accepted one: drop the frame.
    Refused,
    /// Taken (and counted, if counting); nothing to do.
    Quiet,
    /// Taken as the first frame since the last `ACK`: the acknowledging
    /// task starts its delay.
    First,
    /// Taken, and an `ACK` is due now (by count or bytes).
    AckNow,
}

/// One reader's part of the count: the frames it took since it last added
/// them to the session's count. Written by that reader alone (relaxed
/// atomics, so plain loads and stores), between its first counted frame
/// of a read and [`Received::end`].
#[derive(Debug, Default)]
pub(crate) struct Batch {
    /// Between [`Received::take`]'s first frame of a read and
    /// [`Received::end`].
    open: AtomicBool,
    /// The session's word as this reader last read or wrote it: another
    /// value means another task changed it (a link accepted, counting
    /// started or reset).
    seen: AtomicU64,
    /// The session's [`Received::epoch`] when this batch read it: another
    /// means a reset forgot the count, and the frames taken before it.
    epoch: AtomicU64,
    /// Frames taken and counted, not yet in the session's count.
    pending: AtomicU64,
    /// Their bytes (header and plain body), not yet in
    /// [`Received::bytes`]: an `ACK` from another task (which reports the
    /// count without them) leaves them unacknowledged.
    pending_bytes: AtomicU64,
    /// Whether pushes or stream frames are among them.
    pending_held_back: AtomicBool,
    /// The session's word at which this batch's last frame was checked
    /// in full (its link accepted, counting on): while the word stays so,
    /// the next frame of the same link needs only the limits below.
    checked: AtomicU64,
    /// The link tag that check accepted; 0 (no link's tag) when no check
    /// holds: the last frame was not taken and counted through one, or the
    /// batch published since.
    checked_tag: AtomicU64,
    /// `pending` at which an `ACK` is due by count, as of that check.
    ack_frames: AtomicU64,
    /// `pending_bytes` at which an `ACK` is due by bytes, as of that check.
    ack_bytes: AtomicU64,
}

/// The frames received: the count, which link's frames are taken, and
/// what has not been acknowledged yet.
///
/// The readers are the only writers of the count (one compare-and-swap per
/// read, against a change of link or a reset); the count acknowledged
/// moves forward with `fetch_max` when an `ACK` goes out, from the reader
/// or the acknowledging task.
#[derive(Debug, Default)]
pub(crate) struct Received {
    /// [`COUNTING`] | the accepted link's tag << [`COUNT_BITS`] | the count.
    word: AtomicU64,
    /// The count the last `ACK` reported.
    acked: AtomicU64,
    /// Bytes of the frames in the count and not acknowledged (added by a
    /// reader with its batch's frames, reset by any `ACK`).
    bytes: AtomicU64,
    /// Whether pushes or stream frames are among them: what the server may
    /// hold until an `ACK` makes room (set by the reader, cleared by any
    /// `ACK` and by a change of link).
    held_back: AtomicBool,
    /// The server's replay bound, when its ticket said it (0: not said).
    bound: AtomicU64,
    /// The largest push or stream frame taken on the session (written by
    /// the reader): what a server that said its bound may be holding.
    largest_push: AtomicU64,
    /// Readers inside a read ([`Batch`]es open): their frames may not be
    /// in the count yet.
    batches: AtomicU32,
    /// Moved on by each [`reset`](Self::reset): frames a batch took before
    /// one are not added to the new session's count.
    epoch: AtomicU64,
}

impl Received {
    /// Accepts the frames of the link tagged `tag` from now on (0: none).
    /// What the last link brought waits for no early `ACK`: a `RESUME`
    /// reports it, or the link's acknowledging task does.
    pub(crate) fn accept(&self, tag: u64) {
        self.held_back.store(false, Ordering::Relaxed);
        let _ = self
            .word
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |word| {
                Some(word & !(TAG_MASK << COUNT_BITS) | (tag & TAG_MASK) << COUNT_BITS)
            });
    }

    /// Starts counting (a ticket came), keeping any count so far.
    pub(crate) fn start(&self) {
        self.word.fetch_or(COUNTING, Ordering::SeqCst);
    }

    /// Stops counting and forgets the count: a new session.
    pub(crate) fn reset(&self) {
        // Before the word changes: a batch that sees the new word sees the
        // new epoch.
        self.epoch.fetch_add(1, Ordering::SeqCst);
        let _ = self
            .word
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |word| {
                Some(word & (TAG_MASK << COUNT_BITS))
            });
        self.acked.store(0, Ordering::SeqCst);
        self.bytes.store(0, Ordering::SeqCst);
        self.held_back.store(false, Ordering::SeqCst);
        self.set_bound(None);
        self.largest_push.store(0, Ordering::Relaxed);
    }

    /// Takes the server's replay bound from its ticket (`None`: it did not
    /// say): with it, the reader acknowledges once half the bound is
    /// unacknowledged (at most every [`EVERY_BYTES`]: a server holds pushes
    /// at three quarters, so a quarter is still on its way), and an idle
    /// reader only when the server may be holding a frame as large as the
    /// largest taken ([`ack_when_idle`](Self::ack_when_idle)). A reader
    /// inside a read holds to the limit it took at the read's start (or
    /// its last `ACK`, or when counting starts).
    pub(crate) fn set_bound(&self, bound: Option<u32>) {
        let bound = bound.map_or(0, |bound| u64::from(bound).max(1));
        self.bound.store(bound, Ordering::Relaxed);
    }

    /// Bytes at which the reader sends an `ACK` itself: [`EVERY_BYTES`],
    /// or half the server's bound if it said one and that is less.
    fn every_bytes(&self) -> u64 {
        match self.bound.load(Ordering::Relaxed) {
            0 => EVERY_BYTES,
            bound => (bound / 2).clamp(1, EVERY_BYTES),
        }
    }

    /// Frames counted so far.
    pub(crate) fn count(&self) -> u64 {
        self.word.load(Ordering::SeqCst) & COUNT_MASK
    }

    /// Takes a frame of `bytes` (header and plain body) that came on the
    /// link tagged `tag`, for the reader whose batch is `batch`; counted
    /// when the session counts. `held_back`: a push or a stream frame,
    /// which the server may hold for room in its replay buffer (not an
    /// answer). The reader calls [`end`](Self::end) once it has handed over
    /// all it read and waits for more, or stops; a refused frame ends the
    /// batch too.
    #[inline]
    pub(crate) fn take(&self, batch: &Batch, tag: u64, bytes: usize, held_back: bool) -> Taken {
        let bytes = bytes as u64;
        // Most frames: the same link, session and read as the frame before,
        // which the full check below accepted. An `ACK` sent by another
        // task since then leaves the limits lower than they need be: one
        // `ACK` early, never late. Never `First`: the first frame since
        // the reader's last `ACK` follows a publish, so it is checked in
        // full, and one after another task's `ACK` is not the first.
        if self.word.load(Ordering::Relaxed) == batch.checked.load(Ordering::Relaxed)
            && tag == batch.checked_tag.load(Ordering::Relaxed)
            && self.epoch.load(Ordering::Relaxed) == batch.epoch.load(Ordering::Relaxed)
        {
            return if self.add(batch, bytes, held_back) {
                Taken::AckNow
            } else {
                Taken::Quiet
            };
        }
        self.take_checked(batch, tag, bytes, held_back)
    }

    /// [`take`](Self::take) with every check: the batch opened if it is
    /// not, the word read again if another task changed it, the link's
    /// tag compared; then the limits the next frames are held to.
    #[inline(never)]
    fn take_checked(&self, batch: &Batch, tag: u64, bytes: u64, held_back: bool) -> Taken {
        // Whatever the last check found no longer holds unless this one
        // finds it again: a frame refused, not counted, or taken across a
        // reset leaves none behind.
        batch.checked_tag.store(0, Ordering::Relaxed);
        if !batch.open.load(Ordering::Relaxed) {
            self.begin(batch);
        }
        let mut word = self.word.load(Ordering::Relaxed);
        if word != batch.seen.load(Ordering::Relaxed)
            || self.epoch.load(Ordering::Relaxed) != batch.epoch.load(Ordering::Relaxed)
        {
            word = self.resync(batch);
        }
        if !takes_link(word, tag) {
            // This link's frames are no longer taken: what it took is
            // counted now, so that a `RESUME` waiting for it goes on.
            self.end(batch);
            return Taken::Refused;
        }
        if word & COUNTING == 0 {
            return Taken::Quiet;
        }
        let count = word & COUNT_MASK;
        let before = count + batch.pending.load(Ordering::Relaxed);
        let acked = self.acked.load(Ordering::SeqCst);
        // The rule, as limits of the batch's `pending` and `pending_bytes`
        // that hold while neither the word nor what was acknowledged moves:
        // an `ACK` once `EVERY_FRAMES` frames, or `every_bytes()` bytes,
        // are unacknowledged.
        batch.ack_frames.store(
            (EVERY_FRAMES + acked).saturating_sub(count),
            Ordering::Relaxed,
        );
        batch.ack_bytes.store(
            self.every_bytes()
                .saturating_sub(self.bytes.load(Ordering::Relaxed)),
            Ordering::Relaxed,
        );
        batch.checked_tag.store(tag, Ordering::Relaxed);
        batch.checked.store(word, Ordering::Relaxed);
        if self.add(batch, bytes, held_back) {
            Taken::AckNow
        } else if before == acked {
            Taken::First
        } else {
            Taken::Quiet
        }
    }

    /// Adds a counted frame of `bytes` to `batch` (`held_back`: a push or
    /// stream frame, what the server may hold for room); returns whether
    /// an `ACK` is due by the batch's limits.
    #[inline]
    fn add(&self, batch: &Batch, bytes: u64, held_back: bool) -> bool {
        let pending = batch.pending.load(Ordering::Relaxed) + 1;
        batch.pending.store(pending, Ordering::Relaxed);
        let pending_bytes = batch.pending_bytes.load(Ordering::Relaxed) + bytes;
        batch.pending_bytes.store(pending_bytes, Ordering::Relaxed);
        if held_back {
            batch.pending_held_back.store(true, Ordering::Relaxed);
            if bytes > self.largest_push.load(Ordering::Relaxed) {
                self.largest_push.store(bytes, Ordering::Relaxed);
            }
        }
        pending >= batch.ack_frames.load(Ordering::Relaxed)
            || pending_bytes >= batch.ack_bytes.load(Ordering::Relaxed)
    }

    /// Opens `batch`: this reader may take frames the count does not show
    /// yet. Counted among the open batches before the word is read, so
    /// that a task that changed the link and then finds no batch open
    /// knows every reader will see the change.
    fn begin(&self, batch: &Batch) {
        self.batches.fetch_add(1, Ordering::SeqCst);
        let (word, epoch) = self.snapshot();
        batch.seen.store(word, Ordering::Relaxed);
        batch.epoch.store(epoch, Ordering::Relaxed);
        batch.pending.store(0, Ordering::Relaxed);
        batch.pending_bytes.store(0, Ordering::Relaxed);
        batch.pending_held_back.store(false, Ordering::Relaxed);
        batch.open.store(true, Ordering::Relaxed);
    }

    /// The word and the epoch it belongs to: a reset moves the epoch on
    /// before it changes the word, so an epoch read the same before and
    /// after the word is the word's.
    fn snapshot(&self) -> (u64, u64) {
        loop {
            let epoch = self.epoch.load(Ordering::SeqCst);
            let word = self.word.load(Ordering::SeqCst);
            if self.epoch.load(Ordering::SeqCst) == epoch {
                return (word, epoch);
            }
        }
    }

    /// Another task changed the word: `batch` takes it as it is now, and
    /// forgets what it took if a reset came in between.
    fn resync(&self, batch: &Batch) -> u64 {
        let (word, epoch) = self.snapshot();
        if epoch != batch.epoch.load(Ordering::Relaxed) {
            batch.epoch.store(epoch, Ordering::Relaxed);
            batch.pending.store(0, Ordering::Relaxed);
            batch.pending_bytes.store(0, Ordering::Relaxed);
            batch.pending_held_back.store(false, Ordering::Relaxed);
        }
        batch.seen.store(word, Ordering::Relaxed);
        word
    }

    /// Adds what `batch` took to the count (before an `ACK`, which reports
    /// the count, and at [`end`](Self::end)); the batch stays open. What a
    /// reset forgot is not added.
    pub(crate) fn publish(&self, batch: &Batch) {
        // The next frame is checked in full: the first since the `ACK`
        // that may follow.
        batch.checked_tag.store(0, Ordering::Relaxed);
        let pending = batch.pending.swap(0, Ordering::Relaxed);
        let pending_bytes = batch.pending_bytes.swap(0, Ordering::Relaxed);
        let held_back = batch.pending_held_back.swap(false, Ordering::Relaxed);
        if pending == 0 {
            return;
        }
        let mut word = self.word.load(Ordering::SeqCst);
        loop {
            if self.epoch.load(Ordering::SeqCst) != batch.epoch.load(Ordering::Relaxed) {
                return;
            }
            match self.word.compare_exchange_weak(
                word,
                word + pending,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => {
                    batch.seen.store(word + pending, Ordering::Relaxed);
                    break;
                }
                Err(now) => word = now,
            }
        }
        // After the count: an `ACK` taken in between reports these frames
        // and may leave their bytes counted as well (an early `ACK` too
        // many), never the other way round.
        self.bytes.fetch_add(pending_bytes, Ordering::SeqCst);
        if held_back {
            self.held_back.store(true, Ordering::SeqCst);
        }
    }

    /// Closes `batch` (the reader handed over what it read): what it took
    /// is in the count.
    pub(crate) fn end(&self, batch: &Batch) {
        if !batch.open.load(Ordering::Relaxed) {
            return;
        }
        self.publish(batch);
        batch.open.store(false, Ordering::Relaxed);
        self.batches.fetch_sub(1, Ordering::SeqCst);
    }

    /// Whether no reader is inside a read: the count shows every frame
    /// delivered. A `RESUME` takes the count only then.
    pub(crate) fn settled(&self) -> bool {
        self.batches.load(Ordering::SeqCst) == 0
    }

    /// The count to acknowledge, if frames were taken since the last `ACK`;
    /// what was counted is then acknowledged (frames an open batch holds
    /// are not: they are neither in the count nor in the bytes).
    pub(crate) fn take_ack(&self) -> Option<u64> {
        // Cleared before the count is read: the bytes of a batch published
        // in between are either in the count (and counted again: an `ACK`
        // early) or added after (kept), never wiped while not in the count.
        self.bytes.store(0, Ordering::SeqCst);
        self.held_back.store(false, Ordering::SeqCst);
        let count = self.count();
        let acked = self.acked.fetch_max(count, Ordering::SeqCst);
        (acked < count).then_some(count)
    }

    /// Whether a counted frame the client sends on the link tagged `tag`
    /// carries the session's `ACK` along: once half of what makes the
    /// reader send one itself is unacknowledged (frames or bytes in the
    /// count), and `tag` is the link whose frames are taken. While the
    /// client keeps sending, its `ACK`s go in the writes of its requests,
    /// and the reader's own (a write of its own, and a wake-up of the
    /// server) come only when it does not. Read on the sender's thread.
    #[inline]
    pub(crate) fn ack_rides_along(&self, tag: u64) -> bool {
        let word = self.word.load(Ordering::Relaxed);
        if word & COUNTING == 0 || !takes_link(word, tag) {
            return false;
        }
        let unacked = (word & COUNT_MASK).saturating_sub(self.acked.load(Ordering::Relaxed));
        unacked >= EVERY_FRAMES / 2
            || self.bytes.load(Ordering::Relaxed) >= (self.every_bytes() / 2).max(1)
    }

    /// Whether a reader that has read all the server sent (its batch
    /// ended) acknowledges now. When the server said its bound: if what is
    /// unacknowledged and the largest push or stream frame taken so far
    /// come to more than three quarters of it (a server holds a push that
    /// would leave less than a quarter free for answers: it may be holding
    /// such a frame, whatever fills the rest); a session of requests and
    /// answers alone never does. Otherwise: once [`IDLE_BYTES`] are
    /// unacknowledged, pushes or stream frames among them (a server never
    /// holds answers, so answers alone wait). Read on the reader's thread.
    pub(crate) fn ack_when_idle(&self) -> bool {
        let bytes = self.bytes.load(Ordering::Relaxed);
        match self.bound.load(Ordering::Relaxed) {
            0 => self.held_back.load(Ordering::Relaxed) && bytes >= IDLE_BYTES,
            bound => {
                let largest_push = self.largest_push.load(Ordering::Relaxed);
                let for_pushes = bound - bound / 4;
                bytes > 0 && largest_push > 0 && bytes + largest_push > for_pushes
            }
        }
    }

    /// Whether frames were taken since the last `ACK`, or may have been (a
    /// reader is inside a read, and its frames are not in the count yet):
    /// the acknowledging task checks after sending one, as a frame taken
    /// meanwhile may not have woken it.
    pub(crate) fn has_unacked(&self) -> bool {
        !self.settled() || self.count() > self.acked.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session counting the frames of the link tagged `tag`, and a
    /// reader's batch.
    fn counting_on(tag: u64) -> (Received, Batch) {
        let received = Received::default();
        received.accept(tag);
        received.start();
        (received, Batch::default())
    }

    /// What the reader does when it has read all that came: ends its
    /// batch, then asks whether to acknowledge early.
    fn idle(received: &Received, batch: &Batch) -> bool {
        received.end(batch);
        received.ack_when_idle()
    }

    /// What the reader does for an `ACK`: adds what it took, then takes
    /// the count to acknowledge.
    fn ack(received: &Received, batch: &Batch) -> Option<u64> {
        received.publish(batch);
        received.take_ack()
    }

    #[test]
    fn only_the_accepted_link_is_taken_and_only_counted_frames_count() {
        let received = Received::default();
        let batch = Batch::default();
        assert_eq!(received.take(&batch, 5, 10, true), Taken::Refused);
        received.accept(5);
        assert_eq!(received.take(&batch, 5, 10, true), Taken::Quiet);
        received.end(&batch);
        assert_eq!(received.count(), 0, "not counting before a ticket");
        received.start();
        assert_eq!(received.take(&batch, 5, 10, true), Taken::First);
        assert_eq!(received.take(&batch, 5, 10, true), Taken::Quiet);
        assert_eq!(received.count(), 0, "in the count once the read ends");
        assert!(!received.settled());
        assert_eq!(received.take(&batch, 6, 10, true), Taken::Refused);
        assert!(received.settled(), "a refused frame ends the read");
        assert_eq!(received.count(), 2);
        received.accept(6);
        assert_eq!(received.take(&batch, 5, 10, true), Taken::Refused);
        assert_eq!(received.take(&batch, 6, 10, true), Taken::Quiet);
        received.end(&batch);
        assert_eq!(received.count(), 3, "the count goes on across links");
        assert_eq!(ack(&received, &batch), Some(3));
        assert_eq!(ack(&received, &batch), None, "nothing new to acknowledge");
        assert!(!received.has_unacked());
        assert_eq!(received.take(&batch, 6, 10, true), Taken::First);
        assert!(received.has_unacked());
        received.end(&batch);
        assert!(received.has_unacked());
        received.reset();
        assert_eq!(received.count(), 0);
        assert_eq!(
            received.take(&batch, 6, 10, true),
            Taken::Quiet,
            "not counting"
        );
        received.end(&batch);
        assert_eq!(received.count(), 0);
    }

    /// Another task changes the link, or resets the session, while a read
    /// goes on: a frame taken before the change counts, one after it is
    /// refused; what was taken before a reset is forgotten.
    #[test]
    fn a_read_sees_another_tasks_change_of_link_or_reset() {
        let (received, batch) = counting_on(1);
        assert_eq!(received.take(&batch, 1, 10, true), Taken::First);
        received.accept(2);
        assert!(!received.settled(), "a RESUME waits for the read");
        assert_eq!(received.take(&batch, 1, 10, true), Taken::Refused);
        received.end(&batch);
        assert!(received.settled());
        assert_eq!(received.count(), 1, "the frame taken before the change");

        let other = Batch::default();
        assert_eq!(received.take(&other, 2, 10, true), Taken::Quiet);
        received.reset();
        received.start();
        assert_eq!(received.take(&other, 2, 10, true), Taken::First);
        received.end(&other);
        assert_eq!(received.count(), 1, "only the frame after the reset");

        // Before an ACK, the reader adds what it took; the read goes on.
        let third = Batch::default();
        received.take(&third, 2, 10, true);
        received.publish(&third);
        assert_eq!(received.count(), 2);
        assert!(!received.settled());
        received.take(&third, 2, 10, true);
        received.end(&third);
        assert_eq!(received.count(), 3);
    }

    #[test]
    fn an_ack_is_due_every_so_many_frames_or_bytes() {
        let (received, batch) = counting_on(1);
        assert_eq!(received.take(&batch, 1, 1, false), Taken::First);
        for _ in 2..EVERY_FRAMES {
            assert_eq!(received.take(&batch, 1, 1, false), Taken::Quiet);
        }
        assert_eq!(received.take(&batch, 1, 1, false), Taken::AckNow);
        assert_eq!(ack(&received, &batch), Some(EVERY_FRAMES));
        assert_eq!(
            received.take(&batch, 1, EVERY_BYTES as usize, false),
            Taken::AckNow
        );
    }

    #[test]
    fn an_idle_reader_acknowledges_early_when_pushes_wait_but_not_for_answers() {
        let (received, batch) = counting_on(1);
        let half = IDLE_BYTES as usize / 2;
        received.take(&batch, 1, half, false);
        received.take(&batch, 1, half, false);
        assert!(!idle(&received, &batch), "answers never wait at the server");
        received.take(&batch, 1, 1, true);
        assert!(idle(&received, &batch), "a push among them");
        assert_eq!(ack(&received, &batch), Some(3));
        assert!(!idle(&received, &batch), "an ACK starts again");
        received.take(&batch, 1, half, true);
        assert!(!idle(&received, &batch));
        assert_eq!(received.take(&batch, 1, half, true), Taken::Quiet);
        assert!(idle(&received, &batch));
        received.accept(2);
        assert!(
            !idle(&received, &batch),
            "nothing early for another link's frames"
        );
    }

    #[test]
    fn a_bound_the_server_said_sets_when_to_acknowledge() {
        let (received, batch) = counting_on(1);
        received.set_bound(Some(16 * 1024));
        // Half the bound, by bytes.
        assert_eq!(received.take(&batch, 1, 8 * 1024 - 1, true), Taken::First);
        assert_eq!(received.take(&batch, 1, 1, true), Taken::AckNow);
        ack(&received, &batch);
        assert!(!idle(&received, &batch), "nothing unacknowledged");
        // Idle: only when the largest frame taken would not fit beside what
        // is unacknowledged in the three quarters of the bound (12 KiB)
        // that pushes may take.
        received.take(&batch, 1, 4 * 1024, true);
        assert!(!idle(&received, &batch), "4 KiB + 8 KiB fit in 12 KiB");
        assert_eq!(received.take(&batch, 1, 9 * 1024, true), Taken::AckNow);
        ack(&received, &batch);
        received.take(&batch, 1, 3 * 1024, true);
        assert!(!idle(&received, &batch), "3 KiB + 9 KiB fit");
        received.take(&batch, 1, 1, true);
        assert!(idle(&received, &batch), "3 KiB + 1 + 9 KiB do not");
        ack(&received, &batch);
        assert!(!idle(&received, &batch), "nothing unacknowledged");
        // A large bound: every 32 KiB at most.
        received.set_bound(Some(1 << 20));
        assert_eq!(
            received.take(&batch, 1, EVERY_BYTES as usize - 1, true),
            Taken::First
        );
        assert!(!idle(&received, &batch));
        assert_eq!(received.take(&batch, 1, 1, true), Taken::AckNow);
        // A new session forgets the bound: 8 KiB idle again.
        received.reset();
        received.start();
        received.take(&batch, 1, IDLE_BYTES as usize, true);
        assert!(idle(&received, &batch));
    }

    /// A counted frame sent carries the `ACK` from half the reader's
    /// limits on (what is in the count, not an open batch), on the link
    /// whose frames are taken, while counting; and the reader's own limits
    /// still hold after it.
    #[test]
    fn an_ack_rides_along_from_half_the_readers_limits() {
        let received = Received::default();
        let batch = Batch::default();
        received.accept(1);
        assert!(!received.ack_rides_along(1), "not counting");
        received.start();
        received.set_bound(Some(64 * 1024));
        // By bytes: 16 KiB, a quarter of the bound.
        assert_eq!(received.take(&batch, 1, 16 * 1024 - 1, false), Taken::First);
        assert!(!received.ack_rides_along(1), "an open batch's frames wait");
        received.end(&batch);
        assert!(!received.ack_rides_along(1), "1 byte short");
        received.take(&batch, 1, 1, false);
        received.end(&batch);
        assert!(received.ack_rides_along(1));
        assert!(!received.ack_rides_along(2), "another link");
        assert_eq!(received.take_ack(), Some(2));
        assert!(!received.ack_rides_along(1), "acknowledged");
        // By frames: 512 of the reader's 1,024.
        for _ in 0..EVERY_FRAMES / 2 - 1 {
            received.take(&batch, 1, 7, false);
        }
        received.end(&batch);
        assert!(!received.ack_rides_along(1));
        received.take(&batch, 1, 7, false);
        received.end(&batch);
        assert!(received.ack_rides_along(1));
        // Unless one rides along, the reader acknowledges at its own limit.
        for _ in 0..EVERY_FRAMES / 2 - 1 {
            assert_eq!(received.take(&batch, 1, 7, false), Taken::Quiet);
        }
        assert_eq!(received.take(&batch, 1, 7, false), Taken::AckNow);
        // A new session does not count: nothing rides along.
        received.reset();
        assert!(!received.ack_rides_along(1));
    }

    /// The acknowledging task's `ACK` (the count without the open batch's
    /// frames) leaves the batch's bytes unacknowledged: the reader still
    /// acknowledges when they reach the limit.
    #[test]
    fn an_ack_from_another_task_leaves_an_open_batchs_bytes_unacknowledged() {
        let (received, batch) = counting_on(1);
        received.set_bound(Some(64 * 1024));
        for _ in 0..28 {
            received.take(&batch, 1, 1024, true);
        }
        assert_eq!(received.take_ack(), None, "nothing in the count yet");
        for _ in 0..3 {
            assert_ne!(received.take(&batch, 1, 1024, true), Taken::AckNow);
        }
        assert_eq!(
            received.take(&batch, 1, 1024, true),
            Taken::AckNow,
            "32 KiB"
        );
        assert_eq!(ack(&received, &batch), Some(32));
    }

    /// Knowing the bound, the early `ACK` looks at everything the server
    /// keeps (answers too) and at the largest push alone.
    #[test]
    fn the_early_ack_counts_answers_in_the_room_and_only_pushes_as_the_largest() {
        let (received, batch) = counting_on(1);
        received.set_bound(Some(64 * 1024));
        received.take(&batch, 1, 20 * 1024, true);
        ack(&received, &batch);
        for _ in 0..30 {
            received.take(&batch, 1, 1024, false);
        }
        assert!(
            idle(&received, &batch),
            "30 KiB of answers and a 20 KiB push do not fit in 48 KiB"
        );
        ack(&received, &batch);

        let (received, batch) = counting_on(1);
        received.set_bound(Some(64 * 1024));
        assert_eq!(received.take(&batch, 1, 50 * 1024, false), Taken::AckNow);
        ack(&received, &batch);
        received.take(&batch, 1, 100, true);
        assert!(
            !idle(&received, &batch),
            "a large answer is not what the server holds"
        );
    }

    /// A frame of a link accepted again after a refused one opens a new
    /// batch: the word is as it was when the last frame was taken, but the
    /// refusal ended the read, and a `RESUME` must wait for the new one.
    #[test]
    fn a_frame_after_a_refused_one_opens_a_new_read_though_the_word_is_as_it_was() {
        let (received, batch) = counting_on(1);
        assert_eq!(received.take(&batch, 1, 10, true), Taken::First);
        assert_eq!(received.take(&batch, 1, 10, true), Taken::Quiet);
        received.accept(2);
        assert_eq!(received.take(&batch, 1, 10, true), Taken::Refused);
        assert!(received.settled());
        received.accept(1);
        assert_eq!(received.take(&batch, 1, 10, true), Taken::Quiet);
        assert!(!received.settled(), "the frame is in an open read");
        assert_eq!(received.count(), 2);
        received.end(&batch);
        assert_eq!(received.count(), 3);
    }

    /// No link accepted and nothing counted: the session's word is 0, as
    /// the batch's last full check is once cleared. A frame of the link
    /// that check had accepted is refused all the same.
    #[test]
    fn a_frame_is_refused_when_no_link_is_accepted_whatever_the_last_check() {
        let (received, batch) = counting_on(1);
        assert_eq!(received.take(&batch, 1, 10, true), Taken::First);
        received.end(&batch);
        received.reset();
        assert_eq!(received.take(&batch, 1, 10, true), Taken::Quiet);
        received.accept(0);
        assert_eq!(received.take(&batch, 1, 10, true), Taken::Refused);
    }

    /// A reset, a frame not counted, then a new ticket (its bound, then the
    /// start) within one read, the word back to what the last full check
    /// saw: the next frame is the new session's first, held to the new
    /// bound.
    #[test]
    fn a_new_session_within_a_read_is_checked_anew() {
        let (received, batch) = counting_on(1);
        assert_eq!(received.take(&batch, 1, 100, true), Taken::First);
        received.reset();
        assert_eq!(received.take(&batch, 1, 100, true), Taken::Quiet);
        received.set_bound(Some(1000));
        received.start();
        assert_eq!(
            received.take(&batch, 1, 100, true),
            Taken::First,
            "the acknowledging task starts its delay"
        );
        for _ in 0..3 {
            assert_eq!(received.take(&batch, 1, 100, true), Taken::Quiet);
        }
        assert_eq!(
            received.take(&batch, 1, 100, true),
            Taken::AckNow,
            "half the new bound"
        );
        assert_eq!(ack(&received, &batch), Some(5));
    }

    /// Limits a read took before another task's `ACK` may fire early, never
    /// late: the count acknowledged moved on, the batch's limit did not.
    #[test]
    fn an_ack_from_another_task_during_a_read_never_delays_the_readers_ack() {
        let (received, batch) = counting_on(1);
        for _ in 0..10 {
            received.take(&batch, 1, 1, false);
        }
        received.end(&batch);
        assert_eq!(received.take(&batch, 1, 1, false), Taken::Quiet);
        assert_eq!(received.take_ack(), Some(10), "the acknowledging task");
        let mut frames = 2;
        while received.take(&batch, 1, 1, false) != Taken::AckNow {
            frames += 1;
        }
        assert!(
            frames <= EVERY_FRAMES,
            "{frames} frames: no later than the rule ({EVERY_FRAMES} since the ACK)"
        );
        assert_eq!(ack(&received, &batch), Some(10 + frames));
    }

    /// A reset and a new start while a read goes on, the word as it was
    /// (count 0, the same link): the batch still forgets what it took
    /// before the reset and counts what it takes after.
    #[test]
    fn a_reset_and_a_start_in_the_middle_of_a_read_are_seen() {
        let (received, batch) = counting_on(1);
        assert_eq!(received.take(&batch, 1, 10, true), Taken::First);
        received.reset();
        received.start();
        assert_eq!(received.take(&batch, 1, 10, true), Taken::First);
        received.end(&batch);
        assert_eq!(received.count(), 1);
    }
}
