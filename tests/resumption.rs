//! Resumption on the server (docs/PROTOCOL.md section 4.2), over real TCP,
//! with a client written here from the document: it asks for a ticket,
//! counts the frames it receives, and after its link is cut presents the
//! ticket on a new connection. The session keeps its id, store and groups;
//! what was sent while the link was down, and what the client never read,
//! arrives once and in order; a stolen ticket, an expired one, a used one
//! and one whose replay buffer overflowed are refused.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bytes::BytesMut;
use futures_util::{SinkExt, StreamExt};
use ternio::protocol::frame::{self, Flags, Frame, Framing, Header};
use ternio::protocol::resume::ResumeInitiator;
use ternio::protocol::secure::Initiator;
use ternio::protocol::system::{
    self, Ack, Disconnect, ErrorBody, Resume, ResumeTicket, Resumed, Ticket, is_counted,
};
use ternio::protocol::{Bytes, Decode, DisconnectReason, Encode, ErrorCode, Packet};
use ternio::{CloseCause, ServerBuilder, ServerHandle, Transport};
use ternio_tests::*;
use tokio_tungstenite::tungstenite::Message;

/// A client of the resumption protocol, from the document alone: its link
/// (which it dereferences to), and what it counted.
struct Session {
    link: SealedConnection,
    /// Counted frames received (application opcodes).
    received: u64,
    ticket: Option<Ticket>,
}

impl std::ops::Deref for Session {
    type Target = SealedConnection;

    fn deref(&self) -> &SealedConnection {
        &self.link
    }
}

impl std::ops::DerefMut for Session {
    fn deref_mut(&mut self) -> &mut SealedConnection {
        &mut self.link
    }
}

impl Session {
    fn new(link: SealedConnection) -> Self {
        Self {
            link,
            received: 0,
            ticket: None,
        }
    }

    async fn plain(address: SocketAddr) -> Self {
        Self::new(SealedConnection::plain(address).await)
    }

    /// A plain session on a link from the local address `source`.
    async fn plain_from(source: [u8; 4], address: SocketAddr) -> Self {
        Self::new(SealedConnection {
            raw: RawConnection::over(connect_from(source, address).await),
            channel: None,
        })
    }

    /// A session after an NN handshake.
    async fn secure(address: SocketAddr) -> Self {
        Self::new(SealedConnection::secure(address).await)
    }

    /// Cuts the link: the socket is closed, the session's state kept (its
    /// link is replaced by one to a listener of the test's own, which never
    /// answers).
    async fn cut(&mut self) {
        let nowhere = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let dead = RawConnection::connect(nowhere.local_addr().unwrap()).await;
        drop(std::mem::replace(&mut self.link.raw, dead));
    }

    /// Sends `body` under `header`, sealed on a secure session.
    async fn send_frame(&mut self, header: Header, body: &[u8]) {
        self.link.send_frame(header, body).await;
    }

    /// Sends `ACK` of `received` frames, under `request_id` (0 for a
    /// well-formed one).
    async fn send_ack(&mut self, received: u64, request_id: u32) {
        let mut body = BytesMut::new();
        Ack { received }.encode(&mut body);
        self.send_frame(Header::new(system::ACK, Flags::NONE, request_id), &body)
            .await;
    }

    async fn request<P: Packet>(&mut self, packet: &P, request_id: u32) {
        let mut body = BytesMut::new();
        packet.encode(&mut body);
        self.send_frame(Header::new(P::OPCODE, Flags::NONE, request_id), &body)
            .await;
    }

    /// The next frame, opened, counted when its opcode is counted; `None`
    /// at the end of the stream.
    async fn recv(&mut self) -> Option<Frame> {
        let frame = self.link.recv().await?;
        if is_counted(frame.header.opcode) {
            self.received += 1;
        }
        Some(frame)
    }

    /// The next frame that is not an `ACK` from the server.
    async fn recv_app(&mut self) -> Frame {
        loop {
            let frame = self.recv().await.expect("a frame");
            if frame.header.opcode != system::ACK {
                return frame;
            }
        }
    }

    /// Asks for a ticket; counting starts after its answer.
    async fn ask_ticket(&mut self) -> ResumeTicket {
        self.send_frame(Header::new(system::RESUME_TICKET, Flags::NONE, 900), &[])
            .await;
        let answer = self.recv_app().await;
        assert_eq!(answer.header.opcode, system::RESUME_TICKET);
        assert!(
            !answer.header.flags.is_error(),
            "{:?}",
            ErrorBody::parse(&answer.body)
        );
        let ticket = ResumeTicket::decode_body(&answer.body).unwrap();
        self.ticket = Some(ticket.ticket.clone());
        ticket
    }

    /// Resumes on a new connection to `address`: the answer, or the error.
    async fn resume(self, address: SocketAddr) -> Result<(Self, Resumed), ErrorBody> {
        let ticket = self.ticket.clone().expect("a ticket");
        let secret = self
            .channel
            .as_ref()
            .map(|channel| channel.session_secret.to_vec());
        resume_with(address, ticket, self.received, secret.as_deref()).await
    }
}

/// Presents `ticket` on a new connection, claiming `received` frames, bound
/// to `secret` (a secure session's latest session secret) if given.
async fn resume_with(
    address: SocketAddr,
    ticket: Ticket,
    received: u64,
    secret: Option<&[u8]>,
) -> Result<(Session, Resumed), ErrorBody> {
    resume_changed(address, ticket, received, secret, |_| {}).await
}

/// As [`resume_with`], with the `RESUME` request made for `received` then
/// changed by `change` on its way to the server (an attacker on the path).
async fn resume_changed(
    address: SocketAddr,
    ticket: Ticket,
    received: u64,
    secret: Option<&[u8]>,
    change: impl FnOnce(&mut Resume),
) -> Result<(Session, Resumed), ErrorBody> {
    let raw = RawConnection::connect(address).await;
    resume_on(raw, ticket, received, secret, change).await
}

/// As [`resume_changed`], on the link `raw`.
async fn resume_on(
    mut raw: RawConnection,
    ticket: Ticket,
    received: u64,
    secret: Option<&[u8]>,
    change: impl FnOnce(&mut Resume),
) -> Result<(Session, Resumed), ErrorBody> {
    let mut initiator =
        secret.map(|secret| ResumeInitiator::new(None, secret, &ticket, received).unwrap());
    let (pattern, message) = match &mut initiator {
        Some(initiator) => (initiator.pattern().to_u8(), initiator.message().unwrap()),
        None => (0, Vec::new()),
    };
    let mut request = Resume {
        ticket,
        received,
        pattern,
        message: Bytes::from(message),
    };
    change(&mut request);
    raw.send(Header::new(system::RESUME, Flags::NONE, 901), &request)
        .await;
    let answer = raw.recv().await.expect("an answer to RESUME");
    assert_eq!(answer.header.opcode, system::RESUME);
    assert_eq!(answer.header.request_id, 901);
    assert!(!answer.header.flags.is_encrypted(), "the answer is plain");
    if answer.header.flags.is_error() {
        return Err(ErrorBody::parse(&answer.body).unwrap());
    }
    let resumed = Resumed::decode_body(&answer.body).unwrap();
    let channel = initiator.map(|initiator| initiator.finish(&resumed).unwrap());
    let session = Session {
        link: SealedConnection { raw, channel },
        received,
        ticket: Some(resumed.ticket.clone()),
    };
    Ok((session, resumed))
}

/// A TCP connection to `address` from the local address `source`.
async fn connect_from(source: [u8; 4], address: SocketAddr) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind((std::net::Ipv4Addr::from(source), 0).into())
        .unwrap();
    let stream = socket.connect(address).await.expect("connects");
    stream.set_nodelay(true).unwrap();
    stream
}

/// What the hooks saw.
#[derive(Default)]
struct Seen {
    suspended: AtomicU32,
    resumed: AtomicU32,
    /// The address and transport each resumed session had in its hook.
    resumed_on: std::sync::Mutex<Vec<(SocketAddr, Transport)>>,
    disconnects: std::sync::Mutex<Vec<CloseCause>>,
}

fn start(ttl: Duration, replay_bytes: usize) -> (SocketAddr, ServerHandle, Arc<Seen>) {
    start_with(ttl, replay_bytes, |builder| builder)
}

fn start_with(
    ttl: Duration,
    replay_bytes: usize,
    configure: impl FnOnce(ServerBuilder) -> ServerBuilder,
) -> (SocketAddr, ServerHandle, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let hooks = Arc::clone(&seen);
    let (address, server) = start_server(move |builder| {
        configure(with_hooks(builder.resumable(ttl, replay_bytes), &hooks))
    });
    (address, server, seen)
}

/// `builder` with hooks that tell `seen`.
fn with_hooks(builder: ServerBuilder, seen: &Arc<Seen>) -> ServerBuilder {
    let (on_suspend, on_resume, on_disconnect) =
        (Arc::clone(seen), Arc::clone(seen), Arc::clone(seen));
    builder
        .on_suspend(move |_| {
            on_suspend.suspended.fetch_add(1, Ordering::SeqCst);
        })
        .on_resume(move |connection| {
            on_resume
                .resumed_on
                .lock()
                .unwrap()
                .push((connection.peer_addr(), connection.transport()));
            on_resume.resumed.fetch_add(1, Ordering::SeqCst);
        })
        .on_disconnect(move |_, cause| {
            on_disconnect
                .disconnects
                .lock()
                .unwrap()
                .push(cause.clone());
        })
}

async fn suspended(seen: &Seen, count: u32) {
    eventually("the session is suspended", || {
        seen.suspended.load(Ordering::SeqCst) >= count
    })
    .await;
}

fn who(frame: &Frame) -> YouAre {
    assert_eq!(frame.header.opcode, YouAre::OPCODE, "{frame:?}");
    YouAre::decode_body(&frame.body).unwrap()
}

#[tokio::test]
async fn a_plain_session_resumes_with_its_id_and_misses_nothing() {
    let (address, server, seen) = start(Duration::from_secs(10), 64 * 1024);
    let mut session = Session::plain(address).await;
    let ticket = session.ask_ticket().await;
    assert_eq!(ticket.ttl_ms, 10_000);
    session.request(&WhoAmI, 1).await;
    let id = who(&session.recv_app().await).connection_id;
    // A request still running when the link breaks.
    session.request(&Sleep { ms: 300, tag: 7 }, 2).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let before = session.received;
    session.cut().await;
    suspended(&seen, 1).await;
    // Pushed while the client is away.
    let handle = server
        .hub()
        .connection(ternio::ConnectionId(id))
        .expect("kept");
    handle.push(&Note { seq: 100 }).unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;

    assert_eq!(session.received, before);
    let (mut session, resumed) = session.resume(address).await.expect("resumed");
    assert_eq!(resumed.received, 2, "the server got both requests");
    assert_ne!(resumed.ticket, ticket.ticket, "tickets rotate");
    // The answer to the request that was running, then the push: once each.
    let slept = session.recv_app().await;
    assert_eq!(
        (slept.header.opcode, slept.header.request_id),
        (Slept::OPCODE, 2)
    );
    let note = session.recv_app().await;
    assert_eq!(Note::decode_body(&note.body).unwrap(), Note { seq: 100 });
    session.request(&WhoAmI, 3).await;
    let again = who(&session.recv_app().await);
    assert_eq!(again.connection_id, id, "the same session");
    assert_eq!(seen.resumed.load(Ordering::SeqCst), 1);
    // The link that carried the RESUME ended its own session, nothing else.
    eventually("one connection", || server.connection_count() == 1).await;
    assert!(
        seen.disconnects
            .lock()
            .unwrap()
            .iter()
            .all(|cause| *cause == CloseCause::Resumed),
        "{:?}",
        seen.disconnects.lock().unwrap()
    );
}

#[tokio::test]
async fn frames_the_client_never_read_are_replayed_once_in_order() {
    let (address, _server, seen) = start(Duration::from_secs(10), 64 * 1024);
    let mut session = Session::plain(address).await;
    session.ask_ticket().await;
    session.request(&PushMe { count: 6 }, 1).await;
    // The handler pushes six notes and returns: its acknowledgement goes
    // first, then the notes. Read it and two notes; the other four are
    // sent but never read: the link breaks first.
    let ack = session.recv_app().await;
    assert_eq!(
        (ack.header.opcode, ack.header.request_id),
        (PushMe::OPCODE, 1)
    );
    for seq in 0..2 {
        let note = session.recv_app().await;
        assert_eq!(Note::decode_body(&note.body).unwrap().seq, seq);
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    session.cut().await;
    suspended(&seen, 1).await;

    let (mut session, resumed) = session.resume(address).await.expect("resumed");
    assert_eq!(resumed.received, 1);
    for seq in 2..6 {
        let note = session.recv_app().await;
        assert_eq!(Note::decode_body(&note.body).unwrap().seq, seq);
    }
    // Nothing more: no frame twice.
    session.request(&Add { a: 1, b: 2 }, 2).await;
    let sum = session.recv_app().await;
    assert_eq!(Sum::decode_body(&sum.body).unwrap(), Sum(3));
}

#[tokio::test]
async fn a_secure_session_resumes_under_fresh_keys_and_a_stolen_ticket_is_useless() {
    let (address, _server, seen) = start(Duration::from_secs(10), 64 * 1024);
    let mut session = Session::secure(address).await;
    let ticket = session.ask_ticket().await;
    session.request(&WhoAmI, 1).await;
    let id = who(&session.recv_app().await).connection_id;
    session.cut().await;
    suspended(&seen, 1).await;

    // The attacker has the ticket and the count, not the session secret.
    let stolen = resume_with(address, ticket.ticket.clone(), 1, Some(&[7u8; 32])).await;
    let refused = stolen.err().expect("refused");
    assert_eq!(
        refused.code,
        ErrorCode::HandshakeFailed,
        "{}",
        refused.message
    );
    // Nor does a plain resumption of a secure session work.
    let plain = resume_with(address, ticket.ticket.clone(), 1, None).await;
    assert_eq!(
        plain.err().expect("refused").code,
        ErrorCode::HandshakeFailed
    );

    // The session was not taken: its client resumes it.
    let old_secret = session.channel.as_ref().unwrap().session_secret.to_vec();
    let (mut session, _) = session.resume(address).await.expect("resumed");
    let channel = session.channel.as_ref().unwrap();
    assert_ne!(
        &channel.session_secret[..],
        &old_secret[..],
        "a fresh handshake"
    );
    session.request(&WhoAmI, 2).await;
    let frame = session.recv_app().await;
    assert!(
        frame.header.flags.is_encrypted(),
        "sealed under the new keys"
    );
    assert_eq!(who(&frame).connection_id, id);

    // The first ticket is dead now.
    let replayed = resume_with(address, ticket.ticket, 1, Some(&old_secret)).await;
    assert_eq!(
        replayed.err().expect("refused").code,
        ErrorCode::HandshakeFailed
    );
}

#[tokio::test]
async fn a_resume_whose_received_was_changed_on_the_way_is_refused() {
    let (address, _server, seen) = start(Duration::from_secs(10), 64 * 1024);
    let mut session = Session::secure(address).await;
    let ticket = session.ask_ticket().await;
    session.request(&WhoAmI, 1).await;
    let id = who(&session.recv_app().await).connection_id;
    session.request(&Add { a: 1, b: 2 }, 2).await;
    assert_eq!(
        Sum::decode_body(&session.recv_app().await.body).unwrap(),
        Sum(3)
    );
    session.cut().await;
    suspended(&seen, 1).await;
    assert_eq!(session.received, 2);
    let secret = session.channel.as_ref().unwrap().session_secret.to_vec();

    // An attacker on the path lowers (or raises) the client's count, within
    // what the server still holds: the server would replay frames the
    // client already has. The prologue binds the count: refused.
    for forged in [0, 1] {
        let changed = resume_changed(
            address,
            ticket.ticket.clone(),
            session.received,
            Some(&secret),
            |request| request.received = forged,
        )
        .await;
        let refused = changed.err().expect("refused");
        assert_eq!(
            refused.code,
            ErrorCode::HandshakeFailed,
            "{}",
            refused.message
        );
    }
    // So is a changed ticket (another session's, say) or pattern.
    let changed = resume_changed(
        address,
        ticket.ticket.clone(),
        session.received,
        Some(&secret),
        |request| request.pattern = 4,
    )
    .await;
    assert_eq!(
        changed.err().expect("refused").code,
        ErrorCode::HandshakeFailed
    );
    assert_eq!(seen.resumed.load(Ordering::SeqCst), 0);

    // The session was not taken, nor its ticket spent: the genuine RESUME
    // resumes it, and nothing is replayed twice.
    let (mut session, resumed) = session.resume(address).await.expect("resumed");
    assert_eq!(resumed.received, 2, "the server got both requests");
    session.request(&WhoAmI, 3).await;
    let frame = session.recv_app().await;
    assert_eq!(frame.header.request_id, 3, "no frame replayed: {frame:?}");
    assert_eq!(who(&frame).connection_id, id);
}

/// The Rust client through an attacker that rewrites the `received` of the
/// server's answer to `RESUME` (lowered by one: the client would send again
/// a request the server already ran). The client detects it: the session
/// is reported lost, nothing is replayed, and the request ran once.
#[tokio::test]
async fn a_client_detects_a_resume_answer_whose_received_was_changed() {
    use ternio_client::{Client, ClientConfig, SecureConfig, SessionEvent};
    let (address, _server, _seen) = start(Duration::from_secs(10), 64 * 1024);
    let proxy = TamperingProxy::start(address).await;
    let mut config = ClientConfig::default();
    config.reconnect = Some(quick_reconnect());
    config.secure = Some(SecureConfig::anonymous());
    let client = Client::connect_tcp_with(proxy.address(), config)
        .await
        .unwrap();
    let mut events = client.session_events();
    // Runs once on the server; the client keeps it until the server's ACK
    // (200 ms later): the link is cut before that.
    client
        .request_async(&Tally {
            by: 1,
            padding: Bytes::new(),
        })
        .await
        .unwrap();
    proxy.set_rewrite(Some(|received| received.saturating_sub(1)));
    proxy.cut_all();
    let event = tokio::time::timeout(
        Duration::from_secs(10),
        events.wait_for(|event| !matches!(event, SessionEvent::Started)),
    )
    .await
    .expect("the client reconnects")
    .unwrap()
    .clone();
    assert!(proxy.rewritten() >= 1, "the answer was rewritten");
    proxy.set_rewrite(None);
    let total = client.request_async(&GetCount).await.unwrap();
    assert_eq!(total, Count(1), "the request ran exactly once");
    assert!(
        matches!(event, SessionEvent::Lost { .. }),
        "a forged answer does not resume the session: {event:?}"
    );
}

/// Noise's handshake hash of an NN handshake, computed as an eavesdropper
/// can: from the prologue and the two messages that crossed the wire.
fn observed_nn_hash(request_body: &[u8], response_body: &[u8]) -> Vec<u8> {
    use blake2::{Blake2s256, Digest};
    let hash = |parts: &[&[u8]]| {
        let mut hasher = Blake2s256::new();
        for part in parts {
            hasher.update(part);
        }
        hasher.finalize().to_vec()
    };
    // The protocol name is longer than 32 bytes: h starts as its hash.
    let mut h = hash(&[b"Noise_NN_25519_ChaChaPoly_BLAKE2s"]);
    h = hash(&[&h, ternio::protocol::secure::PROLOGUE]);
    // Message 1 (after the pattern byte): e, then an empty plain payload.
    let initiator_ephemeral = &request_body[1..33];
    h = hash(&[&h, initiator_ephemeral]);
    h = hash(&[&h, b""]);
    // Message 2: e, then the empty payload's tag.
    h = hash(&[&h, &response_body[..32]]);
    hash(&[&h, &response_body[32..48]])
}

#[tokio::test]
async fn an_eavesdropper_with_the_handshake_and_the_ticket_cannot_resume() {
    let (address, _server, seen) = start(Duration::from_secs(10), 64 * 1024);
    // The handshake, as the attacker sees it on the wire.
    let mut session = Session::plain(address).await;
    let mut initiator = Initiator::new(None).unwrap();
    let request_body = initiator.request_body().unwrap();
    session
        .raw
        .send_body(
            Header::new(system::HANDSHAKE, Flags::NONE, 1000),
            &request_body,
        )
        .await;
    let answer = session.raw.recv().await.expect("the handshake's answer");
    session.channel = Some(initiator.finish(&answer.body).unwrap());
    let observed = observed_nn_hash(&request_body, &answer.body);
    assert_eq!(
        observed,
        session.channel.as_ref().unwrap().handshake_hash,
        "the handshake hash is public"
    );
    let ticket = session.ask_ticket().await;
    session.cut().await;
    suspended(&seen, 1).await;

    // It also saw the ticket (RESUME travels plain): keyed by what it can
    // compute, its resumption fails.
    let stolen = resume_with(address, ticket.ticket.clone(), 0, Some(&observed)).await;
    let refused = stolen.err().expect("refused");
    assert_eq!(
        refused.code,
        ErrorCode::HandshakeFailed,
        "{}",
        refused.message
    );
    session
        .resume(address)
        .await
        .expect("its client resumes it");
}

#[tokio::test]
async fn a_session_whose_client_does_not_come_back_ends_at_its_ttl() {
    let (address, _server, seen) = start(Duration::from_millis(300), 64 * 1024);
    let mut session = Session::plain(address).await;
    session.ask_ticket().await;
    session.cut().await;
    suspended(&seen, 1).await;
    assert!(
        seen.disconnects.lock().unwrap().is_empty(),
        "not before the TTL"
    );
    eventually("the session expired", || {
        seen.disconnects
            .lock()
            .unwrap()
            .contains(&CloseCause::ResumeExpired)
    })
    .await;
    let refused = session.resume(address).await.err().expect("refused");
    assert_eq!(refused.code, ErrorCode::HandshakeFailed);
    assert!(refused.message.contains("ticket"), "{}", refused.message);
}

/// A ticket request may ask for the server's replay bound (its body the
/// byte 1): the answer then carries it after `ttl_ms`; an empty body gets
/// the answer without it; any other body is malformed and starts nothing.
#[tokio::test]
async fn a_ticket_request_may_ask_for_the_replay_bound_and_nothing_else() {
    let (address, _server, _seen) = start(Duration::from_secs(10), 20_000);
    for bad in [&[2u8][..], &[1, 0], &[0]] {
        let mut session = Session::plain(address).await;
        session
            .send_frame(Header::new(system::RESUME_TICKET, Flags::NONE, 3), bad)
            .await;
        let answer = session.recv_app().await;
        let error = ErrorBody::parse(&answer.body).unwrap();
        assert_eq!(error.code, ErrorCode::Malformed, "{bad:?}");
        // Nothing started: this request is not counted, as the server's
        // count after the ticket and a resumption shows.
        session.request(&Add { a: 1, b: 2 }, 4).await;
        assert_eq!(session.recv_app().await.header.request_id, 4);
        assert!(session.ask_ticket().await.replay_bytes.is_none());
        // This client counts from the ticket too.
        session.received = 0;
        session.cut().await;
        let (_, resumed) = session.resume(address).await.expect("resumed");
        assert_eq!(resumed.received, 0, "{bad:?}: counting started early");
    }
    let mut session = Session::plain(address).await;
    session
        .send_frame(Header::new(system::RESUME_TICKET, Flags::NONE, 3), &[1])
        .await;
    let answer = session.recv_app().await;
    assert_eq!(
        answer.body.len(),
        40,
        "{:?}",
        ErrorBody::parse(&answer.body)
    );
    let ticket = ResumeTicket::decode_body(&answer.body).unwrap();
    assert_eq!(ticket.ttl_ms, 10_000);
    assert_eq!(ticket.replay_bytes, Some(20_000));
    // Asked again without it: the same ticket, without the bound.
    let again = session.ask_ticket().await;
    assert_eq!(again.ticket, ticket.ticket);
    assert_eq!(again.replay_bytes, None);
}

#[tokio::test]
async fn an_overflowing_replay_buffer_ends_resumability_not_the_connection() {
    let (address, _server, seen) = start(Duration::from_secs(10), 2048);
    let mut session = Session::plain(address).await;
    session.ask_ticket().await;
    // Three 1 KiB echoes, never acknowledged: past the 2 KiB bound.
    for id in 1..=3 {
        session
            .request(
                &Echo {
                    payload: Bytes::from(vec![b'x'; 1024]),
                },
                id,
            )
            .await;
        assert_eq!(session.recv_app().await.header.request_id, id);
    }
    session.request(&Add { a: 2, b: 2 }, 4).await;
    assert_eq!(
        session.recv_app().await.header.request_id,
        4,
        "the connection goes on"
    );
    session.cut().await;
    eventually("the session ended with its link", || {
        !seen.disconnects.lock().unwrap().is_empty()
    })
    .await;
    assert_eq!(seen.suspended.load(Ordering::SeqCst), 0);
    let refused = session.resume(address).await.err().expect("refused");
    assert_eq!(refused.code, ErrorCode::HandshakeFailed);
}

#[tokio::test]
async fn a_burst_of_pushes_waits_for_acks_instead_of_ending_resumability() {
    // 2 KiB of replay buffer; 500 notes of 11 bytes (7 of header, a u32)
    // are 5.5 KiB. Before, the server wrote them all at once, overflowed
    // its buffer and could no longer resume the session.
    let (address, _server, seen) = start(Duration::from_secs(10), 2048);
    let mut session = Session::plain(address).await;
    session.ask_ticket().await;
    session.request(&PushMe { count: 500 }, 1).await;
    let answer = session.recv_app().await;
    assert_eq!(answer.header.request_id, 1);
    // Read without acknowledging: what the buffer holds with a quarter of
    // it kept for answers (the 7-byte answer and 139 notes: 1,536 bytes),
    // then nothing.
    let mut next = 0;
    let held = loop {
        match tokio::time::timeout(Duration::from_millis(300), session.recv_app()).await {
            Ok(note) => {
                assert_eq!(Note::decode_body(&note.body).unwrap().seq, next);
                next += 1;
            }
            Err(_) => break next,
        }
    };
    assert_eq!(held, 139, "the server wrote more than its buffer holds");
    // A request answered while the pushes wait: its answer has the room
    // kept for it (before, it overflowed the full buffer).
    session.request(&Add { a: 20, b: 22 }, 2).await;
    let sum = session.recv_app().await;
    assert_eq!(Sum::decode_body(&sum.body).unwrap(), Sum(42));
    // An ACK makes room for as much again.
    let received = session.received;
    session.send_ack(received, 0).await;
    for _ in 0..100 {
        let note = session.recv_app().await;
        assert_eq!(Note::decode_body(&note.body).unwrap().seq, next);
        next += 1;
    }
    // The session survives a cut in the middle of the burst: the rest
    // arrives once, in order, after the resumption.
    session.cut().await;
    suspended(&seen, 1).await;
    let (mut session, _) = session.resume(address).await.expect("still resumable");
    while next < 500 {
        let note = session.recv_app().await;
        assert_eq!(Note::decode_body(&note.body).unwrap().seq, next);
        next += 1;
        if session.received % 64 == 0 {
            let received = session.received;
            session.send_ack(received, 0).await;
        }
    }
    session.request(&Add { a: 2, b: 3 }, 2).await;
    let sum = session.recv_app().await;
    assert_eq!(
        Sum::decode_body(&sum.body).unwrap(),
        Sum(5),
        "nothing twice"
    );
}

#[tokio::test]
async fn pushes_do_not_wait_for_acks_the_server_is_not_reading() {
    // One request at a time: while `Sleep` runs, the server reads nothing,
    // so no `ACK` could make room. Pushes go on (and overflow the buffer,
    // ending resumability) rather than stall behind the request.
    let (address, server, _seen) = start_with(Duration::from_secs(10), 2048, |builder| {
        let mut config = ternio::ServerConfig::default();
        config.max_requests_in_flight = 1;
        // (A whole config replaces the resumption settings too: again.)
        builder
            .config(config)
            .resumable(Duration::from_secs(10), 2048)
    });
    let mut session = Session::plain(address).await;
    session.ask_ticket().await;
    session.request(&WhoAmI, 1).await;
    let id = who(&session.recv_app().await).connection_id;
    session.request(&Sleep { ms: 2_000, tag: 9 }, 2).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let handle = server
        .hub()
        .connection(ternio::ConnectionId(id))
        .expect("open");
    for seq in 0..500 {
        handle.push(&Note { seq }).unwrap();
    }
    for seq in 0..500 {
        let frame = tokio::time::timeout(Duration::from_secs(1), session.recv_app())
            .await
            .expect("every push before the request ends");
        assert_eq!(Note::decode_body(&frame.body).unwrap().seq, seq);
    }
    let slept = session.recv_app().await;
    assert_eq!(slept.header.request_id, 2);
}

#[tokio::test]
async fn a_push_too_large_once_sealed_takes_no_number() {
    // A push that fits the frame limit plain but not sealed (24 bytes
    // more) is dropped. Before, it was counted first: the client's count
    // lagged the server's by one, and a resumption replayed the next push
    // a second time.
    let (address, server, seen) = start_with(Duration::from_secs(10), 64 * 1024, |builder| {
        let mut config = ternio::ServerConfig::default();
        config.max_frame_size = 4096;
        builder
            .config(config)
            .resumable(Duration::from_secs(10), 64 * 1024)
    });
    let mut session = Session::secure(address).await;
    session.ask_ticket().await;
    session.request(&WhoAmI, 1).await;
    let id = who(&session.recv_app().await).connection_id;
    let handle = server
        .hub()
        .connection(ternio::ConnectionId(id))
        .expect("open");
    // 7 + 2 + 4,080 = 4,089 bytes plain; 4,113 sealed.
    handle
        .push(&Echo {
            payload: Bytes::from(vec![1u8; 4080]),
        })
        .unwrap();
    handle.push(&Note { seq: 7 }).unwrap();
    let note = session.recv_app().await;
    assert_eq!(Note::decode_body(&note.body).unwrap(), Note { seq: 7 });
    tokio::time::sleep(Duration::from_millis(50)).await;
    session.cut().await;
    suspended(&seen, 1).await;
    let (mut session, _) = session.resume(address).await.expect("resumed");
    session.request(&Add { a: 1, b: 1 }, 2).await;
    let next = session.recv_app().await;
    assert_eq!(
        (next.header.opcode, next.header.request_id),
        (Sum::OPCODE, 2),
        "nothing replayed twice"
    );
}

#[tokio::test]
async fn a_secure_session_survives_frames_written_into_its_link() {
    // Someone on the path writes a plain frame into a secure session: the
    // server closes the link with DECRYPT_FAILED, and the client that
    // receives a forged frame says DECRYPT_FAILED. Either way the link was
    // attacked, not the session: it waits for its client, who resumes it
    // (before, both ended it, and the resumption was refused).
    let (address, _server, seen) = start(Duration::from_secs(10), 64 * 1024);
    let mut session = Session::secure(address).await;
    session.ask_ticket().await;
    session.request(&WhoAmI, 1).await;
    let id = who(&session.recv_app().await).connection_id;
    // The server's side: a plain request injected into the stream.
    session.link.raw.request(&Add { a: 1, b: 2 }, 66).await;
    let refused = session.link.raw.recv().await.expect("a DISCONNECT");
    assert_eq!(refused.header.opcode, system::DISCONNECT);
    assert_eq!(
        Disconnect::decode_body(&refused.body).unwrap().reason,
        DisconnectReason::DecryptFailed
    );
    session.cut().await;
    suspended(&seen, 1).await;
    let (mut session, resumed) = session.resume(address).await.expect("resumed");
    assert_eq!(resumed.received, 1, "the injected request was not counted");
    session.request(&WhoAmI, 2).await;
    assert_eq!(who(&session.recv_app().await).connection_id, id);
    // The client's side: it tells the server a frame did not open.
    let failed = Disconnect::new(DisconnectReason::DecryptFailed, "a frame did not open");
    session
        .link
        .raw
        .send(Header::new(system::DISCONNECT, Flags::NONE, 0), &failed)
        .await;
    session.cut().await;
    suspended(&seen, 2).await;
    let (mut session, _) = session.resume(address).await.expect("resumed again");
    session.request(&WhoAmI, 3).await;
    assert_eq!(who(&session.recv_app().await).connection_id, id);
    assert!(
        seen.disconnects
            .lock()
            .unwrap()
            .iter()
            .all(|cause| *cause == CloseCause::Resumed)
    );
}

#[tokio::test]
async fn acknowledgements_keep_the_replay_buffer_small_both_ways() {
    let (address, _server, seen) = start(Duration::from_secs(10), 4096);
    let mut session = Session::plain(address).await;
    session.ask_ticket().await;
    let mut server_acks = Vec::new();
    for id in 1..=40u32 {
        session
            .request(
                &Echo {
                    payload: Bytes::from(vec![b'y'; 512]),
                },
                id,
            )
            .await;
        loop {
            let frame = session.recv().await.unwrap();
            if frame.header.opcode == system::ACK {
                server_acks.push(Ack::decode_body(&frame.body).unwrap().received);
                continue;
            }
            assert_eq!(frame.header.request_id, id);
            break;
        }
        // The client acknowledges each answer: the server's buffer (4 KiB)
        // never holds more than one.
        let received = session.received;
        session.send_ack(received, 0).await;
    }
    // The server acknowledged every 16 KiB (40 frames of 519 bytes).
    assert!(!server_acks.is_empty(), "the server sent no ACK");
    assert!(
        server_acks.windows(2).all(|pair| pair[0] < pair[1]),
        "{server_acks:?}"
    );
    session.cut().await;
    suspended(&seen, 1).await;
    let (mut session, resumed) = session.resume(address).await.expect("still resumable");
    assert_eq!(resumed.received, 40);
    session.request(&Add { a: 1, b: 1 }, 41).await;
    assert_eq!(session.recv_app().await.header.request_id, 41);
}

#[tokio::test]
async fn an_ack_for_frames_never_sent_closes_the_connection() {
    let (address, _server, _seen) = start(Duration::from_secs(10), 4096);
    let mut session = Session::plain(address).await;
    session.ask_ticket().await;
    session.send_ack(5, 0).await;
    session
        .raw
        .expect_disconnect(ternio::DisconnectReason::Malformed)
        .await;
}

#[tokio::test]
async fn a_resume_while_the_old_link_still_looks_alive_takes_the_session_over() {
    let (address, _server, seen) = start(Duration::from_secs(10), 64 * 1024);
    let mut session = Session::plain(address).await;
    session.ask_ticket().await;
    session.request(&WhoAmI, 1).await;
    let id = who(&session.recv_app().await).connection_id;
    // The client thinks its link is dead; the server does not know yet.
    let ticket = session.ticket.clone().unwrap();
    let (mut resumed, _) = resume_with(address, ticket, session.received, None)
        .await
        .expect("taken over");
    resumed.request(&WhoAmI, 2).await;
    assert_eq!(who(&resumed.recv_app().await).connection_id, id);
    // The old link is dropped.
    assert!(session.raw.recv().await.is_none(), "the old link is closed");
    assert_eq!(seen.suspended.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn resume_is_refused_when_off_late_or_unknown() {
    // Off: the ticket request is an unknown opcode.
    let (address, _server) = start_server(|builder| builder);
    let mut session = Session::plain(address).await;
    session
        .send_frame(Header::new(system::RESUME_TICKET, Flags::NONE, 5), &[])
        .await;
    let answer = session.recv().await.unwrap();
    assert_eq!(
        ErrorBody::parse(&answer.body).unwrap().code,
        ErrorCode::UnknownOpcode
    );

    let (address, _server, _seen) = start(Duration::from_secs(10), 4096);
    // Not the first frame of its connection.
    let mut raw = RawConnection::connect(address).await;
    raw.request(&Add { a: 1, b: 1 }, 1).await;
    raw.recv().await.unwrap();
    let request = Resume {
        ticket: Ticket::generate(),
        received: 0,
        pattern: 0,
        message: Bytes::new(),
    };
    raw.send(Header::new(system::RESUME, Flags::NONE, 2), &request)
        .await;
    let answer = raw.recv().await.unwrap();
    let error = ErrorBody::parse(&answer.body).unwrap();
    assert_eq!(error.code, ErrorCode::HandshakeFailed, "{}", error.message);
    // An unknown ticket: refused, and the connection is a fresh session.
    let refused = resume_with(address, Ticket::generate(), 0, None).await;
    assert_eq!(refused.err().unwrap().code, ErrorCode::HandshakeFailed);
}

#[tokio::test]
async fn a_resume_claiming_frames_never_sent_is_refused_and_the_session_waits_on() {
    let (address, _server, seen) = start(Duration::from_secs(10), 64 * 1024);
    let mut session = Session::plain(address).await;
    session.ask_ticket().await;
    session.request(&Add { a: 1, b: 1 }, 1).await;
    session.recv_app().await;
    session.cut().await;
    suspended(&seen, 1).await;
    // One frame was sent; a client claiming five is refused.
    let ticket = session.ticket.clone().unwrap();
    let refused = resume_with(address, ticket, 5, None)
        .await
        .err()
        .expect("refused");
    assert_eq!(refused.code, ErrorCode::HandshakeFailed);
    assert!(
        refused.message.contains("cannot replay"),
        "{}",
        refused.message
    );
    // The session still waits for its client, which resumes it.
    let (mut session, resumed) = session.resume(address).await.expect("resumed");
    assert_eq!(resumed.received, 1);
    session.request(&Add { a: 2, b: 2 }, 2).await;
    assert_eq!(session.recv_app().await.header.request_id, 2);
    assert_eq!(seen.suspended.load(Ordering::SeqCst), 1, "suspended once");
}

/// An attacker with a stolen (or its own) ticket cannot keep a lost
/// session alive past its TTL by sending refused `RESUME`s: each puts the
/// session back to wait, for what is left of its TTL. (Before, each
/// refusal gave the session its whole TTL again.)
#[tokio::test]
async fn refused_resumes_do_not_extend_a_sessions_life() {
    let ttl = Duration::from_millis(800);
    let (address, _server, seen) = start(ttl, 64 * 1024);
    let mut session = Session::plain(address).await;
    session.ask_ticket().await;
    session.cut().await;
    suspended(&seen, 1).await;
    let lost = std::time::Instant::now();
    let ticket = session.ticket.clone().unwrap();
    // A RESUME claiming frames never sent, every 150 ms for twice the TTL:
    // refused each time.
    while lost.elapsed() < 2 * ttl {
        let refused = resume_with(address, ticket.clone(), 99, None)
            .await
            .err()
            .expect("refused");
        assert_eq!(refused.code, ErrorCode::HandshakeFailed);
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    // Past the TTL the session is gone, whatever was tried meanwhile.
    let refused = resume_with(address, ticket, 0, None)
        .await
        .err()
        .expect("the session expired");
    assert!(
        refused.message.contains("unknown or expired ticket"),
        "{}",
        refused.message
    );
}

/// A session that waits for its client holds its place among the server's
/// connections (docs/SECURITY.md), also once a refused `RESUME` put it back
/// to wait: a peer cannot free the place by making its link resume and fail.
/// (Before, the session waited on in a task that held no place.)
#[tokio::test]
async fn a_session_put_back_to_wait_keeps_its_place_among_the_connections() {
    let (address, _server, seen) = start_with(Duration::from_secs(10), 64 * 1024, |builder| {
        builder.max_connections(2)
    });
    let mut session = Session::plain(address).await;
    session.ask_ticket().await;
    session.cut().await;
    suspended(&seen, 1).await;
    // A refused RESUME: its link took the session and gave it back.
    let ticket = session.ticket.clone().unwrap();
    let refused = resume_with(address, ticket, 99, None)
        .await
        .err()
        .expect("refused");
    assert_eq!(refused.code, ErrorCode::HandshakeFailed);
    // The waiting session holds one of the two places: one more
    // connection fits (once the refused link gave its own place back);
    // a second may only resume (it came past the limit).
    let mut answered = None;
    for _ in 0..100 {
        let mut first = RawConnection::connect(address).await;
        first.request(&Add { a: 1, b: 2 }, 1).await;
        let frame = first.recv().await.expect("a frame");
        if frame.header.opcode != system::DISCONNECT {
            answered = Some((first, frame));
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (_first, frame) = answered.expect("one more connection fits");
    assert_eq!(frame.header.request_id, 1);
    let mut second = RawConnection::connect(address).await;
    second.request(&Add { a: 1, b: 2 }, 2).await;
    let refused = second
        .expect_disconnect(ternio::DisconnectReason::TooManyConnections)
        .await;
    assert!(refused.message.contains("may only resume"), "{refused:?}");
}

/// A session resumed from another address takes its new link's place
/// among that address's connections and gives the old address's back
/// (a phone that moved from one network to another).
#[tokio::test]
async fn a_session_resumed_from_another_address_counts_there() {
    let (address, _server, seen) = start_with(Duration::from_secs(10), 64 * 1024, |builder| {
        builder.max_connections_per_ip(1)
    });
    let mut session = Session::plain_from([127, 0, 5, 1], address).await;
    session.ask_ticket().await;
    session.cut().await;
    suspended(&seen, 1).await;
    // Resumed from 127.0.5.2.
    let ticket = session.ticket.clone().unwrap();
    let raw = RawConnection::over(connect_from([127, 0, 5, 2], address).await);
    let (mut resumed, _) = resume_on(raw, ticket, session.received, None, |_| {})
        .await
        .expect("resumed");
    resumed.request(&Add { a: 1, b: 2 }, 2).await;
    assert_eq!(resumed.recv_app().await.header.request_id, 2);
    // 127.0.5.1 has its place back; 127.0.5.2's is taken.
    let mut first = RawConnection::over(connect_from([127, 0, 5, 1], address).await);
    first.request(&Add { a: 1, b: 2 }, 1).await;
    assert_eq!(first.recv().await.expect("answered").header.request_id, 1);
    let mut second = RawConnection::over(connect_from([127, 0, 5, 2], address).await);
    second
        .expect_disconnect(ternio::DisconnectReason::TooManyConnections)
        .await;
}

/// An address at its limit of connections can still resume its waiting
/// session: a session that waits holds its place, so before this its
/// client, reconnecting from the same address, was refused until the TTL
/// ran out. The connection let past the limit may do nothing but resume a
/// session of its address, within the handshake timeout: a request, a
/// malformed `RESUME`, one with a wrong ticket or one for another
/// address's session closes it with `TOO_MANY_CONNECTIONS`, silence with
/// `HANDSHAKE_TIMEOUT`.
#[tokio::test]
async fn an_address_at_its_limit_resumes_its_waiting_session_and_nothing_else() {
    let (address, _server, seen) = start_with(Duration::from_secs(10), 64 * 1024, |builder| {
        builder
            .max_connections_per_ip(1)
            .handshake_timeout(Duration::from_millis(300))
    });
    let from = [127, 0, 7, 1];
    let mut session = Session::plain_from(from, address).await;
    session.ask_ticket().await;
    session.cut().await;
    // 127.0.7.2's session stays on its link for now.
    let mut other = Session::plain_from([127, 0, 7, 2], address).await;
    other.ask_ticket().await;
    suspended(&seen, 1).await;
    // Silent past the limit: closed at the handshake timeout.
    let mut past = RawConnection::over(connect_from(from, address).await);
    past.expect_disconnect(DisconnectReason::HandshakeTimeout)
        .await;
    drop(past);
    // A request past the limit (tried again while the door refuses it,
    // the silent connection's place not given back yet).
    let mut closed = None;
    for _ in 0..100 {
        let mut past = RawConnection::over(connect_from(from, address).await);
        past.request(&Add { a: 1, b: 2 }, 1).await;
        let disconnect = past
            .expect_disconnect(DisconnectReason::TooManyConnections)
            .await;
        if disconnect.message.contains("may only resume") {
            closed = Some(disconnect);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(closed.is_some(), "never let past the limit");
    // A RESUME with a ticket that is no session's: refused, then closed.
    let (mut past, answer) = resume_past_limit(from, address, 5, Ticket::generate(), 0).await;
    assert!(answer.header.flags.is_error(), "{answer:?}");
    past.expect_disconnect(DisconnectReason::TooManyConnections)
        .await;
    drop(past);
    // A malformed RESUME (not a request: no id), refused before it runs.
    let (mut past, answer) =
        resume_past_limit(from, address, 0, session.ticket.clone().unwrap(), 0).await;
    assert!(answer.header.flags.is_error(), "{answer:?}");
    past.expect_disconnect(DisconnectReason::TooManyConnections)
        .await;
    drop(past);
    // The session of 127.0.7.2 from 127.0.7.1, past its limit: refused,
    // closed, and that session never taken off its link.
    let other_ticket = other.ticket.clone().unwrap();
    let (mut past, answer) =
        resume_past_limit(from, address, 6, other_ticket.clone(), other.received).await;
    assert!(answer.header.flags.is_error(), "{answer:?}");
    past.expect_disconnect(DisconnectReason::TooManyConnections)
        .await;
    drop(past);
    other.request(&Add { a: 1, b: 2 }, 8).await;
    assert_eq!(
        other.recv_app().await.header.request_id,
        8,
        "still on its link"
    );
    other.cut().await;
    suspended(&seen, 2).await;
    // Its own session: resumed, and then the address is at its limit.
    let ticket = session.ticket.clone().unwrap();
    let (mut resumed, answer) = resume_past_limit(from, address, 7, ticket, session.received).await;
    assert!(!answer.header.flags.is_error(), "{answer:?}");
    answers(&mut resumed, 2).await;
    let mut past = RawConnection::over(connect_from(from, address).await);
    past.expect_disconnect(DisconnectReason::TooManyConnections)
        .await;
    // The other address's session, resumed by its own client.
    let raw = RawConnection::over(connect_from([127, 0, 7, 2], address).await);
    resume_on(raw, other_ticket, other.received, None, |_| {})
        .await
        .expect("resumed by its own address");
    assert_eq!(seen.resumed.load(Ordering::SeqCst), 2);
}

/// Sends `Add` as request `request_id` on `raw` and waits for its answer
/// (system frames skipped).
async fn answers(raw: &mut RawConnection, request_id: u32) {
    raw.request(&Add { a: 1, b: 2 }, request_id).await;
    let reply = loop {
        let frame = raw.recv().await.expect("the answer");
        if !frame.header.is_system() {
            break frame;
        }
    };
    assert_eq!(reply.header.request_id, request_id);
}

/// A plain `RESUME` of `ticket` from `from`, an address at its limit, and
/// the first frame that answers it. A refusal at the door (a `DISCONNECT`
/// before any answer: the connection before, closed by the test, has not
/// given its place back yet) is tried again.
async fn resume_past_limit(
    from: [u8; 4],
    address: SocketAddr,
    request_id: u32,
    ticket: Ticket,
    received: u64,
) -> (RawConnection, Frame) {
    let request = Resume {
        ticket,
        received,
        pattern: 0,
        message: Bytes::new(),
    };
    for _ in 0..100 {
        let mut raw = RawConnection::over(connect_from(from, address).await);
        raw.send(
            Header::new(system::RESUME, Flags::NONE, request_id),
            &request,
        )
        .await;
        let frame = raw.recv().await.expect("an answer");
        if frame.header.opcode != system::DISCONNECT {
            return (raw, frame);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("never let past the limit");
}

/// A server at its limit of connections can still take a waiting
/// session's client back: one connection past the limit per waiting
/// session, from any address, that may do nothing but resume.
#[tokio::test]
async fn a_server_at_its_limit_resumes_a_waiting_session_and_nothing_else() {
    let (address, _server, seen) = start_with(Duration::from_secs(10), 64 * 1024, |builder| {
        builder.max_connections(1)
    });
    let mut session = Session::plain_from([127, 0, 8, 1], address).await;
    session.ask_ticket().await;
    session.cut().await;
    suspended(&seen, 1).await;
    // A request past the limit, from another address.
    let mut past = RawConnection::over(connect_from([127, 0, 8, 2], address).await);
    past.request(&Add { a: 1, b: 2 }, 1).await;
    let disconnect = past
        .expect_disconnect(DisconnectReason::TooManyConnections)
        .await;
    assert!(
        disconnect.message.contains("may only resume"),
        "{disconnect:?}"
    );
    drop(past);
    // The session, from a third address.
    let ticket = session.ticket.clone().unwrap();
    let (mut resumed, answer) =
        resume_past_limit([127, 0, 8, 3], address, 7, ticket, session.received).await;
    assert!(!answer.header.flags.is_error(), "{answer:?}");
    answers(&mut resumed, 2).await;
    // The server is at its limit again, with no one waiting.
    let mut past = RawConnection::over(connect_from([127, 0, 8, 2], address).await);
    let disconnect = past
        .expect_disconnect(DisconnectReason::TooManyConnections)
        .await;
    assert!(
        disconnect.message.contains("maximum of 1"),
        "{disconnect:?}"
    );
}

/// A resumed session takes its new link's address and transport: the
/// application sees where its client is now, not where it was (a phone
/// that changed networks, then a client that moved to WebSocket), and so
/// do the connection gauges. (The only test of this binary with a metrics
/// endpoint: the gauges count this server's connections alone.)
#[tokio::test]
async fn a_resumed_session_takes_its_new_links_address_and_transport() {
    let seen = Arc::new(Seen::default());
    let hooks = Arc::clone(&seen);
    let metrics = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (tcp, ws, _server) = start_server_with_ws(move |builder| {
        with_hooks(
            builder.resumable(Duration::from_secs(10), 64 * 1024),
            &hooks,
        )
        .prometheus(metrics)
    });
    let mut session = Session::plain_from([127, 0, 6, 1], tcp).await;
    session.ask_ticket().await;
    session.cut().await;
    suspended(&seen, 1).await;
    // Resumed over TCP from 127.0.6.2.
    let stream = connect_from([127, 0, 6, 2], tcp).await;
    let from = stream.local_addr().unwrap();
    let ticket = session.ticket.clone().unwrap();
    let (mut resumed, _) = resume_on(
        RawConnection::over(stream),
        ticket,
        session.received,
        None,
        |_| {},
    )
    .await
    .expect("resumed");
    assert_eq!(
        seen.resumed_on.lock().unwrap().last(),
        Some(&(from, Transport::Tcp))
    );
    resumed.request(&Add { a: 1, b: 2 }, 2).await;
    assert_eq!(resumed.recv_app().await.header.request_id, 2);
    // Then over WebSocket from 127.0.6.3.
    resumed.cut().await;
    suspended(&seen, 2).await;
    let stream = connect_from([127, 0, 6, 3], ws).await;
    let from = stream.local_addr().unwrap();
    let (mut socket, _) = tokio_tungstenite::client_async(format!("ws://{ws}/ws"), stream)
        .await
        .expect("the upgrade");
    let request = Resume {
        ticket: resumed.ticket.clone().unwrap(),
        received: resumed.received,
        pattern: 0,
        message: Bytes::new(),
    };
    let mut message = BytesMut::new();
    frame::write_frame(
        &mut message,
        Framing::Message,
        Header::new(system::RESUME, Flags::NONE, 3),
        &request,
        usize::MAX,
    )
    .unwrap();
    socket
        .send(Message::Binary(message.freeze()))
        .await
        .unwrap();
    let answer = loop {
        match tokio::time::timeout(Duration::from_secs(5), socket.next())
            .await
            .expect("an answer to RESUME")
            .expect("the socket open")
            .unwrap()
        {
            Message::Binary(bytes) => break Frame::parse(bytes, usize::MAX).unwrap(),
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("expected the answer, got {other:?}"),
        }
    };
    assert_eq!(answer.header.opcode, system::RESUME);
    assert!(!answer.header.flags.is_error(), "{answer:?}");
    assert_eq!(
        seen.resumed_on.lock().unwrap().last(),
        Some(&(from, Transport::WebSocket))
    );
    assert_eq!(seen.resumed.load(Ordering::SeqCst), 2);
    // One connection, the session's, now a WebSocket one (the links that
    // resumed it counted while they were their own, then handed over).
    let gauge = |transport: &str| format!("ternio_connections{{transport=\"{transport}\"}}");
    eventually_async(PATIENCE, "the gauges moved with the session", async || {
        let text = scrape(metrics).await;
        sample(&text, &gauge("tcp")) == Some(0.0) && sample(&text, &gauge("websocket")) == Some(1.0)
    })
    .await;
}

/// The `ACK` schedule starts again from a resumption's answer, which
/// acknowledges every frame received: a frame sent after it is
/// acknowledged within the `ACK` delay even if the link was lost while an
/// `ACK` was due. (Before, the delay's timer stayed off after such a
/// resumption, and a client that waited for room in its replay buffer
/// waited for ever.)
#[tokio::test]
async fn after_a_resumption_the_ack_delay_runs_again() {
    let (address, _server, seen) = start(Duration::from_secs(10), 64 * 1024);
    let mut session = Session::plain(address).await;
    session.ask_ticket().await;
    // One counted frame, then the link is lost before its ACK (200 ms).
    session.request(&Add { a: 1, b: 1 }, 1).await;
    session.recv_app().await;
    session.cut().await;
    suspended(&seen, 1).await;
    let (mut session, resumed) = session.resume(address).await.expect("resumed");
    assert_eq!(resumed.received, 1);
    session.request(&Add { a: 2, b: 2 }, 2).await;
    assert_eq!(session.recv_app().await.header.request_id, 2);
    // The ACK of both comes within the delay.
    let ack = tokio::time::timeout(Duration::from_secs(2), async {
        loop {
            let frame = session.recv().await.expect("the link is up");
            if frame.header.opcode == system::ACK {
                break Ack::decode_body(&frame.body).unwrap();
            }
        }
    })
    .await
    .expect("an ACK after the resumption");
    assert_eq!(ack.received, 2);
}

/// Once its replay buffer overflowed, a session cannot be made resumable
/// again: a second `RESUME_TICKET` is refused (error 9), as counting goes
/// on and cannot start again. (Before, it was given a new ticket and
/// counted from 0 again, against docs/PROTOCOL.md section 4.2: the
/// client's next `ACK` went past what the server counted as sent.)
#[tokio::test]
async fn after_an_overflow_a_second_ticket_is_refused() {
    let (address, _server, _seen) = start(Duration::from_secs(10), 4096);
    let mut session = Session::plain(address).await;
    session.ask_ticket().await;
    // An 8 KB answer overflows the server's 4 KiB buffer.
    session
        .request(
            &Echo {
                payload: Bytes::from(vec![1u8; 8 * 1024]),
            },
            1,
        )
        .await;
    assert_eq!(session.recv_app().await.header.request_id, 1);
    session
        .send_frame(Header::new(system::RESUME_TICKET, Flags::NONE, 2), &[])
        .await;
    let answer = session.recv_app().await;
    assert_eq!(answer.header.request_id, 2);
    assert!(answer.header.flags.is_error());
    let error = ErrorBody::parse(&answer.body).unwrap();
    assert_eq!(error.code, ErrorCode::HandshakeFailed);
    assert!(
        error.message.contains("can no longer be resumed"),
        "{}",
        error.message
    );
    // Nor does the session's kind change: a handshake is refused too.
    let body = Initiator::new(None).unwrap().request_body().unwrap();
    session
        .send_frame(Header::new(system::HANDSHAKE, Flags::NONE, 3), &body)
        .await;
    let answer = session.recv_app().await;
    assert_eq!(answer.header.request_id, 3);
    assert_eq!(
        ErrorBody::parse(&answer.body).unwrap().code,
        ErrorCode::HandshakeFailed
    );
}

#[tokio::test]
async fn a_handshake_after_the_ticket_is_refused_and_malformed_acks_close() {
    let (address, _server, _seen) = start(Duration::from_secs(10), 4096);
    let mut session = Session::plain(address).await;
    session.ask_ticket().await;
    let body = Initiator::new(None).unwrap().request_body().unwrap();
    session
        .send_frame(Header::new(system::HANDSHAKE, Flags::NONE, 3), &body)
        .await;
    let answer = session.recv().await.unwrap();
    assert_eq!(
        ErrorBody::parse(&answer.body).unwrap().code,
        ErrorCode::HandshakeFailed
    );
    // An ACK with an id (or flags, or a body of another size) is malformed.
    session.send_ack(0, 4).await;
    session
        .raw
        .expect_disconnect(ternio::DisconnectReason::Malformed)
        .await;
}

/// `examples/echo_server` resumes sessions (for 30 s by default), for the
/// clients that third parties write from docs/PROTOCOL.md.
#[tokio::test]
async fn the_echo_server_resumes_a_session() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let mut child = Command::new(echo_server_binary())
        .args(["--tcp", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the echo server starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let address: SocketAddr = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|line| line.strip_prefix("tcp listening on ")?.parse().ok())
        .expect("the TCP address");
    std::thread::spawn(move || lines.for_each(drop));

    let mut session = Session::plain(address).await;
    let ticket = session.ask_ticket().await;
    assert_eq!(ticket.ttl_ms, 30_000);
    session
        .request(
            &Echo {
                payload: Bytes::from_static(b"one"),
            },
            1,
        )
        .await;
    session.recv_app().await;
    session.cut().await;
    // (Whether the server noticed the loss yet or not: a resumption takes
    // the session over either way.)
    let (mut session, resumed) = session.resume(address).await.expect("resumed");
    assert_eq!(resumed.received, 1);
    session
        .request(
            &Echo {
                payload: Bytes::from_static(b"two"),
            },
            2,
        )
        .await;
    let answer = session.recv_app().await;
    assert_eq!(Echo::decode_body(&answer.body).unwrap().payload, "two");
    child.kill().unwrap();
    child.wait().unwrap();
}
