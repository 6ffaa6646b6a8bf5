//! For unit tests: a waker that counts how often it was woken.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Wake, Waker};

/// How often the waker of [`counting_waker`] was woken.
pub(crate) struct WakeCount(AtomicUsize);

impl WakeCount {
    /// The wake-ups so far.
    pub(crate) fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl Wake for WakeCount {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A waker, and the count of its wake-ups.
pub(crate) fn counting_waker() -> (Arc<WakeCount>, Waker) {
    let count = Arc::new(WakeCount(AtomicUsize::new(0)));
    (Arc::clone(&count), Waker::from(count))
}
