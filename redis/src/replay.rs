//! What makes a replayed envelope detectable: the stamps a publisher puts on
//! its envelopes ([`Stamper`]) and the receiver's record of the highest
//! stamp seen per publisher ([`ReplayGuard`]).
//!
//! **Stamps.** A process draws a random 64-bit *instance* id when its
//! backplane starts; its *sequence* is the wall clock in microseconds since
//! the Unix epoch, or one more than the last when the clock has not moved
//! on (or went back). So a sequence only grows within an instance, a node
//! that restarts (same node id, new instance) is not held back by what its
//! previous life sent, and a sequence says when, give or take the clocks'
//! skew, its envelope was published.
//!
//! **The guard** accepts an authentic envelope only if its sequence is
//! above the highest seen from its `(node, instance)`, and within the
//! window (`RedisConfig::max_message_age`) of the receiver's clock, either
//! way. One publisher's envelopes reach a subscriber in the order they were
//! published (one connection each way, one Redis), so a genuine envelope is
//! never below the highest. The window bounds what a receiver must
//! remember: a record whose highest sequence left the window is forgotten,
//! since anything at or below it is out of the window too. And the table
//! holds at most a fixed number of publishers; one more, when none can be
//! forgotten, is refused.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::counters::Rejection;
use crate::envelope::Stamp;

/// The most publishers (node, instance) a guard tracks at once: far more
/// than the live nodes plus the restarts of one window.
pub(crate) const MAX_PUBLISHERS: usize = 16_384;

/// Microseconds since the Unix epoch, by this machine's clock.
pub(crate) fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_micros() as u64)
}

/// Stamps the envelopes one process publishes.
#[derive(Debug)]
pub(crate) struct Stamper {
    origin: u16,
    instance: u64,
    last: u64,
}

impl Stamper {
    /// Stamps for node `origin`, under a new random instance id.
    pub(crate) fn new(origin: u16) -> Self {
        Self {
            origin,
            instance: rand::random(),
            last: 0,
        }
    }

    /// The next stamp, at `now` (µs since the epoch).
    pub(crate) fn next(&mut self, now: u64) -> Stamp {
        self.last = self.last.saturating_add(1).max(now);
        Stamp {
            origin: self.origin,
            instance: self.instance,
            sequence: self.last,
        }
    }
}

/// The highest sequence seen per publisher, within a window of time.
#[derive(Debug)]
pub(crate) struct ReplayGuard {
    window: u64,
    capacity: usize,
    highest: HashMap<(u16, u64), u64>,
}

impl ReplayGuard {
    /// A guard that refuses stamps more than `window` away from its clock,
    /// tracking at most `capacity` publishers.
    pub(crate) fn new(window: Duration, capacity: usize) -> Self {
        Self {
            window: window.as_micros().min(u128::from(u64::MAX)) as u64,
            capacity,
            highest: HashMap::new(),
        }
    }

    /// Accepts `stamp` (of an authentic envelope) at `now` (µs since the
    /// epoch), and records it; or says why not.
    pub(crate) fn check(&mut self, stamp: Stamp, now: u64) -> Result<(), Rejection> {
        let oldest = now.saturating_sub(self.window);
        if stamp.sequence < oldest || stamp.sequence > now.saturating_add(self.window) {
            return Err(Rejection::Stale);
        }
        let publisher = (stamp.origin, stamp.instance);
        if let Some(highest) = self.highest.get_mut(&publisher) {
            if stamp.sequence <= *highest {
                return Err(Rejection::Replayed);
            }
            *highest = stamp.sequence;
            return Ok(());
        }
        if self.highest.len() >= self.capacity {
            self.highest.retain(|_, highest| *highest >= oldest);
            if self.highest.len() >= self.capacity {
                return Err(Rejection::Overflow);
            }
        }
        self.highest.insert(publisher, stamp.sequence);
        Ok(())
    }

    /// How many publishers it tracks now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.highest.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000;
    const NOW: u64 = 1_800_000_000 * SECOND;

    fn stamp(origin: u16, instance: u64, sequence: u64) -> Stamp {
        Stamp {
            origin,
            instance,
            sequence,
        }
    }

    #[test]
    fn stamps_grow_even_when_the_clock_does_not() {
        let mut stamper = Stamper::new(7);
        let first = stamper.next(NOW);
        assert_eq!((first.origin, first.sequence), (7, NOW));
        assert_eq!(stamper.next(NOW).sequence, NOW + 1);
        // The clock went back: still one more.
        assert_eq!(stamper.next(NOW - SECOND).sequence, NOW + 2);
        assert_eq!(stamper.next(NOW + SECOND).sequence, NOW + SECOND);
        assert_eq!(stamper.next(NOW).instance, first.instance);
        // Another start, another instance (by a 2^-64 chance the same).
        assert_ne!(Stamper::new(7).instance, first.instance);
    }

    #[test]
    fn a_sequence_is_accepted_once_and_in_order() {
        let mut guard = ReplayGuard::new(Duration::from_secs(30), 100);
        assert_eq!(guard.check(stamp(1, 9, NOW), NOW), Ok(()));
        assert_eq!(guard.check(stamp(1, 9, NOW), NOW), Err(Rejection::Replayed));
        assert_eq!(guard.check(stamp(1, 9, NOW + 5), NOW), Ok(()));
        assert_eq!(
            guard.check(stamp(1, 9, NOW + 3), NOW),
            Err(Rejection::Replayed)
        );
        // Another node, or the same node restarted: a record of its own.
        assert_eq!(guard.check(stamp(2, 9, NOW), NOW), Ok(()));
        assert_eq!(guard.check(stamp(1, 10, NOW - SECOND), NOW), Ok(()));
    }

    #[test]
    fn stamps_out_of_the_window_are_stale() {
        let mut guard = ReplayGuard::new(Duration::from_secs(30), 100);
        let window = 30 * SECOND;
        assert_eq!(
            guard.check(stamp(1, 9, NOW - window - 1), NOW),
            Err(Rejection::Stale)
        );
        assert_eq!(
            guard.check(stamp(1, 9, NOW + window + 1), NOW),
            Err(Rejection::Stale)
        );
        assert_eq!(guard.check(stamp(1, 9, NOW - window), NOW), Ok(()));
        assert_eq!(guard.check(stamp(1, 9, NOW + window), NOW), Ok(()));
        assert_eq!(guard.len(), 1);
    }

    #[test]
    fn the_table_is_bounded_and_forgets_only_what_left_the_window() {
        let mut guard = ReplayGuard::new(Duration::from_secs(30), 3);
        for instance in 0..3 {
            assert_eq!(guard.check(stamp(1, instance, NOW), NOW), Ok(()));
        }
        // Full of live publishers: a fourth is refused, none is forgotten.
        assert_eq!(guard.check(stamp(1, 3, NOW), NOW), Err(Rejection::Overflow));
        assert_eq!(guard.len(), 3);
        // Once instance 0 fell silent for a window, its record goes...
        let later = NOW + 31 * SECOND;
        assert_eq!(guard.check(stamp(1, 1, later), later), Ok(()));
        assert_eq!(guard.check(stamp(1, 2, later), later), Ok(()));
        assert_eq!(guard.check(stamp(1, 3, later), later), Ok(()));
        assert_eq!(guard.len(), 3);
        // ...and what it had accepted is still refused: out of the window.
        assert_eq!(
            guard.check(stamp(1, 0, NOW + 1), later),
            Err(Rejection::Stale)
        );
    }
}
