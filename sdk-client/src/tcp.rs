//! The TCP transport (contract section 1.1): length-prefixed frames.
//!
//! A frame is written straight to the socket from the caller's task when
//! nothing is queued before it; the writer task only takes over when the
//! socket would block. The reader task hands every frame to
//! [`Shared::on_frame`].

use std::io;
use std::net::{Shutdown, SocketAddr};
use std::sync::{Arc, Mutex};

use bytes::Buf;
use ternio_protocol::frame::{self, FrameDecoder, Framing, Header};
use ternio_protocol::secure::Sealer;
use ternio_protocol::{BytesMut, Encode};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::error::{ClientError, CloseReason};
use crate::link::{Link, Out, SendError};
use crate::shared::{Shared, lock};
use crate::supervisor::Opened;
use crate::tasks::TaskSet;

const READ_CHUNK: usize = 8 * 1024;
const MAX_IDLE_READ_CAPACITY: usize = 64 * 1024;

/// Frames encoded but not yet written.
#[derive(Default)]
struct Outbound {
    buf: BytesMut,
    /// The writer task owns the flushing until the buffer is empty.
    writer_active: bool,
    /// Seals frames once the secure session is up: under this lock, so
    /// that counters reach the socket in order.
    sealer: Option<Sealer>,
}

/// The sending half of a TCP link: the socket and its outbound buffer.
pub(crate) struct TcpOut {
    stream: TcpStream,
    outbound: Mutex<Outbound>,
    writer_wake: Notify,
}

/// Connects to the first of `addresses` that answers and starts the link's
/// reader and writer tasks. The caller bounds the time it takes.
pub(crate) async fn open(
    addresses: &[SocketAddr],
    shared: &Arc<Shared>,
) -> Result<Opened, ClientError> {
    let stream = TcpStream::connect(addresses)
        .await
        .map_err(ClientError::Connect)?;
    stream.set_nodelay(true).map_err(ClientError::Connect)?;
    let out = Arc::new(TcpOut {
        stream,
        outbound: Mutex::default(),
        writer_wake: Notify::new(),
    });
    let link = Arc::new(Link::new(Out::Tcp(Arc::clone(&out))));
    let tasks = TaskSet::new(vec![
        tokio::spawn(read_loop(
            Arc::clone(shared),
            Arc::clone(&link),
            Arc::clone(&out),
        )),
        tokio::spawn(write_loop(
            Arc::clone(shared),
            Arc::clone(&link),
            Arc::clone(&out),
        )),
    ]);
    Ok(Opened { link, tasks })
}

fn io_reason(error: &io::Error) -> CloseReason {
    CloseReason::Io(error.kind(), error.to_string())
}

impl TcpOut {
    /// Encodes one frame (sealed when `seal` says so) into the outbound
    /// buffer and writes it at once if nothing is queued before it.
    pub(crate) fn send<E: Encode + ?Sized>(
        &self,
        header: Header,
        body: &E,
        max_frame_size: usize,
        seal: bool,
    ) -> Result<(), SendError> {
        let mut outbound = lock(&self.outbound);
        let outbound = &mut *outbound;
        if seal {
            let sealer = outbound.sealer.as_mut().ok_or(SendError::NotSecure)?;
            sealer.write_frame_with(
                &mut outbound.buf,
                Framing::LengthPrefixed,
                header,
                max_frame_size,
                |out| {
                    out.reserve(body.encoded_len() + ternio_protocol::secure::TAG_LEN);
                    body.encode(out);
                },
            )
        } else {
            frame::write_frame(
                &mut outbound.buf,
                Framing::LengthPrefixed,
                header,
                body,
                max_frame_size,
            )
        }
        .map_err(SendError::TooLarge)?;
        if outbound.writer_active {
            return Ok(());
        }
        match self.stream.try_write(&outbound.buf) {
            Ok(n) if n == outbound.buf.len() => outbound.buf.clear(),
            Ok(n) => outbound.buf.advance(n),
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
            Err(error) => return Err(SendError::Io(io_reason(&error))),
        }
        if !outbound.buf.is_empty() {
            outbound.writer_active = true;
            self.writer_wake.notify_one();
        }
        Ok(())
    }

    /// Seals every frame sent with `seal` from now on.
    pub(crate) fn set_sealer(&self, sealer: Sealer) {
        lock(&self.outbound).sealer = Some(sealer);
    }

    /// Writes what is queued, waiting for the socket each time it would block.
    pub(crate) async fn flush(&self) -> io::Result<()> {
        loop {
            {
                let mut outbound = lock(&self.outbound);
                match self.stream.try_write(&outbound.buf) {
                    Ok(n) if n == outbound.buf.len() => outbound.buf.clear(),
                    Ok(n) => outbound.buf.advance(n),
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                    Err(error) => return Err(error),
                }
                if outbound.buf.is_empty() {
                    outbound.writer_active = false;
                    return Ok(());
                }
            }
            self.stream.writable().await?;
        }
    }

    /// Shuts the socket down both ways: the reader sees the end, the server
    /// sees the connection close. Wakes the writer so that it ends.
    pub(crate) fn shutdown(&self) {
        let _ = socket2::SockRef::from(&self.stream).shutdown(Shutdown::Both);
        self.writer_wake.notify_one();
    }
}

/// The writer task: flushes whenever a caller found the socket full.
async fn write_loop(shared: Arc<Shared>, link: Arc<Link>, out: Arc<TcpOut>) {
    loop {
        out.writer_wake.notified().await;
        if link.lost_reason().is_some() {
            return;
        }
        if let Err(error) = out.flush().await {
            shared.lose(&link, io_reason(&error));
            return;
        }
    }
}

/// The reader task: hands frames to [`Shared::on_frame`] until the link ends.
async fn read_loop(shared: Arc<Shared>, link: Arc<Link>, out: Arc<TcpOut>) {
    let reason = read_until_closed(&shared, &link, &out).await;
    shared.lose(&link, reason);
    link.set_reader_done();
}

async fn read_until_closed(shared: &Shared, link: &Arc<Link>, out: &TcpOut) -> CloseReason {
    let mut decoder = FrameDecoder::new(shared.config().max_frame_size);
    let mut buf = BytesMut::new();
    loop {
        if let Err(error) = out.stream.readable().await {
            return io_reason(&error);
        }
        let wanted = match decoder.next_frame_len(&buf) {
            Ok(Some(len)) => len.saturating_sub(buf.len()),
            _ => 0,
        };
        if buf.capacity() - buf.len() < wanted.max(READ_CHUNK / 2) {
            buf.reserve(wanted.max(READ_CHUNK));
        }
        match out.stream.try_read_buf(&mut buf) {
            Ok(0) => return CloseReason::PeerClosed,
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => continue,
            Err(error) => return io_reason(&error),
        }
        loop {
            match decoder.decode_mut(&mut buf) {
                Ok(Some((header, body))) => {
                    if let Some(reason) = shared.on_frame_mut(link, header, body) {
                        return reason;
                    }
                }
                Ok(None) => break,
                Err(error) => return CloseReason::Protocol(error.to_string()),
            }
        }
        if buf.is_empty() && buf.capacity() > MAX_IDLE_READ_CAPACITY {
            buf = BytesMut::new();
        }
    }
}
