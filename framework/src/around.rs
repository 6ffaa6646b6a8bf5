//! Around-middleware: async code that wraps the handler, added with
//! [`ServerBuilder::around`](crate::ServerBuilder::around). A layer gets
//! the request and a [`Next`]; it may await (check a token with a service,
//! take a lock), call `next.run(request)` or answer on its own, and look at
//! the [`Reply`] on the way out.
//!
//! ```
//! use std::time::Instant;
//!
//! use ternio::around::Reply;
//! use ternio::{ErrorCode, Rejection, Server};
//!
//! let builder = Server::builder()
//!     // Outermost: times every request, and logs the slow ones.
//!     .around(|request, next| async move {
//!         let started = Instant::now();
//!         let handler = request.handler();
//!         let reply = next.run(request).await;
//!         if started.elapsed().as_millis() > 100 {
//!             tracing::warn!(handler, error = ?reply.error_code(), "slow request");
//!         }
//!         reply
//!     })
//!     // Then: refuses connections that have not logged in, but for the login.
//!     .around(|request, next| async move {
//!         let logged_in = request.context().store().get::<u64>().is_some();
//!         if logged_in || request.handler() == "Accounts::login" {
//!             next.run(request).await
//!         } else {
//!             Reply::from(Rejection::new(ErrorCode::Unauthorized, "log in first"))
//!         }
//!     });
//! # drop(builder);
//! ```
//!
//! Layers run in the order they were added, outermost first, after the
//! synchronous [`Middleware::before`](crate::middleware::Middleware::before)
//! hooks and before the handler's parameters are built; the handler's time
//! limit, the peer's deadline and `CANCEL` cover the layers too (the whole
//! chain is dropped). With no layer, a synchronous handler runs inline and
//! writes its reply in place; with one, every handler, synchronous or not,
//! runs behind the layers as a future (one allocation per request), so a
//! layer that checks something sees every request.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::FutureExt;
use ternio_protocol::frame::Header;
use ternio_protocol::{Bytes, ErrorCode, Packet, ReplySink};

use crate::context::Context;
use crate::dispatch::ReplyFuture;
use crate::middleware::Rejection;
use crate::reply::{DeferredReply, DeferredSink};

/// One around layer, as the server keeps it.
pub(crate) type Layer =
    dyn Fn(AroundRequest, Next) -> Pin<Box<dyn Future<Output = Reply> + Send>> + Send + Sync;

/// What the chain runs on: the server's layers and its handlers.
pub(crate) trait Chain: Send + Sync {
    /// The around layers, outermost first.
    fn layers(&self) -> &[Arc<Layer>];
    /// Starts handler `handler` (its index in the dispatch table) on `body`.
    fn handle(&self, handler: usize, body: &Bytes, ctx: Context) -> ReplyFuture;
    /// The handler's name.
    fn handler_name(&self, handler: usize) -> &'static str;
}

/// Boxes a layer written as a closure that returns a future.
pub(crate) fn layer<F, Fut>(f: F) -> Arc<Layer>
where
    F: Fn(AroundRequest, Next) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Reply> + Send + 'static,
{
    Arc::new(move |request, next| Box::pin(f(request, next)))
}

/// A request on its way through the around layers: its [`Context`] and the
/// name of the handler it is for.
pub struct AroundRequest {
    ctx: Context,
    handler: &'static str,
}

impl AroundRequest {
    pub(crate) fn new(ctx: Context, handler: &'static str) -> Self {
        Self { ctx, handler }
    }

    /// The request's context: its header and its connection (store,
    /// permission, groups).
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The request's header (opcode, flags, request id).
    pub fn header(&self) -> Header {
        self.ctx.header()
    }

    /// The handler's name, `Controller::method`.
    pub fn handler(&self) -> &'static str {
        self.handler
    }
}

impl fmt::Debug for AroundRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AroundRequest")
            .field("handler", &self.handler)
            .field("context", &self.ctx)
            .finish()
    }
}

/// The rest of the chain: the layers after this one, then the handler.
pub struct Next {
    chain: Arc<dyn Chain>,
    /// The handler's index in the dispatch table.
    handler: usize,
    body: Bytes,
    /// The index of the next layer.
    position: usize,
}

impl Next {
    pub(crate) fn new(chain: Arc<dyn Chain>, handler: usize, body: Bytes) -> Self {
        Self {
            chain,
            handler,
            body,
            position: 0,
        }
    }

    /// Runs the rest of the chain for `request`: the next layer, or the
    /// handler (its request decoded, its parameters built, then called).
    pub fn run(self, request: AroundRequest) -> impl Future<Output = Reply> + Send + 'static {
        let future: ReplyFuture = match self.chain.layers().get(self.position) {
            Some(layer) => {
                let layer = Arc::clone(layer);
                let next = Self {
                    position: self.position + 1,
                    ..self
                };
                Box::pin(layer(request, next).map(|reply| reply.0))
            }
            None => self.chain.handle(self.handler, &self.body, request.ctx),
        };
        future.map(Reply)
    }
}

impl fmt::Debug for Next {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Next")
            .field("handler", &self.chain.handler_name(self.handler))
            .field("layers_left", &(self.chain.layers().len() - self.position))
            .finish()
    }
}

/// What a request is answered with, as a layer sees it on the way out of
/// [`Next::run`], or answers on its own.
pub struct Reply(pub(crate) DeferredReply);

impl Reply {
    /// An answer with `packet`, without running the handler.
    pub fn packet<P: Packet>(packet: &P) -> Self {
        Self(DeferredSink.packet(packet))
    }

    /// An acknowledgement (an empty answer with the request's opcode).
    pub fn ack() -> Self {
        Self(DeferredReply::Ack)
    }

    /// An error answer with `code` and `message`.
    pub fn error(code: impl Into<ErrorCode>, message: impl Into<String>) -> Self {
        Self(DeferredReply::Error {
            code: code.into().to_u16(),
            message: message.into(),
        })
    }

    /// The error code the request is answered with, if it is an error
    /// (`INTERNAL` for a handler that panicked).
    pub fn error_code(&self) -> Option<ErrorCode> {
        match &self.0 {
            DeferredReply::Packet { .. }
            | DeferredReply::Ack
            | DeferredReply::Cancelled
            | DeferredReply::Stream(_) => None,
            DeferredReply::Error { code, .. } => Some(ErrorCode::from_u16(*code)),
            DeferredReply::Rejected(rejection) => Some(rejection.code),
            DeferredReply::Panicked(_) => Some(ErrorCode::Internal),
            DeferredReply::TimedOut => Some(ErrorCode::Timeout),
        }
    }

    /// Whether the request is answered with an error.
    pub fn is_error(&self) -> bool {
        self.error_code().is_some()
    }
}

/// A refusal: the request is answered with its error and counts as
/// [`Outcome::Rejected`](crate::middleware::Outcome::Rejected).
impl From<Rejection> for Reply {
    fn from(rejection: Rejection) -> Self {
        Self(DeferredReply::Rejected(rejection))
    }
}

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            DeferredReply::Packet { opcode, body, .. } => f
                .debug_struct("Packet")
                .field("opcode", &format_args!("{opcode:#06X}"))
                .field("len", &body.len())
                .finish(),
            DeferredReply::Ack => f.write_str("Ack"),
            DeferredReply::Cancelled => f.write_str("Cancelled"),
            DeferredReply::Stream(_) => f.write_str("Stream"),
            reply => f
                .debug_tuple("Error")
                .field(&self.error_code())
                .field(&match reply {
                    DeferredReply::Error { message, .. } => message.as_str(),
                    DeferredReply::Rejected(rejection) => rejection.message.as_str(),
                    _ => "",
                })
                .finish(),
        }
    }
}
