//! The datagram channel (docs/PROTOCOL.md section 4.4), played byte by
//! byte by a scripted client: a secure session over TCP, `DATAGRAM_BIND`,
//! then datagrams on a UDP socket of the test's own. Unreliable pushes go
//! by datagram once the server knows where the client is, and by the
//! stream before; the client's datagrams run as one-way requests. And what
//! an attacker on the path can try: replayed, forged, foreign, oversized or
//! malformed datagrams, and a datagram from another address, change
//! nothing.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use ternio::protocol::datagram::{DATAGRAM_OVERHEAD, DatagramKeys, DatagramOpener, DatagramSealer};
use ternio::protocol::frame::{Flags, Frame, HEADER_LEN, Header};
use ternio::protocol::system::{self, DatagramBinding, ErrorBody};
use ternio::protocol::{Bytes, Decode, Encode, ErrorCode};
use ternio::{
    Context, Packet, Route, Server, ServerBuilder, ServerHandle, State, packet_controller,
};
use ternio_tests::*;
use tokio::net::UdpSocket;

/// 0x0B00, pushed by datagram when it can: a game state snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0B00, unreliable)]
struct Snapshot {
    tick: u32,
    padding: Bytes,
}

/// 0x0B01: the server pushes `count` snapshots of `size` padding bytes and
/// answers how they went.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0B01, response = Routes)]
struct Poke {
    count: u32,
    size: u32,
}

/// 0x0B02: the answer to [`Poke`].
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0B02)]
struct Routes {
    datagram: u32,
    stream: u32,
    too_large: u32,
}

/// 0x0B03, sent one-way (by datagram, id 0): a player's input.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0B03, response = ())]
struct Input {
    seq: u32,
}

/// 0x0B04, sent one-way by datagram: work that takes a while.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0B04, response = ())]
struct Slow {
    seq: u32,
}

/// The inputs the server ran, in order (shared with the test).
#[derive(Default, Clone)]
struct Inputs(Arc<Mutex<Vec<u32>>>);

/// How many [`Slow`] requests run now, the most that ever ran at once,
/// and how many finished.
#[derive(Default, Clone)]
struct Running(Arc<Mutex<(usize, usize, usize)>>);

#[derive(Default)]
struct Game;

#[packet_controller(explicit)]
impl Game {
    fn poke(request: Poke, ctx: &Context) -> Routes {
        let mut routes = Routes {
            datagram: 0,
            stream: 0,
            too_large: 0,
        };
        for tick in 0..request.count {
            let snapshot = Snapshot {
                tick,
                padding: Bytes::from(vec![7u8; request.size as usize]),
            };
            match ctx.send_unreliable(&snapshot) {
                Ok(Route::Datagram) => routes.datagram += 1,
                Ok(_) => routes.stream += 1,
                Err(ternio::PushError::TooLarge) => routes.too_large += 1,
                Err(error) => panic!("{error}"),
            }
        }
        routes
    }

    fn input(request: Input, inputs: State<Inputs>) {
        inputs.0.0.lock().unwrap().push(request.seq);
    }

    async fn slow(_request: Slow, running: State<Running>) {
        {
            let mut running = running.0.0.lock().unwrap();
            running.0 += 1;
            running.1 = running.1.max(running.0);
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
        let mut running = running.0.0.lock().unwrap();
        running.0 -= 1;
        running.2 += 1;
    }
}

struct Started {
    tcp: SocketAddr,
    udp: SocketAddr,
    ws: Option<SocketAddr>,
    inputs: Inputs,
    running: Running,
    _server: ServerHandle,
}

fn start(configure: impl FnOnce(ServerBuilder) -> ServerBuilder) -> Started {
    let inputs = Inputs::default();
    let running = Running::default();
    let server = configure(
        Server::builder()
            .discover_controllers(false)
            .controller(Game)
            .state(inputs.clone())
            .state(running.clone())
            .map_tcp("127.0.0.1:0"),
    )
    .build()
    .expect("the server builds");
    let tcp = server.tcp_addrs()[0];
    let udp = server.udp_addr().unwrap_or(tcp);
    let ws = server.websocket_addrs().first().copied();
    let handle = server.handle();
    tokio::spawn(server.run());
    Started {
        tcp,
        udp,
        ws,
        inputs,
        running,
        _server: handle,
    }
}

/// A scripted client: its TCP link, and its secure session once up.
struct Client {
    link: SealedConnection,
    /// Counted frames received (for a resumption).
    received: u64,
}

impl Client {
    async fn plain(address: SocketAddr) -> Self {
        Self {
            link: SealedConnection::plain(address).await,
            received: 0,
        }
    }

    async fn secure(address: SocketAddr) -> Self {
        Self {
            link: SealedConnection::secure(address).await,
            received: 0,
        }
    }

    async fn send<E: Encode + ?Sized>(&mut self, header: Header, body: &E) {
        let mut plain = BytesMut::new();
        body.encode(&mut plain);
        self.link.send_frame(header, &plain).await;
    }

    /// The next frame on the stream, opened (past the `ACK`s of a
    /// resumable session).
    async fn recv(&mut self) -> Frame {
        loop {
            let frame = tokio::time::timeout(Duration::from_secs(5), self.link.recv())
                .await
                .expect("a frame within 5 s")
                .expect("a frame");
            if system::is_counted(frame.header.opcode) {
                self.received += 1;
            }
            if frame.header.opcode != system::ACK {
                return frame;
            }
        }
    }

    /// Asks for a binding: its answer, or the error.
    async fn bind(&mut self) -> Result<DatagramBinding, ErrorBody> {
        self.send(Header::new(system::DATAGRAM_BIND, Flags::NONE, 7), &())
            .await;
        let answer = self.recv().await;
        assert_eq!(answer.header.opcode, system::DATAGRAM_BIND);
        if answer.header.flags.is_error() {
            return Err(ErrorBody::parse(&answer.body).unwrap());
        }
        Ok(DatagramBinding::decode_body(&answer.body).unwrap())
    }

    async fn poke(&mut self, count: u32, size: u32) -> (Routes, Vec<Snapshot>) {
        self.send(
            Header::new(Poke::OPCODE, Flags::NONE, 9),
            &Poke { count, size },
        )
        .await;
        // The pushes that took the stream come before or after the answer.
        let mut on_stream = Vec::new();
        let routes = loop {
            let frame = self.recv().await;
            if frame.header.opcode == Snapshot::OPCODE {
                on_stream.push(Snapshot::decode_body(&frame.body).unwrap());
                continue;
            }
            assert_eq!(frame.header.opcode, Routes::OPCODE);
            break Routes::decode_body(&frame.body).unwrap();
        };
        while on_stream.len() < routes.stream as usize {
            let frame = self.recv().await;
            assert_eq!(frame.header.opcode, Snapshot::OPCODE);
            on_stream.push(Snapshot::decode_body(&frame.body).unwrap());
        }
        (routes, on_stream)
    }
}

/// The client's end of a binding: a UDP socket, and both directions' keys.
struct Datagrams {
    socket: UdpSocket,
    sealer: DatagramSealer,
    opener: DatagramOpener,
}

impl Datagrams {
    async fn new(client: &Client, binding: &DatagramBinding, server: SocketAddr) -> Self {
        let secret = &client.link.channel.as_ref().unwrap().session_secret;
        let keys = DatagramKeys::derive(&secret[..], &binding.token);
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        socket
            .connect(SocketAddr::new(server.ip(), binding.port))
            .await
            .unwrap();
        let max = usize::from(binding.max_datagram);
        Self {
            socket,
            sealer: DatagramSealer::new(&keys.client_to_server, binding.token, max),
            opener: DatagramOpener::new(&keys.server_to_client, binding.token),
        }
    }

    /// Seals `packet` under `header` into a datagram.
    fn seal<E: Encode + ?Sized>(&mut self, header: Header, packet: &E) -> Vec<u8> {
        let mut frame = header.to_bytes().to_vec();
        let mut body = BytesMut::new();
        packet.encode(&mut body);
        frame.extend_from_slice(&body);
        let mut datagram = Vec::new();
        self.sealer.seal(&frame, &mut datagram).unwrap();
        datagram
    }

    /// The keepalive that tells the server where the client is.
    async fn hello(&mut self) {
        let hello = self.seal(Header::new(system::DATAGRAM_BIND, Flags::NONE, 0), &());
        self.socket.send(&hello).await.unwrap();
    }

    async fn input(&mut self, seq: u32) -> Vec<u8> {
        let datagram = self.seal(Header::new(Input::OPCODE, Flags::NONE, 0), &Input { seq });
        self.socket.send(&datagram).await.unwrap();
        datagram
    }

    /// The snapshots that arrive within `wait`, opened and decoded.
    async fn snapshots(&mut self, wait: Duration) -> Vec<Snapshot> {
        let mut snapshots = Vec::new();
        let mut buffer = vec![0u8; 2048];
        while let Ok(Ok(len)) = tokio::time::timeout(wait, self.socket.recv(&mut buffer)).await {
            let range = self.opener.open(&mut buffer[..len]).expect("authentic");
            let frame = &buffer[range];
            let header = Header::parse(frame).unwrap();
            assert_eq!(header, Header::new(Snapshot::OPCODE, Flags::NONE, 0));
            let body = Bytes::copy_from_slice(&frame[HEADER_LEN..]);
            snapshots.push(Snapshot::decode_body(&body).unwrap());
        }
        snapshots
    }
}

/// Waits until the server ran exactly `expected` inputs.
async fn ran(inputs: &Inputs, expected: &[u32]) {
    eventually("the inputs ran", || {
        inputs.0.lock().unwrap().as_slice() == expected
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(inputs.0.lock().unwrap().as_slice(), expected);
}

#[tokio::test]
async fn unreliable_pushes_go_by_datagram_and_the_clients_datagrams_run() {
    let started = start(|builder| builder.map_udp("127.0.0.1:0"));
    let mut client = Client::secure(started.tcp).await;
    let binding = client.bind().await.expect("bound");
    assert_eq!(binding.port, started.udp.port());
    assert_eq!(binding.max_datagram, 1200);
    let mut datagrams = Datagrams::new(&client, &binding, started.tcp).await;

    // Before the server heard from the client's socket: on the stream.
    let (routes, on_stream) = client.poke(3, 16).await;
    assert_eq!((routes.datagram, routes.stream), (0, 3));
    assert_eq!(on_stream.len(), 3);

    datagrams.hello().await;
    // The hello may still be on its way: poke until it landed.
    let mut routes = client.poke(0, 0).await.0;
    for _ in 0..50 {
        routes = client.poke(5, 100).await.0;
        if routes.datagram > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!((routes.datagram, routes.stream), (5, 0));
    let snapshots = datagrams.snapshots(Duration::from_millis(300)).await;
    let ticks: Vec<u32> = snapshots.iter().map(|snapshot| snapshot.tick).collect();
    // Loopback drops nothing here; the first pokes' datagrams came before.
    assert!(ticks.ends_with(&[0, 1, 2, 3, 4]), "{ticks:?}");
    assert!(
        snapshots
            .iter()
            .all(|snapshot| snapshot.padding.len() == 100 || snapshot.padding.is_empty())
    );

    // The client's datagrams run as one-way requests, in the order they came.
    for seq in 1..=5 {
        datagrams.input(seq).await;
    }
    ran(&started.inputs, &[1, 2, 3, 4, 5]).await;

    // One that does not fit a datagram is refused at send.
    let fits = 1200 - DATAGRAM_OVERHEAD - HEADER_LEN - 4 - 2;
    let (routes, _) = client.poke(1, fits as u32).await;
    assert_eq!((routes.datagram, routes.too_large), (1, 0), "{routes:?}");
    let (routes, _) = client.poke(1, fits as u32 + 1).await;
    assert_eq!((routes.datagram, routes.too_large), (0, 1), "{routes:?}");
}

#[tokio::test]
async fn datagram_requests_respect_the_in_flight_limit() {
    let started = start(|builder| builder.map_udp("127.0.0.1:0").max_requests_in_flight(2));
    let mut client = Client::secure(started.tcp).await;
    let binding = client.bind().await.expect("bound");
    let mut datagrams = Datagrams::new(&client, &binding, started.tcp).await;
    // A flood, within the inbox's 64: none is dropped, all wait their turn.
    for seq in 0..20 {
        let datagram = datagrams.seal(Header::new(Slow::OPCODE, Flags::NONE, 0), &Slow { seq });
        datagrams.socket.send(&datagram).await.unwrap();
    }
    eventually("the slow requests ran", || {
        started.running.0.lock().unwrap().2 == 20
    })
    .await;
    let (_, most, _) = *started.running.0.lock().unwrap();
    assert!(
        most <= 2,
        "{most} ran at once, above max_requests_in_flight"
    );
}

#[tokio::test]
async fn replayed_forged_foreign_and_malformed_datagrams_change_nothing() {
    let started = start(|builder| builder.map_udp("127.0.0.1:0"));
    let mut client = Client::secure(started.tcp).await;
    let binding = client.bind().await.expect("bound");
    let mut datagrams = Datagrams::new(&client, &binding, started.tcp).await;
    let first = datagrams.input(1).await;
    ran(&started.inputs, &[1]).await;

    // Replayed: the same bytes again.
    datagrams.socket.send(&first).await.unwrap();
    // Forged: every byte flipped in turn (the counter's too).
    let genuine = datagrams.seal(
        Header::new(Input::OPCODE, Flags::NONE, 0),
        &Input { seq: 2 },
    );
    for index in 0..genuine.len() {
        let mut forged = genuine.clone();
        forged[index] ^= 0x01;
        datagrams.socket.send(&forged).await.unwrap();
    }
    // Another session's binding, sealed with its own keys, bearing this
    // binding's token: it does not authenticate.
    let mut other = Client::secure(started.tcp).await;
    let other_binding = other.bind().await.expect("bound");
    let mut foreign = Datagrams::new(&other, &other_binding, started.tcp).await;
    let mut stolen = foreign.seal(
        Header::new(Input::OPCODE, Flags::NONE, 0),
        &Input { seq: 66 },
    );
    stolen[..8].copy_from_slice(&binding.token);
    datagrams.socket.send(&stolen).await.unwrap();
    // Unknown token, too short, too long.
    let mut unknown = genuine.clone();
    unknown[..8].copy_from_slice(&[0xEE; 8]);
    datagrams.socket.send(&unknown).await.unwrap();
    datagrams.socket.send(&genuine[..20]).await.unwrap();
    datagrams.socket.send(&vec![0u8; 1300]).await.unwrap();
    // Authentic, but carrying what datagrams may not: a request id, a
    // flag, a system opcode other than the keepalive.
    for header in [
        Header::new(Input::OPCODE, Flags::NONE, 5),
        Header::new(Input::OPCODE, Flags::RESPONSE, 0),
        Header::new(system::PING, Flags::NONE, 0),
    ] {
        let datagram = datagrams.seal(header, &Input { seq: 77 });
        datagrams.socket.send(&datagram).await.unwrap();
    }
    // The genuine one, which no forgery marked seen, still runs.
    datagrams.socket.send(&genuine).await.unwrap();
    ran(&started.inputs, &[1, 2]).await;

    // A datagram that arrives late (another one overtook it) still runs,
    // once; one more than 2,048 counters behind the highest does not.
    let late = datagrams.seal(
        Header::new(Input::OPCODE, Flags::NONE, 0),
        &Input { seq: 3 },
    );
    datagrams.input(4).await;
    ran(&started.inputs, &[1, 2, 4]).await;
    datagrams.socket.send(&late).await.unwrap();
    datagrams.socket.send(&late).await.unwrap();
    ran(&started.inputs, &[1, 2, 4, 3]).await;
}

#[tokio::test]
async fn the_server_follows_the_client_to_a_new_address_only_when_it_authenticates() {
    let started = start(|builder| builder.map_udp("127.0.0.1:0"));
    let mut client = Client::secure(started.tcp).await;
    let binding = client.bind().await.expect("bound");
    let mut datagrams = Datagrams::new(&client, &binding, started.tcp).await;
    datagrams.hello().await;
    ran(&started.inputs, &[]).await;
    assert_eq!(client.poke(1, 1).await.0.datagram, 1);
    assert_eq!(
        datagrams.snapshots(Duration::from_millis(200)).await.len(),
        1
    );

    // A NAT rebinding: the same keys, from another port.
    let moved = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    moved
        .connect(SocketAddr::new(started.tcp.ip(), binding.port))
        .await
        .unwrap();
    // An attacker's copy of a genuine datagram from its own address first:
    // a replay, which must not move the server.
    let replay = datagrams.input(1).await;
    ran(&started.inputs, &[1]).await;
    let attacker = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    attacker
        .send_to(&replay, SocketAddr::new(started.tcp.ip(), binding.port))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(client.poke(1, 2).await.0.datagram, 1);
    assert_eq!(
        datagrams.snapshots(Duration::from_millis(200)).await.len(),
        1,
        "still sent to the client's own address"
    );
    let mut buffer = [0u8; 64];
    assert!(
        tokio::time::timeout(Duration::from_millis(100), attacker.recv(&mut buffer))
            .await
            .is_err(),
        "nothing to the attacker"
    );

    // The client's next datagram comes from the new port: the server follows.
    let datagram = datagrams.seal(
        Header::new(Input::OPCODE, Flags::NONE, 0),
        &Input { seq: 2 },
    );
    moved.send(&datagram).await.unwrap();
    ran(&started.inputs, &[1, 2]).await;
    assert_eq!(client.poke(1, 3).await.0.datagram, 1);
    let len = tokio::time::timeout(Duration::from_secs(2), moved.recv(&mut buffer))
        .await
        .expect("a datagram at the new address")
        .unwrap();
    assert!(datagrams.opener.open(&mut buffer[..len]).is_ok());
}

#[tokio::test]
async fn a_late_datagram_from_another_address_runs_but_does_not_move_the_server() {
    let started = start(|builder| builder.map_udp("127.0.0.1:0"));
    let mut client = Client::secure(started.tcp).await;
    let binding = client.bind().await.expect("bound");
    let mut datagrams = Datagrams::new(&client, &binding, started.tcp).await;
    // An on-path attacker holds back one of the client's datagrams...
    let held = datagrams.seal(
        Header::new(Input::OPCODE, Flags::NONE, 0),
        &Input { seq: 1 },
    );
    // ...while newer ones arrive from the client's address.
    datagrams.input(2).await;
    ran(&started.inputs, &[2]).await;
    // Then sends it from its own: a counter never seen, inside the window,
    // so it runs, but it is not the newest and moves nothing.
    let attacker = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    attacker
        .send_to(&held, SocketAddr::new(started.tcp.ip(), binding.port))
        .await
        .unwrap();
    ran(&started.inputs, &[2, 1]).await;
    assert_eq!(client.poke(1, 4).await.0.datagram, 1);
    assert_eq!(
        datagrams.snapshots(Duration::from_millis(200)).await.len(),
        1,
        "still sent to the client's own address"
    );
    let mut buffer = [0u8; 64];
    assert!(
        tokio::time::timeout(Duration::from_millis(100), attacker.recv(&mut buffer))
            .await
            .is_err(),
        "nothing to the attacker"
    );
}

#[tokio::test]
async fn an_unreliable_push_on_the_stream_is_bounded_by_the_stream_only() {
    let started = start(|builder| builder.map_udp("127.0.0.1:0"));
    let mut client = Client::secure(started.tcp).await;
    let _binding = client.bind().await.expect("bound");
    // Bound, but no datagram told the server where the client is: the
    // push takes the stream, where 2,000 bytes fit.
    let (routes, on_stream) = client.poke(1, 2000).await;
    assert_eq!(
        (routes.datagram, routes.stream, routes.too_large),
        (0, 1, 0),
        "{routes:?}"
    );
    assert_eq!(on_stream[0].padding.len(), 2000);
}

#[tokio::test]
async fn a_suspended_session_drops_datagrams_and_forgets_the_clients_address() {
    use std::sync::atomic::{AtomicU32, Ordering};
    use ternio::protocol::system::ResumeTicket;

    let suspensions = Arc::new(AtomicU32::new(0));
    let seen = Arc::clone(&suspensions);
    let started = start(move |builder| {
        builder
            .map_udp("127.0.0.1:0")
            .resumable(Duration::from_secs(10), 64 * 1024)
            .on_suspend(move |_| {
                seen.fetch_add(1, Ordering::SeqCst);
            })
    });
    let mut client = Client::secure(started.tcp).await;
    let binding = client.bind().await.expect("bound");
    let mut datagrams = Datagrams::new(&client, &binding, started.tcp).await;
    datagrams.hello().await;
    let mut reached = false;
    for _ in 0..50 {
        if client.poke(1, 1).await.0.datagram == 1 {
            reached = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(reached, "the server reached the client's socket");
    // A ticket: the frames counted for the resumption start after it.
    client
        .send(Header::new(system::RESUME_TICKET, Flags::NONE, 900), &())
        .await;
    let answer = client.recv().await;
    assert_eq!(answer.header.opcode, system::RESUME_TICKET);
    let ticket = ResumeTicket::decode_body(&answer.body).unwrap().ticket;
    client.received = 0;

    // The link is lost: the session waits; the client resumes (the
    // binding lives on with the session).
    let (mut client, ticket) =
        suspend_and_resume(client, ticket, &started, &suspensions, 1, None).await;
    // Until the client speaks by datagram again, the server sends it none.
    let (routes, on_stream) = client.poke(1, 2).await;
    assert_eq!((routes.datagram, routes.stream), (0, 1), "{routes:?}");
    assert_eq!(on_stream.len(), 1);
    datagrams.input(10).await;
    ran(&started.inputs, &[10]).await;
    assert_eq!(client.poke(1, 3).await.0.datagram, 1);

    // A datagram that comes while the session waits would run late: it is
    // dropped.
    let (_client, _) = suspend_and_resume(
        client,
        ticket,
        &started,
        &suspensions,
        2,
        Some(&mut datagrams),
    )
    .await;
    ran(&started.inputs, &[10]).await;
}

/// Drops `client`'s link, waits for the session to be suspended (the
/// `count`th time), sends input 11 by datagram meanwhile if `datagrams`,
/// then resumes with `ticket`: the new client and its next ticket.
async fn suspend_and_resume(
    client: Client,
    ticket: ternio::protocol::system::Ticket,
    started: &Started,
    suspensions: &std::sync::atomic::AtomicU32,
    count: u32,
    datagrams: Option<&mut Datagrams>,
) -> (Client, ternio::protocol::system::Ticket) {
    use ternio::protocol::resume::ResumeInitiator;
    use ternio::protocol::system::{Resume, Resumed};
    let secret = client
        .link
        .channel
        .as_ref()
        .unwrap()
        .session_secret
        .to_vec();
    let received = client.received;
    drop(client);
    eventually("the session is suspended", || {
        suspensions.load(std::sync::atomic::Ordering::SeqCst) == count
    })
    .await;
    if let Some(datagrams) = datagrams {
        datagrams.input(11).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut raw = RawConnection::connect(started.tcp).await;
    let mut initiator = ResumeInitiator::new(None, &secret, &ticket, received).unwrap();
    let request = Resume {
        ticket,
        received,
        pattern: initiator.pattern().to_u8(),
        message: Bytes::from(initiator.message().unwrap()),
    };
    raw.send(Header::new(system::RESUME, Flags::NONE, 901), &request)
        .await;
    let answer = raw.recv().await.expect("an answer to RESUME");
    assert!(
        !answer.header.flags.is_error(),
        "{:?}",
        ErrorBody::parse(&answer.body)
    );
    let resumed = Resumed::decode_body(&answer.body).unwrap();
    let channel = initiator.finish(&resumed).unwrap();
    let client = Client {
        link: SealedConnection {
            raw,
            channel: Some(channel),
        },
        received,
    };
    (client, resumed.ticket)
}

#[tokio::test]
async fn binding_needs_a_secure_session_and_a_udp_listener() {
    let started = start(|builder| builder.map_udp("127.0.0.1:0"));
    let mut plain = Client::plain(started.tcp).await;
    let refused = plain.bind().await.expect_err("plain");
    assert_eq!(refused.code, ErrorCode::EncryptionRequired);
    // Malformed: id 0 (as a request) or a body.
    let mut client = Client::secure(started.tcp).await;
    client
        .send(
            Header::new(system::DATAGRAM_BIND, Flags::NONE, 8),
            &[1u8][..],
        )
        .await;
    let answer = client.recv().await;
    assert_eq!(
        ErrorBody::parse(&answer.body).unwrap().code,
        ErrorCode::Malformed
    );

    let without = start(|builder| builder);
    let mut client = Client::secure(without.tcp).await;
    let refused = client.bind().await.expect_err("no UDP listener");
    assert_eq!(refused.code, ErrorCode::UnknownOpcode);
    // Pushes of unreliable packets then simply use the stream.
    let (routes, on_stream) = client.poke(2, 8).await;
    assert_eq!((routes.stream, on_stream.len()), (2, 2));
}

#[tokio::test]
async fn a_closed_connections_binding_is_gone_and_a_new_bind_replaces_the_old() {
    let started = start(|builder| builder.map_udp("127.0.0.1:0"));
    let mut client = Client::secure(started.tcp).await;
    let first = client.bind().await.expect("bound");
    let mut old = Datagrams::new(&client, &first, started.tcp).await;
    let second = client.bind().await.expect("bound again");
    assert_ne!(first.token, second.token);
    let mut new = Datagrams::new(&client, &second, started.tcp).await;
    old.input(1).await;
    new.input(2).await;
    ran(&started.inputs, &[2]).await;

    drop(client);
    // The binding goes right after the connection leaves the hub, in the
    // same call on the server.
    eventually("the connection closed", || {
        started._server.connection_count() == 0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    new.input(3).await;
    ran(&started.inputs, &[2]).await;
}

/// The Rust client's side: `bind_datagrams`, `send_unreliable`, and the
/// server's datagrams in the same subscriptions as its other pushes.
mod rust_client {
    use super::*;
    use ternio_client::{ClientConfig, ClientError, SecureConfig};

    async fn secure_client(address: SocketAddr) -> ternio_client::Client {
        let mut config = ClientConfig::default();
        config.secure = Some(SecureConfig::anonymous());
        ternio_client::Client::connect_tcp_with(address, config)
            .await
            .expect("connects")
    }

    #[tokio::test]
    async fn the_client_binds_sends_and_receives_datagrams() {
        let started = start(|builder| builder.map_udp("127.0.0.1:0"));
        let client = secure_client(started.tcp).await;
        // Before binding: the stream.
        assert_eq!(
            client.send_unreliable(&Input { seq: 1 }).unwrap(),
            ternio_client::Route::Stream
        );
        ran(&started.inputs, &[1]).await;
        let server = client.bind_datagrams().await.expect("bound");
        assert_eq!(server.port(), started.udp.port());
        assert!(client.has_datagrams());
        for seq in 2..=4 {
            assert_eq!(
                client.send_unreliable(&Input { seq }).unwrap(),
                ternio_client::Route::Datagram
            );
        }
        ran(&started.inputs, &[1, 2, 3, 4]).await;

        // The server reached the client's socket (its keepalive and inputs
        // told it where): its snapshots come by datagram, to the same
        // subscription.
        let mut snapshots = client.subscribe::<Snapshot>();
        let routes = client
            .request_async(&Poke { count: 3, size: 10 })
            .await
            .unwrap();
        assert_eq!((routes.datagram, routes.stream), (3, 0));
        for tick in 0..3 {
            let snapshot = tokio::time::timeout(Duration::from_secs(5), snapshots.next())
                .await
                .expect("a snapshot")
                .expect("open");
            assert_eq!(snapshot.tick, tick);
        }

        // Too large for a datagram: refused at send.
        let too_large = client.send_unreliable(&Snapshot {
            tick: 0,
            padding: Bytes::from(vec![0u8; 1200]),
        });
        assert!(
            matches!(too_large, Err(ClientError::FrameTooLarge(_))),
            "{too_large:?}"
        );
    }

    #[tokio::test]
    async fn concurrent_binds_leave_the_channel_the_server_holds() {
        // Over a WebSocket to "localhost": the host is resolved for the
        // UDP socket, which takes a varying time, so that unserialized
        // binds would finish in either order.
        let first = tokio::net::lookup_host("localhost:0").await.unwrap().next();
        if first.is_none_or(|address| !address.ip().is_loopback() || !address.is_ipv4()) {
            eprintln!("skipped: localhost does not resolve to 127.0.0.1 first here");
            return;
        }
        let started = start(|builder| {
            builder
                .map_udp("127.0.0.1:0")
                .map_websocket("127.0.0.1:0", "/ws")
        });
        let mut config = ClientConfig::default();
        config.secure = Some(SecureConfig::anonymous());
        let port = started.ws.expect("a websocket listener").port();
        let client =
            ternio_client::Client::connect_ws_with(&format!("ws://localhost:{port}/ws"), config)
                .await
                .expect("connects");
        let mut expected = Vec::new();
        for seq in 0..10 {
            let (first, second) = tokio::join!(client.bind_datagrams(), client.bind_datagrams());
            first.expect("bound");
            second.expect("bound");
            // The channel in place is the server's latest binding: what it
            // sends runs.
            assert_eq!(
                client.send_unreliable(&Input { seq }).unwrap(),
                ternio_client::Route::Datagram
            );
            expected.push(seq);
            ran(&started.inputs, &expected).await;
        }
    }

    #[tokio::test]
    async fn binding_needs_a_secure_session() {
        let started = start(|builder| builder.map_udp("127.0.0.1:0"));
        let client = ternio_client::Client::connect_tcp(started.tcp)
            .await
            .unwrap();
        assert!(matches!(
            client.bind_datagrams().await,
            Err(ClientError::NotSecure)
        ));
        let without = start(|builder| builder);
        let client = secure_client(without.tcp).await;
        let refused = client.bind_datagrams().await.expect_err("no listener");
        assert_eq!(refused.code(), Some(ErrorCode::UnknownOpcode));
        assert!(!client.has_datagrams());
    }
}

/// `examples/echo_server --udp`: what a client written from the contract
/// checks, a `DatagramEcho` sent in a datagram coming back in one.
#[tokio::test]
async fn the_echo_server_echoes_datagrams() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use ternio_examples::echo::DatagramEcho;

    let mut child = Command::new(echo_server_binary())
        .args(["--tcp", "127.0.0.1:0", "--udp", "127.0.0.1:0"])
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

    let mut client = Client::secure(address).await;
    let binding = client.bind().await.expect("bound");
    let mut datagrams = Datagrams::new(&client, &binding, address).await;
    let echo = DatagramEcho {
        payload: Bytes::from_static(b"over udp"),
    };
    let sent = datagrams.seal(Header::new(0x0003, Flags::NONE, 0), &echo);
    datagrams.socket.send(&sent).await.unwrap();
    let mut buffer = vec![0u8; 2048];
    let len = tokio::time::timeout(Duration::from_secs(5), datagrams.socket.recv(&mut buffer))
        .await
        .expect("the echo within 5 s")
        .unwrap();
    let range = datagrams
        .opener
        .open(&mut buffer[..len])
        .expect("authentic");
    let frame = &buffer[range];
    assert_eq!(
        Header::parse(frame).unwrap(),
        Header::new(0x0003, Flags::NONE, 0)
    );
    let body = Bytes::copy_from_slice(&frame[HEADER_LEN..]);
    assert_eq!(DatagramEcho::decode_body(&body).unwrap(), echo);
    let _ = child.kill();
    let _ = child.wait();
}

#[tokio::test]
async fn the_bind_answer_names_the_configured_port_and_the_server_replies_from_its_own() {
    // Behind a port mapping, the port clients must use is not the
    // listener's: the answer names the configured one. A relay on that
    // port (here: the test's own socket, forwarding by hand) reaches the
    // listener, and the server answers the relay's address.
    let relay = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let relay_port = relay.local_addr().unwrap().port();
    let started = start(|builder| builder.map_udp("127.0.0.1:0").datagram_port(relay_port));
    assert_ne!(started.udp.port(), relay_port);
    let mut client = Client::secure(started.tcp).await;
    let binding = client.bind().await.expect("bound");
    assert_eq!(binding.port, relay_port);
    let mut datagrams = Datagrams::new(&client, &binding, started.tcp).await;
    datagrams.input(1).await;
    let mut buffer = vec![0u8; 2048];
    let (len, from) = relay.recv_from(&mut buffer).await.unwrap();
    assert_eq!(from, datagrams.socket.local_addr().unwrap());
    relay.send_to(&buffer[..len], started.udp).await.unwrap();
    ran(&started.inputs, &[1]).await;
    assert_eq!(client.poke(1, 4).await.0.datagram, 1);
    let (len, from) = tokio::time::timeout(Duration::from_secs(5), relay.recv_from(&mut buffer))
        .await
        .expect("the snapshot comes back to the relay")
        .unwrap();
    assert_eq!(from, started.udp);
    assert!(datagrams.opener.open(&mut buffer[..len]).is_ok());
}

#[tokio::test]
async fn a_late_datagram_from_the_old_address_does_not_take_the_server_back() {
    // Reordering across a NAT rebinding: the client's newer datagram comes
    // from its new address first, an older one from the old address after
    // (it was delayed). Both are authentic and fresh: both run; the server
    // stays at the newer one's address.
    let started = start(|builder| builder.map_udp("127.0.0.1:0"));
    let mut client = Client::secure(started.tcp).await;
    let binding = client.bind().await.expect("bound");
    let mut datagrams = Datagrams::new(&client, &binding, started.tcp).await;
    let older = datagrams.seal(
        Header::new(Input::OPCODE, Flags::NONE, 0),
        &Input { seq: 1 },
    );
    let newer = datagrams.seal(
        Header::new(Input::OPCODE, Flags::NONE, 0),
        &Input { seq: 2 },
    );
    let moved = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    moved
        .connect(SocketAddr::new(started.tcp.ip(), binding.port))
        .await
        .unwrap();
    moved.send(&newer).await.unwrap();
    ran(&started.inputs, &[2]).await;
    datagrams.socket.send(&older).await.unwrap();
    ran(&started.inputs, &[2, 1]).await;
    assert_eq!(client.poke(1, 5).await.0.datagram, 1);
    let mut buffer = [0u8; 128];
    let len = tokio::time::timeout(Duration::from_secs(2), moved.recv(&mut buffer))
        .await
        .expect("the snapshot goes to the newer address")
        .unwrap();
    assert!(datagrams.opener.open(&mut buffer[..len]).is_ok());
    assert!(
        datagrams
            .snapshots(Duration::from_millis(100))
            .await
            .is_empty(),
        "nothing to the old address"
    );
}
