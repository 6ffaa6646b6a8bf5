//! The packets of `ternio-bench game`, shared by its server child and its
//! clients.

use ternio::Packet;

/// 0x0800, by datagram: echoed back by datagram as [`Echoed`].
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0800, response = (), unreliable)]
pub struct Echo {
    /// Which echo this is (the client skips stale answers).
    pub seq: u64,
    /// The payload, sent back as is.
    pub payload: Vec<u8>,
}

/// 0x0801, by datagram: the answer to [`Echo`].
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0801, unreliable)]
pub struct Echoed {
    /// The echo's `seq`.
    pub seq: u64,
    /// The echo's payload.
    pub payload: Vec<u8>,
}

/// 0x0802, a request on the stream: answered with the same bytes (the
/// sealed stream echo beside the datagram one).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0802, response = StreamEchoed)]
pub struct StreamEcho(pub Vec<u8>);

/// 0x0803: the answer to [`StreamEcho`].
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0803)]
pub struct StreamEchoed(pub Vec<u8>);

/// 0x0804: joins room `room` (0-based); answered once a member.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0804, response = ())]
pub struct JoinRoom {
    /// The room's index.
    pub room: u16,
}

/// 0x0805, pushed by a room each tick: by datagram where the member bound
/// a channel, else on the stream.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0805, unreliable)]
pub struct Snapshot {
    /// The room's tick, from 1.
    pub tick: u64,
    /// The server's wall clock when the tick started, in µs since the epoch.
    pub started_us: u64,
    /// The room's state: [`PLAYERS`] records of [`RECORD`] bytes.
    pub state: Vec<u8>,
}

/// 0x0806, pushed by a room each tick on the stream: [`Snapshot`]'s fields
/// in a reliable packet, which the server may compress (an unreliable
/// push may go by datagram, and is never compressed).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0806)]
pub struct StreamSnapshot {
    /// The room's tick, from 1.
    pub tick: u64,
    /// The server's wall clock when the tick started, in µs since the epoch.
    pub started_us: u64,
    /// The room's state.
    pub state: Vec<u8>,
}

/// What a room's tick sends: [`Snapshot`] or [`StreamSnapshot`].
pub trait RoomSnapshot: Packet + Send + 'static {
    /// The snapshot of `tick`.
    fn new(tick: u64, started_us: u64, state: Vec<u8>) -> Self;
    /// Its tick and start, as a client reads them.
    fn stamp(&self) -> (u64, u64);
}

/// Implements [`RoomSnapshot`] for snapshot types of the same fields.
macro_rules! room_snapshot {
    ($($snapshot:ty),*) => {$(
        impl RoomSnapshot for $snapshot {
            fn new(tick: u64, started_us: u64, state: Vec<u8>) -> Self {
                Self {
                    tick,
                    started_us,
                    state,
                }
            }

            fn stamp(&self) -> (u64, u64) {
                (self.tick, self.started_us)
            }
        }
    )*};
}

room_snapshot!(Snapshot, StreamSnapshot);

/// Players described in a snapshot.
pub const PLAYERS: usize = 26;
/// Bytes per player in a snapshot: id u16, x i16, y i16, health u8.
pub const RECORD: usize = 7;

/// A snapshot's body size: `tick`, `started_us`, the state's length
/// (LEB128, two bytes) and the records: 200 bytes.
pub const SNAPSHOT_BODY: usize = 8 + 8 + 2 + PLAYERS * RECORD;
