//! `ternio-bench presence`: what users and presence cost across two nodes
//! joined by the Redis backplane (`docs/SCALING.md` quotes it).
//!
//! One `redis-server` (loopback, no persistence) and two Ternio nodes, A
//! and B, each with its own `RedisBackplane`, in this process; the clients
//! are `ternio-client`s in this process too. Everything shares the
//! machine's cores, so the figures include that contention.
//!
//! - **Presence event**: a watcher on A and one on B are in the room; a
//!   mover on A joins, and once both watchers heard of it, leaves (and
//!   again). The time from the mover's request to each watcher receiving
//!   the event the presence hook pushed: on A (the local hook) and on B
//!   (A writes its membership and a notice to Redis, B reads the view back
//!   and runs its hook). With it, the Redis commands one change costs,
//!   from `INFO commandstats` before and after.
//! - **Sends**: from a sender on A to a target on B, the time from the
//!   request to the push: `Hub::send_user` (the user's connections on
//!   every node) against `Hub::send` to the target's connection id (the
//!   owner node's channel), and `send_user` to a user on A (local).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use hdrhistogram::Histogram;
use ternio::{
    ConnectionId, Context, Hub, Packet, PresenceChange, Server, UserId, packet_controller,
};
use ternio_client::{Client, Subscription};
use ternio_redis::{ClusterSecret, RedisBackplane, RedisConfig};
use ternio_testkit::redis_server::RedisServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The command line of `ternio-bench presence`.
#[derive(clap::Args)]
pub struct PresenceArgs {
    /// A tenth of the samples.
    #[arg(long)]
    quick: bool,
    /// Where to write `presence.md`.
    #[arg(long, default_value = "target/bench-presence")]
    out: PathBuf,
}

/// 0x0700: asks for the connection's id.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0700, response = Me)]
struct WhoAmI;

/// 0x0701: the answer to [`WhoAmI`].
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0701)]
struct Me(u64);

/// 0x0702: signs in as `user` and joins the room when `join`.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0702, response = ())]
struct SignIn {
    user: String,
}

/// 0x0703: joins (true) or leaves (false) the room.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0703, response = ())]
struct Room(bool);

/// 0x0704: pushes [`Note`] to every connection of `user`.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0704, response = ())]
struct TellUser {
    user: String,
}

/// 0x0705: pushes [`Note`] to the connection `id`.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0705, response = ())]
struct TellConnection {
    id: u64,
}

/// 0x0706, pushed: a note.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0706)]
struct Note;

/// 0x0707, pushed by the presence hook: a member joined (true) or left.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0707)]
struct Moved {
    id: u64,
    joined: bool,
}

/// The room every presence event is about.
const ROOM: &str = "bench";

#[derive(Default)]
struct PresenceBench;

#[packet_controller(explicit)]
impl PresenceBench {
    fn who_am_i(_request: WhoAmI, ctx: &Context) -> Me {
        Me(ctx.connection_id().0)
    }

    fn sign_in(request: SignIn, ctx: &Context) {
        if let Ok(user) = UserId::new(request.user) {
            ctx.sign_in(user);
        }
    }

    fn room(request: Room, ctx: &Context) {
        if request.0 {
            ctx.hub().join(ROOM, ctx.connection_id());
        } else {
            ctx.hub().leave(ROOM, ctx.connection_id());
        }
    }

    fn tell_user(request: TellUser, hub: Hub) {
        if let Ok(user) = UserId::new(request.user) {
            let _ = hub.send_user(&user, &Note);
        }
    }

    fn tell_connection(request: TellConnection, hub: Hub) {
        let _ = hub.send(ConnectionId(request.id), &Note);
    }
}

/// A node: a server with its backplane; the presence hook tells the room's
/// members on this node.
async fn node(url: &str, prefix: &str) -> Result<(std::net::SocketAddr, RedisBackplane)> {
    let secret = ClusterSecret::new("the presence benchmark's secret.")?;
    let backplane = RedisBackplane::connect(RedisConfig::new(url, secret).prefix(prefix)).await?;
    let server = Server::builder()
        .discover_controllers(false)
        .controller(PresenceBench)
        .on_presence(|event, hub| {
            let joined = match event.change {
                PresenceChange::Joined => true,
                PresenceChange::Left | PresenceChange::Lost => false,
                _ => return,
            };
            let moved = Moved {
                id: event.member.id.0,
                joined,
            };
            let _ = hub.broadcast_group_local(&event.group, &moved);
        })
        .backplane(backplane.clone())
        .map_tcp("127.0.0.1:0")
        .build()?;
    let address = server.tcp_addrs()[0];
    tokio::spawn(server.run());
    if !backplane.wait_connected(Duration::from_secs(5)).await {
        bail!("the backplane did not connect");
    }
    Ok((address, backplane))
}

/// A client signed in as `user`, with its id.
async fn client(address: std::net::SocketAddr, user: &str) -> Result<(Client, u64)> {
    let client = Client::connect_tcp(address).await?;
    let Me(id) = client.request_async(&WhoAmI).await?;
    client.request_async(&SignIn { user: user.into() }).await?;
    Ok((client, id))
}

/// Waits for the `Moved` push about `id` (`joined`), skipping others;
/// returns when it came.
async fn moved(pushes: &mut Subscription<Moved>, id: u64, joined: bool) -> Result<Instant> {
    loop {
        let push = tokio::time::timeout(Duration::from_secs(10), pushes.next())
            .await
            .context("no presence event within 10 s")?
            .context("the subscription closed")?;
        if push.id == id && push.joined == joined {
            return Ok(Instant::now());
        }
    }
}

/// Waits for the next note; returns when it came.
async fn next_note(notes: &mut Subscription<Note>) -> Result<Instant> {
    tokio::time::timeout(Duration::from_secs(10), notes.next())
        .await
        .context("no note within 10 s")?
        .context("the subscription closed")?;
    Ok(Instant::now())
}

/// The total of `calls=` in Redis's `INFO commandstats`.
async fn redis_calls(port: u16) -> Result<u64> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
    stream
        .write_all(b"*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n")
        .await?;
    let mut reply = Vec::new();
    let mut buffer = [0u8; 8192];
    // A bulk string: `$<len>\r\n<text>\r\n`.
    loop {
        let read = stream.read(&mut buffer).await?;
        if read == 0 {
            bail!("redis closed the connection");
        }
        reply.extend_from_slice(&buffer[..read]);
        let text = String::from_utf8_lossy(&reply);
        if let Some((length, rest)) = text
            .strip_prefix('$')
            .and_then(|text| text.split_once("\r\n"))
        {
            let length: usize = length.parse()?;
            if rest.len() >= length {
                return Ok(rest[..length]
                    .lines()
                    .filter_map(|line| line.split("calls=").nth(1))
                    .filter_map(|calls| calls.split(',').next()?.parse::<u64>().ok())
                    .sum());
            }
        }
    }
}

/// A latency histogram in µs.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds")
}

fn micros(since: Instant, at: Instant) -> u64 {
    at.saturating_duration_since(since).as_micros().max(1) as u64
}

/// `p50 / p99` in ms.
fn figures(histogram: &Histogram<u64>) -> String {
    format!(
        "{:.3} | {:.3}",
        histogram.value_at_quantile(0.5) as f64 / 1000.0,
        histogram.value_at_quantile(0.99) as f64 / 1000.0
    )
}

/// Runs the benchmark and writes `presence.md`.
pub fn run(args: PresenceArgs) -> Result<()> {
    let samples = if args.quick { 100 } else { 1000 };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let report = runtime.block_on(measure(samples))?;
    crate::output::save_report(&args.out, "presence.md", &report)
}

async fn measure(samples: usize) -> Result<String> {
    let redis = RedisServer::try_start().map_err(anyhow::Error::msg)?;
    let url = redis.url();
    let port: u16 = url
        .rsplit(':')
        .next()
        .and_then(|port| port.trim_end_matches('/').parse().ok())
        .context("the Redis port")?;
    let prefix = format!("ternio-bench-presence-{}", std::process::id());
    let (a, _a_backplane) = node(&url, &prefix).await?;
    let (b, _b_backplane) = node(&url, &prefix).await?;

    // Presence events.
    let (watcher_a, _) = client(a, "watcher-a").await?;
    let (watcher_b, _) = client(b, "watcher-b").await?;
    let mut heard_a = watcher_a.subscribe::<Moved>();
    let mut heard_b = watcher_b.subscribe::<Moved>();
    watcher_a.request_async(&Room(true)).await?;
    watcher_b.request_async(&Room(true)).await?;
    let (mover, mover_id) = client(a, "mover").await?;
    // Warm up, and make sure both nodes follow the room.
    for _ in 0..10 {
        for joined in [true, false] {
            mover.request_async(&Room(joined)).await?;
            moved(&mut heard_a, mover_id, joined).await?;
            moved(&mut heard_b, mover_id, joined).await?;
        }
    }
    let (mut local, mut remote) = (histogram(), histogram());
    let calls_before = redis_calls(port).await?;
    let started = Instant::now();
    for _ in 0..samples {
        for joined in [true, false] {
            let sent = Instant::now();
            mover.request_async(&Room(joined)).await?;
            // Each watcher's arrival timed on its own.
            let (at_a, at_b) = tokio::join!(
                moved(&mut heard_a, mover_id, joined),
                moved(&mut heard_b, mover_id, joined)
            );
            local.record(micros(sent, at_a?))?;
            remote.record(micros(sent, at_b?))?;
        }
    }
    let elapsed = started.elapsed();
    let calls = redis_calls(port).await? - calls_before;
    let changes = 2 * samples as u64;

    // Sends.
    let (sender, _) = client(a, "sender").await?;
    let (target_b, target_b_id) = client(b, "target-b").await?;
    let (target_a, _) = client(a, "target-a").await?;
    let mut notes_b = target_b.subscribe::<Note>();
    let mut notes_a = target_a.subscribe::<Note>();
    let (mut user_remote, mut id_remote, mut user_local) = (histogram(), histogram(), histogram());
    for round in 0..samples + 10 {
        let sent = Instant::now();
        sender
            .request_async(&TellUser {
                user: "target-b".into(),
            })
            .await?;
        let at = next_note(&mut notes_b).await?;
        if round >= 10 {
            user_remote.record(micros(sent, at))?;
        }
        let sent = Instant::now();
        sender
            .request_async(&TellConnection { id: target_b_id })
            .await?;
        let at = next_note(&mut notes_b).await?;
        if round >= 10 {
            id_remote.record(micros(sent, at))?;
        }
        let sent = Instant::now();
        sender
            .request_async(&TellUser {
                user: "target-a".into(),
            })
            .await?;
        let at = next_note(&mut notes_a).await?;
        if round >= 10 {
            user_local.record(micros(sent, at))?;
        }
    }

    Ok(format!(
        "## Users and presence across two nodes\n\n\
         {samples} samples per row; one process: Redis, nodes A and B and the clients share the machine's cores.\n\n\
         | what | p50 ms | p99 ms |\n|---|---|---|\n\
         | presence event, mover's node (A) | {} |\n\
         | presence event, other node (B) | {} |\n\
         | `send_user`, target on B | {} |\n\
         | `send` to a connection id, target on B | {} |\n\
         | `send_user`, target on A (local) | {} |\n\n\
         Presence changes: {changes} in {:.2} s, {:.1} Redis commands each (both nodes, from `INFO commandstats`).\n",
        figures(&local),
        figures(&remote),
        figures(&user_remote),
        figures(&id_remote),
        figures(&user_local),
        elapsed.as_secs_f64(),
        calls as f64 / changes as f64,
    ))
}
