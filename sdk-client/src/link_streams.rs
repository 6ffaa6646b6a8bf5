//! The session's open streams (docs/PROTOCOL.md section 4.5): what the
//! reader of the session's current link hands each (items, credit). The
//! handles are in `item_streams`.
//!
//! A stream belongs to the session, not to the link it was opened on: on a
//! resumable session its frames are counted and replayed (section 4.2),
//! so a stream goes on across a resumption. A stream whose session is lost
//! ends with its request, which fails (`ClientError::Closed`).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;

use ternio_protocol::frame::Header;
use ternio_protocol::stream::{
    BatchItems, STREAM_CREDIT, STREAM_ITEM, STREAM_ITEMS, StreamCredit, batch_len,
};
use ternio_protocol::{Bytes, Decode};

use crate::sync::lock;

/// What a download's server sent in one frame.
pub(crate) enum Arrived {
    /// One item's body (`STREAM_ITEM`).
    One(Bytes),
    /// Several items (`STREAM_ITEMS`, checked).
    Batch(BatchItems),
}

/// The state of one stream, shared by the reader and its handle.
#[derive(Default)]
pub(crate) struct StreamState {
    /// Download: items received and not yet taken, as they came.
    pub(crate) items: VecDeque<Arrived>,
    /// Download: the items the server may still send (credit granted).
    pub(crate) granted: u32,
    /// Upload: the items the client may still send.
    pub(crate) credit: u32,
    pub(crate) waker: Option<Waker>,
}

/// One stream's state.
pub(crate) type Slot = Arc<Mutex<StreamState>>;

/// The session's open streams, by request id.
#[derive(Default)]
pub(crate) struct Streams {
    open: Mutex<HashMap<u32, Slot>>,
    /// The handles that frames of the read under way gave items or credit
    /// to, woken once the reader handed over all of that read's frames
    /// ([`wake_handles`](Self::wake_handles)).
    to_wake: Mutex<Vec<Waker>>,
    /// Whether `to_wake` may hold a waker: most reads (answers, pushes)
    /// give no stream anything, and look at this flag only.
    may_wake: AtomicBool,
}

impl Streams {
    pub(crate) fn insert(&self, id: u32) -> Slot {
        let slot: Slot = Arc::default();
        lock(&self.open).insert(id, Arc::clone(&slot));
        slot
    }

    /// Forgets stream `id`, if `slot` is still its state (the id may have
    /// gone to a newer stream since).
    pub(crate) fn remove(&self, id: u32, slot: &Slot) {
        let mut open = lock(&self.open);
        if open.get(&id).is_some_and(|open| Arc::ptr_eq(open, slot)) {
            open.remove(&id);
        }
    }

    /// Wakes every stream's handle: a link was installed, and what could
    /// not be sent without one (a download's credit) can go now.
    pub(crate) fn wake_all(&self) {
        let slots: Vec<Slot> = lock(&self.open).values().cloned().collect();
        for slot in slots {
            let waker = lock(&slot).waker.take();
            if let Some(waker) = waker {
                waker.wake();
            }
        }
    }

    /// Notes that a frame gave `state`'s handle something; it is woken by
    /// [`wake_handles`](Self::wake_handles), after the state's lock is let
    /// go. Woken at once, a handle that empties its queue faster than the
    /// reader fills it would sleep again after each frame, and its
    /// wake-up would preempt the reader in the middle of a read (a context
    /// switch per frame of a download); woken once per read, it finds
    /// every frame of the read.
    fn wake_later(&self, mut state: MutexGuard<'_, StreamState>) {
        let waker = state.waker.take();
        drop(state);
        if let Some(waker) = waker {
            lock(&self.to_wake).push(waker);
            self.may_wake.store(true, Ordering::Release);
        }
    }

    /// Wakes the handles that frames handed over since the last call gave
    /// something to: the reader calls it once it handed over every whole
    /// frame of a read (whatever became of the link).
    pub(crate) fn wake_handles(&self) {
        // A plain load first, as nearly always it is false: the reader that
        // set it calls this next, and sees its own store.
        if !self.may_wake.load(Ordering::Relaxed) || !self.may_wake.swap(false, Ordering::Acquire) {
            return;
        }
        let mut to_wake = lock(&self.to_wake);
        for waker in to_wake.drain(..) {
            waker.wake();
        }
    }

    /// Handles a stream frame from the server; `Err` is why the link must
    /// close (`MALFORMED`).
    pub(crate) fn on_frame(&self, header: Header, body: Bytes) -> Result<(), String> {
        if header.flags.is_response() || header.flags.is_error() || header.request_id == 0 {
            return Err("a stream frame with RESPONSE or ERROR set, or without a stream id".into());
        }
        let slot = lock(&self.open).get(&header.request_id).cloned();
        match header.opcode {
            STREAM_ITEM => {
                let Some(slot) = slot else { return Ok(()) };
                let mut state = lock(&slot);
                if state.granted == 0 {
                    return Err("a stream item beyond its credit".into());
                }
                state.granted -= 1;
                state.items.push_back(Arrived::One(body));
                self.wake_later(state);
            }
            STREAM_ITEMS => {
                let count = batch_len(&body)
                    .map_err(|_| "a STREAM_ITEMS body that is not items with their lengths")?;
                let Some(slot) = slot else { return Ok(()) };
                let mut state = lock(&slot);
                if state.granted < count {
                    return Err("stream items beyond their credit".into());
                }
                state.granted -= count;
                state.items.push_back(Arrived::Batch(BatchItems::new(body)));
                self.wake_later(state);
            }
            STREAM_CREDIT => {
                let credit = StreamCredit::decode_body(&body)
                    .map_err(|_| "a STREAM_CREDIT body that is not 4 or 5 bytes".to_owned())?;
                if let Some(slot) = slot {
                    let mut state = lock(&slot);
                    state.credit = state.credit.saturating_add(credit.items);
                    self.wake_later(state);
                }
            }
            // The server ends a download with its answer, never STREAM_END.
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use ternio_protocol::frame::Flags;

    use super::*;
    use crate::wake_count::counting_waker;

    #[test]
    fn a_handle_is_woken_once_per_read_after_its_frames() {
        let streams = Streams::default();
        let slot = streams.insert(7);
        let (count, waker) = counting_waker();
        {
            let mut state = lock(&slot);
            state.granted = 10;
            state.waker = Some(waker);
        }
        let item = |n: u8| {
            let header = Header::new(STREAM_ITEM, Flags::NONE, 7);
            streams.on_frame(header, Bytes::from(vec![n])).unwrap();
        };
        // Three frames of one read: queued, nobody woken yet.
        item(1);
        item(2);
        item(3);
        assert_eq!(lock(&slot).items.len(), 3);
        assert_eq!(count.get(), 0);
        // The read is handed over: one wake-up, and nothing more to wake.
        streams.wake_handles();
        assert_eq!(count.get(), 1);
        streams.wake_handles();
        assert_eq!(count.get(), 1);
        // A handle that did not wait again is not woken by the next read.
        item(4);
        streams.wake_handles();
        assert_eq!(count.get(), 1);
        assert_eq!(lock(&slot).items.len(), 4);
    }
}
