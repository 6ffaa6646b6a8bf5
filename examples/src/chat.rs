//! The chat service: rooms, nicknames, and what the server pushes to a room.
//!
//! Requests (the client asks, the server answers):
//! `SetNick` → `()`, `JoinRoom` → `RoomInfo`, `LeaveRoom` → `()`, `Say` → `()`.
//! Pushes (the server tells every member of a room):
//! `UserJoined`, `UserLeft`, `ChatMessage`.
//!
//! [`serve`] adds the service to a server: `examples/chat_server.rs` runs it,
//! and the end-to-end tests build the same server in-process.

use std::collections::HashSet;
use std::sync::Mutex;

use ternio::{
    AppCode, ConnectionHandle, Context, HandlerError, Hub, Packet, ServerBuilder, State, Stored,
    packet_controller,
};

/// 0x0101: takes a nickname (error 100 if another connection has it).
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
    /// The nicknames of its members, sorted, the joiner included.
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

/// 0x0110, pushed: someone joined a room.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0110)]
pub struct UserJoined {
    /// The room.
    pub room: String,
    /// Who.
    pub nick: String,
}

/// 0x0111, pushed: someone left a room (or disconnected).
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

    /// The nickname is taken, empty or too long.
    pub const BAD_NICK: AppCode = AppCode::new(100);
    /// A nickname is needed first.
    pub const NO_NICK: AppCode = AppCode::new(101);
    /// The connection is not in that room.
    pub const NOT_IN_ROOM: AppCode = AppCode::new(102);
    /// The message or room name is empty or too long.
    pub const BAD_TEXT: AppCode = AppCode::new(103);
}

/// Adds the chat service to `builder`: the [`ChatController`], the
/// server-wide [`Nicknames`], and the disconnect hook ([`on_disconnect`])
/// that tells the rooms when someone goes.
pub fn serve(builder: ServerBuilder) -> ServerBuilder {
    builder
        .controller(ChatController)
        .state(Nicknames::default())
        .on_disconnect(|connection, _cause| on_disconnect(connection))
}

/// A connection's nickname, kept in its store.
#[derive(Debug, Clone)]
struct Nickname(String);

/// The rooms a connection is in, kept in its store.
#[derive(Debug, Clone, Default)]
struct Rooms(Vec<String>);

/// Nicknames in use, across the server (shared state of the chat handlers).
#[derive(Default)]
pub struct Nicknames(Mutex<HashSet<String>>);

/// Serves the chat packets. Register it with [`serve`], which also adds the
/// state and the hook it needs.
///
/// Everything the chat needs comes from the framework: the hub's groups are
/// the rooms, the connection store keeps each connection's nickname and
/// rooms, and the disconnect hook tells the rooms when someone leaves.
#[derive(Debug, Default)]
pub struct ChatController;

fn error(code: AppCode, message: impl Into<String>) -> HandlerError {
    HandlerError::new(code, message)
}

/// The nicknames of a room's members, sorted.
fn member_nicks(hub: &Hub, room: &str) -> Vec<String> {
    let mut nicks: Vec<String> = hub
        .members(room)
        .into_iter()
        .filter_map(|id| hub.connection(id))
        .filter_map(|member| member.store().get::<Nickname>())
        .map(|nick| nick.0)
        .collect();
    nicks.sort();
    nicks
}

#[packet_controller(explicit)]
impl ChatController {
    fn set_nick(
        request: SetNick,
        ctx: &Context,
        taken: State<Nicknames>,
    ) -> Result<(), HandlerError> {
        let nick = request.nick.trim().to_owned();
        if nick.is_empty() || nick.chars().count() > 32 {
            return Err(error(errors::BAD_NICK, "a nickname has 1 to 32 characters"));
        }
        let mut in_use = taken.0.0.lock().expect("nicknames");
        if !in_use.insert(nick.clone()) {
            return Err(error(errors::BAD_NICK, format!("{nick} is taken")));
        }
        if let Some(Nickname(old)) = ctx.store().insert(Nickname(nick)) {
            in_use.remove(&old);
        }
        Ok(())
    }

    fn join_room(
        request: JoinRoom,
        ctx: &Context,
        nick: Stored<Nickname>,
    ) -> Result<RoomInfo, HandlerError> {
        let Some(Nickname(nick)) = nick.0 else {
            return Err(error(errors::NO_NICK, "set a nickname first"));
        };
        let room = request.room.trim().to_owned();
        if room.is_empty() || room.chars().count() > 64 {
            return Err(error(
                errors::BAD_TEXT,
                "a room name has 1 to 64 characters",
            ));
        }
        let hub = ctx.hub();
        if !hub.members(&room).contains(&ctx.connection_id()) {
            hub.join(&room, ctx.connection_id());
            if !ctx.store().contains::<Rooms>() {
                ctx.store().insert(Rooms::default());
            }
            ctx.store()
                .with(|rooms: &mut Rooms| rooms.0.push(room.clone()));
            let _ = hub.broadcast_group(
                &room,
                &UserJoined {
                    room: room.clone(),
                    nick,
                },
            );
        }
        Ok(RoomInfo {
            members: member_nicks(&hub, &room),
            room,
        })
    }

    fn leave_room(
        request: LeaveRoom,
        ctx: &Context,
        nick: Stored<Nickname>,
    ) -> Result<(), HandlerError> {
        let hub = ctx.hub();
        if !hub.leave(&request.room, ctx.connection_id()) {
            return Err(error(
                errors::NOT_IN_ROOM,
                format!("you are not in {}", request.room),
            ));
        }
        ctx.store()
            .with(|rooms: &mut Rooms| rooms.0.retain(|room| room != &request.room));
        let nick = nick.0.map(|nick| nick.0).unwrap_or_default();
        let left = UserLeft {
            room: request.room,
            nick,
        };
        let _ = hub.broadcast_group(&left.room, &left);
        Ok(())
    }

    fn say(request: Say, ctx: &Context, nick: Stored<Nickname>) -> Result<(), HandlerError> {
        let Some(Nickname(nick)) = nick.0 else {
            return Err(error(errors::NO_NICK, "set a nickname first"));
        };
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
            nick,
            text: request.text,
        };
        let _ = hub.broadcast_group(&message.room, &message);
        Ok(())
    }
}

/// Tells the rooms of a closed connection that it left, and frees its
/// nickname. [`serve`] installs it as the server's disconnect hook.
pub fn on_disconnect(connection: &ConnectionHandle) {
    let Some(Nickname(nick)) = connection.store().get::<Nickname>() else {
        return;
    };
    if let Some(nicknames) = connection.state::<Nicknames>() {
        nicknames.0.lock().expect("nicknames").remove(&nick);
    }
    let hub = connection.hub();
    for room in connection.store().get::<Rooms>().unwrap_or_default().0 {
        let _ = hub.broadcast_group(
            &room,
            &UserLeft {
                room: room.clone(),
                nick: nick.clone(),
            },
        );
    }
}
