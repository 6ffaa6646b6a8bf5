//! One cell measured into one row: the steps every cell shares (the row
//! named before anything runs, the server child it needs, the measurement,
//! the child stopped when the cell failed or needs a fresh one), written
//! once; what differs between scenarios is in [`Cell::measure`].

use std::sync::Arc;

use anyhow::Result;
use tokio::runtime::Runtime;

use super::cells::Cell;
use super::children::Children;
use crate::environment::Environment;
use crate::participants::ServerKind;
use crate::plan::Plan;
use crate::results::{BackplaneFigures, CrowdFigures, LatencyFigures, Row, Scenario};
use crate::scenarios::backplane::{self, BACKPLANE_SIZE};
use crate::scenarios::crowd;
use crate::scenarios::fanout::{self, FANOUT_SIZE};
use crate::scenarios::push::{self, PUSH_SIZE};
use crate::window::Window;
use crate::workload;

/// Runs `cell` once and returns its row (failed, with the error, when it
/// could not be measured).
pub(super) fn run_cell(
    runtime: &Runtime,
    children: &mut Children,
    plan: &Plan,
    environment: &Arc<Environment>,
    cell: Cell,
) -> Row {
    // Named first: the row reads the load average before the cell runs.
    let row = cell.row(plan, environment);
    let measured = cell.measure(runtime, children, plan);
    if let Some(kind) = cell.server()
        && (measured.is_err() || cell.needs_fresh_child())
    {
        children.stop(kind);
    }
    match measured {
        Ok(measured) => measured.fill(row),
        Err(error) => row.failed(&error),
    }
}

/// What one cell measured, to be written into its row.
struct Measured {
    /// The window's figures, or the crowd's.
    figures: Figures,
    /// Latency percentiles (latency cells; per broadcast for fan-out).
    latency: Option<LatencyFigures>,
    /// The backplane's own figures.
    backplane: Option<BackplaneFigures>,
    /// The four AEAD operations of one echo (sealed latency cells).
    aead_ops_us: Option<f64>,
    /// What else the report should say.
    notes: Vec<String>,
}

/// The main figures of a cell.
enum Figures {
    /// Operations counted over a window, with both sides' costs.
    Window(Window),
    /// Connections held open (the crowd).
    Crowd(CrowdFigures),
}

impl Measured {
    /// A window's figures and nothing else.
    fn window(window: Window) -> Self {
        Self {
            figures: Figures::Window(window),
            latency: None,
            backplane: None,
            aead_ops_us: None,
            notes: Vec::new(),
        }
    }

    /// A crowd's figures and nothing else.
    fn crowd(figures: CrowdFigures) -> Self {
        Self {
            figures: Figures::Crowd(figures),
            latency: None,
            backplane: None,
            aead_ops_us: None,
            notes: Vec::new(),
        }
    }

    /// Writes the figures into `row`.
    fn fill(self, row: Row) -> Row {
        let mut row = match self.figures {
            Figures::Window(window) => row.with_window(&window),
            Figures::Crowd(crowd) => row.with_crowd(crowd),
        };
        row.latency = self.latency;
        row.backplane = self.backplane;
        row.aead_ops_us = self.aead_ops_us;
        row.notes = self.notes;
        row
    }
}

impl Cell {
    /// Its row, with nothing measured yet.
    fn row(&self, plan: &Plan, environment: &Arc<Environment>) -> Row {
        let (scenario, participant, size, clients, run) = match *self {
            Cell::Latency {
                participant,
                size,
                run,
            } => (Scenario::Latency, participant.name(), size, 1, run),
            Cell::Throughput {
                participant,
                size,
                clients,
                run,
            } => (Scenario::Throughput, participant.name(), size, clients, run),
            Cell::Push { target, run } => (Scenario::Push, target.name(), PUSH_SIZE, 1, run),
            Cell::Fanout { target, run } => {
                let members = plan.fanout_members;
                (Scenario::Fanout, target.name(), FANOUT_SIZE, members, run)
            }
            Cell::Crowd { participant, run } => {
                let connections = plan.crowd_connections;
                (Scenario::Crowd, participant.name(), 0, connections, run)
            }
            Cell::Backplane {
                case, members, run, ..
            } => (
                Scenario::Backplane,
                case.name(),
                BACKPLANE_SIZE,
                members,
                run,
            ),
        };
        Row::new(scenario, participant, size, clients, run, environment)
    }

    /// The run's server child it measures, if it uses one (the crowd
    /// starts its own, the backplane its nodes).
    fn server(&self) -> Option<ServerKind> {
        match *self {
            Cell::Latency { participant, .. } | Cell::Throughput { participant, .. } => {
                Some(ServerKind::Echo(participant))
            }
            Cell::Push { target, .. } => Some(target.server()),
            Cell::Fanout { target, .. } => Some(target.server()),
            Cell::Crowd { .. } | Cell::Backplane { .. } => None,
        }
    }

    /// Whether its child is stopped even when it succeeded: the fan-out's
    /// members are gone after the cell, and a fresh child keeps the next
    /// cell's group clean.
    fn needs_fresh_child(&self) -> bool {
        matches!(self, Cell::Fanout { .. })
    }

    /// Measures it: what differs between the scenarios.
    fn measure(&self, runtime: &Runtime, children: &mut Children, plan: &Plan) -> Result<Measured> {
        match *self {
            Cell::Latency {
                participant, size, ..
            } => {
                let child = children.get(ServerKind::Echo(participant))?;
                let (warmup, calls) = (plan.latency_warmup, plan.latency_calls);
                let (window, latency) =
                    workload::latency(runtime, child, participant, size, warmup, calls)?;
                // The floor of the sealed budget, under the same conditions.
                let aead_ops_us = participant
                    .is_sealed()
                    .then(|| crate::cipher::four_ops_us(size));
                Ok(Measured {
                    latency: Some(latency),
                    aead_ops_us,
                    ..Measured::window(window)
                })
            }
            Cell::Throughput {
                participant,
                size,
                clients,
                ..
            } => {
                let child = children.get(ServerKind::Echo(participant))?;
                let (warmup, window) = (plan.throughput_warmup, plan.throughput_window);
                workload::throughput(runtime, child, participant, size, clients, warmup, window)
                    .map(Measured::window)
            }
            Cell::Push { target, .. } => {
                let child = children.get(target.server())?;
                let window = push::run(runtime, child, target, plan.warmup, plan.window)?;
                let mut measured = Measured::window(window);
                measured.notes.push(format!(
                    "push task backoffs (queue above high water): {}",
                    window.server.backoffs
                ));
                Ok(measured)
            }
            Cell::Fanout { target, .. } => {
                let child = children.get(target.server())?;
                let (members, warmup, window) = (plan.fanout_members, plan.warmup, plan.window);
                let (window, latency) =
                    fanout::run(runtime, child, target, members, warmup, window)?;
                let mut measured = Measured {
                    latency: Some(latency),
                    ..Measured::window(window)
                };
                if window.server.dropped > 0 {
                    let dropped = window.server.dropped;
                    measured
                        .notes
                        .push(format!("raw frames dropped: {dropped}"));
                }
                Ok(measured)
            }
            Cell::Crowd { participant, .. } => {
                crowd::run(runtime, participant, plan.crowd_connections).map(Measured::crowd)
            }
            Cell::Backplane {
                case,
                measure,
                members,
                ..
            } => {
                let redis = if case.needs_redis() {
                    Some(children.redis()?)
                } else {
                    None
                };
                let measured = backplane::run(runtime, redis, case, measure, members, plan)?;
                Ok(Measured {
                    figures: Figures::Window(measured.window),
                    latency: measured.latency,
                    backplane: Some(measured.figures),
                    aead_ops_us: None,
                    notes: measured.notes,
                })
            }
        }
    }
}
