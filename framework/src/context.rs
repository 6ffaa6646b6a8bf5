//! What a handler takes besides its request: its [`Context`] (the request's
//! header and its connection's handle), and the other extractors
//! ([`FromContext`]: `State<T>`, `Stored<T>`, `Hub`, `ConnectionHandle`).

use std::any::type_name;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use ternio_protocol::frame::Header;

use crate::hub::{ConnectionHandle, Hub};
use crate::ids::ConnectionId;
use crate::registry::ConnectionShared;
use crate::store::AppState;

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

impl fmt::Debug for CheckState<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckState").finish_non_exhaustive()
    }
}

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

impl<T: fmt::Debug> fmt::Debug for State<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("State").field(&self.0).finish()
    }
}

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
/// #[packet(opcode = 0x0010, response = YouAre)]
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
