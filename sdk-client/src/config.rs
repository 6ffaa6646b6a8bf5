//! Client settings.

use std::time::Duration;

use ternio_protocol::DEFAULT_MAX_FRAME_SIZE;
use ternio_protocol::secure::RekeyPolicy;

use crate::reconnect::ReconnectPolicy;

/// How a [`Client`](crate::Client) behaves. Every field has a default.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// How long a request waits for its response unless the call says
    /// otherwise. Default 10 s. While the client reconnects, the wait for
    /// the new connection counts toward it. An explicit
    /// [`handshake`](crate::Client::handshake) is bounded by it too.
    pub request_timeout: Duration,
    /// How long connecting may take (resolving, the TCP connection and, on
    /// WebSocket, the upgrade), for the first connection and for each
    /// reconnect attempt. Default 10 s. The handshake of a secure session
    /// that runs on connect (or again after a reconnect) has its own
    /// `connect_timeout` as well.
    pub connect_timeout: Duration,
    /// Largest frame sent or accepted. Default 1 MiB, as the server's. On
    /// WebSocket it is also the largest message and message fragment
    /// accepted. A sealed frame is 24 bytes larger than its plain body.
    pub max_frame_size: usize,
    /// Requests that may wait for a response at once; one more fails with
    /// [`ClientError::TooManyInFlight`](crate::ClientError::TooManyInFlight).
    /// Default 65,536.
    pub max_in_flight: usize,
    /// Whether and how to re-establish a connection that was lost. Default
    /// `None`: a lost connection closes the client for good. See
    /// [`ReconnectPolicy`] for what happens to requests meanwhile.
    pub reconnect: Option<ReconnectPolicy>,
    /// A secure session to set up on every connection, before any request
    /// goes out on it: with it, `connect_*` runs the handshake and fails if
    /// it does, and every reconnect runs it again. Default `None`: the
    /// connection is plain until [`Client::handshake`](crate::Client::handshake)
    /// is called.
    pub secure: Option<SecureConfig>,
    /// When the secure session replaces the key of what the client sends
    /// (contract section 5.2): by default after 65,536 frames or 2 minutes
    /// under one key, whichever comes first, checked as a frame is sealed.
    pub rekey: RekeyPolicy,
    /// How many pushes a [`Subscription`](crate::Subscription) holds that
    /// its owner has not taken yet. Default 1024. When it is full, further
    /// pushes for that subscription are dropped and counted
    /// ([`Subscription::dropped`](crate::Subscription::dropped)); the
    /// connection is never held up. Values below 1 count as 1.
    pub push_buffer: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            max_in_flight: 65_536,
            reconnect: None,
            secure: None,
            rekey: RekeyPolicy::default(),
            push_buffer: 1024,
        }
    }
}

/// The secure session a client sets up on each connection (contract
/// section 5), in [`ClientConfig::secure`].
///
/// With a pinned key the handshake is `Noise_NK`: only the server holding
/// the matching private key completes it, so a man in the middle cannot
/// read or change the traffic. Without one it is `Noise_NN`: it hides the
/// traffic from a passive eavesdropper only (see `docs/SECURITY.md`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SecureConfig {
    /// The server's static X25519 public key (its identity, printed by the
    /// server as 64 hex digits), or `None` for an anonymous `Noise_NN`
    /// session. [`protocol::secure::key_from_hex`](crate::protocol::secure::key_from_hex)
    /// reads the hex form.
    pub pin: Option<[u8; 32]>,
}

impl SecureConfig {
    /// `Noise_NK`, pinning the server's public key.
    pub const fn pinned(key: [u8; 32]) -> Self {
        Self { pin: Some(key) }
    }

    /// `Noise_NN`: anonymous, against passive eavesdroppers only.
    pub const fn anonymous() -> Self {
        Self { pin: None }
    }
}
