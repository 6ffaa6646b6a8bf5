//! The keepalive of one link, when [`ClientConfig::keepalive`] is set: a
//! `PING` when the server has been silent for the interval, and the link
//! declared lost when the server stays silent for the timeout after it (the
//! rules are on [`Keepalive`]).
//!
//! The reader only counts its reads (no clock read on the hot path). The
//! rules are a state machine, [`Watch`], driven by the time and the count
//! passed in; the link's keepalive task owns the one sleep, until
//! [`Watch::next_deadline`]. The watch looks at the count every half
//! interval: a count unchanged since the look that first saw it means
//! silence since that look at least, so the `PING` follows between one and
//! one and a half intervals of silence.
//!
//! [`ClientConfig::keepalive`]: crate::ClientConfig::keepalive

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::config::Keepalive;
use crate::error::CloseReason;
use crate::keeper;
use crate::link::Link;
use crate::send::SendError;
use crate::shared::Shared;

/// Where a watch stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Looking at the read count every half interval; the next look.
    Looking(Instant),
    /// A `PING` went out at this time; something must come within the timeout.
    Pinged(Instant),
}

/// What the keepalive task does after [`Watch::on_timeout`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// Nothing: sleep until the next deadline.
    Wait,
    /// Send a `PING` now.
    Ping,
    /// The server stayed silent after the `PING`: the link is lost.
    Lost(CloseReason),
}

/// The keepalive rules for one link, with time passed in.
#[derive(Debug)]
pub(crate) struct Watch {
    interval: Duration,
    timeout: Duration,
    /// The read count last seen, and the look that first saw it: nothing
    /// came since then.
    seen: u64,
    quiet_since: Instant,
    phase: Phase,
}

impl Watch {
    /// Starts watching at `now`, when the link's read count is `reads`.
    pub(crate) fn new(keepalive: Keepalive, reads: u64, now: Instant) -> Self {
        let interval = keepalive.interval();
        Self {
            interval,
            timeout: keepalive.timeout(),
            seen: reads,
            quiet_since: now,
            phase: Phase::Looking(now + interval / 2),
        }
    }

    /// When [`on_timeout`](Self::on_timeout) must be called next.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        Some(match self.phase {
            Phase::Looking(next_look) => next_look,
            Phase::Pinged(sent) => sent + self.timeout,
        })
    }

    /// Looks at the read count `reads` at `now` (early calls do nothing).
    pub(crate) fn on_timeout(&mut self, now: Instant, reads: u64) -> Action {
        match self.phase {
            Phase::Looking(next_look) if now >= next_look => {
                self.phase = Phase::Looking(next_look + self.interval / 2);
                if reads != self.seen {
                    (self.seen, self.quiet_since) = (reads, now);
                    return Action::Wait;
                }
                if now.saturating_duration_since(self.quiet_since) < self.interval {
                    return Action::Wait;
                }
                self.phase = Phase::Pinged(now);
                Action::Ping
            }
            Phase::Pinged(sent) if now >= sent + self.timeout => {
                if reads == self.seen {
                    return Action::Lost(CloseReason::KeepaliveTimeout {
                        interval: self.interval,
                        timeout: self.timeout,
                    });
                }
                self.restart(now, reads);
                Action::Wait
            }
            Phase::Looking(_) | Phase::Pinged(_) => Action::Wait,
        }
    }

    /// Watches from `now` again, as if the link had just opened with read
    /// count `reads`: after a `PING` that could not go out while a
    /// handshake waited for its answer (whose own timeout bounds that wait).
    pub(crate) fn restart(&mut self, now: Instant, reads: u64) {
        (self.seen, self.quiet_since) = (reads, now);
        self.phase = Phase::Looking(now + self.interval / 2);
    }
}

/// Starts `link`'s keepalive task, if the client has a keepalive.
pub(crate) fn spawn(shared: &Arc<Shared>, link: &Arc<Link>) -> Option<JoinHandle<()>> {
    let keepalive = shared.config().keepalive?;
    Some(tokio::spawn(run(
        Arc::clone(shared),
        Arc::clone(link),
        keepalive,
    )))
}

/// Watches `link` until it is lost: the one sleep of its keepalive.
async fn run(shared: Arc<Shared>, link: Arc<Link>, keepalive: Keepalive) {
    let mut watch = Watch::new(keepalive, link.reads(), Instant::now());
    while let Some(deadline) = watch.next_deadline() {
        keeper::sleep_until(deadline).await;
        if link.lost_reason().is_some() {
            return;
        }
        match watch.on_timeout(Instant::now(), link.reads()) {
            Action::Wait => {}
            Action::Ping => match shared.keepalive_ping(&link) {
                Ok(()) => {}
                // The handshake's own timeout bounds its wait: look again after it.
                Err(SendError::Handshaking) => {
                    let mut handshaking = link.handshaking();
                    let _ = handshaking.wait_for(|waiting| !*waiting).await;
                    watch.restart(Instant::now(), link.reads());
                }
                // Nothing may go out plain on this link: it has no keepalive.
                Err(SendError::NotSecure) => return,
                Err(SendError::Lost(reason)) => {
                    shared.lose(&link, reason);
                    return;
                }
                Err(SendError::Gone | SendError::TooLarge(_)) => return,
            },
            Action::Lost(reason) => {
                tracing::debug!(%reason, "the server stayed silent after a PING");
                shared.lose(&link, reason);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn watch(start: Instant) -> Watch {
        let keepalive = Keepalive::new(100 * MS, 40 * MS);
        Watch::new(keepalive, 0, start)
    }

    /// Runs `watch` from deadline to deadline with the read count `reads`
    /// gives for each time, until an action other than `Wait`.
    fn run_until_action(watch: &mut Watch, reads: impl Fn(Instant) -> u64) -> (Instant, Action) {
        loop {
            let at = watch.next_deadline().expect("a deadline");
            match watch.on_timeout(at, reads(at)) {
                Action::Wait => {}
                action => return (at, action),
            }
        }
    }

    #[test]
    fn silence_brings_a_ping_then_the_loss() {
        let start = Instant::now();
        let mut watch = watch(start);
        let (at, action) = run_until_action(&mut watch, |_| 0);
        assert_eq!((at - start, action), (100 * MS, Action::Ping));
        let (at, action) = run_until_action(&mut watch, |_| 0);
        assert_eq!(at - start, 140 * MS);
        assert_eq!(
            action,
            Action::Lost(CloseReason::KeepaliveTimeout {
                interval: 100 * MS,
                timeout: 40 * MS,
            })
        );
    }

    #[test]
    fn the_ping_follows_one_to_one_and_a_half_intervals_of_silence() {
        let start = Instant::now();
        let mut watch = watch(start);
        // Bytes came until 60 ms, seen at the look of 100 ms: silent since
        // then, so the PING goes at 200 ms.
        let (at, action) = run_until_action(&mut watch, |at| u64::from(at - start >= 60 * MS));
        assert_eq!((at - start, action), (200 * MS, Action::Ping));
    }

    #[test]
    fn an_answer_to_the_ping_goes_back_to_looking() {
        let start = Instant::now();
        let mut watch = watch(start);
        run_until_action(&mut watch, |_| 0);
        // Something came after the PING (at 100 ms): at 140 ms all is well.
        assert_eq!(watch.on_timeout(start + 140 * MS, 1), Action::Wait);
        assert_eq!(watch.next_deadline(), Some(start + 190 * MS));
        let (at, action) = run_until_action(&mut watch, |_| 1);
        assert_eq!((at - start, action), (240 * MS, Action::Ping));
    }

    #[test]
    fn reads_keep_the_ping_away_and_early_calls_do_nothing() {
        let start = Instant::now();
        let mut watch = watch(start);
        assert_eq!(watch.on_timeout(start + 10 * MS, 0), Action::Wait);
        assert_eq!(watch.next_deadline(), Some(start + 50 * MS));
        for look in 1..100u32 {
            let at = watch.next_deadline().unwrap();
            assert_eq!(watch.on_timeout(at, u64::from(look)), Action::Wait);
        }
        // A handshake held the PING back: watching starts again after it.
        watch.restart(start + 10_000 * MS, 7);
        assert_eq!(watch.next_deadline(), Some(start + 10_050 * MS));
    }
}
