//! Server pushes: who subscribed to which packet type, and how a push that
//! arrives reaches them.
//!
//! The registry belongs to the client, not to a connection: subscriptions
//! outlive reconnects. The reader task delivers each push without waiting
//! for anyone: a subscription whose buffer is full loses the push (counted),
//! a callback runs inline.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::Stream;
use ternio_protocol::Packet;
use tokio::sync::mpsc;

use crate::sync::lock;

/// One subscriber's way of taking a push's body.
trait Sink: Send + Sync {
    /// Decodes and hands over `body`; `false` when it does not decode as
    /// the subscriber's type.
    fn deliver(&self, body: &Bytes) -> bool;
}

/// A subscriber of one opcode.
#[derive(Clone)]
struct Entry {
    id: u64,
    sink: Arc<dyn Sink>,
}

#[derive(Default)]
struct Table {
    /// Set when the client closed for good: nothing subscribes any more.
    closed: bool,
    /// The subscribers of each opcode; replaced (not changed in place) on
    /// each change, so that the reader takes a snapshot with one clone.
    by_opcode: HashMap<u16, Arc<[Entry]>, BuildHasherDefault<OpcodeHasher>>,
}

/// Hashes an opcode with one multiplication: the table holds only the
/// opcodes this client subscribed to, so a peer choosing opcodes can make
/// lookups miss but cannot make its entries collide; SipHash cost about an
/// eighth of the reader's work per push.
#[derive(Default)]
struct OpcodeHasher(u64);

impl Hasher for OpcodeHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 << 8 | u64::from(byte)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u16(&mut self, opcode: u16) {
        // The high bits pick hashbrown's control byte, the low bits the
        // bucket: the product spreads an opcode over both.
        self.0 = u64::from(opcode).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Every subscription of a client, and the counts of pushes nobody took.
#[derive(Default)]
pub(crate) struct Registry {
    table: Mutex<Table>,
    next_id: AtomicU64,
    unhandled: AtomicU64,
    undecodable: AtomicU64,
}

impl Registry {
    /// Pushes that arrived with nobody subscribed to their opcode.
    pub(crate) fn unhandled(&self) -> u64 {
        self.unhandled.load(Ordering::Relaxed)
    }

    /// Pushes that some subscriber of their opcode could not decode.
    pub(crate) fn undecodable(&self) -> u64 {
        self.undecodable.load(Ordering::Relaxed)
    }

    /// Counts a frame that nothing handles (an unexpected system frame).
    pub(crate) fn count_unhandled(&self) {
        self.unhandled.fetch_add(1, Ordering::Relaxed);
    }

    /// Hands a push to every subscriber of `opcode`.
    pub(crate) fn deliver(&self, opcode: u16, body: &Bytes) {
        let entries = lock(&self.table).by_opcode.get(&opcode).cloned();
        let Some(entries) = entries else {
            self.unhandled.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let mut all_decoded = true;
        for entry in entries.iter() {
            all_decoded &= entry.sink.deliver(body);
        }
        if !all_decoded {
            self.undecodable.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Ends every subscription: the client closed for good. Streams end
    /// once their buffered pushes are taken; callbacks are dropped.
    pub(crate) fn close(&self) {
        let dropped = {
            let mut table = lock(&self.table);
            table.closed = true;
            std::mem::take(&mut table.by_opcode)
        };
        // Outside the lock: a callback's captures may do anything as they drop.
        drop(dropped);
    }

    fn add(self: &Arc<Self>, opcode: u16, sink: Arc<dyn Sink>) -> Registration {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        {
            let mut table = lock(&self.table);
            if !table.closed {
                let entry = Entry { id, sink };
                let entries = match table.by_opcode.get(&opcode) {
                    Some(entries) => entries.iter().cloned().chain([entry]).collect(),
                    None => Arc::from([entry]),
                };
                table.by_opcode.insert(opcode, entries);
            }
        }
        Registration {
            registry: Arc::downgrade(self),
            opcode,
            id,
        }
    }

    fn remove(&self, opcode: u16, id: u64) {
        let removed = {
            let mut table = lock(&self.table);
            let Some(entries) = table.by_opcode.get(&opcode) else {
                return;
            };
            let removed: Vec<Entry> = entries.iter().filter(|e| e.id == id).cloned().collect();
            let kept: Arc<[Entry]> = entries.iter().filter(|e| e.id != id).cloned().collect();
            if kept.is_empty() {
                table.by_opcode.remove(&opcode);
            } else {
                table.by_opcode.insert(opcode, kept);
            }
            removed
        };
        drop(removed);
    }

    /// A new subscription to pushes of `P`, holding up to `buffer` of them.
    pub(crate) fn subscribe<P: Packet>(self: &Arc<Self>, buffer: usize) -> Subscription<P> {
        let (sender, receiver) = mpsc::channel(buffer.max(1));
        let counts = Arc::new(Counts::default());
        let sink = Arc::new(ChannelSink {
            sender,
            counts: Arc::clone(&counts),
        });
        Subscription {
            receiver,
            counts,
            _registration: self.add(P::OPCODE, sink),
        }
    }

    /// Calls `callback` with every push of `P` until the guard is dropped.
    pub(crate) fn on<P: Packet>(
        self: &Arc<Self>,
        callback: impl Fn(P) + Send + Sync + 'static,
    ) -> SubscriptionGuard {
        let counts = Arc::new(Counts::default());
        let sink = Arc::new(CallbackSink {
            callback,
            counts: Arc::clone(&counts),
            _packet: PhantomData,
        });
        SubscriptionGuard {
            counts,
            _registration: self.add(P::OPCODE, sink),
        }
    }
}

/// Removes a subscriber from the registry when dropped.
struct Registration {
    registry: Weak<Registry>,
    opcode: u16,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(registry) = self.registry.upgrade() {
            registry.remove(self.opcode, self.id);
        }
    }
}

/// What one subscriber lost.
#[derive(Default)]
struct Counts {
    dropped: AtomicU64,
    undecodable: AtomicU64,
}

struct ChannelSink<P> {
    sender: mpsc::Sender<P>,
    counts: Arc<Counts>,
}

impl<P: Packet> Sink for ChannelSink<P> {
    fn deliver(&self, body: &Bytes) -> bool {
        match P::decode_packet(body) {
            Ok(packet) => {
                if let Err(mpsc::error::TrySendError::Full(_)) = self.sender.try_send(packet) {
                    self.counts.dropped.fetch_add(1, Ordering::Relaxed);
                }
                true
            }
            Err(error) => {
                self.counts.undecodable.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(packet = P::NAME, %error, "a push does not decode as the subscribed type");
                false
            }
        }
    }
}

struct CallbackSink<P, F> {
    callback: F,
    counts: Arc<Counts>,
    _packet: PhantomData<fn(P)>,
}

impl<P: Packet, F: Fn(P) + Send + Sync + 'static> Sink for CallbackSink<P, F> {
    fn deliver(&self, body: &Bytes) -> bool {
        match P::decode_packet(body) {
            Ok(packet) => {
                // A panicking callback must not take the connection's reader with it.
                if catch_unwind(AssertUnwindSafe(|| (self.callback)(packet))).is_err() {
                    tracing::warn!(packet = P::NAME, "a push callback panicked");
                }
                true
            }
            Err(error) => {
                self.counts.undecodable.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(packet = P::NAME, %error, "a push does not decode as the subscribed type");
                false
            }
        }
    }
}

/// The pushes of one packet type, from
/// [`Client::subscribe`](crate::Client::subscribe): a
/// [`Stream`](futures_util::Stream) of `P`, or call [`next`](Self::next).
///
/// Every subscription of a type gets every push of that type, in the order
/// they arrived, across reconnects. It holds up to
/// [`ClientConfig::push_buffer`](crate::ClientConfig::push_buffer) pushes
/// not taken yet; when it is full, further pushes for it are dropped and
/// counted in [`dropped`](Self::dropped), and the connection goes on (other
/// subscribers are not affected). A push whose body does not decode as `P`
/// is dropped and counted in [`undecodable`](Self::undecodable) (and in
/// [`Client::undecodable_pushes`](crate::Client::undecodable_pushes)).
///
/// Dropping it unsubscribes. The stream ends (`None`) when the client
/// closes for good, after the pushes it holds.
pub struct Subscription<P> {
    receiver: mpsc::Receiver<P>,
    counts: Arc<Counts>,
    _registration: Registration,
}

impl<P: Packet> Subscription<P> {
    /// The next push, waiting for it; `None` once the client closed for good
    /// and every push held was taken.
    pub async fn next(&mut self) -> Option<P> {
        self.receiver.recv().await
    }

    /// The next push if one is held now, without waiting.
    pub fn try_next(&mut self) -> Option<P> {
        self.receiver.try_recv().ok()
    }

    /// Pushes lost because the buffer was full when they arrived.
    pub fn dropped(&self) -> u64 {
        self.counts.dropped.load(Ordering::Relaxed)
    }

    /// Pushes of this opcode whose body did not decode as `P`.
    pub fn undecodable(&self) -> u64 {
        self.counts.undecodable.load(Ordering::Relaxed)
    }
}

impl<P: Packet> Stream for Subscription<P> {
    type Item = P;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<P>> {
        self.receiver.poll_recv(cx)
    }
}

impl<P> fmt::Debug for Subscription<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription")
            .field("opcode", &self._registration.opcode)
            .field("dropped", &self.counts.dropped.load(Ordering::Relaxed))
            .field(
                "undecodable",
                &self.counts.undecodable.load(Ordering::Relaxed),
            )
            .finish_non_exhaustive()
    }
}

/// Keeps a callback registered with [`Client::on`](crate::Client::on);
/// dropping it unsubscribes (a push being delivered at that moment may
/// still reach the callback once).
#[must_use = "dropping the guard unsubscribes the callback at once"]
pub struct SubscriptionGuard {
    counts: Arc<Counts>,
    _registration: Registration,
}

impl SubscriptionGuard {
    /// Pushes of this opcode whose body did not decode as the callback's type.
    pub fn undecodable(&self) -> u64 {
        self.counts.undecodable.load(Ordering::Relaxed)
    }
}

impl fmt::Debug for SubscriptionGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubscriptionGuard")
            .field("opcode", &self._registration.opcode)
            .field(
                "undecodable",
                &self.counts.undecodable.load(Ordering::Relaxed),
            )
            .finish_non_exhaustive()
    }
}
