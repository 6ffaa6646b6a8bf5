//! What a [`RedisBackplane`](crate::RedisBackplane) is told: where Redis is
//! and how to trust it, the cluster secret, its key prefix, the node id, the
//! heartbeat, and its bounds.

use std::fmt;
use std::time::Duration;

use ternio::protocol::frame::DEFAULT_MAX_FRAME_SIZE;

use crate::envelope;
use crate::secret::ClusterSecret;

/// The default [`RedisConfig::subscription_backlog`]: Redis's own
/// default hard limit for a subscriber.
pub const DEFAULT_SUBSCRIPTION_BACKLOG: usize = 32 * 1024 * 1024;

/// The default [`RedisConfig::max_envelope_size`]: the largest push frame a
/// server with the default `max_frame_size` sends (1 MiB), to a group with
/// the longest name (64 KiB), in its envelope.
pub const DEFAULT_MAX_ENVELOPE_SIZE: usize =
    DEFAULT_MAX_FRAME_SIZE + 2 + u16::MAX as usize + envelope::OVERHEAD;

/// The settings of a [`RedisBackplane`](crate::RedisBackplane). The URL and
/// the cluster secret are required; every other field has a default and a
/// setter.
///
/// ```
/// use std::time::Duration;
/// use ternio_redis::{ClusterSecret, RedisConfig};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let ca_pem = b"-----BEGIN CERTIFICATE-----...".to_vec();
/// // The same secret on every node; 32 random bytes, e.g. `openssl rand -hex 32`.
/// let secret = ClusterSecret::new("4f1c0e8a9d2b7e6f3a5c8d1e0b9a7f6e")?;
/// let config = RedisConfig::new("rediss://redis.internal:6380/", secret)
///     .tls_ca_certificate(ca_pem) // the private CA that signed Redis's certificate
///     .prefix("chat")
///     .max_message_age(Duration::from_secs(30));
/// assert!(!format!("{config:?}").contains("4f1c0e8a"));
/// # Ok(())
/// # }
/// ```
///
/// `#[non_exhaustive]`: built with [`RedisConfig::new`] and its setters.
#[derive(Clone)]
#[non_exhaustive]
pub struct RedisConfig {
    /// The Redis server, as `redis://host:port/db` (or
    /// `redis://:password@host/`), or `rediss://…` for TLS: the server's
    /// certificate is checked against the system's roots, or against
    /// [`tls_ca_certificate`](Self::tls_ca_certificate) when it is set, and
    /// must name the host of the URL.
    pub url: String,
    /// The key the cluster's nodes share: every envelope carries a MAC
    /// under it, and envelopes without a valid one are dropped. Required.
    pub secret: ClusterSecret,
    /// The certificate (PEM) of the private certificate authority that
    /// signed Redis's certificate, for a `rediss://` URL; it then replaces
    /// the system's roots. Default none.
    pub tls_ca_certificate: Option<Vec<u8>>,
    /// The largest message accepted from Redis, in bytes; a larger one is
    /// dropped (and counted) before it is copied or checked. Raise it with
    /// the servers' `max_frame_size`. It also caps the envelopes this node
    /// publishes when it merges a run of broadcasts (see
    /// [`merge_broadcasts`](Self::merge_broadcasts)): give every node of a
    /// cluster the same value, as a node with a lower one than its
    /// publishers drops their merged runs whole. Default
    /// [`DEFAULT_MAX_ENVELOPE_SIZE`] (about 1.06 MiB).
    pub max_envelope_size: usize,
    /// How far an envelope's stamp (its publisher's clock) may be from this
    /// node's clock, either way; an envelope older (or newer) is dropped as
    /// stale. It is how long a replayed envelope can matter, and how much
    /// the nodes' clocks may disagree. Default 30 s.
    pub max_message_age: Duration,
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
    /// The most bytes of messages that Redis delivered and this node has
    /// not delivered yet; past it they are dropped and the node
    /// reconnects (docs/SCALING.md). At least the largest envelope.
    /// Default 32 MiB.
    pub subscription_backlog: usize,
    /// The first wait before reconnecting; it doubles up to
    /// [`max_reconnect_delay`](Self::max_reconnect_delay). Default 100 ms.
    pub reconnect_delay: Duration,
    /// The longest wait between two reconnection attempts. Default 2 s.
    pub max_reconnect_delay: Duration,
    /// How long a connection attempt or a command may take before the link
    /// is considered lost. Default 2 s.
    pub response_timeout: Duration,
    /// Whether a run of consecutive broadcasts to one group, queued
    /// together, is published as one envelope (at most 64 KiB of frames,
    /// within [`max_envelope_size`](Self::max_envelope_size)). Nodes from
    /// before this setting refuse such envelopes: turn it off on upgraded
    /// nodes until every node of the cluster is upgraded. Default true.
    pub merge_broadcasts: bool,
}

impl RedisConfig {
    /// The defaults, with Redis at `url` and the cluster's `secret`.
    pub fn new(url: impl Into<String>, secret: ClusterSecret) -> Self {
        Self {
            url: url.into(),
            secret,
            tls_ca_certificate: None,
            max_envelope_size: DEFAULT_MAX_ENVELOPE_SIZE,
            max_message_age: Duration::from_secs(30),
            prefix: "ternio".to_owned(),
            node_id: None,
            heartbeat_interval: Duration::from_secs(1),
            node_ttl: Duration::from_secs(5),
            queue_capacity: 65_536,
            subscription_backlog: DEFAULT_SUBSCRIPTION_BACKLOG,
            reconnect_delay: Duration::from_millis(100),
            max_reconnect_delay: Duration::from_secs(2),
            response_timeout: Duration::from_secs(2),
            merge_broadcasts: true,
        }
    }

    /// Trusts the certificate authority `pem` (one or more PEM
    /// certificates) for Redis's TLS certificate, instead of the system's
    /// roots. Needs a `rediss://` URL.
    pub fn tls_ca_certificate(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls_ca_certificate = Some(pem.into());
        self
    }

    /// Sets the largest message accepted from Redis, in bytes.
    pub fn max_envelope_size(mut self, bytes: usize) -> Self {
        self.max_envelope_size = bytes;
        self
    }

    /// Sets how far an envelope's stamp may be from this node's clock.
    pub fn max_message_age(mut self, age: Duration) -> Self {
        self.max_message_age = age;
        self
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

    /// Sets how many bytes of messages from Redis may wait for this node
    /// (see [`subscription_backlog`](Self::subscription_backlog)).
    pub fn subscription_backlog(mut self, bytes: usize) -> Self {
        self.subscription_backlog = bytes;
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

    /// Sets whether runs of broadcasts to one group are published as one
    /// envelope (see [`merge_broadcasts`](Self::merge_broadcasts)).
    pub fn merge_broadcasts(mut self, merge: bool) -> Self {
        self.merge_broadcasts = merge;
        self
    }

    /// The settings with their bounds applied: a TTL of at least two
    /// heartbeats, a queue of at least one message, non-zero delays, a
    /// message age of at least 1 s.
    pub(crate) fn normalized(mut self) -> Self {
        self.heartbeat_interval = self.heartbeat_interval.max(Duration::from_millis(10));
        self.node_ttl = self.node_ttl.max(self.heartbeat_interval * 2);
        self.queue_capacity = self.queue_capacity.max(1);
        // A backlog must hold the largest envelope, or such a message
        // would make the node reconnect.
        self.subscription_backlog = self
            .subscription_backlog
            .max(self.max_envelope_size.saturating_add(1024));
        self.reconnect_delay = self.reconnect_delay.max(Duration::from_millis(1));
        self.max_reconnect_delay = self.max_reconnect_delay.max(self.reconnect_delay);
        self.response_timeout = self.response_timeout.max(Duration::from_millis(10));
        self.max_message_age = self.max_message_age.max(Duration::from_secs(1));
        self
    }
}

impl fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &redacted_url(&self.url))
            .field("secret", &self.secret)
            .field(
                "tls_ca_certificate",
                &self
                    .tls_ca_certificate
                    .as_ref()
                    .map(|pem| format!("{} bytes", pem.len())),
            )
            .field("max_envelope_size", &self.max_envelope_size)
            .field("max_message_age", &self.max_message_age)
            .field("prefix", &self.prefix)
            .field("node_id", &self.node_id)
            .field("heartbeat_interval", &self.heartbeat_interval)
            .field("node_ttl", &self.node_ttl)
            .field("queue_capacity", &self.queue_capacity)
            .field("subscription_backlog", &self.subscription_backlog)
            .field("reconnect_delay", &self.reconnect_delay)
            .field("max_reconnect_delay", &self.max_reconnect_delay)
            .field("response_timeout", &self.response_timeout)
            .field("merge_broadcasts", &self.merge_broadcasts)
            .finish()
    }
}

/// `url` with its user and password (`redis://user:password@host`) hidden.
pub(crate) fn redacted_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://<redacted>{}", &rest[at..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_secret_and_the_password() {
        let secret = ClusterSecret::new("the cluster secret, 32 bytes....").unwrap();
        let config = RedisConfig::new("redis://user:hunter2hunter2@10.0.0.5:6379/0", secret)
            .tls_ca_certificate(b"-----BEGIN CERTIFICATE-----".to_vec());
        let debug = format!("{config:?}");
        assert!(!debug.contains("cluster secret"), "{debug}");
        assert!(!debug.contains("hunter2"), "{debug}");
        assert!(
            debug.contains("redis://<redacted>@10.0.0.5:6379/0"),
            "{debug}"
        );
        assert!(debug.contains("27 bytes"), "{debug}");
        assert_eq!(redacted_url("redis://10.0.0.5/"), "redis://10.0.0.5/");
        assert_eq!(redacted_url("rediss://:pw@h/"), "rediss://<redacted>@h/");
    }
}
