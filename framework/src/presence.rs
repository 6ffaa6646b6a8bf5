//! Presence: who is in a group, on every node, and the events that say
//! when that changes. A [`PresenceEvent`] goes to the hook given to
//! [`ServerBuilder::on_presence`](crate::ServerBuilder::on_presence).
//!
//! Which node hears what: the node of the member that changed calls its
//! hook at once; with a backplane, every other node with a member in the
//! group calls its own when the backplane tells it (the hook pushes to its
//! own node's members with
//! [`Hub::broadcast_group_local`](crate::Hub::broadcast_group_local), so
//! that each member hears of each change once). A node that dies takes its
//! members with it: the others report them [`PresenceChange::Lost`] once
//! its heartbeat has expired.

use std::sync::Arc;

use crate::ids::ConnectionId;
use crate::users::UserId;

/// One member of a group: a connection, and its user if it signed in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Member {
    /// The connection (its node is `id.node()`).
    pub id: ConnectionId,
    /// The user the connection signed in as, if any.
    pub user: Option<UserId>,
}

/// What happened to a group's member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PresenceChange {
    /// It joined the group.
    Joined,
    /// It left the group, or its connection closed.
    Left,
    /// Its node stopped answering (its heartbeat expired): it is gone from
    /// the group, with its node.
    Lost,
    /// It is still in the group, under another user: it signed in or out
    /// ([`PresenceEvent::previous_user`] is the user it had).
    Updated,
}

/// A change in a group's membership, anywhere in the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PresenceEvent {
    /// The group.
    pub group: Arc<str>,
    /// The member, as it is after the change (as it was, for one that left).
    pub member: Member,
    /// What happened.
    pub change: PresenceChange,
    /// For [`PresenceChange::Updated`], the user the member had before;
    /// `None` otherwise (and when it had none).
    pub previous_user: Option<UserId>,
}

impl PresenceEvent {
    /// An event: `member` of `group` went through `change`.
    pub fn new(group: impl Into<Arc<str>>, member: Member, change: PresenceChange) -> Self {
        Self {
            group: group.into(),
            member,
            change,
            previous_user: None,
        }
    }

    /// An [`Updated`](PresenceChange::Updated) event: `member` of `group`
    /// had the user `previous` before.
    pub fn updated(group: impl Into<Arc<str>>, member: Member, previous: Option<UserId>) -> Self {
        Self {
            previous_user: previous,
            ..Self::new(group, member, PresenceChange::Updated)
        }
    }
}
