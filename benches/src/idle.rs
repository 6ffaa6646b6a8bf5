//! Keeping idle CPUs awake for the length of a run.
//!
//! On a virtual machine an idle vCPU halts, and waking it again takes the
//! hypervisor tens of microseconds. A one-client echo sleeps on every round
//! trip, so without care that wake-up dominates the latency figures (this
//! machine measured a raw TCP echo at about 80 µs idle and 16 µs awake) and
//! swings with whatever else the machine is doing. Like tuned's
//! `latency-performance` profile, the harness asks the kernel for a CPU
//! wake-up latency of 0 µs through PM QoS (`/dev/cpu_dma_latency`) while it
//! runs: idle CPUs poll instead of halting. The request lasts as long as the
//! file stays open, and the run records whether it was granted.

use std::fs::{File, OpenOptions};
use std::io::Write;

/// The PM QoS device: writing a latency in µs holds it until closed.
const CPU_DMA_LATENCY: &str = "/dev/cpu_dma_latency";

/// Holds idle CPUs out of halt states while it lives.
#[derive(Debug)]
pub struct AwakeCpus {
    _request: File,
}

impl AwakeCpus {
    /// Asks for a 0 µs wake-up latency; the error says why it was refused
    /// (usually: not root, or no such device).
    pub fn request() -> std::io::Result<Self> {
        let mut file = OpenOptions::new().write(true).open(CPU_DMA_LATENCY)?;
        file.write_all(&0i32.to_ne_bytes())?;
        Ok(Self { _request: file })
    }
}
