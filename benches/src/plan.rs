//! How much each mode measures: the seed's methodology in `full` (its echo
//! cells cut into more and shorter runs), a tenth of it (and one run) in
//! `quick`, and a few hundred checked echoes per participant in `smoke`.

use std::time::Duration;

/// A mode of the harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The seed's methodology (3 runs, 100,000 timed calls, 8 s windows),
    /// with the echo cells' share cut into more and shorter runs: the
    /// latency's 300,000 timed calls as 6 runs of 50,000, the throughput's
    /// 24 s as 8 runs of 3 s.
    Full,
    /// A tenth of it, one run.
    Quick,
    /// Checks every participant end to end; times nothing worth reading.
    Smoke,
}

impl Mode {
    /// Its name in the results.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Full => "full",
            Mode::Quick => "quick",
            Mode::Smoke => "smoke",
        }
    }
}

/// The sizes, counts and durations of one mode.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The mode.
    pub mode: Mode,
    /// Runs of each cell of push, fan-out, crowd and backplane.
    pub runs: usize,
    /// Latency: runs of each cell. More and shorter than the seed's 3 runs
    /// of 100,000 calls: two cells side by side still ran at different
    /// host speeds (docs/benchmarks.md, "Pairs back to back").
    pub latency_runs: usize,
    /// Payload sizes of the echo workloads.
    pub sizes: Vec<usize>,
    /// Latency: calls before timing.
    pub latency_warmup: u64,
    /// Latency: timed calls.
    pub latency_calls: u64,
    /// Throughput: client counts.
    pub client_counts: Vec<usize>,
    /// Throughput: runs of each cell. More and shorter windows than the
    /// other scenarios': two windows side by side still ran at different
    /// host speeds one time in three over 8 s (docs/benchmarks.md, "Pairs
    /// back to back").
    pub throughput_runs: usize,
    /// Throughput: warm-up before each counted window.
    pub throughput_warmup: Duration,
    /// Throughput: the counted window.
    pub throughput_window: Duration,
    /// Warm-up before the counted windows of push, fan-out and backplane.
    pub warmup: Duration,
    /// Counted window of push, fan-out and backplane.
    pub window: Duration,
    /// Fan-out: members of the group.
    pub fanout_members: usize,
    /// Crowd: idle connections.
    pub crowd_connections: usize,
    /// Backplane: member counts of the throughput cells.
    pub backplane_members: Vec<usize>,
    /// Backplane: members of the latency cells.
    pub backplane_latency_members: usize,
    /// Backplane: broadcasts per second of the latency cells.
    pub backplane_rate: u64,
    /// Backplane throughput: broadcasts the sender may be ahead of the
    /// members (so that no queue overflows).
    pub backplane_ahead: u64,
}

impl Plan {
    /// The plan of `mode`.
    pub fn new(mode: Mode) -> Self {
        match mode {
            Mode::Full => Self {
                mode,
                runs: 3,
                sizes: vec![32, 1024],
                latency_runs: 6,
                latency_warmup: 10_000,
                latency_calls: 50_000,
                client_counts: vec![1, 16, 64],
                throughput_runs: 8,
                throughput_warmup: Duration::from_secs(1),
                throughput_window: Duration::from_secs(3),
                warmup: Duration::from_secs(2),
                window: Duration::from_secs(8),
                fanout_members: 1000,
                crowd_connections: 10_000,
                backplane_members: vec![1, 10, 100],
                backplane_latency_members: 10,
                backplane_rate: 1000,
                backplane_ahead: 2048,
            },
            Mode::Quick => Self {
                mode,
                runs: 1,
                sizes: vec![32, 1024],
                latency_runs: 1,
                latency_warmup: 2_000,
                latency_calls: 10_000,
                client_counts: vec![1, 16, 64],
                throughput_runs: 1,
                throughput_warmup: Duration::from_millis(500),
                throughput_window: Duration::from_secs(2),
                warmup: Duration::from_millis(500),
                window: Duration::from_secs(2),
                fanout_members: 1000,
                crowd_connections: 10_000,
                backplane_members: vec![1, 10, 100],
                backplane_latency_members: 10,
                backplane_rate: 1000,
                backplane_ahead: 2048,
            },
            Mode::Smoke => Self {
                mode,
                runs: 1,
                sizes: vec![32, 1024],
                latency_runs: 1,
                latency_warmup: 50,
                latency_calls: 200,
                client_counts: vec![4],
                throughput_runs: 1,
                throughput_warmup: Duration::from_millis(100),
                throughput_window: Duration::from_millis(300),
                warmup: Duration::from_millis(100),
                window: Duration::from_millis(300),
                fanout_members: 20,
                crowd_connections: 200,
                backplane_members: vec![4],
                backplane_latency_members: 4,
                backplane_rate: 1000,
                backplane_ahead: 256,
            },
        }
    }
}
