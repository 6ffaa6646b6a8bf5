//! What a transport's tasks tell the connection above them: the frames that
//! arrive and that the link ended. The transports know this trait only, not
//! what implements it (the client's inbound side), so they sit below it.

use std::future::{Future, poll_fn};
use std::pin::pin;

use bytes::BytesMut;
use ternio_protocol::Frame;
use ternio_protocol::frame::Header;

use crate::error::CloseReason;

/// The connection, as one link's reader and writer tasks see it.
pub(crate) trait LinkEvents: Send + Sync + 'static {
    /// Handles one frame whose body can be opened in place (from a stream
    /// of length-prefixed frames); returns why to stop reading, if it must.
    fn on_frame_mut(&self, header: Header, body: BytesMut) -> Option<CloseReason>;

    /// Handles one frame that arrived whole (a WebSocket message); returns
    /// why to stop reading, if it must. A sealed body is copied into
    /// `open_buf` to be opened in place: the reader keeps that buffer
    /// across messages, so its room is reused.
    fn on_frame(&self, frame: Frame, open_buf: &mut BytesMut) -> Option<CloseReason>;

    /// Called once the reader handed over every whole frame of what it
    /// read (and after the last frame it hands over): what those frames
    /// gave to waiting tasks is announced to them here, once per read.
    fn frames_handed(&self);

    /// Called when the reader, having handed over all it read, finds
    /// nothing more to read: it waits for the server. A link found lost
    /// here is declared so ([`lost`](Self::lost)), and the reader learns it
    /// from its socket.
    fn idle(&self);

    /// Called by the reader as soon as it takes no more frames, before it
    /// declares the link lost (and before a WebSocket close handshake).
    fn reading_stopped(&self);

    /// Declares the link lost for `reason` (only the first reason counts).
    fn lost(&self, reason: CloseReason);

    /// Whether the link was declared lost.
    fn is_lost(&self) -> bool;

    /// Called by the reader task as it ends.
    fn reader_done(&self);
}

/// Awaits `read`, telling `events` it is [idle](LinkEvents::idle) if the
/// read is not ready at once (after the first poll, so that what the idle
/// step makes the server send wakes the read).
pub(crate) async fn read_or_idle<F: Future>(events: &impl LinkEvents, read: F) -> F::Output {
    let mut read = pin!(read);
    let mut idle = true;
    poll_fn(|cx| {
        let poll = read.as_mut().poll(cx);
        if poll.is_pending() && std::mem::take(&mut idle) {
            events.idle();
        }
        poll
    })
    .await
}
