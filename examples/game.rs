//! An authoritative game server on `ternio::room` (a 30 Hz tick per room),
//! and bots to load it.
//!
//! ```text
//! cargo run --release --example game -- --bots 50 --seconds 10
//! cargo run --release --example game -- --bots 20 --rooms 4
//! cargo run --release --example game -- --bots 150 --rooms 3 --seconds 120 --stalled 1
//! cargo run --release --example game -- --bots 20 --no-datagrams    # snapshots on the stream
//! cargo run --release --example game -- --tcp 127.0.0.1:7201      # the server alone, until Ctrl-C or SIGTERM
//! ```
//!
//! Players join a room (a `ternio::room::Room`, at most 64 players) with a
//! request on the stream, send their inputs fire-and-forget on the stream,
//! and get a snapshot of their room every tick: an unreliable packet, by
//! datagram to the bots (they bind a datagram channel over a secure
//! session; `--no-datagrams`: they do not), on the stream otherwise (see
//! `ternio_examples::game`). With `--bots N`, N bots play in this process
//! for `--seconds`, then the example prints what the rooms measured (ticks,
//! skipped, late and overrun ticks, snapshots queued, by datagram, dropped),
//! what the bots saw (snapshots, gaps in tick numbers: a lost datagram is
//! one), and what one player costs: the snapshot's size in bytes (fixed
//! part plus 16 B per player), each player's bytes per second down and up,
//! and how a room's traffic grows with the square of its size (every
//! player gets every player's state 30 times a second). `--stalled K` adds
//! K players that join over plain TCP and never read (they send an input a
//! second): once the kernel's buffers for such a connection are full
//! (several MB on loopback: under two minutes with 50 bots in its room),
//! the server drops its snapshots (`dropped_pushes()`) instead of holding
//! up anyone else, until its write timeout (30 s with nothing written)
//! disconnects it.
//!
//! Without `--bots`, it serves until Ctrl-C or SIGTERM and prints the rooms' numbers
//! every 5 seconds.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use ternio::{Hub, Server};
use ternio_examples::game::{
    self, BotConfig, BotReport, Game, GameStats, INPUT_LEN, MAX_PLAYERS, PLAYER_STATE_LEN,
    TICK_RATE, snapshot_datagram_len, snapshot_len,
};

/// Command line of the game example.
#[derive(Parser)]
#[command(about = "Ternio game server (rooms ticking at 30 Hz) with optional bots")]
struct Args {
    /// Print the server's schema (packets, types and handlers, as JSON: see
    /// docs/SCHEMA.md) and exit.
    #[arg(long)]
    schema: bool,
    /// Address of the TCP listener (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:7201")]
    tcp: SocketAddr,
    /// Address of the UDP listener of the datagram channel (port 0: any
    /// free port).
    #[arg(long, default_value = "127.0.0.1:7202")]
    udp: SocketAddr,
    /// Address of a WebSocket listener (path /ws), if wanted.
    #[arg(long)]
    ws: Option<SocketAddr>,
    /// Run this many bots against the server, then report and exit.
    #[arg(long)]
    bots: Option<usize>,
    /// How long the bots play.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Spread the bots over this many rooms (64 players a room at most).
    #[arg(long, default_value_t = 1)]
    rooms: usize,
    /// Add this many players that join and never read (with `--bots`).
    #[arg(long, default_value_t = 0)]
    stalled: usize,
    /// The bots bind no datagram channel: their snapshots come on the stream.
    #[arg(long)]
    no_datagrams: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    ternio_examples::logging::init("warn");
    let args = Args::parse();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("game: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let game = Game::new();
    if args.schema {
        print!(
            "{}",
            game::serve(Server::builder(), game).schema()?.to_json()
        );
        return Ok(());
    }
    let mut builder = game::serve(Server::builder(), game.clone())
        .map_tcp(args.tcp)
        .map_udp(args.udp);
    if let Some(ws) = args.ws {
        builder = builder.map_websocket(ws, "/ws");
    }
    let server = builder.build()?;
    // Installed before the addresses are printed: from then on, Ctrl-C or
    // SIGTERM stops the game (bots or not) with the stop line, exit code 0.
    let stop = ternio::shutdown_signal();
    let address = server.tcp_addrs()[0];
    println!("game over tcp on {address}, {TICK_RATE} ticks per second");
    if let Some(udp) = server.udp_addr() {
        println!("datagrams on udp {udp}");
    }
    for ws in server.websocket_addrs() {
        println!("game over websocket on ws://{ws}/ws");
    }
    let handle = server.handle();
    let running = tokio::spawn(server.run());

    match args.bots {
        Some(bots) => {
            let hub = handle.hub();
            tokio::select! {
                played = play(&args, bots, address, &game, &hub) => played?,
                () = stop => println!("stopped before the bots finished: no report"),
            }
        }
        None => serve_until_signal(&game, stop).await,
    }

    game.stop();
    handle.shutdown();
    running.await??;
    println!("game stopped");
    Ok(())
}

/// The server alone: prints the rooms' numbers every 5 s until Ctrl-C or
/// SIGTERM.
async fn serve_until_signal(game: &Game, stop: impl Future<Output = ()>) {
    tokio::pin!(stop);
    let mut every = tokio::time::interval(Duration::from_secs(5));
    every.tick().await;
    let mut before = game.stats();
    loop {
        tokio::select! {
            () = &mut stop => return,
            _ = every.tick() => {
                let now = game.stats();
                println!(
                    "{} players in {} rooms; last 5 s: {} ticks ({} skipped, {} late, {} overruns), {}/s, {} snapshots dropped",
                    game.players().len(),
                    game.rooms().len(),
                    now.ticks - before.ticks,
                    now.skipped - before.skipped,
                    now.late - before.late,
                    now.overruns - before.overruns,
                    rate(now.bytes - before.bytes, 5.0),
                    now.dropped - before.dropped,
                );
                before = now;
            }
        }
    }
}

/// `dropped_pushes()` of every player's connection that is open, by name.
fn dropped_per_connection(game: &Game, hub: &Hub) -> BTreeMap<String, u64> {
    game.players()
        .into_iter()
        .filter_map(|(connection, _, name)| {
            hub.connection(connection)
                .map(|handle| (name, handle.dropped_pushes()))
        })
        .collect()
}

/// Runs the bots (and stalled players), then prints the report.
async fn play(
    args: &Args,
    bots: usize,
    address: SocketAddr,
    game: &Game,
    hub: &Hub,
) -> Result<(), Box<dyn std::error::Error>> {
    let duration = Duration::from_secs_f64(args.seconds.max(0.1));
    let rooms = args.rooms.max(1);
    let room = |index: usize| format!("room-{}", index % rooms);
    println!(
        "{bots} bots in {rooms} room(s) for {:.1} s, snapshots {}{}",
        duration.as_secs_f64(),
        if args.no_datagrams {
            "on the stream"
        } else {
            "by datagram"
        },
        if args.stalled > 0 {
            format!(", with {} stalled player(s)", args.stalled)
        } else {
            String::new()
        }
    );
    if bots + args.stalled > rooms * MAX_PLAYERS {
        println!("  (a room takes {MAX_PLAYERS} players: the others are refused; add --rooms)");
    }
    let mut stalled = Vec::with_capacity(args.stalled);
    for index in 0..args.stalled {
        stalled
            .push(game::stalled_player(address, &format!("stalled-{index}"), &room(index)).await?);
    }
    let before = game.stats();
    let tasks: Vec<_> = (0..bots)
        .map(|index| {
            let mut config = BotConfig::new(index, &room(index), duration);
            config.datagrams = !args.no_datagrams;
            tokio::spawn(game::run_bot(address, config))
        })
        .collect();

    let mut reports = Vec::with_capacity(bots);
    for task in tasks {
        match task.await? {
            Ok(report) => reports.push(report),
            Err(error) => println!("  a bot failed: {error}"),
        }
    }
    let after = game.stats();
    // Let the disconnect hooks of the bots' connections run: they keep each
    // connection's dropped_pushes() (Game::departures).
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The stalled players still connected, then everyone who left.
    let mut per_connection = dropped_per_connection(game, hub);
    let mut stalled_fates = Vec::new();
    for departure in game.departures() {
        if departure.name.starts_with("stalled-") {
            stalled_fates.push(format!("{} closed: {:?}", departure.name, departure.cause));
        }
        per_connection.insert(departure.name, departure.dropped);
    }
    drop(stalled);
    print_server(&before, &after, duration, &per_connection);
    if args.stalled > 0 {
        println!(
            "  stalled players: {} still connected{}",
            args.stalled - stalled_fates.len(),
            stalled_fates
                .iter()
                .map(|fate| format!("; {fate}"))
                .collect::<String>()
        );
    }
    print_bots(&reports, duration);
    print_per_player(&reports, duration);
    Ok(())
}

fn print_server(
    before: &GameStats,
    after: &GameStats,
    duration: Duration,
    per_connection: &BTreeMap<String, u64>,
) {
    let seconds = duration.as_secs_f64();
    println!();
    println!("server (all rooms)");
    println!(
        "  ticks: {} ({} skipped, {} late by over a tenth of a period, {} overran their period)",
        after.ticks - before.ticks,
        after.skipped - before.skipped,
        after.late - before.late,
        after.overruns - before.overruns,
    );
    println!(
        "  snapshots: {} queued ({} by datagram), {} dropped (connection behind), {} failed",
        after.queued - before.queued,
        after.by_datagram - before.by_datagram,
        after.dropped - before.dropped,
        after.failed - before.failed
    );
    println!(
        "  sent: {}/s; inputs refused (64 waiting): {}",
        rate(after.bytes - before.bytes, seconds),
        after.inputs_refused - before.inputs_refused
    );
    let behind: Vec<String> = per_connection
        .iter()
        .filter(|&(_, &dropped)| dropped > 0)
        .map(|(name, dropped)| format!("{name} {dropped}"))
        .collect();
    println!(
        "  dropped_pushes() per connection: {}",
        if behind.is_empty() {
            "none".to_owned()
        } else {
            behind.join(", ")
        }
    );
}

fn print_bots(reports: &[BotReport], duration: Duration) {
    let sum = |field: fn(&BotReport) -> u64| reports.iter().map(field).sum::<u64>();
    println!("bots");
    println!(
        "  snapshots: {} received, {} missing ticks (gaps: datagrams lost, or dropped), {} out of order, {} dropped by subscription buffers",
        sum(|r| r.snapshots),
        sum(|r| r.gaps),
        sum(|r| r.out_of_order),
        sum(|r| r.buffer_dropped)
    );
    println!(
        "  received: {}/s; inputs sent: {}",
        rate(sum(|r| r.bytes), duration.as_secs_f64()),
        sum(|r| r.inputs)
    );
    if let Some(worst) = reports.iter().max_by_key(|r| r.gaps)
        && worst.gaps > 0
    {
        println!("  most gaps: {} with {}", worst.name, worst.gaps);
    }
}

/// What one player costs, and why: the snapshot's size, and the bytes a
/// second each player receives and sends.
fn print_per_player(reports: &[BotReport], duration: Duration) {
    let (Some(busiest), Some(room)) = (
        reports.iter().max_by_key(|r| r.bytes),
        reports.iter().map(|r| r.most_players).max(),
    ) else {
        return;
    };
    let seconds = duration.as_secs_f64();
    let bots = reports.len() as u64;
    let snapshots: u64 = reports.iter().map(|r| r.snapshots).sum();
    let received: u64 = reports.iter().map(|r| r.bytes).sum();
    let inputs: u64 = reports.iter().map(|r| r.inputs).sum();
    let by_datagram = reports.iter().all(|r| r.datagrams);
    let (size, fixed, what) = if by_datagram {
        (
            snapshot_datagram_len as fn(usize) -> u64,
            snapshot_datagram_len(0),
            "datagram: token, sequence number, header, tag, tick, count",
        )
    } else {
        (
            snapshot_len as fn(usize) -> u64,
            snapshot_len(0),
            "TCP frame: length prefix, header, tick, count",
        )
    };
    println!("per player");
    println!(
        "  snapshot: {} B on average, {} B with {room} players: {fixed} B ({what}) + \
         {PLAYER_STATE_LEN} B per player (id, x, y, last input); largest received {} B",
        received / snapshots.max(1),
        size(room),
        reports
            .iter()
            .map(|r| r.largest_snapshot)
            .max()
            .unwrap_or(0),
    );
    // Each player's own figures, when they fit on a screen.
    for report in reports.iter().take(20) {
        println!(
            "  {}: down {}/s ({} snapshots{}), up {}/s",
            report.name,
            rate(report.bytes, seconds),
            report.snapshots,
            if report.datagrams {
                " by datagram"
            } else {
                " on the stream"
            },
            rate(report.inputs * INPUT_LEN as u64, seconds),
        );
    }
    if reports.len() > 20 {
        let least = reports.iter().min_by_key(|r| r.bytes).unwrap_or(busiest);
        println!(
            "  … and {} more; the least: {} down {}/s",
            reports.len() - 20,
            least.name,
            rate(least.bytes, seconds)
        );
    }
    println!(
        "  down: {}/s on average, {}/s at most ({}): {TICK_RATE} snapshots a second of its room",
        rate(received / bots, seconds),
        rate(busiest.bytes, seconds),
        busiest.name,
    );
    println!(
        "  up: {}/s: {:.1} inputs a second of {INPUT_LEN} B",
        rate(inputs * INPUT_LEN as u64 / bots, seconds),
        inputs as f64 / bots as f64 / seconds.max(f64::EPSILON),
    );
    let per_room = |players: usize| players as u64 * u64::from(TICK_RATE) * size(players);
    println!(
        "  a room of N players costs the server N x {TICK_RATE} x ({fixed} + {PLAYER_STATE_LEN} x N) B/s, \
         growing with N squared: {room} players {}/s, 2 x {room} players {}/s",
        rate(per_room(room), 1.0),
        rate(per_room(2 * room), 1.0),
    );
}

fn rate(bytes: u64, seconds: f64) -> String {
    let per_second = bytes as f64 / seconds.max(f64::EPSILON);
    if per_second >= 1024.0 * 1024.0 {
        format!("{:.2} MiB", per_second / (1024.0 * 1024.0))
    } else {
        format!("{:.1} KiB", per_second / 1024.0)
    }
}
