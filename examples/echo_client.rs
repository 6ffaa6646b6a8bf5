//! The echo client: sends echoes to `echo_server` and prints round-trip times.
//!
//! ```text
//! cargo run --release --example echo_client -- --tcp 127.0.0.1:7001 --count 10 --size 32
//! ```

use std::net::SocketAddr;
use std::time::Instant;

use clap::Parser;
use ternio_client::{Bytes, Client};
use ternio_examples::echo::Echo;

/// Command line of the echo client.
#[derive(Parser)]
#[command(about = "Ternio echo client")]
struct Args {
    /// Address of the server's TCP listener.
    #[arg(long, default_value = "127.0.0.1:7001")]
    tcp: SocketAddr,
    /// How many echoes to send.
    #[arg(long, default_value_t = 10)]
    count: usize,
    /// Payload size in bytes.
    #[arg(long, default_value_t = 32)]
    size: usize,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let client = Client::connect_tcp(args.tcp).await?;
    println!("ping: {:?}", client.ping().await?);
    let payload = Bytes::from(vec![0xAB; args.size]);
    for i in 0..args.count {
        let started = Instant::now();
        let reply: Echo = client
            .request_async(&Echo {
                payload: payload.clone(),
            })
            .await?;
        assert_eq!(reply.payload, payload, "the server echoed other bytes");
        println!(
            "echo {i}: {} bytes in {:?}",
            reply.payload.len(),
            started.elapsed()
        );
    }
    client.close().await;
    Ok(())
}
