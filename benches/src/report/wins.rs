//! Who wins where: the best framework of each scenario (raw baselines and
//! the `-lean` rows left out), and Ternio's best position.

use std::fmt::Write as _;

use super::format::{size_name, thousands};
use super::text::{self, paragraph};
use crate::aggregate::{Select, Stat, participants_of, values_of};
use crate::participants::Participant;
use crate::results::{Row, Scenario};
use crate::scenarios::crowd::CROWD_PARTICIPANTS;

/// The whole section: the best framework of each scenario, and where
/// Ternio stands.
pub(super) fn wins_section(out: &mut String, rows: &[Row], top_clients: Option<usize>) {
    paragraph(out, text::WINS);
    let _ = writeln!(
        out,
        "| Scenario | Best framework | Ternio's best position | Next |\n|---|---|---|---|"
    );
    latency_wins(out, rows);
    let throughput_names = participants_of(rows, Scenario::Throughput);
    throughput_wins(out, rows, &throughput_names);
    if let Some(clients) = top_clients {
        cost_wins(out, rows, &throughput_names, clients);
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

/// A figure in microseconds.
fn micros(value: f64) -> String {
    format!("{value:.1} µs")
}

/// Latency p50 at each size: every framework, then the encrypted ones.
fn latency_wins(out: &mut String, rows: &[Row]) {
    let latency_names = participants_of(rows, Scenario::Latency);
    let encrypted: Vec<String> = latency_names
        .iter()
        .filter(|name| name.ends_with("aead") || name.ends_with("tls"))
        .cloned()
        .collect();
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
}

/// Throughput at each size and client count.
fn throughput_wins(out: &mut String, rows: &[Row], throughput_names: &[String]) {
    let rate = |v: f64| format!("{}/s", thousands(v));
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
                &ranked(throughput_names, ops, false),
                rate,
            );
        }
    }
}

/// The server's allocations and CPU per message at `clients` clients, 32 B.
fn cost_wins(out: &mut String, rows: &[Row], throughput_names: &[String], clients: usize) {
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
            throughput_names,
            figure(|r| r.server.map(|c| c.alloc_bytes_per_op)),
            true,
        ),
        |v| format!("{} B", thousands(v)),
    );
    wins_row(
        out,
        &format!("Server CPU/msg, {clients} clients, 32 B"),
        &ranked(
            throughput_names,
            figure(|r| r.server.map(|c| c.cpu_us_per_op)),
            true,
        ),
        micros,
    );
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

/// One row of the table: the best of `ranked`, Ternio's best position,
/// and the next four.
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

/// `1st`, `2nd`, `3rd`, `4th`...
fn ordinal(n: usize) -> String {
    match n {
        1 => "1st".to_owned(),
        2 => "2nd".to_owned(),
        3 => "3rd".to_owned(),
        n => format!("{n}th"),
    }
}
