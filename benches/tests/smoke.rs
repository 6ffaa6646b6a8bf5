//! The smoke pass through `cargo test`: every participant and scenario of
//! the comparison, with a few hundred checked echoes each and nothing timed
//! (what CI runs instead of the timed comparison). The backplane scenario
//! needs `redis-server` (Debian's package, as for `redis/tests`): the pass
//! would skip it without one, and this test then fails.

use std::process::Command;

#[test]
fn every_participant_passes_the_smoke_pass() {
    let out = std::env::temp_dir().join(format!("ternio-bench-smoke-{}", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_ternio-bench"))
        .arg("smoke")
        .arg("--out")
        .arg(&out)
        .output()
        .expect("the harness runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the smoke pass failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    assert!(
        stdout.contains("cells passed"),
        "no summary in the output:\n{stdout}"
    );
    for file in [
        "results.jsonl",
        "report.md",
        "latency.svg",
        "throughput.svg",
    ] {
        let path = out.join(file);
        let written = std::fs::metadata(&path).map(|meta| meta.len()).unwrap_or(0);
        assert!(written > 0, "{} was not written", path.display());
    }
    let rows = std::fs::read_to_string(out.join("results.jsonl")).expect("results are readable");
    assert!(
        rows.lines().all(|line| line.contains("\"ok\":true")),
        "a row failed:\n{rows}"
    );
    for case in ["standalone", "local", "cross-node"] {
        let needle = format!("\"scenario\":\"backplane\",\"participant\":\"{case}\"");
        assert!(
            rows.lines().any(|line| line.contains(&needle)),
            "no backplane row for {case} (is redis-server installed?)\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// `ternio-bench game` on a small scale: it runs, and what it reports adds
/// up (every row there, snapshots delivered, none twice).
#[test]
fn the_game_benchmark_runs_and_reports_every_row() {
    let out = std::env::temp_dir().join(format!("ternio-bench-game-{}", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_ternio-bench"))
        .args([
            "game",
            "--quick",
            "--clients",
            "20",
            "--rooms",
            "2",
            "--window",
            "1",
        ])
        .arg("--out")
        .arg(&out)
        .output()
        .expect("the harness runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the game benchmark failed\n--- stdout\n{stdout}\n--- stderr\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = std::fs::read_to_string(out.join("game.md")).expect("game.md was written");
    for echo in ["| raw-udp |", "| ternio-datagram |", "| ternio-stream |"] {
        assert_eq!(
            report.matches(echo).count(),
            2,
            "{echo} at both sizes:\n{report}"
        );
    }
    for transport in [
        "| datagram (unreliable) |",
        "| TCP stream |",
        "| TCP stream, LZ4 from 64 B |",
    ] {
        let row = report
            .lines()
            .find(|line| line.starts_with(transport))
            .unwrap_or_else(|| panic!("no {transport} row:\n{report}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let delivered: u64 = cells[3].parse().expect("delivered is a number");
        // 20 clients at 30 Hz for a second: about 600.
        assert!(
            delivered > 300,
            "{transport} delivered {delivered}:\n{report}"
        );
        assert_eq!(cells[5], "0", "{transport}: no snapshot twice:\n{report}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// `outside` drives the echo_server example (the one `TERNIO_ECHO_SERVER`
/// names, or the debug build `cargo test --workspace` made) and the raw
/// echo, and reports a ratio per size for each of its three figures.
#[test]
fn the_outside_benchmark_drives_the_echo_server_example_and_reports_ratios() {
    let server = std::env::var("TERNIO_ECHO_SERVER")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            let exe = std::env::current_exe().unwrap();
            exe.parent()
                .unwrap()
                .parent()
                .unwrap()
                .join("examples")
                .join("echo_server")
        });
    assert!(
        server.exists(),
        "{} is missing: run `cargo build -p ternio-examples --example echo_server`, or name it in TERNIO_ECHO_SERVER",
        server.display()
    );
    let out = std::env::temp_dir().join(format!("ternio-bench-outside-{}", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_ternio-bench"))
        .args([
            "outside",
            "--rounds",
            "1",
            "--echoes",
            "200",
            "--seconds",
            "1",
        ])
        .arg("--server")
        .arg(&server)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("the harness runs");
    assert!(
        output.status.success(),
        "the outside benchmark failed\n--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let report = std::fs::read_to_string(out.join("outside.md")).expect("outside.md was written");
    for size in ["| 32 B |", "| 1024 B |"] {
        let row = report
            .lines()
            .find(|line| line.starts_with(size))
            .unwrap_or_else(|| panic!("no {size} row:\n{report}"));
        let ratios: Vec<f64> = row
            .split('|')
            .map(str::trim)
            .filter(|cell| !cell.is_empty())
            .skip(1)
            .map(|cell| cell.split(' ').next().unwrap().parse().expect("a ratio"))
            .collect();
        assert_eq!(ratios.len(), 3, "{row}");
        assert!(
            ratios.iter().all(|ratio| ratio.is_finite() && *ratio > 0.0),
            "{row}"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}
