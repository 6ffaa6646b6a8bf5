//! The one locking helper every module of the client uses.

use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`. No code panics while holding the client's locks; the data
/// is recovered if one did.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
