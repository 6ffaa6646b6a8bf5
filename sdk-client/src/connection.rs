//! The client side of one TCP connection: requests waiting by id, the
//! outbound buffer, a reader task and a writer task.
//!
//! A request is written straight to the socket from the caller's task when
//! nothing is queued before it; the writer task only takes over when the
//! socket would block. The reader task completes waiting requests by id.

use std::collections::HashMap;
use std::io;
use std::net::Shutdown;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Buf;
use ternio_protocol::frame::{self, Flags, FrameDecoder, Framing, Header};
use ternio_protocol::system::{self, Disconnect, Ping, Pong};
use ternio_protocol::{BytesMut, Decode, DisconnectReason, Encode, Frame};
use tokio::net::TcpStream;
use tokio::sync::{Notify, oneshot};

use crate::config::ClientConfig;
use crate::error::{ClientError, CloseReason};

const READ_CHUNK: usize = 8 * 1024;
const MAX_IDLE_READ_CAPACITY: usize = 64 * 1024;

type Slot = oneshot::Sender<Result<Frame, CloseReason>>;

/// Requests waiting for a response, and whether the connection is closed.
#[derive(Default)]
struct Waiting {
    slots: HashMap<u32, Slot>,
    closed: Option<CloseReason>,
}

/// Frames encoded but not yet written.
#[derive(Default)]
struct Outbound {
    buf: BytesMut,
    /// The writer task owns the flushing until the buffer is empty.
    writer_active: bool,
}

/// What the client's handle and its two tasks share.
pub(crate) struct Shared {
    stream: TcpStream,
    config: ClientConfig,
    waiting: Mutex<Waiting>,
    outbound: Mutex<Outbound>,
    writer_wake: Notify,
    next_id: AtomicU32,
    unhandled_pushes: AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // No code panics while holding these locks; recover the data if one did.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    pub(crate) fn new(stream: TcpStream, config: ClientConfig) -> Self {
        Self {
            stream,
            config,
            waiting: Mutex::default(),
            outbound: Mutex::default(),
            writer_wake: Notify::new(),
            next_id: AtomicU32::new(1),
            unhandled_pushes: AtomicU64::new(0),
        }
    }

    pub(crate) fn config(&self) -> &ClientConfig {
        &self.config
    }

    pub(crate) fn unhandled_pushes(&self) -> u64 {
        self.unhandled_pushes.load(Ordering::Relaxed)
    }

    pub(crate) fn close_reason(&self) -> Option<CloseReason> {
        lock(&self.waiting).closed.clone()
    }

    /// Encodes one frame into the outbound buffer and writes it at once if
    /// nothing is queued before it.
    pub(crate) fn send<E: Encode + ?Sized>(
        &self,
        header: Header,
        body: &E,
    ) -> Result<(), ClientError> {
        let mut outbound = lock(&self.outbound);
        frame::write_frame(
            &mut outbound.buf,
            Framing::LengthPrefixed,
            header,
            body,
            self.config.max_frame_size,
        )?;
        if outbound.writer_active {
            return Ok(());
        }
        match self.stream.try_write(&outbound.buf) {
            Ok(n) if n == outbound.buf.len() => outbound.buf.clear(),
            Ok(n) => outbound.buf.advance(n),
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
            Err(error) => {
                drop(outbound);
                let reason = CloseReason::Io(error.kind(), error.to_string());
                self.fail_all(reason.clone());
                return Err(ClientError::Closed(reason));
            }
        }
        if !outbound.buf.is_empty() {
            outbound.writer_active = true;
            self.writer_wake.notify_one();
        }
        Ok(())
    }

    /// Sends a request and waits for the frame that answers it.
    pub(crate) async fn call<E: Encode + ?Sized>(
        &self,
        opcode: u16,
        body: &E,
        timeout: Duration,
    ) -> Result<Frame, ClientError> {
        let (id, receiver) = self.register()?;
        // Removes the slot if this future is dropped or fails before the answer.
        let guard = SlotGuard { shared: self, id };
        self.send(Header::new(opcode, Flags::NONE, id), body)?;
        let answer = match tokio::time::timeout(timeout, receiver).await {
            Err(_) => return Err(ClientError::Timeout(timeout)),
            Ok(Err(_)) => Err(ClientError::Closed(
                self.close_reason().unwrap_or(CloseReason::Local),
            )),
            Ok(Ok(answer)) => answer.map_err(ClientError::Closed),
        };
        std::mem::forget(guard);
        answer
    }

    fn register(
        &self,
    ) -> Result<(u32, oneshot::Receiver<Result<Frame, CloseReason>>), ClientError> {
        let mut waiting = lock(&self.waiting);
        if let Some(reason) = &waiting.closed {
            return Err(ClientError::Closed(reason.clone()));
        }
        if waiting.slots.len() >= self.config.max_in_flight {
            return Err(ClientError::TooManyInFlight(waiting.slots.len()));
        }
        let id = loop {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            // 0 means "no reply"; an id still waiting since the last wrap is skipped.
            if id != 0 && !waiting.slots.contains_key(&id) {
                break id;
            }
        };
        let (sender, receiver) = oneshot::channel();
        waiting.slots.insert(id, sender);
        Ok((id, receiver))
    }

    /// Marks the connection closed, fails every waiting request with
    /// `reason`, and shuts the socket down. Only the first reason counts.
    pub(crate) fn fail_all(&self, reason: CloseReason) {
        let slots = {
            let mut waiting = lock(&self.waiting);
            if waiting.closed.is_some() {
                return;
            }
            waiting.closed = Some(reason.clone());
            std::mem::take(&mut waiting.slots)
        };
        for (_, slot) in slots {
            let _ = slot.send(Err(reason.clone()));
        }
        let _ = socket2::SockRef::from(&self.stream).shutdown(Shutdown::Both);
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

    /// Sends `DISCONNECT NORMAL`, flushes within `linger`, and closes.
    pub(crate) async fn close(&self, linger: Duration) {
        if self.close_reason().is_some() {
            return;
        }
        let disconnect = Disconnect::new(DisconnectReason::Normal, "client closed");
        if self
            .send(Header::new(system::DISCONNECT, Flags::NONE, 0), &disconnect)
            .is_ok()
        {
            let _ = tokio::time::timeout(linger, self.flush()).await;
        }
        self.fail_all(CloseReason::Local);
    }

    /// The writer task: flushes whenever a caller found the socket full.
    pub(crate) async fn write_loop(self: Arc<Self>) {
        loop {
            self.writer_wake.notified().await;
            if let Err(error) = self.flush().await {
                self.fail_all(CloseReason::Io(error.kind(), error.to_string()));
                return;
            }
        }
    }

    /// The reader task: completes requests, answers PINGs, counts pushes.
    pub(crate) async fn read_loop(self: Arc<Self>) {
        let reason = self.read_until_closed().await;
        tracing::debug!(%reason, "client connection closed");
        self.fail_all(reason);
    }

    async fn read_until_closed(&self) -> CloseReason {
        let mut decoder = FrameDecoder::new(self.config.max_frame_size);
        let mut buf = BytesMut::new();
        loop {
            if let Err(error) = self.stream.readable().await {
                return CloseReason::Io(error.kind(), error.to_string());
            }
            let wanted = match decoder.next_frame_len(&buf) {
                Ok(Some(len)) => len.saturating_sub(buf.len()),
                _ => 0,
            };
            if buf.capacity() - buf.len() < wanted.max(READ_CHUNK / 2) {
                buf.reserve(wanted.max(READ_CHUNK));
            }
            match self.stream.try_read_buf(&mut buf) {
                Ok(0) => return CloseReason::PeerClosed,
                Ok(_) => {}
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => continue,
                Err(error) => return CloseReason::Io(error.kind(), error.to_string()),
            }
            loop {
                match decoder.decode(&mut buf) {
                    Ok(Some(frame)) => {
                        if let Some(reason) = self.on_frame(frame) {
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

    /// Handles one frame from the server; returns why to stop, if it must.
    fn on_frame(&self, frame: Frame) -> Option<CloseReason> {
        let header = frame.header;
        if header.flags.is_response() {
            if header.request_id == 0 {
                // An error about a fire-and-forget send: nobody waits for it.
                tracing::warn!(
                    opcode = header.opcode,
                    "the server reported an error for a send"
                );
                return None;
            }
            let slot = lock(&self.waiting).slots.remove(&header.request_id);
            if let Some(slot) = slot {
                let _ = slot.send(Ok(frame));
            }
            return None;
        }
        match header.opcode {
            system::DISCONNECT => {
                let disconnect = Disconnect::decode_body(&frame.body).unwrap_or_else(|_| {
                    Disconnect::new(DisconnectReason::Malformed, "unreadable DISCONNECT")
                });
                Some(CloseReason::Disconnected(disconnect))
            }
            system::PING if header.request_id != 0 => {
                if let Ok(ping) = Ping::decode_body(&frame.body) {
                    let reply = Header::new(system::PONG, Flags::RESPONSE, header.request_id);
                    let _ = self.send(reply, &Pong { value: ping.value });
                }
                None
            }
            _ => {
                self.unhandled_pushes.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }
}

/// Removes a request's slot unless the request completed.
struct SlotGuard<'a> {
    shared: &'a Shared,
    id: u32,
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        lock(&self.shared.waiting).slots.remove(&self.id);
    }
}
