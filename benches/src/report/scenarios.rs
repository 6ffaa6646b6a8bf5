//! The push, fan-out and crowd tables.

use std::fmt::Write as _;

use super::format::{one, spread, thousands, two, whole};
use super::text::{self, fill, paragraph};
use crate::aggregate::{Select, Stat, participants_of, values_of};
use crate::results::{Row, Scenario};

/// Push: messages per second and costs per pusher and reader.
pub(super) fn push_table(out: &mut String, rows: &[Row]) {
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

/// Fan-out: deliveries per second, broadcast latency and costs per server.
pub(super) fn fanout_table(out: &mut String, rows: &[Row]) {
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

/// Crowd: memory and threads per server holding idle connections.
pub(super) fn crowd_table(out: &mut String, rows: &[Row]) {
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
