//! The queue of frames pushed to one connection from outside its task,
//! bounded in bytes.

use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::context::PushError;

/// The sending side: encoded frames (header + body, no length prefix) wait
/// here until the connection's task writes them.
pub(crate) struct PushQueue {
    sender: mpsc::UnboundedSender<Bytes>,
    queued_bytes: AtomicUsize,
    limit: usize,
}

/// The connection task's side of a [`PushQueue`].
pub(crate) type PushReceiver = mpsc::UnboundedReceiver<Bytes>;

impl PushQueue {
    pub(crate) fn new(limit: usize) -> (Self, PushReceiver) {
        let (sender, receiver) = mpsc::unbounded_channel();
        let queue = Self {
            sender,
            queued_bytes: AtomicUsize::new(0),
            limit,
        };
        (queue, receiver)
    }

    /// Queues one frame, unless that would pass the byte limit.
    pub(crate) fn push(&self, frame: Bytes) -> Result<(), PushError> {
        let len = frame.len();
        let before = self.queued_bytes.fetch_add(len, Ordering::AcqRel);
        if before + len > self.limit {
            self.queued_bytes.fetch_sub(len, Ordering::AcqRel);
            return Err(if self.sender.is_closed() {
                PushError::Closed
            } else {
                PushError::Full
            });
        }
        self.sender.send(frame).map_err(|_| {
            self.queued_bytes.fetch_sub(len, Ordering::AcqRel);
            PushError::Closed
        })
    }

    /// Called by the connection task for each frame it takes off the queue.
    pub(crate) fn taken(&self, len: usize) {
        self.queued_bytes.fetch_sub(len, Ordering::AcqRel);
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }
}
