//! What other tasks send to one connection: pushed frames, bounded in
//! bytes, and orders to close. The connection's task polls both beside its
//! socket, so a push costs that task nothing until it arrives.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::config::SlowConsumerPolicy;
use crate::connection::Violation;
use crate::context::PushError;
use ternio_protocol::DisconnectReason;

/// An order to close, from outside the connection's task.
pub(crate) struct CloseOrder {
    pub(crate) violation: Violation,
    /// Let running requests finish first (shutdown), or not (kick, slow consumer).
    pub(crate) graceful: bool,
}

/// The sending side, kept in the connection's shared state.
pub(crate) struct OutboundQueue {
    frames: mpsc::UnboundedSender<Bytes>,
    orders: mpsc::UnboundedSender<CloseOrder>,
    queued_bytes: AtomicUsize,
    limit: usize,
    policy: SlowConsumerPolicy,
    dropped: AtomicU64,
}

/// The connection task's side of an [`OutboundQueue`].
pub(crate) struct OutboundReceiver {
    pub(crate) frames: mpsc::UnboundedReceiver<Bytes>,
    pub(crate) orders: mpsc::UnboundedReceiver<CloseOrder>,
}

impl OutboundQueue {
    pub(crate) fn new(limit: usize, policy: SlowConsumerPolicy) -> (Self, OutboundReceiver) {
        let (frames, frames_receiver) = mpsc::unbounded_channel();
        let (orders, orders_receiver) = mpsc::unbounded_channel();
        let queue = Self {
            frames,
            orders,
            queued_bytes: AtomicUsize::new(0),
            limit,
            policy,
            dropped: AtomicU64::new(0),
        };
        let receiver = OutboundReceiver {
            frames: frames_receiver,
            orders: orders_receiver,
        };
        (queue, receiver)
    }

    /// Queues one encoded frame (header + body, no prefix). When the queue
    /// is full, the slow-consumer policy decides: drop a droppable frame, or
    /// disconnect the connection with `SLOW_CONSUMER`.
    pub(crate) fn push(&self, frame: Bytes, droppable: bool) -> Result<(), PushError> {
        let len = frame.len();
        let before = self.queued_bytes.fetch_add(len, Ordering::AcqRel);
        if before + len > self.limit {
            self.queued_bytes.fetch_sub(len, Ordering::AcqRel);
            if self.frames.is_closed() {
                return Err(PushError::Closed);
            }
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
        self.frames.send(frame).map_err(|_| {
            self.queued_bytes.fetch_sub(len, Ordering::AcqRel);
            PushError::Closed
        })
    }

    /// Asks the connection to close with `violation`'s `DISCONNECT`.
    pub(crate) fn close(&self, violation: Violation, graceful: bool) {
        // A connection that is already gone needs no telling.
        let _ = self.orders.send(CloseOrder {
            violation,
            graceful,
        });
    }

    /// Called by the connection task for each frame it takes off the queue.
    pub(crate) fn taken(&self, len: usize) {
        self.queued_bytes.fetch_sub(len, Ordering::AcqRel);
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
        self.frames.is_closed()
    }
}
