//! The server's open connections: each one's shared half
//! ([`ConnectionShared`]), and the registry of them all by id, by group and
//! by user, with the names they hold ([`HubShared`]), with what reaches
//! them there: a push, one encoded frame for many, a kick, a presence
//! event. [`Hub`](crate::Hub) and
//! [`ConnectionHandle`](crate::ConnectionHandle) are the public handles
//! onto it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use governor::DefaultDirectRateLimiter;
use ternio_protocol::{Bytes, DisconnectReason, Packet};

use crate::backplane::{Backplane, BackplaneError, BackplaneMessage, LocalHub, LocalSide};
use crate::binding::DatagramSlot;
use crate::close::CloseNotice;
use crate::ids::{ConnectionId, Transport};
use crate::names::{Names, Reservation};
use crate::outbox::{Delivery, Outbox, PushError, Route, encode_push};
use crate::presence::{Member, PresenceChange, PresenceEvent};
use crate::store::{AppState, ConnectionStore};
use crate::sync::lock;
use crate::users::UserId;

/// The hook of [`ServerBuilder::on_presence`](crate::ServerBuilder::on_presence),
/// given the registry (the builder makes a [`Hub`](crate::Hub) of it).
pub(crate) type PresenceHook = Arc<dyn Fn(&PresenceEvent, Arc<HubShared>) + Send + Sync>;

/// Per-connection rate limiters, one per opcode that has a limit.
pub(crate) type RateLimiters = HashMap<u16, DefaultDirectRateLimiter>;

/// What every request of one connection shares.
pub(crate) struct ConnectionShared {
    pub(crate) id: ConnectionId,
    /// The peer's address and transport, which a resumption moves.
    pub(crate) link: LinkAddress,
    pub(crate) outbox: Outbox,
    pub(crate) state: Arc<AppState>,
    pub(crate) hub: Arc<HubShared>,
    pub(crate) permission: AtomicU32,
    pub(crate) store: ConnectionStore,
    /// Rate limiters of the handlers this connection called that have one.
    pub(crate) rate_limiters: Mutex<RateLimiters>,
    /// The groups the connection is in, to leave them when it closes.
    pub(crate) groups: Mutex<Vec<Arc<str>>>,
    /// The user it signed in as.
    pub(crate) user: Mutex<Option<UserId>>,
    /// The names it holds, to release them when it closes.
    pub(crate) names: Mutex<Vec<Arc<str>>>,
    /// Its datagram channel, if it bound one.
    pub(crate) datagrams: DatagramSlot,
}

/// Where a connection's session runs: its peer's address and its link's
/// transport. A session resumed on another link (a phone that changed
/// networks, a client that moved from TCP to WebSocket) takes the new
/// link's.
pub(crate) struct LinkAddress {
    peer: Mutex<SocketAddr>,
    websocket: AtomicBool,
}

impl LinkAddress {
    pub(crate) fn new(peer: SocketAddr, transport: Transport) -> Self {
        Self {
            peer: Mutex::new(peer),
            websocket: AtomicBool::new(transport == Transport::WebSocket),
        }
    }

    /// The peer's address.
    pub(crate) fn peer(&self) -> SocketAddr {
        *lock(&self.peer)
    }

    /// The link's transport.
    pub(crate) fn transport(&self) -> Transport {
        if self.websocket.load(Ordering::Relaxed) {
            Transport::WebSocket
        } else {
            Transport::Tcp
        }
    }

    /// Takes `other`'s address and transport.
    pub(crate) fn take(&self, other: &LinkAddress) {
        *lock(&self.peer) = other.peer();
        self.websocket
            .store(other.transport() == Transport::WebSocket, Ordering::Relaxed);
    }
}

impl ConnectionShared {
    /// The peer's address (its link's, since the last resumption).
    pub(crate) fn peer(&self) -> SocketAddr {
        self.link.peer()
    }

    /// The link's transport (since the last resumption).
    pub(crate) fn transport(&self) -> Transport {
        self.link.transport()
    }

    pub(crate) fn permission(&self) -> u32 {
        self.permission.load(Ordering::Acquire)
    }

    /// The user it signed in as.
    pub(crate) fn user(&self) -> Option<UserId> {
        lock(&self.user).clone()
    }

    /// Its entry in a group's member list.
    pub(crate) fn member(&self) -> Member {
        Member {
            id: self.id,
            user: self.user(),
        }
    }

    /// Pushes `packet` to this connection, encoded straight into its outbox
    /// (or, for an unreliable packet, in a datagram when it can).
    pub(crate) fn push<P: Packet>(&self, packet: &P) -> Result<(), PushError> {
        if P::UNRELIABLE {
            return self.push_unreliable(packet).map(|_| ());
        }
        self.outbox
            .push_packet(packet, self.hub.max_frame_size, self.hub.compression)
    }

    /// Pushes `packet` in a datagram when the connection has a datagram
    /// channel the server can reach (then one too large for a datagram is
    /// refused), else on the stream (bounded by the stream's frame limit
    /// only).
    pub(crate) fn push_unreliable<P: Packet>(&self, packet: &P) -> Result<Route, PushError> {
        let Some(binding) = self
            .datagrams
            .binding()
            .filter(|binding| binding.is_reachable())
        else {
            return self
                .outbox
                .push_packet(packet, self.hub.max_frame_size, self.hub.compression)
                .map(|()| Route::Stream);
        };
        // Frames in datagrams are never compressed (docs/PROTOCOL.md 4.4).
        let frame = encode_push(packet, binding.max_frame(), None)?;
        self.push_frame(&frame, P::DROPPABLE, true)
    }

    /// Pushes an encoded frame: in a datagram when `unreliable` and the
    /// connection has a reachable datagram channel, else on the stream. A
    /// frame too large for a datagram that would go by one is refused
    /// ([`PushError::TooLarge`]).
    pub(crate) fn push_frame(
        &self,
        frame: &[u8],
        droppable: bool,
        unreliable: bool,
    ) -> Result<Route, PushError> {
        if unreliable && let Some(binding) = self.datagrams.binding() {
            match binding.send(frame) {
                Ok(true) => return Ok(Route::Datagram),
                Ok(false) => {}
                Err(_) => return Err(PushError::TooLarge),
            }
        }
        self.outbox.push(frame, droppable).map(|()| Route::Stream)
    }

    /// Closes the connection at once with `DISCONNECT KICKED` and `reason`:
    /// the one kick, whether it came from a handle, the hub or another node.
    pub(crate) fn kick(&self, reason: &str) {
        self.outbox
            .close(CloseNotice::new(DisconnectReason::Kicked, reason), false);
    }
}

/// A connection of no server, for the crate's unit tests.
#[cfg(test)]
pub(crate) fn test_connection() -> Arc<ConnectionShared> {
    Arc::new(ConnectionShared {
        id: ConnectionId(1),
        link: LinkAddress::new(SocketAddr::from(([127, 0, 0, 1], 0)), Transport::Tcp),
        outbox: Outbox::new(1 << 20, Default::default()),
        state: Arc::default(),
        hub: HubShared::new(1 << 16, None, None, None),
        permission: AtomicU32::new(0),
        store: ConnectionStore::default(),
        rate_limiters: Mutex::default(),
        groups: Mutex::default(),
        user: Mutex::default(),
        names: Mutex::default(),
        datagrams: DatagramSlot::default(),
    })
}

/// One group's local members, by id.
type Members = HashMap<ConnectionId, Arc<ConnectionShared>>;

/// The registry behind every [`Hub`](crate::Hub) handle of one server.
pub(crate) struct HubShared {
    connections: Mutex<HashMap<ConnectionId, Arc<ConnectionShared>>>,
    /// Each group's members, held here so that a broadcast reaches them
    /// with one lookup of the group.
    groups: Mutex<HashMap<Arc<str>, Members>>,
    /// The open connections of each signed-in user.
    users: Mutex<HashMap<UserId, Vec<ConnectionId>>>,
    names: Mutex<Names>,
    pub(crate) max_frame_size: usize,
    /// The threshold above which pushes are compressed, if they are.
    pub(crate) compression: Option<usize>,
    /// What carries broadcasts, sends and kicks to the other nodes, if any.
    backplane: Option<Arc<dyn Backplane>>,
    /// The application's presence hook, if any.
    presence: OnceLock<PresenceHook>,
    /// Itself, to hand a [`Hub`] to the presence hook.
    this: Weak<HubShared>,
}

impl HubShared {
    pub(crate) fn new(
        max_frame_size: usize,
        compression: Option<usize>,
        backplane: Option<Arc<dyn Backplane>>,
        presence: Option<PresenceHook>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|this| Self {
            connections: Mutex::default(),
            groups: Mutex::default(),
            users: Mutex::default(),
            names: Mutex::default(),
            max_frame_size,
            compression,
            backplane,
            presence: presence.map(OnceLock::from).unwrap_or_default(),
            this: this.clone(),
        })
    }

    /// Tells the presence hook, if any, of `event`.
    pub(crate) fn emit(&self, event: PresenceEvent) {
        if let (Some(hook), Some(this)) = (self.presence.get(), self.this.upgrade()) {
            hook(&event, this);
        }
    }

    fn emit_local(&self, group: &Arc<str>, member: Member, change: PresenceChange) {
        if self.presence.get().is_some() {
            self.emit(PresenceEvent::new(Arc::clone(group), member, change));
        }
    }

    /// Gives the backplane, if any, this hub's local side.
    pub(crate) fn attach_backplane(self: &Arc<Self>) -> Result<(), BackplaneError> {
        let Some(backplane) = &self.backplane else {
            return Ok(());
        };
        let hub: Weak<Self> = Arc::downgrade(self);
        backplane.attach(LocalHub::new(hub))
    }

    /// The backplane, if the server has one.
    pub(crate) fn backplane(&self) -> Option<&dyn Backplane> {
        self.backplane.as_deref()
    }

    /// This node's id in the cluster: the backplane's, or 0 without one.
    pub(crate) fn node_id(&self) -> u16 {
        self.backplane
            .as_ref()
            .map_or(0, |backplane| backplane.node_id())
    }

    /// Hands `message` to the backplane, if any. A failure only loses the
    /// message for the other nodes: local delivery already happened.
    pub(crate) fn publish(
        &self,
        message: impl FnOnce() -> BackplaneMessage,
    ) -> Result<(), BackplaneError> {
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
    pub(crate) fn is_remote(&self, id: ConnectionId) -> bool {
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

    /// Forgets a closed connection: takes it out of its groups (telling
    /// the presence hook), of its user's connections, and frees its names.
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
        let member = connection.member();
        if let Some(user) = &member.user {
            self.unindex_user(user, id);
        }
        for name in std::mem::take(&mut *lock(&connection.names)) {
            self.release_name(&name, id);
        }
        for group in &groups {
            self.emit_local(group, member.clone(), PresenceChange::Left);
        }
    }

    pub(crate) fn len(&self) -> usize {
        lock(&self.connections).len()
    }

    /// The ids of every open connection (a snapshot).
    pub(crate) fn ids(&self) -> Vec<ConnectionId> {
        lock(&self.connections).keys().copied().collect()
    }

    /// Every open connection (a snapshot).
    pub(crate) fn all(&self) -> Vec<Arc<ConnectionShared>> {
        lock(&self.connections).values().cloned().collect()
    }

    pub(crate) fn get(&self, id: ConnectionId) -> Option<Arc<ConnectionShared>> {
        lock(&self.connections).get(&id).cloned()
    }

    /// Puts the connection `id` in `group`; false when no such connection
    /// is open (see [`Hub::join`](crate::Hub::join)).
    pub(crate) fn join(&self, group: &str, id: ConnectionId) -> bool {
        let Some(connection) = self.get(id) else {
            return false;
        };
        let name: Arc<str> = group.into();
        let added = lock(&self.groups)
            .entry(Arc::clone(&name))
            .or_default()
            .insert(id, Arc::clone(&connection))
            .is_none();
        if added {
            lock(&connection.groups).push(Arc::clone(&name));
            if let Some(backplane) = &self.backplane {
                backplane.joined(group, id);
            }
        }
        // The connection may have closed meanwhile: undo, so no ghost stays.
        if self.get(id).is_none() {
            self.leave_quietly(group, id);
            return false;
        }
        if added {
            self.emit_local(&name, connection.member(), PresenceChange::Joined);
        }
        true
    }

    /// Takes the connection `id` out of `group`; whether it was in it.
    pub(crate) fn leave(&self, group: &str, id: ConnectionId) -> bool {
        let member = self.get(id).map(|connection| connection.member());
        let removed = self.leave_quietly(group, id);
        if removed {
            let member = member.unwrap_or(Member { id, user: None });
            self.emit_local(&group.into(), member, PresenceChange::Left);
        }
        removed
    }

    /// [`leave`](Self::leave) without a presence event: for a join undone.
    fn leave_quietly(&self, group: &str, id: ConnectionId) -> bool {
        let removed = {
            let mut groups = lock(&self.groups);
            let removed = groups
                .get_mut(group)
                .is_some_and(|members| members.remove(&id).is_some());
            if groups.get(group).is_some_and(HashMap::is_empty) {
                groups.remove(group);
            }
            removed
        };
        if let Some(connection) = self.get(id) {
            lock(&connection.groups).retain(|name| &**name != group);
        }
        if removed && let Some(backplane) = &self.backplane {
            backplane.left(group, id);
        }
        removed
    }

    /// The ids of the local members of `group`.
    pub(crate) fn member_ids(&self, group: &str) -> Vec<ConnectionId> {
        lock(&self.groups)
            .get(group)
            .map(|members| members.keys().copied().collect())
            .unwrap_or_default()
    }

    /// The names of the groups with a local member.
    pub(crate) fn group_names(&self) -> Vec<String> {
        lock(&self.groups)
            .keys()
            .map(|name| name.to_string())
            .collect()
    }

    /// Every group with its local members (a snapshot).
    pub(crate) fn memberships(&self) -> Vec<(String, Vec<ConnectionId>)> {
        lock(&self.groups)
            .iter()
            .map(|(name, members)| (name.to_string(), members.keys().copied().collect()))
            .collect()
    }

    /// The local members of `group` (a snapshot).
    pub(crate) fn members_of(&self, group: &str) -> Vec<Arc<ConnectionShared>> {
        lock(&self.groups)
            .get(group)
            .map(|members| members.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Signs `connection` in as `user` (`None`: signs it out); returns the
    /// user it was signed in as. Its groups hear of it (`Updated`).
    pub(crate) fn set_user(
        &self,
        connection: &ConnectionShared,
        user: Option<UserId>,
    ) -> Option<UserId> {
        let id = connection.id;
        // The connection's user and the index change under the index's
        // lock, so that two sign-ins at once leave it under one user only.
        let (previous, indexed) = {
            let mut users = lock(&self.users);
            let previous = {
                let mut current = lock(&connection.user);
                if *current == user {
                    return user;
                }
                std::mem::replace(&mut *current, user.clone())
            };
            if let Some(previous) = &previous {
                unindex(&mut users, previous, id);
            }
            // A connection that closed meanwhile is not indexed again: a
            // close after this finds the new user and unindexes it.
            let indexed = user.is_some() && self.get(id).is_some();
            if let (true, Some(user)) = (indexed, &user) {
                users.entry(user.clone()).or_default().push(id);
            }
            (previous, indexed)
        };
        if let Some(backplane) = &self.backplane {
            if let Some(previous) = &previous {
                backplane.user_changed(previous);
            }
            if let (true, Some(user)) = (indexed, &user) {
                backplane.user_changed(user);
            }
        }
        let groups = lock(&connection.groups).clone();
        if let Some(backplane) = &self.backplane {
            for group in &groups {
                backplane.joined(group, id);
            }
        }
        let member = Member { id, user };
        if self.presence.get().is_some() {
            for group in &groups {
                let event =
                    PresenceEvent::updated(Arc::clone(group), member.clone(), previous.clone());
                self.emit(event);
            }
        }
        previous
    }

    fn unindex_user(&self, user: &UserId, id: ConnectionId) {
        unindex(&mut lock(&self.users), user, id);
        if let Some(backplane) = &self.backplane {
            backplane.user_changed(user);
        }
    }

    /// The open connections of `user` on this node.
    pub(crate) fn user_connections(&self, user: &str) -> Vec<Arc<ConnectionShared>> {
        let ids = lock(&self.users).get(user).cloned().unwrap_or_default();
        let connections = lock(&self.connections);
        ids.iter()
            .filter_map(|id| connections.get(id).cloned())
            .collect()
    }

    /// The ids of the open connections of `user` on this node.
    pub(crate) fn user_ids(&self, user: &str) -> Vec<ConnectionId> {
        lock(&self.users).get(user).cloned().unwrap_or_default()
    }

    /// Every signed-in user of this node with its number of connections.
    pub(crate) fn user_counts(&self) -> Vec<(UserId, usize)> {
        lock(&self.users)
            .iter()
            .map(|(user, ids)| (user.clone(), ids.len()))
            .collect()
    }

    /// Kicks every connection of `user` on this node; how many.
    pub(crate) fn kick_user_local(&self, user: &str, reason: &str) -> usize {
        let connections = self.user_connections(user);
        for connection in &connections {
            connection.kick(reason);
        }
        connections.len()
    }

    /// Reserves `name` for the connection `id` on this node.
    pub(crate) fn reserve_name(&self, name: &Arc<str>, id: ConnectionId) -> Option<Reservation> {
        let connection = self.get(id)?;
        let reservation = lock(&self.names).reserve(name, id);
        if let Reservation::New(generation) = reservation {
            lock(&connection.names).push(Arc::clone(name));
            // Closed meanwhile: its names were freed before this one was added.
            if self.get(id).is_none() {
                self.release_claim_locally(name, id, generation);
                return None;
            }
        }
        Some(reservation)
    }

    /// Frees `name` if the connection `id` holds it, here and in the
    /// cluster (the exact claim it holds); whether it did.
    pub(crate) fn release_name(&self, name: &str, id: ConnectionId) -> bool {
        let Some(generation) = lock(&self.names).release(name, id) else {
            return false;
        };
        if let Some(connection) = self.get(id) {
            lock(&connection.names).retain(|held| &**held != name);
        }
        if let Some(backplane) = &self.backplane {
            backplane.release_name(name, id, generation);
        }
        true
    }

    /// Frees the claim `generation` of `name` by the connection `id` on
    /// this node only, if it still holds that claim (one the cluster
    /// refused, or that failed); whether it did.
    pub(crate) fn release_claim_locally(
        &self,
        name: &str,
        id: ConnectionId,
        generation: u64,
    ) -> bool {
        if !lock(&self.names).release_claim(name, id, generation) {
            return false;
        }
        if let Some(connection) = self.get(id) {
            lock(&connection.names).retain(|held| &**held != name);
        }
        true
    }

    /// The connection of this node that holds `name`.
    pub(crate) fn name_holder(&self, name: &str) -> Option<ConnectionId> {
        lock(&self.names).holder(name)
    }

    /// The connection of this node that holds `name`, with its claim's
    /// generation.
    pub(crate) fn name_claim(&self, name: &str) -> Option<(ConnectionId, u64)> {
        lock(&self.names).claim(name)
    }

    /// The local members of `group`, with their users.
    pub(crate) fn presence(&self, group: &str) -> Vec<Member> {
        self.members_of(group)
            .iter()
            .map(|connection| connection.member())
            .collect()
    }

    /// Kicks the connection `id` if it is open on this node; whether it was.
    pub(crate) fn kick_local(&self, id: ConnectionId, reason: &str) -> bool {
        let Some(connection) = self.get(id) else {
            return false;
        };
        connection.kick(reason);
        true
    }
}

impl LocalSide for HubShared {
    fn max_frame_size(&self) -> usize {
        self.max_frame_size
    }

    fn deliver_to_group(&self, group: &str, frame: &Bytes, droppable: bool) -> Delivery {
        deliver(&self.members_of(group), frame, droppable)
    }

    fn deliver_frames_to_group(&self, group: &str, frames: &[Bytes], droppable: bool) -> Delivery {
        let mut delivery = Delivery::default();
        if frames.is_empty() {
            return delivery;
        }
        for connection in &self.members_of(group) {
            connection
                .outbox
                .push_frames(frames, droppable, &mut delivery);
        }
        delivery
    }

    fn deliver_to_all(&self, frame: &Bytes, droppable: bool) -> Delivery {
        deliver(&self.all(), frame, droppable)
    }

    fn deliver_to(&self, id: ConnectionId, frame: &Bytes, droppable: bool) -> Option<Delivery> {
        let connection = self.get(id)?;
        Some(deliver(&[connection], frame, droppable))
    }

    fn kick(&self, id: ConnectionId, reason: &str) -> bool {
        self.kick_local(id, reason)
    }

    fn memberships(&self) -> Vec<(String, Vec<ConnectionId>)> {
        HubShared::memberships(self)
    }

    fn members(&self, group: &str) -> Vec<ConnectionId> {
        self.member_ids(group)
    }

    fn presence(&self, group: &str) -> Vec<Member> {
        HubShared::presence(self, group)
    }

    fn deliver_to_user(&self, user: &str, frame: &Bytes, droppable: bool) -> Delivery {
        deliver(&self.user_connections(user), frame, droppable)
    }

    fn kick_user(&self, user: &str, reason: &str) -> usize {
        self.kick_user_local(user, reason)
    }

    fn user_count(&self, user: &str) -> usize {
        lock(&self.users).get(user).map_or(0, Vec::len)
    }

    fn users(&self) -> Vec<(UserId, usize)> {
        self.user_counts()
    }

    fn names(&self) -> Vec<(Arc<str>, ConnectionId, u64)> {
        lock(&self.names).all()
    }

    fn presence_event(&self, event: PresenceEvent) {
        self.emit(event);
    }
}

/// Takes the connection `id` out of `user`'s connections in `users`.
fn unindex(users: &mut HashMap<UserId, Vec<ConnectionId>>, user: &UserId, id: ConnectionId) {
    if let Some(ids) = users.get_mut(user) {
        ids.retain(|other| *other != id);
        if ids.is_empty() {
            users.remove(user);
        }
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

/// As [`deliver`], each connection's copy in a datagram where it has a
/// reachable datagram channel (an unreliable packet's broadcast).
pub(crate) fn deliver_unreliable(
    connections: &[Arc<ConnectionShared>],
    frame: &Bytes,
    droppable: bool,
) -> Delivery {
    let mut delivery = Delivery::default();
    for connection in connections {
        let pushed = connection.push_frame(frame, droppable, true);
        if pushed == Ok(Route::Datagram) {
            delivery.datagrams += 1;
        }
        delivery.count(pushed.map(|_| ()));
    }
    delivery
}

/// [`deliver_unreliable`] for an unreliable packet, else [`deliver`].
pub(crate) fn deliver_packet_frame(
    connections: &[Arc<ConnectionShared>],
    frame: &Bytes,
    droppable: bool,
    unreliable: bool,
) -> Delivery {
    if unreliable {
        deliver_unreliable(connections, frame, droppable)
    } else {
        deliver(connections, frame, droppable)
    }
}
