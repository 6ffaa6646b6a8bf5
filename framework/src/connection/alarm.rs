//! The one tokio timer of a connection, set to the next deadline of its
//! [`Timers`](super::timers::Timers).
//!
//! It is set again only when it went off or when a deadline comes sooner
//! than the one it is set for: input, which moves the idle deadlines later,
//! costs nothing here.
//!
//! Its sleep comes from [`keeper`](crate::keeper): on tokio's
//! multi-thread runtime it lives on a timer thread of its own.

use std::future::Future;
use std::pin::Pin;
use std::task::Context as TaskContext;
use std::time::Duration;

use tokio::time::{Instant, Sleep};

use crate::keeper::sleep_until;

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
            sleep: Box::pin(sleep_until(at.unwrap_or_else(|| Instant::now() + PARKED))),
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

#[cfg(test)]
mod tests {
    use std::task::Poll;

    use super::*;

    /// Waits until `alarm` goes off.
    async fn gone_off(alarm: &mut Alarm) {
        std::future::poll_fn(|cx| {
            if alarm.poll_due(cx) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }

    #[test]
    fn on_a_multi_thread_runtime_the_alarm_is_kept_off_it() {
        let multi = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let started = Instant::now();
        let mut alarm =
            multi.block_on(async { Alarm::new(Some(Instant::now() + Duration::from_millis(20))) });
        // Its runtime is gone: a sleep of that runtime's timer would panic
        // when polled now; one the keeper holds goes off.
        drop(multi);
        let other = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        other.block_on(gone_off(&mut alarm));
        assert!(started.elapsed() >= Duration::from_millis(20));
    }

    #[tokio::test(start_paused = true)]
    async fn on_a_current_thread_runtime_the_alarm_follows_its_paused_clock() {
        let mut alarm = Alarm::new(Some(Instant::now() + Duration::from_secs(3600)));
        let started = std::time::Instant::now();
        tokio::time::advance(Duration::from_secs(3600)).await;
        // Kept by the keeper, it would not follow this clock: the timeout
        // (on the paused clock) fails the test instead of letting it hang.
        tokio::time::timeout(Duration::from_secs(60), gone_off(&mut alarm))
            .await
            .expect("the alarm follows the paused clock");
        assert!(started.elapsed() < Duration::from_secs(60));
    }
}
