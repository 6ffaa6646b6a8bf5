//! One connection's protocol engine, whatever its transport: frames in,
//! replies and pushes out into one outbound buffer, deadlines kept.
//!
//! The transport reads and writes the socket and hands the engine what it
//! read ([`Engine::on_frame`], [`Engine::note_frames`]) and how its writes
//! went ([`Engine::note_writes`]); the engine does the rest in
//! [`Engine::poll_work`]. By concern:
//! - [`requests`]: dispatch through the middleware chain, running requests;
//! - [`security`]: the handshake and sealed frames;
//! - [`timers`]: every deadline as plain times, and [`alarm`] the one tokio
//!   timer set to the next of them.

mod alarm;
mod cancel;
mod datagrams;
mod requests;
mod resume;
mod security;
mod streams;
mod timers;

use std::sync::Arc;
use std::task::Context as TaskContext;

use futures_util::stream::FuturesUnordered;
use ternio_protocol::Encode;
use ternio_protocol::buffers;
use ternio_protocol::frame::{self, Flags, Framing, Header};
use ternio_protocol::prefix;
use ternio_protocol::replay::AckSchedule;
use ternio_protocol::secure::SEAL_OVERHEAD;
use ternio_protocol::stream;
use ternio_protocol::system::{self, Cancel, Deadline, Disconnect, Ping, TimeResponse};
use ternio_protocol::{
    BytesMut, Decode, DisconnectReason, ErrorCode, Frame, FrameError, ReplySink,
};
use tokio::time::Instant;

use self::alarm::Alarm;
use self::cancel::Cancels;
use self::requests::Pending;
use self::resume::Resumption;
pub(crate) use self::resume::{end_link, resume};
use self::security::Security;
use self::streams::Streams;
use self::timers::{Due, Timers};
use crate::admission::Permit;
use crate::close::CloseNotice;
use crate::middleware::Outcome;
use crate::outbox::CloseOrder;
use crate::registry::ConnectionShared;
use crate::reply::{FrameReply, ReplyMetrics};
use crate::shared::ServerShared;

/// What the transport does after a frame.
pub(crate) enum AfterFrame {
    Continue,
    /// The peer said `DISCONNECT`: stop reading, flush what is ready, close.
    PeerDisconnected(Disconnect),
    /// The engine wrote its `DISCONNECT` into the outbound buffer: stop
    /// reading, flush, close.
    Close,
}

/// Why the transport stops serving its link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The engine wrote its `DISCONNECT` (or the peer's came): flush and close.
    Closed,
    /// A `RESUME` came: run [`resume`], then serve on.
    Resume,
    /// Another link took the session over: drop this one, then
    /// [`end_link`] hands the session to it.
    TakenOver,
}

/// The transport-independent state of one connection: the running requests,
/// the outbound buffer, the secure session, the deadlines, and what other
/// tasks send it.
///
/// Frames in `out` always carry a u32 length prefix, whatever the transport:
/// TCP writes the buffer as it is, WebSocket cuts it into one message per frame.
pub(crate) struct Engine {
    connection: Arc<ConnectionShared>,
    server: Arc<ServerShared>,
    pending: FuturesUnordered<Pending>,
    /// What `CANCEL` and `DEADLINE` from the peer act on.
    cancels: Cancels,
    /// The open streams (section 4.5).
    streams: Streams,
    security: Security,
    /// A graceful close waiting for the running requests (within the
    /// shutdown grace) before its `DISCONNECT`.
    closing: Option<CloseNotice>,
    /// Set once the `DISCONNECT` is in `out`: nothing more is read or answered.
    closed: Option<DisconnectReason>,
    /// The link closed with `DECRYPT_FAILED` (someone on the path wrote into
    /// it) while the session was resumable: the session waits for its
    /// client, its running requests with it.
    link_attacked: bool,
    timers: Timers,
    alarm: Alarm,
    next_ping_id: u32,
    /// Set when the connection went quiet: the transport may free its buffers.
    went_quiet: bool,
    /// Frames ready to be written, each with its length prefix.
    pub(crate) out: BytesMut,
    /// Resumption, once the peer asked for a ticket.
    resume: Option<Box<Resumption>>,
    /// When a session that waits for its client ends: set when its link is
    /// lost, kept when a `RESUME` is refused (the session waits on, for
    /// what is left of its TTL), cleared once it is resumed.
    expires: Option<Instant>,
    /// The connection's place among the server's connections (admission):
    /// it goes with the session, so a session that waits for its client
    /// still holds it, whichever task keeps the session; a resumed session
    /// takes its new link's place (its address's) and gives the old one back.
    /// A session that waits lets a connection of its address past the
    /// limit, to resume it ([`Permit`]).
    place: Permit,
    /// The counted frames received and when to acknowledge them: from the
    /// ticket on, and still once resumability ended (docs/PROTOCOL.md
    /// section 4.2: counting goes on).
    acks: Option<AckSchedule>,
    /// A `RESUME` received as the first frame, for the transport to run.
    resume_request: Option<(Header, ternio_protocol::system::Resume)>,
    /// Frames handled so far (counted up to 2: a `RESUME` must be first).
    frames_seen: u8,
    /// Where sealed bodies that arrived as shared `Bytes` (WebSocket
    /// messages) are copied to be opened in place: reused once the previous
    /// body is dropped, so opening allocates nothing in steady state; a body
    /// above 64 KiB gets a buffer of its own ([`buffers::copy_to_open`]).
    open_buf: BytesMut,
}

impl Engine {
    pub(crate) fn new(
        connection: Arc<ConnectionShared>,
        server: Arc<ServerShared>,
        place: Permit,
    ) -> Self {
        let now = Instant::now();
        let mut timers = Timers::new(&server.config, now);
        if place.on_probation() {
            // Let past a connection limit to resume a session: it does so
            // within the handshake timeout, or holds no place longer.
            timers.require_handshake(now, &server.config);
        }
        let alarm = Alarm::new(timers.next_deadline());
        Self {
            connection,
            server,
            pending: FuturesUnordered::new(),
            cancels: Cancels::default(),
            streams: Streams::default(),
            security: Security::Plain,
            closing: None,
            closed: None,
            link_attacked: false,
            timers,
            alarm,
            next_ping_id: 1,
            went_quiet: false,
            resume: None,
            expires: None,
            place,
            acks: None,
            resume_request: None,
            frames_seen: 0,
            open_buf: BytesMut::new(),
            out: BytesMut::new(),
        }
    }

    /// Called by the transport after it read from the peer: `completed`
    /// when whole frames (on WebSocket, data messages) arrived, `partial`
    /// when an unfinished one waits (see [`Timers::note_frames`]). While the
    /// transport does not read (the engine wants no input), it reports
    /// neither: the wait is the server's, and the frame timeout is off.
    pub(crate) fn note_frames(&mut self, completed: bool, partial: bool) {
        if !completed {
            if !partial {
                self.timers.note_frames_none();
                return;
            }
            if self.timers.frame_pending() {
                // Its deadline runs from its first byte already.
                return;
            }
        }
        if self.timers.note_frames(Instant::now(), completed, partial) {
            self.alarm.set_if_sooner(self.timers.next_deadline());
        }
    }

    /// Called by the transport after each write attempt: `written` bytes
    /// went out, and bytes still wait (`waiting`). While bytes wait, the
    /// write timeout's spans judge whether the peer keeps up (see
    /// [`Timers::note_writes`]); a peer that does not is closed with
    /// `SLOW_CONSUMER` by [`poll_work`](Self::poll_work).
    pub(crate) fn note_writes(&mut self, cx: &mut TaskContext<'_>, waiting: bool, written: usize) {
        if self.closed.is_some() || !(waiting || self.timers.span_open()) {
            return;
        }
        let now = Instant::now();
        if self
            .timers
            .note_writes(now, waiting, written, self.out.len())
        {
            self.alarm.set_if_sooner(self.timers.next_deadline());
            if self.alarm.poll_due(cx) {
                // Due already (a write timeout of zero): run it next round.
                cx.waker().wake_by_ref();
            }
        }
    }

    /// Whether the connection went quiet since the last call: the transport
    /// may give its empty buffers back.
    pub(crate) fn take_went_quiet(&mut self) -> bool {
        std::mem::take(&mut self.went_quiet)
    }

    /// Whether to read more: not closing, fewer requests running than the
    /// limit, and the peer keeping up with what is already written.
    pub(crate) fn wants_input(&self) -> bool {
        self.closing.is_none()
            && self.closed.is_none()
            && self.resume_request.is_none()
            && self.pending.len() < self.server.config.max_requests_in_flight
            && self.out.len() < self.server.config.outbound_high_water
    }

    /// Whether no asynchronous request is running.
    pub(crate) fn no_requests_running(&self) -> bool {
        self.pending.is_empty() && self.streams.no_downloads()
    }

    /// Whether the transport stops serving its link now, and why.
    pub(crate) fn stop(&self) -> Option<Stop> {
        if self.closed.is_some() {
            Some(Stop::Closed)
        } else if self.resume_request.is_some() {
            Some(Stop::Resume)
        } else if self.resume.as_ref().is_some_and(|resume| resume.is_taken()) {
            Some(Stop::TakenOver)
        } else {
            None
        }
    }

    /// Why the connection closed, once its `DISCONNECT` is written into `out`
    /// (or the peer's `DISCONNECT` arrived).
    pub(crate) fn closed(&self) -> Option<DisconnectReason> {
        self.closed
    }

    /// Appends a frame of the server's own (a `PING`), sealed once the
    /// session is up.
    fn write_own<E: Encode>(&mut self, header: Header, body: &E) {
        let _ = self.write_own_with(header, |out| body.encode(out));
    }

    /// [`write_own`](Self::write_own) for a body that `body` writes, never
    /// recorded for replay (a `PING`, an `ACK`, a frame being replayed);
    /// the error says why nothing was written.
    fn write_own_with(
        &mut self,
        header: Header,
        body: impl FnOnce(&mut BytesMut),
    ) -> Result<usize, FrameError> {
        self.write_own_frame(header, false, body)
    }

    /// Appends a stream frame (section 4.5), sealed once the session is up
    /// and, on a resumable session, recorded for replay like an answer
    /// (stream frames are counted, section 4.2); the error says why
    /// nothing was written.
    fn write_stream_frame(
        &mut self,
        header: Header,
        body: impl FnOnce(&mut BytesMut),
    ) -> Result<usize, FrameError> {
        self.write_own_frame(header, true, body)
    }

    /// Appends a frame of the server's own, uncompressed and sealed once the
    /// session is up (after a `REKEY`, when one is due); recorded for replay
    /// when `record` and the frame is counted on a resumable session.
    fn write_own_frame(
        &mut self,
        header: Header,
        record: bool,
        body: impl FnOnce(&mut BytesMut),
    ) -> Result<usize, FrameError> {
        self.rekey_if_due();
        let max = self.server.config.max_frame_size;
        let sealer = self.security.sealer();
        let replay = match &mut self.resume {
            Some(resume) if record => Some(&mut resume.replay),
            _ => None,
        };
        FrameReply::new(&mut self.out, header, max, sealer, None)
            .recording(replay)
            .own_frame(header, body)
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
            transport: self.connection.transport(),
        });
        let replay = self.resume.as_mut().map(|resume| &mut resume.replay);
        FrameReply::new(
            &mut self.out,
            request,
            self.server.config.max_frame_size,
            sealer,
            metrics,
        )
        .recording(replay)
        .compressing(self.server.config.compression)
    }

    fn error(
        &mut self,
        request: Header,
        code: ErrorCode,
        message: &dyn std::fmt::Display,
    ) -> Outcome {
        self.reply_to(request).error(code.to_u16(), message)
    }

    /// The first frame of a connection admitted past a connection limit
    /// (`Permit::on_probation`): a `RESUME` that goes on to [`resume`], or
    /// the connection closes.
    fn on_probation_frame(&mut self, frame: Frame) -> AfterFrame {
        if frame.header.opcode != system::RESUME || frame.header.flags.is_encrypted() {
            return self.close_past_limit();
        }
        let flow = self.handle(frame);
        if self.resume_request.is_none() && self.closed.is_none() {
            // A `RESUME` refused before it could run (malformed, or
            // resumption off).
            return self.close_past_limit();
        }
        flow
    }

    /// Closes a connection admitted past a connection limit to resume a
    /// session that did anything else (`Permit::on_probation`).
    pub(crate) fn close_past_limit(&mut self) -> AfterFrame {
        let why = "the server or your address holds its maximum of connections: \
                   past it, a connection may only resume a session";
        let notice = CloseNotice::new(DisconnectReason::TooManyConnections, why);
        self.close_now(&notice)
    }

    /// Writes the `DISCONNECT` of `notice` and stops the engine. It is
    /// sealed on a secure session, except `DECRYPT_FAILED` (section 5.1).
    pub(crate) fn close_now(&mut self, notice: &CloseNotice) -> AfterFrame {
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
        if notice.reason == DisconnectReason::DecryptFailed
            && matches!(self.security, Security::Secure(_))
            && self.resumable()
        {
            // The link was written into, not the session broken: it waits
            // for its client with its requests running (section 4.2).
            self.link_attacked = true;
        } else {
            self.cancel_pending();
        }
        self.closed = Some(notice.reason);
        self.closing = None;
        AfterFrame::Close
    }

    /// Handles one frame from the peer, writing any reply into `out`.
    pub(crate) fn on_frame(&mut self, frame: Frame) -> AfterFrame {
        if self.place.on_probation() {
            return self.on_probation_frame(frame);
        }
        if frame.header.flags.is_encrypted() {
            let body = buffers::copy_to_open(&mut self.open_buf, &frame.body);
            return self.on_sealed_frame(frame.header, body);
        }
        if matches!(self.security, Security::Secure(_)) {
            return self.on_plain_when_secure(frame);
        }
        self.handle(frame)
    }

    fn handle(&mut self, frame: Frame) -> AfterFrame {
        let frame = if frame.header.flags.is_compressed() {
            match self.decompress(frame) {
                Ok(frame) => frame,
                Err(flow) => return flow,
            }
        } else {
            frame
        };
        let header = frame.header;
        self.frames_seen = self.frames_seen.saturating_add(1).min(2);
        if header.is_counted() {
            // Application frames and stream frames (section 4.2).
            self.count_received(frame::HEADER_LEN + frame.body.len());
        } else if header.opcode == system::ACK {
            // Whatever its flags: a malformed ACK closes the connection.
            return self.on_ack(header, &frame.body);
        }
        if header.flags.is_response() {
            // Replies to our own requests (a PONG); nothing else is expected.
            return AfterFrame::Continue;
        }
        if header.flags.is_error() {
            self.error(
                header,
                ErrorCode::Malformed,
                &"ERROR flag on a frame that is not a response",
            );
            return AfterFrame::Continue;
        }
        if header.is_system() {
            return self.on_system(frame);
        }
        self.dispatch(frame);
        AfterFrame::Continue
    }

    /// A compressed frame's body, decompressed (section 6; sealed ones
    /// were opened first). One that announces more than the frame limit
    /// closes the connection with `FRAME_TOO_LARGE` before anything of that
    /// size is allocated; a block that does not decode to exactly the
    /// announced length is answered `MALFORMED` (with the request's id, or
    /// 0 for a frame without one), and nothing of the frame runs.
    fn decompress(&mut self, frame: Frame) -> Result<Frame, AfterFrame> {
        let header = frame.header;
        frame.decompressed(self.frame_limit()).map_err(|error| {
            if error.is_too_large() {
                self.close_now(&CloseNotice::new(
                    DisconnectReason::FrameTooLarge,
                    error.to_string(),
                ))
            } else {
                self.error(header, ErrorCode::Malformed, &error);
                AfterFrame::Continue
            }
        })
    }

    fn on_system(&mut self, frame: Frame) -> AfterFrame {
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
            system::TIME => {
                // Answered here, like PING: no handler, no queue.
                let clock = || TimeResponse::micros(std::time::SystemTime::now());
                match TimeResponse::answer(header, &frame.body, clock) {
                    Ok((_, time)) => {
                        self.reply_to(header).packet(&time);
                    }
                    Err(error) => {
                        self.error(header, ErrorCode::Malformed, &error);
                    }
                }
            }
            system::DISCONNECT => {
                let disconnect = Disconnect::decode_lossy(&frame.body);
                self.closed = Some(disconnect.reason);
                return AfterFrame::PeerDisconnected(disconnect);
            }
            system::HANDSHAKE => return self.handshake(frame),
            system::REKEY => {
                // Sealed ones are taken in `on_sealed_frame`.
                self.error(header, ErrorCode::Malformed, &"a plain REKEY");
            }
            system::PONG => {}
            system::RESUME_TICKET => return self.resume_ticket(header, &frame.body),
            system::RESUME => return self.on_resume_request(frame),
            system::DATAGRAM_BIND => return self.datagram_bind(header, &frame.body),
            stream::STREAM_ITEM
            | stream::STREAM_ITEMS
            | stream::STREAM_CREDIT
            | stream::STREAM_END => {
                return self.on_stream_frame(header, frame.body);
            }
            system::CANCEL | system::DEADLINE if header.request_id != 0 => {
                self.error(
                    header,
                    ErrorCode::Malformed,
                    &"CANCEL and DEADLINE are one-way: request id 0",
                );
            }
            system::CANCEL => match Cancel::decode_body(&frame.body) {
                Ok(cancel) => {
                    if !self.cancels.cancel(cancel.request_id) {
                        self.cancel_download(cancel.request_id);
                    }
                }
                Err(error) => {
                    self.error(header, ErrorCode::Malformed, &error);
                }
            },
            system::DEADLINE => match Deadline::decode_body(&frame.body) {
                Ok(deadline) => self.cancels.announce(
                    deadline.request_id,
                    Instant::now(),
                    std::time::Duration::from_millis(u64::from(deadline.budget_ms)),
                ),
                Err(error) => {
                    self.error(header, ErrorCode::Malformed, &error);
                }
            },
            opcode => {
                self.error(
                    header,
                    ErrorCode::UnknownOpcode,
                    &format_args!("unknown system opcode {opcode:#06X}"),
                );
            }
        }
        AfterFrame::Continue
    }

    /// Registers the connection task's waker for pushes and close orders:
    /// once per poll of the task, before its first [`poll_work`](Self::poll_work).
    pub(crate) fn register_waker(&self, cx: &TaskContext<'_>) {
        self.connection.outbox.register(cx);
    }

    /// Does whatever is ready besides input: writes the replies of finished
    /// requests, takes close orders and pushed frames (sealing them on a
    /// secure session), runs the deadlines that came due, and ends a
    /// graceful close. Returns whether anything happened; once the engine
    /// has written its `DISCONNECT`, [`closed`](Self::closed) says so. The
    /// task registered its waker first ([`register_waker`](Self::register_waker)).
    pub(crate) fn poll_work(&mut self, cx: &mut TaskContext<'_>) -> bool {
        // The empty cases are checked here, inline: an echo runs this twice.
        let mut progress = !self.pending.is_empty() && self.poll_replies(cx);
        if !self.streams.none_open() {
            progress |= self.poll_streams(cx);
        }
        if self.connection.outbox.take_signal() {
            progress |= self.take_outbox();
            // A `RESUME` on another link wakes the task this way too.
            progress |= self.poll_takeover(cx);
        }
        // Outside the signal: frames left in the inbox by backpressure run
        // once a request finished or the peer read (an atomic load when
        // the inbox is empty).
        progress |= self.take_datagrams();
        progress |= self.poll_timers(cx);
        self.check_replay();
        if self.closing.is_some() && self.pending.is_empty() && self.streams.no_downloads() {
            let notice = self.closing.take().expect("closing");
            self.close_now(&notice);
            return true;
        }
        progress
    }

    /// Runs the deadlines that came due, then sets the alarm for the next.
    fn poll_timers(&mut self, cx: &mut TaskContext<'_>) -> bool {
        if self.closed.is_some() || !self.alarm.poll_due(cx) {
            return false;
        }
        let now = Instant::now();
        let mut progress = false;
        while self.closed.is_none()
            && let Some(due) = self.timers.on_timeout(now, self.out.len())
        {
            progress = true;
            match due {
                Due::Quiet => {
                    self.went_quiet = true;
                    self.open_buf = BytesMut::new();
                    self.connection.outbox.release();
                }
                Due::Ping(quiet_for) => self.ping(quiet_for),
                Due::Close(notice) => {
                    self.close_now(&notice);
                }
                Due::Ack => self.write_ack(),
                Due::GraceOver => {
                    if let Some(notice) = self.closing.take() {
                        self.close_now(&notice);
                    }
                }
            }
        }
        if self.closed.is_none() {
            self.alarm.set(self.timers.next_deadline());
            // Polled once more so that its waker is registered.
            let _ = self.alarm.poll_due(cx);
        }
        progress
    }

    /// Sends a `PING` (halfway through the idle timeout) carrying how long
    /// the peer has been quiet.
    fn ping(&mut self, quiet_for: std::time::Duration) {
        let id = self.next_ping_id;
        self.next_ping_id = self.next_ping_id.wrapping_add(1).max(1);
        let ping = Ping {
            value: quiet_for.as_nanos() as u64,
        };
        self.write_own(Header::new(system::PING, Flags::NONE, id), &ping);
    }

    /// Takes what other tasks sent (the outbox): an order to close, pushed frames (up to
    /// the outbound high-water mark). Returns whether it took anything.
    fn take_outbox(&mut self) -> bool {
        let connection = Arc::clone(&self.connection);
        let outbox = &connection.outbox;
        let mut progress = false;
        if self.closed.is_none()
            && let Some(CloseOrder { notice, graceful }) = outbox.take_close()
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
            progress |= outbox.take_frames(|frame| {
                if self.out.len() >= high_water || !self.replay_fits(frame) {
                    // Left in the outbox (bounded there): the peer's reads,
                    // or its next `ACK`, let it go on.
                    return false;
                }
                self.append_push(frame);
                true
            });
        }
        progress
    }

    /// Whether a pushed frame (header + body) may be written now as far as
    /// resumption goes: always on a session that is not resumable; on one
    /// that is, when the replay buffer has room for it and a quarter of
    /// its bound left for answers (which cannot wait), so that a burst of
    /// pushes waits for the client's `ACK`s in the outbox instead of
    /// overflowing the buffer and ending resumability. Pushes wait only
    /// while the connection reads, since the `ACK` that frees room comes
    /// in with the rest: at the in-flight limit, or closing, they go.
    fn replay_fits(&self, frame: &[u8]) -> bool {
        self.resume.as_ref().is_none_or(|resume| {
            resume.replay.fits(frame.len(), resume.replay.limit() / 4)
                || !self.wants_input()
                || Header::parse(frame).is_ok_and(|header| !header.is_counted())
        })
    }

    /// Appends a pushed frame (header + body, no prefix), sealed when the
    /// session is secure.
    fn append_push(&mut self, frame: &[u8]) {
        if let Some(metrics) = self.metrics() {
            metrics.frames_out.increment(1);
        }
        let max = self.server.config.max_frame_size;
        if matches!(self.security, Security::Secure(_)) && frame.len() + SEAL_OVERHEAD > max {
            // Checked before the frame is counted: a push that never goes
            // out must not take a number (the client's count would lag the
            // server's, and a resumption would replay a frame twice).
            tracing::warn!(connection = %self.connection.id, "push dropped: too large once sealed");
            return;
        }
        if let Some(resume) = &mut self.resume
            && let Ok(header) = Header::parse(frame)
            && header.is_counted()
        {
            resume.replay.record(header, &frame[frame::HEADER_LEN..]);
        }
        self.rekey_if_due();
        match &mut self.security {
            Security::Secure(channel) => {
                let sealed =
                    channel
                        .sealer
                        .seal_encoded(&mut self.out, Framing::LengthPrefixed, frame, max);
                if let Err(error) = sealed {
                    tracing::warn!(connection = %self.connection.id, %error, "push dropped: not sealed");
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
        self.closing = Some(notice);
        self.fail_uploads_for_close();
        self.timers.begin_grace(Instant::now());
        self.alarm.set_if_sooner(self.timers.next_deadline());
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.connection.outbox.finish();
        self.cancel_pending();
    }
}
