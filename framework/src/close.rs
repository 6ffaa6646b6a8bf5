//! How connections end: the notice a closing server sends its peer, and
//! the cause that hooks and metrics see afterwards. A leaf: it depends on
//! the protocol crate only.

use ternio_protocol::frame::{self, Flags, Framing, Header};
use ternio_protocol::secure::Sealer;
use ternio_protocol::system::{self, Disconnect};
use ternio_protocol::{BytesMut, DisconnectReason, Encode};

/// Why the server closes a connection now, and what its `DISCONNECT` tells
/// the peer: a protocol violation, a kick, a slow consumer, the shutdown.
#[derive(Debug)]
pub(crate) struct CloseNotice {
    pub(crate) reason: DisconnectReason,
    pub(crate) message: String,
}

impl CloseNotice {
    pub(crate) fn new(reason: DisconnectReason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }

    /// Appends the `DISCONNECT` frame that announces this notice,
    /// sealed with `sealer` when one is given.
    pub(crate) fn write_disconnect(
        &self,
        out: &mut BytesMut,
        framing: Framing,
        max_frame_size: usize,
        sealer: Option<&mut Sealer>,
    ) {
        let packet = Disconnect::new(self.reason, self.message.clone());
        let header = Header::new(system::DISCONNECT, Flags::NONE, 0);
        // The message is ours and short: it always fits (a sealer whose
        // counter is exhausted writes nothing, and the connection closes).
        let _ = match sealer {
            Some(sealer) => sealer.write_frame_with(out, framing, header, max_frame_size, |out| {
                packet.encode(out)
            }),
            None => frame::write_frame(out, framing, header, &packet, max_frame_size),
        };
    }
}

/// Why a connection closed, as the disconnect hooks see it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseCause {
    /// The peer sent `DISCONNECT` with this reason.
    PeerDisconnected(DisconnectReason),
    /// The peer closed the connection without a `DISCONNECT`.
    PeerClosed,
    /// The server sent `DISCONNECT` with this reason (a malformed frame,
    /// a kick, a slow consumer, the shutdown…).
    Disconnected(DisconnectReason),
    /// The socket failed.
    Failed(String),
    /// The session's link was lost and its client did not resume it within
    /// the resumption TTL.
    ResumeExpired,
    /// The session's link was lost, and it could no longer be resumed (its
    /// replay buffer overflowed while it waited, or a resumption failed).
    ResumeLost,
    /// This link carried a `RESUME`: the session it resumed goes on (under
    /// its own id); the link's own, never used, ends.
    Resumed,
}
