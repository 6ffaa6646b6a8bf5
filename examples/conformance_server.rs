//! The conformance server: scripted behaviours a client written in another
//! language must handle (docs/CONFORMANCE.md is the checklist).
//!
//! ```text
//! cargo run --example conformance_server -- --tcp 127.0.0.1:7401 --ws 127.0.0.1:7402
//! ```
//!
//! Serves the conformance service of `ternio_examples::conformance` over TCP
//! and WebSocket (path `/ws`), with a fixed, public identity key (the
//! secure-session vectors' `00 01 … 1f`: clients pin
//! `8f40c5adb68f25624ae5b214ea767a6ec94d829d3d7b5e1ad1ba6f3e2138285f`), a
//! server `REKEY` every 8 sealed frames, and a server `PING` after half the
//! idle timeout of silence. Never use its key for anything but tests.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use ternio_examples::conformance::{self, conformance_server};

/// Command line of the conformance server.
#[derive(Parser)]
#[command(about = "Ternio conformance server (docs/CONFORMANCE.md)")]
struct Args {
    /// Print the server's schema (docs/SCHEMA.md) and exit.
    #[arg(long)]
    schema: bool,
    /// Address of the TCP listener.
    #[arg(long, default_value = "127.0.0.1:7401")]
    tcp: SocketAddr,
    /// Address of the WebSocket listener (path /ws).
    #[arg(long, default_value = "127.0.0.1:7402")]
    ws: SocketAddr,
    /// Seconds of silence before the server closes a connection with
    /// `DISCONNECT IDLE_TIMEOUT`; it sends a `PING` after half of it.
    #[arg(long, default_value_t = conformance::IDLE_TIMEOUT.as_secs())]
    idle_timeout: u64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    ternio_examples::logging::init("info");
    let args = Args::parse();
    let builder = conformance_server(Duration::from_secs(args.idle_timeout));
    if args.schema {
        print!("{}", builder.schema()?.to_json());
        return Ok(());
    }
    let server = builder
        .map_tcp(args.tcp)
        .map_websocket(args.ws, "/ws")
        .build()?;
    let stop = ternio::shutdown_signal();
    for address in server.tcp_addrs() {
        println!("tcp listening on {address}");
    }
    for address in server.websocket_addrs() {
        println!("websocket listening on ws://{address}/ws");
    }
    println!(
        "public key: {}",
        ternio::Identity::from_private_key(conformance::IDENTITY_PRIVATE_KEY).public_hex()
    );
    server.run_until(stop).await?;
    Ok(())
}
