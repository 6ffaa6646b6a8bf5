//! Resumption (docs/PROTOCOL.md section 4.2), the engine's part: the
//! ticket it hands out, the frames it sent and keeps until the peer
//! acknowledges them, the count of frames it received and the `ACK`s that
//! report it; a session that waits for its client once its link is lost;
//! and the resumption itself, on the link of a `RESUME`, which takes the
//! session over from the task that holds it and replays what the client
//! lacks.

use std::future::poll_fn;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use ternio_protocol::frame::{self, Flags, Framing, Header};
use ternio_protocol::replay::{AckDue, AckSchedule, ReplayBuffer};
use ternio_protocol::resume::ResumeResponder;
use ternio_protocol::system::{self, Ack, Resume, ResumeTicket, Resumed, Ticket, TicketRequest};
use ternio_protocol::{Bytes, BytesMut, Decode, ErrorCode, Frame, ReplySink};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use zeroize::Zeroizing;

use super::security::Security;
use super::{AfterFrame, Engine};
use crate::close::{CloseCause, CloseNotice};
use crate::sessions::{Entry, Handoff, Takeover};
use crate::shared::ServerShared;

/// How long a `RESUME` waits for the task that holds its session to hand
/// it over.
const HANDOVER_TIMEOUT: Duration = Duration::from_secs(5);

/// A resumable session's state on its engine.
pub(super) struct Resumption {
    ticket: Ticket,
    /// The counted frames sent and not yet acknowledged.
    pub(super) replay: ReplayBuffer,
    /// Requests to hand the session over to a new link.
    takeover: mpsc::Receiver<Takeover>,
    /// Set once such a request came: the session goes to it.
    taken: Option<Takeover>,
}

impl Resumption {
    /// Whether another link asked for the session.
    pub(super) fn is_taken(&self) -> bool {
        self.taken.is_some()
    }
}

impl Engine {
    /// Answers `RESUME_TICKET`: the session's ticket, made resumable now if
    /// it was not (or error 1 when the server does not resume sessions).
    pub(super) fn resume_ticket(&mut self, header: Header, body: &Bytes) -> AfterFrame {
        let Some(ttl) = self.server.config.resume_ttl else {
            self.error(
                header,
                ErrorCode::UnknownOpcode,
                &"this server does not resume sessions",
            );
            return AfterFrame::Continue;
        };
        if self.server.config.require_encryption && !matches!(self.security, Security::Secure(_)) {
            self.error(
                header,
                ErrorCode::EncryptionRequired,
                &"this server resumes secure sessions only: ask after the handshake",
            );
            return AfterFrame::Continue;
        }
        let request = match TicketRequest::decode_body(body) {
            Ok(request) if header.request_id != 0 => request,
            _ => {
                self.error(
                    header,
                    ErrorCode::Malformed,
                    &"RESUME_TICKET is a request whose body is empty or the byte 1",
                );
                return AfterFrame::Continue;
            }
        };
        if self.resume.is_none() {
            if self.acks.is_some() {
                // Counting goes on and cannot start again: this session's
                // frames are no longer all kept, so it cannot be resumed.
                self.error(
                    header,
                    ErrorCode::HandshakeFailed,
                    &"this session can no longer be resumed (its replay buffer overflowed)",
                );
                return AfterFrame::Continue;
            }
            let (ticket, takeover) = self.register_ticket();
            self.resume = Some(Box::new(Resumption {
                ticket,
                replay: ReplayBuffer::new(self.server.config.resume_replay_bytes),
                takeover,
                taken: None,
            }));
            // Counting starts with the frame after this request (the
            // client's starts with the answer's).
            self.acks = Some(AckSchedule::new());
        }
        let ticket = self.resume.as_ref().expect("resumable").ticket.clone();
        let bound = self.server.config.resume_replay_bytes;
        let answer = ResumeTicket {
            ticket,
            ttl_ms: millis(ttl),
            replay_bytes: request
                .ask_bound
                .then(|| u32::try_from(bound).unwrap_or(u32::MAX)),
        };
        self.reply_to(header).packet(&answer);
        AfterFrame::Continue
    }

    /// A new ticket for this session, registered with what a resumption
    /// is bound to now (the latest handshake's hash, on a secure session),
    /// and where the requests to hand the session over will come.
    fn register_ticket(&self) -> (Ticket, mpsc::Receiver<Takeover>) {
        let ticket = Ticket::generate();
        let takeover = self.register(&ticket);
        (ticket, takeover)
    }

    /// Registers `ticket` for this session (see [`register_ticket`](Self::register_ticket)).
    fn register(&self, ticket: &Ticket) -> mpsc::Receiver<Takeover> {
        let (sender, takeover) = mpsc::channel(1);
        self.server.sessions.insert(
            ticket,
            Entry {
                takeover: sender,
                connection: Arc::clone(&self.connection),
                binding: self.binding(),
                place: self.place.key(),
            },
        );
        takeover
    }

    /// The session secret a resumption of this session is bound to.
    fn binding(&self) -> Option<Zeroizing<Vec<u8>>> {
        match &self.security {
            Security::Secure(channel) => Some(Zeroizing::new(channel.session_secret.to_vec())),
            _ => None,
        }
    }

    /// Takes the peer's `ACK`: the frames it acknowledges leave the replay
    /// buffer. One that acknowledges more than was sent, or goes back,
    /// closes the connection (`MALFORMED`).
    pub(super) fn on_ack(&mut self, header: Header, body: &Bytes) -> AfterFrame {
        let ack = match Ack::decode_body(body) {
            // (A sealed one has ENCRYPTED set: no other flag is allowed.)
            Ok(ack)
                if header.request_id == 0
                    && header.flags.without(Flags::ENCRYPTED) == Flags::NONE =>
            {
                ack
            }
            Ok(_) => return self.malformed_ack("an ACK has id 0 and no flags"),
            Err(error) => return self.malformed_ack(&error.to_string()),
        };
        let Some(resume) = &mut self.resume else {
            // Not resumable (any more): nothing is kept to drop.
            return AfterFrame::Continue;
        };
        match resume.replay.acknowledge(ack.received) {
            Ok(()) => AfterFrame::Continue,
            Err(error) => self.malformed_ack(&error.to_string()),
        }
    }

    fn malformed_ack(&mut self, why: &str) -> AfterFrame {
        self.close_now(&CloseNotice::new(
            ternio_protocol::DisconnectReason::Malformed,
            format!("ACK: {why}"),
        ))
    }

    /// Counts a frame received with an application opcode, and writes an
    /// `ACK` when one is due (else sets the timer of the next).
    /// Counting goes on once resumability ended (the replay buffer
    /// overflowed): the peer still keeps what it sent until acknowledged,
    /// and a client's upload waits for that room.
    pub(super) fn count_received(&mut self, frame_bytes: usize) {
        let Some(acks) = &mut self.acks else {
            return;
        };
        match acks.received(frame_bytes, || Instant::now().into_std()) {
            AckDue::Now => self.write_ack(),
            AckDue::At(at) => {
                self.timers.set_ack(Instant::from_std(at));
                self.alarm.set_if_sooner(self.timers.next_deadline());
            }
            AckDue::Scheduled => {}
        }
    }

    /// Writes an `ACK` of every counted frame received so far.
    pub(super) fn write_ack(&mut self) {
        let Some(acks) = &mut self.acks else {
            return;
        };
        let ack = Ack {
            received: acks.count(),
        };
        acks.acked();
        self.timers.set_ack_off();
        self.write_own(Header::new(system::ACK, Flags::NONE, 0), &ack);
    }

    /// Ends resumability when the replay buffer overflowed: the ticket is
    /// forgotten, and the connection goes on as any other.
    pub(super) fn check_replay(&mut self) {
        if self
            .resume
            .as_ref()
            .is_some_and(|resume| resume.replay.is_overflowed())
        {
            tracing::debug!(connection = %self.connection.id, "replay buffer full: no longer resumable");
            self.end_resumability();
        }
    }

    /// Forgets the ticket: a `RESUME` with it is refused from now on.
    /// (Counting and `ACK`s go on: see [`count_received`](Self::count_received).)
    pub(super) fn end_resumability(&mut self) {
        if let Some(resume) = self.resume.take() {
            self.server.sessions.remove(&resume.ticket);
        }
    }

    /// Whether another link asked for this session (then
    /// [`Stop::TakenOver`]). A live link looks only when its outbox signal
    /// was set, as [`Entry::take_over`] does after asking.
    pub(super) fn poll_takeover(&mut self, cx: &mut TaskContext<'_>) -> bool {
        let Some(resume) = &mut self.resume else {
            return false;
        };
        if resume.taken.is_some() {
            return true;
        }
        match resume.takeover.poll_recv(cx) {
            Poll::Ready(Some(reply)) => {
                resume.taken = Some(reply);
                true
            }
            _ => false,
        }
    }

    /// Takes a `RESUME`: only as the first frame of a connection. The
    /// transport stops reading and runs [`resume`] on its task.
    pub(super) fn on_resume_request(&mut self, frame: Frame) -> AfterFrame {
        let header = frame.header;
        if self.server.config.resume_ttl.is_none() {
            self.error(
                header,
                ErrorCode::UnknownOpcode,
                &"this server does not resume sessions",
            );
            return AfterFrame::Continue;
        }
        if header.request_id == 0 {
            self.error(header, ErrorCode::Malformed, &"RESUME is a request");
            return AfterFrame::Continue;
        }
        if self.frames_seen > 1 || self.resume.is_some() {
            self.error(
                header,
                ErrorCode::HandshakeFailed,
                &"RESUME must be the first frame of a connection",
            );
            return AfterFrame::Continue;
        }
        match Resume::decode_body(&frame.body) {
            Ok(request) => self.resume_request = Some((header, request)),
            Err(error) => {
                self.error(header, ErrorCode::Malformed, &error);
            }
        }
        AfterFrame::Continue
    }

    /// Whether the session may wait for its client now that its link is
    /// lost: it has a ticket, and did not close on purpose (a link closed
    /// with `DECRYPT_FAILED` was attacked, not closed on purpose).
    pub(crate) fn resumable(&self) -> bool {
        self.resume.is_some()
            && self.closing.is_none()
            && (self.closed.is_none() || self.link_attacked)
    }

    /// Readies the engine of a session whose link is gone to wait: what
    /// was written for that link is dropped (the replay buffer has the
    /// counted frames), timers stop. The frames that came by datagram and
    /// wait are dropped (they would run late), and the server forgets the
    /// client's datagram address until the client speaks again.
    fn suspend(&mut self) {
        // Open streams wait with the session (section 4.5): their frames
        // are counted, and replayed once the client resumes it; they are
        // not polled meanwhile (nothing can be written).
        self.connection.datagrams.suspend();
        // Its place lets a connection of its address past the limit, to
        // resume it (`Permit`).
        self.place.mark_waiting();
        self.out = BytesMut::new();
        self.open_buf = BytesMut::new();
        self.timers.set_ack_off();
    }

    /// A waiting session's work: the replies of requests still running
    /// (recorded, then dropped with the rest of `out`), and close orders.
    /// Pushes stay in the outbox until the client is back.
    fn poll_suspended(&mut self, cx: &mut TaskContext<'_>) -> Option<CloseCause> {
        self.register_waker(cx);
        self.poll_replies(cx);
        self.check_replay();
        self.out.clear();
        // Datagrams that come while the session waits are dropped: they
        // would run late, after the resumption.
        self.connection.datagrams.clear_inbox();
        // (The push signal stays set: the pushes wait for the client.)
        if let Some(order) = self.connection.outbox.take_close() {
            let reason = order.notice.reason;
            self.closed = Some(reason);
            return Some(CloseCause::Disconnected(reason));
        }
        if self.resume.is_none() {
            return Some(CloseCause::ResumeLost);
        }
        None
    }

    /// Gives the session to the link that asked for it, if one did; the
    /// engine comes back when none did, or the link gave up waiting.
    fn hand_over(mut self) -> Option<Self> {
        let Some(reply) = self.resume.as_mut().and_then(|resume| resume.taken.take()) else {
            return Some(self);
        };
        reply
            .send(Box::new(self))
            .err()
            .map(|handoff| *downcast(handoff))
    }

    /// Whether the frames a client lacks that received `received` are all
    /// kept (then takes `received` as an acknowledgement).
    fn can_resume_from(&mut self, received: u64) -> Result<(), String> {
        let resume = self.resume.as_mut().ok_or("the session is not resumable")?;
        if resume.replay.replay_from(received).is_none() {
            return Err(format!(
                "cannot replay from frame {received}: {} sent, {} acknowledged{}",
                resume.replay.sent(),
                resume.replay.acknowledged(),
                if resume.replay.is_overflowed() {
                    ", replay buffer overflowed"
                } else {
                    ""
                }
            ));
        }
        resume
            .replay
            .acknowledge(received)
            .map_err(|error| error.to_string())
    }

    /// Sets this engine, the session a `RESUME` took over, on its new link:
    /// fresh timers and buffers, a new ticket (the old one is dead), the
    /// new keys on a secure session (`handshake`, the resumption's, whose
    /// second message carries the answer's fields); then the answer to the
    /// `RESUME` and the frames the client lacks, from `received` on.
    fn rebind(
        &mut self,
        request: Header,
        received: u64,
        handshake: Option<ResumeResponder>,
    ) -> Result<(), String> {
        let now = Instant::now();
        let server = Arc::clone(&self.server);
        self.out = BytesMut::new();
        self.open_buf = BytesMut::new();
        self.closed = None;
        self.closing = None;
        self.link_attacked = false;
        // Resumed: a later loss gives the session its whole TTL again.
        self.expires = None;
        self.went_quiet = false;
        self.timers = super::timers::Timers::new(&server.config, now);
        if handshake.is_some() || matches!(self.security, Security::Secure(_)) {
            self.timers.handshake_done();
        }
        self.alarm.set(self.timers.next_deadline());
        // The answer's fields, which message 2 carries encrypted.
        let ticket = Ticket::generate();
        let ttl_ms = millis(server.config.resume_ttl.unwrap_or_default());
        // The answer acknowledges every frame received so far: the `ACK`
        // schedule starts again from it (its timer was off while the
        // session waited).
        let acks = self.acks.as_mut().expect("a resumable session");
        let count = acks.count();
        acks.acked();
        let mut message = Vec::new();
        if let Some(handshake) = handshake {
            let (reply, mut channel) = handshake
                .answer(count, &ticket, ttl_ms)
                .map_err(|error| format!("resumption handshake: {error}"))?;
            message = reply;
            channel.sealer.set_rekey_policy(server.config.rekey);
            self.security = Security::Secure(Box::new(channel));
        }
        // The new ticket, bound to this resumption's handshake: the old one
        // is dead.
        let takeover = self.register(&ticket);
        let resume = self.resume.as_mut().expect("a resumable session");
        server.sessions.remove(&resume.ticket);
        resume.ticket = ticket;
        resume.takeover = takeover;
        resume.taken = None;
        let answer = Resumed {
            received: count,
            ticket: resume.ticket.clone(),
            ttl_ms,
            message: Bytes::from(message),
        };
        let max = server.config.max_frame_size;
        // The answer goes plain, as a handshake's does, whatever the keys.
        let header = Header::new(system::RESUME, Flags::RESPONSE, request.request_id);
        frame::write_frame(&mut self.out, Framing::LengthPrefixed, header, &answer, max)
            .map_err(|error| error.to_string())?;
        self.replay_from(received)
    }
}

impl Engine {
    /// Writes the counted frames the client lacks, from `received` on, as
    /// they were first sent (sealed under the session's current keys).
    fn replay_from(&mut self, received: u64) -> Result<(), String> {
        let resume = self.resume.as_ref().expect("a resumable session");
        let frames: Vec<(Header, Bytes)> = resume
            .replay
            .replay_from(received)
            .ok_or("the frames the client lacks are no longer kept")?
            .map(|(header, body)| (header, Bytes::copy_from_slice(body)))
            .collect();
        for (header, body) in frames {
            self.write_own_with(header, |out| out.extend_from_slice(&body))
                .map_err(|error| error.to_string())?;
        }
        Ok(())
    }
}

/// Why a connection admitted past its address's limit may not resume a
/// session of another address.
const PAST_LIMIT: &str =
    "this connection came past its address's limit: it may resume a session of that address only";

/// Refuses a `RESUME` (error 9); the connection goes on as a new session
/// (unless it came past a connection limit: see [`resume`]).
fn refuse(engine: &mut Engine, request: Header, why: &str) {
    tracing::debug!(connection = %engine.connection.id, why, "resume refused");
    engine.error(request, ErrorCode::HandshakeFailed, &why);
}

/// Runs the `RESUME` that `engine`, a new link's, received as its first
/// frame: finds the session, checks the client (on a secure session, the
/// resumption handshake bound to it), takes the session over from the
/// task that holds it, and puts it in `engine`'s place on this link. The
/// link's own session, never used, ends. Refused, the link goes on with
/// its own session, unless it came past a connection limit to resume one:
/// then it closes with `TOO_MANY_CONNECTIONS`.
pub(crate) async fn resume(engine: &mut Engine) {
    take_over(engine).await;
    // A link let past a connection limit that did not resume (its place
    // is still on probation) has nothing else to do: it closes.
    if engine.place.on_probation() && engine.closed().is_none() {
        engine.close_past_limit();
    }
}

/// [`resume`]'s work: the session taken over and set on this link, or the
/// `RESUME` refused.
async fn take_over(engine: &mut Engine) {
    let Some((header, request)) = engine.resume_request.take() else {
        return;
    };
    let server = Arc::clone(&engine.server);
    let Some(entry) = server.sessions.find(&request.ticket) else {
        return refuse(engine, header, "unknown or expired ticket");
    };
    // A link let past its address's limit resumes a session of that
    // address only: the old place it gives back must be that address's.
    if engine.place.past_address_limit() && entry.place != engine.place.key() {
        return refuse(engine, header, PAST_LIMIT);
    }
    let handshake = match (&entry.binding, request.pattern) {
        (None, 0) if request.message.is_empty() => None,
        (Some(hash), 3 | 4) => {
            if let Some(budget) = &server.handshakes
                && budget.check().is_err()
            {
                engine.error(
                    header,
                    ErrorCode::Overloaded,
                    &"too many handshakes at once: try again later",
                );
                return;
            }
            let identity = server.identity.as_ref().map(|identity| identity.keypair());
            // The prologue binds the request's ticket, received and
            // pattern: changed on the way, message 1 fails here.
            match ResumeResponder::read(&request, identity, hash) {
                Ok(handshake) => Some(handshake),
                Err(error) => {
                    return refuse(engine, header, &format!("resumption handshake: {error}"));
                }
            }
        }
        (None, _) => return refuse(engine, header, "a plain session resumes with pattern 0"),
        (Some(_), _) => {
            return refuse(
                engine,
                header,
                "a secure session resumes with pattern 3 or 4",
            );
        }
    };
    // The client proved itself: ask the task that holds the session. Both
    // steps within the timeout: asking waits too while an earlier request
    // fills the holder's channel.
    let (reply, handoff) = oneshot::channel();
    let handed = tokio::time::timeout(HANDOVER_TIMEOUT, async {
        entry.take_over(reply).await?;
        handoff.await.map_err(drop)
    });
    let Ok(Ok(handoff)) = handed.await else {
        return refuse(engine, header, "the session ended");
    };
    let mut session = *downcast(handoff);
    if let Err(why) = session.can_resume_from(request.received) {
        // Nothing changes for the session: it waits for its client again.
        let tracker = server.tasks.clone();
        tracker.spawn(wait_for_client(session, Arc::clone(&server), false));
        return refuse(engine, header, &why);
    }
    std::mem::swap(engine, &mut session);
    // The link keeps its own place among the connections (its address's),
    // and the old link's goes with the unused session.
    std::mem::swap(&mut engine.place, &mut session.place);
    engine.place.confirm();
    // `session` is now this link's own, unused: it ends here, and the
    // resumed session takes its link's address and transport.
    let own = Arc::clone(&session.connection);
    drop(session);
    server.move_session(&engine.connection, &own);
    server.close_connection(&own, CloseCause::Resumed);
    match engine.rebind(header, request.received, handshake) {
        Ok(()) => {
            tracing::debug!(connection = %engine.connection.id, "session resumed");
            server.hooks.resumed(&engine.connection);
        }
        Err(why) => {
            // The session cannot go on here: it ends, and the client
            // learns why.
            engine.end_resumability();
            engine.out.clear();
            refuse(engine, header, &why);
            engine.close_now(&CloseNotice::new(
                ternio_protocol::DisconnectReason::Normal,
                "the session could not be resumed",
            ));
        }
    }
}

fn downcast(handoff: Handoff) -> Box<Engine> {
    handoff
        .downcast::<Engine>()
        .expect("sessions hand over engines")
}

/// What becomes of a session once its link ended (`cause`): handed to the
/// link that took it over, kept for its client until the TTL passes (then
/// closed), or closed now. Runs on the link's task.
pub(crate) async fn end_link(engine: Engine, cause: CloseCause) {
    let Some(engine) = engine.hand_over() else {
        return;
    };
    let server = Arc::clone(&engine.server);
    // A link closed with `DECRYPT_FAILED` on a resumable secure session
    // (`link_attacked`) was written into by someone on the path: the session
    // is not broken, its keys are intact, and resuming it needs them.
    let lost =
        matches!(cause, CloseCause::PeerClosed | CloseCause::Failed(_)) || engine.link_attacked;
    if !(lost && engine.resumable()) {
        let connection = Arc::clone(&engine.connection);
        drop_session(engine);
        server.close_connection(&connection, cause);
        return;
    }
    wait_for_client(engine, server, true).await;
}

/// Forgets `engine`'s ticket and drops it.
fn drop_session(mut engine: Engine) {
    engine.end_resumability();
}

/// Keeps a session whose link is lost until its client resumes it (then
/// hands it over), its TTL passes, or it is closed (a kick, the shutdown).
/// `announce`: tell the suspend hooks (not when a refused resumption puts
/// the session back to wait; it keeps its deadline then).
async fn wait_for_client(mut engine: Engine, server: Arc<ServerShared>, announce: bool) {
    let ttl = server.config.resume_ttl.unwrap_or_default();
    tracing::debug!(connection = %engine.connection.id, ?ttl, "link lost: session suspended");
    engine.suspend();
    if announce {
        server.hooks.suspended(&engine.connection);
    }
    // A session put back to wait after a refused `RESUME` keeps its
    // deadline: refusals do not extend its life.
    let deadline = *engine.expires.get_or_insert_with(|| Instant::now() + ttl);
    let expiry = tokio::time::sleep_until(deadline);
    tokio::pin!(expiry);
    let ended = poll_fn(|cx| {
        if engine.poll_takeover(cx) {
            return Poll::Ready(None);
        }
        if let Some(cause) = engine.poll_suspended(cx) {
            return Poll::Ready(Some(cause));
        }
        if expiry.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(CloseCause::ResumeExpired));
        }
        Poll::Pending
    })
    .await;
    let cause = match ended {
        None => match engine.hand_over() {
            None => return,
            // The link that asked gave up: the session waits no more.
            Some(returned) => {
                engine = returned;
                CloseCause::ResumeLost
            }
        },
        Some(cause) => cause,
    };
    tracing::debug!(connection = %engine.connection.id, ?cause, "suspended session ended");
    let connection = Arc::clone(&engine.connection);
    drop_session(engine);
    server.close_connection(&connection, cause);
}

/// `duration` in milliseconds, saturating.
fn millis(duration: Duration) -> u32 {
    u32::try_from(duration.as_millis()).unwrap_or(u32::MAX)
}
