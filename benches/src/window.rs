//! A measurement window: what it saw on both sides (the server children's
//! usage and the harness's own), and the steps every counted window takes
//! (throughput, push, fan-out, backplane), written once.

use std::time::{Duration, Instant};

use anyhow::Result;

use crate::alloc::{AllocDelta, AllocSnapshot};
use crate::child::{ServerChild, ServerReport};
use crate::results::Cost;
use crate::usage;

/// What one measurement window saw, on both sides.
#[derive(Debug, Clone, Copy, Default)]
pub struct Window {
    /// Operations completed in the window (echoes, pushes, deliveries).
    pub ops: u64,
    /// The window's length.
    pub elapsed: Duration,
    /// The server child's usage.
    pub server: ServerReport,
    /// The harness's CPU time (all its client tasks).
    pub client_cpu: Duration,
    /// The harness's allocations.
    pub client_alloc: AllocDelta,
}

impl Window {
    /// Operations per second.
    pub fn rate(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The server's cost per operation.
    pub fn server_cost(&self) -> Cost {
        Cost::per_op(self.server.cpu, self.server.alloc, self.ops)
    }

    /// The client's cost per operation.
    pub fn client_cost(&self) -> Cost {
        Cost::per_op(self.client_cpu, self.client_alloc, self.ops)
    }
}

/// The harness's own usage at the start of a window.
pub struct ClientMeter {
    cpu: Duration,
    alloc: AllocSnapshot,
    started: Instant,
}

impl ClientMeter {
    /// Starts measuring now.
    pub fn start() -> Self {
        Self {
            cpu: usage::cpu_time(),
            alloc: AllocSnapshot::now(),
            started: Instant::now(),
        }
    }

    /// Ends the window with `ops` done; `server` is the child's report.
    pub fn stop(self, ops: u64, server: impl FnOnce() -> Result<ServerReport>) -> Result<Window> {
        let elapsed = self.started.elapsed();
        let client_cpu = usage::cpu_time().saturating_sub(self.cpu);
        let client_alloc = AllocSnapshot::now().since(&self.alloc);
        Ok(Window {
            ops,
            elapsed,
            server: server()?,
            client_cpu,
            client_alloc,
        })
    }
}

/// The server side of a counted window: one child, or a cell's nodes.
pub trait Servers {
    /// Starts a measurement window in every server.
    fn reset(&mut self) -> Result<()>;
    /// What the servers used since `reset`, added up.
    fn report(&mut self) -> Result<ServerReport>;
}

impl Servers for ServerChild {
    fn reset(&mut self) -> Result<()> {
        ServerChild::reset(self)
    }

    fn report(&mut self) -> Result<ServerReport> {
        ServerChild::report(self)
    }
}

/// The client side of a counted window: the cell's load, already running.
pub trait Load {
    /// Operations completed so far.
    fn count(&self) -> u64;

    /// Fails when the load stopped during the warm-up.
    fn check_running(&self) -> Result<()> {
        Ok(())
    }

    /// Told when the window opens (after the reset, before the first
    /// count) and when it closes (after the last count), for loads that
    /// time what happens inside the window only.
    fn timing(&self, _on: bool) {}
}

/// Waits out `warmup`, checks that the load still runs, resets the
/// servers, then counts the load's operations over `window`, with the
/// harness's and the servers' usage over that same window.
pub fn counted_window(
    servers: &mut impl Servers,
    load: &impl Load,
    warmup: Duration,
    window: Duration,
) -> Result<Window> {
    std::thread::sleep(warmup);
    load.check_running()?;
    servers.reset()?;
    load.timing(true);
    let before = load.count();
    let meter = ClientMeter::start();
    std::thread::sleep(window);
    let after = load.count();
    load.timing(false);
    meter.stop(after - before, || servers.report())
}
