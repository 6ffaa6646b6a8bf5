//! Waiting on conditions rather than clocks: what a loaded CI machine
//! cannot break.

use std::future::Future;
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
