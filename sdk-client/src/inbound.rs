//! What arrives on a link: every frame the reader hands over (answers to
//! requests and to the handshake, pushes, `PING`, `DISCONNECT`, `REKEY`),
//! opened when it came sealed, and the end of the link. [`Inbound`] is the
//! [`LinkEvents`] of one link.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use ternio_protocol::buffers;
use ternio_protocol::frame::{Flags, HEADER_LEN, Header};
use ternio_protocol::stream::{
    STREAM_CREDIT, STREAM_END, STREAM_ITEM, STREAM_ITEMS, is_stream_opcode,
};
use ternio_protocol::system::{self, Disconnect, Ping};
use ternio_protocol::{Decode, DisconnectReason, Frame};

use crate::error::CloseReason;
use crate::events::LinkEvents;
use crate::handshake;
use crate::link::Link;
use crate::requests::Answer;
use crate::resume::ReadBatch;
use crate::resuming;
use crate::send::{Mode, SendError};
use crate::shared::Shared;

/// One link's reader and writer tasks, reporting to the client.
#[derive(Clone)]
pub(crate) struct Inbound {
    shared: Arc<Shared>,
    link: Arc<Link>,
    /// The reader's count of what it took in the read under way.
    batch: Arc<ReadBatch>,
}

impl LinkEvents for Inbound {
    /// A sealed body is opened in place.
    fn on_frame_mut(&self, header: Header, mut body: BytesMut) -> Option<CloseReason> {
        if !header.flags.is_encrypted() {
            return self.handle(header, body.freeze(), false);
        }
        if let Err(error) = self.link.open(&header, &mut body) {
            return Some(self.decrypt_failed(error));
        }
        self.handle(header, body.freeze(), true)
    }

    /// A sealed body is copied into `open_buf` first ([`buffers::copy_to_open`]).
    fn on_frame(&self, frame: Frame, open_buf: &mut BytesMut) -> Option<CloseReason> {
        if frame.header.flags.is_encrypted() {
            let body = buffers::copy_to_open(open_buf, &frame.body);
            return self.on_frame_mut(frame.header, body);
        }
        self.handle(frame.header, frame.body, false)
    }

    fn frames_handed(&self) {
        self.shared.links().streams().wake_handles();
    }

    /// A reader that has read all the server sent acknowledges pushes
    /// early (docs/PROTOCOL.md section 4.2): the server may be holding
    /// more until an `ACK` makes room.
    fn idle(&self) {
        // All that came is handed over: what the reader took goes into the
        // count (once per wait, not per read).
        self.shared.session().end_read(self.batch.batch());
        if self.shared.wants_resume()
            && self.shared.session().ack_when_idle()
            && self.shared.links().accepts(&self.link)
            && let Some(reason) = self.send_ack()
        {
            self.lost(reason);
        }
    }

    fn lost(&self, reason: CloseReason) {
        self.shared.lose(&self.link, reason);
    }

    fn is_lost(&self) -> bool {
        self.link.lost_reason().is_some()
    }

    /// What the reader took goes into the count: a `RESUME` waits for it.
    fn reading_stopped(&self) {
        self.shared.session().end_read(self.batch.batch());
    }

    fn reader_done(&self) {
        self.link.set_reader_done();
    }
}

impl Inbound {
    pub(crate) fn new(shared: &Arc<Shared>, link: &Arc<Link>) -> Self {
        Self {
            shared: Arc::clone(shared),
            link: Arc::clone(link),
            batch: Arc::new(ReadBatch::new(shared.session())),
        }
    }

    fn max_frame_size(&self) -> usize {
        self.shared.config().max_frame_size
    }

    /// Handles one frame, opened if it was sealed (`sealed`).
    fn handle(&self, header: Header, body: Bytes, sealed: bool) -> Option<CloseReason> {
        if !sealed && self.link.is_secure() {
            return Some(self.plain_when_secure(header, &body));
        }
        let (header, body) = if header.flags.is_compressed() {
            // Section 6: the length is checked before anything is allocated.
            match (Frame { header, body }).decompressed(self.max_frame_size()) {
                Ok(frame) => (frame.header, frame.body),
                Err(error) => {
                    let reason = if error.is_too_large() {
                        DisconnectReason::FrameTooLarge
                    } else {
                        DisconnectReason::Malformed
                    };
                    return Some(self.refuse(reason, error.to_string()));
                }
            }
        } else {
            (header, body)
        };
        if header.opcode == system::REKEY {
            // A sealed one already moved the opener to the next key.
            let valid = sealed
                && header.request_id == 0
                && body.is_empty()
                && header.flags == Flags::ENCRYPTED;
            return (!valid).then(|| {
                CloseReason::Protocol("a REKEY that is not sealed, empty and without id".into())
            });
        }
        if header.flags.is_response() && header.request_id != 0 {
            return self.on_answer(header, body, sealed);
        }
        if header.is_counted() && self.shared.wants_resume() {
            // A push (or an error about a send), or a stream frame: counted
            // and taken only from the link the session is on.
            let len = HEADER_LEN + body.len();
            let due =
                self.shared
                    .session()
                    .received(self.batch.batch(), self.link.tag(), len, true)?;
            // Taken first: a link lost as the ACK goes out loses nothing
            // taken.
            let lost = if is_stream_opcode(header.opcode) && !header.flags.is_response() {
                self.on_stream_frame(header, body)
            } else {
                self.deliver(header, &body)
            };
            return lost.or_else(|| self.ack_if(due));
        }
        if header.flags.is_response() {
            return self.on_answer(header, body, sealed);
        }
        match header.opcode {
            system::ACK => self.shared.session().on_ack(header, &body),
            STREAM_ITEM | STREAM_ITEMS | STREAM_CREDIT | STREAM_END => {
                // Only from the current link: the streams are the session's.
                if !self.shared.links().accepts(&self.link) {
                    return None;
                }
                self.on_stream_frame(header, body)
            }
            system::DISCONNECT => {
                let disconnect = Disconnect::decode_lossy(&body);
                Some(CloseReason::Disconnected(disconnect))
            }
            system::PING if header.request_id != 0 => {
                // An unreadable PING gets no answer from the client.
                if let Some(Ok((reply, pong))) = Ping::answer(header, &body)
                    && let Err(SendError::Lost(reason)) =
                        self.link.send(reply, &pong, self.max_frame_size(), false)
                {
                    return Some(reason);
                }
                None
            }
            _ if header.is_system() => {
                self.shared.pushes().count_unhandled();
                None
            }
            _ => self.deliver(header, &body),
        }
    }

    /// Hands a stream frame to its stream; a malformed one closes the link.
    fn on_stream_frame(&self, header: Header, body: Bytes) -> Option<CloseReason> {
        match self.shared.links().streams().on_frame(header, body) {
            Ok(()) => None,
            Err(why) => Some(self.refuse(DisconnectReason::Malformed, why)),
        }
    }

    /// Delivers a push (or reports an error about a send), what a frame
    /// with an application opcode that answers no request is.
    fn deliver(&self, header: Header, body: &Bytes) -> Option<CloseReason> {
        if header.flags.is_response() {
            // An error about a fire-and-forget send: nobody waits for it.
            tracing::warn!(
                opcode = header.opcode,
                "the server reported an error for a send"
            );
        } else {
            self.shared.pushes().deliver(header.opcode, body);
        }
        None
    }

    /// Handles an answer: to the handshake under way, or to a request.
    /// Matched by id alone: the contract does not say which opcode an
    /// error answer carries.
    fn on_answer(&self, header: Header, body: Bytes, sealed: bool) -> Option<CloseReason> {
        if let Some(pending) = self.link.take_handshake(header.request_id) {
            let rekey = self.shared.config().rekey;
            return handshake::answer(&self.link, *pending, (header, &body, sealed), rekey);
        }
        if header.opcode == system::RESUME
            && let Some(pending) = self.link.take_resume(header.request_id)
        {
            let rekey = self.shared.config().rekey;
            return resuming::answer(pending, &self.link, (header, &body, sealed), rekey);
        }
        if header.opcode == system::RESUME_TICKET {
            // Counting starts before the next frame is read.
            if self.shared.session().on_ticket(header, &body) {
                self.shared.ask_ticket(&self.link);
            }
            return None;
        }
        if header.request_id == 0 {
            // An error about a fire-and-forget send: nobody waits for it.
            tracing::warn!(
                opcode = header.opcode,
                "the server reported an error for a send"
            );
            return None;
        }
        let id = header.request_id;
        let counted = header.is_counted() && self.shared.wants_resume();
        let len = HEADER_LEN + body.len();
        let session = self.shared.session();
        let (answer, due) =
            self.shared
                .links()
                .answer(&self.link, Frame { header, body }, sealed, || {
                    counted
                        && session.received(self.batch.batch(), self.link.tag(), len, false)
                            == Some(true)
                });
        match answer {
            Answer::Taken(Some(waker)) => waker.wake(),
            Answer::Taken(None) | Answer::NotWaiting => {}
            Answer::PlainToSealed => {
                // Losing the link fails the request with this reason.
                let message = format!("a plain answer to sealed request {id}");
                return Some(self.decrypt_failed(message));
            }
        }
        // After the answer went to its request: a link lost now loses
        // nothing taken.
        self.ack_if(due)
    }

    /// Sends the session's `ACK` when one is `due` (every 1,024 frames or 32
    /// KiB received); returns why the link is lost, if sending showed it.
    fn ack_if(&self, due: bool) -> Option<CloseReason> {
        due.then(|| self.send_ack()).flatten()
    }

    /// Sends the session's `ACK` of what came since the last one, if
    /// anything did; returns why the link is lost, if sending showed it.
    fn send_ack(&self) -> Option<CloseReason> {
        let max = self.max_frame_size();
        let session = self.shared.session();
        // The ACK reports the count: what this read took goes in first.
        session.publish(self.batch.batch());
        let sent = session.send_ack(|take_ack| self.link.send_ack(take_ack, max));
        match sent {
            Err(SendError::Lost(reason)) => Some(reason),
            _ => None,
        }
    }

    /// Tells the server why its frame is refused (`DISCONNECT reason`, sealed
    /// on a secure link, contract section 6) and returns the reason to close
    /// the link with.
    fn refuse(&self, reason: DisconnectReason, message: String) -> CloseReason {
        tracing::warn!(%reason, %message, "a frame from the server was refused");
        let disconnect = Disconnect::new(reason, message.clone());
        let header = Header::new(system::DISCONNECT, Flags::NONE, 0);
        let mode = Mode::Sealable {
            required: false,
            compress: None,
        };
        let _ = self
            .link
            .send_as(mode, header, &disconnect, self.max_frame_size());
        CloseReason::Protocol(message)
    }

    /// Tells the server `DECRYPT_FAILED` (in plain) and returns the reason
    /// to close the link with.
    fn decrypt_failed(&self, message: String) -> CloseReason {
        tracing::warn!(%message, "a frame from the server failed the secure session's checks");
        let disconnect = Disconnect::new(DisconnectReason::DecryptFailed, message.clone());
        let header = Header::new(system::DISCONNECT, Flags::NONE, 0);
        // The one frame a secure channel sends plain (contract section 5.1).
        let max = self.max_frame_size();
        let _ = self
            .link
            .send_as(Mode::PlainFinal, header, &disconnect, max);
        CloseReason::DecryptFailed(message)
    }

    /// A plain frame on a secure channel (contract section 5.1): the server
    /// seals everything once the channel is up, so someone on the path
    /// wrote it. Even a `DISCONNECT` (a forged `KICKED` would otherwise end
    /// the client for good) only loses the link, and the reconnect policy
    /// applies.
    fn plain_when_secure(&self, header: Header, body: &Bytes) -> CloseReason {
        let message = match header.opcode {
            system::DISCONNECT => match Disconnect::decode_body(body) {
                // The one plain frame a secure peer may send: not answered
                // ("other than that DISCONNECT"), the link is lost all the same.
                Ok(disconnect) if disconnect.reason == DisconnectReason::DecryptFailed => {
                    return CloseReason::DecryptFailed(format!(
                        "the server could not open a frame: {}",
                        disconnect.message
                    ));
                }
                Ok(disconnect) => format!(
                    "a plain DISCONNECT on a secure session, treated as a lost connection: {}: {}",
                    disconnect.reason, disconnect.message
                ),
                Err(_) => "an unreadable plain DISCONNECT on a secure session".to_owned(),
            },
            opcode => format!("a plain frame (opcode {opcode:#06X}) on a secure session"),
        };
        self.decrypt_failed(message)
    }
}
