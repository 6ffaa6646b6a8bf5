//! The Rust client resumes its session through a proxy that cuts its
//! connections at random points (inside frames too): every request is
//! answered and run exactly once, every push arrives exactly once and in
//! order, over TCP and WebSocket, plain and secure. And when the server
//! cannot resume (its TTL passed), the client says so and starts anew.

use std::time::Duration;

use bytes::BytesMut;
use ternio::protocol::frame::{Flags, Header};
use ternio::protocol::system::{self, Ack, ErrorBody, ResumeTicket, Ticket, TicketRequest};
use ternio::protocol::{Decode, ErrorCode};
use ternio::{Context, Identity, Packet, ServerBuilder, packet_controller};
use ternio_client::{Client, ClientConfig, SecureConfig, SessionEvent};
use ternio_tests::*;

/// 0x0A00: the server counts it (per connection), pushes `Note` with the
/// count, then answers with the count.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0A00, response = Count)]
struct Next;

/// The count of `Next`s a connection sent, in its store.
#[derive(Debug, Clone, Copy, Default)]
struct Seen(u64);

/// 0x0A01: the server pushes `count` chunks, then answers with the count.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0A01, response = Count)]
struct Burst {
    count: u32,
}

/// 0x0A02: a pushed chunk of 1 KiB, numbered from 1.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0A02)]
struct Chunk {
    seq: u32,
    data: Vec<u8>,
}

#[derive(Default)]
struct Sequencer;

#[packet_controller(explicit)]
impl Sequencer {
    fn burst(request: Burst, ctx: &Context) -> Count {
        for seq in 1..=request.count {
            ctx.push(&Chunk {
                seq,
                data: vec![seq as u8; 1024],
            })
            .expect("room in the outbox");
        }
        Count(u64::from(request.count))
    }

    fn next(_request: Next, ctx: &Context) -> Count {
        let Seen(seen) = ctx.store().get::<Seen>().unwrap_or_default();
        let now = seen + 1;
        ctx.store().insert(Seen(now));
        ctx.push(&Note { seq: now as u32 }).expect("a small push");
        Count(now)
    }
}

/// A server with the sequencer and resumption (30 s, 64 KiB) on TCP and
/// WebSocket; `configure` may change them.
fn server(
    configure: impl FnOnce(ServerBuilder) -> ServerBuilder,
) -> (
    std::net::SocketAddr,
    std::net::SocketAddr,
    ternio::ServerHandle,
) {
    start_server_with_ws(|builder| {
        configure(
            builder
                .controller(Sequencer)
                .resumable(Duration::from_secs(30), 64 * 1024),
        )
    })
}

fn config(secure: Option<SecureConfig>) -> ClientConfig {
    let mut config = ClientConfig::default();
    config.reconnect = Some(quick_reconnect());
    config.secure = secure;
    config.request_timeout = Duration::from_secs(20);
    config
}

/// Waits (at most 10 s) for the session to be reported lost; its reason.
async fn lost_reason(events: &mut tokio::sync::watch::Receiver<SessionEvent>) -> String {
    let lost = tokio::time::timeout(
        Duration::from_secs(10),
        events.wait_for(|event| matches!(event, SessionEvent::Lost { .. })),
    )
    .await
    .expect("the loss is reported")
    .unwrap()
    .clone();
    let SessionEvent::Lost { reason } = lost else {
        unreachable!()
    };
    reason
}

/// Checks that the next `count` pushes are notes 1 to `count`, in order.
async fn pushes_in_order(notes: &mut ternio_client::Subscription<Note>, count: u64) {
    for expected in 1..=count {
        let note = tokio::time::timeout(Duration::from_secs(10), notes.next())
            .await
            .expect("the push within 10 s")
            .expect("a push");
        assert_eq!(u64::from(note.seq), expected, "each push once, in order");
    }
}

/// The next chunk pushed (within 10 s).
async fn next_chunk(chunks: &mut ternio_client::Subscription<Chunk>) -> Chunk {
    tokio::time::timeout(Duration::from_secs(10), chunks.next())
        .await
        .expect("a chunk within 10 s")
        .expect("a chunk")
}

/// Runs `count` requests through `client` while the proxy cuts, and checks
/// that each ran once, in order, and that every push came once, in order.
async fn survives_cuts(client: Client, proxy: &CuttingProxy, count: u64) {
    let mut notes = client.subscribe::<Note>();
    for expected in 1..=count {
        let answer = client
            .request_async(&Next)
            .await
            .unwrap_or_else(|error| panic!("request {expected}: {error}"));
        assert_eq!(answer, Count(expected), "each request runs once, in order");
    }
    pushes_in_order(&mut notes, count).await;
    assert!(proxy.cuts() >= 3, "only {} cuts", proxy.cuts());
    match &*client.session_events().borrow() {
        SessionEvent::Resumed { count } => assert!(*count >= 3, "{count} resumptions"),
        other => panic!("the session was not resumed: {other:?}"),
    }
}

#[tokio::test]
async fn a_plain_tcp_client_resumes_through_random_cuts() {
    let (tcp, _, _server) = server(|builder| builder);
    let proxy = CuttingProxy::start(tcp, 0xC0FFEE, 300..3_000).await;
    let client = Client::connect_tcp_with(proxy.address(), config(None))
        .await
        .unwrap();
    survives_cuts(client, &proxy, 300).await;
}

#[tokio::test]
async fn a_secure_tcp_client_resumes_through_random_cuts() {
    let identity = Identity::generate();
    let pin = *identity.public_key();
    let (tcp, _, _server) = server(move |builder| builder.identity(identity));
    let proxy = CuttingProxy::start(tcp, 0xBADC0DE, 600..4_000).await;
    let client = Client::connect_tcp_with(proxy.address(), config(Some(SecureConfig::pinned(pin))))
        .await
        .unwrap();
    survives_cuts(client, &proxy, 300).await;
}

#[tokio::test]
async fn a_websocket_client_resumes_through_random_cuts() {
    let (_, ws, _server) = server(|builder| builder);
    let proxy = CuttingProxy::start(ws, 0xFEED, 800..4_000).await;
    let url = format!("ws://{}/ws", proxy.address());
    let client = Client::connect_ws_with(&url, config(Some(SecureConfig::anonymous())))
        .await
        .unwrap();
    survives_cuts(client, &proxy, 200).await;
}

#[tokio::test]
async fn past_the_ttl_the_session_is_lost_and_a_new_one_starts() {
    let (tcp, _, _server) =
        server(|builder| builder.resumable(Duration::from_millis(100), 64 * 1024));
    let proxy = CuttingProxy::start(tcp, 1, 0..0).await;
    let client = Client::connect_tcp_with(proxy.address(), config(None))
        .await
        .unwrap();
    assert_eq!(client.request_async(&Next).await.unwrap(), Count(1));
    // The network is down for longer than the server keeps the session.
    proxy.set_open(false);
    proxy.cut_all();
    tokio::time::sleep(Duration::from_millis(400)).await;
    proxy.set_open(true);
    let mut events = client.session_events();
    let lost = tokio::time::timeout(
        Duration::from_secs(10),
        events.wait_for(|event| matches!(event, SessionEvent::Lost { .. })),
    )
    .await
    .expect("the loss is reported")
    .unwrap()
    .clone();
    assert!(matches!(lost, SessionEvent::Lost { .. }), "{lost:?}");
    // A new session: the server's count starts again.
    assert_eq!(client.request_async(&Next).await.unwrap(), Count(1));
}

#[tokio::test]
async fn requests_in_flight_across_cuts_are_answered_once_each() {
    let (tcp, _, _server) = server(|builder| builder);
    let proxy = CuttingProxy::start(tcp, 0xABCD, 500..5_000).await;
    let client = Client::connect_tcp_with(proxy.address(), config(None))
        .await
        .unwrap();
    let mut notes = client.subscribe::<Note>();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut answers = Vec::new();
                for _ in 0..50 {
                    answers.push(client.request_async(&Next).await.expect("answered").0);
                }
                answers
            })
        })
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        answers.extend(task.await.unwrap());
    }
    answers.sort_unstable();
    assert_eq!(
        answers,
        (1..=400).collect::<Vec<u64>>(),
        "each request ran once"
    );
    pushes_in_order(&mut notes, 400).await;
    assert!(proxy.cuts() >= 3, "only {} cuts", proxy.cuts());
}

#[tokio::test]
async fn a_burst_of_pushes_larger_than_the_replay_buffer_keeps_the_session_resumable() {
    // 400 chunks of about 1 KiB: six times the server's 64 KiB replay
    // buffer. The server holds what does not fit until the client's ACKs
    // make room (before, it overflowed and the session was lost).
    let (tcp, _, _server) = server(|builder| builder);
    let proxy = CuttingProxy::start(tcp, 11, 0..0).await;
    let client = Client::connect_tcp_with(proxy.address(), config(None))
        .await
        .unwrap();
    let mut chunks = client.subscribe::<Chunk>();
    assert_eq!(
        client.request_async(&Burst { count: 400 }).await.unwrap(),
        Count(400)
    );
    let mut events = client.session_events();
    for seq in 1..=200 {
        let chunk = next_chunk(&mut chunks).await;
        assert_eq!((chunk.seq, chunk.data[0]), (seq, seq as u8));
    }
    proxy.cut_all();
    for seq in 201..=400 {
        let chunk = next_chunk(&mut chunks).await;
        assert_eq!(chunk.seq, seq, "each chunk once, in order");
    }
    tokio::time::timeout(
        Duration::from_secs(10),
        events.wait_for(|event| matches!(event, SessionEvent::Resumed { .. })),
    )
    .await
    .expect("resumed, not lost")
    .unwrap();
    assert_eq!(client.request_async(&Next).await.unwrap(), Count(1));
}

/// Pushes 300 chunks of about 1 KiB from a server whose replay buffer is
/// 16 KiB (it holds pushes at 12 KiB unacknowledged) to `client`; how long
/// they took, checked in order.
async fn held_burst(client: Client) -> Duration {
    let mut chunks = client.subscribe::<Chunk>();
    let started = std::time::Instant::now();
    assert_eq!(
        client.request_async(&Burst { count: 300 }).await.unwrap(),
        Count(300)
    );
    for seq in 1..=300 {
        assert_eq!(next_chunk(&mut chunks).await.seq, seq);
    }
    started.elapsed()
}

/// A client acknowledges the pushes it read before the server has to hold
/// any: by the bound the server said (at 8 KiB, half of its 16 KiB),
/// rather than at its own byte limit (32 KiB, more than this server may
/// hold) or 200 ms later. Before the early acknowledgements, each 12 KiB
/// the server held waited for the 200 ms delay: this burst took 25
/// windows, at least 4.8 s.
#[tokio::test]
async fn pushes_held_for_acks_do_not_wait_for_the_ack_delay() {
    let (tcp, ws, _server) =
        server(|builder| builder.resumable(Duration::from_secs(30), 16 * 1024));
    let client = Client::connect_tcp_with(tcp, config(None)).await.unwrap();
    let over_tcp = held_burst(client).await;
    let url = format!("ws://{ws}/ws");
    let client = Client::connect_ws_with(&url, config(None)).await.unwrap();
    let over_ws = held_burst(client).await;
    let delays = ternio::protocol::replay::ACK_DELAY * 10;
    assert!(
        over_tcp < delays && over_ws < delays,
        "TCP {over_tcp:?}, WebSocket {over_ws:?}: the pushes waited for the ACK delay"
    );
}

/// 0x0A03: the server pushes `rounds` times 29 chunks of 1 KiB and one of
/// 32 KiB and 200 bytes, then answers with the number of chunks.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0A03, response = Count)]
struct Mixed {
    rounds: u32,
}

#[derive(Default)]
struct MixedPusher;

#[packet_controller(explicit)]
impl MixedPusher {
    fn mixed(request: Mixed, ctx: &Context) -> Count {
        let mut seq = 0;
        for _ in 0..request.rounds {
            for size in std::iter::repeat_n(1024, 29).chain([LARGE]) {
                seq += 1;
                ctx.push(&Chunk {
                    seq,
                    data: vec![seq as u8; size],
                })
                .expect("room in the outbox");
            }
        }
        Count(u64::from(seq))
    }
}

/// The large chunk of [`Mixed`]: 32,982 bytes as the replay bound counts
/// it (header and fields), so that it is acknowledged as it is read.
const LARGE: usize = 32 * 1024 + 200;

/// A push that does not fit beside 29 KiB of small ones in the three
/// quarters of the server's 64 KiB bound that pushes may take (48 KiB),
/// though it would in the whole bound: the server holds each large one
/// after the small ones, and the client, which acknowledges by count only
/// at half the bound, acknowledges once it has read the small ones because
/// the largest push it has seen would not fit. Only the first large push,
/// larger than any before it, may wait for the 200 ms delay; without the
/// early acknowledgement (or with one that took the whole bound for room)
/// each of the ten would (2 s at least).
#[tokio::test]
async fn pushes_larger_than_a_quarter_of_the_bound_do_not_each_wait_for_the_ack_delay() {
    let (tcp, ws, _server) = server(|builder| builder.controller(MixedPusher));
    for over_ws in [false, true] {
        let client = if over_ws {
            Client::connect_ws_with(&format!("ws://{ws}/ws"), config(None)).await
        } else {
            Client::connect_tcp_with(tcp, config(None)).await
        }
        .unwrap();
        let mut chunks = client.subscribe::<Chunk>();
        let started = std::time::Instant::now();
        assert_eq!(
            client.request_async(&Mixed { rounds: 10 }).await.unwrap(),
            Count(300)
        );
        for seq in 1..=300 {
            let chunk = next_chunk(&mut chunks).await;
            assert_eq!(chunk.seq, seq);
            let size = if seq % 30 == 0 { LARGE } else { 1024 };
            assert_eq!(chunk.data.len(), size);
        }
        let took = started.elapsed();
        assert!(
            took < ternio::protocol::replay::ACK_DELAY * 4,
            "WebSocket {over_ws}: {took:?}: the large pushes waited for the ACK delay"
        );
    }
}

/// A server written here, from docs/PROTOCOL.md: it takes one client's
/// connection and answers its `RESUME_TICKET`s with `answer` (`Err`: with
/// that error), until one is answered with a ticket.
struct TicketServer {
    raw: RawConnection,
    /// The bodies of the `RESUME_TICKET` requests, in order.
    requests: Vec<Vec<u8>>,
}

impl TicketServer {
    /// Starts a client of the server in a task (abort it to end it), and
    /// takes its connection.
    async fn with_client(
        answer: impl FnMut(&[u8]) -> Result<Option<u32>, ErrorCode>,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let client = tokio::spawn(async move {
            let _client = Client::connect_tcp_with(address, config(None))
                .await
                .unwrap();
            std::future::pending::<()>().await;
        });
        (Self::accept(&listener, answer).await, client)
    }

    async fn accept(
        listener: &tokio::net::TcpListener,
        mut answer: impl FnMut(&[u8]) -> Result<Option<u32>, ErrorCode>,
    ) -> Self {
        let (stream, _) = listener.accept().await.unwrap();
        let mut raw = RawConnection::over(stream);
        let mut requests = Vec::new();
        loop {
            let frame = raw.recv().await.expect("the client's requests");
            if frame.header.opcode != system::RESUME_TICKET {
                continue;
            }
            requests.push(frame.body.to_vec());
            let id = frame.header.request_id;
            match answer(&frame.body) {
                Ok(replay_bytes) => {
                    let ticket = ResumeTicket {
                        ticket: Ticket::generate(),
                        ttl_ms: 30_000,
                        replay_bytes,
                    };
                    let header = Header::new(system::RESUME_TICKET, Flags::RESPONSE, id);
                    raw.send(header, &ticket).await;
                    return Self { raw, requests };
                }
                Err(code) => {
                    let mut body = BytesMut::new();
                    ErrorBody::write(&mut body, code.to_u16(), &"refused here");
                    let header = Header::new(system::RESUME_TICKET, Flags::RESPONSE_ERROR, id);
                    raw.send_body(header, &body).await;
                    // Pushes before a ticket: neither side counts them.
                    let chunk = Chunk {
                        seq: 0,
                        data: vec![0; 1024],
                    };
                    for _ in 0..3 {
                        raw.send(Header::new(Chunk::OPCODE, Flags::NONE, 0), &chunk)
                            .await;
                    }
                }
            }
        }
    }

    /// Pushes `count` chunks of 1 KiB (1,037 bytes as the replay bound
    /// counts them), numbered from `first`.
    async fn push_chunks(&mut self, first: u32, count: u32) {
        for seq in first..first + count {
            let chunk = Chunk {
                seq,
                data: vec![0; 1024],
            };
            self.raw
                .send(Header::new(Chunk::OPCODE, Flags::NONE, 0), &chunk)
                .await;
        }
    }

    /// The `received` of the client's next `ACK`.
    async fn next_ack(&mut self) -> u64 {
        loop {
            let frame = self.raw.recv().await.expect("an ACK");
            if frame.header.opcode == system::ACK {
                return Ack::decode_body(&frame.body).unwrap().received;
            }
        }
    }
}

/// A client asks for the server's replay bound with its ticket and
/// acknowledges by it: with 64 KiB, once 32 KiB are unacknowledged, and
/// not each time it has read what came (as it did at 8 KiB before, and
/// still does when the server does not say its bound).
#[tokio::test]
async fn a_client_acknowledges_by_the_bound_its_server_said() {
    let (mut server, client) = TicketServer::with_client(|_| Ok(Some(64 * 1024))).await;
    assert_eq!(server.requests, [vec![TicketRequest::ASK_BOUND]]);
    // Three bursts of 10 KiB with pauses the client reads all in, then 5
    // more: 1,037 bytes each, the 32nd takes it past 32 KiB.
    for burst in 0..3 {
        server.push_chunks(1 + burst * 10, 10).await;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server.push_chunks(31, 5).await;
    assert_eq!(server.next_ack().await, 32, "the first ACK, at 32 KiB");
    client.abort();
}

/// A client that keeps sending carries its `ACK` with its next counted
/// frame, queued just ahead of it, once a quarter of the bound (half of
/// what makes the reader send one) is unacknowledged: with 64 KiB, after
/// 16 KiB. Before, the reader sent it alone at 32 KiB, a system call and
/// a wake-up of the server each, while the application's next request
/// followed in a write of its own: on a request-and-answer session at
/// 1 KiB, one `ACK` every 31 answers.
#[tokio::test]
async fn a_client_that_sends_carries_its_ack_with_its_next_frame() {
    // The acknowledging task sends an `ACK` alone 200 ms after the first
    // frame: an attempt that took that long proves nothing, and goes again.
    for _ in 0..5 {
        if ack_rides_along_within(ternio::protocol::replay::ACK_DELAY / 2).await {
            return;
        }
    }
    panic!("five attempts each took longer than half the ACK delay");
}

/// Takes `count` chunks, then lets the reader, which handed over the last,
/// add them to the session's count as it goes back to wait.
async fn read_all(chunks: &mut ternio_client::Subscription<Chunk>, count: usize) {
    for _ in 0..count {
        next_chunk(chunks).await;
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
}

/// One attempt of the test above: `false` when it took `limit` or more.
async fn ack_rides_along_within(limit: Duration) -> bool {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (client, mut server) = tokio::join!(
        async {
            Client::connect_tcp_with(address, config(None))
                .await
                .unwrap()
        },
        TicketServer::accept(&listener, |_| Ok(Some(64 * 1024))),
    );
    let mut chunks = client.subscribe::<Chunk>();
    let started = tokio::time::Instant::now();
    // 20 chunks of 1,037 bytes: past 16 KiB, short of 32 KiB. The client
    // reads them all and waits: no `ACK` of its own.
    server.push_chunks(1, 20).await;
    read_all(&mut chunks, 20).await;
    client.send(&Next).unwrap();
    let first = server.raw.recv().await.expect("the client's frames");
    assert_eq!(
        first.header.opcode,
        system::ACK,
        "the frame went without the ACK"
    );
    let next = server.raw.recv().await.expect("the client's frames");
    // Below the quarter again: the next frame goes alone.
    server.push_chunks(21, 5).await;
    read_all(&mut chunks, 5).await;
    client.send(&Next).unwrap();
    let alone = server.raw.recv().await.expect("the client's frames");
    if started.elapsed() >= limit {
        return false;
    }
    assert_eq!(Ack::decode_body(&first.body).unwrap().received, 20);
    assert_eq!(next.header.opcode, Next::OPCODE);
    assert_eq!(alone.header.opcode, Next::OPCODE, "no ACK rides along yet");
    true
}

/// A server older than the request for its bound answers it with
/// `MALFORMED`: the client asks again with an empty body, counts from that
/// answer on, and acknowledges as it did before, as soon as it has read
/// 8 KiB or more (not at the 200 ms delay).
#[tokio::test]
async fn a_client_asks_an_older_server_for_its_ticket_the_older_way() {
    let (mut server, client) = TicketServer::with_client(|body| {
        if body.is_empty() {
            Ok(None)
        } else {
            Err(ErrorCode::Malformed)
        }
    })
    .await;
    assert_eq!(server.requests, [vec![TicketRequest::ASK_BOUND], vec![]]);
    // 8 chunks are 8,296 bytes: past 8 KiB only with the last one.
    let started = std::time::Instant::now();
    server.push_chunks(1, 8).await;
    assert_eq!(server.next_ack().await, 8, "counted from the second answer");
    let waited = started.elapsed();
    assert!(
        waited < ternio::protocol::replay::ACK_DELAY,
        "{waited:?}: the ACK waited for the delay"
    );
    client.abort();
}

#[tokio::test]
async fn a_client_whose_replay_buffer_overflowed_keeps_its_connection_and_reports_the_loss() {
    let (tcp, _, _server) = server(|builder| builder);
    let proxy = CuttingProxy::start(tcp, 7, 0..0).await;
    let client = Client::connect_tcp_with(proxy.address(), config(None))
        .await
        .unwrap();
    assert_eq!(client.request_async(&Next).await.unwrap(), Count(1));
    // One request larger than the client's replay buffer (64 KiB): the
    // session can no longer be resumed, but the connection goes on.
    let payload = bytes::Bytes::from(vec![7u8; 100 * 1024]);
    let echoed = client
        .request_async(&Echo {
            payload: payload.clone(),
        })
        .await
        .unwrap();
    assert_eq!(echoed.payload, payload);
    assert_eq!(client.request_async(&Next).await.unwrap(), Count(2));
    assert_eq!(proxy.cuts(), 0);

    // After a cut, the client starts a new session and says why.
    let mut events = client.session_events();
    proxy.cut_all();
    let reason = lost_reason(&mut events).await;
    assert!(reason.contains("replay buffer overflowed"), "{reason}");
    assert_eq!(client.request_async(&Next).await.unwrap(), Count(1));
}

#[tokio::test]
async fn a_session_the_server_ended_with_disconnect_is_not_resumed() {
    let (tcp, _, server) = server(|builder| builder);
    let client = Client::connect_tcp_with(tcp, config(None)).await.unwrap();
    assert_eq!(client.request_async(&Next).await.unwrap(), Count(1));
    let mut events = client.session_events();
    // `DISCONNECT SHUTDOWN` ends the session (section 4.2): the client
    // reconnects, but must not offer the dead ticket to the next server.
    server.shutdown().await;
    let _next = restart_server(tcp, None, |builder| {
        builder
            .controller(Sequencer)
            .resumable(Duration::from_secs(30), 64 * 1024)
    })
    .await;
    let reason = lost_reason(&mut events).await;
    // A `RESUME` would have been refused with "unknown or expired ticket".
    assert!(reason.contains("the session ended"), "{reason}");
    assert!(reason.contains("SHUTDOWN"), "{reason}");
    assert_eq!(client.request_async(&Next).await.unwrap(), Count(1));
}
