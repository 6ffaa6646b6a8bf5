//! What other tasks send to one connection: pushed frames, bounded in
//! bytes, and an order to close. The connection's task takes them when its
//! waker fires, beside its socket, so a push costs that task nothing until
//! it arrives. An idle connection's queue holds no allocation.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::task::Context as TaskContext;

use bytes::Bytes;
use futures_util::task::AtomicWaker;
use ternio_protocol::DisconnectReason;

use crate::config::SlowConsumerPolicy;
use crate::connection::Violation;
use crate::context::PushError;

/// An order to close, from outside the connection's task.
pub(crate) struct CloseOrder {
    pub(crate) violation: Violation,
    /// Let running requests finish first (shutdown), or not (kick, slow consumer).
    pub(crate) graceful: bool,
}

/// A connection's inbox, kept in its shared state.
pub(crate) struct OutboundQueue {
    /// Encoded frames (header + body, no prefix) in the order pushed.
    frames: Mutex<VecDeque<Bytes>>,
    /// The first order to close, if any (later ones are ignored).
    close: Mutex<Option<CloseOrder>>,
    /// Wakes the connection's task.
    waker: AtomicWaker,
    /// Set when a frame or an order may be waiting: the connection's task
    /// looks at the locks only then, not on every poll.
    signal: AtomicBool,
    queued_bytes: AtomicUsize,
    limit: usize,
    policy: SlowConsumerPolicy,
    dropped: AtomicU64,
    /// Set once the connection's task has finished.
    closed: AtomicBool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // No code panics while holding these locks; recover the data if one did.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl OutboundQueue {
    pub(crate) fn new(limit: usize, policy: SlowConsumerPolicy) -> Self {
        Self {
            frames: Mutex::default(),
            close: Mutex::default(),
            waker: AtomicWaker::new(),
            signal: AtomicBool::new(false),
            queued_bytes: AtomicUsize::new(0),
            limit,
            policy,
            dropped: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        }
    }

    /// Queues one encoded frame (header + body, no prefix). When the queue
    /// is full, the slow-consumer policy decides: drop a droppable frame, or
    /// disconnect the connection with `SLOW_CONSUMER`.
    pub(crate) fn push(&self, frame: Bytes, droppable: bool) -> Result<(), PushError> {
        if self.is_closed() {
            return Err(PushError::Closed);
        }
        let len = frame.len();
        let before = self.queued_bytes.fetch_add(len, Ordering::AcqRel);
        if before + len > self.limit {
            self.queued_bytes.fetch_sub(len, Ordering::AcqRel);
            if droppable && self.policy == SlowConsumerPolicy::DropDroppable {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                return Err(PushError::Dropped);
            }
            self.close(
                Violation::new(
                    DisconnectReason::SlowConsumer,
                    "the outbound queue is full: read faster",
                ),
                false,
            );
            return Err(PushError::SlowConsumer);
        }
        lock(&self.frames).push_back(frame);
        self.signal.store(true, Ordering::Release);
        self.waker.wake();
        Ok(())
    }

    /// Asks the connection to close with `violation`'s `DISCONNECT`.
    pub(crate) fn close(&self, violation: Violation, graceful: bool) {
        let mut close = lock(&self.close);
        if close.is_none() {
            *close = Some(CloseOrder {
                violation,
                graceful,
            });
        }
        drop(close);
        self.signal.store(true, Ordering::Release);
        self.waker.wake();
    }

    /// Registers the connection task's waker, for the next push or order.
    pub(crate) fn register(&self, cx: &TaskContext<'_>) {
        self.waker.register(cx.waker());
    }

    /// Whether a frame or an order may have come since the last call (which
    /// follows [`register`](Self::register), so that nothing is missed).
    pub(crate) fn take_signal(&self) -> bool {
        self.signal.load(Ordering::Acquire) && self.signal.swap(false, Ordering::AcqRel)
    }

    /// The order to close, if one came.
    pub(crate) fn take_close(&self) -> Option<CloseOrder> {
        lock(&self.close).take()
    }

    /// Takes queued frames, oldest first, while `take` accepts them.
    /// Returns whether any was taken.
    pub(crate) fn take_frames(&self, mut take: impl FnMut(&Bytes) -> bool) -> bool {
        let mut frames = lock(&self.frames);
        let mut taken = false;
        while let Some(frame) = frames.front() {
            if !take(frame) {
                break;
            }
            self.queued_bytes.fetch_sub(frame.len(), Ordering::AcqRel);
            frames.pop_front();
            taken = true;
        }
        if frames.is_empty() {
            if frames.capacity() > 0 {
                // An idle connection keeps no queue allocated.
                *frames = VecDeque::new();
            }
        } else {
            // Frames left for later (the socket's buffer is full): the next
            // poll must come back for them.
            self.signal.store(true, Ordering::Release);
        }
        taken
    }

    /// Called when the connection's task ends: later pushes fail at once,
    /// and what was queued is dropped.
    pub(crate) fn finish(&self) {
        self.closed.store(true, Ordering::Release);
        lock(&self.frames).clear();
        self.queued_bytes.store(0, Ordering::Release);
    }

    /// Bytes waiting in the queue.
    pub(crate) fn queued_bytes(&self) -> usize {
        self.queued_bytes.load(Ordering::Acquire)
    }

    /// Droppable frames dropped because the queue was full.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}
