//! The echo server.
//!
//! ```text
//! cargo run --release --example echo_server -- --tcp 127.0.0.1:7001 --ws 127.0.0.1:7002 --identity server.key
//! ```
//!
//! Serves `Echo` (0x0001) and `SecureEcho` (0x0002, encrypted requests only),
//! and two streams (docs/PROTOCOL.md section 4.5): `CountTo` (0x0004) is
//! answered by the numbers up to its count, `AddUp` (0x0006) sums an upload,
//! over TCP and, with `--ws`, over WebSocket at path `/ws`, until Ctrl-C or
//! SIGTERM (which close every connection with `DISCONNECT SHUTDOWN`; the
//! process exits with code 0 once they are closed). With `--health ADDR`,
//! `/healthz` and `/readyz` answer probes over HTTP there. Sessions can be
//! resumed for 30 s after a lost connection (`--resume-ttl SECS`, 0 for
//! off; docs/PROTOCOL.md section 4.2). With `--udp ADDR`, a client with a
//! secure session can bind a datagram channel (section 4.4): a
//! `DatagramEcho` (0x0003) it sends in a datagram comes back in one.
//! Compressed frames (section 6) are always accepted; with
//! `--compress BYTES`, replies of at least that many bytes go compressed
//! when that makes them smaller (plain and sealed, TCP and WebSocket).
//!
//! With a certificate chain and its key (PEM), it serves TLS too:
//! `--tcp-tls ADDR` (frames inside TLS) and `--wss ADDR` (`wss://ADDR/ws`).
//! SIGHUP reads the two files again (new connections get the new certificate).
//!
//! ```text
//! cargo run --release --example echo_server -- --tcp-tls 127.0.0.1:7443 --wss 127.0.0.1:8443 \
//!     --tls-cert chain.pem --tls-key key.pem
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use futures_util::StreamExt;
use ternio::{
    Context, HandlerError, Identity, Server, StreamReply, TlsConfig, Upload, packet_controller,
};
use ternio_examples::echo::{AddUp, CountTo, DatagramEcho, Echo, Number, SecureEcho, Total};

/// Command line of the echo server.
#[derive(Parser)]
#[command(about = "Ternio echo server")]
struct Args {
    /// Print the server's schema (packets, types and handlers, as JSON: see
    /// docs/SCHEMA.md) and exit.
    #[arg(long)]
    schema: bool,
    /// Address of the TCP listener.
    #[arg(long, default_value = "127.0.0.1:7001")]
    tcp: SocketAddr,
    /// Address of the WebSocket listener (path /ws).
    #[arg(long)]
    ws: Option<SocketAddr>,
    /// Address of the health listener: `GET /healthz` (alive) and
    /// `GET /readyz` (accepting; 503 while shutting down).
    #[arg(long)]
    health: Option<SocketAddr>,
    /// File holding the server's identity key: 64 hex digits, or a PEM
    /// X25519 key from `openssl genpkey -algorithm X25519`. Created (hex,
    /// mode 0600) when missing. Without it, a new key is made for this run
    /// only.
    #[arg(long)]
    identity: Option<PathBuf>,
    /// Address of a TLS listener of frames (needs --tls-cert and --tls-key).
    #[arg(long, requires_all = ["tls_cert", "tls_key"])]
    tcp_tls: Option<SocketAddr>,
    /// Address of a WebSocket listener inside TLS, `wss://ADDR/ws` (needs
    /// --tls-cert and --tls-key).
    #[arg(long, requires_all = ["tls_cert", "tls_key"])]
    wss: Option<SocketAddr>,
    /// PEM file of the TLS certificate chain (the server's first).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM file of the TLS private key.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Seconds a session whose connection was lost waits for its client to
    /// resume it (docs/PROTOCOL.md section 4.2); 0 turns resumption off.
    #[arg(long, default_value_t = 30)]
    resume_ttl: u64,
    /// Address of the UDP listener of datagram channels (docs/PROTOCOL.md
    /// section 4.4).
    #[arg(long)]
    udp: Option<SocketAddr>,
    /// Compress replies whose body is at least this many bytes, when that
    /// makes them smaller (LZ4, docs/PROTOCOL.md section 6). Off when not
    /// given; compressed frames from clients are accepted either way.
    #[arg(long, value_name = "BYTES")]
    compress: Option<usize>,
}

/// Answers both echo packets.
#[derive(Default)]
struct EchoController;

#[packet_controller]
impl EchoController {
    fn echo(request: Echo) -> Echo {
        request
    }

    #[handler(encrypted)]
    fn secure_echo(request: SecureEcho) -> SecureEcho {
        request
    }

    fn datagram_echo(request: DatagramEcho, ctx: &Context) {
        let _ = ctx.send_unreliable(&request);
    }

    fn count_to(request: CountTo) -> StreamReply<Number> {
        let numbers = (0..request.count).map(|value| Number { value });
        StreamReply::new(futures_util::stream::iter(numbers))
    }

    async fn add_up(_request: AddUp, mut upload: Upload<Number>) -> Result<Total, HandlerError> {
        let mut sum = 0;
        while let Some(number) = upload.next().await {
            sum += u64::from(number?.value);
        }
        Ok(Total { sum })
    }
}

/// The echo server's builder: its controller (discovered), and the
/// datagram echo it pushes back, declared for its schema.
fn echo_server() -> ternio::ServerBuilder {
    Server::builder().declare_push::<DatagramEcho>()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    ternio_examples::logging::init("info");
    let args = Args::parse();
    if args.schema {
        print!("{}", echo_server().schema()?.to_json());
        return Ok(());
    }
    // The identity clients pin: loaded from the file, or created there.
    let identity = match &args.identity {
        Some(path) => Identity::load_or_generate(path)?,
        None => Identity::generate(),
    };
    let public_key = identity.public_hex();

    let mut builder = echo_server()
        .identity(identity)
        .map_tcp(args.tcp)
        .compression(args.compress);
    if args.resume_ttl > 0 {
        builder = builder.resumable(Duration::from_secs(args.resume_ttl), 64 * 1024);
    }
    if let Some(ws) = args.ws {
        builder = builder.map_websocket(ws, "/ws");
    }
    if let Some(health) = args.health {
        builder = builder.health(health);
    }
    if let Some(udp) = args.udp {
        builder = builder.map_udp(udp);
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsConfig::from_pem_files(cert, key)?),
        _ => None,
    };
    if let Some(tls) = &tls {
        if let Some(address) = args.tcp_tls {
            builder = builder.map_tcp_tls(address, tls.clone());
        }
        if let Some(address) = args.wss {
            builder = builder.map_websocket_tls(address, "/ws", tls.clone());
        }
    }
    let server = builder.build()?;
    // Installed before the addresses are printed: from then on, a SIGTERM
    // shuts down cleanly.
    let stop = ternio::shutdown_signal();
    for address in server.tcp_addrs() {
        println!("tcp listening on {address}");
    }
    for address in server.websocket_addrs() {
        println!("websocket listening on ws://{address}/ws");
    }
    for address in server.tcp_tls_addrs() {
        println!("tcp-tls listening on {address}");
    }
    for address in server.websocket_tls_addrs() {
        println!("websocket listening on wss://{address}/ws");
    }
    if let Some(address) = server.udp_addr() {
        println!("udp listening on {address}");
    }
    if let Some(address) = server.health_addr() {
        println!("health on http://{address}/healthz and /readyz");
    }
    println!("public key: {public_key}");

    #[cfg(unix)]
    if let Some(tls) = tls {
        tokio::spawn(reload_on_sighup(tls));
    }
    server.run_until(stop).await?;
    tracing::info!("echo server stopped");
    Ok(())
}

/// Reads the TLS certificate and key again on every SIGHUP.
#[cfg(unix)]
async fn reload_on_sighup(tls: TlsConfig) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hangups) = signal(SignalKind::hangup()) else {
        return;
    };
    while hangups.recv().await.is_some() {
        match tls.reload() {
            Ok(()) => tracing::info!("tls certificate reloaded"),
            Err(error) => tracing::error!(%error, "tls certificate not reloaded"),
        }
    }
}
