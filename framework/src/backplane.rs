//! The backplane: what lets several server nodes act as one hub.
//!
//! Without a backplane a [`Hub`](crate::Hub) knows the connections of its
//! own server only. With one (given to
//! [`ServerBuilder::backplane`](crate::ServerBuilder::backplane)), the hub
//! still delivers to its own connections at once, and also hands every
//! group broadcast, broadcast, send and kick that may concern another node
//! to the backplane, which carries it to the other nodes; each of them
//! delivers it to its own connections through its [`LocalHub`].
//!
//! **Encode once.** What crosses the backplane is the push frame the hub
//! encoded (header + body, no length prefix, never sealed): one encoding for
//! the whole cluster. Each receiving node copies that one frame into its
//! members' outboxes, and each secure connection seals its copy on its own
//! task, as for a local broadcast.
//!
//! **Connection ids** carry the node: the high 16 bits are the node id (see
//! [`ConnectionId`]), so a send or kick for an id of another node goes
//! straight to that node.
//!
//! **Membership and presence.** The hub tells the backplane when a
//! connection joins or leaves a group, or signs in or out while in one
//! ([`Backplane::joined`], [`Backplane::left`]); the backplane publishes it
//! so that [`Hub::cluster_presence`](crate::Hub::cluster_presence) can list
//! a group's members on every node, and tells the other nodes with members
//! in the group, whose hubs report it to their presence hooks
//! ([`LocalHub::presence_event`]). When a node dies, the backplane reports
//! its members [`Lost`](crate::PresenceChange::Lost) on the nodes that
//! remain.
//!
//! **Users and names.** Sends and kicks to a user go to every node
//! ([`BackplaneMessage::User`], [`BackplaneMessage::KickUser`]); the
//! backplane keeps each node's count of connections per user
//! ([`Backplane::user_changed`]) and the cluster's name registry
//! ([`Backplane::claim_name`]).
//!
//! The `ternio-redis` crate implements it over Redis pub/sub.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};

use ternio_protocol::Bytes;
use ternio_protocol::frame::{Flags, HEADER_LEN, Header};

use crate::ids::ConnectionId;
use crate::outbox::Delivery;
use crate::presence::{Member, PresenceEvent};
use crate::users::UserId;

/// A boxed future that can be sent between threads, as a backplane returns.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One message from a node's hub to the other nodes.
///
/// Every `frame` is an encoded push frame: header (request id 0, no flags) +
/// body, no length prefix, never sealed.
///
/// Deliberately not `#[non_exhaustive]`: a backplane must carry every kind
/// of message, so a new kind is a compile error in each backplane rather
/// than a message silently dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackplaneMessage {
    /// Push `frame` to every member of `group`.
    Group {
        /// The group's name.
        group: Arc<str>,
        /// The encoded push frame.
        frame: Bytes,
        /// Whether a connection that is behind may miss it.
        droppable: bool,
    },
    /// Push `frame` to every connection.
    Everyone {
        /// The encoded push frame.
        frame: Bytes,
        /// Whether a connection that is behind may miss it.
        droppable: bool,
    },
    /// Push `frame` to the connection `id` (on node `id.node()`).
    Connection {
        /// The connection.
        id: ConnectionId,
        /// The encoded push frame.
        frame: Bytes,
        /// Whether the connection may miss it when it is behind.
        droppable: bool,
    },
    /// Close the connection `id` with `DISCONNECT KICKED` and `reason`.
    Kick {
        /// The connection.
        id: ConnectionId,
        /// The message of the `DISCONNECT`.
        reason: String,
    },
    /// Push `frame` to every connection of `user`.
    User {
        /// The user.
        user: UserId,
        /// The encoded push frame.
        frame: Bytes,
        /// Whether a connection that is behind may miss it.
        droppable: bool,
    },
    /// Close every connection of `user` with `DISCONNECT KICKED` and `reason`.
    KickUser {
        /// The user.
        user: UserId,
        /// The message of the `DISCONNECT`.
        reason: String,
    },
}

/// Why a backplane could not do what it was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BackplaneError {
    /// The backplane has lost its link (to Redis, say) and is reconnecting.
    /// Local traffic is not affected.
    #[error("the backplane is unavailable: {0}")]
    Unavailable(String),
    /// The backplane's outgoing queue is full: the message was dropped.
    #[error("the backplane's outgoing queue is full")]
    Full,
    /// This backplane already serves another server.
    #[error("the backplane is already attached to a server")]
    AlreadyAttached,
    /// Any other failure, with the backplane's own words.
    #[error("backplane failure: {0}")]
    Failed(String),
}

/// What a backplane has done so far: for logs, metrics and health checks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackplaneStats {
    /// Whether the backplane's link is up now.
    pub connected: bool,
    /// Messages handed to the link.
    pub published: u64,
    /// Messages received from other nodes.
    pub received: u64,
    /// Messages dropped: the link was down or the outgoing queue full.
    pub dropped: u64,
    /// Times the link was lost.
    pub disconnects: u64,
    /// Times the link came back after it was lost.
    pub reconnects: u64,
}

/// Carries a hub's group broadcasts, sends and kicks to the other nodes of
/// a cluster, and keeps the cluster's group membership.
///
/// The hub calls these methods from handlers and from its own code, never
/// across an `.await`: they must not block. Queue the work, and do the I/O
/// on a task of your own.
pub trait Backplane: Send + Sync + 'static {
    /// This node's id, 1 to 65,535, unique in the cluster: the high 16 bits
    /// of every connection id this node hands out. (0 means "no backplane".)
    fn node_id(&self) -> u16;

    /// Called once, when the server is built: where to deliver what comes
    /// from other nodes. A backplane serves one server; a second call fails
    /// with [`BackplaneError::AlreadyAttached`].
    fn attach(&self, hub: LocalHub) -> Result<(), BackplaneError>;

    /// Sends `message` to the other nodes. The hub has delivered it to its
    /// own connections already: a node must not deliver its own messages
    /// again. Must not block; an error means the message is lost.
    fn publish(&self, message: BackplaneMessage) -> Result<(), BackplaneError>;

    /// The connection `id` of this node joined `group`, or signed in or
    /// out while in it ([`LocalHub::presence`] has its user).
    fn joined(&self, group: &str, id: ConnectionId);

    /// The connection `id` of this node left `group` (or closed).
    fn left(&self, group: &str, id: ConnectionId);

    /// The members of `group` on the other nodes, with their users (the hub
    /// adds its own).
    fn remote_presence(
        &self,
        group: &str,
    ) -> BoxFuture<'static, Result<Vec<Member>, BackplaneError>>;

    /// The number of connections of `user` on this node changed
    /// ([`LocalHub::user_count`] has it).
    fn user_changed(&self, user: &UserId);

    /// How many connections `user` has on the other nodes.
    fn remote_user_connections(
        &self,
        user: &UserId,
    ) -> BoxFuture<'static, Result<usize, BackplaneError>>;

    /// Claims `name` for the connection `id` of this node in the cluster's
    /// name registry, as its claim `generation` (a number this node gives
    /// each claim, never twice): true when it is `id`'s now (or was
    /// already, under any generation: the registry then records this
    /// one), false when a live connection elsewhere holds it. A name whose
    /// holder's node died is free.
    fn claim_name(
        &self,
        name: &str,
        id: ConnectionId,
        generation: u64,
    ) -> BoxFuture<'static, Result<bool, BackplaneError>>;

    /// Frees `name` if the registry still holds it under the claim
    /// `generation` of the connection `id` of this node: a release that
    /// comes late never frees a later claim. Must not block: queue it.
    fn release_name(&self, name: &str, id: ConnectionId, generation: u64);

    /// What the backplane has done so far, and whether its link is up.
    fn stats(&self) -> BackplaneStats;

    /// Whether the backplane's link to the other nodes is up now: a cheap
    /// query (an atomic load, say), asked by every `/readyz` probe. A node
    /// whose backplane is down answers 503 there, so that a load balancer
    /// sends new clients to the nodes that reach the cluster. Default
    /// `true`, for a backplane with no link to lose.
    fn is_connected(&self) -> bool {
        true
    }
}

/// A node's own side of its hub, as the backplane sees it: deliver what
/// came from other nodes to this node's connections, and list this node's
/// memberships (to publish them again after the backplane's store lost them).
///
/// It holds the hub weakly: once the server is gone, it does nothing.
#[derive(Clone)]
pub struct LocalHub {
    hub: Weak<dyn LocalSide>,
}

/// What a [`LocalHub`] reaches: this node's registry of connections (which
/// implements it), seen only through what the backplane delivers.
pub(crate) trait LocalSide: Send + Sync {
    /// The largest frame this node accepts or sends.
    fn max_frame_size(&self) -> usize;
    /// Pushes `frame` to the local members of `group`.
    fn deliver_to_group(&self, group: &str, frame: &Bytes, droppable: bool) -> Delivery;
    /// Pushes `frames`, in order, to the local members of `group`: each
    /// member's outbox locked and woken once for all of them (nothing, not
    /// even the lookup, for no frame).
    fn deliver_frames_to_group(&self, group: &str, frames: &[Bytes], droppable: bool) -> Delivery;
    /// Pushes `frame` to every local connection.
    fn deliver_to_all(&self, frame: &Bytes, droppable: bool) -> Delivery;
    /// Pushes `frame` to the connection `id`; `None` when it is not open here.
    fn deliver_to(&self, id: ConnectionId, frame: &Bytes, droppable: bool) -> Option<Delivery>;
    /// Kicks the connection `id`; false when it is not open here.
    fn kick(&self, id: ConnectionId, reason: &str) -> bool;
    /// Every group with its local members (a snapshot).
    fn memberships(&self) -> Vec<(String, Vec<ConnectionId>)>;
    /// The ids of the local members of `group`.
    fn members(&self, group: &str) -> Vec<ConnectionId>;
    /// The local members of `group` with their users.
    fn presence(&self, group: &str) -> Vec<Member>;
    /// Pushes `frame` to the local connections of `user`.
    fn deliver_to_user(&self, user: &str, frame: &Bytes, droppable: bool) -> Delivery;
    /// Kicks the local connections of `user`; how many.
    fn kick_user(&self, user: &str, reason: &str) -> usize;
    /// How many local connections `user` has.
    fn user_count(&self, user: &str) -> usize;
    /// Every signed-in user with its number of local connections.
    fn users(&self) -> Vec<(UserId, usize)>;
    /// Every name a local connection holds, with its holder and its
    /// claim's generation.
    fn names(&self) -> Vec<(Arc<str>, ConnectionId, u64)>;
    /// Tells the presence hook of a change on another node.
    fn presence_event(&self, event: PresenceEvent);
}

impl fmt::Debug for LocalHub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalHub")
            .field("alive", &self.is_alive())
            .finish()
    }
}

impl LocalHub {
    pub(crate) fn new(hub: Weak<dyn LocalSide>) -> Self {
        Self { hub }
    }

    /// Whether the server behind this hub still exists.
    pub fn is_alive(&self) -> bool {
        self.hub.strong_count() > 0
    }

    /// Delivers several push frames from another node to the local members
    /// of `group`, in order, with the members looked up once and each
    /// member's connection woken once for the batch. A frame that is not a
    /// plain push frame within the maximum frame size is refused (each
    /// counted as failed once); the others are delivered. The [`Delivery`]
    /// counts frames times members. One difference with
    /// [`deliver`](Self::deliver) of a [`BackplaneMessage::Group`] for each
    /// frame: a member whose outbox overflows with a frame it may not drop
    /// is disconnected, and the frames after it count as failed for that
    /// member (one at a time, a later frame that fits would still be queued
    /// until the connection closes).
    pub fn deliver_group_frames(&self, group: &str, frames: &[Bytes], droppable: bool) -> Delivery {
        let Some(hub) = self.hub.upgrade() else {
            return Delivery::default();
        };
        let max = hub.max_frame_size();
        if frames.iter().all(|frame| is_push_frame(frame, max)) {
            return hub.deliver_frames_to_group(group, frames, droppable);
        }
        let valid: Vec<Bytes> = frames
            .iter()
            .filter(|frame| is_push_frame(frame, max))
            .cloned()
            .collect();
        let mut delivery = hub.deliver_frames_to_group(group, &valid, droppable);
        delivery.failed += frames.len() - valid.len();
        delivery
    }

    /// Delivers a message from another node to this node's connections:
    /// a group's local members, every local connection, or the one
    /// connection named (when it is here). A frame that is not a plain push
    /// frame within the maximum frame size is refused (counted as failed).
    pub fn deliver(&self, message: &BackplaneMessage) -> Delivery {
        let Some(hub) = self.hub.upgrade() else {
            return Delivery::default();
        };
        let refused = Delivery {
            failed: 1,
            ..Delivery::default()
        };
        match message {
            BackplaneMessage::Group {
                group,
                frame,
                droppable,
            } => {
                if !is_push_frame(frame, hub.max_frame_size()) {
                    return refused;
                }
                hub.deliver_to_group(group, frame, *droppable)
            }
            BackplaneMessage::Everyone { frame, droppable } => {
                if !is_push_frame(frame, hub.max_frame_size()) {
                    return refused;
                }
                hub.deliver_to_all(frame, *droppable)
            }
            BackplaneMessage::Connection {
                id,
                frame,
                droppable,
            } => {
                if !is_push_frame(frame, hub.max_frame_size()) {
                    return refused;
                }
                hub.deliver_to(*id, frame, *droppable).unwrap_or(refused)
            }
            BackplaneMessage::Kick { id, reason } => {
                if !hub.kick(*id, reason) {
                    return refused;
                }
                Delivery {
                    queued: 1,
                    ..Delivery::default()
                }
            }
            BackplaneMessage::User {
                user,
                frame,
                droppable,
            } => {
                if !is_push_frame(frame, hub.max_frame_size()) {
                    return refused;
                }
                hub.deliver_to_user(user, frame, *droppable)
            }
            BackplaneMessage::KickUser { user, reason } => Delivery {
                queued: hub.kick_user(user, reason),
                ..Delivery::default()
            },
        }
    }

    /// The members of `group` on this node, with their users.
    pub fn presence(&self, group: &str) -> Vec<Member> {
        self.hub
            .upgrade()
            .map(|hub| hub.presence(group))
            .unwrap_or_default()
    }

    /// How many connections `user` has on this node.
    pub fn user_count(&self, user: &str) -> usize {
        self.hub.upgrade().map_or(0, |hub| hub.user_count(user))
    }

    /// Every signed-in user of this node with its number of connections.
    pub fn users(&self) -> Vec<(UserId, usize)> {
        self.hub
            .upgrade()
            .map(|hub| hub.users())
            .unwrap_or_default()
    }

    /// Every name a connection of this node holds, with its holder (to
    /// claim them again after the registry lost them).
    pub fn names(&self) -> Vec<(Arc<str>, ConnectionId)> {
        self.name_claims()
            .into_iter()
            .map(|(name, id, _)| (name, id))
            .collect()
    }

    /// Every name a connection of this node holds, with its holder and the
    /// generation of its claim ([`Backplane::claim_name`]), to claim them
    /// again, as the same claims, after the registry lost them.
    pub fn name_claims(&self) -> Vec<(Arc<str>, ConnectionId, u64)> {
        self.hub
            .upgrade()
            .map(|hub| hub.names())
            .unwrap_or_default()
    }

    /// Tells this node's presence hook of a change on another node: a
    /// member that joined, left, changed user, or was lost with its node.
    /// The backplane calls it on the nodes with members in the group.
    pub fn presence_event(&self, event: PresenceEvent) {
        if let Some(hub) = self.hub.upgrade() {
            hub.presence_event(event);
        }
    }

    /// Every group with a member on this node, with those members (a snapshot).
    pub fn memberships(&self) -> Vec<(String, Vec<ConnectionId>)> {
        self.hub
            .upgrade()
            .map(|hub| hub.memberships())
            .unwrap_or_default()
    }

    /// The members of `group` on this node.
    pub fn members(&self, group: &str) -> Vec<ConnectionId> {
        self.hub
            .upgrade()
            .map(|hub| hub.members(group))
            .unwrap_or_default()
    }
}

/// Whether `frame` is what a hub publishes: a plain push frame (no flags,
/// request id 0) within `max_frame_size`. Anything else that reaches the
/// backplane's channels is not passed to clients.
fn is_push_frame(frame: &[u8], max_frame_size: usize) -> bool {
    frame.len() >= HEADER_LEN
        && frame.len() <= max_frame_size
        && Header::parse(frame).is_ok_and(|header| {
            // No flag but COMPRESSED: a push compressed once on its node.
            header.flags.without(Flags::COMPRESSED) == Flags::NONE
                && header.request_id == 0
                && !header.is_system()
        })
}
