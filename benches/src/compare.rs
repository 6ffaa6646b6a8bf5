//! The comparison run: every cell of the plan, participants interleaved
//! within each cell's runs, each result written as it comes, then the
//! report, the charts and the budgets.

mod cells;
mod children;
mod measure;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};

use self::cells::Cell;
use self::children::Children;
use self::measure::run_cell;
use crate::budget;
use crate::charts;
use crate::environment::Environment;
use crate::idle::AwakeCpus;
use crate::participants::Participant;
use crate::plan::Plan;
use crate::report;
use crate::results::{self, Row, Scenario};
use crate::scenarios::backplane::{BackplaneCase, Redis};
use crate::tls::TlsMaterial;
use crate::usage;

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
    let (runnable, skipped) = runnable_participants(settings);
    let (scenarios, skipped_scenarios) = runnable_scenarios(settings, &runnable)?;
    std::fs::create_dir_all(&settings.out)
        .with_context(|| format!("cannot create {}", settings.out.display()))?;
    let jsonl = settings.out.join("results.jsonl");
    let _ = std::fs::remove_file(&jsonl);
    let mut environment = Environment::capture(settings.plan.mode.name());
    // Kept to the end of the run: dropping it lets idle CPUs halt again.
    let _awake = keep_cpus_awake(settings, &mut environment);
    let environment = Arc::new(environment);
    let cells = cells::cells(&settings.plan, &scenarios, &runnable);
    let rows = run_cells(settings, &environment, cells, &jsonl)?;

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

/// The participants that can run, and those that cannot (said on stderr)
/// with why.
fn runnable_participants(
    settings: &Settings,
) -> (Vec<Participant>, Vec<(Participant, &'static str)>) {
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
    (runnable, skipped)
}

/// Scenarios that a run leaves out, and why.
type SkippedScenarios = Vec<(Scenario, String)>;

/// The scenarios to run, and those skipped with why: the backplane when no
/// `redis-server` can run (an error instead when the command line named
/// the scenarios).
fn runnable_scenarios(
    settings: &Settings,
    runnable: &[Participant],
) -> Result<(Vec<Scenario>, SkippedScenarios)> {
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
    Ok((scenarios, skipped_scenarios))
}

/// Asks the kernel to keep idle CPUs polling, when the settings want it,
/// and notes in `environment` what came of it.
fn keep_cpus_awake(settings: &Settings, environment: &mut Environment) -> Option<AwakeCpus> {
    if !settings.keep_cpus_awake {
        environment.idle_cpus = "free to halt (--let-cpus-idle)".to_owned();
        return None;
    }
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
}

/// Runs `cells` in order, with a progress bar, appending each row to
/// `jsonl` as it comes.
fn run_cells(
    settings: &Settings,
    environment: &Arc<Environment>,
    cells: Vec<Cell>,
    jsonl: &Path,
) -> Result<Vec<Row>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let progress = ProgressBar::new(cells.len() as u64);
    progress.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let mut children = Children::new(TlsMaterial::generate()?);
    let mut rows = Vec::with_capacity(cells.len());
    for cell in cells {
        progress.set_message(cell.label());
        let row = run_cell(&runtime, &mut children, &settings.plan, environment, cell);
        if let Some(error) = &row.error {
            progress.println(format!("{}: FAILED: {error}", cell.label()));
        }
        results::append(jsonl, &row)?;
        rows.push(row);
        progress.inc(1);
    }
    progress.finish_and_clear();
    drop(children);
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    Ok(rows)
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
