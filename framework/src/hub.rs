//! The application's handles onto the server's open connections: the
//! [`Hub`] (every connection, by id and in groups: sends, broadcasts,
//! kicks) and a [`ConnectionHandle`] (one connection). A broadcast encodes
//! its packet once and shares the bytes; each secure connection seals its
//! copy on its own task. The connections themselves are in the registry.
//!
//! With a [`Backplane`](crate::backplane::Backplane), the same encoded
//! frame also goes to the other nodes of the cluster, which deliver it to
//! their own connections.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use ternio_protocol::Packet;

use crate::backplane::{BackplaneError, BackplaneMessage, BackplaneStats};
use crate::ids::{ConnectionId, Transport};
use crate::outbox::{Delivery, PushError, encode_push};
use crate::registry::{ConnectionShared, HubShared, deliver};
use crate::store::ConnectionStore;

/// A handle to one connection, for pushing to it from anywhere. Get it
/// from [`Context::connection`](crate::Context::connection) or
/// [`Hub::connection`]; a handler's [`Context`](crate::Context)
/// dereferences to the handle of its request's connection.
#[derive(Clone)]
pub struct ConnectionHandle {
    connection: Arc<ConnectionShared>,
}

impl ConnectionHandle {
    pub(crate) fn new(connection: Arc<ConnectionShared>) -> Self {
        Self { connection }
    }

    /// The connection's id.
    pub fn id(&self) -> ConnectionId {
        self.connection.id
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.connection.peer
    }

    /// The transport the connection arrived on.
    pub fn transport(&self) -> Transport {
        self.connection.transport
    }

    /// Pushes `packet` to the connection (a frame with request id 0).
    pub fn push<P: Packet>(&self, packet: &P) -> Result<(), PushError> {
        self.connection.push(packet)
    }

    /// The connection's permission level (0 when it opens).
    pub fn permission(&self) -> u32 {
        self.connection.permission()
    }

    /// Sets the connection's permission level, as after a login; handlers
    /// marked `#[handler(permission = N)]` need at least `N`.
    pub fn set_permission(&self, level: u32) {
        self.connection.permission.store(level, Ordering::Release);
    }

    /// The connection's typed store.
    pub fn store(&self) -> &ConnectionStore {
        &self.connection.store
    }

    /// The hub of the connection's server: every connection by id, groups,
    /// broadcasts.
    pub fn hub(&self) -> Hub {
        Hub::new(Arc::clone(&self.connection.hub))
    }

    /// The shared value of type `T` given to the server with `.state(...)`.
    pub fn state<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.connection.state.get()
    }

    /// Closes the connection at once with `DISCONNECT KICKED` and `reason`.
    pub fn kick(&self, reason: &str) {
        self.connection.kick(reason);
    }

    /// Bytes of pushed frames waiting for the connection to take them.
    pub fn queued_bytes(&self) -> usize {
        self.connection.outbox.queued_bytes()
    }

    /// Droppable pushes dropped because the connection fell behind.
    pub fn dropped_pushes(&self) -> u64 {
        self.connection.outbox.dropped()
    }

    /// Whether the connection is still open.
    pub fn is_open(&self) -> bool {
        !self.connection.outbox.is_closed()
    }
}

impl fmt::Debug for ConnectionHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ConnectionHandle")
            .field(&self.connection.id)
            .finish()
    }
}

/// A handle to the server's connections and groups. Cheap to clone; get it
/// from a connection's [`ConnectionHandle::hub`] (which a handler's
/// [`Context`](crate::Context) has too; or take `Hub` as a handler
/// parameter), or from [`ServerHandle::hub`](crate::ServerHandle::hub).
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
        self.shared.ids()
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
        self.shared.join(group, id)
    }

    /// Takes the connection `id` out of `group`. Returns whether it was in it.
    pub fn leave(&self, group: &str, id: ConnectionId) -> bool {
        self.shared.leave(group, id)
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
            .backplane()
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
        self.shared.backplane().map(|backplane| backplane.stats())
    }

    /// The names of every group with at least one member on this node.
    pub fn groups(&self) -> Vec<String> {
        self.shared.group_names()
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
        self.shared.kick_local(id, reason)
    }
}
