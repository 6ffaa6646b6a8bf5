//! Secure sessions in the SDK client, over real sockets: NN and NK
//! handshakes over TCP and WebSocket, sealed requests, answers and pushes,
//! the errors of a refused or repeated handshake, no plain traffic once a
//! secure session was asked for, the handshake on connect
//! (`ClientConfig::secure`), rekeying, and what the client does with a
//! server (or an attacker on the path) that breaks the secure session (a
//! hand-written server speaking through the protocol crate's `Responder`).

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ternio::protocol::frame::{self, Flags, FrameDecoder, Framing, Header};
use ternio::protocol::secure::{Responder, SecureChannel};
use ternio::protocol::system::{self, Disconnect};
use ternio::protocol::{Decode, Frame, Packet};
use ternio::{DisconnectReason, ErrorCode, Identity};
use ternio_client::{
    Client, ClientConfig, ClientError, CloseReason, ConnectionState, SecureConfig,
};
use ternio_tests::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

#[derive(Debug, Clone, Copy)]
enum Transport {
    Tcp,
    Ws,
}

const BOTH: [Transport; 2] = [Transport::Tcp, Transport::Ws];

/// A test server with both listeners; with `identity` when given.
fn server(identity: Option<Identity>) -> (SocketAddr, SocketAddr, ternio::ServerHandle) {
    start_server_with_ws(move |b| match identity {
        Some(identity) => b.identity(identity),
        None => b,
    })
}

async fn connect(
    transport: Transport,
    tcp: SocketAddr,
    ws: SocketAddr,
    config: ClientConfig,
) -> Result<Client, ClientError> {
    match transport {
        Transport::Tcp => Client::connect_tcp_with(tcp, config).await,
        Transport::Ws => Client::connect_ws_with(&format!("ws://{ws}/ws"), config).await,
    }
}

fn echo(text: &'static str) -> Echo {
    Echo {
        payload: Bytes::from_static(text.as_bytes()),
    }
}

/// Before the handshake a handler marked encrypted refuses the plain
/// request; after it, requests are sealed and it answers.
async fn a_handshake_seals_requests(transport: Transport, pinned: bool) {
    let identity = Identity::generate();
    let public = *identity.public_key();
    let (tcp, ws, _server) = server(Some(identity));
    let client = connect(transport, tcp, ws, ClientConfig::default())
        .await
        .unwrap();
    let refused = client.request_async(&Secret).await;
    assert_eq!(
        refused.unwrap_err().code(),
        Some(ErrorCode::EncryptionRequired),
        "{transport:?}"
    );
    assert!(!client.is_secure());

    client
        .handshake(pinned.then_some(&public))
        .await
        .unwrap_or_else(|error| panic!("{transport:?} pinned={pinned}: {error}"));
    assert!(client.is_secure());
    let secret: Secret = client.request_async(&Secret).await.unwrap();
    assert_eq!(secret, Secret);
    let sum: Sum = client.request_async(&Add { a: 40, b: 2 }).await.unwrap();
    assert_eq!(sum, Sum(42));
    let reply: Echo = client.request_async(&echo("sealed")).await.unwrap();
    assert_eq!(reply.payload, "sealed");
    // Errors to sealed requests come back sealed, and are read.
    let failed = client
        .request_async(&Fail {
            code: 120,
            message: "sealed failure".into(),
        })
        .await;
    match failed {
        Err(ClientError::Remote { code, message }) => {
            assert_eq!(code, ErrorCode::from_u16(120));
            assert_eq!(message, "sealed failure");
        }
        other => panic!("expected error 120, got {other:?}"),
    }
    // Sends are sealed too: the server counts them.
    client.send(&Bump { by: 3 }).unwrap();
    let count: Count = client.request_async(&GetCount).await.unwrap();
    assert_eq!(count, Count(3));
    // PING stays plain and works.
    client.ping().await.unwrap();
    // Many requests at once keep their counters in order.
    let tasks: Vec<_> = (0..200i64)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move { client.request_async(&Add { a: i, b: 1 }).await })
        })
        .collect();
    for (i, task) in (0..200i64).zip(tasks) {
        assert_eq!(task.await.unwrap().unwrap(), Sum(i + 1));
    }
    assert_eq!(client.state(), ConnectionState::Connected);
}

#[tokio::test]
async fn an_nn_handshake_seals_requests_over_both_transports() {
    for transport in BOTH {
        a_handshake_seals_requests(transport, false).await;
    }
}

#[tokio::test]
async fn an_nk_handshake_seals_requests_over_both_transports() {
    for transport in BOTH {
        a_handshake_seals_requests(transport, true).await;
    }
}

#[tokio::test]
async fn sealed_pushes_arrive_through_a_subscription() {
    let identity = Identity::generate();
    let public = *identity.public_key();
    let (tcp, ws, _server) = server(Some(identity));
    for transport in BOTH {
        let client = connect(transport, tcp, ws, ClientConfig::default())
            .await
            .unwrap();
        client.handshake(Some(&public)).await.unwrap();
        let mut notes = client.subscribe::<Note>();
        client.request_async(&PushMe { count: 50 }).await.unwrap();
        for seq in 0..50 {
            let note = tokio::time::timeout(Duration::from_secs(5), notes.next())
                .await
                .expect("the push arrives")
                .unwrap();
            assert_eq!(note, Note { seq });
        }
        assert_eq!(notes.dropped(), 0);
        assert_eq!(client.unhandled_pushes(), 0);
        assert_eq!(client.state(), ConnectionState::Connected, "{transport:?}");
    }
}

/// Contract v2 and the "silent downgrade": once the application
/// asked for a secure session, a handshake that failed (an attacker can
/// force `KeyRejected`) must not let requests carry on in plain.
#[tokio::test]
async fn a_wrong_pinned_key_is_key_rejected_and_nothing_goes_out_plain_after_it() {
    let (tcp, ws, _server) = server(Some(Identity::generate()));
    let impostor = Identity::generate();
    for transport in BOTH {
        let client = connect(transport, tcp, ws, ClientConfig::default())
            .await
            .unwrap();
        let error = client
            .handshake(Some(impostor.public_key()))
            .await
            .unwrap_err();
        assert!(matches!(error, ClientError::KeyRejected(_)), "{error:?}");
        let text = error.to_string();
        assert!(
            text.contains("pinned key is not this server's public key"),
            "{text}"
        );
        // Still connected, but nothing goes out plain: not a request, a
        // send or a ping; and no second handshake on this connection.
        assert!(!client.is_secure());
        let before = count(tcp).await;
        assert!(matches!(
            client.request_async(&Add { a: 1, b: 2 }).await,
            Err(ClientError::NotSecure)
        ));
        assert!(matches!(
            client.send(&Bump { by: 1 }),
            Err(ClientError::NotSecure)
        ));
        assert!(matches!(client.ping().await, Err(ClientError::NotSecure)));
        assert_eq!(count(tcp).await, before, "nothing reached the server");
        let again = client.handshake(None).await.unwrap_err();
        assert!(
            matches!(again, ClientError::HandshakeAlreadyRan(_)),
            "{again:?}"
        );
        // Nothing can be sealed.
        assert!(matches!(
            client.request_sealed(&Secret).await,
            Err(ClientError::NotSecure)
        ));
        assert_eq!(client.state(), ConnectionState::Connected);
    }
}

#[tokio::test]
async fn nk_against_a_server_without_identity_is_key_rejected() {
    let (tcp, ws, _server) = server(None);
    for transport in BOTH {
        let client = connect(transport, tcp, ws, ClientConfig::default())
            .await
            .unwrap();
        let error = client
            .handshake(Some(Identity::generate().public_key()))
            .await
            .unwrap_err();
        match &error {
            ClientError::KeyRejected(message) => {
                assert!(message.contains("identity"), "{message}")
            }
            other => panic!("expected KeyRejected, got {other:?}"),
        }
        assert!(error.to_string().contains("no identity key"), "{error}");
        // NN still works on another connection to that server.
        let other = connect(transport, tcp, ws, ClientConfig::default())
            .await
            .unwrap();
        other.handshake(None).await.unwrap();
        assert_eq!(other.request_async(&Secret).await.unwrap(), Secret);
    }
}

#[tokio::test]
async fn a_second_handshake_call_is_refused() {
    let (tcp, ws, _server) = server(None);
    for transport in BOTH {
        let client = connect(transport, tcp, ws, ClientConfig::default())
            .await
            .unwrap();
        client.handshake(None).await.unwrap();
        let error = client.handshake(None).await.unwrap_err();
        assert!(
            matches!(error, ClientError::HandshakeAlreadyRan(_)),
            "{error:?}"
        );
        // The session is unharmed.
        assert_eq!(client.request_async(&Secret).await.unwrap(), Secret);

        // Two at once: one runs, the other is refused.
        let client = connect(transport, tcp, ws, ClientConfig::default())
            .await
            .unwrap();
        let (a, b) = tokio::join!(client.handshake(None), client.handshake(None));
        assert!(a.is_ok() != b.is_ok(), "{a:?} {b:?}");
        let refused = a.err().or(b.err()).unwrap();
        assert!(
            matches!(refused, ClientError::HandshakeAlreadyRan(_)),
            "{refused:?}"
        );
        assert!(client.is_secure());
    }
}

/// The server-wide count of `Bump`s, read on a fresh TCP connection.
async fn count(tcp: SocketAddr) -> u64 {
    let client = Client::connect_tcp(tcp).await.unwrap();
    let count: Count = client.request_async(&GetCount).await.unwrap();
    count.0
}

#[tokio::test]
async fn request_sealed_needs_a_session_and_everything_is_sealed_after_the_handshake() {
    let (tcp, ws, _server) = server(None);
    for transport in BOTH {
        let client = connect(transport, tcp, ws, ClientConfig::default())
            .await
            .unwrap();
        // Nothing to seal with yet.
        assert!(matches!(
            client.request_sealed(&Secret).await,
            Err(ClientError::NotSecure)
        ));
        assert!(matches!(
            client.send_sealed(&Bump { by: 1 }),
            Err(ClientError::NotSecure)
        ));
        let before = count(tcp).await;
        client.handshake(None).await.unwrap();
        // The encrypted handler answers every kind of request: all are sealed.
        let sealed: Secret = client.request_sealed(&Secret).await.unwrap();
        assert_eq!(sealed, Secret);
        let auto: Secret = client.request_async(&Secret).await.unwrap();
        assert_eq!(auto, Secret);
        client.ping().await.unwrap();
        client.send(&Bump { by: 1 }).unwrap();
        client.send_sealed(&Bump { by: 10 }).unwrap();
        let count: Count = client.request_async(&GetCount).await.unwrap();
        assert_eq!(count.0, before + 11);
        // The session is still up: the server refused nothing.
        assert!(client.is_secure());
        assert_eq!(client.state(), ConnectionState::Connected);
    }
}

#[tokio::test]
async fn an_encrypted_handler_works_only_after_the_handshake() {
    let (tcp, ws, _server) = server(None);
    for transport in BOTH {
        let client = connect(transport, tcp, ws, ClientConfig::default())
            .await
            .unwrap();
        for _ in 0..3 {
            let result = client.request_async(&Secret).await;
            assert_eq!(
                result.unwrap_err().code(),
                Some(ErrorCode::EncryptionRequired)
            );
        }
        client.handshake(None).await.unwrap();
        for _ in 0..3 {
            assert_eq!(client.request_async(&Secret).await.unwrap(), Secret);
        }
    }
}

#[tokio::test]
async fn secure_config_runs_the_handshake_on_connect() {
    let identity = Identity::generate();
    let public = *identity.public_key();
    let (tcp, ws, _server) = start_server_with_ws(|b| {
        b.identity(identity)
            .require_encryption(true)
            .handshake_timeout(Duration::from_secs(2))
    });
    for transport in BOTH {
        let mut config = ClientConfig::default();
        config.secure = Some(SecureConfig::pinned(public));
        let client = connect(transport, tcp, ws, config).await.unwrap();
        assert!(client.is_secure());
        // The server requires encryption for everything: the very first
        // request is sealed.
        let sum: Sum = client.request_async(&Add { a: 1, b: 1 }).await.unwrap();
        assert_eq!(sum, Sum(2));
        let error = client.handshake(None).await.unwrap_err();
        assert!(
            matches!(error, ClientError::HandshakeAlreadyRan(_)),
            "{error:?}"
        );

        // A wrong key fails the connect itself.
        let mut config = ClientConfig::default();
        config.secure = Some(SecureConfig::pinned(*Identity::generate().public_key()));
        let error = connect(transport, tcp, ws, config).await.unwrap_err();
        assert!(matches!(error, ClientError::KeyRejected(_)), "{error:?}");

        // NN on connect.
        let mut config = ClientConfig::default();
        config.secure = Some(SecureConfig::anonymous());
        let client = connect(transport, tcp, ws, config).await.unwrap();
        assert_eq!(client.request_async(&Secret).await.unwrap(), Secret);
    }
}

/// How a hand-written server breaks the secure session after the handshake.
#[derive(Debug, Clone, Copy)]
enum Misbehaviour {
    /// A sealed push with a flipped ciphertext bit.
    TamperedPush,
    /// A sealed push, then the same bytes again.
    ReplayedPush,
    /// Two sealed pushes, of which only the second is sent (the first
    /// deleted on the path).
    DeletedPush,
    /// A plain push after the handshake.
    PlainPush,
    /// A plain answer to the client's sealed request.
    PlainAnswer,
    /// A sealed frame with a changed header (the associated data).
    TamperedHeader,
}

/// A one-connection TCP server that answers the client's handshake (NN),
/// then misbehaves; reports the reason of the client's `DISCONNECT`, or
/// `None` if it closed without one.
async fn misbehaving_server(
    misbehaviour: Misbehaviour,
) -> (SocketAddr, oneshot::Receiver<Option<DisconnectReason>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (report, reported) = oneshot::channel();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut peer = Peer::new(stream);
        let hello = peer.recv().await.expect("a handshake");
        assert_eq!(hello.header.opcode, system::HANDSHAKE);
        let (reply, mut channel) = Responder::respond(&hello.body, None).unwrap();
        let answer = Header::new(system::HANDSHAKE, Flags::RESPONSE, hello.header.request_id);
        peer.send_plain(answer, &reply[..]).await;
        let push = Header::new(Note::OPCODE, Flags::NONE, 0);
        match misbehaviour {
            Misbehaviour::TamperedPush => {
                let mut sealed = seal(&mut channel, push, &Note { seq: 1 });
                let last = sealed.len() - 1;
                sealed[last] ^= 0x01;
                peer.stream.write_all(&sealed).await.unwrap();
            }
            Misbehaviour::ReplayedPush => {
                let sealed = seal(&mut channel, push, &Note { seq: 1 });
                peer.stream.write_all(&sealed).await.unwrap();
                peer.stream.write_all(&sealed).await.unwrap();
            }
            Misbehaviour::DeletedPush => {
                let _deleted = seal(&mut channel, push, &Note { seq: 1 });
                let sealed = seal(&mut channel, push, &Note { seq: 2 });
                peer.stream.write_all(&sealed).await.unwrap();
            }
            Misbehaviour::PlainPush => {
                let mut out = BytesMut::new();
                frame::write_frame(
                    &mut out,
                    Framing::LengthPrefixed,
                    push,
                    &Note { seq: 1 },
                    usize::MAX,
                )
                .unwrap();
                peer.stream.write_all(&out).await.unwrap();
            }
            Misbehaviour::PlainAnswer => {
                let request = peer.recv().await.expect("a request");
                assert!(request.header.flags.is_encrypted(), "the request is sealed");
                let answer = Header::new(Sum::OPCODE, Flags::RESPONSE, request.header.request_id);
                let mut out = BytesMut::new();
                frame::write_frame(
                    &mut out,
                    Framing::LengthPrefixed,
                    answer,
                    &Sum(7),
                    usize::MAX,
                )
                .unwrap();
                peer.stream.write_all(&out).await.unwrap();
            }
            Misbehaviour::TamperedHeader => {
                let mut sealed = seal(&mut channel, push, &Note { seq: 1 });
                // The opcode's low byte (after the 4-byte prefix).
                sealed[4] ^= 0x01;
                peer.stream.write_all(&sealed).await.unwrap();
            }
        }
        let mut reason = None;
        while let Some(frame) = peer.recv().await {
            if frame.header.opcode == system::DISCONNECT {
                assert!(
                    !frame.header.flags.is_encrypted(),
                    "DISCONNECT goes out plain"
                );
                reason = Some(Disconnect::decode_body(&frame.body).unwrap().reason);
            }
        }
        let _ = report.send(reason);
    });
    (address, reported)
}

fn seal<P: Packet>(channel: &mut SecureChannel, header: Header, packet: &P) -> BytesMut {
    let mut out = BytesMut::new();
    channel
        .sealer
        .write_frame_with(
            &mut out,
            Framing::LengthPrefixed,
            header,
            usize::MAX,
            |out| packet.encode(out),
        )
        .unwrap();
    out
}

/// The server's side of a raw TCP connection.
struct Peer {
    stream: TcpStream,
    decoder: FrameDecoder,
    buf: BytesMut,
}

impl Peer {
    fn new(stream: TcpStream) -> Self {
        Self {
            stream,
            decoder: FrameDecoder::new(usize::MAX),
            buf: BytesMut::new(),
        }
    }

    async fn send_plain(&mut self, header: Header, body: &[u8]) {
        let mut out = BytesMut::new();
        frame::write_frame_with(
            &mut out,
            Framing::LengthPrefixed,
            header,
            usize::MAX,
            |out| out.extend_from_slice(body),
        )
        .unwrap();
        self.stream.write_all(&out).await.unwrap();
    }

    /// The next frame; `None` at the end of the stream (or a reset).
    async fn recv(&mut self) -> Option<Frame> {
        loop {
            if let Some(frame) = self.decoder.decode(&mut self.buf).unwrap() {
                return Some(frame);
            }
            match tokio::time::timeout(Duration::from_secs(5), self.stream.read_buf(&mut self.buf))
                .await
                .expect("the client acts within 5 s")
            {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }
}

#[tokio::test]
async fn a_frame_that_breaks_the_session_closes_the_connection_with_decrypt_failed() {
    let cases = [
        Misbehaviour::TamperedPush,
        Misbehaviour::ReplayedPush,
        Misbehaviour::DeletedPush,
        Misbehaviour::PlainPush,
        Misbehaviour::PlainAnswer,
        Misbehaviour::TamperedHeader,
    ];
    for misbehaviour in cases {
        let (address, reported) = misbehaving_server(misbehaviour).await;
        let client = Client::connect_tcp(address).await.unwrap();
        let mut notes = client.subscribe::<Note>();
        client.handshake(None).await.unwrap();
        if let Misbehaviour::PlainAnswer = misbehaviour {
            let result = client.request_async(&Add { a: 3, b: 4 }).await;
            assert!(
                matches!(
                    result,
                    Err(ClientError::Closed(CloseReason::DecryptFailed(_)))
                ),
                "{misbehaviour:?}: {result:?}"
            );
        }
        let mut states = client.state_changes();
        tokio::time::timeout(
            Duration::from_secs(5),
            states.wait_for(ConnectionState::is_closed),
        )
        .await
        .unwrap_or_else(|_| panic!("{misbehaviour:?}: still {:?}", client.state()))
        .unwrap();
        match client.close_reason() {
            Some(CloseReason::DecryptFailed(message)) => {
                assert!(!message.is_empty());
                let text = CloseReason::DecryptFailed(message).to_string();
                assert!(text.contains("DECRYPT_FAILED"), "{text}");
            }
            other => panic!("{misbehaviour:?}: expected DecryptFailed, got {other:?}"),
        }
        assert_eq!(
            tokio::time::timeout(Duration::from_secs(5), reported)
                .await
                .unwrap()
                .unwrap(),
            Some(DisconnectReason::DecryptFailed),
            "{misbehaviour:?}"
        );
        // The one good push of the replay case was delivered; the others
        // never reach the subscriber.
        let expected = matches!(misbehaviour, Misbehaviour::ReplayedPush) as usize;
        let mut delivered = 0;
        while notes.next().await.is_some() {
            delivered += 1;
        }
        assert_eq!(delivered, expected, "{misbehaviour:?}");
    }
}

#[tokio::test]
async fn a_handshake_answer_that_does_not_complete_is_a_handshake_error() {
    // The server answers the handshake with 48 bytes of garbage.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut peer = Peer::new(stream);
        let hello = peer.recv().await.unwrap();
        let answer = Header::new(system::HANDSHAKE, Flags::RESPONSE, hello.header.request_id);
        peer.send_plain(answer, &[0x5A; 48]).await;
        while peer.recv().await.is_some() {}
    });
    let client = Client::connect_tcp(address).await.unwrap();
    let error = client.handshake(None).await.unwrap_err();
    match &error {
        ClientError::Handshake(message) => {
            assert!(message.contains("does not complete"), "{message}")
        }
        other => panic!("expected Handshake, got {other:?}"),
    }
    // The two sides disagree about the session: the connection is closed.
    let mut states = client.state_changes();
    tokio::time::timeout(
        Duration::from_secs(5),
        states.wait_for(ConnectionState::is_closed),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(matches!(
        client.close_reason(),
        Some(CloseReason::Protocol(_))
    ));
}

/// Answers the client's NN handshake on `peer`.
async fn accept_handshake(peer: &mut Peer) -> SecureChannel {
    let hello = peer.recv().await.expect("a handshake");
    assert_eq!(hello.header.opcode, system::HANDSHAKE, "the first frame");
    let (reply, channel) = Responder::respond(&hello.body, None).unwrap();
    let answer = Header::new(system::HANDSHAKE, Flags::RESPONSE, hello.header.request_id);
    peer.send_plain(answer, &reply[..]).await;
    channel
}

/// The next frame from the client, opened; `None` at the end of the stream.
async fn recv_sealed(peer: &mut Peer, channel: &mut SecureChannel) -> Option<Frame> {
    let frame = peer.recv().await?;
    assert!(frame.header.flags.is_encrypted(), "{:?}", frame.header);
    let mut body = BytesMut::from(&frame.body[..]);
    channel.opener.open(&frame.header, &mut body).unwrap();
    Some(Frame {
        header: frame.header,
        body: body.freeze(),
    })
}

/// Accepts a client on `listener`, answers its NN handshake and waits for
/// its first (sealed) `PING`: the client is up.
async fn accept_secure_client(listener: &TcpListener) -> (Peer, SecureChannel) {
    let (stream, _) = listener.accept().await.unwrap();
    let mut peer = Peer::new(stream);
    let mut channel = accept_handshake(&mut peer).await;
    let ping = recv_sealed(&mut peer, &mut channel).await.unwrap();
    assert_eq!(ping.header.opcode, system::PING);
    (peer, channel)
}

/// `disconnect` as a plain frame: what anyone on the path can write.
fn plain_disconnect(disconnect: &Disconnect) -> BytesMut {
    let mut out = BytesMut::new();
    let header = Header::new(system::DISCONNECT, Flags::NONE, 0);
    frame::write_frame(
        &mut out,
        Framing::LengthPrefixed,
        header,
        disconnect,
        usize::MAX,
    )
    .unwrap();
    out
}

/// Contract v2, section 5.1: anyone on the path can write a plain
/// `DISCONNECT KICKED`. On a secure session the client takes it as a lost
/// connection and reconnects; a sealed one, from the server itself, is a
/// kick.
#[tokio::test]
async fn a_plain_disconnect_on_a_secure_link_only_loses_the_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (report, reported) = oneshot::channel();
    tokio::spawn(async move {
        let kicked = Disconnect::new(DisconnectReason::Kicked, "forged");
        let header = Header::new(system::DISCONNECT, Flags::NONE, 0);
        // The first connection: once the client is up, a plain (forged) kick.
        let (mut peer, _) = accept_secure_client(&listener).await;
        peer.stream
            .write_all(&plain_disconnect(&kicked))
            .await
            .unwrap();
        let answer = peer.recv().await.expect("the client's DISCONNECT");
        assert_eq!(answer.header, header, "plain");
        let reason = Disconnect::decode_body(&answer.body).unwrap().reason;
        // The second connection: a genuine (sealed) kick.
        let (mut peer, mut channel) = accept_secure_client(&listener).await;
        let kick = seal(&mut channel, header, &kicked);
        peer.stream.write_all(&kick).await.unwrap();
        while peer.recv().await.is_some() {}
        let _ = report.send(reason);
    });
    let mut reconnect = ternio_client::ReconnectPolicy::default();
    reconnect.initial_delay = Duration::from_millis(10);
    let mut config = ClientConfig::default();
    config.secure = Some(SecureConfig::anonymous());
    config.reconnect = Some(reconnect);
    // (This peer scripts every frame: no resumption ticket asked for.)
    config.resume = false;
    let client = Client::connect_tcp_with(address, config).await.unwrap();
    let mut states = client.state_changes();
    // In flight when the link is lost: it fails, the client goes on.
    let lost = client.ping().await.unwrap_err();
    assert!(
        matches!(lost, ClientError::Closed(CloseReason::DecryptFailed(_))),
        "{lost:?}"
    );
    // The plain kick made it reconnect, not close.
    tokio::time::timeout(
        Duration::from_secs(10),
        states.wait_for(|state| *state == ConnectionState::Connected),
    )
    .await
    .expect("the client reconnects")
    .unwrap();
    assert_eq!(client.close_reason(), None);
    // The second connection's PING brings the sealed kick.
    assert!(client.ping().await.is_err());
    tokio::time::timeout(
        Duration::from_secs(10),
        states.wait_for(ConnectionState::is_closed),
    )
    .await
    .expect("the sealed kick closes the client")
    .unwrap();
    match client.close_reason() {
        Some(CloseReason::Disconnected(disconnect)) => {
            assert_eq!(disconnect.reason, DisconnectReason::Kicked)
        }
        other => panic!("expected the sealed kick, got {other:?}"),
    }
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), reported)
            .await
            .unwrap()
            .unwrap(),
        DisconnectReason::DecryptFailed,
        "the client told the server why it left"
    );
}

/// Contract v2, section 5.1: the receiver of a plain frame on a secure
/// session answers `DISCONNECT DECRYPT_FAILED`, "other than that
/// DISCONNECT": a plain `DECRYPT_FAILED` is the one plain frame a peer may
/// send, and is not answered. The link is lost; the client reconnects.
#[tokio::test]
async fn a_plain_decrypt_failed_is_not_answered() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (report, reported) = oneshot::channel();
    tokio::spawn(async move {
        let (mut peer, _) = accept_secure_client(&listener).await;
        let failed = Disconnect::new(DisconnectReason::DecryptFailed, "a frame did not open");
        peer.stream
            .write_all(&plain_disconnect(&failed))
            .await
            .unwrap();
        // Whatever the client writes before it closes the socket.
        let answered = peer.recv().await.map(|frame| frame.header);
        // It comes back.
        let (stream, _) = listener.accept().await.unwrap();
        let mut peer = Peer::new(stream);
        let _ = accept_handshake(&mut peer).await;
        let _ = report.send(answered);
        while peer.recv().await.is_some() {}
    });
    let mut reconnect = ternio_client::ReconnectPolicy::default();
    reconnect.initial_delay = Duration::from_millis(10);
    let mut config = ClientConfig::default();
    config.secure = Some(SecureConfig::anonymous());
    config.reconnect = Some(reconnect);
    config.resume = false;
    let client = Client::connect_tcp_with(address, config).await.unwrap();
    let lost = client.ping().await.unwrap_err();
    assert!(
        matches!(lost, ClientError::Closed(CloseReason::DecryptFailed(_))),
        "{lost:?}"
    );
    let answered = tokio::time::timeout(Duration::from_secs(10), reported)
        .await
        .expect("the client reconnects")
        .unwrap();
    assert_eq!(answered, None, "the client answered a plain DECRYPT_FAILED");
    assert_eq!(client.close_reason(), None);
}

/// The client seals its PONG, follows the server's REKEY, and rekeys on its
/// own by its policy (section 5.2).
#[tokio::test]
async fn the_client_seals_pongs_and_rekeys_both_ways() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (report, reported) = oneshot::channel();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut peer = Peer::new(stream);
        let mut channel = accept_handshake(&mut peer).await;
        let ping = seal(
            &mut channel,
            Header::new(system::PING, Flags::NONE, 5),
            &system::Ping { value: 42 },
        );
        peer.stream.write_all(&ping).await.unwrap();
        let pong = recv_sealed(&mut peer, &mut channel).await.unwrap();
        assert_eq!(pong.header.opcode, system::PONG);
        assert_eq!(pong.header.request_id, 5);
        assert_eq!(system::Pong::decode_body(&pong.body).unwrap().value, 42);
        // The server's REKEY, then a push under the new key.
        let mut out = BytesMut::new();
        channel
            .sealer
            .write_rekey(&mut out, Framing::LengthPrefixed)
            .unwrap();
        out.extend_from_slice(&seal(
            &mut channel,
            Header::new(Note::OPCODE, Flags::NONE, 0),
            &Note { seq: 9 },
        ));
        peer.stream.write_all(&out).await.unwrap();
        // Five requests from the client, whose policy rekeys every 2 frames.
        let (mut rekeys, mut answered) = (0, 0);
        while answered < 5 {
            let frame = recv_sealed(&mut peer, &mut channel).await.unwrap();
            if frame.header.opcode == system::REKEY {
                rekeys += 1;
                continue;
            }
            let add = Add::decode_body(&frame.body).unwrap();
            let answer = Header::new(Sum::OPCODE, Flags::RESPONSE, frame.header.request_id);
            let sum = seal(&mut channel, answer, &Sum(add.a + add.b));
            peer.stream.write_all(&sum).await.unwrap();
            answered += 1;
        }
        let _ = report.send(rekeys);
        while peer.recv().await.is_some() {}
    });
    let mut config = ClientConfig::default();
    config.secure = Some(SecureConfig::anonymous());
    config.rekey = ternio::RekeyPolicy::new(2, Duration::from_secs(3600));
    let client = Client::connect_tcp_with(address, config).await.unwrap();
    let mut notes = client.subscribe::<Note>();
    assert_eq!(notes.next().await, Some(Note { seq: 9 }));
    for a in 0..5 {
        let sum: Sum = client.request_async(&Add { a, b: 1 }).await.unwrap();
        assert_eq!(sum, Sum(a + 1));
    }
    // PONG and request 1 under the first key; REKEY before requests 2 and 4.
    assert_eq!(reported.await.unwrap(), 2);
}
