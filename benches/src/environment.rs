//! The machine, the build and the versions a run was made with: recorded in
//! every row, and shown at the top of the report.

use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The workspace's lock file, read at build time for the versions of the
/// stacks under test.
const CARGO_LOCK: &str = include_str!("../../Cargo.lock");

/// Crates whose version the report names.
const CRATES: [&str; 8] = [
    "tokio",
    "tokio-tungstenite",
    "tonic",
    "hyper",
    "h2",
    "rustls",
    "snow",
    "aws-lc-rs",
];

/// Where and how a run was made.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Environment {
    /// When the run started, UTC.
    pub date_utc: String,
    /// CPU model.
    pub cpu: String,
    /// Logical CPUs available.
    pub cores: usize,
    /// Total memory, GiB.
    pub memory_gib: f64,
    /// Operating system.
    pub os: String,
    /// Kernel release.
    pub kernel: String,
    /// `rustc --version`.
    pub rustc: String,
    /// `release` or `debug`.
    pub profile: String,
    /// The workspace commit, with `-dirty` when the tree had changes.
    pub commit: String,
    /// `quick`, `full` or `smoke`.
    pub mode: String,
    /// The machine's load averages (1, 5, 15 min) when the run started:
    /// other work on the machine skews CPU-bound figures.
    #[serde(default)]
    pub load_average: String,
    /// Whether idle CPUs were kept polling for the run or free to halt
    /// (see `idle.rs`): halting adds a vCPU wake-up to every round trip.
    #[serde(default)]
    pub idle_cpus: String,
    /// The server children's runtime shape
    /// ([`RUNTIME_VAR`](crate::child::RUNTIME_VAR)).
    #[serde(default)]
    pub server_runtime: String,
    /// The harness's command line.
    pub command: String,
    /// Versions of the crates under test, `name version`.
    pub crates: Vec<String>,
}

impl Environment {
    /// A fixed environment for the tests' rows.
    #[cfg(test)]
    pub fn for_tests() -> std::sync::Arc<Self> {
        let json = r#"{"date_utc": "2026-01-01 00:00", "cpu": "test", "cores": 2,
            "memory_gib": 1.0, "os": "test", "kernel": "6", "rustc": "rustc",
            "profile": "release", "commit": "abc", "mode": "full", "command": "test",
            "crates": []}"#;
        std::sync::Arc::new(serde_json::from_str(json).expect("a valid environment"))
    }

    /// Reads the machine now.
    pub fn capture(mode: &str) -> Self {
        Self {
            date_utc: utc_now(),
            cpu: cpu_model(),
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            memory_gib: memory_gib(),
            os: os_name(),
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            rustc: command_output("rustc", &["--version"]),
            profile: if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            }
            .to_owned(),
            commit: commit(),
            mode: mode.to_owned(),
            load_average: load_average(),
            idle_cpus: String::new(),
            server_runtime: crate::child::RuntimeShape::from_env()
                .map_or_else(|error| format!("{error:#}"), |shape| shape.describe()),
            command: std::env::args().collect::<Vec<_>>().join(" "),
            crates: CRATES
                .iter()
                .filter_map(|name| locked_version(name).map(|version| format!("{name} {version}")))
                .collect(),
        }
    }
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|text| text.trim().to_owned())
        .unwrap_or_else(|_| "unknown".to_owned())
}

fn command_output(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The 1-minute load average now (0 when unknown).
pub fn load_1m() -> f64 {
    load_average()
        .split_whitespace()
        .next()
        .and_then(|load| load.parse().ok())
        .unwrap_or(0.0)
}

/// The three load averages of `/proc/loadavg`.
fn load_average() -> String {
    read_trimmed("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split_once(':'))
                .map(|(_, model)| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

fn memory_gib() -> f64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|line| line.starts_with("MemTotal:"))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kib| kib.parse::<f64>().ok())
        })
        .map_or(0.0, |kib| (kib / 1024.0 / 1024.0 * 10.0).round() / 10.0)
}

fn os_name() -> String {
    std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("PRETTY_NAME="))
                .map(|name| name.trim_matches('"').to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The commit of the workspace this binary was built from (asked of git in
/// that folder, wherever the binary runs from).
fn commit() -> String {
    let workspace = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let head = command_output("git", &["-C", workspace, "rev-parse", "--short", "HEAD"]);
    let status = [
        "-C",
        workspace,
        "status",
        "--porcelain",
        "--untracked-files=no",
    ];
    let dirty = !command_output("git", &status).is_empty();
    if dirty && head != "unknown" {
        format!("{head}-dirty")
    } else {
        head
    }
}

/// The version of `name` in the lock file (the first, if several).
fn locked_version(name: &str) -> Option<String> {
    let mut lines = CARGO_LOCK.lines();
    while let Some(line) = lines.next() {
        if line == format!("name = \"{name}\"") {
            return lines
                .next()
                .and_then(|next| next.strip_prefix("version = "))
                .map(|version| version.trim_matches('"').to_owned());
        }
    }
    None
}

/// Now, as `YYYY-MM-DD HH:MM:SS UTC`.
fn utc_now() -> String {
    let seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let (days, rest) = (seconds / 86_400, seconds % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}
