//! A connection's deadlines as plain times: the engine asks when the next
//! one is due ([`Timers::next_deadline`]) and, once it is, tells them the
//! time ([`Timers::on_timeout`]). No tokio timer lives here, so every rule
//! is tested with times made up by the test.
//!
//! The deadlines: the quiet period after which buffers go back, the PING
//! halfway through the idle timeout and `IDLE_TIMEOUT` at its end; the
//! frame timeout of an unfinished frame; the write timeout's spans while
//! bytes wait; the handshake a server that requires encryption waits for;
//! and the grace a closing connection gives its running requests.

use std::time::Duration;

use ternio_protocol::DisconnectReason;
use tokio::time::Instant;

use crate::close::CloseNotice;
use crate::config::ServerConfig;

/// How long a connection goes without input before it gives its buffers back.
pub(crate) const QUIET_AFTER: Duration = Duration::from_secs(1);

/// What came due.
#[derive(Debug)]
pub(crate) enum Due {
    /// Quiet for [`QUIET_AFTER`]: the buffers go back.
    Quiet,
    /// Halfway through the idle timeout: a PING goes out, carrying how long
    /// the connection has been quiet.
    Ping(Duration),
    /// The connection closes with this notice now.
    Close(CloseNotice),
    /// The close grace ran out: the close goes ahead with requests running.
    GraceOver,
    /// An `ACK` of the frames received is due (resumption).
    Ack,
}

/// The limits the deadlines follow (from the server's configuration).
#[derive(Clone, Copy, Debug)]
struct Limits {
    idle_timeout: Option<Duration>,
    frame_timeout: Duration,
    write_timeout: Duration,
    min_drain_rate: usize,
    shutdown_grace: Duration,
}

/// A span of the write timeout, open while bytes wait.
#[derive(Debug)]
struct Span {
    ends: Instant,
    /// Bytes written since the span began.
    drained: usize,
    /// Bytes waiting when the span began.
    queued_at_start: usize,
    /// Whether bytes waited after the last write.
    waiting: bool,
}

/// Every deadline of one connection.
#[derive(Debug)]
pub(crate) struct Timers {
    limits: Limits,
    last_inbound: Instant,
    /// Whether the buffers went back since the peer last sent anything.
    quiet: bool,
    /// Whether a PING went out since the peer last sent anything.
    pinged: bool,
    /// When the unfinished frame waiting must be whole.
    frame: Option<Instant>,
    /// When the handshake must have run, on a server that requires one.
    handshake: Option<Instant>,
    /// When a graceful close stops waiting for the running requests.
    grace: Option<Instant>,
    stall: Option<Span>,
    /// When the next `ACK` is due, on a resumable session.
    ack: Option<Instant>,
}

impl Timers {
    /// The deadlines of a connection opened at `now`.
    pub(crate) fn new(config: &ServerConfig, now: Instant) -> Self {
        Self {
            limits: Limits {
                idle_timeout: config.idle_timeout,
                frame_timeout: config.frame_timeout,
                write_timeout: config.write_timeout,
                min_drain_rate: config.min_drain_rate,
                shutdown_grace: config.shutdown_grace,
            },
            last_inbound: now,
            quiet: false,
            pinged: false,
            frame: None,
            handshake: config
                .require_encryption
                .then(|| now.checked_add(config.handshake_timeout))
                .flatten(),
            grace: None,
            stall: None,
            ack: None,
        }
    }

    /// When the next deadline is due, if any. (Input does not move it: a
    /// deadline that comes due after input finds nothing to do, and the
    /// next one is asked for then.)
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let quiet = (!self.quiet).then(|| self.last_inbound + QUIET_AFTER);
        let idle_timeout = self.idle_timeout();
        let ping = idle_timeout
            .filter(|_| !self.pinged)
            .map(|timeout| self.last_inbound + timeout / 2);
        let idle = idle_timeout.map(|timeout| self.last_inbound + timeout);
        let stall = self.stall.as_ref().map(|span| span.ends);
        [
            quiet,
            ping,
            idle,
            self.frame,
            self.handshake,
            self.grace,
            stall,
            self.ack,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Takes what is due at `now`, one thing per call (call again until
    /// `None`); `queued` is the bytes waiting in the outbound buffer.
    pub(crate) fn on_timeout(&mut self, now: Instant, queued: usize) -> Option<Due> {
        // First: a span that ends may start the idle clock again.
        if let Some(due) = self.end_span_if_due(now, queued) {
            return Some(due);
        }
        let quiet_for = now.saturating_duration_since(self.last_inbound);
        if let Some(timeout) = self.idle_timeout()
            && quiet_for >= timeout
        {
            let message = format!("nothing received for {timeout:?}");
            return Some(Due::Close(CloseNotice::new(
                DisconnectReason::IdleTimeout,
                message,
            )));
        }
        if self.frame.is_some_and(|at| at <= now) {
            self.frame = None;
            let message = format!(
                "a frame was not whole within {:?} of its first byte",
                self.limits.frame_timeout
            );
            return Some(Due::Close(CloseNotice::new(
                DisconnectReason::IdleTimeout,
                message,
            )));
        }
        if self.handshake.is_some_and(|at| at <= now) {
            self.handshake = None;
            return Some(Due::Close(CloseNotice::new(
                DisconnectReason::HandshakeTimeout,
                "no handshake within the handshake timeout",
            )));
        }
        if quiet_for >= QUIET_AFTER && !self.quiet {
            self.quiet = true;
            return Some(Due::Quiet);
        }
        if let Some(timeout) = self.idle_timeout()
            && quiet_for >= timeout / 2
            && !self.pinged
        {
            self.pinged = true;
            return Some(Due::Ping(quiet_for));
        }
        if self.grace.is_some_and(|at| at <= now) {
            self.grace = None;
            return Some(Due::GraceOver);
        }
        if self.ack.is_some_and(|at| at <= now) {
            self.ack = None;
            return Some(Due::Ack);
        }
        None
    }

    /// An `ACK` is due at `at`, unless one is due sooner already.
    pub(crate) fn set_ack(&mut self, at: Instant) {
        self.ack = Some(self.ack.map_or(at, |due| due.min(at)));
    }

    /// No `ACK` is due (one was just sent, or the session is no longer
    /// resumable).
    pub(crate) fn set_ack_off(&mut self) {
        self.ack = None;
    }

    /// The idle timeout, while it runs: not while frames wait for the peer
    /// (a PING would wait behind them, and the write timeout judges the
    /// peer then).
    fn idle_timeout(&self) -> Option<Duration> {
        self.limits.idle_timeout.filter(|_| self.stall.is_none())
    }

    /// Whole frames arrived at `now`: the idle clock starts again. Returns
    /// whether the connection had gone quiet (its next deadline is sooner
    /// now than the one set before).
    pub(crate) fn note_inbound(&mut self, now: Instant) -> bool {
        self.last_inbound = now;
        self.pinged = false;
        std::mem::take(&mut self.quiet)
    }

    /// After a read at `now`: `completed` when whole frames arrived,
    /// `partial` when an unfinished one waits. Only whole frames count as
    /// input for the idle timeout; an unfinished frame must be whole within
    /// the frame timeout from its first byte, and later bytes do not extend
    /// that. Returns whether a deadline was set that may come before the
    /// others.
    pub(crate) fn note_frames(&mut self, now: Instant, completed: bool, partial: bool) -> bool {
        if completed || !partial {
            self.frame = None;
        }
        let mut sooner = completed && self.note_inbound(now);
        if partial && self.frame.is_none() {
            self.frame = Some(now + self.limits.frame_timeout);
            sooner = true;
        }
        sooner
    }

    /// After a read that brought neither whole nor unfinished frames (only
    /// control messages, or nothing): no frame waits to be finished.
    pub(crate) fn note_frames_none(&mut self) {
        self.frame = None;
    }

    /// Whether an unfinished frame's deadline runs.
    pub(crate) fn frame_pending(&self) -> bool {
        self.frame.is_some()
    }

    /// Whether a span of the write timeout is open.
    pub(crate) fn span_open(&self) -> bool {
        self.stall.is_some()
    }

    /// After a write attempt at `now`: `written` bytes went out, and bytes
    /// still wait (`waiting`; `queued` of them in the outbound buffer). A
    /// span opens when bytes wait; momentary emptiness does not end one
    /// (the socket's buffer hides how far behind the peer is). Returns
    /// whether a span opened.
    pub(crate) fn note_writes(
        &mut self,
        now: Instant,
        waiting: bool,
        written: usize,
        queued: usize,
    ) -> bool {
        match &mut self.stall {
            Some(span) => {
                span.drained = span.drained.saturating_add(written);
                span.waiting = waiting;
                false
            }
            None if waiting => {
                self.open_span(now, queued);
                true
            }
            None => false,
        }
    }

    fn open_span(&mut self, now: Instant, queued: usize) {
        self.stall = Some(Span {
            ends: now + self.limits.write_timeout,
            drained: 0,
            queued_at_start: queued,
            waiting: true,
        });
    }

    /// Judges a span that ended by `now`, if bytes still waited then (the
    /// peer is behind): it must have drained the minimum rate's worth, or
    /// everything queued during the span if that is less, and at least a
    /// byte; otherwise the connection closes with `SLOW_CONSUMER`.
    fn end_span_if_due(&mut self, now: Instant, queued: usize) -> Option<Due> {
        let span = self.stall.take_if(|span| span.ends <= now)?;
        if !span.waiting {
            // The peer took all there was: the idle clock starts again.
            if span.ends > self.last_inbound {
                self.last_inbound = span.ends;
                self.pinged = false;
            }
            return None;
        }
        let limits = &self.limits;
        let queued_during = (span.drained + queued).saturating_sub(span.queued_at_start);
        let rate = (limits.min_drain_rate as f64 * limits.write_timeout.as_secs_f64()) as usize;
        if span.drained >= rate.min(queued_during).max(1) {
            // Enough got out: a new span begins.
            self.open_span(now, queued);
            return None;
        }
        let message = format!(
            "{} bytes read in {:?} while more waited: the peer does not keep up",
            span.drained, limits.write_timeout
        );
        Some(Due::Close(CloseNotice::new(
            DisconnectReason::SlowConsumer,
            message,
        )))
    }

    /// A graceful close began at `now`: the running requests have the
    /// shutdown grace to finish.
    pub(crate) fn begin_grace(&mut self, now: Instant) {
        self.grace = Some(now + self.limits.shutdown_grace);
    }

    /// The connection must run a handshake (here: a `RESUME`) within the
    /// handshake timeout from `now`, whatever the server requires.
    pub(crate) fn require_handshake(&mut self, now: Instant, config: &ServerConfig) {
        // (A timeout too large for the clock never comes.)
        self.handshake = now.checked_add(config.handshake_timeout);
    }

    /// The handshake ran (or failed for good): nothing waits for it.
    pub(crate) fn handshake_done(&mut self) {
        self.handshake = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn config() -> ServerConfig {
        ServerConfig {
            idle_timeout: Some(10 * SECOND),
            frame_timeout: 3 * SECOND,
            write_timeout: 4 * SECOND,
            min_drain_rate: 100,
            shutdown_grace: 5 * SECOND,
            handshake_timeout: 2 * SECOND,
            ..ServerConfig::default()
        }
    }

    /// Everything due at `now`, in the order it comes out, up to a close.
    fn due(timers: &mut Timers, now: Instant, queued: usize) -> Vec<String> {
        let mut due = Vec::new();
        while let Some(next) = timers.on_timeout(now, queued) {
            match next {
                Due::Close(notice) => {
                    due.push(format!("close {}", notice.reason));
                    break;
                }
                other => due.push(format!("{other:?}")),
            }
        }
        due
    }

    #[test]
    fn a_quiet_connection_gives_buffers_back_then_pings_then_times_out() {
        let start = Instant::now();
        let mut timers = Timers::new(&config(), start);
        assert_eq!(timers.next_deadline(), Some(start + QUIET_AFTER));
        assert!(due(&mut timers, start + QUIET_AFTER / 2, 0).is_empty());
        assert_eq!(due(&mut timers, start + QUIET_AFTER, 0), ["Quiet"]);
        assert_eq!(timers.next_deadline(), Some(start + 5 * SECOND));
        assert_eq!(due(&mut timers, start + 5 * SECOND, 0), ["Ping(5s)"]);
        assert_eq!(timers.next_deadline(), Some(start + 10 * SECOND));
        assert_eq!(
            due(&mut timers, start + 10 * SECOND, 0),
            ["close IDLE_TIMEOUT (5)"]
        );
    }

    #[test]
    fn input_starts_the_idle_clock_again() {
        let start = Instant::now();
        let mut timers = Timers::new(&config(), start);
        assert_eq!(
            due(&mut timers, start + 6 * SECOND, 0),
            ["Quiet", "Ping(6s)"]
        );
        // Input after the quiet period brings the next deadline forward.
        assert!(timers.note_frames(start + 7 * SECOND, true, false));
        assert!(due(&mut timers, start + 7 * SECOND + QUIET_AFTER / 2, 0).is_empty());
        assert_eq!(timers.next_deadline(), Some(start + 8 * SECOND));
        assert_eq!(
            due(&mut timers, start + 12 * SECOND, 0),
            ["Quiet", "Ping(5s)"]
        );
    }

    #[test]
    fn an_unfinished_frame_must_be_whole_within_the_frame_timeout_of_its_first_byte() {
        let start = Instant::now();
        let mut timers = Timers::new(&config(), start);
        assert!(timers.note_frames(start, false, true));
        // More bytes of the same frame do not extend its deadline.
        assert!(!timers.note_frames(start + 2 * SECOND, false, true));
        assert_eq!(timers.next_deadline(), Some(start + QUIET_AFTER));
        assert_eq!(
            due(&mut timers, start + 3 * SECOND, 0),
            ["close IDLE_TIMEOUT (5)"]
        );
        // A frame completed in time disarms it.
        let mut timers = Timers::new(&config(), start);
        timers.note_frames(start, false, true);
        timers.note_frames(start + 2 * SECOND, true, false);
        assert_eq!(due(&mut timers, start + 3 * SECOND, 0), ["Quiet"]);
    }

    #[test]
    fn a_server_that_requires_encryption_waits_for_the_handshake_only_so_long() {
        let start = Instant::now();
        let required = ServerConfig {
            require_encryption: true,
            ..config()
        };
        let mut timers = Timers::new(&required, start);
        timers.note_inbound(start + 2 * SECOND);
        assert_eq!(
            due(&mut timers, start + 2 * SECOND, 0),
            ["close HANDSHAKE_TIMEOUT (6)"]
        );
        let mut timers = Timers::new(&required, start);
        timers.handshake_done();
        timers.note_inbound(start + 2 * SECOND);
        assert!(due(&mut timers, start + 2 * SECOND, 0).is_empty());
    }

    #[test]
    fn a_span_that_drains_less_than_the_minimum_rate_closes_the_connection() {
        let start = Instant::now();
        let mut timers = Timers::new(&config(), start);
        assert!(timers.note_writes(start, true, 0, 10_000));
        assert!(timers.span_open());
        // 399 bytes in 4 s at a minimum of 100 B/s is too few, with more
        // than that queued meanwhile.
        timers.note_writes(start + SECOND, true, 399, 20_000);
        timers.note_inbound(start + 4 * SECOND);
        assert_eq!(
            due(&mut timers, start + 4 * SECOND, 20_000),
            ["close SLOW_CONSUMER (9)"]
        );
    }

    #[test]
    fn a_span_that_drains_enough_or_all_there_was_opens_the_next() {
        let start = Instant::now();
        let mut timers = Timers::new(&config(), start);
        timers.note_writes(start, true, 0, 10_000);
        timers.note_writes(start + SECOND, true, 400, 20_000);
        timers.note_inbound(start + 4 * SECOND);
        assert!(due(&mut timers, start + 4 * SECOND, 20_000).is_empty());
        assert!(timers.span_open(), "bytes still wait: the next span began");
        // Only 50 bytes were queued, and all 50 went: the peer keeps up.
        let mut timers = Timers::new(&config(), start);
        timers.note_writes(start, true, 0, 50);
        timers.note_writes(start + SECOND, true, 50, 0);
        timers.note_inbound(start + 4 * SECOND);
        assert!(due(&mut timers, start + 4 * SECOND, 0).is_empty());
        // Nothing waits when the span ends: it is not judged.
        let mut timers = Timers::new(&config(), start);
        timers.note_writes(start, true, 0, 10_000);
        timers.note_writes(start + SECOND, false, 0, 0);
        timers.note_inbound(start + 4 * SECOND);
        assert!(due(&mut timers, start + 4 * SECOND, 0).is_empty());
        assert!(!timers.span_open());
    }

    #[test]
    fn the_idle_clock_stops_while_frames_wait_for_the_peer() {
        let start = Instant::now();
        let mut timers = Timers::new(&config(), start);
        assert_eq!(due(&mut timers, start + SECOND, 0), ["Quiet"]);
        // Replies wait from 1 s to past the idle timeout; the peer reads
        // enough of them: no PING (it would wait behind them), no close.
        timers.note_writes(start + SECOND, true, 0, 100_000);
        for second in 2..=14 {
            let now = start + second * SECOND;
            timers.note_writes(now, true, 1_000, 100_000);
            assert!(due(&mut timers, now, 100_000).is_empty(), "at {second} s");
        }
        // Everything went out by 15 s; the span that ends at 17 s starts
        // the idle clock again from there.
        timers.note_writes(start + 15 * SECOND, false, 1_000, 0);
        assert!(due(&mut timers, start + 17 * SECOND, 0).is_empty());
        assert_eq!(timers.next_deadline(), Some(start + 22 * SECOND));
        assert_eq!(due(&mut timers, start + 22 * SECOND, 0), ["Ping(5s)"]);
        assert_eq!(
            due(&mut timers, start + 27 * SECOND, 0),
            ["close IDLE_TIMEOUT (5)"]
        );
    }

    #[test]
    fn a_graceful_close_waits_for_the_grace_at_most() {
        let start = Instant::now();
        let mut timers = Timers::new(&config(), start);
        timers.begin_grace(start);
        timers.note_inbound(start + 5 * SECOND);
        assert_eq!(timers.next_deadline(), Some(start + 5 * SECOND));
        assert_eq!(due(&mut timers, start + 5 * SECOND, 0), ["GraceOver"]);
    }
}
