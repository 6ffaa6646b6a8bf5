//! What can go wrong with a request.

use std::fmt;
use std::io;
use std::time::Duration;

use ternio_protocol::system::Disconnect;
use ternio_protocol::{DecodeError, ErrorCode, FrameError, ResponseError};

/// Why a connection closed.
#[derive(Debug, Clone, PartialEq, Eq)]
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
        }
    }
}

/// A failed request or connection.
#[derive(Debug, thiserror::Error)]
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
    /// The connection is closed (or closed while the request waited).
    #[error("connection closed: {0}")]
    Closed(CloseReason),
    /// Connecting failed.
    #[error("cannot connect: {0}")]
    Connect(#[source] io::Error),
    /// The request does not fit in one frame.
    #[error("request not sent: {0}")]
    FrameTooLarge(#[from] FrameError),
    /// The response is not of the expected type.
    #[error(transparent)]
    UnexpectedResponse(#[from] ResponseError),
    /// Too many requests already wait for a response.
    #[error("{0} requests already in flight")]
    TooManyInFlight(usize),
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
