//! One connection to the server, whatever its transport: how frames go out
//! on it, how it is shut, and why it ended.
//!
//! A [`Link`] knows nothing of requests: the transport-independent side
//! registers them, and each transport's reader task hands it the frames
//! that arrive (through the `LinkEvents` of the `events` module).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::BytesMut;
use ternio_protocol::Encode;
use ternio_protocol::frame::Header;
use ternio_protocol::secure::{Initiator, KEY_LEN, RekeyPolicy, Sealer, SecureChannel};
use tokio::sync::{oneshot, watch};
use zeroize::Zeroizing;

use crate::error::{ClientError, CloseReason};
use crate::resume::{PendingResume, Session};
use crate::secure::{self, LinkSecurity, PendingHandshake, RawBody};
use crate::send::{Mode, SendError, TakeAck};
use crate::socket::{OutboundWriter, SocketOut};
use crate::stream::StreamOut;
use crate::sync::lock;
use crate::ws::{WsOut, WsSender};

/// The sending half of a link, per transport.
pub(crate) enum Out {
    /// Length-prefixed frames on a TCP stream.
    Tcp(Arc<SocketOut>),
    /// One binary WebSocket message per frame (`ws://` or `wss://`).
    Ws(WsOut),
    /// Length-prefixed frames on any other stream.
    Stream(Arc<StreamOut>),
}

/// Where a link's frames are encoded and written.
enum Sender<'a> {
    Socket(&'a SocketOut),
    Stream(&'a StreamOut),
}

/// One connection.
pub(crate) struct Link {
    out: Out,
    /// What the session knows this link by when it takes its frames.
    tag: u64,
    /// Set once, when the link is declared lost (or closed on purpose).
    lost: OnceLock<CloseReason>,
    /// Becomes `true` when the reader task has finished (for a WebSocket,
    /// after the close handshake or its time limit).
    reader_done: watch::Sender<bool>,
    /// The secure session's state, and its opener once it is up.
    security: Mutex<LinkSecurity>,
    /// Set once the session is up (the sealer is in place): never unset.
    secure: AtomicBool,
    /// The request id of the handshake under way, 0 when none: lets the
    /// reader pass other answers by without taking the `security` lock.
    handshake_id: AtomicU32,
    /// `true` while a handshake waits for its answer: requests wait for
    /// it to end before they go out.
    handshaking: watch::Sender<bool>,
    /// The session's resumption state, which records what goes out.
    session: Option<Arc<Session>>,
    /// The `RESUME` under way on this link, if any.
    resume: Mutex<Option<PendingResume>>,
    /// The session secret of this link's secure session, once it is up:
    /// what a resumption on a later link is keyed by.
    session_secret: Mutex<Option<Zeroizing<[u8; KEY_LEN]>>>,
}

impl Link {
    pub(crate) fn new(out: Out) -> Self {
        Self {
            out,
            tag: crate::received::next_tag(),
            lost: OnceLock::new(),
            reader_done: watch::Sender::new(false),
            security: Mutex::new(LinkSecurity::Plain),
            secure: AtomicBool::new(false),
            handshake_id: AtomicU32::new(0),
            handshaking: watch::Sender::new(false),
            session: None,
            resume: Mutex::new(None),
            session_secret: Mutex::new(None),
        }
    }

    /// What the session knows this link by: it takes the frames of one
    /// link at a time.
    pub(crate) fn tag(&self) -> u64 {
        self.tag
    }

    /// The link of `session`: what it sends is recorded for resumption.
    pub(crate) fn with_session(mut self, session: Arc<Session>) -> Self {
        self.session = Some(session);
        self
    }

    /// Encodes one frame, sealed once the secure session is up (refused
    /// before it with `require_seal`), and sends it or queues it behind
    /// those already waiting. Sealing happens under the same lock as
    /// queuing, so that counters go out in order.
    pub(crate) fn send<E: Encode + ?Sized>(
        &self,
        header: Header,
        body: &E,
        max_frame_size: usize,
        require_seal: bool,
    ) -> Result<(), SendError> {
        self.send_compressing(header, body, max_frame_size, require_seal, None)
    }

    /// [`send`](Self::send), the body compressed (before sealing) when
    /// `compress` gives a threshold it reaches and it shrinks (contract
    /// section 6). What resumption records is the uncompressed body.
    pub(crate) fn send_compressing<E: Encode + ?Sized>(
        &self,
        header: Header,
        body: &E,
        max_frame_size: usize,
        require_seal: bool,
        compress: Option<usize>,
    ) -> Result<(), SendError> {
        let mode = Mode::Sealable {
            required: require_seal,
            compress,
        };
        self.send_as(mode, header, body, max_frame_size)
    }

    /// Sends one frame as `mode` says: the `HANDSHAKE` request recorded by
    /// [`begin_handshake`](Self::begin_handshake) (nothing else goes out
    /// until its answer is read), or `DISCONNECT DECRYPT_FAILED`, plain
    /// whatever the session.
    pub(crate) fn send_as<E: Encode + ?Sized>(
        &self,
        mode: Mode,
        header: Header,
        body: &E,
        max_frame_size: usize,
    ) -> Result<(), SendError> {
        match &self.session {
            Some(session) => session.send(header, body, self.tag, |ack, encoded| match encoded {
                Some(encoded) => {
                    self.send_now(ack, mode, header, &RawBody(encoded), max_frame_size)
                }
                None => self.send_now(ack, mode, header, body, max_frame_size),
            }),
            None => self.send_unrecorded(mode, header, body, max_frame_size),
        }
    }

    /// [`send_as`](Self::send_as) without recording the frame for
    /// resumption: a `RESUME`, and the frames it replays.
    pub(crate) fn send_unrecorded<E: Encode + ?Sized>(
        &self,
        mode: Mode,
        header: Header,
        body: &E,
        max_frame_size: usize,
    ) -> Result<(), SendError> {
        self.send_now(None, mode, header, body, max_frame_size)
    }

    /// Queues the frame, after the session's `ACK` if one rides along,
    /// and writes what it can.
    fn send_now<E: Encode + ?Sized>(
        &self,
        take_ack: Option<TakeAck<'_>>,
        mode: Mode,
        header: Header,
        body: &E,
        max_frame_size: usize,
    ) -> Result<(), SendError> {
        if self.lost.get().is_some() {
            return Err(SendError::Gone);
        }
        match self.sender() {
            Sender::Socket(out) => out.send_as(take_ack, mode, header, body, max_frame_size),
            Sender::Stream(out) => out.send_as(take_ack, mode, header, body, max_frame_size),
        }
    }

    /// Sends the session's `ACK` alone (one-way, id 0; sealed once the link
    /// is secure), its count taken by `take_ack` only when the `ACK` can go
    /// now: not as the link's first frame (nothing is
    /// sent, nothing taken: `Ok`), nor while a handshake (or `RESUME`)
    /// waits for its answer (`Handshaking`).
    pub(crate) fn send_ack(
        &self,
        take_ack: TakeAck<'_>,
        max_frame_size: usize,
    ) -> Result<(), SendError> {
        if self.lost.get().is_some() {
            return Err(SendError::Gone);
        }
        match self.sender() {
            Sender::Socket(out) => out.send_ack(take_ack, max_frame_size),
            Sender::Stream(out) => out.send_ack(take_ack, max_frame_size),
        }
    }

    /// How many reads brought bytes from the server on this link: when it
    /// changes, the server sent something.
    pub(crate) fn reads(&self) -> u64 {
        match self.sender() {
            Sender::Socket(out) => out.reads(),
            Sender::Stream(out) => out.reads(),
        }
    }

    /// Whether a handshake waits for its answer on this link.
    pub(crate) fn is_handshaking(&self) -> bool {
        *self.handshaking.borrow()
    }

    /// Watches whether a handshake waits for its answer.
    pub(crate) fn handshaking(&self) -> watch::Receiver<bool> {
        self.handshaking.subscribe()
    }

    /// Whether the link's secure session is up: frames can be sealed.
    pub(crate) fn is_secure(&self) -> bool {
        self.secure.load(Ordering::Acquire)
    }

    /// Records a handshake about to be sent with request id `id`, and
    /// returns where its outcome will come. Fails when this link had a
    /// handshake already, or is lost.
    pub(crate) fn begin_handshake(
        &self,
        id: u32,
        initiator: Initiator,
        pin: Option<[u8; 32]>,
    ) -> Result<oneshot::Receiver<Result<(), ClientError>>, ClientError> {
        let mut security = lock(&self.security);
        if !matches!(*security, LinkSecurity::Plain) {
            return Err(ClientError::HandshakeAlreadyRan(
                "this connection had a handshake already (a connection allows one)",
            ));
        }
        if let Some(reason) = self.lost.get() {
            return Err(ClientError::Closed(reason.clone()));
        }
        let (done, outcome) = oneshot::channel();
        self.handshake_id.store(id, Ordering::Release);
        self.handshaking.send_replace(true);
        *security = LinkSecurity::Pending(Box::new(PendingHandshake {
            id,
            initiator,
            pin,
            done,
        }));
        Ok(outcome)
    }

    /// The handshake waiting for the answer with request id `id`, if any:
    /// taken, to be answered.
    pub(crate) fn take_handshake(&self, id: u32) -> Option<Box<PendingHandshake>> {
        if id == 0 || self.handshake_id.load(Ordering::Acquire) != id {
            return None;
        }
        let mut security = lock(&self.security);
        match &*security {
            LinkSecurity::Pending(pending) if pending.id == id => {
                self.handshake_id.store(0, Ordering::Release);
                match std::mem::replace(&mut *security, LinkSecurity::Failed) {
                    LinkSecurity::Pending(pending) => Some(pending),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Puts a completed session's keys in place: from now on every frame
    /// is sealed, and sealed frames open.
    pub(crate) fn complete_handshake(&self, channel: SecureChannel, rekey: RekeyPolicy) {
        let SecureChannel {
            mut sealer,
            opener,
            session_secret,
            ..
        } = channel;
        *lock(&self.session_secret) = Some(session_secret);
        sealer.set_rekey_policy(rekey);
        *lock(&self.security) = LinkSecurity::Secure(Box::new(opener));
        self.secure.store(true, Ordering::Release);
        self.end_handshake(Some(sealer));
        self.handshaking.send_replace(false);
    }

    /// The session secret of this link's secure session, once it is up.
    pub(crate) fn session_secret(&self) -> Option<Zeroizing<[u8; KEY_LEN]>> {
        lock(&self.session_secret).clone()
    }

    /// Records the `RESUME` about to be sent: the reader gives it the answer.
    pub(crate) fn begin_resume(&self, pending: PendingResume) {
        *lock(&self.resume) = Some(pending);
    }

    /// The `RESUME` waiting for the answer with request id `id`, if any.
    pub(crate) fn take_resume(&self, id: u32) -> Option<PendingResume> {
        let mut resume = lock(&self.resume);
        if resume.as_ref().is_some_and(|pending| pending.id == id) {
            resume.take()
        } else {
            None
        }
    }

    /// Ends the wait for a handshake that failed: frames go out plain again
    /// (requests that need a session fail with `NotSecure`).
    pub(crate) fn fail_handshake(&self) {
        self.end_handshake(None);
        self.handshaking.send_replace(false);
    }

    /// Opens a sealed body in place; the error says why it did not.
    pub(crate) fn open(&self, header: &Header, body: &mut BytesMut) -> Result<(), String> {
        secure::open(&mut lock(&self.security), header, body)
    }

    /// Records why the link ended; only the first reason counts. A
    /// handshake under way on it fails (its caller sees the link closed).
    pub(crate) fn mark_lost(&self, reason: CloseReason) {
        let _ = self.lost.set(reason);
        let mut security = lock(&self.security);
        if matches!(*security, LinkSecurity::Pending(_)) {
            self.handshake_id.store(0, Ordering::Release);
            *security = LinkSecurity::Failed;
        }
        drop(security);
        // Whoever waited for the handshake now finds the link lost.
        self.handshaking.send_replace(false);
    }

    /// Why the link ended, once it has.
    pub(crate) fn lost_reason(&self) -> Option<&CloseReason> {
        self.lost.get()
    }

    /// Why the link ended, for a caller that saw it go: [`CloseReason::Local`]
    /// when no reason was recorded.
    pub(crate) fn end_reason(&self) -> CloseReason {
        self.lost.get().cloned().unwrap_or(CloseReason::Local)
    }

    /// Stops the link's traffic: a TCP socket is shut down at once; a
    /// WebSocket takes no more frames, and its reader closes the socket once
    /// the close handshake is over (or its time is up).
    pub(crate) fn shutdown(&self) {
        match &self.out {
            Out::Tcp(out) => out.shutdown(),
            Out::Ws(out) => out.stop(),
            Out::Stream(out) => out.shutdown(),
        }
    }

    fn sender(&self) -> Sender<'_> {
        match &self.out {
            Out::Tcp(out) => Sender::Socket(out),
            Out::Ws(out) => match out.sender() {
                WsSender::Socket(socket) => Sender::Socket(socket),
                WsSender::Stream(stream) => Sender::Stream(stream),
            },
            Out::Stream(out) => Sender::Stream(out),
        }
    }

    fn end_handshake(&self, sealer: Option<Sealer>) {
        match self.sender() {
            Sender::Socket(out) => out.end_handshake(sealer),
            Sender::Stream(out) => out.end_handshake(sealer),
        }
    }

    /// The transport's part of an intentional close, after `DISCONNECT` was
    /// queued: TCP writes what is queued; another stream also shuts its
    /// writing down; WebSocket sends its Close frame and waits for the
    /// server's. The caller bounds the wait.
    pub(crate) async fn close_gracefully(&self) {
        match &self.out {
            Out::Tcp(out) => {
                let _ = out.flush().await;
            }
            Out::Stream(out) => out.close_gracefully().await,
            Out::Ws(out) => {
                if out.send_close_normal() {
                    self.wait_reader_done().await;
                }
            }
        }
    }

    /// Called by the reader task as it ends.
    pub(crate) fn set_reader_done(&self) {
        self.reader_done.send_replace(true);
    }

    async fn wait_reader_done(&self) {
        let mut done = self.reader_done.subscribe();
        let _ = done.wait_for(|done| *done).await;
    }
}

/// How long a lost link's tasks may take to finish on their own (a
/// WebSocket close handshake) before they are aborted.
pub(crate) const RETIRE_GRACE: Duration = Duration::from_secs(2);
