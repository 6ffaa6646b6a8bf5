//! Rooms with a tick (`ternio::room`), over real TCP with `ternio-client`:
//! the tick rate is kept, inputs reach the tick in order and a flood of
//! them is refused past the bound, one snapshot for all and one per member
//! reach the right members, a member whose connection closes leaves, late
//! ticks and overruns are counted, unreliable snapshots go by datagram to
//! a client that bound a channel and on the stream to one that did not,
//! and the room's task ends with its handle.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use ternio::packet_controller;
use ternio::room::{InputError, Inputs, Room, RoomConfig, Simulation, Snapshots, TickRate};
use ternio::{ConnectionId, Context, Packet, Server, ServerBuilder, ServerHandle, State};
use ternio_client::{Client, ClientConfig, SecureConfig};
use ternio_tests::eventually;

/// 0x0C00: joins the room; answered with the member's connection id.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0C00, response = Joined)]
struct Join;

/// 0x0C01: the answer to [`Join`].
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0C01)]
struct Joined {
    member: u64,
    joined: bool,
}

/// 0x0C02, one-way: an input for the next tick.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0C02, response = ())]
struct Act {
    seq: u32,
}

/// 0x0C10, on the stream: what one tick sends.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0C10)]
struct World {
    tick: u64,
    /// The member it is for (0: everyone).
    member: u64,
    /// That member's inputs this tick, in order (empty for everyone's).
    inputs: Vec<u32>,
}

/// 0x0C11, by datagram where it can: what one tick sends.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0C11, unreliable)]
struct Fast {
    tick: u64,
    member: u64,
}

/// What the simulation saw, shared with the test.
#[derive(Debug, Default)]
struct Log {
    joins: Vec<ConnectionId>,
    leaves: Vec<ConnectionId>,
    /// Every input the ticks took, in the order taken.
    inputs: Vec<(ConnectionId, u32)>,
    ticks: Vec<u64>,
}

#[derive(Clone, Copy)]
enum Mode {
    /// One [`World`] for everyone.
    Broadcast,
    /// One [`World`] per member, with its inputs.
    PerMember,
}

struct Recorder {
    log: Arc<Mutex<Log>>,
    mode: Mode,
    members: Vec<ConnectionId>,
    /// How long each tick sleeps (to make it late).
    sleep: Duration,
}

impl Simulation for Recorder {
    type Input = u32;
    type Snapshot = World;

    fn join(&mut self, member: ConnectionId) {
        self.members.push(member);
        self.log.lock().unwrap().joins.push(member);
    }

    fn leave(&mut self, member: ConnectionId) {
        self.members.retain(|known| *known != member);
        self.log.lock().unwrap().leaves.push(member);
    }

    fn tick(&mut self, tick: u64, inputs: &mut Inputs<u32>, out: &mut Snapshots<World>) {
        if !self.sleep.is_zero() {
            std::thread::sleep(self.sleep);
        }
        let mut log = self.log.lock().unwrap();
        log.ticks.push(tick);
        match self.mode {
            Mode::Broadcast => {
                for (member, input) in inputs.take_all() {
                    log.inputs.push((member, input));
                }
                out.broadcast(World {
                    tick,
                    member: 0,
                    inputs: Vec::new(),
                });
            }
            Mode::PerMember => {
                for member in &self.members {
                    let mine: Vec<u32> = inputs.take(*member).collect();
                    log.inputs
                        .extend(mine.iter().map(|input| (*member, *input)));
                    out.to(
                        *member,
                        World {
                            tick,
                            member: member.0,
                            inputs: mine,
                        },
                    );
                }
            }
        }
    }
}

/// Sends [`Fast`] to everyone and to each member.
struct Racer {
    members: Vec<ConnectionId>,
}

impl Simulation for Racer {
    type Input = u32;
    type Snapshot = Fast;

    fn join(&mut self, member: ConnectionId) {
        self.members.push(member);
    }

    fn leave(&mut self, member: ConnectionId) {
        self.members.retain(|known| *known != member);
    }

    fn tick(&mut self, tick: u64, _: &mut Inputs<u32>, out: &mut Snapshots<Fast>) {
        out.broadcast(Fast { tick, member: 0 });
        for member in &self.members {
            out.to(
                *member,
                Fast {
                    tick,
                    member: member.0,
                },
            );
        }
    }
}

/// The room the handlers use, set once the server is built (the room
/// needs the server's hub).
#[derive(Clone, Default)]
struct TheRoom(Arc<OnceLock<Room<u32>>>);

impl TheRoom {
    fn get(&self) -> &Room<u32> {
        self.0.get().expect("the room is set")
    }
}

/// Inputs the room refused, as the handler saw them.
#[derive(Clone, Default)]
struct Refused(Arc<Mutex<Vec<InputError>>>);

#[derive(Default)]
struct Rooms;

#[packet_controller(explicit)]
impl Rooms {
    fn join(_: Join, ctx: &Context, room: State<TheRoom>) -> Joined {
        Joined {
            member: ctx.connection_id().0,
            joined: room.get().join(ctx.connection_id()),
        }
    }

    fn act(request: Act, ctx: &Context, room: State<TheRoom>, refused: State<Refused>) {
        if let Err(error) = room.get().input(ctx.connection_id(), request.seq) {
            refused.0.0.lock().unwrap().push(error);
        }
    }
}

struct Started {
    tcp: SocketAddr,
    handle: ServerHandle,
    room: Room<u32>,
    refused: Refused,
}

fn start<S: Simulation<Input = u32>>(
    configure: impl FnOnce(ServerBuilder) -> ServerBuilder,
    rate: TickRate,
    config: RoomConfig,
    simulation: S,
) -> Started {
    let the_room = TheRoom::default();
    let refused = Refused::default();
    let server = configure(
        Server::builder()
            .discover_controllers(false)
            .controller(Rooms)
            .state(the_room.clone())
            .state(refused.clone())
            .map_tcp("127.0.0.1:0"),
    )
    .build()
    .expect("the server builds");
    let tcp = server.tcp_addrs()[0];
    let handle = server.handle();
    let room = Room::start_with(handle.hub(), "arena", rate, config, simulation);
    assert!(the_room.0.set(room.clone()).is_ok());
    tokio::spawn(server.run());
    Started {
        tcp,
        handle,
        room,
        refused,
    }
}

fn recorder(mode: Mode, sleep: Duration) -> (Recorder, Arc<Mutex<Log>>) {
    let log = Arc::new(Mutex::new(Log::default()));
    (
        Recorder {
            log: Arc::clone(&log),
            mode,
            members: Vec::new(),
            sleep,
        },
        log,
    )
}

async fn join(client: &Client) -> ConnectionId {
    let joined = client.request_async(&Join).await.expect("joins");
    assert!(joined.joined);
    ConnectionId(joined.member)
}

async fn next<P: Packet>(subscription: &mut ternio_client::Subscription<P>) -> P {
    tokio::time::timeout(Duration::from_secs(5), subscription.next())
        .await
        .expect("a snapshot within 5 s")
        .expect("the subscription is open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_room_ticks_at_its_rate() {
    let (simulation, log) = recorder(Mode::Broadcast, Duration::ZERO);
    let started = start(|b| b, TickRate::hz(50), RoomConfig::default(), simulation);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = started.room.stats();
    let began = std::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = started.room.stats();
    let ticks = after.ticks - before.ticks;
    let skipped = after.skipped - before.skipped;
    let expected = began.elapsed().as_secs_f64() * 50.0;
    // 50 a second, never more (one of slack for where the reads fall
    // between ticks); a loaded machine may skip some, which the room
    // counts: the ticks it ran and skipped keep up with the clock.
    assert!(
        ticks as f64 <= expected + 1.0 && (ticks + skipped) as f64 >= expected * 0.8,
        "{ticks} ticks and {skipped} skipped in {:?} at 50 Hz",
        began.elapsed()
    );
    // The tick numbers count the ticks run, one by one.
    let numbers = log.lock().unwrap().ticks.clone();
    assert!(numbers.windows(2).all(|pair| pair[1] == pair[0] + 1));
    assert_eq!(numbers.first(), Some(&1));
    assert_eq!(TickRate::hz(50).period(), Duration::from_millis(20));
    started.handle.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inputs_reach_the_tick_in_order_and_a_flood_is_refused_past_the_bound() {
    let (simulation, log) = recorder(Mode::PerMember, Duration::ZERO);
    // A slow tick (4 Hz) and a bound of 8: a burst of 100 inputs between
    // two ticks overflows it.
    let started = start(
        |b| b,
        TickRate::hz(4),
        RoomConfig { max_inputs: 8 },
        simulation,
    );
    let (a, b) = (
        Client::connect_tcp(started.tcp).await.unwrap(),
        Client::connect_tcp(started.tcp).await.unwrap(),
    );
    let (id_a, id_b) = (join(&a).await, join(&b).await);

    // A well-behaved member: a few inputs a tick.
    for seq in 1..=5 {
        a.send(&Act { seq }).unwrap();
    }
    // An attacker: 100 at once, between two ticks (in one write burst).
    for seq in 1000..1100 {
        b.send(&Act { seq }).unwrap();
    }
    eventually("the flood is handled", || {
        let stats = started.room.stats();
        stats.inputs + stats.inputs_refused >= 105
    })
    .await;
    eventually("the inputs reach a tick", || {
        log.lock().unwrap().inputs.len() as u64 == started.room.stats().inputs
    })
    .await;

    let stats = started.room.stats();
    let log = log.lock().unwrap();
    let of = |member: ConnectionId| -> Vec<u32> {
        log.inputs
            .iter()
            .filter(|(from, _)| *from == member)
            .map(|(_, input)| *input)
            .collect()
    };
    assert_eq!(of(id_a), vec![1, 2, 3, 4, 5], "in order, none lost");
    let flood = of(id_b);
    // In order; at most 8 per tick; the others refused and counted.
    assert!(flood.windows(2).all(|pair| pair[0] < pair[1]), "{flood:?}");
    assert!(flood.len() < 100, "{} of the flood queued", flood.len());
    assert!(flood.len() >= 8);
    assert_eq!(stats.inputs_refused, 100 - flood.len() as u64);
    assert_eq!(
        started.refused.0.lock().unwrap().len() as u64,
        stats.inputs_refused
    );
    assert!(
        started
            .refused
            .0
            .lock()
            .unwrap()
            .iter()
            .all(|error| *error == InputError::Full)
    );
    // Each tick took at most the bound from one member.
    assert!(
        flood.len() <= 8 * log.ticks.len(),
        "{} inputs in {} ticks",
        flood.len(),
        log.ticks.len()
    );
    // A connection that is not a member has its inputs refused.
    assert_eq!(
        started.room.input(ConnectionId(u64::MAX), 1),
        Err(InputError::NotMember)
    );
    started.handle.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_snapshot_for_all_reaches_every_member_and_no_one_else() {
    let (simulation, _log) = recorder(Mode::Broadcast, Duration::ZERO);
    let started = start(|b| b, TickRate::hz(30), RoomConfig::default(), simulation);
    let member = Client::connect_tcp(started.tcp).await.unwrap();
    let other = Client::connect_tcp(started.tcp).await.unwrap();
    let outsider = Client::connect_tcp(started.tcp).await.unwrap();
    let mut seen = [member.subscribe::<World>(), other.subscribe::<World>()];
    let mut unseen = outsider.subscribe::<World>();
    join(&member).await;
    join(&other).await;
    for subscription in &mut seen {
        let first = next(subscription).await;
        let second = next(subscription).await;
        assert_eq!(first.member, 0);
        assert!(second.tick > first.tick);
    }
    assert!(
        tokio::time::timeout(Duration::from_millis(200), unseen.next())
            .await
            .is_err(),
        "a connection outside the room got a snapshot"
    );
    assert!(started.room.stats().snapshots_sent >= 4);
    started.handle.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_member_snapshots_reach_their_member_only() {
    let (simulation, _log) = recorder(Mode::PerMember, Duration::ZERO);
    let started = start(|b| b, TickRate::hz(30), RoomConfig::default(), simulation);
    let a = Client::connect_tcp(started.tcp).await.unwrap();
    let b = Client::connect_tcp(started.tcp).await.unwrap();
    let mut to_a = a.subscribe::<World>();
    let mut to_b = b.subscribe::<World>();
    let (id_a, id_b) = (join(&a).await, join(&b).await);
    a.send(&Act { seq: 7 }).unwrap();
    let mut got_seven = false;
    for _ in 0..20 {
        let world = next(&mut to_a).await;
        assert_eq!(world.member, id_a.0, "a got b's snapshot");
        got_seven |= world.inputs == [7];
        let world = next(&mut to_b).await;
        assert_eq!(world.member, id_b.0, "b got a's snapshot");
        assert!(world.inputs.is_empty(), "b got a's inputs");
    }
    assert!(got_seven, "a's input came back in its own snapshot");
    started.handle.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_whose_connection_closes_leaves() {
    let (simulation, log) = recorder(Mode::Broadcast, Duration::ZERO);
    let started = start(|b| b, TickRate::hz(30), RoomConfig::default(), simulation);
    let stays = Client::connect_tcp(started.tcp).await.unwrap();
    let goes = Client::connect_tcp(started.tcp).await.unwrap();
    let staying = join(&stays).await;
    let going = join(&goes).await;
    eventually("both joined the simulation", || {
        log.lock().unwrap().joins.len() == 2
    })
    .await;
    goes.close().await;
    eventually("the closed member left", || {
        log.lock().unwrap().leaves == [going]
    })
    .await;
    assert_eq!(started.room.members(), vec![staying]);
    // Leaving by hand: told once; a second leave is no leave.
    assert!(started.room.leave(staying));
    assert!(!started.room.leave(staying));
    eventually("the member who left by hand left", || {
        log.lock().unwrap().leaves == [going, staying]
    })
    .await;
    assert!(started.room.is_empty());
    // A join and a leave between two ticks cancel: the simulation hears
    // of neither.
    // A machine that preempts the test between the two calls lets a tick
    // fall between them (the simulation then hears of both): a few tries.
    let mut tries = 0;
    loop {
        let before = log.lock().unwrap().joins.len();
        let _ = started.room.join(staying) && started.room.leave(staying);
        let ticks = started.room.stats().ticks;
        eventually("two more ticks", || started.room.stats().ticks >= ticks + 2).await;
        if log.lock().unwrap().joins.len() == before {
            break;
        }
        tries += 1;
        assert!(
            tries < 5,
            "the simulation heard of a join cancelled by a leave"
        );
    }
    started.handle.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_longer_than_its_period_is_an_overrun_and_the_next_is_late() {
    // 50 Hz (20 ms) with a tick that sleeps 30 ms.
    let (simulation, _log) = recorder(Mode::Broadcast, Duration::from_millis(30));
    let started = start(|b| b, TickRate::hz(50), RoomConfig::default(), simulation);
    eventually("ten ticks", || started.room.stats().ticks >= 10).await;
    let stats = started.room.stats();
    assert!(stats.overruns >= stats.ticks - 1, "{stats:?}");
    // Each tick ends 30 ms after it began: the next instant of the grid is
    // 10 ms behind (late by half a period), or skipped.
    assert!(stats.late_ticks + stats.skipped >= 5, "{stats:?}");
    started.room.stop();
    started.handle.shutdown();

    // A tick well within its period is neither.
    let (simulation, _log) = recorder(Mode::Broadcast, Duration::ZERO);
    let started = start(|b| b, TickRate::hz(20), RoomConfig::default(), simulation);
    eventually("ten ticks", || started.room.stats().ticks >= 10).await;
    assert_eq!(started.room.stats().overruns, 0);
    started.handle.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreliable_snapshots_go_by_datagram_where_bound_and_on_the_stream_elsewhere() {
    let started = start(
        |b| b.map_udp("127.0.0.1:0"),
        TickRate::hz(30),
        RoomConfig::default(),
        Racer {
            members: Vec::new(),
        },
    );
    let mut config = ClientConfig::default();
    config.secure = Some(SecureConfig::anonymous());
    let bound = Client::connect_tcp_with(started.tcp, config).await.unwrap();
    bound.bind_datagrams().await.expect("binds");
    let plain = Client::connect_tcp(started.tcp).await.unwrap();
    let bound_id = join(&bound).await;
    let plain_id = join(&plain).await;
    let hub = started.handle.hub();
    eventually("the server can reach the bound client", || {
        hub.connection(bound_id)
            .is_some_and(|connection| connection.has_datagrams())
    })
    .await;

    let mut to_bound = bound.subscribe::<Fast>();
    let mut to_plain = plain.subscribe::<Fast>();
    let before = started.room.stats();
    let (mut mine, mut everyone) = (0, 0);
    while mine < 5 || everyone < 5 {
        let fast = next(&mut to_bound).await;
        match fast.member {
            0 => everyone += 1,
            member => {
                assert_eq!(member, bound_id.0);
                mine += 1;
            }
        }
    }
    let (mut mine, mut everyone) = (0, 0);
    while mine < 5 || everyone < 5 {
        let fast = next(&mut to_plain).await;
        match fast.member {
            0 => everyone += 1,
            member => {
                assert_eq!(member, plain_id.0);
                mine += 1;
            }
        }
    }
    let after = started.room.stats();
    let sent = after.snapshots_sent - before.snapshots_sent;
    let by_datagram = after.snapshots_by_datagram - before.snapshots_by_datagram;
    // Four snapshots a tick (two for all, one each): half of them, the
    // bound client's, by datagram; the plain client's on the stream. Each
    // read of the stats may fall inside a tick's counting: allow a tick's
    // worth at each end.
    assert!(sent >= 20, "{sent} sent");
    assert!(
        by_datagram.abs_diff(sent / 2) <= 4,
        "{by_datagram} of {sent} by datagram"
    );
    started.handle.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_room_ends_with_its_last_handle_or_stop() {
    let (simulation, _log) = recorder(Mode::Broadcast, Duration::ZERO);
    let started = start(|b| b, TickRate::hz(100), RoomConfig::default(), simulation);
    let client = Client::connect_tcp(started.tcp).await.unwrap();
    let id = join(&client).await;
    let room = started.room.clone();
    room.stop();
    eventually("the task ended", || !room.is_running()).await;
    let ticks = room.stats().ticks;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(room.stats().ticks, ticks, "ticks after stop");
    assert!(!room.join(id));
    assert_eq!(room.input(id, 1), Err(InputError::Stopped));
    // Its members left its group.
    assert!(started.handle.hub().members("arena").is_empty());
    started.handle.shutdown();

    // Dropping every handle ends it too (the state's clone included: a
    // room of its own here).
    let (simulation, log) = recorder(Mode::Broadcast, Duration::ZERO);
    let hub = started.handle.hub();
    let room: Room<u32> = Room::start(hub, "other", TickRate::hz(100), simulation);
    eventually("it ticks", || room.stats().ticks >= 2).await;
    drop(room);
    // The simulation is dropped with the task: the log's only owner is
    // then the test, and no tick comes after.
    eventually("the simulation is dropped", || Arc::strong_count(&log) == 1).await;
    let ticks = log.lock().unwrap().ticks.len();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(log.lock().unwrap().ticks.len(), ticks, "ticks after drop");
}

/// Ticks normally until `panic_at`, then panics (an application bug).
struct Panicky {
    panic_at: u64,
}

impl Simulation for Panicky {
    type Input = u32;
    type Snapshot = World;

    fn tick(&mut self, tick: u64, _: &mut Inputs<u32>, out: &mut Snapshots<World>) {
        assert!(tick < self.panic_at, "the simulation's own bug");
        out.broadcast(World {
            tick,
            member: 0,
            inputs: Vec::new(),
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulation_that_panics_stops_its_room_and_lets_its_members_go() {
    let started = start(
        |b| b,
        TickRate::hz(100),
        RoomConfig::default(),
        Panicky { panic_at: 20 },
    );
    let client = Client::connect_tcp(started.tcp).await.unwrap();
    let id = join(&client).await;
    assert_eq!(started.handle.hub().members("arena"), vec![id]);
    let room = started.room.clone();
    eventually("the room stopped after the panic", || !room.is_running()).await;
    assert_eq!(room.stats().ticks, 19, "ticks before the panic");
    // Nothing is kept for a room that no longer ticks: its members left
    // the group and the room, and joins and inputs are refused.
    assert!(started.handle.hub().members("arena").is_empty());
    assert!(room.is_empty());
    assert!(!room.join(id));
    assert_eq!(room.input(id, 1), Err(InputError::Stopped));
    assert!(started.handle.hub().members("arena").is_empty());
    // The server itself goes on.
    assert!(client.ping().await.is_ok());
    started.handle.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_presence_hook_may_read_the_room_it_is_called_for() {
    // The hook runs inside the hub's join and leave; a room that held its
    // lock across them would deadlock here.
    let (simulation, _log) = recorder(Mode::Broadcast, Duration::ZERO);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let hook_room: Arc<OnceLock<Room<u32>>> = Arc::default();
    let started = {
        let seen = Arc::clone(&seen);
        let hook_room = Arc::clone(&hook_room);
        start(
            move |builder| {
                builder.on_presence(move |event, _hub| {
                    if let Some(room) = hook_room.get() {
                        seen.lock().unwrap().push((
                            event.change,
                            room.len(),
                            room.contains(event.member.id),
                        ));
                    }
                })
            },
            TickRate::hz(30),
            RoomConfig::default(),
            simulation,
        )
    };
    assert!(hook_room.set(started.room.clone()).is_ok());
    let client = Client::connect_tcp(started.tcp).await.unwrap();
    let id = tokio::time::timeout(Duration::from_secs(5), join(&client))
        .await
        .expect("the join returns: the hook did not deadlock");
    let left = {
        let room = started.room.clone();
        tokio::task::spawn_blocking(move || room.leave(id))
    };
    assert!(
        tokio::time::timeout(Duration::from_secs(5), left)
            .await
            .expect("the leave returns")
            .unwrap()
    );
    let seen = seen.lock().unwrap().clone();
    // The hook ran while the change was under way: the room had not
    // counted the join yet, and had already let the member go.
    assert_eq!(
        seen,
        vec![
            (ternio::PresenceChange::Joined, 0, false),
            (ternio::PresenceChange::Left, 0, false)
        ]
    );
    started.handle.shutdown();
}

#[test]
fn tick_rates_stay_within_a_millisecond_and_a_day() {
    assert_eq!(TickRate::hz(u32::MAX).period(), Duration::from_millis(1));
    assert_eq!(TickRate::hz(0).period(), Duration::from_secs(1));
    assert_eq!(
        TickRate::every(Duration::ZERO).period(),
        Duration::from_millis(1)
    );
    assert_eq!(
        TickRate::every(Duration::MAX).period(),
        Duration::from_secs(24 * 60 * 60)
    );
}
