//! The reconnect policy: when a lost connection is re-established, and the
//! delays between attempts (exponential backoff with full jitter, a floor
//! when the server says it is full or going away, and a count of attempts
//! that starts again only after a connection stayed up).
//!
//! One run of attempts is a state machine, [`Retry`], driven by the time
//! passed in: the supervisor task owns the one sleep, until
//! [`Retry::next_deadline`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ternio_protocol::DisconnectReason;
use tokio::time::Instant;

use crate::error::CloseReason;

/// How a [`Client`](crate::Client) re-establishes a lost connection, set in
/// [`ClientConfig::reconnect`](crate::ClientConfig::reconnect).
///
/// **When.** The client reconnects when the connection is lost for any
/// reason but these three: [`Client::close`](crate::Client::close) was
/// called (or every clone of the client was dropped), or the server sent
/// `DISCONNECT` with reason `KICKED` (the application removed this client on
/// purpose: coming back would undo that) or `NORMAL` (the server ended the
/// conversation on purpose). A `DISCONNECT SHUTDOWN` (the server is going
/// away, probably to restart), any other `DISCONNECT` reason, a connection
/// closed or reset without a word, a server that broke the protocol, a
/// frame that failed the secure session's checks
/// ([`CloseReason::DecryptFailed`]: the new connection gets a new session),
/// a server silent past the keepalive ([`CloseReason::KeepaliveTimeout`])
/// and a server that does not take what the client sends
/// ([`CloseReason::OutboundFull`]) all reconnect. Only connections that were once up are re-established: when
/// the first `connect_*` fails, it returns its error.
///
/// **Requests.** Requests in flight when the connection is lost fail at once
/// with [`ClientError::Closed`](crate::ClientError::Closed) carrying the
/// reason of the loss. The server may or may not have run them: a request
/// that is not idempotent must be checked, not blindly repeated. Requests
/// (and pings) issued while the client reconnects wait for the new
/// connection and are then sent; the wait counts toward their own timeout
/// ([`ClientError::Timeout`](crate::ClientError::Timeout) when it runs out).
/// A fire-and-forget [`send`](crate::Client::send) meanwhile fails at once
/// with [`ClientError::Reconnecting`](crate::ClientError::Reconnecting): it
/// is not kept for later.
///
/// **Secure sessions.** When the session was secure (by
/// [`ClientConfig::secure`](crate::ClientConfig::secure) or after a
/// successful [`Client::handshake`](crate::Client::handshake)), every new
/// connection runs the same handshake (same pattern, same pinned key)
/// before it carries any request: the waiting requests then go out sealed
/// on it. A handshake that fails there counts as a failed attempt.
///
/// **Delays.** Attempt `n` (from 1) starts after a delay drawn at random
/// below its base delay `min(initial_delay * multiplier^(n-1), max_delay)`:
/// with the default `jitter` of 1 anywhere in `[0, base]` ("full jitter"),
/// so that clients dropped together do not all come back together. When
/// the connection (or the last attempt's new connection) ended with
/// `DISCONNECT TOO_MANY_CONNECTIONS` or `SHUTDOWN` (the server is full, or
/// going away and probably restarting), or the last attempt's WebSocket
/// upgrade was refused with HTTP 503 (how a Ternio server refuses a
/// WebSocket client its limits do not admit), the next attempt waits `busy_delay`
/// and then a random delay drawn as above from a base of at least
/// `busy_delay` (by default between 1 and 2 s for the first attempts, at
/// most `busy_delay + max(max_delay, busy_delay)`), spread so that a
/// restarted server does not get its clients back all at once. Each attempt is
/// bounded by [`ClientConfig::connect_timeout`](crate::ClientConfig::connect_timeout).
///
/// **Attempts.** The count of attempts goes on across connections that did
/// not last: it starts again at 1 only after a connection stayed up for
/// `healthy_after`. A server that accepts each connection and then drops
/// it at once (one that is full, say) therefore sees the delays grow, not
/// a new connection every `initial_delay`. An attempt counts whether it
/// failed to connect or its connection was lost before `healthy_after`.
/// When the next attempt would be number `max_attempts + 1`, the client
/// closes for good with [`CloseReason::ReconnectFailed`] and every waiting
/// request fails at once.
///
/// In a settings file: a `[reconnect]` table (an empty one takes every
/// default), `max_attempts = "off"` to never give up.
///
/// `#[non_exhaustive]`: start from [`ReconnectPolicy::default`] and set the
/// fields to change.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(default, deny_unknown_fields)
)]
#[non_exhaustive]
pub struct ReconnectPolicy {
    /// The delay before the first attempt. Default 100 ms.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::duration")
    )]
    pub initial_delay: Duration,
    /// The largest base delay, so the longest delay but after a server that
    /// was full or going away (see `busy_delay`). Default 5 s.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::duration")
    )]
    pub max_delay: Duration,
    /// By how much the delay grows after each failed attempt; values below
    /// 1 count as 1. Default 2.
    pub multiplier: f64,
    /// The fraction (0 to 1, clamped) of each delay that is random: the
    /// delay is drawn uniformly in `[base * (1 - jitter), base]`. Default 1
    /// (full jitter: anywhere in `[0, base]`); 0 waits exactly the base.
    pub jitter: f64,
    /// How many attempts in a row before giving up; `None` never gives up.
    /// Default `Some(10)`. The count starts again only after a connection
    /// stayed up for `healthy_after`.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::number_or_off")
    )]
    pub max_attempts: Option<u32>,
    /// How long a connection must stay up for the count of attempts to
    /// start again at 1. Default 10 s: long enough that a server which
    /// refuses or drops its clients at once is not retried at the fastest
    /// pace forever, short enough that a connection lost after working for
    /// a while gets a quick first attempt.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::duration")
    )]
    pub healthy_after: Duration,
    /// The least delay before the attempt that follows a
    /// `DISCONNECT TOO_MANY_CONNECTIONS` or `SHUTDOWN`, before the random
    /// part (see the rules above). Default 1 s: a restarting server is not
    /// hammered while it comes back, and a full one gets time to free room.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::duration")
    )]
    pub busy_delay: Duration,
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        Self {
            initial_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
            multiplier: 2.0,
            jitter: 1.0,
            max_attempts: Some(10),
            healthy_after: Duration::from_secs(10),
            busy_delay: Duration::from_secs(1),
        }
    }
}

impl ReconnectPolicy {
    /// The delay before attempt `attempt` (from 1), before jitter:
    /// `min(initial_delay * multiplier^(attempt-1), max_delay)`.
    pub fn base_delay(&self, attempt: u32) -> Duration {
        let multiplier = if self.multiplier >= 1.0 {
            self.multiplier
        } else {
            1.0
        };
        let exponent = attempt.saturating_sub(1).min(1024) as i32;
        let secs = self.initial_delay.as_secs_f64() * multiplier.powi(exponent);
        if secs.is_finite() && secs < self.max_delay.as_secs_f64() {
            Duration::from_secs_f64(secs)
        } else {
            self.max_delay
        }
    }

    /// The shortest and the longest delay before attempt `attempt`; `busy`
    /// when the last connection ended with `DISCONNECT
    /// TOO_MANY_CONNECTIONS` or `SHUTDOWN`. The delay is drawn uniformly
    /// between the two.
    pub fn delay_range(&self, attempt: u32, busy: bool) -> (Duration, Duration) {
        (
            self.jittered_delay(attempt, busy, 1.0),
            self.jittered_delay(attempt, busy, 0.0),
        )
    }

    /// The delay before attempt `attempt`, with `unit` (in `[0, 1]`)
    /// picking where it falls in the jitter range: 0 the longest, 1 the
    /// shortest.
    fn jittered_delay(&self, attempt: u32, busy: bool, unit: f64) -> Duration {
        let floor = if busy {
            self.busy_delay
        } else {
            Duration::ZERO
        };
        let base = self.base_delay(attempt).max(floor).as_secs_f64();
        let jitter = if self.jitter.is_finite() {
            self.jitter.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let secs = base * (1.0 - jitter * unit.clamp(0.0, 1.0));
        let random = Duration::try_from_secs_f64(secs.max(0.0)).unwrap_or(Duration::ZERO);
        floor.saturating_add(random)
    }
}

/// Whether a connection lost for `reason` makes the next attempt wait
/// [`ReconnectPolicy::busy_delay`] first: the server said it is full or
/// going away.
pub(crate) fn is_busy(reason: &CloseReason) -> bool {
    matches!(
        reason,
        CloseReason::Disconnected(disconnect) if matches!(
            disconnect.reason,
            DisconnectReason::TooManyConnections | DisconnectReason::Shutdown
        )
    )
}

/// Whether a connection lost for `reason` is re-established (when a policy
/// is set). The rule is documented on [`ReconnectPolicy`].
pub(crate) fn should_reconnect(reason: &CloseReason) -> bool {
    match reason {
        CloseReason::Local | CloseReason::ReconnectFailed { .. } => false,
        CloseReason::Disconnected(disconnect) => !matches!(
            disconnect.reason,
            DisconnectReason::Kicked | DisconnectReason::Normal
        ),
        CloseReason::PeerClosed
        | CloseReason::Io(..)
        | CloseReason::Protocol(_)
        | CloseReason::DecryptFailed(_)
        | CloseReason::KeepaliveTimeout { .. }
        | CloseReason::OutboundFull { .. } => true,
    }
}

/// The delays of one run of attempts: the policy and a small xorshift
/// generator for the jitter, seeded from the clock and a process-wide
/// counter (jitter needs spread, not unpredictability).
pub(crate) struct Backoff {
    policy: ReconnectPolicy,
    state: u64,
}

impl Backoff {
    pub(crate) fn new(policy: ReconnectPolicy) -> Self {
        static SEQUENCE: AtomicU64 = AtomicU64::new(0);
        let clock = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos() as u64);
        let sequence = SEQUENCE.fetch_add(1, Ordering::Relaxed);
        // splitmix64 of the two spreads nearby seeds; xorshift needs non-zero.
        let mut z = clock ^ sequence.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Self {
            policy,
            state: z | 1,
        }
    }

    pub(crate) fn policy(&self) -> &ReconnectPolicy {
        &self.policy
    }

    /// The delay before attempt `attempt`, jitter included; `busy` as for
    /// [`ReconnectPolicy::delay_range`].
    pub(crate) fn delay(&mut self, attempt: u32, busy: bool) -> Duration {
        let unit = self.next_unit();
        self.policy.jittered_delay(attempt, busy, unit)
    }

    /// A number in `[0, 1)` (xorshift64*).
    fn next_unit(&mut self) -> f64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        let out = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (out >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One run of reconnect attempts after a lost link: which attempt comes
/// next, when, and why the last one failed; or that the attempts ran out.
pub(crate) struct Retry {
    backoff: Backoff,
    /// The attempt scheduled next (or under way).
    attempt: u32,
    /// The server said it is full or going away: the next delay has a floor.
    busy: bool,
    last_error: String,
    /// When the scheduled attempt may start.
    due: Option<Instant>,
}

impl Retry {
    /// Attempts under `policy` after a link lost for `lost`, from attempt
    /// `attempt` (which the loss chose: see
    /// [`healthy_after`](ReconnectPolicy::healthy_after)).
    pub(crate) fn new(policy: ReconnectPolicy, attempt: u32, lost: &CloseReason) -> Self {
        Self {
            backoff: Backoff::new(policy),
            attempt,
            busy: is_busy(lost),
            last_error: format!("the connection was lost: {lost}"),
            due: None,
        }
    }

    /// Schedules the next attempt at `now` plus its delay, and returns its
    /// number; or, when the attempts ran out, the reason to close with
    /// ([`CloseReason::ReconnectFailed`]).
    pub(crate) fn schedule(&mut self, now: Instant) -> Result<u32, CloseReason> {
        let attempt = self.attempt;
        if (self.backoff.policy().max_attempts).is_some_and(|max| attempt > max) {
            return Err(CloseReason::ReconnectFailed {
                attempts: attempt - 1,
                last_error: self.last_error.clone(),
            });
        }
        let delay = self.backoff.delay(attempt, self.busy);
        self.busy = false;
        self.due = Some(now.checked_add(delay).unwrap_or(now));
        Ok(attempt)
    }

    /// When the scheduled attempt may start (`None` once it may).
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.due
    }

    /// At `now`: the scheduled attempt's number once its delay is over
    /// (it may start), `None` before.
    pub(crate) fn on_timeout(&mut self, now: Instant) -> Option<u32> {
        match self.due {
            Some(due) if now < due => None,
            _ => {
                self.due = None;
                Some(self.attempt)
            }
        }
    }

    /// The attempt under way failed with `error`; `busy` when the server
    /// said it is full or going away (the next delay then has a floor).
    pub(crate) fn failed(&mut self, error: String, busy: bool) {
        self.last_error = error;
        self.busy = busy;
        self.attempt = self.attempt.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use ternio_protocol::system::Disconnect;

    use super::*;

    #[test]
    fn the_delay_grows_exponentially_up_to_the_maximum() {
        let policy = ReconnectPolicy::default();
        let ms = |attempt| policy.base_delay(attempt).as_millis();
        assert_eq!(
            [ms(1), ms(2), ms(3), ms(4), ms(6), ms(7), ms(100)],
            [100, 200, 400, 800, 3200, 5000, 5000]
        );
        assert_eq!(policy.base_delay(u32::MAX), policy.max_delay);
        let flat = ReconnectPolicy {
            multiplier: 0.5,
            ..ReconnectPolicy::default()
        };
        assert_eq!(flat.base_delay(5), Duration::from_millis(100));
    }

    #[test]
    fn full_jitter_spreads_delays_over_zero_to_the_base() {
        let policy = ReconnectPolicy::default();
        assert_eq!(policy.jitter, 1.0, "full jitter by default");
        let ms = |attempt, unit| policy.jittered_delay(attempt, false, unit).as_millis();
        assert_eq!([ms(1, 0.0), ms(1, 0.5), ms(1, 1.0)], [100, 50, 0]);
        assert_eq!([ms(50, 0.0), ms(50, 1.0)], [5000, 0]);
        assert_eq!(
            policy.delay_range(3, false),
            (Duration::ZERO, Duration::from_millis(400))
        );

        // A fraction keeps the delay in [base * (1 - jitter), base].
        let partial = ReconnectPolicy {
            jitter: 0.25,
            ..ReconnectPolicy::default()
        };
        assert_eq!(
            partial.delay_range(2, false),
            (Duration::from_millis(150), Duration::from_millis(200))
        );
        // Out of range or not a number: clamped to [0, 1], or none.
        for (jitter, shortest) in [(7.0, 0), (-1.0, 200), (f64::NAN, 200)] {
            let odd = ReconnectPolicy {
                jitter,
                ..ReconnectPolicy::default()
            };
            assert_eq!(
                odd.delay_range(2, false).0.as_millis(),
                shortest,
                "{jitter}"
            );
            assert_eq!(odd.delay_range(2, false).1.as_millis(), 200, "{jitter}");
        }

        // Drawn: inside the range, spread across it.
        let mut backoff = Backoff::new(policy.clone());
        let delays: Vec<_> = (0..2000).map(|_| backoff.delay(4, false)).collect();
        assert!(delays.iter().all(|d| *d <= Duration::from_millis(800)));
        let low = delays.iter().filter(|d| d.as_millis() < 200).count();
        let high = delays.iter().filter(|d| d.as_millis() >= 600).count();
        // A quarter of the range each: about 500 of 2000, far from 0.
        assert!(low > 300 && high > 300, "low {low}, high {high}");
    }

    #[test]
    fn after_too_many_connections_or_shutdown_the_delay_has_a_floor() {
        let policy = ReconnectPolicy::default();
        let second = Duration::from_secs(1);
        // The floor, then full jitter over a base of at least the floor.
        assert_eq!(policy.delay_range(1, true), (second, 2 * second));
        assert_eq!(policy.delay_range(4, true), (second, second * 2));
        assert_eq!(
            policy.delay_range(6, true),
            (second, second + Duration::from_millis(3200))
        );
        assert_eq!(policy.delay_range(40, true), (second, second * 6));
        let mut backoff = Backoff::new(policy.clone());
        for _ in 0..1000 {
            let delay = backoff.delay(1, true);
            assert!(delay >= second && delay <= 2 * second, "{delay:?}");
        }

        let by = |reason| CloseReason::Disconnected(Disconnect::new(reason, ""));
        assert!(is_busy(&by(DisconnectReason::TooManyConnections)));
        assert!(is_busy(&by(DisconnectReason::Shutdown)));
        assert!(!is_busy(&by(DisconnectReason::IdleTimeout)));
        assert!(!is_busy(&CloseReason::PeerClosed));
    }

    #[test]
    fn a_retry_waits_each_delay_and_gives_up_after_the_last_attempt() {
        let policy = ReconnectPolicy {
            jitter: 0.0,
            max_attempts: Some(3),
            ..ReconnectPolicy::default()
        };
        let ms = Duration::from_millis;
        let start = Instant::now();
        let mut retry = Retry::new(policy, 2, &CloseReason::PeerClosed);
        assert_eq!(retry.schedule(start), Ok(2));
        assert_eq!(retry.next_deadline(), Some(start + ms(200)));
        assert_eq!(retry.on_timeout(start + ms(199)), None);
        assert_eq!(retry.on_timeout(start + ms(200)), Some(2));
        assert_eq!(retry.next_deadline(), None);

        let busy = true;
        retry.failed("refused".to_owned(), busy);
        let now = start + ms(300);
        assert_eq!(retry.schedule(now), Ok(3));
        // The busy floor (1 s), then a base of at least the floor.
        assert_eq!(retry.next_deadline(), Some(now + ms(2000)));
        assert_eq!(retry.on_timeout(now + ms(2000)), Some(3));

        retry.failed("refused again".to_owned(), false);
        assert_eq!(
            retry.schedule(now),
            Err(CloseReason::ReconnectFailed {
                attempts: 3,
                last_error: "refused again".to_owned(),
            })
        );
    }

    #[test]
    fn the_first_delay_after_a_busy_server_has_the_floor() {
        let by = |reason| CloseReason::Disconnected(Disconnect::new(reason, ""));
        let start = Instant::now();
        let policy = ReconnectPolicy {
            jitter: 0.0,
            ..ReconnectPolicy::default()
        };
        let mut retry = Retry::new(policy, 1, &by(DisconnectReason::Shutdown));
        assert_eq!(retry.schedule(start), Ok(1));
        assert_eq!(retry.next_deadline(), Some(start + Duration::from_secs(2)));
    }

    #[test]
    fn kicked_and_normal_do_not_reconnect() {
        let by = |reason| CloseReason::Disconnected(Disconnect::new(reason, ""));
        assert!(should_reconnect(&by(DisconnectReason::Shutdown)));
        assert!(should_reconnect(&by(DisconnectReason::IdleTimeout)));
        assert!(should_reconnect(&CloseReason::PeerClosed));
        assert!(!should_reconnect(&by(DisconnectReason::Kicked)));
        assert!(!should_reconnect(&by(DisconnectReason::Normal)));
        assert!(!should_reconnect(&CloseReason::Local));
    }
}
