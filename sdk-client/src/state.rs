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

/// What became of the client's session across lost connections, from
/// [`Client::session_events`](crate::Client::session_events): with
/// [`ClientConfig::resume`](crate::ClientConfig::resume) and a reconnect
/// policy, a reconnection either resumes the session (the requests in
/// flight are answered, the pushes sent meanwhile arrive, each once) or
/// starts a new one.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionEvent {
    /// The first session, never resumed or lost.
    Started,
    /// The session was resumed on a new connection; `count` resumptions so far.
    Resumed {
        /// Resumptions of this session so far.
        count: u64,
    },
    /// The session could not be resumed: a new one started on the new
    /// connection, and the requests in flight failed. Also after the
    /// server ended the session with a `DISCONNECT` that the client
    /// reconnects after (such as `SHUTDOWN`): such a session is never
    /// offered for resumption.
    Lost {
        /// Why (the server's refusal, or why the client did not try).
        reason: String,
    },
}
