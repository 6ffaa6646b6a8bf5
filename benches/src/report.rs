//! The Markdown report, in the seed's style: latency, throughput, cost per
//! message, then push, fan-out, crowd and the Redis backplane, who wins
//! where, and the budgets. The tables are in the modules under `report/`,
//! the prose in its Markdown files (`report/text.rs` loads them).

mod backplane;
mod echo;
mod format;
mod scenarios;
mod text;
mod wins;

use std::fmt::Write as _;

use self::backplane::backplane_section;
use self::echo::{cost_table, latency_table, throughput_table};
use self::format::thousands;
use self::scenarios::{crowd_table, fanout_table, push_table};
use self::text::{fill, lines, paragraph};
use self::wins::wins_section;
use crate::aggregate::values_of;
use crate::compare::Outcome;
use crate::environment::Environment;
use crate::participants::Participant;
use crate::plan::Plan;
use crate::results::{Row, Scenario};

/// The whole report.
pub fn markdown(plan: &Plan, environment: &Environment, outcome: &Outcome) -> String {
    let rows = &outcome.rows;
    let mut out = String::new();
    let mode = plan.mode.name().to_owned();
    paragraph(&mut out, &fill(text::INTRO, &[("mode", mode)]));
    environment_section(&mut out, environment);
    method_section(&mut out, plan, rows);
    for size in values_of(rows, Scenario::Latency, |row| row.size) {
        latency_table(&mut out, rows, size);
    }
    for size in values_of(rows, Scenario::Throughput, |row| row.size) {
        throughput_table(&mut out, rows, size);
    }
    let top_clients = values_of(rows, Scenario::Throughput, |row| row.clients)
        .last()
        .copied();
    if let Some(clients) = top_clients {
        for size in values_of(rows, Scenario::Throughput, |row| row.size) {
            cost_table(&mut out, rows, size, clients);
        }
    }
    push_table(&mut out, rows);
    fanout_table(&mut out, rows);
    crowd_table(&mut out, rows);
    backplane_section(&mut out, rows);
    wins_section(&mut out, rows, top_clients);
    budget_section(&mut out, outcome);
    problems_section(&mut out, outcome);
    caveats_section(&mut out, rows);
    out
}

fn environment_section(out: &mut String, env: &Environment) {
    let _ = writeln!(out, "## Environment\n");
    let _ = writeln!(out, "| Item | Value |\n|---|---|");
    let _ = writeln!(out, "| Date | {} |", env.date_utc);
    let _ = writeln!(
        out,
        "| CPU | {} ({} logical CPUs, shared by clients and servers) |",
        env.cpu, env.cores
    );
    let _ = writeln!(out, "| Memory | {} GiB |", env.memory_gib);
    let _ = writeln!(out, "| OS | {} (Linux {}) |", env.os, env.kernel);
    let _ = writeln!(out, "| Rust | {}, {} profile |", env.rustc, env.profile);
    let _ = writeln!(out, "| Commit | {} |", env.commit);
    let _ = writeln!(
        out,
        "| Load average at start (1/5/15 min) | {} |",
        env.load_average
    );
    if !env.idle_cpus.is_empty() {
        let _ = writeln!(out, "| Idle CPUs | {} |", env.idle_cpus);
    }
    if !env.server_runtime.is_empty() {
        let _ = writeln!(out, "| Server runtime | {} |", env.server_runtime);
    }
    let _ = writeln!(out, "| Crates | {} |", env.crates.join(", "));
    let _ = writeln!(out, "| Command | `{}` |\n", env.command);
}

fn method_section(out: &mut String, plan: &Plan, rows: &[Row]) {
    let client_counts: Vec<String> = plan.client_counts.iter().map(ToString::to_string).collect();
    let method = fill(
        text::METHOD,
        &[
            ("latency_warmup", thousands(plan.latency_warmup as f64)),
            ("latency_calls", thousands(plan.latency_calls as f64)),
            ("client_counts", client_counts.join(" / ")),
            (
                "throughput_warmup",
                format!("{:.1}", plan.throughput_warmup.as_secs_f64()),
            ),
            (
                "throughput_window",
                format!("{:.1}", plan.throughput_window.as_secs_f64()),
            ),
            ("throughput_runs", plan.throughput_runs.to_string()),
            ("latency_runs", plan.latency_runs.to_string()),
            ("runs", plan.runs.to_string()),
        ],
    );
    paragraph(out, &method);
    let _ = writeln!(out, "| Participant | What runs |\n|---|---|");
    let diagnostics = Participant::DIAGNOSTIC
        .into_iter()
        .filter(|participant| rows.iter().any(|row| row.participant == participant.name()));
    for participant in Participant::ALL.into_iter().chain(diagnostics) {
        let _ = writeln!(out, "| {} | {} |", participant, participant.description());
    }
    let _ = writeln!(out);
}

fn budget_section(out: &mut String, outcome: &Outcome) {
    paragraph(out, text::BUDGETS);
    let _ = writeln!(out, "{}", budget_table(&outcome.budgets));
}

/// The budgets as a Markdown table (also printed by `compare`).
pub fn budget_table(budgets: &[crate::budget::Budget]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| Budget | Limit | Measured | From | Result |\n|---|---|---|---|---|"
    );
    for budget in budgets {
        let measured = budget
            .measured
            .map_or("–".to_owned(), |value| format!("{value:.3}"));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            budget.name,
            budget.limit,
            measured,
            budget.detail,
            budget.verdict()
        );
    }
    out
}

fn problems_section(out: &mut String, outcome: &Outcome) {
    if outcome.skipped.is_empty()
        && outcome.skipped_scenarios.is_empty()
        && outcome.failures().next().is_none()
    {
        return;
    }
    let _ = writeln!(out, "## Skipped and failed\n");
    for (participant, why) in &outcome.skipped {
        let _ = writeln!(out, "- **{participant}** skipped: {why}");
    }
    for (scenario, why) in &outcome.skipped_scenarios {
        let _ = writeln!(out, "- **the {} scenario** skipped: {why}", scenario.name());
    }
    for row in outcome.failures() {
        let _ = writeln!(
            out,
            "- **{} {}** ({} B, {} clients, run {}) failed: {}",
            row.scenario.name(),
            row.participant,
            row.size,
            row.clients,
            row.run + 1,
            row.error.as_deref().unwrap_or("?")
        );
    }
    let _ = writeln!(out);
}

fn caveats_section(out: &mut String, rows: &[Row]) {
    let _ = writeln!(out, "## Caveats\n");
    let cores = rows.first().map_or(0, |row| row.environment.cores).max(1) as f64;
    let loaded = rows.iter().filter(|row| row.load_1m > cores).count();
    if loaded > 0 {
        let highest = rows.iter().map(|row| row.load_1m).fold(0.0, f64::max);
        let values = [
            ("loaded", loaded.to_string()),
            ("cells", rows.len().to_string()),
            ("cores", format!("{cores:.0}")),
            ("highest", format!("{highest:.1}")),
        ];
        lines(out, &fill(text::CAVEAT_LOAD, &values));
    }
    lines(out, text::CAVEATS);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::budget;
    use crate::plan::Mode;
    use crate::results::{BackplaneFigures, BackplaneMeasure, CrowdFigures, LatencyFigures};
    use crate::window::Window;

    fn backplane(measure: BackplaneMeasure, paced_rate: Option<u64>) -> Option<BackplaneFigures> {
        Some(BackplaneFigures {
            measure,
            broadcasts_per_sec: 250.0,
            paced_rate,
            redis_cpu_us_per_broadcast: None,
            backplane_dropped: 0,
        })
    }

    /// One row of every scenario, each started on a loaded machine.
    fn rows(environment: &Arc<Environment>) -> Vec<Row> {
        let window = Window {
            ops: 1000,
            elapsed: Duration::from_secs(1),
            ..Window::default()
        };
        let row = |scenario, participant: &str, clients| {
            Row::new(scenario, participant, 32, clients, 0, environment).with_window(&window)
        };
        let latency = Some(LatencyFigures::default());
        let crowd = CrowdFigures {
            connections: 200,
            connect_seconds: 0.5,
            ..CrowdFigures::default()
        };
        let mut rows = vec![
            Row {
                latency,
                ..row(Scenario::Latency, "raw-tcp", 1)
            },
            row(Scenario::Throughput, "raw-tcp", 4),
            row(Scenario::Push, "raw-tcp", 1),
            Row {
                latency,
                ..row(Scenario::Fanout, "raw-tcp", 20)
            },
            Row::new(Scenario::Crowd, "raw-tcp", 0, 200, 0, environment).with_crowd(crowd),
            Row {
                backplane: backplane(BackplaneMeasure::Throughput, None),
                ..row(Scenario::Backplane, "local", 4)
            },
            Row {
                latency,
                backplane: backplane(BackplaneMeasure::Latency, Some(1000)),
                ..row(Scenario::Backplane, "local", 4)
            },
        ];
        for row in &mut rows {
            row.load_1m = 10.0;
        }
        rows
    }

    /// Every section's text comes out, with its placeholders filled.
    #[test]
    fn the_report_fills_every_placeholder() {
        let environment = Environment::for_tests();
        let rows = rows(&environment);
        let outcome = Outcome {
            budgets: budget::evaluate(&rows),
            rows,
            skipped: Vec::new(),
            skipped_scenarios: Vec::new(),
        };
        let report = markdown(&Plan::new(Mode::Full), &environment, &outcome);
        for expected in [
            "# Ternio side-by-side benchmark (full mode)\n\nEvery figure is end to end",
            "## Method\n\n- **Latency**: one client, sequential echoes: 10,000 warm-up calls, \
             then 50,000 timed calls,",
            "- **Throughput**: 1 / 16 / 64 clients,",
            ": 1.0 s warm-up, then echoes counted over 3.0 s.",
            "- **Runs**: 6 per latency cell, 8 per throughput cell, 3 per cell of the other scenarios;",
            "## Push — the server pushes 64 B messages",
            "## Fan-out — one 64 B broadcast reaching 20 group members\n\nOne broadcast",
            "## Crowd — 200 idle connections\n\nA fresh server child",
            "## Backplane (Redis) — 32 B group broadcasts across two nodes\n\nOne `redis-server`",
            "\n\nThroughput: the sender broadcasts",
            "Latency: 1,000 broadcasts per second to 4 members; every delivery",
            "## Who wins where\n\nRaw baselines",
            "## Budgets\n\nAll ratios from this run: each is taken within every run of its cells,",
            "## Caveats\n\n- **Load.** 7 of 7 cells started with a 1-minute load average \
             above the 2 cores (highest 10.0).",
            "- **Quick mode** measures a tenth of the calls with one run per cell: read its \
             figures as indications, not results.\n",
        ] {
            assert!(
                report.contains(expected),
                "{expected:?} is missing:\n{report}"
            );
        }
        assert!(
            !report.contains('{') && !report.contains('}'),
            "a placeholder is left:\n{report}"
        );
    }
}
