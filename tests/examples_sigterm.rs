//! Every example program stops on SIGTERM as on Ctrl-C: a real process
//! (the binaries `cargo test --workspace` builds), a real `kill -TERM`,
//! then exit code 0 and the example's stop line. The servers (chat_server,
//! rooms, game), the game with its bots playing, and the clients
//! (chat_bot, chat_client, echo_client) connected to a server.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ternio_tests::example_binary;

/// How long a process may take to stop after SIGTERM: the servers' default
/// shutdown grace (5 s) and close linger (2 s), and room to spare.
const STOP_BOUND: Duration = Duration::from_secs(15);
/// How long a process may take to print its ready line.
const START_BOUND: Duration = Duration::from_secs(30);

/// A running example: its process, and every line it writes (standard
/// output and standard error, merged) as they come.
struct Running {
    name: String,
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    /// Starts the example `name` (its binary from `variable`, or the one
    /// beside the tests) with `args`, standard input a pipe kept open.
    fn start(name: &str, variable: &str, args: &[&str]) -> Self {
        let mut child = Command::new(example_binary(name, variable))
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("{name} starts: {error}"));
        let (sender, lines) = mpsc::channel();
        forward(child.stdout.take().unwrap(), sender.clone());
        forward(child.stderr.take().unwrap(), sender);
        Self {
            name: name.to_owned(),
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a line that starts with `prefix` and returns it.
    fn wait_for(&mut self, prefix: &str) -> String {
        let deadline = Instant::now() + START_BOUND;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.starts_with(prefix) {
                        return line;
                    }
                }
                Err(_) => {
                    let _ = self.child.kill();
                    panic!(
                        "{}: no line starting with {prefix:?}; seen: {:#?}",
                        self.name, self.seen
                    );
                }
            }
        }
    }

    /// The address after `prefix` on the line that starts with it.
    fn address_after(&mut self, prefix: &str) -> String {
        let line = self.wait_for(prefix);
        line[prefix.len()..]
            .split(['/', ' ', ','])
            .next()
            .unwrap()
            .to_owned()
    }

    /// Sends SIGTERM, then asserts exit code 0 within [`STOP_BOUND`] and a
    /// line that contains `stop_line`.
    fn terminate_expecting(mut self, stop_line: &str) {
        ternio_tests::terminate(self.child.id());
        let started = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > STOP_BOUND {
                let _ = self.child.kill();
                panic!(
                    "{} did not exit within {STOP_BOUND:?} of SIGTERM; seen: {:#?}",
                    self.name, self.seen
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // The rest of its output, to the end of both pipes.
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.seen.push(line);
        }
        assert_eq!(
            status.code(),
            Some(0),
            "{}: exit code 0 on SIGTERM ({status:?}); seen: {:#?}",
            self.name,
            self.seen
        );
        assert!(
            self.seen.iter().any(|line| line.contains(stop_line)),
            "{}: the stop line {stop_line:?}; seen: {:#?}",
            self.name,
            self.seen
        );
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends every line of `pipe` to `sender`, on a thread of its own.
fn forward(pipe: impl Read + Send + 'static, sender: mpsc::Sender<String>) {
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
}

const ANY: &str = "127.0.0.1:0";

/// A chat server on ports of its own; its TCP address.
fn chat_server() -> (Running, String) {
    let mut server = Running::start(
        "chat_server",
        "TERNIO_CHAT_SERVER",
        &["--tcp", ANY, "--ws", ANY, "--http", ANY],
    );
    let tcp = server.address_after("chat over tcp on ");
    server.wait_for("chat page on ");
    (server, tcp)
}

#[test]
fn the_chat_server_stops_on_sigterm() {
    let (server, _) = chat_server();
    server.terminate_expecting("chat server stopped");
}

#[test]
fn the_rooms_server_stops_on_sigterm() {
    let mut server = Running::start(
        "rooms",
        "TERNIO_ROOMS_SERVER",
        &["--tcp", ANY, "--ws", ANY, "--http", ANY],
    );
    server.wait_for("rooms page on ");
    server.terminate_expecting("rooms server stopped");
}

#[test]
fn the_game_server_stops_on_sigterm() {
    let mut server = Running::start("game", "TERNIO_GAME", &["--tcp", ANY, "--udp", ANY]);
    server.wait_for("game over tcp on ");
    server.terminate_expecting("game stopped");
}

#[test]
fn the_game_with_bots_playing_stops_on_sigterm() {
    let mut game = Running::start(
        "game",
        "TERNIO_GAME",
        &[
            "--tcp",
            ANY,
            "--udp",
            ANY,
            "--bots",
            "3",
            "--seconds",
            "120",
        ],
    );
    game.wait_for("3 bots in ");
    // Let them play a moment.
    std::thread::sleep(Duration::from_millis(500));
    game.terminate_expecting("game stopped");
}

#[test]
fn the_chat_bot_stops_on_sigterm() {
    let (server, tcp) = chat_server();
    let mut bot = Running::start("chat_bot", "TERNIO_CHAT_BOT", &["--tcp", &tcp]);
    bot.wait_for("ready: ");
    bot.terminate_expecting("stopping");
    drop(server);
}

#[test]
fn the_chat_client_stops_on_sigterm() {
    let (server, tcp) = chat_server();
    let mut client = Running::start(
        "chat_client",
        "TERNIO_CHAT_CLIENT",
        &["--tcp", &tcp, "--nick", "sigterm"],
    );
    client.wait_for("connected");
    client.terminate_expecting("stopping");
    drop(server);
}

#[test]
fn the_echo_client_stops_on_sigterm() {
    let mut server = Running::start(
        "echo_server",
        "TERNIO_ECHO_SERVER",
        &["--tcp", ANY, "--resume-ttl", "0"],
    );
    let tcp = server.address_after("tcp listening on ");
    server.wait_for("public key: ");
    // Far more echoes than the test waits for.
    let mut client = Running::start(
        "echo_client",
        "TERNIO_ECHO_CLIENT",
        &["--tcp", &tcp, "--count", "100000000"],
    );
    client.wait_for("echo 0:");
    client.terminate_expecting("stopping");
    // And the server, with its stop line.
    server.terminate_expecting("echo server stopped");
}
