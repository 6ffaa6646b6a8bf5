//! The backplane section: deliveries across nodes, what they cost, and
//! what crossing nodes adds to latency.

use std::fmt::Write as _;

use super::format::{one, spread, thousands, two, whole};
use super::text::{self, fill, paragraph};
use crate::aggregate::Stat;
use crate::results::{BackplaneMeasure, LatencyFigures, Row, Scenario};
use crate::scenarios::backplane::BackplaneCase;

/// The successful backplane rows of `case` and `measure` with `members`.
fn backplane_rows(
    rows: &[Row],
    case: BackplaneCase,
    measure: BackplaneMeasure,
    members: usize,
) -> Vec<&Row> {
    rows.iter()
        .filter(|row| {
            row.ok
                && row.scenario == Scenario::Backplane
                && row.participant == case.name()
                && row.clients == members
                && row.backplane.is_some_and(|b| b.measure == measure)
        })
        .collect()
}

/// Member counts of the backplane rows of `measure`.
fn backplane_members(rows: &[Row], measure: BackplaneMeasure) -> Vec<usize> {
    let mut members: Vec<usize> = rows
        .iter()
        .filter(|row| {
            row.scenario == Scenario::Backplane
                && row.backplane.is_some_and(|b| b.measure == measure)
        })
        .map(|row| row.clients)
        .collect();
    members.sort_unstable();
    members.dedup();
    members
}

/// The backplane rows of one shape, and a figure over their runs.
#[derive(Clone, Copy)]
struct Shape<'a> {
    rows: &'a [Row],
    measure: BackplaneMeasure,
    members: usize,
}

impl Shape<'_> {
    /// `figure` over the runs of `case`.
    fn stat(&self, case: BackplaneCase, figure: &dyn Fn(&Row) -> Option<f64>) -> Option<Stat> {
        Stat::of(
            backplane_rows(self.rows, case, self.measure, self.members)
                .into_iter()
                .filter_map(figure),
        )
    }

    /// A latency percentile over the runs of `case`.
    fn latency(&self, case: BackplaneCase, f: fn(&LatencyFigures) -> f64) -> Option<Stat> {
        self.stat(case, &move |row| row.latency.as_ref().map(f))
    }
}

/// The whole section, when the run has backplane rows.
pub(super) fn backplane_section(out: &mut String, rows: &[Row]) {
    if !rows.iter().any(|row| row.scenario == Scenario::Backplane) {
        return;
    }
    paragraph(out, text::BACKPLANE);
    let throughput = backplane_members(rows, BackplaneMeasure::Throughput);
    if !throughput.is_empty() {
        paragraph(out, text::BACKPLANE_THROUGHPUT);
        rates_table(out, rows, &throughput);
        costs_table(out, rows, &throughput);
    }
    for members in backplane_members(rows, BackplaneMeasure::Latency) {
        latency_table(out, rows, members);
    }
}

/// Deliveries per second of each case, for each member count.
fn rates_table(out: &mut String, rows: &[Row], throughput: &[usize]) {
    let _ = writeln!(
        out,
        "| Members | standalone deliveries/s | local deliveries/s | cross-node deliveries/s | cross-node ÷ local | cross-node broadcasts/s |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for &members in throughput {
        let shape = Shape {
            rows,
            measure: BackplaneMeasure::Throughput,
            members,
        };
        let rate = |case| shape.stat(case, &|row| Some(row.ops_per_sec));
        let show = |value: Option<Stat>| {
            value.map_or("–".to_owned(), |stat| {
                format!("{} ({})", thousands(stat.median), spread(&stat))
            })
        };
        let local = rate(BackplaneCase::Local);
        let cross = rate(BackplaneCase::CrossNode);
        let ratio = match (local, cross) {
            (Some(local), Some(cross)) if local.median > 0.0 => {
                format!("{:.2}", cross.median / local.median)
            }
            _ => "–".to_owned(),
        };
        let broadcasts = shape.stat(BackplaneCase::CrossNode, &|row| {
            row.backplane.map(|b| b.broadcasts_per_sec)
        });
        let _ = writeln!(
            out,
            "| {members} | {} | {} | {} | {ratio} | {} |",
            show(rate(BackplaneCase::Standalone)),
            show(local),
            show(cross),
            whole(broadcasts),
        );
    }
    let _ = writeln!(out);
}

/// What each case's deliveries cost the nodes, Redis and the harness.
fn costs_table(out: &mut String, rows: &[Row], throughput: &[usize]) {
    let _ = writeln!(
        out,
        "| Case | Members | nodes CPU/delivery (µs) | nodes alloc/delivery (B) | Redis CPU/broadcast (µs) | harness CPU/delivery (µs) | backplane drops |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for &members in throughput {
        let shape = Shape {
            rows,
            measure: BackplaneMeasure::Throughput,
            members,
        };
        for case in BackplaneCase::ALL {
            if backplane_rows(rows, case, shape.measure, members).is_empty() {
                let _ = writeln!(out, "| {} | {members} | failed | | | | |", case.name());
                continue;
            }
            let _ = writeln!(
                out,
                "| {} | {members} | {} | {} | {} | {} | {} |",
                case.name(),
                two(shape.stat(case, &|row| row.server.map(|c| c.cpu_us_per_op))),
                one(shape.stat(case, &|row| row.server.map(|c| c.alloc_bytes_per_op))),
                two(shape.stat(case, &|row| {
                    row.backplane.and_then(|b| b.redis_cpu_us_per_broadcast)
                })),
                two(shape.stat(case, &|row| row.client.map(|c| c.cpu_us_per_op))),
                whole(shape.stat(case, &|row| {
                    row.backplane.map(|b| b.backplane_dropped as f64)
                })),
            );
        }
    }
    let _ = writeln!(out);
}

/// Delivery latency of each case with `members` members, and what
/// crossing nodes adds.
fn latency_table(out: &mut String, rows: &[Row], members: usize) {
    let shape = Shape {
        rows,
        measure: BackplaneMeasure::Latency,
        members,
    };
    let rate = rows
        .iter()
        .filter_map(|row| row.backplane.and_then(|b| b.paced_rate))
        .next()
        .unwrap_or(0);
    let values = [
        ("rate", thousands(rate as f64)),
        ("members", members.to_string()),
    ];
    paragraph(out, &fill(text::BACKPLANE_LATENCY, &values));
    let _ = writeln!(
        out,
        "| Case | Members | p50 (µs) | p90 (µs) | p99 (µs) | p99.9 (µs) | max (µs) | spread (p50) | deliveries timed |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
    for case in BackplaneCase::ALL {
        let Some(p50) = shape.latency(case, |l| l.p50_us) else {
            let _ = writeln!(out, "| {} | {members} | failed | | | | | | |", case.name());
            continue;
        };
        let _ = writeln!(
            out,
            "| {} | {members} | {} | {} | {} | {} | {} | {} | {} |",
            case.name(),
            whole(Some(p50)),
            whole(shape.latency(case, |l| l.p90_us)),
            whole(shape.latency(case, |l| l.p99_us)),
            whole(shape.latency(case, |l| l.p999_us)),
            whole(shape.latency(case, |l| l.max_us)),
            spread(&p50),
            whole(shape.stat(case, &|row| Some(row.ops as f64))),
        );
    }
    let added = |f: fn(&LatencyFigures) -> f64| {
        let cross = shape.latency(BackplaneCase::CrossNode, f)?;
        let local = shape.latency(BackplaneCase::Local, f)?;
        Some(cross.median - local.median)
    };
    if let (Some(p50), Some(p99)) = (added(|l| l.p50_us), added(|l| l.p99_us)) {
        let _ = writeln!(
            out,
            "\n**Added by crossing nodes** (cross-node − local, medians of the runs): \
             p50 {p50:+.0} µs, p99 {p99:+.0} µs."
        );
    }
    let _ = writeln!(out);
}
