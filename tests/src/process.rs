//! Stopping a child process the way an orchestrator does: SIGTERM, then a
//! bounded wait for its exit.

use std::process::{Child, Command, ExitStatus};
use std::time::Duration;

/// Sends SIGTERM to the process `pid` (`kill -TERM`); panics if `kill`
/// fails.
pub fn terminate(pid: u32) {
    let killed = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success(), "kill -TERM {pid}: {killed:?}");
}

/// Waits for `child` to exit, at most `bound`: past it, kills it and
/// panics (naming `what`). Its exit status.
pub async fn exit_within(mut child: Child, bound: Duration, what: &str) -> ExitStatus {
    let pid = child.id();
    let exited = tokio::task::spawn_blocking(move || child.wait());
    match tokio::time::timeout(bound, exited).await {
        Ok(waited) => waited.expect("the wait task runs").expect("wait works"),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!("{what} did not exit within {bound:?}");
        }
    }
}
