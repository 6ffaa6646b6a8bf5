//! What a backplane counts, kept twice: in atomics for
//! [`Backplane::stats`](ternio::backplane::Backplane::stats), and through
//! the `metrics` facade (a no-op until the application installs a
//! recorder, such as the server's Prometheus endpoint).
//!
//! | name | kind |
//! |---|---|
//! | `ternio_backplane_connected` | gauge: 1 while the link to Redis is up |
//! | `ternio_backplane_published_total` | counter: messages Redis accepted |
//! | `ternio_backplane_received_total` | counter: messages from other nodes |
//! | `ternio_backplane_dropped_total` | counter: messages lost (link down, queue full) |
//! | `ternio_backplane_disconnects_total` | counter: links lost |
//! | `ternio_backplane_reconnects_total` | counter: links restored |
//! | `ternio_backplane_rejected_total` | counter: envelopes received and not delivered, labelled `reason` (see [`Rejected`]) |
//!
//! Each carries the label `node` (this node's id).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use metrics::{Counter, Gauge, counter, gauge};
use ternio::backplane::BackplaneStats;

/// One count: its atomic and its metric.
struct Count {
    value: AtomicU64,
    metric: Counter,
}

impl Count {
    fn new(name: &'static str, node: &str) -> Self {
        Self {
            value: AtomicU64::new(0),
            metric: counter!(name, "node" => node.to_owned()),
        }
    }

    fn add(&self, n: u64) {
        self.value.fetch_add(n, Ordering::Relaxed);
        self.metric.increment(n);
    }

    fn get(&self) -> u64 {
        self.value.load(Ordering::Relaxed)
    }
}

/// Why a received envelope was not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rejection {
    Oversized,
    Malformed,
    Forged,
    Replayed,
    Stale,
    Overflow,
}

impl Rejection {
    const ALL: [Self; 6] = [
        Self::Oversized,
        Self::Malformed,
        Self::Forged,
        Self::Replayed,
        Self::Stale,
        Self::Overflow,
    ];

    /// Its `reason` label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Oversized => "oversized",
            Self::Malformed => "malformed",
            Self::Forged => "forged",
            Self::Replayed => "replayed",
            Self::Stale => "stale",
            Self::Overflow => "overflow",
        }
    }
}

/// The envelopes a [`RedisBackplane`](crate::RedisBackplane) received and
/// refused, by reason, since it started (see
/// [`RedisBackplane::rejected`](crate::RedisBackplane::rejected)). Each is
/// also the metric `ternio_backplane_rejected_total{reason=...}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rejected {
    /// Above `RedisConfig::max_envelope_size`: refused before anything
    /// else, without a copy.
    pub oversized: u64,
    /// Not an envelope of this version: another program's message, a node
    /// of an older version, or truncated or ill-formed.
    pub malformed: u64,
    /// The MAC did not verify: forged, corrupted, published under another
    /// secret, or copied from another channel.
    pub forged: u64,
    /// Authentic, but not above the highest sequence seen from its
    /// publisher: a replay (or a duplicate).
    pub replayed: u64,
    /// Authentic, but stamped further from this node's clock than
    /// `RedisConfig::max_message_age`: an old replay, or a skewed clock.
    pub stale: u64,
    /// Authentic, from a publisher this node could not track: too many
    /// publishers within one message age.
    pub overflow: u64,
}

impl Rejected {
    /// Every envelope refused, whatever the reason.
    pub fn total(&self) -> u64 {
        self.oversized + self.malformed + self.forged + self.replayed + self.stale + self.overflow
    }
}

/// Every count of one backplane.
pub(crate) struct Counters {
    connected: AtomicBool,
    connected_gauge: Gauge,
    published: Count,
    received: Count,
    dropped: Count,
    disconnects: Count,
    reconnects: Count,
    /// Indexed like [`Rejection::ALL`].
    rejected: [Count; 6],
}

impl Counters {
    pub(crate) fn new(node: u16) -> Self {
        let node = node.to_string();
        Self {
            connected: AtomicBool::new(false),
            connected_gauge: gauge!("ternio_backplane_connected", "node" => node.clone()),
            published: Count::new("ternio_backplane_published_total", &node),
            received: Count::new("ternio_backplane_received_total", &node),
            dropped: Count::new("ternio_backplane_dropped_total", &node),
            disconnects: Count::new("ternio_backplane_disconnects_total", &node),
            reconnects: Count::new("ternio_backplane_reconnects_total", &node),
            rejected: Rejection::ALL.map(|reason| Count {
                value: AtomicU64::new(0),
                metric: counter!(
                    "ternio_backplane_rejected_total",
                    "node" => node.clone(),
                    "reason" => reason.as_str()
                ),
            }),
        }
    }

    /// Whether the link is up.
    pub(crate) fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Acquire)
    }

    /// The link came up (`again`: after it was lost).
    pub(crate) fn connected(&self, again: bool) {
        self.connected.store(true, Ordering::Release);
        self.connected_gauge.set(1.0);
        if again {
            self.reconnects.add(1);
        }
    }

    /// The link went down (`lost`: it failed, rather than shut down).
    pub(crate) fn disconnected(&self, lost: bool) {
        self.connected.store(false, Ordering::Release);
        self.connected_gauge.set(0.0);
        if lost {
            self.disconnects.add(1);
        }
    }

    pub(crate) fn published(&self, messages: u64) {
        self.published.add(messages);
    }

    pub(crate) fn received(&self, messages: u64) {
        self.received.add(messages);
    }

    pub(crate) fn dropped(&self, messages: u64) {
        self.dropped.add(messages);
    }

    pub(crate) fn rejected(&self, reason: Rejection) {
        self.rejected[reason as usize].add(1);
    }

    pub(crate) fn rejections(&self) -> Rejected {
        let count = |reason: Rejection| self.rejected[reason as usize].get();
        Rejected {
            oversized: count(Rejection::Oversized),
            malformed: count(Rejection::Malformed),
            forged: count(Rejection::Forged),
            replayed: count(Rejection::Replayed),
            stale: count(Rejection::Stale),
            overflow: count(Rejection::Overflow),
        }
    }

    pub(crate) fn stats(&self) -> BackplaneStats {
        BackplaneStats {
            connected: self.is_connected(),
            published: self.published.get(),
            received: self.received.get(),
            dropped: self.dropped.get(),
            disconnects: self.disconnects.get(),
            reconnects: self.reconnects.get(),
        }
    }
}
