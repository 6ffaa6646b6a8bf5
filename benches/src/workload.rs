//! The echo workloads: latency (one client, sequential calls) and
//! throughput (N clients, each on its own connection, closed loop), with
//! the server child's and the harness's costs over the same window.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow};
use bytes::Bytes;
use hdrhistogram::Histogram;
use tokio::runtime::Runtime;

use crate::child::ServerChild;
use crate::participants::{EchoClient, Participant};
use crate::results::LatencyFigures;
use crate::window::{ClientMeter, Load, Window, counted_window};

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

/// Runs `future` on the runtime's workers and waits for it, at most `limit`.
/// The wait is the calling thread's, not a tokio timer: a timer pending on
/// the clients' runtime would make every worker park with a timeout, which
/// costs each client CPU on every wake-up (docs/benchmarks.md, "Timers off
/// the workers"), a cost no raw client has.
pub fn run_on<T: Send + 'static>(
    runtime: &Runtime,
    limit: Duration,
    future: impl Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    let (done, outcome) = std::sync::mpsc::sync_channel(1);
    let task = runtime.spawn(async move {
        // The receiver is gone only once the wait gave up.
        let _ = done.send(future.await);
    });
    match outcome.recv_timeout(limit) {
        Ok(result) => result,
        Err(RecvTimeoutError::Timeout) => Err(anyhow!("no answer within {limit:?}")),
        // The task ended without sending: it panicked, and its join says how.
        Err(RecvTimeoutError::Disconnected) => match runtime.block_on(task) {
            Err(error) => Err(anyhow!("a client task failed: {error}")),
            Ok(()) => Err(anyhow!("a client task ended without its outcome")),
        },
    }
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

/// The clients of a throughput cell, each counting its echoes.
struct Echoes<'a, T> {
    tasks: &'a [tokio::task::JoinHandle<T>],
    counters: &'a [PaddedCounter],
}

impl<T> Load for Echoes<'_, T> {
    fn count(&self) -> u64 {
        self.counters
            .iter()
            .map(|counter| counter.0.load(Ordering::Relaxed))
            .sum()
    }

    fn check_running(&self) -> Result<()> {
        if self.tasks.iter().any(|task| task.is_finished()) {
            return Err(anyhow!("a client stopped during the warm-up"));
        }
        Ok(())
    }
}

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
    let load = Echoes {
        tasks: &tasks,
        counters: &counters,
    };
    let measured = counted_window(child, &load, warmup, window);
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
