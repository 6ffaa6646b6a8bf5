//! The cluster demo, `examples/cluster/run`, end to end: it starts a real
//! redis-server, two chat nodes (`examples/chat_server --redis`) and a real
//! HAProxy (TCP mode, round robin, `send-proxy-v2`, health checks on the
//! nodes' `/readyz`). Two clients connect through HAProxy, land on
//! different nodes and chat; a WebSocket client through HAProxy hears them;
//! each node's audit log names its client by the client's own address and
//! port, which only the PROXY header could tell it (HAProxy connects from
//! 127.0.0.2); and SIGTERM to the script stops every process it started,
//! as a failed start does.
//!
//! Needs `haproxy` and `redis-server` on the PATH (Debian's packages), and
//! the `chat_server` example built (as `cargo test --workspace` does, or
//! named by `TERNIO_CHAT_SERVER`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ternio::Packet;
use ternio_client::{Client, ClientConfig, Subscription};
use ternio_examples::chat::{ChatMessage, JoinRoom, RoomInfo, Say, SetNick};
use ternio_tests::example_binary;
use tokio::sync::mpsc;

/// How long the script may take to report the cluster ready.
const START_WITHIN: Duration = Duration::from_secs(60);

/// The script's ports, as offsets from its `--port-base`.
const OFFSETS: [u16; 13] = [0, 1, 2, 3, 4, 11, 12, 13, 14, 21, 22, 23, 24];

/// Fails the test, saying what to install, when `program` is not on the PATH.
fn require_on_path(program: &str) {
    let found = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|directory| directory.join(program).is_file())
    });
    assert!(
        found,
        "{program} is not on the PATH: this test runs the cluster demo with a real \
         {program} (Debian: apt-get install -y --no-install-recommends {program})"
    );
}

/// A port base below the ephemeral range whose every port the script uses
/// is free on 127.0.0.1 now (each call of the process starts its search
/// elsewhere, so tests running at once do not pick the same).
fn free_port_base() -> u16 {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let seed = u64::from(std::process::id()) ^ u64::from(nanos);
    let start = seed % 120 + CALLS.fetch_add(1, Ordering::Relaxed) * 37;
    for attempt in 0..120 {
        let base = 20_000 + ((start + attempt) % 120) as u16 * 100;
        if OFFSETS
            .iter()
            .all(|offset| TcpListener::bind(("127.0.0.1", base + offset)).is_ok())
        {
            return base;
        }
    }
    panic!("no free range of 25 ports between 20000 and 32000 on 127.0.0.1");
}

/// The running script: stopped (SIGTERM, then SIGKILL) when dropped, so
/// that a failed assertion leaves no process behind; its logs are removed
/// then, or kept and named if the test failed.
struct Demo {
    script: Child,
    logs: PathBuf,
    lines: mpsc::UnboundedReceiver<String>,
    /// What the script printed so far.
    output: Vec<String>,
}

impl Demo {
    fn start(base: u16, logs: &Path, chat_server: &Path) -> Self {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster/run");
        let mut script = Command::new("bash")
            .arg(script)
            .arg("--port-base")
            .arg(base.to_string())
            .arg("--logs")
            .arg(logs)
            .env("TERNIO_CHAT_SERVER", chat_server)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("bash runs examples/cluster/run");
        let (sender, lines) = mpsc::unbounded_channel();
        for stream in [
            Box::new(script.stdout.take().unwrap()) as Box<dyn Read + Send>,
            Box::new(script.stderr.take().unwrap()),
        ] {
            let sender = sender.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let _ = sender.send(line);
                }
            });
        }
        Self {
            script,
            logs: logs.to_owned(),
            lines,
            output: Vec::new(),
        }
    }

    /// Waits for the line that starts with `prefix`.
    async fn expect_line(&mut self, prefix: &str, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(line)) => {
                    let found = line.starts_with(prefix);
                    self.output.push(line);
                    if found {
                        return;
                    }
                }
                Ok(None) => panic!(
                    "the script ended before {prefix:?}; it printed:\n{}",
                    self.output.join("\n")
                ),
                Err(_) => panic!(
                    "no {prefix:?} within {within:?}; the script printed:\n{}",
                    self.output.join("\n")
                ),
            }
        }
    }

    /// Waits for the end of the script's output: no process it started
    /// still holds its stdout or stderr.
    async fn expect_end(&mut self, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(line)) => self.output.push(line),
                Ok(None) => return,
                Err(_) => panic!("the script's output is still open {within:?} after its exit"),
            }
        }
    }

    /// The processes the script reported starting: (name, pid).
    fn started(&self) -> Vec<(String, i32)> {
        self.output
            .iter()
            .filter_map(|line| {
                let rest = line.strip_prefix("started ")?;
                let (name, rest) = rest.split_once(" (pid ")?;
                let pid = rest.split_once(')')?.0.parse().ok()?;
                Some((name.to_owned(), pid))
            })
            .collect()
    }

    /// Waits for the script to exit by itself.
    fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.script.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the script still runs after {within:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends SIGTERM to the script and waits for its exit status.
    fn terminate(&mut self, within: Duration) -> std::process::ExitStatus {
        // SAFETY: kill(2) with the pid of our own child.
        unsafe { libc::kill(self.script.id() as i32, libc::SIGTERM) };
        self.wait_exit(within)
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        if matches!(self.script.try_wait(), Ok(None)) {
            // SAFETY: kill(2) with the pid of our own child.
            unsafe { libc::kill(self.script.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(12);
            while matches!(self.script.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = self.script.kill();
            let _ = self.script.wait();
        }
        if std::thread::panicking() {
            eprintln!("the cluster's logs are kept in {}", self.logs.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.logs);
        }
    }
}

/// Checks that the script and everything it started are gone.
async fn assert_nothing_left(demo: &mut Demo) {
    let left: Vec<_> = demo
        .started()
        .into_iter()
        .filter(|(_, pid)| running(*pid))
        .collect();
    assert!(left.is_empty(), "still running after the script: {left:?}");
    demo.expect_end(Duration::from_secs(2)).await;
}

/// Whether `pid` is a process that has not exited (a zombie has).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // The state follows the command name's closing parenthesis.
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    })
}

/// A chat user connected through the balancer over TCP, and the address
/// its connection came from.
struct User {
    client: Client,
    messages: Subscription<ChatMessage>,
    local: SocketAddr,
}

impl User {
    async fn connect_tcp(balancer: SocketAddr) -> Self {
        let seen = Arc::new(Mutex::new(None));
        let connector = {
            let seen = seen.clone();
            move || {
                let seen = seen.clone();
                async move {
                    let stream = tokio::net::TcpStream::connect(balancer).await?;
                    *seen.lock().unwrap() = Some(stream.local_addr()?);
                    Ok(stream)
                }
            }
        };
        let client = Client::connect_stream_with(connector, ClientConfig::default())
            .await
            .expect("a client connects through HAProxy");
        let local = seen.lock().unwrap().expect("the connector ran");
        Self::new(client, local)
    }

    fn new(client: Client, local: SocketAddr) -> Self {
        Self {
            messages: client.subscribe(),
            client,
            local,
        }
    }

    async fn enter(&self, nick: &str, room: &str) -> RoomInfo {
        let nick = nick.to_owned();
        self.client
            .request_async(&SetNick { nick })
            .await
            .expect("SetNick through HAProxy");
        let room = room.to_owned();
        self.client
            .request_async(&JoinRoom { room })
            .await
            .expect("JoinRoom through HAProxy")
    }

    async fn say(&self, room: &str, text: &str) {
        let (room, text) = (room.to_owned(), text.to_owned());
        self.client
            .request_async(&Say { room, text })
            .await
            .expect("Say through HAProxy");
    }

    /// Waits for `text` said by `nick`, past any other message.
    async fn hears(&mut self, nick: &str, text: &str) {
        let wait = async {
            loop {
                let message = self.messages.next().await.expect("subscribed");
                if message.nick == nick && message.text == text {
                    return;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(5), wait)
            .await
            .unwrap_or_else(|_| panic!("no {} {text:?} from {nick} within 5 s", ChatMessage::NAME));
    }
}

/// The peers a node's audit log names (`peer=ADDRESS`).
fn audited_peers(log: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter(|line| line.contains("ternio::audit"))
        .filter_map(|line| {
            let rest = &line[line.rfind(" peer=")? + 6..];
            Some(rest.split(' ').next()?.to_owned())
        })
        .collect()
}

/// The answer to `GET path` over HTTP/1.0 on `address`.
fn http_get(address: SocketAddr, path: &str) -> String {
    let mut stream = std::net::TcpStream::connect(address).expect("connects");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("an answer");
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_demo_balances_chat_over_two_nodes_that_see_real_client_addresses() {
    require_on_path("haproxy");
    require_on_path("redis-server");
    let chat_server = example_binary("chat_server", "TERNIO_CHAT_SERVER");
    let logs: PathBuf =
        std::env::temp_dir().join(format!("ternio-cluster-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&logs);
    let base = free_port_base();
    let address = |offset: u16| SocketAddr::from(([127, 0, 0, 1], base + offset));

    let mut demo = Demo::start(base, &logs, &chat_server);
    demo.expect_line("cluster ready", START_WITHIN).await;
    let started = demo.started();
    let names: Vec<&str> = started.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["redis-server", "node1", "node2", "haproxy"]);

    // Two TCP clients in a row: round robin puts them on different nodes.
    let mut ann = User::connect_tcp(address(1)).await;
    let mut bob = User::connect_tcp(address(1)).await;
    ann.enter("ann", "lobby").await;
    bob.enter("bob", "lobby").await;
    // A WebSocket client through the balancer too.
    let ws = format!("ws://{}/ws", address(2));
    let carol = Client::connect_ws(&ws)
        .await
        .expect("a WebSocket client connects through HAProxy");
    let mut carol = User::new(carol, address(2));
    carol.enter("carol", "lobby").await;

    ann.say("lobby", "hello from ann").await;
    bob.hears("ann", "hello from ann").await;
    carol.hears("ann", "hello from ann").await;
    bob.say("lobby", "hello from bob").await;
    ann.hears("bob", "hello from bob").await;
    carol.hears("bob", "hello from bob").await;

    // Each node logged its client's own address and port: HAProxy connects
    // from 127.0.0.2, so only its PROXY header, read because the node
    // trusts 127.0.0.2, tells the node who the client is.
    let (ann_peer, bob_peer) = (ann.local.to_string(), bob.local.to_string());
    let peers = [
        audited_peers(&logs.join("node1.log")),
        audited_peers(&logs.join("node2.log")),
    ];
    let holds = |peer: &str| {
        peers
            .iter()
            .position(|node| node.iter().any(|seen| seen == peer))
    };
    let (ann_node, bob_node) = (holds(&ann_peer), holds(&bob_peer));
    assert!(
        ann_node.is_some() && bob_node.is_some() && ann_node != bob_node,
        "ann ({ann_peer}) and bob ({bob_peer}) on different nodes, by their addresses; \
         the nodes logged requests from {peers:?}"
    );
    assert!(
        peers
            .iter()
            .flatten()
            .all(|peer| peer.starts_with("127.0.0.1:")),
        "no request is put down to HAProxy's address (127.0.0.2): {peers:?}"
    );

    // The chat page through the balancer points at the balanced WebSocket.
    let config = http_get(address(3), "/config.json");
    assert!(
        config.starts_with("HTTP/1.1 200") && config.contains(&format!("\"port\":{}", base + 2)),
        "the page through HAProxy: {config}"
    );

    // SIGTERM stops the script and everything it started.
    drop((ann, bob, carol));
    let status = demo.terminate(Duration::from_secs(15));
    assert_eq!(status.code(), Some(0), "the script's exit on SIGTERM");
    assert_nothing_left(&mut demo).await;
    assert!(
        demo.output.iter().any(|line| line == "cluster stopped"),
        "the stop line: {}",
        demo.output.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_start_stops_what_the_script_had_started() {
    require_on_path("haproxy");
    require_on_path("redis-server");
    let chat_server = example_binary("chat_server", "TERNIO_CHAT_SERVER");
    let logs = std::env::temp_dir().join(format!("ternio-cluster-fail-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&logs);
    let base = free_port_base();
    // Node 2's TCP port is taken: it cannot start.
    let _taken = TcpListener::bind(("127.0.0.1", base + 21)).expect("the port is free");

    let mut demo = Demo::start(base, &logs, &chat_server);
    let status = demo.wait_exit(START_WITHIN);
    demo.expect_end(Duration::from_secs(2)).await;
    assert_eq!(status.code(), Some(1), "{}", demo.output.join("\n"));
    let output = demo.output.join("\n");
    assert!(
        output.contains("run: node2 exited") && output.contains("Address already in use"),
        "the script says which process failed, and why: {output}"
    );
    let names: Vec<String> = demo.started().into_iter().map(|(name, _)| name).collect();
    assert_eq!(names, ["redis-server", "node1", "node2"]);
    assert_nothing_left(&mut demo).await;
}
