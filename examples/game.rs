//! An authoritative game server with a fixed 30 Hz tick, and bots to load it.
//!
//! ```text
//! cargo run --release --example game -- --bots 50 --seconds 10
//! cargo run --release --example game -- --bots 20 --rooms 4
//! cargo run --release --example game -- --bots 150 --seconds 120 --stalled 1
//! cargo run --release --example game -- --tcp 127.0.0.1:7201      # the server alone, until ctrl-c
//! ```
//!
//! Players join a room (a hub group), send their inputs fire-and-forget,
//! and get a droppable snapshot of their room every tick; the simulation
//! runs on its own task beside the connections (see
//! `ternio_examples::game`). With `--bots N`, N bots play over TCP in this
//! process for `--seconds`, then the example prints what the tick loop
//! measured (tick-time percentiles, bytes per second, snapshots dropped by
//! the server, per connection too), what the bots saw (snapshots, gaps
//! in tick numbers), and what one player costs: the snapshot's size in
//! bytes (fixed part plus 16 B per player), each player's bytes per second
//! down and up, and how a room's traffic grows with the square of its size
//! (every player gets every player's state 30 times a second). `--stalled K` adds K players that join and never read
//! (they send an input a second): once the kernel's buffers for such a
//! connection are full (several MB on loopback: under two minutes with 150
//! bots in one room, `--bots 150 --seconds 120 --stalled 1`), the server
//! drops its snapshots (`dropped_pushes()`) instead of holding up anyone
//! else, until its write timeout (30 s with nothing written) disconnects it.
//!
//! Without `--bots`, it serves until ctrl-c and prints the tick loop's
//! numbers every 5 seconds.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use hdrhistogram::Histogram;
use ternio::{Hub, Server};
use ternio_examples::game::{
    self, BotConfig, BotReport, Game, INPUT_LEN, PLAYER_STATE_LEN, TICK_RATE, TickStats,
    snapshot_len,
};
use tokio::sync::watch;

/// Command line of the game example.
#[derive(Parser)]
#[command(about = "Ternio game server (30 Hz authoritative tick) with optional bots")]
struct Args {
    /// Address of the TCP listener (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:7201")]
    tcp: SocketAddr,
    /// Address of a WebSocket listener (path /ws), if wanted.
    #[arg(long)]
    ws: Option<SocketAddr>,
    /// Run this many bots against the server, then report and exit.
    #[arg(long)]
    bots: Option<usize>,
    /// How long the bots play.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Spread the bots over this many rooms.
    #[arg(long, default_value_t = 1)]
    rooms: usize,
    /// Add this many players that join and never read (with `--bots`).
    #[arg(long, default_value_t = 0)]
    stalled: usize,
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
    let mut builder = game::serve(Server::builder(), game.clone()).map_tcp(args.tcp);
    if let Some(ws) = args.ws {
        builder = builder.map_websocket(ws, "/ws");
    }
    let server = builder.build()?;
    let address = server.tcp_addrs()[0];
    println!("game over tcp on {address}, {TICK_RATE} ticks per second");
    for ws in server.websocket_addrs() {
        println!("game over websocket on ws://{ws}/ws");
    }
    let handle = server.handle();
    let running = tokio::spawn(server.run());

    // The simulation: a task of its own beside the connections' tasks.
    let (stop, stopped) = watch::channel(false);
    let ticking = tokio::spawn(game::simulate(game.clone(), handle.hub(), stopped));

    match args.bots {
        Some(bots) => play(&args, bots, address, &game, &handle.hub()).await?,
        None => serve_until_signal(&game).await,
    }

    let _ = stop.send(true);
    let _ = ticking.await;
    handle.shutdown();
    running.await??;
    println!("game stopped");
    Ok(())
}

/// The server alone: prints the tick loop's numbers every 5 s until Ctrl-C
/// or SIGTERM.
async fn serve_until_signal(game: &Game) {
    let stop = ternio::shutdown_signal();
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
                    "{} players; last 5 s: {} ticks ({} missed), tick p99 {} µs, {}/s, {} snapshots dropped",
                    game.players().len(),
                    now.ticks - before.ticks,
                    now.missed - before.missed,
                    since(&now.tick_time_us, &before.tick_time_us).value_at_quantile(0.99),
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
        "{bots} bots in {rooms} room(s) for {:.1} s{}",
        duration.as_secs_f64(),
        if args.stalled > 0 {
            format!(", with {} stalled player(s)", args.stalled)
        } else {
            String::new()
        }
    );
    let mut stalled = Vec::with_capacity(args.stalled);
    for index in 0..args.stalled {
        stalled
            .push(game::stalled_player(address, &format!("stalled-{index}"), &room(index)).await?);
    }
    let before = game.stats();
    let tasks: Vec<_> = (0..bots)
        .map(|index| {
            tokio::spawn(game::run_bot(
                address,
                BotConfig::new(index, &room(index), duration),
            ))
        })
        .collect();

    let mut reports = Vec::with_capacity(bots);
    for task in tasks {
        reports.push(task.await??);
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
    before: &TickStats,
    after: &TickStats,
    duration: Duration,
    per_connection: &BTreeMap<String, u64>,
) {
    let seconds = duration.as_secs_f64();
    println!();
    println!("server");
    println!(
        "  ticks: {} ({} missed and skipped)",
        after.ticks - before.ticks,
        after.missed - before.missed
    );
    println!(
        "  tick time:     {}",
        percentiles(&since(&after.tick_time_us, &before.tick_time_us))
    );
    println!(
        "  tick lateness: {}",
        percentiles(&since(&after.lateness_us, &before.lateness_us))
    );
    println!(
        "  snapshots: {} queued, {} dropped (connection behind), {} failed",
        after.queued - before.queued,
        after.dropped - before.dropped,
        after.failed - before.failed
    );
    println!("  sent: {}/s", rate(after.bytes - before.bytes, seconds));
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
        "  snapshots: {} received, {} missing ticks (gaps), {} out of order, {} dropped by subscription buffers",
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
    let fixed = snapshot_len(0);
    println!("per player");
    println!(
        "  snapshot: {} B on average, {} B with {room} players: {fixed} B (length prefix, \
         header, tick, count) + {PLAYER_STATE_LEN} B per player (id, x, y, last input)",
        received / snapshots.max(1),
        snapshot_len(room),
    );
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
    let per_room = |players: usize| players as u64 * u64::from(TICK_RATE) * snapshot_len(players);
    println!(
        "  a room of N players costs the server N x {TICK_RATE} x ({fixed} + {PLAYER_STATE_LEN} x N) B/s, \
         growing with N squared: {room} players {}/s, 2 x {room} players {}/s",
        rate(per_room(room), 1.0),
        rate(per_room(2 * room), 1.0),
    );
}

/// What `after` recorded since it was `before`.
fn since(after: &Histogram<u64>, before: &Histogram<u64>) -> Histogram<u64> {
    let mut recent = after.clone();
    // `before` is an earlier state of the same histogram: every count fits.
    let _ = recent.subtract(before);
    recent
}

fn percentiles(histogram: &Histogram<u64>) -> String {
    if histogram.is_empty() {
        return "no ticks".to_owned();
    }
    format!(
        "p50 {} µs, p90 {} µs, p99 {} µs, p99.9 {} µs, max {} µs",
        histogram.value_at_quantile(0.5),
        histogram.value_at_quantile(0.9),
        histogram.value_at_quantile(0.99),
        histogram.value_at_quantile(0.999),
        histogram.max()
    )
}

fn rate(bytes: u64, seconds: f64) -> String {
    let per_second = bytes as f64 / seconds.max(f64::EPSILON);
    if per_second >= 1024.0 * 1024.0 {
        format!("{:.2} MiB", per_second / (1024.0 * 1024.0))
    } else {
        format!("{:.1} KiB", per_second / 1024.0)
    }
}
