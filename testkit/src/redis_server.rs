//! A `redis-server` process that a test owns: started on a free loopback
//! port with no persistence, killed and restarted on demand, killed when
//! dropped. Used by the backplane tests (`redis/tests`) and ternio-bench's
//! backplane scenario (`benches/src/scenarios/backplane.rs`).

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The program to run: `TERNIO_REDIS_SERVER`, or `redis-server` on the PATH.
pub fn program() -> String {
    std::env::var("TERNIO_REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_owned())
}

/// A `redis-server` on 127.0.0.1 that this process started.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    tls: Option<TlsFiles>,
    child: Option<Child>,
}

/// The PEM files of a TLS `redis-server`: its certificate and key, and the
/// CA it names for client certificates (which it does not ask for).
#[derive(Debug)]
pub struct TlsFiles {
    /// The server's certificate.
    pub cert: PathBuf,
    /// The server's private key.
    pub key: PathBuf,
    /// The CA certificate it names for client certificates.
    pub ca: PathBuf,
}

impl RedisServer {
    /// Starts one on a free port. Panics, saying what to install, when the
    /// program is missing.
    pub fn start() -> Self {
        Self::try_start().unwrap_or_else(|error| panic!("{error}"))
    }

    /// Starts one on a free port, or says why it could not (saying what to
    /// install when the program is missing).
    pub fn try_start() -> Result<Self, String> {
        Self::try_start_with(None)
    }

    /// Starts one that speaks TLS only (no plain port), with `files`.
    pub fn start_tls(files: TlsFiles) -> Self {
        Self::try_start_with(Some(files)).unwrap_or_else(|error| panic!("{error}"))
    }

    fn try_start_with(tls: Option<TlsFiles>) -> Result<Self, String> {
        let mut server = Self {
            port: 0,
            tls,
            child: None,
        };
        // A port free a moment ago may be taken (by another test's server,
        // or as a client's ephemeral port) by the time redis-server binds
        // it: then it exits, and another port is tried.
        let mut attempts = 0;
        loop {
            server.port = TcpListener::bind("127.0.0.1:0")
                .and_then(|listener| listener.local_addr())
                .map_err(|error| format!("no free port on 127.0.0.1: {error}"))?
                .port();
            match server.spawn() {
                Err(Spawn::Exited(_)) if attempts < 5 => attempts += 1,
                Err(error) => return Err(error.to_string()),
                Ok(()) => return Ok(server),
            }
        }
    }

    /// The URL clients connect to: `rediss://` when it speaks TLS.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}/", self.port)
    }

    /// The server's process id, while it runs (ternio-bench reads its CPU
    /// time).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the server at once (SIGKILL: no save, no goodbye).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port, with no data (as after a crash of
    /// a Redis without persistence).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn().unwrap_or_else(|error| panic!("{error}"));
    }

    /// Runs redis-server on `self.port`, and waits until it says it is
    /// ready (not merely until the port answers: it may be another's).
    fn spawn(&mut self) -> Result<(), Spawn> {
        let port = self.port.to_string();
        let mut listen = vec!["--port".to_owned(), port];
        if let Some(tls) = &self.tls {
            let path = |path: &PathBuf| path.display().to_string();
            listen = vec![
                "--port".to_owned(),
                "0".to_owned(),
                "--tls-port".to_owned(),
                self.port.to_string(),
                "--tls-cert-file".to_owned(),
                path(&tls.cert),
                "--tls-key-file".to_owned(),
                path(&tls.key),
                "--tls-ca-cert-file".to_owned(),
                path(&tls.ca),
                "--tls-auth-clients".to_owned(),
                "no".to_owned(),
            ];
        }
        let mut child = Command::new(program())
            .args(listen)
            .args([
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "no",
                "--daemonize",
                "no",
                "--loglevel",
                "notice",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|error| {
                Spawn::Missing(format!(
                    "cannot run {}: {error}. Install Debian's redis-server package \
                     (apt-get install redis-server), or set TERNIO_REDIS_SERVER",
                    program()
                ))
            })?;
        // Drain its output so it never blocks on a full pipe, and watch
        // for the line that says it listens.
        let (ready_tx, ready) = mpsc::channel();
        for pipe in [
            child
                .stdout
                .take()
                .map(|out| Box::new(out) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|err| Box::new(err) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let ready_tx = ready_tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    if line.contains("Ready to accept connections") {
                        let _ = ready_tx.send(());
                    }
                    if std::env::var_os("TERNIO_REDIS_LOG").is_some() {
                        eprintln!("redis-server: {line}");
                    }
                }
            });
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while ready.recv_timeout(Duration::from_millis(10)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(Spawn::Exited(format!(
                    "{} exited at start (port {}): {status}",
                    program(),
                    self.port
                )));
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Spawn::Missing(format!(
                    "{} did not say it was ready within 10 s",
                    program()
                )));
            }
        }
        self.child = Some(child);
        Ok(())
    }
}

/// Why redis-server did not start.
enum Spawn {
    /// It could not run, or did not get ready.
    Missing(String),
    /// It exited: most likely, its port was taken.
    Exited(String),
}

impl std::fmt::Display for Spawn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Missing(message) | Self::Exited(message) => f.write_str(message),
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
