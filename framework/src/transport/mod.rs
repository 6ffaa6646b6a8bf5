//! Transports: bytes in, frames out. Each drives an
//! [`Engine`](crate::connection::Engine) and knows nothing of handlers.
//! A transport serves any stream ([`Io`]): a socket its listener accepted,
//! or one the application hands to [`ServerHandle`](crate::ServerHandle).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::Either;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::instrument::Instrumented;
use tracing::{Instrument, Span};

use crate::admission::{Pending, Permit, Refusal, normalize_addr};
use crate::close::CloseCause;
use crate::connection::Stop;
use crate::ids::Transport;
use crate::shared::ServerShared;
use ternio_protocol::DisconnectReason;

pub(crate) mod tcp;
#[cfg(feature = "tls")]
pub(crate) mod tls;
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

/// What a connection can be served over: a TCP socket, a TLS stream, an
/// in-memory pipe.
pub(crate) trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<S: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for S {}

/// The most bytes a closing connection reads and discards.
const MAX_DRAIN: usize = 1024 * 1024;

/// Closes the writing side of `stream`, then reads away what the peer still
/// sends (at most [`MAX_DRAIN`] bytes) until it closes too: input left
/// unread when the socket is dropped turns the close into a reset, and the
/// peer would lose the last frames it had not read yet. The caller bounds
/// the time.
pub(crate) async fn shutdown_and_drain<S: Io>(stream: &mut S) -> io::Result<()> {
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
    /// A `RESUME` came as the first frame: run it, then serve on.
    Resume,
    /// Another link took the session over: drop this one at once.
    TakenOver,
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
            // (The session went on elsewhere: nothing closes it.)
            Self::Resume | Self::TakenOver => CloseCause::Resumed,
        }
    }

    /// The exit of an engine that stopped (`stop`).
    pub(crate) fn of(stop: Stop) -> Self {
        match stop {
            Stop::Closed => Self::Closed,
            Stop::Resume => Self::Resume,
            Stop::TakenOver => Self::TakenOver,
        }
    }
}

/// How long a trusted proxy may take to send its PROXY header.
const PROXY_HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest PROXY header read (a v2 header with its TLVs); longer is malformed.
const MAX_PROXY_HEADER: usize = 4096;

/// A connection accepted and admitted, ready to be served.
pub(crate) struct Admitted {
    pub(crate) stream: TcpStream,
    /// The peer: for a trusted proxy, the client its PROXY header names.
    pub(crate) peer: SocketAddr,
    pub(crate) permit: Permit,
    /// Its place among the connections being set up, when
    /// [`Accept::SETS_UP`] (held until its WebSocket upgrade is done).
    pub(crate) pending: Option<Pending>,
}

/// What a transport does with the connections its listener accepts.
pub(crate) trait Accept: Send + Sync + 'static {
    /// The transport, for the metrics.
    const TRANSPORT: Transport;
    /// Whether an admitted connection still has setup work to do (a
    /// WebSocket upgrade), and so holds a pending place until it is done.
    const SETS_UP: bool;
    /// Serves an admitted connection (in a task of its own).
    fn serve(&self, admitted: Admitted, server: Arc<ServerShared>);
    /// Tells a refused peer why, and closes.
    fn refuse(&self, stream: TcpStream, refusal: Refusal, server: &Arc<ServerShared>);
}

/// Accepts connections, admits them (or not) before any work is done for
/// them, and hands each to `accept`, until the server shuts down. A
/// trusted proxy's connection first has its PROXY header read, in a task
/// of its own that holds a pending place, and is admitted under the
/// address that header names.
pub(crate) async fn accept_loop<A: Accept>(
    listener: TcpListener,
    server: Arc<ServerShared>,
    accept: Arc<A>,
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
                let peer = normalize_addr(peer);
                if !server.admission.is_trusted_proxy(peer.ip()) {
                    admit(stream, peer, None, &server, &*accept);
                    continue;
                }
                match server.admission.begin_pending() {
                    Ok(pending) => {
                        let tracked = Arc::clone(&server);
                        let accept = Arc::clone(&accept);
                        let task = behind_proxy(stream, peer, pending, tracked, accept);
                        server.tasks.spawn(task);
                    }
                    Err(refusal) => refused(stream, peer, refusal, &server, &*accept),
                }
            }
            Err(error) => {
                // Out of file descriptors, usually: wait rather than spin.
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Decides on a connection from `peer`, then serves or refuses it.
fn admit<A: Accept>(
    stream: TcpStream,
    peer: SocketAddr,
    pending: Option<Pending>,
    server: &Arc<ServerShared>,
    accept: &A,
) {
    let permit = match server.admission.admit(peer.ip()) {
        Ok(permit) => permit,
        Err(refusal) => return refused(stream, peer, refusal, server, accept),
    };
    let pending = match pending {
        _ if !A::SETS_UP => None,
        Some(pending) => Some(pending),
        None => match server.admission.begin_pending() {
            Ok(pending) => Some(pending),
            Err(refusal) => return refused(stream, peer, refusal, server, accept),
        },
    };
    let admitted = Admitted {
        stream,
        peer,
        permit,
        pending,
    };
    accept.serve(admitted, Arc::clone(server));
}

/// Counts a refusal and lets the transport tell the peer.
fn refused<A: Accept>(
    stream: TcpStream,
    peer: SocketAddr,
    refusal: Refusal,
    server: &Arc<ServerShared>,
    accept: &A,
) {
    tracing::debug!(%peer, %refusal, "connection refused");
    if let Some(metrics) = &server.metrics {
        metrics.transport(A::TRANSPORT).refused(refusal.name());
    }
    accept.refuse(stream, refusal, server);
}

/// Serves a stream the application accepted itself, as a listener serves
/// an accepted socket: length-prefixed frames, or a WebSocket upgrade at
/// `websocket_path`. The connection limits apply; a refused peer is told
/// why. Returns once the connection has closed. The server's task tracker
/// counts it as it counts a listener's connections, so that a shutdown
/// waits for it too.
pub(crate) async fn serve_stream<S: Io>(
    stream: S,
    peer: SocketAddr,
    server: Arc<ServerShared>,
    websocket_path: Option<Arc<str>>,
) {
    let tasks = server.tasks.clone();
    tasks
        .track_future(serve_untracked(stream, peer, server, websocket_path))
        .await;
}

async fn serve_untracked<S: Io>(
    stream: S,
    peer: SocketAddr,
    server: Arc<ServerShared>,
    websocket_path: Option<Arc<str>>,
) {
    let peer = normalize_addr(peer);
    let transport = match websocket_path {
        Some(_) => Transport::WebSocket,
        None => Transport::Tcp,
    };
    let admitted = server.admission.admit(peer.ip()).and_then(|permit| {
        let pending = match websocket_path {
            Some(_) => Some(server.admission.begin_pending()?),
            None => None,
        };
        Ok((permit, pending))
    });
    let (permit, pending) = match admitted {
        Ok(admitted) => admitted,
        Err(refusal) => {
            tracing::debug!(%peer, %refusal, "connection refused");
            if let Some(metrics) = &server.metrics {
                metrics.transport(transport).refused(refusal.name());
            }
            let linger = server.config.close_linger.min(Duration::from_millis(500));
            return match websocket_path {
                Some(_) => websocket::refuse(stream, refusal, linger).await,
                None => tcp::refuse(stream, refusal, linger).await,
            };
        }
    };
    match websocket_path {
        Some(path) => websocket::serve(stream, peer, permit, pending, server, path).await,
        None => tcp::serve(stream, peer, server, permit).await,
    }
}

/// Reads a trusted proxy's PROXY header, then admits the connection under
/// the client it names. A connection without a valid header in time is closed.
async fn behind_proxy<A: Accept>(
    mut stream: TcpStream,
    proxy: SocketAddr,
    pending: Pending,
    server: Arc<ServerShared>,
    accept: Arc<A>,
) {
    let read = tokio::time::timeout(PROXY_HEADER_TIMEOUT, read_proxy_header(&mut stream));
    let error = match read.await {
        Ok(Ok(client)) => {
            let peer = client.map_or(proxy, normalize_addr);
            return admit(stream, peer, Some(pending), &server, &*accept);
        }
        Ok(Err(error)) => error,
        Err(_) => io::Error::new(io::ErrorKind::TimedOut, "no PROXY header in time"),
    };
    tracing::debug!(%proxy, %error, "connection from a trusted proxy without a valid PROXY header");
    if let Some(metrics) = &server.metrics {
        metrics.transport(A::TRANSPORT).refused("proxy_header");
    }
}

/// Reads a PROXY protocol header (v1 or v2) off `stream`, and not a byte
/// more: what follows it is the client's. Returns the client's address, or
/// `None` when the header names none (a proxy's own health check: `LOCAL`
/// or `UNKNOWN`).
async fn read_proxy_header(stream: &mut TcpStream) -> io::Result<Option<SocketAddr>> {
    let mut header = Vec::new();
    let mut scratch = [0u8; 512];
    loop {
        // Peek, so that the client's bytes after the header stay unread.
        let peeked = stream.peek(&mut scratch).await?;
        if peeked == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let known = header.len();
        header.extend_from_slice(&scratch[..peeked]);
        match parse_proxy_header(&header) {
            Ok(Some((len, client))) => {
                stream.read_exact(&mut scratch[..len - known]).await?;
                return Ok(client);
            }
            // Everything peeked belongs to the header: take it, peek on.
            Ok(None) if header.len() < MAX_PROXY_HEADER => {
                stream.read_exact(&mut scratch[..peeked]).await?;
            }
            Ok(None) => return Err(io::Error::other("PROXY header too long")),
            Err(error) => return Err(io::Error::new(io::ErrorKind::InvalidData, error)),
        }
    }
}

/// A whole PROXY header at the start of `bytes`: its length and the
/// client's address; `None` while it is incomplete.
fn parse_proxy_header(bytes: &[u8]) -> Result<Option<(usize, Option<SocketAddr>)>, String> {
    use ppp::{HeaderResult, PartialResult, v1, v2};
    let parsed = HeaderResult::parse(bytes);
    if parsed.is_incomplete() {
        return Ok(None);
    }
    match parsed {
        HeaderResult::V1(Ok(header)) => {
            let client = match header.addresses {
                v1::Addresses::Tcp4(ip) => {
                    Some(SocketAddr::from((ip.source_address, ip.source_port)))
                }
                v1::Addresses::Tcp6(ip) => {
                    Some(SocketAddr::from((ip.source_address, ip.source_port)))
                }
                v1::Addresses::Unknown => None,
            };
            Ok(Some((header.header.len(), client)))
        }
        HeaderResult::V2(Ok(header)) => {
            let client = match (header.command, header.addresses) {
                (v2::Command::Proxy, v2::Addresses::IPv4(ip)) => {
                    Some(SocketAddr::from((ip.source_address, ip.source_port)))
                }
                (v2::Command::Proxy, v2::Addresses::IPv6(ip)) => {
                    Some(SocketAddr::from((ip.source_address, ip.source_port)))
                }
                _ => None,
            };
            Ok(Some((header.len(), client)))
        }
        HeaderResult::V1(Err(error)) => Err(format!("malformed PROXY v1 header: {error}")),
        HeaderResult::V2(Err(error)) => Err(format!("malformed PROXY v2 header: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_proxy_header;

    #[test]
    fn proxy_headers_parse_to_their_length_and_client() {
        let v1 = b"PROXY TCP4 192.0.2.7 127.0.0.1 4000 80\r\nrest";
        assert_eq!(
            parse_proxy_header(v1),
            Ok(Some((
                v1.len() - 4,
                Some("192.0.2.7:4000".parse().unwrap())
            )))
        );
        assert_eq!(parse_proxy_header(b"PROXY TCP4 192.0"), Ok(None));
        assert_eq!(parse_proxy_header(b"PRO"), Ok(None));
        assert_eq!(
            parse_proxy_header(b"PROXY UNKNOWN\r\n"),
            Ok(Some((15, None)))
        );
        assert!(parse_proxy_header(b"GET / HTTP/1.1\r\n").is_err());
        assert!(parse_proxy_header(&[0, 0, 0, 9, 1, 2, 3]).is_err());
        let mut v2 = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
        v2.extend_from_slice(&[
            0x21, 0x11, 0, 12, 192, 0, 2, 7, 127, 0, 0, 1, 0x0f, 0xa0, 0, 80,
        ]);
        assert_eq!(parse_proxy_header(&v2[..20]), Ok(None));
        assert_eq!(
            parse_proxy_header(&v2),
            Ok(Some((28, Some("192.0.2.7:4000".parse().unwrap()))))
        );
    }
}
