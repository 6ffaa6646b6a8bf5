//! What arrives on a link, handed to the client: the [`LinkEvents`] of one
//! link.

use std::sync::Arc;

use bytes::BytesMut;
use ternio_protocol::Frame;
use ternio_protocol::frame::Header;

use crate::error::CloseReason;
use crate::events::LinkEvents;
use crate::link::Link;
use crate::shared::Shared;

/// One link's reader and writer tasks, reporting to the client.
#[derive(Clone)]
pub(crate) struct Inbound {
    shared: Arc<Shared>,
    link: Arc<Link>,
}

impl Inbound {
    pub(crate) fn new(shared: &Arc<Shared>, link: &Arc<Link>) -> Self {
        Self {
            shared: Arc::clone(shared),
            link: Arc::clone(link),
        }
    }
}

impl LinkEvents for Inbound {
    fn on_frame_mut(&self, header: Header, body: BytesMut) -> Option<CloseReason> {
        self.shared.on_frame_mut(&self.link, header, body)
    }

    fn on_frame(&self, frame: Frame, open_buf: &mut BytesMut) -> Option<CloseReason> {
        self.shared.on_frame(&self.link, frame, open_buf)
    }

    fn lost(&self, reason: CloseReason) {
        self.shared.lose(&self.link, reason);
    }

    fn is_lost(&self) -> bool {
        self.link.lost_reason().is_some()
    }

    fn reader_done(&self) {
        self.link.set_reader_done();
    }
}
