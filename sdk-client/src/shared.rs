//! The transport-independent side of a client: requests waiting by id, the
//! current connection (a [`Link`]), the connection state, the secure
//! session, the push subscriptions, and what to do with each frame that
//! arrives.
//!
//! A request registers its id and takes the current link in one step under
//! one lock, so that a connection lost at the same moment either fails it
//! (it was in flight) or was gone before (it waits for the next one). Every
//! change of the current link happens under that lock too, and publishes
//! the new [`ConnectionState`].

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Waker;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ternio_protocol::buffers;
use ternio_protocol::frame::{Flags, Header};
use ternio_protocol::secure::Initiator;
use ternio_protocol::system::{self, Disconnect, Ping};
use ternio_protocol::{Decode, DisconnectReason, Encode, Frame};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use crate::config::{ClientConfig, SecureConfig};
use crate::error::{ClientError, CloseReason};
use crate::link::Link;
use crate::push::Registry;
use crate::reconnect::should_reconnect;
use crate::requests::{Answer, Failure, Requests};
use crate::secure::{PendingHandshake, RawBody, Seal};
use crate::send::{Mode, SendError};
use crate::state::ConnectionState;
use crate::sync::lock;

/// Where requests go now.
enum Current {
    /// This link carries requests.
    Connected(Arc<Link>),
    /// No link: attempt `n` to get one is under way (0 before the first
    /// connection, which nobody observes: the client is not handed out yet).
    Reconnecting(u32),
    /// Closed for good.
    Closed(CloseReason),
}

impl Current {
    fn is(&self, link: &Arc<Link>) -> bool {
        matches!(self, Self::Connected(current) if Arc::ptr_eq(current, link))
    }

    fn state(&self) -> ConnectionState {
        match self {
            Self::Connected(_) => ConnectionState::Connected,
            Self::Reconnecting(attempt) => ConnectionState::Reconnecting { attempt: *attempt },
            Self::Closed(reason) => ConnectionState::Closed(reason.clone()),
        }
    }
}

/// The current link and the requests waiting for an answer on it.
struct Conn {
    current: Current,
    requests: Requests,
    /// When the current (or last) link was installed, and by which
    /// reconnect attempt (0 for the first connection): a link lost before
    /// [`healthy_after`](crate::ReconnectPolicy::healthy_after) has the
    /// count of attempts go on from there.
    installed: (Instant, u32),
}

/// What the client's handles, its supervisor and its links' tasks share.
pub(crate) struct Shared {
    config: ClientConfig,
    conn: Mutex<Conn>,
    /// The published state; changed only with `conn` locked.
    state: watch::Sender<ConnectionState>,
    /// Set by [`close`](Self::close): nothing reconnects after it.
    closing: AtomicBool,
    next_id: AtomicU32,
    /// Tells [`expire_requests`](Self::expire_requests) that a request's
    /// deadline comes before the one it sleeps until.
    deadline_moved: Notify,
    /// The push subscriptions, which outlive connections.
    pushes: Arc<Registry>,
    /// The secure channel every new connection sets up before it carries
    /// requests: from the config, or recorded when the application asks for
    /// a handshake.
    secure_config: Mutex<Option<SecureConfig>>,
    /// Whether `secure_config` is set: from then on nothing goes out plain
    /// (requests without a session fail with `NotSecure`).
    secure_wanted: AtomicBool,
}

impl Shared {
    pub(crate) fn new(config: ClientConfig) -> Self {
        let current = Current::Reconnecting(0);
        Self {
            state: watch::Sender::new(current.state()),
            conn: Mutex::new(Conn {
                current,
                requests: Requests::default(),
                installed: (Instant::now(), 0),
            }),
            closing: AtomicBool::new(false),
            next_id: AtomicU32::new(1),
            deadline_moved: Notify::new(),
            pushes: Arc::new(Registry::default()),
            secure_config: Mutex::new(config.secure),
            secure_wanted: AtomicBool::new(config.secure.is_some()),
            config,
        }
    }

    pub(crate) fn config(&self) -> &ClientConfig {
        &self.config
    }

    pub(crate) fn pushes(&self) -> &Arc<Registry> {
        &self.pushes
    }

    /// The secure channel new connections set up, if the client has one.
    pub(crate) fn secure_config(&self) -> Option<SecureConfig> {
        *lock(&self.secure_config)
    }

    /// Whether the current connection's secure session is up.
    pub(crate) fn is_secure(&self) -> bool {
        matches!(&lock(&self.conn).current, Current::Connected(link) if link.is_secure())
    }

    pub(crate) fn state(&self) -> ConnectionState {
        self.state.borrow().clone()
    }

    pub(crate) fn state_changes(&self) -> watch::Receiver<ConnectionState> {
        self.state.subscribe()
    }

    pub(crate) fn close_reason(&self) -> Option<CloseReason> {
        match &lock(&self.conn).current {
            Current::Closed(reason) => Some(reason.clone()),
            _ => None,
        }
    }

    fn set_current(&self, conn: &mut Conn, current: Current) {
        let state = current.state();
        // Observers are woken by changes only (attempt 1 is published twice).
        self.state.send_if_modified(|published| {
            let changed = *published != state;
            *published = state;
            changed
        });
        conn.current = current;
    }

    /// Makes `link`, opened by reconnect attempt `attempt` (0 for the first
    /// connection), the current link. Fails when the client was closed or
    /// the link was lost before it could be installed.
    pub(crate) fn install(&self, link: &Arc<Link>, attempt: u32) -> bool {
        let mut conn = lock(&self.conn);
        let ready = matches!(conn.current, Current::Reconnecting(_))
            && !self.closing.load(Ordering::SeqCst)
            && link.lost_reason().is_none();
        if ready {
            conn.installed = (Instant::now(), attempt);
            self.set_current(&mut conn, Current::Connected(Arc::clone(link)));
        }
        ready
    }

    /// Publishes that reconnect attempt `attempt` is under way; `false`
    /// when the client is no longer reconnecting (it was closed).
    pub(crate) fn set_attempt(&self, attempt: u32) -> bool {
        let mut conn = lock(&self.conn);
        if !matches!(conn.current, Current::Reconnecting(_)) || self.closing.load(Ordering::SeqCst)
        {
            return false;
        }
        self.set_current(&mut conn, Current::Reconnecting(attempt));
        true
    }

    /// Declares `link` lost for `reason`. When it is the current link, the
    /// requests in flight on it fail with `reason`, and the client either
    /// starts reconnecting or closes for good. Only the first call counts.
    pub(crate) fn lose(&self, link: &Arc<Link>, reason: CloseReason) {
        let closing = self.closing.load(Ordering::SeqCst);
        let reason = if closing { CloseReason::Local } else { reason };
        let (wakers, closed) = {
            let mut conn = lock(&self.conn);
            link.mark_lost(reason.clone());
            if !conn.current.is(link) {
                drop(conn);
                link.shutdown();
                return;
            }
            let policy = self.config.reconnect.as_ref();
            let reconnect = policy.is_some() && should_reconnect(&reason);
            let next = if let Some(policy) = policy.filter(|_| reconnect) {
                // The count goes on unless the link stayed up long enough.
                let (since, attempt) = conn.installed;
                let healthy = since.elapsed() >= policy.healthy_after;
                let next = if healthy {
                    1
                } else {
                    attempt.saturating_add(1)
                };
                Current::Reconnecting(next)
            } else {
                Current::Closed(reason.clone())
            };
            self.set_current(&mut conn, next);
            (conn.requests.fail_all(&reason), !reconnect)
        };
        tracing::debug!(%reason, in_flight = wakers.len(), "client connection lost");
        wakers.into_iter().for_each(Waker::wake);
        if closed {
            self.pushes.close();
        }
        link.shutdown();
    }

    /// Closes the client for good with `reason`, whatever it was doing:
    /// waiting requests fail, the current link is shut down, subscriptions end.
    pub(crate) fn finish(&self, reason: CloseReason) {
        self.closing.store(true, Ordering::SeqCst);
        let (wakers, link) = {
            let mut conn = lock(&self.conn);
            if matches!(conn.current, Current::Closed(_)) {
                return;
            }
            let link = match &conn.current {
                Current::Connected(link) => Some(Arc::clone(link)),
                _ => None,
            };
            self.set_current(&mut conn, Current::Closed(reason.clone()));
            (conn.requests.fail_all(&reason), link)
        };
        wakers.into_iter().for_each(Waker::wake);
        self.pushes.close();
        if let Some(link) = link {
            link.mark_lost(reason);
            link.shutdown();
        }
    }

    /// Ends reconnecting for good: attempts are exhausted.
    pub(crate) fn give_up(&self, reason: CloseReason) {
        let wakers = {
            let mut conn = lock(&self.conn);
            if !matches!(conn.current, Current::Reconnecting(_)) {
                return;
            }
            self.set_current(&mut conn, Current::Closed(reason.clone()));
            conn.requests.fail_all(&reason)
        };
        tracing::debug!(%reason, "client gave up reconnecting");
        wakers.into_iter().for_each(Waker::wake);
        self.pushes.close();
    }

    /// Whether a frame for `link` goes out sealed, as `seal` asks: always
    /// once the link's session is up (contract section 5.1); never without
    /// one when it must be sealed, which it must once the application asked
    /// for a secure session (no silent downgrade after a failed handshake).
    fn seals(&self, link: &Link, seal: Seal) -> Result<bool, ClientError> {
        // Once up, a link's session stays up: the sealer will be there.
        if link.is_secure() {
            return Ok(true);
        }
        match seal {
            Seal::Auto if !self.secure_wanted.load(Ordering::Acquire) => Ok(false),
            _ => Err(ClientError::NotSecure),
        }
    }

    /// Records that the application wants the secure session `pin` names:
    /// every later connection runs it, and nothing goes out plain.
    fn want_secure(&self, pin: Option<[u8; 32]>) {
        let mut wanted = lock(&self.secure_config);
        if wanted.is_none() {
            *wanted = Some(SecureConfig { pin });
        }
        self.secure_wanted.store(true, Ordering::Release);
    }

    /// Sends a frame that expects no reply on the current link.
    pub(crate) fn send<E: Encode + ?Sized>(
        &self,
        header: Header,
        body: &E,
        seal: Seal,
    ) -> Result<(), ClientError> {
        let link = match &lock(&self.conn).current {
            Current::Connected(link) => Arc::clone(link),
            Current::Reconnecting(attempt) => {
                return Err(ClientError::Reconnecting { attempt: *attempt });
            }
            Current::Closed(reason) => return Err(ClientError::Closed(reason.clone())),
        };
        let sealed = self.seals(&link, seal)?;
        match link.send(header, body, self.config.max_frame_size, sealed) {
            Ok(()) => Ok(()),
            Err(SendError::TooLarge(error)) => Err(ClientError::FrameTooLarge(error)),
            Err(SendError::NotSecure) => Err(ClientError::NotSecure),
            Err(SendError::Handshaking) => Err(ClientError::HandshakeInProgress),
            Err(SendError::Gone) => Err(ClientError::Closed(lost_reason(&link))),
            Err(SendError::Lost(reason)) => {
                self.lose(&link, reason);
                Err(ClientError::Closed(lost_reason(&link)))
            }
        }
    }

    /// Sends the keepalive's `PING` on `link`, sealed once its session is
    /// up. Nobody waits for the `PONG` (its id is one no request uses, so
    /// it is dropped as an answer nobody waits for): any byte received
    /// after it will do.
    pub(crate) fn keepalive_ping(&self, link: &Arc<Link>) -> Result<(), SendError> {
        if link.is_handshaking() {
            return Err(SendError::Handshaking);
        }
        let sealed = self
            .seals(link, Seal::Auto)
            .map_err(|_| SendError::NotSecure)?;
        let id = self.free_id(&lock(&self.conn));
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
        let deadline = deadline_after(timeout);
        let (id, guard) = loop {
            let (link, id, sealed, earlier) = self
                .with_link(deadline, timeout, |conn, link| {
                    if conn.requests.len() >= self.config.max_in_flight {
                        return Err(ClientError::TooManyInFlight(conn.requests.len()));
                    }
                    let sealed = self.seals(link, seal)?;
                    let id = self.free_id(conn);
                    let earlier = conn.requests.insert(id, sealed, deadline);
                    Ok((Arc::clone(link), id, sealed, earlier))
                })
                .await?;
            if earlier {
                self.deadline_moved.notify_one();
            }
            // Frees the slot if this future is dropped or fails before the answer.
            let guard = SlotGuard { shared: self, id };
            match link.send(
                Header::new(opcode, Flags::NONE, id),
                body,
                self.config.max_frame_size,
                sealed,
            ) {
                Ok(()) => {}
                Err(SendError::TooLarge(error)) => return Err(ClientError::FrameTooLarge(error)),
                Err(SendError::NotSecure) => return Err(ClientError::NotSecure),
                // A handshake began since the link was taken: wait for it
                // (in `with_link`) and go again with a new slot.
                Err(SendError::Handshaking) => continue,
                // The link was lost after the request registered: the loss
                // failed its slot with the reason.
                Err(SendError::Gone) => {}
                Err(SendError::Lost(reason)) => self.lose(&link, reason),
            }
            break (id, guard);
        };
        let outcome = std::future::poll_fn(|cx| lock(&self.conn).requests.poll(id, cx)).await;
        // Collecting the outcome freed the slot.
        std::mem::forget(guard);
        outcome.map_err(|failure| match failure {
            Failure::TimedOut => ClientError::Timeout(timeout),
            Failure::Closed(reason) => ClientError::Closed(reason),
        })
    }

    /// Times out the requests whose deadline passed, with one timer for
    /// them all: sleeps until the earliest deadline, or until a request
    /// with an earlier one arrives. Runs for the client's life.
    pub(crate) async fn expire_requests(self: Arc<Self>) {
        loop {
            let (wakers, next) = lock(&self.conn).requests.expire(Instant::now());
            wakers.into_iter().for_each(Waker::wake);
            // A request registered since `expire` stored a permit: no
            // earlier deadline is missed.
            let moved = self.deadline_moved.notified();
            match next {
                Some(next) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(next) => {}
                        () = moved => {}
                    }
                }
                None => moved.await,
            }
        }
    }

    /// An id that no request waiting on the current link uses.
    fn free_id(&self, conn: &Conn) -> u32 {
        loop {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            // 0 means "no reply"; an id still waiting since the last wrap is skipped.
            if id != 0 && !conn.requests.contains(id) {
                return id;
            }
        }
    }

    /// Runs `with` on the current link under the lock of `conn`, waiting
    /// (until `deadline`) for a link while the client reconnects.
    async fn with_link<R>(
        &self,
        deadline: Instant,
        timeout: Duration,
        mut with: impl FnMut(&mut Conn, &Arc<Link>) -> Result<R, ClientError>,
    ) -> Result<R, ClientError> {
        let mut changes: Option<watch::Receiver<ConnectionState>> = None;
        loop {
            let mut handshaking = None;
            {
                let mut conn = lock(&self.conn);
                match &conn.current {
                    // Nothing goes out while a handshake waits for its answer.
                    Current::Connected(link) if link.is_handshaking() => {
                        handshaking = Some(link.handshaking());
                    }
                    Current::Connected(link) => {
                        let link = Arc::clone(link);
                        return with(&mut conn, &link);
                    }
                    Current::Closed(reason) => return Err(ClientError::Closed(reason.clone())),
                    Current::Reconnecting(_) => {}
                }
                // The state only changes with `conn` locked: marking it seen
                // here cannot miss the change that ends this wait.
                match &mut changes {
                    Some(changes) => {
                        changes.borrow_and_update();
                    }
                    None => changes = Some(self.state.subscribe()),
                }
            }
            if let Some(mut handshaking) = handshaking {
                let ended = handshaking.wait_for(|waiting| !*waiting);
                if tokio::time::timeout_at(deadline, ended).await.is_err() {
                    return Err(ClientError::Timeout(timeout));
                }
                continue;
            }
            let Some(changes) = changes.as_mut() else {
                continue;
            };
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Err(_) => return Err(ClientError::Timeout(timeout)),
                // The sender lives as long as `self`.
                Ok(Err(_)) => return Err(ClientError::Closed(CloseReason::Local)),
                Ok(Ok(())) => {}
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
        let deadline = deadline_after(timeout);
        let (link, id) = self
            .with_link(deadline, timeout, |conn, link| {
                Ok((Arc::clone(link), self.free_id(conn)))
            })
            .await?;
        self.run_handshake(&link, id, pin, deadline, timeout).await
    }

    /// Sets up the client's secure session, if it has one, on a link that
    /// is not installed yet (a first connection or a reconnection), within
    /// the connect timeout.
    pub(crate) async fn secure_new_link(&self, link: &Arc<Link>) -> Result<(), ClientError> {
        let Some(secure) = self.secure_config() else {
            return Ok(());
        };
        let timeout = self.config.connect_timeout;
        // Nothing waits on a link that is not installed: any id will do.
        let id = loop {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            if id != 0 {
                break id;
            }
        };
        self.run_handshake(link, id, secure.pin, deadline_after(timeout), timeout)
            .await
    }

    /// Sends `HANDSHAKE` with request id `id` on `link` and waits for the
    /// reader to process the answer.
    async fn run_handshake(
        &self,
        link: &Arc<Link>,
        id: u32,
        pin: Option<[u8; 32]>,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        let noise = |error: ternio_protocol::secure::HandshakeError| {
            ClientError::Handshake(error.to_string())
        };
        let mut initiator = Initiator::new(pin.as_ref()).map_err(noise)?;
        let body = initiator.request_body().map_err(noise)?;
        let outcome = link.begin_handshake(id, initiator, pin)?;
        // Asked for once, a secure session is never given up for plain.
        self.want_secure(pin);
        let header = Header::new(system::HANDSHAKE, Flags::NONE, id);
        match link.send_as(
            Mode::Handshake,
            header,
            &RawBody(&body),
            self.config.max_frame_size,
        ) {
            Ok(()) => {}
            Err(SendError::TooLarge(error)) => {
                link.take_handshake(id);
                link.fail_handshake();
                return Err(ClientError::FrameTooLarge(error));
            }
            // The loss fails the handshake: `outcome` says so.
            Err(SendError::Gone | SendError::NotSecure | SendError::Handshaking) => {}
            Err(SendError::Lost(reason)) => self.lose(link, reason),
        }
        match tokio::time::timeout_at(deadline, outcome).await {
            Err(_) => Err(ClientError::Timeout(timeout)),
            Ok(Err(_)) => Err(ClientError::Closed(lost_reason(link))),
            Ok(Ok(outcome)) => outcome,
        }
    }

    /// Handles the answer to the handshake under way on `link`: puts the
    /// keys in place before the reader takes the next frame (the server
    /// seals every push after this answer), then tells the caller.
    fn answer_handshake(
        &self,
        link: &Arc<Link>,
        pending: PendingHandshake,
        header: Header,
        body: &Bytes,
        sealed: bool,
    ) -> Option<CloseReason> {
        let answer = pending.answer(header, body, sealed);
        match answer.channel {
            Some(channel) => {
                link.complete_handshake(channel, self.config.rekey);
                tracing::debug!(nk = answer.pin.is_some(), "secure session established");
            }
            None => link.fail_handshake(),
        }
        let _ = answer.done.send(answer.outcome);
        answer.close
    }

    /// Handles one frame that arrived whole (a WebSocket message) on
    /// `link`; returns why to stop reading it, if it must. A sealed body is
    /// copied into `open_buf` to be opened in place: the reader keeps that
    /// buffer across messages, so its room is reused once the previous
    /// body is dropped ([`buffers::copy_to_open`]).
    pub(crate) fn on_frame(
        &self,
        link: &Arc<Link>,
        frame: Frame,
        open_buf: &mut BytesMut,
    ) -> Option<CloseReason> {
        if frame.header.flags.is_encrypted() {
            let body = buffers::copy_to_open(open_buf, &frame.body);
            return self.on_frame_mut(link, frame.header, body);
        }
        self.handle(link, frame.header, frame.body, false)
    }

    /// Handles one frame whose body can be opened in place (from the TCP
    /// stream); returns why to stop reading `link`, if it must.
    pub(crate) fn on_frame_mut(
        &self,
        link: &Arc<Link>,
        header: Header,
        mut body: BytesMut,
    ) -> Option<CloseReason> {
        if !header.flags.is_encrypted() {
            return self.handle(link, header, body.freeze(), false);
        }
        if let Err(error) = link.open(&header, &mut body) {
            return Some(self.decrypt_failed(link, error));
        }
        self.handle(link, header, body.freeze(), true)
    }

    /// Tells the server `DECRYPT_FAILED` (in plain) and returns the reason
    /// to close `link` with.
    fn decrypt_failed(&self, link: &Link, message: String) -> CloseReason {
        tracing::warn!(%message, "a frame from the server failed the secure session's checks");
        let disconnect = Disconnect::new(DisconnectReason::DecryptFailed, message.clone());
        let header = Header::new(system::DISCONNECT, Flags::NONE, 0);
        // The one frame a secure session sends plain (contract section 5.1).
        let max = self.config.max_frame_size;
        let _ = link.send_as(Mode::PlainFinal, header, &disconnect, max);
        CloseReason::DecryptFailed(message)
    }

    /// Handles one frame, opened if it was sealed (`sealed`).
    fn handle(
        &self,
        link: &Arc<Link>,
        header: Header,
        body: Bytes,
        sealed: bool,
    ) -> Option<CloseReason> {
        if !sealed && link.is_secure() {
            return Some(self.plain_when_secure(link, header, &body));
        }
        if header.opcode == system::REKEY {
            // A sealed one already moved the opener to the next key.
            let valid = sealed
                && header.request_id == 0
                && body.is_empty()
                && header.flags == Flags::ENCRYPTED;
            return (!valid).then(|| {
                CloseReason::Protocol("a REKEY that is not sealed, empty and without id".into())
            });
        }
        if header.flags.is_response() {
            // Matched by id alone: the contract does not say which opcode
            // an error answer carries.
            if let Some(pending) = link.take_handshake(header.request_id) {
                return self.answer_handshake(link, *pending, header, &body, sealed);
            }
            if header.request_id == 0 {
                // An error about a fire-and-forget send: nobody waits for it.
                tracing::warn!(
                    opcode = header.opcode,
                    "the server reported an error for a send"
                );
                return None;
            }
            let answer = {
                let mut conn = lock(&self.conn);
                // Only the current link answers the waiting requests.
                if !conn.current.is(link) {
                    return None;
                }
                conn.requests
                    .answer(header.request_id, Frame { header, body }, sealed)
            };
            let waker = match answer {
                Answer::Taken(waker) => waker,
                Answer::NotWaiting => None,
                Answer::PlainToSealed => {
                    // Losing the link fails the request with this reason.
                    return Some(self.decrypt_failed(
                        link,
                        format!("a plain answer to sealed request {}", header.request_id),
                    ));
                }
            };
            if let Some(waker) = waker {
                waker.wake();
            }
            return None;
        }
        match header.opcode {
            system::DISCONNECT => {
                let disconnect = Disconnect::decode_lossy(&body);
                Some(CloseReason::Disconnected(disconnect))
            }
            system::PING if header.request_id != 0 => {
                // An unreadable PING gets no answer from the client.
                if let Some(Ok((reply, pong))) = Ping::answer(header, &body)
                    && let Err(SendError::Lost(reason)) =
                        link.send(reply, &pong, self.config.max_frame_size, false)
                {
                    return Some(reason);
                }
                None
            }
            _ if header.is_system() => {
                self.pushes.count_unhandled();
                None
            }
            opcode => {
                self.pushes.deliver(opcode, &body);
                None
            }
        }
    }

    /// A plain frame on a secure session (contract section 5.1): the server
    /// seals everything once the session is up, so someone on the path
    /// wrote it. Even a `DISCONNECT` (a forged `KICKED` would otherwise end
    /// the client for good) only loses the link, and the reconnect policy
    /// applies.
    fn plain_when_secure(&self, link: &Link, header: Header, body: &Bytes) -> CloseReason {
        let message = match header.opcode {
            system::DISCONNECT => match Disconnect::decode_body(body) {
                Ok(disconnect) => format!(
                    "a plain DISCONNECT on a secure session, treated as a lost connection: {}: {}",
                    disconnect.reason, disconnect.message
                ),
                Err(_) => "an unreadable plain DISCONNECT on a secure session".to_owned(),
            },
            opcode => format!("a plain frame (opcode {opcode:#06X}) on a secure session"),
        };
        self.decrypt_failed(link, message)
    }

    /// Sends `DISCONNECT NORMAL` on the current link, lets the transport end
    /// it properly within `linger`, and closes the client for good.
    pub(crate) async fn close(&self, linger: Duration) {
        self.closing.store(true, Ordering::SeqCst);
        let link = match &lock(&self.conn).current {
            Current::Connected(link) => Some(Arc::clone(link)),
            Current::Reconnecting(_) => None,
            Current::Closed(_) => return,
        };
        if let Some(link) = link {
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

/// `timeout` from now; a timeout too long to add counts as about thirty years.
fn deadline_after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(30 * 365 * 86_400))
}

/// Why `link` ended, for a request that saw it go.
fn lost_reason(link: &Link) -> CloseReason {
    link.lost_reason().cloned().unwrap_or(CloseReason::Local)
}

/// Removes a request's slot unless the request completed.
struct SlotGuard<'a> {
    shared: &'a Shared,
    id: u32,
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        lock(&self.shared.conn).requests.remove(self.id);
    }
}
