//! The echo client: sends echoes to `echo_server` and prints round-trip times.
//!
//! ```text
//! cargo run --release --example echo_client -- --tcp 127.0.0.1:7001 --count 10 --size 32
//! cargo run --release --example echo_client -- --ws ws://127.0.0.1:7002/ws
//! ```
//!
//! With `--key`, the client pins the server's identity (the `public key:`
//! line `echo_server` prints), runs an `NK` handshake, and then every
//! request is sealed; it echoes `SecureEcho` (0x0002, which the server only
//! answers when encrypted) as well as `Echo`:
//!
//! ```text
//! cargo run --release --example echo_client -- --tcp 127.0.0.1:7001 --key 8f40c5ad…
//! ```
//!
//! Ctrl-C or SIGTERM stops it early: it prints `stopping` and exits with
//! code 0 (dropping its client closes the connection).

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use ternio_client::protocol::secure::key_from_hex;
use ternio_client::{Bytes, Client, ClientError};
use ternio_examples::echo::{Echo, SecureEcho};

/// Command line of the echo client.
#[derive(Parser)]
#[command(about = "Ternio echo client")]
struct Args {
    /// Address of the server's TCP listener (unless `--ws` is given).
    #[arg(long, default_value = "127.0.0.1:7001")]
    tcp: SocketAddr,
    /// Connect over WebSocket to this URL instead, such as `ws://127.0.0.1:7002/ws`.
    #[arg(long)]
    ws: Option<String>,
    /// The server's public key (64 hex digits, as `echo_server` prints it):
    /// run an NK handshake pinning it, seal everything, and echo
    /// `SecureEcho` too.
    #[arg(long)]
    key: Option<String>,
    /// How many echoes to send.
    #[arg(long, default_value_t = 10)]
    count: usize,
    /// Payload size in bytes.
    #[arg(long, default_value_t = 32)]
    size: usize,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let stop = ternio::shutdown_signal();
    let result = tokio::select! {
        result = run(args) => result,
        () = stop => {
            println!("stopping");
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("echo_client: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let key = match &args.key {
        Some(text) => {
            Some(key_from_hex(text).ok_or("--key wants the server's public key as 64 hex digits")?)
        }
        None => None,
    };
    let client = match &args.ws {
        Some(url) => Client::connect_ws(url).await?,
        None => Client::connect_tcp(args.tcp).await?,
    };
    println!("ping: {:?}", client.ping().await?);
    if let Some(key) = &key {
        let started = Instant::now();
        match client.handshake(Some(key)).await {
            Ok(()) => println!("NK handshake: {:?}", started.elapsed()),
            Err(error @ ClientError::KeyRejected(_)) => {
                return Err(format!(
                    "{error} (check --key against the server's `public key:` line)"
                )
                .into());
            }
            Err(error) => return Err(error.into()),
        }
    }
    let payload = Bytes::from(vec![0xAB; args.size]);
    for i in 0..args.count {
        let started = Instant::now();
        let reply: Echo = client
            .request_async(&Echo {
                payload: payload.clone(),
            })
            .await?;
        if reply.payload != payload {
            return Err("the server echoed other bytes".into());
        }
        println!(
            "echo {i}: {} bytes in {:?}{}",
            reply.payload.len(),
            started.elapsed(),
            if key.is_some() { " (sealed)" } else { "" }
        );
        if key.is_some() {
            let started = Instant::now();
            let reply: SecureEcho = client
                .request_async(&SecureEcho {
                    payload: payload.clone(),
                })
                .await?;
            if reply.payload != payload {
                return Err("the server echoed other bytes".into());
            }
            println!(
                "secure echo {i}: {} bytes in {:?}",
                reply.payload.len(),
                started.elapsed()
            );
        }
    }
    client.close().await;
    Ok(())
}
