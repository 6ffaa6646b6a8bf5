//! Length-prefixed frames (contract section 1.1, as over TCP) over any byte
//! stream that a [`Connector`] opens: a Unix socket, a TLS stream, an
//! in-memory pipe, a tunnel.
//!
//! As on TCP, callers encode each frame into the link's outbound buffer and
//! write it from their own task when nothing is queued before it (a poll of
//! the stream's write half that wakes nobody); the writer task takes over
//! when the stream is not ready. The stream is split: the reader task owns
//! its read half, the outbound lock its write half.

use std::future::{Future, poll_fn};
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker, ready};

use bytes::Buf;
use ternio_protocol::BytesMut;
use ternio_protocol::buffers::{ReadSize, empty};
use ternio_protocol::frame::FrameDecoder;
use ternio_protocol::secure::Sealer;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadHalf, WriteHalf};
use tokio::sync::Notify;

use crate::error::CloseReason;
use crate::events::{LinkEvents, read_or_idle};
use crate::outbound::{Outbound, Wire};
use crate::send::SendError;
use crate::socket::{Flush, OutboundWriter, ReadSpares, Reads, io_reason};
use crate::sync::lock;
use crate::tcp::hand_over_frames;

/// Opens a new byte stream to the server, for
/// [`Client::connect_stream`](crate::Client::connect_stream): called for
/// the first connection and again for every reconnection, so each call
/// must return a fresh stream.
///
/// Any `Fn() -> impl Future<Output = io::Result<S>>` is a connector, so a
/// closure will do:
///
/// ```no_run
/// # #[cfg(unix)]
/// # async fn run() -> Result<(), ternio_client::ClientError> {
/// use ternio_client::Client;
/// use tokio::net::UnixStream;
///
/// let client = Client::connect_stream(|| UnixStream::connect("/run/app/ternio.sock")).await?;
/// # Ok(())
/// # }
/// ```
pub trait Connector: Send + Sync + 'static {
    /// The stream it opens.
    type Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static;

    /// Opens a new stream to the server. An error fails the connection (or
    /// the reconnect attempt) with [`ClientError::Connect`](crate::ClientError::Connect).
    fn connect(&self) -> impl Future<Output = io::Result<Self::Stream>> + Send;
}

impl<F, Fut, S> Connector for F
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = io::Result<S>> + Send,
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    type Stream = S;

    fn connect(&self) -> impl Future<Output = io::Result<S>> + Send {
        self()
    }
}

/// Any stream, its type forgotten.
pub(crate) trait AnyStream: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> AnyStream for T {}

/// A stream whose type is forgotten.
pub(crate) type BoxStream = Box<dyn AnyStream>;

/// A [`Connector`] whose stream type is forgotten, kept for reconnecting.
pub(crate) trait DynConnector: Send + Sync {
    /// Opens a new stream.
    fn connect(&self) -> Pin<Box<dyn Future<Output = io::Result<BoxStream>> + Send + '_>>;
}

impl<C: Connector> DynConnector for C {
    fn connect(&self) -> Pin<Box<dyn Future<Output = io::Result<BoxStream>> + Send + '_>> {
        Box::pin(async move {
            let stream = Connector::connect(self).await?;
            Ok(Box::new(stream) as BoxStream)
        })
    }
}

/// The outbound buffer and the stream's write half, under one lock.
struct Queue {
    outbound: Outbound,
    /// Gone once the link is shut.
    half: Option<WriteHalf<BoxStream>>,
    /// Bytes were written since the last flush of `half`.
    unflushed: bool,
}

/// The sending side of a link over any stream.
pub(crate) struct StreamOut {
    queue: Mutex<Queue>,
    writer_wake: Notify,
    /// Tells the reader to stop: the link was shut.
    closed: Notify,
    /// The most bytes the outbound buffer may hold.
    limit: usize,
    reads: Reads,
    /// How frames are framed on the stream: behind their length, or (for
    /// `wss://`) as masked WebSocket messages.
    wire: Wire,
}

/// Splits `stream` into a link's sending side (whose outbound buffer holds
/// at most `limit` bytes, framed for `wire`) and the read half for its
/// reader task.
pub(crate) fn open(
    stream: BoxStream,
    limit: usize,
    wire: Wire,
) -> (Arc<StreamOut>, ReadHalf<BoxStream>) {
    let (read, write) = tokio::io::split(stream);
    let out = StreamOut {
        queue: Mutex::new(Queue {
            outbound: Outbound::default(),
            half: Some(write),
            unflushed: false,
        }),
        writer_wake: Notify::new(),
        closed: Notify::new(),
        limit,
        reads: Reads::default(),
        wire,
    };
    (Arc::new(out), read)
}

impl OutboundWriter for StreamOut {
    fn wire(&self) -> Wire {
        self.wire
    }

    fn limit(&self) -> usize {
        self.limit
    }

    fn queue_and_write(
        &self,
        queue: impl FnOnce(&mut Outbound) -> Result<(), SendError>,
    ) -> Result<(), SendError> {
        let mut locked = lock(&self.queue);
        let queued = locked.outbound.buf.len();
        let outcome = queue(&mut locked.outbound);
        if locked.outbound.buf.len() > queued {
            self.write_now(&mut locked)
                .map_err(|error| SendError::Lost(io_reason(&error)))?;
        }
        outcome
    }
}

impl StreamOut {
    /// How many reads brought bytes so far: when it changes, the server
    /// sent something.
    pub(crate) fn reads(&self) -> u64 {
        self.reads.get()
    }

    /// Counts a read that brought bytes (a WebSocket reader over this stream).
    pub(crate) fn note_received(&self) {
        self.reads.note();
    }

    /// Appends bytes already framed (tungstenite's upgrade request and
    /// control frames, for `wss://`) and writes them at once if nothing is
    /// queued before them.
    pub(crate) fn send_raw(&self, bytes: &[u8]) -> io::Result<()> {
        let mut queue = lock(&self.queue);
        queue.outbound.push_raw(bytes, self.limit)?;
        self.write_now(&mut queue)
    }

    /// Bytes waiting to be written.
    pub(crate) fn queued(&self) -> usize {
        lock(&self.queue).outbound.buf.len()
    }

    /// Writes and flushes what is queued, as far as the stream takes it now.
    pub(crate) fn poll_flush(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut queue = lock(&self.queue);
        ready!(queue.poll_write_out(cx))?;
        queue.outbound.writer_active = false;
        Poll::Ready(Ok(()))
    }

    /// Shuts the stream's writing down, after what is queued.
    pub(crate) fn poll_shutdown(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_flush(cx))?;
        match lock(&self.queue).half.as_mut() {
            Some(half) => Pin::new(half).poll_shutdown(cx),
            None => Poll::Ready(Ok(())),
        }
    }

    /// Takes no more frames; the writer task writes what is queued and
    /// ends (a WebSocket's reader still completes its close handshake).
    pub(crate) fn stop(&self) {
        lock(&self.queue).outbound.stopped = true;
        self.writer_wake.notify_one();
    }

    /// Writes what it can now, from the caller's task (a poll that wakes
    /// nobody); the writer task takes the rest.
    fn write_now(&self, queue: &mut Queue) -> io::Result<()> {
        if queue.outbound.writer_active {
            return Ok(());
        }
        let mut cx = Context::from_waker(Waker::noop());
        match queue.poll_write_out(&mut cx) {
            Poll::Ready(outcome) => outcome,
            Poll::Pending => {
                queue.outbound.writer_active = true;
                self.writer_wake.notify_one();
                Ok(())
            }
        }
    }

    /// Writes and flushes what is queued, waiting for the stream each time
    /// it is not ready.
    pub(crate) async fn flush(&self) -> io::Result<()> {
        poll_fn(|cx| self.poll_flush(cx)).await
    }

    /// Writes what is queued, then shuts the stream's writing down (the
    /// server reads the end): an intentional close.
    pub(crate) async fn close_gracefully(&self) {
        if self.flush().await.is_err() {
            return;
        }
        let _ = poll_fn(|cx| match lock(&self.queue).half.as_mut() {
            Some(half) => Pin::new(half).poll_shutdown(cx),
            None => Poll::Ready(Ok(())),
        })
        .await;
    }

    /// Ends the wait for a handshake's answer (see [`Outbound::end_handshake`]).
    pub(crate) fn end_handshake(&self, sealer: Option<Sealer>) {
        lock(&self.queue).outbound.end_handshake(sealer);
    }

    /// Takes no more frames and lets the stream go: the write half is
    /// dropped, the reader stops (dropping the read half, and with it the
    /// stream), and the writer task ends.
    pub(crate) fn shutdown(&self) {
        let half = {
            let mut queue = lock(&self.queue);
            queue.outbound.stopped = true;
            queue.half.take()
        };
        drop(half);
        self.writer_wake.notify_one();
        self.closed.notify_one();
    }
}

impl Queue {
    /// Writes what is queued and flushes it, as far as the stream takes it.
    fn poll_write_out(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(half) = self.half.as_mut() else {
            // Shut: nothing is written any more.
            empty(&mut self.outbound.buf);
            return Poll::Ready(Ok(()));
        };
        let buf = &mut self.outbound.buf;
        while !buf.is_empty() {
            match ready!(Pin::new(&mut *half).poll_write(cx, buf))? {
                0 => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                n if n == buf.len() => empty(buf),
                n => buf.advance(n),
            }
            self.unflushed = true;
        }
        if self.unflushed {
            ready!(Pin::new(half).poll_flush(cx))?;
            self.unflushed = false;
        }
        Poll::Ready(Ok(()))
    }
}

impl Flush for StreamOut {
    fn writer_wake(&self) -> &Notify {
        &self.writer_wake
    }

    fn flush(&self) -> impl Future<Output = io::Result<()>> + Send {
        StreamOut::flush(self)
    }
}

/// The reader task: hands frames to `events` until the link ends.
pub(crate) async fn read_loop(
    events: impl LinkEvents,
    out: Arc<StreamOut>,
    mut read: ReadHalf<BoxStream>,
    max_frame_size: usize,
) {
    let reason = read_until_closed(&events, &out, &mut read, max_frame_size).await;
    drop(read);
    events.reading_stopped();
    events.lost(reason);
    events.reader_done();
}

async fn read_until_closed(
    events: &impl LinkEvents,
    out: &StreamOut,
    read: &mut ReadHalf<BoxStream>,
    max_frame_size: usize,
) -> CloseReason {
    let mut decoder = FrameDecoder::new(max_frame_size);
    let mut buf = BytesMut::new();
    let mut read_size = ReadSize::whole_frames();
    let mut spares = ReadSpares::default();
    loop {
        spares.reserve(&mut read_size, &decoder, &mut buf);
        let room = buf.capacity() - buf.len();
        let next = async {
            tokio::select! {
                biased;
                () = out.closed.notified() => None,
                got = read.read_buf(&mut buf) => Some(got),
            }
        };
        // Shut on purpose: as a shut socket reads its end.
        let Some(got) = read_or_idle(events, spares.wait(next)).await else {
            return CloseReason::PeerClosed;
        };
        match got {
            Ok(0) => return CloseReason::PeerClosed,
            Ok(got) => {
                read_size.read(got, room);
                out.reads.note();
            }
            Err(error) => return io_reason(&error),
        }
        if let Some(reason) = hand_over_frames(&mut decoder, &mut buf, events) {
            return reason;
        }
        spares.give_back(&mut read_size, &mut buf);
    }
}
