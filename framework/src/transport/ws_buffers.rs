//! Knowing when tungstenite holds no unread input, so that a quiet
//! WebSocket connection can give its buffers back.
//!
//! tungstenite keeps its read buffer (and its write buffer) at the size of
//! the largest message for as long as its stream lives. When a connection
//! goes quiet, the transport puts a fresh stream around the same socket,
//! but only if the old one holds nothing: a byte it read and did not yet
//! return would be lost.
//!
//! [`CountingStream`] counts the bytes read from the socket after the HTTP
//! upgrade request; [`wire_len`] gives the fewest bytes each message
//! tungstenite returned can have taken on the wire (one frame, the shortest
//! length encoding, the mask every client frame carries). A message sent in
//! fragments, or with a longer length encoding, took more: so the count of
//! returned messages never exceeds what they took, and it equals the bytes
//! read only when every byte read belongs to a returned message. A client
//! that fragments its messages just keeps its buffers.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_tungstenite::tungstenite::Message;

/// A socket that counts the bytes read through it after the upgrade
/// request's end (the first empty line, as HTTP/1.1 parsers find it).
pub(crate) struct CountingStream<S> {
    inner: S,
    /// Bytes read since the request's end (`None` until it was seen).
    after_request: Option<u64>,
    /// Of the request's last bytes: 1 after a `\n`, 2 after `\n\r`, else 0.
    line_end: u8,
}

impl<S> CountingStream<S> {
    pub(crate) fn new(inner: S) -> Self {
        Self {
            inner,
            after_request: None,
            line_end: 0,
        }
    }

    pub(crate) fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Bytes read after the upgrade request, or `None` when its end was not
    /// seen (then nothing is known).
    pub(crate) fn read_after_request(&self) -> Option<u64> {
        self.after_request
    }

    fn count(&mut self, bytes: &[u8]) {
        if let Some(after) = &mut self.after_request {
            *after += bytes.len() as u64;
            return;
        }
        for (at, &byte) in bytes.iter().enumerate() {
            // An empty line ends the request: `\n\n` or `\n\r\n`.
            self.line_end = match (self.line_end, byte) {
                (1 | 2, b'\n') => {
                    self.after_request = Some((bytes.len() - at - 1) as u64);
                    return;
                }
                (1, b'\r') => 2,
                (_, b'\n') => 1,
                _ => 0,
            };
        }
    }
}

/// The fewest bytes `message` can have taken on the wire from a client.
pub(crate) fn wire_len(message: &Message) -> u64 {
    let payload = match message {
        Message::Binary(bytes) | Message::Ping(bytes) | Message::Pong(bytes) => bytes.len(),
        Message::Text(text) => text.len(),
        Message::Close(Some(close)) => 2 + close.reason.len(),
        Message::Close(None) => 0,
        Message::Frame(frame) => frame.payload().len(),
    };
    let length = match payload {
        0..126 => 0,
        126..=0xFFFF => 2,
        _ => 8,
    };
    // Two header bytes, the extended length, the 4-byte mask, the payload.
    (2 + length + 4 + payload) as u64
}

impl<S: AsyncRead + Unpin> AsyncRead for CountingStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let filled = buf.filled();
            this.count(&filled[before..]);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for CountingStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a stream reading `chunks` one after the other counts.
    fn counted(chunks: &[&[u8]]) -> Option<u64> {
        let mut stream = CountingStream::new(());
        for chunk in chunks {
            stream.count(chunk);
        }
        stream.read_after_request()
    }

    #[test]
    fn counts_what_follows_the_first_empty_line() {
        let request = b"GET /ws HTTP/1.1\r\nHost: x\r\n\r\n";
        assert_eq!(counted(&[request]), Some(0));
        assert_eq!(counted(&[request, b"abc"]), Some(3));
        let mut pipelined = request.to_vec();
        pipelined.extend_from_slice(b"\x82\x80\r\n\r\n");
        assert_eq!(counted(&[&pipelined]), Some(6));
    }

    #[test]
    fn finds_the_end_across_reads_and_with_bare_line_feeds() {
        assert_eq!(counted(&[b"GET / HTTP/1.1\r\n\r", b"\nxy"]), Some(2));
        assert_eq!(counted(&[b"GET / HTTP/1.1\r\n", b"\r\n", b"z"]), Some(1));
        assert_eq!(counted(&[b"GET / HTTP/1.1\n\nxyz"]), Some(3));
        assert_eq!(counted(&[b"GET / HTTP/1.1\r\nHost: x\r\n"]), None);
        // A lone `\r` between lines is no empty line.
        assert_eq!(counted(&[b"GET / HTTP/1.1\r\r\nx"]), None);
    }

    #[test]
    fn wire_lengths_are_the_shortest_client_frames() {
        let binary = |len: usize| Message::Binary(vec![0; len].into());
        assert_eq!(wire_len(&binary(0)), 6);
        assert_eq!(wire_len(&binary(125)), 131);
        assert_eq!(wire_len(&binary(126)), 134);
        assert_eq!(wire_len(&binary(65_535)), 65_543);
        assert_eq!(wire_len(&binary(65_536)), 65_550);
        assert_eq!(wire_len(&Message::Close(None)), 6);
        assert_eq!(wire_len(&Message::Ping(vec![1, 2].into())), 8);
    }
}
