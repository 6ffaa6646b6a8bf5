//! Client settings.

use std::time::Duration;

use ternio_protocol::DEFAULT_MAX_FRAME_SIZE;

use crate::reconnect::ReconnectPolicy;

/// How a [`Client`](crate::Client) behaves. Every field has a default.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// How long a request waits for its response unless the call says
    /// otherwise. Default 10 s. While the client reconnects, the wait for
    /// the new connection counts toward it.
    pub request_timeout: Duration,
    /// How long connecting may take (resolving, the TCP connection and, on
    /// WebSocket, the upgrade), for the first connection and for each
    /// reconnect attempt. Default 10 s.
    pub connect_timeout: Duration,
    /// Largest frame sent or accepted. Default 1 MiB, as the server's. On
    /// WebSocket it is also the largest message and message fragment accepted.
    pub max_frame_size: usize,
    /// Requests that may wait for a response at once; one more fails with
    /// [`ClientError::TooManyInFlight`](crate::ClientError::TooManyInFlight).
    /// Default 65,536.
    pub max_in_flight: usize,
    /// Whether and how to re-establish a connection that was lost. Default
    /// `None`: a lost connection closes the client for good. See
    /// [`ReconnectPolicy`] for what happens to requests meanwhile.
    pub reconnect: Option<ReconnectPolicy>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            max_in_flight: 65_536,
            reconnect: None,
        }
    }
}
