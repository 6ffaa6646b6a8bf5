//! The requests waiting for an answer: their ids, one slot per id holding
//! the waiting task's waker and then the request's outcome, and the
//! deadlines of them all. One task watches the deadlines with one timer
//! instead of one timer per request: it sleeps until
//! [`Requests::next_deadline`] and then calls [`Requests::on_timeout`] with
//! the time, so the expiry is tested with time passed in.
//!
//! Every method runs with the client's connection state locked; wakers are
//! handed back to be woken after the lock is released.

use std::task::{Context, Poll, Waker};
use std::time::Duration;

use ternio_protocol::Frame;
use tokio::time::Instant;

use crate::error::CloseReason;
use crate::id_table::IdTable;

/// Why a request ended without an answer.
pub(crate) enum Failure {
    /// Its connection was lost or the client closed.
    Closed(CloseReason),
    /// Its deadline passed first.
    TimedOut,
}

/// What a request ends with.
pub(crate) type Outcome = Result<Frame, Failure>;

/// What became of an answer handed to [`Requests::answer`].
pub(crate) enum Answer {
    /// Its request took it: the waker of the task waiting for it, if any.
    Taken(Option<Waker>),
    /// No request waits for it (it timed out, was dropped, or never was).
    NotWaiting,
    /// It came plain and its request went out sealed: the session is broken.
    PlainToSealed,
}

/// One request waiting for its answer, or answered and not yet collected.
struct Slot {
    /// The request went out sealed: its answer must come sealed too.
    sealed: bool,
    deadline: Instant,
    state: State,
}

enum State {
    /// No answer yet: the waker of the task waiting for it, once known (at
    /// registration, or at its first poll).
    Waiting(Option<Waker>),
    /// Ended: the waiting task collects the outcome.
    Done(Outcome),
}

/// The slots by request id, and the deadline the expiry task sleeps until.
#[derive(Default)]
pub(crate) struct Requests {
    slots: IdTable<Slot>,
    /// When the expiry task wakes next (`None`: when told to).
    wake_at: Option<Instant>,
    /// The next request id to try.
    next_id: u32,
}

/// Which waker a poll was given, to tell whether a slot holds it already:
/// two wakers with the same data and vtable wake the same task (what
/// [`Waker::will_wake`] compares), and the clone in the slot keeps that data
/// alive while the request waits.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct WakerId(usize, usize);

impl WakerId {
    /// The identity of `waker`.
    pub(crate) fn of(waker: &Waker) -> Self {
        Self(
            waker.data() as usize,
            std::ptr::from_ref(waker.vtable()) as usize,
        )
    }
}

/// `timeout` after `now`; a timeout too long to add counts as about thirty
/// years.
pub(crate) fn deadline_after(now: Instant, timeout: Duration) -> Instant {
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(30 * 365 * 86_400))
}

impl Requests {
    /// An id that no waiting request uses (0 means "no reply": never).
    pub(crate) fn free_id(&mut self) -> u32 {
        loop {
            let id = self.next_id;
            self.next_id = id.wrapping_add(1);
            // An id whose place is taken (by one still waiting since the
            // last wrap, or sharing its low bits) is skipped.
            if id != 0 && self.slots.is_free(id) {
                return id;
            }
        }
    }

    /// How many requests hold a slot.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether request id `id` holds a slot.
    #[cfg(test)]
    fn contains(&self, id: u32) -> bool {
        self.slots.get(id).is_some()
    }

    /// Registers request `id`, to end by `deadline`, with the waker of the
    /// poll that registers it when the wait for its outcome starts in that
    /// same poll (then that first wait need not come here). Returns true
    /// when the expiry task must be told: it sleeps until a later deadline,
    /// or none.
    pub(crate) fn insert(
        &mut self,
        id: u32,
        sealed: bool,
        deadline: Instant,
        waker: Option<Waker>,
    ) -> bool {
        let slot = Slot {
            sealed,
            deadline,
            state: State::Waiting(waker),
        };
        self.slots.insert(id, slot);
        let earlier = self.wake_at.is_none_or(|at| deadline < at);
        if earlier {
            self.wake_at = Some(deadline);
        }
        earlier
    }

    /// Takes request `id`'s outcome when it has one; otherwise keeps the
    /// waker of `cx` to be woken when it does.
    pub(crate) fn poll(&mut self, id: u32, cx: &mut Context<'_>) -> Poll<Outcome> {
        let Some(slot) = self.slots.get_mut(id) else {
            // Slots leave only through here or their request's drop guard.
            return Poll::Ready(Err(Failure::Closed(CloseReason::Local)));
        };
        if let State::Waiting(waker) = &mut slot.state {
            match waker {
                Some(waker) if waker.will_wake(cx.waker()) => {}
                _ => *waker = Some(cx.waker().clone()),
            }
            return Poll::Pending;
        }
        match self.slots.remove(id).map(|slot| slot.state) {
            Some(State::Done(outcome)) => Poll::Ready(outcome),
            _ => unreachable!("the slot was found done"),
        }
    }

    /// Whether request `id` waits for its outcome (none came yet).
    pub(crate) fn is_waiting(&self, id: u32) -> bool {
        self.slots
            .get(id)
            .is_some_and(|slot| matches!(slot.state, State::Waiting(_)))
    }

    /// Frees request `id`'s slot (its caller went away). Returns whether
    /// the server may still be working on it: no answer came, and the
    /// connection was not lost.
    pub(crate) fn remove(&mut self, id: u32) -> bool {
        match self.slots.remove(id).map(|slot| slot.state) {
            Some(State::Waiting(_) | State::Done(Err(Failure::TimedOut))) => true,
            Some(State::Done(_)) | None => false,
        }
    }

    /// Ends request `id` with its answer `frame` (which came `sealed` or
    /// not) if it still waits; returns the waker to wake. A plain answer to
    /// a sealed request is not taken.
    pub(crate) fn answer(&mut self, id: u32, frame: Frame, sealed: bool) -> Answer {
        match self.slots.get_mut(id) {
            Some(slot) if matches!(slot.state, State::Waiting(_)) => {
                if slot.sealed && !sealed {
                    return Answer::PlainToSealed;
                }
                Answer::Taken(finish(slot, Ok(frame)))
            }
            _ => Answer::NotWaiting,
        }
    }

    /// Fails every waiting request with `reason` (the connection is lost);
    /// returns the wakers to wake.
    pub(crate) fn fail_all(&mut self, reason: &CloseReason) -> Vec<Waker> {
        self.wake_at = None;
        self.slots
            .values_mut()
            .filter_map(|slot| finish(slot, Err(Failure::Closed(reason.clone()))))
            .collect()
    }

    /// When the expiry task must call [`on_timeout`](Self::on_timeout)
    /// next: the earliest deadline it knows of (`None`: none waits).
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.wake_at
    }

    /// Times out the waiting requests whose deadline is `now` or earlier,
    /// returns their wakers, and moves [`next_deadline`](Self::next_deadline)
    /// to the earliest deadline left.
    pub(crate) fn on_timeout(&mut self, now: Instant) -> Vec<Waker> {
        let mut wakers = Vec::new();
        let mut next: Option<Instant> = None;
        for slot in self.slots.values_mut() {
            if !matches!(slot.state, State::Waiting(_)) {
                continue;
            }
            if slot.deadline <= now {
                wakers.extend(finish(slot, Err(Failure::TimedOut)));
            } else if next.is_none_or(|next| slot.deadline < next) {
                next = Some(slot.deadline);
            }
        }
        self.wake_at = next;
        wakers
    }
}

/// Ends `slot` with `outcome` if it waits; returns its waker.
fn finish(slot: &mut Slot, outcome: Outcome) -> Option<Waker> {
    match std::mem::replace(&mut slot.state, State::Done(outcome)) {
        State::Waiting(waker) => waker,
        done @ State::Done(_) => {
            // Ended already: the first outcome stands.
            slot.state = done;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wake_count::counting_waker;

    fn frame(id: u32) -> Frame {
        Frame {
            header: ternio_protocol::frame::Header::new(
                0x0001,
                ternio_protocol::frame::Flags::RESPONSE,
                id,
            ),
            body: ternio_protocol::Bytes::new(),
        }
    }

    #[test]
    fn an_answer_is_taken_once_and_a_plain_one_never_by_a_sealed_request() {
        let mut requests = Requests::default();
        let deadline = Instant::now() + Duration::from_secs(5);
        requests.insert(1, false, deadline, None);
        requests.insert(2, true, deadline, None);
        let (count, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(requests.poll(1, &mut cx).is_pending());

        let Answer::Taken(Some(woken)) = requests.answer(1, frame(1), false) else {
            panic!("request 1 waits, and polled");
        };
        woken.wake();
        assert_eq!(count.get(), 1);
        assert!(matches!(
            requests.answer(1, frame(1), false),
            Answer::NotWaiting
        ));
        assert!(matches!(requests.poll(1, &mut cx), Poll::Ready(Ok(_))));

        assert!(matches!(
            requests.answer(2, frame(2), false),
            Answer::PlainToSealed
        ));
        assert!(matches!(
            requests.answer(2, frame(2), true),
            Answer::Taken(None)
        ));
        assert!(matches!(
            requests.answer(3, frame(3), true),
            Answer::NotWaiting
        ));
    }

    #[test]
    fn a_request_expires_at_its_deadline_and_the_next_deadline_is_kept() {
        let start = Instant::now();
        let mut requests = Requests::default();
        assert!(requests.insert(1, false, start + Duration::from_secs(1), None));
        assert!(!requests.insert(2, false, start + Duration::from_secs(5), None));
        assert!(requests.insert(3, false, start + Duration::from_millis(500), None));
        let (count, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(requests.poll(1, &mut cx).is_pending());

        assert_eq!(
            requests.next_deadline(),
            Some(start + Duration::from_millis(500))
        );
        // Called early, it times nothing out.
        assert!(requests.on_timeout(start).is_empty());
        assert_eq!(
            requests.next_deadline(),
            Some(start + Duration::from_millis(500))
        );

        let wakers = requests.on_timeout(start + Duration::from_secs(1));
        assert_eq!(wakers.len(), 1, "request 1 had polled, request 3 had not");
        wakers.into_iter().for_each(Waker::wake);
        assert_eq!(count.get(), 1);
        assert_eq!(
            requests.next_deadline(),
            Some(start + Duration::from_secs(5))
        );
        assert!(matches!(
            requests.poll(1, &mut cx),
            Poll::Ready(Err(Failure::TimedOut))
        ));
        assert!(matches!(
            requests.poll(3, &mut cx),
            Poll::Ready(Err(Failure::TimedOut))
        ));
        assert_eq!(requests.len(), 1);
        assert!(requests.contains(2));
    }

    #[test]
    fn ids_skip_zero_and_the_ids_still_waiting() {
        let mut requests = Requests::default();
        let deadline = Instant::now();
        assert_eq!(requests.free_id(), 1);
        requests.insert(2, false, deadline, None);
        assert_eq!(requests.free_id(), 3);
        requests.next_id = u32::MAX;
        requests.insert(1, false, deadline, None);
        assert_eq!(requests.free_id(), u32::MAX);
        // Past the wrap: not 0, not 1 nor 2 (waiting).
        assert_eq!(requests.free_id(), 3);
    }

    #[test]
    fn the_first_outcome_stands() {
        let mut requests = Requests::default();
        requests.insert(7, true, Instant::now(), None);
        let reason = CloseReason::PeerClosed;
        assert!(requests.fail_all(&reason).is_empty(), "nobody polled yet");
        // An answer that comes after the loss does not replace its outcome.
        assert!(matches!(
            requests.answer(7, frame(7), true),
            Answer::NotWaiting
        ));
        let (_, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(matches!(
            requests.poll(7, &mut cx),
            Poll::Ready(Err(Failure::Closed(CloseReason::PeerClosed)))
        ));
        assert_eq!(requests.len(), 0);
    }
}
