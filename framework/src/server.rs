//! The server: running it, its listeners, and its handle.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::task::AbortOnDropHandle;

use crate::health;
use crate::hub::Hub;
use crate::shared::ServerShared;
use crate::transport;
#[cfg(feature = "tls")]
use crate::transport::tls::TlsConfig;

/// What a listener speaks.
#[derive(Clone)]
pub(crate) enum ListenerKind {
    Tcp,
    WebSocket {
        path: Arc<str>,
    },
    /// Length-prefixed frames inside TLS.
    #[cfg(feature = "tls")]
    TcpTls {
        tls: TlsConfig,
    },
    /// WebSocket inside TLS (`wss://`).
    #[cfg(feature = "tls")]
    WebSocketTls {
        path: Arc<str>,
        tls: TlsConfig,
    },
}

impl ListenerKind {
    /// How the listener appears in logs and `Debug`: `tcp`, `ws /path`,
    /// `tcp+tls`, `wss /path`.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Tcp => "tcp".to_owned(),
            Self::WebSocket { path } => format!("ws {path}"),
            #[cfg(feature = "tls")]
            Self::TcpTls { .. } => "tcp+tls".to_owned(),
            #[cfg(feature = "tls")]
            Self::WebSocketTls { path, .. } => format!("wss {path}"),
        }
    }
}

/// A built server with its listeners bound. [`run`](Self::run) serves.
pub struct Server {
    pub(crate) shared: Arc<ServerShared>,
    pub(crate) listeners: Vec<(std::net::TcpListener, ListenerKind)>,
    /// The health listener, if [`ServerBuilder::health`](crate::ServerBuilder::health) asked for one.
    pub(crate) health: Option<std::net::TcpListener>,
    /// The Prometheus endpoint's task, started by `run`.
    #[cfg(feature = "prometheus")]
    pub(crate) exporter: Option<PrometheusExporter>,
    /// The Prometheus recorder's handle when the health listener serves
    /// `/metrics` (the two addresses are the same).
    #[cfg(feature = "prometheus")]
    pub(crate) metrics_page: Option<metrics_exporter_prometheus::PrometheusHandle>,
}

/// The Prometheus endpoint's future.
#[cfg(feature = "prometheus")]
pub(crate) type PrometheusExporter = metrics_exporter_prometheus::ExporterFuture;

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let listeners: Vec<String> = self
            .listeners
            .iter()
            .map(|(socket, kind)| match socket.local_addr() {
                Ok(address) => format!("{} {address}", kind.describe()),
                Err(_) => kind.describe(),
            })
            .collect();
        f.debug_struct("Server")
            .field("listeners", &listeners)
            .field("health", &self.health_addr())
            .finish_non_exhaustive()
    }
}

impl Server {
    /// The addresses the TCP listeners are bound to, in `map_tcp` order.
    pub fn tcp_addrs(&self) -> Vec<SocketAddr> {
        self.addrs(|kind| matches!(kind, ListenerKind::Tcp))
    }

    /// The addresses the WebSocket listeners are bound to, in `map_websocket` order.
    pub fn websocket_addrs(&self) -> Vec<SocketAddr> {
        self.addrs(|kind| matches!(kind, ListenerKind::WebSocket { .. }))
    }

    /// The address the UDP listener of datagram channels is bound to, if
    /// there is one ([`ServerBuilder::map_udp`](crate::ServerBuilder::map_udp)).
    pub fn udp_addr(&self) -> Option<SocketAddr> {
        self.shared
            .datagrams
            .as_ref()
            .map(|datagrams| datagrams.local_addr())
    }

    /// The address the health listener is bound to, if there is one
    /// ([`ServerBuilder::health`](crate::ServerBuilder::health)).
    pub fn health_addr(&self) -> Option<SocketAddr> {
        self.health.as_ref()?.local_addr().ok()
    }

    /// The addresses the TLS listeners of frames are bound to, in
    /// `map_tcp_tls` order.
    #[cfg(feature = "tls")]
    pub fn tcp_tls_addrs(&self) -> Vec<SocketAddr> {
        self.addrs(|kind| matches!(kind, ListenerKind::TcpTls { .. }))
    }

    /// The addresses the `wss://` listeners are bound to, in
    /// `map_websocket_tls` order.
    #[cfg(feature = "tls")]
    pub fn websocket_tls_addrs(&self) -> Vec<SocketAddr> {
        self.addrs(|kind| matches!(kind, ListenerKind::WebSocketTls { .. }))
    }

    fn addrs(&self, wanted: impl Fn(&ListenerKind) -> bool) -> Vec<SocketAddr> {
        self.listeners
            .iter()
            .filter(|(_, kind)| wanted(kind))
            .filter_map(|(listener, _)| listener.local_addr().ok())
            .collect()
    }

    /// A handle that shuts the server down from elsewhere.
    pub fn handle(&self) -> ServerHandle {
        ServerHandle {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Serves until [`ServerHandle::shutdown`] is called, then drains:
    /// the listeners stop accepting (and `/readyz` answers 503), every
    /// connection answers the requests it is running (within the shutdown
    /// grace), gets `DISCONNECT SHUTDOWN` and closes; `run` returns once
    /// every connection's task has ended, or at the drain bound (the
    /// shutdown grace plus the close linger) with the stragglers left to
    /// the runtime. Must run inside a tokio runtime.
    pub async fn run(self) -> io::Result<()> {
        #[cfg(feature = "prometheus")]
        if let Some(exporter) = self.exporter {
            tokio::spawn(async move {
                if let Err(error) = exporter.await {
                    tracing::error!(?error, "the Prometheus endpoint stopped");
                }
            });
        }
        let mut loops = Vec::with_capacity(self.listeners.len());
        for (listener, kind) in self.listeners {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            let address = listener.local_addr()?;
            let shared = Arc::clone(&self.shared);
            loops.push(match kind {
                ListenerKind::Tcp => {
                    tracing::info!(%address, "listening (tcp)");
                    tokio::spawn(transport::tcp::serve_listener(listener, shared))
                }
                ListenerKind::WebSocket { path } => {
                    tracing::info!(%address, %path, "listening (websocket)");
                    tokio::spawn(transport::websocket::serve_listener(listener, shared, path))
                }
                #[cfg(feature = "tls")]
                ListenerKind::TcpTls { tls } => {
                    tracing::info!(%address, "listening (tcp, tls)");
                    tokio::spawn(transport::tls::serve_listener(listener, shared, tls, None))
                }
                #[cfg(feature = "tls")]
                ListenerKind::WebSocketTls { path, tls } => {
                    tracing::info!(%address, %path, "listening (websocket, tls)");
                    let path = Some(path);
                    tokio::spawn(transport::tls::serve_listener(listener, shared, tls, path))
                }
            });
        }
        let _datagrams = match &self.shared.datagrams {
            Some(datagrams) => {
                let shutdown = self.shared.shutdown.subscribe();
                let datagrams = Arc::clone(datagrams);
                Some(AbortOnDropHandle::new(tokio::spawn(async move {
                    if let Err(error) = datagrams.run(shutdown).await {
                        tracing::error!(%error, "the UDP listener stopped");
                    }
                })))
            }
            None => None,
        };
        // Answers probes through the drain (`/readyz`: 503), and stops
        // when `run` returns (or is dropped).
        #[cfg(feature = "prometheus")]
        let (metrics_page, _upkeep) = match self.metrics_page {
            Some(handle) => {
                // What the exporter's own listener would do: drain the
                // histograms every 5 s, scraped or not.
                let upkeep = handle.clone();
                let task = AbortOnDropHandle::new(tokio::spawn(async move {
                    loop {
                        let next = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
                        crate::keeper::sleep_until(next).await;
                        upkeep.run_upkeep();
                    }
                }));
                let page: health::MetricsPage = Arc::new(move || handle.render());
                (Some(page), Some(task))
            }
            None => (None, None),
        };
        #[cfg(not(feature = "prometheus"))]
        let metrics_page = None;
        let _health = match self.health {
            Some(listener) => {
                let listener = tokio::net::TcpListener::from_std(listener)?;
                let address = listener.local_addr()?;
                if metrics_page.is_some() {
                    tracing::info!(%address, "health endpoints: /healthz, /readyz, /metrics");
                } else {
                    tracing::info!(%address, "health endpoints: /healthz, /readyz");
                }
                let shared = Arc::clone(&self.shared);
                Some(AbortOnDropHandle::new(tokio::spawn(
                    health::serve_listener(listener, shared, metrics_page),
                )))
            }
            None => None,
        };
        // (A server without listeners serves the streams handed to its
        // handle until it shuts down.)
        let _ = self.shared.shutdown_signal().wait_for(|stop| *stop).await;
        tracing::info!(
            connections = self.shared.open_connections(),
            "shutting down: draining the connections"
        );
        for accept_loop in loops {
            let _ = accept_loop.await;
        }
        if self.shared.drained().await {
            tracing::info!("shut down: every connection closed");
        } else {
            tracing::warn!(
                connections = self.shared.open_connections(),
                "shut down at the drain bound with connections still open"
            );
        }
        Ok(())
    }

    /// Serves as [`run`](Self::run) does until `signal` resolves, then shuts
    /// down as [`ServerHandle::shutdown`] does and returns once drained.
    /// With [`shutdown_signal`](crate::shutdown_signal), a process stops
    /// cleanly on Ctrl-C and on SIGTERM:
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let server = ternio::Server::builder().map_tcp("127.0.0.1:7001").build()?;
    /// server.run_until(ternio::shutdown_signal()).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn run_until(self, signal: impl Future<Output = ()>) -> io::Result<()> {
        let handle = self.handle();
        let run = self.run();
        tokio::pin!(run, signal);
        tokio::select! {
            result = &mut run => return result,
            () = &mut signal => {
                handle.shutdown();
            }
        }
        run.await
    }
}

/// A shutdown under way, from [`ServerHandle::shutdown`]: await it to wait
/// until the server has drained (`true`) or the drain bound passed
/// (`false`); drop it to let the shutdown go on without waiting.
#[derive(Debug)]
pub struct Shutdown {
    handle: ServerHandle,
}

impl std::future::IntoFuture for Shutdown {
    type Output = bool;
    type IntoFuture = std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move { self.handle.drained().await })
    }
}

/// Shuts a running [`Server`] down.
#[derive(Clone)]
pub struct ServerHandle {
    shared: Arc<ServerShared>,
}

impl fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerHandle")
            .field("connections", &self.connection_count())
            .field("ready", &self.shared.is_ready())
            .finish_non_exhaustive()
    }
}

impl ServerHandle {
    /// Stops accepting connections and closes every open one: each stops
    /// reading, lets its running requests finish (within the shutdown
    /// grace), writes their replies, sends `DISCONNECT SHUTDOWN` and closes.
    /// [`Server::run`] returns once they are closed.
    ///
    /// The shutdown starts when this is called, and the call returns at
    /// once: it can be made from anywhere (a synchronous hook, a handler, a
    /// `Drop`), any number of times. The [`Shutdown`] it returns may be
    /// awaited, to wait for the end: `handle.shutdown().await` is `true`
    /// once every connection has closed, `false` at the drain bound (see
    /// [`drained`](Self::drained)). Dropping it does not stop the shutdown.
    pub fn shutdown(&self) -> Shutdown {
        self.shared.shut_down();
        Shutdown {
            handle: self.clone(),
        }
    }

    /// Waits until the server has shut down: for a shutdown to start
    /// (started by this handle, another one, or
    /// [`Server::run_until`]'s signal), then for every connection's task to
    /// end, those of the streams handed to
    /// [`serve_stream`](Self::serve_stream) included. Returns `true` once
    /// they have all ended, `false` at the drain bound (the shutdown grace
    /// plus the close linger, counted from the start of the shutdown) if
    /// some have not. It never starts a shutdown itself.
    pub async fn drained(&self) -> bool {
        self.shared.drained().await
    }

    /// Starts the shutdown ([`shutdown`](Self::shutdown)) and waits for it
    /// to end ([`drained`](Self::drained)): `true` if every connection
    /// closed within the drain bound.
    pub async fn shutdown_and_wait(&self) -> bool {
        self.shutdown().await
    }

    /// Whether the server should be sent new clients, as `/readyz` answers
    /// ([`ServerBuilder::health`](crate::ServerBuilder::health)): not shutting down, and its backplane,
    /// if any, connected. For an application that serves its own probes.
    pub fn is_ready(&self) -> bool {
        self.shared.is_ready()
    }

    /// How many connections are open.
    pub fn connection_count(&self) -> usize {
        self.shared.open_connections()
    }

    /// The server's hub: connections by id, groups, broadcasts.
    pub fn hub(&self) -> Hub {
        Hub::new(Arc::clone(&self.shared.hub))
    }

    /// Serves one connection over `stream`, a byte stream the application
    /// accepted itself (a TLS stream, a PROXY-protocol stream it parsed,
    /// an in-memory pipe) from `peer`, with length-prefixed frames as on a
    /// TCP listener (it counts as
    /// [`Transport::Tcp`](crate::Transport::Tcp)). The connection limits
    /// apply: a refused peer gets `DISCONNECT TOO_MANY_CONNECTIONS`.
    /// Returns once the connection has closed; spawn it to serve many.
    ///
    /// ```no_run
    /// # async fn run(server: ternio::ServerHandle) {
    /// let (client_side, server_side) = tokio::io::duplex(64 * 1024);
    /// let peer = "127.0.0.1:9".parse().unwrap();
    /// tokio::spawn(async move { server.serve_stream(server_side, peer).await });
    /// # drop(client_side);
    /// # }
    /// ```
    pub async fn serve_stream<S>(&self, stream: S, peer: SocketAddr)
    where
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        transport::serve_stream(stream, peer, Arc::clone(&self.shared), None).await;
    }

    /// Serves one connection over `stream` as [`serve_stream`](Self::serve_stream)
    /// does, as a WebSocket: the HTTP upgrade at `path` first, then one
    /// frame per binary message. A refused peer gets HTTP 503.
    pub async fn serve_websocket_stream<S>(&self, stream: S, peer: SocketAddr, path: &str)
    where
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let path = Arc::from(path);
        transport::serve_stream(stream, peer, Arc::clone(&self.shared), Some(path)).await;
    }

    /// A connection to this server through an in-memory pipe, for tests
    /// without a port: returns the client's end, whose other end is served
    /// on a task of its own as [`serve_stream`](Self::serve_stream) serves
    /// (length-prefixed frames, from 127.0.0.1 port 0). Each direction
    /// buffers 64 KiB. Give it to the client's `Client::connect_stream`
    /// (see [`testing`](crate::testing)).
    pub fn connect_in_memory(&self) -> tokio::io::DuplexStream {
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let server = self.clone();
        let peer = SocketAddr::from(([127, 0, 0, 1], 0));
        tokio::spawn(async move { server.serve_stream(theirs, peer).await });
        ours
    }
}
