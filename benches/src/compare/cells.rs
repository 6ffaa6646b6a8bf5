//! The cells of a run, in the order they run: for each workload and shape,
//! run after run, every participant once per run. Within a run the
//! participants go in [`Participant::RUN_ORDER`], which puts the two sides
//! of each budget's ratio next to each other, forwards in the first run,
//! backwards in the second and so on, so that neither side always goes
//! first.

use crate::participants::Participant;
use crate::plan::Plan;
use crate::results::{BackplaneMeasure, Scenario};
use crate::scenarios::backplane::BackplaneCase;
use crate::scenarios::crowd::CROWD_PARTICIPANTS;
use crate::scenarios::fanout::FanoutTarget;
use crate::scenarios::push::PushTarget;

/// One run of one cell.
#[derive(Debug, Clone, Copy)]
pub(super) enum Cell {
    /// One client, sequential echoes of `size` bytes, each timed.
    Latency {
        /// Whose echo.
        participant: Participant,
        /// Payload bytes.
        size: usize,
        /// Which of the cell's runs (from 0).
        run: usize,
    },
    /// `clients` connections echoing `size` bytes in a closed loop.
    Throughput {
        /// Whose echo.
        participant: Participant,
        /// Payload bytes.
        size: usize,
        /// Client connections.
        clients: usize,
        /// Which of the cell's runs (from 0).
        run: usize,
    },
    /// The server pushing to one client as fast as it drains.
    Push {
        /// Who pushes, and who reads.
        target: PushTarget,
        /// Which of the cell's runs (from 0).
        run: usize,
    },
    /// One broadcast at a time reaching every member of a group.
    Fanout {
        /// Whose broadcast.
        target: FanoutTarget,
        /// Which of the cell's runs (from 0).
        run: usize,
    },
    /// Many idle connections held against a fresh server.
    Crowd {
        /// Whose server.
        participant: Participant,
        /// Which of the cell's runs (from 0).
        run: usize,
    },
    /// Group broadcasts across two nodes joined by the Redis backplane.
    Backplane {
        /// Where the members sit.
        case: BackplaneCase,
        /// Throughput or latency.
        measure: BackplaneMeasure,
        /// Group members.
        members: usize,
        /// Which of the cell's runs (from 0).
        run: usize,
    },
}

impl Cell {
    /// What the progress bar (and a failure's line) calls it.
    pub(super) fn label(&self) -> String {
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

/// `items` in their order in runs 0, 2, 4, ... and reversed in runs 1, 3,
/// 5, ...: neighbours stay neighbours, and each pair swaps which of its two
/// goes first.
fn directed<T: Copy>(items: &[T], run: usize) -> Vec<T> {
    let mut items = items.to_vec();
    if run % 2 == 1 {
        items.reverse();
    }
    items
}

/// `runs` runs of one cell shape, each going through every one of `items`
/// (in [`directed`] order) before the next run.
fn interleaved<T: Copy>(runs: usize, items: &[T], cell: impl Fn(T, usize) -> Cell) -> Vec<Cell> {
    (0..runs)
        .flat_map(|run| {
            directed(items, run)
                .into_iter()
                .map(move |item| (item, run))
        })
        .map(|(item, run)| cell(item, run))
        .collect()
}

/// `runnable` in [`Participant::RUN_ORDER`].
fn in_run_order(runnable: &[Participant]) -> Vec<Participant> {
    Participant::RUN_ORDER
        .into_iter()
        .filter(|participant| runnable.contains(participant))
        .collect()
}

/// Every cell of `scenarios`, in the order they run: for each workload and
/// shape, run after run, every participant once per run.
pub(super) fn cells(plan: &Plan, scenarios: &[Scenario], runnable: &[Participant]) -> Vec<Cell> {
    let runnable = &in_run_order(runnable)[..];
    let wants = |scenario| scenarios.contains(&scenario);
    let mut cells = Vec::new();
    if wants(Scenario::Latency) {
        cells.extend(latency_cells(plan, runnable));
    }
    if wants(Scenario::Throughput) {
        cells.extend(throughput_cells(plan, runnable));
    }
    if wants(Scenario::Push) {
        let targets = runnable_of(&PushTarget::ALL, runnable, |target| target.participant());
        cells.extend(interleaved(plan.runs, &targets, |target, run| Cell::Push {
            target,
            run,
        }));
    }
    if wants(Scenario::Fanout) {
        let targets = runnable_of(&FanoutTarget::ALL, runnable, |target| target.participant());
        cells.extend(interleaved(plan.runs, &targets, |target, run| {
            Cell::Fanout { target, run }
        }));
    }
    if wants(Scenario::Crowd) {
        let targets = runnable_of(&CROWD_PARTICIPANTS, runnable, |participant| participant);
        cells.extend(interleaved(plan.runs, &targets, |participant, run| {
            Cell::Crowd { participant, run }
        }));
    }
    if wants(Scenario::Backplane) {
        cells.extend(backplane_cells(plan, runnable));
    }
    cells
}

/// Those of `items` whose participant is runnable, in their order.
fn runnable_of<T: Copy>(
    items: &[T],
    runnable: &[Participant],
    participant: impl Fn(T) -> Participant,
) -> Vec<T> {
    items
        .iter()
        .copied()
        .filter(|&item| runnable.contains(&participant(item)))
        .collect()
}

/// Latency: for each payload size, every run of every participant.
fn latency_cells(plan: &Plan, runnable: &[Participant]) -> Vec<Cell> {
    plan.sizes
        .iter()
        .flat_map(|&size| {
            interleaved(plan.latency_runs, runnable, move |participant, run| {
                Cell::Latency {
                    participant,
                    size,
                    run,
                }
            })
        })
        .collect()
}

/// Throughput: for each payload size and client count, every run of every
/// participant.
fn throughput_cells(plan: &Plan, runnable: &[Participant]) -> Vec<Cell> {
    let mut cells = Vec::new();
    for &size in &plan.sizes {
        for &clients in &plan.client_counts {
            cells.extend(interleaved(
                plan.throughput_runs,
                runnable,
                |participant, run| Cell::Throughput {
                    participant,
                    size,
                    clients,
                    run,
                },
            ));
        }
    }
    cells
}

/// Backplane: the throughput shapes (one per member count), then the
/// latency shape, each with every run of every case.
fn backplane_cells(plan: &Plan, runnable: &[Participant]) -> Vec<Cell> {
    let cases = runnable_of(&BackplaneCase::ALL, runnable, |case| case.participant());
    let shapes = plan
        .backplane_members
        .iter()
        .map(|&members| (BackplaneMeasure::Throughput, members))
        .chain([(BackplaneMeasure::Latency, plan.backplane_latency_members)]);
    let mut cells = Vec::new();
    for (measure, members) in shapes {
        cells.extend(interleaved(plan.runs, &cases, |case, run| {
            Cell::Backplane {
                case,
                measure,
                members,
                run,
            }
        }));
    }
    cells
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Mode;

    /// The order of a run with two runs per cell: each run goes through
    /// every participant (forwards, then backwards) before the next run
    /// starts.
    #[test]
    fn cells_interleave_the_participants_run_by_run() {
        let plan = Plan {
            runs: 2,
            latency_runs: 2,
            throughput_runs: 2,
            ..Plan::new(Mode::Smoke)
        };
        let runnable = [Participant::RawTcp, Participant::TernioTcp];
        let labels: Vec<String> = cells(&plan, &Scenario::ALL, &runnable)
            .iter()
            .map(Cell::label)
            .collect();
        let mut expected = Vec::new();
        for size in [32, 1024] {
            for (a, b, run) in [("ternio-tcp", "raw-tcp", 1), ("raw-tcp", "ternio-tcp", 2)] {
                expected.push(format!("latency {a} {size} B run {run}"));
                expected.push(format!("latency {b} {size} B run {run}"));
            }
        }
        for size in [32, 1024] {
            for (a, b, run) in [("ternio-tcp", "raw-tcp", 1), ("raw-tcp", "ternio-tcp", 2)] {
                expected.push(format!("throughput {a} {size} B x4 run {run}"));
                expected.push(format!("throughput {b} {size} B x4 run {run}"));
            }
        }
        for (targets, run) in [
            (["raw-tcp", "ternio-tcp-socket", "ternio-tcp"], 1),
            (["ternio-tcp", "ternio-tcp-socket", "raw-tcp"], 2),
        ] {
            for target in targets {
                expected.push(format!("push {target} run {run}"));
            }
        }
        for scenario in ["fan-out", "crowd"] {
            for (a, b, run) in [("raw-tcp", "ternio-tcp", 1), ("ternio-tcp", "raw-tcp", 2)] {
                expected.push(format!("{scenario} {a} run {run}"));
                expected.push(format!("{scenario} {b} run {run}"));
            }
        }
        for measure in ["throughput", "latency"] {
            for (cases, run) in [
                (["standalone", "local", "cross-node"], 1),
                (["cross-node", "local", "standalone"], 2),
            ] {
                for case in cases {
                    expected.push(format!("backplane {measure} {case} x4 run {run}"));
                }
            }
        }
        assert_eq!(labels, expected);
    }

    /// In every run of a full run with every participant, the two sides of
    /// each budget's ratio run one right after the other (ternio-tcp-resume
    /// two apart from ternio-tcp, tonic-duplex three), and the order runs
    /// each way in turn.
    #[test]
    fn the_two_sides_of_each_budget_run_back_to_back() {
        use Participant::*;
        let plan = Plan::new(Mode::Full);
        let every: Vec<Participant> = Participant::ALL
            .into_iter()
            .chain(Participant::DIAGNOSTIC)
            .collect();
        let mut order = Participant::RUN_ORDER.to_vec();
        order.sort();
        order.dedup();
        assert_eq!(
            order.len(),
            every.len(),
            "RUN_ORDER names each participant once"
        );
        let cells = cells(&plan, &[Scenario::Throughput], &every);
        let per_run = every.len();
        let shape = &cells[..plan.throughput_runs * per_run];
        let mut firsts = Vec::new();
        for run in shape.chunks(per_run) {
            let position = |wanted: Participant| {
                run.iter()
                    .position(|cell| {
                        matches!(cell, Cell::Throughput { participant, .. } if *participant == wanted)
                    })
                    .expect("every participant runs once per run")
            };
            for (ours, theirs, apart) in [
                (TernioTcp, RawTcp, 1),
                (TernioTcpLean, RawTcp, 1),
                (TernioWs, RawWs, 1),
                (TernioWsLean, RawWs, 1),
                (TernioTcpAead, TernioTcp, 1),
                (TernioTcpResume, TernioTcp, 2),
                (TonicDuplex, TernioTcp, 3),
            ] {
                let distance = position(ours).abs_diff(position(theirs));
                assert!(
                    distance <= apart,
                    "{ours} and {theirs} are {distance} apart"
                );
            }
            firsts.push(position(TernioTcp) < position(RawTcp));
        }
        let alternating: Vec<bool> = (0..plan.throughput_runs).map(|run| run % 2 == 0).collect();
        assert_eq!(firsts, alternating);
    }

    /// A scenario left out has no cells; the others keep their order.
    #[test]
    fn cells_hold_only_the_scenarios_asked_for() {
        let plan = Plan::new(Mode::Smoke);
        let cells = cells(
            &plan,
            &[Scenario::Crowd, Scenario::Push],
            &[Participant::RawTcp],
        );
        let labels: Vec<String> = cells.iter().map(Cell::label).collect();
        assert_eq!(labels, ["push raw-tcp run 1", "crowd raw-tcp run 1"]);
    }
}
