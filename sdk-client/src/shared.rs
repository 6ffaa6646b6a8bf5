//! What the client's handles, its supervisor and its links' tasks share:
//! the settings, the link state machine ([`Links`]) with the requests
//! waiting on the current link, the secure channel the application asked
//! for ([`Security`]) and the push subscriptions; and the request path:
//! registering a request, sending it, waiting for its outcome.

use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;

use ternio_protocol::frame::{Flags, Header};
use ternio_protocol::system::{self, Cancel, Deadline, Disconnect, Ping, TicketRequest};
use ternio_protocol::{DisconnectReason, Encode, Frame};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use crate::clock::Clock;
use crate::config::{ClientConfig, SecureConfig};
use crate::error::{ClientError, CloseReason};
use crate::handshake::{self, Attempt, Security};
use crate::keeper;
use crate::link::Link;
use crate::links::Links;
use crate::push::Registry;
use crate::requests::{Failure, Requests, WakerId, deadline_after};
use crate::resume::{ResumeFailed, Session};
use crate::resuming;
use crate::secure::Seal;
use crate::send::SendError;
use crate::state::{ConnectionState, SessionEvent};
use crate::sync::lock;

/// What the client's handles, its supervisor and its links' tasks share.
pub(crate) struct Shared {
    config: ClientConfig,
    links: Links,
    security: Security,
    /// Tells [`expire_requests`](Self::expire_requests) that a request's
    /// deadline comes before the one it sleeps until.
    deadline_moved: Notify,
    /// The push subscriptions, which outlive connections.
    pushes: Arc<Registry>,
    /// The session's resumption state (docs/PROTOCOL.md section 4.2).
    session: Arc<Session>,
    /// What became of the session across lost connections.
    session_events: watch::Sender<SessionEvent>,
    /// The datagram channel, once bound (docs/PROTOCOL.md section 4.4).
    pub(crate) datagrams: std::sync::Mutex<Option<Arc<crate::datagrams::Channel>>>,
    /// Held by a `bind_datagrams` from its request to the channel's
    /// install: binds run one at a time.
    pub(crate) datagram_bind: tokio::sync::Mutex<()>,
    /// The client's clock and its estimate of the server's (section 4.3).
    clock: Clock,
}

impl Shared {
    pub(crate) fn new(config: ClientConfig) -> Self {
        let session = Arc::new(Session::new());
        Self {
            links: Links::new(Instant::now(), Arc::clone(&session)),
            security: Security::new(config.secure),
            deadline_moved: Notify::new(),
            pushes: Arc::new(Registry::default()),
            session,
            session_events: watch::Sender::new(SessionEvent::Started),
            datagrams: std::sync::Mutex::new(None),
            datagram_bind: tokio::sync::Mutex::new(()),
            clock: Clock::new(),
            config,
        }
    }

    /// The client's clock and its estimate of the server's.
    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The session's resumption state.
    pub(crate) fn session(&self) -> &Arc<Session> {
        &self.session
    }

    /// Whether the client resumes its session after a lost connection:
    /// [`ClientConfig::resume`] with a reconnect policy.
    pub(crate) fn wants_resume(&self) -> bool {
        self.config.resume && self.config.reconnect.is_some()
    }

    /// Watches what becomes of the session across lost connections.
    pub(crate) fn session_events(&self) -> watch::Receiver<SessionEvent> {
        self.session_events.subscribe()
    }

    /// Asks the server for a ticket on `link`, a new session's, before it
    /// is installed (nothing waits for the answer: the reader takes it).
    pub(crate) fn ask_ticket(&self, link: &Link) {
        if !self.wants_resume() {
            return;
        }
        let id = self.links.with_requests(|requests| requests.free_id());
        let header = Header::new(system::RESUME_TICKET, Flags::NONE, id);
        // The server's replay bound tells when to acknowledge (section 4.2).
        let request = TicketRequest {
            ask_bound: self.session.asks_bound(),
        };
        // A failure shows as the link's loss.
        let _ = link.send(header, &request, self.config.max_frame_size, false);
    }

    /// Resumes the session on `link`, a reconnection not installed yet.
    /// Refused (or not tried: no ticket, past its TTL), the link carries a
    /// new session: the requests in flight fail, and the handshake and
    /// ticket of a new session follow. `Err` when the link failed.
    pub(crate) async fn resume_or_start(
        &self,
        link: &Arc<Link>,
        lost_at: Instant,
    ) -> Result<(), ClientError> {
        if self.wants_resume() && self.session.is_resumable() {
            let expired = lost_at.elapsed() >= self.session.ttl();
            let outcome = if expired {
                Err(ResumeFailed::Refused(
                    "the session's time to live passed".into(),
                ))
            } else {
                let id = self.links.with_requests(|requests| requests.free_id());
                // The frames the server replays come on this link before it
                // is installed.
                self.links.set_resuming(Some(link));
                let secure = self.secure_config().and_then(|secure| {
                    self.links
                        .last_session_secret()
                        .map(|hash| (hash, secure.pin))
                });
                resuming::resume(
                    &self.session,
                    link,
                    id,
                    secure,
                    self.config.max_frame_size,
                    self.config.connect_timeout,
                )
                .await
            };
            // A secure resumption the server answered keys the next one by
            // its own secret, whatever becomes of this link: lost before it
            // is installed (while the replays cross), it is never the
            // current link, whose loss would record it.
            if let Some(secret) = link.session_secret() {
                self.links.set_last_session_secret(secret);
            }
            match outcome {
                Ok(()) => {
                    let count = self.session.resumptions();
                    tracing::debug!(count, "session resumed");
                    self.session_events
                        .send_replace(SessionEvent::Resumed { count });
                    return Ok(());
                }
                Err(ResumeFailed::Link(error)) => {
                    self.links.set_resuming(None);
                    return Err(error);
                }
                Err(ResumeFailed::Refused(reason)) => {
                    self.links.set_resuming(None);
                    tracing::debug!(%reason, "session not resumed: a new one starts");
                    self.session.reset();
                    let lost = CloseReason::Protocol(format!("the session was lost: {reason}"));
                    self.links.fail_requests(&lost);
                    self.session_events
                        .send_replace(SessionEvent::Lost { reason });
                }
            }
        } else {
            if let Some(reason) = self.session.lost_reason() {
                // The session existed, but the server ended it or this
                // client can no longer replay what the server may have
                // missed: a new one starts, and the application is told
                // (its requests in flight failed when the link was lost).
                tracing::debug!(reason);
                self.session_events
                    .send_replace(SessionEvent::Lost { reason });
            }
            self.session.reset();
        }
        // A new session: the old one's datagram channel is gone with it,
        // and its clock samples (it may be another server, with its clock).
        lock(&self.datagrams).take();
        self.clock.forget();
        self.secure_new_link(link).await?;
        self.ask_ticket(link);
        Ok(())
    }

    /// Whether a frame on `link` goes out sealed (see [`Seal`]).
    pub(crate) fn seals(&self, link: &Link, seal: Seal) -> Result<bool, ClientError> {
        self.security.seals(link, seal)
    }

    pub(crate) fn config(&self) -> &ClientConfig {
        &self.config
    }

    pub(crate) fn pushes(&self) -> &Arc<Registry> {
        &self.pushes
    }

    pub(crate) fn links(&self) -> &Links {
        &self.links
    }

    /// The secure channel new connections set up, if the client has one.
    pub(crate) fn secure_config(&self) -> Option<SecureConfig> {
        self.security.wanted()
    }

    /// Whether the current connection's secure channel is up.
    pub(crate) fn is_secure(&self) -> bool {
        self.links.is_secure()
    }

    pub(crate) fn state(&self) -> ConnectionState {
        self.links.state()
    }

    pub(crate) fn state_changes(&self) -> watch::Receiver<ConnectionState> {
        self.links.state_changes()
    }

    pub(crate) fn close_reason(&self) -> Option<CloseReason> {
        self.links.close_reason()
    }

    /// Makes `link`, opened by reconnect attempt `attempt` (0 for the first
    /// connection), the current link (see [`Links::install`]).
    pub(crate) fn install(&self, link: &Arc<Link>, attempt: u32) -> bool {
        let installed = self.links.install(link, attempt, Instant::now());
        if installed {
            // Streams dropped after the resumption sent its `CANCEL`s and
            // before the link was installed (their ids are not reused
            // before the id counter wraps, so none can name a newer request).
            for request_id in self.session.take_abandoned() {
                let header = Header::new(system::CANCEL, Flags::NONE, 0);
                let cancel = Cancel { request_id };
                if link
                    .send(header, &cancel, self.config.max_frame_size, false)
                    .is_err()
                {
                    break;
                }
            }
        }
        installed
    }

    /// Publishes that reconnect attempt `attempt` is under way (see
    /// [`Links::set_attempt`]).
    pub(crate) fn set_attempt(&self, attempt: u32) -> bool {
        self.links.set_attempt(attempt)
    }

    /// Declares `link` lost for `reason` (see [`Links::lose`]), ends the
    /// subscriptions when the client closes for good, and shuts the link.
    pub(crate) fn lose(&self, link: &Arc<Link>, reason: CloseReason) {
        let policy = self.config.reconnect.as_ref();
        // A session that can be resumed keeps its requests in flight: their
        // answers come on the next connection.
        let keep = self.wants_resume() && self.session.is_resumable() && is_resumable(&reason);
        if matches!(reason, CloseReason::Disconnected(_)) {
            // The server ended the session: no `RESUME` (section 4.2).
            self.session.end(format!("the session ended: {reason}"));
        }
        if self.links.lose(link, reason, policy, keep, Instant::now()) {
            self.pushes.close();
        }
        link.shutdown();
    }

    /// Closes the client for good with `reason`, whatever it was doing:
    /// waiting requests fail, the current link is shut down, subscriptions end.
    pub(crate) fn finish(&self, reason: CloseReason) {
        if self.links.finish(reason) {
            self.pushes.close();
        }
    }

    /// Ends reconnecting for good: attempts are exhausted.
    pub(crate) fn give_up(&self, reason: CloseReason) {
        if self.links.give_up(reason) {
            self.pushes.close();
        }
    }

    /// Sends a frame that expects no reply on the current link; its body
    /// compressed when `compress` (its type allows it), the client
    /// compresses ([`ClientConfig::compression`](crate::ClientConfig::compression))
    /// and it reaches the threshold.
    pub(crate) fn send<E: Encode + ?Sized>(
        &self,
        header: Header,
        body: &E,
        seal: Seal,
        compress: bool,
    ) -> Result<(), ClientError> {
        let link = self.links.current()?;
        let sealed = self.security.seals(&link, seal)?;
        let compress = self.config.compression.filter(|_| compress);
        match link.send_compressing(header, body, self.config.max_frame_size, sealed, compress) {
            Ok(()) => Ok(()),
            Err(SendError::TooLarge(error)) => Err(ClientError::FrameTooLarge(error)),
            Err(SendError::NotSecure) => Err(ClientError::NotSecure),
            Err(SendError::Handshaking) => Err(ClientError::HandshakeInProgress),
            Err(SendError::Gone) => Err(ClientError::Closed(link.end_reason())),
            Err(SendError::Lost(reason)) => {
                self.lose(&link, reason);
                Err(ClientError::Closed(link.end_reason()))
            }
        }
    }

    /// Sends the keepalive's `PING` on `link`, sealed once its secure
    /// channel is up. Nobody waits for the `PONG` (its id is one no request
    /// uses, so it is dropped as an answer nobody waits for): any byte
    /// received after it will do.
    pub(crate) fn keepalive_ping(&self, link: &Arc<Link>) -> Result<(), SendError> {
        if link.is_handshaking() {
            return Err(SendError::Handshaking);
        }
        let sealed = self
            .security
            .seals(link, Seal::Auto)
            .map_err(|_| SendError::NotSecure)?;
        let id = self.links.with_requests(|requests| requests.free_id());
        let header = Header::new(system::PING, Flags::NONE, id);
        link.send(
            header,
            &Ping { value: 0 },
            self.config.max_frame_size,
            sealed,
        )
    }

    /// Sends a request and waits for the frame that answers it. While the
    /// client reconnects, first waits for the new connection; all within
    /// `timeout`.
    pub(crate) async fn call<E: Encode + ?Sized>(
        &self,
        opcode: u16,
        body: &E,
        timeout: Duration,
        seal: Seal,
    ) -> Result<Frame, ClientError> {
        self.call_compressing(opcode, body, timeout, seal, false)
            .await
    }

    /// [`call`](Self::call), the request's body compressed when `compress`
    /// (its type allows it), the client compresses and it reaches the
    /// threshold.
    pub(crate) async fn call_compressing<E: Encode + ?Sized>(
        &self,
        opcode: u16,
        body: &E,
        timeout: Duration,
        seal: Seal,
        compress: bool,
    ) -> Result<Frame, ClientError> {
        let compress = self.config.compression.filter(|_| compress);
        let deadline = deadline_after(Instant::now(), timeout);
        let (id, mut guard, mut registered) = loop {
            // With a link ready, the request registers and goes out in this
            // poll, and its slot takes this poll's waker: the wait below
            // then starts without locking the requests. After a wait for a
            // link, the slot takes no waker and the wait registers one.
            let waker = std::future::poll_fn(|cx| Poll::Ready(cx.waker().clone())).await;
            let waker_id = WakerId::of(&waker);
            let register = |requests: &mut Requests, link: &Arc<Link>, waker: Option<Waker>| {
                if requests.len() >= self.config.max_in_flight {
                    return Err(ClientError::TooManyInFlight(requests.len()));
                }
                let sealed = self.security.seals(link, seal)?;
                let id = requests.free_id();
                let earlier = requests.insert(id, sealed, deadline, waker);
                Ok((Arc::clone(link), id, sealed, earlier))
            };
            let ready = self
                .links
                .try_with_link(|requests, link| register(requests, link, Some(waker)));
            let ((link, id, sealed, earlier), registered) = match ready {
                Some(done) => (done?, Some(waker_id)),
                None => {
                    let waited = self
                        .links
                        .with_link(deadline, timeout, |requests, link| {
                            register(requests, link, None)
                        })
                        .await?;
                    (waited, None)
                }
            };
            if earlier {
                self.deadline_moved.notify_one();
            }
            // Frees the slot if this future is dropped or fails before the
            // answer, and tells the server it may stop.
            let mut guard = SlotGuard {
                shared: self,
                id,
                link,
                sealed,
                sent: false,
                armed: true,
            };
            // System requests (PING, TIME) are answered on the connection's
            // task, never dispatched: a DEADLINE for them would only wait.
            if self.config.send_deadlines && opcode < ternio_protocol::frame::SYSTEM_OPCODE_START {
                let budget = deadline.saturating_duration_since(Instant::now());
                let deadline = Deadline {
                    request_id: id,
                    budget_ms: u32::try_from(budget.as_millis()).unwrap_or(u32::MAX),
                };
                // A failure here shows in the request's own send just below.
                let _ = guard.link.send(
                    Header::new(system::DEADLINE, Flags::NONE, 0),
                    &deadline,
                    self.config.max_frame_size,
                    sealed,
                );
            }
            match guard.link.send_compressing(
                Header::new(opcode, Flags::NONE, id),
                body,
                self.config.max_frame_size,
                sealed,
                compress,
            ) {
                Ok(()) => guard.sent = true,
                Err(SendError::TooLarge(error)) => return Err(ClientError::FrameTooLarge(error)),
                Err(SendError::NotSecure) => return Err(ClientError::NotSecure),
                // A handshake began since the link was taken: wait for it
                // (in `with_link`) and go again with a new slot.
                Err(SendError::Handshaking) => continue,
                // The link was lost after the request registered: the loss
                // failed its slot with the reason, or (a session kept for
                // resuming) left it waiting: then it never went out, and
                // goes on the next link with a new slot.
                Err(SendError::Gone)
                    if self.links.with_requests(|requests| requests.is_waiting(id)) =>
                {
                    drop(guard);
                    continue;
                }
                Err(SendError::Gone) => {}
                Err(SendError::Lost(reason)) => self.lose(&guard.link, reason),
            }
            break (id, guard, registered);
        };
        let outcome = std::future::poll_fn(|cx| {
            // The slot holds this poll's waker already (the same poll as
            // the registration's): whatever ends the request wakes this
            // task, which looks then.
            if registered.take() == Some(WakerId::of(cx.waker())) {
                return Poll::Pending;
            }
            self.links.with_requests(|requests| requests.poll(id, cx))
        })
        .await;
        // Collecting the outcome freed the slot.
        guard.armed = false;
        outcome.map_err(|failure| match failure {
            Failure::TimedOut => {
                guard.cancel();
                ClientError::Timeout(timeout)
            }
            Failure::Closed(reason) => ClientError::Closed(reason),
        })
    }

    /// Times out the requests whose deadline passed, with one timer for
    /// them all: sleeps until the earliest deadline, or until a request
    /// with an earlier one arrives. Runs for the client's life.
    pub(crate) async fn expire_requests(self: Arc<Self>) {
        loop {
            let (wakers, next) = self.links.with_requests(|requests| {
                let wakers = requests.on_timeout(Instant::now());
                (wakers, requests.next_deadline())
            });
            wakers.into_iter().for_each(Waker::wake);
            // A request registered since `on_timeout` stored a permit: no
            // earlier deadline is missed.
            let moved = self.deadline_moved.notified();
            match next {
                Some(next) => {
                    tokio::select! {
                        () = keeper::sleep_until(next) => {}
                        () = moved => {}
                    }
                }
                None => moved.await,
            }
        }
    }

    /// Runs a handshake on the current link (waiting for one while the
    /// client reconnects), for [`Client::handshake`](crate::Client::handshake).
    /// Once it completes, every later connection runs it again.
    pub(crate) async fn handshake(&self, pin: Option<[u8; 32]>) -> Result<(), ClientError> {
        if self.secure_config().is_some() {
            return Err(ClientError::HandshakeAlreadyRan(
                "this client's session is secure already",
            ));
        }
        let timeout = self.config.request_timeout;
        let deadline = deadline_after(Instant::now(), timeout);
        let (link, id) = self
            .links
            .with_link(deadline, timeout, |requests, link| {
                Ok((Arc::clone(link), requests.free_id()))
            })
            .await?;
        let attempt = Attempt {
            id,
            pin,
            deadline,
            timeout,
        };
        self.run_handshake(&link, attempt).await
    }

    /// Sets up the client's secure channel, if it has one, on a link that
    /// is not installed yet (a first connection or a reconnection), within
    /// the connect timeout.
    pub(crate) async fn secure_new_link(&self, link: &Arc<Link>) -> Result<(), ClientError> {
        let Some(secure) = self.secure_config() else {
            return Ok(());
        };
        let timeout = self.config.connect_timeout;
        // Nothing waits on a link that is not installed: any id will do.
        let id = self.links.with_requests(|requests| requests.free_id());
        let attempt = Attempt {
            id,
            pin: secure.pin,
            deadline: deadline_after(Instant::now(), timeout),
            timeout,
        };
        self.run_handshake(link, attempt).await
    }

    async fn run_handshake(&self, link: &Arc<Link>, attempt: Attempt) -> Result<(), ClientError> {
        let max = self.config.max_frame_size;
        let lose = |reason| self.lose(link, reason);
        handshake::run(&self.security, link, attempt, max, lose).await
    }

    /// Sends `DISCONNECT NORMAL` on the current link, lets the transport end
    /// it properly within `linger`, and closes the client for good.
    pub(crate) async fn close(&self, linger: Duration) {
        self.links.set_closing();
        if self.links.close_reason().is_some() {
            return;
        }
        if let Some(link) = self.links.connected() {
            let disconnect = Disconnect::new(DisconnectReason::Normal, "client closed");
            let header = Header::new(system::DISCONNECT, Flags::NONE, 0);
            if link
                .send(header, &disconnect, self.config.max_frame_size, false)
                .is_ok()
            {
                let _ = tokio::time::timeout(linger, link.close_gracefully()).await;
            }
        }
        self.finish(CloseReason::Local);
    }
}

/// Removes a request's slot unless the request completed.
/// A request's slot while its caller waits: dropped early (the caller's
/// future was dropped), it frees the slot and, if no answer came, sends
/// `CANCEL` so that the server stops working on the request.
struct SlotGuard<'a> {
    shared: &'a Shared,
    id: u32,
    /// The link the request went out on.
    link: Arc<Link>,
    /// Whether it went out sealed.
    sealed: bool,
    /// Set once the request is on its way: only then is there something to
    /// cancel.
    sent: bool,
    /// Cleared once the outcome was collected.
    armed: bool,
}

impl SlotGuard<'_> {
    /// Sends `CANCEL` for the request on its link (docs/PROTOCOL.md section
    /// 4.1). A lost link is no error: its server stopped the request.
    fn cancel(&self) {
        if !self.sent {
            return;
        }
        let _ = self.link.send(
            Header::new(system::CANCEL, Flags::NONE, 0),
            &Cancel {
                request_id: self.id,
            },
            self.shared.config.max_frame_size,
            self.sealed,
        );
    }
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let unanswered = self
            .shared
            .links
            .with_requests(|requests| requests.remove(self.id));
        if unanswered && self.sent {
            self.cancel();
        }
    }
}

/// Whether a link lost for `reason` leaves its session resumable: a lost
/// connection, not a server that ended the session (`DISCONNECT`).
fn is_resumable(reason: &CloseReason) -> bool {
    matches!(
        reason,
        CloseReason::PeerClosed
            | CloseReason::Io(..)
            | CloseReason::KeepaliveTimeout { .. }
            | CloseReason::DecryptFailed(_)
    )
}
