//! Tasks that belong to a client or to one of its connections, aborted
//! when their owner lets go of them.

use std::time::Duration;

use tokio::task::JoinHandle;

/// Spawned tasks, aborted on drop (a plain `JoinHandle` would let them run on).
#[derive(Default)]
pub(crate) struct TaskSet(Vec<JoinHandle<()>>);

impl TaskSet {
    pub(crate) fn new(tasks: Vec<JoinHandle<()>>) -> Self {
        Self(tasks)
    }

    /// Lets the tasks finish on their own for up to `grace` (a WebSocket
    /// reader completing its close handshake, say) without waiting for
    /// them, then aborts whatever still runs.
    pub(crate) fn retire(mut self, grace: Duration) {
        if self.0.iter().all(JoinHandle::is_finished) {
            return;
        }
        tokio::spawn(async move {
            let _ = tokio::time::timeout(grace, async {
                for task in &mut self.0 {
                    let _ = task.await;
                }
            })
            .await;
        });
    }
}

impl Drop for TaskSet {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}
