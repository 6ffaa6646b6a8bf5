//! The engine's side of the datagram channel (docs/PROTOCOL.md section
//! 4.4): answering `DATAGRAM_BIND`, and running the frames that came by
//! datagram as one-way requests.

use ternio_protocol::frame::{Frame, Header};
use ternio_protocol::{Bytes, ErrorCode, ReplySink};

use super::security::Security;
use super::{AfterFrame, Engine};

impl Engine {
    /// Answers a `DATAGRAM_BIND` request: a new binding (replacing the
    /// connection's), on a secure session with a UDP listener only.
    pub(super) fn datagram_bind(&mut self, header: Header, body: &Bytes) -> AfterFrame {
        let Some(datagrams) = self.server.datagrams.clone() else {
            self.error(
                header,
                ErrorCode::UnknownOpcode,
                &"this server has no UDP listener",
            );
            return AfterFrame::Continue;
        };
        if header.request_id == 0 || !body.is_empty() {
            self.error(
                header,
                ErrorCode::Malformed,
                &"DATAGRAM_BIND is a request with an empty body",
            );
            return AfterFrame::Continue;
        }
        let Security::Secure(channel) = &self.security else {
            self.error(
                header,
                ErrorCode::EncryptionRequired,
                &"a datagram channel binds to a secure session: handshake first",
            );
            return AfterFrame::Continue;
        };
        let secret = channel.session_secret.clone();
        match datagrams.bind(&self.connection, &secret[..]) {
            Some(binding) => {
                self.reply_to(header).packet(&binding);
            }
            None => {
                self.error(
                    header,
                    ErrorCode::Overloaded,
                    &"the UDP listener is not running yet",
                );
            }
        }
        AfterFrame::Continue
    }

    /// Runs the frames that came by datagram, each a one-way request, under
    /// the same backpressure as the stream's: only while the engine
    /// [`wants_input`](Engine::wants_input) (fewer requests running than
    /// `max_requests_in_flight`, the outbound buffer below its high-water
    /// mark). The rest wait in the inbox (bounded: past it, datagrams are
    /// dropped) until a request finishes or the peer reads.
    pub(super) fn take_datagrams(&mut self) -> bool {
        let mut progress = false;
        while self.wants_input()
            && let Some(frame) = self.connection.datagrams.take()
        {
            progress = true;
            // The UDP task checked the header (request id 0, no flag).
            let Ok(header) = Header::parse(&frame) else {
                continue;
            };
            let body = frame.slice(ternio_protocol::HEADER_LEN..);
            self.dispatch(Frame { header, body });
        }
        progress
    }
}
