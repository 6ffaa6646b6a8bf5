//! What each side of a resumable session keeps and counts
//! (docs/PROTOCOL.md section 4.2).
//!
//! - [`ReplayBuffer`]: the counted frames this side sent that the peer has
//!   not acknowledged yet, as plain frames, to replay after a resumption.
//! - [`AckSchedule`]: the counted frames this side received, and when an
//!   `ACK` of them is due.
//!
//! Counted frames are those with an application opcode, and the stream
//! frames ([`system::is_counted`](crate::system::is_counted)), in either
//! direction.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use crate::frame::{HEADER_LEN, Header};

/// The clock [`AckSchedule`] takes: `std::time::Instant`, or `web_time`'s
/// on `wasm32-unknown-unknown` (where std's has no clock); it is the same
/// type everywhere else.
#[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
pub use std::time::Instant;
/// The clock [`AckSchedule`] takes: `std::time::Instant`, or `web_time`'s
/// on `wasm32-unknown-unknown` (where std's has no clock); it is the same
/// type everywhere else.
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
pub use web_time::Instant;

/// Ternio's default bound of a replay buffer: 64 KiB of frames (headers and
/// plain bodies).
pub const DEFAULT_REPLAY_LIMIT: usize = 64 * 1024;
/// Ternio's default for the server: an `ACK` after this many unacknowledged
/// counted frames.
pub const ACK_EVERY_FRAMES: u64 = 128;
/// Ternio's default for the server: an `ACK` once unacknowledged counted
/// frames reach this many bytes (headers and plain bodies).
pub const ACK_EVERY_BYTES: usize = 16 * 1024;
/// Ternio's default for clients: an `ACK` after this many unacknowledged
/// counted frames. Clients acknowledge less often than the server: a server
/// holds its pushes while its replay buffer is full, so it needs an `ACK`
/// only before it fills (half the default buffer), and each `ACK` costs
/// both sides a system call and the server a wake-up.
pub const CLIENT_ACK_EVERY_FRAMES: u64 = 1024;
/// Ternio's default for clients: an `ACK` once unacknowledged counted
/// frames reach this many bytes (half of [`DEFAULT_REPLAY_LIMIT`]).
pub const CLIENT_ACK_EVERY_BYTES: usize = 32 * 1024;
/// Ternio's default for clients that do not know the server's replay
/// bound (a server older than the bound's request, whose ticket does not
/// say it): a client that has read all the server sent acknowledges at once
/// when this many bytes are unacknowledged with a push or stream frame
/// among them. Those are what a server holds while its replay buffer is
/// full: a server waiting for room gets its `ACK` as soon as the client
/// has read what it has, not a byte limit or a delay later. Answers alone
/// never bring it (a server never holds them), so a request-and-answer
/// session acknowledges no more often.
pub const CLIENT_IDLE_ACK_BYTES: usize = 8 * 1024;
/// Ternio's default: an `ACK` at the latest this long after the first
/// unacknowledged counted frame.
pub const ACK_DELAY: Duration = Duration::from_millis(200);

/// An `ACK` the sender cannot have meant: `DISCONNECT MALFORMED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    /// It acknowledges frames never sent.
    #[error("ACK of {received} frames, but only {sent} were sent")]
    AheadOfSent {
        /// What the `ACK` says.
        received: u64,
        /// Counted frames sent so far.
        sent: u64,
    },
    /// It goes back below an earlier acknowledgement.
    #[error("ACK of {received} frames after one of {acknowledged}")]
    Backwards {
        /// What the `ACK` says.
        received: u64,
        /// The highest acknowledgement so far.
        acknowledged: u64,
    },
}

/// The counted frames one side sent and the peer has not acknowledged, as
/// plain frames (header with `ENCRYPTED` clear, plain body), bounded in
/// bytes.
///
/// Frames sit one after the other in one buffer, each its 7 bytes of
/// header then its body, with their body lengths in a ring beside it; an
/// acknowledgement moves the buffer's start, and later frames reuse the
/// room: a frame that does not fit after the last moves the frames not yet
/// acknowledged down to the front first, and the buffer grows only when
/// they and the frame do not fit in it together. So it grows to the most
/// it holds at once (at most the bound and a frame), and once it has,
/// recording a frame allocates nothing.
///
/// When a frame would take it past its bound, it drops everything and stays
/// *overflowed*: this side can no longer replay, so the session is no longer
/// resumable (its ticket should go), but the connection goes on, and
/// [`sent`](Self::sent) keeps counting.
pub struct ReplayBuffer {
    limit: usize,
    /// The kept frames: header, then body, one frame after another.
    frames: Vec<u8>,
    /// Where the first frame not acknowledged starts in `frames` (those
    /// before it are acknowledged, their room not yet reused).
    start: usize,
    /// The body length of each kept frame, oldest first.
    lens: VecDeque<u32>,
    sent: u64,
    /// The highest acknowledgement, which (while not overflowed) is the
    /// number of the oldest frame kept.
    acknowledged: u64,
    overflowed: bool,
}

/// Shows the counts, never the frames (they are the application's data).
impl fmt::Debug for ReplayBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplayBuffer")
            .field("limit", &self.limit)
            .field("bytes", &self.bytes())
            .field("kept", &self.lens.len())
            .field("sent", &self.sent)
            .field("acknowledged", &self.acknowledged)
            .field("overflowed", &self.overflowed)
            .finish()
    }
}

impl Default for ReplayBuffer {
    /// A buffer bounded by [`DEFAULT_REPLAY_LIMIT`].
    fn default() -> Self {
        Self::new(DEFAULT_REPLAY_LIMIT)
    }
}

impl ReplayBuffer {
    /// An empty buffer that keeps at most `limit_bytes` of frames (7 bytes
    /// of header plus the plain body each).
    pub fn new(limit_bytes: usize) -> Self {
        Self {
            limit: limit_bytes,
            frames: Vec::new(),
            start: 0,
            lens: VecDeque::new(),
            sent: 0,
            acknowledged: 0,
            overflowed: false,
        }
    }

    /// Counts a counted frame sent, and keeps a plain copy of it (its
    /// header with `ENCRYPTED` cleared, and `body`, the plain body). Returns
    /// `false` when it is not kept: this frame took the buffer past its
    /// bound, or its body is over `u32::MAX` bytes (everything is dropped,
    /// the buffer is overflowed), or the buffer already was.
    #[inline]
    pub fn record(&mut self, header: Header, body: &[u8]) -> bool {
        self.sent += 1;
        if self.overflowed {
            return false;
        }
        let size = HEADER_LEN + body.len();
        let len = match u32::try_from(body.len()) {
            Ok(len) if self.bytes() + size <= self.limit => len,
            _ => {
                self.overflow();
                return false;
            }
        };
        if self.frames.capacity() - self.frames.len() < size && self.start > 0 {
            // Reuse the room of what was acknowledged before growing.
            self.frames.drain(..self.start);
            self.start = 0;
        }
        self.frames
            .extend_from_slice(&header.without_encryption().to_bytes());
        self.frames.extend_from_slice(body);
        self.lens.push_back(len);
        true
    }

    #[cold]
    fn overflow(&mut self) {
        self.overflowed = true;
        // Give the memory back: nothing will be kept again.
        self.frames = Vec::new();
        self.start = 0;
        self.lens = VecDeque::new();
    }

    /// Counted frames sent in total over the session: the number the next
    /// one gets. Counts on after an overflow.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// The highest count the peer acknowledged.
    pub fn acknowledged(&self) -> u64 {
        self.acknowledged
    }

    /// Takes the peer's count of frames received (an `ACK`, or the
    /// `received` of `RESUME` or `RESUMED`): drops the frames numbered
    /// below it. Fails, changing nothing, when it counts frames never sent
    /// or goes below an earlier acknowledgement.
    pub fn acknowledge(&mut self, received: u64) -> Result<(), AckError> {
        if received > self.sent {
            return Err(AckError::AheadOfSent {
                received,
                sent: self.sent,
            });
        }
        if received < self.acknowledged {
            return Err(AckError::Backwards {
                received,
                acknowledged: self.acknowledged,
            });
        }
        let count = received - self.acknowledged;
        self.acknowledged = received;
        if self.overflowed {
            return Ok(());
        }
        let count = usize::try_from(count).expect("ACK counts within what is kept");
        let dropped: usize = self.lens.drain(..count).map(|len| len as usize).sum();
        self.start += HEADER_LEN * count + dropped;
        if self.start == self.frames.len() {
            // All acknowledged: the next frame starts at the front.
            self.frames.clear();
            self.start = 0;
        }
        Ok(())
    }

    /// The frames numbered from `received` on, oldest first, as recorded
    /// (plain header, plain body), for the peer that has received
    /// `received`: `None` when they are not all here (the buffer
    /// overflowed, or `received` is below the oldest frame kept) or when
    /// `received` is above [`sent`](Self::sent). Replaying leaves them kept
    /// (and counted) until acknowledged: do not [`record`](Self::record)
    /// them again.
    pub fn replay_from(&self, received: u64) -> Option<impl Iterator<Item = (Header, &[u8])>> {
        if self.overflowed || received < self.acknowledged || received > self.sent {
            return None;
        }
        let skip = usize::try_from(received - self.acknowledged).ok()?;
        let skipped: usize = self.lens.iter().take(skip).map(|&len| len as usize).sum();
        let mut at = self.start + HEADER_LEN * skip + skipped;
        Some(self.lens.iter().skip(skip).map(move |&len| {
            let frame = &self.frames[at..at + HEADER_LEN + len as usize];
            at += frame.len();
            let header = Header::parse(frame).expect("a kept header parses");
            (header, &frame[HEADER_LEN..])
        }))
    }

    /// Whether to record a frame of `frame_bytes` (7 of header plus the
    /// plain body) now, leaving at least `keep_free` bytes of the bound
    /// unused for frames that cannot wait (a server keeps room for its
    /// answers while pushes wait). `false` means: wait for the peer's `ACK`
    /// before writing it. A frame that could never fit goes into an empty
    /// buffer (and overflows it: waiting would not make room); after an
    /// overflow everything goes.
    #[inline]
    pub fn fits(&self, frame_bytes: usize, keep_free: usize) -> bool {
        self.overflowed
            || self.lens.is_empty()
            || self.bytes() + frame_bytes + keep_free <= self.limit
    }

    /// Whether a frame took the buffer past its bound: it keeps nothing
    /// more, and the session cannot be resumed.
    pub fn is_overflowed(&self) -> bool {
        self.overflowed
    }

    /// Bytes kept: 7 per frame plus the plain bodies.
    #[inline]
    pub fn bytes(&self) -> usize {
        self.frames.len() - self.start
    }

    /// Frames kept.
    pub fn len(&self) -> usize {
        self.lens.len()
    }

    /// Whether no frame is kept.
    pub fn is_empty(&self) -> bool {
        self.lens.is_empty()
    }

    /// The bound, in bytes.
    #[inline]
    pub fn limit(&self) -> usize {
        self.limit
    }
}

/// What a frame received asks of its receiver ([`AckSchedule::received`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckDue {
    /// Send an `ACK` now: the frame or byte limit is reached.
    Now,
    /// The first frame not acknowledged: an `ACK` falls due at this instant
    /// (the delay) unless a limit brings it sooner. Set the timer.
    At(Instant),
    /// An earlier frame set the timer already: nothing to do.
    Scheduled,
}

/// The receiving side's count of counted frames, and when to `ACK` them:
/// after [`ACK_EVERY_FRAMES`] frames or [`ACK_EVERY_BYTES`] bytes not yet
/// acknowledged, or [`ACK_DELAY`] after the first of them, whichever comes
/// first (Ternio's defaults; [`with_limits`](Self::with_limits) sets
/// others).
#[derive(Debug, Clone)]
pub struct AckSchedule {
    count: u64,
    acked: u64,
    unacked_bytes: usize,
    first_unacked_at: Option<Instant>,
    every_frames: u64,
    every_bytes: usize,
    delay: Duration,
}

impl Default for AckSchedule {
    /// Ternio's defaults: 128 frames, 16 KiB, 200 ms.
    fn default() -> Self {
        Self::new()
    }
}

impl AckSchedule {
    /// A schedule with Ternio's defaults, nothing received yet.
    pub fn new() -> Self {
        Self::with_limits(ACK_EVERY_FRAMES, ACK_EVERY_BYTES, ACK_DELAY)
    }

    /// A schedule that asks for an `ACK` after `frames` frames or `bytes`
    /// bytes unacknowledged, or `delay` after the first of them.
    pub fn with_limits(frames: u64, bytes: usize, delay: Duration) -> Self {
        Self {
            count: 0,
            acked: 0,
            unacked_bytes: 0,
            first_unacked_at: None,
            every_frames: frames,
            every_bytes: bytes,
            delay,
        }
    }

    /// Counts a counted frame received, of `frame_bytes` bytes (7 of header
    /// plus the plain body), and says what the receiver does next. `clock`
    /// is read only for the first frame not acknowledged (the one that
    /// starts the delay): a receiver pays no clock read per frame, and sets
    /// its timer once per `ACK`.
    pub fn received(&mut self, frame_bytes: usize, clock: impl FnOnce() -> Instant) -> AckDue {
        self.count += 1;
        self.unacked_bytes = self.unacked_bytes.saturating_add(frame_bytes);
        if self.count - self.acked >= self.every_frames || self.unacked_bytes >= self.every_bytes {
            return AckDue::Now;
        }
        if self.first_unacked_at.is_some() {
            return AckDue::Scheduled;
        }
        let now = clock();
        self.first_unacked_at = Some(now);
        match self.due_at() {
            Some(at) if at > now => AckDue::At(at),
            _ => AckDue::Now,
        }
    }

    /// Whether an `ACK` is due at `now`: some frame is unacknowledged and
    /// one of the three limits is reached.
    pub fn is_due(&self, now: Instant) -> bool {
        let Some(first) = self.first_unacked_at else {
            return false;
        };
        self.count - self.acked >= self.every_frames
            || self.unacked_bytes >= self.every_bytes
            || now.saturating_duration_since(first) >= self.delay
    }

    /// When an `ACK` falls due by the delay, if nothing else brings it
    /// first: `None` when every frame received is acknowledged.
    pub fn due_at(&self) -> Option<Instant> {
        self.first_unacked_at
            .map(|first| first.checked_add(self.delay).unwrap_or(first))
    }

    /// Notes that an `ACK` of [`count`](Self::count) was sent.
    pub fn acked(&mut self) {
        self.acked = self.count;
        self.unacked_bytes = 0;
        self.first_unacked_at = None;
    }

    /// The `ACK` to send now, noted as sent.
    pub fn take_ack(&mut self) -> crate::system::Ack {
        self.acked();
        crate::system::Ack {
            received: self.count,
        }
    }

    /// Counted frames received over the session: the `received` of `ACK`,
    /// `RESUME` and `RESUMED`.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Whether some frame received is not acknowledged yet.
    pub fn has_unacked(&self) -> bool {
        self.count > self.acked
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Flags;

    fn header(id: u32) -> Header {
        Header::new(0x0001, Flags::NONE, id)
    }

    fn replayed(buffer: &ReplayBuffer, from: u64) -> Option<Vec<(u32, Vec<u8>)>> {
        buffer.replay_from(from).map(|frames| {
            frames
                .map(|(header, body)| (header.request_id, body.to_vec()))
                .collect()
        })
    }

    #[test]
    fn acknowledged_frames_go_and_the_rest_replay_in_order() {
        let mut buffer = ReplayBuffer::new(1024);
        for id in 0..5u32 {
            assert!(buffer.record(header(id), &[id as u8; 3]));
        }
        assert_eq!((buffer.sent(), buffer.len(), buffer.bytes()), (5, 5, 50));
        assert_eq!(replayed(&buffer, 5), Some(vec![]));
        assert_eq!(
            replayed(&buffer, 3),
            Some(vec![(3, vec![3; 3]), (4, vec![4; 3])])
        );
        buffer.acknowledge(2).unwrap();
        assert_eq!((buffer.len(), buffer.bytes()), (3, 30));
        assert_eq!(replayed(&buffer, 1), None, "below the oldest kept");
        assert_eq!(replayed(&buffer, 6), None, "above what was sent");
        assert_eq!(
            replayed(&buffer, 2).unwrap().len(),
            3,
            "from the acknowledgement"
        );
        assert!(buffer.record(header(5), b"xy"));
        assert_eq!(
            replayed(&buffer, 4),
            Some(vec![(4, vec![4; 3]), (5, b"xy".to_vec())])
        );
        buffer.acknowledge(6).unwrap();
        assert!(buffer.is_empty());
        assert_eq!(buffer.bytes(), 0);
        assert_eq!(replayed(&buffer, 6), Some(vec![]));
    }

    #[test]
    fn acknowledgements_must_stay_within_what_was_sent_and_never_go_back() {
        let mut buffer = ReplayBuffer::new(1024);
        buffer.record(header(1), b"a");
        buffer.record(header(2), b"b");
        assert_eq!(
            buffer.acknowledge(3),
            Err(AckError::AheadOfSent {
                received: 3,
                sent: 2
            })
        );
        buffer.acknowledge(1).unwrap();
        buffer.acknowledge(1).unwrap();
        assert_eq!(
            buffer.acknowledge(0),
            Err(AckError::Backwards {
                received: 0,
                acknowledged: 1
            })
        );
        assert_eq!(buffer.len(), 1);
    }

    #[test]
    fn the_replayed_copy_is_plain() {
        let mut buffer = ReplayBuffer::new(1024);
        let sealed = Header::new(0x0002, Flags::RESPONSE.with(Flags::ENCRYPTED), 9);
        buffer.record(sealed, b"body");
        let (header, body) = buffer.replay_from(0).unwrap().next().unwrap();
        assert_eq!(header, Header::new(0x0002, Flags::RESPONSE, 9));
        assert_eq!(body, b"body");
    }

    #[test]
    fn fits_says_whether_to_wait_for_an_ack() {
        // 7 + 10 bytes a frame: three fit in 60, not four.
        let mut buffer = ReplayBuffer::new(60);
        assert!(
            buffer.fits(100, 0),
            "an empty buffer takes even a frame past the bound"
        );
        for id in 0..3 {
            assert!(buffer.fits(17, 0));
            buffer.record(header(id), &[0; 10]);
        }
        assert!(!buffer.fits(17, 0), "a fourth would overflow: wait");
        assert!(buffer.fits(9, 0), "a smaller one still fits");
        assert!(!buffer.fits(9, 1), "not when one byte must stay free");
        buffer.acknowledge(1).unwrap();
        assert!(buffer.fits(17, 0), "room again after an ACK");
        assert!(!buffer.fits(17, 10), "not with 10 bytes kept free");
        buffer.acknowledge(3).unwrap();
        assert!(
            buffer.fits(61, 30),
            "empty: only an overflow is left for it"
        );
        assert!(!buffer.record(header(3), &[0; 54]));
        assert!(
            buffer.fits(1_000_000, 60),
            "overflowed: nothing waits any more"
        );
    }

    #[test]
    fn past_its_bound_it_drops_everything_and_counts_on() {
        // 7 + 10 bytes a frame: three fit in 60, not four.
        let mut buffer = ReplayBuffer::new(60);
        for id in 0..3 {
            assert!(buffer.record(header(id), &[0; 10]));
        }
        buffer.acknowledge(1).unwrap();
        assert!(
            buffer.record(header(3), &[0; 10]),
            "room again after an ACK"
        );
        assert!(!buffer.record(header(4), &[0; 10]));
        assert!(buffer.is_overflowed());
        assert_eq!((buffer.len(), buffer.bytes(), buffer.sent()), (0, 0, 5));
        assert!(!buffer.record(header(5), &[]), "records nothing after");
        assert_eq!(buffer.sent(), 6);
        assert!(buffer.replay_from(6).is_none());
        assert!(buffer.replay_from(1).is_none());
        // ACKs are still checked and taken.
        buffer.acknowledge(6).unwrap();
        assert!(buffer.acknowledge(7).is_err());
        // A single frame larger than the bound overflows an empty buffer.
        let mut small = ReplayBuffer::new(10);
        assert!(!small.record(header(0), &[0; 4]));
        assert!(small.is_overflowed());
    }

    #[test]
    fn frames_always_in_flight_reuse_the_buffer_without_growing_past_the_bound() {
        // Twenty frames of 100 bytes always unacknowledged, ten recorded
        // and ten acknowledged at a time (at most 3,210 bytes of a
        // 4,096-byte bound kept).
        let mut buffer = ReplayBuffer::new(4096);
        let mut capacities = Vec::new();
        for round in 0..1_000u64 {
            for id in 0..10 {
                assert!(buffer.record(header(id), &[round as u8; 100]));
            }
            if buffer.sent() > 20 {
                buffer.acknowledge(buffer.sent() - 20).unwrap();
            }
            capacities.push(buffer.frames.capacity());
        }
        assert!(
            buffer.frames.capacity() <= 4096,
            "{}",
            buffer.frames.capacity()
        );
        assert!(
            capacities[10..].windows(2).all(|pair| pair[0] == pair[1]),
            "it grew after the first rounds: {capacities:?}"
        );
        // What is kept is still what was sent, in order.
        let kept: Vec<u8> = buffer
            .replay_from(buffer.sent() - 20)
            .unwrap()
            .map(|(_, body)| body[0])
            .collect();
        assert_eq!(kept, [[998u64 as u8; 10], [999u64 as u8; 10]].concat());
    }

    #[test]
    fn steady_traffic_reuses_the_buffer() {
        let mut buffer = ReplayBuffer::new(4096);
        for round in 0..100u64 {
            for id in 0..8 {
                assert!(buffer.record(header(id), &[round as u8; 100]));
            }
            buffer.acknowledge(buffer.sent()).unwrap();
        }
        assert!(buffer.frames.capacity() < 4096);
        assert_eq!(buffer.sent(), 800);
        let shown = format!("{buffer:?}");
        assert!(
            shown.contains("sent: 800") && !shown.contains("bodies"),
            "{shown}"
        );
    }

    #[test]
    fn an_ack_is_due_after_its_frames_its_bytes_or_its_delay() {
        let start = Instant::now();
        let mut schedule = AckSchedule::new();
        assert_eq!(schedule.due_at(), None);
        assert!(!schedule.is_due(start + Duration::from_secs(9)));
        let never = || -> Instant { panic!("the clock is read for the first frame only") };
        assert_eq!(
            schedule.received(10, || start),
            AckDue::At(start + ACK_DELAY)
        );
        for n in 2..ACK_EVERY_FRAMES {
            assert_eq!(schedule.received(10, never), AckDue::Scheduled, "frame {n}");
        }
        assert_eq!(schedule.due_at(), Some(start + ACK_DELAY));
        assert_eq!(schedule.received(10, never), AckDue::Now, "the 128th frame");
        assert_eq!(schedule.take_ack().received, ACK_EVERY_FRAMES);
        assert!(!schedule.has_unacked());
        assert_eq!(schedule.due_at(), None);
        // Bytes.
        assert_eq!(
            schedule.received(ACK_EVERY_BYTES - 1, || start),
            AckDue::At(start + ACK_DELAY)
        );
        assert_eq!(schedule.received(1, never), AckDue::Now);
        schedule.acked();
        // Time.
        let later = start + Duration::from_millis(50);
        assert_eq!(
            schedule.received(7, || later),
            AckDue::At(later + ACK_DELAY)
        );
        assert_eq!(schedule.due_at(), Some(later + ACK_DELAY));
        assert!(!schedule.is_due(later + Duration::from_millis(199)));
        assert!(schedule.is_due(later + ACK_DELAY));
        assert_eq!(schedule.received(7, never), AckDue::Scheduled);
        // A schedule without a delay asks at once.
        let mut eager = AckSchedule::with_limits(32, 1024, Duration::ZERO);
        assert_eq!(eager.received(7, || start), AckDue::Now);
        assert_eq!(schedule.count(), ACK_EVERY_FRAMES + 4);
        schedule.acked();
        assert_eq!(schedule.count(), ACK_EVERY_FRAMES + 4);
    }
}
