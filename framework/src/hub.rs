//! The hub: every open connection by id, groups of connections, sends and
//! broadcasts. A broadcast encodes its packet once and shares the bytes;
//! each secure connection seals its copy on its own task.
//!
//! With a [`Backplane`], the same encoded frame also goes to the other
//! nodes of the cluster, which deliver it to their own connections.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex};

use ternio_protocol::{Bytes, Packet};

use crate::backplane::{Backplane, BackplaneError, BackplaneMessage, BackplaneStats, LocalHub};
use crate::context::{ConnectionHandle, ConnectionShared};
use crate::ids::ConnectionId;
use crate::outbox::{Delivery, PushError, encode_push};
use crate::sync::lock;

/// The registry behind every [`Hub`] handle of one server.
pub(crate) struct HubShared {
    connections: Mutex<HashMap<ConnectionId, Arc<ConnectionShared>>>,
    groups: Mutex<HashMap<Arc<str>, HashSet<ConnectionId>>>,
    pub(crate) max_frame_size: usize,
    /// What carries broadcasts, sends and kicks to the other nodes, if any.
    backplane: Option<Arc<dyn Backplane>>,
}

impl HubShared {
    pub(crate) fn new(max_frame_size: usize, backplane: Option<Arc<dyn Backplane>>) -> Self {
        Self {
            connections: Mutex::default(),
            groups: Mutex::default(),
            max_frame_size,
            backplane,
        }
    }

    /// Gives the backplane, if any, this hub's local side.
    pub(crate) fn attach_backplane(self: &Arc<Self>) -> Result<(), BackplaneError> {
        match &self.backplane {
            Some(backplane) => backplane.attach(LocalHub::new(self)),
            None => Ok(()),
        }
    }

    /// This node's id in the cluster: the backplane's, or 0 without one.
    pub(crate) fn node_id(&self) -> u16 {
        self.backplane
            .as_ref()
            .map_or(0, |backplane| backplane.node_id())
    }

    /// Hands `message` to the backplane, if any. A failure only loses the
    /// message for the other nodes: local delivery already happened.
    fn publish(&self, message: impl FnOnce() -> BackplaneMessage) -> Result<(), BackplaneError> {
        let Some(backplane) = &self.backplane else {
            return Ok(());
        };
        let result = backplane.publish(message());
        if let Err(error) = &result {
            tracing::debug!(%error, "not published to the other nodes");
        }
        result
    }

    /// Whether `id` belongs to another node that the backplane can reach.
    fn is_remote(&self, id: ConnectionId) -> bool {
        self.backplane.is_some() && id.node() != 0 && id.node() != self.node_id()
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
        {
            let mut all = lock(&self.groups);
            for group in &groups {
                if let Some(members) = all.get_mut(group) {
                    members.remove(&id);
                    if members.is_empty() {
                        all.remove(group);
                    }
                }
            }
        }
        if let Some(backplane) = &self.backplane {
            for group in &groups {
                backplane.left(group, id);
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

    pub(crate) fn get(&self, id: ConnectionId) -> Option<Arc<ConnectionShared>> {
        lock(&self.connections).get(&id).cloned()
    }

    /// The ids of the local members of `group`.
    pub(crate) fn member_ids(&self, group: &str) -> Vec<ConnectionId> {
        lock(&self.groups)
            .get(group)
            .map(|members| members.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Every group with its local members (a snapshot).
    pub(crate) fn memberships(&self) -> Vec<(String, Vec<ConnectionId>)> {
        lock(&self.groups)
            .iter()
            .map(|(name, members)| (name.to_string(), members.iter().copied().collect()))
            .collect()
    }

    pub(crate) fn members_of(&self, group: &str) -> Vec<Arc<ConnectionShared>> {
        let ids = self.member_ids(group);
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

    /// The ids of every open connection of this node.
    pub fn connection_ids(&self) -> Vec<ConnectionId> {
        lock(&self.shared.connections).keys().copied().collect()
    }

    /// A handle to the connection `id`, if it is open on this node.
    pub fn connection(&self, id: ConnectionId) -> Option<ConnectionHandle> {
        self.shared.get(id).map(ConnectionHandle::new)
    }

    /// Pushes `packet` to the connection `id`.
    ///
    /// With a backplane, an id of another node is handed to the backplane:
    /// `Ok` then means the message left for that node, not that it arrived
    /// (at most once; see the backplane), and [`PushError::Unavailable`]
    /// that the backplane is down.
    pub fn send<P: Packet>(&self, id: ConnectionId, packet: &P) -> Result<(), PushError> {
        if self.shared.is_remote(id) {
            let frame = encode_push(packet, self.shared.max_frame_size)?;
            return self
                .shared
                .publish(|| BackplaneMessage::Connection {
                    id,
                    frame,
                    droppable: P::DROPPABLE,
                })
                .map_err(|_| PushError::Unavailable);
        }
        let connection = self.shared.get(id).ok_or(PushError::Closed)?;
        connection.push(packet)
    }

    /// Pushes `packet` to every open connection. With a backplane, to those
    /// of every node; the [`Delivery`] counts this node's.
    pub fn broadcast<P: Packet>(&self, packet: &P) -> Result<Delivery, PushError> {
        let frame = encode_push(packet, self.shared.max_frame_size)?;
        let delivery = deliver(&self.shared.all(), &frame, P::DROPPABLE);
        let _ = self.shared.publish(|| BackplaneMessage::Everyone {
            frame,
            droppable: P::DROPPABLE,
        });
        Ok(delivery)
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
            if let Some(backplane) = &self.shared.backplane {
                backplane.joined(group, id);
            }
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
        if removed && let Some(backplane) = &self.shared.backplane {
            backplane.left(group, id);
        }
        removed
    }

    /// The ids of the connections in `group` on this node. See
    /// [`cluster_members`](Self::cluster_members) for every node's.
    pub fn members(&self, group: &str) -> Vec<ConnectionId> {
        self.shared.member_ids(group)
    }

    /// The ids of the members of `group` on every node of the cluster: this
    /// node's, and what the backplane knows of the others'. Without a
    /// backplane, the same as [`members`](Self::members). Fails when the
    /// backplane is down (this node's members are still in
    /// [`members`](Self::members)).
    pub fn cluster_members(
        &self,
        group: &str,
    ) -> impl Future<Output = Result<Vec<ConnectionId>, BackplaneError>> + Send + 'static {
        let local = self.shared.member_ids(group);
        let node = self.shared.node_id();
        let remote = self
            .shared
            .backplane
            .as_ref()
            .map(|backplane| backplane.remote_members(group));
        async move {
            let mut members = local;
            if let Some(remote) = remote {
                members.extend(remote.await?.into_iter().filter(|id| id.node() != node));
            }
            Ok(members)
        }
    }

    /// This node's id in the cluster (the high 16 bits of its connection
    /// ids): the backplane's, or 0 without one.
    pub fn node_id(&self) -> u16 {
        self.shared.node_id()
    }

    /// What the backplane has done so far and whether its link is up;
    /// `None` without a backplane.
    pub fn backplane_stats(&self) -> Option<BackplaneStats> {
        self.shared
            .backplane
            .as_ref()
            .map(|backplane| backplane.stats())
    }

    /// The names of every group with at least one member on this node.
    pub fn groups(&self) -> Vec<String> {
        lock(&self.shared.groups)
            .keys()
            .map(|name| name.to_string())
            .collect()
    }

    /// Pushes `packet` to every connection in `group`.
    ///
    /// With a backplane, the one encoded frame also goes to the other nodes,
    /// which push it to their own members; the [`Delivery`] counts this
    /// node's members. Local members get it even while the backplane is down.
    pub fn broadcast_group<P: Packet>(
        &self,
        group: &str,
        packet: &P,
    ) -> Result<Delivery, PushError> {
        let frame = encode_push(packet, self.shared.max_frame_size)?;
        let delivery = deliver(&self.shared.members_of(group), &frame, P::DROPPABLE);
        let _ = self.shared.publish(|| BackplaneMessage::Group {
            group: group.into(),
            frame,
            droppable: P::DROPPABLE,
        });
        Ok(delivery)
    }

    /// Closes the connection `id` at once with `DISCONNECT KICKED` and
    /// `reason`. Returns false when no such connection is open.
    ///
    /// With a backplane, an id of another node is handed to the backplane;
    /// true then means the order left for that node (at most once).
    pub fn kick(&self, id: ConnectionId, reason: &str) -> bool {
        if self.shared.is_remote(id) {
            return self
                .shared
                .publish(|| BackplaneMessage::Kick {
                    id,
                    reason: reason.to_owned(),
                })
                .is_ok();
        }
        let Some(connection) = self.shared.get(id) else {
            return false;
        };
        connection.kick(reason);
        true
    }
}

/// Puts a copy of one encoded frame in each connection's outbox; a slow one never holds up
/// the others (outboxes are bounded, and a full one drops or disconnects).
pub(crate) fn deliver(
    connections: &[Arc<ConnectionShared>],
    frame: &Bytes,
    droppable: bool,
) -> Delivery {
    let mut delivery = Delivery::default();
    for connection in connections {
        delivery.count(connection.outbox.push(frame, droppable));
    }
    delivery
}
