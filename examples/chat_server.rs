//! The chat server: rooms and nicknames over TCP and WebSocket at once.
//!
//! ```text
//! cargo run --release --example chat_server -- --tcp 127.0.0.1:7101 --ws 127.0.0.1:7102
//! cargo run --release --example chat_client -- --tcp 127.0.0.1:7101 --nick ann
//! ```
//!
//! It also serves a chat page at <http://127.0.0.1:7103/> (`--http`): plain
//! HTML and the browser SDK `sdk-js/ternio.js`, which connects to the
//! WebSocket listener, so people in browsers chat with terminal clients.
//!
//! With `--redis URL`, the server is one node of a cluster: run several
//! (each with its own ports) against one Redis, and users on different
//! nodes share rooms (see `docs/SCALING.md`):
//!
//! ```text
//! cargo run --release --example chat_server -- --redis redis://127.0.0.1:6379/ --tcp 127.0.0.1:7101 --ws 127.0.0.1:7102 --http 127.0.0.1:7103
//! cargo run --release --example chat_server -- --redis redis://127.0.0.1:6379/ --tcp 127.0.0.1:7201 --ws 127.0.0.1:7202 --http 127.0.0.1:7203
//! ```
//!
//! Everything the chat needs comes from the framework: the hub's groups are
//! the rooms, the connection store keeps each connection's nickname and
//! rooms, and the disconnect hook tells the rooms when someone leaves. The
//! service itself lives in `ternio_examples::chat` (`chat::serve`), which
//! the end-to-end tests run too.
//!
//! Behind a load balancer, `--trusted-proxy IP` (once per proxy address)
//! makes the server read the PROXY protocol header (v1 or v2) that the
//! balancer sends first on each connection from that address, so that the
//! server sees, limits and logs the real client; `--health ADDR` answers
//! the balancer's health checks (`GET /readyz`); and `--page-ws-port PORT`
//! tells the chat page to connect to the balancer's WebSocket port rather
//! than this node's. `examples/cluster/run` starts Redis, two such nodes
//! and HAProxy in front of them in one command.

use std::net::{IpAddr, SocketAddr};

use clap::Parser;
use ternio::Server;
use ternio::middleware::AuditLog;
use ternio_examples::{chat, web};
use ternio_redis::{ClusterSecret, RedisBackplane, RedisConfig};

/// The environment variable that holds the cluster secret, for `--redis`.
const SECRET_VAR: &str = "TERNIO_CLUSTER_SECRET";

/// Command line of the chat server.
#[derive(Parser)]
#[command(about = "Ternio chat server")]
struct Args {
    /// Address of the TCP listener.
    #[arg(long, default_value = "127.0.0.1:7101")]
    tcp: SocketAddr,
    /// Address of the WebSocket listener (path /ws).
    #[arg(long, default_value = "127.0.0.1:7102")]
    ws: SocketAddr,
    /// Address of the HTTP listener that serves the chat page
    /// (`examples/web/chat/` and `sdk-js/ternio.js`; see `ternio_examples::web`).
    #[arg(long, default_value = "127.0.0.1:7103")]
    http: SocketAddr,
    /// Log every request (the audit-log middleware).
    #[arg(long)]
    audit: bool,
    /// Serve the server's metrics for Prometheus at `http://ADDR/metrics`.
    #[arg(long)]
    metrics: Option<SocketAddr>,
    /// Join the other nodes that use this Redis (`redis://host:port/`, or
    /// `rediss://` for TLS): rooms span every node. Every node needs the
    /// same cluster secret (at least 16 bytes) in `TERNIO_CLUSTER_SECRET`.
    #[arg(long)]
    redis: Option<String>,
    /// With `--redis`: the PEM file of the private CA that signed Redis's
    /// TLS certificate.
    #[arg(long, requires = "redis")]
    redis_ca: Option<std::path::PathBuf>,
    /// A load balancer's address whose connections start with a PROXY
    /// protocol header naming the real client (repeat for several). Its
    /// connections without one are refused.
    #[arg(long = "trusted-proxy", value_name = "IP")]
    trusted_proxies: Vec<IpAddr>,
    /// Answer health checks over HTTP on this address: `GET /healthz`, and
    /// `GET /readyz` (503 while draining or cut from Redis).
    #[arg(long)]
    health: Option<SocketAddr>,
    /// The WebSocket port the chat page connects to, on the host the page
    /// came from (default: the `--ws` listener's); behind a load balancer,
    /// the balancer's.
    #[arg(long, value_name = "PORT")]
    page_ws_port: Option<u16>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    ternio_examples::logging::init("info");
    let args = Args::parse();
    let mut builder = chat::serve(Server::builder())
        .map_tcp(args.tcp)
        .map_websocket(args.ws, "/ws")
        .trusted_proxies(args.trusted_proxies.iter().copied());
    if args.audit {
        builder = builder.middleware(AuditLog);
    }
    if let Some(address) = args.health {
        builder = builder.health(address);
    }
    if let Some(address) = args.metrics {
        println!("metrics on http://{address}/metrics");
        builder = builder.prometheus(address);
    }
    let backplane = match &args.redis {
        Some(url) => {
            let secret = std::env::var(SECRET_VAR)
                .map_err(|_| format!("--redis needs the cluster secret in {SECRET_VAR}"))?;
            let mut config = RedisConfig::new(url, ClusterSecret::new(secret)?);
            if let Some(path) = &args.redis_ca {
                config = config.tls_ca_certificate(std::fs::read(path)?);
            }
            Some(RedisBackplane::connect(config).await?)
        }
        None => None,
    };
    if let Some(backplane) = &backplane {
        println!(
            "node {} of the cluster on {}",
            backplane.node_id(),
            args.redis.as_deref().unwrap_or_default()
        );
        builder = builder.backplane(backplane.clone());
    }
    let server = builder.build()?;
    for address in server.tcp_addrs() {
        println!("chat over tcp on {address}");
    }
    for address in server.websocket_addrs() {
        println!("chat over websocket on ws://{address}/ws");
    }
    if let Some(address) = server.health_addr() {
        println!("health checks on http://{address}/readyz");
    }
    for proxy in &args.trusted_proxies {
        println!("PROXY protocol headers read from {proxy}");
    }
    // The page is told the WebSocket port to connect to (config.json).
    let mut websocket = server.websocket_addrs()[0];
    if let Some(port) = args.page_ws_port {
        websocket.set_port(port);
    }
    let page = web::chat_site(websocket, "/ws");
    let http = tokio::net::TcpListener::bind(args.http).await?;
    println!("chat page on http://{}/", http.local_addr()?);
    tokio::spawn(web::serve(http, page));
    // Ctrl-C or SIGTERM: every connection gets DISCONNECT SHUTDOWN.
    server.run_until(ternio::shutdown_signal()).await?;
    if let Some(backplane) = backplane {
        backplane.shutdown().await;
    }
    tracing::info!("chat server stopped");
    Ok(())
}
