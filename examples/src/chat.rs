//! The chat service: rooms, nicknames, and what the server pushes to a room.
//!
//! Requests (the client asks, the server answers):
//! `SetNick` → `()`, `JoinRoom` → `RoomInfo`, `LeaveRoom` → `()`, `Say` → `()`.
//! Pushes (the server tells every member of a room):
//! `UserJoined`, `UserLeft`, `ChatMessage`.
//!
//! [`serve`] adds the service to a server: `examples/chat_server.rs` runs it,
//! and the end-to-end tests build the same server in-process.
//!
//! It works the same on one server and on a cluster of them (a Redis
//! backplane, `chat_server --redis`), with the framework's users, names and
//! presence:
//!
//! - a nickname is a name in the hub's registry ([`Hub::claim_name`]):
//!   one connection of the whole cluster holds it, until it takes another
//!   or closes; the connection signs in under it
//!   ([`ConnectionHandle::sign_in`](ternio::ConnectionHandle::sign_in)), so its rooms' members see it by that
//!   name;
//! - the rooms are the hub's groups; the member list a [`JoinRoom`]
//!   answers is the room's members on every node
//!   ([`Hub::cluster_presence`]);
//! - joins and leaves are told by the presence hook ([`on_presence`]),
//!   which every node with members in the room calls for each change, a
//!   connection that closes and a node that dies included.

use std::collections::BTreeSet;

use ternio::{
    AppCode, ClaimError, Context, HandlerError, Hub, Packet, PresenceChange, PresenceEvent,
    ServerBuilder, UserId, packet_controller,
};

/// 0x0101: takes a nickname (error 100 if another connection, on any node,
/// has it), in place of the one the connection had.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0101, response = ())]
pub struct SetNick {
    /// The nickname: 1 to 32 characters.
    pub nick: String,
}

/// 0x0102: joins a room, creating it if needed (needs a nickname first).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0102, response = RoomInfo)]
pub struct JoinRoom {
    /// The room's name.
    pub room: String,
}

/// 0x0103: the answer to [`JoinRoom`]: who is in the room now.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0103)]
pub struct RoomInfo {
    /// The room's name.
    pub room: String,
    /// The nicknames of its members on every node, sorted, the joiner
    /// included (this node's only while the backplane is down).
    pub members: Vec<String>,
}

/// 0x0104: leaves a room.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0104, response = ())]
pub struct LeaveRoom {
    /// The room's name.
    pub room: String,
}

/// 0x0105: says something to a room the connection is in.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0105, response = ())]
pub struct Say {
    /// The room's name.
    pub room: String,
    /// The message: at most 2,000 characters.
    pub text: String,
}

/// 0x0110, pushed: someone joined a room (to every member, the joiner
/// included).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0110)]
pub struct UserJoined {
    /// The room.
    pub room: String,
    /// Who.
    pub nick: String,
}

/// 0x0111, pushed: someone left a room (or disconnected, or was on a node
/// that stopped answering).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0111)]
pub struct UserLeft {
    /// The room.
    pub room: String,
    /// Who.
    pub nick: String,
}

/// 0x0112, pushed: a message said in a room (to every member, the speaker included).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0112)]
pub struct ChatMessage {
    /// The room.
    pub room: String,
    /// Who said it.
    pub nick: String,
    /// What.
    pub text: String,
}

/// Error codes of the chat service.
pub mod errors {
    use ternio::AppCode;

    /// The nickname is taken, empty, too long or holds a control character.
    pub const BAD_NICK: AppCode = AppCode::new(100);
    /// A nickname is needed first.
    pub const NO_NICK: AppCode = AppCode::new(101);
    /// The connection is not in that room.
    pub const NOT_IN_ROOM: AppCode = AppCode::new(102);
    /// The message or room name is empty or too long.
    pub const BAD_TEXT: AppCode = AppCode::new(103);
    /// The cluster could not be asked whether a nickname is free (the
    /// server's link to Redis is down): try again later.
    pub const UNAVAILABLE: AppCode = AppCode::new(104);
}

/// Adds the chat service to `builder`: the [`ChatController`] and the
/// presence hook ([`on_presence`]) that tells the rooms who comes and goes.
pub fn serve(builder: ServerBuilder) -> ServerBuilder {
    builder
        .controller(ChatController)
        .on_presence(on_presence)
        .declare_push::<UserJoined>()
        .declare_push::<UserLeft>()
        .declare_push::<ChatMessage>()
}

/// Serves the chat packets. Register it with [`serve`], which also adds the
/// presence hook that tells the rooms of joins and leaves.
///
/// Everything the chat needs comes from the framework: the hub's name
/// registry keeps the nicknames unique, the connection's user is its
/// nickname, the hub's groups are the rooms, and presence says who is in
/// them, on every node.
#[derive(Debug, Default)]
pub struct ChatController;

fn error(code: AppCode, message: impl Into<String>) -> HandlerError {
    HandlerError::new(code, message)
}

/// The connection's nickname: the user it signed in as.
fn nickname(ctx: &Context) -> Result<UserId, HandlerError> {
    ctx.user()
        .ok_or_else(|| error(errors::NO_NICK, "set a nickname first"))
}

/// The nicknames of `members`, sorted, each once.
fn nicks(members: impl IntoIterator<Item = Option<UserId>>) -> Vec<String> {
    let nicks: BTreeSet<String> = members
        .into_iter()
        .flatten()
        .map(|user| user.as_str().to_owned())
        .collect();
    nicks.into_iter().collect()
}

/// The nicknames of a room's members on every node; this node's when the
/// backplane cannot be asked.
async fn member_nicks(hub: &Hub, room: &str) -> Vec<String> {
    match hub.cluster_presence(room).await {
        Ok(members) => nicks(members.into_iter().map(|member| member.user)),
        Err(failure) => {
            tracing::warn!(room, %failure, "the room's members on this node only");
            nicks(
                hub.members(room)
                    .into_iter()
                    .filter_map(|id| hub.connection(id))
                    .map(|member| member.user()),
            )
        }
    }
}

#[packet_controller(explicit)]
impl ChatController {
    async fn set_nick(request: SetNick, ctx: &Context) -> Result<(), HandlerError> {
        let nick = request.nick.trim();
        if nick.is_empty() || nick.chars().count() > 32 {
            return Err(error(errors::BAD_NICK, "a nickname has 1 to 32 characters"));
        }
        let Ok(user) = UserId::new(nick) else {
            return Err(error(
                errors::BAD_NICK,
                "a nickname has no control characters",
            ));
        };
        let hub = ctx.hub();
        let id = ctx.connection_id();
        match hub.claim_name(nick, id).await {
            Ok(true) => {}
            Ok(false) => return Err(error(errors::BAD_NICK, format!("{nick} is taken"))),
            Err(ClaimError::Backplane(failure)) => {
                return Err(error(
                    errors::UNAVAILABLE,
                    format!("cannot check that {nick} is free: {failure}; try again"),
                ));
            }
            Err(failure) => return Err(error(errors::BAD_NICK, failure.to_string())),
        }
        // The rooms it is in see the old nickname leave and the new one
        // join (an `Updated` presence change).
        if let Some(previous) = ctx.sign_in(user)
            && previous.as_str() != nick
        {
            hub.release_name(&previous, id);
        }
        Ok(())
    }

    async fn join_room(request: JoinRoom, ctx: &Context) -> Result<RoomInfo, HandlerError> {
        nickname(ctx)?;
        let room = request.room.trim().to_owned();
        if room.is_empty() || room.chars().count() > 64 {
            return Err(error(
                errors::BAD_TEXT,
                "a room name has 1 to 64 characters",
            ));
        }
        let hub = ctx.hub();
        // The presence hook tells the room (the joiner included), unless
        // the connection was in it already.
        hub.join(&room, ctx.connection_id());
        Ok(RoomInfo {
            members: member_nicks(&hub, &room).await,
            room,
        })
    }

    fn leave_room(request: LeaveRoom, ctx: &Context) -> Result<(), HandlerError> {
        // The presence hook tells the room's other members.
        if !ctx.hub().leave(&request.room, ctx.connection_id()) {
            return Err(error(
                errors::NOT_IN_ROOM,
                format!("you are not in {}", request.room),
            ));
        }
        Ok(())
    }

    fn say(request: Say, ctx: &Context) -> Result<(), HandlerError> {
        let nick = nickname(ctx)?;
        if request.text.is_empty() || request.text.chars().count() > 2000 {
            return Err(error(
                errors::BAD_TEXT,
                "a message has 1 to 2,000 characters",
            ));
        }
        let hub = ctx.hub();
        if !hub.members(&request.room).contains(&ctx.connection_id()) {
            return Err(error(
                errors::NOT_IN_ROOM,
                format!("join {} first", request.room),
            ));
        }
        let message = ChatMessage {
            room: request.room,
            nick: nick.as_str().to_owned(),
            text: request.text,
        };
        let _ = hub.broadcast_group(&message.room, &message);
        Ok(())
    }
}

/// Tells this node's members of a room who joined it ([`UserJoined`]) and
/// who left it ([`UserLeft`]: left, disconnected, or lost with a node that
/// stopped answering), under their nicknames. [`serve`] installs it as the
/// server's presence hook: every node with members in the room calls it
/// for each change, so each member hears of each once. A change of
/// nickname (`Updated`) is told as the old nickname leaving and the new one
/// joining. A member without a nickname is not told.
pub fn on_presence(event: &PresenceEvent, hub: &Hub) {
    let room = || event.group.to_string();
    let left = |nick: &UserId| {
        let nick = nick.as_str().to_owned();
        let _ = hub.broadcast_group_local(&event.group, &UserLeft { room: room(), nick });
    };
    let joined = |nick: &UserId| {
        let nick = nick.as_str().to_owned();
        let _ = hub.broadcast_group_local(&event.group, &UserJoined { room: room(), nick });
    };
    let user = event.member.user.as_ref();
    match event.change {
        PresenceChange::Joined => user.into_iter().for_each(joined),
        PresenceChange::Left | PresenceChange::Lost => user.into_iter().for_each(left),
        PresenceChange::Updated => {
            event.previous_user.iter().for_each(left);
            user.into_iter().for_each(joined);
        }
        _ => {}
    }
}
