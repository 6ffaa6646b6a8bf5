//! The comparison run: every cell of the plan, participants interleaved
//! within each cell's runs, each result written as it comes, then the
//! report, the charts and the budgets.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use tokio::runtime::Runtime;

use crate::budget;
use crate::charts;
use crate::child::ServerChild;
use crate::environment::Environment;
use crate::idle::AwakeCpus;
use crate::participants::{Participant, ServerKind};
use crate::plan::Plan;
use crate::report;
use crate::results::{self, BackplaneMeasure, Row, Scenario};
use crate::scenarios::backplane::{self, BACKPLANE_SIZE, BackplaneCase, Redis};
use crate::scenarios::crowd::{self, CROWD_PARTICIPANTS};
use crate::scenarios::fanout::{self, FANOUT_SIZE, FanoutTarget};
use crate::scenarios::push::{self, PUSH_SIZE, PushTarget};
use crate::tls::TlsMaterial;
use crate::usage;
use crate::workload;

/// What to run and where to write it.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Sizes, counts and durations.
    pub plan: Plan,
    /// Participants to run (in report order).
    pub participants: Vec<Participant>,
    /// Scenarios to run.
    pub scenarios: Vec<Scenario>,
    /// Whether the command line named them (`--scenarios`): a named
    /// scenario that cannot run fails the run instead of being skipped.
    pub scenarios_named: bool,
    /// Output folder.
    pub out: PathBuf,
    /// Exit non-zero when a budget fails.
    pub check: bool,
    /// Ask the kernel to keep idle CPUs polling for the run ([`crate::idle`]).
    pub keep_cpus_awake: bool,
}

/// One run of one cell.
#[derive(Debug, Clone, Copy)]
enum Cell {
    Latency {
        participant: Participant,
        size: usize,
        run: usize,
    },
    Throughput {
        participant: Participant,
        size: usize,
        clients: usize,
        run: usize,
    },
    Push {
        target: PushTarget,
        run: usize,
    },
    Fanout {
        target: FanoutTarget,
        run: usize,
    },
    Crowd {
        participant: Participant,
        run: usize,
    },
    Backplane {
        case: BackplaneCase,
        measure: BackplaneMeasure,
        members: usize,
        run: usize,
    },
}

impl Cell {
    fn label(&self) -> String {
        match self {
            Cell::Latency {
                participant,
                size,
                run,
            } => format!("latency {participant} {size} B run {}", run + 1),
            Cell::Throughput {
                participant,
                size,
                clients,
                run,
            } => format!(
                "throughput {participant} {size} B x{clients} run {}",
                run + 1
            ),
            Cell::Push { target, run } => format!("push {} run {}", target.name(), run + 1),
            Cell::Fanout { target, run } => format!("fan-out {} run {}", target.name(), run + 1),
            Cell::Crowd { participant, run } => format!("crowd {participant} run {}", run + 1),
            Cell::Backplane {
                case,
                measure,
                members,
                run,
            } => format!(
                "backplane {} {} x{members} run {}",
                match measure {
                    BackplaneMeasure::Throughput => "throughput",
                    BackplaneMeasure::Latency => "latency",
                },
                case.name(),
                run + 1
            ),
        }
    }
}

/// `items` rotated by `run`, so that no participant always goes first.
fn rotated<T: Copy>(items: &[T], run: usize) -> Vec<T> {
    let mut items = items.to_vec();
    if !items.is_empty() {
        let by = run % items.len();
        items.rotate_left(by);
    }
    items
}

/// Every cell of `scenarios`, in the order they run: for each workload and
/// shape, run after run, every participant once per run.
fn cells(plan: &Plan, scenarios: &[Scenario], runnable: &[Participant]) -> Vec<Cell> {
    let wants = |scenario| scenarios.contains(&scenario);
    let mut cells = Vec::new();
    if wants(Scenario::Latency) {
        for &size in &plan.sizes {
            for run in 0..plan.runs {
                for participant in rotated(runnable, run) {
                    cells.push(Cell::Latency {
                        participant,
                        size,
                        run,
                    });
                }
            }
        }
    }
    if wants(Scenario::Throughput) {
        for &size in &plan.sizes {
            for &clients in &plan.client_counts {
                for run in 0..plan.runs {
                    for participant in rotated(runnable, run) {
                        cells.push(Cell::Throughput {
                            participant,
                            size,
                            clients,
                            run,
                        });
                    }
                }
            }
        }
    }
    if wants(Scenario::Push) {
        let targets: Vec<_> = PushTarget::ALL
            .into_iter()
            .filter(|target| runnable.contains(&target.participant()))
            .collect();
        for run in 0..plan.runs {
            for target in rotated(&targets, run) {
                cells.push(Cell::Push { target, run });
            }
        }
    }
    if wants(Scenario::Fanout) {
        let targets: Vec<_> = FanoutTarget::ALL
            .into_iter()
            .filter(|target| runnable.contains(&target.participant()))
            .collect();
        for run in 0..plan.runs {
            for target in rotated(&targets, run) {
                cells.push(Cell::Fanout { target, run });
            }
        }
    }
    if wants(Scenario::Crowd) {
        let targets: Vec<_> = CROWD_PARTICIPANTS
            .into_iter()
            .filter(|participant| runnable.contains(participant))
            .collect();
        for run in 0..plan.runs {
            for participant in rotated(&targets, run) {
                cells.push(Cell::Crowd { participant, run });
            }
        }
    }
    if wants(Scenario::Backplane) {
        let cases: Vec<_> = BackplaneCase::ALL
            .into_iter()
            .filter(|case| runnable.contains(&case.participant()))
            .collect();
        let shapes = plan
            .backplane_members
            .iter()
            .map(|&members| (BackplaneMeasure::Throughput, members))
            .chain([(BackplaneMeasure::Latency, plan.backplane_latency_members)]);
        for (measure, members) in shapes {
            for run in 0..plan.runs {
                for case in rotated(&cases, run) {
                    cells.push(Cell::Backplane {
                        case,
                        measure,
                        members,
                        run,
                    });
                }
            }
        }
    }
    cells
}

/// The server children of a run, started on first use and kept for the
/// rest of it (a child whose cell failed is stopped and started afresh),
/// and the `redis-server` of the backplane cells.
struct Children {
    tls: Arc<TlsMaterial>,
    running: HashMap<&'static str, ServerChild>,
    redis: Option<Redis>,
}

impl Children {
    /// The run's `redis-server`, started on first use.
    fn redis(&mut self) -> Result<&Redis> {
        if self.redis.is_none() {
            self.redis = Some(Redis::start()?);
        }
        Ok(self.redis.as_ref().expect("started just above"))
    }

    fn get(&mut self, kind: ServerKind) -> Result<&mut ServerChild> {
        if !self.running.contains_key(kind.name()) {
            let tls = match kind {
                ServerKind::Echo(participant) if participant.uses_tls() => {
                    Some(Arc::clone(&self.tls))
                }
                _ => None,
            };
            self.running
                .insert(kind.name(), ServerChild::spawn(kind, tls)?);
        }
        Ok(self
            .running
            .get_mut(kind.name())
            .expect("inserted just above"))
    }

    fn stop(&mut self, kind: ServerKind) {
        self.running.remove(kind.name());
    }
}

/// What a whole run produced.
pub struct Outcome {
    /// Every row.
    pub rows: Vec<Row>,
    /// Participants that could not run, and why.
    pub skipped: Vec<(Participant, &'static str)>,
    /// Scenarios that could not run (and were not named), and why.
    pub skipped_scenarios: Vec<(Scenario, String)>,
    /// The budgets.
    pub budgets: Vec<budget::Budget>,
}

impl Outcome {
    /// Rows that failed.
    pub fn failures(&self) -> impl Iterator<Item = &Row> {
        self.rows.iter().filter(|row| !row.ok)
    }
}

/// Runs every cell, writes the results, the report and the charts.
pub fn run(settings: &Settings) -> Result<Outcome> {
    usage::raise_open_file_limit();
    let skipped: Vec<_> = settings
        .participants
        .iter()
        .filter_map(|&participant| participant.unavailable().map(|why| (participant, why)))
        .collect();
    let runnable: Vec<_> = settings
        .participants
        .iter()
        .copied()
        .filter(|participant| participant.unavailable().is_none())
        .collect();
    for (participant, why) in &skipped {
        eprintln!("skipped {participant}: {why}");
    }
    let mut scenarios = settings.scenarios.clone();
    let mut skipped_scenarios = Vec::new();
    let backplane_runs = BackplaneCase::ALL
        .iter()
        .any(|case| runnable.contains(&case.participant()));
    if scenarios.contains(&Scenario::Backplane)
        && backplane_runs
        && let Err(why) = Redis::check()
    {
        if settings.scenarios_named {
            bail!("the backplane scenario needs a redis-server: {why}");
        }
        eprintln!("skipped the backplane scenario: {why}");
        scenarios.retain(|&scenario| scenario != Scenario::Backplane);
        skipped_scenarios.push((Scenario::Backplane, why));
    }

    std::fs::create_dir_all(&settings.out)
        .with_context(|| format!("cannot create {}", settings.out.display()))?;
    let jsonl = settings.out.join("results.jsonl");
    let _ = std::fs::remove_file(&jsonl);
    let mut environment = Environment::capture(settings.plan.mode.name());
    let _awake = if settings.keep_cpus_awake {
        match AwakeCpus::request() {
            Ok(awake) => {
                environment.idle_cpus = "kept awake (PM QoS: 0 µs wake-up latency)".to_owned();
                Some(awake)
            }
            Err(error) => {
                eprintln!("idle CPUs may halt: /dev/cpu_dma_latency refused ({error})");
                environment.idle_cpus = format!("free to halt (PM QoS refused: {error})");
                None
            }
        }
    } else {
        environment.idle_cpus = "free to halt (--let-cpus-idle)".to_owned();
        None
    };
    let environment = Arc::new(environment);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let cells = cells(&settings.plan, &scenarios, &runnable);
    let progress = ProgressBar::new(cells.len() as u64);
    progress.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let mut children = Children {
        tls: Arc::new(TlsMaterial::generate()?),
        running: HashMap::new(),
        redis: None,
    };
    let mut rows = Vec::with_capacity(cells.len());
    for cell in cells {
        progress.set_message(cell.label());
        let row = run_cell(&runtime, &mut children, settings, &environment, cell);
        if let Some(error) = &row.error {
            progress.println(format!("{}: FAILED: {error}", cell.label()));
        }
        results::append(&jsonl, &row)?;
        rows.push(row);
        progress.inc(1);
    }
    progress.finish_and_clear();
    drop(children);
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));

    let budgets = budget::evaluate(&rows);
    let outcome = Outcome {
        rows,
        skipped,
        skipped_scenarios,
        budgets,
    };
    write_outputs(settings, &environment, &outcome)?;
    Ok(outcome)
}

/// Writes `report.md`, `latency.svg` and `throughput.svg`.
pub fn write_outputs(
    settings: &Settings,
    environment: &Environment,
    outcome: &Outcome,
) -> Result<()> {
    let markdown = report::markdown(&settings.plan, environment, outcome);
    std::fs::write(settings.out.join("report.md"), markdown)?;
    charts::latency(&settings.out.join("latency.svg"), &outcome.rows)?;
    charts::throughput(&settings.out.join("throughput.svg"), &outcome.rows)?;
    Ok(())
}

fn run_cell(
    runtime: &Runtime,
    children: &mut Children,
    settings: &Settings,
    environment: &Arc<Environment>,
    cell: Cell,
) -> Row {
    let plan = &settings.plan;
    match cell {
        Cell::Latency {
            participant,
            size,
            run,
        } => {
            let row = Row::new(
                Scenario::Latency,
                participant.name(),
                size,
                1,
                run,
                environment,
            );
            let kind = ServerKind::Echo(participant);
            let measured = children.get(kind).and_then(|child| {
                workload::latency(
                    runtime,
                    child,
                    participant,
                    size,
                    plan.latency_warmup,
                    plan.latency_calls,
                )
            });
            match measured {
                Ok((window, latency)) => {
                    let mut row = row.with_window(&window);
                    row.latency = Some(latency);
                    row
                }
                Err(error) => {
                    children.stop(kind);
                    row.failed(&error)
                }
            }
        }
        Cell::Throughput {
            participant,
            size,
            clients,
            run,
        } => {
            let row = Row::new(
                Scenario::Throughput,
                participant.name(),
                size,
                clients,
                run,
                environment,
            );
            let kind = ServerKind::Echo(participant);
            let measured = children.get(kind).and_then(|child| {
                workload::throughput(
                    runtime,
                    child,
                    participant,
                    size,
                    clients,
                    plan.warmup,
                    plan.window,
                )
            });
            match measured {
                Ok(window) => row.with_window(&window),
                Err(error) => {
                    children.stop(kind);
                    row.failed(&error)
                }
            }
        }
        Cell::Push { target, run } => {
            let row = Row::new(
                Scenario::Push,
                target.name(),
                PUSH_SIZE,
                1,
                run,
                environment,
            );
            let measured = children
                .get(target.server())
                .and_then(|child| push::run(runtime, child, target, plan.warmup, plan.window));
            match measured {
                Ok(window) => {
                    let mut row = row.with_window(&window);
                    row.notes.push(format!(
                        "push task backoffs (queue above high water): {}",
                        window.server.backoffs
                    ));
                    row
                }
                Err(error) => {
                    children.stop(target.server());
                    row.failed(&error)
                }
            }
        }
        Cell::Fanout { target, run } => {
            let row = Row::new(
                Scenario::Fanout,
                target.name(),
                FANOUT_SIZE,
                plan.fanout_members,
                run,
                environment,
            );
            let measured = children.get(target.server()).and_then(|child| {
                fanout::run(
                    runtime,
                    child,
                    target,
                    plan.fanout_members,
                    plan.warmup,
                    plan.window,
                )
            });
            // The members are gone after the cell; a fresh child keeps the
            // next cell's group clean.
            children.stop(target.server());
            match measured {
                Ok((window, latency)) => {
                    let mut row = row.with_window(&window);
                    row.latency = Some(latency);
                    if window.server.dropped > 0 {
                        row.notes
                            .push(format!("raw frames dropped: {}", window.server.dropped));
                    }
                    row
                }
                Err(error) => row.failed(&error),
            }
        }
        Cell::Crowd { participant, run } => {
            let row = Row::new(
                Scenario::Crowd,
                participant.name(),
                0,
                plan.crowd_connections,
                run,
                environment,
            );
            match crowd::run(runtime, participant, plan.crowd_connections) {
                Ok(figures) => {
                    let mut row = row;
                    row.ok = true;
                    row.ops = figures.connections as u64;
                    row.seconds = figures.connect_seconds;
                    row.ops_per_sec =
                        figures.connections as f64 / figures.connect_seconds.max(1e-9);
                    row.crowd = Some(figures);
                    row
                }
                Err(error) => row.failed(&error),
            }
        }
        Cell::Backplane {
            case,
            measure,
            members,
            run,
        } => {
            let row = Row::new(
                Scenario::Backplane,
                case.name(),
                BACKPLANE_SIZE,
                members,
                run,
                environment,
            );
            let redis = if case.needs_redis() {
                children.redis().map(Some)
            } else {
                Ok(None)
            };
            let measured = redis
                .and_then(|redis| backplane::run(runtime, redis, case, measure, members, plan));
            match measured {
                Ok(measured) => {
                    let mut row = row.with_window(&measured.window);
                    row.latency = measured.latency;
                    row.backplane = Some(measured.figures);
                    row.notes = measured.notes;
                    row
                }
                Err(error) => row.failed(&error),
            }
        }
    }
}
