//! The name registry: names that one connection of the whole cluster
//! holds at a time (nicknames, player handles), claimed with
//! [`Hub::claim_name`](crate::Hub::claim_name) and released when their
//! connection closes. This node's table of them is here; with a backplane,
//! the cluster's is the backplane's (Redis: one key per name).

use std::collections::HashMap;
use std::sync::Arc;

use crate::backplane::BackplaneError;
use crate::ids::ConnectionId;
use crate::users::InvalidName;

/// Why a name could not be claimed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClaimError {
    /// The name is empty, too long or holds a control character.
    #[error(transparent)]
    Invalid(#[from] InvalidName),
    /// The connection is not open on this node.
    #[error("the connection is not open on this node")]
    Closed,
    /// The backplane could not be asked: the name's owner is unknown.
    #[error(transparent)]
    Backplane(#[from] BackplaneError),
}

/// This node's names: each one's holder, a connection of this node.
#[derive(Default)]
pub(crate) struct Names {
    holders: HashMap<Arc<str>, ConnectionId>,
}

/// What [`Names::reserve`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reservation {
    /// The name was free here: it is reserved for the connection now.
    New,
    /// The connection holds it already.
    Held,
    /// Another connection of this node holds it.
    Taken,
}

impl Names {
    /// Reserves `name` for `id` on this node.
    pub(crate) fn reserve(&mut self, name: &Arc<str>, id: ConnectionId) -> Reservation {
        match self.holders.get(name) {
            Some(holder) if *holder == id => Reservation::Held,
            Some(_) => Reservation::Taken,
            None => {
                self.holders.insert(Arc::clone(name), id);
                Reservation::New
            }
        }
    }

    /// Frees `name` if `id` holds it; whether it did.
    pub(crate) fn release(&mut self, name: &str, id: ConnectionId) -> bool {
        if self.holders.get(name) == Some(&id) {
            self.holders.remove(name);
            true
        } else {
            false
        }
    }

    /// The connection that holds `name` here.
    pub(crate) fn holder(&self, name: &str) -> Option<ConnectionId> {
        self.holders.get(name).copied()
    }

    /// Every name held here, with its holder (a snapshot).
    pub(crate) fn all(&self) -> Vec<(Arc<str>, ConnectionId)> {
        self.holders
            .iter()
            .map(|(name, id)| (Arc::clone(name), *id))
            .collect()
    }
}
