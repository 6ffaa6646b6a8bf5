//! An upload's state, shared by its connection (which hands it the items
//! the peer sends, within the credit granted) and its handler's
//! [`Upload`](crate::Upload) (which takes them).

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};
use std::task::Waker;

use ternio_protocol::stream::INITIAL_CREDIT;
use ternio_protocol::{Bytes, HandlerError};

/// How an upload ended.
pub(crate) enum End {
    Complete,
    Failed(HandlerError),
}

/// The state an upload's connection and its handler share.
#[derive(Default)]
pub(crate) struct UploadState {
    /// Item bodies received and not yet taken (at most the credit granted).
    pub(crate) items: VecDeque<Bytes>,
    pub(crate) end: Option<End>,
    pub(crate) waker: Option<Waker>,
    /// Items taken since the last grant.
    pub(crate) taken: u32,
}

/// An upload's shared state, and how to wake its connection when the
/// handler has taken enough items for a grant (the handler may run on
/// another task than the connection's).
pub(crate) struct UploadShared {
    state: Mutex<UploadState>,
    grant_due: Box<dyn Fn() + Send + Sync>,
}

impl UploadShared {
    /// An upload whose connection `grant_due` wakes.
    pub(crate) fn new(grant_due: impl Fn() + Send + Sync + 'static) -> Self {
        Self {
            state: Mutex::default(),
            grant_due: Box::new(grant_due),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, UploadState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Hands an item body to the handler; dropped once the upload ended
    /// (a malformed item ends it: nothing follows).
    pub(crate) fn push(&self, body: Bytes) {
        let mut state = self.lock();
        if state.end.is_some() {
            return;
        }
        state.items.push_back(body);
        if let Some(waker) = state.waker.take() {
            waker.wake();
        }
    }

    /// Ends the upload (unless it ended already).
    pub(crate) fn end(&self, end: End) {
        let mut state = self.lock();
        if state.end.is_none() {
            state.end = Some(end);
        }
        if let Some(waker) = state.waker.take() {
            waker.wake();
        }
    }

    /// Counts an item the handler took; wakes the connection once a grant
    /// is due.
    pub(crate) fn took_one(&self, mut state: MutexGuard<'_, UploadState>) {
        state.taken = state.taken.saturating_add(1);
        let due = state.taken == INITIAL_CREDIT / 2;
        drop(state);
        if due {
            (self.grant_due)();
        }
    }

    /// The credit to grant now: the items taken, once they are half the
    /// initial credit.
    pub(crate) fn take_grant(&self) -> Option<u32> {
        let mut state = self.lock();
        if state.end.is_some() || state.taken < INITIAL_CREDIT / 2 {
            return None;
        }
        Some(std::mem::take(&mut state.taken))
    }
}
