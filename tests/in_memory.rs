//! Connections without sockets: the server serves streams handed to it
//! ([`ServerHandle::serve_stream`], [`ServerHandle::serve_websocket_stream`]),
//! here in-memory pipes. With no socket in the way, the tests of the
//! connection's deadlines run on paused time: tokio moves the clock to the
//! next timer whenever every task waits, so a 60 s idle timeout takes no
//! time at all, and each deadline is checked to the millisecond.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::{SinkExt, StreamExt};
use ternio::protocol::frame::{self, Flags, Framing, Header};
use ternio::protocol::system::{self, Ping, Pong};
use ternio::protocol::{Decode, Packet};
use ternio::{CloseCause, DisconnectReason, ServerConfig, ServerHandle};
use ternio_tests::*;
use tokio::io::DuplexStream;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

/// The pipe's capacity in each direction.
const PIPE: usize = 64 * 1024;

/// How long a raw connection waits for the server on paused time: longer
/// than any deadline tested, and free.
const VIRTUAL_PATIENCE: Duration = Duration::from_secs(3600);

/// A raw connection through a pipe that waits as long as the timers need.
fn connect(server: &ServerHandle) -> RawConnection<DuplexStream> {
    connect_in_memory(server, PIPE).with_patience(VIRTUAL_PATIENCE)
}

/// Asserts that `elapsed` is `expected`, to the timer wheel's millisecond.
#[track_caller]
fn assert_at(elapsed: Duration, expected: Duration, what: &str) {
    assert!(
        elapsed >= expected && elapsed <= expected + Duration::from_millis(5),
        "{what} after {elapsed:?}, expected {expected:?}"
    );
}

/// `count` echo requests of `size` bytes each (ids from 1), framed for TCP.
fn echo_requests(count: u32, size: usize) -> BytesMut {
    let echo = Echo {
        payload: Bytes::from(vec![1u8; size]),
    };
    let mut requests = BytesMut::new();
    for id in 1..=count {
        let header = Header::new(Echo::OPCODE, Flags::NONE, id);
        frame::write_frame(
            &mut requests,
            Framing::LengthPrefixed,
            header,
            &echo,
            usize::MAX,
        )
        .unwrap();
    }
    requests
}

#[tokio::test(start_paused = true)]
async fn requests_pushes_and_replies_go_through_an_in_memory_pipe() {
    let server = start_in_memory_server(|b| b);
    let mut raw = connect(&server);
    raw.request(&Add { a: 2, b: 3 }, 1).await;
    let sum = raw.recv().await.unwrap();
    assert_eq!(sum.header, Header::new(Sum::OPCODE, Flags::RESPONSE, 1));
    assert_eq!(Sum::decode_body(&sum.body).unwrap(), Sum(5));
    raw.request(&WhoAmI, 2).await;
    let you = YouAre::decode_body(&raw.recv().await.unwrap().body).unwrap();
    assert_eq!(you.peer, IN_MEMORY_PEER.to_string());
    assert_eq!(you.transport, "Tcp");
    raw.request(&PushMe { count: 3 }, 3).await;
    let mut notes = Vec::new();
    let mut acknowledged = false;
    while notes.len() < 3 || !acknowledged {
        let frame = raw.recv().await.unwrap();
        if frame.header.request_id == 3 {
            acknowledged = true;
        } else {
            notes.push(Note::decode_body(&frame.body).unwrap().seq);
        }
    }
    assert_eq!(notes, [0, 1, 2]);
    assert_eq!(server.connection_count(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_websocket_is_served_over_an_in_memory_pipe() {
    let server = start_in_memory_server(|b| b);
    let (ours, theirs) = tokio::io::duplex(PIPE);
    let serving = server.clone();
    tokio::spawn(async move {
        serving
            .serve_websocket_stream(theirs, IN_MEMORY_PEER, "/ws")
            .await
    });
    let (mut ws, _) = tokio_tungstenite::client_async("ws://in-memory/ws", ours)
        .await
        .expect("the upgrade is accepted");
    let echo = Echo {
        payload: Bytes::from_static(b"over a pipe"),
    };
    ws.send(ws_request(&echo, 7)).await.unwrap();
    let Some(Ok(Message::Binary(answer))) = ws.next().await else {
        panic!("a binary answer");
    };
    let answer = ternio::protocol::Frame::parse(answer, usize::MAX).unwrap();
    assert_eq!(answer.header.request_id, 7);
    assert_eq!(Echo::decode_body(&answer.body).unwrap(), echo);
}

#[tokio::test(start_paused = true)]
async fn the_connection_limits_apply_to_streams_handed_over() {
    let server = start_in_memory_server(|b| b.max_connections(1));
    let mut first = connect(&server);
    first.request(&Add { a: 1, b: 1 }, 1).await;
    assert!(first.recv().await.is_some());
    let mut second = connect(&server);
    second
        .expect_disconnect(DisconnectReason::TooManyConnections)
        .await;
    first.request(&Add { a: 1, b: 2 }, 2).await;
    assert!(first.recv().await.is_some(), "the first is still served");
}

#[tokio::test(start_paused = true)]
async fn a_silent_peer_is_pinged_halfway_through_the_idle_timeout_then_closed_at_its_end() {
    let server = start_in_memory_server(|b| b.idle_timeout(Some(Duration::from_secs(60))));
    let started = Instant::now();
    let mut silent = connect(&server);
    let ping = silent.recv().await.expect("a keepalive PING");
    assert_eq!(ping.header.opcode, system::PING);
    assert_ne!(ping.header.request_id, 0, "a PING is a request");
    assert_at(started.elapsed(), Duration::from_secs(30), "the PING");
    silent
        .expect_disconnect(DisconnectReason::IdleTimeout)
        .await;
    assert_at(started.elapsed(), Duration::from_secs(60), "the close");
}

#[tokio::test(start_paused = true)]
async fn a_peer_that_answers_pings_stays_for_hours() {
    let server = start_in_memory_server(|b| b.idle_timeout(Some(Duration::from_secs(60))));
    let mut last_input = Instant::now();
    let mut polite = connect(&server);
    for _ in 0..240 {
        let ping = polite.recv().await.unwrap();
        assert_eq!(ping.header.opcode, system::PING);
        // Each PING comes half the idle timeout after the last PONG.
        assert_at(last_input.elapsed(), Duration::from_secs(30), "a PING");
        last_input = Instant::now();
        let value = Ping::decode_body(&ping.body).unwrap().value;
        let pong = Header::new(system::PONG, Flags::RESPONSE, ping.header.request_id);
        polite.send(pong, &Pong { value }).await;
    }
    polite.request(&Add { a: 2, b: 2 }, 1).await;
    let sum = polite.recv().await.unwrap();
    assert_eq!(Sum::decode_body(&sum.body).unwrap(), Sum(4));
}

#[tokio::test(start_paused = true)]
async fn an_unfinished_frame_is_closed_at_the_frame_timeout_of_its_first_byte() {
    let server = start_in_memory_server(|b| {
        b.frame_timeout(Duration::from_secs(10))
            .idle_timeout(Some(Duration::from_secs(600)))
    });
    // A 400-byte frame announced, then trickled a byte a second: each byte
    // is input, none completes the frame, none extends its deadline.
    let mut frame = 400u32.to_le_bytes().to_vec();
    frame.extend_from_slice(&Header::new(Echo::OPCODE, Flags::NONE, 1).to_bytes());
    frame.extend(std::iter::repeat_n(7u8, 393));
    let started = Instant::now();
    let mut trickled = connect(&server);
    let mut cut_at = None;
    for byte in &frame {
        if trickled.send_raw(&[*byte]).await.is_err() {
            cut_at = Some(started.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let cut_at = cut_at.expect("the whole frame trickled in without a close");
    // Closed at 10 s; the server then reads away what still comes for the
    // close linger (2 s) before it lets the pipe go.
    let linger = ServerConfig::default().close_linger;
    assert!(
        cut_at >= Duration::from_secs(10) && cut_at <= Duration::from_secs(11) + linger,
        "cut after {cut_at:?}"
    );
    trickled
        .expect_disconnect(DisconnectReason::IdleTimeout)
        .await;
}

#[tokio::test(start_paused = true)]
async fn a_stalled_frame_is_closed_at_the_frame_timeout_to_the_millisecond() {
    let server = start_in_memory_server(|b| {
        b.frame_timeout(Duration::from_secs(10))
            .idle_timeout(Some(Duration::from_secs(600)))
    });
    let started = Instant::now();
    let mut stalled = connect(&server);
    stalled.send_raw(&400u32.to_le_bytes()).await.unwrap();
    stalled
        .expect_disconnect(DisconnectReason::IdleTimeout)
        .await;
    assert_at(started.elapsed(), Duration::from_secs(10), "the close");
}

#[tokio::test(start_paused = true)]
async fn whole_frames_reset_the_idle_clock_and_parts_of_one_do_not() {
    let server = start_in_memory_server(|b| {
        b.frame_timeout(Duration::from_secs(100))
            .idle_timeout(Some(Duration::from_secs(60)))
    });
    let started = Instant::now();
    let mut raw = connect(&server);
    // A whole request at 20 s moves the idle deadline to 80 s.
    tokio::time::sleep(Duration::from_secs(20)).await;
    raw.request(&Add { a: 1, b: 1 }, 1).await;
    assert!(raw.recv().await.is_some());
    // Half a frame at 25 s does not (the frame timeout is longer).
    tokio::time::sleep(Duration::from_secs(5)).await;
    raw.send_raw(&100u32.to_le_bytes()).await.unwrap();
    let ping = raw.recv().await.unwrap();
    assert_eq!(ping.header.opcode, system::PING);
    assert_at(started.elapsed(), Duration::from_secs(50), "the PING");
    raw.expect_disconnect(DisconnectReason::IdleTimeout).await;
    assert_at(started.elapsed(), Duration::from_secs(80), "the close");
}

#[tokio::test(start_paused = true)]
async fn bytes_trickled_into_an_unfinished_frame_do_not_reset_the_idle_clock() {
    // A frame timeout far above the idle timeout: only the idle timeout acts.
    let server = start_in_memory_server(|b| {
        b.frame_timeout(Duration::from_secs(6000))
            .idle_timeout(Some(Duration::from_secs(60)))
    });
    let started = Instant::now();
    let mut raw = connect(&server);
    raw.send_raw(&4000u32.to_le_bytes()).await.unwrap();
    let mut cut_at = None;
    for _ in 0..3999 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if raw.send_raw(&[7]).await.is_err() {
            cut_at = Some(started.elapsed());
            break;
        }
    }
    // Closed at 60 s, let go after the close linger (2 s).
    let cut_at = cut_at.expect("never closed");
    let linger = ServerConfig::default().close_linger;
    assert!(
        cut_at >= Duration::from_secs(60) && cut_at <= Duration::from_secs(61) + linger,
        "cut after {cut_at:?}"
    );
    let ping = raw.recv().await.unwrap();
    assert_eq!(ping.header.opcode, system::PING);
    raw.expect_disconnect(DisconnectReason::IdleTimeout).await;
}

#[tokio::test(start_paused = true)]
async fn a_server_that_requires_encryption_waits_for_the_handshake_only_so_long() {
    let server = start_in_memory_server(|b| {
        b.require_encryption(true)
            .handshake_timeout(Duration::from_secs(10))
    });
    let started = Instant::now();
    let mut plain = connect(&server);
    plain
        .expect_disconnect(DisconnectReason::HandshakeTimeout)
        .await;
    assert_at(started.elapsed(), Duration::from_secs(10), "the close");
}

#[tokio::test(start_paused = true)]
async fn a_peer_that_stops_reading_is_closed_at_the_write_timeout() {
    let causes = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&causes);
    let server = start_in_memory_server(move |b| {
        b.write_timeout(Duration::from_secs(30))
            .on_disconnect(move |_, cause| {
                seen.lock().unwrap().push((Instant::now(), cause.clone()))
            })
    });
    let started = Instant::now();
    // A pipe of 4 KiB that the peer never reads: 2 MiB of echoes fill it,
    // and the server's outbound buffer to its high-water mark behind it.
    let mut raw = connect_in_memory(&server, 4096);
    let requests = echo_requests(256, 8 * 1024);
    // (Writes until the server stops reading, or is gone.)
    let writer = tokio::spawn(async move {
        let _ = raw.send_raw(&requests).await;
        raw
    });
    let (at, cause) = loop {
        if let Some(first) = causes.lock().unwrap().first().cloned() {
            break first;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(started.elapsed() < Duration::from_secs(600), "never closed");
    };
    assert_eq!(
        cause,
        CloseCause::Disconnected(DisconnectReason::SlowConsumer)
    );
    // Judged when the write timeout's span ends (30 s after bytes first
    // waited); then the close lingers (2 s) for a peer that will not read.
    let config = ServerConfig::default();
    let closed_after = at - started;
    assert!(
        closed_after >= Duration::from_secs(30)
            && closed_after
                <= Duration::from_secs(30) + config.close_linger + Duration::from_millis(5),
        "closed after {closed_after:?}"
    );
    writer.abort();
}

#[tokio::test(start_paused = true)]
async fn at_shutdown_running_requests_have_the_grace_and_no_more() {
    let mut config = ServerConfig::default();
    config.shutdown_grace = Duration::from_secs(5);
    let server = start_in_memory_server(|b| b.config(config));
    let mut raw = connect(&server);
    raw.request(&Sleep { ms: 60_000, tag: 1 }, 1).await;
    raw.request(&Sleep { ms: 2_000, tag: 2 }, 2).await;
    raw.request(&Add { a: 1, b: 2 }, 3).await;
    assert_eq!(raw.recv().await.unwrap().header.request_id, 3);
    let started = Instant::now();
    server.shutdown();
    // The 2 s request finishes within the grace and is answered…
    let slept = raw.recv().await.unwrap();
    assert_eq!(slept.header.request_id, 2);
    assert_at(started.elapsed(), Duration::from_secs(2), "the answer");
    // …the 60 s one is cut off when the grace ends.
    raw.expect_disconnect(DisconnectReason::Shutdown).await;
    assert_at(started.elapsed(), Duration::from_secs(5), "the close");
}

#[tokio::test(start_paused = true)]
async fn a_peer_held_back_by_the_servers_backpressure_is_neither_late_nor_idle() {
    let causes = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&causes);
    let mut config = ServerConfig::default();
    config.frame_timeout = Duration::from_secs(10);
    config.min_drain_rate = 256;
    let server = start_in_memory_server(move |b| {
        b.config(config)
            .on_disconnect(move |_, cause| seen.lock().unwrap().push(cause.clone()))
    });
    // 2 MiB of echoes sent at once, read back at 8 KiB per 15 s (above the
    // minimum drain rate of this server): for an hour the server holds back, its outbound
    // buffer at the high-water mark, with part of a frame read and the rest
    // still in the pipe. The peer is not late with that frame: the server
    // is, and the frame timeout must not close it. Then, every request
    // read, the peer sends nothing for half an hour while it reads the
    // replies: it is not idle either (a PING would wait behind them).
    let (reader, writer) = tokio::io::split({
        let (ours, theirs) = tokio::io::duplex(4096);
        let serving = server.clone();
        tokio::spawn(async move { serving.serve_stream(theirs, IN_MEMORY_PEER).await });
        ours
    });
    let requests = echo_requests(256, 8 * 1024);
    let mut writer = RawConnection::over(writer);
    let sending = tokio::spawn(async move { writer.send_raw(&requests).await });
    let mut reader = RawConnection::over(reader).with_patience(VIRTUAL_PATIENCE);
    let started = Instant::now();
    for id in 1..=256 {
        let answer = reader.recv().await.expect("an echo");
        assert_eq!(answer.header.request_id, id, "{:?}", causes.lock().unwrap());
        tokio::time::sleep(Duration::from_secs(15)).await;
    }
    assert!(started.elapsed() > Duration::from_secs(3600));
    sending.await.unwrap().unwrap();
    assert!(causes.lock().unwrap().is_empty(), "{causes:?}");
}

#[tokio::test(start_paused = true)]
async fn the_client_answers_the_servers_pings_and_an_idle_connection_stays_for_hours() {
    let server = start_in_memory_server(|b| b.idle_timeout(Some(Duration::from_secs(60))));
    let mut config = ternio_client::ClientConfig::default();
    // Only the server's PINGs keep this connection alive.
    config.keepalive = None;
    let client = client_in_memory(&server, config).await;
    tokio::time::sleep(Duration::from_secs(4 * 3600)).await;
    let sum: Sum = client.request_async(&Add { a: 2, b: 2 }).await.unwrap();
    assert_eq!(sum, Sum(4));
    assert_eq!(server.connection_count(), 1, "never reconnected");
}

#[tokio::test(start_paused = true)]
async fn a_secure_session_runs_over_an_in_memory_pipe() {
    let server = start_in_memory_server(|b| b.require_encryption(true));
    let mut config = ternio_client::ClientConfig::default();
    config.secure = Some(ternio_client::SecureConfig::default());
    let client = client_in_memory(&server, config).await;
    let echo = Echo {
        payload: Bytes::from_static(b"sealed in memory"),
    };
    let answer: Echo = client.request_async(&echo).await.unwrap();
    assert_eq!(answer, echo);
}
