//! Requests: each frame dispatched to its handler through the middleware
//! chain. Synchronous handlers run inline and write their reply in place;
//! asynchronous ones are polled on the connection's own task (no spawn, no
//! hop between tasks), at most `max_requests_in_flight` at a time.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use futures_util::future::{Abortable, Aborted};
use futures_util::stream::StreamExt;
use ternio_protocol::frame::Header;
use ternio_protocol::{DecodeError, ErrorCode, Frame};
use tokio::time::Sleep;
use tracing::Instrument;

use super::Engine;
use super::cancel::Cancels;
use crate::around::{AroundRequest, Next, Reply};
use crate::context::Context;
use crate::dispatch::{HandlerKind, HandlerSpec, ReplyFuture};
use crate::metrics::TransportMetrics;
use crate::middleware::{Outcome, RequestInfo};
use crate::panics::panic_message;
use crate::reply::{DeferredReply, FrameReply};

/// `through` for [`Engine::after`] once a request went through every
/// middleware of its chain.
pub(super) const THROUGH_ALL: usize = usize::MAX;

/// When a request started, read from the clock only when the time it takes
/// is observed (middleware, metrics or a debug trace).
type Started = Option<Instant>;

/// An asynchronous request still running.
pub(super) struct Pending {
    header: Header,
    /// The handler's index in the dispatch table.
    handler: usize,
    started: Started,
    /// The handler's future, which a `CANCEL` from the peer aborts.
    future: Abortable<ReplyFuture>,
    /// The handler's time limit or the peer's `DEADLINE`, whichever is
    /// sooner, if either.
    deadline: Option<Pin<Box<Sleep>>>,
}

impl Future for Pending {
    type Output = (
        Header,
        usize,
        Started,
        DeferredReply,
        Option<Pin<Box<Sleep>>>,
    );

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let reply = match Pin::new(&mut self.future).poll(cx) {
            Poll::Ready(Ok(reply)) => reply,
            // The peer sent `CANCEL`: the future is dropped with this request.
            Poll::Ready(Err(Aborted)) => DeferredReply::Cancelled,
            Poll::Pending => {
                let expired = self
                    .deadline
                    .as_mut()
                    .is_some_and(|deadline| deadline.as_mut().poll(cx).is_ready());
                if !expired {
                    return Poll::Pending;
                }
                // Past its limit: this request ends now and its future is dropped.
                DeferredReply::TimedOut
            }
        };
        // A stream reply keeps the request's time limit.
        let deadline = self.deadline.take();
        Poll::Ready((self.header, self.handler, self.started, reply, deadline))
    }
}

impl Engine {
    /// Writes the replies of the asynchronous requests that finished,
    /// while the outbound buffer is below its high-water mark: a peer that
    /// does not read holds back the handlers' replies (until the write
    /// timeout closes it), not memory. Returns whether any finished.
    pub(super) fn poll_replies(&mut self, cx: &mut TaskContext<'_>) -> bool {
        let high_water = self.server.config.outbound_high_water;
        let mut progress = false;
        // (An empty set has nothing to poll and no waker to keep.)
        if !self.pending.is_empty() && self.out.len() < high_water {
            let server = Arc::clone(&self.server);
            while self.out.len() < high_water
                && let Poll::Ready(Some((header, index, started, reply, deadline))) =
                    self.pending.poll_next_unpin(cx)
            {
                let handler = server.table.handler(index);
                self.cancels.finished(header.request_id);
                self.streams.request_ended(header.request_id);
                progress = true;
                if let DeferredReply::Stream(items) = reply {
                    if header.request_id == 0 {
                        // Nobody reads a stream sent with no id.
                        drop(items);
                        self.after(header, handler, THROUGH_ALL, Outcome::Replied, started);
                    } else {
                        self.open_download(header, index, started, items, deadline);
                    }
                    continue;
                }
                let outcome = reply.write(self.reply_to(header), handler.name);
                self.after(header, handler, THROUGH_ALL, outcome, started);
                progress = true;
            }
        }
        progress
    }

    /// Drops every running request, telling middleware they were cancelled.
    pub(super) fn cancel_pending(&mut self) {
        let server = Arc::clone(&self.server);
        self.cancels = Cancels::default();
        self.end_streams();
        for pending in std::mem::take(&mut self.pending) {
            let handler = server.table.handler(pending.handler);
            self.after(
                pending.header,
                handler,
                THROUGH_ALL,
                Outcome::Cancelled,
                pending.started,
            );
        }
    }

    /// The request as middleware sees it.
    fn info<'a>(&'a self, header: Header, handler: &'a HandlerSpec) -> RequestInfo<'a> {
        RequestInfo {
            header,
            handler: handler.name,
            policy: &handler.policy,
            require_encryption: self.server.config.require_encryption,
            connection: &self.connection,
        }
    }

    /// The transport's metric handles, when metrics are on.
    pub(crate) fn metrics(&self) -> Option<&TransportMetrics> {
        self.server
            .metrics
            .as_ref()
            .map(|metrics| metrics.transport(self.connection.transport()))
    }

    /// Runs the `after` hooks of the first `through` middleware the request
    /// went through ([`THROUGH_ALL`]: all of them), innermost
    /// first, and records the request (metrics, trace event).
    pub(super) fn after(
        &self,
        header: Header,
        handler: &HandlerSpec,
        through: usize,
        outcome: Outcome,
        started: Started,
    ) {
        let elapsed = started.map_or(Duration::ZERO, |started| started.elapsed());
        let info = self.info(header, handler);
        let chain = self.server.chain(handler);
        for middleware in chain[..through.min(chain.len())].iter().rev() {
            middleware.after(&info, outcome, elapsed);
        }
        tracing::debug!(
            connection = %self.connection.id,
            opcode = header.opcode,
            request_id = header.request_id,
            handler = handler.name,
            ?outcome,
            elapsed_us = elapsed.as_micros() as u64,
            "request"
        );
        // Present only when metrics are on; error replies count themselves.
        if let Some(handler) = &handler.metrics {
            handler.requests.increment(1);
            handler.duration.record(elapsed.as_secs_f64());
        }
    }

    /// Routes a request to its handler through the middleware chain: run
    /// inline if synchronous, started on this task if asynchronous.
    pub(super) fn dispatch(&mut self, frame: Frame) {
        let header = frame.header;
        let server = Arc::clone(&self.server);
        let Some((index, handler)) = server.table.get(header.opcode) else {
            self.error(
                header,
                ErrorCode::UnknownOpcode,
                &format_args!("no handler for opcode {:#06X}", header.opcode),
            );
            return;
        };
        // The peer's `DEADLINE` for this request, if it sent one.
        let deadline = self.cancels.take_deadline(header.request_id);
        if deadline.is_some_and(|deadline| deadline <= tokio::time::Instant::now()) {
            self.error(
                header,
                ErrorCode::Timeout,
                &format_args!(
                    "the requester's deadline passed before {} ran",
                    handler.name
                ),
            );
            return;
        }
        // The clock is read only when someone looks at the duration.
        let timed = server.middleware_times
            || handler.metrics.is_some()
            || tracing::enabled!(tracing::Level::DEBUG);
        let call = Call {
            header,
            index,
            handler,
            started: timed.then(Instant::now),
            deadline,
        };
        for (position, middleware) in server.chain(handler).iter().enumerate() {
            if let Err(rejection) = middleware.before(&self.info(header, handler)) {
                let code = rejection.code;
                self.error(header, code, &rejection.message);
                self.after(
                    header,
                    handler,
                    position,
                    Outcome::Rejected(code),
                    call.started,
                );
                return;
            }
        }
        let mut ctx = Context::new(Arc::clone(&self.connection), header);
        if handler.upload {
            if let Err(rejection) = self.check_upload(header) {
                let code = rejection.code;
                self.error(header, code, &rejection.message);
                self.after(
                    header,
                    handler,
                    THROUGH_ALL,
                    Outcome::Rejected(code),
                    call.started,
                );
                return;
            }
            let connection = Arc::clone(&self.connection);
            let grant_due = move || connection.outbox.wake();
            ctx = ctx.with_upload(Some(self.streams.open_upload(header.request_id, grant_due)));
        }
        let span = tracing::debug_span!(
            "request",
            connection = self.connection.id.0,
            opcode = header.opcode,
            request_id = header.request_id,
            handler = handler.name
        );
        if !server.arounds.is_empty() {
            // Behind the around layers, every handler runs as a future.
            let next = Next::new(server.clone(), index, frame.body);
            let started = catch_unwind(AssertUnwindSafe(|| {
                let chain = next.run(AroundRequest::new(ctx, handler.name));
                let chain: ReplyFuture =
                    Box::pin(AssertUnwindSafe(chain).catch_unwind().map(|ended| {
                        ended
                            .unwrap_or_else(|panic| {
                                Reply(DeferredReply::Panicked(panic_message(&*panic)))
                            })
                            .0
                    }));
                Ok(chain)
            }));
            self.start(call, started, span);
            return;
        }
        match &handler.kind {
            HandlerKind::Sync { inline: run, .. } => {
                let _entered = span.enter();
                self.run_inline(&call, |sink| run(&frame.body, &ctx, sink));
            }
            HandlerKind::Async(start) => {
                let started = catch_unwind(AssertUnwindSafe(|| start(&frame.body, ctx)));
                self.start(call, started, span);
            }
        }
    }

    /// Runs a synchronous handler, which writes its reply in place.
    fn run_inline(
        &mut self,
        call: &Call<'_>,
        run: impl FnOnce(FrameReply<'_>) -> Result<Outcome, DecodeError>,
    ) {
        let Call {
            header, handler, ..
        } = *call;
        // A due REKEY goes before the mark: a panic drops only the
        // half-written reply, which used no counter.
        self.rekey_if_due();
        let mark = self.out.len();
        let mut stream = None;
        let sink = self.reply_to_prepared(header).streaming(&mut stream);
        let outcome = match catch_unwind(AssertUnwindSafe(|| run(sink))) {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(error)) => self.error(header, ErrorCode::Malformed, &error),
            Err(panic) => {
                // Drop whatever the handler half-wrote: a sealed frame
                // takes its counter only once written whole.
                self.out.truncate(mark);
                DeferredReply::Panicked(panic_message(&*panic))
                    .write(self.reply_to(header), handler.name)
            }
        };
        if let Some(items) = stream {
            // The stream's end runs the `after` hooks.
            let deadline = call
                .deadline
                .map(|at| Box::pin(tokio::time::sleep_until(at)));
            self.open_download(header, call.index, call.started, items, deadline);
            return;
        }
        self.after(header, handler, THROUGH_ALL, outcome, call.started);
    }

    /// Whether request `header` may open an upload: it has an id, and the
    /// connection is below its limit of open streams.
    fn check_upload(&self, header: Header) -> Result<(), crate::middleware::Rejection> {
        use crate::middleware::Rejection;
        if header.request_id == 0 {
            return Err(Rejection::new(
                ErrorCode::Malformed,
                "an upload needs a request id",
            ));
        }
        let limit = self.server.config.max_streams_per_connection;
        if self.streams.open() >= limit {
            return Err(Rejection::new(
                ErrorCode::Overloaded,
                format!("too many open streams on this connection (at most {limit})"),
            ));
        }
        Ok(())
    }

    /// Adds an asynchronous handler's future to the running requests (or
    /// answers at once when it could not start).
    fn start(
        &mut self,
        call: Call<'_>,
        started: std::thread::Result<Result<ReplyFuture, DecodeError>>,
        span: tracing::Span,
    ) {
        let Call {
            header,
            index,
            handler,
            started: at,
            deadline,
        } = call;
        let outcome = match started {
            Ok(Ok(future)) => {
                // Only a span that a subscriber records costs a wrapper.
                let future = if span.is_disabled() {
                    future
                } else {
                    Box::pin(future.instrument(span))
                };
                let limit = handler
                    .policy
                    .timeout
                    .map(|limit| tokio::time::Instant::now() + limit);
                let deadline = match (limit, deadline) {
                    (Some(limit), Some(deadline)) => Some(limit.min(deadline)),
                    (limit, deadline) => limit.or(deadline),
                };
                self.pending.push(Pending {
                    header,
                    handler: index,
                    started: at,
                    future: Abortable::new(future, self.cancels.register(header.request_id)),
                    deadline: deadline.map(|at| Box::pin(tokio::time::sleep_until(at))),
                });
                return;
            }
            Ok(Err(error)) => self.error(header, ErrorCode::Malformed, &error),
            Err(panic) => DeferredReply::Panicked(panic_message(&*panic))
                .write(self.reply_to(header), handler.name),
        };
        self.streams.request_ended(header.request_id);
        self.after(header, handler, THROUGH_ALL, outcome, at);
    }
}

/// A request on its way to its handler.
struct Call<'a> {
    header: Header,
    /// The handler's index in the dispatch table.
    index: usize,
    handler: &'a HandlerSpec,
    started: Started,
    /// The peer's `DEADLINE` for it, if any.
    deadline: Option<tokio::time::Instant>,
}
