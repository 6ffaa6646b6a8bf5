//! Counting WebSocket bytes, to know when a WebSocket library holds no
//! unread input (section 1.2 carries each frame in one binary message).
//!
//! tungstenite keeps its read buffer at the size of the largest message
//! for as long as its stream lives; the server and the client give that
//! memory back by putting a fresh stream around the same socket, which is
//! only safe when the old one holds no byte it read and did not return.
//! They count the bytes read after the HTTP upgrade head ([`ReadCount`])
//! and, for every message returned, the fewest bytes it can have taken on
//! the wire ([`min_frame_len`]). A message sent in fragments, or with a
//! longer length encoding than needed, took more than that: the sum never
//! exceeds the bytes the messages took, and it equals the bytes read only
//! when every byte read belongs to a returned message.

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

    /// Bytes read after the upgrade head, or `None` while its end was not
    /// seen (then nothing is known).
    pub fn after_head(&self) -> Option<u64> {
        self.after_head
    }
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
    fn frame_lengths_are_the_shortest_encodings() {
        assert_eq!(min_frame_len(0, true), 6);
        assert_eq!(min_frame_len(125, true), 131);
        assert_eq!(min_frame_len(126, true), 134);
        assert_eq!(min_frame_len(65_535, true), 65_543);
        assert_eq!(min_frame_len(65_536, true), 65_550);
        assert_eq!(min_frame_len(65_536, false), 65_546);
        assert_eq!(min_frame_len(2, false), 4);
    }
}
