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

/// The p50 limit against the raw socket (issue 27).
const P50_LIMIT: f64 = 1.05;
/// The 64-client throughput floor against the raw socket.
const THROUGHPUT_FLOOR: f64 = 0.95;
/// The sealed echo's distance from the plain one, in units of the four
/// AEAD operations of one echo.
const SEALED_LIMIT: f64 = 1.15;
/// CPU per echo against the raw socket's, server and client.
const CPU_LIMIT: f64 = 1.10;
/// Echo and push throughput with resumption on against off (issue 24).
const RESUME_FLOOR: f64 = 0.95;

fn median_aead_ops(rows: &[Row], participant: Participant, size: usize) -> Option<f64> {
    Select::new(Scenario::Latency, participant.name())
        .size(size)
        .stat(rows, |row| row.aead_ops_us)
        .map(|stat| stat.median)
}

/// CPU per echo of one side in the latency cells (one client, one call at
/// a time). Not the many-client windows: there the two processes keep both
/// cores busy, the scheduler gives each about one, and each side's CPU per
/// echo comes out as one core divided by the throughput, whatever that
/// side's own cost (docs/benchmarks.md, "CPU per echo where the cores are
/// full").
fn median_cpu(rows: &[Row], participant: Participant, size: usize, server: bool) -> Option<f64> {
    Select::new(Scenario::Latency, participant.name())
        .size(size)
        .stat(rows, |row| {
            if server { row.server } else { row.client }.map(|cost| cost.cpu_us_per_op)
        })
        .map(|stat| stat.median)
}

/// Every budget, evaluated on `rows`.
pub fn evaluate(rows: &[Row]) -> Vec<Budget> {
    use Participant::*;
    let mut budgets = Vec::new();
    // Latency: ternio-tcp and ternio-ws (each with ternio-client) against
    // the raw socket of their transport; and, like for like, raw-ws's own
    // client against Ternio's WebSocket server and raw-ws's.
    for (ours, theirs, what) in [
        (TernioTcp, RawTcp, "ternio-tcp p50 / raw-tcp p50"),
        (TernioWs, RawWs, "ternio-ws p50 / raw-ws p50"),
        (
            TernioWsLean,
            RawWs,
            "ternio-ws-lean p50 / raw-ws p50 (same client)",
        ),
    ] {
        for size in SIZES {
            budgets.push(ratio_budget(
                format!("{what}, {size} B"),
                median_p50(rows, ours, size),
                median_p50(rows, theirs, size),
                P50_LIMIT,
                true,
                "µs",
            ));
        }
    }
    for size in SIZES {
        budgets.push(sealed_budget(rows, size));
    }
    for (ours, theirs, what) in [
        (TernioTcp, RawTcp, "ternio-tcp / raw-tcp"),
        (TernioWs, RawWs, "ternio-ws / raw-ws"),
    ] {
        for size in SIZES {
            budgets.push(ratio_budget(
                format!("{what} throughput, {CLIENTS} clients, {size} B"),
                median_rate(rows, ours, size),
                median_rate(rows, theirs, size),
                THROUGHPUT_FLOOR,
                false,
                "ops/s",
            ));
        }
    }
    for (server, side) in [(true, "server"), (false, "client")] {
        for size in SIZES {
            budgets.push(ratio_budget(
                format!("ternio-tcp / raw-tcp {side} CPU per echo, 1 client (latency), {size} B"),
                median_cpu(rows, TernioTcp, size, server),
                median_cpu(rows, RawTcp, size, server),
                CPU_LIMIT,
                true,
                "µs",
            ));
        }
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
    for participant in [TernioTcp, TernioWs, TernioTcpAead, TernioWsAead] {
        budgets.push(allocation_budget(rows, participant));
    }
    // Resumption's cost (issue 24): measured when ternio-tcp-resume runs.
    for size in SIZES {
        budgets.push(ratio_budget(
            format!("ternio-tcp-resume / ternio-tcp throughput, {CLIENTS} clients, {size} B"),
            median_rate(rows, TernioTcpResume, size),
            median_rate(rows, TernioTcp, size),
            RESUME_FLOOR,
            false,
            "ops/s",
        ));
    }
    budgets.push(ratio_budget(
        "ternio-tcp-resume / ternio-tcp push throughput".to_owned(),
        median_push_rate(rows, TernioTcpResume),
        median_push_rate(rows, TernioTcp),
        RESUME_FLOOR,
        false,
        "pushes/s",
    ));
    budgets
}

fn median_push_rate(rows: &[Row], participant: Participant) -> Option<f64> {
    Select::new(Scenario::Push, participant.name())
        .stat(rows, |row| Some(row.ops_per_sec))
        .map(|stat| stat.median)
}

/// The sealed echo's p50 less the plain one's (both over TCP), against the
/// four ChaCha20-Poly1305 operations of one echo timed in the same run:
/// the cipher is the contract's, so what is held is Ternio's distance from
/// that floor.
fn sealed_budget(rows: &[Row], size: usize) -> Budget {
    let sealed = median_p50(rows, Participant::TernioTcpAead, size);
    let plain = median_p50(rows, Participant::TernioTcp, size);
    let ops = median_aead_ops(rows, Participant::TernioTcpAead, size);
    let distance = sealed.zip(plain).map(|(sealed, plain)| sealed - plain);
    let mut budget = ratio_budget(
        format!("(ternio-tcp-aead p50 − ternio-tcp p50) / four AEAD operations, {size} B"),
        distance,
        ops,
        SEALED_LIMIT,
        true,
        "µs",
    );
    let show = |value: Option<f64>| value.map_or("–".to_owned(), |v| format!("{v:.1} µs"));
    budget.detail = format!(
        "{} − {} vs {}",
        show(sealed),
        show(plain),
        ops.map_or("–".to_owned(), |v| format!("{v:.2} µs"))
    );
    budget
}

/// A Ternio participant's server allocations per echo at 32 B, in steady
/// state: the timed window of the latency runs (after the warm-up) and of
/// the 64-client throughput runs. Whole-process counts, so any allocation
/// the server child makes in the window counts.
fn allocation_budget(rows: &[Row], participant: Participant) -> Budget {
    let name = allocation_budget_name(participant);
    let windows: Vec<&Row> = Select::new(Scenario::Latency, participant.name())
        .size(32)
        .rows(rows)
        .into_iter()
        .chain(
            Select::new(Scenario::Throughput, participant.name())
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

/// The name of `participant`'s allocation budget.
fn allocation_budget_name(participant: Participant) -> String {
    format!(
        "{} server allocations per echo, 32 B, steady state (latency and 64-client windows)",
        participant.name()
    )
}
