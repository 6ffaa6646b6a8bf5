//! Where the server's long-lived sleeps run: each connection's alarm and
//! the metrics page's upkeep.
//!
//! On tokio's multi-thread runtime they live on a thread of their own,
//! `ternio-timers`: a worker that parks while its runtime holds any timer
//! sleeps in `epoll_wait` with a timeout, and arming and cancelling that
//! kernel timer on every park cost the server about 0.4 µs of CPU per
//! one-at-a-time echo on the benchmark machine (docs/benchmarks.md, "Timers
//! off the workers"). With the sleeps elsewhere, the workers park without a
//! timeout unless the application has timers of its own. On a
//! current-thread runtime, the only kind whose clock tokio can pause, they
//! stay on it, so paused-time tests keep working. (`ternio-client` does the
//! same with its own sleeps, in its `keeper`.)

use std::sync::OnceLock;

use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::time::{Instant, Sleep};

/// A sleep until `at`, kept by the [`keeper`] thread when the current
/// runtime is tokio's multi-thread one (and the thread could start), by the
/// current runtime otherwise. It wakes the task that polls it on that
/// task's own runtime.
pub(crate) fn sleep_until(at: Instant) -> Sleep {
    let multi_thread = Handle::try_current()
        .is_ok_and(|current| current.runtime_flavor() != RuntimeFlavor::CurrentThread);
    // Created while the keeper's runtime is entered, it belongs to that
    // runtime's timer.
    let _entered = multi_thread.then(keeper).flatten().map(Handle::enter);
    tokio::time::sleep_until(at)
}

/// The runtime of the `ternio-timers` thread, started on first use: a
/// current-thread runtime that does nothing but keep time for the alarms
/// and upkeep of every server in the process. `None` if the thread could
/// not start (the sleeps then stay on the current runtime).
fn keeper() -> Option<&'static Handle> {
    static KEEPER: OnceLock<Option<Handle>> = OnceLock::new();
    KEEPER
        .get_or_init(|| {
            // The runtime is built on its thread and stays there: a runtime
            // dropped on a runtime's worker (a thread that failed to start)
            // would panic.
            let (sender, receiver) = std::sync::mpsc::sync_channel(1);
            std::thread::Builder::new()
                .name("ternio-timers".to_owned())
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
