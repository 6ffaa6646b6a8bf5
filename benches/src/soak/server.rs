//! The server under test: the release `echo_server` example, run with its
//! defaults as a child process, on ports the kernel picks on 127.0.0.1.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};

use crate::usage;

/// A running `echo_server`. Killed when dropped.
pub struct EchoServer {
    process: Child,
    /// Kept open so that the server's prints never block on a full pipe.
    _stdout: Option<std::thread::JoinHandle<()>>,
    /// Its TCP listener.
    pub tcp: SocketAddr,
    /// Its WebSocket listener (path `/ws`).
    pub ws: SocketAddr,
    /// Its public key (32 bytes).
    pub public_key: [u8; 32],
}

/// Where the example is built: `target/release/examples/echo_server`, next
/// to this harness's binary.
pub fn default_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find the harness binary")?;
    let dir = exe.parent().context("the harness binary has no folder")?;
    Ok(dir.join("examples").join("echo_server"))
}

impl EchoServer {
    /// Starts `binary --tcp 127.0.0.1:0 --ws 127.0.0.1:0` (nothing else: the
    /// defaults are what is tested), its log going to `log`, and waits for
    /// its listeners and key.
    pub fn spawn(binary: &Path, log: &Path) -> Result<Self> {
        if !binary.exists() {
            bail!(
                "{} is missing: build it with `cargo build --release -p ternio-examples --example echo_server`",
                binary.display()
            );
        }
        let log = std::fs::File::create(log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        let mut process = Command::new(binary)
            .args(["--tcp", "127.0.0.1:0", "--ws", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        let stdout = process.stdout.take().context("no stdout")?;
        let mut lines = BufReader::new(stdout);
        let (mut tcp, mut ws, mut key) = (None, None, None);
        let mut line = String::new();
        while tcp.is_none() || ws.is_none() || key.is_none() {
            line.clear();
            if lines.read_line(&mut line)? == 0 {
                let status = process.try_wait().ok().flatten();
                bail!("echo_server exited before it listened ({status:?})");
            }
            let line = line.trim();
            if let Some(addr) = line.strip_prefix("tcp listening on ") {
                tcp = Some(addr.parse()?);
            } else if let Some(rest) = line.strip_prefix("websocket listening on ws://") {
                ws = Some(rest.trim_end_matches("/ws").parse()?);
            } else if let Some(hex) = line.strip_prefix("public key: ") {
                key = ternio::protocol::secure::key_from_hex(hex);
            }
        }
        let drain = std::thread::spawn(move || drain(lines));
        Ok(Self {
            process,
            _stdout: Some(drain),
            tcp: tcp.unwrap_or_else(|| unreachable!()),
            ws: ws.unwrap_or_else(|| unreachable!()),
            public_key: key.unwrap_or_else(|| unreachable!()),
        })
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.process.id()
    }

    /// Whether it is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.process.try_wait(), Ok(None))
    }
}

fn drain(mut lines: BufReader<ChildStdout>) {
    let mut line = String::new();
    while lines.read_line(&mut line).unwrap_or(0) > 0 {
        line.clear();
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// Samples a process's resident memory on a thread until stopped.
pub struct RssSampler {
    samples: Arc<Mutex<Vec<(f64, u64)>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RssSampler {
    /// Reads `VmRSS` of `pid` every `every`, from now.
    pub fn start(pid: u32, every: Duration, started: Instant) -> Self {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = {
            let samples = samples.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut next = Instant::now();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if Instant::now() >= next {
                        let rss = usage::process_status(pid).rss_kib;
                        if rss > 0 {
                            let at = started.elapsed().as_secs_f64();
                            samples
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push((at, rss));
                        }
                        next += every;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        };
        Self {
            samples,
            stop,
            thread: Some(thread),
        }
    }

    /// Stops sampling; returns `(seconds since start, KiB)` pairs.
    pub fn finish(mut self) -> Vec<(f64, u64)> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        std::mem::take(&mut *self.samples.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
