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

/// This node's names: each one's holder, a connection of this node, and
/// the generation of its claim.
///
/// Every claim gets a generation of its own (a counter of this node), so
/// that a release frees the exact claim it was made for: a release of an
/// earlier claim that arrives late (a queued backplane release, a failed
/// claim being undone) never frees a later claim of the same name by the
/// same connection.
#[derive(Default)]
pub(crate) struct Names {
    holders: HashMap<Arc<str>, (ConnectionId, u64)>,
    /// The generation the next claim gets.
    next_generation: u64,
}

/// What [`Names::reserve`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reservation {
    /// The name was free here: it is reserved for the connection now,
    /// under this generation.
    New(u64),
    /// The connection holds it already.
    Held,
    /// Another connection of this node holds it.
    Taken,
}

impl Names {
    /// Reserves `name` for `id` on this node.
    pub(crate) fn reserve(&mut self, name: &Arc<str>, id: ConnectionId) -> Reservation {
        match self.holders.get(name) {
            Some((holder, _)) if *holder == id => Reservation::Held,
            Some(_) => Reservation::Taken,
            None => {
                self.next_generation += 1;
                let generation = self.next_generation;
                self.holders.insert(Arc::clone(name), (id, generation));
                Reservation::New(generation)
            }
        }
    }

    /// Frees `name` if `id` holds it (whatever the generation); the
    /// generation of the claim it freed.
    pub(crate) fn release(&mut self, name: &str, id: ConnectionId) -> Option<u64> {
        match self.holders.get(name) {
            Some((holder, generation)) if *holder == id => {
                let generation = *generation;
                self.holders.remove(name);
                Some(generation)
            }
            _ => None,
        }
    }

    /// Frees `name` if `id` holds it under the claim `generation`; whether
    /// it did.
    pub(crate) fn release_claim(&mut self, name: &str, id: ConnectionId, generation: u64) -> bool {
        if self.holders.get(name) == Some(&(id, generation)) {
            self.holders.remove(name);
            true
        } else {
            false
        }
    }

    /// The connection that holds `name` here.
    pub(crate) fn holder(&self, name: &str) -> Option<ConnectionId> {
        self.holders.get(name).map(|(id, _)| *id)
    }

    /// The connection that holds `name` here, with its claim's generation.
    pub(crate) fn claim(&self, name: &str) -> Option<(ConnectionId, u64)> {
        self.holders.get(name).copied()
    }

    /// Every name held here, with its holder and its claim's generation
    /// (a snapshot).
    pub(crate) fn all(&self) -> Vec<(Arc<str>, ConnectionId, u64)> {
        self.holders
            .iter()
            .map(|(name, (id, generation))| (Arc::clone(name), *id, *generation))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_frees_only_the_claim_it_was_made_for() {
        let mut names = Names::default();
        let name: Arc<str> = "zed".into();
        let id = ConnectionId(1);
        let Reservation::New(first) = names.reserve(&name, id) else {
            panic!("free");
        };
        assert_eq!(names.release(&name, id), Some(first));
        let Reservation::New(second) = names.reserve(&name, id) else {
            panic!("free again");
        };
        assert_ne!(first, second);
        // The first claim's late undoing leaves the second alone.
        assert!(!names.release_claim(&name, id, first));
        assert_eq!(names.claim(&name), Some((id, second)));
        assert!(names.release_claim(&name, id, second));
        assert_eq!(names.holder(&name), None);
    }
}
