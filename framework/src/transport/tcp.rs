//! TCP: length-prefixed frames (section 1.1).
//!
//! Each connection is one task that reads whatever has arrived in one
//! syscall, handles every whole frame in it, and writes every reply that is
//! ready in one syscall, straight from its task: no hop to a writer task.

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use bytes::Buf;
use ternio_protocol::frame::{FrameDecoder, Framing, LENGTH_PREFIX_LEN};
use ternio_protocol::{Bytes, BytesMut, DisconnectReason};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::connection::{Flow, Session, Violation};
use crate::context::Transport;
use crate::outbound::PushReceiver;
use crate::server::ServerShared;

/// Bytes reserved for a read when the buffer has less room than this.
const READ_CHUNK: usize = 8 * 1024;
/// Capacity above which an emptied read buffer is given back.
const MAX_IDLE_READ_CAPACITY: usize = 64 * 1024;
/// Rounds of work one connection does before letting other tasks run.
const BUDGET: usize = 32;
/// The most bytes a closing connection reads and discards.
const MAX_DRAIN: usize = 1024 * 1024;

/// Accepts connections until `shutdown` turns true.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    server: Arc<ServerShared>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.wait_for(|stop| *stop) => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(serve(stream, peer, Arc::clone(&server)));
            }
            Err(error) => {
                // Out of file descriptors, usually: wait rather than spin.
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// How the connection's main loop ended.
enum Exit {
    /// The peer closed its side and every reply was written.
    PeerClosed,
    PeerDisconnected,
    Violation(Violation),
    Io(io::Error),
}

struct TcpConnection {
    stream: TcpStream,
    decoder: FrameDecoder,
    read_buf: BytesMut,
    out: BytesMut,
    session: Session,
    pushes: PushReceiver,
    reading: bool,
    /// Bytes waiting to be written above which reading pauses.
    high_water: usize,
}

async fn serve(stream: TcpStream, peer: SocketAddr, server: Arc<ServerShared>) {
    let (connection, pushes) = server.open_connection(peer, Transport::Tcp);
    let id = connection.id;
    tracing::debug!(connection = %id, %peer, "tcp connection open");
    let linger = server.config.close_linger;
    let mut conn = TcpConnection {
        stream,
        decoder: FrameDecoder::new(server.config.max_frame_size),
        read_buf: BytesMut::new(),
        out: BytesMut::new(),
        high_water: server.config.outbound_high_water,
        session: Session::new(connection, server, Framing::LengthPrefixed),
        pushes,
        reading: true,
    };
    let exit = poll_fn(|cx| conn.poll_run(cx)).await;
    conn.close(exit, linger).await;
    tracing::debug!(connection = %id, "tcp connection closed");
}

impl TcpConnection {
    fn poll_run(&mut self, cx: &mut TaskContext<'_>) -> Poll<Exit> {
        for _ in 0..BUDGET {
            let mut progress = false;
            if self.reading && self.session.can_accept_request() && self.out.len() < self.high_water
            {
                match self.stream.poll_read_ready(cx) {
                    Poll::Ready(Ok(())) => {
                        progress = true;
                        match self.read() {
                            Ok(Flow::Continue) => {}
                            Ok(Flow::PeerDisconnected(disconnect)) => {
                                tracing::debug!(reason = %disconnect.reason, message = %disconnect.message, "peer disconnected");
                                return Poll::Ready(Exit::PeerDisconnected);
                            }
                            Ok(Flow::Violation(violation)) => {
                                return Poll::Ready(Exit::Violation(violation));
                            }
                            Err(error) => return Poll::Ready(Exit::Io(error)),
                        }
                    }
                    Poll::Ready(Err(error)) => return Poll::Ready(Exit::Io(error)),
                    Poll::Pending => {}
                }
            }
            progress |= self.session.poll_pending(cx, &mut self.out);
            progress |= self.take_pushes(cx);
            if !self.out.is_empty() {
                match self.stream.poll_write_ready(cx) {
                    Poll::Ready(Ok(())) => {
                        progress = true;
                        if let Err(error) = self.write() {
                            return Poll::Ready(Exit::Io(error));
                        }
                    }
                    Poll::Ready(Err(error)) => return Poll::Ready(Exit::Io(error)),
                    Poll::Pending => {}
                }
            }
            if !self.reading && self.session.is_idle() && self.out.is_empty() {
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

    /// One read of whatever has arrived, then every whole frame in it.
    fn read(&mut self) -> io::Result<Flow> {
        let wanted = match self.decoder.next_frame_len(&self.read_buf) {
            Ok(Some(frame_len)) => frame_len.saturating_sub(self.read_buf.len()),
            _ => 0,
        };
        let spare = self.read_buf.capacity() - self.read_buf.len();
        if spare < READ_CHUNK.min(wanted.max(1)) || spare < wanted {
            self.read_buf.reserve(wanted.max(READ_CHUNK));
        }
        match self.stream.try_read_buf(&mut self.read_buf) {
            Ok(0) => {
                // The peer closed its side: answer what is running, then close.
                self.reading = false;
                if !self.read_buf.is_empty() {
                    return Ok(Flow::Violation(Violation::new(
                        DisconnectReason::Malformed,
                        "stream ended inside a frame",
                    )));
                }
                return Ok(Flow::Continue);
            }
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(Flow::Continue),
            Err(error) => return Err(error),
        }
        loop {
            match self.decoder.decode(&mut self.read_buf) {
                Ok(Some(frame)) => match self.session.on_frame(frame, &mut self.out) {
                    Flow::Continue => {}
                    other => return Ok(other),
                },
                Ok(None) => break,
                Err(error) => {
                    return Ok(Flow::Violation(Violation::new(
                        error.disconnect_reason(),
                        error.to_string(),
                    )));
                }
            }
        }
        if self.read_buf.is_empty() && self.read_buf.capacity() > MAX_IDLE_READ_CAPACITY {
            self.read_buf = BytesMut::new();
        }
        Ok(Flow::Continue)
    }

    /// Moves pushed frames into the outbound buffer. Returns whether any came.
    fn take_pushes(&mut self, cx: &mut TaskContext<'_>) -> bool {
        let mut any = false;
        while self.out.len() < self.high_water {
            let Poll::Ready(Some(frame)) = self.pushes.poll_recv(cx) else {
                break;
            };
            self.session.connection().pushes.taken(frame.len());
            append_prefixed(&mut self.out, &frame);
            any = true;
        }
        any
    }

    /// One write of everything ready.
    fn write(&mut self) -> io::Result<()> {
        match self.stream.try_write(&self.out) {
            Ok(n) if n == self.out.len() => self.out.clear(),
            Ok(n) => self.out.advance(n),
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
            Err(error) => return Err(error),
        }
        Ok(())
    }

    /// Ends the connection: a `DISCONNECT` first when the peer broke the
    /// contract, the last frames flushed, then a clean close (the peer sees
    /// FIN, not a reset, because unread input is drained first).
    async fn close(mut self, exit: Exit, linger: Duration) {
        let max_frame_size = self.session.connection().max_frame_size;
        match exit {
            Exit::Io(error) => {
                tracing::debug!(%error, "connection failed");
                return;
            }
            Exit::Violation(violation) => {
                tracing::debug!(reason = %violation.reason, message = %violation.message, "closing on a protocol violation");
                violation.write_disconnect(&mut self.out, Framing::LengthPrefixed, max_frame_size);
            }
            Exit::PeerClosed | Exit::PeerDisconnected => {}
        }
        let stream = &mut self.stream;
        let out = &self.out;
        let _ = tokio::time::timeout(linger, async move {
            stream.write_all(out).await?;
            stream.shutdown().await?;
            let mut scratch = [0u8; 4096];
            let mut drained = 0;
            while drained < MAX_DRAIN {
                match stream.read(&mut scratch).await? {
                    0 => break,
                    n => drained += n,
                }
            }
            io::Result::Ok(())
        })
        .await;
    }
}

fn append_prefixed(out: &mut BytesMut, frame: &Bytes) {
    out.reserve(LENGTH_PREFIX_LEN + frame.len());
    out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    out.extend_from_slice(frame);
}
