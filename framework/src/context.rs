//! What a handler can know and do besides its request: the connection it
//! came from, a handle to push to it, and the application's shared state.

use std::any::type_name;
use std::fmt;
use std::net::SocketAddr;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use ternio_protocol::Packet;
use ternio_protocol::frame::Header;

use crate::hub::Hub;
use crate::ids::{ConnectionId, Transport};
use crate::outbox::PushError;
use crate::registry::ConnectionShared;
use crate::store::{AppState, ConnectionStore};

/// The context of one request: its header, and the connection it came
/// from. A `Context` dereferences to that connection's
/// [`ConnectionHandle`], so every method of the handle is one of the
/// context's too: `ctx.push(&packet)`, `ctx.hub()`, `ctx.state::<T>()`,
/// `ctx.set_permission(1)`…
///
/// Cloning it is cheap (one reference count).
#[derive(Clone)]
pub struct Context {
    connection: ConnectionHandle,
    header: Header,
}

impl Context {
    pub(crate) fn new(connection: Arc<ConnectionShared>, header: Header) -> Self {
        Self {
            connection: ConnectionHandle::new(connection),
            header,
        }
    }

    /// The id of the connection the request came from (its handle's
    /// [`id`](ConnectionHandle::id)).
    pub fn connection_id(&self) -> ConnectionId {
        self.connection.id()
    }

    /// The request's header.
    pub fn header(&self) -> Header {
        self.header
    }

    /// The request's id; 0 for a fire-and-forget send, which gets no reply.
    pub fn request_id(&self) -> u32 {
        self.header.request_id
    }

    /// Whether the request arrived sealed.
    pub fn is_encrypted(&self) -> bool {
        self.header.flags.is_encrypted()
    }

    /// A handle to this connection, which may be kept and used from
    /// anywhere after the handler returns.
    pub fn connection(&self) -> ConnectionHandle {
        self.connection.clone()
    }
}

impl Deref for Context {
    type Target = ConnectionHandle;

    /// The handle of the connection the request came from.
    fn deref(&self) -> &ConnectionHandle {
        &self.connection
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("connection", &self.connection.id())
            .field("peer", &self.connection.peer_addr())
            .field("transport", &self.connection.transport())
            .field("header", &self.header)
            .finish()
    }
}

/// A handle to one connection, for pushing to it from anywhere. Get it
/// from [`Context::connection`] or [`Hub::connection`]; a handler's
/// [`Context`] dereferences to the handle of its request's connection.
#[derive(Clone)]
pub struct ConnectionHandle {
    connection: Arc<ConnectionShared>,
}

impl ConnectionHandle {
    pub(crate) fn new(connection: Arc<ConnectionShared>) -> Self {
        Self { connection }
    }

    /// The connection's id.
    pub fn id(&self) -> ConnectionId {
        self.connection.id
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.connection.peer
    }

    /// The transport the connection arrived on.
    pub fn transport(&self) -> Transport {
        self.connection.transport
    }

    /// Pushes `packet` to the connection (a frame with request id 0).
    pub fn push<P: Packet>(&self, packet: &P) -> Result<(), PushError> {
        self.connection.push(packet)
    }

    /// The connection's permission level (0 when it opens).
    pub fn permission(&self) -> u32 {
        self.connection.permission()
    }

    /// Sets the connection's permission level, as after a login; handlers
    /// marked `#[handler(permission = N)]` need at least `N`.
    pub fn set_permission(&self, level: u32) {
        self.connection.permission.store(level, Ordering::Release);
    }

    /// The connection's typed store.
    pub fn store(&self) -> &ConnectionStore {
        &self.connection.store
    }

    /// The hub of the connection's server: every connection by id, groups,
    /// broadcasts.
    pub fn hub(&self) -> Hub {
        Hub::new(Arc::clone(&self.connection.hub))
    }

    /// The shared value of type `T` given to the server with `.state(...)`.
    pub fn state<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.connection.state.get()
    }

    /// Closes the connection at once with `DISCONNECT KICKED` and `reason`.
    pub fn kick(&self, reason: &str) {
        self.connection.kick(reason);
    }

    /// Bytes of pushed frames waiting for the connection to take them.
    pub fn queued_bytes(&self) -> usize {
        self.connection.outbox.queued_bytes()
    }

    /// Droppable pushes dropped because the connection fell behind.
    pub fn dropped_pushes(&self) -> u64 {
        self.connection.outbox.dropped()
    }

    /// Whether the connection is still open.
    pub fn is_open(&self) -> bool {
        !self.connection.outbox.is_closed()
    }
}

impl fmt::Debug for ConnectionHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ConnectionHandle")
            .field(&self.connection.id)
            .finish()
    }
}

/// A value a handler takes as a parameter besides its request, built from
/// the request's [`Context`].
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a handler parameter",
    note = "after the request packet, a handler may take `&Context`, `Context`, or `State<T>`"
)]
pub trait FromContext: Sized {
    /// Builds the value for one request.
    fn from_context(ctx: &Context) -> Self;

    /// Checked once when the server is built: whether the value can be built
    /// at all (for `State<T>`, whether a `T` was given). The error says why not.
    #[doc(hidden)]
    fn check(_state: &CheckState<'_>) -> Result<(), String> {
        Ok(())
    }
}

/// What a [`FromContext::check`] may look at.
#[doc(hidden)]
pub struct CheckState<'a>(pub(crate) &'a AppState);

impl FromContext for Context {
    fn from_context(ctx: &Context) -> Self {
        ctx.clone()
    }
}

impl FromContext for ConnectionHandle {
    fn from_context(ctx: &Context) -> Self {
        ctx.connection()
    }
}

/// Shared application state of type `T`, given with
/// [`ServerBuilder::state`](crate::ServerBuilder::state).
///
/// A handler that takes `State<T>` makes the server's `build()` fail when no
/// `T` was given, rather than failing at the first request.
pub struct State<T>(pub Arc<T>);

impl<T> Deref for State<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> Clone for State<T> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<T: Send + Sync + 'static> FromContext for State<T> {
    fn from_context(ctx: &Context) -> Self {
        // `check` ran when the server was built, so the value is there.
        Self(
            ctx.state()
                .unwrap_or_else(|| panic!("no state of type {}", type_name::<T>())),
        )
    }

    fn check(state: &CheckState<'_>) -> Result<(), String> {
        if state.0.contains::<T>() {
            Ok(())
        } else {
            Err(format!(
                "it takes State<{0}>, but no {0} was given to Server::builder().state(...)",
                type_name::<T>()
            ))
        }
    }
}

impl FromContext for Hub {
    fn from_context(ctx: &Context) -> Self {
        ctx.hub()
    }
}

/// A handler parameter: a copy of the connection's stored `T`, if any.
///
/// ```
/// use ternio::{Packet, Stored, packet_controller};
///
/// #[derive(Clone)]
/// struct Nickname(String);
///
/// #[derive(Packet)]
/// #[packet(opcode = 0x0010)]
/// struct WhoAmI;
///
/// #[derive(Packet)]
/// #[packet(opcode = 0x0011)]
/// struct YouAre(Option<String>);
///
/// #[derive(Default)]
/// struct Names;
///
/// #[packet_controller]
/// impl Names {
///     fn who_am_i(_request: WhoAmI, nick: Stored<Nickname>) -> YouAre {
///         YouAre(nick.0.map(|nick| nick.0))
///     }
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored<T>(pub Option<T>);

impl<T> Deref for Stored<T> {
    type Target = Option<T>;
    fn deref(&self) -> &Option<T> {
        &self.0
    }
}

impl<T: Clone + Send + Sync + 'static> FromContext for Stored<T> {
    fn from_context(ctx: &Context) -> Self {
        Self(ctx.store().get())
    }
}
