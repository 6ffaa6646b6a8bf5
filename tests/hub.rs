//! The hub over real sockets: sends by id, broadcasts, groups (left on
//! disconnect), kicks, secure members, and slow consumers that never hold
//! up the others.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ternio::protocol::frame::{Flags, Header};
use ternio::protocol::system::{self, Disconnect};
use ternio::protocol::{Decode, DecodeError, Encode, ErrorCode, Reader};
use ternio::{
    AppCode, ConnectionHandle, ConnectionId, Context, Delivery, DisconnectReason, HandlerError,
    Hub, Packet, Server, ServerBuilder, ServerConfig, ServerHandle, SlowConsumerPolicy,
    packet_controller,
};
use ternio_tests::RawConnection;

#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0300, response = ())]
struct Join {
    room: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0301, response = ())]
struct Leave {
    room: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0302, response = ())]
struct Say {
    room: String,
    text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0303)]
struct Said {
    from: u64,
    text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0304, response = MemberList)]
struct Members {
    room: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0305)]
struct MemberList(Vec<u64>);

#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0306, response = ())]
struct Tell {
    to: u64,
    text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0307, response = Id)]
struct MyId;

#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0308)]
struct Id(u64);

/// A state update that the next one replaces: droppable.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0309, droppable)]
struct Snapshot {
    tick: u32,
    data: Bytes,
}

/// How many times an [`Announcement`] was encoded, in this process.
static ENCODES: AtomicUsize = AtomicUsize::new(0);

/// Text that counts its encodings in [`ENCODES`]: the cost a broadcast must
/// pay once, whatever the number of members.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CountedText(String);

impl Encode for CountedText {
    fn encode(&self, out: &mut BytesMut) {
        ENCODES.fetch_add(1, Ordering::SeqCst);
        self.0.encode(out);
    }

    fn encoded_len(&self) -> usize {
        self.0.encoded_len()
    }
}

impl Decode for CountedText {
    const MIN_LEN: usize = String::MIN_LEN;

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        String::decode(reader).map(Self)
    }
}

/// Broadcast by the encoding test only (the count is process-wide).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x030A)]
struct Announcement {
    text: CountedText,
}

#[derive(Default)]
struct RoomController;

#[packet_controller(explicit)]
impl RoomController {
    fn join(request: Join, ctx: &Context) {
        ctx.hub().join(&request.room, ctx.connection_id());
    }

    fn leave(request: Leave, ctx: &Context) {
        ctx.hub().leave(&request.room, ctx.connection_id());
    }

    fn say(request: Say, ctx: &Context) -> Result<(), HandlerError> {
        let said = Said {
            from: ctx.connection_id().0,
            text: request.text,
        };
        ctx.hub()
            .broadcast_group(&request.room, &said)
            .map_err(|error| HandlerError::new(AppCode::new(100), error.to_string()))?;
        Ok(())
    }

    fn members(request: Members, hub: Hub) -> MemberList {
        let mut ids: Vec<u64> = hub
            .members(&request.room)
            .into_iter()
            .map(|id| id.0)
            .collect();
        ids.sort_unstable();
        MemberList(ids)
    }

    fn tell(request: Tell, ctx: &Context) -> Result<(), HandlerError> {
        let said = Said {
            from: ctx.connection_id().0,
            text: request.text,
        };
        ctx.hub()
            .send(ConnectionId(request.to), &said)
            .map_err(|error| HandlerError::new(AppCode::new(101), error.to_string()))
    }

    fn my_id(_request: MyId, ctx: &Context) -> Id {
        Id(ctx.connection_id().0)
    }
}

fn start(
    configure: impl FnOnce(ServerBuilder) -> ServerBuilder,
) -> (std::net::SocketAddr, ServerHandle) {
    let builder = Server::builder()
        .discover_controllers(false)
        .controller(RoomController)
        .map_tcp("127.0.0.1:0");
    let server = configure(builder).build().expect("builds");
    let address = server.tcp_addrs()[0];
    let handle = server.handle();
    tokio::spawn(server.run());
    (address, handle)
}

/// A raw member: its connection and id.
async fn member(address: std::net::SocketAddr) -> (RawConnection, u64) {
    let mut raw = RawConnection::connect(address).await;
    raw.request(&MyId, 1).await;
    let id = Id::decode_body(&raw.recv().await.unwrap().body).unwrap().0;
    (raw, id)
}

async fn request<P: Packet>(raw: &mut RawConnection, packet: &P, id: u32) {
    raw.request(packet, id).await;
    let answer = raw.recv().await.unwrap();
    assert_eq!(answer.header.request_id, id, "{answer:?}");
    assert!(!answer.header.flags.is_error(), "{answer:?}");
}

/// The next push, skipping nothing: it must be a `Said`.
async fn said(raw: &mut RawConnection) -> Said {
    let frame = raw.recv().await.expect("a push");
    assert_eq!(frame.header, Header::new(Said::OPCODE, Flags::NONE, 0));
    Said::decode_body(&frame.body).unwrap()
}

#[tokio::test]
async fn groups_broadcast_to_their_members_and_are_left_on_disconnect() {
    let (address, _server) = start(|b| b);
    let (mut ann, ann_id) = member(address).await;
    let (mut bob, bob_id) = member(address).await;
    let (mut eve, eve_id) = member(address).await;
    request(
        &mut ann,
        &Join {
            room: "lobby".into(),
        },
        2,
    )
    .await;
    request(
        &mut bob,
        &Join {
            room: "lobby".into(),
        },
        2,
    )
    .await;
    request(
        &mut eve,
        &Join {
            room: "other".into(),
        },
        2,
    )
    .await;

    request(
        &mut ann,
        &Say {
            room: "lobby".into(),
            text: "hi".into(),
        },
        3,
    )
    .await;
    assert_eq!(
        said(&mut bob).await,
        Said {
            from: ann_id,
            text: "hi".into()
        }
    );
    // The sender is a member too, so it hears itself (after its own ack).
    assert_eq!(said(&mut ann).await.text, "hi");

    eve.request(
        &Members {
            room: "lobby".into(),
        },
        3,
    )
    .await;
    let list = MemberList::decode_body(&eve.recv().await.unwrap().body).unwrap();
    let mut expected = vec![ann_id, bob_id];
    expected.sort_unstable();
    assert_eq!(list.0, expected);

    request(
        &mut bob,
        &Leave {
            room: "lobby".into(),
        },
        4,
    )
    .await;
    drop(ann);
    // Give the server a moment to see the close.
    let mut members = Vec::new();
    for attempt in 5..1000u32 {
        eve.request(
            &Members {
                room: "lobby".into(),
            },
            attempt,
        )
        .await;
        members = MemberList::decode_body(&eve.recv().await.unwrap().body)
            .unwrap()
            .0;
        if members.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(members.is_empty(), "no ghost members: {members:?}");
    let _ = eve_id;
}

#[tokio::test]
async fn a_send_reaches_one_connection_by_id() {
    let (address, _server) = start(|b| b);
    let (mut ann, ann_id) = member(address).await;
    let (mut bob, bob_id) = member(address).await;
    request(
        &mut ann,
        &Tell {
            to: bob_id,
            text: "psst".into(),
        },
        2,
    )
    .await;
    assert_eq!(
        said(&mut bob).await,
        Said {
            from: ann_id,
            text: "psst".into()
        }
    );
    ann.request(
        &Tell {
            to: 999_999,
            text: "nobody".into(),
        },
        3,
    )
    .await;
    let answer = ann.recv().await.unwrap();
    assert!(answer.header.flags.is_error());
    let error = ternio::protocol::system::ErrorBody::parse(&answer.body).unwrap();
    assert_eq!(error.code, ErrorCode::from_u16(101));
}

#[tokio::test]
async fn broadcast_and_kick_from_outside_a_handler() {
    let (address, server) = start(|b| b);
    let (mut ann, ann_id) = member(address).await;
    let (mut bob, _) = member(address).await;
    let hub = server.hub();
    assert_eq!(hub.len(), 2);
    let delivery = hub
        .broadcast(&Said {
            from: 0,
            text: "maintenance at noon".into(),
        })
        .unwrap();
    assert_eq!(
        delivery,
        Delivery {
            queued: 2,
            dropped: 0,
            failed: 0,
            datagrams: 0
        }
    );
    assert_eq!(said(&mut ann).await.text, "maintenance at noon");
    assert_eq!(said(&mut bob).await.text, "maintenance at noon");

    assert!(hub.kick(ConnectionId(ann_id), "spamming"));
    let frame = ann.recv().await.unwrap();
    assert_eq!(frame.header.opcode, system::DISCONNECT);
    let disconnect = Disconnect::decode_body(&frame.body).unwrap();
    assert_eq!(
        (disconnect.reason, disconnect.message.as_str()),
        (DisconnectReason::Kicked, "spamming")
    );
    assert!(ann.recv().await.is_none());
    assert!(!hub.kick(ConnectionId(999_999), "nobody"));
}

#[tokio::test]
async fn packets_broadcast_together_arrive_in_order_or_none_does() {
    let (address, server) = start(|b| b.max_frame_size(1024));
    let (mut ann, _) = member(address).await;
    let (mut bob, _) = member(address).await;
    for raw in [&mut ann, &mut bob] {
        request(
            raw,
            &Join {
                room: "tick".into(),
            },
            2,
        )
        .await;
    }
    let hub = server.hub();
    let verses: Vec<Said> = (0..50)
        .map(|verse| Said {
            from: 0,
            text: format!("verse {verse}"),
        })
        .collect();
    let delivery = hub.broadcast_group_all("tick", &verses).unwrap();
    assert_eq!(
        delivery,
        Delivery {
            queued: 100,
            dropped: 0,
            failed: 0,
            datagrams: 0
        }
    );
    for raw in [&mut ann, &mut bob] {
        for verse in &verses {
            assert_eq!(&said(raw).await, verse);
        }
    }

    // One packet above the frame limit: none of them is sent.
    let mut too_large = verses[..3].to_vec();
    too_large[1].text = "x".repeat(2000);
    assert_eq!(
        hub.broadcast_group_all("tick", &too_large),
        Err(ternio::PushError::TooLarge)
    );
    assert_eq!(
        hub.broadcast_group_all::<Said>("tick", &[]),
        Ok(Delivery::default())
    );
    let after = Said {
        from: 0,
        text: "after".into(),
    };
    hub.broadcast_group("tick", &after).unwrap();
    for raw in [&mut ann, &mut bob] {
        assert_eq!(
            said(raw).await,
            after,
            "nothing of the refused batch came first"
        );
    }
}

/// Keeps a member that never reads, and a reader, in one room; returns
/// them and their ids.
async fn slow_and_fast(address: std::net::SocketAddr) -> (RawConnection, u64, RawConnection, u64) {
    let mut slow = RawConnection::connect_small(address).await;
    slow.request(&MyId, 1).await;
    let slow_id = Id::decode_body(&slow.recv().await.unwrap().body).unwrap().0;
    let (mut fast, fast_id) = member(address).await;
    request(
        &mut slow,
        &Join {
            room: "feed".into(),
        },
        2,
    )
    .await;
    request(
        &mut fast,
        &Join {
            room: "feed".into(),
        },
        2,
    )
    .await;
    (slow, slow_id, fast, fast_id)
}

/// Waits until the reader's queue has room: the producer goes at the pace
/// of the reader that keeps up, whatever the other one does.
async fn pace(hub: &Hub, reader: u64) {
    while hub
        .connection(ConnectionId(reader))
        .is_some_and(|handle| handle.queued_bytes() > 16 * 1024)
    {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Small buffers on the server's side, so that a reader that stops (with a
/// small receive buffer of its own) is behind once the kernel's send buffer
/// (up to 4 MiB here) is full: the tests send 8 to 16 MB.
fn small_buffers() -> ServerConfig {
    let mut config = ServerConfig::default();
    config.max_outbox_bytes = 64 * 1024;
    config.outbound_high_water = 64 * 1024;
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_stops_is_disconnected_and_never_stalls_the_others() {
    let (address, server) = start(|b| b.config(small_buffers()));
    let (slow, slow_id, mut fast, fast_id) = slow_and_fast(address).await;
    let hub = server.hub();
    const COUNT: u32 = 2000;
    let payload = "x".repeat(4000);
    let reader = tokio::spawn(async move {
        for i in 0..COUNT {
            let said = said(&mut fast).await;
            assert_eq!(said.from, u64::from(i));
        }
    });
    let mut failed = 0;
    for i in 0..COUNT {
        let delivery = hub
            .broadcast_group(
                "feed",
                &Said {
                    from: u64::from(i),
                    text: payload.clone(),
                },
            )
            .unwrap();
        failed += delivery.failed;
        pace(&hub, fast_id).await;
    }
    tokio::time::timeout(Duration::from_secs(20), reader)
        .await
        .expect("the fast reader got every message")
        .unwrap();
    assert!(failed > 0, "the slow reader's queue filled up");
    for _ in 0..400 {
        if hub.connection(ConnectionId(slow_id)).is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        hub.connection(ConnectionId(slow_id)).is_none(),
        "the slow reader was disconnected"
    );
    assert!(!hub.members("feed").contains(&ConnectionId(slow_id)));
    drop(slow);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn droppable_packets_are_dropped_for_a_slow_reader_that_stays() {
    let (address, server) = start(|b| {
        b.max_outbox_bytes(64 * 1024)
            .slow_consumer(SlowConsumerPolicy::DropDroppable)
    });
    let (mut slow, slow_id, mut fast, fast_id) = slow_and_fast(address).await;
    let hub = server.hub();
    const TICKS: u32 = 4000;
    let reader = tokio::spawn(async move {
        let mut last = None;
        for _ in 0..TICKS {
            let frame = fast.recv().await.unwrap();
            let snapshot = Snapshot::decode_body(&frame.body).unwrap();
            last = Some(snapshot.tick);
        }
        last
    });
    let mut dropped = 0;
    for tick in 0..TICKS {
        let snapshot = Snapshot {
            tick,
            data: Bytes::from(vec![0; 1000]),
        };
        dropped += hub.broadcast_group("feed", &snapshot).unwrap().dropped;
        pace(&hub, fast_id).await;
    }
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(20), reader)
            .await
            .unwrap()
            .unwrap(),
        Some(TICKS - 1)
    );
    assert!(dropped > 0, "the slow reader missed snapshots");
    let handle = hub
        .connection(ConnectionId(slow_id))
        .expect("the slow reader stays connected");
    assert_eq!(handle.dropped_pushes(), dropped as u64);
    // It reads again: what it gets is the oldest snapshots that fit, then it is current.
    let first = Snapshot::decode_body(&slow.recv().await.unwrap().body).unwrap();
    assert_eq!(first.tick, 0);
    // A packet that is not droppable still disconnects a reader that is behind.
    let mut failed = 0;
    for i in 0..200 {
        failed += hub
            .broadcast_group(
                "feed",
                &Said {
                    from: i,
                    text: "y".repeat(4000),
                },
            )
            .unwrap()
            .failed;
    }
    assert!(failed > 0);
}

/// "Broadcasts are encoded once": a broadcast to a group and one to
/// everyone each encode the packet once, for members on TCP and WebSocket,
/// plain and secure (a secure member's copy is sealed from that encoding).
#[tokio::test]
async fn a_broadcast_is_encoded_once_whatever_the_number_of_members() {
    use ternio_client::{Client, ClientConfig, SecureConfig};
    let server = Server::builder()
        .discover_controllers(false)
        .controller(RoomController)
        .map_tcp("127.0.0.1:0")
        .map_websocket("127.0.0.1:0", "/ws")
        .build()
        .unwrap();
    let (tcp, ws) = (server.tcp_addrs()[0], server.websocket_addrs()[0]);
    let hub = server.handle().hub();
    tokio::spawn(server.run());
    let secure = || {
        let mut config = ClientConfig::default();
        config.secure = Some(SecureConfig::anonymous());
        config
    };
    let url = format!("ws://{ws}/ws");
    let mut members = Vec::new();
    for _ in 0..3 {
        members.push(Client::connect_tcp(tcp).await.unwrap());
        members.push(Client::connect_ws(&url).await.unwrap());
        members.push(Client::connect_tcp_with(tcp, secure()).await.unwrap());
        members.push(Client::connect_ws_with(&url, secure()).await.unwrap());
    }
    let mut pushes: Vec<_> = members
        .iter()
        .map(|member| member.subscribe::<Announcement>())
        .collect();
    for member in &members {
        let id: Id = member.request_async(&MyId).await.unwrap();
        assert!(hub.join("everyone", ConnectionId(id.0)));
    }
    let announcement = |text: &str| Announcement {
        text: CountedText(text.into()),
    };

    let before = ENCODES.load(Ordering::SeqCst);
    let delivery = hub
        .broadcast_group("everyone", &announcement("to the group"))
        .unwrap();
    assert_eq!(delivery.queued, 12);
    assert_eq!(
        ENCODES.load(Ordering::SeqCst) - before,
        1,
        "group broadcast"
    );
    let delivery = hub.broadcast(&announcement("to all")).unwrap();
    assert_eq!(delivery.queued, 12);
    assert_eq!(ENCODES.load(Ordering::SeqCst) - before, 2, "broadcast");

    // Every member got both, decoded from that one encoding.
    for push in &mut pushes {
        for text in ["to the group", "to all"] {
            let got = tokio::time::timeout(Duration::from_secs(5), push.next())
                .await
                .expect("the push arrives")
                .expect("the client is open");
            assert_eq!(got, announcement(text));
        }
    }
    // A send to one connection encodes for that one: one more.
    let id: Id = members[0].request_async(&MyId).await.unwrap();
    hub.send(ConnectionId(id.0), &announcement("to one"))
        .unwrap();
    assert_eq!(ENCODES.load(Ordering::SeqCst) - before, 3, "send");
}

/// Pushes `said` to a connection that does not read until 32 KiB stay in
/// its queue (the socket's buffers are full), never past its 64 KiB limit.
async fn fill(handle: &ConnectionHandle, said: &Said) {
    loop {
        while handle.queued_bytes() < 32 * 1024 {
            handle.push(said).unwrap();
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        if handle.queued_bytes() >= 32 * 1024 {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_below_waits_for_the_reader_and_fails_once_the_connection_closed() {
    let (address, server) = start(|b| b.config(small_buffers()));
    let (mut slow, slow_id) = {
        let mut raw = RawConnection::connect_small(address).await;
        raw.request(&MyId, 1).await;
        let id = Id::decode_body(&raw.recv().await.unwrap().body).unwrap().0;
        (raw, id)
    };
    let handle = server.hub().connection(ConnectionId(slow_id)).unwrap();
    // Push while the queue is short, until the reader's buffers are full
    // and 32 KiB wait in its queue (its limit is 64 KiB).
    let said = Said {
        from: 0,
        text: "x".repeat(4000),
    };
    fill(&handle, &said).await;
    let waiter = handle.clone();
    let wait = tokio::spawn(async move { waiter.queue_below(16 * 1024).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!wait.is_finished(), "nobody read: the queue is still long");
    // The reader reads: the queue drains and the wait ends.
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        while !wait.is_finished() {
            slow.recv().await.expect("a push");
        }
    });
    read.await.expect("the wait ends once the reader reads");
    assert_eq!(wait.await.unwrap(), Ok(()));
    assert!(handle.queued_bytes() < 16 * 1024);
    // Full again, then closed: the waiter hears of it.
    fill(&handle, &said).await;
    let waiter = handle.clone();
    let wait = tokio::spawn(async move { waiter.queue_below(16 * 1024).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    handle.kick("done");
    let closed = tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .expect("the wait ends with the connection")
        .unwrap();
    assert_eq!(closed, Err(ternio::PushError::Closed));
}
