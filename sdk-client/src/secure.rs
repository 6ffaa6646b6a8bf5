//! Secure sessions on the client's side (contract section 5): the state of
//! a link's handshake, and how the server's answer to it is read.
//!
//! The handshake's answer is read on the link's reader task, not by the
//! caller that asked for it: the server seals every push it writes after
//! that answer, so the keys must be in place before the reader takes the
//! next frame. The caller waits for the outcome on a oneshot channel.
//!
//! Each link keeps its [`Opener`] here (only its reader opens frames); its
//! [`Sealer`](ternio_protocol::secure::Sealer) lives inside the transport's
//! outbound lock, so that counters go out in the order frames are queued.

use bytes::{Bytes, BytesMut};
use ternio_protocol::frame::Header;
use ternio_protocol::secure::{Initiator, Opener, SecureChannel};
use ternio_protocol::system::{self, ErrorBody};
use ternio_protocol::{Encode, ErrorCode};
use tokio::sync::oneshot;

use crate::error::{ClientError, CloseReason};

/// Whether a frame may go out plain. Once a link's session is up every
/// frame is sealed whatever this says (contract section 5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seal {
    /// Plain while the application has not asked for a secure session;
    /// refused with [`ClientError::NotSecure`] once it has and the link has
    /// none (a failed handshake is no reason to carry on in plain).
    Auto,
    /// Refused with [`ClientError::NotSecure`] without a session.
    Required,
}

/// Where the caller of a handshake learns how it went.
pub(crate) type HandshakeDone = oneshot::Sender<Result<(), ClientError>>;

/// A `HANDSHAKE` request sent on a link and not answered yet.
pub(crate) struct PendingHandshake {
    /// The request's id: its answer carries it.
    pub(crate) id: u32,
    pub(crate) initiator: Initiator,
    /// The pinned key, kept to run the same handshake after a reconnect.
    pub(crate) pin: Option<[u8; 32]>,
    pub(crate) done: HandshakeDone,
}

/// Where one link's secure session stands.
pub(crate) enum LinkSecurity {
    /// No handshake was tried on this link.
    Plain,
    /// A handshake is under way.
    Pending(Box<PendingHandshake>),
    /// The handshake completed: sealed frames from the server open with this.
    Secure(Box<Opener>),
    /// A handshake was tried and failed, or the link was lost during one:
    /// no other may run on this link.
    Failed,
}

/// What the server's answer to a handshake comes to.
pub(crate) struct Answer {
    /// What the caller of the handshake gets.
    pub(crate) outcome: Result<(), ClientError>,
    /// The session's keys, when it completed.
    pub(crate) channel: Option<SecureChannel>,
    /// Why the link must close, when the two sides now disagree about the
    /// session (the server completed it, the client could not).
    pub(crate) close: Option<CloseReason>,
    /// The pinned key of the handshake.
    pub(crate) pin: Option<[u8; 32]>,
    /// Where to report the outcome.
    pub(crate) done: HandshakeDone,
}

impl PendingHandshake {
    /// Reads the server's answer to this handshake: `header` and `body` as
    /// they arrived, `sealed` when the frame was sealed (it must not be).
    pub(crate) fn answer(self, header: Header, body: &Bytes, sealed: bool) -> Answer {
        let PendingHandshake {
            initiator,
            pin,
            done,
            ..
        } = self;
        let failed = |error: ClientError, close: Option<CloseReason>| (Err(error), None, close);
        let (outcome, channel, close) = if sealed {
            let message = "the server sealed its answer to the handshake";
            failed(
                ClientError::Handshake(message.to_owned()),
                Some(CloseReason::Protocol(message.to_owned())),
            )
        } else if header.flags.is_error() {
            let error = match ErrorBody::parse(body) {
                Ok(error) if error.code == ErrorCode::HandshakeFailed && pin.is_some() => {
                    ClientError::KeyRejected(error.message)
                }
                Ok(error) if error.code == ErrorCode::HandshakeFailed => ClientError::Handshake(
                    format!("the server refused it (error 9): {}", error.message),
                ),
                Ok(error) => ClientError::Handshake(format!(
                    "the server answered error {}: {}",
                    error.code, error.message
                )),
                Err(error) => ClientError::Handshake(format!(
                    "the server's error answer is unreadable: {error}"
                )),
            };
            failed(error, None)
        } else if header.opcode != system::HANDSHAKE {
            let message = format!(
                "the server answered the handshake with opcode {:#06X}",
                header.opcode
            );
            failed(
                ClientError::Handshake(message.clone()),
                Some(CloseReason::Protocol(message)),
            )
        } else {
            match initiator.finish(body) {
                Ok(channel) => (Ok(()), Some(channel), None),
                Err(error) => {
                    let message =
                        format!("the server's answer does not complete the handshake: {error}");
                    failed(
                        ClientError::Handshake(message.clone()),
                        Some(CloseReason::Protocol(message)),
                    )
                }
            }
        };
        Answer {
            outcome,
            channel,
            close,
            pin,
            done,
        }
    }
}

/// Opens a sealed body in place with `security`'s opener.
pub(crate) fn open(
    security: &mut LinkSecurity,
    header: &Header,
    body: &mut BytesMut,
) -> Result<(), String> {
    match security {
        LinkSecurity::Secure(opener) => {
            opener.open(header, body).map_err(|error| error.to_string())
        }
        _ => Err("a sealed frame before the handshake completed".to_owned()),
    }
}

/// A body that is already encoded (the handshake's Noise message).
pub(crate) struct RawBody<'a>(pub(crate) &'a [u8]);

impl Encode for RawBody<'_> {
    fn encode(&self, out: &mut BytesMut) {
        out.extend_from_slice(self.0);
    }

    fn encoded_len(&self) -> usize {
        self.0.len()
    }
}
