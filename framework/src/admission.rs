//! Who may connect: the total and per-IP connection limits and the per-IP
//! accept rate. A connection holds a [`Permit`] for its lifetime.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use crate::config::ServerConfig;

/// Past this many tracked addresses, expired accept windows are pruned.
const PRUNE_AT: usize = 4096;

#[derive(Default)]
struct Counts {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
    /// Per address: the start of its current window and accepts in it.
    windows: HashMap<IpAddr, (Instant, usize)>,
}

/// The server's admission control.
pub(crate) struct Admission {
    counts: Mutex<Counts>,
    max_total: usize,
    max_per_ip: usize,
    accepts_per_ip: usize,
    window: std::time::Duration,
    exempt_loopback: bool,
}

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    Total(usize),
    PerIp(usize),
    Rate(usize),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Total(max) => write!(f, "the server holds its maximum of {max} connections"),
            Self::PerIp(max) => write!(f, "your address holds its maximum of {max} connections"),
            Self::Rate(max) => write!(
                f,
                "your address opened more than {max} connections in the window"
            ),
        }
    }
}

/// One admitted connection; dropping it gives its place back.
pub(crate) struct Permit {
    admission: Arc<Admission>,
    ip: Option<IpAddr>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut counts = self.admission.counts();
        counts.total -= 1;
        if let Some(ip) = self.ip
            && let Some(count) = counts.per_ip.get_mut(&ip)
        {
            *count -= 1;
            if *count == 0 {
                counts.per_ip.remove(&ip);
            }
        }
    }
}

impl Admission {
    pub(crate) fn new(config: &ServerConfig) -> Self {
        Self {
            counts: Mutex::default(),
            max_total: config.max_connections,
            max_per_ip: config.max_connections_per_ip,
            accepts_per_ip: config.accepts_per_ip,
            window: config.accept_window,
            exempt_loopback: config.exempt_loopback,
        }
    }

    fn counts(&self) -> MutexGuard<'_, Counts> {
        // No code panics while holding the lock; recover the data if one did.
        self.counts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Admits a connection from `ip`, or says why not.
    pub(crate) fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Permit, Refusal> {
        let mut counts = self.counts();
        if counts.total >= self.max_total {
            return Err(Refusal::Total(self.max_total));
        }
        let limited = !(self.exempt_loopback && ip.is_loopback());
        if limited {
            let now = Instant::now();
            if counts.windows.len() > PRUNE_AT {
                let window = self.window;
                counts
                    .windows
                    .retain(|_, (start, _)| now.duration_since(*start) < window);
            }
            let (start, accepted) = counts.windows.entry(ip).or_insert((now, 0));
            if now.duration_since(*start) >= self.window {
                *start = now;
                *accepted = 0;
            }
            if *accepted >= self.accepts_per_ip {
                return Err(Refusal::Rate(self.accepts_per_ip));
            }
            *accepted += 1;
            let open = counts.per_ip.get(&ip).copied().unwrap_or(0);
            if open >= self.max_per_ip {
                return Err(Refusal::PerIp(self.max_per_ip));
            }
            *counts.per_ip.entry(ip).or_insert(0) += 1;
        }
        counts.total += 1;
        Ok(Permit {
            admission: Arc::clone(self),
            ip: limited.then_some(ip),
        })
    }
}
