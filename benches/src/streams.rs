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
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
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
    /// Only this transfer (`bytes` or `items`).
    #[arg(long)]
    only: Option<String>,
    /// Runs per cell (the best is kept).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Fail (exit non-zero) when a Ternio row makes less than
    /// [`TARGET`] × its raw row's rate.
    #[arg(long)]
    check: bool,
}

/// Issue 30's target: a Ternio stream makes at least this share of the raw
/// socket's rate doing the same (a sealed row against the raw sealed row).
const TARGET: f64 = 0.8;

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
        let mut sealer = (command[0] >= 2).then(RawSealer::new);
        if command[0] == 0 || command[0] == 2 {
            // From the same source as Ternio's handler: a reader of zeros,
            // read into a 64 KiB buffer and written.
            let mut reader = tokio::io::repeat(0).take(n);
            let mut block = vec![0u8; 64 * 1024];
            loop {
                let len = reader.read(&mut block).await?;
                if len == 0 {
                    break;
                }
                match sealer.as_mut() {
                    Some(sealer) => sealer.write(&mut socket, &block[..len]).await?,
                    None => socket.write_all(&block[..len]).await?,
                }
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
                    match sealer.as_mut() {
                        Some(sealer) => sealer.write(&mut socket, &out).await?,
                        None => socket.write_all(&out).await?,
                    }
                    out.clear();
                }
            }
            match sealer.as_mut() {
                Some(sealer) => sealer.write(&mut socket, &out).await?,
                None => socket.write_all(&out).await?,
            }
        }
    }
    Ok(())
}

/// The key both raw sealed ends use (a benchmark, not a session).
const RAW_KEY: [u8; 32] = [7; 32];

/// What a lean raw socket does to encrypt a stream: records of up to
/// 64 KiB, each a u32 length, then the bytes sealed with ChaCha20-Poly1305
/// (ring, the same BoringSSL assembly as Ternio's AWS-LC backend) and the
/// tag, under a counter nonce.
struct RawSealer {
    key: LessSafeKey,
    counter: u64,
    record: Vec<u8>,
}

impl RawSealer {
    fn new() -> Self {
        Self {
            key: LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &RAW_KEY).expect("a key")),
            counter: 0,
            record: Vec::with_capacity(4 + 64 * 1024 + 16 + 68),
        }
    }

    fn nonce(&mut self) -> Nonce {
        self.counter += 1;
        let mut nonce = [0u8; 12];
        nonce[4..].copy_from_slice(&self.counter.to_le_bytes());
        Nonce::assume_unique_for_key(nonce)
    }

    /// Seals `plain` as one record and writes it.
    async fn write(&mut self, socket: &mut TcpStream, plain: &[u8]) -> std::io::Result<()> {
        let nonce = self.nonce();
        self.record.clear();
        self.record.extend_from_slice(
            &u32::try_from(plain.len() + 16)
                .expect("a record")
                .to_le_bytes(),
        );
        self.record.extend_from_slice(plain);
        let tag = self
            .key
            .seal_in_place_separate_tag(nonce, Aad::empty(), &mut self.record[4..])
            .expect("sealed");
        self.record.extend_from_slice(tag.as_ref());
        socket.write_all(&self.record).await
    }

    /// Reads one record into `record` and opens it; returns its plain length.
    async fn read(
        &mut self,
        socket: &mut (impl tokio::io::AsyncRead + Unpin),
        record: &mut Vec<u8>,
    ) -> Result<usize> {
        let mut len = [0u8; 4];
        socket.read_exact(&mut len).await?;
        let len = u32::from_le_bytes(len) as usize;
        anyhow::ensure!(
            (16..=64 * 1024 + 16 + 68).contains(&len),
            "a raw record of {len} bytes"
        );
        record.resize(len, 0);
        socket.read_exact(record).await?;
        let nonce = self.nonce();
        let plain = self
            .key
            .open_in_place(nonce, Aad::empty(), record)
            .map_err(|_| anyhow::anyhow!("a raw record that does not open"))?;
        Ok(plain.len())
    }
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

impl Row {
    /// Whether this is a raw socket's row, which the rows after it are
    /// compared with.
    fn is_raw(&self) -> bool {
        self.participant.starts_with("raw TCP")
    }
}

/// The shortest of `runs` runs of a transfer (an `async` expression giving
/// `Result<()>`, evaluated again for each run).
macro_rules! best {
    ($runs:expr, $transfer:expr) => {{
        let mut best = Duration::MAX;
        for _ in 0..$runs {
            let started = Instant::now();
            $transfer.await?;
            best = best.min(started.elapsed());
        }
        best
    }};
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
    command(socket, 0, len).await?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut received = 0u64;
    while received < len {
        let n = socket.read(&mut buf).await?;
        anyhow::ensure!(n > 0, "the raw server closed");
        received += n as u64;
    }
    Ok(())
}

async fn raw_items(socket: &mut AsyncBufReader<&mut TcpStream>, count: u64) -> Result<()> {
    command(socket.get_mut(), 1, count).await?;
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

/// Asks the raw server for `n` bytes or items of `kind` (0 bytes, 1 items,
/// 2 sealed bytes, 3 sealed items).
async fn command(socket: &mut TcpStream, kind: u8, n: u64) -> std::io::Result<()> {
    let mut command = [kind; 9];
    command[1..].copy_from_slice(&n.to_le_bytes());
    socket.write_all(&command).await
}

/// The raw sealed byte stream: records opened as they come.
async fn raw_sealed_bytes(socket: &mut TcpStream, len: u64) -> Result<()> {
    command(socket, 2, len).await?;
    let mut opener = RawSealer::new();
    let mut record = Vec::with_capacity(64 * 1024 + 16);
    let mut received = 0u64;
    while received < len {
        received += opener.read(socket, &mut record).await? as u64;
    }
    Ok(())
}

/// The raw sealed items: records opened, then their items parsed.
async fn raw_sealed_items(socket: &mut TcpStream, count: u64) -> Result<()> {
    command(socket, 3, count).await?;
    let mut opener = RawSealer::new();
    let mut record = Vec::with_capacity(64 * 1024 + 16 + 68);
    let mut n = 0u64;
    while n < count {
        let plain = opener.read(socket, &mut record).await?;
        for item in record[..plain].chunks(68) {
            anyhow::ensure!(
                item.len() == 68 && item[..4] == 64u32.to_le_bytes(),
                "a raw item of another size"
            );
            anyhow::ensure!(item[4..12] == n.to_le_bytes(), "raw items out of order");
            n += 1;
        }
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
    let runs = args.runs.max(1);
    let wanted = |what: &str| args.only.as_deref().is_none_or(|only| only == what);
    let rows = runtime.block_on(async {
        let mut rows = Vec::new();
        let mut raw = TcpStream::connect(servers.raw).await?;
        raw.set_nodelay(true)?;
        let plain = ternio_client(servers.ternio, false).await?;
        let sealed = ternio_client(servers.ternio, true).await?;
        if wanted("bytes") {
            let mut cell = |participant, best| {
                rows.push(Row {
                    what: "bytes",
                    participant,
                    best,
                    amount: len,
                });
            };
            cell("raw TCP", best!(runs, raw_bytes(&mut raw, len)));
            cell("ternio stream", best!(runs, ternio_bytes(&plain, len)));
            let best = best!(runs, raw_sealed_bytes(&mut raw, len));
            cell("raw TCP, sealed", best);
            let best = best!(runs, ternio_bytes(&sealed, len));
            cell("ternio stream, sealed", best);
        }
        if wanted("items") {
            let mut cell = |participant, best| {
                rows.push(Row {
                    what: "64 B items",
                    participant,
                    best,
                    amount: count,
                });
            };
            let mut buffered = AsyncBufReader::with_capacity(64 * 1024, &mut raw);
            cell("raw TCP", best!(runs, raw_items(&mut buffered, count)));
            drop(buffered);
            cell("ternio stream", best!(runs, ternio_items(&plain, count)));
            let best = best!(runs, raw_sealed_items(&mut raw, count));
            cell("raw TCP, sealed", best);
            let best = best!(runs, ternio_items(&sealed, count));
            cell("ternio stream, sealed", best);
        }
        anyhow::Ok(rows)
    })?;
    drop(servers);
    let report = report(&rows, len, count, runs);
    crate::output::save_report(&args.out, "streams.md", &report)?;
    if args.check {
        let short = below_target(&rows);
        if !short.is_empty() {
            bail!("below {TARGET} × raw: {}", short.join(", "));
        }
    }
    Ok(())
}

/// Each row with its rate as a share of the raw row at or before it (a
/// raw row's own is 1).
fn ratios(rows: &[Row]) -> Vec<(&Row, f64)> {
    let mut raw = Duration::ZERO;
    rows.iter()
        .map(|row| {
            if row.is_raw() {
                raw = row.best;
            }
            // Same amount moved: the rate ratio is the inverse time ratio.
            (row, raw.as_secs_f64() / row.best.as_secs_f64())
        })
        .collect()
}

/// The Ternio rows below [`TARGET`] × raw, as `"<transfer>, <participant>:
/// <ratio>"`.
fn below_target(rows: &[Row]) -> Vec<String> {
    ratios(rows)
        .into_iter()
        .filter(|&(row, ratio)| !row.is_raw() && ratio < TARGET)
        .map(|(row, ratio)| format!("{}, {}: {ratio:.2}", row.what, row.participant))
        .collect()
}

fn report(rows: &[Row], len: u64, count: u64, runs: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Streams on loopback TCP, one connection, best of {runs}: {} MiB as a byte stream, \
         {count} items of 64 bytes. A sealed row is compared with the raw sealed row above it \
         (ChaCha20-Poly1305 records of up to 64 KiB).\n",
        len / (1024 * 1024)
    );
    let _ = writeln!(out, "| transfer | participant | time | rate | vs raw |");
    let _ = writeln!(out, "|---|---|---|---|---|");
    for (row, ratio) in ratios(rows) {
        let seconds = row.best.as_secs_f64();
        let rate = if row.what == "bytes" {
            format!(
                "{:.0} MiB/s",
                row.amount as f64 / (1024.0 * 1024.0) / seconds
            )
        } else {
            format!("{:.2} M items/s", row.amount as f64 / seconds / 1e6)
        };
        let _ = writeln!(
            out,
            "| {} | {} | {:.0} ms | {} | {:.2} × |",
            row.what,
            row.participant,
            seconds * 1000.0,
            rate,
            ratio
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(participant: &'static str, millis: u64) -> Row {
        Row {
            what: "64 B items",
            participant,
            best: Duration::from_millis(millis),
            amount: 1_000_000,
        }
    }

    #[test]
    fn each_ternio_row_is_held_to_the_raw_row_before_it() {
        let rows = [
            row("raw TCP", 40),
            row("ternio stream", 49),
            row("raw TCP, sealed", 80),
            row("ternio stream, sealed", 101),
        ];
        // 40/49 = 0.82 passes; 80/101 = 0.79 fails, though it would pass
        // against the plain raw row.
        assert_eq!(
            below_target(&rows),
            ["64 B items, ternio stream, sealed: 0.79"]
        );
        let ratios: Vec<f64> = ratios(&rows).into_iter().map(|(_, r)| r).collect();
        assert_eq!(ratios.len(), 4);
        assert!((ratios[0] - 1.0).abs() < 1e-9, "a raw row against itself");
        assert!((ratios[1] - 40.0 / 49.0).abs() < 1e-9);
        assert!((ratios[3] - 80.0 / 101.0).abs() < 1e-9);
    }
}
