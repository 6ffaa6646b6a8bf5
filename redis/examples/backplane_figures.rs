//! Measures what the Redis backplane costs: broadcast deliveries per second
//! to members on the publishing node (local) and on another node (cross-node,
//! through Redis), and the latency a cross-node broadcast adds over a local one.
//!
//! ```text
//! cargo run --release -p ternio-redis --example backplane_figures
//! cargo run --release -p ternio-redis --example backplane_figures -- --redis redis://127.0.0.1:6379/ --json
//! ```
//!
//! Two nodes run in this process, each with its own `RedisBackplane`; Redis
//! is a `redis-server` this program starts on a free port (or `--redis`).
//! Receivers are raw TCP connections that every node puts in the group
//! `bench` when they connect; they decode each push and time it against
//! the timestamp the publisher put in it. The publisher calls
//! `Hub::broadcast_group` on node one: its members are the local case;
//! node two's members are the cross-node case; a server without a
//! backplane is the standalone baseline.
//!
//! Throughput: `--messages` broadcasts of 32-byte packets, with at most
//! `--window` broadcasts ahead of the slowest receiver so that no queue
//! overflows; deliveries/s = receivers × messages / time to the last
//! delivery. Latency: `--latency-rate` broadcasts per second for
//! `--seconds`, every delivery timed; percentiles from one histogram.

#[path = "../tests/support/redis_server.rs"]
#[allow(dead_code)] // restart and kill serve the tests
mod redis_server;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use clap::Parser;
use hdrhistogram::Histogram;
use redis_server::RedisServer;
use ternio::protocol::Decode;
use ternio::protocol::frame::FrameDecoder;
use ternio::{Backplane, Bytes, Hub, Packet, Server, ServerHandle};
use ternio_redis::{RedisBackplane, RedisConfig};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// Command line of the measurement.
#[derive(Parser)]
#[command(about = "Measures Ternio's Redis backplane: deliveries/s and added latency")]
struct Args {
    /// Use this Redis instead of starting a `redis-server`.
    #[arg(long)]
    redis: Option<String>,
    /// Receiver counts to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,10,100")]
    receivers: Vec<usize>,
    /// Broadcasts per throughput run.
    #[arg(long, default_value_t = 50_000)]
    messages: u64,
    /// Broadcasts the publisher may be ahead of the slowest receiver.
    #[arg(long, default_value_t = 2_048)]
    window: u64,
    /// Broadcasts per second in the latency runs.
    #[arg(long, default_value_t = 1_000)]
    latency_rate: u64,
    /// Seconds per latency run.
    #[arg(long, default_value_t = 3)]
    seconds: u64,
    /// Receivers in the latency runs.
    #[arg(long, default_value_t = 10)]
    latency_receivers: usize,
    /// Print one JSON object per result line instead of a table.
    #[arg(long)]
    json: bool,
}

/// The broadcast packet: a timestamp and padding, 32 bytes of body.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0600)]
struct Tick {
    /// Nanoseconds since the measurement's epoch when it was broadcast.
    sent: u64,
    /// Padding up to 32 bytes.
    pad: Bytes,
}

const GROUP: &str = "bench";
const PAD: Bytes = Bytes::from_static(&[0x5A; 23]);

/// One node: its server and backplane (none for the standalone baseline).
struct Node {
    address: SocketAddr,
    handle: ServerHandle,
    backplane: Option<RedisBackplane>,
}

impl Node {
    async fn start(redis: Option<(&str, &str)>) -> Result<Self, Box<dyn std::error::Error>> {
        let mut builder = Server::builder()
            .discover_controllers(false)
            .idle_timeout(None)
            .max_connections_per_ip(100_000)
            .max_outbound_queue_bytes(16 * 1024 * 1024)
            .on_connect(|connection| {
                connection.hub().join(GROUP, connection.id());
            })
            .map_tcp("127.0.0.1:0");
        let mut backplane = None;
        if let Some((url, prefix)) = redis {
            let connected = RedisBackplane::connect(RedisConfig::new(url).prefix(prefix)).await?;
            builder = builder.backplane(connected.clone());
            backplane = Some(connected);
        }
        let server = builder.build()?;
        let address = server.tcp_addrs()[0];
        let handle = server.handle();
        tokio::spawn(server.run());
        if let Some(backplane) = &backplane
            && !backplane.wait_connected(Duration::from_secs(10)).await
        {
            return Err("the backplane did not connect".into());
        }
        Ok(Self {
            address,
            handle,
            backplane,
        })
    }

    fn dropped(&self) -> u64 {
        self.backplane
            .as_ref()
            .map_or(0, |backplane| backplane.stats().dropped)
    }

    async fn stop(self) {
        self.handle.shutdown();
        if let Some(backplane) = self.backplane {
            backplane.shutdown().await;
        }
    }
}

/// Where the receivers are, relative to the publisher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    /// One server without a backplane: the baseline.
    Standalone,
    /// On the publishing node, which has a backplane (and publishes too).
    Local,
    /// On the other node: through Redis.
    CrossNode,
}

impl Case {
    const ALL: [Case; 3] = [Case::Standalone, Case::Local, Case::CrossNode];

    fn name(self) -> &'static str {
        match self {
            Case::Standalone => "standalone",
            Case::Local => "local",
            Case::CrossNode => "cross-node",
        }
    }

    /// The publishing node and the receivers' node.
    async fn nodes(
        self,
        url: &str,
        prefix: &str,
    ) -> Result<(Node, Option<Node>), Box<dyn std::error::Error>> {
        Ok(match self {
            Case::Standalone => (Node::start(None).await?, None),
            Case::Local | Case::CrossNode => (
                Node::start(Some((url, prefix))).await?,
                Some(Node::start(Some((url, prefix))).await?),
            ),
        })
    }
}

/// What the receivers of one run share.
struct Receivers {
    delivered: Arc<AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<Histogram<u64>>>,
    stop: tokio::sync::watch::Sender<bool>,
}

impl Receivers {
    async fn connect(address: SocketAddr, count: usize, epoch: Instant) -> Self {
        let delivered = Arc::new(AtomicU64::new(0));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let mut tasks = Vec::with_capacity(count);
        for _ in 0..count {
            let stream = TcpStream::connect(address).await.expect("connects");
            stream.set_nodelay(true).expect("nodelay");
            tasks.push(tokio::spawn(receive(
                stream,
                Arc::clone(&delivered),
                stopped.clone(),
                epoch,
            )));
        }
        Self {
            delivered,
            tasks,
            stop,
        }
    }

    async fn close(self) -> Histogram<u64> {
        self.stop.send_replace(true);
        let mut all = Histogram::new(3).expect("a histogram");
        for task in self.tasks {
            all.add(task.await.expect("a receiver"))
                .expect("same bounds");
        }
        all
    }
}

/// Reads pushes until told to stop; times each against its timestamp.
async fn receive(
    mut stream: TcpStream,
    delivered: Arc<AtomicU64>,
    mut stop: tokio::sync::watch::Receiver<bool>,
    epoch: Instant,
) -> Histogram<u64> {
    let mut latencies = Histogram::new(3).expect("a histogram");
    let mut decoder = FrameDecoder::default();
    let mut buffer = BytesMut::with_capacity(64 * 1024);
    loop {
        tokio::select! {
            read = stream.read_buf(&mut buffer) => {
                if !matches!(read, Ok(n) if n > 0) {
                    return latencies;
                }
            }
            _ = stop.changed() => return latencies,
        }
        while let Ok(Some(frame)) = decoder.decode(&mut buffer) {
            if frame.header.opcode != Tick::OPCODE {
                continue;
            }
            let now = epoch.elapsed().as_nanos() as u64;
            if let Ok(tick) = Tick::decode_body(&frame.body) {
                let _ = latencies.record(now.saturating_sub(tick.sent).max(1));
                delivered.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

fn tick(epoch: Instant) -> Tick {
    Tick {
        sent: epoch.elapsed().as_nanos() as u64,
        pad: PAD,
    }
}

/// Waits until `members` are in the group as node `hub` sees it.
async fn await_members(hub: &Hub, members: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while hub.cluster_members(GROUP).await.map_or(0, |ids| ids.len()) < members {
        assert!(Instant::now() < deadline, "members did not show up");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Broadcasts `messages` ticks from `hub`, at most `window` ahead of the
/// receivers; returns the time from the first send to the last delivery.
async fn flood(
    hub: &Hub,
    receivers: &Receivers,
    count: u64,
    messages: u64,
    window: u64,
    epoch: Instant,
) -> Duration {
    let started = Instant::now();
    let mut sent = 0;
    while sent < messages {
        while sent < messages && sent < receivers.delivered.load(Ordering::Relaxed) / count + window
        {
            hub.broadcast_group(GROUP, &tick(epoch))
                .expect("broadcasts");
            sent += 1;
        }
        tokio::task::yield_now().await;
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while receivers.delivered.load(Ordering::Relaxed) < count * messages {
        assert!(
            Instant::now() < deadline,
            "only {} of {} delivered",
            receivers.delivered.load(Ordering::Relaxed),
            count * messages
        );
        tokio::task::yield_now().await;
    }
    started.elapsed()
}

/// Broadcasts at `rate` per second for `seconds`, then waits for the stragglers.
async fn paced(
    hub: &Hub,
    receivers: &Receivers,
    count: u64,
    rate: u64,
    seconds: u64,
    epoch: Instant,
) {
    let total = rate * seconds;
    let mut ticker = tokio::time::interval(Duration::from_nanos(1_000_000_000 / rate.max(1)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    for _ in 0..total {
        ticker.tick().await;
        hub.broadcast_group(GROUP, &tick(epoch))
            .expect("broadcasts");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while receivers.delivered.load(Ordering::Relaxed) < count * total && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn micros(histogram: &Histogram<u64>, quantile: f64) -> f64 {
    histogram.value_at_quantile(quantile) as f64 / 1_000.0
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let own = args.redis.is_none().then(RedisServer::start);
    let url = args
        .redis
        .clone()
        .or_else(|| own.as_ref().map(RedisServer::url))
        .expect("a Redis");
    let epoch = Instant::now();

    if !args.json {
        println!(
            "# {} cores; Redis at {url}; two nodes in this process; 32-byte packets",
            std::thread::available_parallelism().map_or(0, |n| n.get())
        );
        println!("| case | receivers | broadcasts/s | deliveries/s | dropped |");
        println!("|---|---:|---:|---:|---:|");
    }
    for (run, &count) in args.receivers.iter().enumerate() {
        for case in Case::ALL {
            let prefix = format!("figures-{}-{run}-{}", std::process::id(), case.name());
            let (one, two) = case.nodes(&url, &prefix).await?;
            let target = match (&two, case) {
                (Some(two), Case::CrossNode) => two,
                _ => &one,
            };
            let receivers = Receivers::connect(target.address, count, epoch).await;
            let hub = one.handle.hub();
            await_members(&hub, count).await;
            let elapsed = flood(
                &hub,
                &receivers,
                count as u64,
                args.messages,
                args.window,
                epoch,
            )
            .await;
            let broadcasts = args.messages as f64 / elapsed.as_secs_f64();
            let dropped = one.dropped();
            let name = case.name();
            if args.json {
                println!(
                    "{{\"measure\":\"throughput\",\"case\":\"{name}\",\"receivers\":{count},\"broadcasts_per_s\":{broadcasts:.0},\"deliveries_per_s\":{:.0},\"dropped\":{dropped}}}",
                    broadcasts * count as f64
                );
            } else {
                println!(
                    "| {name} | {count} | {broadcasts:.0} | {:.0} | {dropped} |",
                    broadcasts * count as f64
                );
            }
            drop(receivers.close().await);
            one.stop().await;
            if let Some(two) = two {
                two.stop().await;
            }
        }
    }

    if !args.json {
        println!();
        println!("| case | receivers | rate/s | p50 µs | p90 µs | p99 µs | max µs |");
        println!("|---|---:|---:|---:|---:|---:|---:|");
    }
    let mut p50 = [0.0; 3];
    for (index, case) in Case::ALL.into_iter().enumerate() {
        let prefix = format!("figures-{}-latency-{}", std::process::id(), case.name());
        let (one, two) = case.nodes(&url, &prefix).await?;
        let target = match (&two, case) {
            (Some(two), Case::CrossNode) => two,
            _ => &one,
        };
        let count = args.latency_receivers;
        let receivers = Receivers::connect(target.address, count, epoch).await;
        let hub = one.handle.hub();
        await_members(&hub, count).await;
        paced(
            &hub,
            &receivers,
            count as u64,
            args.latency_rate,
            args.seconds,
            epoch,
        )
        .await;
        let latencies = receivers.close().await;
        let name = case.name();
        p50[index] = micros(&latencies, 0.5);
        if args.json {
            println!(
                "{{\"measure\":\"latency\",\"case\":\"{name}\",\"receivers\":{count},\"rate\":{},\"p50_us\":{:.1},\"p90_us\":{:.1},\"p99_us\":{:.1},\"max_us\":{:.1},\"samples\":{}}}",
                args.latency_rate,
                micros(&latencies, 0.5),
                micros(&latencies, 0.9),
                micros(&latencies, 0.99),
                latencies.max() as f64 / 1_000.0,
                latencies.len()
            );
        } else {
            println!(
                "| {name} | {count} | {} | {:.1} | {:.1} | {:.1} | {:.1} |",
                args.latency_rate,
                micros(&latencies, 0.5),
                micros(&latencies, 0.9),
                micros(&latencies, 0.99),
                latencies.max() as f64 / 1_000.0
            );
        }
        one.stop().await;
        if let Some(two) = two {
            two.stop().await;
        }
    }
    if args.json {
        println!(
            "{{\"measure\":\"added_latency\",\"p50_us\":{:.1}}}",
            p50[2] - p50[1]
        );
    } else {
        println!();
        println!(
            "added latency at p50 (cross-node − local): {:.1} µs",
            p50[2] - p50[1]
        );
    }
    drop(own);
    Ok(())
}
