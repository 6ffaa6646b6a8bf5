//! The budgets Ternio is held to, all ratios from the same run: what each
//! measured, its limit, and whether it passed. `compare --check` exits
//! non-zero when one fails.

use crate::aggregate::Select;
use crate::participants::Participant;
use crate::results::{Row, Scenario};

/// Payload sizes the budgets are checked at.
const SIZES: [usize; 2] = [32, 1024];
/// The client count of the throughput budgets.
const CLIENTS: usize = 64;

/// One budget's outcome.
#[derive(Debug, Clone)]
pub struct Budget {
    /// What is held to what.
    pub name: String,
    /// The limit, as text (`≤ 1.15`).
    pub limit: String,
    /// What was measured (a ratio, or a count per echo).
    pub measured: Option<f64>,
    /// The figures it was computed from.
    pub detail: String,
    /// Whether it passed; `None` when it could not be measured in this run.
    pub pass: Option<bool>,
}

impl Budget {
    /// `pass` as a word for the tables.
    pub fn verdict(&self) -> &'static str {
        match self.pass {
            Some(true) => "pass",
            Some(false) => "FAIL",
            None => "not measured",
        }
    }
}

fn median_p50(rows: &[Row], participant: Participant, size: usize) -> Option<f64> {
    Select::new(Scenario::Latency, participant.name())
        .size(size)
        .stat(rows, |row| row.latency.map(|l| l.p50_us))
        .map(|stat| stat.median)
}

fn median_rate(rows: &[Row], participant: Participant, size: usize) -> Option<f64> {
    Select::new(Scenario::Throughput, participant.name())
        .size(size)
        .clients(CLIENTS)
        .stat(rows, |row| Some(row.ops_per_sec))
        .map(|stat| stat.median)
}

/// `ours` / `theirs` held to `limit` (at most, or at least).
fn ratio_budget(
    name: String,
    ours: Option<f64>,
    theirs: Option<f64>,
    limit: f64,
    at_most: bool,
    unit: &str,
) -> Budget {
    let measured = match (ours, theirs) {
        (Some(ours), Some(theirs)) if theirs > 0.0 => Some(ours / theirs),
        _ => None,
    };
    let show = |value: Option<f64>| value.map_or("–".to_owned(), |v| format!("{v:.1} {unit}"));
    Budget {
        name,
        limit: format!("{} {limit:.2}", if at_most { "≤" } else { "≥" }),
        measured,
        detail: format!("{} vs {}", show(ours), show(theirs)),
        pass: measured.map(|ratio| {
            if at_most {
                ratio <= limit
            } else {
                ratio >= limit
            }
        }),
    }
}

/// Every budget, evaluated on `rows`.
pub fn evaluate(rows: &[Row]) -> Vec<Budget> {
    use Participant::*;
    let mut budgets = Vec::new();
    for size in SIZES {
        budgets.push(ratio_budget(
            format!("ternio-tcp p50 / raw-tcp p50, {size} B"),
            median_p50(rows, TernioTcp, size),
            median_p50(rows, RawTcp, size),
            1.15,
            true,
            "µs",
        ));
    }
    for size in SIZES {
        budgets.push(ratio_budget(
            format!("ternio-tcp-aead p50 / raw-tcp p50, {size} B"),
            median_p50(rows, TernioTcpAead, size),
            median_p50(rows, RawTcp, size),
            1.25,
            true,
            "µs",
        ));
    }
    // Like for like: raw-ws's client against Ternio's WebSocket server and
    // against raw-ws's own, so that the ratio is the servers' alone
    // (ternio-ws, with ternio-client, is in the tables beside it).
    for size in SIZES {
        budgets.push(ratio_budget(
            format!("ternio-ws-lean p50 / raw-ws p50 (same client), {size} B"),
            median_p50(rows, TernioWsLean, size),
            median_p50(rows, RawWs, size),
            1.15,
            true,
            "µs",
        ));
    }
    for size in SIZES {
        budgets.push(ratio_budget(
            format!("ternio-tcp / raw-tcp throughput, {CLIENTS} clients, {size} B"),
            median_rate(rows, TernioTcp, size),
            median_rate(rows, RawTcp, size),
            0.85,
            false,
            "ops/s",
        ));
    }
    for size in SIZES {
        budgets.push(ratio_budget(
            format!("ternio-tcp / tonic-duplex throughput, {CLIENTS} clients, {size} B"),
            median_rate(rows, TernioTcp, size),
            median_rate(rows, TonicDuplex, size),
            1.5,
            false,
            "ops/s",
        ));
    }
    budgets.push(allocation_budget(rows));
    budgets
}

/// ternio-tcp's server allocations per echo at 32 B, in steady state: the
/// timed window of the latency runs (after the warm-up) and of the
/// 64-client throughput runs. Whole-process counts, so any allocation the
/// server child makes in the window counts.
fn allocation_budget(rows: &[Row]) -> Budget {
    let name = TERNIO_ALLOCATION_BUDGET.to_owned();
    let windows: Vec<&Row> = Select::new(Scenario::Latency, Participant::TernioTcp.name())
        .size(32)
        .rows(rows)
        .into_iter()
        .chain(
            Select::new(Scenario::Throughput, Participant::TernioTcp.name())
                .size(32)
                .clients(CLIENTS)
                .rows(rows),
        )
        .collect();
    let counted: Vec<(u64, u64)> = windows
        .iter()
        .filter_map(|row| row.server.map(|cost| (cost.allocs_total, row.ops)))
        .collect();
    if counted.is_empty() {
        return Budget {
            name,
            limit: "= 0".to_owned(),
            measured: None,
            detail: "–".to_owned(),
            pass: None,
        };
    }
    let allocations: u64 = counted.iter().map(|(count, _)| count).sum();
    let echoes: u64 = counted.iter().map(|(_, ops)| ops).sum();
    Budget {
        name,
        limit: "= 0".to_owned(),
        measured: Some(allocations as f64 / echoes.max(1) as f64),
        detail: format!("{allocations} allocations in {echoes} echoes"),
        pass: Some(allocations == 0),
    }
}

/// The name of the allocation budget.
const TERNIO_ALLOCATION_BUDGET: &str =
    "ternio-tcp server allocations per echo, 32 B, steady state (latency and 64-client windows)";
