//! The server child of `ternio-bench game` (`ternio-bench game-server`,
//! hidden): a Ternio server with TCP and UDP listeners, `rooms` rooms at
//! `hz` ticks a second, and a raw UDP echo beside it as the datagram
//! echo's baseline.
//!
//! It prints `ready TCP UDP RAW_UDP` once listening; then each line on its
//! stdin asks for the rooms' counts (`stats` → `stats TICKS LATE OVERRUNS
//! SKIPPED SNAPSHOTS`); it exits when stdin closes.

use std::io::{BufRead, Write};
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Result;
use ternio::room::{Inputs, Room, Simulation, Snapshots, TickRate};
use ternio::{Context, ErrorCode, Rejection, Server, ServerConfig, State};
use tokio::net::UdpSocket;

use super::packets::{
    Echo, Echoed, JoinRoom, PLAYERS, RECORD, RoomSnapshot, Snapshot, StreamEcho, StreamEchoed,
    StreamSnapshot,
};

/// The command line of the server child.
#[derive(clap::Args, Clone, Copy)]
pub struct ServerArgs {
    /// Rooms.
    #[arg(long, default_value_t = 50)]
    pub rooms: u16,
    /// Ticks a second.
    #[arg(long, default_value_t = 30)]
    pub hz: u32,
    /// Snapshots as a reliable packet on the stream ([`StreamSnapshot`]),
    /// compressed from this many bytes (0: reliable, not compressed);
    /// without it, unreliable ([`Snapshot`]: by datagram where bound).
    #[arg(long)]
    pub reliable: Option<usize>,
}

/// The rooms, by index (set once the server is built: a room needs its
/// hub).
#[derive(Clone, Default)]
struct Rooms(Arc<OnceLock<Vec<Room<()>>>>);

impl Rooms {
    fn all(&self) -> &[Room<()>] {
        self.0.get().map_or(&[], Vec::as_slice)
    }
}

/// A room's world: players that drift a little every tick, as moving
/// players do (so a snapshot compresses as a real one would, not as
/// zeros or noise).
struct World<S> {
    players: [[i16; 2]; PLAYERS],
    seed: u32,
    snapshot: std::marker::PhantomData<fn() -> S>,
}

impl<S> World<S> {
    fn new(index: u16) -> Self {
        let mut world = Self {
            players: [[0; 2]; PLAYERS],
            seed: 0x9E37_79B9 ^ u32::from(index),
            snapshot: std::marker::PhantomData,
        };
        for player in 0..PLAYERS {
            world.players[player] = [world.step() as i16 * 64, world.step() as i16 * 64];
        }
        world
    }

    /// A small pseudo-random step (xorshift), -8..=7.
    fn step(&mut self) -> i32 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 17;
        self.seed ^= self.seed << 5;
        (self.seed % 16) as i32 - 8
    }
}

impl<S: RoomSnapshot> Simulation for World<S> {
    type Input = ();
    type Snapshot = S;

    fn tick(&mut self, tick: u64, _inputs: &mut Inputs<()>, out: &mut Snapshots<S>) {
        let started_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_micros() as u64);
        let mut state = Vec::with_capacity(PLAYERS * RECORD);
        for player in 0..PLAYERS {
            for axis in 0..2 {
                let step = self.step() as i16;
                self.players[player][axis] = self.players[player][axis].wrapping_add(step);
            }
            state.extend_from_slice(&(player as u16).to_le_bytes());
            state.extend_from_slice(&self.players[player][0].to_le_bytes());
            state.extend_from_slice(&self.players[player][1].to_le_bytes());
            state.push(100);
        }
        out.broadcast(S::new(tick, started_us, state));
    }
}

#[derive(Default)]
struct GameBench;

#[ternio::packet_controller(explicit)]
impl GameBench {
    fn echo(request: Echo, ctx: &Context) {
        let _ = ctx.send_unreliable(&Echoed {
            seq: request.seq,
            payload: request.payload,
        });
    }

    fn stream_echo(request: StreamEcho) -> StreamEchoed {
        StreamEchoed(request.0)
    }

    fn join_room(request: JoinRoom, ctx: &Context, rooms: State<Rooms>) -> Result<(), Rejection> {
        let room = rooms
            .all()
            .get(usize::from(request.room))
            .ok_or_else(|| Rejection::new(ErrorCode::Malformed, "no such room"))?;
        room.join(ctx.connection_id());
        Ok(())
    }
}

/// Runs the child until its stdin closes.
pub fn serve(args: ServerArgs) -> Result<()> {
    crate::usage::raise_open_file_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let rooms = runtime.block_on(start(args))?;
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    for line in stdin.lock().lines() {
        if line?.trim() == "stats" {
            let (mut ticks, mut late, mut overruns, mut skipped, mut snapshots) = (0, 0, 0, 0, 0);
            for room in rooms.all() {
                let stats = room.stats();
                ticks += stats.ticks;
                late += stats.late_ticks;
                overruns += stats.overruns;
                skipped += stats.skipped;
                snapshots += stats.snapshots_sent;
            }
            writeln!(
                stdout,
                "stats {ticks} {late} {overruns} {skipped} {snapshots}"
            )?;
            stdout.flush()?;
        }
    }
    Ok(())
}

/// Starts the server, the rooms and the raw echo; prints the ready line.
async fn start(args: ServerArgs) -> Result<Rooms> {
    let mut config = ServerConfig::default();
    config.max_connections = 20_000;
    config.exempt_loopback = true;
    config.compression = args.reliable.filter(|threshold| *threshold > 0);
    let rooms = Rooms::default();
    let server = Server::builder()
        .config(config)
        .state(rooms.clone())
        .discover_controllers(false)
        .controller(GameBench)
        .map_tcp("127.0.0.1:0")
        .map_udp("127.0.0.1:0")
        .build()?;
    let hub = server.handle().hub();
    let started = rooms.0.set(
        (0..args.rooms)
            .map(|index| {
                let name = format!("room-{index}");
                let rate = TickRate::hz(args.hz);
                if args.reliable.is_some() {
                    Room::start(
                        hub.clone(),
                        &name,
                        rate,
                        World::<StreamSnapshot>::new(index),
                    )
                } else {
                    Room::start(hub.clone(), &name, rate, World::<Snapshot>::new(index))
                }
            })
            .collect(),
    );
    assert!(started.is_ok(), "the rooms are set once");
    let tcp = server.tcp_addrs()[0];
    let udp = server.udp_addr().expect("mapped above");
    let raw = UdpSocket::bind("127.0.0.1:0").await?;
    let raw_addr = raw.local_addr()?;
    tokio::spawn(raw_echo(raw));
    tokio::spawn(server.run());
    println!("ready {tcp} {udp} {raw_addr}");
    std::io::stdout().flush()?;
    Ok(rooms)
}

/// A raw UDP echo: what a lean hand-written datagram server does.
async fn raw_echo(socket: UdpSocket) {
    let mut buffer = vec![0u8; 65_536];
    while let Ok((read, from)) = socket.recv_from(&mut buffer).await {
        let _ = socket.send_to(&buffer[..read], from).await;
    }
}
