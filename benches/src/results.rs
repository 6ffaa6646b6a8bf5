//! The figures of one run of one cell, as written to `results.jsonl` (one
//! JSON object per line, every figure and the environment in each).

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::alloc::AllocDelta;
use crate::environment::Environment;

/// What a cell measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// One client, sequential echoes, each timed.
    Latency,
    /// N clients in a closed loop.
    Throughput,
    /// The server pushes to one client as fast as it drains.
    Push,
    /// One broadcast reaching every member of a group.
    Fanout,
    /// Many idle connections: memory and threads.
    Crowd,
    /// Group broadcasts across two nodes joined by a Redis backplane.
    Backplane,
}

impl Scenario {
    /// Every scenario, in the order they run.
    pub const ALL: [Scenario; 6] = [
        Scenario::Latency,
        Scenario::Throughput,
        Scenario::Push,
        Scenario::Fanout,
        Scenario::Crowd,
        Scenario::Backplane,
    ];

    /// The scenario named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|scenario| scenario.name() == name)
    }

    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Latency => "latency",
            Scenario::Throughput => "throughput",
            Scenario::Push => "push",
            Scenario::Fanout => "fanout",
            Scenario::Crowd => "crowd",
            Scenario::Backplane => "backplane",
        }
    }
}

/// Latency percentiles of one run, in microseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct LatencyFigures {
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Slowest.
    pub max_us: f64,
}

impl LatencyFigures {
    /// Reads a histogram of nanoseconds.
    pub fn from_histogram(histogram: &Histogram<u64>) -> Self {
        let us = |nanos: u64| nanos as f64 / 1000.0;
        Self {
            mean_us: histogram.mean() / 1000.0,
            p50_us: us(histogram.value_at_quantile(0.50)),
            p90_us: us(histogram.value_at_quantile(0.90)),
            p99_us: us(histogram.value_at_quantile(0.99)),
            p999_us: us(histogram.value_at_quantile(0.999)),
            max_us: us(histogram.max()),
        }
    }
}

/// What one operation cost a process.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Cost {
    /// CPU time (user + system, whole process) per operation, in µs.
    pub cpu_us_per_op: f64,
    /// Bytes allocated per operation (whole process).
    pub alloc_bytes_per_op: f64,
    /// Allocations per operation (whole process).
    pub allocs_per_op: f64,
    /// Allocations over the whole window.
    pub allocs_total: u64,
}

impl Cost {
    /// `cpu` and `alloc` spread over `ops`.
    pub fn per_op(cpu: Duration, alloc: AllocDelta, ops: u64) -> Self {
        let ops = ops.max(1) as f64;
        Self {
            cpu_us_per_op: cpu.as_secs_f64() * 1e6 / ops,
            alloc_bytes_per_op: alloc.bytes as f64 / ops,
            allocs_per_op: alloc.count as f64 / ops,
            allocs_total: alloc.count,
        }
    }
}

/// What holding many idle connections cost the server.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct CrowdFigures {
    /// Connections held open.
    pub connections: usize,
    /// Server resident memory before they opened, KiB.
    pub rss_before_kib: u64,
    /// Server resident memory with all of them open, KiB.
    pub rss_after_kib: u64,
    /// Resident memory per connection, bytes.
    pub rss_per_connection: f64,
    /// Live heap (allocated, not freed) per connection, bytes.
    pub heap_per_connection: f64,
    /// Server threads before.
    pub threads_before: u64,
    /// Server threads with all of them open.
    pub threads_after: u64,
    /// Seconds the harness took to open them all (and the server to see them).
    pub connect_seconds: f64,
}

/// What a backplane cell measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackplaneMeasure {
    /// Broadcasts as fast as the members take them: deliveries per second.
    Throughput,
    /// Broadcasts at a fixed rate, every delivery timed.
    Latency,
}

/// What a backplane cell measured beyond the row's common figures.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct BackplaneFigures {
    /// Throughput or latency.
    pub measure: BackplaneMeasure,
    /// Broadcasts that reached every member, per second of the window
    /// (deliveries per second over the members).
    pub broadcasts_per_sec: f64,
    /// The rate the sender aimed at (latency cells).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paced_rate: Option<u64>,
    /// CPU time of the `redis-server` process per broadcast, in µs (none
    /// without a backplane).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_cpu_us_per_broadcast: Option<f64>,
    /// Messages the nodes' backplanes dropped in the window.
    pub backplane_dropped: u64,
}

/// One run of one cell.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// What was measured.
    pub scenario: Scenario,
    /// Who.
    pub participant: String,
    /// Payload bytes.
    pub size: usize,
    /// Client connections.
    pub clients: usize,
    /// Which of the cell's runs (from 0).
    pub run: usize,
    /// Whether it completed.
    pub ok: bool,
    /// Why it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Operations in the window.
    pub ops: u64,
    /// The window's length, seconds.
    pub seconds: f64,
    /// Operations per second.
    pub ops_per_sec: f64,
    /// Latency percentiles (latency runs; per broadcast for fan-out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyFigures>,
    /// Server child's cost per operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<Cost>,
    /// Harness (client) cost per operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<Cost>,
    /// Crowd figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crowd: Option<CrowdFigures>,
    /// Backplane figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backplane: Option<BackplaneFigures>,
    /// Sealed latency cells: the four ChaCha20-Poly1305 operations of one
    /// echo of this payload, in µs, timed in the harness right after the
    /// cell (`cipher.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aead_ops_us: Option<f64>,
    /// The machine's 1-minute load average when the run started (on a
    /// 2-core machine, above 2 means other work competed with this cell).
    #[serde(default)]
    pub load_1m: f64,
    /// When the cell started, in seconds since the Unix epoch (0 in results
    /// written before it was kept): how far apart the two windows of a
    /// budget's ratio ran.
    #[serde(default)]
    pub started_unix_s: f64,
    /// Anything else worth keeping (push backoffs, drops, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The machine and build.
    pub environment: Arc<Environment>,
}

impl Row {
    /// A row with the cell's identity and nothing measured yet.
    pub fn new(
        scenario: Scenario,
        participant: &str,
        size: usize,
        clients: usize,
        run: usize,
        environment: &Arc<Environment>,
    ) -> Self {
        Self {
            scenario,
            participant: participant.to_owned(),
            size,
            clients,
            run,
            ok: false,
            error: None,
            ops: 0,
            seconds: 0.0,
            ops_per_sec: 0.0,
            latency: None,
            server: None,
            client: None,
            crowd: None,
            backplane: None,
            aead_ops_us: None,
            load_1m: crate::environment::load_1m(),
            started_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |since| since.as_secs_f64()),
            notes: Vec::new(),
            environment: Arc::clone(environment),
        }
    }

    /// Fills in a measurement window.
    pub fn with_window(mut self, window: &crate::window::Window) -> Self {
        self.ok = true;
        self.ops = window.ops;
        self.seconds = window.elapsed.as_secs_f64();
        self.ops_per_sec = window.rate();
        self.server = Some(window.server_cost());
        self.client = Some(window.client_cost());
        self
    }

    /// Fills in a crowd's figures: the connections opened, over the time
    /// it took to open them all.
    pub fn with_crowd(mut self, figures: CrowdFigures) -> Self {
        self.ok = true;
        self.ops = figures.connections as u64;
        self.seconds = figures.connect_seconds;
        self.ops_per_sec = figures.connections as f64 / figures.connect_seconds.max(1e-9);
        self.crowd = Some(figures);
        self
    }

    /// Marks the run failed.
    pub fn failed(mut self, error: &anyhow::Error) -> Self {
        self.ok = false;
        self.error = Some(format!("{error:#}"));
        self
    }
}

/// Appends `row` to the JSON-lines file at `path`.
pub fn append(path: &Path, row: &Row) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    serde_json::to_writer(&mut file, row)?;
    file.write_all(b"\n")?;
    Ok(())
}

/// Reads every row of a JSON-lines file.
pub fn read(path: &Path) -> Result<Vec<Row>> {
    let text = std::fs::read_to_string(path)?;
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| Ok(serde_json::from_str(line)?))
        .collect()
}
