//! Server children: each participant's server runs in its own process (this
//! same binary, started as `ternio-bench serve KIND`), so that its CPU time
//! and allocations are its own.
//!
//! The protocol on the child's pipes is line-based. The child prints
//! `ready addr=ADDR [key=HEX]` once it listens, then answers each line on
//! its stdin: `reset` starts a measurement window (`ok`), `report` ends it
//! (`report cpu_us=… allocs=… alloc_bytes=… live_bytes=… connections=…
//! backoffs=… dropped=… backplane_dropped=…`). End of input makes it exit.
//!
//! A child gets what it needs beyond its kind through its environment: the
//! TLS material, and for a backplane node the Redis URL and key prefix.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ::ternio::backplane::Backplane as _;
use anyhow::{Context as _, Result, bail};
use ternio_redis::{ClusterSecret, RedisBackplane, RedisConfig};

use crate::alloc::{AllocDelta, AllocSnapshot};
use crate::participants::{
    self, Endpoint, Listen, Participant, ServerKind, grpc, raw_tcp, raw_ws, ternio,
};
use crate::scenarios::backplane::{REDIS_PREFIX_VAR, REDIS_SECRET_VAR, REDIS_URL_VAR};
use crate::tls::TlsMaterial;
use crate::usage::{self, ProcessStatus};

/// An environment variable holding a command to run the server children
/// under (`valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p`).
pub const PROFILER_VAR: &str = "TERNIO_BENCH_SERVER_PREFIX";

/// How a child counts its open connections, where it can.
type ConnectionCount = Box<dyn Fn() -> Option<usize> + Send>;

/// A backplane node's backplane, for the messages it dropped.
static BACKPLANE: OnceLock<RedisBackplane> = OnceLock::new();

/// Messages the backplane of this child dropped so far (0 without one).
fn backplane_dropped() -> u64 {
    BACKPLANE
        .get()
        .map_or(0, |backplane| backplane.stats().dropped)
}

/// An environment variable choosing the server child's runtime shape (the
/// harness passes its own environment on): `multi` (the default: tokio's
/// multi-thread runtime, one worker per core), `multi:N` (that runtime
/// with N workers), or `current:N` (N threads, each with a current-thread
/// runtime and its own server, all on one port through `SO_REUSEPORT`:
/// for raw-tcp, raw-ws and the unsealed ternio participants). Issue 27,
/// item 4: docs/benchmarks.md, "Runtime choice".
pub const RUNTIME_VAR: &str = "TERNIO_BENCH_RUNTIME";

/// How a server child runs its server(s): see [`RUNTIME_VAR`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeShape {
    /// tokio's multi-thread runtime with this many workers (`None`: one
    /// per core).
    Multi(Option<usize>),
    /// This many threads, each with a current-thread runtime and a server
    /// of its own, sharing one port.
    Current(usize),
}

impl RuntimeShape {
    /// The shape [`RUNTIME_VAR`] asks for.
    pub fn from_env() -> Result<Self> {
        match std::env::var(RUNTIME_VAR) {
            Ok(value) => Self::parse(&value).with_context(|| {
                format!("{RUNTIME_VAR}={value:?}: expected multi, multi:N or current:N")
            }),
            Err(_) => Ok(Self::Multi(None)),
        }
    }

    fn parse(value: &str) -> Option<Self> {
        let count = |n: &str| n.parse::<usize>().ok().filter(|&n| n > 0);
        match value.split_once(':') {
            None if value == "multi" => Some(Self::Multi(None)),
            Some(("multi", n)) => Some(Self::Multi(Some(count(n)?))),
            Some(("current", n)) => Some(Self::Current(count(n)?)),
            _ => None,
        }
    }

    /// How the report names it.
    pub fn describe(self) -> String {
        match self {
            Self::Multi(None) => "tokio multi-thread, one worker per core".to_owned(),
            Self::Multi(Some(n)) => format!("tokio multi-thread, {n} worker(s)"),
            Self::Current(n) => format!(
                "{n} current-thread runtime(s) on {n} thread(s), a server each, one port (SO_REUSEPORT)"
            ),
        }
    }
}

/// Runs the server of `kind` until its stdin closes (the hidden `serve`
/// subcommand), on the runtime shape [`RUNTIME_VAR`] asks for.
pub fn serve(kind: ServerKind) -> Result<()> {
    usage::raise_open_file_limit();
    // A multi-thread runtime keeps serving on its workers while this
    // thread answers the harness; current-thread ones run on threads of
    // their own.
    let (ready, connections, _runtime) = match RuntimeShape::from_env()? {
        RuntimeShape::Multi(workers) => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            if let Some(workers) = workers {
                builder.worker_threads(workers);
            }
            let runtime = builder.enable_all().build()?;
            let (ready, connections) = runtime.block_on(start(kind, Listen::FREE))?;
            (ready, connections, Some(runtime))
        }
        RuntimeShape::Current(threads) => {
            let (ready, connections) = serve_per_thread(kind, threads)?;
            (ready, connections, None)
        }
    };
    let mut stdout = std::io::stdout();
    writeln!(stdout, "{ready}")?;
    stdout.flush()?;
    control_loop(connections)
}

/// Starts `threads` threads, each with a current-thread runtime and its
/// own server of `kind` on one shared port; returns the first one's ready
/// line and the connections of all of them.
fn serve_per_thread(kind: ServerKind, threads: usize) -> Result<(String, ConnectionCount)> {
    let supported = matches!(
        kind,
        ServerKind::Echo(
            Participant::RawTcp
                | Participant::RawWs
                | Participant::TernioTcp
                | Participant::TernioWs
                | Participant::TernioTcpLean
                | Participant::TernioWsLean
        )
    );
    if !supported {
        bail!(
            "{RUNTIME_VAR}=current:N serves raw-tcp, raw-ws and the unsealed ternio echoes, not {}",
            kind.name()
        );
    }
    let mut listen = Listen {
        reuse_port: true,
        ..Listen::FREE
    };
    let mut first_ready = None;
    let mut counts = Vec::with_capacity(threads);
    for index in 0..threads {
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name(format!("server-{index}"))
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(error) => {
                        let _ = sender.send(Err(anyhow::Error::from(error)));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let started = start(kind, listen).await;
                    let _ = sender.send(started);
                    std::future::pending::<()>().await;
                });
            })?;
        let (ready, count) = receiver
            .recv()
            .context("a server thread ended before it started")??;
        if first_ready.is_none() {
            let endpoint = Endpoint::parse_ready(&ready, None)?;
            listen.addr = endpoint.addr;
            first_ready = Some(ready);
        }
        counts.push(count);
    }
    let ready = first_ready.context("current:N needs N > 0")?;
    let connections: ConnectionCount = if matches!(
        kind,
        ServerKind::Echo(Participant::RawTcp | Participant::RawWs)
    ) {
        // The raw servers count in one static, shared by every thread.
        counts.swap_remove(0)
    } else {
        Box::new(move || counts.iter().map(|count| count()).sum())
    };
    Ok((ready, connections))
}

/// Starts the server of `kind` on the current runtime, at `listen` where
/// it binds a listener of its own; returns its ready line and its
/// connection count.
async fn start(kind: ServerKind, listen: Listen) -> Result<(String, ConnectionCount)> {
    let raw_count: ConnectionCount =
        Box::new(|| Some(raw_tcp::CONNECTIONS.load(Ordering::Relaxed)));
    Ok(match kind {
        ServerKind::Echo(Participant::RawTcp) => {
            let listener = participants::bind_loopback_on(listen)?;
            let addr = listener.local_addr()?;
            tokio::spawn(raw_tcp::serve_echo(listener));
            (format!("ready addr={addr}"), raw_count)
        }
        ServerKind::Echo(Participant::RawWs) => {
            let listener = participants::bind_loopback_on(listen)?;
            let addr = listener.local_addr()?;
            tokio::spawn(raw_ws::serve_echo(listener));
            (format!("ready addr={addr}"), raw_count)
        }
        ServerKind::RawTcpPush => {
            let listener = participants::bind_loopback()?;
            let addr = listener.local_addr()?;
            tokio::spawn(raw_tcp::serve_push(listener));
            (format!("ready addr={addr}"), raw_count)
        }
        ServerKind::RawTcpFanout => {
            let listener = participants::bind_loopback()?;
            let addr = listener.local_addr()?;
            tokio::spawn(raw_tcp::serve_fanout(listener));
            (format!("ready addr={addr}"), raw_count)
        }
        ServerKind::Echo(
            participant @ (Participant::TernioTcp
            | Participant::TernioWs
            | Participant::TernioTcpAead
            | Participant::TernioWsAead
            | Participant::TernioTcpLean
            | Participant::TernioTcpResume
            | Participant::TernioWsLean),
        ) => {
            let running = ternio::start_on(participant, None, listen)?;
            let handle = running.handle;
            (
                format!("ready addr={} key={}", running.addr, running.public_key),
                Box::new(move || Some(handle.connection_count())),
            )
        }
        ServerKind::BackplaneNode => {
            let url = std::env::var(REDIS_URL_VAR)
                .with_context(|| format!("a backplane node needs {REDIS_URL_VAR}"))?;
            let prefix = std::env::var(REDIS_PREFIX_VAR)
                .with_context(|| format!("a backplane node needs {REDIS_PREFIX_VAR}"))?;
            let secret = std::env::var(REDIS_SECRET_VAR)
                .with_context(|| format!("a backplane node needs {REDIS_SECRET_VAR}"))?;
            let secret = ClusterSecret::new(secret).context("the cluster secret")?;
            let backplane = RedisBackplane::connect(RedisConfig::new(&url, secret).prefix(prefix))
                .await
                .with_context(|| format!("cannot join the backplane at {url}"))?;
            let running = ternio::start(Participant::TernioTcp, Some(backplane.clone()))?;
            if !backplane.wait_connected(Duration::from_secs(10)).await {
                bail!("the backplane did not connect to {url} within 10 s");
            }
            let _ = BACKPLANE.set(backplane);
            let handle = running.handle;
            (
                format!("ready addr={} key={}", running.addr, running.public_key),
                Box::new(move || Some(handle.connection_count())),
            )
        }
        ServerKind::Echo(
            participant @ (Participant::TonicUnary
            | Participant::TonicDuplex
            | Participant::TonicUnaryTls
            | Participant::TonicDuplexTls),
        ) => {
            let tls = if participant.uses_tls() {
                Some(TlsMaterial::from_env()?)
            } else {
                None
            };
            let addr = grpc::start(tls.as_ref()).await?;
            (format!("ready addr={addr}"), Box::new(|| None))
        }
    })
}

/// Answers `reset` and `report` on stdin until it closes, then exits. Reads
/// into a buffer made beforehand, and takes every figure of a report
/// before formatting it, so the window's allocations are the server's own.
fn control_loop(connections: ConnectionCount) -> Result<()> {
    let stdin = std::io::stdin();
    let mut stdin = stdin.lock();
    let mut stdout = std::io::stdout();
    let mut line = String::with_capacity(256);
    let counters = || {
        (
            ternio::PUSH_BACKOFFS.load(Ordering::Relaxed),
            raw_tcp::DROPPED.load(Ordering::Relaxed),
            backplane_dropped(),
        )
    };
    let mut started = (usage::cpu_time(), AllocSnapshot::now(), counters());
    loop {
        line.clear();
        if stdin.read_line(&mut line).unwrap_or(0) == 0 {
            std::process::exit(0);
        }
        match line.trim() {
            "reset" => {
                started = (usage::cpu_time(), AllocSnapshot::now(), counters());
                writeln!(stdout, "ok")?;
            }
            "report" => {
                let cpu = usage::cpu_time().saturating_sub(started.0);
                let alloc = AllocSnapshot::now();
                let delta = alloc.since(&started.1);
                let (backoffs, dropped, backplane_dropped) = counters();
                let connections = connections().map_or(-1, |n| n as i64);
                writeln!(
                    stdout,
                    "report cpu_us={} allocs={} alloc_bytes={} live_bytes={} connections={} backoffs={} dropped={} backplane_dropped={}",
                    cpu.as_micros(),
                    delta.count,
                    delta.bytes,
                    alloc.live_bytes,
                    connections,
                    backoffs - started.2.0,
                    dropped - started.2.1,
                    backplane_dropped - started.2.2,
                )?;
            }
            "quit" => std::process::exit(0),
            other => bail!("unknown command {other:?}"),
        }
        stdout.flush()?;
    }
}

/// What a server child reported for a window.
#[derive(Debug, Clone, Copy, Default)]
pub struct ServerReport {
    /// CPU time (user + system) of the whole child process.
    pub cpu: Duration,
    /// Allocations the child made.
    pub alloc: AllocDelta,
    /// Bytes allocated and not freed, at the end of the window.
    pub live_bytes: u64,
    /// Open connections, where the server can tell.
    pub connections: Option<usize>,
    /// Ternio push backoffs in the window (push queue full).
    pub backoffs: u64,
    /// Raw fan-out frames dropped in the window (subscriber queue full).
    pub dropped: u64,
    /// Messages a backplane node dropped in the window (its publish queue
    /// full, or its link to Redis down).
    pub backplane_dropped: u64,
}

impl ServerReport {
    fn parse(line: &str) -> Result<Self> {
        let mut fields = line.split_whitespace();
        if fields.next() != Some("report") {
            bail!("the server child said {line:?} instead of a report");
        }
        let mut report = ServerReport::default();
        for field in fields {
            let (key, value) = field.split_once('=').context("bad report field")?;
            let number: i64 = value.parse().context("bad report number")?;
            let unsigned = number.max(0) as u64;
            match key {
                "cpu_us" => report.cpu = Duration::from_micros(unsigned),
                "allocs" => report.alloc.count = unsigned,
                "alloc_bytes" => report.alloc.bytes = unsigned,
                "live_bytes" => report.live_bytes = unsigned,
                "connections" => report.connections = (number >= 0).then_some(unsigned as usize),
                "backoffs" => report.backoffs = unsigned,
                "dropped" => report.dropped = unsigned,
                "backplane_dropped" => report.backplane_dropped = unsigned,
                _ => {}
            }
        }
        Ok(report)
    }
}

/// A running server child, from the harness's side. Stopped when dropped.
pub struct ServerChild {
    kind: ServerKind,
    process: Child,
    /// `None` once closed, which asks the child to exit.
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    line: String,
    /// Where it listens.
    pub endpoint: Endpoint,
}

impl ServerChild {
    /// Starts `ternio-bench serve KIND` and waits for its `ready` line.
    ///
    /// With [`PROFILER_VAR`] set (say to `valgrind --tool=callgrind`), the
    /// child runs under that command, for profiling a server in place.
    pub fn spawn(kind: ServerKind, tls: Option<Arc<TlsMaterial>>) -> Result<Self> {
        Self::spawn_with_env(kind, tls, &[])
    }

    /// [`spawn`](Self::spawn), with `env` added to the child's environment.
    pub fn spawn_with_env(
        kind: ServerKind,
        tls: Option<Arc<TlsMaterial>>,
        env: &[(&str, &str)],
    ) -> Result<Self> {
        let exe = std::env::current_exe().context("cannot find the harness binary")?;
        let prefix = std::env::var(PROFILER_VAR).unwrap_or_default();
        let mut prefix = prefix.split_whitespace();
        let mut command = match prefix.next() {
            Some(program) => {
                let mut command = Command::new(program);
                command.args(prefix).arg(exe);
                command
            }
            None => Command::new(exe),
        };
        command
            .arg("serve")
            .arg(kind.name())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(tls) = &tls {
            for (name, value) in tls.env() {
                command.env(name, value);
            }
        }
        for (name, value) in env {
            command.env(name, value);
        }
        let mut process = command
            .spawn()
            .with_context(|| format!("cannot start the {} server", kind.name()))?;
        let stdin = process.stdin.take().context("no stdin")?;
        let stdout = BufReader::new(process.stdout.take().context("no stdout")?);
        let mut child = Self {
            kind,
            process,
            stdin: Some(stdin),
            stdout,
            line: String::new(),
            endpoint: Endpoint {
                addr: ([127, 0, 0, 1], 0).into(),
                public_key: None,
                tls: None,
            },
        };
        let ready = child.read_line()?;
        child.endpoint = Endpoint::parse_ready(&ready, tls)?;
        Ok(child)
    }

    fn read_line(&mut self) -> Result<String> {
        self.line.clear();
        if self.stdout.read_line(&mut self.line)? == 0 {
            let status = self.process.try_wait().ok().flatten();
            bail!(
                "the {} server child exited ({})",
                self.kind.name(),
                status.map_or("still running".to_owned(), |s| s.to_string())
            );
        }
        Ok(self.line.trim().to_owned())
    }

    fn command(&mut self, command: &str) -> Result<String> {
        let stdin = self.stdin.as_mut().context("the child's stdin is closed")?;
        writeln!(stdin, "{command}")?;
        stdin.flush()?;
        self.read_line()
    }

    /// Starts a measurement window in the child.
    pub fn reset(&mut self) -> Result<()> {
        let answer = self.command("reset")?;
        if answer != "ok" {
            bail!("the server child answered {answer:?} to reset");
        }
        Ok(())
    }

    /// Ends the window: what the child used since `reset`.
    pub fn report(&mut self) -> Result<ServerReport> {
        let answer = self.command("report")?;
        ServerReport::parse(&answer)
    }

    /// Its resident memory and threads now.
    pub fn status(&self) -> ProcessStatus {
        usage::process_status(self.process.id())
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.process.id()
    }
}

impl Drop for ServerChild {
    /// Closes the child's stdin, which makes it exit (and lets a profiler
    /// it runs under write its output); kills it if it has not within 5 s.
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.process.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::RuntimeShape;

    #[test]
    fn runtime_shapes_parse() {
        assert_eq!(
            RuntimeShape::parse("multi"),
            Some(RuntimeShape::Multi(None))
        );
        assert_eq!(
            RuntimeShape::parse("multi:2"),
            Some(RuntimeShape::Multi(Some(2)))
        );
        assert_eq!(
            RuntimeShape::parse("current:2"),
            Some(RuntimeShape::Current(2))
        );
        for bad in ["", "current", "current:0", "multi:x", "single:1"] {
            assert_eq!(RuntimeShape::parse(bad), None, "{bad:?}");
        }
    }
}
