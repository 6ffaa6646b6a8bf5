//! The session's open streams (docs/PROTOCOL.md section 4.5): what the
//! reader of the session's current link hands each (items, credit). The
//! handles are in `item_streams`.
//!
//! A stream belongs to the session, not to the link it was opened on: on a
//! resumable session its frames are counted and replayed (section 4.2),
//! so a stream goes on across a resumption. A stream whose session is lost
//! ends with its request, which fails (`ClientError::Closed`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
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

impl StreamState {
    pub(crate) fn wake(&mut self) {
        if let Some(waker) = self.waker.take() {
            waker.wake();
        }
    }
}

/// One stream's state.
pub(crate) type Slot = Arc<Mutex<StreamState>>;

/// The session's open streams, by request id.
#[derive(Default)]
pub(crate) struct Streams {
    open: Mutex<HashMap<u32, Slot>>,
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
            lock(&slot).wake();
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
                state.wake();
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
                state.wake();
            }
            STREAM_CREDIT => {
                let credit = StreamCredit::decode_body(&body)
                    .map_err(|_| "a STREAM_CREDIT body that is not 4 or 5 bytes".to_owned())?;
                if let Some(slot) = slot {
                    let mut state = lock(&slot);
                    state.credit = state.credit.saturating_add(credit.items);
                    state.wake();
                }
            }
            // The server ends a download with its answer, never STREAM_END.
            _ => {}
        }
        Ok(())
    }
}
