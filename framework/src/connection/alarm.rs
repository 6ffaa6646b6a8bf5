//! The one tokio timer of a connection, set to the next deadline of its
//! [`Timers`](super::timers::Timers).
//!
//! It is set again only when it went off or when a deadline comes sooner
//! than the one it is set for: input, which moves the idle deadlines later,
//! costs nothing here.

use std::future::Future;
use std::pin::Pin;
use std::task::Context as TaskContext;
use std::time::Duration;

use tokio::time::{Instant, Sleep};

/// How far off the alarm is set when no deadline is pending.
const PARKED: Duration = Duration::from_secs(365 * 24 * 3600);

/// A connection's timer.
pub(super) struct Alarm {
    sleep: Pin<Box<Sleep>>,
    /// The deadline it is set for; `None` when parked.
    at: Option<Instant>,
    /// Whether it was polled since it was last set: its waker is
    /// registered, so until it goes off there is no need to poll it again.
    polled: bool,
}

impl Alarm {
    /// An alarm set for `at` (parked when `None`).
    pub(super) fn new(at: Option<Instant>) -> Self {
        Self {
            sleep: Box::pin(tokio::time::sleep_until(
                at.unwrap_or_else(|| Instant::now() + PARKED),
            )),
            at,
            polled: false,
        }
    }

    /// Sets the alarm for `at` (parks it when `None`).
    pub(super) fn set(&mut self, at: Option<Instant>) {
        let when = at.unwrap_or_else(|| Instant::now() + PARKED);
        self.sleep.as_mut().reset(when);
        self.at = at;
        self.polled = false;
    }

    /// Sets the alarm for `at` if that comes before the time it is set for.
    pub(super) fn set_if_sooner(&mut self, at: Option<Instant>) {
        if let Some(at) = at
            && self.at.is_none_or(|set| at < set)
        {
            self.set(Some(at));
        }
    }

    /// Whether the alarm went off; if not, the task's waker is registered.
    pub(super) fn poll_due(&mut self, cx: &mut TaskContext<'_>) -> bool {
        if self.polled && !self.sleep.is_elapsed() {
            return false;
        }
        self.polled = true;
        self.sleep.as_mut().poll(cx).is_ready()
    }
}
