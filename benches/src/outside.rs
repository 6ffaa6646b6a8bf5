//! `ternio-bench outside`: the release `echo_server` example, with its
//! defaults, against the harness's lean raw TCP echo, driven the way a load
//! generator written outside the repository would drive them (issue 27:
//! "p50 ≤ 1.05 × and 64-client throughput ≥ 0.95 × at 32 B and 1 KiB").
//!
//! Unlike `compare`, nothing here is Ternio's: the client writes the frames
//! of docs/PROTOCOL.md by hand (an `Echo`, opcode 0x0001, whose body is a
//! varint length and the payload) and reads each answer with two
//! `read_exact`s, on a tokio multi-thread runtime with its defaults; the
//! CPUs are left to idle as they like (no PM QoS request); the server is
//! the example binary, not a harness child. Each round measures, per size,
//! the p50 of sequential echoes on one connection, then 64 connections in a
//! closed loop, raw first, each server's CPU time per echo from `/proc` (10
//! ms ticks) over the throughput window.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::child::ServerChild;
use crate::participants::{Participant, ServerKind};
use crate::soak::server::{EchoServer, default_binary};
use crate::usage;

/// `ternio-bench outside` options.
#[derive(clap::Args, Debug)]
pub struct OutsideArgs {
    /// Rounds (each: both sizes, both servers).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Sequential echoes timed per latency cell (after 1,000 not timed).
    #[arg(long, default_value_t = 10_000)]
    echoes: usize,
    /// Seconds of each throughput window (after half a second not counted).
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// The echo server binary (default: `examples/echo_server` next to this one).
    #[arg(long)]
    server: Option<PathBuf>,
    /// Where to write `outside.md` and the server's log.
    #[arg(long, default_value = "target/bench-outside")]
    out: PathBuf,
}

/// Connections of the throughput cells.
const CLIENTS: usize = 64;
/// Payload sizes.
const SIZES: [usize; 2] = [32, 1024];

/// What a connection speaks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wire {
    /// A `u32` length and the payload, echoed as is.
    Raw,
    /// Ternio's frames: `u32` length, 7 bytes of header, the body.
    Ternio,
}

/// One connection doing one echo at a time.
struct Connection {
    stream: TcpStream,
    wire: Wire,
    request: Vec<u8>,
    answer: Vec<u8>,
    id: u32,
}

impl Connection {
    async fn open(addr: SocketAddr, wire: Wire, size: usize) -> Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let mut request = Vec::new();
        match wire {
            Wire::Raw => request.extend_from_slice(&(size as u32).to_le_bytes()),
            Wire::Ternio => {
                let mut body = Vec::new();
                let mut len = size;
                while len >= 0x80 {
                    body.push(len as u8 | 0x80);
                    len >>= 7;
                }
                body.push(len as u8);
                request.extend_from_slice(&((7 + body.len() + size) as u32).to_le_bytes());
                request.extend_from_slice(&0x0001u16.to_le_bytes());
                request.push(0); // no flags
                request.extend_from_slice(&0u32.to_le_bytes()); // the id, set per echo
                request.extend_from_slice(&body);
            }
        }
        request.resize(request.len() + size, 0xab);
        Ok(Self {
            stream,
            wire,
            answer: vec![0; request.len()],
            request,
            id: 0,
        })
    }

    /// One echo, checked: the answer's length, and for Ternio its opcode,
    /// `RESPONSE` flag and id.
    async fn echo(&mut self) -> Result<()> {
        if self.wire == Wire::Ternio {
            self.id = self.id.wrapping_add(1).max(1);
            self.request[7..11].copy_from_slice(&self.id.to_le_bytes());
        }
        self.stream.write_all(&self.request).await?;
        let mut len = [0; 4];
        self.stream.read_exact(&mut len).await?;
        let len = u32::from_le_bytes(len) as usize;
        if len + 4 != self.request.len() {
            bail!(
                "an answer of {len} bytes to a request of {}",
                self.request.len() - 4
            );
        }
        self.stream.read_exact(&mut self.answer[..len]).await?;
        if self.wire == Wire::Ternio
            && (self.answer[..2] != [1, 0]
                || self.answer[2] & 1 == 0
                || self.answer[3..7] != self.id.to_le_bytes())
        {
            bail!("not the answer to echo {}", self.id);
        }
        Ok(())
    }
}

/// The p50 of `echoes` sequential echoes, in µs.
async fn p50(addr: SocketAddr, wire: Wire, size: usize, echoes: usize) -> Result<f64> {
    let mut connection = Connection::open(addr, wire, size).await?;
    for _ in 0..1_000 {
        connection.echo().await?;
    }
    let mut times = Vec::with_capacity(echoes);
    for _ in 0..echoes {
        let start = Instant::now();
        connection.echo().await?;
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[echoes / 2])
}

/// Echoes per second of [`CLIENTS`] connections in a closed loop, and the
/// server's CPU time per echo (µs) over the window.
async fn throughput(
    addr: SocketAddr,
    wire: Wire,
    size: usize,
    seconds: f64,
    server: u32,
) -> Result<(f64, f64)> {
    let start = Instant::now() + Duration::from_millis(500);
    let end = start + Duration::from_secs_f64(seconds);
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        tasks.push(tokio::spawn(async move {
            let mut connection = Connection::open(addr, wire, size).await?;
            let mut counted = 0u64;
            loop {
                connection.echo().await?;
                let now = Instant::now();
                if now >= end {
                    return anyhow::Ok(counted);
                }
                counted += u64::from(now >= start);
            }
        }));
    }
    tokio::time::sleep_until(start.into()).await;
    let cpu_before = usage::process_cpu_time(server).unwrap_or_default();
    tokio::time::sleep_until(end.into()).await;
    let cpu = usage::process_cpu_time(server).unwrap_or_default() - cpu_before;
    let mut echoes = 0;
    for task in tasks {
        echoes += task.await??;
    }
    let echoes = echoes.max(1) as f64;
    Ok((echoes / seconds, cpu.as_secs_f64() * 1e6 / echoes))
}

/// One size of one round, both servers.
struct Cell {
    size: usize,
    p50: [f64; 2],
    rate: [f64; 2],
    cpu: [f64; 2],
}

/// Runs `ternio-bench outside`.
pub fn run(args: OutsideArgs) -> Result<()> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let binary = match args.server {
        Some(binary) => binary,
        None => default_binary()?,
    };
    let ternio = EchoServer::spawn(&binary, &args.out.join("server.log"))?;
    let raw = ServerChild::spawn(ServerKind::Echo(Participant::RawTcp), None)?;
    let servers = [
        (raw.endpoint.addr, Wire::Raw, raw.pid()),
        (ternio.tcp, Wire::Ternio, ternio.pid()),
    ];
    let runtime = tokio::runtime::Runtime::new()?;
    let mut cells = Vec::new();
    for round in 1..=args.rounds {
        for size in SIZES {
            let mut cell = Cell {
                size,
                p50: [0.0; 2],
                rate: [0.0; 2],
                cpu: [0.0; 2],
            };
            for (i, &(addr, wire, pid)) in servers.iter().enumerate() {
                cell.p50[i] = runtime.block_on(p50(addr, wire, size, args.echoes))?;
                (cell.rate[i], cell.cpu[i]) =
                    runtime.block_on(throughput(addr, wire, size, args.seconds, pid))?;
            }
            println!(
                "round {round}, {size} B: p50 {:.1} / {:.1} µs ({:.3} ×), {CLIENTS} clients {:.0} / {:.0} echoes/s ({:.3} ×), server CPU {:.1} / {:.1} µs per echo ({:.2} ×)",
                cell.p50[0],
                cell.p50[1],
                cell.p50[1] / cell.p50[0],
                cell.rate[0],
                cell.rate[1],
                cell.rate[1] / cell.rate[0],
                cell.cpu[0],
                cell.cpu[1],
                cell.cpu[1] / cell.cpu[0],
            );
            cells.push(cell);
        }
    }
    let report = report(&cells, &binary);
    let path = args.out.join("outside.md");
    std::fs::write(&path, &report).with_context(|| format!("cannot write {}", path.display()))?;
    print!("{report}");
    Ok(())
}

/// The median of `values`.
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// The table of every round's ratios (Ternio over raw) and their medians.
fn report(cells: &[Cell], binary: &std::path::Path) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n`{}` against the raw TCP echo, ratios Ternio ÷ raw within each round:\n",
        binary.display()
    );
    let _ = writeln!(
        out,
        "| size | p50 | {CLIENTS}-client throughput | server CPU per echo |"
    );
    let _ = writeln!(out, "|---|---|---|---|");
    for size in SIZES {
        let of = |f: &dyn Fn(&Cell) -> f64| -> Vec<f64> {
            cells
                .iter()
                .filter(|cell| cell.size == size)
                .map(f)
                .collect()
        };
        let show = |values: Vec<f64>| {
            let list: Vec<String> = values.iter().map(|v| format!("{v:.3}")).collect();
            format!("{:.3} ({})", median(values), list.join(", "))
        };
        let _ = writeln!(
            out,
            "| {size} B | {} | {} | {} |",
            show(of(&|c| c.p50[1] / c.p50[0])),
            show(of(&|c| c.rate[1] / c.rate[0])),
            show(of(&|c| c.cpu[1] / c.cpu[0])),
        );
    }
    let _ = writeln!(
        out,
        "\nEach cell: the median of the rounds, then each round's ratio."
    );
    out
}
