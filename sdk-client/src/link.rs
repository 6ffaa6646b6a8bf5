//! One connection to the server, whatever its transport: how frames go out
//! on it, how it is shut, and why it ended.
//!
//! A [`Link`] knows nothing of requests: the transport-independent side
//! ([`Shared`](crate::shared::Shared)) registers them, and each transport's
//! reader task hands it the frames that arrive.

use std::sync::OnceLock;
use std::time::Duration;

use ternio_protocol::frame::Header;
use ternio_protocol::{Encode, FrameError};
use tokio::sync::watch;

use crate::error::CloseReason;
use crate::tcp::TcpOut;
use crate::ws::WsOut;

/// Why a frame did not go out.
pub(crate) enum SendError {
    /// It does not fit in one frame; nothing was sent.
    TooLarge(FrameError),
    /// The link is lost already (for [`Link::lost_reason`]).
    Gone,
    /// Writing failed: the link must be declared lost for this reason.
    Io(CloseReason),
}

/// The sending half of a link, per transport.
pub(crate) enum Out {
    /// Length-prefixed frames on a TCP stream.
    Tcp(std::sync::Arc<TcpOut>),
    /// One binary WebSocket message per frame.
    Ws(WsOut),
}

/// One connection.
pub(crate) struct Link {
    out: Out,
    /// Set once, when the link is declared lost (or closed on purpose).
    lost: OnceLock<CloseReason>,
    /// Becomes `true` when the reader task has finished (for a WebSocket,
    /// after the close handshake or its time limit).
    reader_done: watch::Sender<bool>,
}

impl Link {
    pub(crate) fn new(out: Out) -> Self {
        Self {
            out,
            lost: OnceLock::new(),
            reader_done: watch::Sender::new(false),
        }
    }

    /// Encodes one frame and sends it, or queues it behind those already waiting.
    pub(crate) fn send<E: Encode + ?Sized>(
        &self,
        header: Header,
        body: &E,
        max_frame_size: usize,
    ) -> Result<(), SendError> {
        if self.lost.get().is_some() {
            return Err(SendError::Gone);
        }
        match &self.out {
            Out::Tcp(out) => out.send(header, body, max_frame_size),
            Out::Ws(out) => out.send(header, body, max_frame_size),
        }
    }

    /// Records why the link ended; only the first reason counts.
    pub(crate) fn mark_lost(&self, reason: CloseReason) {
        let _ = self.lost.set(reason);
    }

    /// Why the link ended, once it has.
    pub(crate) fn lost_reason(&self) -> Option<&CloseReason> {
        self.lost.get()
    }

    /// Stops the link's traffic: a TCP socket is shut down at once; a
    /// WebSocket's writer sends what is queued (a Close frame, say) and stops.
    pub(crate) fn shutdown(&self) {
        match &self.out {
            Out::Tcp(out) => out.shutdown(),
            Out::Ws(out) => out.shutdown(),
        }
    }

    /// The transport's part of an intentional close, after `DISCONNECT` was
    /// queued: TCP writes what is queued; WebSocket also sends its Close
    /// frame and waits for the server's. The caller bounds the wait.
    pub(crate) async fn close_gracefully(&self) {
        match &self.out {
            Out::Tcp(out) => {
                let _ = out.flush().await;
            }
            Out::Ws(out) => {
                if out.send_close_normal() {
                    self.wait_reader_done().await;
                }
            }
        }
    }

    /// The WebSocket sending half, on a WebSocket link.
    pub(crate) fn ws_out(&self) -> Option<&WsOut> {
        match &self.out {
            Out::Ws(out) => Some(out),
            Out::Tcp(_) => None,
        }
    }

    /// Called by the reader task as it ends.
    pub(crate) fn set_reader_done(&self) {
        self.reader_done.send_replace(true);
    }

    async fn wait_reader_done(&self) {
        let mut done = self.reader_done.subscribe();
        let _ = done.wait_for(|done| *done).await;
    }
}

/// How long a lost link's tasks may take to finish on their own (a
/// WebSocket close handshake) before they are aborted.
pub(crate) const RETIRE_GRACE: Duration = Duration::from_secs(2);
