//! The [`Client`] handle.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ternio_protocol::datagram::SealError;
use ternio_protocol::frame::{Flags, Header};
use ternio_protocol::system::{self, DatagramBinding, ErrorBody, Ping, Pong};
use ternio_protocol::{Decode, Frame, FrameError, Packet, Request, Response};
use tokio::net::ToSocketAddrs;
use tokio::sync::watch;

use crate::clock::ClockEstimate;
use crate::config::ClientConfig;
use crate::datagrams::Route;
use crate::endpoint::Endpoint;
use crate::error::{ClientError, CloseReason};
use crate::push::{Subscription, SubscriptionGuard};
use crate::secure::Seal;
use crate::shared::Shared;
use crate::state::ConnectionState;
use crate::state::SessionEvent;
use crate::stream::{Connector, DynConnector};
use crate::supervisor::supervise;
use crate::sync::lock;
use crate::tasks::TaskSet;
use crate::time_sync;
#[cfg(feature = "tls")]
use crate::tls::{ClientTls, TlsConnector};
use crate::ws;

/// How many times [`Client::bind_datagrams`] asks again when the
/// connection changed while it bound.
const BIND_ATTEMPTS: u32 = 3;

/// How long [`Client::close`] waits for its last frames to leave (and, on
/// WebSocket, for the server's Close frame).
const CLOSE_LINGER: Duration = Duration::from_secs(2);

/// A connection to a Ternio server, over TCP, WebSocket or any byte stream
/// ([`connect_stream`](Self::connect_stream)): the same API for all. Cheap to clone; every clone shares the connection, which closes
/// when the last clone is dropped or on [`close`](Self::close).
///
/// With [`ClientConfig::reconnect`] set, a lost connection is re-established
/// in the background (see [`ReconnectPolicy`](crate::ReconnectPolicy));
/// [`state`](Self::state) and [`state_changes`](Self::state_changes) tell
/// where it stands.
///
/// A secure session ([`handshake`](Self::handshake), or
/// [`ClientConfig::secure`] to run it on connect) seals requests and their
/// answers; the server's pushes arrive through [`subscribe`](Self::subscribe)
/// and [`on`](Self::on).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    /// Where the server's UDP listener is, for a datagram channel: the
    /// TCP address's host, or the WebSocket URL's (`host:port`); `None`
    /// for a stream the application opened.
    datagram_host: Option<String>,
    /// The supervisor, which owns the current link's tasks (aborting it
    /// aborts them), and the task that times requests out.
    _tasks: TaskSet,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("state", &self.state())
            .field("secure", &self.is_secure())
            .finish_non_exhaustive()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shared.finish(CloseReason::Local);
    }
}

impl Client {
    /// Connects over TCP with the default [`ClientConfig`].
    pub async fn connect_tcp(address: impl ToSocketAddrs) -> Result<Self, ClientError> {
        Self::connect_tcp_with(address, ClientConfig::default()).await
    }

    /// Connects over TCP with `config`.
    ///
    /// `address` is resolved once, here; reconnecting goes to the addresses
    /// it resolved to.
    pub async fn connect_tcp_with(
        address: impl ToSocketAddrs,
        config: ClientConfig,
    ) -> Result<Self, ClientError> {
        let timeout = config.connect_timeout;
        let addresses = tokio::time::timeout(timeout, tokio::net::lookup_host(address))
            .await
            .map_err(|_| ClientError::Timeout(timeout))?
            .map_err(ClientError::Connect)?
            .collect();
        Self::connect(Endpoint::Tcp(addresses), config).await
    }

    /// Connects over WebSocket with the default [`ClientConfig`].
    ///
    /// `url` is a `ws://host:port/path` URL, or with the `tls` feature (on
    /// by default) a `wss://host:port/path` one, whose server certificate
    /// must check out against the system's root certificates (for a
    /// private CA, see [`connect_wss_with`](Self::connect_wss_with)). The
    /// client offers the subprotocol `ternio.v2` and fails with
    /// [`ClientError::Subprotocol`] unless the server selects it. Each
    /// frame travels as one binary message.
    pub async fn connect_ws(url: &str) -> Result<Self, ClientError> {
        Self::connect_ws_with(url, ClientConfig::default()).await
    }

    /// Connects over WebSocket with `config`. See [`connect_ws`](Self::connect_ws).
    pub async fn connect_ws_with(url: &str, config: ClientConfig) -> Result<Self, ClientError> {
        // A bad URL is reported as such, not as a failed connection.
        ws::request_for(url)?;
        Self::connect(Endpoint::Ws(url.to_owned(), None), config).await
    }

    /// Connects to a `wss://host:port/path` URL with `config`, trusting
    /// what `tls` trusts (feature `tls`): a server whose certificate a
    /// private CA signed. A certificate that does not check out fails with
    /// [`ClientError::Connect`] and rustls' reason. A secure session
    /// ([`ClientConfig::secure`]) runs inside TLS as over `ws://`.
    #[cfg(feature = "tls")]
    pub async fn connect_wss_with(
        url: &str,
        tls: &ClientTls,
        config: ClientConfig,
    ) -> Result<Self, ClientError> {
        let request = ws::request_for(url)?;
        if request.uri().scheme_str() != Some("wss") {
            return Err(ClientError::InvalidUrl(format!("{url}: not a wss:// URL")));
        }
        Self::connect(Endpoint::Ws(url.to_owned(), Some(tls.clone())), config).await
    }

    /// Connects over TLS to `address` (`host:port`) with the default
    /// [`ClientConfig`], trusting what `tls` trusts (feature `tls`). See
    /// [`connect_tls_with`](Self::connect_tls_with).
    #[cfg(feature = "tls")]
    pub async fn connect_tls(address: &str, tls: &ClientTls) -> Result<Self, ClientError> {
        Self::connect_tls_with(address, tls, ClientConfig::default()).await
    }

    /// Connects over TLS to `address` (`host:port`, the host checked
    /// against the server's certificate) with `config`: length-prefixed
    /// frames inside TLS, as a server's `map_tcp_tls` listener serves them
    /// (feature `tls`). A [`TlsConnector`] given to
    /// [`connect_stream_with`](Self::connect_stream_with); every
    /// reconnection runs a new TLS handshake. A secure session
    /// ([`ClientConfig::secure`]) runs inside TLS as over plain TCP.
    ///
    /// A server certificate that does not check out fails with
    /// [`ClientError::Connect`] and rustls' reason (`invalid peer
    /// certificate: UnknownIssuer`, `NotValidForName`...).
    #[cfg(feature = "tls")]
    pub async fn connect_tls_with(
        address: &str,
        tls: &ClientTls,
        config: ClientConfig,
    ) -> Result<Self, ClientError> {
        let connector = TlsConnector::new(address, tls)?;
        Self::connect_stream_with(connector, config).await
    }

    /// Connects over a byte stream that `connector` opens, with the default
    /// [`ClientConfig`]. See [`connect_stream_with`](Self::connect_stream_with).
    pub async fn connect_stream(connector: impl Connector) -> Result<Self, ClientError> {
        Self::connect_stream_with(connector, ClientConfig::default()).await
    }

    /// Connects over a byte stream that `connector` opens (any
    /// `AsyncRead + AsyncWrite + Send + Unpin + 'static`: a Unix socket, a
    /// TLS stream, an in-memory pipe), with `config`.
    ///
    /// Frames travel as over TCP, each behind its length (contract section
    /// 1.1); whatever the stream does underneath (encryption, tunnelling)
    /// is its own business. Everything else is as over TCP: requests,
    /// pushes, secure sessions, the keepalive. `connector` is called for
    /// the first connection and again for every reconnection (with
    /// [`ClientConfig::reconnect`]), each call bounded by
    /// [`ClientConfig::connect_timeout`]; its error fails the connection
    /// (or the attempt) with [`ClientError::Connect`]. When the link ends,
    /// the client drops the stream (after shutting its writing down, on
    /// [`close`](Self::close)).
    ///
    /// For plain TCP, [`connect_tcp_with`](Self::connect_tcp_with) reads
    /// and writes the socket directly; this is for the other streams. Any
    /// closure that returns a future of `io::Result<stream>` is a
    /// [`Connector`]:
    ///
    /// ```no_run
    /// use std::net::SocketAddr;
    ///
    /// use ternio_client::{Client, ClientConfig, ReconnectPolicy};
    /// use tokio::net::TcpSocket;
    ///
    /// # async fn run() -> Result<(), ternio_client::ClientError> {
    /// let server: SocketAddr = "10.0.0.7:7001".parse().unwrap();
    /// let local: SocketAddr = "10.0.0.2:0".parse().unwrap();
    /// // Every connection, the first and each reconnection, leaves from `local`.
    /// let connector = move || async move {
    ///     let socket = TcpSocket::new_v4()?;
    ///     socket.bind(local)?;
    ///     socket.connect(server).await
    /// };
    /// let mut config = ClientConfig::default();
    /// config.reconnect = Some(ReconnectPolicy::default());
    /// let client = Client::connect_stream_with(connector, config).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect_stream_with(
        connector: impl Connector,
        config: ClientConfig,
    ) -> Result<Self, ClientError> {
        Self::connect(Endpoint::Stream(Box::new(connector)), config).await
    }

    /// [`connect_stream_with`](Self::connect_stream_with) with a connector
    /// boxed already (by the builder).
    pub(crate) async fn connect_boxed_stream(
        connector: Box<dyn DynConnector>,
        config: ClientConfig,
    ) -> Result<Self, ClientError> {
        Self::connect(Endpoint::Stream(connector), config).await
    }

    async fn connect(endpoint: Endpoint, config: ClientConfig) -> Result<Self, ClientError> {
        let timeout = config.connect_timeout;
        let datagram_host = endpoint.host();
        let shared = Arc::new(Shared::new(config));
        let opened = tokio::time::timeout(timeout, endpoint.open(&shared))
            .await
            .map_err(|_| ClientError::Timeout(timeout))??;
        // With `ClientConfig::secure`, nothing goes out before the handshake.
        if let Err(error) = shared.secure_new_link(&opened.link).await {
            opened.link.shutdown();
            return Err(error);
        }
        shared.ask_ticket(&opened.link);
        if !shared.install(&opened.link, 0) {
            let reason = opened
                .link
                .lost_reason()
                .cloned()
                .unwrap_or(CloseReason::PeerClosed);
            return Err(ClientError::Closed(reason));
        }
        let supervisor = tokio::spawn(supervise(Arc::clone(&shared), endpoint, opened));
        let expiry = tokio::spawn(Arc::clone(&shared).expire_requests());
        let mut tasks = vec![supervisor, expiry];
        if let Some(interval) = shared.config().clock_sync {
            tasks.push(tokio::spawn(time_sync::keep_synced(
                Arc::clone(&shared),
                interval,
            )));
        }
        Ok(Self {
            inner: Arc::new(Inner {
                shared,
                datagram_host,
                _tasks: TaskSet::new(tasks),
            }),
        })
    }

    fn shared(&self) -> &Shared {
        &self.inner.shared
    }

    pub(crate) fn shared_arc(&self) -> &Arc<Shared> {
        &self.inner.shared
    }

    /// Watches what becomes of the session across lost connections: with
    /// [`ClientConfig::resume`] and a reconnect policy, each reconnection
    /// either resumes it ([`SessionEvent::Resumed`]: the requests in flight
    /// get their answers, the pushes sent meanwhile arrive, once each) or
    /// starts a new one ([`SessionEvent::Lost`]).
    pub fn session_events(&self) -> tokio::sync::watch::Receiver<SessionEvent> {
        self.shared().session_events()
    }

    /// Sends `request` and waits for its response, up to the default timeout.
    ///
    /// The response's type is the one `Req` declares with
    /// `#[packet(..., response = T)]`: the packet its handler answers with,
    /// or `()` for an acknowledgement. A handler's error comes back as
    /// [`ClientError::Remote`] with its code.
    ///
    /// ```no_run
    /// use ternio_client::{Client, Packet};
    ///
    /// #[derive(Packet)]
    /// #[packet(opcode = 0x0010, response = Sum)]
    /// struct Add {
    ///     a: i32,
    ///     b: i32,
    /// }
    ///
    /// #[derive(Packet)]
    /// #[packet(opcode = 0x0011)]
    /// struct Sum {
    ///     total: i32,
    /// }
    ///
    /// #[derive(Packet)]
    /// #[packet(opcode = 0x0103, response = ())]
    /// struct Leave;
    ///
    /// # async fn run(client: Client) -> Result<(), ternio_client::ClientError> {
    /// let sum = client.request_async(&Add { a: 2, b: 3 }).await?;
    /// assert_eq!(sum.total, 5);
    /// client.request_async(&Leave).await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Acknowledgements
    ///
    /// A handler that returns `()` (or `Result<(), E>`) answers with an
    /// acknowledgement: a `RESPONSE` with the request's own opcode and an
    /// empty body, once it has run. Its packet declares `response = ()`.
    ///
    /// # Security and reconnection
    ///
    /// Once the connection's secure session is up, the request is sealed,
    /// and so is its answer. Once the application asked for a secure
    /// session ([`ClientConfig::secure`] or [`handshake`](Self::handshake)),
    /// a connection without one (its handshake failed) refuses the request
    /// with [`ClientError::NotSecure`] instead of sending it plain. While a
    /// handshake waits for its answer, the request waits for it.
    ///
    /// While the client reconnects, the request waits for the new
    /// connection within its timeout. If the connection is lost while the
    /// request is in flight, it fails with [`ClientError::Closed`]: the
    /// server may or may not have run it.
    pub async fn request_async<Req: Request>(
        &self,
        request: &Req,
    ) -> Result<Req::Response, ClientError> {
        self.request_with_timeout(request, self.shared().config().request_timeout)
            .await
    }

    /// [`request_async`](Self::request_async) with its own timeout.
    pub async fn request_with_timeout<Req: Request>(
        &self,
        request: &Req,
        timeout: Duration,
    ) -> Result<Req::Response, ClientError> {
        self.call(request, timeout, Seal::Auto).await
    }

    /// Sends `request` sealed and waits for its (sealed) response, up to the
    /// default timeout. Fails with [`ClientError::NotSecure`] when the
    /// connection has no secure session, even before the application asked
    /// for one. Otherwise as [`request_async`](Self::request_async).
    pub async fn request_sealed<Req: Request>(
        &self,
        request: &Req,
    ) -> Result<Req::Response, ClientError> {
        let timeout = self.shared().config().request_timeout;
        self.call(request, timeout, Seal::Required).await
    }

    /// [`request_async`](Self::request_async) for a packet that declares no
    /// response (one from a crate that does not): the caller names the
    /// response type, `Resp`, a packet or `()`, as in
    /// `client.request_as::<Sum>(&add)`. A reply of another type fails with
    /// [`ClientError::UnexpectedResponse`] at run time, which a declared
    /// response rules out at compile time: prefer `response = ...`.
    pub async fn request_as<Resp: Response>(
        &self,
        request: &impl Packet,
    ) -> Result<Resp, ClientError> {
        let timeout = self.shared().config().request_timeout;
        self.call(request, timeout, Seal::Auto).await
    }

    async fn call<Req: Packet, Resp: Response>(
        &self,
        request: &Req,
        timeout: Duration,
        seal: Seal,
    ) -> Result<Resp, ClientError> {
        let frame = self
            .shared()
            .call_compressing(Req::OPCODE, request, timeout, seal, Req::COMPRESS)
            .await?;
        Ok(Resp::from_response(
            frame.header.opcode,
            &success(frame)?.body,
            Req::OPCODE,
        )?)
    }

    /// Sends `packet` with no reply expected (request id 0). Returns once the
    /// frame is queued; a server-side error is only logged. While the client
    /// reconnects it fails at once with [`ClientError::Reconnecting`]: the
    /// packet is not kept for later. Sealed once the secure session is up;
    /// refused as [`request_async`](Self::request_async) says, and with
    /// [`ClientError::HandshakeInProgress`] while a handshake waits for its
    /// answer.
    pub fn send<P: Packet>(&self, packet: &P) -> Result<(), ClientError> {
        self.shared().send(
            Header::new(P::OPCODE, Flags::NONE, 0),
            packet,
            Seal::Auto,
            P::COMPRESS,
        )
    }

    /// [`send`](Self::send), refused with [`ClientError::NotSecure`]
    /// without a secure session even before the application asked for one.
    pub fn send_sealed<P: Packet>(&self, packet: &P) -> Result<(), ClientError> {
        self.shared().send(
            Header::new(P::OPCODE, Flags::NONE, 0),
            packet,
            Seal::Required,
            P::COMPRESS,
        )
    }

    /// Runs the secure handshake of contract section 5 on the connection:
    /// `Noise_NK` when `pin` is the server's public key (only that server
    /// can complete it), `Noise_NN` (anonymous: no protection against an
    /// active man in the middle) without one. Waits for a connection while
    /// the client reconnects; bounded by [`ClientConfig::request_timeout`].
    ///
    /// Afterwards every frame in both directions is sealed (contract v2):
    /// a plain frame from the server, even a `DISCONNECT`, closes the
    /// connection as [`CloseReason::DecryptFailed`](crate::CloseReason::DecryptFailed),
    /// and the reconnect policy applies. With a reconnect policy, every new
    /// connection runs the same handshake before it carries requests. From
    /// the moment this is called, nothing goes out plain: if the handshake
    /// fails, requests fail with [`ClientError::NotSecure`].
    ///
    /// Errors: [`ClientError::KeyRejected`] when the server refuses an `NK`
    /// handshake (the pinned key is not its key, or it has no identity);
    /// [`ClientError::Handshake`] for any other failure;
    /// [`ClientError::HandshakeAlreadyRan`] when the session is secure
    /// already or this connection had a handshake (a connection allows one,
    /// even a failed one). After a refusal the connection stays up, plain.
    pub async fn handshake(&self, pin: Option<&[u8; 32]>) -> Result<(), ClientError> {
        self.shared().handshake(pin.copied()).await
    }

    /// Whether the current connection has a secure session up: requests can
    /// be sealed.
    pub fn is_secure(&self) -> bool {
        self.shared().is_secure()
    }

    /// Binds a datagram channel to the secure session (docs/PROTOCOL.md
    /// section 4.4): asks the server with `DATAGRAM_BIND`, opens a UDP
    /// socket to its listener (on the host the client connected to) and
    /// tells the server where it is. From then on,
    /// [`send_unreliable`](Self::send_unreliable) sends datagrams, and the
    /// server's datagrams (its `#[packet(unreliable)]` pushes) reach the
    /// same subscriptions as its other pushes, possibly lost, repeated
    /// (dropped) or out of order. Returns the server's UDP address.
    ///
    /// Errors: [`ClientError::NotSecure`] without a secure session;
    /// [`ClientError::Remote`] with `UNKNOWN_OPCODE` when the server has no
    /// UDP listener; [`ClientError::Connect`] when the socket cannot be
    /// opened or the host not resolved. Binding again replaces the channel;
    /// concurrent binds run one after the other. The channel's keys come
    /// from the session secret of the connection the request went on: if
    /// the connection changed before the answer (a reconnection), it binds
    /// again on the new one (three tries in all, then
    /// [`ClientError::Connect`]).
    /// A new session after a lost connection (not a resumed one) drops the
    /// channel: bind again then. Browsers have no UDP: the browser client
    /// stays on the stream.
    pub async fn bind_datagrams(&self) -> Result<SocketAddr, ClientError> {
        let shared = self.shared();
        if !shared.is_secure() {
            return Err(ClientError::NotSecure);
        }
        let host = self.inner.datagram_host.clone().ok_or_else(|| {
            ClientError::Connect(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "a client over a stream of the application's does not know the server's host",
            ))
        })?;
        // One bind at a time: two would interleave their requests and
        // installs, and leave the channel of the binding the server replaced.
        let _binding = shared.datagram_bind.lock().await;
        let ip = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => ip,
            Err(_) => tokio::net::lookup_host(&host)
                .await
                .map_err(ClientError::Connect)?
                .next()
                .map(|address| address.ip())
                .ok_or_else(|| {
                    ClientError::Connect(std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!("{host} resolves to no address"),
                    ))
                })?,
        };
        let timeout = shared.config().request_timeout;
        let mut attempt = 0;
        loop {
            attempt += 1;
            // The secret of the link the request goes on, read before: the
            // server derives the binding's keys from its session then.
            let link = shared.links().current()?;
            let secret = link.session_secret().ok_or(ClientError::NotSecure)?;
            let frame = shared
                .call(system::DATAGRAM_BIND, &(), timeout, Seal::Required)
                .await?;
            let frame = success(frame)?;
            let binding = DatagramBinding::decode_body(&frame.body)
                .map_err(|error| ClientError::UnexpectedResponse(error.into()))?;
            let channel =
                crate::datagrams::Channel::open(&binding, &secret[..], ip, shared.pushes()).await?;
            let server = channel.server;
            {
                let mut slot = lock(&shared.datagrams);
                // Still the link whose secret keys the channel: install it
                // (a new session after this clears it).
                if shared
                    .links()
                    .current()
                    .is_ok_and(|current| Arc::ptr_eq(&current, &link))
                {
                    *slot = Some(channel);
                    return Ok(server);
                }
            }
            // The link changed meanwhile (a reconnection): the answer may
            // belong to another session's secret. Bind again on the new one.
            if attempt == BIND_ATTEMPTS {
                return Err(ClientError::Connect(std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "the connection changed while the datagram channel was bound",
                )));
            }
        }
    }

    /// Whether a datagram channel is bound ([`bind_datagrams`](Self::bind_datagrams)).
    pub fn has_datagrams(&self) -> bool {
        lock(&self.shared().datagrams).is_some()
    }

    /// Sends `packet` (request id 0, no reply) in a datagram when a
    /// datagram channel is bound, on the stream (as [`send`](Self::send))
    /// otherwise; says which. A datagram may be lost. One that would be
    /// larger than the server's largest datagram is refused with
    /// [`ClientError::FrameTooLarge`].
    pub fn send_unreliable<P: Packet>(&self, packet: &P) -> Result<Route, ClientError> {
        let channel = lock(&self.shared().datagrams).clone();
        match channel {
            Some(channel) => match channel.send(P::OPCODE, packet) {
                Ok(()) => Ok(Route::Datagram),
                Err(SealError::TooLarge { size, max }) => {
                    Err(ClientError::FrameTooLarge(FrameError::TooLarge {
                        len: size,
                        max,
                    }))
                }
                Err(error) => Err(ClientError::Connect(std::io::Error::other(error))),
            },
            None => self.send(packet).map(|()| Route::Stream),
        }
    }

    /// Subscribes to the server's pushes of `P`, with a buffer of
    /// [`ClientConfig::push_buffer`] pushes. See [`Subscription`].
    pub fn subscribe<P: Packet>(&self) -> Subscription<P> {
        self.subscribe_with_buffer(self.shared().config().push_buffer)
    }

    /// [`subscribe`](Self::subscribe) with a buffer of `buffer` pushes (at
    /// least 1).
    pub fn subscribe_with_buffer<P: Packet>(&self, buffer: usize) -> Subscription<P> {
        self.shared().pushes().subscribe(buffer)
    }

    /// Calls `callback` with each push of `P`, until the returned guard is
    /// dropped. The callback runs on the connection's reader task, before
    /// the next frame is read: it must be quick and must not block (hand
    /// longer work to a task or a channel). A callback that panics is
    /// caught and logged; the connection goes on. A push that does not
    /// decode as `P` is counted in [`SubscriptionGuard::undecodable`].
    ///
    /// A callback that holds a clone of this client keeps the client open
    /// for as long as the guard lives: drop the guard to let it go.
    pub fn on<P: Packet>(&self, callback: impl Fn(P) + Send + Sync + 'static) -> SubscriptionGuard {
        self.shared().pushes().on(callback)
    }

    /// Sends a `PING` and returns the round-trip time when its `PONG` arrives.
    pub async fn ping(&self) -> Result<Duration, ClientError> {
        let value = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos() as u64);
        let started = Instant::now();
        let timeout = self.shared().config().request_timeout;
        let frame = self
            .shared()
            .call(system::PING, &Ping { value }, timeout, Seal::Auto)
            .await?;
        let frame = success(frame)?;
        let pong = Pong::from_response(frame.header.opcode, &frame.body, system::PING)?;
        if pong.value != value {
            return Err(ternio_protocol::DecodeError::Invalid(
                "PONG carries another value than the PING",
            )
            .into());
        }
        Ok(started.elapsed())
    }

    /// Estimates the server's clock: five `TIME` exchanges (docs/PROTOCOL.md
    /// section 4.3), one after the other, each bounded by
    /// [`ClientConfig::request_timeout`]; their samples join the last ones
    /// (eight are kept) and the estimate comes from the one with the
    /// smallest round trip. Fails with the first exchange that fails (a
    /// server older than `TIME` answers [`ClientError::Remote`] with
    /// [`ErrorCode::UnknownOpcode`](crate::ErrorCode::UnknownOpcode)); the
    /// samples taken before it stay. With [`ClientConfig::clock_sync`] the
    /// client does this by itself.
    pub async fn sync_clock(&self) -> Result<ClockEstimate, ClientError> {
        time_sync::sync(self.shared()).await
    }

    /// The server's clock now, by the estimate: the client's clock plus
    /// the estimated offset; `None` before any sample
    /// ([`sync_clock`](Self::sync_clock), or [`ClientConfig::clock_sync`]).
    /// Off by at most half the round trip of the sample used, plus what the
    /// two clocks drifted since. The client's clock here is its wall clock
    /// when the client started, moved on by a monotonic clock: a step of
    /// the local wall clock (someone setting it) does not move it.
    pub fn server_time(&self) -> Option<SystemTime> {
        self.shared().clock().server_time()
    }

    /// What the client knows of the server's clock: the offset, the round
    /// trip it was measured with, and the samples held; `None` before any.
    pub fn clock_estimate(&self) -> Option<ClockEstimate> {
        self.shared().clock().estimate()
    }

    /// Sends `DISCONNECT NORMAL`, waits briefly for it to leave (on
    /// WebSocket, then completes the close handshake: a Close frame with
    /// code 1000 and the server's answer), and closes. Pending requests fail
    /// with [`ClientError::Closed`]. The client never reconnects after this;
    /// called while it reconnects, it stops the attempts. The state becomes
    /// `Closed(CloseReason::Local)`.
    pub async fn close(&self) {
        self.shared().close(CLOSE_LINGER).await;
    }

    /// Why the client closed for good, or `None` while it is connected or
    /// reconnecting.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.shared().close_reason()
    }

    /// Where the connection stands now.
    pub fn state(&self) -> ConnectionState {
        self.shared().state()
    }

    /// A receiver of the connection's state, which changes in the order
    /// described on [`ConnectionState`]. A watch channel holds the latest
    /// state only: an observer that does not keep up sees the latest, in
    /// order, not every intermediate one.
    pub fn state_changes(&self) -> watch::Receiver<ConnectionState> {
        self.shared().state_changes()
    }

    /// Pushes the server sent that nobody was subscribed to (they are
    /// counted and dropped), over every connection this client had.
    pub fn unhandled_pushes(&self) -> u64 {
        self.shared().pushes().unhandled()
    }

    /// Pushes that at least one subscriber of their opcode could not decode
    /// as its packet type (counted once per push, however many subscribers
    /// failed; each [`Subscription::undecodable`] counts its own), over
    /// every connection this client had. Such a push is dropped for those
    /// subscribers; the others still get it.
    pub fn undecodable_pushes(&self) -> u64 {
        self.shared().pushes().undecodable()
    }
}

/// The frame, unless it carries an error: then the error.
pub(crate) fn success(frame: Frame) -> Result<Frame, ClientError> {
    if frame.header.flags.is_error() {
        let error = ErrorBody::parse(&frame.body)?;
        return Err(ClientError::Remote {
            code: error.code,
            message: error.message,
        });
    }
    Ok(frame)
}
