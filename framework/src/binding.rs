//! One connection's datagram channel (docs/PROTOCOL.md section 4.4): its
//! [`Binding`] (the keys of both directions, the client's address once an
//! authenticated datagram showed it), and the [`DatagramSlot`] a
//! connection keeps it in, with the frames that came by datagram and wait
//! for the connection's task.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use ternio_protocol::Bytes;
use ternio_protocol::datagram::{
    DatagramKeys, DatagramOpener, DatagramSealer, OpenError, SealError, TOKEN_LEN, Token,
};
use tokio::net::UdpSocket;

use crate::sync::lock;

/// Frames that came by datagram and wait for the connection's task: past
/// this many, more are dropped (a datagram may be lost anyway).
pub(crate) const INBOX_FRAMES: usize = 64;

/// A connection's datagram channel.
pub(crate) struct Binding {
    pub(crate) token: Token,
    /// The sealer, and the buffer each datagram is sealed into (reused).
    sealer: std::sync::Mutex<(DatagramSealer, Vec<u8>)>,
    opener: std::sync::Mutex<DatagramOpener>,
    /// Where the newest authenticated datagram (the highest counter) came from.
    peer: std::sync::Mutex<Option<SocketAddr>>,
    socket: Arc<UdpSocket>,
    /// Datagrams sent, and those the socket could not take (full buffer).
    pub(crate) sent: AtomicU64,
    pub(crate) send_failed: AtomicU64,
}

impl Binding {
    /// A binding `token` with `keys`, sending on `socket`, whose datagrams
    /// are at most `max` bytes.
    pub(crate) fn new(
        keys: &DatagramKeys,
        token: Token,
        max: usize,
        socket: Arc<UdpSocket>,
    ) -> Self {
        Self {
            token,
            sealer: std::sync::Mutex::new((
                DatagramSealer::new(&keys.server_to_client, token, max),
                Vec::with_capacity(max),
            )),
            opener: std::sync::Mutex::new(DatagramOpener::new(&keys.client_to_server, token)),
            peer: std::sync::Mutex::new(None),
            socket,
            sent: AtomicU64::new(0),
            send_failed: AtomicU64::new(0),
        }
    }

    /// Whether an authenticated datagram told where the client is: only
    /// then can the server send it datagrams.
    pub(crate) fn is_reachable(&self) -> bool {
        lock(&self.peer).is_some()
    }

    /// The largest frame (header + body) a datagram carries.
    pub(crate) fn max_frame(&self) -> usize {
        lock(&self.sealer).0.max_frame()
    }

    /// Sends `frame` (header + body) in a datagram to the client: `Ok(true)`
    /// when it left (or the socket's buffer was full: a datagram may be
    /// lost), `Ok(false)` when the client's address is not known yet.
    pub(crate) fn send(&self, frame: &[u8]) -> Result<bool, SealError> {
        let Some(peer) = *lock(&self.peer) else {
            return Ok(false);
        };
        let mut sealer = lock(&self.sealer);
        let (sealer, buffer) = &mut *sealer;
        sealer.seal(frame, buffer)?;
        match self.socket.try_send_to(buffer, peer) {
            Ok(_) => self.sent.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.send_failed.fetch_add(1, Ordering::Relaxed),
        };
        Ok(true)
    }

    /// Opens a datagram from `from` in place; on success, returns where
    /// the frame is, and takes `from` as the client's address when the
    /// datagram is the newest so far (the highest counter): one that
    /// arrives late, overtaken by a newer one from the client's new
    /// address, does not take the server back to the old one.
    pub(crate) fn open(
        &self,
        datagram: &mut [u8],
        from: SocketAddr,
    ) -> Result<Range<usize>, OpenError> {
        let (range, newest) = {
            let mut opener = lock(&self.opener);
            let range = opener.open(datagram)?;
            let counter = counter_of(datagram);
            (range, opener.highest() == Some(counter))
        };
        let mut peer = lock(&self.peer);
        if *peer != Some(from) && (newest || peer.is_none()) {
            if peer.is_some() {
                tracing::debug!(%from, "datagram channel: the client's address changed");
            }
            *peer = Some(from);
        }
        Ok(range)
    }
}

/// The counter of a datagram that opened (its bytes 8 to 16).
fn counter_of(datagram: &[u8]) -> u64 {
    let mut counter = [0u8; 8];
    counter.copy_from_slice(&datagram[TOKEN_LEN..TOKEN_LEN + 8]);
    u64::from_le_bytes(counter)
}

/// A connection's binding, if it has one, and the frames that came by
/// datagram for its task.
#[derive(Default)]
pub(crate) struct DatagramSlot {
    binding: std::sync::Mutex<Option<Arc<Binding>>>,
    inbox: std::sync::Mutex<VecDeque<Bytes>>,
    /// Whether the inbox may hold a frame: the connection's task looks at
    /// it on every wake-up (a push's too), and locks the inbox only then.
    waiting: AtomicBool,
    /// Frames dropped because the inbox was full.
    pub(crate) dropped: AtomicU64,
}

impl DatagramSlot {
    /// The binding, if any.
    pub(crate) fn binding(&self) -> Option<Arc<Binding>> {
        lock(&self.binding).clone()
    }

    /// Puts `binding` in place; returns the one it replaces.
    pub(crate) fn set(&self, binding: Option<Arc<Binding>>) -> Option<Arc<Binding>> {
        std::mem::replace(&mut *lock(&self.binding), binding)
    }

    /// Queues a frame that came by datagram; false when the inbox is full
    /// (the frame is dropped).
    pub(crate) fn queue(&self, frame: Bytes) -> bool {
        let mut inbox = lock(&self.inbox);
        if inbox.len() >= INBOX_FRAMES {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        inbox.push_back(frame);
        self.waiting.store(true, Ordering::Release);
        true
    }

    /// The next frame that came by datagram.
    pub(crate) fn take(&self) -> Option<Bytes> {
        if !self.waiting.load(Ordering::Acquire) {
            return None;
        }
        let mut inbox = lock(&self.inbox);
        let frame = inbox.pop_front();
        if inbox.is_empty() {
            self.waiting.store(false, Ordering::Release);
        }
        frame
    }
}
