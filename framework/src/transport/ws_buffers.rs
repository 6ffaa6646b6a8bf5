//! The socket under the server's tungstenite stream, counting what it
//! reads, so that a quiet connection can get a fresh stream and give back
//! the buffers a large message grew (see [`ternio_protocol::websocket`]).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use ternio_protocol::websocket::{ReadCount, min_frame_len};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_tungstenite::tungstenite::Message;

/// A socket that counts the bytes read through it after the upgrade request.
pub(crate) struct CountingStream<S> {
    inner: S,
    count: ReadCount,
}

impl<S> CountingStream<S> {
    pub(crate) fn new(inner: S) -> Self {
        Self {
            inner,
            count: ReadCount::new(),
        }
    }

    pub(crate) fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Bytes read after the upgrade request (`None`: its end was not seen).
    pub(crate) fn read_after_request(&self) -> Option<u64> {
        self.count.after_head()
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

/// The fewest bytes `message` can have taken on the wire from a client.
pub(crate) fn wire_len(message: &Message) -> u64 {
    min_frame_len(payload_len(message), true)
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
            this.count.count(&filled[before..]);
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
    use tokio_tungstenite::tungstenite::protocol::CloseFrame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

    #[test]
    fn wire_lengths_are_those_of_masked_frames() {
        let binary = |len: usize| Message::Binary(vec![0; len].into());
        assert_eq!(wire_len(&binary(125)), 131);
        assert_eq!(wire_len(&binary(70_000)), 70_014);
        assert_eq!(wire_len(&Message::Ping(vec![1, 2].into())), 8);
        assert_eq!(wire_len(&Message::Close(None)), 6);
        let close = CloseFrame {
            code: CloseCode::Normal,
            reason: "bye".into(),
        };
        assert_eq!(wire_len(&Message::Close(Some(close))), 11);
    }
}
