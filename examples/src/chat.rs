//! The chat service: rooms, nicknames, and what the server pushes to a room.
//!
//! Requests (the client asks, the server answers):
//! `SetNick` → `()`, `JoinRoom` → `RoomInfo`, `LeaveRoom` → `()`, `Say` → `()`.
//! Pushes (the server tells every member of a room):
//! `UserJoined`, `UserLeft`, `ChatMessage`.

use ternio::Packet;

/// 0x0101: takes a nickname (error 100 if another connection has it).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0101)]
pub struct SetNick {
    /// The nickname: 1 to 32 characters.
    pub nick: String,
}

/// 0x0102: joins a room, creating it if needed (needs a nickname first).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0102)]
pub struct JoinRoom {
    /// The room's name.
    pub room: String,
}

/// 0x0103: the answer to [`JoinRoom`]: who is in the room now.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0103)]
pub struct RoomInfo {
    /// The room's name.
    pub room: String,
    /// The nicknames of its members, sorted, the joiner included.
    pub members: Vec<String>,
}

/// 0x0104: leaves a room.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0104)]
pub struct LeaveRoom {
    /// The room's name.
    pub room: String,
}

/// 0x0105: says something to a room the connection is in.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0105)]
pub struct Say {
    /// The room's name.
    pub room: String,
    /// The message: at most 2,000 characters.
    pub text: String,
}

/// 0x0110, pushed: someone joined a room.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0110)]
pub struct UserJoined {
    /// The room.
    pub room: String,
    /// Who.
    pub nick: String,
}

/// 0x0111, pushed: someone left a room (or disconnected).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0111)]
pub struct UserLeft {
    /// The room.
    pub room: String,
    /// Who.
    pub nick: String,
}

/// 0x0112, pushed: a message said in a room (to every member, the speaker included).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0112)]
pub struct ChatMessage {
    /// The room.
    pub room: String,
    /// Who said it.
    pub nick: String,
    /// What.
    pub text: String,
}

/// Error codes of the chat service.
pub mod errors {
    /// The nickname is taken, empty or too long.
    pub const BAD_NICK: u16 = 100;
    /// A nickname is needed first.
    pub const NO_NICK: u16 = 101;
    /// The connection is not in that room.
    pub const NOT_IN_ROOM: u16 = 102;
    /// The message or room name is empty or too long.
    pub const BAD_TEXT: u16 = 103;
}
