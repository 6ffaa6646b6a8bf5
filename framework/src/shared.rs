//! What every connection of a running server shares ([`ServerShared`]):
//! the dispatch table, the limits, the registry, the middleware, the
//! hooks; and what opens and closes a connection there. The transports and
//! the connection engine use it; `server.rs` builds it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ternio_protocol::DisconnectReason;
use tokio::sync::watch;

use crate::admission::Admission;
use crate::close::{CloseCause, CloseNotice};
use crate::config::ServerConfig;
use crate::dispatch::DispatchTable;
use crate::hub::ConnectionHandle;
use crate::identity::Identity;
use crate::ids::{ConnectionId, Transport};
use crate::metrics::Metrics;
use crate::middleware::Middleware;
use crate::outbox::Outbox;
use crate::registry::{ConnectionShared, HubShared};
use crate::store::{AppState, ConnectionStore};

type ConnectHook = Arc<dyn Fn(&ConnectionHandle) + Send + Sync>;
type DisconnectHook = Arc<dyn Fn(&ConnectionHandle, &CloseCause) + Send + Sync>;

/// The application's connect and disconnect hooks.
#[derive(Default)]
pub(crate) struct Hooks {
    pub(crate) connect: Vec<ConnectHook>,
    pub(crate) disconnect: Vec<DisconnectHook>,
}

/// What every connection of a server shares.
pub(crate) struct ServerShared {
    pub(crate) table: DispatchTable,
    pub(crate) config: ServerConfig,
    pub(crate) state: Arc<AppState>,
    /// The id the next connection gets.
    pub(crate) next_id: AtomicU64,
    /// Every open connection, by id, and the groups.
    pub(crate) hub: Arc<HubShared>,
    /// Turns true when the server shuts down.
    pub(crate) shutdown: watch::Sender<bool>,
    /// The static key for `NK` handshakes.
    pub(crate) identity: Option<Identity>,
    /// The middleware chain, built-in policies included.
    pub(crate) middleware: Vec<Arc<dyn Middleware>>,
    /// Whether some middleware reads how long a request took.
    pub(crate) middleware_times: bool,
    /// The application's connect and disconnect hooks.
    pub(crate) hooks: Hooks,
    /// The connection limits.
    pub(crate) admission: Arc<Admission>,
    /// The metric handles, when metrics are on.
    pub(crate) metrics: Option<Metrics>,
    /// The server-wide handshake budget, if it has one.
    pub(crate) handshakes: Option<governor::DefaultDirectRateLimiter>,
}

impl ServerShared {
    /// Registers a new connection and returns its shared half. Opened
    /// during shutdown, it is told to close.
    pub(crate) fn open_connection(
        &self,
        peer: SocketAddr,
        transport: Transport,
    ) -> Arc<ConnectionShared> {
        let outbox = Outbox::new(self.config.max_outbox_bytes, self.config.slow_consumer);
        let connection = Arc::new(ConnectionShared {
            id: ConnectionId(self.next_id.fetch_add(1, Ordering::Relaxed)),
            peer,
            transport,
            outbox,
            state: Arc::clone(&self.state),
            hub: Arc::clone(&self.hub),
            permission: AtomicU32::new(0),
            store: ConnectionStore::default(),
            rate_limiters: Mutex::default(),
            groups: Mutex::default(),
        });
        if let Some(metrics) = &self.metrics {
            metrics.transport(transport).connections.increment(1.0);
        }
        self.hub.insert(Arc::clone(&connection), |connection| {
            if *self.shutdown.borrow() {
                connection.outbox.close(shutdown_notice(), true);
            }
        });
        if !self.hooks.connect.is_empty() {
            let handle = ConnectionHandle::new(Arc::clone(&connection));
            for hook in &self.hooks.connect {
                hook(&handle);
            }
        }
        connection
    }

    /// Forgets a closed connection (it leaves its groups), then tells the
    /// disconnect hooks.
    pub(crate) fn close_connection(&self, connection: &Arc<ConnectionShared>, cause: CloseCause) {
        self.hub.remove(connection.id);
        tracing::debug!(connection = %connection.id, ?cause, "connection closed");
        if let Some(metrics) = &self.metrics {
            metrics
                .transport(connection.transport)
                .connections
                .decrement(1.0);
            metrics.disconnect(&cause);
        }
        if !self.hooks.disconnect.is_empty() {
            let handle = ConnectionHandle::new(Arc::clone(connection));
            for hook in &self.hooks.disconnect {
                hook(&handle, &cause);
            }
        }
    }

    /// A receiver that turns true when the server shuts down.
    pub(crate) fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Closes every connection, gracefully, and turns the shutdown signal on.
    pub(crate) fn shut_down(&self) {
        // A connection registering meanwhile sees the flag (it is checked
        // under the registry's lock) or is in the snapshot below.
        if self.shutdown.send_replace(true) {
            return;
        }
        for connection in self.hub.all() {
            connection.outbox.close(shutdown_notice(), true);
        }
    }

    /// How many connections are open.
    pub(crate) fn open_connections(&self) -> usize {
        self.hub.len()
    }
}

fn shutdown_notice() -> CloseNotice {
    CloseNotice::new(DisconnectReason::Shutdown, "the server is shutting down")
}
