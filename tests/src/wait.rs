//! Waiting on conditions rather than clocks: what a loaded CI machine
//! cannot break.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

/// How long [`eventually`] waits before it fails the test: far longer than
/// anything a test waits for takes, even on a loaded machine.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// Waits until `condition` holds, polling every 5 ms; fails the test with
/// `what` after [`PATIENCE`].
pub async fn eventually(what: &str, condition: impl FnMut() -> bool) {
    eventually_within(PATIENCE, what, condition).await;
}

/// [`eventually`] with its own patience.
pub async fn eventually_within(
    patience: Duration,
    what: &str,
    mut condition: impl FnMut() -> bool,
) {
    let deadline = Instant::now() + patience;
    while !condition() {
        assert!(Instant::now() < deadline, "not within {patience:?}: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until an asynchronous `condition` (a round trip, say) holds,
/// polling every 20 ms; fails the test with `what` after `patience`.
pub async fn eventually_async(
    patience: Duration,
    what: &str,
    mut condition: impl AsyncFnMut() -> bool,
) {
    let deadline = Instant::now() + patience;
    while !condition().await {
        assert!(
            Instant::now() < deadline,
            "never within {patience:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls `future` once, so that whatever it writes on its first step (a
/// client request, say) is queued before anything the caller sends next,
/// then finishes it on its own task.
pub async fn spawn_started<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let mut future = Box::pin(future);
    let first = std::future::poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await;
    match first {
        Poll::Ready(output) => tokio::spawn(async move { output }),
        Poll::Pending => tokio::spawn(future),
    }
}

/// How late this machine wakes a sleeping thread, measured while a test
/// runs: a thread of its own sleeps 1 ms over and over and keeps its worst
/// overshoot. A bound on a delay that the machine adds to (a conditioner's
/// 50 ms, say) allows [`slack`](Self::slack) on top, so that a loaded
/// machine widens it and a quiet one keeps it tight. Its own thread, not a
/// task: code under test that blocked the test's runtime would otherwise
/// be measured as the machine's lateness, and excused. Stops when dropped.
pub struct Lateness {
    worst_us: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    probe: Option<std::thread::JoinHandle<()>>,
}

impl Lateness {
    /// Starts measuring.
    pub fn probe() -> Self {
        let worst_us = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (worst, stopped) = (Arc::clone(&worst_us), Arc::clone(&stop));
        let probe = std::thread::spawn(move || {
            let asked = Duration::from_millis(1);
            while !stopped.load(Ordering::Relaxed) {
                let began = Instant::now();
                std::thread::sleep(asked);
                let late = began.elapsed().saturating_sub(asked);
                worst.fetch_max(late.as_micros() as u64, Ordering::Relaxed);
            }
        });
        Self {
            worst_us,
            stop,
            probe: Some(probe),
        }
    }

    /// The worst lateness seen so far.
    pub fn worst(&self) -> Duration {
        Duration::from_micros(self.worst_us.load(Ordering::Relaxed))
    }

    /// What a bound allows for the machine on a path of `hops` timer or
    /// wake-up waits: `quiet` (what a quiet machine needs), or `hops` times
    /// the worst lateness seen, whichever is more.
    pub fn slack(&self, quiet: Duration, hops: u32) -> Duration {
        quiet.max(self.worst() * hops)
    }
}

impl Drop for Lateness {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(probe) = self.probe.take() {
            let _ = probe.join();
        }
    }
}
