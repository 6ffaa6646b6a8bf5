//! How big a connection's buffers grow and when they give memory back: the
//! same rules for the server and the client.
//!
//! A buffer grows for a large frame; one that grew past
//! [`MAX_KEPT_CAPACITY`] is given back as soon as it holds nothing, so no
//! buffer stays at the largest frame's size for a connection's life.

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
        if buf.capacity() - len < wanted.max(low) {
            buf.reserve(wanted.max(chunk));
            self.grown |= buf.capacity() > MAX_KEPT_CAPACITY;
        }
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
