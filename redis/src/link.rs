//! The link task: one per backplane. It connects to Redis, writes the
//! node's memberships, users and names, subscribes, registers the node,
//! then runs three loops side by side until the link fails: the publisher
//! (queued messages out, pipelined), the subscriber (messages in, delivered
//! to the local hub; presence notices marked in the mirror) and the control
//! loop (heartbeats, dead nodes, membership, user, name and subscription
//! changes, stale views read again). When the link fails it reports it,
//! drops what was queued, and reconnects with backoff; a new link writes,
//! subscribes and reads everything again.
//!
//! The publisher stamps and seals every envelope; the subscriber opens
//! each message (size, MAC, form) and checks its stamp before delivering
//! it. Both the stamper and the replay guard outlive the links: a
//! reconnection neither restarts the sequence nor forgets what was seen.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use redis::aio::MultiplexedConnection;
use redis::{RedisError, Value};
use ternio::PresenceEvent;
use ternio::backplane::BackplaneMessage;
use tokio::sync::{mpsc, watch};
use tokio::time::MissedTickBehavior;

use crate::backlog::{Backlog, Incoming, backlog};
use crate::backplane::{self, Shared, lock};
use crate::counters::Rejection;
use crate::envelope::{self, Envelope, Message};
use crate::presence::VERSION_FIELD;
use crate::replay::{self, MAX_PUBLISHERS, ReplayGuard, Stamper};

/// Messages taken off the queue for one pipelined write.
const BATCH: usize = 512;

/// Why a link ended.
#[derive(Debug, thiserror::Error)]
enum LinkError {
    #[error("redis: {0}")]
    Redis(#[from] RedisError),
    #[error("redis did not answer in time")]
    Timeout,
    #[error("the subscription connection closed")]
    SubscriptionClosed,
    #[error(
        "messages from redis came faster than this node delivered them: more than {limit} bytes waited"
    )]
    Backlog { limit: usize },
    #[error("unexpected reply: {0}")]
    Reply(String),
}

/// How a link ended.
enum End {
    /// Shutdown asked for (or the server is gone): leave the cluster.
    Shutdown,
    /// The link failed: reconnect.
    Lost(LinkError),
}

/// Runs the link until the backplane shuts down.
pub(crate) async fn run(shared: Arc<Shared>, mut queue: mpsc::Receiver<BackplaneMessage>) {
    let mut shutdown = shared.shutdown.subscribe();
    let mut delay = shared.config.reconnect_delay;
    let mut ever_connected = false;
    let mut failed_attempts: u64 = 0;
    let mut stamper = Stamper::new(shared.node);
    // Presence notices go out with the membership writes, on the command
    // connection: a publisher of their own, with its own sequence.
    let mut presence_stamper = Stamper::new(shared.node);
    let mut guard = ReplayGuard::new(shared.config.max_message_age, MAX_PUBLISHERS);
    loop {
        if *shutdown.borrow() {
            return;
        }
        match connect(&shared).await {
            Ok(link) => {
                delay = shared.config.reconnect_delay;
                failed_attempts = 0;
                let state = LinkState {
                    queue: &mut queue,
                    shutdown: &mut shutdown,
                    ever_connected: &mut ever_connected,
                    stamper: &mut stamper,
                    presence_stamper: &mut presence_stamper,
                    guard: &mut guard,
                };
                match serve(&shared, link, state).await {
                    End::Shutdown => return,
                    End::Lost(error) => {
                        lost(&shared, &mut queue);
                        tracing::warn!(node = shared.node, %error, "backplane: lost the link to redis; serving local traffic only, reconnecting");
                    }
                }
            }
            Err(error) => {
                failed_attempts += 1;
                if failed_attempts == 1 {
                    tracing::warn!(node = shared.node, %error, "backplane: cannot reach redis; retrying");
                } else {
                    tracing::debug!(node = shared.node, %error, attempt = failed_attempts, "backplane: redis still unreachable");
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            _ = shutdown.changed() => return,
        }
        delay = (delay * 2).min(shared.config.max_reconnect_delay);
    }
}

/// What outlives one link, lent to it.
struct LinkState<'a> {
    queue: &'a mut mpsc::Receiver<BackplaneMessage>,
    shutdown: &'a mut watch::Receiver<bool>,
    ever_connected: &'a mut bool,
    stamper: &'a mut Stamper,
    presence_stamper: &'a mut Stamper,
    guard: &'a mut ReplayGuard,
}

/// The connections of one link.
struct Link {
    commands: MultiplexedConnection,
    /// The subscription's connection (RESP3): its commands subscribe and
    /// unsubscribe; its messages come through `backlog`.
    subscription: MultiplexedConnection,
    backlog: Backlog,
}

async fn connect(shared: &Shared) -> Result<Link, LinkError> {
    let commands = within(
        shared,
        shared
            .client
            .get_multiplexed_async_connection_with_config(&shared.connection_config()),
    )
    .await?;
    let (pushes, backlog) = backlog(
        shared.config.subscription_backlog,
        shared.config.max_envelope_size,
    );
    let subscription = within(
        shared,
        shared
            .subscriber
            .get_multiplexed_async_connection_with_config(
                &shared.connection_config().set_push_sender(pushes),
            ),
    )
    .await?;
    Ok(Link {
        commands,
        subscription,
        backlog,
    })
}

/// Subscribes, writes every membership, user and name, registers the node
/// (after its memberships, so that a node seen alive has them), then serves
/// until the link fails or the backplane shuts down.
async fn serve(shared: &Arc<Shared>, link: Link, state: LinkState<'_>) -> End {
    let LinkState {
        queue,
        shutdown,
        ever_connected,
        stamper,
        presence_stamper,
        guard,
    } = state;
    let Link {
        mut commands,
        mut subscription,
        backlog,
    } = link;
    let mut subscribed = HashSet::new();
    let setup = async {
        let fixed = [
            shared.keys.everyone_channel(),
            shared.keys.node_channel(shared.node),
        ];
        within(shared, subscription.subscribe(&fixed)).await?;
        shared.mark_all_dirty();
        sync(
            shared,
            &mut commands,
            &mut subscription,
            &mut subscribed,
            presence_stamper,
        )
        .await?;
        claim_names_again(shared, &mut commands).await?;
        heartbeat(shared, &mut commands, &subscribed).await
    };
    if let Err(error) = setup.await {
        return End::Lost(error);
    }
    *lock(&shared.commands) = Some(commands.clone());
    shared.counters.connected(*ever_connected);
    if *ever_connected {
        tracing::info!(
            node = shared.node,
            "backplane: reconnected to redis; memberships and subscriptions restored"
        );
    } else {
        tracing::debug!(node = shared.node, "backplane: connected to redis");
    }
    *ever_connected = true;

    let control_state = Control {
        commands: commands.clone(),
        subscription: &mut subscription,
        subscribed: &mut subscribed,
        stamper: presence_stamper,
        connected_at: Instant::now(),
    };
    let result = tokio::select! {
        result = publisher(shared, queue, commands.clone(), stamper) => result,
        result = subscriber(shared, backlog, guard) => result,
        result = control(shared, control_state) => result,
        _ = shutdown.changed() => Ok(()),
    };
    match result {
        Ok(()) => {
            leave(shared, &mut commands, &subscribed).await;
            End::Shutdown
        }
        Err(error) => End::Lost(error),
    }
}

/// Marks the link down, and drops what waited to be published.
fn lost(shared: &Shared, queue: &mut mpsc::Receiver<BackplaneMessage>) {
    shared.counters.disconnected(true);
    *lock(&shared.commands) = None;
    let mut dropped = 0;
    while queue.try_recv().is_ok() {
        dropped += 1;
    }
    shared.counters.dropped(dropped);
}

/// Publishes what the hub queued, many messages per write, each stamped
/// and sealed for its channel.
async fn publisher(
    shared: &Shared,
    queue: &mut mpsc::Receiver<BackplaneMessage>,
    mut commands: MultiplexedConnection,
    stamper: &mut Stamper,
) -> Result<(), LinkError> {
    let mut batch = Vec::with_capacity(BATCH);
    let mut merged = Vec::with_capacity(BATCH);
    let limits = MergeLimits {
        envelope: shared.config.max_envelope_size,
        frames: if shared.config.merge_broadcasts {
            MERGED_BYTES
        } else {
            0
        },
    };
    loop {
        if queue.recv_many(&mut batch, BATCH).await == 0 {
            // Every sender is gone: nothing will be published again.
            return std::future::pending().await;
        }
        let mut pipe = redis::pipe();
        let now = replay::now_micros();
        let count = batch.len() as u64;
        merge_runs(batch.drain(..), limits, &mut merged);
        for message in merged.drain(..) {
            let channel = match &message {
                Message::Hub(BackplaneMessage::Group { group, .. })
                | Message::GroupFrames { group, .. } => shared.keys.group_channel(group),
                // Every node may have connections of the user.
                Message::Hub(
                    BackplaneMessage::Everyone { .. }
                    | BackplaneMessage::User { .. }
                    | BackplaneMessage::KickUser { .. },
                ) => shared.keys.everyone_channel(),
                Message::Hub(
                    BackplaneMessage::Connection { id, .. } | BackplaneMessage::Kick { id, .. },
                ) => shared.keys.node_channel(id.node()),
                Message::Presence { .. } => {
                    unreachable!("presence notices leave through the control task")
                }
            };
            let envelope = shared
                .key
                .seal(channel.as_bytes(), stamper.next(now), &message);
            pipe.cmd("PUBLISH").arg(channel).arg(envelope).ignore();
        }
        if let Err(error) = within(shared, pipe.exec_async(&mut commands)).await {
            shared.counters.dropped(count);
            return Err(error);
        }
        shared.counters.published(count);
    }
}

/// What a run of group broadcasts merged into one envelope may carry, in
/// frames' bytes with their lengths (the envelope itself stays within the
/// configured limit too).
const MERGED_BYTES: usize = 64 * 1024;

/// How large a merged envelope may grow.
#[derive(Debug, Clone, Copy)]
struct MergeLimits {
    /// The whole envelope, as sealed: [`RedisConfig::max_envelope_size`].
    ///
    /// [`RedisConfig::max_envelope_size`]: crate::RedisConfig::max_envelope_size
    envelope: usize,
    /// Its frames with their lengths: [`MERGED_BYTES`].
    frames: usize,
}

/// Appends to `merged` the envelopes for `messages`, in their order: each
/// run of consecutive group broadcasts to one group with one droppable flag
/// becomes one [`Message::GroupFrames`] (cut where it would pass `limits`);
/// every other message, and a run of one, goes as it is. Only consecutive
/// messages merge, so that what a member of several groups receives keeps
/// the order in which the hub sent it.
fn merge_runs(
    messages: impl Iterator<Item = BackplaneMessage>,
    limits: MergeLimits,
    merged: &mut Vec<Message>,
) {
    let mut run: Option<Run> = None;
    for message in messages {
        match message {
            BackplaneMessage::Group {
                group,
                frame,
                droppable,
            } => {
                if let Some(current) = &mut run
                    && current.takes(&group, droppable, frame.len(), limits)
                {
                    current.bytes += 4 + frame.len();
                    current.rest.push(frame);
                    continue;
                }
                let next = Run {
                    bytes: 4 + frame.len(),
                    group,
                    first: frame,
                    rest: Vec::new(),
                    droppable,
                };
                merged.extend(run.replace(next).map(Run::into_message));
            }
            other => {
                merged.extend(run.take().map(Run::into_message));
                merged.push(Message::Hub(other));
            }
        }
    }
    merged.extend(run.map(Run::into_message));
}

/// Consecutive group broadcasts that go in one envelope.
struct Run {
    group: Arc<str>,
    first: Bytes,
    /// The frames after the first (no allocation for a run of one).
    rest: Vec<Bytes>,
    droppable: bool,
    /// The frames' bytes with their lengths.
    bytes: usize,
}

impl Run {
    /// Whether a broadcast to `group` of `len` bytes joins this run: same
    /// group and flag, and the merged envelope, sealed, within `limits`.
    fn takes(&self, group: &str, droppable: bool, len: usize, limits: MergeLimits) -> bool {
        let frames = self.bytes + 4 + len;
        let envelope = envelope::OVERHEAD + 2 + self.group.len() + frames;
        *self.group == *group
            && self.droppable == droppable
            && frames <= limits.frames
            && envelope <= limits.envelope
    }

    /// A run of one goes as the broadcast it is; a longer one as group frames.
    fn into_message(self) -> Message {
        if self.rest.is_empty() {
            return Message::Hub(BackplaneMessage::Group {
                group: self.group,
                frame: self.first,
                droppable: self.droppable,
            });
        }
        let mut frames = Vec::with_capacity(1 + self.rest.len());
        frames.push(self.first);
        frames.extend(self.rest);
        Message::GroupFrames {
            group: self.group,
            frames,
            droppable: self.droppable,
        }
    }
}

/// Delivers what other nodes published to this node's connections: only
/// authentic envelopes within the size limit, not seen before. Ends the
/// link when the subscription's connection closes, or when messages came
/// faster than it delivered them (`crate::backlog`).
async fn subscriber(
    shared: &Shared,
    mut backlog: Backlog,
    guard: &mut ReplayGuard,
) -> Result<(), LinkError> {
    let mut refused = 0u64;
    while let Some(incoming) = backlog.next().await {
        let (channel, result) = match incoming {
            Incoming::Message { channel, payload } => {
                let result = open(shared, guard, &channel, &payload);
                (channel, result)
            }
            Incoming::Oversized { channel, len } => {
                let max = shared.config.max_envelope_size;
                let error = format!("{len} bytes, larger than max_envelope_size ({max})");
                (channel, Err((Rejection::Oversized, error)))
            }
            Incoming::Other => continue,
            Incoming::Closed => break,
            Incoming::Overflowed { limit } => {
                tracing::warn!(
                    node = shared.node,
                    limit,
                    "backplane: messages from redis came faster than they were delivered; reconnecting"
                );
                return Err(LinkError::Backlog { limit });
            }
        };
        match result {
            Ok(None) => {}
            Ok(Some(envelope)) => match envelope.message {
                Message::Hub(message) => {
                    shared.counters.received(1);
                    if let Some(hub) = shared.hub.get() {
                        hub.deliver(&message);
                    }
                }
                Message::GroupFrames {
                    group,
                    frames,
                    droppable,
                } => {
                    shared.counters.received(frames.len() as u64);
                    if let Some(hub) = shared.hub.get() {
                        hub.deliver_group_frames(&group, &frames, droppable);
                    }
                }
                Message::Presence { group, version } => {
                    shared.counters.received(1);
                    let origin = envelope.stamp.origin;
                    if lock(&shared.mirror).notice(&group, origin, version) {
                        shared.presence_signal.notify_one();
                    }
                }
            },
            Err((rejection, error)) => {
                shared.counters.rejected(rejection);
                refused += 1;
                if refused.is_power_of_two() {
                    let channel = String::from_utf8_lossy(&channel);
                    tracing::warn!(node = shared.node, %channel, reason = rejection.as_str(), %error, count = refused, "backplane: dropped a message from redis");
                }
            }
        }
    }
    Err(LinkError::SubscriptionClosed)
}

/// Opens a message from Redis: its envelope, unless it is this node's own
/// (`None`) or refused (forged, replayed, stale...).
fn open(
    shared: &Shared,
    guard: &mut ReplayGuard,
    channel: &[u8],
    payload: &[u8],
) -> Result<Option<Envelope>, (Rejection, String)> {
    let envelope = shared
        .key
        .open(channel, payload, shared.config.max_envelope_size)
        .map_err(|error| (error.rejection(), error.to_string()))?;
    // This node delivered its own messages already.
    if envelope.stamp.origin == shared.node {
        return Ok(None);
    }
    guard
        .check(envelope.stamp, replay::now_micros())
        .map(|()| Some(envelope))
        .map_err(|rejection| (rejection, rejection.as_str().to_owned()))
}

/// What the control loop works with, for one link.
struct Control<'a> {
    commands: MultiplexedConnection,
    subscription: &'a mut MultiplexedConnection,
    subscribed: &'a mut HashSet<String>,
    stamper: &'a mut Stamper,
    /// When this link came up: dead nodes are only declared a whole node
    /// TTL later.
    connected_at: Instant,
}

/// Heartbeats and dead nodes, membership, user, name and subscription
/// changes as they come, and stale views read again. Ends when the server
/// behind the hub is gone.
async fn control(shared: &Shared, state: Control<'_>) -> Result<(), LinkError> {
    let Control {
        mut commands,
        subscription,
        subscribed,
        stamper,
        connected_at,
    } = state;
    let mut ticker = tokio::time::interval(shared.config.heartbeat_interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                if shared.hub.get().is_some_and(|hub| !hub.is_alive()) {
                    return Ok(());
                }
                heartbeat(shared, &mut commands, subscribed).await?;
                // Nothing else is sent on the subscription's connection:
                // a socket gone silently would leave the node deaf.
                within(shared, redis::cmd("PING").exec_async(subscription)).await?;
                if connected_at.elapsed() >= shared.config.node_ttl {
                    drop_dead_nodes(shared, &mut commands).await?;
                }
            }
            () = shared.dirty_signal.notified() => {
                sync(shared, &mut commands, subscription, subscribed, stamper).await?;
            }
            () = shared.presence_signal.notified() => {
                refresh_stale(shared, &mut commands).await?;
            }
        }
    }
}

/// Tells the local hub of presence changes on other nodes.
fn report(shared: &Shared, events: Vec<PresenceEvent>) {
    if let Some(hub) = shared.hub.get() {
        for event in events {
            hub.presence_event(event);
        }
    }
}

/// Reads again the views that presence notices said are behind.
async fn refresh_stale(
    shared: &Shared,
    commands: &mut MultiplexedConnection,
) -> Result<(), LinkError> {
    // A process change found on the way marks more views stale: those
    // are read in the next round.
    loop {
        let stale = lock(&shared.mirror).take_stale();
        if stale.is_empty() {
            return Ok(());
        }
        for (group, node) in stale {
            let read = within(
                shared,
                backplane::read_owned_views(shared, commands, &group, &[node]),
            )
            .await;
            let views = match read {
                Ok(views) => views,
                Err(error) => {
                    // Read again on the next link (every view is).
                    return Err(error);
                }
            };
            for (node, token, view) in views {
                let events = {
                    let mut mirror = lock(&shared.mirror);
                    let mut events = mirror.owned_by(node, token.as_deref());
                    events.extend(mirror.apply(&group, node, view, false));
                    events
                };
                report(shared, events);
            }
        }
    }
}

/// Reads the other nodes' views of `group`, which this node just
/// subscribed to (again): quietly for a group it did not follow, with the
/// differences reported for one it did (after a lost link). The nodes read
/// are the live ones and those the mirror has a view of: a node that is
/// not (or not yet) alive and whose key is gone keeps its view, until it
/// comes back or its death is declared.
async fn read_group(
    shared: &Shared,
    commands: &mut MultiplexedConnection,
    group: &str,
) -> Result<(), LinkError> {
    let (quietly, known) = {
        let mut mirror = lock(&shared.mirror);
        (mirror.track(group), mirror.nodes_of(group))
    };
    let alive: HashSet<u16> = backplane::other_live_nodes(shared, commands)
        .await
        .map_err(|error| LinkError::Reply(error.to_string()))?
        .into_iter()
        .collect();
    let mut nodes: Vec<u16> = alive.union(&known).copied().collect();
    nodes.sort_unstable();
    let views = within(
        shared,
        backplane::read_owned_views(shared, commands, group, &nodes),
    )
    .await?;
    let mut events = Vec::new();
    let mut replaced = false;
    {
        let mut mirror = lock(&shared.mirror);
        for (node, token, view) in views {
            if view.version.is_none() && !alive.contains(&node) {
                continue;
            }
            let lost = mirror.owned_by(node, token.as_deref());
            replaced |= !lost.is_empty();
            events.extend(lost);
            events.extend(mirror.apply(group, node, view, quietly));
        }
        mirror.mark_loaded(group);
    }
    if replaced {
        // The new processes' views of the other groups.
        shared.presence_signal.notify_one();
    }
    shared.presence_loaded.notify_waiters();
    report(shared, events);
    Ok(())
}

/// Drops the nodes whose liveness key expired from the mirror: their
/// members are lost.
async fn drop_dead_nodes(
    shared: &Shared,
    commands: &mut MultiplexedConnection,
) -> Result<(), LinkError> {
    // Notices younger than a node's time to live stand (see `drop_node`
    // and `expire_notices`).
    let since = replay::now_micros().saturating_sub(shared.ttl_ms().saturating_mul(1000));
    let known = {
        let mut mirror = lock(&shared.mirror);
        mirror.expire_notices(since);
        mirror.nodes()
    };
    if known.is_empty() {
        return Ok(());
    }
    let alive: HashSet<u16> = backplane::other_live_nodes(shared, commands)
        .await
        .map_err(|error| LinkError::Reply(error.to_string()))?
        .into_iter()
        .collect();
    for node in known.difference(&alive) {
        let events = lock(&shared.mirror).drop_node(*node, since);
        if !events.is_empty() {
            tracing::info!(
                node = shared.node,
                dead = node,
                members = events.len(),
                "backplane: a node's heartbeat expired; its members are gone"
            );
        }
        report(shared, events);
    }
    // A node id another process claimed since its views were read (a
    // configured id, taken again as soon as the dead one's key expired):
    // the process whose members are held is dead too.
    let living: Vec<u16> = known.intersection(&alive).copied().collect();
    let tokens = within(shared, backplane::node_tokens(shared, commands, &living)).await?;
    let mut replaced = false;
    for (node, token) in tokens {
        let events = lock(&shared.mirror).owned_by(node, token.as_deref());
        if !events.is_empty() {
            replaced = true;
            tracing::info!(
                node = shared.node,
                dead = node,
                members = events.len(),
                "backplane: another process holds a node's id now; the old one's members are gone"
            );
        }
        report(shared, events);
    }
    if replaced {
        shared.presence_signal.notify_one();
    }
    Ok(())
}

/// Claims every name a local connection holds again: after Redis lost
/// them (a restart), or the link was down when they were claimed.
async fn claim_names_again(
    shared: &Shared,
    commands: &mut MultiplexedConnection,
) -> Result<(), LinkError> {
    let names = shared
        .hub
        .get()
        .map(|hub| hub.name_claims())
        .unwrap_or_default();
    for (name, id, generation) in names {
        let claimed = within(
            shared,
            backplane::claim_name(shared, commands, &name, id, generation),
        )
        .await?;
        if !claimed {
            tracing::warn!(
                node = shared.node,
                %name,
                connection = %id,
                "backplane: a name held here is held by a connection of another node too (claimed while redis had lost it)"
            );
        }
    }
    Ok(())
}

/// Refreshes the node's liveness key and the expiry of its membership keys.
/// A key Redis lost (a restart without persistence, or an expiry during an
/// outage) is written again.
async fn heartbeat(
    shared: &Shared,
    commands: &mut MultiplexedConnection,
    subscribed: &HashSet<String>,
) -> Result<(), LinkError> {
    let ttl = shared.ttl_ms();
    let groups: Vec<&String> = subscribed.iter().collect();
    let mut pipe = redis::pipe();
    pipe.cmd("SET")
        .arg(shared.keys.node(shared.node))
        .arg(&shared.token)
        .arg("PX")
        .arg(ttl)
        .arg("GET");
    pipe.cmd("SADD")
        .arg(shared.keys.nodes())
        .arg(shared.node)
        .ignore();
    pipe.cmd("PEXPIRE")
        .arg(shared.keys.users(shared.node))
        .arg(ttl);
    for group in &groups {
        pipe.cmd("PEXPIRE")
            .arg(shared.keys.members(shared.node, group))
            .arg(ttl);
    }
    let mut replies: Vec<Value> = within(shared, pipe.query_async(commands)).await?;
    if replies.len() != groups.len() + 2 {
        return Err(LinkError::Reply(format!(
            "{} replies to a heartbeat of {}",
            replies.len(),
            groups.len() + 2
        )));
    }
    let refreshed = replies.split_off(2);
    let users_kept = !matches!(replies.pop(), Some(Value::Int(0) | Value::Boolean(false)));
    if !users_kept {
        // Lost (or there is no signed-in user): written again if there is one.
        let users = shared.hub.get().map(|hub| hub.users()).unwrap_or_default();
        if !users.is_empty() {
            lock(&shared.dirty_users).extend(users.into_iter().map(|(user, _)| user));
            shared.dirty_signal.notify_one();
        }
    }
    let previous: Option<String> = redis::from_redis_value(replies.remove(0))
        .map_err(|error| LinkError::Reply(error.to_string()))?;
    match previous {
        Some(token) if token == shared.token => {}
        Some(_) => tracing::error!(
            node = shared.node,
            "backplane: another process holds this node id; connection ids may clash (give each node its own id)"
        ),
        None => {
            tracing::info!(
                node = shared.node,
                "backplane: redis had lost this node; registered it again"
            );
            shared.mark_all_dirty();
        }
    }
    let lost: Vec<String> = groups
        .into_iter()
        .zip(refreshed)
        .filter(|(_, reply)| matches!(reply, Value::Int(0) | Value::Boolean(false)))
        .map(|(group, _)| group.clone())
        .collect();
    if !lost.is_empty() {
        shared.mark_dirty(lost);
    }
    Ok(())
}

/// Writes the local membership of every changed group (with a presence
/// notice), the count of every changed user, frees the names released;
/// subscribes to the groups that gained their first local member (before
/// their membership shows, so a node that sees the member can reach it)
/// and reads the other nodes' views of them, or unsubscribes from those
/// that lost their last.
async fn sync(
    shared: &Shared,
    commands: &mut MultiplexedConnection,
    subscription: &mut MultiplexedConnection,
    subscribed: &mut HashSet<String>,
    stamper: &mut Stamper,
) -> Result<(), LinkError> {
    let users: Vec<_> = lock(&shared.dirty_users).drain().collect();
    if !users.is_empty() {
        let result = write_users(shared, commands, &users).await;
        if result.is_err() {
            lock(&shared.dirty_users).extend(users);
            return result;
        }
    }
    let releases: Vec<_> = std::mem::take(&mut *lock(&shared.releases));
    for (index, (name, id, generation)) in releases.iter().enumerate() {
        let result = within(
            shared,
            backplane::release_name(shared, commands, name, *id, *generation),
        )
        .await;
        if let Err(error) = result {
            lock(&shared.releases).extend(releases[index..].iter().cloned());
            return Err(error);
        }
    }
    let dirty: Vec<String> = lock(&shared.dirty).drain().collect();
    if dirty.is_empty() {
        return Ok(());
    }
    let result =
        write_memberships(shared, commands, subscription, subscribed, stamper, &dirty).await;
    if result.is_err() {
        // Written again on the next link.
        shared.mark_dirty(dirty);
    }
    result
}

/// Writes this node's count of connections of each of `users`.
async fn write_users(
    shared: &Shared,
    commands: &mut MultiplexedConnection,
    users: &[ternio::UserId],
) -> Result<(), LinkError> {
    let key = shared.keys.users(shared.node);
    let mut pipe = redis::pipe();
    for user in users {
        let count = shared.hub.get().map_or(0, |hub| hub.user_count(user));
        if count == 0 {
            pipe.cmd("HDEL").arg(&key).arg(user.as_str()).ignore();
        } else {
            pipe.cmd("HSET")
                .arg(&key)
                .arg(user.as_str())
                .arg(count)
                .ignore();
        }
    }
    pipe.cmd("PEXPIRE").arg(&key).arg(shared.ttl_ms()).ignore();
    within(shared, pipe.exec_async(commands)).await
}

async fn write_memberships(
    shared: &Shared,
    commands: &mut MultiplexedConnection,
    subscription: &mut MultiplexedConnection,
    subscribed: &mut HashSet<String>,
    stamper: &mut Stamper,
    groups: &[String],
) -> Result<(), LinkError> {
    let ttl = shared.ttl_ms();
    let mut subscribe = Vec::new();
    let mut unsubscribe = Vec::new();
    let now = replay::now_micros();
    let memberships: Vec<(&String, Vec<ternio::Member>)> = groups
        .iter()
        .map(|group| {
            let members = shared
                .hub
                .get()
                .map(|hub| hub.presence(group))
                .unwrap_or_default();
            (group, members)
        })
        .collect();
    // A group that gains its first member here is announced as this node
    // subscribes to it, before its membership is written: the nodes that
    // follow the group publish its broadcasts again from that notice on
    // (see `Mirror::alone`), not from the membership's notice a round
    // trip later.
    let mut announce = redis::pipe();
    for (group, members) in &memberships {
        if members.is_empty() || subscribed.contains(*group) {
            continue;
        }
        let channel = shared.keys.group_channel(group);
        let stamp = stamper.next(now);
        let notice = Message::Presence {
            group: (*group).clone(),
            version: stamp.sequence,
        };
        let envelope = shared.key.seal(channel.as_bytes(), stamp, &notice);
        announce.cmd("PUBLISH").arg(channel).arg(envelope).ignore();
    }
    let mut pipe = redis::pipe();
    pipe.atomic();
    for (group, members) in memberships {
        let key = shared.keys.members(shared.node, group);
        // The notice's sequence is the version: it only grows, across
        // restarts too (it is the clock).
        let stamp = stamper.next(now);
        let version = stamp.sequence;
        pipe.cmd("DEL").arg(&key).ignore();
        // With no member left, the key keeps the version for a TTL (so a
        // late reader does not take an older view for newer).
        let mut hset = redis::cmd("HSET");
        hset.arg(&key).arg(VERSION_FIELD).arg(version);
        for member in &members {
            hset.arg(member.id.0)
                .arg(member.user.as_ref().map_or("", |user| user.as_str()));
        }
        pipe.add_command(hset).ignore();
        pipe.cmd("PEXPIRE").arg(&key).arg(ttl).ignore();
        let channel = shared.keys.group_channel(group);
        let notice = Message::Presence {
            group: group.clone(),
            version,
        };
        let envelope = shared.key.seal(channel.as_bytes(), stamp, &notice);
        pipe.cmd("PUBLISH").arg(&channel).arg(envelope).ignore();
        if members.is_empty() {
            if subscribed.remove(group) {
                unsubscribe.push(channel);
            }
            lock(&shared.mirror).untrack(group);
        } else if subscribed.insert(group.clone()) {
            subscribe.push((group.clone(), channel));
        }
    }
    if !subscribe.is_empty() {
        let channels: Vec<&String> = subscribe.iter().map(|(_, channel)| channel).collect();
        // Both before the membership's transaction, which follows them on
        // the command connection (its notices come after these).
        let mut announcer = commands.clone();
        let (subscribing, announcement) = tokio::join!(
            within(shared, subscription.subscribe(&channels)),
            within(shared, announce.exec_async(&mut announcer)),
        );
        subscribing?;
        announcement?;
    }
    within(shared, pipe.exec_async(commands)).await?;
    if !unsubscribe.is_empty() {
        within(shared, subscription.unsubscribe(&unsubscribe)).await?;
    }
    // Subscribed first, then read: no notice is missed in between.
    for (group, _) in &subscribe {
        read_group(shared, commands, group).await?;
    }
    Ok(())
}

/// Deletes the node's keys on a clean shutdown, so its members disappear
/// at once. Best effort: if Redis is gone, they expire.
async fn leave(
    shared: &Shared,
    commands: &mut MultiplexedConnection,
    subscribed: &HashSet<String>,
) {
    shared.counters.disconnected(false);
    *lock(&shared.commands) = None;
    let mut pipe = redis::pipe();
    pipe.cmd("DEL").arg(shared.keys.node(shared.node)).ignore();
    pipe.cmd("SREM")
        .arg(shared.keys.nodes())
        .arg(shared.node)
        .ignore();
    pipe.cmd("DEL").arg(shared.keys.users(shared.node)).ignore();
    for group in subscribed {
        pipe.cmd("DEL")
            .arg(shared.keys.members(shared.node, group))
            .ignore();
    }
    match within(shared, pipe.exec_async(commands)).await {
        Ok(()) => tracing::info!(node = shared.node, "backplane: left the cluster"),
        Err(error) => {
            tracing::warn!(node = shared.node, %error, "backplane: could not clean up; the keys expire")
        }
    }
}

/// `future`, bounded by the response timeout.
async fn within<T>(
    shared: &Shared,
    future: impl Future<Output = Result<T, RedisError>>,
) -> Result<T, LinkError> {
    within_duration(shared.config.response_timeout, future).await
}

async fn within_duration<T>(
    timeout: Duration,
    future: impl Future<Output = Result<T, RedisError>>,
) -> Result<T, LinkError> {
    match tokio::time::timeout(timeout, future).await {
        Ok(result) => result.map_err(LinkError::from),
        Err(_) => Err(LinkError::Timeout),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ClusterSecret;
    use crate::envelope::{EnvelopeKey, Stamp};
    use ternio::ConnectionId;

    const WIDE: MergeLimits = MergeLimits {
        envelope: usize::MAX,
        frames: MERGED_BYTES,
    };

    fn group(name: &str, frame: &'static [u8], droppable: bool) -> BackplaneMessage {
        BackplaneMessage::Group {
            group: name.into(),
            frame: Bytes::from_static(frame),
            droppable,
        }
    }

    fn frames(name: &str, frames: &[&'static [u8]], droppable: bool) -> Message {
        Message::GroupFrames {
            group: name.into(),
            frames: frames
                .iter()
                .map(|frame| Bytes::from_static(frame))
                .collect(),
            droppable,
        }
    }

    fn merged(
        messages: impl IntoIterator<Item = BackplaneMessage>,
        limits: MergeLimits,
    ) -> Vec<Message> {
        let mut merged = Vec::new();
        merge_runs(messages.into_iter(), limits, &mut merged);
        merged
    }

    #[test]
    fn consecutive_broadcasts_to_one_group_merge_and_nothing_moves() {
        let kick = BackplaneMessage::Kick {
            id: ConnectionId::new(1, 2),
            reason: "bye".into(),
        };
        let messages = vec![
            group("a", b"1", false),
            group("a", b"2", false),
            group("a", b"3", false),
            // Another group, then the first again: three runs, in order.
            group("b", b"4", false),
            group("a", b"5", false),
            group("a", b"6", false),
            // Another flag starts a run.
            group("a", b"7", true),
            kick.clone(),
            group("a", b"8", true),
        ];
        assert_eq!(
            merged(messages, WIDE),
            [
                frames("a", &[b"1", b"2", b"3"], false),
                Message::Hub(group("b", b"4", false)),
                frames("a", &[b"5", b"6"], false),
                Message::Hub(group("a", b"7", true)),
                Message::Hub(kick),
                Message::Hub(group("a", b"8", true)),
            ]
        );
    }

    #[test]
    fn a_run_is_cut_at_the_frames_limit_and_merging_can_be_off() {
        // Each frame takes 4 + 3 bytes: two fit in 14, not three.
        let five = || (0..5).map(|_| group("a", b"xyz", false));
        let limits = MergeLimits { frames: 14, ..WIDE };
        assert_eq!(
            merged(five(), limits),
            [
                frames("a", &[b"xyz", b"xyz"], false),
                frames("a", &[b"xyz", b"xyz"], false),
                Message::Hub(group("a", b"xyz", false)),
            ]
        );
        // Off (`merge_broadcasts(false)`): each goes alone.
        let off = MergeLimits { frames: 0, ..WIDE };
        assert_eq!(
            merged(five(), off),
            vec![Message::Hub(group("a", b"xyz", false)); 5]
        );
    }

    #[test]
    fn a_merged_envelope_as_sealed_stays_within_the_envelope_limit() {
        let key =
            EnvelopeKey::new(&ClusterSecret::new("a test secret, 32 bytes long...!").unwrap());
        let channel = b"ternio:group:lobby";
        let stamp = Stamp {
            origin: 1,
            instance: 2,
            sequence: 3,
        };
        let frame: &'static [u8] = &[0x05; 250];
        for limit in [1024, 1075, 1076, 4096] {
            let limits = MergeLimits {
                envelope: limit,
                frames: MERGED_BYTES,
            };
            let runs = merged((0..40).map(|_| group("lobby", frame, false)), limits);
            let mut carried = 0;
            for (index, message) in runs.iter().enumerate() {
                let sealed = key.seal(channel, stamp, message);
                assert!(sealed.len() <= limit, "{} > {limit}", sealed.len());
                assert!(key.open(channel, &sealed, limit).is_ok());
                let count = match message {
                    Message::GroupFrames { frames, .. } => frames.len(),
                    _ => 1,
                };
                carried += count;
                // As full as the limit allows: one more frame would not fit.
                if index + 1 < runs.len() {
                    assert!(sealed.len() + 4 + frame.len() > limit, "{limit}: room left");
                }
            }
            assert_eq!(carried, 40);
        }
    }
}
