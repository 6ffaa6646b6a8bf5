//! `ternio-bench streams`: streams (issue 30, docs/PROTOCOL.md section
//! 4.5) against a raw socket doing the same, quoted by docs/benchmarks.md.
//!
//! The servers run in a child process of this binary (`streams-server`,
//! hidden), the clients here, over TCP on loopback:
//!
//! - **Bytes**: 100 MiB from the server. Ternio: a request answered by a
//!   byte stream (`StreamReply::bytes` over a reader of zeros, 64 KiB
//!   chunks, credit 32 chunks), read with `Client::request_stream`; plain
//!   and sealed. Raw: the server reads the same reader of zeros into a
//!   64 KiB buffer and writes it, the client reads into a 64 KiB buffer.
//! - **64 B items**: 1,000,000 items of 64 bytes from the server. Ternio: a
//!   stream of a packet holding `[u8; 64]`; raw: each item a u32 length
//!   prefix and 64 bytes, read with a buffered reader, one item at a time.
//!
//! Each cell is the best of three runs (the transfer's wall time), on one
//! connection.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use futures_util::StreamExt;
use ternio::{Chunk, Packet, Server, StreamReply, StreamRequest, packet_controller};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader as AsyncBufReader};
use tokio::net::{TcpListener, TcpStream};

/// The command line of `ternio-bench streams`.
#[derive(clap::Args)]
pub struct StreamsArgs {
    /// A tenth of the bytes and items.
    #[arg(long)]
    quick: bool,
    /// Where to write `streams.md`.
    #[arg(long, default_value = "target/bench-streams")]
    out: PathBuf,
}

/// 0x0B01: `len` bytes, as a byte stream.
#[derive(Debug, Clone, Packet)]
#[packet(opcode = 0x0B01, response = ())]
struct Download {
    len: u64,
}

impl StreamRequest for Download {
    type Item = Chunk;
}

/// 0x0B02: `count` items of 64 bytes.
#[derive(Debug, Clone, Packet)]
#[packet(opcode = 0x0B02, response = ())]
struct Items {
    count: u64,
}

impl StreamRequest for Items {
    type Item = Item;
}

/// 0x0B03: one 64-byte item.
#[derive(Debug, Clone, Packet)]
#[packet(opcode = 0x0B03)]
struct Item {
    data: [u8; 64],
}

#[derive(Default)]
struct Streams;

#[packet_controller(explicit)]
impl Streams {
    fn download(request: Download) -> StreamReply<Chunk> {
        StreamReply::bytes(tokio::io::repeat(0).take(request.len))
    }

    fn items(request: Items) -> StreamReply<Item> {
        let items = (0..request.count).map(|n| {
            let mut data = [0u8; 64];
            data[..8].copy_from_slice(&n.to_le_bytes());
            Item { data }
        });
        StreamReply::new(futures_util::stream::iter(items))
    }
}

/// Runs the servers' child: a Ternio server and a raw TCP server, on
/// loopback; prints `ready TERNIO RAW`, serves until stdin closes.
pub fn serve() -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let server = Server::builder()
            .discover_controllers(false)
            .controller(Streams)
            .identity(ternio::Identity::generate())
            .map_tcp("127.0.0.1:0")
            .build()?;
        let ternio_addr = server.tcp_addrs()[0];
        tokio::spawn(server.run());
        let raw = TcpListener::bind("127.0.0.1:0").await?;
        let raw_addr = raw.local_addr()?;
        tokio::spawn(async move {
            while let Ok((socket, _)) = raw.accept().await {
                tokio::spawn(raw_serve(socket));
            }
        });
        println!("ready {ternio_addr} {raw_addr}");
        let mut stdin = tokio::io::stdin();
        let mut sink = [0u8; 64];
        while stdin.read(&mut sink).await.unwrap_or(0) > 0 {}
        Ok(())
    })
}

/// The raw server: a command of 9 bytes (kind, then a u64), answered by
/// that many bytes (kind 0) or 64-byte items with a u32 prefix (kind 1).
async fn raw_serve(mut socket: TcpStream) -> std::io::Result<()> {
    socket.set_nodelay(true)?;
    let mut command = [0u8; 9];
    while socket.read_exact(&mut command).await.is_ok() {
        let n = u64::from_le_bytes(command[1..].try_into().expect("8 bytes"));
        if command[0] == 0 {
            // From the same source as Ternio's handler: a reader of zeros,
            // read into a 64 KiB buffer and written.
            let mut reader = tokio::io::repeat(0).take(n);
            let mut block = vec![0u8; 64 * 1024];
            loop {
                let len = reader.read(&mut block).await?;
                if len == 0 {
                    break;
                }
                socket.write_all(&block[..len]).await?;
            }
        } else {
            // Items batched into 64 KiB writes, as Ternio's outbound buffer does.
            let mut out = Vec::with_capacity(64 * 1024 + 68);
            for i in 0..n {
                out.extend_from_slice(&64u32.to_le_bytes());
                let mut data = [0u8; 64];
                data[..8].copy_from_slice(&i.to_le_bytes());
                out.extend_from_slice(&data);
                if out.len() >= 64 * 1024 {
                    socket.write_all(&out).await?;
                    out.clear();
                }
            }
            socket.write_all(&out).await?;
        }
    }
    Ok(())
}

/// The servers' child; killed when dropped.
struct Servers {
    child: Child,
    ternio: SocketAddr,
    raw: SocketAddr,
}

impl Drop for Servers {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Servers {
    fn spawn() -> Result<Self> {
        let mut child = Command::new(std::env::current_exe()?)
            .arg("streams-server")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("cannot start the streams server child")?;
        let mut stdout = BufReader::new(child.stdout.take().context("the child's stdout")?);
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        let words: Vec<&str> = line.split_whitespace().collect();
        let ["ready", ternio, raw] = words.as_slice() else {
            bail!("the streams server child said {line:?} instead of ready");
        };
        Ok(Self {
            ternio: ternio.parse()?,
            raw: raw.parse()?,
            child,
        })
    }
}

/// One row: what moved and how long it took at best.
struct Row {
    what: &'static str,
    participant: &'static str,
    best: Duration,
    /// Bytes (or items) moved per run.
    amount: u64,
}

async fn best_of<F, Fut>(runs: usize, mut run: F) -> Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let mut best = Duration::MAX;
    for _ in 0..runs {
        let started = Instant::now();
        run().await?;
        best = best.min(started.elapsed());
    }
    Ok(best)
}

async fn ternio_client(address: SocketAddr, secure: bool) -> Result<ternio_client::Client> {
    let client = ternio_client::Client::connect_tcp(address).await?;
    if secure {
        client.handshake(None).await?;
    }
    Ok(client)
}

async fn ternio_bytes(client: &ternio_client::Client, len: u64) -> Result<()> {
    let mut stream = client.request_stream(&Download { len }).await?;
    let mut received = 0u64;
    while let Some(chunk) = stream.next().await {
        received += chunk?.data.len() as u64;
    }
    anyhow::ensure!(received == len, "received {received} of {len} bytes");
    Ok(())
}

async fn ternio_items(client: &ternio_client::Client, count: u64) -> Result<()> {
    let mut stream = client.request_stream(&Items { count }).await?;
    let mut received = 0u64;
    while let Some(item) = stream.next().await {
        let item = item?;
        anyhow::ensure!(
            item.data[..8] == received.to_le_bytes(),
            "items out of order"
        );
        received += 1;
    }
    anyhow::ensure!(received == count, "received {received} of {count} items");
    Ok(())
}

async fn raw_bytes(socket: &mut TcpStream, len: u64) -> Result<()> {
    let mut command = [0u8; 9];
    command[1..].copy_from_slice(&len.to_le_bytes());
    socket.write_all(&command).await?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut received = 0u64;
    while received < len {
        let n = socket.read(&mut buf).await?;
        anyhow::ensure!(n > 0, "the raw server closed");
        received += n as u64;
    }
    Ok(())
}

async fn raw_items(socket: &mut AsyncBufReader<TcpStream>, count: u64) -> Result<()> {
    let mut command = [1u8; 9];
    command[1..].copy_from_slice(&count.to_le_bytes());
    socket.get_mut().write_all(&command).await?;
    let mut prefix = [0u8; 4];
    let mut data = [0u8; 64];
    for n in 0..count {
        socket.read_exact(&mut prefix).await?;
        anyhow::ensure!(
            u32::from_le_bytes(prefix) == 64,
            "a raw item of another size"
        );
        socket.read_exact(&mut data).await?;
        anyhow::ensure!(data[..8] == n.to_le_bytes(), "raw items out of order");
    }
    Ok(())
}

/// Runs `ternio-bench streams`.
pub fn run(args: StreamsArgs) -> Result<()> {
    let servers = Servers::spawn()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let scale = if args.quick { 10 } else { 1 };
    let len = 100 * 1024 * 1024 / scale;
    let count = 1_000_000 / scale;
    let runs = 3;
    let rows = runtime.block_on(async {
        let mut rows = Vec::new();
        let mut raw = TcpStream::connect(servers.raw).await?;
        raw.set_nodelay(true)?;
        rows.push(Row {
            what: "bytes",
            participant: "raw TCP",
            best: {
                let mut best = Duration::MAX;
                for _ in 0..runs {
                    let started = Instant::now();
                    raw_bytes(&mut raw, len).await?;
                    best = best.min(started.elapsed());
                }
                best
            },
            amount: len,
        });
        for (secure, participant) in [(false, "ternio stream"), (true, "ternio stream, sealed")] {
            let client = ternio_client(servers.ternio, secure).await?;
            rows.push(Row {
                what: "bytes",
                participant,
                best: best_of(runs, || ternio_bytes(&client, len)).await?,
                amount: len,
            });
        }
        let mut raw = AsyncBufReader::with_capacity(64 * 1024, raw);
        rows.push(Row {
            what: "64 B items",
            participant: "raw TCP",
            best: {
                let mut best = Duration::MAX;
                for _ in 0..runs {
                    let started = Instant::now();
                    raw_items(&mut raw, count).await?;
                    best = best.min(started.elapsed());
                }
                best
            },
            amount: count,
        });
        for (secure, participant) in [(false, "ternio stream"), (true, "ternio stream, sealed")] {
            let client = ternio_client(servers.ternio, secure).await?;
            rows.push(Row {
                what: "64 B items",
                participant,
                best: best_of(runs, || ternio_items(&client, count)).await?,
                amount: count,
            });
        }
        anyhow::Ok(rows)
    })?;
    drop(servers);
    let report = report(&rows, len, count);
    std::fs::create_dir_all(&args.out)?;
    let path = args.out.join("streams.md");
    std::fs::write(&path, &report)?;
    println!("{report}");
    println!("report: {}", path.display());
    Ok(())
}

fn report(rows: &[Row], len: u64, count: u64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Streams on loopback TCP, one connection, best of 3: {} MiB as a byte stream, \
         {count} items of 64 bytes.\n",
        len / (1024 * 1024)
    );
    let _ = writeln!(out, "| transfer | participant | time | rate | vs raw |");
    let _ = writeln!(out, "|---|---|---|---|---|");
    let mut raw_rate = 0.0;
    for row in rows {
        let seconds = row.best.as_secs_f64();
        let (rate, text) = if row.what == "bytes" {
            let rate = row.amount as f64 / (1024.0 * 1024.0) / seconds;
            (rate, format!("{rate:.0} MiB/s"))
        } else {
            let rate = row.amount as f64 / seconds;
            (rate, format!("{:.2} M items/s", rate / 1e6))
        };
        if row.participant == "raw TCP" {
            raw_rate = rate;
        }
        let _ = writeln!(
            out,
            "| {} | {} | {:.0} ms | {} | {:.2} × |",
            row.what,
            row.participant,
            seconds * 1000.0,
            text,
            rate / raw_rate
        );
    }
    out
}
