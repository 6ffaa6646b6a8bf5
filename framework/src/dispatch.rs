//! Controllers, the handlers they declare, and the table that routes each
//! opcode to its handler.

use std::any::TypeId;
use std::collections::HashSet;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use ternio_protocol::frame::SYSTEM_OPCODE_START;
use ternio_protocol::schema::{HandlerDescription, Policies, SchemaBuilder, TypeRef};
use ternio_protocol::{Bytes, DecodeError, ErrorCode, IntoReply, Packet, Request};

use crate::build_error::BuildError;
use crate::context::Context;
use crate::extract::{CheckState, FromContext, FromContextAsync};
use crate::metrics::HandlerMetrics;
use crate::middleware::{self, Concurrency, HandlerPolicy, Outcome, Rejection};
use crate::panics::panic_message;
use crate::reply::{DeferredReply, DeferredSink, FrameReply};
use crate::store::AppState;

/// A type whose methods handle packets. `#[packet_controller]` implements it.
pub trait Controller: Send + Sync + 'static {
    /// The controller's handlers, one per request opcode.
    fn handlers(self: Arc<Self>) -> Vec<HandlerSpec>;
}

/// A controller found through `inventory`: what `#[packet_controller]`
/// submits for a controller that implements `Default`.
pub struct ControllerRegistration {
    name: &'static str,
    type_id: fn() -> TypeId,
    make: fn() -> Arc<dyn Controller>,
}

impl std::fmt::Debug for ControllerRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerRegistration")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// A controller that `#[packet_controller]` can build on its own: one that
/// is `Default`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not `Default`, so #[packet_controller] cannot build it",
    label = "`{Self}` does not implement `Default`",
    note = "derive or implement `Default` for `{Self}`, or write #[packet_controller(explicit)] \
            and pass an instance to `Server::builder().controller(...)`"
)]
pub trait Discoverable: Controller + Default {}

impl<C: Controller + Default> Discoverable for C {}

impl ControllerRegistration {
    /// The registration of controller `C`, built with `C::default()`.
    pub const fn new<C: Discoverable>(name: &'static str) -> Self {
        Self {
            name,
            type_id: TypeId::of::<C>,
            make: make_default::<C>,
        }
    }
}

fn make_default<C: Discoverable>() -> Arc<dyn Controller> {
    Arc::new(C::default())
}

inventory::collect!(ControllerRegistration);

/// `Self`, what a handler answers `Req` with (the `T` of its `Result<T, E>`),
/// is `Declared`, the response `Req` declares.
#[diagnostic::on_unimplemented(
    message = "the handler of `{Req}` answers with `{Self}`, but `{Req}` declares `response = {Declared}`",
    label = "this answers with `{Self}`",
    note = "return `{Declared}` (or `Result<{Declared}, E>`), or change `response = ...` in the #[packet(...)] of `{Req}`"
)]
pub trait Answers<Req, Declared> {}

impl<Req: Request<Response = R>, R> Answers<Req, R> for R {}

/// Checks at compile time that a handler returning `R` answers `Req` with
/// the response `Req` declares.
pub const fn check_reply<Req: Request, R: IntoReply>()
where
    R::Response: Answers<Req, Req::Response>,
{
}

/// [`Answers`] for a handler that returns `impl IntoReply`: its response is
/// hidden unless the return type names it.
#[diagnostic::on_unimplemented(
    message = "the handler of `{Req}` returns an `impl IntoReply` whose response is not `{Declared}`, \
               the response `{Req}` declares",
    label = "the response of this `impl IntoReply` is not known to be `{Declared}`",
    note = "name it in the return type: `impl IntoReply<Response = {Declared}>`"
)]
pub trait AnswersOpaque<Req, Declared> {}

impl<Req: Request<Response = R>, R> AnswersOpaque<Req, R> for R {}

/// [`check_reply`] for a handler whose return type has no name
/// (`impl Trait`): returns `reply` as is.
pub fn checked_opaque_reply<Req: Request, R: IntoReply>(reply: R) -> R
where
    R::Response: AnswersOpaque<Req, Req::Response>,
{
    reply
}

/// A boxed future that a pending asynchronous handler runs as.
pub(crate) type ReplyFuture = Pin<Box<dyn Future<Output = DeferredReply> + Send>>;

type SyncFn =
    dyn Fn(&Bytes, &Context, FrameReply<'_>) -> Result<Outcome, DecodeError> + Send + Sync;
type DeferredFn = dyn Fn(&Bytes, &Context) -> Result<DeferredReply, DecodeError> + Send + Sync;
type AsyncFn = dyn Fn(&Bytes, Context) -> Result<ReplyFuture, DecodeError> + Send + Sync;

pub(crate) enum HandlerKind {
    /// Runs inline on the connection's task and writes its reply in place;
    /// behind around layers, `deferred` runs it and keeps its reply.
    Sync {
        inline: Box<SyncFn>,
        deferred: Box<DeferredFn>,
    },
    /// Returns a future, polled on the connection's task beside the others.
    Async(Box<AsyncFn>),
}

type Check = fn(&CheckState<'_>) -> Result<(), String>;

/// Adds a handler to a schema: its request and reply types are known
/// where the spec is built.
type DescribeFn = fn(&mut SchemaBuilder, HandlerDescription);

/// Describes the items of an upload parameter, if the handler has one.
type DescribeUploadFn = fn(&mut SchemaBuilder) -> Option<TypeRef>;

fn describe_handler<Req: Packet, R: IntoReply>(
    schema: &mut SchemaBuilder,
    mut handler: HandlerDescription,
) {
    handler.stream_item = R::describe_stream(schema);
    schema.handler::<Req, R::Response>(handler);
}

fn no_upload(_: &mut SchemaBuilder) -> Option<TypeRef> {
    None
}

/// One handler: the opcode it answers, its name, how to call it, and its
/// policies. `#[packet_controller]` builds these; `#[handler(...)]`
/// attributes on a method call the builder methods of the same names.
pub struct HandlerSpec {
    pub(crate) opcode: u16,
    pub(crate) name: &'static str,
    pub(crate) kind: HandlerKind,
    pub(crate) checks: Vec<Check>,
    pub(crate) policy: HandlerPolicy,
    /// Its request counter and latency histogram, when metrics are on.
    pub(crate) metrics: Option<HandlerMetrics>,
    /// Its entry in the schema, and the policies as the schema shows them.
    describe: DescribeFn,
    describe_upload: DescribeUploadFn,
    schema_policies: Policies,
    /// Whether it takes an [`Upload`](crate::Upload): each request opens one.
    pub(crate) upload: bool,
}

impl std::fmt::Debug for HandlerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandlerSpec")
            .field("opcode", &format_args!("{:#06X}", self.opcode))
            .field("name", &self.name)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl HandlerSpec {
    /// A synchronous handler for `Req`: it runs inline on the connection's
    /// task, so it must not block. Its reply is encoded straight into the
    /// connection's outbound buffer.
    pub fn sync<Req, R>(
        name: &'static str,
        f: impl Fn(Req, &Context) -> R + Send + Sync + 'static,
    ) -> Self
    where
        Req: Packet,
        R: IntoReply,
    {
        Self::sync_extracted(name, move |request, ctx| Ok(f(request, ctx)))
    }

    /// [`sync`](Self::sync) for a handler whose parameters may refuse the
    /// request: `Err` answers it with the rejection (what
    /// `#[packet_controller]` builds).
    #[doc(hidden)]
    pub fn sync_extracted<Req, R>(
        name: &'static str,
        f: impl Fn(Req, &Context) -> Result<R, Rejection> + Send + Sync + 'static,
    ) -> Self
    where
        Req: Packet,
        R: IntoReply,
    {
        let f = Arc::new(f);
        let inline = {
            let f = Arc::clone(&f);
            move |body: &Bytes, ctx: &Context, sink: FrameReply<'_>| {
                let request = Req::decode_packet(body)?;
                Ok(match f(request, ctx) {
                    Ok(reply) => reply.into_reply(sink),
                    Err(rejection) => sink.reject(&rejection),
                })
            }
        };
        let deferred = move |body: &Bytes, ctx: &Context| {
            let request = Req::decode_packet(body)?;
            Ok(match f(request, ctx) {
                Ok(reply) => reply.into_reply(DeferredSink),
                Err(rejection) => DeferredReply::Rejected(rejection),
            })
        };
        Self::new::<Req>(
            name,
            HandlerKind::Sync {
                inline: Box::new(inline),
                deferred: Box::new(deferred),
            },
            describe_handler::<Req, R>,
        )
    }

    /// An asynchronous handler for `Req`: its future runs on the connection's
    /// task beside the connection's other requests.
    pub fn asynchronous<Req, R, Fut>(
        name: &'static str,
        f: impl Fn(Req, Context) -> Fut + Send + Sync + 'static,
    ) -> Self
    where
        Req: Packet,
        R: IntoReply + Send + 'static,
        Fut: Future<Output = R> + Send + 'static,
    {
        Self::async_extracted(name, move |request, ctx| f(request, ctx).map(Ok))
    }

    /// [`asynchronous`](Self::asynchronous) for a handler whose parameters
    /// may refuse the request (what `#[packet_controller]` builds).
    #[doc(hidden)]
    pub fn async_extracted<Req, R, Fut>(
        name: &'static str,
        f: impl Fn(Req, Context) -> Fut + Send + Sync + 'static,
    ) -> Self
    where
        Req: Packet,
        R: IntoReply + Send + 'static,
        Fut: Future<Output = Result<R, Rejection>> + Send + 'static,
    {
        let call = move |body: &Bytes, ctx: Context| -> Result<ReplyFuture, DecodeError> {
            let request = Req::decode_packet(body)?;
            let future = AssertUnwindSafe(f(request, ctx)).catch_unwind();
            Ok(Box::pin(future.map(|outcome| match outcome {
                Ok(Ok(reply)) => reply.into_reply(DeferredSink),
                Ok(Err(rejection)) => DeferredReply::Rejected(rejection),
                Err(panic) => DeferredReply::Panicked(panic_message(&*panic)),
            })))
        };
        Self::new::<Req>(
            name,
            HandlerKind::Async(Box::new(call)),
            describe_handler::<Req, R>,
        )
    }

    fn new<Req: Packet>(name: &'static str, kind: HandlerKind, describe: DescribeFn) -> Self {
        Self {
            opcode: Req::OPCODE,
            name,
            kind,
            checks: Vec::new(),
            policy: HandlerPolicy::default(),
            metrics: None,
            describe,
            describe_upload: no_upload,
            schema_policies: Policies::default(),
            upload: false,
        }
    }

    /// Adds this handler, its request and its response to `schema`.
    pub fn describe(&self, schema: &mut SchemaBuilder) {
        let upload_item = (self.describe_upload)(schema);
        let handler = HandlerDescription {
            name: self.name,
            asynchronous: matches!(self.kind, HandlerKind::Async(_)),
            policies: self.schema_policies.clone(),
            stream_item: None,
            upload_item,
        };
        (self.describe)(schema, handler);
    }

    /// Records the start-up check of extractor `E` (for `State<T>`: that a
    /// `T` was given to the server).
    pub fn extractor<E: FromContext>(mut self) -> Self {
        if E::UPLOAD {
            self.upload = true;
            self.describe_upload = E::describe_upload;
        }
        self.checks.push(E::check);
        self
    }

    /// [`extractor`](Self::extractor) for a parameter of an `async` handler.
    pub fn async_extractor<E: FromContextAsync<M>, M>(mut self) -> Self {
        if E::UPLOAD {
            self.upload = true;
            self.describe_upload = E::describe_upload;
        }
        self.checks.push(E::check);
        self
    }

    /// Requires an encrypted request: a plain one is answered with error 6,
    /// `ENCRYPTION_REQUIRED`, and the handler does not run.
    pub fn encrypted(mut self) -> Self {
        self.policy.encrypted = true;
        self.schema_policies.encrypted = true;
        self
    }

    /// Requires a signed-in user (see
    /// [`ConnectionHandle::sign_in`](crate::ConnectionHandle::sign_in)):
    /// a connection that did not sign in is answered with error 3
    /// `UNAUTHORIZED`, and the handler does not run.
    pub fn signed_in(mut self) -> Self {
        self.policy.signed_in = true;
        self.schema_policies.signed_in = true;
        self
    }

    /// Requires the connection's permission level to be at least `level`
    /// (set with `ctx.set_permission(level)`, see
    /// [`ConnectionHandle::set_permission`](crate::ConnectionHandle::set_permission));
    /// below it, error 3 `UNAUTHORIZED`.
    pub fn permission(mut self, level: u32) -> Self {
        self.policy.permission = Some(level);
        self.schema_policies.permission = Some(level);
        self
    }

    /// Limits the handler to `millis` milliseconds: past it, its future is
    /// dropped and the request is answered with error 5 `TIMEOUT`. Only an
    /// `async` handler can be cut off; a time limit on a synchronous one
    /// fails the server's build.
    pub fn timeout_ms(mut self, millis: u64) -> Self {
        self.policy.timeout = Some(Duration::from_millis(millis));
        self.schema_policies.timeout_ms = Some(millis);
        self
    }

    /// Limits each connection to `per_second` requests of this handler per
    /// second, with bursts of `burst`; over it, error 4 `RATE_LIMITED`.
    pub fn rate_limit(mut self, per_second: u32, burst: u32) -> Self {
        self.policy.rate_limit = Some(middleware::quota(per_second, burst));
        self.schema_policies.rate_limit = Some((per_second, burst));
        self
    }

    /// Limits the requests of this handler running at once across the
    /// server to `limit`; beyond it, error 8 `OVERLOADED` at once (never a queue).
    pub fn concurrency(mut self, limit: usize) -> Self {
        self.policy.concurrency = Some(Concurrency::new(limit.max(1)));
        self.schema_policies.concurrency = Some(limit.max(1));
        self
    }

    /// Runs the handler for `body` as a future (behind around layers): a
    /// body that does not decode is answered `MALFORMED`.
    pub(crate) fn deferred(&self, body: &Bytes, ctx: Context) -> ReplyFuture {
        let started = match &self.kind {
            HandlerKind::Sync { deferred, .. } => deferred(body, &ctx).map(|reply| {
                let ready: ReplyFuture = Box::pin(std::future::ready(reply));
                ready
            }),
            HandlerKind::Async(start) => start(body, ctx),
        };
        started.unwrap_or_else(|error| {
            Box::pin(std::future::ready(DeferredReply::Error {
                code: ErrorCode::Malformed.to_u16(),
                message: error.to_string(),
            }))
        })
    }

    /// The opcode this handler answers.
    pub fn opcode(&self) -> u16 {
        self.opcode
    }

    /// The handler's name, `Controller::method`.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// The explicit controllers and, when `discover` is set, those found through
/// `inventory` (an explicit registration of the same type wins).
pub(crate) fn controllers(
    explicit: Vec<(TypeId, Arc<dyn Controller>)>,
    discover: bool,
) -> Vec<Arc<dyn Controller>> {
    let explicit_types: HashSet<TypeId> = explicit.iter().map(|(id, _)| *id).collect();
    let mut controllers: Vec<Arc<dyn Controller>> = explicit
        .into_iter()
        .map(|(_, controller)| controller)
        .collect();
    if discover {
        let mut seen = HashSet::new();
        for registration in inventory::iter::<ControllerRegistration> {
            let id = (registration.type_id)();
            if explicit_types.contains(&id) || !seen.insert(id) {
                continue;
            }
            tracing::debug!(controller = registration.name, "discovered controller");
            controllers.push((registration.make)());
        }
    }
    controllers
}

/// Every handler of a server, in one dense table indexed by opcode.
pub(crate) struct DispatchTable {
    /// For each application opcode, 0 for none or 1 + its index in `handlers`.
    slots: Box<[u16]>,
    handlers: Vec<HandlerSpec>,
}

impl DispatchTable {
    /// Builds the table from the explicit controllers and, when `discover`
    /// is set, those found through `inventory` (an explicit registration of
    /// the same type wins). Fails on a duplicate opcode or a failed check.
    pub(crate) fn build(
        explicit: Vec<(TypeId, Arc<dyn Controller>)>,
        discover: bool,
        state: &AppState,
    ) -> Result<Self, BuildError> {
        let controllers = controllers(explicit, discover);
        let mut table = Self {
            slots: vec![0; usize::from(SYSTEM_OPCODE_START)].into_boxed_slice(),
            handlers: Vec::new(),
        };
        let check_state = CheckState(state);
        for controller in controllers {
            for spec in controller.handlers() {
                table.insert(spec, &check_state)?;
            }
        }
        Ok(table)
    }

    fn insert(&mut self, spec: HandlerSpec, state: &CheckState<'_>) -> Result<(), BuildError> {
        let Some(slot) = self.slots.get(usize::from(spec.opcode)) else {
            return Err(BuildError::SystemOpcode {
                opcode: spec.opcode,
                handler: spec.name,
            });
        };
        if *slot != 0 {
            let first = &self.handlers[usize::from(*slot) - 1];
            return Err(BuildError::DuplicateOpcode {
                opcode: spec.opcode,
                first: first.name,
                second: spec.name,
            });
        }
        if spec.upload && matches!(spec.kind, HandlerKind::Sync { .. }) {
            return Err(BuildError::Handler {
                handler: spec.name,
                reason: "an upload needs an async handler: a synchronous one cannot wait for items"
                    .into(),
            });
        }
        if spec.policy.timeout.is_some() && matches!(spec.kind, HandlerKind::Sync { .. }) {
            return Err(BuildError::Handler {
                handler: spec.name,
                reason: "a time limit needs an async handler: a synchronous one cannot be cut off"
                    .into(),
            });
        }
        for check in &spec.checks {
            check(state).map_err(|reason| BuildError::Handler {
                handler: spec.name,
                reason,
            })?;
        }
        let index = u16::try_from(self.handlers.len() + 1).expect("at most 0xFF00 handlers");
        self.slots[usize::from(spec.opcode)] = index;
        self.handlers.push(spec);
        Ok(())
    }

    /// The handler of `opcode` and its index, if any.
    #[inline]
    pub(crate) fn get(&self, opcode: u16) -> Option<(usize, &HandlerSpec)> {
        match *self.slots.get(usize::from(opcode))? {
            0 => None,
            slot => {
                let index = usize::from(slot) - 1;
                Some((index, &self.handlers[index]))
            }
        }
    }

    /// The handler at `index` (as [`get`](Self::get) returned it).
    pub(crate) fn handler(&self, index: usize) -> &HandlerSpec {
        &self.handlers[index]
    }

    /// Registers the metrics of every handler.
    pub(crate) fn register_metrics(&mut self) {
        for handler in &mut self.handlers {
            handler.metrics = Some(HandlerMetrics::new(handler.opcode, handler.name));
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.handlers.len()
    }
}
