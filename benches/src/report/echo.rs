//! The echo workloads' tables: latency, throughput, cost per message.

use std::fmt::Write as _;

use super::format::{one, size_name, spread, thousands, two, whole};
use crate::aggregate::{Select, participants_of, values_of};
use crate::results::{Row, Scenario};

/// Latency at `size`: percentiles and costs per participant.
pub(super) fn latency_table(out: &mut String, rows: &[Row], size: usize) {
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

/// Throughput at `size`: echoes per second per participant and client count.
pub(super) fn throughput_table(out: &mut String, rows: &[Row], size: usize) {
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

/// Costs per message at `size` and `clients` clients, both sides.
pub(super) fn cost_table(out: &mut String, rows: &[Row], size: usize, clients: usize) {
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
