//! The small names of a connection: its id and its transport. A leaf: it
//! depends on nothing in the crate.

use std::fmt;

/// A connection's id, unique within the server for its lifetime, and
/// within the cluster when the server has a
/// [`Backplane`](crate::backplane::Backplane).
///
/// Encoding: the high 16 bits are the node id (0 for a server without a
/// backplane, 1 to 65,535 for a node of a cluster), the low 48 bits count
/// the node's connections from 1. Without a backplane ids are 1, 2, 3…;
/// node 2's first connection is `2 << 48 | 1`. (Clients in JavaScript need
/// a `BigInt` for ids of nodes other than 0.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionId(pub u64);

impl ConnectionId {
    /// Bits of the per-node counter: the low 48.
    pub const LOCAL_BITS: u32 = 48;

    /// The id of the `local`-th connection of node `node` (`local` keeps
    /// its low 48 bits).
    pub const fn new(node: u16, local: u64) -> Self {
        Self(((node as u64) << Self::LOCAL_BITS) | (local & ((1 << Self::LOCAL_BITS) - 1)))
    }

    /// The node that owns the connection: the high 16 bits.
    pub const fn node(self) -> u16 {
        (self.0 >> Self::LOCAL_BITS) as u16
    }

    /// The connection's number on its node: the low 48 bits.
    pub const fn local(self) -> u64 {
        self.0 & ((1 << Self::LOCAL_BITS) - 1)
    }
}

impl fmt::Display for ConnectionId {
    /// `#7` for connection 7 of a server without a backplane; `#2:7` for
    /// connection 7 of node 2.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.node() {
            0 => write!(f, "#{}", self.0),
            node => write!(f, "#{node}:{}", self.local()),
        }
    }
}

/// The transport a connection arrived on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Transport {
    /// Length-prefixed frames over TCP.
    Tcp,
    /// One frame per binary WebSocket message.
    WebSocket,
}
