//! The budgets Ternio is held to, all ratios from the same run: what each
//! measured, its limit, and whether it passed. `compare --check` exits
//! non-zero when one fails.
//!
//! A ratio is taken within each run and the budget holds the median of
//! those ratios. Each run of a cell goes through every participant before
//! the next run starts, the two sides of a ratio back to back
//! (`compare::cells`), so the two windows of one run ran one right after
//! the other; the host's speed changes in stretches of a few cells
//! (docs/benchmarks.md, "A full run at 7ade823"). The median of per-run
//! ratios outvotes a run whose two windows fell on either side of such a
//! change, where the ratio of the two participants' medians compares
//! whichever speeds each one's windows happened to get.

use std::collections::BTreeMap;

use crate::aggregate::{Select, Stat};
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

/// A figure of the selected rows, by run.
fn by_run(
    select: Select<'_>,
    rows: &[Row],
    figure: impl Fn(&Row) -> Option<f64>,
) -> BTreeMap<usize, f64> {
    select
        .rows(rows)
        .into_iter()
        .filter_map(|row| Some((row.run, figure(row)?)))
        .filter(|(_, value)| value.is_finite())
        .collect()
}

/// Two participants' figures, compared run by run.
struct Paired {
    /// Our median over the runs (shown, not held).
    ours: Option<f64>,
    /// Theirs.
    theirs: Option<f64>,
    /// What is held, in each run that both completed, in run order.
    per_run: Vec<f64>,
}

impl Paired {
    /// `ours ÷ theirs` in each run.
    fn ratios(ours: &BTreeMap<usize, f64>, theirs: &BTreeMap<usize, f64>) -> Self {
        let per_run = ours
            .iter()
            .filter_map(|(run, ours)| {
                let theirs = theirs.get(run)?;
                (*theirs > 0.0).then(|| ours / theirs)
            })
            .collect();
        Self {
            ours: median(ours),
            theirs: median(theirs),
            per_run,
        }
    }

    /// The median of the per-run figures.
    fn measured(&self) -> Option<f64> {
        Stat::of(self.per_run.iter().copied()).map(|stat| stat.median)
    }

    /// The per-run figures, for the table, when there is more than one.
    fn runs_text(&self) -> String {
        if self.per_run.len() < 2 {
            return String::new();
        }
        let runs: Vec<String> = self
            .per_run
            .iter()
            .map(|value| format!("{value:.3}"))
            .collect();
        format!("; per run {}", runs.join(", "))
    }
}

/// The median of a figure's runs.
fn median(by_run: &BTreeMap<usize, f64>) -> Option<f64> {
    Stat::of(by_run.values().copied()).map(|stat| stat.median)
}

/// `participant`'s figure in the latency cells of `size`, by run.
fn latency(
    rows: &[Row],
    participant: Participant,
    size: usize,
    figure: impl Fn(&Row) -> Option<f64>,
) -> BTreeMap<usize, f64> {
    by_run(
        Select::new(Scenario::Latency, participant.name()).size(size),
        rows,
        figure,
    )
}

fn p50(rows: &[Row], participant: Participant, size: usize) -> BTreeMap<usize, f64> {
    latency(rows, participant, size, |row| row.latency.map(|l| l.p50_us))
}

fn rate(rows: &[Row], participant: Participant, size: usize) -> BTreeMap<usize, f64> {
    let select = Select::new(Scenario::Throughput, participant.name())
        .size(size)
        .clients(CLIENTS);
    by_run(select, rows, |row| Some(row.ops_per_sec))
}

/// The median of the per-run ratios held to `limit` (at most, or at least).
fn ratio_budget(name: String, paired: Paired, limit: f64, at_most: bool, unit: &str) -> Budget {
    let measured = paired.measured();
    let show = |value: Option<f64>| value.map_or("–".to_owned(), |v| format!("{v:.1} {unit}"));
    Budget {
        name,
        limit: format!("{} {limit:.2}", if at_most { "≤" } else { "≥" }),
        measured,
        detail: format!(
            "{} vs {}{}",
            show(paired.ours),
            show(paired.theirs),
            paired.runs_text()
        ),
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

/// CPU per echo of one side in the latency cells (one client, one call at
/// a time). Not the many-client windows: there the two processes keep both
/// cores busy, the scheduler gives each about one, and each side's CPU per
/// echo comes out as one core divided by the throughput, whatever that
/// side's own cost (docs/benchmarks.md, "CPU per echo where the cores are
/// full").
fn cpu(rows: &[Row], participant: Participant, size: usize, server: bool) -> BTreeMap<usize, f64> {
    latency(rows, participant, size, |row| {
        if server { row.server } else { row.client }.map(|cost| cost.cpu_us_per_op)
    })
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
                Paired::ratios(&p50(rows, ours, size), &p50(rows, theirs, size)),
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
                Paired::ratios(&rate(rows, ours, size), &rate(rows, theirs, size)),
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
                Paired::ratios(
                    &cpu(rows, TernioTcp, size, server),
                    &cpu(rows, RawTcp, size, server),
                ),
                CPU_LIMIT,
                true,
                "µs",
            ));
        }
    }
    for size in SIZES {
        budgets.push(ratio_budget(
            format!("ternio-tcp / tonic-duplex throughput, {CLIENTS} clients, {size} B"),
            Paired::ratios(&rate(rows, TernioTcp, size), &rate(rows, TonicDuplex, size)),
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
            Paired::ratios(
                &rate(rows, TernioTcpResume, size),
                &rate(rows, TernioTcp, size),
            ),
            RESUME_FLOOR,
            false,
            "ops/s",
        ));
    }
    budgets.push(ratio_budget(
        "ternio-tcp-resume / ternio-tcp push throughput".to_owned(),
        Paired::ratios(
            &push_rate(rows, TernioTcpResume),
            &push_rate(rows, TernioTcp),
        ),
        RESUME_FLOOR,
        false,
        "pushes/s",
    ));
    budgets
}

fn push_rate(rows: &[Row], participant: Participant) -> BTreeMap<usize, f64> {
    by_run(
        Select::new(Scenario::Push, participant.name()),
        rows,
        |row| Some(row.ops_per_sec),
    )
}

/// The sealed echo's p50 less the plain one's (both over TCP), against the
/// four ChaCha20-Poly1305 operations of one echo timed right after the
/// sealed cell: the cipher is the contract's, so what is held is Ternio's
/// distance from that floor (run by run, as every budget).
fn sealed_budget(rows: &[Row], size: usize) -> Budget {
    let sealed = p50(rows, Participant::TernioTcpAead, size);
    let plain = p50(rows, Participant::TernioTcp, size);
    let ops = latency(rows, Participant::TernioTcpAead, size, |row| {
        row.aead_ops_us
    });
    let distance: BTreeMap<usize, f64> = sealed
        .iter()
        .filter_map(|(run, sealed)| Some((*run, sealed - plain.get(run)?)))
        .collect();
    let paired = Paired::ratios(&distance, &ops);
    let runs = paired.runs_text();
    let mut budget = ratio_budget(
        format!("(ternio-tcp-aead p50 − ternio-tcp p50) / four AEAD operations, {size} B"),
        paired,
        SEALED_LIMIT,
        true,
        "µs",
    );
    let show = |value: Option<f64>, digits: usize| {
        value.map_or("–".to_owned(), |v| format!("{v:.digits$} µs"))
    };
    budget.detail = format!(
        "{} − {} vs {}{runs}",
        show(median(&sealed), 1),
        show(median(&plain), 1),
        show(median(&ops), 2)
    );
    // Sealing adds work: a sealed echo faster than the plain one says
    // that the plain cells ran in a slower stretch of the host, not that
    // the budget holds.
    if budget.measured.is_some_and(|distance| distance < 0.0) {
        budget.pass = None;
        budget.detail.push_str("; negative: not judged");
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::environment::Environment;
    use crate::results::LatencyFigures;

    /// 32 B rows of `participant` in `scenario`, one per run, each with
    /// its value put in by `fill`.
    fn rows(
        scenario: Scenario,
        participant: Participant,
        clients: usize,
        values: &[f64],
        fill: impl Fn(&mut Row, f64),
    ) -> Vec<Row> {
        let environment = Environment::for_tests();
        let name = participant.name();
        values
            .iter()
            .enumerate()
            .map(|(run, value)| {
                let mut row = Row::new(scenario, name, 32, clients, run, &environment);
                row.ok = true;
                fill(&mut row, *value);
                row
            })
            .collect()
    }

    /// 64-client throughput rows of `participant` with these rates.
    fn rates(participant: Participant, rates: &[f64]) -> Vec<Row> {
        rows(
            Scenario::Throughput,
            participant,
            CLIENTS,
            rates,
            |row, rate| {
                row.ops_per_sec = rate;
            },
        )
    }

    /// Latency rows of `participant` with these p50s (and AEAD times).
    fn p50s(participant: Participant, p50s: &[f64], aead: Option<f64>) -> Vec<Row> {
        rows(Scenario::Latency, participant, 1, p50s, |row, p50| {
            row.latency = Some(LatencyFigures {
                p50_us: p50,
                ..LatencyFigures::default()
            });
            row.aead_ops_us = aead;
        })
    }

    fn budget<'a>(budgets: &'a [Budget], name: &str) -> &'a Budget {
        budgets
            .iter()
            .find(|budget| budget.name == name)
            .unwrap_or_else(|| panic!("no budget {name}"))
    }

    /// The 64-client 32 B TCP throughput budget, from these rates by run.
    fn tcp_64_32(raw: &[f64], ternio: &[f64]) -> Budget {
        let mut rows = rates(Participant::RawTcp, raw);
        rows.extend(rates(Participant::TernioTcp, ternio));
        let name = "ternio-tcp / raw-tcp throughput, 64 clients, 32 B";
        budget(&evaluate(&rows), name).clone()
    }

    #[test]
    fn a_run_whose_windows_straddle_a_change_of_speed_is_outvoted() {
        // The 32 B cells of the full run at 7ade823: raw-tcp's windows ran
        // fast, slow, fast and ternio-tcp's fast, slow, slow. The medians
        // of each (152 against 204 thousand) would give 0.745; the runs give
        // 0.936, 0.981 and 0.729, and their median is run 0's.
        let tcp = tcp_64_32(&[204.0, 155.0, 207.0], &[191.0, 152.0, 151.0]);
        assert_eq!(tcp.measured, Some(191.0 / 204.0));
        assert_eq!(tcp.pass, Some(false), "0.936 is still below 0.95");
        assert_eq!(
            tcp.detail,
            "152.0 ops/s vs 204.0 ops/s; per run 0.936, 0.981, 0.729"
        );

        // Two runs of three out of step decide it, as they should: the
        // budget holds what most runs say.
        let tcp = tcp_64_32(&[150.0, 200.0, 200.0], &[147.0, 147.0, 148.0]);
        assert_eq!(tcp.measured, Some(148.0 / 200.0));
        assert_eq!(tcp.pass, Some(false));
    }

    #[test]
    fn only_runs_both_completed_are_compared() {
        let mut rows = rates(Participant::RawTcp, &[100.0, 100.0, 100.0]);
        rows.extend(rates(Participant::TernioTcp, &[90.0, 99.0, 98.0]));
        // Ternio's run 1 failed: its figure is not read.
        rows.iter_mut()
            .filter(|row| row.participant == "ternio-tcp" && row.run == 1)
            .for_each(|row| row.ok = false);
        let budgets = evaluate(&rows);
        let tcp = budget(
            &budgets,
            "ternio-tcp / raw-tcp throughput, 64 clients, 32 B",
        );
        assert_eq!(tcp.measured, Some((0.90 + 0.98) / 2.0));
        assert_eq!(tcp.pass, Some(false));

        let none = budget(&budgets, "ternio-ws / raw-ws throughput, 64 clients, 32 B");
        assert_eq!((none.measured, none.pass), (None, None));
    }

    /// The 32 B sealed budget, from these plain and sealed p50s (AEAD
    /// operations 1 µs).
    fn sealed_32(plain: &[f64], sealed: &[f64]) -> Budget {
        let mut rows = p50s(Participant::TernioTcp, plain, None);
        rows.extend(p50s(Participant::TernioTcpAead, sealed, Some(1.0)));
        let name = "(ternio-tcp-aead p50 − ternio-tcp p50) / four AEAD operations, 32 B";
        budget(&evaluate(&rows), name).clone()
    }

    #[test]
    fn the_sealed_distance_is_taken_run_by_run() {
        // AEAD operations 1 µs; distances 1.0, 1.1 and −3.0 (run 2's plain
        // cell ran slow): the median distance is 1.0, within 1.15.
        let sealed = sealed_32(&[10.0, 10.0, 14.0], &[11.0, 11.1, 11.0]);
        assert_eq!(sealed.measured, Some(1.0));
        assert_eq!(sealed.pass, Some(true));
        assert_eq!(
            sealed.detail,
            "11.0 µs − 10.0 µs vs 1.00 µs; per run 1.000, 1.100, -3.000"
        );

        // Two runs of three with the plain cell slow: the median distance is
        // negative, which no run of a faster sealing can give. Not judged.
        let sealed = sealed_32(&[10.0, 14.0, 14.0], &[11.0, 11.5, 11.0]);
        assert_eq!(sealed.measured, Some(-2.5));
        assert_eq!(sealed.pass, None);
        assert!(sealed.detail.ends_with("; negative: not judged"));
    }
}
