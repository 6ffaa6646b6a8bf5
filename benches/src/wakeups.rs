//! `ternio-bench wakeups`: how many times the client's and the server's
//! threads go to sleep (and so must be woken) per echo, for a raw TCP echo
//! and `ternio-client`'s `request_async` (issue 27, item 2: "one wake-up
//! per echo").
//!
//! A wake-up is counted as a voluntary context switch (`/proc/<pid>/task/
//! */status`, `voluntary_ctxt_switches`, summed over the process's
//! threads): a thread that blocks (in `epoll_wait` or on a futex) switches
//! out voluntarily, and runs again only when something wakes it. Echoes go
//! one at a time (32 B), so each round trip leaves every thread idle.
//!
//! The client runs on a tokio multi-thread runtime with one worker, in two
//! shapes: the application's loop on the main thread (`block_on`, as the
//! other scenarios' clients), and the application's loop as a task on the
//! worker (spawned, the main thread waiting for it).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;
use bytes::Bytes;

use crate::child::ServerChild;
use crate::idle::AwakeCpus;
use crate::participants::{EchoClient, Endpoint, Participant, ServerKind};

/// `ternio-bench wakeups` options.
#[derive(clap::Args, Debug)]
pub struct WakeupsArgs {
    /// Echoes counted per cell (after 1,000 not counted).
    #[arg(long, default_value_t = 20_000)]
    echoes: u64,
    /// Where to write `wakeups.md`.
    #[arg(long, default_value = "target/bench-wakeups")]
    out: PathBuf,
}

/// Where the client's loop runs.
#[derive(Clone, Copy)]
enum Shape {
    /// `block_on` on the main thread; the runtime's worker runs the rest.
    Main,
    /// A task on the runtime's one worker.
    Worker,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::Main => "main thread (block_on)",
            Shape::Worker => "task on the worker",
        }
    }
}

/// One cell's counts.
struct Row {
    participant: &'static str,
    shape: Shape,
    client: f64,
    server: f64,
    per_echo: Duration,
}

/// Voluntary context switches of every thread of process `pid` so far.
fn voluntary_switches(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("status")).ok())
        .filter_map(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|value| value.trim().parse::<u64>().ok())
        })
        .sum()
}

/// What a measured window saw: voluntary switches of the client's and
/// the server's process, and the window's length.
struct Counted {
    client: u64,
    server: u64,
    elapsed: Duration,
}

/// Connects the participant's client, echoes 1,000 times not counted,
/// then `n` times one at a time between two readings of both processes'
/// switches.
async fn measure(
    participant: Participant,
    endpoint: Endpoint,
    server: u32,
    n: u64,
) -> Result<Counted> {
    let me = std::process::id();
    let payload = Bytes::from_static(&[7u8; 32]);
    let reading = || (voluntary_switches(me), voluntary_switches(server));
    let mut client = EchoClient::connect(participant, &endpoint).await?;
    for _ in 0..1_000 {
        client.echo(&payload).await?;
    }
    let (before, started) = (reading(), Instant::now());
    for _ in 0..n {
        client.echo(&payload).await?;
    }
    let (after, elapsed) = (reading(), started.elapsed());
    client.close().await;
    Ok(Counted {
        client: after.0 - before.0,
        server: after.1 - before.1,
        elapsed,
    })
}

/// One cell, on a fresh one-worker runtime.
fn cell(participant: Participant, child: &ServerChild, shape: Shape, n: u64) -> Result<Row> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let measured = measure(participant, child.endpoint.clone(), child.pid(), n);
    let counted = match shape {
        Shape::Main => runtime.block_on(measured)?,
        Shape::Worker => runtime.block_on(async { tokio::spawn(measured).await })??,
    };
    Ok(Row {
        participant: participant.name(),
        shape,
        client: counted.client as f64 / n as f64,
        server: counted.server as f64 / n as f64,
        per_echo: counted.elapsed / u32::try_from(n).unwrap_or(u32::MAX),
    })
}

/// Runs `ternio-bench wakeups`.
pub fn run(args: WakeupsArgs) -> Result<()> {
    let n = args.echoes.max(1);
    // As `compare` does: an idle vCPU that halts adds tens of µs to every
    // round trip (see `idle.rs`); the report says whether it was granted.
    let awake = AwakeCpus::request();
    let idle_cpus = match &awake {
        Ok(_) => "kept awake (PM QoS: 0 µs wake-up latency)".to_owned(),
        Err(error) => format!("free to halt (PM QoS refused: {error})"),
    };
    let mut rows = Vec::new();
    for participant in [Participant::RawTcp, Participant::TernioTcp] {
        let child = ServerChild::spawn(ServerKind::Echo(participant), None)?;
        for shape in [Shape::Main, Shape::Worker] {
            rows.push(cell(participant, &child, shape, n)?);
        }
    }
    let mut report = format!(
        "Thread wake-ups per echo ({n} echoes of 32 B, one at a time, after 1,000 not \
         counted): voluntary context switches of every thread of the process, per echo. \
         The client runs on a tokio multi-thread runtime with one worker. Idle CPUs: \
         {idle_cpus}.\n\n\
         | client | client loop | client wake-ups/echo | server wake-ups/echo | time/echo (µs) |\n\
         |---|---|---|---|---|\n"
    );
    for row in &rows {
        writeln!(
            report,
            "| {} | {} | {:.2} | {:.2} | {:.1} |",
            row.participant,
            row.shape.name(),
            row.client,
            row.server,
            row.per_echo.as_secs_f64() * 1e6
        )?;
    }
    crate::output::save_report(&args.out, "wakeups.md", &report)
}
