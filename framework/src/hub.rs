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

use bytes::Bytes;

use ternio_protocol::Packet;

use crate::backplane::{Backplane, BackplaneError, BackplaneMessage, BackplaneStats, LocalSide};
use crate::ids::{ConnectionId, Transport};
use crate::names::{ClaimError, Reservation};
use crate::outbox::{Delivery, PushError, Route, encode_push};
use crate::presence::Member;
use crate::registry::{ConnectionShared, HubShared, deliver_packet_frame, deliver_unreliable};
use crate::store::ConnectionStore;
use crate::users::{UserId, check_name};

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

    /// The peer's address: its current link's (a session resumed from
    /// another address takes the new one).
    pub fn peer_addr(&self) -> SocketAddr {
        self.connection.peer()
    }

    /// The transport of the connection's current link (a session resumed
    /// on another transport takes the new one).
    pub fn transport(&self) -> Transport {
        self.connection.transport()
    }

    /// Pushes `packet` to the connection (a frame with request id 0).
    pub fn push<P: Packet>(&self, packet: &P) -> Result<(), PushError> {
        self.connection.push(packet)
    }

    /// Pushes `packet` in a datagram when the connection has bound a
    /// datagram channel the server can reach (docs/PROTOCOL.md section
    /// 4.4), on the stream otherwise; says which. When it goes by
    /// datagram, a packet too large for one datagram
    /// (`ServerConfig::max_datagram_size`) is refused with
    /// [`PushError::TooLarge`]; on the stream, only the stream's frame
    /// limit bounds it. A packet declared `#[packet(unreliable)]`
    /// takes this route with [`push`](Self::push) too.
    pub fn send_unreliable<P: Packet>(&self, packet: &P) -> Result<Route, PushError> {
        self.connection.push_unreliable(packet)
    }

    /// Whether the connection has a datagram channel the server can reach:
    /// bound, and an authenticated datagram told the server where the
    /// client is.
    pub fn has_datagrams(&self) -> bool {
        self.connection
            .datagrams
            .binding()
            .is_some_and(|binding| binding.is_reachable())
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

    /// Signs the connection in as `user`, as a login handler or an async
    /// extractor does once it has checked the client's credentials; returns
    /// the user it was signed in as before (`user` itself when it signs in
    /// again as the same user, which changes nothing). From now on
    /// [`user`](Self::user) is `user`, [`Hub::send_user`] and
    /// [`Hub::kick_user`] reach the connection, handlers marked
    /// `#[handler(signed_in)]` accept it, and its groups' members see it
    /// under this user ([`PresenceChange::Updated`](crate::PresenceChange::Updated)).
    pub fn sign_in(&self, user: UserId) -> Option<UserId> {
        let hub = Arc::clone(&self.connection.hub);
        hub.set_user(&self.connection, Some(user))
    }

    /// Signs the connection out; returns the user it was signed in as.
    pub fn sign_out(&self) -> Option<UserId> {
        let hub = Arc::clone(&self.connection.hub);
        hub.set_user(&self.connection, None)
    }

    /// The user the connection signed in as, if any.
    pub fn user(&self) -> Option<UserId> {
        self.connection.user()
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

    /// Waits until fewer than `bytes` of pushed frames wait for the
    /// connection ([`queued_bytes`](Self::queued_bytes)): a task that
    /// pushes a lot paces itself to what the client reads, instead of
    /// filling the queue (whose overflow disconnects the client with
    /// `SLOW_CONSUMER`) or sleeping by guess. Fails with
    /// [`PushError::Closed`] once the connection closed.
    ///
    /// ```no_run
    /// # async fn stream_out(connection: ternio::ConnectionHandle, rows: Vec<ternio::protocol::Bytes>) -> Result<(), ternio::PushError> {
    /// # #[derive(ternio::Packet)] #[packet(opcode = 0x0100)] struct Row { data: ternio::protocol::Bytes }
    /// for data in rows {
    ///     connection.queue_below(256 * 1024).await?;
    ///     connection.push(&Row { data })?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn queue_below(&self, bytes: usize) -> Result<(), PushError> {
        self.connection.outbox.drained_below(bytes).await
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
            let frame = encode_push(packet, self.shared.max_frame_size, self.shared.compression)?;
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
        let frame = encode_push(packet, self.shared.max_frame_size, self.shared.compression)?;
        let delivery =
            deliver_packet_frame(&self.shared.all(), &frame, P::DROPPABLE, P::UNRELIABLE);
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

    /// The ids of the members of `group` on every node of the cluster (see
    /// [`cluster_presence`](Self::cluster_presence), which has their users
    /// too).
    pub fn cluster_members(
        &self,
        group: &str,
    ) -> impl Future<Output = Result<Vec<ConnectionId>, BackplaneError>> + Send + 'static {
        let presence = self.cluster_presence(group);
        async move {
            let members = presence.await?;
            Ok(members.into_iter().map(|member| member.id).collect())
        }
    }

    /// The members of `group` on every node of the cluster, with the users
    /// they signed in as: this node's, and what the backplane knows of the
    /// others'. Without a backplane, this node's. Fails when the backplane
    /// is down (this node's members are still in [`members`](Self::members)).
    pub fn cluster_presence(
        &self,
        group: &str,
    ) -> impl Future<Output = Result<Vec<Member>, BackplaneError>> + Send + 'static {
        let local = self.shared.presence(group);
        let node = self.shared.node_id();
        let remote = self
            .shared
            .backplane()
            .map(|backplane| backplane.remote_presence(group));
        async move {
            let mut members = local;
            if let Some(remote) = remote {
                members.extend(
                    remote
                        .await?
                        .into_iter()
                        .filter(|member| member.id.node() != node),
                );
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
        let frame = encode_push(packet, self.shared.max_frame_size, self.shared.compression)?;
        let delivery = deliver_packet_frame(
            &self.shared.members_of(group),
            &frame,
            P::DROPPABLE,
            P::UNRELIABLE,
        );
        let _ = self.shared.publish(|| BackplaneMessage::Group {
            group: group.into(),
            frame,
            droppable: P::DROPPABLE,
        });
        Ok(delivery)
    }

    /// Pushes each of `packets`, in order, to every connection in `group`:
    /// what [`broadcast_group`](Self::broadcast_group) does for each, with
    /// the members looked up once and each member's connection locked and
    /// woken once for all of them (a game tick's updates to a room). If one
    /// packet encodes above the maximum frame size, nothing is sent.
    ///
    /// The [`Delivery`] counts packets times this node's members. A member
    /// whose outbox overflows with a packet it may not drop is disconnected
    /// (`SLOW_CONSUMER`) and the packets after it count as failed. With a
    /// backplane, the frames go to the other nodes as consecutive
    /// broadcasts, which the Redis backplane carries in one message when
    /// its link takes them together. Unreliable packets
    /// ([`Packet::UNRELIABLE`]) go one by one, by datagram where a member
    /// has a datagram channel, as `broadcast_group` sends them.
    pub fn broadcast_group_all<P: Packet>(
        &self,
        group: &str,
        packets: &[P],
    ) -> Result<Delivery, PushError> {
        let max = self.shared.max_frame_size;
        let frames = packets
            .iter()
            .map(|packet| encode_push(packet, max, self.shared.compression))
            .collect::<Result<Vec<Bytes>, PushError>>()?;
        let delivery = if P::UNRELIABLE {
            let members = self.shared.members_of(group);
            let mut delivery = Delivery::default();
            for frame in &frames {
                delivery.add(deliver_unreliable(&members, frame, P::DROPPABLE));
            }
            delivery
        } else {
            self.shared
                .deliver_frames_to_group(group, &frames, P::DROPPABLE)
        };
        let group: Arc<str> = group.into();
        for frame in frames {
            let _ = self.shared.publish(|| BackplaneMessage::Group {
                group: Arc::clone(&group),
                frame,
                droppable: P::DROPPABLE,
            });
        }
        Ok(delivery)
    }

    /// Pushes `packet` to this node's members of `group` only, never to
    /// the other nodes: what a presence hook does, since every node with
    /// members in the group hears of each change (see
    /// [`ServerBuilder::on_presence`](crate::ServerBuilder::on_presence)).
    pub fn broadcast_group_local<P: Packet>(
        &self,
        group: &str,
        packet: &P,
    ) -> Result<Delivery, PushError> {
        let frame = encode_push(packet, self.shared.max_frame_size, self.shared.compression)?;
        Ok(deliver_packet_frame(
            &self.shared.members_of(group),
            &frame,
            P::DROPPABLE,
            P::UNRELIABLE,
        ))
    }

    /// Pushes `packet` to every connection of `user`: this node's at once,
    /// and with a backplane those of every other node (at most once, like
    /// every message through the backplane). The [`Delivery`] counts this
    /// node's connections.
    pub fn send_user<P: Packet>(&self, user: &UserId, packet: &P) -> Result<Delivery, PushError> {
        let frame = encode_push(packet, self.shared.max_frame_size, self.shared.compression)?;
        let delivery = deliver_packet_frame(
            &self.shared.user_connections(user),
            &frame,
            P::DROPPABLE,
            P::UNRELIABLE,
        );
        let _ = self.shared.publish(|| BackplaneMessage::User {
            user: user.clone(),
            frame,
            droppable: P::DROPPABLE,
        });
        Ok(delivery)
    }

    /// Closes every connection of `user`, on every node, with `DISCONNECT
    /// KICKED` and `reason`. Returns how many of this node's it closed.
    pub fn kick_user(&self, user: &UserId, reason: &str) -> usize {
        let kicked = self.shared.kick_user_local(user, reason);
        let _ = self.shared.publish(|| BackplaneMessage::KickUser {
            user: user.clone(),
            reason: reason.to_owned(),
        });
        kicked
    }

    /// The ids of the open connections of `user` on this node.
    pub fn user_connections(&self, user: &UserId) -> Vec<ConnectionId> {
        self.shared.user_ids(user)
    }

    /// How many connections `user` has on every node of the cluster (this
    /// node's count, and the others' as the backplane knows them). Without
    /// a backplane, this node's. Fails when the backplane is down.
    pub fn cluster_user_connections(
        &self,
        user: &UserId,
    ) -> impl Future<Output = Result<usize, BackplaneError>> + Send + 'static {
        let local = self.shared.user_ids(user).len();
        let remote = self
            .shared
            .backplane()
            .map(|backplane| backplane.remote_user_connections(user));
        async move {
            let remote = match remote {
                Some(remote) => remote.await?,
                None => 0,
            };
            Ok(local + remote)
        }
    }

    /// Claims `name` for the connection `id` in the name registry: true
    /// when the connection holds it now (or did already), false when
    /// another connection holds it, on this node or, with a backplane, on
    /// any node of the cluster. The name is freed when the connection
    /// closes, by [`release_name`](Self::release_name), or (with a
    /// backplane) when its node dies.
    ///
    /// Names are 1 to [`MAX_NAME_LEN`](crate::users::MAX_NAME_LEN) bytes
    /// without control characters, compared byte for byte: normalise them
    /// (case, Unicode form) first if "Ann" and "ann" are to clash.
    pub fn claim_name(
        &self,
        name: &str,
        id: ConnectionId,
    ) -> impl Future<Output = Result<bool, ClaimError>> + Send + 'static {
        let checked = check_name(name);
        let shared = Arc::clone(&self.shared);
        let name: Arc<str> = name.into();
        async move {
            checked?;
            let generation = match shared.reserve_name(&name, id) {
                None => return Err(ClaimError::Closed),
                Some(Reservation::Taken) => return Ok(false),
                Some(Reservation::Held) => return Ok(true),
                Some(Reservation::New(generation)) => generation,
            };
            let Some(backplane) = shared.backplane() else {
                return Ok(true);
            };
            // Until the backplane answered, a claim dropped half-way (its
            // future cancelled) is undone: nothing is left claimed.
            let mut undo = UndoClaim {
                shared: &shared,
                backplane,
                name: &name,
                id,
                generation,
                armed: true,
            };
            let claimed = backplane.claim_name(&name, id, generation).await;
            undo.armed = false;
            match claimed {
                Ok(true) if shared.name_claim(&name) == Some((id, generation)) => Ok(true),
                // The connection closed (or released it) while the backplane
                // was asked: free it in the cluster too.
                Ok(true) => {
                    backplane.release_name(&name, id, generation);
                    Err(ClaimError::Closed)
                }
                Ok(false) => {
                    shared.release_claim_locally(&name, id, generation);
                    Ok(false)
                }
                // The claim may have reached the backplane before the
                // error (a reply that timed out): undone on both sides.
                Err(error) => {
                    shared.release_claim_locally(&name, id, generation);
                    backplane.release_name(&name, id, generation);
                    Err(ClaimError::Backplane(error))
                }
            }
        }
    }

    /// Frees `name` if the connection `id` holds it; whether it did.
    pub fn release_name(&self, name: &str, id: ConnectionId) -> bool {
        self.shared.release_name(name, id)
    }

    /// The connection of this node that holds `name`, if one does.
    pub fn name_holder(&self, name: &str) -> Option<ConnectionId> {
        self.shared.name_holder(name)
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

/// Undoes a claim, here and in the cluster, when dropped armed: a claim
/// whose future was dropped while the backplane was asked.
struct UndoClaim<'a> {
    shared: &'a HubShared,
    backplane: &'a dyn Backplane,
    name: &'a str,
    id: ConnectionId,
    generation: u64,
    armed: bool,
}

impl Drop for UndoClaim<'_> {
    fn drop(&mut self) {
        if self.armed
            && self
                .shared
                .release_claim_locally(self.name, self.id, self.generation)
        {
            self.backplane
                .release_name(self.name, self.id, self.generation);
        }
    }
}
