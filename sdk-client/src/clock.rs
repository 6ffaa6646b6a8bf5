//! The clock estimate of time sync (docs/PROTOCOL.md section 4.3): NTP's
//! offset and round trip of each `TIME` exchange, and NTP's clock filter
//! over the last [`WINDOW`] samples (the one with the smallest round trip
//! wins). The exchanges themselves are in `time_sync`.
//!
//! The client's own times (`t0` when a request leaves, `t3` when its answer
//! arrives) come from a monotonic clock placed on the wall clock by one
//! reading taken when the client starts ([`LocalClock`]): a step of the
//! local wall clock during an exchange does not make a sample wrong, and
//! [`Client::server_time`](crate::Client::server_time) reads the same
//! timeline. A monotonic clock stops while the device sleeps (Linux,
//! Android, Apple): when the wall clock has moved more than [`ANCHOR_DRIFT`]
//! away from it, the clock is placed on the wall clock again and the
//! samples, on the old timeline, are forgotten.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use ternio_protocol::system::TimeResponse;

use crate::sync::lock;

/// How many samples the filter keeps.
pub(crate) const WINDOW: usize = 8;

/// How far the wall clock may move away from the monotonic one before the
/// client's clock is anchored again (a suspended device, or a step of the
/// wall clock).
pub(crate) const ANCHOR_DRIFT: Duration = Duration::from_secs(1);

/// What the client knows of the server's clock, from
/// [`Client::clock_estimate`](crate::Client::clock_estimate) and
/// [`Client::sync_clock`](crate::Client::sync_clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClockEstimate {
    /// What to add to the client's clock to read the server's, in
    /// microseconds: positive when the server's clock is ahead. It is off
    /// by at most half of [`round_trip`](Self::round_trip) (exactly when
    /// both directions take as long), by half the difference of the two
    /// directions' times in general.
    pub offset_micros: i64,
    /// The round trip of the sample used (the smallest of the window), the
    /// server's own time subtracted.
    pub round_trip: Duration,
    /// How many samples the filter holds (at most 8).
    pub samples: usize,
}

impl ClockEstimate {
    /// The offset as a duration and a sign: `(true, d)` when the server's
    /// clock is `d` ahead of the client's, `(false, d)` when it is behind.
    pub fn offset(&self) -> (bool, Duration) {
        (
            self.offset_micros >= 0,
            Duration::from_micros(self.offset_micros.unsigned_abs()),
        )
    }

    /// The server's time when the client's clock reads `local`; `None`
    /// when that falls outside what `SystemTime` can hold (an absurd
    /// offset).
    pub fn server_time_at(&self, local: SystemTime) -> Option<SystemTime> {
        match self.offset() {
            (true, ahead) => local.checked_add(ahead),
            (false, behind) => local.checked_sub(behind),
        }
    }
}

/// One exchange's result, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sample {
    pub(crate) offset: i64,
    pub(crate) delay: i64,
}

impl Sample {
    /// NTP's formulas: `t0` the request left, `t1` the server read it, `t2`
    /// the server answered, `t3` the answer arrived (µs; `t0` and `t3` on
    /// the client's clock, `t1` and `t2` on the server's). `None` for an
    /// impossible sample: the server answering before it read the request,
    /// or claiming to have held it longer than the whole round trip the
    /// client saw (a step of its clock, or a lie). Such a sample would have
    /// a negative round trip and win the filter.
    pub(crate) fn new(t0: u64, t1: u64, t2: u64, t3: u64) -> Option<Self> {
        if t3 < t0 || t2 < t1 || t2 - t1 > t3 - t0 {
            return None;
        }
        let (t0, t1, t2, t3) = (
            i128::from(t0),
            i128::from(t1),
            i128::from(t2),
            i128::from(t3),
        );
        let offset = ((t1 - t0) + (t2 - t3)) / 2;
        let delay = (t3 - t0) - (t2 - t1);
        let clamp = |value: i128| value.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
        Some(Self {
            offset: clamp(offset),
            delay: clamp(delay),
        })
    }
}

/// NTP's clock filter: the last [`WINDOW`] samples, of which the one with
/// the smallest round trip is used (a sample delayed one way, the biased
/// kind, is also a slow one).
#[derive(Debug, Default)]
pub(crate) struct ClockFilter {
    samples: VecDeque<Sample>,
}

impl ClockFilter {
    /// Adds a sample, forgetting the oldest past [`WINDOW`].
    pub(crate) fn add(&mut self, sample: Sample) {
        if self.samples.len() == WINDOW {
            self.samples.pop_front();
        }
        self.samples.push_back(sample);
    }

    /// Forgets every sample.
    pub(crate) fn clear(&mut self) {
        self.samples.clear();
    }

    /// The estimate from the sample with the smallest round trip (the most
    /// recent of equals), or `None` before any sample.
    pub(crate) fn estimate(&self) -> Option<ClockEstimate> {
        let best = self
            .samples
            .iter()
            .rev()
            .min_by_key(|sample| sample.delay)?;
        Some(ClockEstimate {
            offset_micros: best.offset,
            round_trip: Duration::from_micros(best.delay.unsigned_abs()),
            samples: self.samples.len(),
        })
    }
}

/// The client's clock: the wall clock read once, then moved on by a
/// monotonic clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LocalClock {
    wall: SystemTime,
    start: Instant,
}

impl LocalClock {
    pub(crate) fn new() -> Self {
        Self {
            wall: SystemTime::now(),
            start: Instant::now(),
        }
    }

    /// The wall time at `instant` (not before the start).
    pub(crate) fn at(&self, instant: Instant) -> SystemTime {
        self.wall + instant.saturating_duration_since(self.start)
    }

    /// Whether the wall clock reads `wall` more than [`ANCHOR_DRIFT`] away
    /// from this clock at `instant`.
    fn drifted(&self, instant: Instant, wall: SystemTime) -> bool {
        let here = self.at(instant);
        let apart = wall
            .duration_since(here)
            .or_else(|_| here.duration_since(wall))
            .unwrap_or_default();
        apart > ANCHOR_DRIFT
    }

    /// [`at`](Self::at) in microseconds since the Unix epoch.
    pub(crate) fn micros_at(&self, instant: Instant) -> u64 {
        TimeResponse::micros(self.at(instant))
    }
}

/// The client's clock and what it knows of the server's.
#[derive(Debug)]
pub(crate) struct Clock {
    inner: Mutex<(LocalClock, ClockFilter)>,
}

impl Clock {
    pub(crate) fn new() -> Self {
        Self {
            inner: Mutex::new((LocalClock::new(), ClockFilter::default())),
        }
    }

    /// The estimate so far.
    pub(crate) fn estimate(&self) -> Option<ClockEstimate> {
        lock(&self.inner).1.estimate()
    }

    /// The server's time now, by the estimate (`None` once the device's
    /// sleep or a step of its wall clock made the samples stale).
    pub(crate) fn server_time(&self) -> Option<SystemTime> {
        let local = self.local();
        let estimate = self.estimate()?;
        estimate.server_time_at(local.at(Instant::now()))
    }

    /// The client's clock, anchored again first if the wall clock moved
    /// away from it (see the module's doc).
    pub(crate) fn local(&self) -> LocalClock {
        self.local_at(Instant::now(), SystemTime::now())
    }

    fn local_at(&self, instant: Instant, wall: SystemTime) -> LocalClock {
        let mut inner = lock(&self.inner);
        if inner.0.drifted(instant, wall) {
            tracing::debug!(
                "the wall clock moved away from the monotonic one: clock samples forgotten"
            );
            *inner = (
                LocalClock {
                    wall,
                    start: instant,
                },
                ClockFilter::default(),
            );
        }
        inner.0
    }

    /// Adds a sample to the filter.
    pub(crate) fn add(&self, sample: Sample) {
        lock(&self.inner).1.add(sample);
    }

    /// Forgets the samples (a new session: perhaps another server).
    pub(crate) fn forget(&self) {
        lock(&self.inner).1.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    #[test]
    fn ntp_formulas() {
        // The server 5 s ahead, 20 ms each way, 1 ms in the server.
        let t0 = 1_000_000_000;
        let t1 = t0 + 5_000_000 + 20_000;
        let t2 = t1 + 1_000;
        let t3 = t0 + 20_000 + 1_000 + 20_000;
        let sample = Sample::new(t0, t1, t2, t3);
        assert_eq!(
            sample,
            Some(Sample {
                offset: 5_000_000,
                delay: 40_000
            })
        );
        // Behind: the sign flips, the delay does not.
        let sample = Sample::new(t0, t0 - 3_000_000 + 10, t0 - 3_000_000 + 10, t0 + 20);
        assert_eq!(
            sample,
            Some(Sample {
                offset: -3_000_000,
                delay: 20
            })
        );
        // Asymmetric: 30 ms up, 10 ms down, clocks equal: off by (up - down) / 2 = +10 ms.
        let sample = Sample::new(t0, t0 + 30_000, t0 + 30_000, t0 + 40_000);
        assert_eq!(
            sample,
            Some(Sample {
                offset: 10_000,
                delay: 40_000
            })
        );
        // Impossible samples are refused: the server held the request
        // longer than the round trip (it would win the filter with a
        // negative delay), answered before reading it, or the answer came
        // before the request left.
        assert_eq!(Sample::new(10, 0, 20, 11), None);
        assert_eq!(Sample::new(10, 0, 3_600_000_000, 40_010), None);
        assert_eq!(Sample::new(10, 20, 19, 40), None);
        assert_eq!(Sample::new(10, 20, 20, 9), None);
        // A server that held it exactly the round trip: delay 0, kept.
        assert_eq!(Sample::new(10, 100, 130, 40).map(|s| s.delay), Some(0));
        // Extremes do not overflow.
        let sample = Sample::new(0, u64::MAX, u64::MAX, 0).unwrap();
        assert_eq!(sample.offset, i64::MAX);
        let estimate = ClockEstimate {
            offset_micros: i64::MAX,
            round_trip: Duration::ZERO,
            samples: 1,
        };
        // Far beyond what SystemTime holds on some platforms: None, no panic.
        let _ = estimate.server_time_at(SystemTime::now());
    }

    #[test]
    fn the_filter_takes_the_fastest_of_the_last_eight() {
        let mut filter = ClockFilter::default();
        assert_eq!(filter.estimate(), None);
        filter.add(Sample {
            offset: 100,
            delay: 50,
        });
        filter.add(Sample {
            offset: 900,
            delay: 400,
        }); // an outlier, delayed one way
        filter.add(Sample {
            offset: 110,
            delay: 60,
        });
        let estimate = filter.estimate().unwrap();
        assert_eq!(
            (
                estimate.offset_micros,
                estimate.round_trip,
                estimate.samples
            ),
            (100, Duration::from_micros(50), 3)
        );
        // Eight more push the fastest out: the best of what is left wins.
        for delay in 70..78 {
            filter.add(Sample {
                offset: delay,
                delay,
            });
        }
        let estimate = filter.estimate().unwrap();
        assert_eq!((estimate.offset_micros, estimate.samples), (70, WINDOW));
        // Equal delays: the most recent.
        filter.add(Sample {
            offset: -5,
            delay: 70,
        });
        assert_eq!(filter.estimate().unwrap().offset_micros, -5);
    }

    #[test]
    fn an_estimate_reads_the_servers_time() {
        let local = UNIX_EPOCH + Duration::from_secs(1_000);
        let ahead = ClockEstimate {
            offset_micros: 2_500_000,
            round_trip: Duration::ZERO,
            samples: 1,
        };
        assert_eq!(ahead.offset(), (true, Duration::from_millis(2_500)));
        assert_eq!(
            ahead.server_time_at(local),
            Some(local + Duration::from_millis(2_500))
        );
        let behind = ClockEstimate {
            offset_micros: -1_000,
            ..ahead
        };
        assert_eq!(behind.offset(), (false, Duration::from_millis(1)));
        assert_eq!(
            behind.server_time_at(local),
            Some(local - Duration::from_millis(1))
        );
    }

    #[test]
    fn the_local_clock_follows_the_monotonic_clock() {
        let clock = LocalClock::new();
        let later = clock.start + Duration::from_millis(1_500);
        assert_eq!(clock.at(later), clock.wall + Duration::from_millis(1_500));
        assert_eq!(
            clock.micros_at(later) - clock.micros_at(clock.start),
            1_500_000
        );
        // Before the start: the start.
        let before = clock.start.checked_sub(Duration::from_secs(1));
        if let Some(before) = before {
            assert_eq!(clock.at(before), clock.wall);
        }
    }

    #[test]
    fn a_wall_clock_that_moved_away_anchors_the_clock_again_and_forgets_the_samples() {
        let clock = Clock::new();
        let anchor = clock.local();
        clock.add(Sample {
            offset: 5,
            delay: 10,
        });
        // Half a second of drift (NTP slewing, a slow read): kept.
        let instant = anchor.start + Duration::from_secs(10);
        let wall = anchor.wall + Duration::from_millis(10_500);
        assert_eq!(clock.local_at(instant, wall).wall, anchor.wall);
        assert!(clock.estimate().is_some());
        // The device slept for a minute: the monotonic clock did not count
        // it. Anchored on the wall clock again; the samples are gone.
        let wall = anchor.wall + Duration::from_secs(70);
        let again = clock.local_at(instant, wall);
        assert_eq!(again.at(instant), wall);
        assert_eq!(clock.estimate(), None);
        // A wall clock stepped back: the same.
        clock.add(Sample {
            offset: 5,
            delay: 10,
        });
        let stepped = wall - Duration::from_secs(5);
        assert_eq!(clock.local_at(instant, stepped).at(instant), stepped);
        assert_eq!(clock.estimate(), None);
    }

    #[test]
    fn forgetting_clears_the_estimate() {
        let clock = Clock::new();
        clock.add(Sample {
            offset: 5,
            delay: 10,
        });
        clock.forget();
        assert_eq!(clock.estimate(), None);
    }
}
