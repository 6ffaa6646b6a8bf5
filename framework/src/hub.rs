//! The hub: every open connection by id, groups of connections, sends and
//! broadcasts. A broadcast encodes its packet once and shares the bytes;
//! each secure connection seals its copy on its own task.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use ternio_protocol::{Bytes, DisconnectReason, Packet};

use crate::connection::Violation;
use crate::context::{ConnectionHandle, ConnectionId, ConnectionShared, PushError, encode_push};

/// The registry behind every [`Hub`] handle of one server.
pub(crate) struct HubShared {
    connections: Mutex<HashMap<ConnectionId, Arc<ConnectionShared>>>,
    groups: Mutex<HashMap<Arc<str>, HashSet<ConnectionId>>>,
    pub(crate) max_frame_size: usize,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // No code panics while holding these locks; recover the data if one did.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl HubShared {
    pub(crate) fn new(max_frame_size: usize) -> Self {
        Self {
            connections: Mutex::default(),
            groups: Mutex::default(),
            max_frame_size,
        }
    }

    /// Registers an open connection. `register` runs under the registry's
    /// lock (the server checks its shutdown flag there).
    pub(crate) fn insert(
        &self,
        connection: Arc<ConnectionShared>,
        register: impl FnOnce(&ConnectionShared),
    ) {
        let mut connections = lock(&self.connections);
        register(&connection);
        connections.insert(connection.id, connection);
    }

    /// Forgets a closed connection and takes it out of its groups.
    pub(crate) fn remove(&self, id: ConnectionId) {
        let Some(connection) = lock(&self.connections).remove(&id) else {
            return;
        };
        let groups = std::mem::take(&mut *lock(&connection.groups));
        let mut all = lock(&self.groups);
        for group in groups {
            if let Some(members) = all.get_mut(&group) {
                members.remove(&id);
                if members.is_empty() {
                    all.remove(&group);
                }
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        lock(&self.connections).len()
    }

    /// Every open connection (a snapshot).
    pub(crate) fn all(&self) -> Vec<Arc<ConnectionShared>> {
        lock(&self.connections).values().cloned().collect()
    }

    fn get(&self, id: ConnectionId) -> Option<Arc<ConnectionShared>> {
        lock(&self.connections).get(&id).cloned()
    }

    fn members_of(&self, group: &str) -> Vec<Arc<ConnectionShared>> {
        let ids: Vec<ConnectionId> = lock(&self.groups)
            .get(group)
            .map(|members| members.iter().copied().collect())
            .unwrap_or_default();
        let connections = lock(&self.connections);
        ids.iter()
            .filter_map(|id| connections.get(id).cloned())
            .collect()
    }
}

/// A handle to the server's connections and groups. Cheap to clone; get it
/// from a handler's [`Context::hub`](crate::Context::hub) (or take `Hub` as a
/// handler parameter), or from [`ServerHandle::hub`](crate::ServerHandle::hub).
#[derive(Clone)]
pub struct Hub {
    shared: Arc<HubShared>,
}

impl fmt::Debug for Hub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hub")
            .field("connections", &self.len())
            .finish()
    }
}

/// How many connections a broadcast reached, and how many it missed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Delivery {
    /// Connections whose queue took the frame.
    pub queued: usize,
    /// Connections that were behind: the droppable frame was dropped for them.
    pub dropped: usize,
    /// Connections that were too far behind and are being disconnected
    /// (`SLOW_CONSUMER`), or had just closed.
    pub failed: usize,
}

impl Hub {
    pub(crate) fn new(shared: Arc<HubShared>) -> Self {
        Self { shared }
    }

    /// How many connections are open.
    pub fn len(&self) -> usize {
        self.shared.len()
    }

    /// Whether no connection is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ids of every open connection.
    pub fn connection_ids(&self) -> Vec<ConnectionId> {
        lock(&self.shared.connections).keys().copied().collect()
    }

    /// A handle to the connection `id`, if it is open.
    pub fn connection(&self, id: ConnectionId) -> Option<ConnectionHandle> {
        self.shared
            .get(id)
            .map(|connection| ConnectionHandle { connection })
    }

    /// Pushes `packet` to the connection `id`.
    pub fn send<P: Packet>(&self, id: ConnectionId, packet: &P) -> Result<(), PushError> {
        let connection = self.shared.get(id).ok_or(PushError::Closed)?;
        let frame = encode_push(packet, self.shared.max_frame_size)?;
        connection.outbound.push(frame, P::DROPPABLE)
    }

    /// Pushes `packet` to every open connection.
    pub fn broadcast<P: Packet>(&self, packet: &P) -> Result<Delivery, PushError> {
        let frame = encode_push(packet, self.shared.max_frame_size)?;
        Ok(deliver(&self.shared.all(), &frame, P::DROPPABLE))
    }

    /// Puts the connection `id` in `group` (created on first use). Returns
    /// false when no such connection is open. A connection leaves all its
    /// groups when it closes.
    pub fn join(&self, group: &str, id: ConnectionId) -> bool {
        let Some(connection) = self.shared.get(id) else {
            return false;
        };
        let name: Arc<str> = group.into();
        let added = lock(&self.shared.groups)
            .entry(Arc::clone(&name))
            .or_default()
            .insert(id);
        if added {
            lock(&connection.groups).push(name);
        }
        // The connection may have closed meanwhile: undo, so no ghost stays.
        if self.shared.get(id).is_none() {
            self.leave(group, id);
            return false;
        }
        true
    }

    /// Takes the connection `id` out of `group`. Returns whether it was in it.
    pub fn leave(&self, group: &str, id: ConnectionId) -> bool {
        let removed = {
            let mut groups = lock(&self.shared.groups);
            let removed = groups
                .get_mut(group)
                .is_some_and(|members| members.remove(&id));
            if groups.get(group).is_some_and(HashSet::is_empty) {
                groups.remove(group);
            }
            removed
        };
        if let Some(connection) = self.shared.get(id) {
            lock(&connection.groups).retain(|name| &**name != group);
        }
        removed
    }

    /// The ids of the connections in `group`.
    pub fn members(&self, group: &str) -> Vec<ConnectionId> {
        lock(&self.shared.groups)
            .get(group)
            .map(|members| members.iter().copied().collect())
            .unwrap_or_default()
    }

    /// The names of every group with at least one member.
    pub fn groups(&self) -> Vec<String> {
        lock(&self.shared.groups)
            .keys()
            .map(|name| name.to_string())
            .collect()
    }

    /// Pushes `packet` to every connection in `group`.
    pub fn broadcast_group<P: Packet>(
        &self,
        group: &str,
        packet: &P,
    ) -> Result<Delivery, PushError> {
        let frame = encode_push(packet, self.shared.max_frame_size)?;
        Ok(deliver(
            &self.shared.members_of(group),
            &frame,
            P::DROPPABLE,
        ))
    }

    /// Closes the connection `id` at once with `DISCONNECT KICKED` and
    /// `reason`. Returns false when no such connection is open.
    pub fn kick(&self, id: ConnectionId, reason: &str) -> bool {
        let Some(connection) = self.shared.get(id) else {
            return false;
        };
        connection
            .outbound
            .close(Violation::new(DisconnectReason::Kicked, reason), false);
        true
    }
}

/// Queues one shared frame for each connection; a slow one never holds up
/// the others (queues are bounded, and a full one is dropped or disconnected).
fn deliver(connections: &[Arc<ConnectionShared>], frame: &Bytes, droppable: bool) -> Delivery {
    let mut delivery = Delivery::default();
    for connection in connections {
        match connection.outbound.push(frame.clone(), droppable) {
            Ok(()) => delivery.queued += 1,
            Err(PushError::Dropped) => delivery.dropped += 1,
            Err(_) => delivery.failed += 1,
        }
    }
    delivery
}
