//! What a backplane counts, kept twice: in atomics for
//! [`Backplane::stats`](ternio::backplane::Backplane::stats), and through
//! the `metrics` facade.
//!
//! The metrics are registered when a server attaches the backplane (in
//! `ServerBuilder::build`), in the recorder installed then: the server's
//! Prometheus endpoint (`ServerBuilder::prometheus`, installed by that same
//! `build`, after the backplane was connected) or the application's own.
//! Counts made before are carried over. A backplane that no server
//! attaches records no metric.
//!
//! | name | kind |
//! |---|---|
//! | `ternio_backplane_connected` | gauge: 1 while the link to Redis is up |
//! | `ternio_backplane_published_total` | counter: messages Redis accepted |
//! | `ternio_backplane_received_total` | counter: messages from other nodes |
//! | `ternio_backplane_dropped_total` | counter: messages lost (link down, queue full) |
//! | `ternio_backplane_skipped_total` | counter: group broadcasts not published, no other node having a member |
//! | `ternio_backplane_disconnects_total` | counter: links lost |
//! | `ternio_backplane_reconnects_total` | counter: links restored |
//! | `ternio_backplane_rejected_total` | counter: envelopes received and not delivered, labelled `reason` (see [`Rejected`]) |
//!
//! Each carries the label `node` (this node's id), and a `# HELP` text.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use metrics::{Counter, Gauge, Unit, counter, describe_counter, describe_gauge, gauge};
use ternio::backplane::BackplaneStats;

/// One count: its atomic, and its metric once registered.
struct Count {
    value: AtomicU64,
    metric: OnceLock<Counter>,
}

impl Count {
    const fn new() -> Self {
        Self {
            value: AtomicU64::new(0),
            metric: OnceLock::new(),
        }
    }

    /// Adds `n`. The metric is given the new total (`absolute`), not the
    /// increment: a count that races with the registration is then at most
    /// late until the next one, never counted twice.
    fn add(&self, n: u64) {
        let total = self.value.fetch_add(n, Ordering::Relaxed) + n;
        if let Some(metric) = self.metric.get() {
            metric.absolute(total);
        }
    }

    /// Gives the count its metric, which starts at the count so far.
    fn register(&self, metric: Counter) {
        let metric = self.metric.get_or_init(|| metric);
        metric.absolute(self.get());
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
    node: u16,
    connected: AtomicBool,
    /// The gauge of `connected`, once registered; changed under this lock
    /// with the flag, so that the two agree.
    connected_gauge: Mutex<Option<Gauge>>,
    published: Count,
    received: Count,
    dropped: Count,
    skipped: Count,
    disconnects: Count,
    reconnects: Count,
    /// Indexed like [`Rejection::ALL`].
    rejected: [Count; 6],
}

impl Counters {
    pub(crate) fn new(node: u16) -> Self {
        Self {
            node,
            connected: AtomicBool::new(false),
            connected_gauge: Mutex::new(None),
            published: Count::new(),
            received: Count::new(),
            dropped: Count::new(),
            skipped: Count::new(),
            disconnects: Count::new(),
            reconnects: Count::new(),
            rejected: [const { Count::new() }; 6],
        }
    }

    /// Registers the metrics in the recorder installed now, with their
    /// `# HELP` texts, starting from the counts so far. Called once, when a
    /// server attaches the backplane.
    pub(crate) fn register_metrics(&self) {
        describe_gauge!(
            "ternio_backplane_connected",
            Unit::Count,
            "1 while the backplane's link to Redis is up, else 0."
        );
        let counters = [
            (
                &self.published,
                "ternio_backplane_published_total",
                "Messages Redis accepted from this node.",
            ),
            (
                &self.received,
                "ternio_backplane_received_total",
                "Messages received from other nodes.",
            ),
            (
                &self.dropped,
                "ternio_backplane_dropped_total",
                "Messages lost: the link was down or the queue full.",
            ),
            (
                &self.skipped,
                "ternio_backplane_skipped_total",
                "Group broadcasts not published: no other node has a member of the group.",
            ),
            (
                &self.disconnects,
                "ternio_backplane_disconnects_total",
                "Links to Redis lost.",
            ),
            (
                &self.reconnects,
                "ternio_backplane_reconnects_total",
                "Links to Redis restored.",
            ),
        ];
        let node = self.node.to_string();
        for (count, name, help) in counters {
            describe_counter!(name, Unit::Count, help);
            count.register(counter!(name, "node" => node.clone()));
        }
        describe_counter!(
            "ternio_backplane_rejected_total",
            Unit::Count,
            "Envelopes received from Redis and not delivered, by reason."
        );
        for (count, reason) in self.rejected.iter().zip(Rejection::ALL) {
            count.register(counter!(
                "ternio_backplane_rejected_total",
                "node" => node.clone(),
                "reason" => reason.as_str()
            ));
        }
        let mut connected = self.gauge();
        let gauge =
            connected.get_or_insert_with(|| gauge!("ternio_backplane_connected", "node" => node));
        gauge.set(if self.is_connected() { 1.0 } else { 0.0 });
    }

    fn gauge(&self) -> std::sync::MutexGuard<'_, Option<Gauge>> {
        self.connected_gauge
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the link is up.
    pub(crate) fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Acquire)
    }

    /// The link came up (`again`: after it was lost).
    pub(crate) fn connected(&self, again: bool) {
        self.set_connected(true);
        if again {
            self.reconnects.add(1);
        }
    }

    /// The link went down (`lost`: it failed, rather than shut down).
    pub(crate) fn disconnected(&self, lost: bool) {
        self.set_connected(false);
        if lost {
            self.disconnects.add(1);
        }
    }

    fn set_connected(&self, connected: bool) {
        let gauge = self.gauge();
        self.connected.store(connected, Ordering::Release);
        if let Some(gauge) = &*gauge {
            gauge.set(if connected { 1.0 } else { 0.0 });
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

    pub(crate) fn skipped(&self, messages: u64) {
        self.skipped.add(messages);
    }

    pub(crate) fn skips(&self) -> u64 {
        self.skipped.get()
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
