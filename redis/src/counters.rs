//! What a backplane counts, kept twice: in atomics for
//! [`Backplane::stats`](ternio::Backplane::stats), and through the `metrics`
//! facade (a no-op until the application installs a recorder, such as the
//! server's Prometheus endpoint).
//!
//! | name | kind |
//! |---|---|
//! | `ternio_backplane_connected` | gauge: 1 while the link to Redis is up |
//! | `ternio_backplane_published_total` | counter: messages Redis accepted |
//! | `ternio_backplane_received_total` | counter: messages from other nodes |
//! | `ternio_backplane_dropped_total` | counter: messages lost (link down, queue full) |
//! | `ternio_backplane_disconnects_total` | counter: links lost |
//! | `ternio_backplane_reconnects_total` | counter: links restored |
//!
//! Each carries the label `node` (this node's id).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use metrics::{Counter, Gauge, counter, gauge};
use ternio::BackplaneStats;

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

/// Every count of one backplane.
pub(crate) struct Counters {
    connected: AtomicBool,
    connected_gauge: Gauge,
    published: Count,
    received: Count,
    dropped: Count,
    disconnects: Count,
    reconnects: Count,
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
