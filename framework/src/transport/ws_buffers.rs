//! The socket under the server's tungstenite stream. It counts what it
//! reads, so that a quiet connection can get a fresh stream and give back
//! the buffers a large message grew (see [`ternio_protocol::websocket`]),
//! and it hands tungstenite whole frames only: tungstenite reserves the
//! length a frame's header announces as soon as it reads it, so a peer
//! that announced a large frame and sent little would otherwise make the
//! server hold what it announced.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use ternio_protocol::buffers::{MAX_KEPT_CAPACITY, READ_CHUNK};
use ternio_protocol::websocket::{ReadCount, frame_extent};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::io::poll_read_buf;

/// The most a control frame (ping, pong, close) carries (RFC 6455 section 5.5).
const MAX_CONTROL_PAYLOAD: usize = 125;

/// A socket that counts the bytes read from it after the upgrade request,
/// and gives the frames after it to its reader only once each is whole.
pub(crate) struct CountingStream<S> {
    inner: S,
    /// Counts from the end of the upgrade ([`upgraded`](Self::upgraded)).
    count: ReadCount,
    /// Whether the upgrade completed: frames come from now on. (Before, the
    /// bytes go through as they are: tungstenite refuses an upgrade request
    /// followed by any byte it read with it, so when it completes, the next
    /// byte is a frame's first, whatever the request looked like.)
    framing: bool,
    /// What was read from the socket and not given to the reader yet: it
    /// grows with what arrives, never with what a header announces.
    held: BytesMut,
    /// Bytes at the front of `held` the reader may have now: whole frames.
    ready: usize,
    /// The largest payload a frame, or the frames of one message, may
    /// announce (the engine's frame limit).
    limit: usize,
    /// The payload announced so far by the frames of an unfinished
    /// (fragmented) message.
    message: u64,
    /// Whether the reader has the first fragments of a message whose last
    /// has not come.
    unfinished: bool,
    /// The frame that announced more than `limit`: the read failed.
    refused: Option<(u64, usize)>,
}

impl<S> CountingStream<S> {
    pub(crate) fn new(inner: S) -> Self {
        Self {
            inner,
            count: ReadCount::new(),
            framing: false,
            held: BytesMut::new(),
            ready: 0,
            limit: usize::MAX,
            message: 0,
            unfinished: false,
            refused: None,
        }
    }

    /// The upgrade completed: what is read from now on is frames, counted.
    pub(crate) fn upgraded(&mut self) {
        self.framing = true;
        self.count.head_ended();
    }

    /// The largest payload a frame may announce from now on: a frame
    /// announced past it fails the read at its header
    /// ([`refused`](Self::refused) says so).
    pub(crate) fn set_frame_limit(&mut self, limit: usize) {
        self.limit = limit;
    }

    /// The payload length and the limit of the frame refused, if one was.
    pub(crate) fn refused(&self) -> Option<(u64, usize)> {
        self.refused
    }

    /// Whether the peer left something unfinished: part of a frame waits
    /// here, or the reader has the first fragments of a message and not
    /// its last. (Whole frames go to the reader at once and it returns
    /// them, so nothing else can wait.)
    pub(crate) fn holds_unfinished(&self) -> bool {
        self.unfinished || self.held.len() > self.ready
    }

    /// Makes the whole frames in `held` past `ready` ready; stops at a
    /// frame whose message announces more than the limit, or a control
    /// frame of more than 125 bytes (which the next read, once what is
    /// ready is taken, fails with).
    fn release_whole_frames(&mut self) {
        while let Some((header, payload)) = frame_extent(&self.held[self.ready..]) {
            let first = self.held[self.ready];
            // Control frames (opcode 8 and up) stand alone, even between
            // the fragments of a message, and carry at most 125 bytes.
            let data = first & 0x08 == 0;
            let (announced, limit) = if data {
                (self.message.saturating_add(payload), self.limit)
            } else {
                (payload, MAX_CONTROL_PAYLOAD)
            };
            if announced > limit as u64 {
                self.refused = Some((announced, limit));
                return;
            }
            let whole = header + payload as usize;
            if self.held.len() - self.ready < whole {
                return;
            }
            self.ready += whole;
            if data {
                // FIN ends the message.
                let fin = first & 0x80 != 0;
                self.message = if fin { 0 } else { announced };
                self.unfinished = !fin;
            }
        }
    }

    pub(crate) fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The count of what was read, for [`Renewal`](ternio_protocol::websocket::Renewal).
    pub(crate) fn read_count(&self) -> &ReadCount {
        &self.count
    }
}

/// The payload of `message` as it travelled: a Close frame's code included.
pub(crate) fn payload_len(message: &Message) -> usize {
    match message {
        Message::Close(Some(close)) => 2 + close.reason.len(),
        other => other.len(),
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for CountingStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.framing {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        loop {
            if this.ready > 0 {
                let given = this.ready.min(buf.remaining());
                buf.put_slice(&this.held[..given]);
                this.held.advance(given);
                this.ready -= given;
                if this.held.is_empty() && this.held.capacity() > MAX_KEPT_CAPACITY {
                    this.held = BytesMut::new();
                }
                return Poll::Ready(Ok(()));
            }
            if let Some((announced, limit)) = this.refused {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "a WebSocket frame announced {announced} bytes, more than the {limit} allowed"
                    ),
                )));
            }
            if this.held.capacity() - this.held.len() < READ_CHUNK / 2 {
                this.held.reserve(READ_CHUNK);
            }
            let before = this.held.len();
            let read =
                std::task::ready!(poll_read_buf(Pin::new(&mut this.inner), cx, &mut this.held))?;
            if read == 0 {
                // The end: whatever is held goes as it is (the reader
                // sees a frame cut short), then the end itself.
                this.ready = this.held.len();
                if this.ready == 0 {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            this.count.count(&this.held[before..]);
            this.release_whole_frames();
        }
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
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A masked binary frame with `payload` bytes of `fill`.
    fn frame(payload: usize, fill: u8) -> Vec<u8> {
        frame_with(0x82, payload, fill)
    }

    /// A masked frame whose first byte (FIN, opcode) is `first`.
    fn frame_with(first: u8, payload: usize, fill: u8) -> Vec<u8> {
        let mut frame = vec![first];
        match payload {
            0..126 => frame.push(0x80 | payload as u8),
            126..=0xFFFF => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(payload as u16).to_be_bytes());
            }
            _ => {
                frame.push(0x80 | 127);
                frame.extend_from_slice(&(payload as u64).to_be_bytes());
            }
        }
        frame.extend_from_slice(&[0; 4]);
        frame.extend(std::iter::repeat_n(fill, payload));
        frame
    }

    /// What the reader gets now, without waiting for more.
    async fn available<S: AsyncRead + Unpin>(stream: &mut CountingStream<S>) -> Vec<u8> {
        let mut got = Vec::new();
        let mut chunk = [0u8; 300];
        while let Ok(Ok(read)) = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            stream.read(&mut chunk),
        )
        .await
        {
            if read == 0 {
                break;
            }
            got.extend_from_slice(&chunk[..read]);
        }
        got
    }

    #[tokio::test]
    async fn the_upgrade_goes_through_then_whole_frames_only() {
        let (mut peer, socket) = tokio::io::duplex(1 << 20);
        let mut stream = CountingStream::new(socket);
        stream.set_frame_limit(100_000);
        // Before the upgrade completes, bytes go through as they are,
        // uncounted (what the HTTP parser takes is the head).
        let head = b"\r\n\r\nGET /ws HTTP/1.1\r\nHost: x\r\n\r\n";
        peer.write_all(head).await.unwrap();
        assert_eq!(available(&mut stream).await, head.to_vec());
        assert_eq!(stream.read_count().after_head(), None);
        stream.upgraded();
        let first = frame(5, 1);
        let second = frame(70_000, 2);
        // A frame and a half in one write, then the rest of the second
        // frame's header, then its payload.
        let mut start = first.clone();
        start.extend_from_slice(&second[..1]);
        peer.write_all(&start).await.unwrap();
        assert_eq!(available(&mut stream).await, first, "not the half frame");
        peer.write_all(&second[1..20]).await.unwrap();
        assert!(
            available(&mut stream).await.is_empty(),
            "a header is not a frame"
        );
        peer.write_all(&second[20..]).await.unwrap();
        assert_eq!(available(&mut stream).await, second, "whole, it goes");
        assert_eq!(
            stream.read_count().after_head(),
            Some((first.len() + second.len()) as u64)
        );
        // The end: what was held goes, then the end.
        peer.write_all(&frame(10, 3)[..8]).await.unwrap();
        drop(peer);
        assert_eq!(available(&mut stream).await, frame(10, 3)[..8].to_vec());
        assert!(stream.refused().is_none());
    }

    #[tokio::test]
    async fn a_frame_announced_past_the_limit_fails_at_its_header() {
        let (mut peer, socket) = tokio::io::duplex(1 << 16);
        let mut stream = CountingStream::new(socket);
        stream.set_frame_limit(4096);
        stream.upgraded();
        let mut bytes = frame(10, 0);
        bytes.extend_from_slice(&frame(4097, 0)[..14]);
        peer.write_all(&bytes).await.unwrap();
        let mut first = [0u8; 16];
        stream.read_exact(&mut first).await.unwrap();
        let error = stream.read(&mut [0u8; 64]).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert_eq!(stream.refused(), Some((4097, 4096)));
    }

    #[tokio::test]
    async fn the_fragments_of_a_message_count_together_control_frames_alone() {
        let (mut peer, socket) = tokio::io::duplex(1 << 16);
        let mut stream = CountingStream::new(socket);
        stream.set_frame_limit(4096);
        stream.upgraded();
        // 3,000 + a ping + 1,000 bytes: one message within the limit.
        let mut fine = frame_with(0x02, 3000, 1);
        fine.extend_from_slice(&frame_with(0x89, 100, 0));
        fine.extend_from_slice(&frame_with(0x80, 1000, 2));
        peer.write_all(&fine).await.unwrap();
        assert_eq!(available(&mut stream).await, fine);
        assert!(stream.refused().is_none());
        // 3,000 + 1,097 bytes: the second fragment takes the message past it.
        let mut over = frame_with(0x02, 3000, 1);
        over.extend_from_slice(&frame_with(0x80, 1097, 2)[..14]);
        peer.write_all(&over).await.unwrap();
        let mut first = vec![0u8; 3008];
        stream.read_exact(&mut first).await.unwrap();
        let error = stream.read(&mut [0u8; 64]).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert_eq!(stream.refused(), Some((4097, 4096)));
    }

    #[tokio::test]
    async fn an_unfinished_message_or_frame_is_told() {
        let (mut peer, socket) = tokio::io::duplex(1 << 16);
        let mut stream = CountingStream::new(socket);
        stream.set_frame_limit(4096);
        stream.upgraded();
        // A whole message, then the first fragment of another: both go to
        // the reader, and the second is unfinished.
        let mut bytes = frame(10, 1);
        bytes.extend_from_slice(&frame_with(0x02, 10, 2));
        peer.write_all(&bytes).await.unwrap();
        assert_eq!(available(&mut stream).await, bytes);
        assert!(stream.holds_unfinished());
        // A ping between fragments changes nothing; the last fragment ends it.
        let mut rest = frame_with(0x89, 2, 0);
        rest.extend_from_slice(&frame_with(0x80, 10, 3));
        peer.write_all(&rest).await.unwrap();
        assert_eq!(available(&mut stream).await, rest);
        assert!(!stream.holds_unfinished());
        // Part of a frame held here is unfinished too.
        peer.write_all(&frame(10, 4)[..5]).await.unwrap();
        assert!(available(&mut stream).await.is_empty());
        assert!(stream.holds_unfinished());
    }

    #[tokio::test]
    async fn a_control_frame_of_more_than_125_bytes_fails_at_its_header() {
        let (mut peer, socket) = tokio::io::duplex(1 << 16);
        let mut stream = CountingStream::new(socket);
        stream.set_frame_limit(1 << 20);
        stream.upgraded();
        peer.write_all(&frame_with(0x89, 126, 0)[..8])
            .await
            .unwrap();
        let error = stream.read(&mut [0u8; 64]).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert_eq!(stream.refused(), Some((126, 125)));
    }
}
