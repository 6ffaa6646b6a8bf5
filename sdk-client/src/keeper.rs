//! Where the client's long-lived sleeps run: the keepalive's, the request
//! expiry's and resumption's `ACK` delay.
//!
//! On tokio's multi-thread runtime they live on a thread of their own: a
//! worker that parks while its runtime holds any timer sleeps in
//! `epoll_wait` with a timeout, and arming and cancelling that kernel timer
//! on every park costs CPU on each answer's wake-up (docs/benchmarks.md,
//! "Timers off the workers"). With the sleeps elsewhere, the workers park
//! without a timeout unless the application has timers of its own. On a
//! current-thread runtime, the only kind whose clock tokio can pause, they
//! stay on it, so paused-time tests keep working. (The server's connection
//! alarms and metrics upkeep do the same, in `ternio`'s `keeper`.)

use std::sync::OnceLock;

use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::time::{Instant, Sleep};

/// A sleep until `at`, kept by the `ternio-client-timers` thread when the
/// current runtime is tokio's multi-thread one (and the thread could
/// start), by the current runtime otherwise. It wakes the task that polls
/// it on that task's own runtime.
pub(crate) fn sleep_until(at: Instant) -> Sleep {
    let multi_thread = Handle::try_current()
        .is_ok_and(|current| current.runtime_flavor() != RuntimeFlavor::CurrentThread);
    // Created while the keeper's runtime is entered, it belongs to that
    // runtime's timer.
    let _entered = multi_thread.then(keeper).flatten().map(Handle::enter);
    tokio::time::sleep_until(at)
}

/// The runtime of the timer thread, started on first use: a current-thread
/// runtime that does nothing but keep time for every client in the
/// process. `None` if the thread could not start.
fn keeper() -> Option<&'static Handle> {
    static KEEPER: OnceLock<Option<Handle>> = OnceLock::new();
    KEEPER
        .get_or_init(|| {
            // The runtime is built on its thread and stays there: a runtime
            // dropped on a runtime's worker (a thread that failed to start)
            // would panic.
            let (sender, receiver) = std::sync::mpsc::sync_channel(1);
            std::thread::Builder::new()
                .name("ternio-client-timers".to_owned())
                .spawn(move || {
                    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                        .enable_time()
                        .build()
                    else {
                        return;
                    };
                    if sender.send(runtime.handle().clone()).is_ok() {
                        runtime.block_on(std::future::pending::<()>());
                    }
                })
                .ok()?;
            receiver.recv().ok()
        })
        .as_ref()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn on_a_multi_thread_runtime_the_sleep_is_kept_off_it() {
        let multi = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let started = Instant::now();
        let sleep = {
            let _entered = multi.enter();
            sleep_until(Instant::now() + Duration::from_millis(20))
        };
        // Its runtime is gone: a sleep of that runtime's timer would panic
        // when polled now; one the keeper holds goes off.
        drop(multi);
        let other = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        other.block_on(sleep);
        assert!(started.elapsed() >= Duration::from_millis(20));
    }

    #[tokio::test(start_paused = true)]
    async fn on_a_current_thread_runtime_the_sleep_follows_its_paused_clock() {
        let sleep = sleep_until(Instant::now() + Duration::from_secs(3600));
        let started = std::time::Instant::now();
        tokio::time::advance(Duration::from_secs(3600)).await;
        // Kept by the keeper, it would not follow this clock: the timeout
        // (on the paused clock) fails the test instead of letting it hang.
        tokio::time::timeout(Duration::from_secs(60), sleep)
            .await
            .expect("the sleep follows the paused clock");
        assert!(started.elapsed() < Duration::from_secs(60));
    }
}
