//! The echo service: what `echo_server` answers and `echo_client` asks.

use ternio::{Bytes, Packet};

/// Opcode 0x0001: the server answers with the same payload.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0001, response = Echo)]
pub struct Echo {
    /// The bytes to echo.
    pub payload: Bytes,
}

/// Opcode 0x0003: sent in a datagram (docs/PROTOCOL.md section 4.4) to a
/// server with a UDP listener, it comes back in a datagram (an unreliable
/// push of the same packet); sent on the stream, it is acknowledged and
/// comes back as a push, by datagram if the connection has a channel.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0003, response = (), unreliable)]
pub struct DatagramEcho {
    /// The bytes to echo.
    pub payload: Bytes,
}

/// Opcode 0x0002: the same, but the server requires an encrypted request.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0002, response = SecureEcho)]
pub struct SecureEcho {
    /// The bytes to echo.
    pub payload: Bytes,
}
