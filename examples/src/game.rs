//! The game service: an authoritative server built on
//! [`ternio::room`]: one [`Room`] per game room, ticking at 30 Hz, and the
//! bots that `examples/game.rs --bots N` runs against it.
//!
//! - Players join a room with a request on the stream ([`JoinGame`] →
//!   [`Welcome`]); the handler makes their connection a member of the
//!   room's [`Room`] (started on first use, at most [`MAX_ROOMS`], each of
//!   at most [`MAX_PLAYERS`]).
//! - They steer with [`Input`], commands sent fire-and-forget on the
//!   stream (`client.send`, request id 0: in order, no reply). The handler
//!   queues them in the room ([`Room::input`]: at most 64 a player between
//!   two ticks); it moves nobody.
//! - The simulation ([`Arena`], a [`Simulation`]) runs on the room's task:
//!   each tick it applies every player's inputs in the order sent, moves
//!   everyone, and broadcasts one [`Snapshot`] to the room. Snapshots are
//!   `#[packet(unreliable)]`: they go by datagram to a player that bound a
//!   datagram channel (the bots do, over a secure session), on the stream
//!   to one that did not; `droppable` too, so on the stream a player whose
//!   connection falls behind misses snapshots (the next one replaces them)
//!   instead of being disconnected ([`SlowConsumerPolicy::DropDroppable`]).
//!
//! The room's task owns each room's world: handlers and ticks share no
//! lock over it. What the game keeps beside the rooms (who plays where, and
//! what the last snapshot measured) is behind short mutexes.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ternio::protocol::datagram::DATAGRAM_OVERHEAD;
use ternio::protocol::frame::{self, Flags, Framing, Header};
use ternio::protocol::{Encode, codec};
use ternio::room::{Inputs, Room, RoomStats, Simulation, Snapshots, TickRate};
use ternio::{
    CloseCause, Codec, ConnectionHandle, ConnectionId, Context, HandlerError, Hub, Packet,
    ServerBuilder, SlowConsumerPolicy, State, packet_controller,
};
use ternio_client::{Client, ClientConfig, ClientError, SecureConfig};
use tokio::time::MissedTickBehavior;

/// Ticks per second of the simulation.
pub const TICK_RATE: u32 = 30;
/// The arena is a square, `0.0..=ARENA` on both axes.
pub const ARENA: f32 = 100.0;
/// How far a player moves per second, in arena units.
pub const SPEED: f32 = 20.0;
/// Players a room takes: a snapshot of that many still fits in one
/// datagram of the default 1,200 bytes ([`snapshot_datagram_len`]).
pub const MAX_PLAYERS: usize = 64;
/// Rooms the server runs at most (each is a task that ticks).
pub const MAX_ROOMS: usize = 64;
/// Bytes of pushes that may wait for one connection (its outbox): about a
/// second of snapshots on the stream for a full room. A snapshot older
/// than that is worthless, so past it they are dropped.
pub const OUTBOX_BYTES: usize = 32 * 1024;
/// How many departures [`Game::departures`] keeps (the latest).
pub const MAX_DEPARTURES: usize = 4096;

/// 0x0201: joins the game in a room; answered with [`Welcome`].
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0201, response = Welcome)]
pub struct JoinGame {
    /// The player's name: 1 to 32 characters.
    pub name: String,
    /// The room to play in: 1 to 64 characters.
    pub room: String,
}

/// 0x0202: the answer to [`JoinGame`].
#[derive(Debug, Clone, PartialEq, Packet)]
#[packet(opcode = 0x0202)]
pub struct Welcome {
    /// The player's id in snapshots.
    pub player: u32,
    /// Ticks (and snapshots) per second.
    pub tick_rate: u16,
    /// The arena's side.
    pub arena: f32,
}

/// 0x0203, sent fire-and-forget on the stream: which way the player wants
/// to go, from the tick that takes it on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0203, response = ())]
pub struct Input {
    /// Counts up with each input; snapshots tell the last one applied.
    pub seq: u32,
    /// -1 (left), 0 or 1 (right); other values count as their sign.
    pub dx: i8,
    /// -1 (down), 0 or 1 (up).
    pub dy: i8,
}

/// One player in a [`Snapshot`].
#[derive(Debug, Clone, Copy, PartialEq, Codec)]
pub struct PlayerState {
    /// The player's id (from [`Welcome`]).
    pub id: u32,
    /// Position, `0.0..=ARENA`.
    pub x: f32,
    /// Position, `0.0..=ARENA`.
    pub y: f32,
    /// The `seq` of the last [`Input`] the server applied.
    pub last_input: u32,
}

/// 0x0210, pushed to a room every tick: where everyone is. Unreliable: by
/// datagram where the player bound a channel, so a lost one is simply
/// replaced by the next; droppable: on the stream, a connection that falls
/// behind misses some.
#[derive(Debug, Clone, PartialEq, Packet)]
#[packet(opcode = 0x0210, droppable, unreliable)]
pub struct Snapshot {
    /// The room's tick, counting up by one from the room's start.
    pub tick: u32,
    /// Every player of the room.
    pub players: Vec<PlayerState>,
}

impl Snapshot {
    /// Bytes of this snapshot as a TCP frame: length prefix, header, body.
    pub fn wire_len(&self) -> u64 {
        (4 + frame::HEADER_LEN + self.encoded_len()) as u64
    }

    /// Bytes of this snapshot as a datagram (the UDP payload: token,
    /// sequence number, header, body, tag; UDP and IP headers not counted).
    pub fn datagram_len(&self) -> u64 {
        (DATAGRAM_OVERHEAD + frame::HEADER_LEN + self.encoded_len()) as u64
    }
}

/// Bytes of a snapshot's body for a room of `players`: the tick (`u32`),
/// the list's count (a varint: one byte up to 127 players), then each
/// [`PlayerState`].
fn snapshot_body_len(players: usize) -> usize {
    4 + codec::len_varint_len(players) + players * PLAYER_STATE_LEN
}

/// Bytes of a snapshot of a room of `players` as a TCP frame: what
/// [`Snapshot::wire_len`] gives, worked out from the layout: the 4-byte
/// length prefix, the 7-byte header, then the body (the tick, the count,
/// each [`PlayerState`]).
pub fn snapshot_len(players: usize) -> u64 {
    (4 + frame::HEADER_LEN + snapshot_body_len(players)) as u64
}

/// Bytes of a snapshot of a room of `players` as a datagram: what
/// [`Snapshot::datagram_len`] gives: the datagram's own
/// [`DATAGRAM_OVERHEAD`] (token, sequence number, tag), the header, the body.
pub fn snapshot_datagram_len(players: usize) -> u64 {
    (DATAGRAM_OVERHEAD + frame::HEADER_LEN + snapshot_body_len(players)) as u64
}

/// Bytes of one [`PlayerState`] in a snapshot: id, x, y, last input.
pub const PLAYER_STATE_LEN: usize = 4 + 4 + 4 + 4;

/// Bytes of an [`Input`] as a TCP frame: length prefix, header, `seq`,
/// `dx`, `dy`.
pub const INPUT_LEN: usize = 4 + frame::HEADER_LEN + 4 + 1 + 1;

/// Error codes of the game service.
pub mod errors {
    use ternio::AppCode;

    /// The name or room is empty or too long.
    pub const BAD_NAME: AppCode = AppCode::new(100);
    /// [`Input`](super::Input) before [`JoinGame`](super::JoinGame).
    pub const NOT_JOINED: AppCode = AppCode::new(101);
    /// A second [`JoinGame`](super::JoinGame) on one connection.
    pub const ALREADY_JOINED: AppCode = AppCode::new(102);
    /// The room has [`MAX_PLAYERS`](super::MAX_PLAYERS) players, or the
    /// server [`MAX_ROOMS`](super::MAX_ROOMS) rooms.
    pub const FULL: AppCode = AppCode::new(103);
    /// More inputs than a room queues between two ticks (64): this one
    /// was not queued.
    pub const TOO_MANY_INPUTS: AppCode = AppCode::new(104);
}

/// A player as the game knows it outside the rooms.
#[derive(Debug, Clone)]
struct Seat {
    id: u32,
    name: String,
    room: Room<Input>,
}

/// One player of a room's world.
#[derive(Debug, Clone, Copy)]
struct Player {
    id: u32,
    x: f32,
    y: f32,
    dx: i8,
    dy: i8,
    last_input: u32,
}

/// What the rooms measured, all rooms together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GameStats {
    /// Ticks run ([`RoomStats::ticks`](ternio::room::RoomStats::ticks)).
    pub ticks: u64,
    /// Ticks skipped because a room's task woke up more than a period late.
    pub skipped: u64,
    /// Ticks that started more than a tenth of a period late.
    pub late: u64,
    /// Ticks whose work took longer than a period.
    pub overruns: u64,
    /// Snapshots queued, one per member per tick.
    pub queued: u64,
    /// Of those, the ones that went by datagram.
    pub by_datagram: u64,
    /// Snapshots dropped for members that were behind (on the stream).
    pub dropped: u64,
    /// Snapshots that found their member disconnecting.
    pub failed: u64,
    /// Inputs refused because a player had 64 waiting.
    pub inputs_refused: u64,
    /// Bytes of the snapshots queued (as datagrams or TCP frames, by the
    /// way each went).
    pub bytes: u64,
}

impl GameStats {
    /// Adds one room's figures.
    fn add(&mut self, stats: &RoomStats) {
        self.ticks += stats.ticks;
        self.skipped += stats.skipped;
        self.late += stats.late_ticks;
        self.overruns += stats.overruns;
        self.queued += stats.snapshots_sent;
        self.by_datagram += stats.snapshots_by_datagram;
        self.dropped += stats.snapshots_dropped;
        self.failed += stats.snapshots_failed;
        self.inputs_refused += stats.inputs_refused;
    }
}

/// A player who left: what its connection missed, and why it closed.
#[derive(Debug, Clone)]
pub struct Departure {
    /// The player's name.
    pub name: String,
    /// Snapshots the server dropped for it
    /// ([`ConnectionHandle::dropped_pushes`]).
    pub dropped: u64,
    /// Why its connection closed.
    pub cause: CloseCause,
}

#[derive(Default)]
struct GameShared {
    /// The rooms by name.
    rooms: Mutex<BTreeMap<String, Room<Input>>>,
    /// Who plays, by connection.
    seats: Mutex<HashMap<ConnectionId, Seat>>,
    next_id: Mutex<u32>,
    /// Bytes of the snapshots queued, by the ticks' own count.
    bytes: Mutex<u64>,
    /// The figures of the rooms closed when their last player left.
    closed: Mutex<GameStats>,
    /// The latest [`MAX_DEPARTURES`] departures.
    departures: Mutex<std::collections::VecDeque<Departure>>,
}

/// The game: its rooms and who plays in them. Cheap to clone; give one
/// clone to the server ([`serve`]) and keep one to read its figures.
#[derive(Clone, Default)]
pub struct Game {
    shared: Arc<GameShared>,
}

impl std::fmt::Debug for Game {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Game")
            .field("players", &self.players().len())
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Game {
    /// No room yet; each starts with its first player.
    pub fn new() -> Self {
        Self::default()
    }

    /// What the rooms measured so far, all rooms together.
    pub fn stats(&self) -> GameStats {
        // Under the rooms' lock, which a closing room holds until its
        // figures are in `closed`: a room is counted once, never missed.
        let rooms = lock(&self.shared.rooms);
        let mut total = GameStats {
            bytes: *lock(&self.shared.bytes),
            ..*lock(&self.shared.closed)
        };
        for room in rooms.values() {
            total.add(&room.stats());
        }
        total
    }

    /// The rooms' names.
    pub fn rooms(&self) -> Vec<String> {
        lock(&self.shared.rooms).keys().cloned().collect()
    }

    /// The players now: their connection, id and name.
    pub fn players(&self) -> Vec<(ConnectionId, u32, String)> {
        let mut players: Vec<_> = lock(&self.shared.seats)
            .iter()
            .map(|(connection, seat)| (*connection, seat.id, seat.name.clone()))
            .collect();
        players.sort_by_key(|(_, id, _)| *id);
        players
    }

    /// The players who left, in the order they did (the latest
    /// [`MAX_DEPARTURES`]).
    pub fn departures(&self) -> Vec<Departure> {
        lock(&self.shared.departures).iter().cloned().collect()
    }

    /// Stops every room (their tasks end); players stay connected.
    pub fn stop(&self) {
        for room in lock(&self.shared.rooms).values() {
            room.stop();
        }
    }

    /// Seats `connection` in the room `name`, starting the room on first
    /// use (on `ctx`'s hub).
    fn join(&self, ctx: &Context, name: String, room_name: &str) -> Result<u32, HandlerError> {
        let connection = ctx.connection_id();
        let mut seats = lock(&self.shared.seats);
        if seats.contains_key(&connection) {
            return Err(HandlerError::new(
                errors::ALREADY_JOINED,
                "already in the game",
            ));
        }
        let room = {
            let mut rooms = lock(&self.shared.rooms);
            if let Some(room) = rooms.get(room_name) {
                room.clone()
            } else {
                if rooms.len() >= MAX_ROOMS {
                    return Err(HandlerError::new(errors::FULL, "too many rooms"));
                }
                let room = Room::start(
                    ctx.hub(),
                    room_name,
                    TickRate::hz(TICK_RATE),
                    Arena::new(self.clone(), ctx.hub()),
                );
                rooms.insert(room_name.to_owned(), room.clone());
                room
            }
        };
        // Counted under the seats' lock, which every join takes: two joins
        // at once cannot both take the last place.
        let seated = seats
            .values()
            .filter(|seat| seat.room.name() == room_name)
            .count();
        if seated >= MAX_PLAYERS {
            return Err(HandlerError::new(errors::FULL, "the room is full"));
        }
        let id = {
            let mut next = lock(&self.shared.next_id);
            *next += 1;
            *next - 1
        };
        // Seated before joining: the room's Arena::join reads the seat.
        seats.insert(
            connection,
            Seat {
                id,
                name,
                room: room.clone(),
            },
        );
        drop(seats);
        if !room.join(connection) {
            // The connection closed meanwhile, or the room stopped: leave
            // no ghost, and no empty room.
            let mut seats = lock(&self.shared.seats);
            seats.remove(&connection);
            self.close_if_empty(&seats, room_name);
            return Err(HandlerError::new(errors::NOT_JOINED, "the room closed"));
        }
        Ok(id)
    }

    /// Stops and forgets the room `name` when no seat is left in it (under
    /// the seats' lock, which every join holds while it seats a player): a
    /// client cannot keep rooms ticking for nobody, nor use up
    /// [`MAX_ROOMS`] for good by joining rooms and leaving.
    fn close_if_empty(&self, seats: &HashMap<ConnectionId, Seat>, name: &str) {
        if seats.values().any(|seat| seat.room.name() == name) {
            return;
        }
        // The room leaves the map and its figures enter `closed` under one
        // hold of the rooms' lock, which `stats` takes too.
        let mut rooms = lock(&self.shared.rooms);
        if let Some(room) = rooms.remove(name) {
            room.stop();
            lock(&self.shared.closed).add(&room.stats());
        }
    }

    fn input(&self, connection: ConnectionId, input: Input) -> Result<(), HandlerError> {
        let room = match lock(&self.shared.seats).get(&connection) {
            Some(seat) => seat.room.clone(),
            None => return Err(HandlerError::new(errors::NOT_JOINED, "join the game first")),
        };
        room.input(connection, input)
            .map_err(|error| HandlerError::new(errors::TOO_MANY_INPUTS, error.to_string()))
    }

    fn seat_id(&self, connection: ConnectionId) -> Option<u32> {
        lock(&self.shared.seats)
            .get(&connection)
            .map(|seat| seat.id)
    }

    /// The disconnect hook: the player's seat goes (its room sees the
    /// connection closed at its next tick), and what its connection missed
    /// is kept.
    fn disconnected(&self, connection: &ConnectionHandle, cause: &CloseCause) {
        let mut seats = lock(&self.shared.seats);
        let Some(seat) = seats.remove(&connection.id()) else {
            return;
        };
        self.close_if_empty(&seats, seat.room.name());
        drop(seats);
        let mut departures = lock(&self.shared.departures);
        if departures.len() == MAX_DEPARTURES {
            departures.pop_front();
        }
        departures.push_back(Departure {
            name: seat.name,
            dropped: connection.dropped_pushes(),
            cause: cause.clone(),
        });
    }
}

/// One room's world: a [`Simulation`] its [`Room`] runs at [`TICK_RATE`].
///
/// Every tick moves each player by a fixed `1/TICK_RATE` s along its
/// latest direction: the room's clock skips ticks it cannot run in time
/// rather than bunching them (see [`ternio::room`]), so the world runs
/// slower than the wall clock only while the server is overloaded, and
/// tick numbers stay consecutive (a gap a player sees is a snapshot lost
/// on the way, not a skipped tick).
pub struct Arena {
    game: Game,
    hub: Hub,
    players: BTreeMap<ConnectionId, Player>,
    dt: f32,
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arena")
            .field("players", &self.players.len())
            .finish_non_exhaustive()
    }
}

impl Arena {
    fn new(game: Game, hub: Hub) -> Self {
        Self {
            game,
            hub,
            players: BTreeMap::new(),
            dt: 1.0 / TICK_RATE as f32,
        }
    }
}

impl Simulation for Arena {
    type Input = Input;
    type Snapshot = Snapshot;

    fn join(&mut self, member: ConnectionId) {
        // Seated by Game::join before it joined; a connection that closed
        // since has no seat: it leaves at the next tick.
        let Some(id) = self.game.seat_id(member) else {
            return;
        };
        // Spread the players over the arena, away from the walls.
        let x = 10.0 + (id.wrapping_mul(37) % 80) as f32;
        let y = 10.0 + (id.wrapping_mul(61) % 80) as f32;
        self.players.insert(
            member,
            Player {
                id,
                x,
                y,
                dx: 0,
                dy: 0,
                last_input: 0,
            },
        );
    }

    fn leave(&mut self, member: ConnectionId) {
        self.players.remove(&member);
    }

    fn tick(&mut self, tick: u64, inputs: &mut Inputs<Input>, out: &mut Snapshots<Snapshot>) {
        for (member, input) in inputs.take_all() {
            // One player's inputs come in the order sent; an old one
            // changes nothing.
            if let Some(player) = self.players.get_mut(&member)
                && input.seq > player.last_input
            {
                player.dx = input.dx.signum();
                player.dy = input.dy.signum();
                player.last_input = input.seq;
            }
        }
        let mut players = Vec::with_capacity(self.players.len());
        for player in self.players.values_mut() {
            let (dx, dy) = (f32::from(player.dx), f32::from(player.dy));
            // Diagonals are no faster than straight lines.
            let norm = (dx * dx + dy * dy).sqrt().max(1.0);
            player.x = (player.x + dx / norm * SPEED * self.dt).clamp(0.0, ARENA);
            player.y = (player.y + dy / norm * SPEED * self.dt).clamp(0.0, ARENA);
            players.push(PlayerState {
                id: player.id,
                x: player.x,
                y: player.y,
                last_input: player.last_input,
            });
        }
        players.sort_by_key(|player| player.id);
        let snapshot = Snapshot {
            tick: tick as u32,
            players,
        };
        // What this tick's snapshots weigh, each by the way it will go
        // (counted here, before sending: a member that closes meanwhile
        // is counted too).
        let bytes: u64 = self
            .players
            .keys()
            .filter_map(|member| self.hub.connection(*member))
            .map(|connection| {
                if connection.has_datagrams() {
                    snapshot.datagram_len()
                } else {
                    snapshot.wire_len()
                }
            })
            .sum();
        *lock(&self.game.shared.bytes) += bytes;
        out.broadcast(snapshot);
    }
}

/// Serves the game packets. Register it with [`serve`].
#[derive(Debug, Default)]
pub struct GameController;

#[packet_controller(explicit)]
impl GameController {
    fn join_game(
        request: JoinGame,
        ctx: &Context,
        game: State<Game>,
    ) -> Result<Welcome, HandlerError> {
        let name = request.name.trim().to_owned();
        let room = request.room.trim().to_owned();
        if name.is_empty() || name.chars().count() > 32 {
            return Err(HandlerError::new(
                errors::BAD_NAME,
                "a name has 1 to 32 characters",
            ));
        }
        if room.is_empty() || room.chars().count() > 64 {
            return Err(HandlerError::new(
                errors::BAD_NAME,
                "a room has 1 to 64 characters",
            ));
        }
        let player = game.join(ctx, name, &room)?;
        Ok(Welcome {
            player,
            tick_rate: TICK_RATE as u16,
            arena: ARENA,
        })
    }

    /// Sent fire-and-forget: an error goes back as an error frame with id 0.
    fn input(request: Input, ctx: &Context, game: State<Game>) -> Result<(), HandlerError> {
        game.input(ctx.connection_id(), request)
    }
}

/// Adds the game to `builder`: the [`GameController`], `game` as shared
/// state, a disconnect hook that takes the player's seat (and keeps its
/// connection's drop count, see [`Game::departures`]), and the outbound
/// limits a game wants: droppable snapshots on the stream are dropped for
/// a connection that is behind ([`SlowConsumerPolicy::DropDroppable`]),
/// past [`OUTBOX_BYTES`] waiting. Add a UDP listener
/// (`ServerBuilder::map_udp`) for the snapshots to go by datagram.
pub fn serve(builder: ServerBuilder, game: Game) -> ServerBuilder {
    builder
        .controller(GameController)
        .declare_push::<Snapshot>()
        .state(game)
        .slow_consumer(SlowConsumerPolicy::DropDroppable)
        .max_outbox_bytes(OUTBOX_BYTES)
        .on_disconnect(|connection: &ConnectionHandle, cause: &CloseCause| {
            if let Some(game) = connection.state::<Game>() {
                game.disconnected(connection, cause);
            }
        })
}

/// How a bot plays.
#[derive(Debug, Clone)]
pub struct BotConfig {
    /// Its name.
    pub name: String,
    /// Its room.
    pub room: String,
    /// How long it plays after joining.
    pub duration: Duration,
    /// Inputs per second (sent fire-and-forget).
    pub input_rate: u32,
    /// Seeds its choice of directions.
    pub seed: u64,
    /// Whether it binds a datagram channel (over a secure session), for
    /// its snapshots to come by datagram.
    pub datagrams: bool,
}

impl BotConfig {
    /// Bot number `index` in `room`, playing for `duration` with one
    /// input per tick.
    pub fn new(index: usize, room: &str, duration: Duration) -> Self {
        Self {
            name: format!("bot-{index}"),
            room: room.to_owned(),
            duration,
            input_rate: TICK_RATE,
            seed: index as u64 + 1,
            datagrams: true,
        }
    }
}

/// What a bot saw.
#[derive(Debug, Clone, Default)]
pub struct BotReport {
    /// Its name.
    pub name: String,
    /// Its player id.
    pub player: u32,
    /// Snapshots received.
    pub snapshots: u64,
    /// Ticks missing between consecutive snapshots received: snapshots
    /// dropped by the server (behind) or by the bot's subscription buffer.
    pub gaps: u64,
    /// Snapshots whose tick was not after the one before (should be 0).
    pub out_of_order: u64,
    /// Snapshots lost because the bot's subscription buffer was full
    /// ([`Subscription::dropped`](ternio_client::Subscription::dropped)).
    pub buffer_dropped: u64,
    /// Bytes of the snapshots received: as datagrams (the UDP payload)
    /// when the bot bound a channel, as TCP frames otherwise.
    pub bytes: u64,
    /// Whether it had a datagram channel.
    pub datagrams: bool,
    /// The largest snapshot received, in the same bytes as `bytes`.
    pub largest_snapshot: u64,
    /// Inputs sent.
    pub inputs: u64,
    /// The highest input `seq` that snapshots said was applied.
    pub acked_input: u32,
    /// How far the bot's own player travelled, as the snapshots show it.
    pub travelled: f32,
    /// The most players seen in one snapshot.
    pub most_players: usize,
    /// The first and last tick received.
    pub ticks: Option<(u32, u32)>,
}

/// A small xorshift generator: bots need varied directions, not good randomness.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// `direction` along one axis, turned back when `at` is against the wall it heads to.
fn away_from_walls(at: f32, direction: i8) -> i8 {
    if (at <= 1.0 && direction < 0) || (at >= ARENA - 1.0 && direction > 0) {
        -direction
    } else {
        direction
    }
}

/// Connects a bot over TCP to the game at `address` (with
/// `config.datagrams`, over a secure session, and binds a datagram
/// channel: the server needs a UDP listener), joins, then for
/// `config.duration` sends inputs fire-and-forget on the stream (a new
/// direction about every second) and reads snapshots through
/// `client.subscribe`, whichever way they come.
pub async fn run_bot(address: SocketAddr, config: BotConfig) -> Result<BotReport, ClientError> {
    let client = if config.datagrams {
        let mut secure = ClientConfig::default();
        secure.secure = Some(SecureConfig::anonymous());
        let client = Client::connect_tcp_with(address, secure).await?;
        client.bind_datagrams().await?;
        client
    } else {
        Client::connect_tcp(address).await?
    };
    // Subscribed before joining: the first snapshot after the join is seen.
    let mut snapshots = client.subscribe::<Snapshot>();
    let welcome: Welcome = client
        .request_async(&JoinGame {
            name: config.name.clone(),
            room: config.room.clone(),
        })
        .await?;
    let mut report = BotReport {
        name: config.name.clone(),
        player: welcome.player,
        datagrams: client.has_datagrams(),
        ..BotReport::default()
    };
    let mut random = config.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut inputs = tokio::time::interval(Duration::from_secs(1) / config.input_rate.max(1));
    inputs.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let deadline = tokio::time::sleep(config.duration);
    tokio::pin!(deadline);
    let (mut dx, mut dy) = (0i8, 0i8);
    let mut seq = 0u32;
    let mut position: Option<(f32, f32)> = None;
    loop {
        tokio::select! {
            () = &mut deadline => break,
            _ = inputs.tick() => {
                if seq.is_multiple_of(config.input_rate.max(1)) {
                    // A new direction, never standing still.
                    let choice = next_random(&mut random) % 8;
                    let (x, y) = [(1, 0), (1, 1), (0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, -1)]
                        [choice as usize];
                    (dx, dy) = (x, y);
                }
                // Turn back at the walls rather than push against them.
                if let Some((x, y)) = position {
                    dx = away_from_walls(x, dx);
                    dy = away_from_walls(y, dy);
                }
                seq += 1;
                client.send(&Input { seq, dx, dy })?;
                report.inputs += 1;
            }
            snapshot = snapshots.next() => {
                let Some(snapshot) = snapshot else {
                    return Err(ClientError::Closed(
                        client.close_reason().unwrap_or(ternio_client::CloseReason::PeerClosed),
                    ));
                };
                report.snapshots += 1;
                let size = if report.datagrams {
                    snapshot.datagram_len()
                } else {
                    snapshot.wire_len()
                };
                report.bytes += size;
                report.largest_snapshot = report.largest_snapshot.max(size);
                report.ticks = Some(match report.ticks {
                    None => (snapshot.tick, snapshot.tick),
                    Some((first, last)) => {
                        if snapshot.tick > last {
                            report.gaps += u64::from(snapshot.tick - last - 1);
                        } else {
                            report.out_of_order += 1;
                        }
                        (first, last.max(snapshot.tick))
                    }
                });
                report.most_players = report.most_players.max(snapshot.players.len());
                if let Some(me) = snapshot.players.iter().find(|p| p.id == welcome.player) {
                    if let Some((x, y)) = position {
                        report.travelled += ((me.x - x).powi(2) + (me.y - y).powi(2)).sqrt();
                    }
                    position = Some((me.x, me.y));
                    report.acked_input = report.acked_input.max(me.last_input);
                }
            }
        }
    }
    report.buffer_dropped = snapshots.dropped();
    client.close().await;
    Ok(report)
}

/// A player that joins and then never reads (see [`stalled_player`]).
/// Dropping it closes its connection.
#[derive(Debug)]
pub struct StalledPlayer {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for StalledPlayer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Appends `packet` to `out` as a TCP frame.
fn tcp_frame<P: Packet>(out: &mut ternio::protocol::BytesMut, request_id: u32, packet: &P) {
    let header = Header::new(P::OPCODE, Flags::NONE, request_id);
    frame::write_frame(out, Framing::LengthPrefixed, header, packet, usize::MAX)
        .expect("no frame size limit");
}

/// A player that joins and then never reads, with a small receive buffer:
/// once the kernel's buffers for its connection are full (several MB on
/// loopback), the server's outbox for it fills up and its
/// snapshots are dropped (counted in `dropped_pushes()`), while the other
/// players are not held up. It sends an input every second, so the idle
/// timeout leaves it alone; the server's write timeout (30 s in which
/// nothing of what waits for it could be written) disconnects it in the end.
///
/// It speaks the wire contract by hand: the SDK always reads.
pub async fn stalled_player(
    address: SocketAddr,
    name: &str,
    room: &str,
) -> std::io::Result<StalledPlayer> {
    use tokio::io::AsyncWriteExt;
    let socket = if address.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_recv_buffer_size(4096)?;
    let mut stream = socket.connect(address).await?;
    let mut out = ternio::protocol::BytesMut::new();
    let join = JoinGame {
        name: name.to_owned(),
        room: room.to_owned(),
    };
    tcp_frame(&mut out, 1, &join);
    stream.write_all(&out).await?;
    let task = tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(1));
        for seq in 1.. {
            every.tick().await;
            out.clear();
            tcp_frame(&mut out, 0, &Input { seq, dx: 1, dy: 0 });
            if stream.write_all(&out).await.is_err() {
                return;
            }
        }
    });
    Ok(StalledPlayer { task })
}
