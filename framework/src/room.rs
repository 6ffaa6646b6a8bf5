//! Rooms with a tick: a [`Simulation`] that members feed with inputs and
//! that sends them snapshots at a fixed rate.
//!
//! [`Room::start`] spawns the room's task on the current tokio runtime and
//! returns its handle. Each tick, in this order, the task:
//!
//! 1. applies the joins and leaves made since the last tick
//!    ([`Room::join`], [`Room::leave`]; and a member whose connection
//!    closed leaves: the task looks each member up in the hub, one lookup
//!    per member per tick), calling [`Simulation::join`] and
//!    [`Simulation::leave`];
//! 2. hands the inputs queued since the last tick ([`Room::input`]) to
//!    [`Simulation::tick`], in the order each member sent them;
//! 3. sends what the tick put in its [`Snapshots`]: one snapshot for every
//!    member ([`Snapshots::broadcast`], encoded once) and one per member
//!    ([`Snapshots::to`]).
//!
//! **Reliable or not.** A snapshot type declared `#[packet(unreliable)]`
//! ([`Packet::UNRELIABLE`]) goes to each member by datagram when its
//! connection has bound a datagram channel the server can reach
//! (docs/PROTOCOL.md section 4.4), on the stream otherwise; any other
//! snapshot type goes on the stream, in order with the connection's other
//! frames. A `droppable` one is dropped for a member whose outbox is full
//! (see [`SlowConsumerPolicy`](crate::SlowConsumerPolicy)).
//!
//! **Inputs are bounded.** At most [`RoomConfig::max_inputs`] (default 64)
//! wait for one member between two ticks; past that, [`Room::input`]
//! refuses the new one ([`InputError::Full`]) and counts it in
//! [`RoomStats::inputs_refused`]: a member that floods inputs costs the
//! room a fixed amount of memory, and the inputs it already queued keep
//! their order. Inputs the tick does not take are discarded after it.
//!
//! **The clock.** The task ticks on a [`tokio::time::interval`] of the
//! [`TickRate`]'s period with [`MissedTickBehavior::Skip`]: when the task
//! wakes up more than a period late (a tick that took too long, a busy
//! runtime), the missed ticks are not run back to back but skipped
//! ([`RoomStats::skipped`]), and the next tick is on the original grid.
//! (tokio skips only when the wake-up is over 5 ms late: at a period under
//! 5 ms, above 200 Hz, a wake-up late by less runs the ticks it missed
//! back to back.)
//! The tick number passed to the simulation counts the ticks run, so it
//! stays consecutive. A tick that starts more than a tenth of a period
//! after its scheduled instant is *late* ([`RoomStats::late_ticks`]); a
//! tick whose work (joins, simulation, sending) takes longer than a period
//! is an *overrun* ([`RoomStats::overruns`]).
//!
//! **Metrics.** Every room records through the [`metrics`](https://docs.rs/metrics)
//! facade, to whatever recorder is installed (none: nothing): the
//! `ternio_room_*` families of [`ternio::metrics`](crate::metrics). They
//! have no `room` label, since rooms may be many and short-lived: they add
//! up every room of the process; [`Room::stats`] has one room's figures.
//!
//! **Membership.** The room's members are a hub group named after the
//! room ([`Room::name`]); the room's broadcasts go to this node's members
//! of that group, so a connection another part of the application puts
//! in the group gets them too. A member is a connection of this node.
//!
//! **The end.** The task ends when [`Room::stop`] is called, the last
//! clone of the handle is dropped, or the simulation panics (logged); its
//! members then leave the group (without [`Simulation::leave`]: the
//! simulation is dropped with the task), and joins and inputs are refused.
//!
//! **Presence hooks.** [`Room::join`] and [`Room::leave`] change the hub
//! group outside the room's lock, so a presence hook
//! ([`ServerBuilder::on_presence`](crate::ServerBuilder::on_presence)) may
//! read the room or queue inputs; it must not call `join` or `leave` of
//! the same room (they wait for the change that runs the hook: spawn a
//! task for that). It does not end with the server: a server that shuts down
//! closes the members' connections, and the room ticks on, empty, until
//! it is stopped. Two rooms started with the same name share one hub
//! group, and each broadcasts to the other's members: give rooms distinct
//! names.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ternio_protocol::Packet;
use tokio::sync::Notify;
use tokio::time::{Instant, MissedTickBehavior};

use crate::hub::Hub;
use crate::ids::ConnectionId;
use crate::metrics::RoomMetrics;
use crate::outbox::{Delivery, PushError, Route};

/// What a room runs: its state, advanced one tick at a time.
///
/// The room's task owns it: `join`, `leave` and `tick` are never called
/// at once, and never while a handler waits.
pub trait Simulation: Send + 'static {
    /// What members send between ticks ([`Room::input`]).
    type Input: Send + 'static;
    /// What the tick sends to members.
    type Snapshot: Packet + Send;

    /// `member` joined; called before the first tick that sees its inputs.
    fn join(&mut self, member: ConnectionId) {
        let _ = member;
    }

    /// `member` left (by [`Room::leave`] or because its connection closed);
    /// called before the next tick.
    fn leave(&mut self, member: ConnectionId) {
        let _ = member;
    }

    /// Advances the simulation by one tick: `tick` counts from 1, one per
    /// tick run. Takes the inputs queued since the last tick from `inputs`
    /// and puts what to send in `out`.
    fn tick(
        &mut self,
        tick: u64,
        inputs: &mut Inputs<Self::Input>,
        out: &mut Snapshots<Self::Snapshot>,
    );
}

/// How often a room ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TickRate {
    period: Duration,
}

impl TickRate {
    /// `ticks` times a second (at least once a second, at most 1,000
    /// times).
    pub fn hz(ticks: u32) -> Self {
        Self::every(Duration::from_secs(1) / ticks.max(1))
    }

    /// Once every `period` (at least a millisecond, at most a day).
    pub fn every(period: Duration) -> Self {
        Self {
            period: period.clamp(Self::FASTEST, Self::SLOWEST),
        }
    }

    /// The shortest period.
    const FASTEST: Duration = Duration::from_millis(1);
    /// The longest period.
    const SLOWEST: Duration = Duration::from_secs(24 * 60 * 60);

    /// The time between two ticks.
    pub fn period(&self) -> Duration {
        self.period
    }
}

/// A room's options beyond its rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoomConfig {
    /// How many inputs may wait for one member between two ticks (at
    /// least 1). Default 64.
    pub max_inputs: usize,
}

impl Default for RoomConfig {
    fn default() -> Self {
        Self { max_inputs: 64 }
    }
}

/// Why [`Room::input`] refused an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// The connection is not a member of the room.
    #[error("not a member of the room")]
    NotMember,
    /// The member already has [`RoomConfig::max_inputs`] inputs waiting
    /// for the next tick; this one was not queued.
    #[error("too many inputs before the next tick")]
    Full,
    /// The room has stopped.
    #[error("the room has stopped")]
    Stopped,
}

/// The inputs queued since the last tick, by member, as the tick sees them.
pub struct Inputs<I> {
    queues: HashMap<ConnectionId, VecDeque<I>>,
}

impl<I> fmt::Debug for Inputs<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inputs")
            .field("members", &self.queues.len())
            .field("inputs", &self.len())
            .finish()
    }
}

impl<I> Inputs<I> {
    /// The members with inputs waiting (in no particular order).
    pub fn members(&self) -> impl Iterator<Item = ConnectionId> + '_ {
        self.queues
            .iter()
            .filter(|(_, queue)| !queue.is_empty())
            .map(|(member, _)| *member)
    }

    /// Takes `member`'s inputs, in the order it sent them.
    pub fn take(&mut self, member: ConnectionId) -> impl Iterator<Item = I> + '_ {
        self.queues
            .get_mut(&member)
            .into_iter()
            .flat_map(|queue| queue.drain(..))
    }

    /// Takes every member's inputs: each member's in the order it sent
    /// them, the members in no particular order.
    pub fn take_all(&mut self) -> impl Iterator<Item = (ConnectionId, I)> + '_ {
        self.queues
            .iter_mut()
            .flat_map(|(member, queue)| queue.drain(..).map(|input| (*member, input)))
    }

    /// How many inputs wait, all members together.
    pub fn len(&self) -> usize {
        self.queues.values().map(VecDeque::len).sum()
    }

    /// Whether no input waits.
    pub fn is_empty(&self) -> bool {
        self.queues.values().all(VecDeque::is_empty)
    }
}

/// What one tick sends: one snapshot for every member, one per member, or
/// both.
pub struct Snapshots<S> {
    all: Option<S>,
    each: Vec<(ConnectionId, S)>,
}

impl<S> fmt::Debug for Snapshots<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshots")
            .field("broadcast", &self.all.is_some())
            .field("per_member", &self.each.len())
            .finish()
    }
}

impl<S> Snapshots<S> {
    /// Sends `snapshot` to every member (encoded once). A second call in
    /// the same tick replaces the first.
    pub fn broadcast(&mut self, snapshot: S) {
        self.all = Some(snapshot);
    }

    /// Sends `snapshot` to `member` alone. Ignored (counted as failed) if
    /// `member` is not a member.
    pub fn to(&mut self, member: ConnectionId, snapshot: S) {
        self.each.push((member, snapshot));
    }
}

/// A room's figures since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RoomStats {
    /// Ticks run.
    pub ticks: u64,
    /// Ticks not run because the task woke up more than a period late.
    pub skipped: u64,
    /// Ticks that started more than a tenth of a period late.
    pub late_ticks: u64,
    /// Ticks whose work took longer than a period.
    pub overruns: u64,
    /// Inputs queued.
    pub inputs: u64,
    /// Inputs refused because the member's queue was full.
    pub inputs_refused: u64,
    /// Snapshots that members' connections took (one per member reached).
    pub snapshots_sent: u64,
    /// Of the snapshots sent, those that went in a datagram (handed to the
    /// UDP socket: a datagram may still be lost on the way).
    pub snapshots_by_datagram: u64,
    /// Snapshots dropped for members that were behind (droppable ones).
    pub snapshots_dropped: u64,
    /// Snapshots that found no member, a closing connection, or were too
    /// large (a broadcast too large counts once, not once per member).
    pub snapshots_failed: u64,
    /// Members now.
    pub members: u64,
}

/// The state the handle and the task share.
struct Shared<I> {
    name: Box<str>,
    hub: Hub,
    max_inputs: usize,
    state: Mutex<Pending<I>>,
    /// Held by `join` and `leave` across their hub change and the room's
    /// own, so that two of them cannot interleave (the state lock is not
    /// held across the hub, whose presence hook may read the room).
    membership: Mutex<()>,
    stop: Notify,
    stopped: AtomicBool,
    running: AtomicBool,
    counters: Counters,
    metrics: RoomMetrics,
}

/// What waits for the next tick.
struct Pending<I> {
    /// Each member's queued inputs; a connection is a member while it has
    /// an entry.
    members: HashMap<ConnectionId, VecDeque<I>>,
    /// Joins (`true`) and leaves (`false`) the simulation has not seen yet:
    /// at most one per connection (a leave cancels a pending join, and a
    /// join a pending leave), in the order they were made.
    changes: Vec<(ConnectionId, bool)>,
}

#[derive(Default)]
struct Counters {
    ticks: AtomicU64,
    skipped: AtomicU64,
    late: AtomicU64,
    overruns: AtomicU64,
    inputs: AtomicU64,
    refused: AtomicU64,
    sent: AtomicU64,
    datagrams: AtomicU64,
    dropped: AtomicU64,
    failed: AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl<I> Shared<I> {
    fn change(&self, pending: &mut Pending<I>, member: ConnectionId, joined: bool) {
        match pending.changes.iter().position(|(id, _)| *id == member) {
            Some(at) => {
                pending.changes.remove(at);
            }
            None => pending.changes.push((member, joined)),
        }
    }
}

/// The handle to a running room. Cheap to clone; the room stops when
/// [`stop`](Self::stop) is called or its last clone is dropped.
pub struct Room<I: Send + 'static> {
    inner: Arc<Handle<I>>,
}

/// The handles' common part: stops the room when the last one goes.
struct Handle<I> {
    shared: Arc<Shared<I>>,
}

impl<I> Drop for Handle<I> {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::Release);
        self.shared.stop.notify_one();
    }
}

impl<I: Send + 'static> Clone for Room<I> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<I: Send + 'static> fmt::Debug for Room<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Room")
            .field("name", &self.name())
            .field("members", &self.len())
            .finish()
    }
}

impl<I: Send + 'static> Room<I> {
    /// Starts a room named `name` (its hub group) that runs `simulation`
    /// at `rate`, with the default [`RoomConfig`]. Spawns its task on the
    /// current tokio runtime (panics outside one).
    pub fn start<S>(hub: Hub, name: &str, rate: TickRate, simulation: S) -> Self
    where
        S: Simulation<Input = I>,
    {
        Self::start_with(hub, name, rate, RoomConfig::default(), simulation)
    }

    /// [`start`](Self::start) with `config`.
    pub fn start_with<S>(
        hub: Hub,
        name: &str,
        rate: TickRate,
        config: RoomConfig,
        simulation: S,
    ) -> Self
    where
        S: Simulation<Input = I>,
    {
        let shared = Arc::new(Shared {
            name: name.into(),
            hub,
            max_inputs: config.max_inputs.max(1),
            state: Mutex::new(Pending {
                members: HashMap::new(),
                changes: Vec::new(),
            }),
            membership: Mutex::new(()),
            stop: Notify::new(),
            stopped: AtomicBool::new(false),
            running: AtomicBool::new(true),
            counters: Counters::default(),
            metrics: RoomMetrics::new(),
        });
        tokio::spawn(run(Arc::clone(&shared), rate.period(), simulation));
        Self {
            inner: Arc::new(Handle { shared }),
        }
    }

    fn shared(&self) -> &Shared<I> {
        &self.inner.shared
    }

    /// The room's name, which is its hub group's.
    pub fn name(&self) -> &str {
        &self.shared().name
    }

    /// Makes the connection `member` a member: it joins the hub group now,
    /// its inputs are taken from now on, and the simulation hears of it
    /// before the next tick. Returns false when it was a member already,
    /// when no such connection is open on this node, or when the room has
    /// stopped.
    pub fn join(&self, member: ConnectionId) -> bool {
        let shared = self.shared();
        let _membership = lock(&shared.membership);
        if shared.stopped.load(Ordering::Acquire) || self.contains(member) {
            return false;
        }
        // The hub (and its presence hook) outside the state lock.
        if !shared.hub.join(&shared.name, member) {
            return false;
        }
        let mut pending = lock(&shared.state);
        // The task sets `stopped` under this lock before it lets the
        // members go: a join that sees it clear is let go by the task.
        if shared.stopped.load(Ordering::Acquire) {
            drop(pending);
            shared.hub.leave(&shared.name, member);
            return false;
        }
        pending.members.insert(member, VecDeque::new());
        shared.change(&mut pending, member, true);
        true
    }

    /// Takes `member` out of the room: out of the hub group now, its
    /// waiting inputs discarded, the simulation told before the next tick.
    /// Returns whether it was a member. A member whose connection closes
    /// leaves by itself at the next tick.
    pub fn leave(&self, member: ConnectionId) -> bool {
        let shared = self.shared();
        let _membership = lock(&shared.membership);
        {
            let mut pending = lock(&shared.state);
            if pending.members.remove(&member).is_none() {
                return false;
            }
            shared.change(&mut pending, member, false);
        }
        shared.hub.leave(&shared.name, member);
        true
    }

    /// Whether `member` is a member.
    pub fn contains(&self, member: ConnectionId) -> bool {
        lock(&self.shared().state).members.contains_key(&member)
    }

    /// The members, in no particular order.
    pub fn members(&self) -> Vec<ConnectionId> {
        lock(&self.shared().state).members.keys().copied().collect()
    }

    /// How many members.
    pub fn len(&self) -> usize {
        lock(&self.shared().state).members.len()
    }

    /// Whether the room has no member.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Queues `input` from `member` for the next tick. Refused when the
    /// member already has [`RoomConfig::max_inputs`] waiting
    /// ([`InputError::Full`], counted in [`RoomStats::inputs_refused`]).
    pub fn input(&self, member: ConnectionId, input: I) -> Result<(), InputError> {
        let shared = self.shared();
        if shared.stopped.load(Ordering::Acquire) {
            return Err(InputError::Stopped);
        }
        let mut pending = lock(&shared.state);
        let queue = pending
            .members
            .get_mut(&member)
            .ok_or(InputError::NotMember)?;
        if queue.len() >= shared.max_inputs {
            drop(pending);
            shared.counters.refused.fetch_add(1, Ordering::Relaxed);
            shared.metrics.inputs_refused.increment(1);
            return Err(InputError::Full);
        }
        queue.push_back(input);
        drop(pending);
        shared.counters.inputs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The room's figures so far.
    pub fn stats(&self) -> RoomStats {
        let shared = self.shared();
        let counters = &shared.counters;
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        RoomStats {
            ticks: get(&counters.ticks),
            skipped: get(&counters.skipped),
            late_ticks: get(&counters.late),
            overruns: get(&counters.overruns),
            inputs: get(&counters.inputs),
            inputs_refused: get(&counters.refused),
            snapshots_sent: get(&counters.sent),
            snapshots_by_datagram: get(&counters.datagrams),
            snapshots_dropped: get(&counters.dropped),
            snapshots_failed: get(&counters.failed),
            members: self.len() as u64,
        }
    }

    /// Stops the room: no tick starts after this one returns (one running
    /// finishes), inputs and joins are refused, the task ends.
    pub fn stop(&self) {
        let shared = self.shared();
        shared.stopped.store(true, Ordering::Release);
        shared.stop.notify_one();
    }

    /// Whether the room's task is still running (false shortly after
    /// [`stop`](Self::stop)).
    pub fn is_running(&self) -> bool {
        self.shared().running.load(Ordering::Acquire)
    }
}

/// The room's task.
async fn run<S: Simulation>(shared: Arc<Shared<S::Input>>, period: Duration, mut simulation: S) {
    let metrics = &shared.metrics;
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let late_after = period / 10;
    let mut inputs = Inputs {
        queues: HashMap::new(),
    };
    let mut out = Snapshots {
        all: None,
        each: Vec::new(),
    };
    let mut changes = Vec::new();
    let mut closed = Vec::new();
    let mut previous: Option<Instant> = None;
    let mut tick = 0u64;
    loop {
        let scheduled = tokio::select! {
            scheduled = interval.tick() => scheduled,
            () = shared.stop.notified() => break,
        };
        if shared.stopped.load(Ordering::Acquire) {
            break;
        }
        let started = Instant::now();
        if let Some(previous) = previous {
            let periods = (scheduled - previous).as_secs_f64() / period.as_secs_f64();
            let skipped = (periods.round() as u64).saturating_sub(1);
            if skipped > 0 {
                shared
                    .counters
                    .skipped
                    .fetch_add(skipped, Ordering::Relaxed);
                metrics.skipped.increment(skipped);
            }
        }
        previous = Some(scheduled);
        let lateness = started.saturating_duration_since(scheduled);
        if lateness > late_after {
            shared.counters.late.fetch_add(1, Ordering::Relaxed);
            metrics.late.increment(1);
        }

        // Joins, leaves and inputs since the last tick, under the lock;
        // closed connections leave.
        {
            let mut pending = lock(&shared.state);
            changes.append(&mut pending.changes);
            for (member, queue) in &mut pending.members {
                if shared.hub.connection(*member).is_none() {
                    closed.push(*member);
                    continue;
                }
                if !queue.is_empty() {
                    inputs.queues.entry(*member).or_default().append(queue);
                }
            }
            for member in &closed {
                pending.members.remove(member);
                shared.change(&mut pending, *member, false);
            }
            changes.append(&mut pending.changes);
        }
        for member in closed.drain(..) {
            shared.hub.leave(&shared.name, member);
        }
        tick += 1;
        // The application's code: a panic in it stops the room cleanly
        // (below) instead of killing the task with its members kept.
        let stepped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for (member, joined) in changes.drain(..) {
                if joined {
                    simulation.join(member);
                } else {
                    simulation.leave(member);
                }
            }
            simulation.tick(tick, &mut inputs, &mut out);
        }));
        if stepped.is_err() {
            tracing::error!(room = %shared.name, tick, "the room's simulation panicked: the room stops");
            break;
        }
        // What the tick did not take is discarded; the queues of members
        // gone are freed.
        inputs.queues.clear();

        let mut delivery = Delivery::default();
        if let Some(snapshot) = out.all.take() {
            match shared.hub.broadcast_group_local(&shared.name, &snapshot) {
                Ok(reached) => {
                    delivery.queued += reached.queued;
                    delivery.dropped += reached.dropped;
                    delivery.failed += reached.failed;
                    delivery.datagrams += reached.datagrams;
                }
                Err(_) => delivery.failed += 1,
            }
        }
        for (member, snapshot) in out.each.drain(..) {
            let pushed = match shared.hub.connection(member) {
                Some(_) if !lock(&shared.state).members.contains_key(&member) => {
                    Err(PushError::Closed)
                }
                Some(connection) if S::Snapshot::UNRELIABLE => {
                    connection.send_unreliable(&snapshot).map(|route| {
                        if route == Route::Datagram {
                            delivery.datagrams += 1;
                        }
                    })
                }
                Some(connection) => connection.push(&snapshot),
                None => Err(PushError::Closed),
            };
            delivery.count(pushed);
        }
        let counters = &shared.counters;
        counters
            .sent
            .fetch_add(delivery.queued as u64, Ordering::Relaxed);
        counters
            .datagrams
            .fetch_add(delivery.datagrams as u64, Ordering::Relaxed);
        counters
            .dropped
            .fetch_add(delivery.dropped as u64, Ordering::Relaxed);
        counters
            .failed
            .fetch_add(delivery.failed as u64, Ordering::Relaxed);
        metrics.snapshots.increment(delivery.queued as u64);

        let took = started.elapsed();
        counters.ticks.fetch_add(1, Ordering::Relaxed);
        metrics.ticks.increment(1);
        metrics.duration.record(took.as_secs_f64());
        if took > period {
            counters.overruns.fetch_add(1, Ordering::Relaxed);
            metrics.overruns.increment(1);
        }
    }
    // No join or input from now on (set under the lock: see `join`); the
    // members leave the group; the simulation is dropped here.
    let members: Vec<ConnectionId> = {
        let mut pending = lock(&shared.state);
        shared.stopped.store(true, Ordering::Release);
        pending.changes.clear();
        pending.members.drain().map(|(id, _)| id).collect()
    };
    for member in members {
        shared.hub.leave(&shared.name, member);
    }
    shared.running.store(false, Ordering::Release);
}
