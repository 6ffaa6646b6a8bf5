//! What can go wrong with a request.

use std::fmt;
use std::io;
use std::time::Duration;

use ternio_protocol::system::Disconnect;
use ternio_protocol::{DecodeError, ErrorCode, FrameError, ResponseError};

/// Why a connection closed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseReason {
    /// The server sent `DISCONNECT` with this reason and text.
    Disconnected(Disconnect),
    /// The server closed the connection without a word.
    PeerClosed,
    /// [`Client::close`](crate::Client::close) was called.
    Local,
    /// The socket failed.
    Io(io::ErrorKind, String),
    /// The server broke the wire contract.
    Protocol(String),
    /// A frame from the server failed the secure session's checks (contract
    /// section 5.1): a sealed frame that did not open (a bad tag, a counter
    /// not above the last one, a sealed frame before the handshake
    /// completed), or a frame that had to be sealed and came plain (a push
    /// after the handshake, the answer to a sealed request). The client sent
    /// `DISCONNECT DECRYPT_FAILED` and closed the connection.
    DecryptFailed(String),
    /// Nothing came from the server within the keepalive's timeout after a
    /// `PING` (see [`Keepalive`](crate::Keepalive)): the server is gone, or
    /// the path to it, without having closed the connection.
    KeepaliveTimeout {
        /// How long the server stayed silent before the `PING`.
        interval: Duration,
        /// How long it then stayed silent after the `PING`.
        timeout: Duration,
    },
    /// A frame would have taken the bytes waiting to be written past
    /// [`ClientConfig::max_outbound`](crate::ClientConfig::max_outbound):
    /// the server does not read what the client sends, or not as fast.
    OutboundFull {
        /// The bound that applies, in bytes.
        limit: usize,
        /// The bytes that were waiting when the frame came.
        queued: usize,
    },
    /// The connection was lost and every reconnect attempt that the
    /// [`ReconnectPolicy`](crate::ReconnectPolicy) allows failed.
    ReconnectFailed {
        /// How many attempts were made.
        attempts: u32,
        /// Why the last one failed.
        last_error: String,
    },
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Disconnected(disconnect) => {
                write!(f, "server disconnected: {}", disconnect.reason)?;
                if !disconnect.message.is_empty() {
                    write!(f, ": {}", disconnect.message)?;
                }
                Ok(())
            }
            Self::PeerClosed => f.write_str("server closed the connection"),
            Self::Local => f.write_str("closed by the client"),
            Self::Io(_, message) => write!(f, "connection failed: {message}"),
            Self::Protocol(message) => write!(f, "server broke the protocol: {message}"),
            Self::DecryptFailed(message) => write!(
                f,
                "a frame from the server failed the secure session's checks (DECRYPT_FAILED): {message}"
            ),
            Self::KeepaliveTimeout { interval, timeout } => write!(
                f,
                "the server stayed silent for {interval:?} and then {timeout:?} after a PING: connection presumed dead"
            ),
            Self::OutboundFull { limit, queued } => write!(
                f,
                "the server does not take what the client sends: {queued} bytes wait, and the next frame would exceed the bound of {limit} bytes"
            ),
            Self::ReconnectFailed {
                attempts,
                last_error,
            } => write!(
                f,
                "could not reconnect in {attempts} attempts; the last one failed: {last_error}"
            ),
        }
    }
}

/// A failed request or connection.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server answered with an error code.
    #[error("server error {code}: {message}")]
    Remote {
        /// The code.
        code: ErrorCode,
        /// The server's message.
        message: String,
    },
    /// No response within the timeout.
    #[error("no response within {0:?}")]
    Timeout(Duration),
    /// The connection is closed for good, or closed while the request
    /// waited. With a [`ReconnectPolicy`](crate::ReconnectPolicy), also a
    /// request in flight on a connection that was lost: the server may or
    /// may not have run it, and the client reconnects meanwhile.
    #[error("connection closed: {0}")]
    Closed(CloseReason),
    /// The connection was lost and the client is re-establishing it
    /// (attempt `attempt`); a fire-and-forget [`send`](crate::Client::send)
    /// is not kept for later. Requests wait instead.
    #[error("not connected: reconnecting (attempt {attempt})")]
    Reconnecting {
        /// The reconnect attempt under way, from 1.
        attempt: u32,
    },
    /// Connecting failed.
    #[error("cannot connect: {0}")]
    Connect(#[source] io::Error),
    /// TLS could not be set up: CA certificates that do not parse, no
    /// usable root certificate in the system's store, an address that
    /// names no server. (A server certificate that does not check out is a
    /// [`Connect`](Self::Connect) error.)
    #[error("TLS cannot be set up: {0}")]
    Tls(String),
    /// The WebSocket URL is not usable (`ws://host:port/path` expected).
    #[error("invalid WebSocket URL: {0}")]
    InvalidUrl(String),
    /// [`ClientBuilder::connect`](crate::ClientBuilder::connect) was called
    /// with no transport chosen.
    #[error("no transport: call tcp, websocket, tls or stream on the builder")]
    NoTransport,
    /// The server refused or botched the WebSocket upgrade.
    #[error("WebSocket upgrade failed: {0}")]
    WebSocket(String),
    /// The server answered the WebSocket upgrade with this HTTP status
    /// instead of switching protocols: 503 when its connection limits
    /// refuse the client (then a reconnect waits
    /// [`ReconnectPolicy::busy_delay`](crate::ReconnectPolicy::busy_delay)
    /// first), 404 for a path it does not serve.
    #[error(
        "WebSocket upgrade refused: the server answered HTTP {0} instead of switching protocols"
    )]
    UpgradeRefused(u16),
    /// The server did not select the subprotocol `ternio.v2`
    /// ([`WEBSOCKET_SUBPROTOCOL`](ternio_protocol::frame::WEBSOCKET_SUBPROTOCOL))
    /// that the client offered: it speaks something else.
    #[error(
        "the server did not select the WebSocket subprotocol {subprotocol}: {0}",
        subprotocol = ternio_protocol::frame::WEBSOCKET_SUBPROTOCOL
    )]
    Subprotocol(String),
    /// The request does not fit in one frame.
    #[error("request not sent: {0}")]
    FrameTooLarge(#[from] FrameError),
    /// The server answered an upload's request before the upload ended:
    /// [`Uploader::finish`](crate::Uploader::finish) returns that answer.
    #[error("the server answered before the upload ended")]
    UploadEnded,
    /// The response is not of the expected type.
    #[error(transparent)]
    UnexpectedResponse(#[from] ResponseError),
    /// Too many requests already wait for a response.
    #[error("{0} requests already in flight")]
    TooManyInFlight(usize),
    /// The secure handshake failed: the Noise library refused a step, the
    /// server's answer did not complete the handshake (the connection is
    /// then closed: the server thinks the session is up), or the server
    /// refused an `NN` handshake or answered with another error. Not used
    /// when the server refuses an `NK` handshake: that is
    /// [`KeyRejected`](Self::KeyRejected).
    #[error("secure handshake failed: {0}")]
    Handshake(String),
    /// The server answered error 9 (`HANDSHAKE_FAILED`) to an `NK`
    /// handshake: the pinned key is not this server's public key, or the
    /// server has no identity key at all. Nothing was sealed; the connection
    /// stays up, plain, and allows no other handshake. Holds the server's
    /// message.
    #[error(
        "the server refused the NK handshake (error 9): the pinned key is not this server's public key, or the server has no identity key; the server said: {0}"
    )]
    KeyRejected(String),
    /// [`Client::handshake`](crate::Client::handshake) was called on a
    /// client whose session is secure already (by an earlier call, or by
    /// [`ClientConfig::secure`](crate::ClientConfig::secure)), or on a
    /// connection that had a handshake (a connection allows one, even a
    /// failed one).
    #[error("no second handshake: {0}")]
    HandshakeAlreadyRan(&'static str),
    /// A sealed request or send with no secure session on the connection:
    /// run [`Client::handshake`](crate::Client::handshake) first, or set
    /// [`ClientConfig::secure`](crate::ClientConfig::secure).
    /// Also a request or send once the application asked for a secure
    /// session (by that setting or a handshake) while the connection has
    /// none, because its handshake failed: nothing goes out plain then.
    #[error("no secure session on this connection")]
    NotSecure,
    /// A fire-and-forget [`send`](crate::Client::send) while the
    /// connection's handshake waits for its answer: nothing else may go out
    /// meanwhile (contract section 5.1). Requests wait instead.
    #[error("not sent: the connection's secure handshake is under way")]
    HandshakeInProgress,
}

impl ClientError {
    /// The server's error code, when the server answered with one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Self::Remote { code, .. } => Some(*code),
            _ => None,
        }
    }
}

impl From<DecodeError> for ClientError {
    fn from(error: DecodeError) -> Self {
        Self::UnexpectedResponse(ResponseError::Decode(error))
    }
}
