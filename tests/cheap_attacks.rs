//! Peers that cost little to run and much to serve: a frame trickled a byte
//! at a time, a WebSocket message whose last fragment never comes, pings
//! instead of frames, a large frame before the handshake. Each is what an
//! attacker's client would do; each must end within the server's timeouts.
//! (The frame and idle timeouts of the engine itself, a frame trickled a
//! byte at a time included, are checked to the millisecond on paused time
//! in `in_memory.rs`.)

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use ternio::DisconnectReason;
use ternio::protocol::frame::{self, Flags, Frame, Framing, Header};
use ternio::protocol::system::{self, Disconnect};
use ternio::protocol::{Decode, Packet};
use ternio_tests::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::Frame as WsFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Short timeouts, so that the tests wait seconds, not minutes.
const FRAME_TIMEOUT: Duration = Duration::from_millis(800);

/// How long a test waits for the server to act (wide: a loaded machine).
const PATIENCE: Duration = Duration::from_secs(20);

/// The next frame's DISCONNECT reason, or `None` if the server closed
/// without one or sent something else first.
async fn disconnect(raw: &mut RawConnection) -> Option<DisconnectReason> {
    let frame = raw.recv().await?;
    (frame.header.opcode == system::DISCONNECT)
        .then(|| Disconnect::decode_body(&frame.body).unwrap().reason)
}

/// Bytes written one every 100 ms, until the server closes or `PATIENCE`
/// runs out; returns how long the server took.
async fn trickle(stream: &mut TcpStream, bytes: &[u8]) -> Duration {
    let started = Instant::now();
    for byte in bytes {
        if stream.write_all(&[*byte]).await.is_err() || started.elapsed() > PATIENCE {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    started.elapsed()
}

/// Connects a raw WebSocket to the test server.
async fn websocket(address: std::net::SocketAddr) -> Ws {
    let (ws, _) = tokio_tungstenite::connect_async(format!("ws://{address}/ws"))
        .await
        .unwrap();
    ws
}

/// Sends pings every 100 ms until the server closes (returns the reason
/// of its DISCONNECT, if it sent one) or `PATIENCE` runs out (`Err`).
async fn ping_until_closed(ws: &mut Ws) -> Result<Option<DisconnectReason>, Duration> {
    let started = Instant::now();
    let mut reason = None;
    while started.elapsed() < PATIENCE {
        if ws
            .send(Message::Ping(Bytes::from_static(b"hi")))
            .await
            .is_err()
        {
            return Ok(reason);
        }
        loop {
            match tokio::time::timeout(Duration::from_millis(100), ws.next()).await {
                Err(_) => break,
                Ok(None | Some(Err(_))) => return Ok(reason),
                Ok(Some(Ok(Message::Binary(bytes)))) => {
                    let frame = Frame::parse(bytes, usize::MAX).unwrap();
                    if frame.header.opcode == system::DISCONNECT {
                        reason = Some(Disconnect::decode_body(&frame.body).unwrap().reason);
                    }
                }
                Ok(Some(Ok(Message::Close(_)))) => return Ok(reason),
                Ok(Some(Ok(_))) => {}
            }
        }
    }
    Err(started.elapsed())
}

#[tokio::test]
async fn an_unfinished_websocket_message_kept_alive_by_pings_is_closed() {
    let (_, ws_address, _server) = start_server_with_ws(|b| {
        b.frame_timeout(FRAME_TIMEOUT)
            .idle_timeout(Some(Duration::from_secs(60)))
    });
    let mut ws = websocket(ws_address).await;
    // The first fragment of a binary message (FIN clear); its last never comes.
    let first = WsFrame::message(
        Bytes::from_static(&[1, 0, 0]),
        OpCode::Data(Data::Binary),
        false,
    );
    ws.send(Message::Frame(first)).await.unwrap();
    let reason = ping_until_closed(&mut ws)
        .await
        .unwrap_or_else(|after| panic!("still open after {after:?}"));
    assert_eq!(reason, Some(DisconnectReason::IdleTimeout));
}

/// The same, with the first fragment in the same write as a whole message
/// before it: the server reads both at once, returns the whole one, and
/// must still see the unfinished one. (Before, the bytes of the read that
/// completed a message all counted as settled: the fragment escaped the
/// frame timeout, held until the idle timeout.)
#[tokio::test]
async fn an_unfinished_websocket_message_behind_a_whole_one_is_closed() {
    let (_, ws_address, _server) = start_server_with_ws(|b| {
        b.frame_timeout(FRAME_TIMEOUT)
            .idle_timeout(Some(Duration::from_secs(60)))
    });
    let mut ws = websocket(ws_address).await;
    let first = WsFrame::message(
        Bytes::from_static(&[1, 0, 0]),
        OpCode::Data(Data::Binary),
        false,
    );
    let echo = Echo {
        payload: Bytes::from_static(b"whole"),
    };
    ws.feed(ws_request(&echo, 1)).await.unwrap();
    ws.feed(Message::Frame(first)).await.unwrap();
    ws.flush().await.unwrap();
    let reason = ping_until_closed(&mut ws)
        .await
        .unwrap_or_else(|after| panic!("still open after {after:?}"));
    assert_eq!(reason, Some(DisconnectReason::IdleTimeout));
}

#[tokio::test]
async fn websocket_pings_alone_do_not_keep_a_connection_open() {
    let (_, ws_address, _server) = start_server_with_ws(|b| {
        b.frame_timeout(Duration::from_secs(600))
            .idle_timeout(Some(Duration::from_millis(800)))
    });
    let mut ws = websocket(ws_address).await;
    let reason = ping_until_closed(&mut ws)
        .await
        .unwrap_or_else(|after| panic!("still open after {after:?}"));
    assert_eq!(reason, Some(DisconnectReason::IdleTimeout));
}

#[tokio::test]
async fn whole_frames_sent_slowly_but_steadily_are_served() {
    // Each frame whole within the frame timeout, the connection busy far
    // longer than it: nothing is closed.
    let (address, _server) = start_server(|b| b.frame_timeout(FRAME_TIMEOUT));
    let mut raw = RawConnection::connect(address).await;
    let started = Instant::now();
    let mut id = 0;
    while started.elapsed() < FRAME_TIMEOUT * 3 {
        id += 1;
        let echo = Echo {
            payload: Bytes::from_static(b"steady"),
        };
        let mut bytes = ternio::protocol::BytesMut::new();
        frame::write_frame(
            &mut bytes,
            Framing::LengthPrefixed,
            Header::new(Echo::OPCODE, Flags::NONE, id),
            &echo,
            usize::MAX,
        )
        .unwrap();
        // Half now, half 100 ms later.
        let half = bytes.len() / 2;
        raw.send_raw(&bytes[..half]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        raw.send_raw(&bytes[half..]).await.unwrap();
        let answer = raw.recv().await.expect("answered");
        assert_eq!(answer.header.request_id, id);
    }
}

#[tokio::test]
async fn before_the_handshake_a_server_that_requires_encryption_takes_only_small_frames() {
    let (address, _server) = start_server(|b| b.require_encryption(true));
    let mut raw = RawConnection::connect(address).await;
    let echo = Echo {
        payload: Bytes::from(vec![1u8; 8 * 1024]),
    };
    raw.send(Header::new(Echo::OPCODE, Flags::NONE, 1), &echo)
        .await;
    assert_eq!(
        disconnect(&mut raw).await,
        Some(DisconnectReason::FrameTooLarge)
    );
    // The same frame, sealed after a handshake, is served.
    let client = ternio_client::Client::builder()
        .tcp(address.to_string())
        .secure(ternio_client::SecureConfig::anonymous())
        .connect()
        .await
        .unwrap();
    assert_echoed(&client, echo.payload).await;
}

/// Waits (within `PATIENCE`) until `causes` holds a close cause.
async fn first_cause(
    causes: &std::sync::Mutex<Vec<ternio::CloseCause>>,
) -> Option<ternio::CloseCause> {
    let started = Instant::now();
    while started.elapsed() < PATIENCE {
        if let Some(cause) = causes.lock().unwrap().first() {
            return Some(cause.clone());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// Runs a server with `config`, sends it `requests` echoes of 256 KiB
/// from a client that reads `chunk` bytes every `pause` (with a 4 KiB
/// receive buffer when `small_buffer`), and returns why the server closed
/// the connection, if it did within `PATIENCE`.
async fn close_cause_of_slow_reader(
    config: ternio::ServerConfig,
    requests: usize,
    chunk: usize,
    pause: Duration,
    small_buffer: bool,
) -> Option<ternio::CloseCause> {
    let causes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = std::sync::Arc::clone(&causes);
    let (address, _server) = start_server(move |b| {
        b.config(config)
            .on_disconnect(move |_, cause| seen.lock().unwrap().push(cause.clone()))
    });
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    if small_buffer {
        socket.set_recv_buffer_size(4096).unwrap();
    }
    let stream = socket.connect(address).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let mut request = ternio::protocol::BytesMut::new();
    let echo = Echo {
        payload: Bytes::from(vec![1; 256 * 1024]),
    };
    frame::write_frame(
        &mut request,
        Framing::LengthPrefixed,
        Header::new(Echo::OPCODE, Flags::NONE, 1),
        &echo,
        usize::MAX,
    )
    .unwrap();
    tokio::spawn(async move {
        for _ in 0..requests {
            if writer.write_all(&request).await.is_err() {
                break;
            }
        }
    });
    let reading = tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        let mut buf = vec![0u8; chunk];
        loop {
            match reader.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => tokio::time::sleep(pause).await,
            }
        }
    });
    let cause = first_cause(&causes).await;
    reading.abort();
    cause
}

/// A peer that reads far less than the minimum drain rate while its
/// replies pile up is closed as a slow consumer.
#[tokio::test]
async fn a_peer_that_reads_far_too_little_is_a_slow_consumer() {
    let mut config = ternio::ServerConfig::default();
    config.write_timeout = Duration::from_millis(500);
    config.min_drain_rate = 256 * 1024;
    config.outbound_high_water = 64 * 1024;
    // 40 echoes of 256 KiB, more than the socket buffers hold; 512 bytes
    // read every 50 ms: 10 KiB/s, far below the 256 KiB/s asked.
    let cause = close_cause_of_slow_reader(config, 40, 512, Duration::from_millis(50), true).await;
    assert_eq!(
        cause,
        Some(ternio::CloseCause::Disconnected(
            DisconnectReason::SlowConsumer
        ))
    );
}

/// Section 5 and the handshake budget: a flood of handshakes gets error 8
/// past the server-wide budget instead of the CPU.
#[tokio::test]
async fn handshakes_past_the_server_budget_are_overloaded() {
    use ternio::protocol::ErrorCode;
    use ternio::protocol::secure::Initiator;
    use ternio::protocol::system::ErrorBody;
    let (address, _server) = start_server(|b| b.max_handshakes_per_second(Some(5)));
    // Twenty connections first, then their handshakes all at once, so that
    // the budget's refill during the flood is small however slow the
    // machine: it is measured, not assumed.
    let mut flood = Vec::new();
    for _ in 0..20 {
        flood.push(RawConnection::connect(address).await);
    }
    let started = std::time::Instant::now();
    for raw in &mut flood {
        let body = Initiator::new(None).unwrap().request_body().unwrap();
        raw.send_body(Header::new(system::HANDSHAKE, Flags::NONE, 1), &body)
            .await;
    }
    let (mut done, mut overloaded) = (0, 0);
    for raw in &mut flood {
        let answer = raw.recv().await.expect("an answer");
        if answer.header.flags.is_error() {
            assert_eq!(
                ErrorBody::parse(&answer.body).unwrap().code,
                ErrorCode::Overloaded
            );
            overloaded += 1;
        } else {
            done += 1;
        }
    }
    // Five at once (a burst as large as the rate), and what the budget
    // refilled while the flood lasted.
    let refilled = (started.elapsed().as_secs_f64() * 5.0).ceil() as usize;
    assert!(done >= 5, "{done} handshakes done");
    assert!(
        done <= 5 + refilled,
        "{done} done, {overloaded} refused, {refilled} refilled"
    );
    assert_eq!(done + overloaded, 20);
}

#[tokio::test]
async fn a_failed_handshake_closes_a_connection_that_must_be_encrypted() {
    use ternio::protocol::secure::Initiator;
    let (address, _server) = start_server(|b| b.require_encryption(true));
    let mut raw = RawConnection::connect(address).await;
    // NK against a server without an identity: error 9.
    let key = ternio::Identity::generate();
    let body = Initiator::new(Some(key.public_key()))
        .unwrap()
        .request_body()
        .unwrap();
    raw.send_body(Header::new(system::HANDSHAKE, Flags::NONE, 1), &body)
        .await;
    let answer = raw.recv().await.expect("an answer");
    assert_eq!(answer.header.flags, Flags::RESPONSE_ERROR);
    assert_eq!(
        disconnect(&mut raw).await,
        Some(DisconnectReason::HandshakeTimeout)
    );
}

/// An HTTP upgrade trickled a byte at a time is closed at the upgrade
/// timeout (a bound that predates the frame timeout; tested here with the
/// other trickles, as the outside probe tries it).
#[tokio::test]
async fn a_trickled_websocket_upgrade_is_closed_at_the_upgrade_timeout() {
    let mut config = ternio::ServerConfig::default();
    config.websocket_upgrade_timeout = FRAME_TIMEOUT;
    let (_, ws_address, _server) = start_server_with_ws(|b| b.config(config));
    let mut stream = TcpStream::connect(ws_address).await.unwrap();
    let request = format!(
        "GET /ws HTTP/1.1\r\nHost: {ws_address}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    // A byte every 100 ms: the whole request would take about 17 s.
    let elapsed = trickle(&mut stream, request.as_bytes()).await;
    assert!(elapsed < FRAME_TIMEOUT * 10, "still open after {elapsed:?}");
}

/// Reading steadily but far below the minimum drain rate, while replies
/// pile up: before, any progress restarted the write timeout, so such a
/// peer held its connection's buffers for as long as it liked.
#[tokio::test]
async fn a_peer_that_reads_steadily_below_the_drain_rate_is_a_slow_consumer() {
    // Spans of 2 s must each drain 8 MiB (4 MiB/s); the peer reads about
    // 1 MB/s (16 KiB every 16 ms): it makes progress all the time, and keeps
    // up with nothing. 160 echoes of 256 KiB: 40 MiB to send back, more than
    // 1 MB/s drains in the test's patience.
    let mut config = ternio::ServerConfig::default();
    config.write_timeout = Duration::from_secs(2);
    config.min_drain_rate = 4 * 1024 * 1024;
    config.outbound_high_water = 256 * 1024;
    let cause =
        close_cause_of_slow_reader(config, 160, 16 * 1024, Duration::from_millis(16), false).await;
    assert_eq!(
        cause,
        Some(ternio::CloseCause::Disconnected(
            DisconnectReason::SlowConsumer
        ))
    );
}
