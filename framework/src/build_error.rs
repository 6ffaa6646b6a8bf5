//! Why a server could not be built.

use std::fmt;
use std::io;
use std::net::SocketAddr;

use crate::backplane::BackplaneError;

/// Why a server could not be built: what [`ServerBuilder::build`](crate::ServerBuilder::build)
/// returns instead of a server.
///
/// `Display` says it in a sentence; `Debug` (what `main` prints for an
/// `Err`, and what `unwrap` shows) gives the variant and its fields, with
/// opcodes in hex as everywhere else: `DuplicateOpcode { opcode: 0x0101,
/// first: "Rooms::join", second: "Lobby::join" }`.
#[derive(thiserror::Error)]
#[non_exhaustive]
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

/// An opcode as it is written in code and in the contract: `0x0101`.
struct Hex(u16);

impl fmt::Debug for Hex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#06X}", self.0)
    }
}

impl fmt::Debug for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DuplicateOpcode {
                opcode,
                first,
                second,
            } => f
                .debug_struct("DuplicateOpcode")
                .field("opcode", &Hex(*opcode))
                .field("first", first)
                .field("second", second)
                .finish(),
            Self::SystemOpcode { opcode, handler } => f
                .debug_struct("SystemOpcode")
                .field("opcode", &Hex(*opcode))
                .field("handler", handler)
                .finish(),
            Self::Handler { handler, reason } => f
                .debug_struct("Handler")
                .field("handler", handler)
                .field("reason", reason)
                .finish(),
            Self::Resolve { address, source } => f
                .debug_struct("Resolve")
                .field("address", address)
                .field("source", source)
                .finish(),
            Self::Bind { address, source } => f
                .debug_struct("Bind")
                .field("address", address)
                .field("source", source)
                .finish(),
            Self::Backplane(error) => f.debug_tuple("Backplane").field(error).finish(),
            Self::Metrics(reason) => f.debug_tuple("Metrics").field(reason).finish(),
            Self::WebSocketPath(path) => f.debug_tuple("WebSocketPath").field(path).finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::BuildError;

    #[test]
    fn debug_shows_opcodes_in_hex() {
        let duplicate = BuildError::DuplicateOpcode {
            opcode: 0x0101,
            first: "Rooms::join",
            second: "Lobby::join",
        };
        assert_eq!(
            format!("{duplicate:?}"),
            r#"DuplicateOpcode { opcode: 0x0101, first: "Rooms::join", second: "Lobby::join" }"#
        );
        let system = BuildError::SystemOpcode {
            opcode: 0xFF01,
            handler: "Sneaky::ping",
        };
        assert_eq!(
            format!("{system:?}"),
            r#"SystemOpcode { opcode: 0xFF01, handler: "Sneaky::ping" }"#
        );
    }
}
