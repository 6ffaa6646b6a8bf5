//! `ternio-bench game`: game-shaped work (issue 25), quoted by
//! docs/benchmarks.md.
//!
//! The server runs as a child process of this binary (`game-server`,
//! hidden; see `game/server.rs`), so that its CPU time is its own; the
//! clients are `ternio-client`s in this process, with secure sessions
//! (a datagram channel needs one; the TCP rows are sealed too).
//!
//! - **Datagram echo**: one client, one echo at a time: an unreliable
//!   packet by datagram, answered by datagram (`send_unreliable`), against
//!   a raw UDP echo (a tokio `UdpSocket` that sends back what it reads)
//!   and the same bytes as a sealed request on the stream. Round trips at
//!   32 B and 1 KiB; an echo not back within 100 ms counts as lost.
//! - **Rooms**: `--clients` clients in `--rooms` rooms ticking at `--hz`,
//!   each tick one 200-byte snapshot to the room (`Room` and a
//!   `Simulation`): unreliable by datagram (every client bound a channel),
//!   reliable on the TCP stream, and reliable on the stream compressed
//!   (LZ4 from 64 bytes; a server child each). For each: the server's CPU per delivered snapshot,
//!   the clients' too, the snapshot's lateness (from the start of the tick
//!   on the server to its arrival at a client; one clock, one machine),
//!   snapshots lost, the rooms' late ticks and overruns, and the bytes on
//!   the loopback interface per client and second (every packet of the
//!   run, both directions, IP headers included).

mod clients;
mod packets;
pub mod server;

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};

use crate::usage;
use clients::{EchoRow, RoomsRow, Variant};

/// The compression threshold of the compressed rooms row, in bytes.
const COMPRESS_FROM: usize = 64;

/// The command line of `ternio-bench game`.
#[derive(clap::Args)]
pub struct GameArgs {
    /// Fewer echoes and a shorter rooms window.
    #[arg(long)]
    quick: bool,
    /// Clients in the rooms workload.
    #[arg(long, default_value_t = 1000)]
    clients: usize,
    /// Rooms (the clients are spread evenly).
    #[arg(long, default_value_t = 50)]
    rooms: u16,
    /// Ticks a second.
    #[arg(long, default_value_t = 30)]
    hz: u32,
    /// The rooms' measuring window, in seconds (default 20; 5 with
    /// `--quick`).
    #[arg(long)]
    window: Option<u64>,
    /// Where to write `game.md`.
    #[arg(long, default_value = "target/bench-game")]
    out: PathBuf,
}

/// The server child, from this side; killed when dropped.
struct GameServer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    tcp: std::net::SocketAddr,
    udp: std::net::SocketAddr,
    raw_udp: std::net::SocketAddr,
}

/// The rooms' counts, summed over the rooms.
#[derive(Debug, Clone, Copy, Default)]
struct RoomCounts {
    ticks: u64,
    late: u64,
    overruns: u64,
    skipped: u64,
    snapshots: u64,
}

impl GameServer {
    fn spawn(rooms: u16, hz: u32, reliable: Option<usize>) -> Result<Self> {
        let mut command = Command::new(std::env::current_exe()?);
        command.args([
            "game-server",
            "--rooms",
            &rooms.to_string(),
            "--hz",
            &hz.to_string(),
        ]);
        if let Some(threshold) = reliable {
            command.args(["--reliable", &threshold.to_string()]);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("cannot start the game server child")?;
        let stdin = child.stdin.take().context("the child's stdin")?;
        let mut stdout = BufReader::new(child.stdout.take().context("the child's stdout")?);
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        let words: Vec<&str> = line.split_whitespace().collect();
        let ["ready", tcp, udp, raw_udp] = words.as_slice() else {
            bail!("the game server child said {line:?} instead of ready");
        };
        Ok(Self {
            tcp: tcp.parse()?,
            udp: udp.parse()?,
            raw_udp: raw_udp.parse()?,
            child,
            stdin,
            stdout,
        })
    }

    fn cpu(&self) -> Duration {
        usage::process_cpu_time(self.child.id()).unwrap_or_default()
    }

    fn counts(&mut self) -> Result<RoomCounts> {
        writeln!(self.stdin, "stats")?;
        self.stdin.flush()?;
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        let numbers: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(str::parse)
            .collect::<Result<_, _>>()
            .with_context(|| format!("the child's stats line {line:?}"))?;
        let [ticks, late, overruns, skipped, snapshots] = numbers[..] else {
            bail!("the child's stats line {line:?}");
        };
        Ok(RoomCounts {
            ticks,
            late,
            overruns,
            skipped,
            snapshots,
        })
    }
}

impl Drop for GameServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Bytes received on the loopback interface so far (`/proc/net/dev`):
/// every packet sent on it, as each is received once.
fn loopback_bytes() -> u64 {
    let text = std::fs::read_to_string("/proc/net/dev").unwrap_or_default();
    text.lines()
        .find_map(|line| {
            let (name, rest) = line.split_once(':')?;
            (name.trim() == "lo").then(|| rest.split_whitespace().next()?.parse().ok())?
        })
        .unwrap_or(0)
}

/// Runs the benchmark and writes `game.md`.
pub fn run(args: GameArgs) -> Result<()> {
    usage::raise_open_file_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let echo_rows = {
        let server = GameServer::spawn(args.rooms, args.hz, None)?;
        let echoes = if args.quick { 1_000 } else { 10_000 };
        runtime.block_on(clients::echoes(&server, echoes))?
    };
    let window = Duration::from_secs(args.window.unwrap_or(if args.quick { 5 } else { 20 }));
    let mut room_rows = Vec::new();
    for variant in [
        Variant::Datagrams,
        Variant::Stream,
        Variant::Compressed(COMPRESS_FROM),
    ] {
        // A server child each: compression is the server's setting.
        let mut server = GameServer::spawn(args.rooms, args.hz, variant.reliable())?;
        room_rows.push(runtime.block_on(clients::rooms(&mut server, &args, variant, window))?);
    }
    let report = report(&args, &echo_rows, &room_rows)?;
    crate::output::save_report(&args.out, "game.md", &report)
}

/// `value` in ms with three decimals.
fn ms(micros: u64) -> String {
    format!("{:.3}", micros as f64 / 1000.0)
}

/// The report, in Markdown.
fn report(args: &GameArgs, echoes: &[EchoRow], rooms: &[RoomsRow]) -> Result<String> {
    let mut out = String::new();
    writeln!(
        out,
        "# Game-shaped work\n\nOne run of `ternio-bench game{}`; the server is a child process, the clients share this one; secure sessions (Noise NN) throughout.\n",
        if args.quick { " --quick" } else { "" },
    )?;
    writeln!(
        out,
        "## Echo, one at a time\n\n| echo | payload | p50 ms | p99 ms | p50 / raw-udp | lost | server CPU per echo µs |\n|---|---|---|---|---|---|---|"
    )?;
    for row in echoes {
        let raw = echoes
            .iter()
            .find(|other| other.what == "raw-udp" && other.size == row.size)
            .map_or(0, |raw| raw.round_trips.value_at_quantile(0.5));
        let p50 = row.round_trips.value_at_quantile(0.5);
        writeln!(
            out,
            "| {} | {} B | {} | {} | {:.2} | {} | {:.1} |",
            row.what,
            row.size,
            ms(p50),
            ms(row.round_trips.value_at_quantile(0.99)),
            p50 as f64 / raw.max(1) as f64,
            row.lost,
            row.server_cpu.as_secs_f64() * 1e6,
        )?;
    }
    writeln!(
        out,
        "\n## Rooms: {} clients in {} rooms at {} Hz, {}-byte snapshots\n\n| snapshots by | window s | delivered | lost | twice | server CPU per snapshot µs | clients' CPU per snapshot µs | lateness p50 ms | p99 ms | max ms | late ticks | overruns | skipped | loopback B per client per s |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        args.clients,
        args.rooms,
        args.hz,
        packets::SNAPSHOT_BODY
    )?;
    for row in rooms {
        let per = |cpu: Duration| cpu.as_secs_f64() * 1e6 / row.received.max(1) as f64;
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {:.2} | {:.2} | {} | {} | {} | {} | {} | {} | {:.0} |",
            match row.variant {
                Variant::Datagrams => "datagram (unreliable)".to_owned(),
                Variant::Stream => "TCP stream".to_owned(),
                Variant::Compressed(threshold) => format!("TCP stream, LZ4 from {threshold} B"),
            },
            row.window.as_secs(),
            row.received,
            row.lost,
            row.duplicates,
            per(row.server_cpu),
            per(row.client_cpu),
            ms(row.lateness.value_at_quantile(0.5)),
            ms(row.lateness.value_at_quantile(0.99)),
            ms(row.lateness.max()),
            row.counts.late,
            row.counts.overruns,
            row.counts.skipped,
            row.loopback_bytes as f64 / row.clients.max(1) as f64 / row.window.as_secs_f64(),
        )?;
    }
    writeln!(
        out,
        "\nIn the datagram window the rooms ran {} ticks, and their members' connections took {} snapshots (the server's count; `delivered` is the clients').",
        rooms.first().map_or(0, |row| row.counts.ticks),
        rooms.first().map_or(0, |row| row.counts.snapshots),
    )?;
    Ok(out)
}
