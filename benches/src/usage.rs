//! What a process uses: CPU time (getrusage), resident memory and threads
//! (/proc), and the open-file limit.

use std::time::Duration;

use nix::sys::resource::{Resource, UsageWho, getrlimit, getrusage, setrlimit};
use nix::sys::time::TimeValLike;

/// User plus system CPU time of this whole process so far.
pub fn cpu_time() -> Duration {
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(usage) => {
            let micros =
                usage.user_time().num_microseconds() + usage.system_time().num_microseconds();
            Duration::from_micros(micros.max(0) as u64)
        }
        Err(_) => Duration::ZERO,
    }
}

/// Raises this process's soft limit of open files to its hard limit (the
/// crowd scenario holds 10,000 sockets on each side). Returns the new limit.
pub fn raise_open_file_limit() -> u64 {
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => {
            if setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
                hard
            } else {
                soft
            }
        }
        Ok((soft, _)) => soft,
        Err(_) => 0,
    }
}

/// Memory and threads of a process, from `/proc/<pid>/status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessStatus {
    /// Resident set size, in KiB (`VmRSS`).
    pub rss_kib: u64,
    /// Threads (`Threads`).
    pub threads: u64,
}

/// Reads `/proc/<pid>/status`; zeros when it cannot be read.
pub fn process_status(pid: u32) -> ProcessStatus {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let mut status = ProcessStatus::default();
    for line in text.lines() {
        let number = || {
            line.split_whitespace()
                .nth(1)
                .and_then(|value| value.parse().ok())
                .unwrap_or(0)
        };
        if line.starts_with("VmRSS:") {
            status.rss_kib = number();
        } else if line.starts_with("Threads:") {
            status.threads = number();
        }
    }
    status
}

/// User plus system CPU time of process `pid` so far (fields 14 and 15 of
/// `/proc/<pid>/stat`, in USER_HZ ticks: 100 per second on Linux); `None`
/// when it cannot be read.
pub fn process_cpu_time(pid: u32) -> Option<Duration> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: count from the `)` after it.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // `rest` starts at field 3 (state): utime is field 14, stime 15.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}
