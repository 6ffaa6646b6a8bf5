//! TCP: length-prefixed frames (section 1.1).
//!
//! Each connection is one task that reads whatever has arrived in one
//! syscall, handles every whole frame in it, and writes every reply that is
//! ready in one syscall, straight from its task: no hop to a writer task.

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, ready};
use std::time::Duration;

use bytes::Buf;
use ternio_protocol::buffers::ReadSize;
use ternio_protocol::frame::{FrameDecoder, Framing};
use ternio_protocol::{BytesMut, DisconnectReason, Frame};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::io::poll_read_buf;

use crate::admission::{Permit, Refusal};
use crate::close::CloseNotice;
use crate::connection::{self, AfterFrame, Engine};
use crate::ids::Transport;
use crate::shared::ServerShared;
use crate::transport::{Accept, Admitted, Exit, Io, accept_loop, in_span, shutdown_and_drain};

/// Rounds of work one connection does before letting other tasks run.
const BUDGET: usize = 32;

/// Serves TCP connections from `listener` until the server shuts down.
pub(crate) async fn serve_listener(listener: TcpListener, server: Arc<ServerShared>) {
    accept_loop(listener, server, Arc::new(TcpAccept)).await;
}

/// What the TCP listener does with accepted connections.
struct TcpAccept;

impl Accept for TcpAccept {
    const TRANSPORT: Transport = Transport::Tcp;
    const SETS_UP: bool = false;

    fn serve(&self, admitted: Admitted, server: Arc<ServerShared>) {
        let tasks = server.tasks.clone();
        tasks.spawn(serve(
            admitted.stream,
            admitted.peer,
            server,
            admitted.permit,
        ));
    }

    fn refuse(&self, stream: TcpStream, refusal: Refusal, server: &Arc<ServerShared>) {
        let linger = server.config.close_linger.min(Duration::from_millis(500));
        server.tasks.spawn(refuse(stream, refusal, linger));
    }
}

/// Tells a refused peer why (`DISCONNECT TOO_MANY_CONNECTIONS`) and closes.
/// (The linger is bounded by the caller.)
pub(crate) async fn refuse<S: Io>(mut stream: S, refusal: Refusal, linger: Duration) {
    let mut out = BytesMut::new();
    CloseNotice::new(DisconnectReason::TooManyConnections, refusal.to_string()).write_disconnect(
        &mut out,
        Framing::LengthPrefixed,
        usize::MAX,
        None,
    );
    write_and_close(&mut stream, &out, linger).await;
}

/// Writes `last` (the final frames), closes the writing side, and reads
/// away what the peer still sends until it closes too
/// ([`shutdown_and_drain`]). All within `linger`.
async fn write_and_close<S: Io>(stream: &mut S, last: &[u8], linger: Duration) {
    let _ = tokio::time::timeout(linger, async move {
        stream.write_all(last).await?;
        shutdown_and_drain(stream).await
    })
    .await;
}

struct TcpConnection<S> {
    stream: S,
    decoder: FrameDecoder,
    read_buf: BytesMut,
    /// How `read_buf` grows and gives memory back.
    read_size: ReadSize,
    engine: Engine,
    /// False once the peer closed its side.
    reading: bool,
}

/// Serves one connection over `stream` (length-prefixed frames) until it closes.
pub(crate) async fn serve<S: Io>(
    stream: S,
    peer: SocketAddr,
    server: Arc<ServerShared>,
    permit: Permit,
) {
    let linger = server.config.close_linger;
    let connection = server.open_connection(peer, Transport::Tcp);
    let id = connection.id;
    tracing::debug!(connection = %id, %peer, "tcp connection open");
    let mut conn = TcpConnection {
        stream,
        decoder: FrameDecoder::new(server.config.max_frame_size),
        read_buf: BytesMut::new(),
        read_size: ReadSize::new(),
        engine: Engine::new(connection, Arc::clone(&server), permit),
        reading: true,
    };
    let span = tracing::info_span!("connection", id = id.0, %peer, transport = "tcp");
    in_span(span, async move {
        let exit = loop {
            match poll_fn(|cx| conn.poll_run(cx)).await {
                Exit::Resume => connection::resume(&mut conn.engine).await,
                exit => break exit,
            }
        };
        let cause = exit.cause(conn.engine.closed());
        conn.close(&exit, linger).await;
        connection::end_link(conn.engine, cause).await;
    })
    .await;
    tracing::debug!(connection = %id, "tcp link closed");
}

impl<S: Io> TcpConnection<S> {
    fn poll_run(&mut self, cx: &mut TaskContext<'_>) -> Poll<Exit> {
        // Pushes and close orders wake this task from now on (the waker
        // is the same for every round).
        self.engine.register_waker(cx);
        for _ in 0..BUDGET {
            let mut progress = false;
            if self.engine.wants_input() && self.has_buffered_frame() {
                // Frames left over when the in-flight limit was reached.
                progress = true;
                match self.handle_buffered() {
                    AfterFrame::Continue | AfterFrame::Close => {}
                    AfterFrame::PeerDisconnected(_) => return Poll::Ready(Exit::PeerDisconnected),
                }
            } else if self.reading && self.engine.wants_input() {
                match self.read(cx) {
                    Poll::Ready(Ok(flow)) => {
                        progress = true;
                        if let AfterFrame::PeerDisconnected(disconnect) = flow {
                            tracing::debug!(reason = %disconnect.reason, message = %disconnect.message, "peer disconnected");
                            return Poll::Ready(Exit::PeerDisconnected);
                        }
                    }
                    Poll::Ready(Err(error)) => return Poll::Ready(Exit::Io(error)),
                    Poll::Pending => {}
                }
            } else {
                // Not reading: an unfinished frame waits for the server
                // (or never comes), not for the peer.
                self.engine.note_frames(false, false);
            }
            progress |= self.engine.poll_work(cx);
            if let Some(stop) = self.engine.stop() {
                return Poll::Ready(Exit::of(stop));
            }
            if !self.engine.out.is_empty() {
                let mut wrote = 0;
                match self.poll_write(cx) {
                    Poll::Ready(Ok(written)) => {
                        progress = true;
                        wrote = written;
                    }
                    Poll::Ready(Err(error)) => return Poll::Ready(Exit::Io(error)),
                    Poll::Pending => {}
                }
                let waiting = !self.engine.out.is_empty();
                self.engine.note_writes(cx, waiting, wrote);
            } else {
                // A span of the write timeout ends unjudged if nothing waits then.
                self.engine.note_writes(cx, false, 0);
            }
            if self.engine.out.is_empty() && self.engine.take_went_quiet() {
                self.release_buffers();
            }
            if !self.reading && self.engine.no_requests_running() && self.engine.out.is_empty() {
                return Poll::Ready(Exit::PeerClosed);
            }
            if !progress {
                return Poll::Pending;
            }
        }
        // Busy: let the other tasks of this thread run, then continue.
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// One read of whatever has arrived, then the whole frames in it.
    /// (Through `AsyncRead`: a read that leaves room in the buffer tells
    /// tokio the socket is drained, so the next poll waits for input
    /// instead of spending a system call that finds none.)
    fn read(&mut self, cx: &mut TaskContext<'_>) -> Poll<io::Result<AfterFrame>> {
        // The buffer grows with the bytes the peer sends, not with the
        // length it announces.
        self.read_size.reserve(&self.decoder, &mut self.read_buf);
        match poll_read_buf(Pin::new(&mut self.stream), cx, &mut self.read_buf) {
            Poll::Ready(Ok(0)) => {
                // The peer closed its side: answer what is running, then close.
                self.reading = false;
                if !self.read_buf.is_empty() {
                    let notice = CloseNotice::new(
                        DisconnectReason::Malformed,
                        "stream ended inside a frame",
                    );
                    return Poll::Ready(Ok(self.engine.close_now(&notice)));
                }
                return Poll::Ready(Ok(AfterFrame::Continue));
            }
            Poll::Ready(Ok(read)) => {
                if let Some(metrics) = self.engine.metrics() {
                    metrics.bytes_in.increment(read as u64);
                }
            }
            Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
            Poll::Pending => {
                // Reading again after a pause: an unfinished frame left in
                // the buffer is the peer's to finish from now on.
                if !self.read_buf.is_empty() && !self.has_buffered_frame() {
                    self.engine.note_frames(false, true);
                }
                return Poll::Pending;
            }
        }
        Poll::Ready(Ok(self.handle_buffered()))
    }

    /// Handles the whole frames waiting in the read buffer, as long as the
    /// engine takes requests (past the in-flight limit they wait there).
    fn handle_buffered(&mut self) -> AfterFrame {
        let mut completed = false;
        while self.engine.wants_input() {
            let limit = self.engine.frame_limit();
            if self.decoder.max_frame_size() != limit {
                self.decoder = FrameDecoder::new(limit);
            }
            let decoded = self.decoder.decode_mut(&mut self.read_buf);
            completed |= matches!(decoded, Ok(Some(_)));
            if let (Ok(Some(_)), Some(metrics)) = (&decoded, self.engine.metrics()) {
                metrics.frames_in.increment(1);
            }
            let flow = match decoded {
                Ok(Some((header, body))) if header.flags.is_encrypted() => {
                    self.engine.on_sealed_frame(header, body)
                }
                Ok(Some((header, body))) => self.engine.on_frame(Frame {
                    header,
                    body: body.freeze(),
                }),
                Ok(None) => break,
                Err(error) => {
                    let notice = CloseNotice::new(error.disconnect_reason(), error.to_string());
                    return self.engine.close_now(&notice);
                }
            };
            if !matches!(flow, AfterFrame::Continue) {
                return flow;
            }
        }
        self.read_size.give_back(&mut self.read_buf);
        // Frames left whole in the buffer (past the in-flight limit) wait
        // for the server, not for the peer.
        let partial = !self.read_buf.is_empty() && !self.has_buffered_frame();
        self.engine.note_frames(completed, partial);
        AfterFrame::Continue
    }

    /// Whether the read buffer holds a whole frame already.
    fn has_buffered_frame(&self) -> bool {
        matches!(self.decoder.next_frame_len(&self.read_buf), Ok(Some(len)) if len <= self.read_buf.len())
    }

    /// One write of everything ready; returns the bytes written.
    fn poll_write(&mut self, cx: &mut TaskContext<'_>) -> Poll<io::Result<usize>> {
        let out = &mut self.engine.out;
        let written = ready!(Pin::new(&mut self.stream).poll_write(cx, out))?;
        if written == out.len() {
            out.clear();
        } else {
            out.advance(written);
        }
        if let (true, Some(metrics)) = (written > 0, self.engine.metrics()) {
            metrics.bytes_out.increment(written as u64);
        }
        Poll::Ready(Ok(written))
    }

    /// Gives back the buffers of a quiet connection: an idle connection
    /// holds no read or write buffer.
    fn release_buffers(&mut self) {
        self.read_size.release(&mut self.read_buf);
        if self.engine.out.is_empty() {
            self.engine.out = BytesMut::new();
        }
    }

    /// Ends the connection: the last frames (with the `DISCONNECT`, if the
    /// engine wrote one) flushed, then a clean close: the peer sees FIN, not
    /// a reset, because its unread input is drained first.
    async fn close(&mut self, exit: &Exit, linger: Duration) {
        match exit {
            Exit::Io(error) => tracing::debug!(%error, "connection failed"),
            // The session goes to another link: this one is dropped as it is.
            Exit::TakenOver | Exit::Resume => {}
            _ => write_and_close(&mut self.stream, &self.engine.out, linger).await,
        }
    }
}
