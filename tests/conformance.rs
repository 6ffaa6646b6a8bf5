//! The checklist of docs/CONFORMANCE.md, run against the conformance
//! server (`ternio_examples::conformance`, as `examples/conformance_server`
//! serves it) on real sockets: every check with the Rust client over TCP and
//! WebSocket, plain and secure (NN and NK), and the ones whose wire order
//! matters with a raw client that writes and reads frames itself (the JSON
//! vectors of conformance/vectors/ included).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use ternio::Packet;
use ternio::protocol::frame::{Flags, Header};
use ternio::protocol::system::{self, Disconnect, ErrorBody, Ping, Pong};
use ternio::protocol::{Decode, Encode};
use ternio::{DisconnectReason, ErrorCode, Identity, ServerHandle};
use ternio_client::{Client, ClientConfig, ClientError, CloseReason};
use ternio_examples::conformance::{
    self, BurstDone, Crash, Echo, Fail, Guarded, Held, Hold, Kick, Limited, Notice, PushBurst,
    Release, Released, SecureEcho, Slow,
};
use ternio_tests::SealedConnection;
use ternio_tests::{RawConnection, spawn_started};

/// The idle timeout of the server under test: it pings after 1 s of silence.
const IDLE: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Transport {
    Tcp,
    Ws,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Session {
    Plain,
    Nn,
    Nk,
}

const SESSIONS: [Session; 3] = [Session::Plain, Session::Nn, Session::Nk];
const TRANSPORTS: [Transport; 2] = [Transport::Tcp, Transport::Ws];

struct Kit {
    tcp: SocketAddr,
    ws: SocketAddr,
    _server: ServerHandle,
}

fn start() -> Kit {
    let server = conformance::conformance_server(IDLE)
        .map_tcp("127.0.0.1:0")
        .map_websocket("127.0.0.1:0", "/ws")
        .build()
        .expect("the conformance server builds");
    let (tcp, ws) = (server.tcp_addrs()[0], server.websocket_addrs()[0]);
    let handle = server.handle();
    tokio::spawn(server.run());
    Kit {
        tcp,
        ws,
        _server: handle,
    }
}

/// The key a client pins: the vectors' `server-static-public`.
fn pinned() -> [u8; 32] {
    *Identity::from_private_key(conformance::IDENTITY_PRIVATE_KEY).public_key()
}

/// A client without keepalive (so that only the server's `PING`s keep
/// the connection alive) nor reconnection, with `session` set up.
async fn client(kit: &Kit, transport: Transport, session: Session) -> Client {
    let mut config = ClientConfig::default();
    config.keepalive = None;
    config.reconnect = None;
    let client = match transport {
        Transport::Tcp => Client::connect_tcp_with(kit.tcp, config).await,
        Transport::Ws => Client::connect_ws_with(&format!("ws://{}/ws", kit.ws), config).await,
    }
    .expect("connects");
    match session {
        Session::Plain => {}
        Session::Nn => client.handshake(None).await.expect("NN handshake"),
        Session::Nk => client
            .handshake(Some(&pinned()))
            .await
            .expect("NK handshake"),
    }
    client
}

fn echo(text: &'static str) -> Echo {
    Echo {
        payload: Bytes::from_static(text.as_bytes()),
    }
}

async fn assert_alive(client: &Client, what: &str) {
    let answer = client.request_async(&echo("alive")).await;
    assert_eq!(answer.unwrap(), echo("alive"), "{what}: still up");
}

/// The error code of a request's answer.
fn code<T: std::fmt::Debug>(answer: Result<T, ClientError>) -> Option<ErrorCode> {
    answer.expect_err("an error answer").code()
}

/// Check 1: echo, and check 6 (`SecureEcho`): plain refused, sealed answered.
async fn echo_check(kit: &Kit, transport: Transport, session: Session) {
    let client = client(kit, transport, session).await;
    assert_eq!(
        client.request_async(&echo("ping")).await.unwrap(),
        echo("ping")
    );
    let secure = SecureEcho {
        payload: Bytes::from_static(b"sealed"),
    };
    let answer = client.request_async(&secure).await;
    if session == Session::Plain {
        assert_eq!(code(answer), Some(ErrorCode::EncryptionRequired));
    } else {
        assert_eq!(answer.unwrap(), secure);
    }
}

/// Check 2: two requests answered in the reverse order.
async fn out_of_order_check(kit: &Kit, transport: Transport, session: Session) {
    let client = Arc::new(client(kit, transport, session).await);
    let order = Arc::new(AtomicUsize::new(0));
    // Polled once before it is spawned: the Hold is on the wire before
    // the Release.
    let hold = spawn_started({
        let (client, order) = (Arc::clone(&client), Arc::clone(&order));
        async move {
            let held = client.request_async(&Hold { tag: 7 }).await;
            (held, order.fetch_add(1, Ordering::SeqCst))
        }
    })
    .await;
    let released = client.request_async(&Release { tag: 7 }).await;
    let released_at = order.fetch_add(1, Ordering::SeqCst);
    let (held, held_at) = hold.await.unwrap();
    assert_eq!(released.unwrap(), Released { tag: 7 });
    assert_eq!(
        held.unwrap(),
        Held {
            tag: 7,
            released: true
        }
    );
    // The wire order (Release's answer first) is checked by the raw client
    // below; here both tasks wake when their answers are in, in either order.
    let _ = (released_at, held_at);
}

/// Check 3: pushes arrive between answers, in order, and are not taken
/// for answers.
async fn pushes_check(kit: &Kit, transport: Transport, session: Session) {
    let client = client(kit, transport, session).await;
    let mut notices = client.subscribe_with_buffer::<Notice>(256);
    let between = echo("between");
    let (burst, echoed) = tokio::join!(
        client.request_async(&PushBurst { count: 50 }),
        client.request_async(&between)
    );
    assert_eq!(burst.unwrap(), BurstDone { count: 50 });
    assert_eq!(echoed.unwrap(), echo("between"));
    for seq in 0..50 {
        let notice = tokio::time::timeout(Duration::from_secs(5), notices.next())
            .await
            .expect("every push arrives")
            .expect("the subscription is open");
        assert_eq!(
            notice,
            Notice {
                seq,
                text: format!("notice {seq}")
            }
        );
    }
}

/// A packet at an opcode the server does not serve.
#[derive(Debug, Clone, PartialEq, Packet)]
#[packet(opcode = 0x0FFF, response = ())]
struct Unserved {
    nothing: u8,
}

/// A body that does not decode as [`Fail`] (a `u8` where a `u16` and a
/// string are expected), at `Fail`'s opcode.
#[derive(Debug, Clone, PartialEq, Packet)]
#[packet(opcode = 0x0105, response = ())]
struct BadFail {
    code: u8,
}

/// Check 4: an error answer of every code a client can meet, each leaving
/// the connection up.
async fn errors_check(kit: &Kit, transport: Transport, session: Session) {
    let client = client(kit, transport, session).await;
    for number in (1..=9).chain([100, 4242]) {
        let answer = client
            .request_async(&Fail {
                code: number,
                message: format!("error {number}"),
            })
            .await;
        let error = answer.expect_err("an error answer");
        assert_eq!(error.code().map(ErrorCode::to_u16), Some(number), "{error}");
    }
    // Codes 11 to 99 are not assigned: the server sends 7 instead.
    let unassigned = client
        .request_async(&Fail {
            code: 50,
            message: "unassigned".into(),
        })
        .await;
    assert_eq!(code(unassigned), Some(ErrorCode::Internal));
    client
        .request_async(&Fail {
            code: 0,
            message: String::new(),
        })
        .await
        .expect("code 0 is acknowledged");
    assert_eq!(
        code(client.request_async(&Unserved { nothing: 0 }).await),
        Some(ErrorCode::UnknownOpcode)
    );
    assert_eq!(
        code(client.request_async(&BadFail { code: 1 }).await),
        Some(ErrorCode::Malformed)
    );
    assert_eq!(
        code(client.request_async(&Guarded).await),
        Some(ErrorCode::Unauthorized)
    );
    client
        .request_async(&Limited)
        .await
        .expect("the first is let through");
    assert_eq!(
        code(client.request_async(&Limited).await),
        Some(ErrorCode::RateLimited)
    );
    assert_eq!(
        code(client.request_async(&Slow).await),
        Some(ErrorCode::Timeout)
    );
    assert_eq!(
        code(client.request_async(&Crash).await),
        Some(ErrorCode::Internal)
    );
    assert_alive(&client, "after the errors").await;
}

/// Check 5 (the `HANDSHAKE_FAILED` part of check 4): NK with another key
/// is refused with error 9 and the connection goes on plain. (The Rust
/// client refuses a second handshake itself; the raw client below checks
/// the server's error 9 to one.)
async fn handshake_errors_check(kit: &Kit, transport: Transport) {
    let client = client(kit, transport, Session::Nn).await;
    let again = client.handshake(None).await;
    assert!(again.is_err(), "a second handshake is refused");
    assert_alive(&client, "after a second handshake").await;
    let plain = client_plain(kit, transport).await;
    let wrong = plain
        .handshake(Some(&[7u8; 32]))
        .await
        .expect_err("refused");
    // The server's error 9 to an NK handshake, as the Rust client reports it.
    assert!(matches!(wrong, ClientError::KeyRejected(_)), "{wrong}");
    // (The Rust client then sends nothing plain: it asked for a secure
    // session. The server keeps the connection, plain.)
}

async fn client_plain(kit: &Kit, transport: Transport) -> Client {
    client(kit, transport, Session::Plain).await
}

/// Check 7: the server rekeys within a burst of sealed pushes; the client
/// opens everything after it.
async fn rekey_check(kit: &Kit, transport: Transport, session: Session) {
    let client = client(kit, transport, session).await;
    let mut notices = client.subscribe_with_buffer::<Notice>(256);
    let burst = client.request_async(&PushBurst { count: 40 }).await;
    assert_eq!(burst.unwrap(), BurstDone { count: 40 });
    for seq in 0..40 {
        let notice = tokio::time::timeout(Duration::from_secs(5), notices.next())
            .await
            .expect("every push arrives")
            .expect("open");
        assert_eq!(notice.seq, seq);
    }
    assert_alive(&client, "after the server's rekeys").await;
}

/// Check 8: `DISCONNECT KICKED` with its text, then the close; the client
/// reports it and does not take it for a lost connection.
async fn disconnect_check(kit: &Kit, transport: Transport, session: Session) {
    let client = client(kit, transport, session).await;
    let _ = client
        .request_async(&Kick {
            text: "conformance kick".into(),
        })
        .await;
    let mut states = client.state_changes();
    tokio::time::timeout(
        Duration::from_secs(5),
        states.wait_for(|state| state.is_closed()),
    )
    .await
    .expect("the client sees the close")
    .expect("state changes");
    match client.close_reason() {
        Some(CloseReason::Disconnected(Disconnect { reason, message })) => {
            assert_eq!(reason, DisconnectReason::Kicked);
            assert_eq!(message, "conformance kick");
        }
        other => panic!("{transport:?} {session:?}: closed with {other:?}"),
    }
}

/// Check 9: the client answers the server's `PING`s, so the connection
/// outlives the idle timeout with nothing else on it.
async fn ping_check(kit: &Kit, transport: Transport, session: Session) {
    let client = client(kit, transport, session).await;
    tokio::time::sleep(IDLE + IDLE / 2).await;
    assert_eq!(client.close_reason(), None, "{transport:?} {session:?}");
    assert_alive(&client, "after the idle timeout").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checklist_with_the_rust_client() {
    let kit = start();
    for transport in TRANSPORTS {
        for session in SESSIONS {
            echo_check(&kit, transport, session).await;
            out_of_order_check(&kit, transport, session).await;
            pushes_check(&kit, transport, session).await;
            errors_check(&kit, transport, session).await;
            if session != Session::Plain {
                rekey_check(&kit, transport, session).await;
            }
            disconnect_check(&kit, transport, session).await;
        }
        handshake_errors_check(&kit, transport).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_answers_the_servers_pings() {
    let kit = start();
    let mut checks = Vec::new();
    for transport in TRANSPORTS {
        for session in [Session::Plain, Session::Nk] {
            let kit = &kit;
            checks.push(async move { ping_check(kit, transport, session).await });
        }
    }
    futures_util::future::join_all(checks).await;
}

/// Reads `name`'s bytes from conformance/vectors/`file`.json.
fn vector(file: &str, name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../conformance/vectors")
        .join(format!("{file}.json"));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let hex = json["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|vector| vector["name"] == name)
        .unwrap_or_else(|| panic!("{name} in {}", path.display()))["hex"]
        .as_str()
        .unwrap()
        .to_owned();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn request_frame<P: Packet + Encode>(packet: &P, id: u32) -> Vec<u8> {
    let mut out = bytes::BytesMut::new();
    ternio::protocol::frame::write_frame(
        &mut out,
        ternio::protocol::frame::Framing::LengthPrefixed,
        Header::new(P::OPCODE, Flags::NONE, id),
        packet,
        usize::MAX,
    )
    .unwrap();
    out.to_vec()
}

/// Checks 1 and 2 on the wire: the vector `echo-request` is answered with
/// exactly `echo-response`; a `Hold` and a `Release` written together are
/// answered Release first.
#[tokio::test]
async fn on_the_wire_answers_come_as_the_vectors_and_out_of_order() {
    let kit = start();
    let mut raw = RawConnection::connect(kit.tcp).await;
    raw.send_raw(&vector("frames", "echo-request"))
        .await
        .unwrap();
    let answer = raw.recv().await.unwrap();
    let mut wire = ((7 + answer.body.len()) as u32).to_le_bytes().to_vec();
    wire.extend_from_slice(&answer.header.to_bytes());
    wire.extend_from_slice(&answer.body);
    assert_eq!(wire, vector("frames", "echo-response"));

    let mut both = request_frame(&Hold { tag: 1 }, 11);
    both.extend(request_frame(&Release { tag: 1 }, 12));
    raw.send_raw(&both).await.unwrap();
    let first = raw.recv().await.unwrap();
    let second = raw.recv().await.unwrap();
    assert_eq!(
        first.header,
        Header::new(Released::OPCODE, Flags::RESPONSE, 12)
    );
    assert_eq!(
        second.header,
        Header::new(Held::OPCODE, Flags::RESPONSE, 11)
    );
    assert_eq!(
        Held::decode_body(&second.body).unwrap(),
        Held {
            tag: 1,
            released: true
        }
    );

    // Check 10: a long echo is answered COMPRESSED, and decompresses to it.
    let long = Echo {
        payload: Bytes::from("ternio ".repeat(40)),
    };
    raw.request(&long, 14).await;
    let compressed = raw.recv().await.unwrap();
    assert_eq!(
        compressed.header,
        Header::new(Echo::OPCODE, Flags::RESPONSE.with(Flags::COMPRESSED), 14)
    );
    let plain = compressed.decompressed(1 << 20).unwrap();
    assert_eq!(Echo::decode_body(&plain.body).unwrap(), long);

    // An error answer on the wire: RESPONSE | ERROR, the request's opcode,
    // code then message.
    raw.send_raw(&request_frame(
        &Fail {
            code: 4,
            message: "slow down".into(),
        },
        13,
    ))
    .await
    .unwrap();
    let error = raw.recv().await.unwrap();
    assert_eq!(
        error.header,
        Header::new(Fail::OPCODE, Flags::RESPONSE_ERROR, 13)
    );
    let body = ErrorBody::parse(&error.body).unwrap();
    assert_eq!(
        (body.code, body.message.as_str()),
        (ErrorCode::RateLimited, "slow down")
    );
}

/// Check 7 on the wire: a raw secure session sees sealed `REKEY` frames
/// (id 0, empty body) among the pushes, and opens every frame after them.
#[tokio::test]
async fn on_the_wire_the_server_rekeys() {
    let kit = start();
    let mut connection = SealedConnection::secure(kit.tcp).await;
    let count = 40;
    connection
        .send_frame(Header::new(PushBurst::OPCODE, Flags::NONE, 1), &{
            let mut body = bytes::BytesMut::new();
            PushBurst { count }.encode(&mut body);
            body
        })
        .await;
    let (mut rekeys, mut notices) = (0, 0);
    loop {
        let frame = connection.recv().await.expect("open");
        assert!(frame.header.flags.is_encrypted(), "{:?}", frame.header);
        match frame.header.opcode {
            system::REKEY => {
                assert_eq!(frame.header.request_id, 0);
                assert!(frame.body.is_empty());
                rekeys += 1;
            }
            opcode if opcode == Notice::OPCODE => {
                assert_eq!(Notice::decode_body(&frame.body).unwrap().seq, notices);
                notices += 1;
            }
            opcode if opcode == BurstDone::OPCODE => break,
            other => panic!("unexpected opcode {other:#06x}"),
        }
    }
    assert_eq!(notices, count);
    // 41 sealed frames after the handshake answer, a new key every 8.
    assert!(rekeys >= 4, "{rekeys} rekeys");
}

/// Checks 8 and 9 on the wire: the server `PING`s a quiet connection; one
/// that answers with the `PONG` stays up past the idle timeout, one that
/// does not gets `DISCONNECT IDLE_TIMEOUT`. `Kick` brings `DISCONNECT
/// KICKED` with its text.
#[tokio::test]
async fn on_the_wire_the_server_pings_and_disconnects() {
    let kit = start();
    let (mut answering, mut silent) = (
        RawConnection::connect(kit.tcp).await,
        RawConnection::connect(kit.tcp).await,
    );
    let started = tokio::time::Instant::now();
    while started.elapsed() < IDLE + IDLE / 2 {
        let ping = answering.recv().await.expect("a PING");
        assert_eq!(ping.header.opcode, system::PING);
        assert_ne!(ping.header.request_id, 0, "a PING request");
        let value = Ping::decode_body(&ping.body).unwrap().value;
        answering
            .send(
                Header::new(system::PONG, Flags::RESPONSE, ping.header.request_id),
                &Pong { value },
            )
            .await;
    }
    answering.request(&echo("alive"), 5).await;
    let answer = answering.recv().await.unwrap();
    assert_eq!(answer.header, Header::new(Echo::OPCODE, Flags::RESPONSE, 5));

    let ping = silent.recv().await.expect("a PING");
    assert_eq!(ping.header.opcode, system::PING);
    silent
        .expect_disconnect(DisconnectReason::IdleTimeout)
        .await;

    answering.request(&Kick { text: "bye".into() }, 6).await;
    loop {
        let frame = answering.recv().await.expect("a DISCONNECT");
        if frame.header.opcode == system::DISCONNECT {
            let disconnect = Disconnect::decode_body(&frame.body).unwrap();
            assert_eq!(disconnect.reason, DisconnectReason::Kicked);
            assert_eq!(disconnect.message, "bye");
            break;
        }
        // The acknowledgement may come first.
        assert_eq!(frame.header, Header::new(Kick::OPCODE, Flags::RESPONSE, 6));
    }
    assert!(answering.recv().await.is_none(), "closed after DISCONNECT");
}

/// Check 5 on the wire: a second `HANDSHAKE` on a secure session is
/// answered (sealed) with error 9 `HANDSHAKE_FAILED`, and the session goes on.
#[tokio::test]
async fn on_the_wire_a_second_handshake_is_refused() {
    let kit = start();
    let mut connection = SealedConnection::secure(kit.tcp).await;
    let mut initiator = ternio::protocol::secure::Initiator::new(None).unwrap();
    let body = initiator.request_body().unwrap();
    connection
        .send_frame(Header::new(system::HANDSHAKE, Flags::NONE, 2), &body)
        .await;
    let answer = connection.recv().await.unwrap();
    assert_eq!(
        answer.header,
        Header::new(
            system::HANDSHAKE,
            Flags::RESPONSE_ERROR.with(Flags::ENCRYPTED),
            2
        )
    );
    assert_eq!(
        ErrorBody::parse(&answer.body).unwrap().code,
        ErrorCode::HandshakeFailed
    );
    let mut body = bytes::BytesMut::new();
    echo("still").encode(&mut body);
    connection
        .send_frame(Header::new(Echo::OPCODE, Flags::NONE, 3), &body)
        .await;
    let answer = connection.recv().await.unwrap();
    assert_eq!(Echo::decode_body(&answer.body).unwrap(), echo("still"));
}
