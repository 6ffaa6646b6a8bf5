//! The Markdown report, in the seed's style: latency, throughput, cost per
//! message, then push, fan-out, crowd and the Redis backplane, who wins
//! where, and the budgets.

mod text;

use std::fmt::Write as _;

use self::text::{fill, lines, paragraph};
use crate::aggregate::{Select, Stat, participants_of, values_of};
use crate::compare::Outcome;
use crate::environment::Environment;
use crate::participants::Participant;
use crate::plan::Plan;
use crate::results::{BackplaneMeasure, Row, Scenario};
use crate::scenarios::backplane::BackplaneCase;
use crate::scenarios::crowd::CROWD_PARTICIPANTS;

/// A number with thousands separators.
pub fn thousands(value: f64) -> String {
    let rounded = value.round() as i64;
    let digits = rounded.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    if rounded < 0 { format!("-{out}") } else { out }
}

fn spread(stat: &Stat) -> String {
    if stat.runs < 2 {
        "1 run".to_owned()
    } else {
        format!("±{:.1}%", stat.spread * 100.0)
    }
}

fn one(value: Option<Stat>) -> String {
    value.map_or("–".to_owned(), |stat| format!("{:.1}", stat.median))
}

fn two(value: Option<Stat>) -> String {
    value.map_or("–".to_owned(), |stat| format!("{:.2}", stat.median))
}

fn whole(value: Option<Stat>) -> String {
    value.map_or("–".to_owned(), |stat| thousands(stat.median))
}

fn size_name(size: usize) -> String {
    if size >= 1024 && size.is_multiple_of(1024) {
        format!("{} KiB", size / 1024)
    } else {
        format!("{size} B")
    }
}

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
            ("warmup", format!("{:.1}", plan.warmup.as_secs_f64())),
            ("window", format!("{:.1}", plan.window.as_secs_f64())),
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

fn latency_table(out: &mut String, rows: &[Row], size: usize) {
    let _ = writeln!(
        out,
        "## Latency — {}, 1 client, sequential request/response\n",
        size_name(size)
    );
    let _ = writeln!(
        out,
        "| Participant | mean (µs) | p50 (µs) | p90 (µs) | p99 (µs) | p99.9 (µs) | spread (p50) | server CPU/op (µs) | server alloc/op (B) | server allocs/op | client CPU/op (µs) |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|");
    for name in participants_of(rows, Scenario::Latency) {
        let select = Select::new(Scenario::Latency, &name).size(size);
        if select.rows(rows).is_empty() {
            let _ = writeln!(out, "| {name} | failed | | | | | | | | | |");
            continue;
        }
        let latency = |f: fn(&crate::results::LatencyFigures) -> f64| {
            select.stat(rows, |row| row.latency.as_ref().map(f))
        };
        let p50 = latency(|l| l.p50_us);
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            one(latency(|l| l.mean_us)),
            one(p50),
            one(latency(|l| l.p90_us)),
            one(latency(|l| l.p99_us)),
            one(latency(|l| l.p999_us)),
            p50.as_ref().map_or("–".to_owned(), spread),
            one(select.stat(rows, |row| row.server.map(|c| c.cpu_us_per_op))),
            whole(select.stat(rows, |row| row.server.map(|c| c.alloc_bytes_per_op))),
            two(select.stat(rows, |row| row.server.map(|c| c.allocs_per_op))),
            one(select.stat(rows, |row| row.client.map(|c| c.cpu_us_per_op))),
        );
    }
    let _ = writeln!(out);
}

fn throughput_table(out: &mut String, rows: &[Row], size: usize) {
    let clients = values_of(rows, Scenario::Throughput, |row| row.clients);
    let _ = writeln!(
        out,
        "## Throughput — {}, N clients closed-loop (echoes/s, median of runs)\n",
        size_name(size)
    );
    let header: Vec<String> = clients
        .iter()
        .map(|n| format!("{n} client{}", if *n == 1 { "" } else { "s" }))
        .collect();
    let _ = writeln!(out, "| Participant | {} |", header.join(" | "));
    let _ = writeln!(out, "|---|{}", "---|".repeat(clients.len()));
    for name in participants_of(rows, Scenario::Throughput) {
        let cells: Vec<String> = clients
            .iter()
            .map(|&n| {
                Select::new(Scenario::Throughput, &name)
                    .size(size)
                    .clients(n)
                    .stat(rows, |row| Some(row.ops_per_sec))
                    .map_or("failed".to_owned(), |stat| {
                        format!("{} ({})", thousands(stat.median), spread(&stat))
                    })
            })
            .collect();
        let _ = writeln!(out, "| {name} | {} |", cells.join(" | "));
    }
    let _ = writeln!(out);
}

fn cost_table(out: &mut String, rows: &[Row], size: usize, clients: usize) {
    let _ = writeln!(
        out,
        "## Cost per message at {clients} clients — {}\n",
        size_name(size)
    );
    let _ = writeln!(
        out,
        "| Participant | server alloc/op (B) | server allocs/op | server CPU/op (µs) | client CPU/op (µs) | client alloc/op (B) | client allocs/op |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for name in participants_of(rows, Scenario::Throughput) {
        let select = Select::new(Scenario::Throughput, &name)
            .size(size)
            .clients(clients);
        if select.rows(rows).is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {} | {} | {} |",
            whole(select.stat(rows, |row| row.server.map(|c| c.alloc_bytes_per_op))),
            two(select.stat(rows, |row| row.server.map(|c| c.allocs_per_op))),
            one(select.stat(rows, |row| row.server.map(|c| c.cpu_us_per_op))),
            one(select.stat(rows, |row| row.client.map(|c| c.cpu_us_per_op))),
            whole(select.stat(rows, |row| row.client.map(|c| c.alloc_bytes_per_op))),
            two(select.stat(rows, |row| row.client.map(|c| c.allocs_per_op))),
        );
    }
    let _ = writeln!(out);
}

fn push_table(out: &mut String, rows: &[Row]) {
    let names = participants_of(rows, Scenario::Push);
    if names.is_empty() {
        return;
    }
    paragraph(out, text::PUSH);
    let _ = writeln!(
        out,
        "| Pusher / reader | messages/s | spread | server CPU/msg (µs) | server alloc/msg (B) | server allocs/msg | client CPU/msg (µs) |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for name in names {
        let select = Select::new(Scenario::Push, &name);
        let rate = select.stat(rows, |row| Some(row.ops_per_sec));
        let Some(rate) = rate else {
            let _ = writeln!(out, "| {name} | failed | | | | | |");
            continue;
        };
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {} | {} | {} |",
            thousands(rate.median),
            spread(&rate),
            two(select.stat(rows, |row| row.server.map(|c| c.cpu_us_per_op))),
            whole(select.stat(rows, |row| row.server.map(|c| c.alloc_bytes_per_op))),
            two(select.stat(rows, |row| row.server.map(|c| c.allocs_per_op))),
            two(select.stat(rows, |row| row.client.map(|c| c.cpu_us_per_op))),
        );
    }
    let _ = writeln!(out);
}

fn fanout_table(out: &mut String, rows: &[Row]) {
    let names = participants_of(rows, Scenario::Fanout);
    if names.is_empty() {
        return;
    }
    let members = values_of(rows, Scenario::Fanout, |row| row.clients);
    let members = members.last().copied().unwrap_or(0);
    let members = thousands(members as f64);
    paragraph(out, &fill(text::FANOUT, &[("members", members)]));
    let _ = writeln!(
        out,
        "| Server | deliveries/s | spread | broadcast → last delivery p50 (µs) | p99 (µs) | server CPU/delivery (µs) | server alloc/delivery (B) |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for name in names {
        let select = Select::new(Scenario::Fanout, &name);
        let Some(rate) = select.stat(rows, |row| Some(row.ops_per_sec)) else {
            let _ = writeln!(out, "| {name} | failed | | | | | |");
            continue;
        };
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {} | {} | {} |",
            thousands(rate.median),
            spread(&rate),
            whole(select.stat(rows, |row| row.latency.map(|l| l.p50_us))),
            whole(select.stat(rows, |row| row.latency.map(|l| l.p99_us))),
            two(select.stat(rows, |row| row.server.map(|c| c.cpu_us_per_op))),
            one(select.stat(rows, |row| row.server.map(|c| c.alloc_bytes_per_op))),
        );
    }
    let _ = writeln!(out);
}

fn crowd_table(out: &mut String, rows: &[Row]) {
    let names = participants_of(rows, Scenario::Crowd);
    if names.is_empty() {
        return;
    }
    let connections = values_of(rows, Scenario::Crowd, |row| row.clients);
    let connections = connections.last().copied().unwrap_or(0);
    let connections = thousands(connections as f64);
    paragraph(out, &fill(text::CROWD, &[("connections", connections)]));
    let _ = writeln!(
        out,
        "| Server | RSS before (MiB) | RSS after (MiB) | RSS/connection (KiB) | live heap/connection (KiB) | threads before → after | open all (s) |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for name in names {
        let select = Select::new(Scenario::Crowd, &name);
        let crowd = |f: fn(&crate::results::CrowdFigures) -> f64| {
            select.stat(rows, |row| row.crowd.as_ref().map(f))
        };
        let Some(per) = crowd(|c| c.rss_per_connection) else {
            let _ = writeln!(out, "| {name} | failed | | | | | |");
            continue;
        };
        let mib = |stat: Option<Stat>| {
            stat.map_or("–".to_owned(), |s| format!("{:.1}", s.median / 1024.0))
        };
        let kib = |stat: Option<Stat>| {
            stat.map_or("–".to_owned(), |s| format!("{:.2}", s.median / 1024.0))
        };
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {} | {} → {} | {} |",
            mib(crowd(|c| c.rss_before_kib as f64)),
            mib(crowd(|c| c.rss_after_kib as f64)),
            kib(Some(per)),
            kib(crowd(|c| c.heap_per_connection)),
            whole(crowd(|c| c.threads_before as f64)),
            whole(crowd(|c| c.threads_after as f64)),
            two(crowd(|c| c.connect_seconds)),
        );
    }
    let _ = writeln!(out);
}

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

fn backplane_section(out: &mut String, rows: &[Row]) {
    if !rows.iter().any(|row| row.scenario == Scenario::Backplane) {
        return;
    }
    let stat = |case, measure, members, figure: &dyn Fn(&Row) -> Option<f64>| {
        Stat::of(
            backplane_rows(rows, case, measure, members)
                .into_iter()
                .filter_map(figure),
        )
    };
    paragraph(out, text::BACKPLANE);
    let throughput = backplane_members(rows, BackplaneMeasure::Throughput);
    if !throughput.is_empty() {
        paragraph(out, text::BACKPLANE_THROUGHPUT);
        let _ = writeln!(
            out,
            "| Members | standalone deliveries/s | local deliveries/s | cross-node deliveries/s | cross-node ÷ local | cross-node broadcasts/s |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|");
        for &members in &throughput {
            let rate = |case| {
                stat(case, BackplaneMeasure::Throughput, members, &|row| {
                    Some(row.ops_per_sec)
                })
            };
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
            let broadcasts = stat(
                BackplaneCase::CrossNode,
                BackplaneMeasure::Throughput,
                members,
                &|row| row.backplane.map(|b| b.broadcasts_per_sec),
            );
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
        let _ = writeln!(
            out,
            "| Case | Members | nodes CPU/delivery (µs) | nodes alloc/delivery (B) | Redis CPU/broadcast (µs) | harness CPU/delivery (µs) | backplane drops |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|");
        for &members in &throughput {
            for case in BackplaneCase::ALL {
                let measure = BackplaneMeasure::Throughput;
                if backplane_rows(rows, case, measure, members).is_empty() {
                    let _ = writeln!(out, "| {} | {members} | failed | | | | |", case.name());
                    continue;
                }
                let _ = writeln!(
                    out,
                    "| {} | {members} | {} | {} | {} | {} | {} |",
                    case.name(),
                    two(stat(case, measure, members, &|row| {
                        row.server.map(|c| c.cpu_us_per_op)
                    })),
                    one(stat(case, measure, members, &|row| {
                        row.server.map(|c| c.alloc_bytes_per_op)
                    })),
                    two(stat(case, measure, members, &|row| {
                        row.backplane.and_then(|b| b.redis_cpu_us_per_broadcast)
                    })),
                    two(stat(case, measure, members, &|row| {
                        row.client.map(|c| c.cpu_us_per_op)
                    })),
                    whole(stat(case, measure, members, &|row| {
                        row.backplane.map(|b| b.backplane_dropped as f64)
                    })),
                );
            }
        }
        let _ = writeln!(out);
    }
    let latency = backplane_members(rows, BackplaneMeasure::Latency);
    for members in latency {
        let measure = BackplaneMeasure::Latency;
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
            let figure = |f: fn(&crate::results::LatencyFigures) -> f64| {
                stat(case, measure, members, &move |row| {
                    row.latency.as_ref().map(f)
                })
            };
            let Some(p50) = figure(|l| l.p50_us) else {
                let _ = writeln!(out, "| {} | {members} | failed | | | | | | |", case.name());
                continue;
            };
            let _ = writeln!(
                out,
                "| {} | {members} | {} | {} | {} | {} | {} | {} | {} |",
                case.name(),
                whole(Some(p50)),
                whole(figure(|l| l.p90_us)),
                whole(figure(|l| l.p99_us)),
                whole(figure(|l| l.p999_us)),
                whole(figure(|l| l.max_us)),
                spread(&p50),
                whole(stat(case, measure, members, &|row| Some(row.ops as f64))),
            );
        }
        let added = |f: fn(&crate::results::LatencyFigures) -> f64| {
            let cross = stat(BackplaneCase::CrossNode, measure, members, &move |row| {
                row.latency.as_ref().map(f)
            })?;
            let local = stat(BackplaneCase::Local, measure, members, &move |row| {
                row.latency.as_ref().map(f)
            })?;
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
}

/// The frameworks (not baselines, not Ternio's servers behind a baseline's
/// client) among `names`, each with its figure, best first.
fn ranked(
    names: &[String],
    figure: impl Fn(&str) -> Option<f64>,
    lower_is_better: bool,
) -> Vec<(String, f64)> {
    let mut ranked: Vec<(String, f64)> = names
        .iter()
        .filter(|name| Participant::parse(name).is_none_or(|p| !p.is_baseline() && !p.is_lean()))
        .filter_map(|name| figure(name).map(|value| (name.clone(), value)))
        .collect();
    ranked.sort_by(|a, b| {
        if lower_is_better {
            a.1.total_cmp(&b.1)
        } else {
            b.1.total_cmp(&a.1)
        }
    });
    ranked
}

fn wins_row(
    out: &mut String,
    scenario: &str,
    ranked: &[(String, f64)],
    show: impl Fn(f64) -> String,
) {
    let Some((best, value)) = ranked.first() else {
        return;
    };
    let ternio = ranked
        .iter()
        .enumerate()
        .find(|(_, (name, _))| name.starts_with("ternio"))
        .map_or("not measured".to_owned(), |(rank, (name, value))| {
            format!(
                "{} of {}: {name} {}",
                ordinal(rank + 1),
                ranked.len(),
                show(*value)
            )
        });
    let others: Vec<String> = ranked
        .iter()
        .skip(1)
        .take(4)
        .map(|(name, value)| format!("{name} {}", show(*value)))
        .collect();
    let _ = writeln!(
        out,
        "| {scenario} | {best} ({}) | {ternio} | {} |",
        show(*value),
        others.join(", ")
    );
}

fn ordinal(n: usize) -> String {
    match n {
        1 => "1st".to_owned(),
        2 => "2nd".to_owned(),
        3 => "3rd".to_owned(),
        n => format!("{n}th"),
    }
}

fn wins_section(out: &mut String, rows: &[Row], top_clients: Option<usize>) {
    paragraph(out, text::WINS);
    let _ = writeln!(
        out,
        "| Scenario | Best framework | Ternio's best position | Next |\n|---|---|---|---|"
    );
    let latency_names = participants_of(rows, Scenario::Latency);
    let encrypted: Vec<String> = latency_names
        .iter()
        .filter(|name| name.ends_with("aead") || name.ends_with("tls"))
        .cloned()
        .collect();
    let micros = |v: f64| format!("{v:.1} µs");
    let rate = |v: f64| format!("{}/s", thousands(v));
    for size in values_of(rows, Scenario::Latency, |row| row.size) {
        let p50 = |name: &str| {
            Select::new(Scenario::Latency, name)
                .size(size)
                .stat(rows, |row| row.latency.map(|l| l.p50_us))
                .map(|s| s.median)
        };
        wins_row(
            out,
            &format!("Latency p50, {}", size_name(size)),
            &ranked(&latency_names, p50, true),
            micros,
        );
        wins_row(
            out,
            &format!("Latency p50, encrypted, {}", size_name(size)),
            &ranked(&encrypted, p50, true),
            micros,
        );
    }
    let throughput_names = participants_of(rows, Scenario::Throughput);
    for size in values_of(rows, Scenario::Throughput, |row| row.size) {
        for clients in values_of(rows, Scenario::Throughput, |row| row.clients) {
            let ops = |name: &str| {
                Select::new(Scenario::Throughput, name)
                    .size(size)
                    .clients(clients)
                    .stat(rows, |row| Some(row.ops_per_sec))
                    .map(|s| s.median)
            };
            wins_row(
                out,
                &format!(
                    "Throughput, {clients} client{}, {}",
                    if clients == 1 { "" } else { "s" },
                    size_name(size)
                ),
                &ranked(&throughput_names, ops, false),
                rate,
            );
        }
    }
    if let Some(clients) = top_clients {
        let select = |name: &str| {
            Select::new(Scenario::Throughput, name)
                .size(32)
                .clients(clients)
                .rows(rows)
        };
        let figure = |f: fn(&Row) -> Option<f64>| {
            move |name: &str| Stat::of(select(name).into_iter().filter_map(f)).map(|s| s.median)
        };
        wins_row(
            out,
            &format!("Server alloc/msg, {clients} clients, 32 B"),
            &ranked(
                &throughput_names,
                figure(|r| r.server.map(|c| c.alloc_bytes_per_op)),
                true,
            ),
            |v| format!("{} B", thousands(v)),
        );
        wins_row(
            out,
            &format!("Server CPU/msg, {clients} clients, 32 B"),
            &ranked(
                &throughput_names,
                figure(|r| r.server.map(|c| c.cpu_us_per_op)),
                true,
            ),
            micros,
        );
    }
    let crowd_names: Vec<String> = CROWD_PARTICIPANTS
        .iter()
        .map(|p| p.name().to_owned())
        .collect();
    let per_connection = |name: &str| {
        Select::new(Scenario::Crowd, name)
            .stat(rows, |row| row.crowd.map(|c| c.rss_per_connection))
            .map(|s| s.median)
    };
    wins_row(
        out,
        "Memory per idle connection",
        &ranked(&crowd_names, per_connection, true),
        |v| format!("{:.2} KiB", v / 1024.0),
    );
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
    use crate::results::{BackplaneFigures, CrowdFigures, LatencyFigures};
    use crate::window::Window;

    fn environment() -> Arc<Environment> {
        let json = r#"{"date_utc": "2026-01-01 00:00", "cpu": "test", "cores": 2,
            "memory_gib": 1.0, "os": "test", "kernel": "6", "rustc": "rustc",
            "profile": "release", "commit": "abc", "mode": "full", "command": "test",
            "crates": []}"#;
        Arc::new(serde_json::from_str(json).expect("a valid environment"))
    }

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
        let environment = environment();
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
            "## Method\n\n- **Latency**: one client, sequential echoes: 20,000 warm-up calls, \
             then 100,000 timed calls,",
            "- **Throughput**: 1 / 16 / 64 clients,",
            ": 2.0 s warm-up, then echoes counted over 8.0 s.",
            "- **Runs**: 3 per cell;",
            "## Push — the server pushes 64 B messages",
            "## Fan-out — one 64 B broadcast reaching 20 group members\n\nOne broadcast",
            "## Crowd — 200 idle connections\n\nA fresh server child",
            "## Backplane (Redis) — 32 B group broadcasts across two nodes\n\nOne `redis-server`",
            "\n\nThroughput: the sender broadcasts",
            "Latency: 1,000 broadcasts per second to 4 members; every delivery",
            "## Who wins where\n\nRaw baselines",
            "## Budgets\n\nAll ratios from this run's medians.\n\n| Budget |",
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
