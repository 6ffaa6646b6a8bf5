//! The echo workloads: latency (one client, sequential calls) and
//! throughput (N clients, each on its own connection, closed loop), with
//! the server child's and the harness's costs over the same window.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow};
use bytes::Bytes;
use hdrhistogram::Histogram;
use tokio::runtime::Runtime;

use crate::alloc::{AllocDelta, AllocSnapshot};
use crate::child::{ServerChild, ServerReport};
use crate::participants::{EchoClient, Participant};
use crate::results::{Cost, LatencyFigures};
use crate::usage;

/// The longest a whole phase of calls may take before the cell fails.
const PHASE_LIMIT: Duration = Duration::from_secs(300);

/// A payload of `size` bytes, different for each `seed`.
pub fn payload(size: usize, seed: u64) -> Bytes {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..size)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect::<Vec<u8>>()
        .into()
}

/// What one measurement window saw, on both sides.
#[derive(Debug, Clone, Copy, Default)]
pub struct Window {
    /// Operations completed in the window (echoes, pushes, deliveries).
    pub ops: u64,
    /// The window's length.
    pub elapsed: Duration,
    /// The server child's usage.
    pub server: ServerReport,
    /// The harness's CPU time (all its client tasks).
    pub client_cpu: Duration,
    /// The harness's allocations.
    pub client_alloc: AllocDelta,
}

impl Window {
    /// Operations per second.
    pub fn rate(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The server's cost per operation.
    pub fn server_cost(&self) -> Cost {
        Cost::per_op(self.server.cpu, self.server.alloc, self.ops)
    }

    /// The client's cost per operation.
    pub fn client_cost(&self) -> Cost {
        Cost::per_op(self.client_cpu, self.client_alloc, self.ops)
    }
}

/// The harness's own usage at the start of a window.
pub struct ClientMeter {
    cpu: Duration,
    alloc: AllocSnapshot,
    started: Instant,
}

impl ClientMeter {
    /// Starts measuring now.
    pub fn start() -> Self {
        Self {
            cpu: usage::cpu_time(),
            alloc: AllocSnapshot::now(),
            started: Instant::now(),
        }
    }

    /// Ends the window with `ops` done; `server` is the child's report.
    pub fn stop(self, ops: u64, server: impl FnOnce() -> Result<ServerReport>) -> Result<Window> {
        let elapsed = self.started.elapsed();
        let client_cpu = usage::cpu_time().saturating_sub(self.cpu);
        let client_alloc = AllocSnapshot::now().since(&self.alloc);
        Ok(Window {
            ops,
            elapsed,
            server: server()?,
            client_cpu,
            client_alloc,
        })
    }
}

/// Runs `future` on the runtime's workers and waits for it, at most `limit`.
pub fn run_on<T: Send + 'static>(
    runtime: &Runtime,
    limit: Duration,
    future: impl Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    let task = runtime.spawn(future);
    runtime.block_on(async move {
        match tokio::time::timeout(limit, task).await {
            Ok(joined) => joined.map_err(|error| anyhow!("a client task failed: {error}"))?,
            Err(_) => Err(anyhow!("no answer within {limit:?}")),
        }
    })
}

/// One client, `warmup` calls, then `timed` calls each timed on its own.
pub fn latency(
    runtime: &Runtime,
    child: &mut ServerChild,
    participant: Participant,
    size: usize,
    warmup: u64,
    timed: u64,
) -> Result<(Window, LatencyFigures)> {
    let endpoint = child.endpoint.clone();
    let message = payload(size, 1);
    let (client, message) = run_on(runtime, PHASE_LIMIT, async move {
        let mut client = EchoClient::connect(participant, &endpoint).await?;
        for _ in 0..warmup {
            client.echo(&message).await?;
        }
        Ok((client, message))
    })?;
    let mut histogram = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
    child.reset()?;
    let meter = ClientMeter::start();
    let (client, histogram) = run_on(runtime, PHASE_LIMIT, async move {
        let mut client = client;
        for _ in 0..timed {
            let started = Instant::now();
            client.echo(&message).await?;
            histogram.saturating_record(started.elapsed().as_nanos() as u64);
        }
        Ok((client, histogram))
    })?;
    let window = meter.stop(timed, || child.report())?;
    runtime.block_on(client.close());
    Ok((window, LatencyFigures::from_histogram(&histogram)))
}

/// A counter on its own cache line.
#[repr(align(64))]
#[derive(Default)]
struct PaddedCounter(AtomicU64);

/// `clients` connections in a closed loop (each keeps one call in flight):
/// `warmup`, then operations counted over `window`.
pub fn throughput(
    runtime: &Runtime,
    child: &mut ServerChild,
    participant: Participant,
    size: usize,
    clients: usize,
    warmup: Duration,
    window: Duration,
) -> Result<Window> {
    let endpoint = child.endpoint.clone();
    let connected = run_on(runtime, PHASE_LIMIT, async move {
        let connects = (0..clients).map(|_| EchoClient::connect(participant, &endpoint));
        futures_util::future::try_join_all(connects).await
    })?;
    let counters: Arc<Vec<PaddedCounter>> =
        Arc::new((0..clients).map(|_| PaddedCounter::default()).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = connected
        .into_iter()
        .enumerate()
        .map(|(index, mut client)| {
            let counters = Arc::clone(&counters);
            let stop = Arc::clone(&stop);
            let message = payload(size, index as u64 + 1);
            runtime.spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    client.echo(&message).await?;
                    counters[index].0.fetch_add(1, Ordering::Relaxed);
                }
                Ok::<_, anyhow::Error>(client)
            })
        })
        .collect();
    let total = || -> u64 {
        counters
            .iter()
            .map(|counter| counter.0.load(Ordering::Relaxed))
            .sum()
    };
    let measured = (|| {
        std::thread::sleep(warmup);
        if tasks.iter().any(|task| task.is_finished()) {
            return Err(anyhow!("a client stopped during the warm-up"));
        }
        child.reset()?;
        let before = total();
        let meter = ClientMeter::start();
        std::thread::sleep(window);
        let after = total();
        meter.stop(after - before, || child.report())
    })();
    stop.store(true, Ordering::Relaxed);
    let finished = runtime.block_on(async move {
        let joined = tokio::time::timeout(PHASE_LIMIT, futures_util::future::join_all(tasks))
            .await
            .context("the clients did not stop")?;
        let mut clients = Vec::with_capacity(joined.len());
        let mut first_error = None;
        for result in joined {
            match result {
                Ok(Ok(client)) => clients.push(client),
                Ok(Err(error)) => {
                    first_error.get_or_insert(error);
                }
                Err(error) => {
                    first_error.get_or_insert(anyhow!("a client task failed: {error}"));
                }
            }
        }
        futures_util::future::join_all(clients.into_iter().map(EchoClient::close)).await;
        match first_error {
            Some(error) => Err(error),
            None => Ok(()),
        }
    });
    // A client's own error says more than the window's.
    finished?;
    measured
}
