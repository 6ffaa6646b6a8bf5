//! What every connection of a running server shares ([`ServerShared`]):
//! the dispatch table, the limits, the registry, the middleware, the
//! hooks; and what opens and closes a connection there. The transports and
//! the connection engine use it; `server.rs` builds it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use ternio_protocol::{Bytes, DisconnectReason};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use crate::admission::Admission;
use crate::around::{Chain, Layer};
use crate::close::{CloseCause, CloseNotice};
use crate::config::ServerConfig;
use crate::context::Context;
use crate::dispatch::{DispatchTable, HandlerSpec, ReplyFuture};
use crate::hub::ConnectionHandle;
use crate::identity::Identity;
use crate::ids::{ConnectionId, Transport};
use crate::metrics::Metrics;
use crate::middleware::Middleware;
use crate::outbox::Outbox;
use crate::registry::{ConnectionShared, HubShared, LinkAddress};
use crate::sessions::Sessions;
use crate::store::{AppState, ConnectionStore};
use crate::udp::Datagrams;

type ConnectHook = Arc<dyn Fn(&ConnectionHandle) + Send + Sync>;
type DisconnectHook = Arc<dyn Fn(&ConnectionHandle, &CloseCause) + Send + Sync>;

/// The application's connect, disconnect, suspend and resume hooks.
#[derive(Default)]
pub(crate) struct Hooks {
    pub(crate) connect: Vec<ConnectHook>,
    pub(crate) disconnect: Vec<DisconnectHook>,
    pub(crate) suspend: Vec<ConnectHook>,
    pub(crate) resume: Vec<ConnectHook>,
}

impl Hooks {
    /// Tells the suspend hooks that `connection`'s link was lost and its
    /// session waits for its client.
    pub(crate) fn suspended(&self, connection: &Arc<ConnectionShared>) {
        call(&self.suspend, connection);
    }

    /// Tells the resume hooks that `connection`'s session was resumed.
    pub(crate) fn resumed(&self, connection: &Arc<ConnectionShared>) {
        call(&self.resume, connection);
    }
}

fn call(hooks: &[ConnectHook], connection: &Arc<ConnectionShared>) {
    if !hooks.is_empty() {
        let handle = ConnectionHandle::new(Arc::clone(connection));
        for hook in hooks {
            hook(&handle);
        }
    }
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
    /// When the shutdown started: the drain bound counts from there.
    pub(crate) shutdown_at: OnceLock<Instant>,
    /// Every connection's task (a listener's, or a stream handed to the
    /// handle, and the short tasks that refuse or read a PROXY header):
    /// the shutdown waits for them.
    pub(crate) tasks: TaskTracker,
    /// The static key for `NK` handshakes.
    pub(crate) identity: Option<Identity>,
    /// The middleware chain, built-in policies included.
    pub(crate) middleware: Vec<Arc<dyn Middleware>>,
    /// The resumable sessions, by ticket.
    pub(crate) sessions: Sessions,
    /// The around layers, outermost first.
    pub(crate) arounds: Vec<Arc<Layer>>,
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
    /// The UDP listener's datagram channels, if it has one.
    pub(crate) datagrams: Option<Arc<Datagrams>>,
}

impl ServerShared {
    /// The middleware a request to `handler` goes through: none when the
    /// chain is the built-in policies alone and they have nothing to check
    /// for it (the common case: two dynamic calls less per request).
    pub(crate) fn chain(&self, handler: &HandlerSpec) -> &[Arc<dyn Middleware>] {
        // A chain of one is `Policies` alone: the builder adds it unless
        // the application placed it, so any other middleware makes two.
        let policies_only = self.middleware.len() == 1;
        if policies_only && !self.config.require_encryption && handler.policy.checks_nothing() {
            return &[];
        }
        &self.middleware
    }

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
            link: LinkAddress::new(peer, transport),
            outbox,
            state: Arc::clone(&self.state),
            hub: Arc::clone(&self.hub),
            permission: AtomicU32::new(0),
            store: ConnectionStore::default(),
            rate_limiters: Mutex::default(),
            groups: Mutex::default(),
            user: Mutex::default(),
            names: Mutex::default(),
            datagrams: Default::default(),
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

    /// Moves the session `connection` onto the link `link` (that link's
    /// own session, never used) arrived on: its peer's address, its
    /// transport, and its count among that transport's connections.
    pub(crate) fn move_session(&self, connection: &ConnectionShared, link: &ConnectionShared) {
        let (from, to) = (connection.transport(), link.transport());
        connection.link.take(&link.link);
        if from != to
            && let Some(metrics) = &self.metrics
        {
            metrics.transport(from).connections.decrement(1.0);
            metrics.transport(to).connections.increment(1.0);
        }
    }

    /// Forgets a closed connection (it leaves its groups), then tells the
    /// disconnect hooks.
    pub(crate) fn close_connection(&self, connection: &Arc<ConnectionShared>, cause: CloseCause) {
        self.hub.remove(connection.id);
        if let Some(datagrams) = &self.datagrams {
            datagrams.unbind(connection);
        }
        tracing::debug!(connection = %connection.id, ?cause, "connection closed");
        if let Some(metrics) = &self.metrics {
            metrics
                .transport(connection.transport())
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
        let _ = self.shutdown_at.set(Instant::now());
        // A connection registering meanwhile sees the flag (it is checked
        // under the registry's lock) or is in the snapshot below.
        if self.shutdown.send_replace(true) {
            return;
        }
        // No connection task ends the tracker's count now: `wait` may
        // resolve once the last one has ended.
        self.tasks.close();
        for connection in self.hub.all() {
            connection.outbox.close(shutdown_notice(), true);
        }
    }

    /// Waits for the shutdown to start, then for every connection's task
    /// to end, at most until the drain bound (the shutdown grace plus the
    /// close linger, from the start of the shutdown). `true` if they all
    /// ended in time.
    pub(crate) async fn drained(&self) -> bool {
        let mut shutdown = self.shutdown_signal();
        let _ = shutdown.wait_for(|stop| *stop).await;
        let started = *self.shutdown_at.get_or_init(Instant::now);
        let bound = self.config.shutdown_grace + self.config.close_linger;
        tokio::time::timeout_at(started + bound, self.tasks.wait())
            .await
            .is_ok()
    }

    /// Whether the server is draining: its shutdown has started.
    pub(crate) fn is_draining(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Whether the server should be sent new clients: it is not draining,
    /// and its backplane, if it has one, is connected.
    pub(crate) fn is_ready(&self) -> bool {
        !self.is_draining()
            && self
                .hub
                .backplane()
                .is_none_or(|backplane| backplane.is_connected())
    }

    /// How many connections are open.
    pub(crate) fn open_connections(&self) -> usize {
        self.hub.len()
    }
}

fn shutdown_notice() -> CloseNotice {
    CloseNotice::new(DisconnectReason::Shutdown, "the server is shutting down")
}

impl Chain for ServerShared {
    fn layers(&self) -> &[Arc<Layer>] {
        &self.arounds
    }

    fn handle(&self, handler: usize, body: &Bytes, ctx: Context) -> ReplyFuture {
        self.table.handler(handler).deferred(body, ctx)
    }

    fn handler_name(&self, handler: usize) -> &'static str {
        self.table.handler(handler).name()
    }
}
