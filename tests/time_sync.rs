//! Time sync (docs/PROTOCOL.md section 4.3): the server's `TIME` answers,
//! plain and sealed, scripted byte by byte; the client's estimate against a
//! fake server whose clock is 5 s ahead and whose answers are delayed, and
//! against the real server through a delaying proxy.

use std::time::{Duration, SystemTime};

use bytes::BytesMut;
use ternio::protocol::frame::{self, Flags, Frame, FrameDecoder, Framing, Header};
use ternio::protocol::secure::{Initiator, SecureChannel};
use ternio::protocol::system::{self, ErrorBody, TimeRequest, TimeResponse};
use ternio::protocol::{Decode, Encode, ErrorCode};
use ternio_client::{
    Client, ClientConfig, ClientError, ClockEstimate, ReconnectPolicy, SecureConfig,
};
use ternio_tests::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

fn now_micros() -> u64 {
    TimeResponse::micros(SystemTime::now())
}

/// Checks a `TIME` answer to request `id` sent with `client_time`, between
/// the wall-clock readings `before` and `after`.
fn check_answer(frame: &Frame, id: u32, client_time: u64, before: u64, after: u64) {
    let header = frame.header;
    assert_eq!((header.opcode, header.request_id), (system::TIME, id));
    assert!(header.flags.is_response() && !header.flags.is_error());
    let time = TimeResponse::decode_body(&frame.body).expect("a TIME answer");
    assert_eq!(time.client_time, client_time, "client_time is echoed");
    assert!(
        before <= time.server_receive
            && time.server_receive <= time.server_send
            && time.server_send <= after,
        "{before} <= {} <= {} <= {after}",
        time.server_receive,
        time.server_send
    );
}

fn error_code(frame: &Frame) -> ErrorCode {
    assert!(
        frame.header.flags.is_error(),
        "an error: {:?}",
        frame.header
    );
    ErrorBody::parse(&frame.body).unwrap().code
}

#[tokio::test]
async fn the_server_answers_time_with_its_clock() {
    let (address, _handle) = start_server(|builder| builder);
    let mut raw = RawConnection::connect(address).await;
    for id in 1..=3u32 {
        let client_time = 0xDEAD_0000 + u64::from(id);
        let before = now_micros();
        raw.send(
            Header::new(system::TIME, Flags::NONE, id),
            &TimeRequest { client_time },
        )
        .await;
        let answer = raw.recv().await.expect("an answer");
        let after = now_micros();
        check_answer(&answer, id, client_time, before, after);
    }
    // Still up: an echo goes through.
    raw.request(
        &Echo {
            payload: "after".into(),
        },
        9,
    )
    .await;
    assert_eq!(raw.recv().await.unwrap().header.request_id, 9);
}

#[tokio::test]
async fn malformed_time_requests_are_malformed_and_change_nothing() {
    let (address, _handle) = start_server(|builder| builder);
    let mut raw = RawConnection::connect(address).await;
    // Short, long and empty bodies.
    for (id, body) in [(1u32, &[0u8; 7][..]), (2, &[0u8; 9][..]), (3, &[][..])] {
        raw.send_body(Header::new(system::TIME, Flags::NONE, id), body)
            .await;
        let answer = raw.recv().await.expect("an answer");
        assert_eq!(answer.header.opcode, system::TIME);
        assert_eq!(answer.header.request_id, id);
        assert_eq!(error_code(&answer), ErrorCode::Malformed);
    }
    // Id 0: a request that cannot be answered is malformed (error under id 0).
    raw.send(
        Header::new(system::TIME, Flags::NONE, 0),
        &TimeRequest { client_time: 1 },
    )
    .await;
    let answer = raw.recv().await.expect("an error");
    assert_eq!(answer.header.request_id, 0);
    assert_eq!(error_code(&answer), ErrorCode::Malformed);
    // A TIME "answer" from the client answers nothing: ignored.
    raw.send(
        Header::new(system::TIME, Flags::RESPONSE, 4),
        &TimeResponse {
            client_time: 1,
            server_receive: 2,
            server_send: 3,
        },
    )
    .await;
    // The connection goes on, and the next TIME is answered.
    let before = now_micros();
    raw.send(
        Header::new(system::TIME, Flags::NONE, 5),
        &TimeRequest { client_time: 5 },
    )
    .await;
    let answer = raw.recv().await.expect("an answer");
    check_answer(&answer, 5, 5, before, now_micros());
}

#[tokio::test]
async fn a_secure_session_seals_time_both_ways() {
    let (address, _handle) = start_server(|builder| builder);
    let mut raw = RawConnection::connect(address).await;
    let mut initiator = Initiator::new(None).unwrap();
    let body = initiator.request_body().unwrap();
    raw.send_body(Header::new(system::HANDSHAKE, Flags::NONE, 1000), &body)
        .await;
    let answer = raw.recv().await.expect("the handshake's answer");
    let mut channel: SecureChannel = initiator.finish(&answer.body).unwrap();

    // A sealed TIME gets a sealed answer.
    let before = now_micros();
    let mut out = BytesMut::new();
    channel
        .sealer
        .write_frame_with(
            &mut out,
            Framing::LengthPrefixed,
            Header::new(system::TIME, Flags::NONE, 7),
            usize::MAX,
            |out| TimeRequest { client_time: 77 }.encode(out),
        )
        .unwrap();
    raw.send_raw(&out).await.unwrap();
    let frame = raw.recv().await.expect("the sealed answer");
    assert!(frame.header.flags.is_encrypted(), "the answer is sealed");
    let mut body = BytesMut::from(&frame.body[..]);
    channel.opener.open(&frame.header, &mut body).unwrap();
    let frame = Frame {
        header: frame.header,
        body: body.freeze(),
    };
    check_answer(&frame, 7, 77, before, now_micros());
}

/// How the fake server delays its `TIME` answers.
#[derive(Clone, Copy)]
struct Delays {
    /// Before it reads its clock for `server_receive` (the way up).
    up: Duration,
    /// Between `server_receive` and `server_send` (its own time).
    hold: Duration,
    /// After `server_send`, before it writes (the way down).
    down: Duration,
    /// Added to `server_send` without waiting: a server that claims to
    /// have held the request longer than it did (a lie, or its clock
    /// stepped forward between its two readings).
    claimed_extra_hold: Duration,
}

/// A server that speaks just enough of the protocol, by hand: it answers
/// `TIME` with a clock `ahead` of the real one, its n-th answer (from 1)
/// delayed by `delays(n)`; `None` answers error 1 `UNKNOWN_OPCODE` (a
/// server older than `TIME`). Every other frame is ignored.
async fn fake_server(
    ahead: Duration,
    delays: impl Fn(usize) -> Option<Delays> + Send + Sync + 'static,
) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let delays = std::sync::Arc::new(delays);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let delays = std::sync::Arc::clone(&delays);
            tokio::spawn(async move {
                socket.set_nodelay(true).unwrap();
                let mut decoder = FrameDecoder::default();
                let mut input = BytesMut::new();
                let mut answered = 0;
                loop {
                    while let Some(frame) = decoder.decode(&mut input).unwrap() {
                        let header = frame.header;
                        if header.opcode != system::TIME || header.flags.is_response() {
                            continue;
                        }
                        answered += 1;
                        let mut out = BytesMut::new();
                        let Some(delays) = delays(answered) else {
                            let error =
                                Header::new(system::TIME, Flags::RESPONSE_ERROR, header.request_id);
                            frame::write_frame_with(
                                &mut out,
                                Framing::LengthPrefixed,
                                error,
                                usize::MAX,
                                |out| {
                                    ErrorBody::write(
                                        out,
                                        ErrorCode::UnknownOpcode.to_u16(),
                                        &"unknown system opcode",
                                    )
                                },
                            )
                            .unwrap();
                            socket.write_all(&out).await.unwrap();
                            continue;
                        };
                        let request = TimeRequest::decode_body(&frame.body).unwrap();
                        let clock = || TimeResponse::micros(SystemTime::now() + ahead);
                        tokio::time::sleep(delays.up).await;
                        let server_receive = clock();
                        tokio::time::sleep(delays.hold).await;
                        let answer = TimeResponse {
                            client_time: request.client_time,
                            server_receive,
                            server_send: clock() + delays.claimed_extra_hold.as_micros() as u64,
                        };
                        tokio::time::sleep(delays.down).await;
                        let header = Header::new(system::TIME, Flags::RESPONSE, header.request_id);
                        frame::write_frame(
                            &mut out,
                            Framing::LengthPrefixed,
                            header,
                            &answer,
                            usize::MAX,
                        )
                        .unwrap();
                        socket.write_all(&out).await.unwrap();
                    }
                    match socket.read_buf(&mut input).await {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                }
            });
        }
    });
    address
}

const AHEAD: Duration = Duration::from_secs(5);
const EACH_WAY: Delays = Delays {
    up: Duration::from_millis(20),
    hold: Duration::from_millis(30),
    down: Duration::from_millis(20),
    claimed_extra_hold: Duration::ZERO,
};

/// What this host added to a round trip beyond the `delays` each way put
/// into it (timers that fire late on a loaded machine), halved: split
/// between the two ways in a way nobody knows, it moves the offset by at
/// most that much.
fn host_slack(estimate: &ClockEstimate, delays: Duration) -> Duration {
    estimate.round_trip.saturating_sub(delays) / 2
}

/// `server_time` is within `slack` of the real clock plus `ahead`.
fn assert_server_time(client: &Client, ahead: Duration, slack: Duration) {
    let server_time = client.server_time().expect("an estimate");
    let expected = SystemTime::now() + ahead;
    let error = match server_time.duration_since(expected) {
        Ok(late) => late,
        Err(early) => early.duration(),
    };
    assert!(
        error <= slack,
        "server_time is {error:?} off {expected:?} (slack {slack:?})"
    );
}

fn offset_ms(estimate: &ClockEstimate) -> f64 {
    estimate.offset_micros as f64 / 1000.0
}

#[tokio::test]
async fn the_client_estimates_a_clock_5_s_ahead_behind_a_40_ms_round_trip() {
    let address = fake_server(AHEAD, |_| Some(EACH_WAY)).await;
    let client = Client::connect_tcp(address).await.unwrap();
    assert_eq!(client.server_time(), None, "no estimate before a sample");
    assert_eq!(client.clock_estimate(), None);
    let estimate = client.sync_clock().await.unwrap();
    assert_eq!(estimate.samples, 5);
    assert_eq!(client.clock_estimate(), Some(estimate));
    // The true offset is 5 s; symmetric delays make the estimate exact but
    // for the timers' granularity and what the host added.
    let slack = Duration::from_millis(5) + host_slack(&estimate, EACH_WAY.up + EACH_WAY.down);
    let offset = offset_ms(&estimate);
    assert!(
        (offset - 5_000.0).abs() <= slack.as_secs_f64() * 1000.0,
        "offset {offset} ms, slack {slack:?}"
    );
    assert_eq!(
        estimate.offset(),
        (true, Duration::from_micros(estimate.offset_micros as u64))
    );
    // 20 ms each way; the server's 30 ms are not part of the round trip
    // (with them it would be 70 ms or more).
    assert!(
        (Duration::from_millis(40)..Duration::from_millis(70)).contains(&estimate.round_trip),
        "round trip {:?}",
        estimate.round_trip
    );
    assert_server_time(&client, AHEAD, slack);
}

#[tokio::test]
async fn one_way_delayed_samples_do_not_move_the_estimate() {
    // The first answer is 150 ms late on the way down, the fifth 150 ms on
    // the way up: alone, each would put the offset 75 ms off.
    let late = Duration::from_millis(170);
    let address = fake_server(AHEAD, move |n| {
        Some(match n {
            1 => Delays {
                down: late,
                ..EACH_WAY
            },
            5 => Delays {
                up: late,
                ..EACH_WAY
            },
            _ => EACH_WAY,
        })
    })
    .await;
    let client = Client::connect_tcp(address).await.unwrap();
    let estimate = client.sync_clock().await.unwrap();
    // A late sample's round trip is 210 ms or more, and its offset 75 ms
    // off: neither is the estimate's.
    assert!(
        estimate.round_trip < EACH_WAY.up + EACH_WAY.down + late,
        "{estimate:?}"
    );
    let slack = Duration::from_millis(5) + host_slack(&estimate, EACH_WAY.up + EACH_WAY.down);
    let offset = offset_ms(&estimate);
    assert!(
        (offset - 5_000.0).abs() <= slack.as_secs_f64() * 1000.0,
        "offset {offset} ms, slack {slack:?}"
    );
    assert_server_time(&client, AHEAD, slack);
}

#[tokio::test]
async fn a_sample_held_longer_than_its_round_trip_is_refused_not_preferred() {
    // The third answer claims an hour between reading the request and
    // answering it: its round trip would come out negative, and, kept,
    // it would win the filter with an offset half an hour off.
    let address = fake_server(AHEAD, |n| {
        Some(match n {
            3 => Delays {
                claimed_extra_hold: Duration::from_secs(3_600),
                ..EACH_WAY
            },
            _ => EACH_WAY,
        })
    })
    .await;
    let client = Client::connect_tcp(address).await.unwrap();
    let refused = client.sync_clock().await.unwrap_err();
    assert!(
        refused.to_string().contains("impossible times"),
        "{refused}"
    );
    // The two honest samples before it make the estimate.
    let estimate = client.clock_estimate().expect("two samples were kept");
    assert_eq!(estimate.samples, 2);
    let offset = offset_ms(&estimate);
    assert!((4_995.0..=5_005.0).contains(&offset), "offset {offset} ms");
}

#[tokio::test]
async fn a_server_without_time_leaves_no_estimate() {
    let address = fake_server(AHEAD, |_| None).await;
    let client = Client::connect_tcp(address).await.unwrap();
    match client.sync_clock().await {
        Err(ClientError::Remote { code, .. }) => assert_eq!(code, ErrorCode::UnknownOpcode),
        other => panic!("expected UNKNOWN_OPCODE, got {other:?}"),
    }
    assert_eq!(client.server_time(), None);
    assert_eq!(client.clock_estimate(), None);
}

#[tokio::test]
async fn through_an_asymmetric_path_the_offset_is_off_by_half_the_difference() {
    // The real server, on this host's clock: the true offset is 0. 30 ms up
    // and 10 ms down: the estimate is off by (up - down) / 2 = +10 ms, and
    // never by more than half the round trip.
    let (address, _handle) = start_server(|builder| builder);
    let up = Duration::from_millis(30);
    let down = Duration::from_millis(10);
    let proxy = DelayProxy::start(address, up, down).await;
    let client = Client::connect_tcp(proxy.address()).await.unwrap();
    let estimate = client.sync_clock().await.unwrap();
    assert!(
        (up + down..up + down + Duration::from_millis(30)).contains(&estimate.round_trip),
        "round trip {:?}",
        estimate.round_trip
    );
    // What the host adds beyond the proxy's delays (scheduling, a loaded
    // machine) moves the offset by at most half of it, both ways.
    let slack = host_slack(&estimate, up + down);
    let offset = offset_ms(&estimate);
    assert!(
        (offset - 10.0).abs() <= slack.as_secs_f64() * 1000.0 + 0.5,
        "offset {offset} ms, slack {slack:?} beyond the proxy's delays"
    );
    assert!(estimate.offset().1 <= estimate.round_trip / 2);
    assert_server_time(
        &client,
        Duration::from_millis(10),
        Duration::from_millis(5) + slack,
    );
}

#[tokio::test]
async fn a_secure_client_syncs_with_sealed_frames() {
    let (address, _handle) = start_server(|builder| builder);
    let mut config = ClientConfig::default();
    config.secure = Some(SecureConfig::anonymous());
    let client = Client::connect_tcp_with(address, config).await.unwrap();
    assert!(client.is_secure());
    let estimate = client.sync_clock().await.unwrap();
    // The same clock on both sides, no delay: within a round trip of 0.
    assert!(estimate.offset().1 <= estimate.round_trip / 2 + Duration::from_millis(1));
    assert!(
        estimate.round_trip < Duration::from_millis(50),
        "{estimate:?}"
    );
    assert_server_time(
        &client,
        Duration::ZERO,
        Duration::from_millis(5) + estimate.round_trip / 2,
    );
}

#[tokio::test]
async fn clock_sync_runs_in_the_background() {
    let address = fake_server(AHEAD, |_| Some(EACH_WAY)).await;
    let mut config = ClientConfig::default();
    config.clock_sync = Some(Duration::from_millis(200));
    let client = Client::connect_tcp_with(address, config).await.unwrap();
    // The first sync (5 exchanges of ~70 ms), then another: the window fills.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while client
        .clock_estimate()
        .is_none_or(|estimate| estimate.samples < 8)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            client.clock_estimate()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let estimate = client.clock_estimate().expect("an estimate");
    assert_server_time(
        &client,
        AHEAD,
        Duration::from_millis(5) + host_slack(&estimate, EACH_WAY.up + EACH_WAY.down),
    );
}

#[tokio::test]
async fn clock_sync_syncs_again_after_a_reconnection() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let answers = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&answers);
    let address = fake_server(AHEAD, move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        Some(EACH_WAY)
    })
    .await;
    let proxy = CuttingProxy::start(address, 1, 0..0).await;
    let mut config = ClientConfig::default();
    // An interval that never comes in this test: only the reconnection
    // can start a second sync.
    config.clock_sync = Some(Duration::from_secs(3600));
    config.reconnect = Some(ReconnectPolicy::default());
    config.resume = false;
    let client = Client::connect_tcp_with(proxy.address(), config)
        .await
        .unwrap();
    let samples = || {
        client
            .clock_estimate()
            .map_or(0, |estimate| estimate.samples)
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while samples() < 5 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "first sync: {}",
            samples()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(samples(), 5, "one sync, then nothing until the interval");
    assert_eq!(answers.load(Ordering::SeqCst), 5);
    proxy.cut_all();
    // A new session (no resumption): the first one's samples are forgotten
    // (it might be another server) and a second sync makes five new ones.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while answers.load(Ordering::SeqCst) < 10 || samples() < 5 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "after the reconnection: {} answers, {} samples",
            answers.load(Ordering::SeqCst),
            samples()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(samples(), 5, "only the new session's samples");
    let estimate = client.clock_estimate().expect("an estimate");
    assert_server_time(
        &client,
        AHEAD,
        Duration::from_millis(5) + host_slack(&estimate, EACH_WAY.up + EACH_WAY.down),
    );
}
