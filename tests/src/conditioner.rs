//! A UDP link conditioner: a relay between clients and a server's UDP
//! socket that loses, delays (with jitter), reorders and duplicates
//! datagrams, per direction, as a bad network would, and counts what it did.
//!
//! Clients send to the relay's [`address`](UdpConditioner::address) (a
//! server tells them to with `ServerBuilder::datagram_port`); the relay
//! opens one upstream socket to the target per client source address (a
//! *flow*), so the server sees each client at an address of its own and
//! replies there, and the relay carries the replies back to that client.
//!
//! Every decision comes from a seeded [`Rng`], one per flow and direction,
//! which draws the same numbers for every datagram whatever is decided:
//! given the seed, what happens to a flow's `n`-th datagram in a direction
//! does not depend on timing (flows are numbered in the order they first
//! appear). The seed is printed when a test fails while the relay is alive;
//! [`seed`] lets `TERNIO_SEED` replace a test's fixed seed.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// A small, seeded random number generator (SplitMix64): reproducible,
/// and good enough to decide a datagram's fate.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator whose numbers follow from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// `TERNIO_SEED` when set (to replay another run, or explore others),
/// `default` otherwise.
pub fn seed(default: u64) -> u64 {
    std::env::var("TERNIO_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or(default)
}

/// What one direction of a link does to each datagram.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Impairment {
    /// The probability that a datagram is lost.
    pub loss: f64,
    /// The base one-way delay.
    pub delay: Duration,
    /// Each datagram's delay is `delay ± jitter`, uniformly: datagrams
    /// sent less than `2 × jitter` apart may swap.
    pub jitter: Duration,
    /// The probability that a datagram skips the delay and leaves at once,
    /// overtaking those in flight (as netem's `reorder`).
    pub reorder: f64,
    /// The probability that a datagram is sent twice, the copy with a
    /// delay of its own.
    pub duplicate: f64,
}

impl Impairment {
    /// Nothing lost, delayed, reordered or repeated.
    pub const CLEAN: Self = Self {
        loss: 0.0,
        delay: Duration::ZERO,
        jitter: Duration::ZERO,
        reorder: 0.0,
        duplicate: 0.0,
    };

    /// The bad network of the tests: 5 % loss, 50 ± 20 ms, 2 % reordered
    /// and 2 % duplicated.
    pub const BAD: Self = Self {
        loss: 0.05,
        delay: Duration::from_millis(50),
        jitter: Duration::from_millis(20),
        reorder: 0.02,
        duplicate: 0.02,
    };

    /// `delay ± jitter`, with `unit` in `[0, 1)`.
    fn delay_at(&self, unit: f64) -> Duration {
        let low = self.delay.saturating_sub(self.jitter);
        let spread = (self.delay + self.jitter).saturating_sub(low);
        low + spread.mul_f64(unit)
    }
}

/// What one direction of the relay did, counted in datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkStats {
    /// Received from the sender.
    pub received: u64,
    /// Lost on purpose: never sent on.
    pub dropped: u64,
    /// Sent on at once, skipping the delay ([`Impairment::reorder`]).
    pub reordered: u64,
    /// Sent on twice ([`Impairment::duplicate`]).
    pub duplicated: u64,
    /// Sent on, copies included.
    pub sent: u64,
    /// Sent on after a datagram of the same flow that was received after
    /// it: the reorderings the receiver saw (from jitter or `reorder`).
    pub overtaken: u64,
}

/// What the relay did with one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fate {
    /// Its flow: 0 for the first client source address the relay saw, 1
    /// for the next...
    pub flow: u64,
    /// Its size in bytes (what tells a keepalive from a frame with a body).
    pub len: usize,
    /// How many copies were sent on: 0 (lost), 1, or 2 (duplicated).
    pub copies: u8,
    /// Whether it skipped the delay ([`Impairment::reorder`]).
    pub reordered: bool,
}

#[derive(Default)]
struct Counters {
    received: AtomicU64,
    dropped: AtomicU64,
    reordered: AtomicU64,
    duplicated: AtomicU64,
    sent: AtomicU64,
    overtaken: AtomicU64,
}

impl Counters {
    fn stats(&self) -> LinkStats {
        let read = |counter: &AtomicU64| counter.load(Ordering::SeqCst);
        LinkStats {
            received: read(&self.received),
            dropped: read(&self.dropped),
            reordered: read(&self.reordered),
            duplicated: read(&self.duplicated),
            sent: read(&self.sent),
            overtaken: read(&self.overtaken),
        }
    }
}

/// One direction: its impairment (changeable while the relay runs), its
/// counters, and the queue of the task that sends datagrams when due.
struct Direction {
    impairment: Mutex<Impairment>,
    counters: Counters,
    /// Every datagram's fate, in the order received.
    fates: Mutex<Vec<Fate>>,
    due: mpsc::UnboundedSender<Due>,
}

/// A datagram waiting for its time.
struct Due {
    at: Instant,
    /// Its place among the flow's datagrams in this direction, from 1.
    seq: u64,
    /// The highest `seq` of the flow sent on so far.
    flow_highest: Arc<AtomicU64>,
    socket: Arc<UdpSocket>,
    to: SocketAddr,
    bytes: Arc<[u8]>,
}

/// One flow's end of a direction: its generator and its datagrams' count.
struct FlowEnd {
    index: u64,
    rng: Rng,
    seq: u64,
    highest: Arc<AtomicU64>,
}

impl FlowEnd {
    fn new(index: u64, seed: u64) -> Self {
        Self {
            index,
            rng: Rng::new(seed),
            seq: 0,
            highest: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl Direction {
    fn new(impairment: Impairment, tasks: &mut Vec<JoinHandle<()>>) -> Arc<Self> {
        let (due, queue) = mpsc::unbounded_channel();
        let direction = Arc::new(Self {
            impairment: Mutex::new(impairment),
            counters: Counters::default(),
            fates: Mutex::default(),
            due,
        });
        tasks.push(tokio::spawn(send_when_due(queue, Arc::clone(&direction))));
        direction
    }

    /// Decides the fate of `bytes`, the next datagram of `flow`, to go
    /// from `socket` to `to`.
    fn carry(&self, flow: &mut FlowEnd, socket: &Arc<UdpSocket>, to: SocketAddr, bytes: &[u8]) {
        let impairment = *self.impairment.lock().unwrap();
        let rng = &mut flow.rng;
        let (lose, delay, reorder, duplicate, copy_delay) =
            (rng.unit(), rng.unit(), rng.unit(), rng.unit(), rng.unit());
        flow.seq += 1;
        let counters = &self.counters;
        let mut fate = Fate {
            flow: flow.index,
            len: bytes.len(),
            copies: 0,
            reordered: false,
        };
        counters.received.fetch_add(1, Ordering::SeqCst);
        if lose < impairment.loss {
            counters.dropped.fetch_add(1, Ordering::SeqCst);
            self.fates.lock().unwrap().push(fate);
            return;
        }
        let now = Instant::now();
        fate.copies = 1;
        let delay = if reorder < impairment.reorder {
            counters.reordered.fetch_add(1, Ordering::SeqCst);
            fate.reordered = true;
            Duration::ZERO
        } else {
            impairment.delay_at(delay)
        };
        let bytes: Arc<[u8]> = bytes.into();
        let send = |delay| {
            let _ = self.due.send(Due {
                at: now + delay,
                seq: flow.seq,
                flow_highest: Arc::clone(&flow.highest),
                socket: Arc::clone(socket),
                to,
                bytes: Arc::clone(&bytes),
            });
        };
        send(delay);
        if duplicate < impairment.duplicate {
            counters.duplicated.fetch_add(1, Ordering::SeqCst);
            fate.copies = 2;
            send(impairment.delay_at(copy_delay));
        }
        self.fates.lock().unwrap().push(fate);
    }
}

/// Sends the datagrams of `queue` when they are due, earliest first.
async fn send_when_due(mut queue: mpsc::UnboundedReceiver<Due>, direction: Arc<Direction>) {
    // By time, then by arrival (an index into `waiting`).
    let mut heap: BinaryHeap<Reverse<(Instant, u64)>> = BinaryHeap::new();
    let mut waiting: HashMap<u64, Due> = HashMap::new();
    let mut next_key = 0u64;
    loop {
        let next = heap.peek().map(|Reverse((at, _))| *at);
        tokio::select! {
            received = queue.recv() => {
                let Some(due) = received else { return };
                heap.push(Reverse((due.at, next_key)));
                waiting.insert(next_key, due);
                next_key += 1;
            }
            () = tokio::time::sleep_until(next.unwrap_or_else(Instant::now)), if next.is_some() => {
                while let Some(Reverse((at, key))) = heap.peek().copied() {
                    if at > Instant::now() {
                        break;
                    }
                    heap.pop();
                    let due = waiting.remove(&key).expect("a queued datagram");
                    let counters = &direction.counters;
                    if due.flow_highest.fetch_max(due.seq, Ordering::SeqCst) > due.seq {
                        counters.overtaken.fetch_add(1, Ordering::SeqCst);
                    }
                    if due.socket.send_to(&due.bytes, due.to).await.is_ok() {
                        counters.sent.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        }
    }
}

/// The relay. Its tasks stop when it is dropped.
pub struct UdpConditioner {
    socket: Arc<UdpSocket>,
    seed: u64,
    up: Arc<Direction>,
    down: Arc<Direction>,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl UdpConditioner {
    /// A relay on a free port of 127.0.0.1 whose datagrams to the target
    /// suffer `up` and those back `down`, decided by generators seeded
    /// from `seed`. It carries nothing until [`start`](Self::start) names
    /// the target: its port can be given to the server first.
    pub async fn bind(up: Impairment, down: Impairment, seed: u64) -> Self {
        let socket = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let mut tasks = Vec::new();
        let up = Direction::new(up, &mut tasks);
        let down = Direction::new(down, &mut tasks);
        Self {
            socket,
            seed,
            up,
            down,
            tasks: Arc::new(Mutex::new(tasks)),
        }
    }

    /// Where clients send.
    pub fn address(&self) -> SocketAddr {
        self.socket.local_addr().unwrap()
    }

    /// The seed the generators came from.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Starts relaying between clients and `target`.
    pub fn start(&self, target: SocketAddr) {
        let relay = Relay {
            socket: Arc::clone(&self.socket),
            seed: self.seed,
            up: Arc::clone(&self.up),
            down: Arc::clone(&self.down),
            tasks: Arc::clone(&self.tasks),
        };
        let task = tokio::spawn(relay.run(target));
        self.tasks.lock().unwrap().push(task);
    }

    /// Changes what happens to datagrams to the target from now on.
    pub fn set_up(&self, impairment: Impairment) {
        *self.up.impairment.lock().unwrap() = impairment;
    }

    /// Changes what happens to datagrams from the target from now on.
    pub fn set_down(&self, impairment: Impairment) {
        *self.down.impairment.lock().unwrap() = impairment;
    }

    /// What happened to the datagrams clients sent to the target.
    pub fn up(&self) -> LinkStats {
        self.up.counters.stats()
    }

    /// What happened to the datagrams the target sent back.
    pub fn down(&self) -> LinkStats {
        self.down.counters.stats()
    }

    /// The fate of every datagram clients sent to the target, in the
    /// order the relay received them.
    pub fn fates_up(&self) -> Vec<Fate> {
        self.up.fates.lock().unwrap().clone()
    }

    /// The fate of every datagram the target sent back, in the order the
    /// relay received them.
    pub fn fates_down(&self) -> Vec<Fate> {
        self.down.fates.lock().unwrap().clone()
    }

    /// Whether every datagram received has been sent on (none waits for
    /// its delay).
    pub fn is_idle(&self) -> bool {
        [self.up(), self.down()]
            .iter()
            .all(|stats| stats.sent == stats.received - stats.dropped + stats.duplicated)
    }
}

impl Drop for UdpConditioner {
    fn drop(&mut self) {
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
        if std::thread::panicking() {
            eprintln!(
                "the UDP link conditioner ran with seed {} (TERNIO_SEED={} replays it); \
                 up {:?}, down {:?}",
                self.seed,
                self.seed,
                self.up(),
                self.down()
            );
        }
    }
}

/// What the relay's receiving task holds.
struct Relay {
    socket: Arc<UdpSocket>,
    seed: u64,
    up: Arc<Direction>,
    down: Arc<Direction>,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Relay {
    /// Reads what clients send; a new source address gets its upstream
    /// socket, and a task that carries the target's replies back.
    async fn run(self, target: SocketAddr) {
        let mut flows: HashMap<SocketAddr, (Arc<UdpSocket>, FlowEnd)> = HashMap::new();
        let mut buffer = vec![0u8; 65_536];
        loop {
            let Ok((len, from)) = self.socket.recv_from(&mut buffer).await else {
                continue;
            };
            if !flows.contains_key(&from) {
                let index = flows.len() as u64;
                let upstream = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
                let down = FlowEnd::new(index, self.flow_seed(index, 1));
                let back = tokio::spawn(carry_back(
                    Arc::clone(&upstream),
                    Arc::clone(&self.socket),
                    from,
                    down,
                    Arc::clone(&self.down),
                ));
                self.tasks.lock().unwrap().push(back);
                flows.insert(
                    from,
                    (upstream, FlowEnd::new(index, self.flow_seed(index, 0))),
                );
            }
            let (upstream, flow) = flows.get_mut(&from).expect("inserted");
            self.up.carry(flow, upstream, target, &buffer[..len]);
        }
    }

    /// The seed of flow `index`'s direction `direction` (0 up, 1 down).
    fn flow_seed(&self, index: u64, direction: u64) -> u64 {
        Rng::new(self.seed ^ (index * 2 + direction).wrapping_mul(0xD1B5_4A32_D192_ED03)).next_u64()
    }
}

/// Carries what the target sends to `upstream` back to `client`.
async fn carry_back(
    upstream: Arc<UdpSocket>,
    relay: Arc<UdpSocket>,
    client: SocketAddr,
    mut flow: FlowEnd,
    down: Arc<Direction>,
) {
    let mut buffer = vec![0u8; 65_536];
    loop {
        let Ok((len, _)) = upstream.recv_from(&mut buffer).await else {
            continue;
        };
        down.carry(&mut flow, &relay, client, &buffer[..len]);
    }
}
