//! Counting WebSocket bytes, to know when a WebSocket library holds no
//! unread input (section 1.2 carries each frame in one binary message),
//! and when its stream may be made anew to give its buffers back.
//!
//! tungstenite keeps its read buffer at the size of the largest message
//! for as long as its stream lives; the server and the client give that
//! memory back by putting a fresh stream around the same socket
//! ([`Renewal`]), which is only safe when the old one holds no byte it
//! read and did not return. They count the bytes read after the HTTP
//! upgrade head ([`ReadCount`]) and, for every message returned, the
//! fewest bytes it can have taken on the wire ([`min_frame_len`]). A
//! message sent in fragments, or with a longer length encoding than
//! needed, took more than that: the sum never exceeds the bytes the
//! messages took, and it equals the bytes read only when every byte read
//! belongs to a returned message.

use crate::buffers::{MAX_KEPT_CAPACITY, READ_CHUNK};

/// Counts the bytes read from a socket after the end of the HTTP upgrade
/// head (its first empty line, ended by `\n\n` or `\n\r\n` as lenient
/// HTTP/1.1 parsers accept it).
#[derive(Debug, Default, Clone)]
pub struct ReadCount {
    /// Bytes read after the head (`None` until its end was seen).
    after_head: Option<u64>,
    /// Of the head's last bytes: 1 after a `\n`, 2 after `\n\r`, else 0.
    line_end: u8,
}

impl ReadCount {
    /// A count that has seen nothing yet.
    pub const fn new() -> Self {
        Self {
            after_head: None,
            line_end: 0,
        }
    }

    /// Counts `bytes`, just read from the socket.
    pub fn count(&mut self, bytes: &[u8]) {
        if let Some(after) = &mut self.after_head {
            *after += bytes.len() as u64;
            return;
        }
        for (at, &byte) in bytes.iter().enumerate() {
            self.line_end = match (self.line_end, byte) {
                (1 | 2, b'\n') => {
                    self.after_head = Some((bytes.len() - at - 1) as u64);
                    return;
                }
                (1, b'\r') => 2,
                (_, b'\n') => 1,
                _ => 0,
            };
        }
    }

    /// The head ended just now, as a caller that knows it says (a server
    /// whose upgrade completed: the head is what its HTTP parser took,
    /// whatever the bytes looked like): what is counted from now on is
    /// after it.
    pub fn head_ended(&mut self) {
        self.after_head = Some(0);
    }

    /// Bytes read after the upgrade head, or `None` while its end was not
    /// seen (then nothing is known).
    pub fn after_head(&self) -> Option<u64> {
        self.after_head
    }
}

/// Where the WebSocket frame at the start of `bytes` ends (RFC 6455
/// section 5.2): its header's length (two bytes, the extended length, the
/// mask when set) and the payload length it announces; `None` while the
/// header has not all arrived.
pub fn frame_extent(bytes: &[u8]) -> Option<(usize, u64)> {
    let [_, second, ..] = *bytes else {
        return None;
    };
    let (extended, short) = match second & 0x7F {
        126 => (2, None),
        127 => (8, None),
        len => (0, Some(u64::from(len))),
    };
    let mask = if second & 0x80 != 0 { 4 } else { 0 };
    let header = 2 + extended + mask;
    if bytes.len() < header {
        return None;
    }
    let payload = short.unwrap_or_else(|| {
        bytes[2..2 + extended]
            .iter()
            .fold(0u64, |len, &byte| len << 8 | u64::from(byte))
    });
    Some((header, payload))
}

/// The fewest bytes a WebSocket frame with `payload` bytes takes: two
/// header bytes, the shortest extended length, the 4-byte mask if `masked`
/// (every client frame is), the payload.
pub const fn min_frame_len(payload: usize, masked: bool) -> u64 {
    let length = if payload < 126 {
        0
    } else if payload <= 0xFFFF {
        2
    } else {
        8
    };
    let mask = if masked { 4 } else { 0 };
    (2 + length + mask + payload) as u64
}

/// What a WebSocket stream returned and carried since it was made: whether
/// it may be made anew around the same socket, which gives back the
/// buffers it grew.
///
/// Only what grew is given back, and only when the stream holds no byte it
/// read and did not return. Right after a message (the client's moment: it
/// reads on at once) that is a stream that carried a message above
/// [`MAX_KEPT_CAPACITY`], the bound every emptied buffer keeps; once the
/// connection went quiet (the server's moment) it is any stream that
/// carried a message above the [`READ_CHUNK`] it starts with, as a quiet
/// connection gives back every buffer that grew.
#[derive(Debug, Default, Clone)]
pub struct Renewal {
    /// The fewest bytes the messages returned took on the wire (since the
    /// upgrade: it goes on across renewals, as the socket's count does).
    returned: u64,
    /// The largest message read or written since the stream was made.
    largest: usize,
}

impl Renewal {
    /// Nothing returned yet.
    pub const fn new() -> Self {
        Self {
            returned: 0,
            largest: 0,
        }
    }

    /// Counts a message the stream returned, of `payload` bytes (a Close
    /// frame's code included); `masked` when a client sent it.
    #[inline]
    pub fn note_returned(&mut self, payload: usize, masked: bool) {
        self.returned += min_frame_len(payload, masked);
        self.largest = self.largest.max(payload);
    }

    /// Counts a message of `len` bytes written through the stream (its
    /// write buffer grows to the largest one).
    #[inline]
    pub fn note_written(&mut self, len: usize) {
        self.largest = self.largest.max(len);
    }

    /// Whether the stream holds no byte it read and did not return, by
    /// `read`, the count of its socket's reads.
    pub fn holds_nothing_unread(&self, read: &ReadCount) -> bool {
        read.after_head() == Some(self.returned)
    }

    /// Whether the stream may be made anew right after a message.
    pub fn may_renew_now(&self, read: &ReadCount) -> bool {
        self.largest > MAX_KEPT_CAPACITY && self.holds_nothing_unread(read)
    }

    /// Whether the stream may be made anew now that its connection went
    /// quiet.
    pub fn may_renew_when_quiet(&self, read: &ReadCount) -> bool {
        self.largest > READ_CHUNK && self.holds_nothing_unread(read)
    }

    /// The stream was made anew: the sizes count from nothing again.
    pub fn renewed(&mut self) {
        self.largest = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a count of `chunks`, read one after the other, says.
    fn counted(chunks: &[&[u8]]) -> Option<u64> {
        let mut count = ReadCount::new();
        for chunk in chunks {
            count.count(chunk);
        }
        count.after_head()
    }

    #[test]
    fn counts_what_follows_the_first_empty_line() {
        let head = b"GET /ws HTTP/1.1\r\nHost: x\r\n\r\n";
        assert_eq!(counted(&[head]), Some(0));
        assert_eq!(counted(&[head, b"abc"]), Some(3));
        let mut pipelined = head.to_vec();
        pipelined.extend_from_slice(b"\x82\x80\r\n\r\n");
        assert_eq!(counted(&[&pipelined]), Some(6));
    }

    #[test]
    fn finds_the_end_across_reads_and_with_bare_line_feeds() {
        assert_eq!(counted(&[b"HTTP/1.1 101 OK\r\n\r", b"\nxy"]), Some(2));
        assert_eq!(counted(&[b"GET / HTTP/1.1\r\n", b"\r\n", b"z"]), Some(1));
        assert_eq!(counted(&[b"GET / HTTP/1.1\n\nxyz"]), Some(3));
        assert_eq!(counted(&[b"GET / HTTP/1.1\r\nHost: x\r\n"]), None);
        // A lone `\r` between lines is no empty line.
        assert_eq!(counted(&[b"GET / HTTP/1.1\r\r\nx"]), None);
    }

    #[test]
    fn a_stream_is_renewed_when_it_grew_and_holds_nothing_unread() {
        let head = b"HTTP/1.1 101 Switching Protocols\r\n\r\n";
        let mut read = ReadCount::new();
        read.count(head);
        let mut renewal = Renewal::new();
        // A 20 KiB message read whole, from the server (unmasked).
        let large = 20 * 1024;
        read.count(&vec![0; min_frame_len(large, false) as usize]);
        renewal.note_returned(large, false);
        assert!(renewal.may_renew_when_quiet(&read));
        assert!(!renewal.may_renew_now(&read), "20 KiB is kept");
        // Half of the next message was read: nothing may be renewed.
        read.count(&[0x82, 0x02]);
        assert!(!renewal.may_renew_when_quiet(&read));
        read.count(&[9, 9]);
        renewal.note_returned(2, false);
        assert!(renewal.may_renew_when_quiet(&read));
        // Above the kept capacity, written: renewed at once too.
        renewal.note_written(MAX_KEPT_CAPACITY + 1);
        assert!(renewal.may_renew_now(&read));
        renewal.renewed();
        assert!(!renewal.may_renew_when_quiet(&read));
        assert!(renewal.holds_nothing_unread(&read));
    }

    #[test]
    fn frame_lengths_are_the_shortest_encodings() {
        assert_eq!(min_frame_len(0, true), 6);
        assert_eq!(min_frame_len(125, true), 131);
        assert_eq!(min_frame_len(126, true), 134);
        assert_eq!(min_frame_len(65_535, true), 65_543);
        assert_eq!(min_frame_len(65_536, true), 65_550);
        assert_eq!(min_frame_len(65_536, false), 65_546);
        assert_eq!(min_frame_len(2, false), 4);
    }

    #[test]
    fn frame_extents_follow_the_three_length_forms() {
        assert_eq!(frame_extent(&[0x82]), None, "one byte is not a header");
        assert_eq!(frame_extent(&[0x82, 5]), Some((2, 5)), "unmasked, short");
        assert_eq!(
            frame_extent(&[0x82, 0x85, 1, 2, 3]),
            None,
            "the mask is missing a byte"
        );
        assert_eq!(frame_extent(&[0x82, 0x85, 1, 2, 3, 4]), Some((6, 5)));
        assert_eq!(frame_extent(&[0x82, 0x80 | 126, 0x01]), None);
        assert_eq!(
            frame_extent(&[0x82, 0x80 | 126, 0x01, 0x00, 1, 2, 3, 4]),
            Some((8, 256))
        );
        let mut long = vec![0x82, 0x80 | 127];
        long.extend_from_slice(&1_000_000u64.to_be_bytes());
        assert_eq!(frame_extent(&long), None, "no mask yet");
        long.extend_from_slice(&[1, 2, 3, 4]);
        assert_eq!(frame_extent(&long), Some((14, 1_000_000)));
        assert_eq!(
            frame_extent(&[0x82, 127, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]),
            Some((10, u64::MAX)),
            "no overflow"
        );
    }
}
