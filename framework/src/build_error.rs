//! Why a server could not be built.

use std::io;
use std::net::SocketAddr;

use crate::backplane::BackplaneError;

/// Why a server could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Two handlers answer the same opcode.
    #[error("opcode {opcode:#06X} is handled twice: by {first} and by {second}")]
    DuplicateOpcode {
        /// The opcode.
        opcode: u16,
        /// The handler registered first.
        first: &'static str,
        /// The handler registered second.
        second: &'static str,
    },
    /// A handler for an opcode of the system range.
    #[error("{handler} handles opcode {opcode:#06X}, in the system range 0xFF00..=0xFFFF")]
    SystemOpcode {
        /// The opcode.
        opcode: u16,
        /// The handler.
        handler: &'static str,
    },
    /// A handler that cannot run as configured (say, missing state).
    #[error("handler {handler} cannot run: {reason}")]
    Handler {
        /// The handler.
        handler: &'static str,
        /// Why.
        reason: String,
    },
    /// An address that does not resolve.
    #[error("cannot resolve listener address {address}: {source}")]
    Resolve {
        /// The address as given.
        address: String,
        /// The resolver's error.
        source: io::Error,
    },
    /// A listener that could not bind.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// The socket error.
        source: io::Error,
    },
    /// The backplane refused the server (it serves another one already).
    #[error("the backplane cannot serve this server: {0}")]
    Backplane(BackplaneError),
    /// The metrics recorder could not be installed.
    #[error("cannot install the metrics recorder: {0}")]
    Metrics(String),
    /// A WebSocket path that does not start with `/`.
    #[error("WebSocket path {0:?} must start with '/'")]
    WebSocketPath(String),
}
