//! The link task: one per backplane. It connects to Redis, registers the
//! node and its memberships, subscribes, then runs three loops side by side
//! until the link fails: the publisher (queued messages out, pipelined),
//! the subscriber (messages in, delivered to the local hub) and the
//! control loop (heartbeats, membership and subscription changes). When
//! the link fails it reports it, drops what was queued, and reconnects with
//! backoff; a new link registers and subscribes everything again.
//!
//! The publisher stamps and seals every envelope; the subscriber opens
//! each message (size, MAC, form) and checks its stamp before delivering
//! it. Both the stamper and the replay guard outlive the links: a
//! reconnection neither restarts the sequence nor forgets what was seen.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::{MultiplexedConnection, PubSubSink, PubSubStream};
use redis::{RedisError, Value};
use ternio::backplane::BackplaneMessage;
use tokio::sync::{mpsc, watch};
use tokio::time::MissedTickBehavior;

use crate::backplane::{Shared, lock};
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
    guard: &'a mut ReplayGuard,
}

/// The connections of one link.
struct Link {
    commands: MultiplexedConnection,
    sink: PubSubSink,
    stream: PubSubStream,
}

async fn connect(shared: &Shared) -> Result<Link, LinkError> {
    let commands = within(
        shared,
        shared
            .client
            .get_multiplexed_async_connection_with_config(&shared.connection_config()),
    )
    .await?;
    let pubsub = within(shared, shared.client.get_async_pubsub()).await?;
    let (sink, stream) = pubsub.split();
    Ok(Link {
        commands,
        sink,
        stream,
    })
}

/// Registers the node, subscribes, writes every membership, then serves
/// until the link fails or the backplane shuts down.
async fn serve(shared: &Arc<Shared>, link: Link, state: LinkState<'_>) -> End {
    let LinkState {
        queue,
        shutdown,
        ever_connected,
        stamper,
        guard,
    } = state;
    let Link {
        mut commands,
        mut sink,
        stream,
    } = link;
    let mut subscribed = HashSet::new();
    let setup = async {
        let fixed = [
            shared.keys.everyone_channel(),
            shared.keys.node_channel(shared.node),
        ];
        within(shared, sink.subscribe(&fixed)).await?;
        heartbeat(shared, &mut commands, &subscribed).await?;
        shared.mark_all_dirty();
        sync(shared, &mut commands, &mut sink, &mut subscribed).await
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

    let result = tokio::select! {
        result = publisher(shared, queue, commands.clone(), stamper) => result,
        result = subscriber(shared, stream, guard) => result,
        result = control(shared, commands.clone(), &mut sink, &mut subscribed) => result,
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
    loop {
        if queue.recv_many(&mut batch, BATCH).await == 0 {
            // Every sender is gone: nothing will be published again.
            return std::future::pending().await;
        }
        let mut pipe = redis::pipe();
        let now = replay::now_micros();
        for message in &batch {
            let channel = match message {
                BackplaneMessage::Group { group, .. } => shared.keys.group_channel(group),
                BackplaneMessage::Everyone { .. } => shared.keys.everyone_channel(),
                BackplaneMessage::Connection { id, .. } | BackplaneMessage::Kick { id, .. } => {
                    shared.keys.node_channel(id.node())
                }
            };
            let envelope = shared
                .key
                .seal(channel.as_bytes(), stamper.next(now), message);
            pipe.cmd("PUBLISH").arg(channel).arg(envelope).ignore();
        }
        let count = batch.len() as u64;
        batch.clear();
        if let Err(error) = within(shared, pipe.exec_async(&mut commands)).await {
            shared.counters.dropped(count);
            return Err(error);
        }
        shared.counters.published(count);
    }
}

/// Delivers what other nodes published to this node's connections: only
/// authentic envelopes within the size limit, not seen before.
async fn subscriber(
    shared: &Shared,
    mut stream: PubSubStream,
    guard: &mut ReplayGuard,
) -> Result<(), LinkError> {
    let mut refused = 0u64;
    while let Some(message) = stream.next().await {
        // A view of the message the Redis client read: the size is checked
        // before anything is copied, the MAC before anything is parsed.
        let channel = message.get_channel_name();
        let payload = message.get_payload_bytes();
        let result = shared
            .key
            .open(channel.as_bytes(), payload, shared.config.max_envelope_size)
            .map_err(|error| (error.rejection(), error.to_string()))
            .and_then(|envelope| {
                // This node delivered its own messages already.
                if envelope.stamp.origin == shared.node {
                    return Ok(None);
                }
                guard
                    .check(envelope.stamp, replay::now_micros())
                    .map(|()| Some(envelope))
                    .map_err(|rejection| (rejection, rejection.as_str().to_owned()))
            });
        match result {
            Ok(None) => {}
            Ok(Some(envelope)) => {
                shared.counters.received(1);
                if let Some(hub) = shared.hub.get() {
                    hub.deliver(&envelope.message);
                }
            }
            Err((rejection, error)) => {
                shared.counters.rejected(rejection);
                refused += 1;
                if refused.is_power_of_two() {
                    tracing::warn!(node = shared.node, channel, reason = rejection.as_str(), %error, count = refused, "backplane: dropped a message from redis");
                }
            }
        }
    }
    Err(LinkError::SubscriptionClosed)
}

/// Heartbeats, and membership and subscription changes as they come.
/// Ends when the server behind the hub is gone.
async fn control(
    shared: &Shared,
    mut commands: MultiplexedConnection,
    sink: &mut PubSubSink,
    subscribed: &mut HashSet<String>,
) -> Result<(), LinkError> {
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
            }
            () = shared.dirty_signal.notified() => {
                sync(shared, &mut commands, sink, subscribed).await?;
            }
        }
    }
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
    for group in &groups {
        pipe.cmd("PEXPIRE")
            .arg(shared.keys.members(shared.node, group))
            .arg(ttl);
    }
    let mut replies: Vec<Value> = within(shared, pipe.query_async(commands)).await?;
    if replies.len() != groups.len() + 1 {
        return Err(LinkError::Reply(format!(
            "{} replies to a heartbeat of {}",
            replies.len(),
            groups.len() + 1
        )));
    }
    let refreshed = replies.split_off(1);
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

/// Writes the local membership of every changed group, and subscribes to
/// the groups that gained their first local member (before their
/// membership shows, so a node that sees the member can reach it) or
/// unsubscribes from those that lost their last.
async fn sync(
    shared: &Shared,
    commands: &mut MultiplexedConnection,
    sink: &mut PubSubSink,
    subscribed: &mut HashSet<String>,
) -> Result<(), LinkError> {
    let dirty: Vec<String> = lock(&shared.dirty).drain().collect();
    if dirty.is_empty() {
        return Ok(());
    }
    let result = write_memberships(shared, commands, sink, subscribed, &dirty).await;
    if result.is_err() {
        // Written again on the next link.
        shared.mark_dirty(dirty);
    }
    result
}

async fn write_memberships(
    shared: &Shared,
    commands: &mut MultiplexedConnection,
    sink: &mut PubSubSink,
    subscribed: &mut HashSet<String>,
    groups: &[String],
) -> Result<(), LinkError> {
    let ttl = shared.ttl_ms();
    let mut subscribe = Vec::new();
    let mut unsubscribe = Vec::new();
    let mut pipe = redis::pipe();
    pipe.atomic();
    for group in groups {
        let members: Vec<u64> = shared
            .hub
            .get()
            .map(|hub| hub.members(group))
            .unwrap_or_default()
            .into_iter()
            .map(|id| id.0)
            .collect();
        let key = shared.keys.members(shared.node, group);
        pipe.cmd("DEL").arg(&key).ignore();
        if members.is_empty() {
            if subscribed.remove(group) {
                unsubscribe.push(shared.keys.group_channel(group));
            }
        } else {
            pipe.cmd("SADD").arg(&key).arg(members).ignore();
            pipe.cmd("PEXPIRE").arg(&key).arg(ttl).ignore();
            if subscribed.insert(group.clone()) {
                subscribe.push(shared.keys.group_channel(group));
            }
        }
    }
    if !subscribe.is_empty() {
        within(shared, sink.subscribe(&subscribe)).await?;
    }
    within(shared, pipe.exec_async(commands)).await?;
    if !unsubscribe.is_empty() {
        within(shared, sink.unsubscribe(&unsubscribe)).await?;
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
