//! What runs around every dispatch: middleware, and the built-in policies
//! (permission, rate limit, concurrency limit) written as one middleware.
//!
//! Middleware runs in the order it was added, on the connection's task,
//! before the handler (where it may reject the request with an error code)
//! and after it (where it sees the outcome). The built-in policies sit
//! innermost, next to the handler, unless [`Policies`] is added explicitly
//! at another place; so a logging middleware added first sees every
//! rejection. Time limits are not a `before` check: the server drops the
//! handler's future when its limit passes and answers error 5.

use std::fmt;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use governor::{Quota, RateLimiter};
use ternio_protocol::frame::Header;
use ternio_protocol::{AppError, ErrorCode, HandlerError};

use crate::ids::{ConnectionId, Transport};
use crate::registry::ConnectionShared;
use crate::store::ConnectionStore;
use crate::sync::lock;
use crate::users::UserId;

/// The policies a handler declares with `#[handler(...)]`.
#[derive(Debug, Default)]
pub(crate) struct HandlerPolicy {
    /// The permission level a connection needs (error 3 below it).
    pub(crate) permission: Option<u32>,
    /// The time the handler may run (error 5 after it).
    pub(crate) timeout: Option<Duration>,
    /// Requests per second and burst, per connection (error 4 over it).
    pub(crate) rate_limit: Option<Quota>,
    /// Requests running at once across the server (error 8 at it).
    pub(crate) concurrency: Option<Concurrency>,
    /// Whether a plain request is refused (error 6).
    pub(crate) encrypted: bool,
    /// Whether a connection that did not sign in is refused (error 3).
    pub(crate) signed_in: bool,
}

impl HandlerPolicy {
    /// Whether [`Policies`] has nothing to check for this handler (its
    /// timeout is kept elsewhere).
    pub(crate) fn checks_nothing(&self) -> bool {
        self.permission.is_none()
            && self.rate_limit.is_none()
            && self.concurrency.is_none()
            && !self.encrypted
            && !self.signed_in
    }
}

/// A concurrency limit and the count of requests running under it.
#[derive(Debug)]
pub(crate) struct Concurrency {
    limit: usize,
    running: AtomicUsize,
}

impl Concurrency {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit,
            running: AtomicUsize::new(0),
        }
    }
}

/// One request as middleware sees it.
pub struct RequestInfo<'a> {
    pub(crate) header: Header,
    pub(crate) handler: &'static str,
    pub(crate) policy: &'a HandlerPolicy,
    /// The server requires encryption for every application opcode.
    pub(crate) require_encryption: bool,
    pub(crate) connection: &'a ConnectionShared,
}

impl std::fmt::Debug for RequestInfo<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestInfo")
            .field("opcode", &format_args!("{:#06X}", self.header.opcode))
            .field("request_id", &self.header.request_id)
            .field("handler", &self.handler)
            .field("connection", &self.connection_id())
            .field("peer", &self.peer_addr())
            .field("transport", &self.transport())
            .field("permission", &self.permission())
            .field("user", &self.user())
            .finish_non_exhaustive()
    }
}

impl RequestInfo<'_> {
    /// The request's header (opcode, flags, request id).
    pub fn header(&self) -> Header {
        self.header
    }

    /// The handler's name, `Controller::method`.
    pub fn handler(&self) -> &'static str {
        self.handler
    }

    /// The connection's id.
    pub fn connection_id(&self) -> ConnectionId {
        self.connection.id
    }

    /// The connection's peer address: its current link's (a session
    /// resumed from another address takes the new one).
    pub fn peer_addr(&self) -> std::net::SocketAddr {
        self.connection.peer()
    }

    /// The transport of the connection's current link.
    pub fn transport(&self) -> Transport {
        self.connection.transport()
    }

    /// The connection's permission level.
    pub fn permission(&self) -> u32 {
        self.connection.permission()
    }

    /// The user the connection signed in as, if any (see
    /// [`ConnectionHandle::sign_in`](crate::ConnectionHandle::sign_in)).
    pub fn user(&self) -> Option<UserId> {
        self.connection.user()
    }

    /// The connection's typed store.
    pub fn store(&self) -> &ConnectionStore {
        &self.connection.store
    }

    /// Whether the request arrived sealed.
    pub fn is_encrypted(&self) -> bool {
        self.header.flags.is_encrypted()
    }
}

/// Why middleware or an extractor refused a request: the error code and
/// message the client gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The error code.
    pub code: ErrorCode,
    /// The message.
    pub message: String,
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Rejection {}

/// A handler that took `Result<T, Rejection>` may answer with the rejection.
impl AppError for Rejection {
    fn code(&self) -> ErrorCode {
        self.code
    }
}

impl From<HandlerError> for Rejection {
    fn from(error: HandlerError) -> Self {
        Self {
            code: error.code,
            message: error.message,
        }
    }
}

impl Rejection {
    /// A rejection with `code` (one of the contract's, or an application's
    /// [`AppCode`](crate::AppCode)) and `message`.
    pub fn new(code: impl Into<ErrorCode>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
        }
    }
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The handler answered (a packet or an acknowledgement).
    Replied,
    /// The handler (or the server for it: decoding, timeout, panic) answered
    /// with this error code.
    Failed(ErrorCode),
    /// Middleware or an extractor refused the request with this code; the
    /// handler did not run.
    Rejected(ErrorCode),
    /// The handler did not finish: the connection closed, or the peer
    /// cancelled the request (`CANCEL`, docs/PROTOCOL.md section 4.1).
    Cancelled,
}

/// Code that runs around every dispatch. Implement the hooks you need.
pub trait Middleware: Send + Sync + 'static {
    /// Before the handler. An error answers the request with its code and
    /// stops the dispatch (later middleware and the handler do not run).
    fn before(&self, request: &RequestInfo<'_>) -> Result<(), Rejection> {
        let _ = request;
        Ok(())
    }

    /// After the request ended, for every middleware whose `before` let it
    /// through, innermost first. (One that rejects the request sees no
    /// `after`; those outside it see [`Outcome::Rejected`].)
    fn after(&self, request: &RequestInfo<'_>, outcome: Outcome, elapsed: Duration) {
        let _ = (request, outcome, elapsed);
    }

    /// Whether [`after`](Self::after) reads its `elapsed` argument. When no
    /// middleware does (and neither metrics nor a debug-level trace), the
    /// server does not read the clock for each request, and `elapsed` is
    /// zero.
    fn uses_elapsed(&self) -> bool {
        true
    }
}

/// The built-in policies, as middleware: encryption, signed-in user, permission level, rate
/// limit per connection and opcode, concurrency limit per opcode. Added innermost by
/// default; add it yourself to put it elsewhere in the chain.
#[derive(Debug, Default, Clone, Copy)]
pub struct Policies;

impl Middleware for Policies {
    fn before(&self, request: &RequestInfo<'_>) -> Result<(), Rejection> {
        let policy = request.policy;
        if (policy.encrypted || request.require_encryption) && !request.is_encrypted() {
            return Err(Rejection::new(
                ErrorCode::EncryptionRequired,
                format!("{} requires an encrypted request", request.handler),
            ));
        }
        if policy.signed_in && request.connection.user().is_none() {
            return Err(Rejection::new(
                ErrorCode::Unauthorized,
                format!("{} needs a signed-in user", request.handler),
            ));
        }
        if let Some(required) = policy.permission {
            let level = request.connection.permission();
            if level < required {
                return Err(Rejection::new(
                    ErrorCode::Unauthorized,
                    format!(
                        "{} needs permission {required}, the connection has {level}",
                        request.handler
                    ),
                ));
            }
        }
        if let Some(quota) = policy.rate_limit {
            let allowed = lock(&request.connection.rate_limiters)
                .entry(request.header.opcode)
                .or_insert_with(|| RateLimiter::direct(quota))
                .check()
                .is_ok();
            if !allowed {
                return Err(Rejection::new(
                    ErrorCode::RateLimited,
                    format!(
                        "{} is over its rate limit on this connection",
                        request.handler
                    ),
                ));
            }
        }
        if let Some(concurrency) = &policy.concurrency {
            let running = concurrency.running.fetch_add(1, Ordering::AcqRel);
            if running >= concurrency.limit {
                concurrency.running.fetch_sub(1, Ordering::AcqRel);
                return Err(Rejection::new(
                    ErrorCode::Overloaded,
                    format!(
                        "{} already runs {} requests",
                        request.handler, concurrency.limit
                    ),
                ));
            }
        }
        Ok(())
    }

    fn after(&self, request: &RequestInfo<'_>, _outcome: Outcome, _elapsed: Duration) {
        // `before` let the request through, so it took a slot.
        if let Some(concurrency) = &request.policy.concurrency {
            concurrency.running.fetch_sub(1, Ordering::AcqRel);
        }
    }

    fn uses_elapsed(&self) -> bool {
        false
    }
}

/// A middleware that logs every request with `tracing` at INFO: connection,
/// opcode, handler, outcome and duration. An example of the mechanism.
#[derive(Debug, Default, Clone, Copy)]
pub struct AuditLog;

impl Middleware for AuditLog {
    fn after(&self, request: &RequestInfo<'_>, outcome: Outcome, elapsed: Duration) {
        tracing::info!(
            target: "ternio::audit",
            connection = %request.connection_id(),
            peer = %request.peer_addr(),
            opcode = request.header.opcode,
            request_id = request.header.request_id,
            handler = request.handler,
            encrypted = request.is_encrypted(),
            ?outcome,
            elapsed_us = elapsed.as_micros() as u64,
            "request"
        );
    }
}

/// The quota of `per_second` requests with bursts of `burst`.
pub(crate) fn quota(per_second: u32, burst: u32) -> Quota {
    let rate = NonZeroU32::new(per_second.max(1)).expect("at least 1");
    let burst = NonZeroU32::new(burst.max(1)).expect("at least 1");
    Quota::per_second(rate).allow_burst(burst)
}
