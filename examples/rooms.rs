//! The room game of `docs/GUIDE.md`: log in, join a room, step around a
//! board; every move is pushed to the room. Over TCP, WebSocket and a
//! browser page at <http://127.0.0.1:7303/>.
//!
//! ```text
//! cargo run --release --example rooms
//! ROOMS_ADMIN_TOKEN=s3cret cargo run --release --example rooms -- --metrics 127.0.0.1:9101
//! ```
//!
//! With `--redis URL` (and the cluster secret in `TERNIO_CLUSTER_SECRET`),
//! the server is one node of a cluster: run two with their own ports
//! against one Redis, and players on both share rooms (see the guide's
//! last chapter). The game itself is `ternio_examples::rooms`.

use std::net::SocketAddr;

use clap::Parser;
use ternio::Server;
use ternio_examples::{rooms, web};
use ternio_redis::{ClusterSecret, RedisBackplane, RedisConfig};

/// Command line of the room game's server.
#[derive(Parser)]
#[command(about = "Ternio room game (docs/GUIDE.md)")]
struct Args {
    /// Print the server's schema (packets, types and handlers, as JSON: see
    /// docs/SCHEMA.md) and exit.
    #[arg(long)]
    schema: bool,
    /// Address of the TCP listener.
    #[arg(long, default_value = "127.0.0.1:7301")]
    tcp: SocketAddr,
    /// Address of the WebSocket listener (path /ws).
    #[arg(long, default_value = "127.0.0.1:7302")]
    ws: SocketAddr,
    /// Address of the HTTP listener that serves the page (`examples/web/rooms/`).
    #[arg(long, default_value = "127.0.0.1:7303")]
    http: SocketAddr,
    /// Serve Prometheus metrics at `http://ADDR/metrics`.
    #[arg(long)]
    metrics: Option<SocketAddr>,
    /// Join the other nodes that use this Redis (`redis://host:port/`); the
    /// cluster secret (16 bytes or more) is read from `TERNIO_CLUSTER_SECRET`.
    #[arg(long)]
    redis: Option<String>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    ternio_examples::logging::init("info");
    let args = Args::parse();
    let settings = rooms::Settings {
        admin_token: std::env::var("ROOMS_ADMIN_TOKEN")
            .ok()
            .filter(|t| !t.is_empty()),
    };
    if args.schema {
        print!(
            "{}",
            rooms::serve(Server::builder(), settings)
                .schema()?
                .to_json()
        );
        return Ok(());
    }
    let mut builder = rooms::serve(Server::builder(), settings)
        .map_tcp(args.tcp)
        .map_websocket(args.ws, "/ws");
    if let Some(address) = args.metrics {
        println!("metrics on http://{address}/metrics");
        builder = builder.prometheus(address);
    }
    let backplane = match &args.redis {
        Some(url) => {
            let secret = std::env::var("TERNIO_CLUSTER_SECRET")
                .map_err(|_| "--redis needs the cluster secret in TERNIO_CLUSTER_SECRET")?;
            let config = RedisConfig::new(url, ClusterSecret::new(secret)?);
            let backplane = RedisBackplane::connect(config).await?;
            println!("node {} of the cluster on {url}", backplane.node_id());
            builder = builder.backplane(backplane.clone());
            Some(backplane)
        }
        None => None,
    };
    let server = builder.build()?;
    // Installed before the addresses are printed: from then on, Ctrl-C or
    // SIGTERM stops the server cleanly.
    let stop = ternio::shutdown_signal();
    println!("rooms over tcp on {}", server.tcp_addrs()[0]);
    let ws = server.websocket_addrs()[0];
    println!("rooms over websocket on ws://{ws}/ws");
    let http = tokio::net::TcpListener::bind(args.http).await?;
    println!("rooms page on http://{}/", http.local_addr()?);
    tokio::spawn(web::serve(http, web::rooms_site(ws, "/ws")));
    server.run_until(stop).await?;
    if let Some(backplane) = backplane {
        backplane.shutdown().await;
    }
    tracing::info!("rooms server stopped");
    Ok(())
}
