//! The server: its builder, its listeners, and the state every connection shares.

use std::any::TypeId;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::watch;

use crate::config::ServerConfig;
use crate::context::{AppState, ConnectionId, ConnectionShared, Transport};
use crate::dispatch::{Controller, DispatchTable};
use crate::outbound::{PushQueue, PushReceiver};
use crate::transport;

/// Why a server could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Two handlers answer the same opcode.
    #[error("opcode {opcode:#06X} is handled twice: by {first} and by {second}")]
    DuplicateOpcode {
        /// The opcode.
        opcode: u16,
        /// The handler registered first.
        first: &'static str,
        /// The handler registered second.
        second: &'static str,
    },
    /// A handler for an opcode of the system range.
    #[error("{handler} handles opcode {opcode:#06X}, in the system range 0xFF00..=0xFFFF")]
    SystemOpcode {
        /// The opcode.
        opcode: u16,
        /// The handler.
        handler: &'static str,
    },
    /// A handler that cannot run as configured (say, missing state).
    #[error("handler {handler} cannot run: {reason}")]
    Handler {
        /// The handler.
        handler: &'static str,
        /// Why.
        reason: String,
    },
    /// An address that does not resolve.
    #[error("cannot resolve listener address {address}: {source}")]
    Resolve {
        /// The address as given.
        address: String,
        /// The resolver's error.
        source: io::Error,
    },
    /// A listener that could not bind.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// The socket error.
        source: io::Error,
    },
    /// No `map_tcp` (or other listener) was given.
    #[error("the server has no listener: call map_tcp")]
    NoListener,
}

/// Builds a [`Server`]: controllers, state, listeners and limits.
pub struct ServerBuilder {
    controllers: Vec<(TypeId, Arc<dyn Controller>)>,
    discover: bool,
    state: AppState,
    tcp: Vec<Result<SocketAddr, BuildError>>,
    config: ServerConfig,
}

impl Default for ServerBuilder {
    fn default() -> Self {
        Self {
            controllers: Vec::new(),
            discover: true,
            state: AppState::default(),
            tcp: Vec::new(),
            config: ServerConfig::default(),
        }
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
        let resolved = address
            .to_socket_addrs()
            .and_then(|mut addrs| {
                addrs
                    .next()
                    .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"))
            })
            .map_err(|source| BuildError::Resolve {
                address: format!("{address:?}"),
                source,
            });
        self.tcp.push(resolved);
        self
    }

    /// Replaces every limit at once.
    pub fn config(mut self, config: ServerConfig) -> Self {
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

    /// Builds the dispatch table and binds every listener.
    ///
    /// Fails on a duplicate opcode (naming both handlers), a handler whose
    /// state is missing, or a listener that cannot bind.
    pub fn build(self) -> Result<Server, BuildError> {
        let table = DispatchTable::build(self.controllers, self.discover, &self.state)?;
        tracing::debug!(handlers = table.len(), "dispatch table built");
        if self.tcp.is_empty() {
            return Err(BuildError::NoListener);
        }
        let mut tcp = Vec::with_capacity(self.tcp.len());
        for address in self.tcp {
            let address = address?;
            let listener = std::net::TcpListener::bind(address)
                .and_then(|listener| listener.set_nonblocking(true).map(|()| listener))
                .map_err(|source| BuildError::Bind { address, source })?;
            tcp.push(listener);
        }
        let (shutdown, _) = watch::channel(false);
        Ok(Server {
            shared: Arc::new(ServerShared {
                table,
                config: self.config,
                state: Arc::new(self.state),
                next_id: AtomicU64::new(1),
            }),
            tcp,
            shutdown: Arc::new(shutdown),
        })
    }
}

/// What every connection of a server shares.
pub(crate) struct ServerShared {
    pub(crate) table: DispatchTable,
    pub(crate) config: ServerConfig,
    pub(crate) state: Arc<AppState>,
    next_id: AtomicU64,
}

impl ServerShared {
    /// The shared half of a new connection, and its push receiver.
    pub(crate) fn open_connection(
        &self,
        peer: SocketAddr,
        transport: Transport,
    ) -> (Arc<ConnectionShared>, PushReceiver) {
        let (pushes, receiver) = PushQueue::new(self.config.max_push_queue_bytes);
        let connection = ConnectionShared {
            id: ConnectionId(self.next_id.fetch_add(1, Ordering::Relaxed)),
            peer,
            transport,
            pushes,
            state: Arc::clone(&self.state),
            max_frame_size: self.config.max_frame_size,
        };
        (Arc::new(connection), receiver)
    }
}

/// A built server with its listeners bound. [`run`](Self::run) serves.
pub struct Server {
    shared: Arc<ServerShared>,
    tcp: Vec<std::net::TcpListener>,
    shutdown: Arc<watch::Sender<bool>>,
}

impl Server {
    /// Starts building a server.
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    /// The addresses the TCP listeners are bound to, in `map_tcp` order.
    pub fn tcp_addrs(&self) -> Vec<SocketAddr> {
        self.tcp
            .iter()
            .filter_map(|listener| listener.local_addr().ok())
            .collect()
    }

    /// A handle that stops the server from elsewhere.
    pub fn handle(&self) -> ServerHandle {
        ServerHandle {
            shutdown: Arc::clone(&self.shutdown),
        }
    }

    /// Serves until [`ServerHandle::shutdown`] is called. Must run inside a
    /// tokio runtime.
    pub async fn run(self) -> io::Result<()> {
        let mut loops = Vec::with_capacity(self.tcp.len());
        for listener in self.tcp {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            tracing::info!(address = %listener.local_addr()?, "listening (tcp)");
            loops.push(tokio::spawn(transport::tcp::accept_loop(
                listener,
                Arc::clone(&self.shared),
                self.shutdown.subscribe(),
            )));
        }
        for accept_loop in loops {
            let _ = accept_loop.await;
        }
        Ok(())
    }
}

/// Stops a running [`Server`].
#[derive(Clone)]
pub struct ServerHandle {
    shutdown: Arc<watch::Sender<bool>>,
}

impl ServerHandle {
    /// Stops accepting connections; [`Server::run`] then returns.
    pub fn shutdown(&self) {
        self.shutdown.send_replace(true);
    }
}
