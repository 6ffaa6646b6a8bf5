//! The room game of `docs/GUIDE.md`: players log in, join a room (a hub
//! group) and step around a 16 × 16 board; every move is pushed to the room.
//!
//! Requests (the client asks, the server answers):
//! `Login` → `Welcome`, `JoinRoom` → `RoomState`, `Move` → `()`, `Kick` → `()`
//! (admins only). Pushes (to every member of a room): `Moved`, `Left`.
//!
//! [`serve`] adds the game to a server; `examples/rooms.rs` runs it with the
//! browser page of `examples/web/rooms/`, and `examples/tests/rooms.rs` plays
//! it. The guide quotes the packets and the controller from this file (a
//! test checks that the quotes match it).

use std::collections::HashMap;
use std::sync::Mutex;

use ternio::{
    Codec, ConnectionHandle, Context, ErrorCode, FromContext, HandlerError, Hub, Packet, Rejection,
    ServerBuilder, State, packet_controller,
};

/// 0x0300: logs in under a name; the admin token makes the player an admin.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0300, response = Welcome)]
pub struct Login {
    /// The player's name: 1 to 16 characters.
    pub name: String,
    /// The admin token, or empty.
    pub token: String,
}

/// 0x0301: the answer to [`Login`].
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0301)]
pub struct Welcome {
    /// The name, trimmed.
    pub name: String,
    /// The permission level granted: [`PLAYER`] or [`ADMIN`].
    pub level: u32,
}

/// 0x0302: joins a room, leaving the one before.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0302, response = RoomState)]
pub struct JoinRoom {
    /// The room's name: 1 to 32 characters.
    pub room: String,
}

/// 0x0303: the answer to [`JoinRoom`]: who is where in the room.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0303)]
pub struct RoomState {
    /// The room's name.
    pub room: String,
    /// Its players (on this server), the joiner included.
    pub players: Vec<Player>,
}

/// A player on the board: a field type, not a packet (no opcode).
#[derive(Debug, Clone, PartialEq, Eq, Codec)]
pub struct Player {
    /// The player's name.
    pub name: String,
    /// Column, 0 to 15.
    pub x: u8,
    /// Row, 0 to 15.
    pub y: u8,
}

/// 0x0304: one step: `dx` and `dy` are -1, 0 or 1.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0304, response = ())]
pub struct Move {
    /// Columns to move.
    pub dx: i8,
    /// Rows to move.
    pub dy: i8,
}

/// 0x0310, pushed to a room: a player is somewhere new (joined or moved).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0310)]
pub struct Moved {
    /// The room.
    pub room: String,
    /// Who, and where now.
    pub player: Player,
    /// Moves made in the room so far (on this server).
    pub moves: u64,
}

/// 0x0311, pushed to a room: a player left it (or disconnected).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0311)]
pub struct Left {
    /// The room.
    pub room: String,
    /// Who.
    pub name: String,
}

/// 0x0305: closes every connection logged in under `name` (admins only).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0305, response = ())]
pub struct Kick {
    /// The player's name.
    pub name: String,
}

/// The board's width and height.
pub const BOARD: u8 = 16;
/// The permission level of a logged-in player.
pub const PLAYER: u32 = 1;
/// The permission level of an admin.
pub const ADMIN: u32 = 2;

/// Error codes of the game (applications use 100 and above).
pub mod errors {
    use ternio::AppCode;

    /// The name is empty or too long, or the connection is logged in already.
    pub const BAD_NAME: AppCode = AppCode::new(100);
    /// The room name is empty or too long.
    pub const BAD_ROOM: AppCode = AppCode::new(101);
    /// A step is -1, 0 or 1 in each direction.
    pub const BAD_MOVE: AppCode = AppCode::new(102);
    /// Join a room first.
    pub const NOT_IN_ROOM: AppCode = AppCode::new(103);
    /// Nobody of that name is connected.
    pub const NO_SUCH_PLAYER: AppCode = AppCode::new(104);
}

/// The server's settings, shared by every handler (`State<Settings>`).
#[derive(Debug, Default)]
pub struct Settings {
    /// The token that makes a player an admin; `None`: no admins.
    pub admin_token: Option<String>,
}

/// Moves made per room, shared by every handler (`State<Scores>`).
#[derive(Debug, Default)]
pub struct Scores(Mutex<HashMap<String, u64>>);

impl Scores {
    /// Adds `moves` to `room`'s count and returns the new count.
    pub fn add(&self, room: &str, moves: u64) -> u64 {
        let mut rooms = self.0.lock().expect("scores");
        let count = rooms.entry(room.to_owned()).or_default();
        *count += moves;
        *count
    }
}

/// A connection's name, in its store once it logged in.
#[derive(Debug, Clone)]
pub struct Name(pub String);

/// Where a connection's player is, in its store once it joined a room.
#[derive(Debug, Clone)]
pub struct Seat {
    /// The room (the hub group).
    pub room: String,
    /// Column.
    pub x: u8,
    /// Row.
    pub y: u8,
}

/// A handler that takes `Name` runs only for a connection that logged in;
/// any other gets `UNAUTHORIZED`.
impl FromContext for Name {
    type Rejection = Rejection;

    fn from_context(ctx: &Context) -> Result<Self, Rejection> {
        ctx.store()
            .get::<Name>()
            .ok_or_else(|| Rejection::new(ErrorCode::Unauthorized, "log in first"))
    }
}

/// A handler that takes `Seat` runs only for a player in a room.
impl FromContext for Seat {
    type Rejection = Rejection;

    fn from_context(ctx: &Context) -> Result<Self, Rejection> {
        ctx.store()
            .get::<Seat>()
            .ok_or_else(|| Rejection::new(errors::NOT_IN_ROOM, "join a room first"))
    }
}

/// Serves the game's requests; [`serve`] registers it.
#[derive(Debug, Default)]
pub struct RoomsController;

#[packet_controller(explicit)]
impl RoomsController {
    fn login(
        request: Login,
        ctx: &Context,
        settings: State<Settings>,
    ) -> Result<Welcome, HandlerError> {
        let name = request.name.trim().to_owned();
        if name.is_empty() || name.chars().count() > 16 {
            return Err(HandlerError::new(
                errors::BAD_NAME,
                "a name has 1 to 16 characters",
            ));
        }
        if ctx.store().contains::<Name>() {
            return Err(HandlerError::new(errors::BAD_NAME, "logged in already"));
        }
        let admin = settings.admin_token.as_deref() == Some(request.token.as_str());
        let level = if admin { ADMIN } else { PLAYER };
        ctx.store().insert(Name(name.clone()));
        ctx.set_permission(level);
        Ok(Welcome { name, level })
    }

    #[handler(permission = 1)]
    fn join_room(
        request: JoinRoom,
        ctx: &Context,
        Name(name): Name,
        scores: State<Scores>,
    ) -> Result<RoomState, HandlerError> {
        let room = request.room.trim().to_owned();
        if room.is_empty() || room.chars().count() > 32 {
            return Err(HandlerError::new(
                errors::BAD_ROOM,
                "a room name has 1 to 32 characters",
            ));
        }
        leave_room(&ctx.connection(), &name);
        let hub = ctx.hub();
        hub.join(&room, ctx.connection_id());
        let (x, y) = (BOARD / 2, BOARD / 2);
        ctx.store().insert(Seat {
            room: room.clone(),
            x,
            y,
        });
        let player = Player { name, x, y };
        let moves = scores.add(&room, 0);
        let _ = hub.broadcast_group(
            &room,
            &Moved {
                room: room.clone(),
                player,
                moves,
            },
        );
        Ok(RoomState {
            players: players_in(&hub, &room),
            room,
        })
    }

    #[handler(permission = 1, rate_limit(20, 40))]
    fn step(
        request: Move,
        ctx: &Context,
        Name(name): Name,
        mut seat: Seat,
        scores: State<Scores>,
    ) -> Result<(), HandlerError> {
        if !(-1..=1).contains(&request.dx) || !(-1..=1).contains(&request.dy) {
            return Err(HandlerError::new(errors::BAD_MOVE, "one step at a time"));
        }
        seat.x = seat.x.saturating_add_signed(request.dx).min(BOARD - 1);
        seat.y = seat.y.saturating_add_signed(request.dy).min(BOARD - 1);
        ctx.store().insert(seat.clone());
        let moves = scores.add(&seat.room, 1);
        let moved = Moved {
            player: Player {
                name,
                x: seat.x,
                y: seat.y,
            },
            room: seat.room,
            moves,
        };
        let _ = ctx.hub().broadcast_group(&moved.room, &moved);
        Ok(())
    }

    #[handler(permission = 2)]
    fn kick(request: Kick, hub: Hub) -> Result<(), HandlerError> {
        let mut kicked = 0;
        for connection in hub
            .connection_ids()
            .into_iter()
            .filter_map(|id| hub.connection(id))
        {
            if connection
                .store()
                .get::<Name>()
                .is_some_and(|Name(name)| name == request.name)
            {
                connection.kick("kicked by an admin");
                kicked += 1;
            }
        }
        if kicked == 0 {
            return Err(HandlerError::new(
                errors::NO_SUCH_PLAYER,
                "nobody of that name",
            ));
        }
        Ok(())
    }
}

/// The players of `room` on this server, by name.
fn players_in(hub: &Hub, room: &str) -> Vec<Player> {
    let mut players: Vec<Player> = hub
        .members(room)
        .into_iter()
        .filter_map(|id| hub.connection(id))
        .filter_map(|member| {
            let Name(name) = member.store().get::<Name>()?;
            let seat = member.store().get::<Seat>()?;
            Some(Player {
                name,
                x: seat.x,
                y: seat.y,
            })
        })
        .collect();
    players.sort_by(|a, b| a.name.cmp(&b.name));
    players
}

/// Takes `connection` out of its room, if it is in one, and tells the room.
fn leave_room(connection: &ConnectionHandle, name: &str) {
    let Some(seat) = connection.store().remove::<Seat>() else {
        return;
    };
    let hub = connection.hub();
    hub.leave(&seat.room, connection.id());
    let left = Left {
        room: seat.room,
        name: name.to_owned(),
    };
    let _ = hub.broadcast_group(&left.room, &left);
}

/// Adds the game to `builder`: the controller, the pushes it sends (declared
/// for the schema, docs/SCHEMA.md), the shared state, and the disconnect
/// hook that tells a room when a player goes.
pub fn serve(builder: ServerBuilder, settings: Settings) -> ServerBuilder {
    builder
        .controller(RoomsController)
        .declare_push::<Moved>()
        .declare_push::<Left>()
        .state(settings)
        .state(Scores::default())
        .on_disconnect(|connection, _cause| {
            if let Some(Name(name)) = connection.store().get::<Name>() {
                leave_room(connection, &name);
            }
        })
}
