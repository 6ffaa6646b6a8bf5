//! What a handler takes besides its request: extractors, built from the
//! request's [`Context`] before the handler runs.
//!
//! [`FromContext`] builds one synchronously (any handler may take it);
//! [`FromContextAsync`] may await (a database, a token service), so only an
//! `async` handler may take it. Either may refuse the request with its
//! `Rejection`, which answers it with an error and keeps the handler from
//! running. Taking `Option<T>` turns a refusal into `None`, and
//! `Result<T, T::Rejection>` hands the refusal to the handler.
//!
//! ```
//! use ternio::{Context, ErrorCode, FromContext, Packet, Rejection, packet_controller};
//!
//! /// The user a connection logged in as (its store holds a `UserId`).
//! struct CurrentUser(u64);
//!
//! #[derive(Clone)]
//! struct UserId(u64);
//!
//! impl FromContext for CurrentUser {
//!     type Rejection = Rejection;
//!     fn from_context(ctx: &Context) -> Result<Self, Rejection> {
//!         match ctx.store().get::<UserId>() {
//!             Some(UserId(id)) => Ok(CurrentUser(id)),
//!             None => Err(Rejection::new(ErrorCode::Unauthorized, "log in first")),
//!         }
//!     }
//! }
//!
//! #[derive(Packet)]
//! #[packet(opcode = 0x0010, response = Balance)]
//! struct GetBalance;
//!
//! #[derive(Packet)]
//! #[packet(opcode = 0x0011)]
//! struct Balance(u64);
//!
//! #[derive(Default)]
//! struct Bank;
//!
//! #[packet_controller]
//! impl Bank {
//!     /// A connection that has not logged in gets `UNAUTHORIZED`.
//!     fn balance(_request: GetBalance, user: CurrentUser) -> Balance {
//!         Balance(user.0 * 10)
//!     }
//! }
//! ```

use std::any::type_name;
use std::convert::Infallible;
use std::fmt;
use std::future::{Future, ready};
use std::ops::Deref;
use std::sync::Arc;

use ternio_protocol::ErrorCode;
use ternio_protocol::schema::{SchemaBuilder, TypeRef};

use crate::context::Context;
use crate::hub::{ConnectionHandle, Hub};
use crate::middleware::Rejection;
use crate::store::AppState;
use crate::users::UserId;

/// A value a handler takes as a parameter besides its request, built from
/// the request's [`Context`] before the handler runs. See the
/// [module](self) for an example.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a handler parameter",
    note = "after the request packet, a handler may take `&Context`, `Context`, `State<T>`, \
            `Stored<T>`, `Hub`, `ConnectionHandle`, or a type that implements `FromContext` \
            (or, in an `async` handler, `FromContextAsync`)"
)]
pub trait FromContext: Sized {
    /// Why the value could not be built: the error the request is answered
    /// with. [`Infallible`] for an extractor that always succeeds.
    type Rejection: Into<Rejection>;

    /// Whether the value is the request's upload ([`Upload`](crate::Upload)):
    /// the connection then opens one for each request of the handler.
    #[doc(hidden)]
    const UPLOAD: bool = false;

    /// For an upload, the type of its items for the schema
    /// (docs/SCHEMA.md), added to `schema`.
    #[doc(hidden)]
    fn describe_upload(schema: &mut SchemaBuilder) -> Option<TypeRef> {
        let _ = schema;
        None
    }

    /// Builds the value for one request, or refuses the request.
    fn from_context(ctx: &Context) -> Result<Self, Self::Rejection>;

    /// Checked once when the server is built: whether the value can be built
    /// at all (for `State<T>`, whether a `T` was given). The error says why not.
    #[doc(hidden)]
    fn check(_state: &CheckState<'_>) -> Result<(), String> {
        Ok(())
    }
}

/// An extractor that may await, for `async` handlers: a user loaded from a
/// database, a token checked with a service. Every [`FromContext`] is one
/// too.
///
/// Implement it with an `async fn`; leave `M` to its default (it only keeps
/// the blanket implementation for [`FromContext`] types apart).
///
/// ```
/// use ternio::{Context, ErrorCode, FromContextAsync, Rejection};
///
/// struct Profile {
///     name: String,
/// }
///
/// impl FromContextAsync for Profile {
///     type Rejection = Rejection;
///     async fn from_context_async(ctx: &Context) -> Result<Self, Rejection> {
///         let Some(id) = ctx.store().get::<u64>() else {
///             return Err(Rejection::new(ErrorCode::Unauthorized, "log in first"));
///         };
///         // A database query would go here.
///         tokio::task::yield_now().await;
///         Ok(Profile { name: format!("user {id}") })
///     }
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a parameter of an async handler",
    note = "after the request packet, a handler may take `&Context`, `Context`, `State<T>`, \
            `Stored<T>`, `Hub`, `ConnectionHandle`, or a type that implements `FromContext` \
            or `FromContextAsync`"
)]
pub trait FromContextAsync<M = ViaAsync>: Sized {
    /// Why the value could not be built: the error the request is answered with.
    type Rejection: Into<Rejection>;

    /// As [`FromContext::UPLOAD`].
    #[doc(hidden)]
    const UPLOAD: bool = false;

    /// As [`FromContext::describe_upload`].
    #[doc(hidden)]
    fn describe_upload(schema: &mut SchemaBuilder) -> Option<TypeRef> {
        let _ = schema;
        None
    }

    /// Builds the value for one request, or refuses the request.
    fn from_context_async(
        ctx: &Context,
    ) -> impl Future<Output = Result<Self, Self::Rejection>> + Send;

    /// As [`FromContext::check`].
    #[doc(hidden)]
    fn check(_state: &CheckState<'_>) -> Result<(), String> {
        Ok(())
    }
}

/// The `M` of a [`FromContextAsync`] written for its own type.
#[derive(Debug)]
pub enum ViaAsync {}

/// The `M` of the [`FromContextAsync`] that every [`FromContext`] has.
#[derive(Debug)]
pub enum ViaSync {}

impl<T: FromContext + Send> FromContextAsync<ViaSync> for T
where
    T::Rejection: Send,
{
    type Rejection = T::Rejection;
    const UPLOAD: bool = T::UPLOAD;

    fn describe_upload(schema: &mut SchemaBuilder) -> Option<TypeRef> {
        T::describe_upload(schema)
    }

    fn from_context_async(
        ctx: &Context,
    ) -> impl Future<Output = Result<Self, Self::Rejection>> + Send {
        ready(T::from_context(ctx))
    }

    fn check(state: &CheckState<'_>) -> Result<(), String> {
        T::check(state)
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

impl From<Infallible> for Rejection {
    fn from(never: Infallible) -> Self {
        match never {}
    }
}

/// A refusal becomes `None`: the handler runs either way.
impl<T: FromContext> FromContext for Option<T> {
    type Rejection = Infallible;
    fn from_context(ctx: &Context) -> Result<Self, Infallible> {
        Ok(T::from_context(ctx).ok())
    }
}

/// A refusal goes to the handler, which decides what to answer.
impl<T: FromContext> FromContext for Result<T, T::Rejection> {
    type Rejection = Infallible;
    fn from_context(ctx: &Context) -> Result<Self, Infallible> {
        Ok(T::from_context(ctx))
    }
}

/// As `Option<T>` for a [`FromContext`] type.
impl<T: FromContextAsync<ViaAsync> + Send> FromContextAsync<ViaAsync> for Option<T> {
    type Rejection = Infallible;
    async fn from_context_async(ctx: &Context) -> Result<Self, Infallible> {
        Ok(T::from_context_async(ctx).await.ok())
    }
}

/// As `Result<T, T::Rejection>` for a [`FromContext`] type.
impl<T: FromContextAsync<ViaAsync> + Send> FromContextAsync<ViaAsync>
    for Result<T, <T as FromContextAsync<ViaAsync>>::Rejection>
where
    <T as FromContextAsync<ViaAsync>>::Rejection: Send,
{
    type Rejection = Infallible;
    async fn from_context_async(ctx: &Context) -> Result<Self, Infallible> {
        Ok(T::from_context_async(ctx).await)
    }
}

impl FromContext for Context {
    type Rejection = Infallible;
    fn from_context(ctx: &Context) -> Result<Self, Infallible> {
        Ok(ctx.clone())
    }
}

impl FromContext for ConnectionHandle {
    type Rejection = Infallible;
    fn from_context(ctx: &Context) -> Result<Self, Infallible> {
        Ok(ctx.connection())
    }
}

impl FromContext for Hub {
    type Rejection = Infallible;
    fn from_context(ctx: &Context) -> Result<Self, Infallible> {
        Ok(ctx.hub())
    }
}

/// Shared application state of type `T`, given with
/// [`ServerBuilder::state`](crate::ServerBuilder::state). It dereferences
/// to `T`.
///
/// A handler that takes `State<T>` makes the server's `build()` fail when no
/// `T` was given, rather than failing at the first request
/// (`Option<State<T>>` takes it when it is there).
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
    /// `INTERNAL`: no `T` was given (only possible under `Option` or
    /// `Result`, which skip the check at `build()`).
    type Rejection = Rejection;

    fn from_context(ctx: &Context) -> Result<Self, Rejection> {
        ctx.state().map(Self).ok_or_else(|| {
            Rejection::new(
                ErrorCode::Internal,
                format!("no state of type {}", type_name::<T>()),
            )
        })
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
    type Rejection = Infallible;
    fn from_context(ctx: &Context) -> Result<Self, Infallible> {
        Ok(Self(ctx.store().get()))
    }
}

/// `T` for one request, its rejection as a [`Rejection`]: what the code
/// that `#[packet_controller]` generates calls for each parameter.
#[doc(hidden)]
pub fn extract<T: FromContext>(ctx: &Context) -> Result<T, Rejection> {
    T::from_context(ctx).map_err(Into::into)
}

/// [`extract`] for an `async` handler's parameter.
#[doc(hidden)]
pub async fn extract_async<T: FromContextAsync<M>, M>(ctx: &Context) -> Result<T, Rejection> {
    T::from_context_async(ctx).await.map_err(Into::into)
}

/// A handler parameter: the user the connection signed in as (see
/// [`ConnectionHandle::sign_in`]). A connection that did not sign in is
/// answered with error 3 `UNAUTHORIZED` and the handler does not run; take
/// `Option<SignedIn>` to serve both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedIn(pub UserId);

impl Deref for SignedIn {
    type Target = UserId;

    fn deref(&self) -> &UserId {
        &self.0
    }
}

impl FromContext for SignedIn {
    /// `UNAUTHORIZED`: the connection did not sign in.
    type Rejection = Rejection;

    fn from_context(ctx: &Context) -> Result<Self, Rejection> {
        ctx.user()
            .map(Self)
            .ok_or_else(|| Rejection::new(ErrorCode::Unauthorized, "sign in first"))
    }
}
