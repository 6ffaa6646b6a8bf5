//! The link state machine: which link carries requests now (or which
//! reconnect attempt is under way, or why the client closed for good), the
//! requests waiting for an answer on it, and the published
//! [`ConnectionState`].
//!
//! A request registers its id and takes the current link in one step under
//! one lock, so that a connection lost at the same moment either fails it
//! (it was in flight) or was gone before (it waits for the next one). Every
//! change of the current link happens under that lock too, and publishes
//! the new state. Transitions that depend on time take it as an argument.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Waker;
use std::time::Duration;

use ternio_protocol::secure::KEY_LEN;
use tokio::sync::watch;
use tokio::time::Instant;
use zeroize::Zeroizing;

use crate::error::{ClientError, CloseReason};
use crate::link::Link;
use crate::link_streams::Streams;
use crate::reconnect::{ReconnectPolicy, should_reconnect};
use crate::requests::{Answer, Requests};
use crate::resume::Session;
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
    /// A link resuming the session, not installed yet: it takes the
    /// answers and pushes the server replays.
    resuming: Option<Arc<Link>>,
}

impl Conn {
    /// Whether frames from `link` reach the requests and subscriptions.
    fn accepts(&self, link: &Arc<Link>) -> bool {
        self.current.is(link)
            || self
                .resuming
                .as_ref()
                .is_some_and(|resuming| Arc::ptr_eq(resuming, link))
    }

    /// The tag of the link whose frames are taken (0: none).
    fn accepted_tag(&self) -> u64 {
        match (&self.resuming, &self.current) {
            (Some(link), _) | (None, Current::Connected(link)) => link.tag(),
            _ => 0,
        }
    }
}

/// The client's links over time, and the requests on the current one.
pub(crate) struct Links {
    conn: Mutex<Conn>,
    /// The published state; changed only with `conn` locked.
    state: watch::Sender<ConnectionState>,
    /// Set when the client closes: nothing is installed or reconnects after it.
    closing: AtomicBool,
    /// The session secret of the last link lost: a resumption is keyed by it.
    last_secret: Mutex<Option<Zeroizing<[u8; KEY_LEN]>>>,
    /// The session, told which link's frames to take as that changes
    /// (under `conn`'s lock).
    session: Arc<Session>,
    /// The session's open streams: they go on across a resumption, as the
    /// requests do.
    streams: Streams,
}

impl Links {
    /// No link yet: the first connection is under way (since `now`).
    pub(crate) fn new(now: Instant, session: Arc<Session>) -> Self {
        let current = Current::Reconnecting(0);
        Self {
            state: watch::Sender::new(current.state()),
            conn: Mutex::new(Conn {
                current,
                requests: Requests::default(),
                installed: (now, 0),
                resuming: None,
            }),
            closing: AtomicBool::new(false),
            last_secret: Mutex::new(None),
            session,
            streams: Streams::default(),
        }
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

    /// Whether the current link's secure channel is up.
    pub(crate) fn is_secure(&self) -> bool {
        matches!(&lock(&self.conn).current, Current::Connected(link) if link.is_secure())
    }

    /// Marks the client closing: from now on no link is installed, no
    /// attempt starts, and a lost link is lost as [`CloseReason::Local`].
    pub(crate) fn set_closing(&self) {
        self.closing.store(true, Ordering::SeqCst);
    }

    fn is_closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }

    /// Runs `with` on the requests, under the lock.
    pub(crate) fn with_requests<R>(&self, with: impl FnOnce(&mut Requests) -> R) -> R {
        with(&mut lock(&self.conn).requests)
    }

    /// The current link, for a frame that expects no answer: an error while
    /// the client reconnects or once it is closed.
    pub(crate) fn current(&self) -> Result<Arc<Link>, ClientError> {
        match &lock(&self.conn).current {
            Current::Connected(link) => Ok(Arc::clone(link)),
            Current::Reconnecting(attempt) => Err(ClientError::Reconnecting { attempt: *attempt }),
            Current::Closed(reason) => Err(ClientError::Closed(reason.clone())),
        }
    }

    /// Hands the answer `frame` (which came `sealed` or not) to the
    /// request that waits for it, if `link` is still the current link.
    /// `count` runs first, under the same lock (a resumable session counts
    /// the frames it takes); its result comes back with the answer.
    pub(crate) fn answer(
        &self,
        link: &Arc<Link>,
        frame: ternio_protocol::Frame,
        sealed: bool,
        count: impl FnOnce() -> bool,
    ) -> (Answer, bool) {
        let mut conn = lock(&self.conn);
        // Only the current link (or the one resuming the session) answers
        // the waiting requests.
        if !conn.accepts(link) {
            return (Answer::NotWaiting, false);
        }
        let due = count();
        let id = frame.header.request_id;
        (conn.requests.answer(id, frame, sealed), due)
    }

    /// The session's open streams.
    pub(crate) fn streams(&self) -> &Streams {
        &self.streams
    }

    /// Whether frames from `link` reach the requests, streams and
    /// subscriptions: it is the current link, or the one resuming the
    /// session.
    pub(crate) fn accepts(&self, link: &Arc<Link>) -> bool {
        lock(&self.conn).accepts(link)
    }

    /// Lets `link`, not installed yet, take the frames a resumption replays
    /// (`None`: no link is resuming any more).
    pub(crate) fn set_resuming(&self, link: Option<&Arc<Link>>) {
        let mut conn = lock(&self.conn);
        conn.resuming = link.map(Arc::clone);
        self.session.accept(conn.accepted_tag());
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
        self.session.accept(conn.accepted_tag());
    }

    /// Makes `link`, opened by reconnect attempt `attempt` (0 for the first
    /// connection), the current link at `now`. Fails when the client was
    /// closed or the link was lost before it could be installed.
    pub(crate) fn install(&self, link: &Arc<Link>, attempt: u32, now: Instant) -> bool {
        let mut conn = lock(&self.conn);
        let ready = matches!(conn.current, Current::Reconnecting(_))
            && !self.is_closing()
            && link.lost_reason().is_none();
        conn.resuming = None;
        if ready {
            conn.installed = (now, attempt);
            self.set_current(&mut conn, Current::Connected(Arc::clone(link)));
        } else {
            self.session.accept(conn.accepted_tag());
        }
        drop(conn);
        if ready {
            // What a stream could not send without a link (a download's
            // credit) goes now.
            self.streams.wake_all();
        }
        ready
    }

    /// Publishes that reconnect attempt `attempt` is under way; `false`
    /// when the client is no longer reconnecting (it was closed).
    pub(crate) fn set_attempt(&self, attempt: u32) -> bool {
        let mut conn = lock(&self.conn);
        if !matches!(conn.current, Current::Reconnecting(_)) || self.is_closing() {
            return false;
        }
        self.set_current(&mut conn, Current::Reconnecting(attempt));
        true
    }

    /// Declares `link` lost for `reason` at `now`. When it is the current
    /// link, the requests in flight on it fail with `reason`, and the client
    /// either starts reconnecting (under `policy`, when it allows) or closes
    /// for good: then this returns `true`. Only the first call counts. The
    /// caller shuts the link down.
    pub(crate) fn lose(
        &self,
        link: &Arc<Link>,
        reason: CloseReason,
        policy: Option<&ReconnectPolicy>,
        keep_requests: bool,
        now: Instant,
    ) -> bool {
        let reason = if self.is_closing() {
            CloseReason::Local
        } else {
            reason
        };
        let (wakers, closed) = {
            let mut conn = lock(&self.conn);
            link.mark_lost(reason.clone());
            if !conn.current.is(link) {
                return false;
            }
            let reconnect = policy.is_some() && should_reconnect(&reason);
            let next = match policy.filter(|_| reconnect) {
                Some(policy) => {
                    let (since, attempt) = conn.installed;
                    Current::Reconnecting(next_attempt(since, attempt, policy.healthy_after, now))
                }
                None => Current::Closed(reason.clone()),
            };
            let requests_stay = keep_requests && reconnect;
            if reconnect {
                *lock(&self.last_secret) = link.session_secret();
            }
            self.set_current(&mut conn, next);
            let wakers = if requests_stay {
                // A resumed session answers them on the next link.
                Vec::new()
            } else {
                conn.requests.fail_all(&reason)
            };
            (wakers, !reconnect)
        };
        tracing::debug!(%reason, in_flight = wakers.len(), "client connection lost");
        wakers.into_iter().for_each(Waker::wake);
        closed
    }

    /// Fails the requests waiting for an answer with `reason` (a session
    /// that could not be resumed).
    pub(crate) fn fail_requests(&self, reason: &CloseReason) {
        let wakers = lock(&self.conn).requests.fail_all(reason);
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Records `secret` as the one the next resumption is keyed by: a
    /// resumption's, once the server answered it.
    pub(crate) fn set_last_session_secret(&self, secret: Zeroizing<[u8; KEY_LEN]>) {
        *lock(&self.last_secret) = Some(secret);
    }

    /// The session secret of the last link lost, for a resumption.
    pub(crate) fn last_session_secret(&self) -> Option<Zeroizing<[u8; KEY_LEN]>> {
        lock(&self.last_secret).clone()
    }

    /// Closes for good with `reason`, whatever the client was doing:
    /// waiting requests fail, the current link is shut down. `false` when
    /// it was closed already.
    pub(crate) fn finish(&self, reason: CloseReason) -> bool {
        self.set_closing();
        let (wakers, link) = {
            let mut conn = lock(&self.conn);
            if matches!(conn.current, Current::Closed(_)) {
                return false;
            }
            let link = match &conn.current {
                Current::Connected(link) => Some(Arc::clone(link)),
                _ => None,
            };
            self.set_current(&mut conn, Current::Closed(reason.clone()));
            (conn.requests.fail_all(&reason), link)
        };
        wakers.into_iter().for_each(Waker::wake);
        if let Some(link) = link {
            link.mark_lost(reason);
            link.shutdown();
        }
        true
    }

    /// Ends reconnecting for good: attempts are exhausted. `false` when the
    /// client was not reconnecting (it was closed).
    pub(crate) fn give_up(&self, reason: CloseReason) -> bool {
        let wakers = {
            let mut conn = lock(&self.conn);
            if !matches!(conn.current, Current::Reconnecting(_)) {
                return false;
            }
            self.set_current(&mut conn, Current::Closed(reason.clone()));
            conn.requests.fail_all(&reason)
        };
        tracing::debug!(%reason, "client gave up reconnecting");
        wakers.into_iter().for_each(Waker::wake);
        true
    }

    /// The current link, if the client has one now.
    pub(crate) fn connected(&self) -> Option<Arc<Link>> {
        match &lock(&self.conn).current {
            Current::Connected(link) => Some(Arc::clone(link)),
            _ => None,
        }
    }

    /// Runs `with` on the current link and the requests under the lock if
    /// there is a link to use now; `None` when [`with_link`](Self::with_link)
    /// must wait for one (or say why there is none).
    pub(crate) fn try_with_link<R>(
        &self,
        with: impl FnOnce(&mut Requests, &Arc<Link>) -> Result<R, ClientError>,
    ) -> Option<Result<R, ClientError>> {
        let mut conn = lock(&self.conn);
        let conn = &mut *conn;
        match &conn.current {
            Current::Connected(link) if !link.is_handshaking() => {
                Some(with(&mut conn.requests, link))
            }
            _ => None,
        }
    }

    /// Runs `with` on the current link and the requests under the lock,
    /// waiting (until `deadline`) for a link while the client reconnects or
    /// a handshake waits for its answer. `timeout` is what the caller was
    /// given, for the error.
    pub(crate) async fn with_link<R>(
        &self,
        deadline: Instant,
        timeout: Duration,
        mut with: impl FnMut(&mut Requests, &Arc<Link>) -> Result<R, ClientError>,
    ) -> Result<R, ClientError> {
        let mut changes: Option<watch::Receiver<ConnectionState>> = None;
        loop {
            let mut handshaking = None;
            {
                let mut conn = lock(&self.conn);
                let conn = &mut *conn;
                match &conn.current {
                    // Nothing goes out while a handshake waits for its answer.
                    Current::Connected(link) if link.is_handshaking() => {
                        handshaking = Some(link.handshaking());
                    }
                    Current::Connected(link) => return with(&mut conn.requests, link),
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
}

/// The reconnect attempt that follows the loss at `now` of a link installed
/// at `since` by attempt `attempt`: the count goes on unless the link
/// stayed up for `healthy_after`.
fn next_attempt(since: Instant, attempt: u32, healthy_after: Duration, now: Instant) -> u32 {
    if now.saturating_duration_since(since) >= healthy_after {
        1
    } else {
        attempt.saturating_add(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_of_attempts_starts_again_only_after_a_healthy_link() {
        let since = Instant::now();
        let healthy = Duration::from_secs(10);
        let at = |secs| since + Duration::from_secs(secs);
        assert_eq!(next_attempt(since, 0, healthy, at(1)), 1);
        assert_eq!(next_attempt(since, 3, healthy, at(9)), 4);
        assert_eq!(next_attempt(since, 3, healthy, at(10)), 1);
        assert_eq!(next_attempt(since, u32::MAX, healthy, at(0)), u32::MAX);
    }
}
