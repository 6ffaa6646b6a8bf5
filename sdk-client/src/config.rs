//! Client settings.

use std::time::Duration;

use ternio_protocol::DEFAULT_MAX_FRAME_SIZE;
use ternio_protocol::secure::RekeyPolicy;

use crate::reconnect::ReconnectPolicy;

/// How a [`Client`](crate::Client) behaves. Every field has a default.
///
/// With feature `serde` it reads from a settings file: every key is
/// optional and takes its default, an unknown key is an error that names
/// it, durations are written `"30s"` or `"250ms"`; `reconnect`, `secure`
/// and `keepalive` are tables (an empty `[reconnect]` turns reconnection on
/// with its defaults) or `"off"`. Every key and its default:
/// `docs/CONFIGURATION.md`.
///
/// ```
/// # #[cfg(feature = "serde")]
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
///
/// let config: ternio_client::ClientConfig = toml::from_str(
///     r#"
///     request_timeout = "5s"
///     keepalive = "off"
///     [reconnect]
///     max_attempts = "off"
///     "#,
/// )?;
/// assert_eq!(config.request_timeout, Duration::from_secs(5));
/// assert_eq!(config.keepalive, None);
/// assert_eq!(config.reconnect.unwrap().max_attempts, None); // never gives up
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "serde"))]
/// # fn main() {}
/// ```
///
/// `#[non_exhaustive]`: start from [`ClientConfig::default`] and set
/// fields, or use the setters of [`Client::builder`](crate::Client::builder).
#[derive(Debug, Clone)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(default, deny_unknown_fields)
)]
#[non_exhaustive]
pub struct ClientConfig {
    /// How long a request waits for its response unless the call says
    /// otherwise. Default 10 s. While the client reconnects, the wait for
    /// the new connection counts toward it. An explicit
    /// [`handshake`](crate::Client::handshake) is bounded by it too.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::duration")
    )]
    pub request_timeout: Duration,
    /// How long connecting may take (resolving, the TCP connection and, on
    /// WebSocket, the upgrade), for the first connection and for each
    /// reconnect attempt. Default 10 s. The handshake of a secure session
    /// that runs on connect (or again after a reconnect) has its own
    /// `connect_timeout` as well.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::duration")
    )]
    pub connect_timeout: Duration,
    /// Largest frame sent or accepted. Default 1 MiB, as the server's. On
    /// WebSocket it is also the largest message and message fragment
    /// accepted. A sealed frame is 24 bytes larger than its plain body.
    pub max_frame_size: usize,
    /// Requests that may wait for a response at once; one more fails with
    /// [`ClientError::TooManyInFlight`](crate::ClientError::TooManyInFlight).
    /// Default 65,536.
    pub max_in_flight: usize,
    /// The most items a download ([`Client::request_stream`](crate::Client::request_stream),
    /// docs/PROTOCOL.md section 4.5) lets the server send ahead of the
    /// application. A download starts at 32 and widens, while its items
    /// are small, to 1 MiB of the largest item seen so far, up to this many
    /// (with few items in flight, credit, not the link, paces a stream of
    /// small items: 16,384 items of 64 bytes are 1 MiB). A server that sends
    /// small items and then large ones can make a download hold this many
    /// frames (each at most [`max_frame_size`](Self::max_frame_size)):
    /// lower it for servers you do not trust. Values below 32 count as 32.
    /// Default 16,384 (1,024 until 2026-12).
    pub max_stream_window: u32,
    /// Whether each request tells the server how long the client waits for
    /// it (a `DEADLINE` frame before it, docs/PROTOCOL.md section 4.1), so
    /// that the server stops an `async` handler the client no longer waits
    /// for even if the client is gone. Default `false`: it adds a 19-byte
    /// frame to every request. Whatever this says, a request the client
    /// gives up (its timeout, or its future dropped) is cancelled on the
    /// server with a `CANCEL`.
    pub send_deadlines: bool,
    /// Whether and how to re-establish a connection that was lost. Default
    /// `None`: a lost connection closes the client for good. See
    /// [`ReconnectPolicy`] for what happens to requests meanwhile.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::table_or_off")
    )]
    pub reconnect: Option<ReconnectPolicy>,
    /// A secure session to set up on every connection, before any request
    /// goes out on it: with it, `connect_*` runs the handshake and fails if
    /// it does, and every reconnect runs it again. Default `None`: the
    /// connection is plain until [`Client::handshake`](crate::Client::handshake)
    /// is called.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::table_or_off")
    )]
    pub secure: Option<SecureConfig>,
    /// When the secure session replaces the key of what the client sends
    /// (contract section 5.2): by default after 65,536 frames or 2 minutes
    /// under one key, whichever comes first, checked as a frame is sealed.
    pub rekey: RekeyPolicy,
    /// How many pushes a [`Subscription`](crate::Subscription) holds that
    /// its owner has not taken yet. Default 1024. When it is full, further
    /// pushes for that subscription are dropped and counted
    /// ([`Subscription::dropped`](crate::Subscription::dropped)); the
    /// connection is never held up. Values below 1 count as 1.
    pub push_buffer: usize,
    /// Whether and how the client checks that a quiet connection is still
    /// alive. Default on, [`Keepalive::default`]: a `PING` after 15 s
    /// without a byte from the server, the connection lost 10 s later if
    /// nothing came since. On by default because without it a server that
    /// vanished without closing the connection (a crash of its host, a
    /// dropped route, a NAT that forgot the connection) is never noticed:
    /// the client stays `Connected` and its requests time out one by one.
    /// `None` turns it off.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::table_or_off")
    )]
    pub keepalive: Option<Keepalive>,
    /// The most bytes of frames the client holds that the socket has not
    /// taken yet. Default 8 MiB: eight frames of the default
    /// [`max_frame_size`](Self::max_frame_size), far more than a server that
    /// reads keeps waiting (the kernel's socket buffers come before it), and
    /// a bounded cost when the server stops reading. A frame that could
    /// take the queue past it (its body, counted with 128 bytes for its
    /// framing) is not queued: the connection is lost with
    /// [`CloseReason::OutboundFull`](crate::CloseReason::OutboundFull), the
    /// requests in flight on it fail, and the reconnect policy applies. An
    /// application that may send faster than the connection carries for
    /// long should pace itself (wait for answers) or raise this.
    /// Values below one largest frame (`max_frame_size` + 128 bytes) or
    /// below 65 KiB count as the larger of the two.
    pub max_outbound: usize,
    /// Whether a client with a [`reconnect`](Self::reconnect) policy
    /// resumes its session after a lost connection (docs/PROTOCOL.md
    /// section 4.2), when the server offers it: it asks for a ticket once
    /// connected (after the handshake), and a reconnection presents it, so
    /// that the requests in flight get their answers and the pushes sent
    /// meanwhile arrive, each once and in order; open streams
    /// ([`Client::request_stream`](crate::Client::request_stream),
    /// [`Client::upload`](crate::Client::upload)) go on too. When the server refuses
    /// (the ticket expired, or it does not resume sessions) the requests
    /// in flight and the open streams fail and a new session starts
    /// ([`SessionEvent::Lost`](crate::SessionEvent::Lost)). Default `true`;
    /// nothing happens without a reconnect policy.
    pub resume: bool,
    /// How often the client re-estimates the server's clock (docs/PROTOCOL.md
    /// section 4.3): with `Some(interval)` it runs
    /// [`Client::sync_clock`](crate::Client::sync_clock) in the background
    /// once connected, after each reconnection, and every `interval`, so
    /// that [`Client::server_time`](crate::Client::server_time) has an
    /// estimate and follows the two clocks' drift. Default `None` (off):
    /// each sync is five small requests, which an application that never
    /// reads the server's time should not pay, and a server older than
    /// `TIME` refuses them; call `sync_clock` yourself instead, or set a
    /// few minutes here (the clocks of two hosts drift apart by a few
    /// milliseconds an hour at most, once NTP runs on both). An interval
    /// under a second counts as a second.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::duration_or_off")
    )]
    pub clock_sync: Option<Duration>,
    /// Whether the client compresses what it sends (contract section 6):
    /// `Some(threshold)` compresses the body of a request or send of at
    /// least `threshold` bytes when that makes it smaller, for packets that
    /// allow it (`#[packet(compress = false)]` opts a type out). `None`:
    /// off. Compressed frames from the server are always accepted.
    /// Default `None`.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::number_or_off")
    )]
    pub compression: Option<usize>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            max_in_flight: 65_536,
            max_stream_window: 16_384,
            send_deadlines: false,
            reconnect: None,
            secure: None,
            rekey: RekeyPolicy::default(),
            push_buffer: 1024,
            keepalive: Some(Keepalive::default()),
            max_outbound: 8 * 1024 * 1024,
            resume: true,
            clock_sync: None,
            compression: None,
        }
    }
}

impl ClientConfig {
    /// The bound on the outbound queue that applies: `max_outbound`, raised
    /// to one largest frame with its framing and to 64 KiB.
    pub(crate) fn outbound_limit(&self) -> usize {
        self.max_outbound
            .max(self.max_frame_size.saturating_add(MAX_FRAMING))
            .max(MIN_OUTBOUND)
    }
}

/// More than any frame's bytes beyond its body: at most 14 of WebSocket
/// header, 11 of length prefix and header, 24 of seal, and a `REKEY` frame
/// sealed just before it (at most 37).
pub(crate) const MAX_FRAMING: usize = 128;

/// The smallest bound on the outbound queue: tungstenite's own writes (its
/// pongs and Close frames) wait below 64 KiB before they join the queue.
const MIN_OUTBOUND: usize = 64 * 1024 + 1024;

/// How a client notices that its connection died without a word, in
/// [`ClientConfig::keepalive`]: when nothing at all was received for
/// `interval`, the client sends a `PING`; when nothing is received in the
/// `timeout` after it, the connection is lost with
/// [`CloseReason::KeepaliveTimeout`](crate::CloseReason::KeepaliveTimeout)
/// and the reconnect policy applies (requests in flight on it fail with
/// that reason).
///
/// Any byte from the server counts, even part of a frame: a large frame on
/// a slow link is not taken for silence. A connection that receives sends
/// no `PING`. Silence is checked every half interval, so the `PING`
/// follows between one and one and a half intervals of it.
/// While a secure handshake waits for its answer nothing else may go out,
/// so no `PING` either: the handshake's own timeout bounds that wait. Once
/// the secure session is up the `PING` is sealed; on a connection whose
/// handshake failed after the application asked for a session (nothing
/// goes out plain then), there is no keepalive.
///
/// A dead server is noticed at most `1.5 * interval + timeout` after the
/// last byte it sent (`interval + timeout` when it never sent one). The
/// `PING` also resets the server's idle timer, so a client whose interval
/// is below the server's idle timeout is not dropped for being idle.
///
/// In a settings file: `keepalive = { interval = "15s", timeout = "10s" }`,
/// or `keepalive = "off"`.
///
/// Built with [`Keepalive::new`] (or from [`Keepalive::default`]); the
/// struct is `#[non_exhaustive]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(default, deny_unknown_fields)
)]
#[non_exhaustive]
pub struct Keepalive {
    /// How long the server may stay silent before a `PING` goes out.
    /// Default 15 s: a quarter of the server's default idle timeout (60 s),
    /// and under the 30 s after which the most impatient NATs and firewalls
    /// forget an idle connection; an idle connection costs one small frame
    /// each way per interval. Values below 10 ms count as 10 ms.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::duration")
    )]
    pub interval: Duration,
    /// How long after the `PING` something must arrive. Default 10 s, the
    /// default request timeout: generous for a server under load; with the
    /// interval, a dead server is noticed within 32.5 s. Values below
    /// 10 ms count as 10 ms.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::duration")
    )]
    pub timeout: Duration,
}

impl Default for Keepalive {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(15),
            timeout: Duration::from_secs(10),
        }
    }
}

impl Keepalive {
    /// The smallest interval and timeout that apply.
    const MIN: Duration = Duration::from_millis(10);

    /// A `PING` after `interval` of silence, the connection lost if nothing
    /// arrives within `timeout` after it.
    pub const fn new(interval: Duration, timeout: Duration) -> Self {
        Self { interval, timeout }
    }

    /// The interval that applies (at least 10 ms).
    pub(crate) fn interval(&self) -> Duration {
        self.interval.max(Self::MIN)
    }

    /// The timeout that applies (at least 10 ms).
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout.max(Self::MIN)
    }
}

/// The secure session a client sets up on each connection (contract
/// section 5), in [`ClientConfig::secure`].
///
/// With a pinned key the handshake is `Noise_NK`: only the server holding
/// the matching private key completes it, so a man in the middle cannot
/// read or change the traffic. Without one it is `Noise_NN`: it hides the
/// traffic from a passive eavesdropper only (see `docs/SECURITY.md`).
///
/// In a settings file: a `[secure]` table, with `pin` the server's public
/// key in hex (64 digits); `secure = "off"`, or no `secure` key, for none.
///
/// Built with [`SecureConfig::pinned`] or [`SecureConfig::anonymous`]; the
/// struct is `#[non_exhaustive]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(default, deny_unknown_fields)
)]
#[non_exhaustive]
pub struct SecureConfig {
    /// The server's static X25519 public key (its identity, printed by the
    /// server as 64 hex digits), or `None` for an anonymous `Noise_NN`
    /// session. [`protocol::secure::key_from_hex`](crate::protocol::secure::key_from_hex)
    /// reads the hex form.
    #[cfg_attr(
        feature = "serde",
        serde(with = "pin_hex", skip_serializing_if = "Option::is_none")
    )]
    pub pin: Option<[u8; 32]>,
}

/// [`SecureConfig::pin`] in a settings file: 64 hex digits.
#[cfg(feature = "serde")]
mod pin_hex {
    use serde::{Deserialize, Deserializer, Serializer, de};
    use ternio_protocol::secure::{key_from_hex, to_hex};

    /// Writes the key as 64 hex digits.
    pub(super) fn serialize<S: Serializer>(
        pin: &Option<[u8; 32]>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match pin {
            Some(key) => serializer.serialize_str(&to_hex(key)),
            None => serializer.serialize_none(),
        }
    }

    /// Reads 64 hex digits.
    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<[u8; 32]>, D::Error> {
        let text = String::deserialize(deserializer)?;
        key_from_hex(&text).map(Some).ok_or_else(|| {
            de::Error::custom(format_args!(
                "invalid pin {text:?}: expected the server's public key as 64 hex digits"
            ))
        })
    }
}

impl SecureConfig {
    /// `Noise_NK`, pinning the server's public key.
    pub const fn pinned(key: [u8; 32]) -> Self {
        Self { pin: Some(key) }
    }

    /// `Noise_NN`: anonymous, against passive eavesdroppers only.
    pub const fn anonymous() -> Self {
        Self { pin: None }
    }
}

#[cfg(all(test, feature = "serde"))]
mod file_tests {
    use super::*;

    #[test]
    fn tables_turn_reconnect_and_secure_on_and_off_turns_keepalive_off() {
        let pin = "7f".repeat(32);
        let config: ClientConfig = toml::from_str(&format!(
            r#"
            connect_timeout = "3s"
            keepalive = "off"
            rekey = {{ frames = 1000 }}
            [reconnect]
            initial_delay = "250ms"
            multiplier = 3
            [secure]
            pin = "{pin}"
            "#
        ))
        .unwrap();
        assert_eq!(config.connect_timeout, Duration::from_secs(3));
        assert_eq!(config.keepalive, None);
        assert_eq!(config.rekey.frames, 1000);
        let reconnect = config.reconnect.unwrap();
        assert_eq!(reconnect.initial_delay, Duration::from_millis(250));
        assert_eq!(reconnect.multiplier, 3.0);
        assert_eq!(
            reconnect.max_attempts,
            ReconnectPolicy::default().max_attempts
        );
        assert_eq!(config.secure, Some(SecureConfig::pinned([0x7f; 32])));

        let anonymous: ClientConfig =
            toml::from_str("[secure]\n[keepalive]\ntimeout = \"1s\"").unwrap();
        assert_eq!(anonymous.secure, Some(SecureConfig::anonymous()));
        assert_eq!(anonymous.reconnect, None);
        assert_eq!(
            anonymous.keepalive,
            Some(Keepalive {
                timeout: Duration::from_secs(1),
                ..Keepalive::default()
            })
        );
    }

    #[test]
    fn the_defaults_survive_a_file() {
        let mut config = ClientConfig {
            reconnect: Some(ReconnectPolicy::default()),
            secure: Some(SecureConfig::pinned([3; 32])),
            ..ClientConfig::default()
        };
        for _ in 0..2 {
            let text = toml::to_string(&config).unwrap();
            let read: ClientConfig = toml::from_str(&text).unwrap();
            assert_eq!(format!("{read:?}"), format!("{config:?}"), "{text}");
            config = ClientConfig::default();
        }
        let text = toml::to_string(&ClientConfig::default()).unwrap();
        assert!(text.contains(r#"reconnect = "off""#), "{text}");
    }

    #[test]
    fn mistakes_are_errors_that_name_them() {
        let error = |text: &str| {
            toml::from_str::<ClientConfig>(text)
                .unwrap_err()
                .to_string()
        };
        let message = error("request_timout = \"1s\"");
        assert!(
            message.contains("unknown field `request_timout`"),
            "{message}"
        );
        let message = error("[reconnect]\nmax_atempts = 3");
        assert!(message.contains("unknown field `max_atempts`"), "{message}");
        let message = error("[secure]\npin = \"abc\"");
        assert!(message.contains("64 hex digits"), "{message}");
        let message = error("keepalive = \"no\"");
        assert!(
            message.contains(r#"a table of settings, or "off""#),
            "{message}"
        );
    }
}
