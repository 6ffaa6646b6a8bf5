//! Streams (docs/PROTOCOL.md section 4.5) over real sockets: a request
//! answered by a stream of items, uploads, credit-based flow control,
//! cancellation both ways, errors midway, byte streams, limits and
//! policies, on TCP and WebSocket, plain and sealed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use ternio::protocol::frame::{Flags, Header};
use ternio::protocol::stream::{
    BatchItems, STREAM_CREDIT, STREAM_ITEM, STREAM_ITEMS, StreamCredit, put_batch_item,
};
use ternio::protocol::{Decode, Encode};
use ternio::{
    AppCode, Bytes, Chunk, ConnectionHandle, DisconnectReason, ErrorCode, HandlerError, Packet,
    Server, ServerHandle, State, StreamReply, StreamRequest, Upload, UploadRequest,
    packet_controller,
};
use ternio_client::SessionEvent;
use ternio_client::{Client, ClientConfig, ClientError};
use ternio_tests::{CuttingProxy, Echo, RawConnection, assert_echoed, eventually, quick_reconnect};
use tokio::sync::Notify;

/// 0x0900: the numbers `0..n`, failing with code 150 at `fail_at` (0: never).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0900, response = ())]
struct Count {
    n: u32,
    fail_at: u32,
}

impl StreamRequest for Count {
    type Item = Number;
}

/// 0x0901: one item.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0901)]
struct Number(u32);

/// 0x0902: numbers without end; the server counts what it produced.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0902, response = ())]
struct Endless;

impl StreamRequest for Endless {
    type Item = Number;
}

/// 0x0903: `len` bytes as a byte stream (byte `i` is `i % 251`).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0903, response = ())]
struct Download {
    len: u64,
}

impl StreamRequest for Download {
    type Item = Chunk;
}

/// 0x0904: an upload of numbers, answered with their sum; the handler
/// takes only `read` of them (0: all) until told to go on, and answers at
/// once after `answer_after` (0: at the end).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0904, response = Total)]
struct Store {
    read: u32,
    answer_after: u32,
}

impl UploadRequest for Store {
    type Item = Number;
}

/// 0x0905: the sum of an upload, or its byte count.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0905)]
struct Total(u64);

/// 0x0906: a byte upload, answered with its length (checking the pattern).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0906, response = Total)]
struct Put;

impl UploadRequest for Put {
    type Item = Chunk;
}

/// 0x0907: `Endless` behind permission 5.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0907, response = ())]
struct Secret;

impl StreamRequest for Secret {
    type Item = Number;
}

/// 0x0908: an endless async stream with a 300 ms time limit.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0908, response = ())]
struct Limited;

impl StreamRequest for Limited {
    type Item = Number;
}

/// 0x0909: the handler kicks its own connection after 3 items.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0909, response = ())]
struct Kicked;

impl StreamRequest for Kicked {
    type Item = Number;
}

/// 0x090A: three items, then the handler's stream panics; one at a time.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x090A, response = ())]
struct Panicky;

impl StreamRequest for Panicky {
    type Item = Number;
}

/// 0x090B: an endless stream, returned 300 ms after the request (one at a
/// time).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x090B, response = ())]
struct Late;

impl StreamRequest for Late {
    type Item = Number;
}

/// 0x090C: an upload whose items a task the handler spawned takes.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x090C, response = Total)]
struct Spawned;

impl UploadRequest for Spawned {
    type Item = Number;
}

/// 0x090D: `n` chunks of sizes cycling through 0 to 1,499 bytes (chunk
/// `i` holds `i * 37 % 1500` pattern bytes from offset `i`).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x090D, response = ())]
struct Sizes {
    n: u32,
}

impl StreamRequest for Sizes {
    type Item = Chunk;
}

/// 0x090E: 20 chunks of 10 bytes, one of 100,000, then 20 of 10 again.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x090E, response = ())]
struct Mixed;

impl StreamRequest for Mixed {
    type Item = Chunk;
}

/// 0x090F: bytes read from a [`Trickle`] (byte `i` is `i % 251`); `end`
/// says how the reader ends: 0 at its end, 1 with an error, 2 with a panic.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x090F, response = ())]
struct Trickled {
    end: u8,
}

impl StreamRequest for Trickled {
    type Item = Chunk;
}

/// The sizes of a [`Trickle`]'s reads, in turn: each length a chunk's
/// varint can take (one to three bytes), and one past a chunk (cut to 64 KiB).
const TRICKLE_READS: [usize; 8] = [1, 127, 128, 200, 16_383, 16_384, 40_000, 70_000];

/// A reader that gives [`TRICKLE_READS`] twice over, pending (and waking
/// itself) before every other read, then ends as [`Trickled`] asks.
struct Trickle {
    offset: u64,
    /// Reads whole so far.
    reads: usize,
    /// What is left of the read under way.
    left: usize,
    pending: bool,
    end: u8,
}

impl Trickle {
    /// All it gives before its end.
    fn len() -> u64 {
        2 * TRICKLE_READS.iter().sum::<usize>() as u64
    }
}

impl tokio::io::AsyncRead for Trickle {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        self.pending = !self.pending;
        if self.pending {
            cx.waker().wake_by_ref();
            return std::task::Poll::Pending;
        }
        if self.reads == 2 * TRICKLE_READS.len() {
            return match self.end {
                0 => std::task::Poll::Ready(Ok(())),
                1 => std::task::Poll::Ready(Err(std::io::Error::other("the disk went away"))),
                _ => panic!("the reader panics"),
            };
        }
        if self.left == 0 {
            self.left = TRICKLE_READS[self.reads % TRICKLE_READS.len()];
        }
        // What the read cannot take comes in the next one.
        let n = self.left.min(buf.remaining());
        buf.put_slice(&pattern(self.offset, n));
        self.offset += n as u64;
        self.left -= n;
        if self.left == 0 {
            self.reads += 1;
        }
        std::task::Poll::Ready(Ok(()))
    }
}

fn mixed_chunks() -> Vec<Chunk> {
    (0..41u64)
        .map(|i| Chunk {
            data: pattern(i, if i == 20 { 100_000 } else { 10 }).into(),
        })
        .collect()
}

fn sized_chunk(i: u32) -> Chunk {
    let len = (i as usize * 37) % 1500;
    Chunk {
        data: pattern(u64::from(i), len).into(),
    }
}

/// What the handlers did.
#[derive(Default)]
struct Seen {
    /// Items the endless streams produced.
    produced: AtomicU32,
    /// Handler streams and futures dropped before their end.
    dropped: AtomicU32,
    /// Items the `Store` handler took.
    taken: AtomicU32,
    /// Lets a `Store` handler take the rest.
    go_on: Notify,
}

/// Counts a drop before the end.
struct DropSignal(Arc<Seen>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        self.0.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

fn endless(seen: &Arc<Seen>) -> impl futures_util::Stream<Item = Number> + Send + 'static {
    let signal = DropSignal(Arc::clone(seen));
    futures_util::stream::iter(0..).map(move |n| {
        signal.0.produced.fetch_add(1, Ordering::SeqCst);
        Number(n)
    })
}

fn pattern(offset: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| ((offset + i) % 251) as u8)
        .collect()
}

/// A reader of `len` pattern bytes, made as it is read.
struct PatternReader {
    offset: u64,
    len: u64,
}

impl tokio::io::AsyncRead for PatternReader {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let n = (self.len - self.offset).min(buf.remaining() as u64) as usize;
        buf.put_slice(&pattern(self.offset, n));
        self.offset += n as u64;
        std::task::Poll::Ready(Ok(()))
    }
}

/// A [`PatternReader`] that cuts every link of `proxy` once `at` bytes
/// were read.
struct CutHalfway<'a> {
    inner: PatternReader,
    proxy: &'a CuttingProxy,
    at: u64,
}

impl tokio::io::AsyncRead for CutHalfway<'_> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = self.inner.offset;
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if before < self.at && self.inner.offset >= self.at {
            self.proxy.cut_all();
        }
        polled
    }
}

#[derive(Default)]
struct Streams;

#[packet_controller(explicit)]
impl Streams {
    fn count(request: Count) -> StreamReply<Number> {
        let fail_at = request.fail_at;
        StreamReply::try_new(futures_util::stream::iter((0..request.n).map(move |n| {
            if fail_at != 0 && n == fail_at {
                Err(HandlerError::new(AppCode::new(150), "failed midway"))
            } else {
                Ok(Number(n))
            }
        })))
    }

    fn endless(_request: Endless, seen: State<Arc<Seen>>) -> StreamReply<Number> {
        StreamReply::new(endless(&seen))
    }

    fn download(request: Download) -> StreamReply<Chunk> {
        StreamReply::bytes(PatternReader {
            offset: 0,
            len: request.len,
        })
    }

    async fn store(
        request: Store,
        mut upload: Upload<Number>,
        seen: State<Arc<Seen>>,
    ) -> Result<Total, HandlerError> {
        let signal = DropSignal(Arc::clone(&seen));
        let mut sum = 0u64;
        let mut taken = 0;
        loop {
            if request.read != 0 && taken == request.read {
                seen.go_on.notified().await;
            }
            let Some(item) = upload.next().await else {
                break;
            };
            let Number(n) = item?;
            taken += 1;
            seen.taken.fetch_add(1, Ordering::SeqCst);
            sum += u64::from(n);
            if taken == request.answer_after {
                break;
            }
        }
        std::mem::forget(signal);
        Ok(Total(sum))
    }

    async fn put(_request: Put, mut upload: Upload<Chunk>) -> Result<Total, HandlerError> {
        let mut len = 0u64;
        while let Some(chunk) = upload.next().await {
            let chunk = chunk?;
            if chunk.data[..] != pattern(len, chunk.data.len())[..] {
                return Err(HandlerError::new(AppCode::new(151), "bytes differ"));
            }
            len += chunk.data.len() as u64;
        }
        Ok(Total(len))
    }

    #[handler(permission = 5)]
    fn secret(_request: Secret, seen: State<Arc<Seen>>) -> StreamReply<Number> {
        StreamReply::new(endless(&seen))
    }

    #[handler(timeout_ms = 300)]
    async fn limited(_request: Limited) -> StreamReply<Number> {
        StreamReply::new(futures_util::stream::iter(0..).then(|n| async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Number(n)
        }))
    }

    fn kicked(_request: Kicked, connection: ConnectionHandle) -> StreamReply<Number> {
        StreamReply::new(futures_util::stream::iter(0..).map(move |n| {
            if n == 3 {
                connection.kick("kicked midway");
            }
            Number(n)
        }))
    }

    #[handler(concurrency = 1)]
    async fn late(_request: Late, seen: State<Arc<Seen>>) -> StreamReply<Number> {
        tokio::time::sleep(Duration::from_millis(300)).await;
        StreamReply::new(endless(&seen))
    }

    async fn spawned(_request: Spawned, mut upload: Upload<Number>) -> Result<Total, HandlerError> {
        tokio::spawn(async move {
            let mut sum = 0u64;
            while let Some(item) = upload.next().await {
                sum += u64::from(item?.0);
            }
            Ok(Total(sum))
        })
        .await
        .unwrap()
    }

    #[handler(concurrency = 1)]
    fn panicky(_request: Panicky) -> StreamReply<Number> {
        StreamReply::new(futures_util::stream::iter(0..).map(|n| {
            assert!(n < 3, "the stream panics at item {n}");
            Number(n)
        }))
    }

    fn trickled(request: Trickled) -> StreamReply<Chunk> {
        StreamReply::bytes(Trickle {
            offset: 0,
            reads: 0,
            left: 0,
            pending: false,
            end: request.end,
        })
    }

    fn mixed(_request: Mixed) -> StreamReply<Chunk> {
        StreamReply::new(futures_util::stream::iter(mixed_chunks()))
    }

    fn sizes(request: Sizes) -> StreamReply<Chunk> {
        StreamReply::new(futures_util::stream::iter((0..request.n).map(sized_chunk)))
    }

    fn echo(request: Echo) -> Echo {
        request
    }
}

struct Started {
    tcp: SocketAddr,
    ws: SocketAddr,
    seen: Arc<Seen>,
    _handle: ServerHandle,
}

fn start() -> Started {
    start_with(|builder| builder)
}

fn start_with(configure: impl FnOnce(ternio::ServerBuilder) -> ternio::ServerBuilder) -> Started {
    let seen = Arc::new(Seen::default());
    let builder = Server::builder()
        .discover_controllers(false)
        .controller(Streams)
        .state(Arc::clone(&seen))
        .identity(ternio::Identity::generate())
        .max_streams_per_connection(20)
        .map_tcp("127.0.0.1:0")
        .map_websocket("127.0.0.1:0", "/ws");
    let server = configure(builder).build().expect("the server builds");
    let (tcp, ws) = (server.tcp_addrs()[0], server.websocket_addrs()[0]);
    let handle = server.handle();
    tokio::spawn(server.run());
    Started {
        tcp,
        ws,
        seen,
        _handle: handle,
    }
}

#[derive(Debug, Clone, Copy)]
enum Link {
    Tcp,
    Ws,
}

async fn connect(started: &Started, link: Link, secure: bool) -> Client {
    let client = match link {
        Link::Tcp => Client::connect_tcp_with(started.tcp, ClientConfig::default()).await,
        Link::Ws => {
            Client::connect_ws_with(&format!("ws://{}/ws", started.ws), ClientConfig::default())
                .await
        }
    }
    .expect("connects");
    if secure {
        client.handshake(None).await.expect("the handshake runs");
        assert!(client.is_secure());
    }
    client
}

const LINKS: [(Link, bool); 4] = [
    (Link::Tcp, false),
    (Link::Tcp, true),
    (Link::Ws, false),
    (Link::Ws, true),
];

async fn collect<T: Packet>(stream: ternio_client::ItemStream<T>) -> (Vec<T>, Option<ClientError>) {
    let mut items = Vec::new();
    let mut stream = stream;
    while let Some(item) = stream.next().await {
        match item {
            Ok(item) => items.push(item),
            Err(error) => {
                assert!(stream.next().await.is_none(), "nothing after an error");
                return (items, Some(error));
            }
        }
    }
    (items, None)
}

#[tokio::test]
async fn items_arrive_in_order_and_the_stream_ends_on_every_link() {
    let started = start();
    for (link, secure) in LINKS {
        let client = connect(&started, link, secure).await;
        let stream = client
            .request_stream(&Count {
                n: 1000,
                fail_at: 0,
            })
            .await
            .unwrap();
        let (items, error) = collect(stream).await;
        assert!(error.is_none(), "{link:?} {secure}: {error:?}");
        assert_eq!(items, (0..1000).map(Number).collect::<Vec<_>>(), "{link:?}");
        // An empty stream ends at once.
        let (items, error) = collect(
            client
                .request_stream(&Count { n: 0, fail_at: 0 })
                .await
                .unwrap(),
        )
        .await;
        assert!(items.is_empty() && error.is_none());
        assert_echoed(&client, Bytes::from_static(b"after")).await;
    }
}

#[tokio::test]
async fn an_error_midway_ends_the_stream_with_its_code() {
    let started = start();
    for (link, secure) in LINKS {
        let client = connect(&started, link, secure).await;
        let stream = client
            .request_stream(&Count { n: 10, fail_at: 5 })
            .await
            .unwrap();
        let (items, error) = collect(stream).await;
        assert_eq!(items, (0..5).map(Number).collect::<Vec<_>>());
        match error {
            Some(ClientError::Remote { code, message }) => {
                assert_eq!(code, ErrorCode::from_u16(150));
                assert_eq!(message, "failed midway");
            }
            other => panic!("{link:?}: expected the handler's error, got {other:?}"),
        }
    }
}

/// An upload whose items another task takes still gets its credit: taking
/// them wakes the connection when a grant is due (it waited for some other
/// frame to wake it, a keepalive's at worst).
#[tokio::test]
async fn an_upload_taken_on_another_task_gets_its_credit() {
    let started = start();
    let client = connect(&started, Link::Tcp, false).await;
    let sum = tokio::time::timeout(Duration::from_secs(5), async {
        let mut upload = client.upload(&Spawned).await.unwrap();
        for n in 0..500 {
            upload.send(&Number(n)).await.unwrap();
        }
        upload.finish().await.unwrap()
    })
    .await
    .expect("the upload stalled");
    assert_eq!(sum, Total((0..500).sum()));
}

/// A stream that panics ends as a panicking handler does: `INTERNAL`, the
/// connection up, and the handler's concurrency slot given back (twice in a
/// row on one connection with `concurrency = 1`).
#[tokio::test]
async fn a_panicking_stream_ends_with_internal_and_the_connection_stays_up() {
    let started = start();
    let client = connect(&started, Link::Tcp, false).await;
    for _ in 0..2 {
        let stream = client.request_stream(&Panicky).await.unwrap();
        let (items, error) = collect(stream).await;
        assert_eq!(items, (0..3).map(Number).collect::<Vec<_>>());
        match error {
            Some(ClientError::Remote { code, .. }) => assert_eq!(code, ErrorCode::Internal),
            other => panic!("expected INTERNAL, got {other:?}"),
        }
        assert_echoed(&client, Bytes::from_static(b"still up")).await;
    }
}

/// A reader that stops holds the server's stream at its credit: the
/// handler's stream is polled for exactly 32 items, no more, until the
/// reader takes some; then the server goes on by exactly what it was
/// granted.
#[tokio::test]
async fn a_reader_that_stops_holds_the_handler_at_its_credit() {
    let started = start();
    for (link, secure) in LINKS {
        started.seen.produced.store(0, Ordering::SeqCst);
        let client = connect(&started, link, secure).await;
        let mut stream = client.request_stream(&Endless).await.unwrap();
        eventually("the handler produced its initial credit", || {
            started.seen.produced.load(Ordering::SeqCst) >= 32
        })
        .await;
        // Round trips on the same connection: the server ran on meanwhile.
        for _ in 0..3 {
            assert_echoed(&client, Bytes::from_static(b"x")).await;
        }
        assert_eq!(started.seen.produced.load(Ordering::SeqCst), 32, "{link:?}");
        // Taking 16 grants 16 more, and (items this small) widens the
        // window to `max_stream_window`, 16,384: 32 + 16 + 16,352.
        for n in 0..16 {
            assert_eq!(stream.next().await.unwrap().unwrap(), Number(n));
        }
        eventually("the handler produced what was granted", || {
            started.seen.produced.load(Ordering::SeqCst) >= 16_400
        })
        .await;
        for _ in 0..3 {
            assert_echoed(&client, Bytes::from_static(b"x")).await;
        }
        assert_eq!(
            started.seen.produced.load(Ordering::SeqCst),
            16_400,
            "{link:?}"
        );
        drop(stream);
    }
}

/// With `max_stream_window` at 32 the window never widens: the client
/// holds at most 32 items of a stream, however small.
#[tokio::test]
async fn a_window_of_32_stays_32() {
    let started = start();
    let mut config = ClientConfig::default();
    config.max_stream_window = 8; // counts as 32
    let client = Client::connect_tcp_with(started.tcp, config).await.unwrap();
    let mut stream = client.request_stream(&Endless).await.unwrap();
    for n in 0..16 {
        assert_eq!(stream.next().await.unwrap().unwrap(), Number(n));
    }
    eventually("the handler produced 16 more", || {
        started.seen.produced.load(Ordering::SeqCst) >= 48
    })
    .await;
    for _ in 0..3 {
        assert_echoed(&client, Bytes::from_static(b"x")).await;
    }
    assert_eq!(started.seen.produced.load(Ordering::SeqCst), 48);
}

#[tokio::test]
async fn dropping_the_stream_cancels_it_on_the_server() {
    let started = start();
    for (index, (link, secure)) in LINKS.into_iter().enumerate() {
        let client = connect(&started, link, secure).await;
        let mut stream = client.request_stream(&Endless).await.unwrap();
        assert_eq!(stream.next().await.unwrap().unwrap(), Number(0));
        drop(stream);
        eventually("the handler's stream was dropped", || {
            started.seen.dropped.load(Ordering::SeqCst) == index as u32 + 1
        })
        .await;
        assert_echoed(&client, Bytes::from_static(b"still up")).await;
    }
}

#[tokio::test]
async fn an_upload_reaches_the_handler_in_order() {
    let started = start();
    for (link, secure) in LINKS {
        let client = connect(&started, link, secure).await;
        let mut upload = client
            .upload(&Store {
                read: 0,
                answer_after: 0,
            })
            .await
            .unwrap();
        for n in 0..1000 {
            upload.send(&Number(n)).await.unwrap();
        }
        assert_eq!(upload.finish().await.unwrap(), Total((0..1000).sum()));
    }
}

/// A handler that stops taking items holds the client at its credit.
#[tokio::test]
async fn a_handler_that_stops_reading_holds_the_uploader_at_its_credit() {
    let started = start();
    let client = connect(&started, Link::Tcp, false).await;
    let upload = client
        .upload(&Store {
            read: 5,
            answer_after: 0,
        })
        .await
        .unwrap();
    let sent = Arc::new(AtomicU32::new(0));
    let sender = tokio::spawn({
        let sent = Arc::clone(&sent);
        async move {
            let mut upload = upload;
            for n in 0..100 {
                upload.send(&Number(n)).await.unwrap();
                sent.fetch_add(1, Ordering::SeqCst);
            }
            upload.finish().await
        }
    });
    // 32 of credit at first: 5 taken, 27 held by the server.
    eventually("the client sent its initial credit", || {
        sent.load(Ordering::SeqCst) >= 32
    })
    .await;
    for _ in 0..3 {
        assert_echoed(&client, Bytes::from_static(b"x")).await;
    }
    assert_eq!(sent.load(Ordering::SeqCst), 32);
    assert_eq!(started.seen.taken.load(Ordering::SeqCst), 5);
    started.seen.go_on.notify_one();
    let total = sender.await.unwrap().unwrap();
    assert_eq!(total, Total((0..100).sum()));
}

#[tokio::test]
async fn dropping_an_upload_cancels_its_handler_and_an_early_answer_ends_it() {
    let started = start();
    let client = connect(&started, Link::Tcp, true).await;
    let mut upload = client
        .upload(&Store {
            read: 0,
            answer_after: 0,
        })
        .await
        .unwrap();
    upload.send(&Number(1)).await.unwrap();
    eventually("the handler took the item", || {
        started.seen.taken.load(Ordering::SeqCst) == 1
    })
    .await;
    drop(upload);
    eventually("the handler was dropped", || {
        started.seen.dropped.load(Ordering::SeqCst) == 1
    })
    .await;

    // The handler answers after 3 items: sending more then fails, and
    // `finish` has its answer.
    let mut upload = client
        .upload(&Store {
            read: 0,
            answer_after: 3,
        })
        .await
        .unwrap();
    let mut ended = None;
    for n in 0..1000 {
        if let Err(error) = upload.send(&Number(n)).await {
            ended = Some(error);
            break;
        }
    }
    assert!(matches!(ended, Some(ClientError::UploadEnded)), "{ended:?}");
    assert_eq!(upload.finish().await.unwrap(), Total(3));
    assert_echoed(&client, Bytes::from_static(b"still up")).await;
}

#[tokio::test]
async fn a_failed_upload_reaches_the_handler_as_its_error() {
    let started = start();
    let client = connect(&started, Link::Ws, false).await;
    let mut upload = client
        .upload(&Store {
            read: 0,
            answer_after: 0,
        })
        .await
        .unwrap();
    upload.send(&Number(1)).await.unwrap();
    let error = upload
        .fail(ErrorCode::from_u16(160), "the file vanished")
        .await
        .unwrap_err();
    match error {
        ClientError::Remote { code, message } => {
            assert_eq!(code, ErrorCode::from_u16(160));
            assert_eq!(message, "the file vanished");
        }
        other => panic!("expected the upload's own error, got {other:?}"),
    }
}

async fn download(client: &Client, len: u64) -> u64 {
    let mut stream = client.request_stream(&Download { len }).await.unwrap();
    let mut received = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.unwrap();
        assert!(chunk.data.len() <= 64 * 1024);
        // Spot checks: the first bytes of each chunk.
        let head = chunk.data.len().min(16);
        assert_eq!(&chunk.data[..head], &pattern(received, head)[..]);
        received += chunk.data.len() as u64;
    }
    received
}

#[tokio::test]
async fn byte_streams_both_ways_on_every_link() {
    let started = start();
    for (link, secure) in LINKS {
        let client = connect(&started, link, secure).await;
        let len = 3 * 1024 * 1024 + 17;
        assert_eq!(download(&client, len).await, len, "{link:?} {secure}");
        let mut upload = client.upload(&Put).await.unwrap();
        let sent = upload
            .send_reader(PatternReader { offset: 0, len })
            .await
            .unwrap();
        assert_eq!(sent, len);
        assert_eq!(upload.finish().await.unwrap(), Total(len));
    }
}

/// A reader that gives uneven reads (1 byte to more than a chunk, so
/// each length a chunk's varint can take) and is pending before every
/// other one: every byte arrives, in order, on every link; a read error
/// ends the stream with `INTERNAL` after the bytes read before it, and so
/// does a panic, the connection staying up. (On a plain link a read after
/// a large one goes straight into its frame, the second round's 1, 4,464
/// (a 70,000-byte read's rest) and 16,384 bytes among them, one to three
/// bytes of varint; a read after a small one goes into a batch; on a
/// sealed link each goes through a buffer.)
#[tokio::test]
async fn uneven_and_pending_reads_arrive_whole_and_a_failing_reader_ends_the_stream() {
    let started = start();
    for (link, secure) in LINKS {
        let client = connect(&started, link, secure).await;
        for end in [0, 1, 2] {
            let stream = client.request_stream(&Trickled { end }).await.unwrap();
            let (chunks, error) = collect(stream).await;
            let mut received = Vec::new();
            for chunk in &chunks {
                assert!(!chunk.data.is_empty() && chunk.data.len() <= 64 * 1024);
                received.extend_from_slice(&chunk.data);
            }
            let what = format!("{link:?}, sealed {secure}, end {end}");
            assert_eq!(received.len() as u64, Trickle::len(), "{what}");
            assert!(
                received == pattern(0, received.len()),
                "{what}: bytes differ"
            );
            match (end, error) {
                (0, None) => {}
                (1 | 2, Some(ClientError::Remote { code, .. })) => {
                    assert_eq!(code, ErrorCode::Internal, "{what}");
                }
                (_, other) => panic!("{what}: ended with {other:?}"),
            }
            assert_echoed(&client, Bytes::from_static(b"still up")).await;
        }
    }
}

/// 100 MiB each way on one connection, with no 100 MiB buffer anywhere:
/// the server reads its bytes from a generator as credit allows, the
/// client checks and drops each chunk. Plain TCP (sealing 200 MiB in a
/// debug build would take most of a minute).
#[tokio::test]
async fn a_hundred_mebibytes_each_way() {
    let started = start();
    let client = connect(&started, Link::Tcp, false).await;
    let len = 100 * 1024 * 1024;
    let begun = Instant::now();
    assert_eq!(download(&client, len).await, len);
    let mut upload = client.upload(&Put).await.unwrap();
    upload
        .send_reader(PatternReader { offset: 0, len })
        .await
        .unwrap();
    assert_eq!(upload.finish().await.unwrap(), Total(len));
    eprintln!("200 MiB in {:?}", begun.elapsed());
}

/// Twenty streams flowing at once on one connection leave room for its
/// ordinary requests.
#[tokio::test]
async fn many_streams_do_not_starve_requests() {
    let started = start();
    for (link, secure) in [(Link::Tcp, false), (Link::Ws, true)] {
        let client = Arc::new(connect(&started, link, secure).await);
        let received = Arc::new(AtomicU64::new(0));
        let mut readers = Vec::new();
        for _ in 0..20 {
            let mut stream = client.request_stream(&Endless).await.unwrap();
            let received = Arc::clone(&received);
            readers.push(tokio::spawn(async move {
                while let Some(item) = stream.next().await {
                    item.unwrap();
                    received.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        eventually("the streams flow", || {
            received.load(Ordering::Relaxed) > 20 * 100
        })
        .await;
        // The limit is 20: one more is refused.
        let mut extra = client.request_stream(&Endless).await.unwrap();
        match extra.next().await {
            Some(Err(ClientError::Remote { code, .. })) => {
                assert_eq!(code, ErrorCode::Overloaded)
            }
            other => panic!("expected OVERLOADED, got {other:?}"),
        }
        // Each round trip waits at most behind what is already queued (the
        // server's outbound high-water mark, the client's windows), never
        // for the streams to end.
        let mut slowest = Duration::ZERO;
        for n in 0..50u32 {
            let begun = Instant::now();
            assert_echoed(&client, Bytes::from(n.to_string())).await;
            slowest = slowest.max(begun.elapsed());
        }
        let before = received.load(Ordering::Relaxed);
        eprintln!("{link:?}: the slowest of 50 round trips beside 20 streams took {slowest:?}");
        assert!(
            slowest < Duration::from_secs(3),
            "a round trip beside 20 streams took {slowest:?}"
        );
        eventually("the streams still flow", || {
            received.load(Ordering::Relaxed) > before + 1000
        })
        .await;
        for reader in readers {
            reader.abort();
        }
    }
}

#[tokio::test]
async fn policies_apply_to_streams() {
    let started = start();
    let client = connect(&started, Link::Tcp, false).await;
    // Permission: refused before the handler runs.
    let mut stream = client.request_stream(&Secret).await.unwrap();
    match stream.next().await {
        Some(Err(ClientError::Remote { code, .. })) => assert_eq!(code, ErrorCode::Unauthorized),
        other => panic!("expected UNAUTHORIZED, got {other:?}"),
    }
    assert_eq!(started.seen.produced.load(Ordering::SeqCst), 0);
    // Time limit: the whole stream, not just the handler's call.
    let (items, error) = collect(client.request_stream(&Limited).await.unwrap()).await;
    assert!(!items.is_empty(), "items came before the limit");
    match error {
        Some(ClientError::Remote { code, .. }) => assert_eq!(code, ErrorCode::Timeout),
        other => panic!("expected TIMEOUT, got {other:?}"),
    }
}

#[tokio::test]
async fn a_lost_link_fails_the_stream() {
    let started = start();
    let client = connect(&started, Link::Tcp, false).await;
    let (items, error) = collect(client.request_stream(&Kicked).await.unwrap()).await;
    assert!(items.len() <= 32);
    assert!(
        matches!(error, Some(ClientError::Closed(_))),
        "expected Closed, got {error:?}"
    );
}

/// Malformed stream frames close the connection `MALFORMED`: a credit
/// whose body is not 4 bytes, an upload item beyond its credit.
#[tokio::test]
async fn malformed_stream_frames_close_the_connection() {
    let started = start();
    let mut raw = RawConnection::connect(started.tcp).await;
    raw.send_body(Header::new(STREAM_CREDIT, Flags::NONE, 7), &[1, 0, 0])
        .await;
    raw.expect_disconnect(DisconnectReason::Malformed).await;

    let mut raw = RawConnection::connect(started.tcp).await;
    // A credit or an item for no open stream is dropped.
    raw.send(
        Header::new(STREAM_CREDIT, Flags::NONE, 9),
        &StreamCredit::items(4),
    )
    .await;
    raw.send_body(Header::new(STREAM_ITEM, Flags::NONE, 9), &[0; 4])
        .await;
    // An upload (id 3) and 33 items: one beyond the initial credit.
    raw.request(
        &Store {
            read: 1,
            answer_after: 0,
        },
        3,
    )
    .await;
    for n in 0..33u32 {
        raw.send(Header::new(STREAM_ITEM, Flags::NONE, 3), &Number(n))
            .await;
    }
    raw.expect_disconnect(DisconnectReason::Malformed).await;
}

/// A receiver that does not accept batches gets one `STREAM_ITEM` per
/// item; once it accepts them (`STREAM_CREDIT` with its fifth byte), small
/// items come several to a `STREAM_ITEMS` frame, in order, within credit.
#[tokio::test]
async fn batches_go_only_to_a_receiver_that_accepts_them() {
    let started = start();
    let mut raw = RawConnection::connect(started.tcp).await;
    raw.request(
        &Count {
            n: 1000,
            fail_at: 0,
        },
        5,
    )
    .await;
    for n in 0..32 {
        let frame = raw.recv().await.expect("an item");
        assert_eq!(frame.header.opcode, STREAM_ITEM, "item {n} alone");
        assert_eq!(Number::decode_packet(&frame.body).unwrap(), Number(n));
    }
    // More than the rest: the server polls the end only with credit left.
    let accept = StreamCredit {
        items: 2000,
        batches: true,
    };
    raw.send(Header::new(STREAM_CREDIT, Flags::NONE, 5), &accept)
        .await;
    let frames = raw_download::<Number>(&mut raw, 5, Count::OPCODE).await;
    let items: Vec<Number> = frames
        .iter()
        .flat_map(|(_, _, items)| items.clone())
        .collect();
    assert_eq!(
        items,
        (32..1000).map(Number).collect::<Vec<_>>(),
        "every item, once"
    );
    let frames = frames.len();
    assert!(frames < 968 / 10, "968 items came in {frames} frames");
}

/// Items of many sizes, some near the frame limit, come in order through
/// batches: an item that would take a batch past the limit goes alone.
#[tokio::test]
async fn items_of_every_size_pass_through_batches_within_the_frame_limit() {
    let started = start_with(|builder| builder.max_frame_size(2048));
    for (link, secure) in LINKS {
        let client = connect(&started, link, secure).await;
        let (items, error) =
            collect(client.request_stream(&Sizes { n: 3000 }).await.unwrap()).await;
        assert!(error.is_none(), "{link:?} {secure}: {error:?}");
        assert_eq!(items.len(), 3000, "{link:?} {secure}");
        for (i, item) in items.into_iter().enumerate() {
            assert_eq!(item, sized_chunk(i as u32), "{link:?} {secure}: item {i}");
        }
    }
}

/// The stream frames of download `id` on `raw` up to its answer (a
/// response under `opcode`): each frame's opcode, body length and items.
async fn raw_download<T: Packet>(
    raw: &mut RawConnection,
    id: u32,
    opcode: u16,
) -> Vec<(u16, usize, Vec<T>)> {
    let mut frames = Vec::new();
    loop {
        let frame = raw.recv().await.expect("items, then the answer");
        assert_eq!(frame.header.request_id, id);
        if frame.header.flags.is_response() {
            assert_eq!(frame.header.opcode, opcode);
            return frames;
        }
        let items = match frame.header.opcode {
            STREAM_ITEMS => BatchItems::new(frame.body.clone())
                .map(|range| T::decode_packet_within(&frame.body, range).unwrap())
                .collect(),
            STREAM_ITEM => vec![T::decode_packet(&frame.body).unwrap()],
            other => panic!("a frame {other:#06x} in the stream"),
        };
        frames.push((frame.header.opcode, frame.body.len(), items));
    }
}

/// A large item among small ones goes alone (`STREAM_ITEM`), not at the end
/// of a batch: a batch stays near its 8 KiB, whatever its last item.
#[tokio::test]
async fn a_large_item_goes_alone_not_in_a_batch() {
    let started = start();
    let mut raw = RawConnection::connect(started.tcp).await;
    raw.request(&Mixed, 5).await;
    let accept = StreamCredit {
        items: 100,
        batches: true,
    };
    raw.send(Header::new(STREAM_CREDIT, Flags::NONE, 5), &accept)
        .await;
    let frames = raw_download::<Chunk>(&mut raw, 5, Mixed::OPCODE).await;
    for (opcode, len, _) in &frames {
        assert!(
            *opcode != STREAM_ITEMS || *len < 12 * 1024,
            "a batch of {len} bytes"
        );
    }
    let items: Vec<Chunk> = frames.into_iter().flat_map(|(_, _, items)| items).collect();
    assert_eq!(items, mixed_chunks());
}

/// The Rust client accepts batches on every grant, not only in the credit
/// it sends with the request (which a server drops when its handler has
/// not returned the stream yet, as an `async` one).
#[tokio::test]
async fn every_grant_of_the_client_accepts_batches() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        let mut raw = RawConnection::over(socket);
        let request = raw.recv().await.expect("the request");
        let id = request.header.request_id;
        for n in 0..32 {
            raw.send(Header::new(STREAM_ITEM, Flags::NONE, id), &Number(n))
                .await;
        }
        let mut grants = Vec::new();
        while grants.len() < 2 {
            let frame = raw.recv().await.expect("credit");
            if frame.header.opcode == STREAM_CREDIT {
                grants.push(StreamCredit::decode_body(&frame.body).unwrap());
            }
        }
        grants
    });
    let client = Client::connect_tcp(address).await.unwrap();
    let mut stream = client
        .request_stream(&Count { n: 40, fail_at: 0 })
        .await
        .unwrap();
    for n in 0..16 {
        assert_eq!(stream.next().await.unwrap().unwrap(), Number(n));
    }
    let grants = server.await.unwrap();
    assert_eq!(grants[0].items, 0, "the credit sent with the request");
    assert!(grants[1].items > 0, "a grant: {:?}", grants[1]);
    assert!(grants.iter().all(|grant| grant.batches), "{grants:?}");
}

/// The server never accepts batches on an upload: `STREAM_ITEMS` there
/// closes the connection `MALFORMED` (and for no open stream is dropped).
#[tokio::test]
async fn batches_on_an_upload_close_the_connection() {
    let started = start();
    let mut raw = RawConnection::connect(started.tcp).await;
    let mut batch = ternio::protocol::BytesMut::new();
    put_batch_item(&mut batch, |out: &mut ternio::protocol::BytesMut| {
        Number(1).encode(out);
    });
    raw.send_body(Header::new(STREAM_ITEMS, Flags::NONE, 9), &batch)
        .await;
    assert_echoed_raw(&mut raw).await;
    raw.request(
        &Store {
            read: 0,
            answer_after: 0,
        },
        3,
    )
    .await;
    raw.send_body(Header::new(STREAM_ITEMS, Flags::NONE, 3), &batch)
        .await;
    raw.expect_disconnect(DisconnectReason::Malformed).await;
}

/// One echo through `raw`: what came before it was taken.
async fn assert_echoed_raw(raw: &mut RawConnection) {
    raw.request(
        &Echo {
            payload: Bytes::from_static(b"x"),
        },
        77,
    )
    .await;
    let frame = raw.recv().await.expect("the echo");
    assert_eq!(frame.header.request_id, 77);
    assert!(frame.header.flags.is_response());
}

/// A server (an attacker's, scripted here) that sends batches beyond the
/// credit granted, or a batch whose lengths run past its body: the client
/// closes the connection `MALFORMED` and fails the stream.
#[tokio::test]
async fn a_client_refuses_batches_beyond_credit_or_malformed() {
    let beyond = {
        let mut body = ternio::protocol::BytesMut::new();
        for n in 0..33u32 {
            put_batch_item(&mut body, |out: &mut ternio::protocol::BytesMut| {
                Number(n).encode(out)
            });
        }
        body.to_vec()
    };
    let cut_short = vec![4, 1, 0, 0, 0, 9, 1];
    for body in [beyond, cut_short] {
        let body: Vec<u8> = body;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (socket, _) = listener.accept().await.unwrap();
            let mut raw = RawConnection::over(socket);
            let request = raw.recv().await.expect("the request");
            let id = request.header.request_id;
            raw.send_body(Header::new(STREAM_ITEMS, Flags::NONE, id), &body)
                .await;
            // The client's accepting credit, then its DISCONNECT.
            loop {
                let frame = raw.recv().await.expect("a DISCONNECT");
                if frame.header.opcode == ternio::protocol::system::DISCONNECT {
                    let disconnect =
                        ternio::protocol::system::Disconnect::decode_body(&frame.body).unwrap();
                    return disconnect.reason;
                }
            }
        });
        let client = Client::connect_tcp(address).await.unwrap();
        let (items, error) = collect(
            client
                .request_stream(&Count { n: 40, fail_at: 0 })
                .await
                .unwrap(),
        )
        .await;
        assert!(items.is_empty(), "{items:?}");
        assert!(matches!(error, Some(ClientError::Closed(_))), "{error:?}");
        assert_eq!(server.await.unwrap(), DisconnectReason::Malformed);
    }
}

/// A server that resumes sessions (with `ttl` and a replay buffer of
/// `replay` bytes), a proxy to it that cuts only on `cut_all`, and a
/// client through it that resumes quickly (secure when `secure`), up and
/// running.
async fn resumable_through_proxy_with(
    ttl: Duration,
    replay: usize,
    secure: bool,
) -> (Started, CuttingProxy, Client) {
    let started = start_with(|builder| builder.resumable(ttl, replay));
    let proxy = CuttingProxy::start(started.tcp, 1, 0..0).await;
    let mut config = ClientConfig::default();
    config.reconnect = Some(quick_reconnect());
    config.resume = true;
    if secure {
        config.secure = Some(ternio_client::SecureConfig::anonymous());
    }
    let client = Client::connect_tcp_with(proxy.address(), config)
        .await
        .unwrap();
    assert_eq!(client.is_secure(), secure);
    assert_echoed(&client, Bytes::from_static(b"up")).await;
    (started, proxy, client)
}

async fn resumable_through_proxy() -> (Started, CuttingProxy, Client) {
    resumable_through_proxy_with(Duration::from_secs(30), 64 * 1024, false).await
}

/// Waits (at most 10 s) for the session's `count`th resumption; fails if it
/// is reported lost instead.
async fn resumed_count(events: &mut tokio::sync::watch::Receiver<SessionEvent>, count: u64) {
    let event = tokio::time::timeout(
        Duration::from_secs(10),
        events.wait_for(|event| match event {
            SessionEvent::Resumed { count: now } => *now >= count,
            SessionEvent::Lost { .. } => true,
            _ => false,
        }),
    )
    .await
    .expect("the session resumes")
    .unwrap()
    .clone();
    assert!(
        matches!(event, SessionEvent::Resumed { .. }),
        "the session was not resumed: {event:?}"
    );
}

/// Waits (at most 10 s) for the session to be resumed.
async fn resumed(events: &mut tokio::sync::watch::Receiver<SessionEvent>) {
    resumed_count(events, 1).await;
}

/// A download open when the link is lost goes on once the session is
/// resumed, across several cuts: every item once, in order, then the end;
/// plain and secure. (Before 2026-12 the stream failed with `Closed`.)
#[tokio::test]
async fn a_download_goes_on_across_resumptions_every_item_once_in_order() {
    for secure in [false, true] {
        let (_started, proxy, client) =
            resumable_through_proxy_with(Duration::from_secs(30), 64 * 1024, secure).await;
        let mut events = client.session_events();
        let n = 6_000;
        let mut stream = client
            .request_stream(&Count { n, fail_at: 0 })
            .await
            .unwrap();
        let mut next = 0u32;
        for cut in 1..=3u64 {
            // Read a part, then cut while the rest is under way (credit
            // holds the server a window ahead).
            for _ in 0..1_000 {
                assert_eq!(stream.next().await.unwrap().unwrap(), Number(next));
                next += 1;
            }
            proxy.cut_all();
            // A little more, from what had arrived before the cut.
            for _ in 0..10 {
                assert_eq!(stream.next().await.unwrap().unwrap(), Number(next));
                next += 1;
            }
            resumed_count(&mut events, cut).await;
        }
        while let Some(item) = stream.next().await {
            assert_eq!(item.unwrap(), Number(next), "secure: {secure}");
            next += 1;
        }
        assert_eq!(next, n, "every item, once (secure: {secure})");
        assert!(proxy.cuts() >= 3);
        // The session is still resumable: another cut resumes it.
        proxy.cut_all();
        resumed_count(&mut events, 4).await;
        assert_echoed(&client, Bytes::from_static(b"after")).await;
    }
}

/// An upload open when the link is lost goes on once the session is
/// resumed, across several cuts: the handler takes every item once, in
/// order (their sum), and the answer comes; plain and secure.
#[tokio::test]
async fn an_upload_goes_on_across_resumptions_every_item_once_in_order() {
    for secure in [false, true] {
        let (started, proxy, client) =
            resumable_through_proxy_with(Duration::from_secs(30), 64 * 1024, secure).await;
        let mut events = client.session_events();
        let mut upload = client
            .upload(&Store {
                read: 0,
                answer_after: 0,
            })
            .await
            .unwrap();
        let n = 4_000u32;
        for i in 0..n {
            upload.send(&Number(i)).await.unwrap();
            if i > 0 && i % 1_000 == 0 {
                proxy.cut_all();
                resumed_count(&mut events, u64::from(i / 1_000)).await;
            }
        }
        let total = upload.finish().await.unwrap();
        let expected: u64 = (0..u64::from(n)).sum();
        assert_eq!(total, Total(expected), "secure: {secure}");
        assert_eq!(
            started.seen.taken.load(Ordering::SeqCst),
            n,
            "each item once (secure: {secure})"
        );
    }
}

/// Once the server's replay buffer overflowed (an answer larger than its
/// bound), the server can no longer resume the session but still
/// acknowledges what it receives (docs/PROTOCOL.md section 4.2: counting
/// goes on), so an upload that waits for room in the client's replay
/// buffer goes on. (Before, the server stopped sending `ACK`s with its
/// ticket, and the upload waited forever once the client's buffer was
/// three quarters full.)
#[tokio::test]
async fn after_the_servers_replay_buffer_overflowed_its_acks_still_make_room_for_an_upload() {
    // The server keeps 4 KiB, the client 64 KiB.
    let (started, _proxy, client) =
        resumable_through_proxy_with(Duration::from_secs(30), 4 * 1024, false).await;
    // An 8 KB answer overflows the server's buffer.
    assert_echoed(&client, Bytes::from(vec![7u8; 8 * 1024])).await;
    // 10,000 items of 11 bytes kept each (7 of header, a u32): 110 KB,
    // more than twice the client's room.
    let n = 10_000u32;
    let total = tokio::time::timeout(Duration::from_secs(20), async {
        let mut upload = client
            .upload(&Store {
                read: 0,
                answer_after: 0,
            })
            .await
            .unwrap();
        for i in 0..n {
            upload.send(&Number(i)).await.unwrap();
        }
        upload.finish().await.unwrap()
    })
    .await
    .expect("the upload stalled: no ACK made room in the client's replay buffer");
    assert_eq!(total, Total((0..u64::from(n)).sum()));
    assert_eq!(started.seen.taken.load(Ordering::SeqCst), n);
}

/// Byte streams both ways on a resumable session whose replay buffer is 64
/// KiB: their chunks are cut to fit it (not 64 KiB), so a cut in the
/// middle of each resumes the session (it would be lost with an overflowed
/// buffer), and every byte arrives once, in order.
#[tokio::test]
async fn byte_streams_keep_the_session_resumable_across_cuts() {
    let (_started, proxy, client) = resumable_through_proxy().await;
    let mut events = client.session_events();
    let len = 3 * 1024 * 1024u64;
    let mut stream = client.request_stream(&Download { len }).await.unwrap();
    let mut got = 0u64;
    let mut largest = 0;
    let mut cuts = 0;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.unwrap();
        assert_eq!(chunk.data[..], pattern(got, chunk.data.len())[..]);
        largest = largest.max(chunk.data.len());
        got += chunk.data.len() as u64;
        if cuts < 3 && got >= (cuts + 1) * len / 4 {
            cuts += 1;
            proxy.cut_all();
        }
    }
    assert_eq!(got, len, "every byte, once");
    assert!(
        largest <= 8 * 1024,
        "chunks fit the replay buffer: {largest}"
    );
    resumed_count(&mut events, 3).await;

    // An upload from a reader that cuts the link halfway.
    let mut upload = client.upload(&Put).await.unwrap();
    let len = 2 * 1024 * 1024u64;
    let reader = CutHalfway {
        inner: PatternReader { offset: 0, len },
        proxy: &proxy,
        at: len / 2,
    };
    let sent = upload.send_reader(reader).await;
    assert_eq!(sent.unwrap(), len);
    assert_eq!(upload.finish().await.unwrap(), Total(len));
    resumed_count(&mut events, 4).await;
    assert_echoed(&client, Bytes::from_static(b"still resumable")).await;
}

/// Through a proxy that cuts every connection after a random number of
/// bytes (mid-frame included), a download and an upload on a secure
/// session get every item once and in order, whatever the cuts.
#[tokio::test]
async fn streams_survive_random_cuts() {
    let started = start_with(|builder| builder.resumable(Duration::from_secs(30), 64 * 1024));
    let proxy = CuttingProxy::start(started.tcp, 0x5EED, 2_000..20_000).await;
    let mut config = ClientConfig::default();
    config.reconnect = Some(quick_reconnect());
    config.resume = true;
    config.secure = Some(ternio_client::SecureConfig::anonymous());
    config.request_timeout = Duration::from_secs(20);
    let client = Client::connect_tcp_with(proxy.address(), config)
        .await
        .unwrap();
    let n = 20_000;
    let mut stream = client
        .request_stream(&Count { n, fail_at: 0 })
        .await
        .unwrap();
    let mut next = 0;
    while let Some(item) = stream.next().await {
        assert_eq!(item.unwrap(), Number(next));
        next += 1;
    }
    assert_eq!(next, n, "every item, once");
    let mut upload = client
        .upload(&Store {
            read: 0,
            answer_after: 0,
        })
        .await
        .unwrap();
    let n = 5_000u32;
    for i in 0..n {
        upload.send(&Number(i)).await.unwrap();
    }
    let expected: u64 = (0..u64::from(n)).sum();
    assert_eq!(upload.finish().await.unwrap(), Total(expected));
    assert_eq!(started.seen.taken.load(Ordering::SeqCst), n);
    assert!(proxy.cuts() >= 3, "only {} cuts", proxy.cuts());
    match &*client.session_events().borrow() {
        SessionEvent::Resumed { count } => assert!(*count >= 3, "{count} resumptions"),
        other => panic!("the session was not resumed: {other:?}"),
    }
}

/// A download whose session cannot be resumed (the network is down past
/// the server's time to live) fails with `Closed`; the server dropped the
/// handler's stream when the suspended session expired, not when its link
/// was lost.
#[tokio::test]
async fn a_download_whose_session_expires_fails_and_the_server_drops_its_stream() {
    let ttl = Duration::from_millis(600);
    let (started, proxy, client) = resumable_through_proxy_with(ttl, 64 * 1024, false).await;
    let mut events = client.session_events();
    let mut stream = client.request_stream(&Endless).await.unwrap();
    assert_eq!(stream.next().await.unwrap().unwrap(), Number(0));
    proxy.set_open(false);
    proxy.cut_all();
    // The session waits for its client with its stream.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        started.seen.dropped.load(Ordering::SeqCst),
        0,
        "the suspended session keeps the handler's stream"
    );
    eventually("the expired session dropped the handler's stream", || {
        started.seen.dropped.load(Ordering::SeqCst) == 1
    })
    .await;
    proxy.set_open(true);
    let lost = tokio::time::timeout(
        Duration::from_secs(10),
        events.wait_for(|event| matches!(event, SessionEvent::Lost { .. })),
    )
    .await
    .expect("the loss is reported")
    .unwrap()
    .clone();
    assert!(matches!(lost, SessionEvent::Lost { .. }), "{lost:?}");
    // What arrived before the cut may still be read; then the error.
    let error = loop {
        match stream.next().await {
            Some(Ok(_)) => {}
            Some(Err(error)) => break error,
            None => panic!("the stream ended without an error"),
        }
    };
    assert!(matches!(error, ClientError::Closed(_)), "{error:?}");
    assert!(stream.next().await.is_none());
    // The new session runs streams.
    let (items, error) = collect(
        client
            .request_stream(&Count { n: 100, fail_at: 0 })
            .await
            .unwrap(),
    )
    .await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(items.len(), 100);
}

/// A stream dropped while no link is up is cancelled once the session
/// resumes: the server drops the handler's stream (with `concurrency = 1`,
/// a second one would otherwise be `OVERLOADED` for good).
#[tokio::test]
async fn a_stream_dropped_while_reconnecting_is_cancelled_on_resumption() {
    let (started, proxy, client) = resumable_through_proxy().await;
    let mut events = client.session_events();
    let mut stream = client.request_stream(&Late).await.unwrap();
    assert_eq!(stream.next().await.unwrap().unwrap(), Number(0));
    proxy.set_open(false);
    proxy.cut_all();
    eventually("the client noticed the loss", || {
        matches!(
            client.state(),
            ternio_client::ConnectionState::Reconnecting { .. }
        )
    })
    .await;
    drop(stream);
    proxy.set_open(true);
    resumed(&mut events).await;
    assert_late_cancelled(&started, &client).await;
}

/// The server dropped the one `Late` stream (cancelled), and its
/// concurrency slot is free: a new one runs.
async fn assert_late_cancelled(started: &Started, client: &Client) {
    eventually("the server dropped the handler's stream", || {
        started.seen.dropped.load(Ordering::SeqCst) == 1
    })
    .await;
    let mut stream = client.request_stream(&Late).await.unwrap();
    for n in 0..5 {
        assert_eq!(stream.next().await.unwrap().unwrap(), Number(n));
    }
}

/// A stream dropped just before its link is lost, whose `CANCEL` the link
/// lost (a system frame, not replayed): cancelled again once the session
/// resumes, so the server drops the handler's stream (with `concurrency =
/// 1`, a second one would otherwise be `OVERLOADED` for good).
#[tokio::test]
async fn a_cancel_the_lost_link_lost_goes_again_on_resumption() {
    let (started, proxy, client) = resumable_through_proxy().await;
    let mut events = client.session_events();
    let mut stream = client.request_stream(&Late).await.unwrap();
    assert_eq!(stream.next().await.unwrap().unwrap(), Number(0));
    // The path loses what the client sends, then breaks.
    proxy.set_losing_up(true);
    drop(stream);
    // The CANCEL is written as the stream drops: the proxy reads and loses it.
    tokio::time::sleep(Duration::from_millis(100)).await;
    proxy.set_losing_up(false);
    proxy.cut_all();
    resumed(&mut events).await;
    assert_late_cancelled(&started, &client).await;
}

/// A shutdown does not wait its whole grace for streams that cannot finish
/// (the closing connection reads no more credit or items): a download out
/// of credit and an open upload end with the server's error, the handlers
/// answer, and the connection closes.
#[tokio::test]
async fn a_shutdown_ends_the_streams_that_cannot_finish_instead_of_waiting_its_grace() {
    let started = start_with(|builder| {
        let mut config = ternio::ServerConfig::default();
        config.shutdown_grace = Duration::from_secs(30);
        builder.config(config)
    });
    let client = connect(&started, Link::Tcp, false).await;
    let mut download = client.request_stream(&Endless).await.unwrap();
    assert_eq!(download.next().await.unwrap().unwrap(), Number(0));
    let mut upload = client
        .upload(&Store {
            read: 0,
            answer_after: 0,
        })
        .await
        .unwrap();
    upload.send(&Number(1)).await.unwrap();
    eventually("the handler took the item", || {
        started.seen.taken.load(Ordering::SeqCst) == 1
    })
    .await;
    let began = std::time::Instant::now();
    let drained = tokio::time::timeout(Duration::from_secs(10), started._handle.shutdown())
        .await
        .expect("the shutdown waited for the streams");
    assert!(drained);
    assert!(began.elapsed() < Duration::from_secs(10));
    let error = loop {
        match download.next().await {
            Some(Ok(_)) => {}
            Some(Err(error)) => break error,
            None => panic!("the download ended without an error"),
        }
    };
    // The error answer, or the DISCONNECT right after it (the client
    // reports the lost link first once it is gone).
    match error {
        ClientError::Remote { code, message } => {
            assert_eq!(code, ErrorCode::Internal);
            assert_eq!(message, "the connection is closing");
        }
        ClientError::Closed(ternio_client::CloseReason::Disconnected(disconnect)) => {
            assert_eq!(disconnect.reason, ternio::DisconnectReason::Shutdown);
        }
        other => panic!("expected the server's error or its DISCONNECT, got {other:?}"),
    }
}
