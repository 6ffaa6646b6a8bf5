//! The echo service: what `echo_server` answers and `echo_client` asks.

use ternio::{Bytes, Packet, StreamRequest, UploadRequest};

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

/// Opcode 0x0004: answered by a stream (docs/PROTOCOL.md section 4.5) of
/// the numbers `0..count` as [`Number`]s, then an acknowledgement.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0004, response = ())]
pub struct CountTo {
    /// How many numbers.
    pub count: u32,
}

impl StreamRequest for CountTo {
    type Item = Number;
}

/// Opcode 0x0005: one item of a [`CountTo`] stream or an [`AddUp`] upload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0005)]
pub struct Number {
    /// The number.
    pub value: u32,
}

/// Opcode 0x0006: an upload of [`Number`]s, answered with their [`Total`].
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0006, response = Total)]
pub struct AddUp;

impl UploadRequest for AddUp {
    type Item = Number;
}

/// Opcode 0x0007: the sum of an [`AddUp`] upload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0007)]
pub struct Total {
    /// The sum.
    pub sum: u64,
}
