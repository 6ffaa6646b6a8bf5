//! What a client's connection is doing, as its users observe it.

use crate::error::CloseReason;

/// The state of a [`Client`](crate::Client)'s connection, from
/// [`Client::state`](crate::Client::state) and
/// [`Client::state_changes`](crate::Client::state_changes).
///
/// A client starts `Connected` (connecting is done when `connect_*`
/// returns). Without a [`ReconnectPolicy`](crate::ReconnectPolicy) it can
/// only become `Closed`. With one, a lost connection goes through
/// `Reconnecting { attempt: 1 }`, `{ attempt: 2 }`, ... and ends either
/// `Connected` again or `Closed`; when the lost connection had not stayed
/// up for [`healthy_after`](crate::ReconnectPolicy::healthy_after), the
/// count goes on from the attempt that opened it instead of starting at 1.
/// `Closed` is final.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectionState {
    /// A connection is up: requests go out at once.
    Connected,
    /// The connection was lost and attempt number `attempt` (from 1) to
    /// re-establish it is waiting for its delay or under way. Requests wait
    /// for the new connection, within their timeouts.
    Reconnecting {
        /// The attempt under way or about to start, from 1.
        attempt: u32,
    },
    /// The client is closed for good, for this reason.
    Closed(CloseReason),
}

impl ConnectionState {
    /// Whether this is [`ConnectionState::Connected`].
    pub fn is_connected(&self) -> bool {
        matches!(self, Self::Connected)
    }

    /// Whether this is [`ConnectionState::Closed`].
    pub fn is_closed(&self) -> bool {
        matches!(self, Self::Closed(_))
    }
}
