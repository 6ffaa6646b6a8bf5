//! What the backplane's cluster tests share: their Redis settings, key
//! prefixes, waiting for pushes, and a node in a child process (killed
//! with SIGKILL by the tests that need a node to die).

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use ternio::Packet;
use ternio_client::Subscription;
use ternio_redis::{ClusterSecret, RedisConfig};

/// A key prefix no other test (or run) uses.
pub(crate) fn prefix(test: &str) -> String {
    format!("ternio-test-{}-{test}", std::process::id())
}

/// Fast heartbeats, so dead nodes vanish within seconds; a TTL twelve
/// heartbeats long, so a live node on a loaded machine never does.
pub(crate) fn config(url: &str, prefix: &str) -> RedisConfig {
    let secret = ClusterSecret::new("the cluster tests' secret, 32 B.").unwrap();
    RedisConfig::new(url, secret)
        .prefix(prefix)
        .heartbeat(Duration::from_millis(250), Duration::from_secs(3))
        .reconnect_delay(Duration::from_millis(50), Duration::from_millis(300))
        .response_timeout(Duration::from_secs(1))
}

/// The next push of `P`, within 10 s.
pub(crate) async fn next<P: Packet>(subscription: &mut Subscription<P>) -> P {
    tokio::time::timeout(Duration::from_secs(10), subscription.next())
        .await
        .unwrap_or_else(|_| panic!("no {} push within 10 s", P::NAME))
        .expect("the subscription is open")
}

/// Fails if a push of `P` comes within 300 ms.
pub(crate) async fn nothing_more<P: Packet + std::fmt::Debug>(subscription: &mut Subscription<P>) {
    let extra = tokio::time::timeout(Duration::from_millis(300), subscription.next()).await;
    assert!(extra.is_err(), "unexpected push: {extra:?}");
}

/// A node in a child process (this test binary, running only its test
/// `child_test`), killed if the test fails before it is.
pub(crate) struct ChildNode(pub(crate) std::process::Child);

impl Drop for ChildNode {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl ChildNode {
    /// Runs this binary's test `child_test` with `env` in a process of its
    /// own; returns it once it printed `READY …`, with the rest of that
    /// line.
    pub(crate) async fn start(child_test: &str, env: &[(&str, String)]) -> (Self, String) {
        let mut command = Command::new(std::env::current_exe().expect("the test binary"));
        command
            .args(["--exact", child_test, "--nocapture", "--test-threads=1"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = Self(command.spawn().expect("the child node starts"));
        let stdout = child.0.stdout.take().expect("its stdout");
        let ready = tokio::task::spawn_blocking(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                // The test harness may print "test child_node ... " first.
                .find_map(|line| line.split_once("READY ").map(|(_, rest)| rest.to_owned()))
        });
        let ready = tokio::time::timeout(Duration::from_secs(30), ready)
            .await
            .expect("the child is ready within 30 s")
            .expect("the reader")
            .expect("a READY line");
        (child, ready)
    }
}
