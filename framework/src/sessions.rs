//! The resumable sessions of a server, by ticket (docs/PROTOCOL.md section
//! 4.2): what a `RESUME` on a new link needs to find its session, check the
//! client, and ask the task that holds the session to hand it over.
//!
//! A session is held by one task at a time: the task of its link while the
//! link lives, the same task while the session waits for its client (its
//! link lost), and the task of the new link once resumed. Handing it over
//! is a message to that task, answered with the session itself (boxed as
//! `dyn Any`: this module sits below the connection engine it carries).

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use ternio_protocol::system::Ticket;
use tokio::sync::{mpsc, oneshot};
use zeroize::Zeroizing;

use crate::registry::ConnectionShared;
use crate::sync::lock;

/// A session on its way to the link that resumes it.
pub(crate) type Handoff = Box<dyn Any + Send>;

/// A request to hand a session over, answered with the session.
pub(crate) type Takeover = oneshot::Sender<Handoff>;

/// What the registry knows of one resumable session.
#[derive(Clone)]
pub(crate) struct Entry {
    /// Reaches the task that holds the session; [`wake`](Self::wake) it
    /// after sending (a live link looks at the channel only when woken so).
    pub(crate) takeover: mpsc::Sender<Takeover>,
    /// The session's connection, whose task holds the session.
    pub(crate) connection: Arc<ConnectionShared>,
    /// The session secret the session's resumption is bound to (its PSK
    /// comes from it); `None` for a plain session, whose ticket is all a
    /// client needs.
    pub(crate) binding: Option<Zeroizing<Vec<u8>>>,
    /// The address (or network) the session's place counts against: a
    /// connection let past that address's limit may resume only its own.
    pub(crate) place: Option<std::net::IpAddr>,
}

impl Entry {
    /// Asks the task that holds the session to hand it over to `reply`:
    /// fails when the session ended.
    pub(crate) async fn take_over(&self, reply: Takeover) -> Result<(), ()> {
        self.takeover.send(reply).await.map_err(drop)?;
        self.connection.outbox.wake();
        Ok(())
    }
}

/// Every resumable session of a server, by ticket.
#[derive(Default)]
pub(crate) struct Sessions {
    entries: std::sync::Mutex<HashMap<[u8; 32], Entry>>,
}

impl Sessions {
    /// Registers a session under `ticket`.
    pub(crate) fn insert(&self, ticket: &Ticket, entry: Entry) {
        lock(&self.entries).insert(ticket.0, entry);
    }

    /// Forgets the session of `ticket`, if any.
    pub(crate) fn remove(&self, ticket: &Ticket) {
        lock(&self.entries).remove(&ticket.0);
    }

    /// How to reach the session of `ticket`, and what it is bound to.
    pub(crate) fn find(&self, ticket: &Ticket) -> Option<Entry> {
        lock(&self.entries).get(&ticket.0).cloned()
    }

    /// How many sessions are resumable now.
    pub(crate) fn len(&self) -> usize {
        lock(&self.entries).len()
    }
}

impl fmt::Debug for Sessions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sessions")
            .field("resumable", &self.len())
            .finish()
    }
}
