//! Transports: sockets in, frames out. Each drives a
//! [`Session`](crate::connection::Session) and knows nothing of handlers.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::Either;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::instrument::Instrumented;
use tracing::{Instrument, Span};

use crate::admission::{Permit, Refusal};
use crate::server::{CloseCause, ServerShared};
use ternio_protocol::DisconnectReason;

pub(crate) mod tcp;
pub(crate) mod websocket;
mod ws_buffers;

/// A connection's `future` inside its `span`, whose enter and exit on
/// every poll are skipped when no subscriber records the span. (An enum,
/// not an `async fn`: the connection's state is not laid out twice.)
pub(crate) fn in_span<F: Future>(span: Span, future: F) -> Either<F, Instrumented<F>> {
    if span.is_disabled() {
        Either::Left(future)
    } else {
        Either::Right(future.instrument(span))
    }
}

/// The most bytes a closing connection reads and discards.
const MAX_DRAIN: usize = 1024 * 1024;

/// Closes the writing side of `stream`, then reads away what the peer still
/// sends (at most [`MAX_DRAIN`] bytes) until it closes too: input left
/// unread when the socket is dropped turns the close into a reset, and the
/// peer would lose the last frames it had not read yet. The caller bounds
/// the time.
pub(crate) async fn shutdown_and_drain(stream: &mut TcpStream) -> io::Result<()> {
    stream.shutdown().await?;
    let mut scratch = [0u8; 4096];
    let mut drained = 0;
    while drained < MAX_DRAIN {
        match stream.read(&mut scratch).await? {
            0 => break,
            n => drained += n,
        }
    }
    Ok(())
}

/// How a connection's main loop ended.
pub(crate) enum Exit {
    /// The peer closed its side and every reply was written.
    PeerClosed,
    /// The peer sent `DISCONNECT`.
    PeerDisconnected,
    /// The session wrote its `DISCONNECT`: flush it and close.
    Closed,
    /// The socket failed.
    Io(io::Error),
}

impl Exit {
    /// The cause the disconnect hooks see; `closed` is the session's
    /// `DISCONNECT` reason (sent or received).
    pub(crate) fn cause(&self, closed: Option<DisconnectReason>) -> CloseCause {
        match self {
            Self::PeerClosed => CloseCause::PeerClosed,
            Self::PeerDisconnected => {
                CloseCause::PeerDisconnected(closed.unwrap_or(DisconnectReason::Normal))
            }
            Self::Closed => CloseCause::Disconnected(closed.unwrap_or(DisconnectReason::Normal)),
            Self::Io(error) => CloseCause::Failed(error.to_string()),
        }
    }
}

/// Accepts connections and hands each to `serve`, until the server shuts down.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    server: Arc<ServerShared>,
    serve: impl Fn(TcpStream, SocketAddr, Arc<ServerShared>, Result<Permit, Refusal>),
) {
    let mut shutdown = server.shutdown_signal();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.wait_for(|stop| *stop) => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                let admitted = server.admission.admit(peer.ip());
                if let Err(refusal) = &admitted {
                    tracing::debug!(%peer, %refusal, "connection refused");
                }
                serve(stream, peer, Arc::clone(&server), admitted);
            }
            Err(error) => {
                // Out of file descriptors, usually: wait rather than spin.
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}
