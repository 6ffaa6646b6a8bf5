//! One connection's protocol logic, whatever its transport: frames in,
//! handlers called, replies written into the outbound buffer.
//!
//! Synchronous handlers run inline and write their reply in place.
//! Asynchronous ones are polled on the connection's own task (no spawn, no
//! hop between tasks), at most `max_requests_in_flight` at a time.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use futures_util::stream::{FuturesUnordered, StreamExt};
use ternio_protocol::frame::{self, Flags, Framing, Header};
use ternio_protocol::system::{self, Disconnect, Ping, Pong};
use ternio_protocol::{BytesMut, Decode, DisconnectReason, ErrorCode, Frame, ReplySink};

use crate::context::{ConnectionShared, Context};
use crate::dispatch::{HandlerKind, ReplyFuture, panic_message};
use crate::reply::{DeferredReply, FrameReply};
use crate::server::ServerShared;

/// Why a connection must close now, and what to tell its peer.
#[derive(Debug)]
pub(crate) struct Violation {
    pub(crate) reason: DisconnectReason,
    pub(crate) message: String,
}

impl Violation {
    pub(crate) fn new(reason: DisconnectReason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }

    /// Appends the `DISCONNECT` frame that announces this violation.
    pub(crate) fn write_disconnect(
        &self,
        out: &mut BytesMut,
        framing: Framing,
        max_frame_size: usize,
    ) {
        let packet = Disconnect::new(self.reason, self.message.clone());
        let header = Header::new(system::DISCONNECT, Flags::NONE, 0);
        // The message is ours and short: it always fits.
        let _ = frame::write_frame(out, framing, header, &packet, max_frame_size);
    }
}

/// What the driver does after a frame.
pub(crate) enum Flow {
    Continue,
    /// The peer said `DISCONNECT`: stop reading, flush what is ready, close.
    PeerDisconnected(Disconnect),
    /// The peer broke the contract: send `DISCONNECT` and close.
    Violation(Violation),
}

/// An asynchronous request still running.
struct Pending {
    header: Header,
    handler: &'static str,
    future: ReplyFuture,
}

impl Future for Pending {
    type Output = (Header, &'static str, DeferredReply);

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let reply = std::task::ready!(self.future.as_mut().poll(cx));
        Poll::Ready((self.header, self.handler, reply))
    }
}

/// The transport-independent state of one connection.
pub(crate) struct Session {
    connection: Arc<ConnectionShared>,
    server: Arc<ServerShared>,
    framing: Framing,
    pending: FuturesUnordered<Pending>,
}

impl Session {
    pub(crate) fn new(
        connection: Arc<ConnectionShared>,
        server: Arc<ServerShared>,
        framing: Framing,
    ) -> Self {
        Self {
            connection,
            server,
            framing,
            pending: FuturesUnordered::new(),
        }
    }

    pub(crate) fn connection(&self) -> &Arc<ConnectionShared> {
        &self.connection
    }

    /// Whether another request may be read: fewer than the limit are running.
    pub(crate) fn can_accept_request(&self) -> bool {
        self.pending.len() < self.server.config.max_requests_in_flight
    }

    /// Whether no asynchronous request is running.
    pub(crate) fn is_idle(&self) -> bool {
        self.pending.is_empty()
    }

    fn sink<'a>(&self, out: &'a mut BytesMut, request: Header) -> FrameReply<'a> {
        FrameReply {
            out,
            framing: self.framing,
            request,
            max_frame_size: self.server.config.max_frame_size,
        }
    }

    fn error(
        &self,
        out: &mut BytesMut,
        request: Header,
        code: ErrorCode,
        message: &dyn std::fmt::Display,
    ) {
        self.sink(out, request).error(code.to_u16(), message);
    }

    /// Handles one frame from the peer, writing any reply into `out`.
    pub(crate) fn on_frame(&mut self, frame: Frame, out: &mut BytesMut) -> Flow {
        let header = frame.header;
        if header.flags.is_encrypted() {
            return Flow::Violation(Violation::new(
                DisconnectReason::DecryptFailed,
                "sealed frame before a completed handshake",
            ));
        }
        if header.flags.is_response() {
            // Replies to our own requests (a PONG); nothing else is expected.
            return Flow::Continue;
        }
        if header.flags.is_error() {
            self.error(
                out,
                header,
                ErrorCode::Malformed,
                &"ERROR flag on a frame that is not a response",
            );
            return Flow::Continue;
        }
        if header.is_system() {
            return self.on_system(frame, out);
        }
        self.dispatch(frame, out);
        Flow::Continue
    }

    fn on_system(&mut self, frame: Frame, out: &mut BytesMut) -> Flow {
        let header = frame.header;
        match header.opcode {
            system::PING => match Ping::decode_body(&frame.body) {
                Ok(ping) => self.sink(out, header).packet(&Pong { value: ping.value }),
                Err(error) => self.error(out, header, ErrorCode::Malformed, &error),
            },
            system::DISCONNECT => {
                let disconnect = Disconnect::decode_body(&frame.body).unwrap_or_else(|_| {
                    Disconnect::new(DisconnectReason::Malformed, "unreadable DISCONNECT")
                });
                return Flow::PeerDisconnected(disconnect);
            }
            system::HANDSHAKE => self.error(
                out,
                header,
                ErrorCode::HandshakeFailed,
                &"this server does not offer secure sessions",
            ),
            system::PONG => {}
            opcode => self.error(
                out,
                header,
                ErrorCode::UnknownOpcode,
                &format_args!("unknown system opcode {opcode:#06X}"),
            ),
        }
        Flow::Continue
    }

    fn dispatch(&mut self, frame: Frame, out: &mut BytesMut) {
        let header = frame.header;
        let server = Arc::clone(&self.server);
        let Some(handler) = server.table.get(header.opcode) else {
            self.error(
                out,
                header,
                ErrorCode::UnknownOpcode,
                &format_args!("no handler for opcode {:#06X}", header.opcode),
            );
            return;
        };
        if handler.encrypted && !header.flags.is_encrypted() {
            self.error(
                out,
                header,
                ErrorCode::EncryptionRequired,
                &format_args!("{} requires an encrypted request", handler.name),
            );
            return;
        }
        let ctx = Context::new(Arc::clone(&self.connection), header);
        match &handler.kind {
            HandlerKind::Sync(call) => {
                let mark = out.len();
                let sink = self.sink(out, header);
                match catch_unwind(AssertUnwindSafe(|| call(&frame.body, &ctx, sink))) {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) => self.error(out, header, ErrorCode::Malformed, &error),
                    Err(panic) => {
                        // Drop whatever the handler half-wrote.
                        out.truncate(mark);
                        DeferredReply::Panicked(panic_message(&*panic))
                            .write(self.sink(out, header), handler.name);
                    }
                }
            }
            HandlerKind::Async(call) => {
                match catch_unwind(AssertUnwindSafe(|| call(&frame.body, ctx))) {
                    Ok(Ok(future)) => self.pending.push(Pending {
                        header,
                        handler: handler.name,
                        future,
                    }),
                    Ok(Err(error)) => self.error(out, header, ErrorCode::Malformed, &error),
                    Err(panic) => DeferredReply::Panicked(panic_message(&*panic))
                        .write(self.sink(out, header), handler.name),
                }
            }
        }
    }

    /// Polls the running requests, writing the replies of those that are done.
    /// Returns whether any finished.
    pub(crate) fn poll_pending(&mut self, cx: &mut TaskContext<'_>, out: &mut BytesMut) -> bool {
        let mut finished = false;
        while let Poll::Ready(Some((header, handler, reply))) = self.pending.poll_next_unpin(cx) {
            reply.write(self.sink(out, header), handler);
            finished = true;
        }
        finished
    }
}
