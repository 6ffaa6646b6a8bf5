//! How big a connection's buffers grow and when they give memory back: the
//! same rules for the server and the client.
//!
//! A buffer grows for a large frame; one that grew past
//! [`MAX_KEPT_CAPACITY`] is given back as soon as it holds nothing, so no
//! buffer stays at the largest frame's size for a connection's life.

use std::collections::VecDeque;

use bytes::BytesMut;

use crate::frame::FrameDecoder;

/// Bytes read at a time: the room made in a stream's read buffer when it
/// has less than half of this free, and the read size a WebSocket library
/// is given.
pub const READ_CHUNK: usize = 8 * 1024;

/// The room a buffer under [`ReadSize::whole_frames`] reads into: a
/// client's one connection reads more per call (fewer reads and hand-overs
/// when frames stream in) than a server's many.
pub const WHOLE_READ_CHUNK: usize = 64 * 1024;

/// The most an emptied buffer keeps: one that grew past this for a large
/// frame is given back.
pub const MAX_KEPT_CAPACITY: usize = 64 * 1024;

/// Empties `buf`, keeping its allocation unless it grew past
/// [`MAX_KEPT_CAPACITY`].
#[inline]
pub fn empty(buf: &mut BytesMut) {
    if buf.capacity() > MAX_KEPT_CAPACITY {
        *buf = BytesMut::new();
    } else {
        buf.clear();
    }
}

/// Copies a sealed body that arrived as shared bytes (a WebSocket message)
/// into a buffer of its own, to be opened in place: the room of `reused`,
/// which comes back once the previous body is dropped (no allocation in
/// steady state), or, for a body above [`MAX_KEPT_CAPACITY`], an
/// allocation of its own, which `reused` would otherwise keep alive.
#[inline]
pub fn copy_to_open(reused: &mut BytesMut, body: &[u8]) -> BytesMut {
    if body.len() > MAX_KEPT_CAPACITY {
        BytesMut::from(body)
    } else {
        reused.extend_from_slice(body);
        reused.split()
    }
}

/// The largest allocation [`Spares`] keeps.
pub const MAX_SPARE_CAPACITY: usize = 256 * 1024;

/// The most [`Spares`] keeps in all: twice what a download of 64 KiB
/// chunks has in flight at its widest (32 items), so that the frames an
/// application holds a while besides do not make every read allocate.
pub const MAX_SPARE_BYTES: usize = 4 * 1024 * 1024;

/// Large allocations (past [`MAX_KEPT_CAPACITY`]) are made in steps of
/// this, so that a kept one fits the next frames of about the same size:
/// the room a read asks for varies with what arrived of the next frame
/// (up to half a [`WHOLE_READ_CHUNK`] more), and a spare too small for it
/// is dropped. (In steps of a page, a client download dropped and made
/// spares all along: 65 to 74 allocations past 64 KiB per 400 chunks of
/// 64 KiB, against 26 to 28 in steps of 32 KiB.)
const SPARE_STEP: usize = 32 * 1024;

/// Allocations of a read buffer kept to be read into again once every
/// frame read into them is dropped: for a peer that streams frames larger
/// than [`MAX_KEPT_CAPACITY`] (a client downloading a byte stream in
/// 64 KiB chunks).
///
/// Without them each such frame takes a fresh allocation, which the
/// application frees once it has read the frame, often on another thread;
/// the allocator then hands the pages back to the system, and the next
/// frame's allocation faults fresh, zero-filled pages in: one fault every
/// 4 KiB of the stream.
///
/// Allocations are kept in the order the frames in them were read, which
/// is the order an application drops them: the oldest is the one reused
/// next. They hold at most [`MAX_SPARE_BYTES`] in all, each at most
/// [`MAX_SPARE_CAPACITY`]; [`release`](Self::release) drops them (a reader
/// calls it once large frames stop coming: [`kept_count`](Self::kept_count)
/// tells it when they come).
#[derive(Debug, Default)]
pub struct Spares {
    /// Each with the size of its allocation, oldest first.
    kept: VecDeque<(BytesMut, usize)>,
    /// The sizes in `kept`, summed.
    kept_bytes: usize,
    /// The size of the read buffer's allocation when this made it, else 0.
    current: usize,
    /// How many allocations were kept so far.
    kept_count: u64,
    /// How many allocations this made.
    #[cfg(test)]
    made: usize,
}

impl Spares {
    /// No spares yet.
    pub const fn new() -> Self {
        Self {
            kept: VecDeque::new(),
            kept_bytes: 0,
            current: 0,
            kept_count: 0,
            #[cfg(test)]
            made: 0,
        }
    }

    /// Whether any allocation is kept.
    pub fn holds(&self) -> bool {
        !self.kept.is_empty()
    }

    /// How many allocations were kept so far: when it moves, large frames
    /// are still coming.
    pub fn kept_count(&self) -> u64 {
        self.kept_count
    }

    /// Drops the kept allocations (each goes once its frames are dropped).
    pub fn release(&mut self) {
        self.kept = VecDeque::new();
        self.kept_bytes = 0;
    }

    /// Makes room for `additional` more bytes in `buf`: in its own
    /// allocation when no frame read into it is left, else in the oldest
    /// kept one if none is left in that, else in a new one. The
    /// allocation `buf` leaves is kept if it is large (past
    /// [`MAX_KEPT_CAPACITY`]: the frames that would otherwise take a fresh
    /// one each) but within [`MAX_SPARE_CAPACITY`].
    ///
    /// Room for a small frame (within [`MAX_KEPT_CAPACITY`]) is never
    /// taken from the kept allocations: they are for large frames, and a
    /// small one taking them would keep them in use (and
    /// [`kept_count`](Self::kept_count) moving) while only small frames
    /// come. A kept allocation too small for the room asked is dropped.
    pub fn reserve(&mut self, buf: &mut BytesMut, additional: usize) {
        if buf.try_reclaim(additional) {
            return;
        }
        let needed = buf.len() + additional;
        let spare = if needed > MAX_KEPT_CAPACITY {
            self.take_oldest(needed)
        } else {
            None
        };
        let (mut next, size) = spare.unwrap_or_else(|| self.allocate(needed));
        // What arrived of the next frame comes along (as a reallocation
        // would copy it).
        next.extend_from_slice(buf);
        let left = std::mem::replace(buf, next);
        let left_size = std::mem::replace(&mut self.current, size);
        self.keep(left, left_size);
    }

    /// The oldest kept allocation, with its size, if it holds `needed`
    /// bytes and no frame is left in it; kept ones smaller than `needed`
    /// are dropped on the way (they would block the reuse of the others).
    fn take_oldest(&mut self, needed: usize) -> Option<(BytesMut, usize)> {
        while let Some((spare, size)) = self.kept.front_mut() {
            if *size < needed {
                self.kept_bytes -= *size;
                self.kept.pop_front();
                continue;
            }
            if !spare.try_reclaim(needed) {
                return None;
            }
            let (spare, size) = self.kept.pop_front()?;
            self.kept_bytes -= size;
            return Some((spare, size));
        }
        None
    }

    /// A new allocation of at least `needed` bytes, and its size.
    fn allocate(&mut self, needed: usize) -> (BytesMut, usize) {
        #[cfg(test)]
        {
            self.made += 1;
        }
        let size = if needed > MAX_KEPT_CAPACITY {
            needed.next_multiple_of(SPARE_STEP)
        } else {
            needed
        };
        let fresh = BytesMut::with_capacity(size);
        let size = fresh.capacity();
        (fresh, size)
    }

    /// Takes `buf`'s allocation (it is empty) to keep, leaving it none.
    fn take_back(&mut self, buf: &mut BytesMut) {
        let size = std::mem::take(&mut self.current);
        self.keep(std::mem::take(buf), size);
    }

    /// Keeps the allocation `left` is in, if it is worth keeping, dropping
    /// the oldest kept ones beyond [`MAX_SPARE_BYTES`].
    fn keep(&mut self, mut left: BytesMut, size: usize) {
        if size <= MAX_KEPT_CAPACITY || size > MAX_SPARE_CAPACITY {
            return;
        }
        left.clear();
        self.kept.push_back((left, size));
        self.kept_bytes += size;
        self.kept_count += 1;
        while self.kept_bytes > MAX_SPARE_BYTES {
            let Some((_, size)) = self.kept.pop_front() else {
                break;
            };
            self.kept_bytes -= size;
        }
    }
}

/// The read-size rule of a length-prefixed stream's read buffer, and what
/// it needs to remember to give the buffer back.
///
/// Before each read, [`reserve`](Self::reserve) makes room for the rest of
/// a frame whose length is known (it passed the decoder's size check), or
/// for a chunk, but never more than what has arrived already: the buffer
/// grows with the bytes the peer sends, at most doubling, never to the
/// length it announces. Once the whole frames are out,
/// [`give_back`](Self::give_back) drops the buffer if a large frame grew
/// it past [`MAX_KEPT_CAPACITY`]. (Frames split off the front share its
/// allocation, so the capacity left says nothing about the allocation's
/// size: the growth is remembered when it happens.)
#[derive(Debug, Default, Clone, Copy)]
pub struct ReadSize {
    /// A reservation took the buffer past [`MAX_KEPT_CAPACITY`].
    grown: bool,
    /// Room for the rest of a frame is made at once, whatever has arrived
    /// ([`whole_frames`](Self::whole_frames)).
    whole: bool,
    /// A read filled its room: bytes stream in, and (under `whole`) reads
    /// get [`WHOLE_READ_CHUNK`].
    streaming: bool,
}

impl ReadSize {
    /// The rule for a buffer that has not grown yet.
    pub const fn new() -> Self {
        Self {
            grown: false,
            whole: false,
            streaming: false,
        }
    }

    /// The rule for a peer trusted with one frame's worth of memory (a
    /// client's server: one connection, frames within the client's own
    /// size limit): room for the rest of a frame whose length is known is
    /// made at once, instead of growing with what arrives (each growth
    /// copies what arrived, several times for a large frame); and once a
    /// read filled its room ([`read`](Self::read)), reads go into room of
    /// up to [`WHOLE_READ_CHUNK`] rather than [`READ_CHUNK`] (fewer reads
    /// and hand-overs while frames stream in). A connection whose reads
    /// never filled their room keeps a small buffer; one that did keeps up
    /// to [`MAX_KEPT_CAPACITY`], as after a large frame.
    pub const fn whole_frames() -> Self {
        Self {
            grown: false,
            whole: true,
            streaming: false,
        }
    }

    /// Makes room in `buf` before the next read, by the rule above.
    #[inline]
    pub fn reserve(&mut self, decoder: &FrameDecoder, buf: &mut BytesMut) {
        if let Some(additional) = self.room_wanted(decoder, buf) {
            buf.reserve(additional);
            self.grown |= buf.capacity() > MAX_KEPT_CAPACITY;
        }
    }

    /// [`reserve`](Self::reserve), in an allocation of `spares` when the
    /// buffer's own is still shared with frames read into it.
    #[inline]
    pub fn reserve_from(
        &mut self,
        decoder: &FrameDecoder,
        buf: &mut BytesMut,
        spares: &mut Spares,
    ) {
        if let Some(additional) = self.room_wanted(decoder, buf) {
            spares.reserve(buf, additional);
            self.grown |= buf.capacity() > MAX_KEPT_CAPACITY;
        }
    }

    /// The room to reserve before the next read, if `buf` lacks it.
    #[inline]
    fn room_wanted(&self, decoder: &FrameDecoder, buf: &BytesMut) -> Option<usize> {
        let len = buf.len();
        let wanted = match decoder.next_frame_len(buf) {
            Ok(Some(frame_len)) if self.whole => frame_len.saturating_sub(len),
            Ok(Some(frame_len)) => frame_len.saturating_sub(len).min(len.max(READ_CHUNK)),
            _ => 0,
        };
        // The room a read gets besides a frame's rest: a chunk; under
        // `whole_frames` a larger one, counting what the buffer holds so
        // that small frames never take it past `MAX_KEPT_CAPACITY`.
        let (low, chunk) = if self.whole && self.streaming {
            let chunk = WHOLE_READ_CHUNK / 2;
            (chunk, WHOLE_READ_CHUNK.saturating_sub(len).max(chunk))
        } else {
            (READ_CHUNK / 2, READ_CHUNK)
        };
        (buf.capacity() - len < wanted.max(low)).then(|| wanted.max(chunk))
    }

    /// Called after a read of `got` bytes into `room` bytes of room: one
    /// that filled it tells that bytes stream in.
    #[inline]
    pub fn read(&mut self, got: usize, room: usize) {
        self.streaming |= got >= room;
    }

    /// Called once the whole frames were taken out of `buf`: gives its
    /// allocation back if a large frame grew it and nothing is left in it.
    #[inline]
    pub fn give_back(&mut self, buf: &mut BytesMut) {
        if self.grown && buf.is_empty() {
            *buf = BytesMut::new();
            self.grown = false;
        }
    }

    /// [`give_back`](Self::give_back), keeping the allocation in `spares`
    /// (if it is one of theirs and within [`MAX_SPARE_CAPACITY`]).
    #[inline]
    pub fn give_back_to(&mut self, buf: &mut BytesMut, spares: &mut Spares) {
        if self.grown && buf.is_empty() {
            spares.take_back(buf);
            self.grown = false;
        }
    }

    /// Called when the connection went quiet: gives `buf`'s allocation
    /// back whatever its size, if nothing is in it.
    pub fn release(&mut self, buf: &mut BytesMut) {
        if buf.is_empty() {
            *buf = BytesMut::new();
            self.grown = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::BufMut;

    use super::*;
    use crate::frame::LENGTH_PREFIX_LEN;

    #[test]
    fn room_follows_what_arrived_not_what_is_announced() {
        let decoder = FrameDecoder::new(1 << 20);
        let mut rule = ReadSize::new();
        let mut buf = BytesMut::new();
        rule.reserve(&decoder, &mut buf);
        assert!(buf.capacity() >= READ_CHUNK);
        // A frame of 1 MiB announced, 100 bytes of it here.
        buf.put_u32_le(1 << 20);
        buf.put_slice(&[0; 96]);
        let before = buf.capacity();
        for _ in 0..3 {
            // Reserving again without reading adds nothing.
            rule.reserve(&decoder, &mut buf);
        }
        // A chunk or two, not the megabyte announced.
        assert!(buf.capacity() <= before.max(2 * READ_CHUNK));
        assert!(!rule.grown);
    }

    #[test]
    fn whole_frames_make_room_for_the_rest_of_a_frame_at_once() {
        let decoder = FrameDecoder::new(1 << 20);
        let mut rule = ReadSize::whole_frames();
        let mut buf = BytesMut::new();
        // A frame of 100 KiB announced, its header here: one reservation
        // makes room for all of it (no growth, and no copy, per read).
        let frame_len = 100 * 1024;
        buf.put_u32_le(frame_len as u32);
        buf.put_slice(&[0; 7]);
        rule.reserve(&decoder, &mut buf);
        assert!(buf.capacity() >= LENGTH_PREFIX_LEN + frame_len);
        assert!(rule.grown, "given back once empty, as any grown buffer");
        // Past the decoder's limit, nothing is reserved for it.
        let mut rule = ReadSize::whole_frames();
        let mut buf = BytesMut::new();
        buf.put_u32_le(4 << 20);
        rule.reserve(&decoder, &mut buf);
        assert!(buf.capacity() <= WHOLE_READ_CHUNK);
    }

    #[test]
    fn streaming_reads_get_a_large_chunk_that_small_frames_never_grow() {
        let decoder = FrameDecoder::new(1 << 20);
        let mut rule = ReadSize::whole_frames();
        let mut buf = BytesMut::new();
        // Reads that do not fill their room: a chunk.
        rule.reserve(&decoder, &mut buf);
        let room = buf.capacity();
        assert!(room < WHOLE_READ_CHUNK / 2);
        rule.read(room - 1, room);
        rule.reserve(&decoder, &mut buf);
        assert_eq!(buf.capacity(), room);
        // One that fills it: larger reads from then on.
        rule.read(room, room);
        // The application keeps some frames a while (their allocation is
        // shared), and each read ends mid-frame: the buffer holds the first
        // 30 bytes of a 100-byte frame when room is made for the next.
        let mut kept = Vec::new();
        for round in 0..1000 {
            rule.reserve(&decoder, &mut buf);
            let room = buf.capacity() - buf.len();
            assert!(
                room >= WHOLE_READ_CHUNK / 2,
                "round {round}: {room} bytes of room"
            );
            if round > 0 {
                // The rest of the frame begun in the last read.
                buf.put_bytes(0, 70);
            }
            for _ in 0..50 {
                buf.put_u32_le(96);
                buf.put_bytes(0, 96);
            }
            buf.put_u32_le(96);
            buf.put_bytes(0, 26);
            let whole = buf.len() - 30;
            let mut frames = buf.split_to(whole);
            kept.push(frames.split_to(100).freeze());
            if kept.len() > 8 {
                kept.remove(0);
            }
            rule.give_back(&mut buf);
            assert!(!rule.grown, "round {round}: grown past MAX_KEPT_CAPACITY");
            assert!(buf.capacity() <= MAX_KEPT_CAPACITY, "round {round}");
        }
    }

    #[test]
    fn a_buffer_grown_for_a_large_frame_is_given_back_once_empty() {
        let decoder = FrameDecoder::new(1 << 20);
        let mut rule = ReadSize::new();
        let mut buf = BytesMut::new();
        let frame_len = 200 * 1024;
        buf.put_u32_le(frame_len as u32);
        buf.put_slice(&[0; 7]);
        while buf.len() < LENGTH_PREFIX_LEN + frame_len {
            rule.reserve(&decoder, &mut buf);
            let room = buf.capacity() - buf.len();
            let take = room.min(LENGTH_PREFIX_LEN + frame_len - buf.len());
            buf.put_bytes(1, take);
        }
        assert!(rule.grown);
        let mut kept = buf.clone();
        rule.give_back(&mut kept);
        assert_eq!(kept.len(), buf.len(), "not while bytes are in it");
        buf.clear();
        rule.give_back(&mut buf);
        assert_eq!(buf.capacity(), 0);
        assert!(!rule.grown);
    }

    /// Reads `frames` frames of `len` bytes (4-byte prefix included) as a
    /// client's reader does, the application holding the last `held`;
    /// returns how many allocations the reads took.
    fn allocations_for(
        frames: usize,
        len: usize,
        held: usize,
        spares: Option<&mut Spares>,
    ) -> usize {
        let decoder = FrameDecoder::new(1 << 20);
        let mut rule = ReadSize::whole_frames();
        let mut own = Spares::new();
        let spares = spares.unwrap_or(&mut own);
        let mut buf = BytesMut::new();
        let mut app = std::collections::VecDeque::new();
        for _ in 0..frames {
            buf.put_u32_le((len - LENGTH_PREFIX_LEN) as u32);
            buf.put_bytes(0, 8);
            rule.reserve_from(&decoder, &mut buf, spares);
            let rest = len - buf.len();
            buf.put_bytes(1, rest);
            let frame = buf.split_to(len).freeze();
            assert!(frame[12..].iter().all(|&byte| byte == 1));
            app.push_back(frame);
            if app.len() > held {
                app.pop_front();
            }
            rule.give_back_to(&mut buf, spares);
        }
        spares.made
    }

    #[test]
    fn large_frames_are_read_into_kept_allocations_once_their_frames_are_gone() {
        // 64 KiB chunks (past MAX_KEPT_CAPACITY), the application holding
        // the last four: a handful of allocations for 200 frames.
        let len = 64 * 1024 + 20;
        let used = allocations_for(200, len, 4, None);
        assert!(used <= 6, "{used} allocations for 200 frames");
        // As many as a widest download has in flight: still reused.
        let used = allocations_for(200, len, 30, None);
        assert!(used <= 32, "{used} allocations for 200 frames");
        // Holding more than the spares cover costs allocations, never a
        // frame's bytes (each checked as split off).
        let held = MAX_SPARE_BYTES / len + 10;
        let used = allocations_for(200, len, held, None);
        assert!(used > held, "{used} allocations");
    }

    #[test]
    fn spares_keep_only_large_frames_allocations_within_their_bound() {
        // Small frames: nothing kept (an idle client holds one buffer).
        let mut spares = Spares::new();
        allocations_for(100, 1000, 4, Some(&mut spares));
        assert!(!spares.holds());
        // Past MAX_SPARE_CAPACITY: nothing kept either.
        let mut spares = Spares::new();
        allocations_for(10, MAX_SPARE_CAPACITY + 100, 2, Some(&mut spares));
        assert!(!spares.holds());
        // Large frames: kept, at most MAX_SPARE_BYTES, until released.
        let mut spares = Spares::new();
        allocations_for(100, 100 * 1024, 40, Some(&mut spares));
        assert!(spares.holds());
        let kept: usize = spares.kept.iter().map(|(_, size)| size).sum();
        assert!(kept == spares.kept_bytes && kept <= MAX_SPARE_BYTES);
        spares.release();
        assert!(!spares.holds());
    }

    #[test]
    fn small_frames_leave_the_spares_alone() {
        let mut spares = Spares::new();
        allocations_for(50, 100 * 1024, 4, Some(&mut spares));
        let (count, kept) = (spares.kept_count(), spares.kept.len());
        assert!(kept > 0);
        // Small frames after large ones neither take the spares (and keep
        // them again) nor make them move.
        allocations_for(200, 1000, 4, Some(&mut spares));
        assert_eq!(spares.kept_count(), count, "small frames kept allocations");
        assert_eq!(spares.kept.len(), kept);
    }

    #[test]
    fn spares_too_small_for_larger_frames_make_way() {
        let mut spares = Spares::new();
        allocations_for(50, 70 * 1024, 4, Some(&mut spares));
        let before = spares.made;
        // Frames that grew: the 72 KiB spares go rather than block the
        // reuse of the larger ones behind them.
        allocations_for(100, 200 * 1024, 4, Some(&mut spares));
        let used = spares.made - before;
        assert!(used <= 8, "{used} allocations for 100 frames");
        assert!(spares.kept.iter().all(|(_, size)| *size >= 200 * 1024));
    }

    #[test]
    fn a_large_body_is_not_opened_in_the_reused_buffer() {
        let mut reused = BytesMut::new();
        let body = copy_to_open(&mut reused, &[1; 100]);
        assert_eq!(&body[..], &[1; 100][..]);
        drop(body);
        let body = copy_to_open(&mut reused, &[2; 80]);
        assert_eq!(&body[..], &[2; 80][..]);
        let large = vec![3; MAX_KEPT_CAPACITY + 1];
        let body = copy_to_open(&mut reused, &large);
        assert_eq!(&body[..], &large[..]);
        assert!(reused.capacity() < MAX_KEPT_CAPACITY);
    }

    #[test]
    fn emptying_keeps_a_small_allocation_only() {
        let mut small = BytesMut::with_capacity(1024);
        small.put_slice(b"abc");
        empty(&mut small);
        assert!(small.is_empty() && small.capacity() >= 1024);
        let mut large = BytesMut::with_capacity(MAX_KEPT_CAPACITY + 1);
        empty(&mut large);
        assert_eq!(large.capacity(), 0);
    }
}
