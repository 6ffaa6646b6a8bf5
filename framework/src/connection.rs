//! One connection's protocol logic, whatever its transport: frames in,
//! middleware and handlers called, replies written into the outbound buffer.
//!
//! Synchronous handlers run inline and write their reply in place.
//! Asynchronous ones are polled on the connection's own task (no spawn, no
//! hop between tasks), at most `max_requests_in_flight` at a time.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};
use ternio_protocol::Encode;
use ternio_protocol::buffers;
use ternio_protocol::frame::{self, Flags, Framing, Header};
use ternio_protocol::prefix;
use ternio_protocol::secure::{Responder, Sealer, SecureChannel};
use ternio_protocol::system::{self, Disconnect, Ping};
use ternio_protocol::{BytesMut, Decode, DisconnectReason, ErrorCode, Frame, ReplySink};
use tokio::time::Sleep;

use crate::close::CloseNotice;
use crate::context::{ConnectionShared, Context};
use crate::dispatch::{HandlerKind, HandlerSpec, ReplyFuture, panic_message};
use crate::metrics::TransportMetrics;
use crate::outbound::CloseOrder;
use crate::policy::{Outcome, RequestInfo};
use crate::reply::{DeferredReply, FrameReply, ReplyMetrics};
use crate::server::ServerShared;
use tracing::Instrument;

/// What the transport does after a frame.
pub(crate) enum Flow {
    Continue,
    /// The peer said `DISCONNECT`: stop reading, flush what is ready, close.
    PeerDisconnected(Disconnect),
    /// The session wrote its `DISCONNECT` into the outbound buffer: stop
    /// reading, flush, close.
    Close,
}

/// When a request started, read from the clock only when the time it takes
/// is observed (middleware, metrics or a debug trace).
type Started = Option<Instant>;

/// An asynchronous request still running.
struct Pending {
    header: Header,
    /// The handler's index in the dispatch table.
    handler: usize,
    started: Started,
    future: ReplyFuture,
    /// The handler's time limit, if it has one.
    deadline: Option<Pin<Box<Sleep>>>,
}

impl Future for Pending {
    type Output = (Header, usize, Started, DeferredReply);

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let reply = match self.future.as_mut().poll(cx) {
            Poll::Ready(reply) => reply,
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
        Poll::Ready((self.header, self.handler, self.started, reply))
    }
}

/// A close the session was asked for: it waits for the running requests
/// (until the deadline), then writes its `DISCONNECT`.
struct Closing {
    notice: CloseNotice,
    deadline: Pin<Box<Sleep>>,
}

/// How long a connection goes without input before it gives its buffers back.
const QUIET_AFTER: Duration = Duration::from_secs(1);

/// The connection's quiet timer: buffers given back after [`QUIET_AFTER`],
/// a PING halfway through the idle timeout, `IDLE_TIMEOUT` at its end.
struct Keepalive {
    idle_timeout: Option<Duration>,
    timer: Pin<Box<Sleep>>,
    /// Whether `timer` was polled since it was last set: its waker is
    /// registered, so until it elapses there is no need to poll it again.
    polled: bool,
    /// Whether the buffers were given back since the peer last sent anything.
    released: bool,
    /// Whether a PING went out since the peer last sent anything.
    pinged: bool,
    next_ping_id: u32,
}

impl Keepalive {
    /// When the next event is due, counted from the last input.
    fn next_event(&self) -> Duration {
        let release = (!self.released).then_some(QUIET_AFTER);
        let ping = self
            .idle_timeout
            .filter(|_| !self.pinged)
            .map(|timeout| timeout / 2);
        [release, ping, self.idle_timeout]
            .into_iter()
            .flatten()
            .min()
            // Nothing more until the peer speaks again (see `note_inbound`).
            .unwrap_or(Duration::from_secs(365 * 24 * 3600))
    }
}

/// The frame timeout's timer, armed while an unfinished frame waits.
#[derive(Default)]
struct FrameDeadline {
    timer: Option<Pin<Box<Sleep>>>,
    armed: bool,
}

/// The write timeout's timer, armed while frames wait: each span of the
/// write timeout must drain the minimum rate's worth of bytes.
struct WriteStall {
    timer: Option<Pin<Box<Sleep>>>,
    armed: bool,
    /// Bytes written since the current span began.
    drained: usize,
    /// Bytes waiting in the outbound buffer when the span began.
    queued_at_start: usize,
}

/// Where the connection's secure session stands (section 5).
enum Security {
    /// No handshake yet; with `deadline`, the server requires one in time.
    Plain { deadline: Option<Pin<Box<Sleep>>> },
    /// The handshake completed: every frame in either direction is sealed.
    Secure(Box<SecureChannel>),
    /// A handshake was tried and failed: no other may follow. (A server
    /// that requires encryption closes the connection then, so no deadline
    /// is left to run.)
    Failed,
}

impl Security {
    /// The sealer, once the session is up: everything written is sealed.
    fn sealer(&mut self) -> Option<&mut Sealer> {
        match self {
            Self::Secure(channel) => Some(&mut channel.sealer),
            _ => None,
        }
    }

    /// The handshake deadline still running, if any.
    fn deadline(&mut self) -> Option<&mut Pin<Box<Sleep>>> {
        match self {
            Self::Plain { deadline } => deadline.as_mut(),
            Self::Secure(_) | Self::Failed => None,
        }
    }
}

/// The transport-independent state of one connection: the running requests,
/// the outbound buffer, the secure session, and what other tasks send it.
///
/// Frames in `out` always carry a u32 length prefix, whatever the transport:
/// TCP writes the buffer as it is, WebSocket cuts it into one message per frame.
pub(crate) struct Session {
    connection: Arc<ConnectionShared>,
    server: Arc<ServerShared>,
    pending: FuturesUnordered<Pending>,
    security: Security,
    closing: Option<Closing>,
    /// Set once the `DISCONNECT` is in `out`: nothing more is read or answered.
    closed: Option<DisconnectReason>,
    keepalive: Keepalive,
    last_inbound: Instant,
    frame_deadline: FrameDeadline,
    write_stall: WriteStall,
    /// Set when the connection went quiet: the transport may free its buffers.
    idle_hint: bool,
    /// Frames ready to be written, each with its length prefix.
    pub(crate) out: BytesMut,
    /// Where sealed bodies that arrived as shared `Bytes` (WebSocket
    /// messages) are copied to be opened in place: reused once the previous
    /// body is dropped, so opening allocates nothing in steady state; a body
    /// above 64 KiB gets a buffer of its own ([`buffers::copy_to_open`]).
    open_buf: BytesMut,
}

impl Session {
    pub(crate) fn new(connection: Arc<ConnectionShared>, server: Arc<ServerShared>) -> Self {
        let deadline = server
            .config
            .require_encryption
            .then(|| Box::pin(tokio::time::sleep(server.config.handshake_timeout)));
        let keepalive = Keepalive {
            idle_timeout: server.config.idle_timeout,
            timer: Box::pin(tokio::time::sleep(
                server
                    .config
                    .idle_timeout
                    .map_or(QUIET_AFTER, |timeout| (timeout / 2).min(QUIET_AFTER)),
            )),
            polled: false,
            released: false,
            pinged: false,
            next_ping_id: 1,
        };
        Self {
            connection,
            server,
            pending: FuturesUnordered::new(),
            security: Security::Plain { deadline },
            closing: None,
            closed: None,
            keepalive,
            last_inbound: Instant::now(),
            frame_deadline: FrameDeadline::default(),
            write_stall: WriteStall {
                timer: None,
                armed: false,
                drained: 0,
                queued_at_start: 0,
            },
            idle_hint: false,
            open_buf: BytesMut::new(),
            out: BytesMut::new(),
        }
    }

    /// Called by the transport after it read from the peer: `completed`
    /// when whole frames (on WebSocket, data messages) arrived, `partial`
    /// when an unfinished one waits. Only whole frames count as input for
    /// the idle timeout; an unfinished frame must be whole within the frame
    /// timeout from its first byte, and later bytes do not extend that.
    pub(crate) fn note_frames(&mut self, completed: bool, partial: bool) {
        let deadline = &mut self.frame_deadline;
        if completed || !partial {
            deadline.armed = false;
        }
        if partial && !deadline.armed {
            let at = tokio::time::Instant::now() + self.server.config.frame_timeout;
            match &mut deadline.timer {
                Some(timer) => timer.as_mut().reset(at),
                None => deadline.timer = Some(Box::pin(tokio::time::sleep_until(at))),
            }
            deadline.armed = true;
        }
        if completed {
            self.note_inbound();
        }
    }

    /// The largest frame the peer may send now: smaller until the
    /// handshake completed when the server requires encryption.
    pub(crate) fn frame_limit(&self) -> usize {
        let config = &self.server.config;
        match self.security {
            Security::Secure(_) => config.max_frame_size,
            _ if config.require_encryption => config
                .max_frame_size
                .min(config.max_frame_size_before_handshake),
            _ => config.max_frame_size,
        }
    }

    /// Whole frames arrived: the idle clock starts again.
    fn note_inbound(&mut self) {
        self.last_inbound = Instant::now();
        let keepalive = &mut self.keepalive;
        keepalive.pinged = false;
        if std::mem::take(&mut keepalive.released) {
            // Quiet no more: arm the timer to give the buffers back again.
            let deadline = tokio::time::Instant::from_std(self.last_inbound + QUIET_AFTER);
            keepalive.timer.as_mut().reset(deadline);
            keepalive.polled = false;
        }
    }

    /// Whether the connection went quiet since the last call: the transport
    /// may give its empty buffers back.
    pub(crate) fn take_idle_hint(&mut self) -> bool {
        std::mem::take(&mut self.idle_hint)
    }

    /// Called by the transport after each write attempt while bytes wait
    /// (`waiting`) or a span is open ([`write_stall_armed`](Self::write_stall_armed)),
    /// with the bytes `written`. A span of the write timeout opens when
    /// bytes wait; it is judged when it ends if bytes still wait then (the
    /// socket's own buffer is full: the peer is behind): it must have
    /// drained the minimum rate's worth, or everything queued during the
    /// span if that is less, and at least a byte. Momentary emptiness of
    /// the outbound buffer does not end a span (the socket's buffer hides
    /// how far behind the peer is). Otherwise the connection is closed with
    /// `SLOW_CONSUMER`, and this returns true.
    pub(crate) fn poll_write_stall(
        &mut self,
        cx: &mut TaskContext<'_>,
        waiting: bool,
        written: usize,
    ) -> bool {
        if self.closed.is_some() {
            return false;
        }
        let config = &self.server.config;
        let queued = self.out.len();
        let stall = &mut self.write_stall;
        if stall.armed {
            stall.drained = stall.drained.saturating_add(written);
        } else {
            if !waiting {
                return false;
            }
            stall.armed = true;
            stall.drained = 0;
            stall.queued_at_start = queued;
            let deadline = tokio::time::Instant::now() + config.write_timeout;
            match &mut stall.timer {
                Some(timer) => timer.as_mut().reset(deadline),
                None => stall.timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
            }
        }
        let expired = stall
            .timer
            .as_mut()
            .is_some_and(|timer| timer.as_mut().poll(cx).is_ready());
        if !expired {
            return false;
        }
        stall.armed = false;
        if !waiting {
            // Nothing waits: the peer took all there was.
            return false;
        }
        let queued_during = (stall.drained + queued).saturating_sub(stall.queued_at_start);
        let rate = (config.min_drain_rate as f64 * config.write_timeout.as_secs_f64()) as usize;
        if stall.drained >= rate.min(queued_during).max(1) {
            // Enough got out: a new span begins.
            return self.poll_write_stall(cx, waiting, 0);
        }
        let message = format!(
            "{} bytes read in {:?} while more waited: the peer does not keep up",
            stall.drained, config.write_timeout
        );
        self.close_now(&CloseNotice::new(DisconnectReason::SlowConsumer, message));
        true
    }

    /// Whether a span of the write timeout is open: the transport reports
    /// its writes (none, when nothing waits) until it ends.
    pub(crate) fn write_stall_armed(&self) -> bool {
        self.write_stall.armed
    }

    /// Runs the connection's quiet timer: after [`QUIET_AFTER`] without
    /// input the transport may give its buffers back; halfway through the
    /// idle timeout a PING goes out; at its end, `IDLE_TIMEOUT`. Returns
    /// whether it did anything.
    fn poll_keepalive(&mut self, cx: &mut TaskContext<'_>) -> bool {
        let keepalive = &mut self.keepalive;
        if self.closed.is_some() || (keepalive.polled && !keepalive.timer.is_elapsed()) {
            return false;
        }
        keepalive.polled = true;
        if keepalive.timer.as_mut().poll(cx).is_pending() {
            return false;
        }
        let idle = self.last_inbound.elapsed();
        if let Some(timeout) = keepalive.idle_timeout
            && idle >= timeout
        {
            let message = format!("nothing received for {timeout:?}");
            self.close_now(&CloseNotice::new(DisconnectReason::IdleTimeout, message));
            return true;
        }
        if idle >= QUIET_AFTER && !keepalive.released {
            keepalive.released = true;
            self.idle_hint = true;
            self.open_buf = BytesMut::new();
            self.connection.outbound.release();
        }
        if let Some(timeout) = keepalive.idle_timeout
            && idle >= timeout / 2
            && !keepalive.pinged
        {
            keepalive.pinged = true;
            let id = keepalive.next_ping_id;
            keepalive.next_ping_id = keepalive.next_ping_id.wrapping_add(1).max(1);
            let ping = Ping {
                value: idle.as_nanos() as u64,
            };
            let header = Header::new(system::PING, Flags::NONE, id);
            self.write_own(header, &ping);
        }
        let keepalive = &mut self.keepalive;
        let next = keepalive.next_event();
        keepalive
            .timer
            .as_mut()
            .reset(tokio::time::Instant::from_std(self.last_inbound + next));
        // Poll once more so the timer's waker is registered.
        let _ = keepalive.timer.as_mut().poll(cx);
        true
    }

    pub(crate) fn connection(&self) -> &Arc<ConnectionShared> {
        &self.connection
    }

    /// Whether to read more: not closing, fewer requests running than the
    /// limit, and the peer keeping up with what is already written.
    pub(crate) fn wants_input(&self) -> bool {
        self.closing.is_none()
            && self.closed.is_none()
            && self.pending.len() < self.server.config.max_requests_in_flight
            && self.out.len() < self.server.config.outbound_high_water
    }

    /// Whether no asynchronous request is running.
    pub(crate) fn is_idle(&self) -> bool {
        self.pending.is_empty()
    }

    /// Why the session closed, once its `DISCONNECT` is written into `out`
    /// (or the peer's `DISCONNECT` arrived).
    pub(crate) fn closed(&self) -> Option<DisconnectReason> {
        self.closed
    }

    /// Writes a `REKEY` before the next sealed frame when the session's
    /// policy says it is time (section 5.2).
    fn rekey_if_due(&mut self) {
        if let Some(sealer) = self.security.sealer()
            && let Err(error) = sealer.rekey_if_due(&mut self.out, Framing::LengthPrefixed)
        {
            tracing::warn!(connection = %self.connection.id, %error, "no rekey");
        }
    }

    /// Appends a frame of the server's own (a `PING`), sealed once the
    /// session is up.
    fn write_own<E: Encode>(&mut self, header: Header, body: &E) {
        self.rekey_if_due();
        let max = self.server.config.max_frame_size;
        let _ = match self.security.sealer() {
            Some(sealer) => sealer.write_frame_with(
                &mut self.out,
                Framing::LengthPrefixed,
                header,
                max,
                |out| body.encode(out),
            ),
            None => frame::write_frame(&mut self.out, Framing::LengthPrefixed, header, body, max),
        };
    }

    /// Where the reply to `request` goes: the end of `out`, sealed once the
    /// session is up (after a `REKEY`, when one is due).
    fn reply_to(&mut self, request: Header) -> FrameReply<'_> {
        self.rekey_if_due();
        self.reply_to_prepared(request)
    }

    /// [`reply_to`](Self::reply_to) without the rekey check: the caller
    /// made it, and nothing is written before the reply.
    fn reply_to_prepared(&mut self, request: Header) -> FrameReply<'_> {
        let sealer = self.security.sealer();
        let metrics = self.server.metrics.as_ref().map(|server| ReplyMetrics {
            server,
            transport: self.connection.transport,
        });
        FrameReply::new(
            &mut self.out,
            request,
            self.server.config.max_frame_size,
            sealer,
            metrics,
        )
    }

    fn error(
        &mut self,
        request: Header,
        code: ErrorCode,
        message: &dyn std::fmt::Display,
    ) -> Outcome {
        self.reply_to(request).error(code.to_u16(), message)
    }

    /// Writes the `DISCONNECT` of `notice` and stops the session. It is
    /// sealed on a secure session, except `DECRYPT_FAILED` (section 5.1).
    pub(crate) fn close_now(&mut self, notice: &CloseNotice) -> Flow {
        tracing::debug!(connection = %self.connection.id, reason = %notice.reason, message = %notice.message, "closing");
        if notice.reason != DisconnectReason::DecryptFailed {
            self.rekey_if_due();
        }
        let sealer = match notice.reason {
            DisconnectReason::DecryptFailed => None,
            _ => self.security.sealer(),
        };
        notice.write_disconnect(
            &mut self.out,
            Framing::LengthPrefixed,
            self.server.config.max_frame_size,
            sealer,
        );
        self.closed = Some(notice.reason);
        self.closing = None;
        self.cancel_pending();
        Flow::Close
    }

    /// Drops every running request, telling middleware they were cancelled.
    fn cancel_pending(&mut self) {
        let server = Arc::clone(&self.server);
        for pending in std::mem::take(&mut self.pending) {
            let handler = server.table.handler(pending.handler);
            self.after(
                pending.header,
                handler,
                server.middleware.len(),
                Outcome::Cancelled,
                pending.started,
            );
        }
    }

    /// Handles one sealed frame: opens its body in place, then handles it
    /// as [`on_frame`](Self::on_frame) does. A frame that does not open (or
    /// comes before the handshake) closes the connection with `DECRYPT_FAILED`.
    pub(crate) fn on_sealed_frame(&mut self, header: Header, mut body: BytesMut) -> Flow {
        let Security::Secure(channel) = &mut self.security else {
            return self.close_now(&CloseNotice::new(
                DisconnectReason::DecryptFailed,
                "sealed frame before a completed handshake",
            ));
        };
        if let Err(error) = channel.opener.open(&header, &mut body) {
            return self.close_now(&CloseNotice::new(
                DisconnectReason::DecryptFailed,
                error.to_string(),
            ));
        }
        if header.opcode == system::REKEY {
            // The opener moved to the next key; the frame carries nothing else.
            if header.request_id != 0 || !body.is_empty() || header.flags != Flags::ENCRYPTED {
                return self.close_now(&CloseNotice::new(
                    DisconnectReason::Malformed,
                    "a REKEY with an id, a body or other flags",
                ));
            }
            return Flow::Continue;
        }
        let flow = self.handle(Frame {
            header,
            body: body.freeze(),
        });
        self.close_if_exhausted(flow)
    }

    /// Handles one frame from the peer, writing any reply into `out`.
    pub(crate) fn on_frame(&mut self, frame: Frame) -> Flow {
        if frame.header.flags.is_encrypted() {
            let body = buffers::copy_to_open(&mut self.open_buf, &frame.body);
            return self.on_sealed_frame(frame.header, body);
        }
        if matches!(self.security, Security::Secure(_)) {
            return self.on_plain_when_secure(frame);
        }
        self.handle(frame)
    }

    /// A plain frame on a secure session (section 5.1): bytes an attacker
    /// inserted, or the peer's `DISCONNECT DECRYPT_FAILED`. Nothing of it
    /// runs.
    fn on_plain_when_secure(&mut self, frame: Frame) -> Flow {
        let header = frame.header;
        if header.opcode == system::DISCONNECT
            && let Ok(disconnect) = Disconnect::decode_body(&frame.body)
            && disconnect.reason == DisconnectReason::DecryptFailed
        {
            self.closed = Some(disconnect.reason);
            return Flow::PeerDisconnected(disconnect);
        }
        self.close_now(&CloseNotice::new(
            DisconnectReason::DecryptFailed,
            format!(
                "a plain frame (opcode {:#06X}) on a secure session",
                header.opcode
            ),
        ))
    }

    /// Closes the connection, without a word, once its sealer used its last
    /// counter (section 5.1: a sender closes rather than seal with 2^64 - 1).
    fn close_if_exhausted(&mut self, flow: Flow) -> Flow {
        match self.security.sealer() {
            Some(sealer) if sealer.next_counter() == u64::MAX && self.closed.is_none() => {
                self.closed = Some(DisconnectReason::Normal);
                self.closing = None;
                self.cancel_pending();
                Flow::Close
            }
            _ => flow,
        }
    }

    fn handle(&mut self, frame: Frame) -> Flow {
        let header = frame.header;
        if header.flags.is_response() {
            // Replies to our own requests (a PONG); nothing else is expected.
            return Flow::Continue;
        }
        if header.flags.is_error() {
            self.error(
                header,
                ErrorCode::Malformed,
                &"ERROR flag on a frame that is not a response",
            );
            return Flow::Continue;
        }
        if header.is_system() {
            return self.on_system(frame);
        }
        self.dispatch(frame);
        Flow::Continue
    }

    fn on_system(&mut self, frame: Frame) -> Flow {
        let header = frame.header;
        match header.opcode {
            system::PING => match Ping::answer(header, &frame.body) {
                // The reply path writes the same header, sealed if need be.
                Some(Ok((_, pong))) => {
                    self.reply_to(header).packet(&pong);
                }
                Some(Err(error)) => {
                    self.error(header, ErrorCode::Malformed, &error);
                }
                None => {}
            },
            system::DISCONNECT => {
                let disconnect = Disconnect::decode_lossy(&frame.body);
                self.closed = Some(disconnect.reason);
                return Flow::PeerDisconnected(disconnect);
            }
            system::HANDSHAKE => return self.handshake(frame),
            system::REKEY => {
                // Sealed ones are taken in `on_sealed_frame`.
                self.error(header, ErrorCode::Malformed, &"a plain REKEY");
            }
            system::PONG => {}
            opcode => {
                self.error(
                    header,
                    ErrorCode::UnknownOpcode,
                    &format_args!("unknown system opcode {opcode:#06X}"),
                );
            }
        }
        Flow::Continue
    }

    /// Answers a `HANDSHAKE`: the second Noise message, in plain, after
    /// which the session is secure. Any failure, and any handshake after
    /// the first, is error 9.
    fn handshake(&mut self, frame: Frame) -> Flow {
        let header = frame.header;
        if !matches!(self.security, Security::Plain { .. }) {
            self.error(
                header,
                ErrorCode::HandshakeFailed,
                &"a handshake already ran on this connection",
            );
            return Flow::Continue;
        }
        // The server-wide budget: a flood of handshakes does not take the
        // CPU from the connections already served.
        if let Some(budget) = &self.server.handshakes
            && budget.check().is_err()
        {
            return self.handshake_failed(
                header,
                ErrorCode::Overloaded,
                &"too many handshakes at once: try again later",
            );
        }
        let identity = self
            .server
            .identity
            .as_ref()
            .map(|identity| identity.keypair());
        match Responder::respond(&frame.body, identity) {
            Ok((reply, mut channel)) => {
                // The answer itself goes out plain (the session is not secure
                // yet, so `reply_to` does not seal): the client has no keys
                // yet. Every frame after it is sealed.
                self.reply_to(header).encoded(system::HANDSHAKE, &reply);
                channel.sealer.set_rekey_policy(self.server.config.rekey);
                self.security = Security::Secure(Box::new(channel));
                tracing::debug!(connection = %self.connection.id, "secure session established");
                if let Some(metrics) = &self.server.metrics {
                    metrics.handshake(true);
                }
            }
            Err(error) => {
                return self.handshake_failed(header, ErrorCode::HandshakeFailed, &error);
            }
        }
        Flow::Continue
    }

    /// Answers a `HANDSHAKE` that did not run or failed with `code`; no
    /// other may follow on this connection. A server that requires
    /// encryption closes the connection then (`HANDSHAKE_TIMEOUT`: no
    /// handshake will complete on it).
    fn handshake_failed(
        &mut self,
        header: Header,
        code: ErrorCode,
        error: &dyn std::fmt::Display,
    ) -> Flow {
        self.security = Security::Failed;
        tracing::debug!(connection = %self.connection.id, %error, "handshake failed");
        if let Some(metrics) = &self.server.metrics {
            metrics.handshake(false);
        }
        self.error(header, code, error);
        if self.server.config.require_encryption {
            return self.close_now(&CloseNotice::new(
                DisconnectReason::HandshakeTimeout,
                "the handshake failed, and this server requires encryption",
            ));
        }
        Flow::Continue
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
            .map(|metrics| metrics.transport(self.connection.transport))
    }

    /// Runs the `after` hooks of the first `through` middleware, innermost
    /// first, and records the request (metrics, trace event).
    fn after(
        &self,
        header: Header,
        handler: &HandlerSpec,
        through: usize,
        outcome: Outcome,
        started: Started,
    ) {
        let elapsed = started.map_or(Duration::ZERO, |started| started.elapsed());
        let info = self.info(header, handler);
        for middleware in self.server.middleware[..through].iter().rev() {
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

    fn dispatch(&mut self, frame: Frame) {
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
        let chain = &server.middleware;
        // The clock is read only when someone looks at the duration.
        let timed = server.middleware_times
            || handler.metrics.is_some()
            || tracing::enabled!(tracing::Level::DEBUG);
        let started = timed.then(Instant::now);
        for (position, middleware) in chain.iter().enumerate() {
            if let Err(rejection) = middleware.before(&self.info(header, handler)) {
                let code = rejection.code.to_u16();
                self.error(header, rejection.code, &rejection.message);
                self.after(header, handler, position, Outcome::Rejected(code), started);
                return;
            }
        }
        let ctx = Context::new(Arc::clone(&self.connection), header);
        let span = tracing::debug_span!(
            "request",
            connection = self.connection.id.0,
            opcode = header.opcode,
            request_id = header.request_id,
            handler = handler.name
        );
        match &handler.kind {
            HandlerKind::Sync(call) => {
                let _entered = span.enter();
                // A due REKEY goes before the mark: a panic drops only the
                // half-written reply, which used no counter.
                self.rekey_if_due();
                let mark = self.out.len();
                let sink = self.reply_to_prepared(header);
                let outcome = match catch_unwind(AssertUnwindSafe(|| call(&frame.body, &ctx, sink)))
                {
                    Ok(Ok(outcome)) => outcome,
                    Ok(Err(error)) => self.error(header, ErrorCode::Malformed, &error),
                    Err(panic) => {
                        // Drop whatever the handler half-wrote: a sealed
                        // frame takes its counter only once written whole.
                        self.out.truncate(mark);
                        DeferredReply::Panicked(panic_message(&*panic))
                            .write(self.reply_to(header), handler.name)
                    }
                };
                self.after(header, handler, chain.len(), outcome, started);
            }
            HandlerKind::Async(call) => {
                match catch_unwind(AssertUnwindSafe(|| call(&frame.body, ctx))) {
                    Ok(Ok(future)) => self.pending.push(Pending {
                        header,
                        handler: index,
                        started,
                        // Only a span that a subscriber records costs a wrapper.
                        future: if span.is_disabled() {
                            future
                        } else {
                            Box::pin(future.instrument(span))
                        },
                        deadline: handler
                            .policy
                            .timeout
                            .map(|limit| Box::pin(tokio::time::sleep(limit))),
                    }),
                    Ok(Err(error)) => {
                        let outcome = self.error(header, ErrorCode::Malformed, &error);
                        self.after(header, handler, chain.len(), outcome, started);
                    }
                    Err(panic) => {
                        let outcome = DeferredReply::Panicked(panic_message(&*panic))
                            .write(self.reply_to(header), handler.name);
                        self.after(header, handler, chain.len(), outcome, started);
                    }
                }
            }
        }
    }

    /// Registers the connection task's waker for pushes and close orders:
    /// once per poll of the task, before its first [`poll_work`](Self::poll_work).
    pub(crate) fn register_waker(&self, cx: &TaskContext<'_>) {
        self.connection.outbound.register(cx);
    }

    /// Does whatever is ready besides input: writes the replies of finished
    /// requests, takes close orders and pushed frames (sealing them on a
    /// secure session), and ends a graceful close or a handshake wait.
    /// Returns whether anything happened; once the session has written its
    /// `DISCONNECT`, [`closed`](Self::closed) says so. The task registered
    /// its waker first ([`register_waker`](Self::register_waker)).
    pub(crate) fn poll_work(&mut self, cx: &mut TaskContext<'_>) -> bool {
        let mut progress = false;
        // (An empty set has nothing to poll and no waker to keep.) Replies
        // are taken only while the outbound buffer is below its high-water
        // mark: a peer that does not read holds back the handlers' replies
        // (until the write timeout closes it), not memory.
        let high_water = self.server.config.outbound_high_water;
        if !self.pending.is_empty() && self.out.len() < high_water {
            let server = Arc::clone(&self.server);
            while self.out.len() < high_water
                && let Poll::Ready(Some((header, index, started, reply))) =
                    self.pending.poll_next_unpin(cx)
            {
                let handler = server.table.handler(index);
                let outcome = reply.write(self.reply_to(header), handler.name);
                self.after(header, handler, server.middleware.len(), outcome, started);
                progress = true;
            }
        }
        if self.connection.outbound.take_signal() {
            progress |= self.take_inbox();
        }
        progress |= self.poll_keepalive(cx);
        if self.closed.is_some() {
            return true;
        }
        if self.frame_deadline.armed
            && let Some(timer) = &mut self.frame_deadline.timer
            && timer.as_mut().poll(cx).is_ready()
        {
            self.frame_deadline.armed = false;
            let message = format!(
                "a frame was not whole within {:?} of its first byte",
                self.server.config.frame_timeout
            );
            self.close_now(&CloseNotice::new(DisconnectReason::IdleTimeout, message));
            return true;
        }
        if let Some(deadline) = self.security.deadline()
            && deadline.as_mut().poll(cx).is_ready()
        {
            self.close_now(&CloseNotice::new(
                DisconnectReason::HandshakeTimeout,
                "no handshake within the handshake timeout",
            ));
            return true;
        }
        if let Some(closing) = &mut self.closing {
            let expired = closing.deadline.as_mut().poll(cx).is_ready();
            if self.pending.is_empty() || expired {
                let notice = self.closing.take().expect("closing").notice;
                self.close_now(&notice);
                return true;
            }
        }
        progress
    }

    /// Takes what other tasks sent: an order to close, pushed frames (up to
    /// the outbound high-water mark). Returns whether it took anything.
    fn take_inbox(&mut self) -> bool {
        let connection = Arc::clone(&self.connection);
        let outbound = &connection.outbound;
        let mut progress = false;
        if self.closed.is_none()
            && let Some(CloseOrder { notice, graceful }) = outbound.take_close()
        {
            progress = true;
            if graceful {
                self.begin_close(notice);
            } else {
                self.close_now(&notice);
            }
        }
        if self.closed.is_none() {
            let high_water = self.server.config.outbound_high_water;
            progress |= outbound.take_frames(|frame| {
                if self.out.len() >= high_water {
                    return false;
                }
                self.append_push(frame);
                true
            });
        }
        progress
    }

    /// Appends a pushed frame (header + body, no prefix), sealed when the
    /// session is secure.
    fn append_push(&mut self, frame: &[u8]) {
        if let Some(metrics) = self.metrics() {
            metrics.frames_out.increment(1);
        }
        self.rekey_if_due();
        match &mut self.security {
            Security::Secure(channel) => {
                let sealed = channel.sealer.seal_encoded(
                    &mut self.out,
                    Framing::LengthPrefixed,
                    frame,
                    self.server.config.max_frame_size,
                );
                if let Err(error) = sealed {
                    tracing::warn!(connection = %self.connection.id, %error, "push dropped: too large once sealed");
                }
            }
            _ => prefix::append(&mut self.out, frame),
        }
    }

    /// Stops reading and lets the running requests finish (for at most the
    /// server's shutdown grace) before the `DISCONNECT`.
    fn begin_close(&mut self, notice: CloseNotice) {
        if self.closing.is_some() {
            return;
        }
        self.closing = Some(Closing {
            notice,
            deadline: Box::pin(tokio::time::sleep(self.server.config.shutdown_grace)),
        });
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.connection.outbound.finish();
        self.cancel_pending();
    }
}
