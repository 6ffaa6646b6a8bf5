//! Server limits, with their defaults.

use std::net::IpAddr;
use std::time::Duration;

use ternio_protocol::DEFAULT_MAX_FRAME_SIZE;
use ternio_protocol::secure::RekeyPolicy;

/// The limits a server applies to every connection. Every field has a
/// documented default and a setter on [`ServerBuilder`](crate::ServerBuilder).
///
/// With feature `serde` it reads from a settings file (give it to
/// [`ServerBuilder::config`](crate::ServerBuilder::config)): every key is
/// optional and takes its default, an unknown key is an error that names
/// it, durations are written `"30s"` or `"250ms"`, and `"off"` turns off
/// `idle_timeout` and `max_handshakes_per_second`. Every key and its
/// default: `docs/CONFIGURATION.md`.
///
/// ```
/// # #[cfg(feature = "serde")]
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
///
/// let config: ternio::ServerConfig = toml::from_str(
///     r#"
///     max_connections = 50000
///     idle_timeout = "2m"
///     trusted_proxies = ["10.0.0.2"]
///     "#,
/// )?;
/// assert_eq!(config.idle_timeout, Some(Duration::from_secs(120)));
/// assert_eq!(config.max_connections_per_ip, 256); // not in the file: its default
/// let server = ternio::Server::builder().config(config);
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "serde"))]
/// # fn main() {}
/// ```
///
/// `#[non_exhaustive]`: from outside this crate, start from
/// [`ServerConfig::default`] (or a settings file) and set fields, or use
/// the setters of [`ServerBuilder`](crate::ServerBuilder).
#[derive(Debug, Clone)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(default, deny_unknown_fields)
)]
#[non_exhaustive]
pub struct ServerConfig {
    /// Largest frame (header + body) accepted or sent. Default 1 MiB.
    pub max_frame_size: usize,
    /// Requests a connection may have running at once. When reached, the
    /// server stops reading that connection until one finishes: the peer's
    /// further requests wait in its socket (back-pressure; nothing is
    /// refused or queued without bound). Default 1,024.
    pub max_requests_in_flight: usize,
    /// Streams (docs/PROTOCOL.md section 4.5: downloads a handler answers
    /// with, uploads a handler takes) one connection may have open at once;
    /// one more is answered `OVERLOADED`. Default 16.
    pub max_streams_per_connection: usize,
    /// Bytes of pushed frames that may wait for one connection (its
    /// outbox). A push beyond it meets the slow-consumer policy.
    /// Default 1 MiB.
    pub max_outbox_bytes: usize,
    /// What a push to a full outbox does. Default
    /// [`SlowConsumerPolicy::Disconnect`].
    pub slow_consumer: SlowConsumerPolicy,
    /// Replies waiting to be written above which the server stops reading a
    /// connection until its peer reads. Default 1 MiB.
    pub outbound_high_water: usize,
    /// Connections waiting to be accepted (the listen backlog). Default 1,024.
    pub listen_backlog: u32,
    /// Whether the TCP listeners (plain, WebSocket, TLS, health) are bound
    /// with `SO_REUSEPORT`, so that several servers, typically one per
    /// current-thread runtime, can listen on the same port and the kernel
    /// spreads connections among them. Servers so joined do not share a
    /// hub (groups, users, rooms) unless a backplane joins them. Unix only;
    /// elsewhere `true` fails the bind. Default `false`.
    pub reuse_port: bool,
    /// Connections open at once; one more is refused with `DISCONNECT
    /// TOO_MANY_CONNECTIONS`. Default 16,384.
    pub max_connections: usize,
    /// Connections open at once from one IP address (an IPv6 peer: from
    /// its network, see [`ipv6_prefix_len`](Self::ipv6_prefix_len)); one
    /// more is refused. Default 256: room for a few hundred users behind one
    /// NAT or proxy, and for 100 connections opened at once from one address.
    pub max_connections_per_ip: usize,
    /// Connections accepted from one IP address (or IPv6 network) per
    /// [`accept_window`](Self::accept_window), with governor's keyed rate
    /// limiter: up to this many at once, then one more every
    /// `accept_window / accepts_per_ip` (no burst at the edges of a fixed
    /// window). `0` refuses every connection. Default 128.
    pub accepts_per_ip: usize,
    /// The window of [`accepts_per_ip`](Self::accepts_per_ip); zero turns
    /// the accept rate off. Default 1 s.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::duration")
    )]
    pub accept_window: Duration,
    /// Whether loopback peers (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104) are
    /// exempt from the per-IP limits. Default `false`: behind a proxy on the
    /// same host every peer is loopback, and must not be unlimited.
    pub exempt_loopback: bool,
    /// How many leading bits of an IPv6 address the per-IP limits count it
    /// under: a host owns a whole /64 and can rotate through it. IPv4-mapped
    /// IPv6 addresses (`::ffff:a.b.c.d`) count as their IPv4 address.
    /// Default 64.
    pub ipv6_prefix_len: u8,
    /// Connections accepted but not yet admitted to the protocol: WebSocket
    /// upgrades in progress, and PROXY headers being read. One more is
    /// refused at once (WebSocket: HTTP 503). Default 4,096: an honest
    /// upgrade takes one round trip, so even a crowd of thousands
    /// reconnecting together stays below it, while a flood of stalled
    /// upgrades holds at most that many sockets and tasks (a few KiB each,
    /// for at most [`websocket_upgrade_timeout`](Self::websocket_upgrade_timeout)):
    /// tens of MiB, what as many idle connections cost.
    pub max_pending_upgrades: usize,
    /// The addresses of proxies (HAProxy, a cloud load balancer) that
    /// announce their clients with the PROXY protocol, version 1 or 2. A
    /// connection from one of them must start with a PROXY header (within
    /// 5 s, or it is closed); its source address becomes the connection's
    /// peer address and the key of the per-IP limits. From any other
    /// address a PROXY header is not understood: it is malformed input,
    /// like any other bad bytes. Default empty.
    pub trusted_proxies: Vec<IpAddr>,
    /// A connection with no whole frame from its peer for this long gets
    /// `DISCONNECT IDLE_TIMEOUT`. Halfway there, the server sends a PING: a
    /// peer that answers stays. Only whole frames (on WebSocket, whole data
    /// messages) count: bytes of an unfinished one, and WebSocket pings, do
    /// not. While frames wait for the peer, the idle clock stops (a PING
    /// would wait behind them; the write timeout judges the peer then) and
    /// starts again once the peer has read them. `None` disables it.
    /// Default 60 s.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::duration_or_off")
    )]
    pub idle_timeout: Option<Duration>,
    /// How long a frame (on WebSocket, a message, whatever its fragments)
    /// may take to arrive whole, counted from its first byte; later bytes
    /// and pings do not extend it. It runs only while the server reads: a
    /// frame held back by the server's own backpressure (requests in
    /// flight at their limit, replies at the outbound high-water mark) is
    /// not late. Past it: `DISCONNECT IDLE_TIMEOUT`.
    /// Default 10 s: a 1 MiB frame then needs about 100 KB/s, and a peer
    /// that trickles a frame holds its slot for 10 s at most.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::duration")
    )]
    pub frame_timeout: Duration,
    /// With [`require_encryption`](Self::require_encryption), the largest
    /// frame accepted before the handshake completed (a `HANDSHAKE` is 56
    /// bytes): an unauthenticated peer cannot make the server buffer a
    /// large frame. On WebSocket it is checked once the message is whole
    /// (it is then still bounded by `max_frame_size`). Default 4 KiB.
    pub max_frame_size_before_handshake: usize,
    /// The span over which a peer must read what waits for it: a span
    /// opens when frames wait; if frames still wait when it ends (the
    /// socket's own buffer is full), it must have drained
    /// [`min_drain_rate`](Self::min_drain_rate) times its length, or all
    /// that was queued during it if that is less, and at least a byte;
    /// otherwise `DISCONNECT SLOW_CONSUMER`. Default 30 s.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::duration")
    )]
    pub write_timeout: Duration,
    /// Bytes per second a peer must read while frames wait for it, over
    /// each [`write_timeout`](Self::write_timeout): reading a little now
    /// and then does not hold the connection's buffers. Default 1,024 (30
    /// KiB per 30 s: far below any real link, far above a trickle).
    pub min_drain_rate: usize,
    /// How long a closing connection waits for its last frames to be
    /// written and for the peer to close its side. Default 2 s.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::duration")
    )]
    pub close_linger: Duration,
    /// On shutdown, how long running requests may take to finish before
    /// their connections close anyway. Default 5 s.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::duration")
    )]
    pub shutdown_grace: Duration,
    /// How long a WebSocket client may take over its HTTP upgrade (which
    /// starts only once the connection is admitted). Default 10 s.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::duration")
    )]
    pub websocket_upgrade_timeout: Duration,
    /// How long a connection to the health listener
    /// ([`ServerBuilder::health`](crate::ServerBuilder::health)) may take to
    /// send its request and read the answer before it is closed. Default 5 s.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::duration")
    )]
    pub health_timeout: Duration,
    /// How long a peer of a TLS listener (feature `tls`) may take over its
    /// TLS handshake, which starts only once the connection is admitted
    /// and holds one of the [`max_pending_upgrades`](Self::max_pending_upgrades)
    /// places meanwhile; past it, the connection is closed. Default 10 s.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::duration")
    )]
    pub tls_handshake_timeout: Duration,
    /// Whether every application opcode requires an encrypted request
    /// (a plain one gets error 6). Default `false`.
    pub require_encryption: bool,
    /// With `require_encryption`, how long a connection may go without a
    /// completed handshake before `DISCONNECT HANDSHAKE_TIMEOUT`; on any
    /// server, how long a connection admitted past a connection limit to
    /// resume a session may take to do so. Default 10 s.
    /// A failed handshake closes the connection at once (none can follow).
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::duration")
    )]
    pub handshake_timeout: Duration,
    /// Handshakes the whole server runs per second (each costs a few X25519
    /// operations, about 0.1 ms of CPU): past it, a `HANDSHAKE` is answered
    /// with error 8 `OVERLOADED` (and, under
    /// [`require_encryption`](Self::require_encryption), the connection is
    /// closed), so that a flood of handshakes cannot take the CPU from the
    /// connections already served. Bursts up to the same number pass at
    /// once. `None`: no budget. Default 1,000.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::number_or_off")
    )]
    pub max_handshakes_per_second: Option<u32>,
    /// When a secure session replaces the key of what the server sends
    /// (contract section 5.2): by default after 65,536 frames or 2 minutes
    /// under one key, whichever comes first, checked as a frame is sealed.
    pub rekey: RekeyPolicy,
    /// How long a session whose link was lost waits for its client to
    /// resume it (docs/PROTOCOL.md section 4.2), keeping its id, store,
    /// groups and the pushes sent to it meanwhile (within
    /// [`max_outbox_bytes`](Self::max_outbox_bytes)). `None`: resumption is
    /// off, a `RESUME_TICKET` is answered error 1, and a lost link ends its
    /// session at once. Default `None`.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::duration_or_off")
    )]
    pub resume_ttl: Option<Duration>,
    /// Bytes of the frames a resumable session sent and its client has not
    /// acknowledged yet, kept to replay after a resumption. A session that
    /// would keep more is no longer resumable (its connection goes on).
    /// Default 64 KiB.
    pub resume_replay_bytes: usize,
    /// The largest datagram (the whole UDP payload) of the datagram channel
    /// ([`ServerBuilder::map_udp`](crate::ServerBuilder::map_udp)), sent or
    /// received: a larger one is refused at send and dropped on receipt.
    /// Default 1,200 bytes (the IPv6 minimum MTU, less its headers).
    pub max_datagram_size: usize,
    /// The UDP port a `DATAGRAM_BIND` answer tells clients to send to
    /// (on the host their stream reached), when it is not the port the
    /// [`map_udp`](crate::ServerBuilder::map_udp) listener is bound to:
    /// behind a port mapping (a container's published port, a NAT rule)
    /// or a UDP relay. The server still replies from its own socket, to
    /// the address each client's datagrams come from. `None`: the
    /// listener's port. Default `None`.
    pub datagram_port: Option<u16>,
    /// Whether the server compresses what it sends (contract section 6):
    /// `Some(threshold)` compresses a reply or push body of at least
    /// `threshold` bytes when that makes it smaller, for packets that allow
    /// it (`#[packet(compress = false)]` opts a type out; pushes that may
    /// go by datagram are never compressed). `None`: off, and sending costs
    /// one branch more than without compression. Compressed frames from
    /// clients are always accepted. Default `None`.
    #[cfg_attr(
        feature = "serde",
        serde(with = "ternio_protocol::config_format::number_or_off")
    )]
    pub compression: Option<usize>,
}

impl ServerConfig {
    /// The largest frame a peer may send before a secure session is up:
    /// smaller when the server requires encryption.
    pub(crate) fn frame_limit_before_handshake(&self) -> usize {
        if self.require_encryption {
            self.max_frame_size
                .min(self.max_frame_size_before_handshake)
        } else {
            self.max_frame_size
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            max_requests_in_flight: 1024,
            max_streams_per_connection: 16,
            max_outbox_bytes: 1024 * 1024,
            slow_consumer: SlowConsumerPolicy::Disconnect,
            outbound_high_water: 1024 * 1024,
            listen_backlog: 1024,
            reuse_port: false,
            max_connections: 16_384,
            max_connections_per_ip: 256,
            accepts_per_ip: 128,
            accept_window: Duration::from_secs(1),
            exempt_loopback: false,
            ipv6_prefix_len: 64,
            max_pending_upgrades: 4096,
            trusted_proxies: Vec::new(),
            idle_timeout: Some(Duration::from_secs(60)),
            min_drain_rate: 1024,
            max_handshakes_per_second: Some(1_000),
            frame_timeout: Duration::from_secs(10),
            max_frame_size_before_handshake: 4 * 1024,
            write_timeout: Duration::from_secs(30),
            close_linger: Duration::from_secs(2),
            shutdown_grace: Duration::from_secs(5),
            websocket_upgrade_timeout: Duration::from_secs(10),
            health_timeout: Duration::from_secs(5),
            tls_handshake_timeout: Duration::from_secs(10),
            require_encryption: false,
            handshake_timeout: Duration::from_secs(10),
            rekey: RekeyPolicy::default(),
            resume_ttl: None,
            resume_replay_bytes: 64 * 1024,
            max_datagram_size: ternio_protocol::datagram::DEFAULT_MAX_DATAGRAM,
            datagram_port: None,
            compression: None,
        }
    }
}

/// What happens to a push when a connection's outbox is full (its
/// peer does not read fast enough).
///
/// In a settings file: `"disconnect"` or `"drop_droppable"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum SlowConsumerPolicy {
    /// The connection gets `DISCONNECT SLOW_CONSUMER` and closes.
    #[default]
    Disconnect,
    /// A packet type marked `#[packet(droppable)]` (a state update that the
    /// next one replaces) is dropped for that connection, which stays; any
    /// other packet still disconnects it with `SLOW_CONSUMER`.
    DropDroppable,
}

#[cfg(all(test, feature = "serde"))]
mod tests {
    use super::*;

    #[test]
    fn a_file_sets_what_it_names_and_leaves_the_rest_at_its_default() {
        let config: ServerConfig = toml::from_str(
            r#"
            max_connections = 50000
            slow_consumer = "drop_droppable"
            idle_timeout = "off"
            write_timeout = "1m 30s"
            close_linger = "250ms"
            max_handshakes_per_second = "off"
            trusted_proxies = ["10.0.0.2", "fd00::1"]
            rekey = { interval = "30s" }
            datagram_port = 9000
            "#,
        )
        .unwrap();
        assert_eq!(config.max_connections, 50_000);
        assert_eq!(config.datagram_port, Some(9000));
        assert_eq!(config.slow_consumer, SlowConsumerPolicy::DropDroppable);
        assert_eq!(config.idle_timeout, None);
        assert_eq!(config.write_timeout, Duration::from_secs(90));
        assert_eq!(config.close_linger, Duration::from_millis(250));
        assert_eq!(config.max_handshakes_per_second, None);
        assert_eq!(
            config.trusted_proxies,
            [
                "10.0.0.2".parse::<IpAddr>().unwrap(),
                "fd00::1".parse().unwrap()
            ]
        );
        assert_eq!(config.rekey.interval, Duration::from_secs(30));
        assert_eq!(config.rekey.frames, RekeyPolicy::default().frames);
        let defaults = ServerConfig::default();
        assert_eq!(
            config.max_connections_per_ip,
            defaults.max_connections_per_ip
        );
        assert_eq!(config.frame_timeout, defaults.frame_timeout);
        assert_eq!(defaults.datagram_port, None);
    }

    #[test]
    fn the_defaults_survive_a_file() {
        let text = toml::to_string(&ServerConfig::default()).unwrap();
        assert!(text.contains(r#"idle_timeout = "1m""#), "{text}");
        assert!(text.contains(r#"slow_consumer = "disconnect""#), "{text}");
        let read: ServerConfig = toml::from_str(&text).unwrap();
        assert_eq!(
            format!("{read:?}"),
            format!("{:?}", ServerConfig::default())
        );
        let empty: ServerConfig = toml::from_str("").unwrap();
        assert_eq!(
            format!("{empty:?}"),
            format!("{:?}", ServerConfig::default())
        );
    }

    #[test]
    fn a_mistyped_key_or_value_is_an_error_that_names_it() {
        let error = toml::from_str::<ServerConfig>("max_conections = 5")
            .unwrap_err()
            .to_string();
        assert!(error.contains("unknown field `max_conections`"), "{error}");
        assert!(error.contains("`max_connections`"), "{error}");
        let error = toml::from_str::<ServerConfig>("[rekey]\nframe = 5")
            .unwrap_err()
            .to_string();
        assert!(error.contains("unknown field `frame`"), "{error}");
        let error = toml::from_str::<ServerConfig>("idle_timeout = 60")
            .unwrap_err()
            .to_string();
        assert!(error.contains("a duration needs a unit"), "{error}");
        assert!(error.contains("idle_timeout"), "{error}");
        let error = toml::from_str::<ServerConfig>(r#"slow_consumer = "drop""#)
            .unwrap_err()
            .to_string();
        assert!(error.contains("drop_droppable"), "{error}");
    }
}
