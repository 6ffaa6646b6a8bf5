//! Locks as the server takes them.

use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`. No code of the server panics while holding one of its
/// locks; should one, the data is recovered rather than the panic spread.
pub(crate) fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
