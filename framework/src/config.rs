//! Server limits, with their defaults.

use std::time::Duration;

use ternio_protocol::DEFAULT_MAX_FRAME_SIZE;

/// The limits a server applies to every connection. Every field has a
/// documented default and a setter on [`ServerBuilder`](crate::ServerBuilder).
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Largest frame (header + body) accepted or sent. Default 1 MiB.
    pub max_frame_size: usize,
    /// Asynchronous requests a connection may have running at once. When
    /// reached, the server stops reading that connection until one finishes
    /// (back-pressure: nothing is refused or queued without bound).
    /// Default 1,024.
    pub max_requests_in_flight: usize,
    /// Bytes of pushed frames that may wait for one connection (its
    /// outbound queue). A push beyond it meets the slow-consumer policy.
    /// Default 1 MiB.
    pub max_outbound_queue_bytes: usize,
    /// What a push to a full outbound queue does. Default
    /// [`SlowConsumerPolicy::Disconnect`].
    pub slow_consumer: SlowConsumerPolicy,
    /// Replies waiting to be written above which the server stops reading a
    /// connection until its peer reads. Default 1 MiB.
    pub outbound_high_water: usize,
    /// How long a closing connection waits for its last frames to be
    /// written and for the peer to close its side. Default 2 s.
    pub close_linger: Duration,
    /// On shutdown, how long running requests may take to finish before
    /// their connections close anyway. Default 5 s.
    pub shutdown_grace: Duration,
    /// How long a WebSocket client may take over its HTTP upgrade. Default 10 s.
    pub websocket_upgrade_timeout: Duration,
    /// Whether every application opcode requires an encrypted request
    /// (a plain one gets error 6). Default `false`.
    pub require_encryption: bool,
    /// With `require_encryption`, how long a connection may go without a
    /// completed handshake before `DISCONNECT HANDSHAKE_TIMEOUT`. Default 10 s.
    pub handshake_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            max_requests_in_flight: 1024,
            max_outbound_queue_bytes: 1024 * 1024,
            slow_consumer: SlowConsumerPolicy::Disconnect,
            outbound_high_water: 1024 * 1024,
            close_linger: Duration::from_secs(2),
            shutdown_grace: Duration::from_secs(5),
            websocket_upgrade_timeout: Duration::from_secs(10),
            require_encryption: false,
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// What happens to a push when a connection's outbound queue is full (its
/// peer does not read fast enough).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SlowConsumerPolicy {
    /// The connection gets `DISCONNECT SLOW_CONSUMER` and closes.
    #[default]
    Disconnect,
    /// A packet type marked `#[packet(droppable)]` (a state update that the
    /// next one replaces) is dropped for that connection, which stays; any
    /// other packet still disconnects it with `SLOW_CONSUMER`.
    DropDroppable,
}
