//! The secure session (contract section 5): the handshake, sealed frames
//! opened in place, and what a plain frame on a secure session means.

use ternio_protocol::Decode;
use ternio_protocol::frame::{Flags, Framing, Header};
use ternio_protocol::secure::{Responder, Sealer, SecureChannel};
use ternio_protocol::system::{self, Disconnect};
use ternio_protocol::{BytesMut, DisconnectReason, ErrorCode, Frame};

use super::{AfterFrame, Engine};
use crate::close::CloseNotice;

/// Where the connection's secure session stands (section 5).
pub(super) enum Security {
    /// No handshake yet (the server may require one in time: see the
    /// connection's timers).
    Plain,
    /// The handshake completed: every frame in either direction is sealed.
    Secure(Box<SecureChannel>),
    /// A handshake was tried and failed: no other may follow. (A server
    /// that requires encryption closes the connection then.)
    Failed,
}

impl Security {
    /// The sealer, once the session is up: everything written is sealed.
    pub(super) fn sealer(&mut self) -> Option<&mut Sealer> {
        match self {
            Self::Secure(channel) => Some(&mut channel.sealer),
            _ => None,
        }
    }
}

impl Engine {
    /// The largest frame the peer may send now: smaller until the
    /// handshake completed when the server requires encryption.
    pub(crate) fn frame_limit(&self) -> usize {
        match self.security {
            Security::Secure(_) => self.server.config.max_frame_size,
            _ => self.server.config.frame_limit_before_handshake(),
        }
    }

    /// Writes a `REKEY` before the next sealed frame when the session's
    /// policy says it is time (section 5.2).
    pub(super) fn rekey_if_due(&mut self) {
        if let Some(sealer) = self.security.sealer()
            && let Err(error) = sealer.rekey_if_due(&mut self.out, Framing::LengthPrefixed)
        {
            tracing::warn!(connection = %self.connection.id, %error, "no rekey");
        }
    }

    /// Handles one sealed frame: opens its body in place, then handles it
    /// as [`on_frame`](Self::on_frame) does. A frame that does not open (or
    /// comes before the handshake) closes the connection with `DECRYPT_FAILED`.
    pub(crate) fn on_sealed_frame(&mut self, header: Header, mut body: BytesMut) -> AfterFrame {
        let Security::Secure(channel) = &mut self.security else {
            return self.close_now(&CloseNotice::new(
                DisconnectReason::DecryptFailed,
                "sealed frame before a completed handshake",
            ));
        };
        if let Err(error) = channel.opener.open(&header, &mut body) {
            return self.close_now(&CloseNotice::new(
                DisconnectReason::DecryptFailed,
                error.to_string(),
            ));
        }
        if header.opcode == system::REKEY {
            // The opener moved to the next key; the frame carries nothing else.
            if header.request_id != 0 || !body.is_empty() || header.flags != Flags::ENCRYPTED {
                return self.close_now(&CloseNotice::new(
                    DisconnectReason::Malformed,
                    "a REKEY with an id, a body or other flags",
                ));
            }
            return AfterFrame::Continue;
        }
        let flow = self.handle(Frame {
            header,
            body: body.freeze(),
        });
        self.close_if_exhausted(flow)
    }

    /// A plain frame on a secure session (section 5.1): bytes an attacker
    /// inserted, or the peer's `DISCONNECT DECRYPT_FAILED`. Nothing of it
    /// runs.
    pub(super) fn on_plain_when_secure(&mut self, frame: Frame) -> AfterFrame {
        let header = frame.header;
        if header.opcode == system::DISCONNECT
            && let Ok(disconnect) = Disconnect::decode_body(&frame.body)
            && disconnect.reason == DisconnectReason::DecryptFailed
        {
            // The client could not open a frame: the link was written into
            // (section 4.2: the session waits for its client if it can).
            // (Only a secure session gets here.)
            self.link_attacked = self.resumable();
            self.closed = Some(disconnect.reason);
            return AfterFrame::PeerDisconnected(disconnect);
        }
        self.close_now(&CloseNotice::new(
            DisconnectReason::DecryptFailed,
            format!(
                "a plain frame (opcode {:#06X}) on a secure session",
                header.opcode
            ),
        ))
    }

    /// Closes the connection, without a word, once its sealer used its last
    /// counter (section 5.1: a sender closes rather than seal with 2^64 - 1).
    pub(super) fn close_if_exhausted(&mut self, flow: AfterFrame) -> AfterFrame {
        match self.security.sealer() {
            Some(sealer) if sealer.next_counter() == u64::MAX && self.closed.is_none() => {
                self.closed = Some(DisconnectReason::Normal);
                self.closing = None;
                self.cancel_pending();
                AfterFrame::Close
            }
            _ => flow,
        }
    }

    /// Answers a `HANDSHAKE`: the second Noise message, in plain, after
    /// which the session is secure. Any failure, and any handshake after
    /// the first, is error 9.
    pub(super) fn handshake(&mut self, frame: Frame) -> AfterFrame {
        let header = frame.header;
        if self.acks.is_some() {
            // A session's kind is fixed once counting started (section 4.2),
            // also once its replay buffer overflowed (counting goes on).
            self.error(
                header,
                ErrorCode::HandshakeFailed,
                &"a handshake after RESUME_TICKET: run the handshake first",
            );
            return AfterFrame::Continue;
        }
        if !matches!(self.security, Security::Plain) {
            self.error(
                header,
                ErrorCode::HandshakeFailed,
                &"a handshake already ran on this connection",
            );
            return AfterFrame::Continue;
        }
        // The server-wide budget: a flood of handshakes does not take the
        // CPU from the connections already served.
        if let Some(budget) = &self.server.handshakes
            && budget.check().is_err()
        {
            return self.handshake_failed(
                header,
                ErrorCode::Overloaded,
                &"too many handshakes at once: try again later",
            );
        }
        let identity = self
            .server
            .identity
            .as_ref()
            .map(|identity| identity.keypair());
        match Responder::respond(&frame.body, identity) {
            Ok((reply, mut channel)) => {
                // The answer itself goes out plain (the session is not secure
                // yet, so `reply_to` does not seal): the client has no keys
                // yet. Every frame after it is sealed.
                self.reply_to(header)
                    .encoded(system::HANDSHAKE, &reply, false);
                channel.sealer.set_rekey_policy(self.server.config.rekey);
                self.security = Security::Secure(Box::new(channel));
                self.timers.handshake_done();
                tracing::debug!(connection = %self.connection.id, "secure session established");
                if let Some(metrics) = &self.server.metrics {
                    metrics.handshake(true);
                }
            }
            Err(error) => {
                return self.handshake_failed(header, ErrorCode::HandshakeFailed, &error);
            }
        }
        AfterFrame::Continue
    }

    /// Answers a `HANDSHAKE` that did not run or failed with `code`; no
    /// other may follow on this connection. A server that requires
    /// encryption closes the connection then (`HANDSHAKE_TIMEOUT`: no
    /// handshake will complete on it).
    fn handshake_failed(
        &mut self,
        header: Header,
        code: ErrorCode,
        error: &dyn std::fmt::Display,
    ) -> AfterFrame {
        self.security = Security::Failed;
        self.timers.handshake_done();
        tracing::debug!(connection = %self.connection.id, %error, "handshake failed");
        if let Some(metrics) = &self.server.metrics {
            metrics.handshake(false);
        }
        self.error(header, code, error);
        if self.server.config.require_encryption {
            return self.close_now(&CloseNotice::new(
                DisconnectReason::HandshakeTimeout,
                "the handshake failed, and this server requires encryption",
            ));
        }
        AfterFrame::Continue
    }
}
