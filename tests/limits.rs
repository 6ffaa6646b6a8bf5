//! Connection limits, the idle and write timeouts, the in-flight limit,
//! a flood of connections, and a shutdown under load; the limits and
//! timeouts over WebSocket as well as TCP.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures_util::{SinkExt, StreamExt};
use ternio::protocol::frame::{self, Flags, FrameDecoder, Framing, Header};
use ternio::protocol::system::{self, Disconnect, Ping, Pong};
use ternio::protocol::{DEFAULT_MAX_FRAME_SIZE, Decode, Frame};
use ternio::{CloseCause, DisconnectReason, Packet, Server, ServerConfig, packet_controller};
use ternio_client::{Client, ClientError, CloseReason};
use ternio_tests::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How long a test waits for the server to act (wide: a loaded machine).
const PATIENCE: Duration = Duration::from_secs(20);

/// Polls `condition` every 20 ms until it holds, for at most `PATIENCE`.
async fn eventually(condition: impl AsyncFnMut() -> bool, what: &str) {
    eventually_async(PATIENCE, what, condition).await;
}

/// Whether `raw` is served: a request answered.
async fn served(raw: &mut RawConnection) -> bool {
    raw.request(&Add { a: 1, b: 1 }, 77).await;
    match raw.recv().await {
        Some(frame) => frame.header.request_id == 77,
        None => false,
    }
}

/// The server-wide count of `Bump`s, read on `raw` (which must be served).
async fn count_on(raw: &mut RawConnection) -> u64 {
    raw.request(&GetCount, 78).await;
    let frame = raw.recv().await.expect("an answer");
    assert_eq!(frame.header.request_id, 78);
    Count::decode_body(&frame.body).unwrap().0
}

/// A connection beyond a limit: it sends a `Bump` at once, and the
/// server's only frame must be `DISCONNECT TOO_MANY_CONNECTIONS`.
async fn refused(address: SocketAddr) {
    let mut raw = RawConnection::connect(address).await;
    // The server never reads a refused connection's frames (it reads them
    // away): this one must not run.
    let mut bump = BytesMut::new();
    frame::write_frame(
        &mut bump,
        Framing::LengthPrefixed,
        Header::new(Bump::OPCODE, Flags::NONE, 1),
        &Bump { by: 1000 },
        usize::MAX,
    )
    .unwrap();
    let _ = raw.send_raw(&bump).await;
    raw.expect_disconnect(DisconnectReason::TooManyConnections)
        .await;
}

#[tokio::test]
async fn the_total_connection_limit_refuses_with_too_many_connections() {
    let (address, server) = start_server(|b| b.max_connections(3));
    let mut open = Vec::new();
    for _ in 0..3 {
        let mut raw = RawConnection::connect(address).await;
        assert!(served(&mut raw).await);
        open.push(raw);
    }
    refused(address).await;
    assert_eq!(count_on(&mut open[0]).await, 0, "the refused Bump ran");
    // A place freed is a place taken.
    drop(open.pop());
    eventually(
        async || server.connection_count() == 2,
        "the closed connection leaves",
    )
    .await;
    eventually(
        async || served(&mut RawConnection::connect(address).await).await,
        "a new connection served in the freed place",
    )
    .await;
}

#[tokio::test]
async fn the_per_ip_limit_applies_unless_loopback_is_exempt() {
    // Loopback is not exempt by default.
    let (address, _server) = start_server(|b| b.max_connections_per_ip(2));
    let mut first = RawConnection::connect(address).await;
    let mut second = RawConnection::connect(address).await;
    assert!(served(&mut first).await && served(&mut second).await);
    refused(address).await;
    assert_eq!(count_on(&mut first).await, 0, "the refused Bump ran");

    // With the exemption, loopback is not limited.
    let (address, _server) = start_server(|b| b.exempt_loopback(true).max_connections_per_ip(2));
    let mut many = Vec::new();
    for _ in 0..5 {
        let mut raw = RawConnection::connect(address).await;
        assert!(served(&mut raw).await);
        many.push(raw);
    }
}

/// The accept rate: 3 connections at once, then one every window / 3 (3 s
/// here: far more than the test needs to open four connections, so the
/// fourth is refused however slow the machine; before, a 500 ms window
/// gave it 167 ms).
#[tokio::test]
async fn the_accept_rate_per_ip_is_limited_per_window() {
    let (address, _server) = start_server(|b| {
        b.exempt_loopback(false)
            .accept_rate_per_ip(3, Duration::from_secs(9))
    });
    let first_at = Instant::now();
    let mut accepted = Vec::new();
    for _ in 0..3 {
        let mut raw = RawConnection::connect(address).await;
        assert!(served(&mut raw).await);
        accepted.push(raw);
    }
    refused(address).await;
    assert_eq!(count_on(&mut accepted[0]).await, 0, "the refused Bump ran");
    // The rate refills: a later connection is served.
    eventually(
        async || served(&mut RawConnection::connect(address).await).await,
        "a connection served once the rate refills",
    )
    .await;
    assert!(
        first_at.elapsed() >= Duration::from_secs(2),
        "served again {:?} after the first, before the rate refilled",
        first_at.elapsed()
    );
}

/// Connects a WebSocket to the test server's `/ws`.
async fn ws_connect(address: SocketAddr) -> Result<Ws, WsError> {
    tokio_tungstenite::connect_async(format!("ws://{address}/ws"))
        .await
        .map(|(ws, _)| ws)
}

/// The server's next message, which must be a binary one: its frame.
async fn ws_next_frame(ws: &mut Ws) -> Frame {
    let message = tokio::time::timeout(PATIENCE, ws.next())
        .await
        .expect("a message in time")
        .expect("the stream is open")
        .expect("no error");
    let Message::Binary(bytes) = message else {
        panic!("expected a frame, got {message:?}")
    };
    Frame::parse(bytes, DEFAULT_MAX_FRAME_SIZE).unwrap()
}

/// Whether `ws` is served: a request answered.
async fn ws_served(ws: &mut Ws) -> bool {
    ws.send(ws_request(&Add { a: 1, b: 1 }, 77)).await.is_ok()
        && ws_next_frame(ws).await.header == Header::new(Sum::OPCODE, Flags::RESPONSE, 77)
}

/// Whether a new WebSocket connection is upgraded and served.
async fn ws_new_served(address: SocketAddr) -> bool {
    match ws_connect(address).await {
        Ok(mut ws) => ws_served(&mut ws).await,
        Err(_) => false,
    }
}

/// A WebSocket connection beyond a limit: refused with HTTP 503 before
/// any upgrade.
async fn ws_refused(address: SocketAddr) {
    match ws_connect(address).await {
        Err(WsError::Http(response)) => assert_eq!(response.status(), 503),
        Err(other) => panic!("expected HTTP 503, got {other}"),
        Ok(_) => panic!("expected HTTP 503, the upgrade succeeded"),
    }
}

#[tokio::test]
async fn the_per_ip_limit_applies_to_websocket_connections() {
    let (tcp, ws, _server) = start_server_with_ws(|b| b.max_connections_per_ip(2));
    let mut first = ws_connect(ws).await.unwrap();
    let mut second = ws_connect(ws).await.unwrap();
    assert!(ws_served(&mut first).await && ws_served(&mut second).await);
    ws_refused(ws).await;
    // The limit is the server's, whatever the listener.
    refused(tcp).await;
    // A place freed is a place taken.
    first.close(None).await.unwrap();
    drop(first);
    eventually(
        async || ws_new_served(ws).await,
        "a new connection served in the freed place",
    )
    .await;
    // With the exemption, loopback is not limited.
    let (_tcp, ws, _server) =
        start_server_with_ws(|b| b.exempt_loopback(true).max_connections_per_ip(2));
    let mut many = Vec::new();
    for _ in 0..5 {
        let mut socket = ws_connect(ws).await.unwrap();
        assert!(ws_served(&mut socket).await);
        many.push(socket);
    }
}

/// As the TCP test: 3 at once, then one every 3 s.
#[tokio::test]
async fn the_accept_rate_per_ip_applies_to_websocket_connections() {
    let (_tcp, ws, _server) = start_server_with_ws(|b| {
        b.exempt_loopback(false)
            .accept_rate_per_ip(3, Duration::from_secs(9))
    });
    let first_at = Instant::now();
    let mut accepted = Vec::new();
    for _ in 0..3 {
        let mut socket = ws_connect(ws).await.unwrap();
        assert!(ws_served(&mut socket).await);
        accepted.push(socket);
    }
    ws_refused(ws).await;
    eventually(
        async || ws_new_served(ws).await,
        "a connection served once the rate refills",
    )
    .await;
    assert!(
        first_at.elapsed() >= Duration::from_secs(2),
        "served again {:?} after the first, before the rate refilled",
        first_at.elapsed()
    );
}

#[tokio::test]
async fn an_idle_websocket_peer_is_pinged_then_closed_and_one_that_answers_stays() {
    let (_tcp, ws, _server) =
        start_server_with_ws(|b| b.idle_timeout(Some(Duration::from_millis(400))));
    let mut silent = ws_connect(ws).await.unwrap();
    let started = Instant::now();
    let ping = ws_next_frame(&mut silent).await;
    assert_eq!(ping.header.opcode, system::PING);
    assert_eq!(ping.header.flags, Flags::NONE);
    assert_ne!(ping.header.request_id, 0, "a PING is a request");
    let pinged_after = started.elapsed();
    assert!(
        pinged_after >= Duration::from_millis(150),
        "{pinged_after:?}"
    );
    let bye = ws_next_frame(&mut silent).await;
    assert_eq!(bye.header, Header::new(system::DISCONNECT, Flags::NONE, 0));
    assert_eq!(
        Disconnect::decode_body(&bye.body).unwrap().reason,
        DisconnectReason::IdleTimeout
    );
    assert!(started.elapsed() >= Duration::from_millis(400));
    let close = tokio::time::timeout(PATIENCE, silent.next()).await.unwrap();
    let Some(Ok(Message::Close(Some(close)))) = close else {
        panic!("expected the server's Close, got {close:?}")
    };
    assert_eq!(close.code, CloseCode::Normal);

    // The SDK answers PINGs: an idle client stays connected.
    let client = Client::connect_ws(&format!("ws://{ws}/ws")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let sum: Sum = client.request_async(&Add { a: 2, b: 2 }).await.unwrap();
    assert_eq!(sum, Sum(4));

    // A raw peer that answers the PING by hand stays too.
    let mut polite = ws_connect(ws).await.unwrap();
    for _ in 0..3 {
        let ping = ws_next_frame(&mut polite).await;
        assert_eq!(ping.header.opcode, system::PING);
        let value = Ping::decode_body(&ping.body).unwrap();
        let mut pong = BytesMut::new();
        frame::write_frame(
            &mut pong,
            Framing::Message,
            Header::new(system::PONG, Flags::RESPONSE, ping.header.request_id),
            &Pong { value: value.value },
            usize::MAX,
        )
        .unwrap();
        polite.send(Message::Binary(pong.freeze())).await.unwrap();
    }
    assert!(ws_served(&mut polite).await);
}

/// 0x0402: never answered: it runs until the connection closes, when the
/// server cancels it (and tells [`OnCancelled`]). The test learns the moment
/// the server gave up on a peer without reading from it.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0402, response = ())]
struct Hold;

/// Middleware that notifies when a request of `opcode` is cancelled (its
/// connection closed first).
struct OnCancelled {
    opcode: u16,
    notify: Arc<Notify>,
}

impl ternio::middleware::Middleware for OnCancelled {
    fn after(
        &self,
        request: &ternio::middleware::RequestInfo<'_>,
        outcome: ternio::middleware::Outcome,
        _: Duration,
    ) {
        if request.header().opcode == self.opcode
            && outcome == ternio::middleware::Outcome::Cancelled
        {
            self.notify.notify_one();
        }
    }

    fn uses_elapsed(&self) -> bool {
        false
    }
}

/// 0x0403: answered with an [`Echo`] of `len` bytes: a large answer to a
/// small request (what a peer that does not read leaves unread stays small).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0403, response = Echo)]
struct Large {
    len: u32,
}

#[derive(Default)]
struct HoldController;

#[packet_controller(explicit)]
impl HoldController {
    async fn hold(_request: Hold) {
        std::future::pending::<()>().await
    }

    fn large(request: Large) -> Echo {
        Echo {
            payload: Bytes::from(vec![7; request.len as usize]),
        }
    }
}

/// The write timeout of the tests below.
const WRITE_TIMEOUT: Duration = Duration::from_millis(300);

/// A server with the test controller and [`HoldController`], a short write
/// timeout, and a close linger long enough for the test to read what is
/// left once the server gave up on the peer.
struct StallingServer {
    tcp: SocketAddr,
    ws: SocketAddr,
    _handle: ternio::ServerHandle,
    /// Notified when the server cancels a [`Hold`].
    released: Arc<Notify>,
    /// The close causes, as the disconnect hook sees them.
    causes: Arc<Mutex<Vec<CloseCause>>>,
}

fn stalling_server() -> StallingServer {
    let causes = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&causes);
    let released = Arc::new(Notify::new());
    let signal = Arc::clone(&released);
    let mut config = ServerConfig::default();
    config.write_timeout = WRITE_TIMEOUT;
    config.outbound_high_water = 64 * 1024;
    config.close_linger = PATIENCE;
    let (tcp, ws, handle) = start_server_with_ws(move |b| {
        b.config(config)
            .controller(HoldController)
            .middleware(OnCancelled {
                opcode: Hold::OPCODE,
                notify: signal,
            })
            .on_disconnect(move |_, cause| seen.lock().unwrap().push(cause.clone()))
    });
    StallingServer {
        tcp,
        ws,
        _handle: handle,
        released,
        causes,
    }
}

/// A `Hold`, then requests for 32 answers of 1 MB: far more than the socket
/// buffers hold (at most a few MB), in requests of a few bytes. One frame
/// each. Only what the server answered before it gave up is ever read.
fn requests_for_a_stall(framing: Framing) -> Vec<Bytes> {
    let mut frames = Vec::new();
    let mut hold = BytesMut::new();
    frame::write_frame(
        &mut hold,
        framing,
        Header::new(Hold::OPCODE, Flags::NONE, 1),
        &Hold,
        usize::MAX,
    )
    .unwrap();
    frames.push(hold.freeze());
    for id in 2..34 {
        let mut large = BytesMut::new();
        frame::write_frame(
            &mut large,
            framing,
            Header::new(Large::OPCODE, Flags::NONE, id),
            &Large { len: 1_000_000 },
            usize::MAX,
        )
        .unwrap();
        frames.push(large.freeze());
    }
    frames
}

/// Waits for the server to cancel the held request (it closed the connection).
async fn until_released(released: &Notify) {
    tokio::time::timeout(PATIENCE, released.notified())
        .await
        .expect("the server closes the connection of a peer that does not read");
}

/// Checks a DISCONNECT of the write timeout: `SLOW_CONSUMER`, with the
/// write timeout's message (the full push queue closes with the same
/// reason and "the outbound queue is full").
fn assert_write_timeout(disconnect: &Disconnect) {
    assert_eq!(disconnect.reason, DisconnectReason::SlowConsumer);
    assert!(
        disconnect
            .message
            .contains("while more waited: the peer does not keep up"),
        "not the write timeout's DISCONNECT: {:?}",
        disconnect.message
    );
}

/// Waits for the disconnect hook and checks it saw the server close the
/// connection with `SLOW_CONSUMER`, once.
async fn assert_closed_as_slow_consumer(causes: &Mutex<Vec<CloseCause>>) {
    eventually(
        async || !causes.lock().unwrap().is_empty(),
        "the disconnect hook ran",
    )
    .await;
    assert_eq!(
        *causes.lock().unwrap(),
        [CloseCause::Disconnected(DisconnectReason::SlowConsumer)]
    );
}

/// A peer that sends requests and reads none of their answers is closed
/// by the write timeout: not before it, with the write timeout's own
/// DISCONNECT after the answers that were waiting (the test reads them all
/// once the server gave up), and no push queue involved.
#[tokio::test]
async fn a_peer_that_does_not_read_is_closed_after_the_write_timeout() {
    let server = stalling_server();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let stream = socket.connect(server.tcp).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let started = Instant::now();
    writer
        .write_all(&requests_for_a_stall(Framing::LengthPrefixed).concat())
        .await
        .unwrap();
    until_released(&server.released).await;
    let decided = started.elapsed();
    assert!(decided >= WRITE_TIMEOUT, "closed after {decided:?}");
    // Now read: the echoes that were waiting, whole, then the DISCONNECT.
    let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_SIZE);
    let mut buf = BytesMut::new();
    let mut echoes = 0;
    let disconnect = loop {
        let frame = match decoder.decode(&mut buf).unwrap() {
            Some(frame) => frame,
            None => {
                let read = tokio::time::timeout(PATIENCE, reader.read_buf(&mut buf))
                    .await
                    .expect("the rest within the linger")
                    .expect("a clean stream");
                assert_ne!(read, 0, "the stream ended without a DISCONNECT");
                continue;
            }
        };
        if let Some(disconnect) = echo_or_goodbye(&frame, &mut echoes) {
            break disconnect;
        }
    };
    assert_write_timeout(&disconnect);
    assert!(echoes >= 1, "the first echo was answered");
    assert_eq!(reader.read_buf(&mut buf).await.unwrap(), 0, "then the end");
    drop((reader, writer));
    assert_closed_as_slow_consumer(&server.causes).await;
}

/// Reads one frame of a stalled peer's backlog: the next echo answer in
/// order (counted in `echoes`), or the DISCONNECT that ends them.
fn echo_or_goodbye(frame: &Frame, echoes: &mut u32) -> Option<Disconnect> {
    if frame.header.opcode == system::DISCONNECT {
        assert_eq!(
            frame.header,
            Header::new(system::DISCONNECT, Flags::NONE, 0)
        );
        return Some(Disconnect::decode_body(&frame.body).unwrap());
    }
    assert_eq!(
        frame.header,
        Header::new(Echo::OPCODE, Flags::RESPONSE, 2 + *echoes)
    );
    *echoes += 1;
    None
}

/// The same over WebSocket.
#[tokio::test]
async fn a_websocket_peer_that_does_not_read_is_closed_after_the_write_timeout() {
    let server = stalling_server();
    let ws_address = server.ws;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let stream = socket.connect(ws_address).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (ws, _) = tokio_tungstenite::client_async(
        format!("ws://{ws_address}/ws"),
        MaybeTlsStream::Plain(stream),
    )
    .await
    .unwrap();
    let (mut sink, mut stream) = ws.split();
    let started = Instant::now();
    for request in requests_for_a_stall(Framing::Message) {
        sink.feed(Message::Binary(request)).await.unwrap();
    }
    sink.flush().await.unwrap();
    until_released(&server.released).await;
    let decided = started.elapsed();
    assert!(decided >= WRITE_TIMEOUT, "closed after {decided:?}");
    let mut echoes = 0;
    let disconnect = loop {
        let message = tokio::time::timeout(PATIENCE, stream.next())
            .await
            .expect("the rest within the linger")
            .expect("a DISCONNECT before the end")
            .expect("no error");
        let Message::Binary(bytes) = message else {
            panic!("expected a frame, got {message:?}")
        };
        let frame = Frame::parse(bytes, DEFAULT_MAX_FRAME_SIZE).unwrap();
        if let Some(disconnect) = echo_or_goodbye(&frame, &mut echoes) {
            break disconnect;
        }
    };
    assert_write_timeout(&disconnect);
    assert!(echoes >= 1, "the first echo was answered");
    let close = tokio::time::timeout(PATIENCE, stream.next()).await.unwrap();
    let Some(Ok(Message::Close(Some(close)))) = close else {
        panic!("expected the server's Close, got {close:?}")
    };
    assert_eq!(close.code, CloseCode::Policy);
    drop((sink, stream));
    assert_closed_as_slow_consumer(&server.causes).await;
}

/// Counts how many `Work` requests run at once, and the most ever.
#[derive(Default)]
struct Gauge {
    running: AtomicUsize,
    most: AtomicUsize,
}

/// The server's handle on a gauge the test also holds.
struct SharedGauge(Arc<Gauge>);

/// The server's handle on a count of applied bumps the test also holds.
struct SharedCount(Arc<AtomicUsize>);

#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0400, response = ())]
struct Work;

#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0401, response = ())]
struct Apply;

#[derive(Default)]
struct WorkController;

#[packet_controller(explicit)]
impl WorkController {
    async fn work(_request: Work, gauge: ternio::State<SharedGauge>) {
        let gauge: &Gauge = &gauge.0.0;
        let now = gauge.running.fetch_add(1, Ordering::SeqCst) + 1;
        gauge.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(100)).await;
        gauge.running.fetch_sub(1, Ordering::SeqCst);
    }

    async fn apply(_request: Apply, count: ternio::State<SharedCount>) {
        tokio::task::yield_now().await;
        count.0.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn work_server(
    gauge: &Arc<Gauge>,
    count: &Arc<AtomicUsize>,
) -> (
    std::net::SocketAddr,
    ternio::ServerHandle,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let server = Server::builder()
        .discover_controllers(false)
        .controller(WorkController)
        .state(SharedGauge(Arc::clone(gauge)))
        .state(SharedCount(Arc::clone(count)))
        .max_requests_in_flight(2)
        .map_tcp("127.0.0.1:0")
        .build()
        .unwrap();
    let address = server.tcp_addrs()[0];
    let handle = server.handle();
    (address, handle, tokio::spawn(server.run()))
}

#[tokio::test]
async fn past_the_in_flight_limit_a_connection_waits_instead_of_failing() {
    let gauge = Arc::new(Gauge::default());
    let (address, _server, _running) = work_server(&gauge, &Arc::new(AtomicUsize::new(0)));
    let client = Client::connect_tcp(address).await.unwrap();
    let calls: Vec<_> = (0..6)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.request_async(&Work).await })
        })
        .collect();
    for call in calls {
        call.await
            .unwrap()
            .expect("every request is answered, none refused");
    }
    assert_eq!(
        gauge.most.load(Ordering::SeqCst),
        2,
        "never more than the limit at once"
    );
}

#[tokio::test]
async fn a_flood_of_connections_that_open_and_close_leaves_the_server_serving() {
    let (address, server) = start_server(|b| b);
    let client = Client::connect_tcp(address).await.unwrap();
    let mut flood = Vec::new();
    for i in 0..8u32 {
        flood.push(tokio::spawn(async move {
            for j in 0..150u32 {
                let mut raw = RawConnection::connect(address).await;
                match (i + j) % 3 {
                    0 => {}
                    1 => raw.request(&Add { a: 1, b: 2 }, 1).await,
                    _ => {
                        let _ = raw.send_raw(&[0xFF, 0xFF, 0xFF, 0x7F, 1, 2]).await;
                    }
                }
                drop(raw);
            }
        }));
    }
    let mut answered = 0;
    while flood.iter().any(|task| !task.is_finished()) {
        let sum: Sum = client
            .request_async(&Add { a: answered, b: 1 })
            .await
            .unwrap();
        assert_eq!(sum, Sum(answered + 1));
        answered += 1;
    }
    for task in flood {
        task.await.unwrap();
    }
    assert!(answered > 0);
    for _ in 0..1000 {
        if server.connection_count() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        server.connection_count(),
        1,
        "only the healthy client is left"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_under_load_loses_no_answered_request() {
    let applied = Arc::new(AtomicUsize::new(0));
    let (address, server, running) = work_server(&Arc::new(Gauge::default()), &applied);
    let mut clients = Vec::new();
    for _ in 0..16 {
        let client = Client::connect_tcp(address).await.unwrap();
        clients.push(tokio::spawn(async move {
            let mut answered = 0usize;
            loop {
                match client.request_async(&Apply).await {
                    Ok(()) => answered += 1,
                    Err(ClientError::Closed(CloseReason::Disconnected(disconnect))) => {
                        assert_eq!(disconnect.reason, DisconnectReason::Shutdown);
                        return answered;
                    }
                    Err(other) => panic!("a clean close, not {other:?}"),
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.shutdown();
    let mut answered = 0;
    for client in clients {
        answered += client.await.unwrap();
    }
    running.await.unwrap().unwrap();
    assert!(answered > 0);
    // Every request a client saw answered was applied, and nothing more:
    // the requests in flight at the shutdown were finished and answered.
    assert_eq!(applied.load(Ordering::SeqCst), answered);
}
