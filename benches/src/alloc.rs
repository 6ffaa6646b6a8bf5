//! A counting global allocator: every process of the harness (the driver
//! and each server child) counts the allocations it makes, so allocations
//! per message can be read from either side.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

/// Defers to the system allocator and counts calls and bytes.
pub struct CountingAllocator;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static ALLOCATED_BYTES: AtomicU64 = AtomicU64::new(0);
static FREED_BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: every method defers to `System` with the caller's arguments and
// only adds relaxed counter updates, which neither allocate nor panic.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        ALLOCATED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        ALLOCATED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        FREED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // A reallocation counts as one allocation of the new size (and a
        // free of the old one), as a copy into a new block would.
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        ALLOCATED_BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        FREED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// The allocator counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllocSnapshot {
    /// Allocations (and reallocations) so far.
    pub count: u64,
    /// Bytes requested by them.
    pub bytes: u64,
    /// Bytes allocated and not yet freed (the live heap).
    pub live_bytes: u64,
}

impl AllocSnapshot {
    /// Reads the counters now.
    pub fn now() -> Self {
        let bytes = ALLOCATED_BYTES.load(Ordering::Relaxed);
        let freed = FREED_BYTES.load(Ordering::Relaxed);
        Self {
            count: ALLOCATIONS.load(Ordering::Relaxed),
            bytes,
            live_bytes: bytes.saturating_sub(freed),
        }
    }

    /// What was allocated between `earlier` and `self`.
    pub fn since(&self, earlier: &Self) -> AllocDelta {
        AllocDelta {
            count: self.count.saturating_sub(earlier.count),
            bytes: self.bytes.saturating_sub(earlier.bytes),
        }
    }
}

/// Allocations made over a window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllocDelta {
    /// How many.
    pub count: u64,
    /// How many bytes.
    pub bytes: u64,
}
