//! `ternio-bench`: Ternio side by side with raw sockets and gRPC (tonic).
//!
//! ```text
//! cargo run --release -p ternio-bench -- compare [--quick] [--only NAMES] [--out DIR] [--check]
//! cargo run --release -p ternio-bench -- smoke
//! cargo run --release -p ternio-bench -- soak [--quick] [--compare] [--duration 10m]
//! cargo run --release -p ternio-bench -- presence [--quick] [--out DIR]
//! cargo run --release -p ternio-bench -- game [--quick] [--clients 1000] [--rooms 50] [--out DIR]
//! cargo run --release -p ternio-bench -- streams [--quick] [--out DIR]
//! cargo run --release -p ternio-bench -- wakeups [--echoes N] [--out DIR]
//! cargo run --release -p ternio-bench -- outside [--rounds N] [--server PATH] [--out DIR]
//! ```
//!
//! Each participant's server runs as a child process of this same binary
//! (`ternio-bench serve KIND`, hidden); the clients run here. Results go to
//! `DIR/results.jsonl`, `DIR/report.md`, `DIR/latency.svg` and
//! `DIR/throughput.svg`; `report --from DIR/results.jsonl` writes them again.
//!
//! `ternio-ws-lean` (Ternio's WebSocket server driven by raw-ws's own
//! client) is part of every run: the WebSocket budgets compare it with
//! raw-ws, one client against both servers. `--only ternio-tcp-lean` adds
//! a diagnostic participant (Ternio's TCP server driven by a hand-written
//! client) that splits the server's cost from the SDK client's. `TERNIO_BENCH_SERVER_PREFIX="valgrind
//! --tool=callgrind"` (or `strace -f -c -o FILE`) runs every server child under
//! that command, to profile a server in place. `TERNIO_BENCH_RUNTIME`
//! chooses the server children's runtime: `multi` (default), `multi:N`
//! workers, or `current:N` (N current-thread runtimes, a server each, one
//! port through `SO_REUSEPORT`; see `child.rs`). The micro-benchmarks are
//! `cargo bench -p ternio-bench`.
//!
//! `soak` (see `soak.rs`) runs thousands of well-behaved clients beside
//! attackers against the release `echo_server` example; it needs that
//! example built, and is never part of `smoke`. `outside` (see
//! `outside.rs`) needs it too: it drives that example and the raw TCP echo
//! with a client that writes the contract's bytes by hand, as a load
//! generator outside the repository would.
//!
//! `--scenarios backplane` measures group broadcasts across two nodes joined
//! by the Redis backplane (see `scenarios/backplane.rs`); it starts its own
//! `redis-server`. Without one installed, the scenario is skipped (with a
//! message) when it is only part of the default set, and the run fails at
//! once when it was named.
//!
//! `--scenarios fanout --fanout-members 10000` runs the fan-out (one
//! broadcast at a time to a group, see `scenarios/fanout.rs`) with 10,000
//! members instead of the mode's 1,000.

mod aggregate;
mod alloc;
mod budget;
mod charts;
mod child;
mod cipher;
mod compare;
mod environment;
mod game;
mod idle;
mod output;
mod outside;
mod participants;
mod plan;
mod presence;
mod report;
mod results;
mod scenarios;
mod soak;
mod streams;
mod tls;
mod usage;
mod wakeups;
mod window;
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::{Parser, Subcommand};

use crate::compare::{Outcome, Settings};
use crate::participants::{Participant, ServerKind};
use crate::plan::{Mode, Plan};
use crate::results::Scenario;

#[global_allocator]
static ALLOCATOR: alloc::CountingAllocator = alloc::CountingAllocator;

/// The command line.
#[derive(Parser)]
#[command(
    name = "ternio-bench",
    about = "Ternio side by side with raw sockets and gRPC"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the comparison and writes the report.
    Compare(CompareArgs),
    /// A checked pass of every participant and scenario, nothing timed
    /// (what CI runs): the same as `compare --smoke`.
    Smoke(CommonArgs),
    /// Writes the report, charts and budgets again from a results file.
    Report {
        /// The results (JSON lines) to read.
        #[arg(long)]
        from: PathBuf,
        /// Where to write; defaults to the results file's folder.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Well-behaved clients and attackers against the release `echo_server`
    /// example with its defaults, for minutes (not part of CI).
    Soak(soak::SoakArgs),
    /// What users and presence cost across two nodes joined by Redis
    /// (starts its own `redis-server`; see `presence.rs`).
    Presence(presence::PresenceArgs),
    /// Game-shaped work: the datagram echo and rooms with a tick, by
    /// datagram and on the stream (see `game.rs`).
    Game(game::GameArgs),
    /// Streams against a raw socket: 100 MiB as a byte stream and 64-byte
    /// items (see `streams.rs`).
    Streams(streams::StreamsArgs),
    /// Thread wake-ups per echo, raw TCP against `ternio-client` (see
    /// `wakeups.rs`).
    Wakeups(wakeups::WakeupsArgs),
    /// The release `echo_server` example against the raw TCP echo, driven
    /// as a load generator outside the repository would (see `outside.rs`).
    Outside(outside::OutsideArgs),
    /// Runs the server child of `streams` (used by `streams` itself).
    #[command(hide = true)]
    StreamsServer,
    /// Runs the server child of `game` (used by `game` itself).
    #[command(hide = true)]
    GameServer(game::server::ServerArgs),
    /// Runs one server child (used by the harness itself).
    #[command(hide = true)]
    Serve {
        /// What to serve: a participant's name, `raw-tcp-push`,
        /// `raw-tcp-fanout` or `ternio-backplane-node`.
        kind: String,
    },
}

#[derive(clap::Args)]
struct CommonArgs {
    /// Only these participants (comma-separated names).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Only these scenarios: latency, throughput, push, fanout, crowd,
    /// backplane (which needs `redis-server`).
    #[arg(long, value_delimiter = ',')]
    scenarios: Vec<String>,
    /// Output folder.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Exit non-zero when a budget fails.
    #[arg(long)]
    check: bool,
    /// Members of the fan-out's group, instead of the mode's (1,000; 20 in
    /// smoke), e.g. 10000: each is a socket on both sides (the harness
    /// raises its open-file limit to the hard limit).
    #[arg(long)]
    fanout_members: Option<usize>,
    /// Let idle CPUs halt. By default the run asks the kernel (PM QoS) to
    /// keep them polling, as a halted vCPU takes tens of µs to wake.
    #[arg(long)]
    let_cpus_idle: bool,
}

#[derive(clap::Args)]
struct CompareArgs {
    /// A tenth of the calls and windows, one run per cell.
    #[arg(long, conflicts_with = "smoke")]
    quick: bool,
    /// The smoke pass (see `smoke`).
    #[arg(long)]
    smoke: bool,
    #[command(flatten)]
    common: CommonArgs,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Serve { kind } => {
            let kind =
                ServerKind::parse(&kind).with_context(|| format!("no server kind {kind:?}"))?;
            child::serve(kind)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Compare(args) => {
            let mode = if args.smoke {
                Mode::Smoke
            } else if args.quick {
                Mode::Quick
            } else {
                Mode::Full
            };
            compare(mode, args.common)
        }
        Command::Smoke(common) => compare(Mode::Smoke, common),
        Command::Soak(args) => soak::run(args),
        Command::Game(args) => {
            game::run(args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Streams(args) => {
            streams::run(args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Wakeups(args) => {
            wakeups::run(args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Outside(args) => {
            outside::run(args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::StreamsServer => {
            streams::serve()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::GameServer(args) => {
            game::server::serve(args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Presence(args) => {
            presence::run(args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Report { from, out } => {
            let rows = results::read(&from)?;
            let Some(first) = rows.first() else {
                bail!("{} holds no rows", from.display());
            };
            let environment = (*first.environment).clone();
            let mode = match environment.mode.as_str() {
                "quick" => Mode::Quick,
                "smoke" => Mode::Smoke,
                _ => Mode::Full,
            };
            let out = out.unwrap_or_else(|| from.parent().map(PathBuf::from).unwrap_or_default());
            let budgets = budget::evaluate(&rows);
            let outcome = Outcome {
                rows,
                skipped: Vec::new(),
                skipped_scenarios: Vec::new(),
                budgets,
            };
            let settings = Settings {
                plan: Plan::new(mode),
                participants: Participant::ALL.to_vec(),
                scenarios: Scenario::ALL.to_vec(),
                scenarios_named: false,
                out: out.clone(),
                check: false,
                keep_cpus_awake: false,
            };
            compare::write_outputs(&settings, &environment, &outcome)?;
            println!("{}", report::budget_table(&outcome.budgets));
            println!("report: {}", out.join("report.md").display());
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn compare(mode: Mode, args: CommonArgs) -> Result<ExitCode> {
    let participants = if args.only.is_empty() {
        Participant::ALL.to_vec()
    } else {
        let mut chosen = Vec::new();
        for name in &args.only {
            let participant = Participant::parse(name.trim()).with_context(|| {
                let names: Vec<_> = Participant::ALL.iter().map(|p| p.name()).collect();
                format!("no participant {name:?}; there are {}", names.join(", "))
            })?;
            chosen.push(participant);
        }
        // Report order, whatever the command line's.
        Participant::ALL
            .into_iter()
            .chain(Participant::DIAGNOSTIC)
            .filter(|participant| chosen.contains(participant))
            .collect()
    };
    let scenarios_named = !args.scenarios.is_empty();
    let scenarios = if args.scenarios.is_empty() {
        Scenario::ALL.to_vec()
    } else {
        args.scenarios
            .iter()
            .map(|name| {
                Scenario::parse(name.trim()).with_context(|| format!("no scenario {name:?}"))
            })
            .collect::<Result<_>>()?
    };
    let default_out = if mode == Mode::Smoke {
        "target/bench-smoke"
    } else {
        "target/bench-report"
    };
    let mut plan = Plan::new(mode);
    if let Some(members) = args.fanout_members {
        if members == 0 {
            bail!("--fanout-members must be at least 1");
        }
        plan.fanout_members = members;
    }
    let settings = Settings {
        plan,
        participants,
        scenarios,
        scenarios_named,
        out: args.out.unwrap_or_else(|| PathBuf::from(default_out)),
        check: args.check,
        keep_cpus_awake: !args.let_cpus_idle,
    };
    let outcome = compare::run(&settings)?;

    let ok = outcome.rows.iter().filter(|row| row.ok).count();
    println!(
        "{} mode: {ok} of {} cells passed{}",
        mode.name(),
        outcome.rows.len(),
        if outcome.skipped.is_empty() {
            String::new()
        } else {
            format!(
                "; skipped: {}",
                outcome
                    .skipped
                    .iter()
                    .map(|(participant, _)| participant.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    for (scenario, why) in &outcome.skipped_scenarios {
        println!("skipped the {} scenario: {why}", scenario.name());
    }
    for row in outcome.failures() {
        println!(
            "FAILED {} {} {} B x{}: {}",
            row.scenario.name(),
            row.participant,
            row.size,
            row.clients,
            row.error.as_deref().unwrap_or("?")
        );
    }
    println!("\n{}", report::budget_table(&outcome.budgets));
    println!("report: {}", settings.out.join("report.md").display());

    let failed_cells = outcome.failures().next().is_some();
    let failed_budgets = outcome
        .budgets
        .iter()
        .any(|budget| budget.pass == Some(false));
    if failed_cells || (settings.check && failed_budgets) {
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
