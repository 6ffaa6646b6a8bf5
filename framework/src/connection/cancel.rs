//! Requests the peer gave up or bounded (docs/PROTOCOL.md section 4.1): a
//! `CANCEL` ends a running asynchronous request, dropping its future; a
//! `DEADLINE` announces how long the peer waits for a request it sends
//! next, which then runs at most that long.
//!
//! Both are bounded: one abort handle per running asynchronous request
//! (at most `max_requests_in_flight`), and at most [`ANNOUNCED_MAX`]
//! deadlines announced for requests not yet arrived, the oldest forgotten
//! first.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use futures_util::future::{AbortHandle, AbortRegistration};
use tokio::time::Instant;

/// Deadlines kept for requests that have not arrived yet. A requester sends
/// each `DEADLINE` just before its request, so only the requests sent at
/// the same moment by concurrent tasks come between the two.
pub(super) const ANNOUNCED_MAX: usize = 32;

/// The running asynchronous requests that a `CANCEL` can end, and the
/// deadlines announced for requests to come.
#[derive(Default)]
pub(super) struct Cancels {
    running: HashMap<u32, AbortHandle>,
    announced: VecDeque<(u32, Instant)>,
}

impl Cancels {
    /// Registers the asynchronous request `id`, started now: the returned
    /// registration makes its future abortable.
    pub(super) fn register(&mut self, id: u32) -> AbortRegistration {
        let (handle, registration) = AbortHandle::new_pair();
        // An id reused while in flight (against the contract) replaces the
        // first: a CANCEL then ends the later request.
        self.running.insert(id, handle);
        registration
    }

    /// Forgets request `id`, which ended.
    pub(super) fn finished(&mut self, id: u32) {
        self.running.remove(&id);
    }

    /// Ends the running request `id`, if it is one: its future is dropped
    /// at the engine's next poll. A `CANCEL` for a request already answered
    /// (they cross on the wire) or never seen does nothing.
    pub(super) fn cancel(&mut self, id: u32) -> bool {
        match self.running.remove(&id) {
            Some(handle) => {
                handle.abort();
                true
            }
            None => false,
        }
    }

    /// Notes that the peer waits `budget` from `now` for request `id`.
    pub(super) fn announce(&mut self, id: u32, now: Instant, budget: Duration) {
        if self.announced.len() == ANNOUNCED_MAX {
            self.announced.pop_front();
        }
        let until = now
            .checked_add(budget)
            .unwrap_or(now + Duration::from_secs(86_400 * 365));
        self.announced.push_back((id, until));
    }

    /// The deadline announced for request `id`, taken (a request uses its
    /// announcement once).
    pub(super) fn take_deadline(&mut self, id: u32) -> Option<Instant> {
        if self.announced.is_empty() {
            return None;
        }
        let position = self
            .announced
            .iter()
            .position(|&(announced, _)| announced == id)?;
        self.announced.remove(position).map(|(_, until)| until)
    }

    /// How many deadlines wait for their request.
    #[cfg(test)]
    fn announced(&self) -> usize {
        self.announced.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_of_deadlines_keeps_only_the_latest() {
        let mut cancels = Cancels::default();
        let now = Instant::now();
        for id in 0..10_000 {
            cancels.announce(id, now, Duration::from_millis(u64::from(id)));
        }
        assert_eq!(cancels.announced(), ANNOUNCED_MAX);
        assert_eq!(cancels.take_deadline(5), None, "forgotten");
        assert_eq!(
            cancels.take_deadline(9_999),
            Some(now + Duration::from_millis(9_999))
        );
        assert_eq!(cancels.take_deadline(9_999), None, "used once");
    }

    #[test]
    fn a_cancel_aborts_only_a_running_request() {
        let mut cancels = Cancels::default();
        let registration = cancels.register(7);
        let future =
            futures_util::future::Abortable::new(std::future::pending::<()>(), registration);
        assert!(!cancels.cancel(8));
        assert!(cancels.cancel(7));
        assert!(future.is_aborted());
        assert!(!cancels.cancel(7), "once");
        let _ = cancels.register(9);
        cancels.finished(9);
        assert!(!cancels.cancel(9), "finished before its CANCEL");
    }
}
