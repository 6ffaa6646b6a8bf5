//! Building a server: controllers, state, listeners, limits, then bound
//! listeners in a [`Server`].

use std::any::TypeId;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use ternio_protocol::Packet;
use ternio_protocol::schema::{Schema, SchemaBuilder, SchemaError};
use ternio_protocol::secure::RekeyPolicy;
use tokio::sync::watch;
use tokio_util::task::TaskTracker;

use crate::admission::Admission;
use crate::around::{self, AroundRequest, Layer, Next, Reply};
use crate::backplane::Backplane;
use crate::build_error::BuildError;
use crate::close::CloseCause;
use crate::config::{ServerConfig, SlowConsumerPolicy};
use crate::dispatch::{self, Controller, DispatchTable};
use crate::hub::{ConnectionHandle, Hub};
use crate::identity::Identity;
use crate::ids::ConnectionId;
use crate::metrics::Metrics;
use crate::middleware::{Middleware, Policies};
use crate::presence::PresenceEvent;
use crate::registry::{HubShared, PresenceHook};
use crate::sessions::Sessions;
use crate::shared::{Hooks, ServerShared};
use crate::store::AppState;
#[cfg(feature = "tls")]
use crate::transport::tls::TlsConfig;
use crate::udp::Datagrams;

#[cfg(feature = "prometheus")]
use crate::server::PrometheusExporter;
use crate::server::{ListenerKind, Server};

impl Server {
    /// Starts building a server.
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }
}

/// Builds a [`Server`]: controllers, state, listeners and limits.
pub struct ServerBuilder {
    controllers: Vec<(TypeId, Arc<dyn Controller>)>,
    discover: bool,
    state: AppState,
    listeners: Vec<Result<ListenerSpec, BuildError>>,
    config: ServerConfig,
    identity: Option<Identity>,
    middleware: Vec<Arc<dyn Middleware>>,
    arounds: Vec<Arc<Layer>>,
    /// Whether [`Policies`] was placed in the chain by hand.
    placed_policies: bool,
    /// What joins this server to the other nodes of a cluster, if anything.
    backplane: Option<Arc<dyn Backplane>>,
    hooks: Hooks,
    /// The presence hooks, called in the order given.
    presence: Option<PresenceHook>,
    metrics: bool,
    #[cfg(feature = "prometheus")]
    prometheus: Option<SocketAddr>,
    /// Where to answer `/healthz` and `/readyz`, if anywhere.
    health: Option<Result<SocketAddr, BuildError>>,
    /// The UDP listener of datagram channels, if any.
    udp: Option<Result<SocketAddr, BuildError>>,
    /// The packets [`declare_push`](Self::declare_push) added to the schema.
    pushes: Vec<fn(&mut SchemaBuilder) -> &'static str>,
}

/// A listener to bind: its address and what it speaks.
struct ListenerSpec {
    address: SocketAddr,
    kind: ListenerKind,
}

impl Default for ServerBuilder {
    fn default() -> Self {
        Self {
            controllers: Vec::new(),
            discover: true,
            state: AppState::default(),
            listeners: Vec::new(),
            config: ServerConfig::default(),
            identity: None,
            middleware: Vec::new(),
            arounds: Vec::new(),
            placed_policies: false,
            backplane: None,
            hooks: Hooks::default(),
            presence: None,
            metrics: false,
            #[cfg(feature = "prometheus")]
            prometheus: None,
            health: None,
            udp: None,
            pushes: Vec::new(),
        }
    }
}

fn resolve(address: impl ToSocketAddrs + std::fmt::Debug) -> Result<SocketAddr, BuildError> {
    address
        .to_socket_addrs()
        .and_then(|mut addrs| {
            addrs
                .next()
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"))
        })
        .map_err(|source| BuildError::Resolve {
            address: format!("{address:?}"),
            source,
        })
}

impl std::fmt::Debug for ServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let listeners: Vec<String> = self
            .listeners
            .iter()
            .map(|spec| match spec {
                Ok(spec) => format!("{} {}", spec.kind.describe(), spec.address),
                Err(error) => format!("invalid: {error}"),
            })
            .collect();
        f.debug_struct("ServerBuilder")
            .field("controllers", &self.controllers.len())
            .field("discover_controllers", &self.discover)
            .field("listeners", &listeners)
            .field("config", &self.config)
            .field("identity", &self.identity)
            .field("middleware", &self.middleware.len())
            .field("arounds", &self.arounds.len())
            .field("backplane", &self.backplane.is_some())
            .field("metrics", &self.metrics)
            .field("health", &self.health)
            .finish_non_exhaustive()
    }
}

impl ServerBuilder {
    /// Registers `controller` explicitly. A controller type that `inventory`
    /// also found is registered once, with this instance.
    pub fn controller<C: Controller>(mut self, controller: C) -> Self {
        self.controllers.push((
            TypeId::of::<C>(),
            Arc::new(controller) as Arc<dyn Controller>,
        ));
        self
    }

    /// Declares that the server pushes packets of type `P`, so that the
    /// [`schema`](Self::schema) lists it (with the types it uses), marked
    /// `"pushed": true`, beside the packets its handlers take and answer
    /// with. Changes nothing else.
    pub fn declare_push<P: Packet>(mut self) -> Self {
        self.pushes.push(SchemaBuilder::push::<P>);
        self
    }

    /// The schema of this server (docs/SCHEMA.md): every handler of its
    /// controllers (those given and, unless turned off, those discovered),
    /// with its policies, the packets they take and answer with, the pushes
    /// declared with [`declare_push`](Self::declare_push), and every
    /// struct and enum these use. [`Schema::to_json`] writes it as
    /// versioned JSON. Fails when two types share a name or two packets an
    /// opcode.
    pub fn schema(&self) -> Result<Schema, SchemaError> {
        let explicit = self
            .controllers
            .iter()
            .map(|(id, controller)| (*id, Arc::clone(controller)))
            .collect();
        let mut schema = SchemaBuilder::new();
        for controller in dispatch::controllers(explicit, self.discover) {
            for handler in controller.handlers() {
                handler.describe(&mut schema);
            }
        }
        for push in &self.pushes {
            push(&mut schema);
        }
        schema.finish()
    }

    /// Whether to add the controllers that `#[packet_controller]` submitted
    /// to `inventory` (default `true`). With `false`, only the controllers
    /// given to [`controller`](Self::controller) serve.
    pub fn discover_controllers(mut self, discover: bool) -> Self {
        self.discover = discover;
        self
    }

    /// Shares `value` with every handler, which takes it as `State<T>`.
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.state.insert(Arc::new(value));
        self
    }

    /// Listens for TCP connections on `address` (port 0 picks a free port;
    /// see [`Server::tcp_addrs`]).
    pub fn map_tcp(mut self, address: impl ToSocketAddrs + std::fmt::Debug) -> Self {
        let spec = resolve(address).map(|address| ListenerSpec {
            address,
            kind: ListenerKind::Tcp,
        });
        self.listeners.push(spec);
        self
    }

    /// Listens for datagrams on the UDP `address`: the datagram channel
    /// (docs/PROTOCOL.md section 4.4) that a client with a secure session
    /// binds with `DATAGRAM_BIND`, for packets declared
    /// `#[packet(unreliable)]` and [`ConnectionHandle::send_unreliable`](crate::ConnectionHandle::send_unreliable).
    /// One UDP listener per server; its port is what clients are told,
    /// unless [`datagram_port`](Self::datagram_port) says otherwise.
    pub fn map_udp(mut self, address: impl ToSocketAddrs + std::fmt::Debug) -> Self {
        self.udp = Some(resolve(address));
        self
    }

    /// Listens for WebSocket connections on `address`, upgrading requests
    /// for `path` (such as `/ws`) only. The same handlers serve them.
    pub fn map_websocket(
        mut self,
        address: impl ToSocketAddrs + std::fmt::Debug,
        path: &str,
    ) -> Self {
        let spec = if path.starts_with('/') {
            resolve(address).map(|address| ListenerSpec {
                address,
                kind: ListenerKind::WebSocket { path: path.into() },
            })
        } else {
            Err(BuildError::WebSocketPath(path.to_owned()))
        };
        self.listeners.push(spec);
        self
    }

    /// Listens for TLS connections on `address` that carry length-prefixed
    /// frames inside TLS, with the certificate of `tls` (feature `tls`; see
    /// [`Server::tcp_tls_addrs`]). The TLS handshake runs once the
    /// connection is admitted, within
    /// [`ServerConfig::tls_handshake_timeout`], holding a place among the
    /// [`max_pending_upgrades`](ServerConfig::max_pending_upgrades); a
    /// refused peer is closed without a handshake. Clients connect with
    /// `ternio_client::Client::connect_tls`.
    #[cfg(feature = "tls")]
    pub fn map_tcp_tls(
        mut self,
        address: impl ToSocketAddrs + std::fmt::Debug,
        tls: TlsConfig,
    ) -> Self {
        let spec = resolve(address).map(|address| ListenerSpec {
            address,
            kind: ListenerKind::TcpTls { tls },
        });
        self.listeners.push(spec);
        self
    }

    /// Listens for WebSocket connections inside TLS (`wss://`) on
    /// `address`, upgrading requests for `path` only, with the certificate
    /// of `tls` (feature `tls`; see [`Server::websocket_tls_addrs`]). A
    /// page served over HTTPS can open these. The TLS handshake and then
    /// the upgrade hold a place among the
    /// [`max_pending_upgrades`](ServerConfig::max_pending_upgrades), each
    /// within its own timeout.
    #[cfg(feature = "tls")]
    pub fn map_websocket_tls(
        mut self,
        address: impl ToSocketAddrs + std::fmt::Debug,
        path: &str,
        tls: TlsConfig,
    ) -> Self {
        let spec = if path.starts_with('/') {
            resolve(address).map(|address| ListenerSpec {
                address,
                kind: ListenerKind::WebSocketTls {
                    path: path.into(),
                    tls,
                },
            })
        } else {
            Err(BuildError::WebSocketPath(path.to_owned()))
        };
        self.listeners.push(spec);
        self
    }

    /// Records the server's metrics through the `metrics` facade, to the
    /// global recorder (install it before `build`). Off by default; the
    /// metrics, their labels and the histogram buckets are listed in
    /// [`ternio::metrics`](crate::metrics).
    pub fn metrics(mut self, enabled: bool) -> Self {
        self.metrics = enabled;
        self
    }

    /// Serves the metrics for Prometheus at `http://address/metrics`
    /// (metrics-exporter-prometheus, installed as the global recorder when
    /// the server is built; it fails if another recorder is installed).
    /// Request durations are a histogram with the buckets
    /// [`REQUEST_DURATION_BUCKETS`](crate::metrics::REQUEST_DURATION_BUCKETS).
    ///
    /// When `address` is the [`health`](Self::health) listener's address
    /// (port 0 included), no second listener is bound: the health listener
    /// serves `/metrics` beside `/healthz` and `/readyz` (one port for the
    /// probes and the scrapes, through the drain too).
    #[cfg(feature = "prometheus")]
    pub fn prometheus(mut self, address: SocketAddr) -> Self {
        self.prometheus = Some(address);
        self.metrics = true;
        self
    }

    /// Answers health probes over HTTP/1.1 on `address` (port 0 picks a
    /// free port; see [`Server::health_addr`]): `GET /healthz` is 200 while
    /// the process serves; `GET /readyz` is 200 while the server accepts
    /// connections, is not draining and, with a backplane, has it connected
    /// ([`Backplane::is_connected`]), and 503 otherwise. For Kubernetes
    /// liveness and readiness probes, or a load balancer's health check.
    ///
    /// A listener of its own, minimal and bounded (64 connections answered
    /// at once, a 4 KiB request head, one request per connection within
    /// [`ServerConfig::health_timeout`]). The Prometheus endpoint, with the
    /// `prometheus` feature, has a listener of its own, unless it is given
    /// this same address: then this listener serves `/metrics` too. Serve
    /// neither to the internet.
    pub fn health(mut self, address: impl ToSocketAddrs + std::fmt::Debug) -> Self {
        self.health = Some(resolve(address));
        self
    }

    /// Adds an around layer: async code that wraps every handler, after
    /// the layers added before it (see [`around`](crate::around) for what
    /// it may do, where it runs, and what it costs).
    ///
    /// ```
    /// use ternio::Server;
    ///
    /// let builder = Server::builder().around(|request, next| async move {
    ///     let handler = request.handler();
    ///     let reply = next.run(request).await;
    ///     if let Some(code) = reply.error_code() {
    ///         tracing::info!(handler, %code, "refused");
    ///     }
    ///     reply
    /// });
    /// # drop(builder);
    /// ```
    pub fn around<F, Fut>(mut self, layer: F) -> Self
    where
        F: Fn(AroundRequest, Next) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Reply> + Send + 'static,
    {
        self.arounds.push(around::layer(layer));
        self
    }

    /// Adds `middleware` to the chain that runs around every dispatch, after
    /// the middleware added before it. The built-in [`Policies`] run
    /// innermost, unless added here explicitly to place them elsewhere.
    pub fn middleware<M: Middleware>(mut self, middleware: M) -> Self {
        self.placed_policies |= TypeId::of::<M>() == TypeId::of::<Policies>();
        self.middleware.push(Arc::new(middleware));
        self
    }

    /// Calls `hook` for every new connection, before its first frame is read.
    pub fn on_connect(mut self, hook: impl Fn(&ConnectionHandle) + Send + Sync + 'static) -> Self {
        self.hooks.connect.push(Arc::new(hook));
        self
    }

    /// Calls `hook` for every connection that closed, with the cause, after
    /// it left its groups.
    pub fn on_disconnect(
        mut self,
        hook: impl Fn(&ConnectionHandle, &CloseCause) + Send + Sync + 'static,
    ) -> Self {
        self.hooks.disconnect.push(Arc::new(hook));
        self
    }

    /// Calls `hook` for every change in the membership of a group with a
    /// member on this node: a member that joined, left (or closed), signed
    /// in or out, or was lost with its node, wherever it is in the cluster.
    ///
    /// Each node with members in the group calls its hook once per change,
    /// so a hook that tells the group pushes to this node's members only,
    /// with [`Hub::broadcast_group_local`](crate::Hub::broadcast_group_local):
    ///
    /// ```
    /// use ternio::{Packet, PresenceChange, Server};
    ///
    /// #[derive(Packet)]
    /// #[packet(opcode = 0x0201)]
    /// struct Arrived {
    ///     room: String,
    ///     who: String,
    /// }
    ///
    /// let builder = Server::builder().on_presence(|event, hub| {
    ///     if event.change == PresenceChange::Joined {
    ///         let who = event.member.user.as_deref().unwrap_or("a guest").to_owned();
    ///         let arrived = Arrived { room: event.group.to_string(), who };
    ///         let _ = hub.broadcast_group_local(&event.group, &arrived);
    ///     }
    /// });
    /// ```
    ///
    /// The hook runs on the task that made the change (a handler, a
    /// connection closing, the backplane's link): it must not block. A
    /// second hook runs after the first.
    pub fn on_presence(
        mut self,
        hook: impl Fn(&PresenceEvent, &Hub) + Send + Sync + 'static,
    ) -> Self {
        let first = self.presence.take();
        self.presence = Some(Arc::new(move |event: &PresenceEvent, shared| {
            if let Some(first) = &first {
                first(event, Arc::clone(&shared));
            }
            hook(event, &Hub::new(shared));
        }));
        self
    }

    /// Calls `hook` when a resumable session's link is lost: the session
    /// (its id, store, groups, and the pushes sent to it) waits for its
    /// client for the resumption TTL ([`resumable`](Self::resumable)).
    /// `on_disconnect` runs if it does not come back.
    pub fn on_suspend(mut self, hook: impl Fn(&ConnectionHandle) + Send + Sync + 'static) -> Self {
        self.hooks.suspend.push(Arc::new(hook));
        self
    }

    /// Calls `hook` when a client resumed its session on a new link.
    pub fn on_resume(mut self, hook: impl Fn(&ConnectionHandle) + Send + Sync + 'static) -> Self {
        self.hooks.resume.push(Arc::new(hook));
        self
    }

    /// Lets clients resume their sessions (docs/PROTOCOL.md section 4.2): a
    /// session whose link is lost waits `ttl` for its client, keeping its
    /// id, store, groups and the pushes sent to it, and each side replays
    /// what the other missed. `replay_bytes` bounds the frames a session
    /// keeps until the client acknowledges them: pushes that do not fit
    /// wait in the push queue for the client's acknowledgement, so a
    /// session pushes at most `replay_bytes` per round trip; an answer
    /// or a single frame that does not fit ends resumability (the
    /// connection goes on). Open streams wait with the session and go on
    /// once it is resumed (their frames are counted and replayed, docs/PROTOCOL.md
    /// section 4.5): a download is polled only while the buffer has room,
    /// as pushes wait, and a byte stream's chunks take at most an eighth of
    /// `replay_bytes`. Off by default; 64 KiB is a good bound on a
    /// local network. The Rust client asks for `replay_bytes` with its
    /// ticket and acknowledges at half of it (at most every 32 KiB), so
    /// pushes of up to a quarter of the bound never wait for the `ACK`
    /// delay, and a larger one only the first time the client sees its
    /// size; from a quarter of it on, its next request carries the `ACK`
    /// in the same write. sdk-js
    /// acknowledges once it has read what came with 8 KiB or more
    /// unacknowledged: pushes wait there unless three quarters of
    /// `replay_bytes`, less the push held, come to 8 KiB or more (16 KiB
    /// keeps pushes of up to 4 KiB moving; 64 KiB, up to 40 KiB).
    pub fn resumable(mut self, ttl: Duration, replay_bytes: usize) -> Self {
        self.config.resume_ttl = Some(ttl);
        self.config.resume_replay_bytes = replay_bytes;
        self
    }

    /// What a push to a connection whose outbox is full does
    /// (default: disconnect it with `SLOW_CONSUMER`).
    pub fn slow_consumer(mut self, policy: SlowConsumerPolicy) -> Self {
        self.config.slow_consumer = policy;
        self
    }

    /// Connections open at once (default 16,384); one more is refused with
    /// `DISCONNECT TOO_MANY_CONNECTIONS`.
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.config.max_connections = connections;
        self
    }

    /// Connections open at once from one IP address, or one IPv6 network
    /// (default 256).
    pub fn max_connections_per_ip(mut self, connections: usize) -> Self {
        self.config.max_connections_per_ip = connections;
        self
    }

    /// Connections accepted from one IP address, or one IPv6 network, per
    /// `window` (default 128 per second, all 128 at once if they come so).
    pub fn accept_rate_per_ip(mut self, accepts: usize, window: Duration) -> Self {
        self.config.accepts_per_ip = accepts;
        self.config.accept_window = window;
        self
    }

    /// Whether the TCP listeners this builder binds (plain, WebSocket,
    /// TLS, health) set `SO_REUSEPORT` (default `false`): with it, several
    /// servers can listen on the same port, say one per current-thread
    /// runtime, one runtime per core, and the kernel spreads incoming
    /// connections among them (on Linux, by a hash of the peer's address
    /// and port). Every one of them must set it, the first included.
    ///
    /// Each such server has its own hub: a group, user or room joined on
    /// one is unknown to the others, and a broadcast reaches only the
    /// connections of the server that sends it, unless a
    /// [`backplane`](Self::backplane) joins them as nodes of a cluster.
    /// The UDP datagram socket ([`map_udp`](Self::map_udp)) is not
    /// affected. Unix only: elsewhere, `true` fails [`build`](Self::build)
    /// with [`BuildError::Bind`].
    pub fn reuse_port(mut self, reuse: bool) -> Self {
        self.config.reuse_port = reuse;
        self
    }

    /// Whether loopback peers are exempt from the per-IP limits (default `false`).
    pub fn exempt_loopback(mut self, exempt: bool) -> Self {
        self.config.exempt_loopback = exempt;
        self
    }

    /// How many leading bits of an IPv6 peer address the per-IP limits
    /// count it under (default 64).
    pub fn ipv6_prefix_len(mut self, bits: u8) -> Self {
        self.config.ipv6_prefix_len = bits;
        self
    }

    /// WebSocket upgrades (and PROXY headers) in progress at once (default
    /// 4,096); one more connection is refused at once.
    pub fn max_pending_upgrades(mut self, upgrades: usize) -> Self {
        self.config.max_pending_upgrades = upgrades;
        self
    }

    /// The proxies whose connections start with a PROXY protocol header
    /// (v1 or v2) naming the real client (default none): see
    /// [`ServerConfig::trusted_proxies`].
    pub fn trusted_proxies(mut self, proxies: impl IntoIterator<Item = IpAddr>) -> Self {
        self.config.trusted_proxies = proxies.into_iter().collect();
        self
    }

    /// The idle timeout (default 60 s; `None` disables it): halfway through
    /// a silence the server PINGs, at the end it disconnects with `IDLE_TIMEOUT`.
    pub fn idle_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.config.idle_timeout = timeout;
        self
    }

    /// How long frames may wait with none getting out before `DISCONNECT
    /// SLOW_CONSUMER` (default 30 s).
    pub fn write_timeout(mut self, timeout: Duration) -> Self {
        self.config.write_timeout = timeout;
        self
    }

    /// Bytes of pushed frames that may wait for one connection (default 1 MiB).
    pub fn max_outbox_bytes(mut self, bytes: usize) -> Self {
        self.config.max_outbox_bytes = bytes;
        self
    }

    /// The server's identity: its static key, which clients pin for `NK`
    /// handshakes. Without one, `NN` handshakes still work and `NK` fails
    /// with error 9.
    pub fn identity(mut self, identity: Identity) -> Self {
        self.identity = Some(identity);
        self
    }

    /// Requires an encrypted request for every application opcode; a
    /// connection with no completed handshake within the handshake timeout
    /// gets `DISCONNECT HANDSHAKE_TIMEOUT`.
    pub fn require_encryption(mut self, required: bool) -> Self {
        self.config.require_encryption = required;
        self
    }

    /// How long a connection may take to complete its handshake when
    /// encryption is required, and one admitted past a connection limit
    /// to resume a session may take to do so (default 10 s).
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.config.handshake_timeout = timeout;
        self
    }

    /// The server-wide handshake budget per second (default 1,000; `None`
    /// for none).
    pub fn max_handshakes_per_second(mut self, budget: Option<u32>) -> Self {
        self.config.max_handshakes_per_second = budget;
        self
    }

    /// How long a peer of a TLS listener may take over its TLS handshake
    /// (default 10 s).
    pub fn tls_handshake_timeout(mut self, timeout: Duration) -> Self {
        self.config.tls_handshake_timeout = timeout;
        self
    }

    /// How long a frame may take to arrive whole from its first byte
    /// (default 10 s).
    pub fn frame_timeout(mut self, timeout: Duration) -> Self {
        self.config.frame_timeout = timeout;
        self
    }

    /// Replies waiting to be written above which the server stops reading
    /// a connection until its peer reads (default 1 MiB).
    pub fn outbound_high_water(mut self, bytes: usize) -> Self {
        self.config.outbound_high_water = bytes;
        self
    }

    /// Connections waiting to be accepted: the listen backlog of the TCP
    /// listeners (default 1,024).
    pub fn listen_backlog(mut self, connections: u32) -> Self {
        self.config.listen_backlog = connections;
        self
    }

    /// The largest frame accepted before a secure session's handshake
    /// completed (default 4 KiB): an unauthenticated peer cannot make the
    /// server buffer a large frame.
    pub fn max_frame_size_before_handshake(mut self, bytes: usize) -> Self {
        self.config.max_frame_size_before_handshake = bytes;
        self
    }

    /// Bytes per second a peer must read while frames wait for it, over
    /// each [`write_timeout`](Self::write_timeout) (default 1,024).
    pub fn min_drain_rate(mut self, bytes_per_second: usize) -> Self {
        self.config.min_drain_rate = bytes_per_second;
        self
    }

    /// How long a closing connection waits for its last frames to be
    /// written and for the peer to close its side (default 2 s).
    pub fn close_linger(mut self, linger: Duration) -> Self {
        self.config.close_linger = linger;
        self
    }

    /// On shutdown, how long running requests may take to finish before
    /// their connections close anyway (default 5 s).
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.config.shutdown_grace = grace;
        self
    }

    /// How long a WebSocket client may take over its HTTP upgrade
    /// (default 10 s).
    pub fn websocket_upgrade_timeout(mut self, timeout: Duration) -> Self {
        self.config.websocket_upgrade_timeout = timeout;
        self
    }

    /// How long a connection to the health listener may take to send its
    /// request and read the answer (default 5 s).
    pub fn health_timeout(mut self, timeout: Duration) -> Self {
        self.config.health_timeout = timeout;
        self
    }

    /// The largest datagram of the datagram channel, sent or received
    /// (default 1,200 bytes).
    pub fn max_datagram_size(mut self, bytes: usize) -> Self {
        self.config.max_datagram_size = bytes;
        self
    }

    /// When a secure session replaces the key of what the server sends
    /// (default: after 65,536 frames or 2 minutes under one key).
    pub fn rekey(mut self, policy: RekeyPolicy) -> Self {
        self.config.rekey = policy;
        self
    }

    /// The UDP port clients are told to send their datagrams to, when it
    /// is not the [`map_udp`](Self::map_udp) listener's own: behind a port
    /// mapping (a container's published port, a NAT rule) or a relay. See
    /// [`ServerConfig::datagram_port`].
    pub fn datagram_port(mut self, port: u16) -> Self {
        self.config.datagram_port = Some(port);
        self
    }

    /// Compresses reply and push bodies of at least `threshold` bytes when
    /// that makes them smaller (contract section 6); `None` (the default)
    /// sends nothing compressed. Compressed frames are always accepted.
    pub fn compression(mut self, threshold: Option<usize>) -> Self {
        self.config.compression = threshold;
        self
    }

    /// Replaces every limit at once (setters called before are undone;
    /// call them after to change a limit of `config`). With feature
    /// `serde`, `config` can come from a settings file.
    pub fn config(mut self, mut config: ServerConfig) -> Self {
        // As the setter: with no request allowed, a connection never reads.
        config.max_requests_in_flight = config.max_requests_in_flight.max(1);
        self.config = config;
        self
    }

    /// The largest frame accepted or sent (default 1 MiB).
    pub fn max_frame_size(mut self, bytes: usize) -> Self {
        self.config.max_frame_size = bytes;
        self
    }

    /// Asynchronous requests one connection may have running (default 1,024).
    pub fn max_requests_in_flight(mut self, requests: usize) -> Self {
        self.config.max_requests_in_flight = requests.max(1);
        self
    }

    /// Streams one connection may have open at once (default 16); one
    /// more is answered `OVERLOADED`.
    pub fn max_streams_per_connection(mut self, streams: usize) -> Self {
        self.config.max_streams_per_connection = streams;
        self
    }

    /// Joins this server to the other nodes of a cluster through
    /// `backplane` (such as `ternio_redis::RedisBackplane`): group
    /// broadcasts, broadcasts, sends and kicks reach the connections of
    /// every node, and connection ids carry the backplane's node id.
    pub fn backplane(mut self, backplane: impl Backplane) -> Self {
        self.backplane = Some(Arc::new(backplane));
        self
    }

    /// Builds the dispatch table and binds every listener.
    ///
    /// Fails on a duplicate opcode (naming both handlers), a handler whose
    /// state is missing, or a listener that cannot bind.
    pub fn build(self) -> Result<Server, BuildError> {
        let mut table = DispatchTable::build(self.controllers, self.discover, &self.state)?;
        #[cfg(feature = "prometheus")]
        let shared_with_health = matches!(
            (&self.prometheus, &self.health),
            (Some(metrics), Some(Ok(health))) if metrics == health
        );
        #[cfg(feature = "prometheus")]
        let (exporter, metrics_page) = match self.prometheus {
            Some(_) if shared_with_health => (None, Some(install_prometheus_page()?)),
            Some(address) => (Some(install_prometheus(address)?), None),
            None => (None, None),
        };
        let metrics = self.metrics.then(|| {
            table.register_metrics();
            Metrics::new()
        });
        tracing::debug!(handlers = table.len(), "dispatch table built");
        let mut listeners = Vec::with_capacity(self.listeners.len());
        for spec in self.listeners {
            let ListenerSpec { address, kind } = spec?;
            let socket = bind(address, self.config.listen_backlog, self.config.reuse_port)
                .map_err(|source| BuildError::Bind { address, source })?;
            listeners.push((socket, kind));
        }
        let health = match self.health {
            Some(address) => {
                let address = address?;
                let socket = bind(address, 64, self.config.reuse_port)
                    .map_err(|source| BuildError::Bind { address, source })?;
                Some(socket)
            }
            None => None,
        };
        let datagrams = match self.udp {
            Some(address) => {
                let address = address?;
                let socket = std::net::UdpSocket::bind(address)
                    .and_then(|socket| {
                        Datagrams::new(
                            socket,
                            self.config.max_datagram_size,
                            self.config.datagram_port,
                        )
                    })
                    .map_err(|source| BuildError::Bind { address, source })?;
                Some(Arc::new(socket))
            }
            None => None,
        };
        let hub = HubShared::new(
            self.config.max_frame_size,
            self.config.compression,
            self.backplane,
            self.presence,
        );
        hub.attach_backplane().map_err(BuildError::Backplane)?;
        let first_id = ConnectionId::new(hub.node_id(), 1);
        let (shutdown, _) = watch::channel(false);
        let admission = Admission::new(&self.config);
        let handshakes = handshake_budget(self.config.max_handshakes_per_second);
        let mut middleware = self.middleware;
        if !self.placed_policies {
            middleware.push(Arc::new(Policies));
        }
        Ok(Server {
            shared: Arc::new(ServerShared {
                table,
                hub,
                config: self.config,
                state: Arc::new(self.state),
                next_id: AtomicU64::new(first_id.0),
                shutdown,
                shutdown_at: OnceLock::new(),
                tasks: TaskTracker::new(),
                identity: self.identity,
                middleware_times: middleware.iter().any(|m| m.uses_elapsed()),
                middleware,
                arounds: self.arounds,
                sessions: Sessions::default(),
                hooks: self.hooks,
                admission: Arc::new(admission),
                metrics,
                handshakes,
                datagrams,
            }),
            #[cfg(feature = "prometheus")]
            exporter,
            #[cfg(feature = "prometheus")]
            metrics_page,
            listeners,
            health,
        })
    }
}

/// The rate limiter of `per_second` handshakes, bursts of as many included.
fn handshake_budget(per_second: Option<u32>) -> Option<governor::DefaultDirectRateLimiter> {
    let per_second = std::num::NonZeroU32::new(per_second?)?;
    Some(governor::RateLimiter::direct(governor::Quota::per_second(
        per_second,
    )))
}

/// A non-blocking listener on `address` with room for `backlog` connections
/// waiting to be accepted (the standard library's 128 is too few for a
/// crowd arriving at once); with `reuse_port`, bound with `SO_REUSEPORT`.
fn bind(address: SocketAddr, backlog: u32, reuse_port: bool) -> io::Result<std::net::TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(address),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    if reuse_port {
        set_reuse_port(&socket)?;
    }
    socket.bind(&address.into())?;
    socket.listen(i32::try_from(backlog).unwrap_or(i32::MAX))?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Sets `SO_REUSEPORT` on `socket`.
#[cfg(all(
    unix,
    not(any(
        target_os = "solaris",
        target_os = "illumos",
        target_os = "cygwin",
        target_os = "nuttx"
    ))
))]
fn set_reuse_port(socket: &socket2::Socket) -> io::Result<()> {
    socket.set_reuse_port(true)
}

/// `SO_REUSEPORT` does not exist here: an error.
#[cfg(not(all(
    unix,
    not(any(
        target_os = "solaris",
        target_os = "illumos",
        target_os = "cygwin",
        target_os = "nuttx"
    ))
)))]
fn set_reuse_port(_socket: &socket2::Socket) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "SO_REUSEPORT is not available on this platform",
    ))
}

/// Installs the Prometheus recorder globally; returns its HTTP endpoint's future.
#[cfg(feature = "prometheus")]
fn install_prometheus(address: SocketAddr) -> Result<PrometheusExporter, BuildError> {
    let (recorder, exporter) = crate::metrics::prometheus_builder()
        .map_err(|error| BuildError::Metrics(error.to_string()))?
        .with_http_listener(address)
        .build()
        .map_err(|error| BuildError::Metrics(error.to_string()))?;
    metrics::set_global_recorder(recorder)
        .map_err(|error| BuildError::Metrics(error.to_string()))?;
    Ok(exporter)
}

/// Installs the Prometheus recorder globally without a listener of its
/// own; returns its handle, which renders the page the health listener
/// serves at `/metrics`.
#[cfg(feature = "prometheus")]
fn install_prometheus_page() -> Result<metrics_exporter_prometheus::PrometheusHandle, BuildError> {
    let recorder = crate::metrics::prometheus_builder()
        .map_err(|error| BuildError::Metrics(error.to_string()))?
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder)
        .map_err(|error| BuildError::Metrics(error.to_string()))?;
    Ok(handle)
}
