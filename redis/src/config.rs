//! What a [`RedisBackplane`](crate::RedisBackplane) is told: where Redis is,
//! its key prefix, the node id, the heartbeat, and its bounds.

use std::time::Duration;

/// The settings of a [`RedisBackplane`](crate::RedisBackplane). Every field
/// has a default and a setter; only the URL is required.
#[derive(Debug, Clone)]
pub struct RedisConfig {
    /// The Redis server, as `redis://host:port/db` (or `redis://:password@host/`).
    pub url: String,
    /// Prefix of every key and channel, so several clusters can share one
    /// Redis. Default `ternio`.
    pub prefix: String,
    /// A fixed node id (1 to 65,535), when the deployment assigns them; by
    /// default the node claims a free one from Redis when it connects.
    pub node_id: Option<u16>,
    /// How often the node refreshes its liveness and membership keys.
    /// Default 1 s.
    pub heartbeat_interval: Duration,
    /// How long those keys live without a refresh: a node that dies leaves
    /// no member behind after at most this long. At least twice the
    /// heartbeat interval. Default 5 s.
    pub node_ttl: Duration,
    /// Messages that may wait to be published; one more is dropped (and
    /// counted). Default 65,536.
    pub queue_capacity: usize,
    /// The first wait before reconnecting; it doubles up to
    /// [`max_reconnect_delay`](Self::max_reconnect_delay). Default 100 ms.
    pub reconnect_delay: Duration,
    /// The longest wait between two reconnection attempts. Default 2 s.
    pub max_reconnect_delay: Duration,
    /// How long a connection attempt or a command may take before the link
    /// is considered lost. Default 2 s.
    pub response_timeout: Duration,
}

impl RedisConfig {
    /// The defaults, with Redis at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            prefix: "ternio".to_owned(),
            node_id: None,
            heartbeat_interval: Duration::from_secs(1),
            node_ttl: Duration::from_secs(5),
            queue_capacity: 65_536,
            reconnect_delay: Duration::from_millis(100),
            max_reconnect_delay: Duration::from_secs(2),
            response_timeout: Duration::from_secs(2),
        }
    }

    /// Sets the prefix of every key and channel.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Uses node id `node` (1 to 65,535) instead of claiming a free one.
    pub fn node_id(mut self, node: u16) -> Self {
        self.node_id = Some(node);
        self
    }

    /// Sets the heartbeat interval and the time the node's keys live
    /// without one (raised to twice the interval if it is shorter).
    pub fn heartbeat(mut self, interval: Duration, ttl: Duration) -> Self {
        self.heartbeat_interval = interval;
        self.node_ttl = ttl;
        self
    }

    /// Sets how many messages may wait to be published.
    pub fn queue_capacity(mut self, messages: usize) -> Self {
        self.queue_capacity = messages;
        self
    }

    /// Sets the first and the longest wait between reconnection attempts.
    pub fn reconnect_delay(mut self, first: Duration, max: Duration) -> Self {
        self.reconnect_delay = first;
        self.max_reconnect_delay = max;
        self
    }

    /// Sets how long a connection attempt or a command may take.
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// The settings with their bounds applied: a TTL of at least two
    /// heartbeats, a queue of at least one message, non-zero delays.
    pub(crate) fn normalized(mut self) -> Self {
        self.heartbeat_interval = self.heartbeat_interval.max(Duration::from_millis(10));
        self.node_ttl = self.node_ttl.max(self.heartbeat_interval * 2);
        self.queue_capacity = self.queue_capacity.max(1);
        self.reconnect_delay = self.reconnect_delay.max(Duration::from_millis(1));
        self.max_reconnect_delay = self.max_reconnect_delay.max(self.reconnect_delay);
        self.response_timeout = self.response_timeout.max(Duration::from_millis(10));
        self
    }
}
