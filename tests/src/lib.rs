//! What the end-to-end tests share: test packets, a controller that answers
//! them, a server starter, and a raw connection for speaking bytes directly.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ternio::protocol::frame::{self, Flags, FrameDecoder, Framing, Header};
use ternio::protocol::system::{self, Disconnect};
use ternio::protocol::{DEFAULT_MAX_FRAME_SIZE, Decode, Encode, Frame};
use ternio::{
    AppCode, Context, DisconnectReason, ErrorCode, HandlerError, Packet, Server, ServerBuilder,
    ServerHandle, State, packet_controller,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::net::TcpStream;

mod conditioner;
mod delay;
mod process;
mod proxy;
mod sealed;
mod tamper;
mod wait;
pub use conditioner::{Fate, Impairment, LinkStats, Rng, UdpConditioner, seed};
pub use delay::{DelayProxy, StreamLink};
pub use process::{exit_within, terminate};
pub use proxy::CuttingProxy;
pub use sealed::SealedConnection;
pub use tamper::{Rewrite, TamperingProxy};
pub use ternio_testkit::prometheus::{sample, scrape};
pub use wait::{
    Lateness, PATIENCE, eventually, eventually_async, eventually_within, spawn_started,
};

/// 0x0001: echoed back.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0001, response = Echo)]
pub struct Echo {
    /// The bytes.
    pub payload: Bytes,
}

/// 0x0010: asks for `a + b`.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0010, response = Sum)]
pub struct Add {
    /// Left.
    pub a: i64,
    /// Right.
    pub b: i64,
}

/// 0x0011: the answer to [`Add`].
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0011)]
pub struct Sum(pub i64);

/// 0x0020: the handler fails with this code and message.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0020, response = Sum)]
pub struct Fail {
    /// The code.
    pub code: u16,
    /// The message.
    pub message: String,
}

/// 0x0021: the synchronous handler panics.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0021, response = Sum)]
pub struct Panic;

/// 0x0022: the asynchronous handler panics after a sleep.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0022, response = Sum)]
pub struct AsyncPanic;

/// 0x0030: answered with [`Slept`] after `ms` milliseconds.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0030, response = Slept)]
pub struct Sleep {
    /// Milliseconds to sleep.
    pub ms: u32,
    /// Sent back.
    pub tag: u32,
}

/// 0x0031: the answer to [`Sleep`].
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0031)]
pub struct Slept {
    /// The request's tag.
    pub tag: u32,
}

/// 0x0040: adds `by` to the shared counter; answered with an acknowledgement.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0040, response = ())]
pub struct Bump {
    /// How much.
    pub by: u64,
}

/// 0x0041: asks for the shared counter.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0041, response = Count)]
pub struct GetCount;

/// 0x0042: the shared counter.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0042)]
pub struct Count(pub u64);

/// 0x0043: adds `by` to the shared counter, like [`Bump`], whatever its
/// padding: a request whose size the test chooses and whose effect it can
/// read back ([`GetCount`]).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0043, response = ())]
pub struct Tally {
    /// How much.
    pub by: u64,
    /// Ignored bytes.
    pub padding: Bytes,
}

/// 0x0050: asks who the server thinks the caller is.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0050, response = YouAre)]
pub struct WhoAmI;

/// 0x0051: the caller's connection, as the server sees it.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0051)]
pub struct YouAre {
    /// The connection id.
    pub connection_id: u64,
    /// The peer address.
    pub peer: String,
    /// The transport's name.
    pub transport: String,
}

/// 0x0060: the server pushes `count` [`Note`]s, then acknowledges.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0060, response = ())]
pub struct PushMe {
    /// How many.
    pub count: u32,
}

/// 0x0061: a push.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0061)]
pub struct Note {
    /// Its position.
    pub seq: u32,
}

/// 0x0070: its handler requires encryption.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0070, response = Secret)]
pub struct Secret;

/// 0x0099: no handler answers it.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0099)]
pub struct Unhandled;

/// The shared state of the test controller.
#[derive(Default)]
pub struct Counter {
    /// The running total.
    pub total: AtomicU64,
}

/// Answers every test packet.
#[derive(Default)]
pub struct TestController;

#[packet_controller(explicit)]
impl TestController {
    fn echo(request: Echo) -> Echo {
        request
    }

    fn add(&self, request: Add) -> Sum {
        Sum(request.a + request.b)
    }

    fn fail(request: Fail) -> Result<Sum, HandlerError> {
        Err(HandlerError::new(
            ErrorCode::from_u16(request.code),
            request.message,
        ))
    }

    fn panic(_request: Panic) -> Sum {
        panic!("the test handler panics on purpose")
    }

    async fn async_panic(_request: AsyncPanic) -> Sum {
        tokio::time::sleep(Duration::from_millis(5)).await;
        panic!("the async test handler panics on purpose")
    }

    async fn sleep(request: Sleep) -> Slept {
        tokio::time::sleep(Duration::from_millis(u64::from(request.ms))).await;
        Slept { tag: request.tag }
    }

    fn bump(request: Bump, counter: State<Counter>) {
        counter.total.fetch_add(request.by, Ordering::SeqCst);
    }

    fn tally(request: Tally, counter: State<Counter>) {
        counter.total.fetch_add(request.by, Ordering::SeqCst);
    }

    fn get_count(_request: GetCount, counter: State<Counter>) -> Count {
        Count(counter.total.load(Ordering::SeqCst))
    }

    fn who_am_i(_request: WhoAmI, ctx: &Context) -> YouAre {
        YouAre {
            connection_id: ctx.connection_id().0,
            peer: ctx.peer_addr().to_string(),
            transport: format!("{:?}", ctx.transport()),
        }
    }

    async fn push_me(request: PushMe, ctx: Context) -> Result<(), HandlerError> {
        for seq in 0..request.count {
            ctx.push(&Note { seq })
                .map_err(|error| HandlerError::new(AppCode::new(100), error.to_string()))?;
        }
        Ok(())
    }

    #[handler(encrypted)]
    fn secret(request: Secret) -> Secret {
        request
    }
}

/// Sends `payload` through `client` in an [`Echo`] request and asserts
/// that the answer holds the same bytes.
pub async fn assert_echoed(client: &ternio_client::Client, payload: Bytes) {
    let answer: Echo = client
        .request_async(&Echo {
            payload: payload.clone(),
        })
        .await
        .unwrap();
    assert_eq!(answer.payload, payload);
}

/// A reconnect policy that gets a test's client back at once: 5 ms, then
/// at most 20 ms between attempts, no jitter, never giving up.
pub fn quick_reconnect() -> ternio_client::ReconnectPolicy {
    let mut policy = ternio_client::ReconnectPolicy::default();
    policy.initial_delay = Duration::from_millis(5);
    policy.max_delay = Duration::from_millis(20);
    policy.jitter = 0.0;
    policy.max_attempts = None;
    policy
}

/// A builder with the test controller (explicitly, no discovery) and its
/// state, and nothing else yet: listeners and limits are the test's.
pub fn test_server_builder() -> ServerBuilder {
    Server::builder()
        .discover_controllers(false)
        .controller(TestController)
        .state(Counter::default())
}

/// A server with the test controller (explicitly, no discovery) on a free
/// port of 127.0.0.1, after `configure` had its say. Runs until the handle's
/// shutdown or the end of the test's runtime.
pub fn start_server(
    configure: impl FnOnce(ServerBuilder) -> ServerBuilder,
) -> (SocketAddr, ServerHandle) {
    let builder = test_server_builder().map_tcp("127.0.0.1:0");
    let server = configure(builder).build().expect("the test server builds");
    let address = server.tcp_addrs()[0];
    let handle = server.handle();
    tokio::spawn(server.run());
    (address, handle)
}

/// Like [`start_server`], with a WebSocket listener at `/ws` too: returns
/// the TCP address, the WebSocket address and the handle.
pub fn start_server_with_ws(
    configure: impl FnOnce(ServerBuilder) -> ServerBuilder,
) -> (SocketAddr, SocketAddr, ServerHandle) {
    let builder = test_server_builder()
        .map_tcp("127.0.0.1:0")
        .map_websocket("127.0.0.1:0", "/ws");
    let server = configure(builder).build().expect("the test server builds");
    let (tcp, ws) = (server.tcp_addrs()[0], server.websocket_addrs()[0]);
    let handle = server.handle();
    tokio::spawn(server.run());
    (tcp, ws, handle)
}

/// A test server like [`start_server`]'s, with no listener: its clients
/// come through [`connect_in_memory`].
pub fn start_in_memory_server(
    configure: impl FnOnce(ServerBuilder) -> ServerBuilder,
) -> ServerHandle {
    let builder = test_server_builder();
    let server = configure(builder).build().expect("the test server builds");
    let handle = server.handle();
    tokio::spawn(server.run());
    handle
}

/// The address in-memory connections come from.
pub const IN_MEMORY_PEER: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 1);

/// A raw connection to `server` through an in-memory pipe whose each
/// direction holds `capacity` bytes (no socket, no port).
pub fn connect_in_memory(server: &ServerHandle, capacity: usize) -> RawConnection<DuplexStream> {
    let (ours, theirs) = tokio::io::duplex(capacity);
    let server = server.clone();
    tokio::spawn(async move { server.serve_stream(theirs, IN_MEMORY_PEER).await });
    RawConnection::over(ours)
}

/// A client of `server` through in-memory pipes: each connection, the
/// first and every reconnection, is a fresh pipe (no socket, no port).
pub async fn client_in_memory(
    server: &ServerHandle,
    config: ternio_client::ClientConfig,
) -> ternio_client::Client {
    let server = server.clone();
    let connector = move || {
        let server = server.clone();
        async move {
            let (ours, theirs) = tokio::io::duplex(64 * 1024);
            tokio::spawn(async move { server.serve_stream(theirs, IN_MEMORY_PEER).await });
            Ok(ours)
        }
    };
    ternio_client::Client::connect_stream_with(connector, config)
        .await
        .expect("the client connects through a pipe")
}

/// A connection that speaks length-prefixed frames by hand, for what a
/// well-behaved client would never send: over TCP, or over any stream
/// (an in-memory pipe to [`ServerHandle::serve_stream`]).
pub struct RawConnection<S = TcpStream> {
    stream: S,
    decoder: FrameDecoder,
    buf: BytesMut,
    /// How long [`recv`](Self::recv) waits before it fails the test.
    patience: Duration,
}

impl RawConnection {
    /// Connects to `address`.
    pub async fn connect(address: SocketAddr) -> Self {
        let stream = TcpStream::connect(address).await.expect("connects");
        stream.set_nodelay(true).unwrap();
        Self::over(stream)
    }

    /// Connects to `address` with a small, fixed receive buffer (no kernel
    /// autotuning), so that a peer that stops reading is behind after a
    /// few kilobytes rather than after megabytes.
    pub async fn connect_small(address: SocketAddr) -> Self {
        let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
        socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
        let stream = socket.connect(address).await.expect("connects");
        stream.set_nodelay(true).unwrap();
        Self::over(stream)
    }
}

impl<S> RawConnection<S> {
    /// Speaks frames over `stream` (or, over one half of a split stream,
    /// only sends or only receives).
    pub fn over(stream: S) -> Self {
        Self {
            stream,
            decoder: FrameDecoder::new(DEFAULT_MAX_FRAME_SIZE),
            buf: BytesMut::new(),
            patience: Duration::from_secs(5),
        }
    }

    /// Lets [`recv`](Self::recv) wait up to `patience` (on paused time,
    /// as long as the server's timers need).
    pub fn with_patience(mut self, patience: Duration) -> Self {
        self.patience = patience;
        self
    }
}

impl<S: AsyncWrite + Unpin> RawConnection<S> {
    /// Writes `bytes` as they are.
    pub async fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes).await
    }

    /// Writes one length-prefixed frame with `body` as its encoded body.
    pub async fn send<E: Encode + ?Sized>(&mut self, header: Header, body: &E) {
        let mut out = BytesMut::new();
        frame::write_frame(&mut out, Framing::LengthPrefixed, header, body, usize::MAX).unwrap();
        self.send_raw(&out).await.expect("writes");
    }

    /// Writes one length-prefixed frame whose body is `body`, as it is.
    pub async fn send_body(&mut self, header: Header, body: &[u8]) {
        let mut out = BytesMut::new();
        frame::write_frame_with(
            &mut out,
            Framing::LengthPrefixed,
            header,
            usize::MAX,
            |out| out.extend_from_slice(body),
        )
        .unwrap();
        self.send_raw(&out).await.expect("writes");
    }

    /// Writes a request for `packet` with `request_id`.
    pub async fn request<P: Packet>(&mut self, packet: &P, request_id: u32) {
        self.send(Header::new(P::OPCODE, Flags::NONE, request_id), packet)
            .await;
    }

    /// Closes the writing side (a half-close): the server sees the end of the stream.
    pub async fn shutdown_write(&mut self) {
        self.stream.shutdown().await.expect("shuts down");
    }
}

impl<S: AsyncRead + Unpin> RawConnection<S> {
    /// The next frame, or `None` when the server closed the connection.
    /// Fails the test after 5 s of silence (see [`with_patience`](Self::with_patience)).
    pub async fn recv(&mut self) -> Option<Frame> {
        let patience = self.patience;
        tokio::time::timeout(patience, self.recv_inner())
            .await
            .unwrap_or_else(|_| panic!("the server answers within {patience:?}"))
    }

    async fn recv_inner(&mut self) -> Option<Frame> {
        loop {
            if let Some(frame) = self
                .decoder
                .decode(&mut self.buf)
                .expect("the server sends valid frames")
            {
                return Some(frame);
            }
            match self.stream.read_buf(&mut self.buf).await {
                Ok(0) => {
                    assert!(self.buf.is_empty(), "the server closed inside a frame");
                    return None;
                }
                Ok(_) => {}
                // A reset is a close without a clean FIN: tests that care check for None.
                Err(error) => panic!("the connection failed instead of closing cleanly: {error}"),
            }
        }
    }

    /// Checks that the server's very next frame is a plain `DISCONNECT`
    /// (request id 0) with `reason`, and that a clean close follows it:
    /// nothing (no answer, no error) came before it. Returns it.
    pub async fn expect_disconnect(&mut self, reason: DisconnectReason) -> Disconnect {
        let frame = self.recv().await.expect("a DISCONNECT before the close");
        assert_eq!(
            frame.header,
            Header::new(system::DISCONNECT, Flags::NONE, 0),
            "the server's next frame is a plain DISCONNECT, not {:?} (body {:?})",
            frame.header,
            frame.body
        );
        let disconnect = Disconnect::decode_body(&frame.body).expect("a DISCONNECT body");
        assert_eq!(disconnect.reason, reason, "{}", disconnect.message);
        assert!(
            self.recv().await.is_none(),
            "the server closes after its DISCONNECT"
        );
        disconnect
    }
}

/// examples/echo_server: the binary `TERNIO_ECHO_SERVER` names, or the
/// one `cargo test --workspace` built beside the test binaries.
pub fn echo_server_binary() -> std::path::PathBuf {
    example_binary("echo_server", "TERNIO_ECHO_SERVER")
}

/// The example executable `name` (of `ternio-examples`): the one the
/// environment variable `variable` names, or the one `cargo test
/// --workspace` built beside the test binaries. Fails the test, saying how
/// to build it, when it is missing.
pub fn example_binary(name: &str, variable: &str) -> std::path::PathBuf {
    let binary = std::env::var(variable).map(Into::into).unwrap_or_else(|_| {
        let deps = std::env::current_exe().unwrap();
        deps.parent()
            .unwrap()
            .parent()
            .unwrap()
            .join("examples")
            .join(name)
    });
    assert!(
        binary.exists(),
        "{} is missing: run `cargo build -p ternio-examples --example {name}` \
         (cargo test --workspace builds it), or name it in {variable}",
        binary.display()
    );
    binary
}

/// The README's quick start, compiled as a doctest so it stays true.
#[doc = include_str!("../../README.md")]
mod readme {}

/// A test server (the test controller, as [`start_server`]) listening on
/// exactly `tcp` and, if given, on `ws` at `/ws`: a server restarted on
/// ports its clients know. `configure` may run more than once: binding is
/// retried for up to 5 s while the previous server's listeners close.
pub async fn restart_server(
    tcp: SocketAddr,
    ws: Option<SocketAddr>,
    configure: impl Fn(ServerBuilder) -> ServerBuilder,
) -> ServerHandle {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let mut builder = test_server_builder().map_tcp(tcp);
        if let Some(ws) = ws {
            builder = builder.map_websocket(ws, "/ws");
        }
        match configure(builder).build() {
            Ok(server) => {
                let handle = server.handle();
                tokio::spawn(server.run());
                return handle;
            }
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(error) => panic!("the restarted server does not build: {error}"),
        }
    }
}

/// A WebSocket message holding one plain request frame for `packet`.
pub fn ws_request<P: Packet>(
    packet: &P,
    request_id: u32,
) -> tokio_tungstenite::tungstenite::Message {
    let mut out = BytesMut::new();
    frame::write_frame(
        &mut out,
        Framing::Message,
        Header::new(P::OPCODE, Flags::NONE, request_id),
        packet,
        usize::MAX,
    )
    .unwrap();
    tokio_tungstenite::tungstenite::Message::Binary(out.freeze())
}
