//! How a frame goes out on a link, and why it did not: the small types the
//! transports' outbound buffers and the links share.

use ternio_protocol::FrameError;

use crate::error::CloseReason;

/// How one frame goes out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Sealed once the link's secure channel is up, plain before; with
    /// `required`, refused before. With `compress`, the body is compressed
    /// (before sealing) when it reaches that threshold and shrinks.
    Sealable {
        required: bool,
        compress: Option<usize>,
    },
    /// The `HANDSHAKE` request: plain, and nothing else goes out after it
    /// until the answer is read.
    Handshake,
    /// Plain whatever the secure channel: `DISCONNECT DECRYPT_FAILED` only.
    PlainFinal,
}

/// Why a frame did not go out.
#[derive(Debug)]
pub(crate) enum SendError {
    /// It does not fit in one frame; nothing was sent.
    TooLarge(FrameError),
    /// The link is lost already (or takes no more frames).
    Gone,
    /// Writing failed, or the frame would have taken the outbound buffer
    /// past its bound: the link must be declared lost for this reason.
    Lost(CloseReason),
    /// Sealing was asked for and the link has no secure channel.
    NotSecure,
    /// A handshake waits for its answer: nothing else goes out meanwhile.
    Handshaking,
}

/// Takes the session's count for an `ACK` (see `Outbound::queue_ack`):
/// `None` when nothing is left to acknowledge. The link calls it only once the
/// `ACK` can be queued, so that a count taken always leaves with the link.
pub(crate) type TakeAck<'a> = &'a dyn Fn() -> Option<ternio_protocol::system::Ack>;
