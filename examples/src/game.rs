//! The game service: an authoritative server with a fixed 30 Hz tick, and
//! the bots that `examples/game.rs --bots N` runs against it.
//!
//! - Players join a room with a request ([`JoinGame`] → [`Welcome`]); the
//!   room is a hub group.
//! - They steer with [`Input`], sent fire-and-forget (`client.send`, request
//!   id 0: no reply, no waiting). The handler only records the latest
//!   input; it moves nobody.
//! - The simulation ([`simulate`]) runs on its own task beside the
//!   dispatcher, on a tokio interval: each tick it moves every player by
//!   its latest input, then broadcasts one [`Snapshot`] per room. Snapshots
//!   are `droppable`, and the server runs with
//!   [`SlowConsumerPolicy::DropDroppable`]: a player whose connection falls
//!   behind misses snapshots (the next one replaces them anyway) instead of
//!   being disconnected or holding up the others.
//!
//! Handlers and the tick share the [`Game`] (given to the server as state)
//! and touch its world under one short mutex: handlers write inputs, the
//! tick reads them and writes positions. Encoding and queueing the
//! snapshots happens after the lock is released.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use hdrhistogram::Histogram;
use ternio::protocol::frame::{self, Flags, Framing, Header};
use ternio::protocol::{Encode, codec};
use ternio::{
    CloseCause, Codec, ConnectionHandle, ConnectionId, Context, HandlerError, Hub, Packet,
    ServerBuilder, SlowConsumerPolicy, State, packet_controller,
};
use ternio_client::{Client, ClientError};
use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};

/// Ticks per second of the simulation.
pub const TICK_RATE: u32 = 30;
/// The arena is a square, `0.0..=ARENA` on both axes.
pub const ARENA: f32 = 100.0;
/// How far a player moves per second, in arena units.
pub const SPEED: f32 = 20.0;
/// Bytes of pushes that may wait for one connection (its outbox).
/// About a second of snapshots for a few dozen players: a snapshot older
/// than that is worthless, so past it they are dropped.
pub const OUTBOX_BYTES: usize = 32 * 1024;

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

/// 0x0203, sent fire-and-forget: which way the player wants to go, from
/// now until the next input.
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

/// 0x0210, pushed to a room every tick: where everyone is. Droppable: a
/// connection that falls behind misses some, and the next one replaces them.
#[derive(Debug, Clone, PartialEq, Packet)]
#[packet(opcode = 0x0210, droppable)]
pub struct Snapshot {
    /// The tick, counting up by one from the server's start.
    pub tick: u32,
    /// Every player of the room.
    pub players: Vec<PlayerState>,
}

impl Snapshot {
    /// Bytes of this snapshot as a TCP frame: length prefix, header, body.
    pub fn wire_len(&self) -> u64 {
        (4 + frame::HEADER_LEN + self.encoded_len()) as u64
    }
}

/// Bytes of a snapshot of a room of `players` as a TCP frame: what
/// [`Snapshot::wire_len`] gives, worked out from the layout: the 4-byte
/// length prefix, the 7-byte header, the tick (`u32`), the list's count (a
/// varint: one byte up to 127 players), then each [`PlayerState`].
pub fn snapshot_len(players: usize) -> u64 {
    (4 + frame::HEADER_LEN + 4 + codec::len_varint_len(players) + players * PLAYER_STATE_LEN) as u64
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
}

/// One player of the world.
#[derive(Debug, Clone)]
struct Player {
    id: u32,
    name: String,
    room: Arc<str>,
    x: f32,
    y: f32,
    dx: i8,
    dy: i8,
    last_input: u32,
}

/// Everything the simulation owns.
#[derive(Debug, Default)]
struct World {
    players: HashMap<ConnectionId, Player>,
    next_id: u32,
    tick: u32,
}

/// What the tick loop measured.
#[derive(Debug, Clone)]
pub struct TickStats {
    /// Ticks simulated.
    pub ticks: u64,
    /// Ticks skipped because the loop woke up more than a period late
    /// (see [`simulate`]).
    pub missed: u64,
    /// Time each tick took (simulate, encode, queue), in microseconds.
    pub tick_time_us: Histogram<u64>,
    /// How late each tick started after its scheduled instant, in microseconds.
    pub lateness_us: Histogram<u64>,
    /// Snapshots queued, one per member per tick ([`ternio::Delivery::queued`]).
    pub queued: u64,
    /// Snapshots dropped for members that were behind ([`ternio::Delivery::dropped`]).
    pub dropped: u64,
    /// Snapshots that found their member disconnecting ([`ternio::Delivery::failed`]).
    pub failed: u64,
    /// Bytes of the snapshots queued, as TCP frames.
    pub bytes: u64,
}

impl Default for TickStats {
    fn default() -> Self {
        let histogram = || Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds");
        Self {
            ticks: 0,
            missed: 0,
            tick_time_us: histogram(),
            lateness_us: histogram(),
            queued: 0,
            dropped: 0,
            failed: 0,
            bytes: 0,
        }
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

struct GameShared {
    world: Mutex<World>,
    stats: Mutex<TickStats>,
    departures: Mutex<Vec<Departure>>,
}

/// The game: its world and the tick loop's measurements. Cheap to clone;
/// give one clone to the server ([`serve`]) and one to [`simulate`].
#[derive(Clone)]
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

impl Default for Game {
    fn default() -> Self {
        Self::new()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Game {
    /// An empty world at tick 0.
    pub fn new() -> Self {
        Self {
            shared: Arc::new(GameShared {
                world: Mutex::default(),
                stats: Mutex::default(),
                departures: Mutex::default(),
            }),
        }
    }

    /// What the tick loop measured so far.
    pub fn stats(&self) -> TickStats {
        lock(&self.shared.stats).clone()
    }

    /// The players now: their connection, id and name.
    pub fn players(&self) -> Vec<(ConnectionId, u32, String)> {
        let world = lock(&self.shared.world);
        let mut players: Vec<_> = world
            .players
            .iter()
            .map(|(connection, player)| (*connection, player.id, player.name.clone()))
            .collect();
        players.sort_by_key(|(_, id, _)| *id);
        players
    }

    fn join(
        &self,
        connection: ConnectionId,
        name: String,
        room: &str,
    ) -> Result<u32, HandlerError> {
        let mut world = lock(&self.shared.world);
        if world.players.contains_key(&connection) {
            return Err(HandlerError::new(
                errors::ALREADY_JOINED,
                "already in the game",
            ));
        }
        let id = world.next_id;
        world.next_id += 1;
        // Spread the players over the arena, away from the walls.
        let x = 10.0 + (id.wrapping_mul(37) % 80) as f32;
        let y = 10.0 + (id.wrapping_mul(61) % 80) as f32;
        world.players.insert(
            connection,
            Player {
                id,
                name,
                room: room.into(),
                x,
                y,
                dx: 0,
                dy: 0,
                last_input: 0,
            },
        );
        Ok(id)
    }

    fn input(&self, connection: ConnectionId, input: Input) -> Result<(), HandlerError> {
        let mut world = lock(&self.shared.world);
        let Some(player) = world.players.get_mut(&connection) else {
            return Err(HandlerError::new(errors::NOT_JOINED, "join the game first"));
        };
        // Inputs of one connection arrive in order; an old one changes nothing.
        if input.seq > player.last_input {
            player.dx = input.dx.signum();
            player.dy = input.dy.signum();
            player.last_input = input.seq;
        }
        Ok(())
    }

    /// The players who left, in the order they did.
    pub fn departures(&self) -> Vec<Departure> {
        lock(&self.shared.departures).clone()
    }

    fn leave(&self, connection: ConnectionId) -> Option<Player> {
        lock(&self.shared.world).players.remove(&connection)
    }

    /// The disconnect hook: the player leaves the world, and what its
    /// connection missed is kept.
    fn disconnected(&self, connection: &ConnectionHandle, cause: &CloseCause) {
        if let Some(player) = self.leave(connection.id()) {
            lock(&self.shared.departures).push(Departure {
                name: player.name,
                dropped: connection.dropped_pushes(),
                cause: cause.clone(),
            });
        }
    }

    /// Advances the world by one tick of `dt` seconds; returns each room's
    /// snapshot.
    fn step(&self, dt: f32) -> Vec<(Arc<str>, Snapshot)> {
        let mut world = lock(&self.shared.world);
        world.tick = world.tick.wrapping_add(1);
        let tick = world.tick;
        let mut rooms: HashMap<Arc<str>, Vec<PlayerState>> = HashMap::new();
        for player in world.players.values_mut() {
            let (dx, dy) = (f32::from(player.dx), f32::from(player.dy));
            // Diagonals are no faster than straight lines.
            let norm = (dx * dx + dy * dy).sqrt().max(1.0);
            player.x = (player.x + dx / norm * SPEED * dt).clamp(0.0, ARENA);
            player.y = (player.y + dy / norm * SPEED * dt).clamp(0.0, ARENA);
            rooms
                .entry(Arc::clone(&player.room))
                .or_default()
                .push(PlayerState {
                    id: player.id,
                    x: player.x,
                    y: player.y,
                    last_input: player.last_input,
                });
        }
        rooms
            .into_iter()
            .map(|(room, mut players)| {
                players.sort_by_key(|player| player.id);
                (room, Snapshot { tick, players })
            })
            .collect()
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
        let player = game.join(ctx.connection_id(), name, &room)?;
        // The room is a hub group: the tick broadcasts each room's snapshot to it.
        if !ctx.hub().join(&room, ctx.connection_id()) {
            // The connection closed meanwhile (its disconnect hook may have
            // run already): leave no ghost in the world.
            game.leave(ctx.connection_id());
        }
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
/// state, a disconnect hook that takes the player out of the world (and
/// keeps its connection's drop count, see [`Game::departures`]), and the
/// outbound limits a game wants: droppable snapshots are dropped for a
/// connection that is behind ([`SlowConsumerPolicy::DropDroppable`]), past
/// [`OUTBOX_BYTES`] waiting. Run [`simulate`] beside the server.
pub fn serve(builder: ServerBuilder, game: Game) -> ServerBuilder {
    builder
        .controller(GameController)
        .state(game)
        .slow_consumer(SlowConsumerPolicy::DropDroppable)
        .max_outbox_bytes(OUTBOX_BYTES)
        .on_disconnect(|connection: &ConnectionHandle, cause: &CloseCause| {
            if let Some(game) = connection.state::<Game>() {
                game.disconnected(connection, cause);
            }
        })
}

/// The simulation loop: ticks at [`TICK_RATE`] until `stop` turns true (or
/// its sender is dropped), broadcasting each room's [`Snapshot`] through
/// `hub` (from [`ServerHandle::hub`](ternio::ServerHandle::hub)). It is a
/// task of its own, beside the connections' tasks that run the handlers.
///
/// The interval's [`MissedTickBehavior`] is [`Skip`](MissedTickBehavior::Skip),
/// chosen over the default `Burst` and over `Delay`: when the loop wakes up
/// late by more than a period (a stalled runtime, a long tick), `Burst`
/// would run the missed ticks back to back and queue a burst of snapshots
/// that are stale on arrival, and `Delay` would shift every later tick off
/// the 30 Hz grid for good. `Skip` drops the missed ticks and goes on at
/// the next instant of the grid: every tick steps the world by the same
/// fixed `1/30` s, tick numbers stay consecutive (so a gap a client sees is
/// a snapshot dropped on the way, not a skipped tick), and the world runs
/// slower than the clock only for as long as the server is overloaded.
/// Skipped ticks are counted in [`TickStats::missed`].
pub async fn simulate(game: Game, hub: Hub, mut stop: watch::Receiver<bool>) {
    let period = Duration::from_secs(1) / TICK_RATE;
    let dt = period.as_secs_f32();
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut previous: Option<Instant> = None;
    loop {
        let scheduled = tokio::select! {
            scheduled = interval.tick() => scheduled,
            _ = stop.wait_for(|stop| *stop) => return,
        };
        let started = Instant::now();
        let missed = previous.map_or(0, |previous| {
            let periods = (scheduled - previous).as_secs_f64() / period.as_secs_f64();
            (periods.round() as u64).saturating_sub(1)
        });
        previous = Some(scheduled);

        let snapshots = game.step(dt);
        let (mut queued, mut dropped, mut failed, mut bytes) = (0, 0, 0, 0);
        for (room, snapshot) in &snapshots {
            // Encoded once per room; every member's queue shares the bytes.
            match hub.broadcast_group(room, snapshot) {
                Ok(delivery) => {
                    queued += delivery.queued as u64;
                    dropped += delivery.dropped as u64;
                    failed += delivery.failed as u64;
                    bytes += delivery.queued as u64 * snapshot.wire_len();
                }
                Err(error) => tracing::warn!(%room, %error, "snapshot not sent"),
            }
        }

        let took = started.elapsed();
        let mut stats = lock(&game.shared.stats);
        stats.ticks += 1;
        stats.missed += missed;
        stats.queued += queued;
        stats.dropped += dropped;
        stats.failed += failed;
        stats.bytes += bytes;
        stats
            .tick_time_us
            .saturating_record(took.as_micros() as u64);
        stats
            .lateness_us
            .saturating_record((started - scheduled).as_micros() as u64);
    }
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
    /// Bytes of the snapshots received, as TCP frames.
    pub bytes: u64,
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

/// Connects a bot over TCP to the game at `address`, joins, then for
/// `config.duration` sends inputs fire-and-forget (a new direction about
/// every second) and reads snapshots through `client.subscribe`.
pub async fn run_bot(address: SocketAddr, config: BotConfig) -> Result<BotReport, ClientError> {
    let client = Client::connect_tcp(address).await?;
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
                report.bytes += snapshot.wire_len();
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
