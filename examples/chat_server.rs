//! The chat server: rooms and nicknames over TCP and WebSocket at once.
//!
//! ```text
//! cargo run --release --example chat_server -- --tcp 127.0.0.1:7101 --ws 127.0.0.1:7102
//! cargo run --release --example chat_client -- --tcp 127.0.0.1:7101 --nick ann
//! ```
//!
//! It also serves a chat page at <http://127.0.0.1:7103/> (`--http`): plain
//! HTML and the browser SDK's bundle `sdk-js/dist/ternio.browser.js`,
//! which connects to the WebSocket listener, so people in browsers chat
//! with terminal clients.
//!
//! With `--redis URL`, the server is one node of a cluster: run several
//! (each with its own ports) against one Redis, and users on different
//! nodes share rooms: a nickname is unique in the whole cluster, a room's
//! member list names its members on every node, and each member hears of
//! every join and leave, wherever it happened (see `docs/SCALING.md`):
//!
//! ```text
//! cargo run --release --example chat_server -- --redis redis://127.0.0.1:6379/ --tcp 127.0.0.1:7101 --ws 127.0.0.1:7102 --http 127.0.0.1:7103
//! cargo run --release --example chat_server -- --redis redis://127.0.0.1:6379/ --tcp 127.0.0.1:7201 --ws 127.0.0.1:7202 --http 127.0.0.1:7203
//! ```
//!
//! With `--config FILE`, the settings come from a TOML file: listeners,
//! the server's limits (`[server]`, every key in `docs/CONFIGURATION.md`)
//! and the Redis backplane (`[redis]`). A flag given on the command line
//! wins over the file; `--print-config` shows the settings that apply:
//!
//! ```text
//! cargo run --release --example chat_server -- --config examples/chat_server.toml
//! cargo run --release --example chat_server -- --config examples/chat_server.toml --tcp 127.0.0.1:7201 --print-config
//! ```
//!
//! Everything the chat needs comes from the framework: the hub's name
//! registry keeps the nicknames unique, each connection signs in under its
//! nickname, the hub's groups are the rooms, and the presence hook tells
//! the rooms who joins and who leaves (a closed connection, or a node that
//! stopped answering, included). The service itself lives in
//! `ternio_examples::chat` (`chat::serve`), which the end-to-end tests run
//! too.
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
use std::path::PathBuf;

use clap::Parser;
use ternio::Server;
use ternio::middleware::AuditLog;
use ternio_examples::chat_settings::ChatServerSettings;
use ternio_examples::{chat, web};
use ternio_redis::{ClusterSecret, RedisBackplane, RedisSettings};

/// The environment variable that holds the cluster secret, for `--redis`.
const SECRET_VAR: &str = "TERNIO_CLUSTER_SECRET";

/// Command line of the chat server. A flag given here wins over the
/// settings file of `--config`.
#[derive(Parser)]
#[command(about = "Ternio chat server")]
struct Args {
    /// Print the server's schema (packets, types and handlers, as JSON: see
    /// docs/SCHEMA.md) and exit.
    #[arg(long)]
    schema: bool,
    /// Read the settings from this TOML file (see examples/chat_server.toml);
    /// the flags given here win over it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print the settings that apply (file, flags, defaults) as TOML, and exit.
    #[arg(long)]
    print_config: bool,
    /// Address of the TCP listener [default: 127.0.0.1:7101].
    #[arg(long)]
    tcp: Option<SocketAddr>,
    /// Address of the WebSocket listener (path /ws) [default: 127.0.0.1:7102].
    #[arg(long)]
    ws: Option<SocketAddr>,
    /// Address of the HTTP listener that serves the chat page
    /// (`examples/web/chat/` and `sdk-js/dist/ternio.browser.js`; see `ternio_examples::web`)
    /// [default: 127.0.0.1:7103].
    #[arg(long)]
    http: Option<SocketAddr>,
    /// Log every request (the audit-log middleware).
    #[arg(long)]
    audit: bool,
    /// Serve the server's metrics for Prometheus at `http://ADDR/metrics`.
    #[arg(long)]
    metrics: Option<SocketAddr>,
    /// Join the other nodes that use this Redis (`redis://host:port/`, or
    /// `rediss://` for TLS): rooms span every node. Every node needs the
    /// same cluster secret (at least 16 bytes) in `TERNIO_CLUSTER_SECRET`.
    /// Replaces the `url` of the file's `[redis]` table.
    #[arg(long)]
    redis: Option<String>,
    /// With `--redis` (or a `[redis]` table): the PEM file of the private CA
    /// that signed Redis's TLS certificate.
    #[arg(long)]
    redis_ca: Option<PathBuf>,
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

impl Args {
    /// The settings that apply: the file's (or the defaults), with every
    /// flag given on the command line in place of the file's value.
    fn settings(&self) -> Result<ChatServerSettings, String> {
        let mut settings = match &self.config {
            Some(path) => ChatServerSettings::load(path)?,
            None => ChatServerSettings::default(),
        };
        let listen = &mut settings.listen;
        listen.tcp = self.tcp.unwrap_or(listen.tcp);
        listen.ws = self.ws.unwrap_or(listen.ws);
        listen.http = self.http.unwrap_or(listen.http);
        if !self.trusted_proxies.is_empty() {
            settings.server.trusted_proxies = self.trusted_proxies.clone();
        }
        listen.metrics = self.metrics.or(listen.metrics);
        settings.audit |= self.audit;
        if let Some(url) = &self.redis {
            settings
                .redis
                .get_or_insert_with(RedisSettings::default)
                .url = url.clone();
        }
        if let Some(path) = &self.redis_ca {
            let redis = settings
                .redis
                .as_mut()
                .ok_or("--redis-ca needs --redis URL or a [redis] table in --config")?;
            redis.tls_ca_file = Some(path.clone());
        }
        Ok(settings)
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    ternio_examples::logging::init("info");
    let args = Args::parse();
    if args.schema {
        print!("{}", chat::serve(Server::builder()).schema()?.to_json());
        return Ok(());
    }
    let settings = match args.settings() {
        Ok(settings) => settings,
        Err(error) => {
            // Printed as it is: a mistake in the file comes with its line.
            eprintln!("chat_server: {error}");
            std::process::exit(2);
        }
    };
    if args.print_config {
        print!("{}", settings.to_toml());
        return Ok(());
    }
    let proxies = settings.server.trusted_proxies.clone();
    let mut builder = chat::serve(Server::builder())
        .config(settings.server)
        .map_tcp(settings.listen.tcp)
        .map_websocket(settings.listen.ws, "/ws");
    if settings.audit {
        builder = builder.middleware(AuditLog);
    }
    if let Some(address) = args.health {
        builder = builder.health(address);
    }
    if let Some(address) = settings.listen.metrics {
        println!("metrics on http://{address}/metrics");
        builder = builder.prometheus(address);
    }
    let backplane = match settings.redis {
        Some(redis) => {
            let secret = std::env::var(SECRET_VAR)
                .map_err(|_| format!("the Redis backplane (--redis or [redis]) needs the cluster secret in {SECRET_VAR}"))?;
            let url = redis.url.clone();
            let backplane =
                RedisBackplane::connect(redis.into_config(ClusterSecret::new(secret)?)?).await?;
            println!("node {} of the cluster on {url}", backplane.node_id());
            Some(backplane)
        }
        None => None,
    };
    if let Some(backplane) = &backplane {
        builder = builder.backplane(backplane.clone());
    }
    let server = builder.build()?;
    // Ctrl-C or SIGTERM: every connection gets DISCONNECT SHUTDOWN. Installed
    // before the addresses are printed: from then on, a SIGTERM stops cleanly.
    let stop = ternio::shutdown_signal();
    for address in server.tcp_addrs() {
        println!("chat over tcp on {address}");
    }
    for address in server.websocket_addrs() {
        println!("chat over websocket on ws://{address}/ws");
    }
    if let Some(address) = server.health_addr() {
        println!("health checks on http://{address}/readyz");
    }
    for proxy in &proxies {
        println!("PROXY protocol headers read from {proxy}");
    }
    // The page is told the WebSocket port to connect to (config.json).
    let mut websocket = server.websocket_addrs()[0];
    if let Some(port) = args.page_ws_port {
        websocket.set_port(port);
    }
    let page = web::chat_site(websocket, "/ws");
    let http = tokio::net::TcpListener::bind(settings.listen.http).await?;
    println!("chat page on http://{}/", http.local_addr()?);
    tokio::spawn(web::serve(http, page));
    server.run_until(stop).await?;
    if let Some(backplane) = backplane {
        backplane.shutdown().await;
    }
    tracing::info!("chat server stopped");
    Ok(())
}
