//! What other tasks send to one connection: pushed frames, bounded in
//! bytes, and orders to close. The connection's task polls it beside its
//! socket, so a push costs that task nothing until it arrives.

use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::connection::Violation;
use crate::context::PushError;

/// One message for a connection's task.
pub(crate) enum Outbound {
    /// An encoded frame (header + body, no length prefix) to write.
    Frame(Bytes),
    /// Finish what is running, then send this `DISCONNECT` and close.
    Close(Violation),
}

/// The sending side, kept in the connection's shared state.
pub(crate) struct OutboundQueue {
    sender: mpsc::UnboundedSender<Outbound>,
    queued_bytes: AtomicUsize,
    limit: usize,
}

/// The connection task's side of an [`OutboundQueue`].
pub(crate) type OutboundReceiver = mpsc::UnboundedReceiver<Outbound>;

impl OutboundQueue {
    pub(crate) fn new(limit: usize) -> (Self, OutboundReceiver) {
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
        self.sender.send(Outbound::Frame(frame)).map_err(|_| {
            self.queued_bytes.fetch_sub(len, Ordering::AcqRel);
            PushError::Closed
        })
    }

    /// Asks the connection to close with `violation`'s `DISCONNECT`.
    pub(crate) fn close(&self, violation: Violation) {
        // A connection that is already gone needs no telling.
        let _ = self.sender.send(Outbound::Close(violation));
    }

    /// Called by the connection task for each frame it takes off the queue.
    pub(crate) fn taken(&self, len: usize) {
        self.queued_bytes.fetch_sub(len, Ordering::AcqRel);
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }
}
