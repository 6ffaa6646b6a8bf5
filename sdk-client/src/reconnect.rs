//! The reconnect policy: when a lost connection is re-established, and the
//! delays between attempts (exponential backoff with jitter).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ternio_protocol::DisconnectReason;

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
/// **Attempts.** Attempt `n` (from 1) starts after
/// `min(initial_delay * multiplier^(n-1), max_delay)`, moved at random by
/// up to `jitter` of itself (so that clients dropped together do not all
/// come back at the same instant) and never above `max_delay`. Each attempt
/// is bounded by [`ClientConfig::connect_timeout`](crate::ClientConfig::connect_timeout).
/// When `max_attempts` have failed, the client closes for good with
/// [`CloseReason::ReconnectFailed`] and every waiting request fails at once.
#[derive(Debug, Clone, PartialEq)]
pub struct ReconnectPolicy {
    /// The delay before the first attempt. Default 100 ms.
    pub initial_delay: Duration,
    /// The longest delay between attempts. Default 5 s.
    pub max_delay: Duration,
    /// By how much the delay grows after each failed attempt; values below
    /// 1 count as 1. Default 2.
    pub multiplier: f64,
    /// The fraction (0 to 1, clamped) by which a delay may be shortened or
    /// lengthened at random. Default 0.2.
    pub jitter: f64,
    /// How many attempts in a row before giving up; `None` never gives up.
    /// Default `Some(10)`. The count starts again after each success.
    pub max_attempts: Option<u32>,
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        Self {
            initial_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
            multiplier: 2.0,
            jitter: 0.2,
            max_attempts: Some(10),
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

    /// The delay before attempt `attempt`, with `unit` (in `[0, 1)`) picking
    /// where it falls in the jitter range.
    fn jittered_delay(&self, attempt: u32, unit: f64) -> Duration {
        let base = self.base_delay(attempt).as_secs_f64();
        let jitter = if self.jitter.is_finite() {
            self.jitter.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let secs = base * (1.0 + jitter * (2.0 * unit - 1.0));
        Duration::try_from_secs_f64(secs.max(0.0))
            .unwrap_or(self.max_delay)
            .min(self.max_delay)
    }
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

    /// The delay before attempt `attempt`, jitter included.
    pub(crate) fn delay(&mut self, attempt: u32) -> Duration {
        let unit = self.next_unit();
        self.policy.jittered_delay(attempt, unit)
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
    fn jitter_stays_within_its_fraction_and_under_the_maximum() {
        let policy = ReconnectPolicy::default();
        assert_eq!(policy.jittered_delay(1, 0.0), Duration::from_millis(80));
        assert_eq!(policy.jittered_delay(1, 0.5), Duration::from_millis(100));
        assert!(policy.jittered_delay(1, 0.999_999) <= Duration::from_millis(120));
        assert!(policy.jittered_delay(50, 0.999) <= policy.max_delay);
        let wild = ReconnectPolicy {
            jitter: 7.0,
            ..ReconnectPolicy::default()
        };
        assert_eq!(wild.jittered_delay(1, 0.0), Duration::ZERO);

        let mut backoff = Backoff::new(policy.clone());
        let delays: Vec<_> = (0..200).map(|_| backoff.delay(2)).collect();
        assert!(delays.iter().all(|d| (160..=240).contains(&d.as_millis())));
        // Spread, not one value repeated.
        assert!(delays.iter().any(|d| *d != delays[0]));
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
