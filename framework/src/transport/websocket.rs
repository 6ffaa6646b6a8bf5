//! WebSocket: one frame per binary message (section 1.2), on tokio-tungstenite.
//!
//! The upgrade accepts the path given to `map_websocket` only, selects the
//! subprotocol ([`WEBSOCKET_SUBPROTOCOL`](ternio_protocol::frame::WEBSOCKET_SUBPROTOCOL),
//! `ternio.v2`) when the client offers it, and accepts a client
//! that offers none. A text message closes the connection with code 1003; a
//! message above the maximum frame size, with 1009. WebSocket pings are
//! answered, and closes complete their handshake both ways. A connection
//! that goes quiet after a large message gets a fresh tungstenite stream
//! around its socket, which gives the buffers that message grew back (see
//! [`ws_buffers`](super::ws_buffers)).

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use futures_util::{Sink, SinkExt, StreamExt};
use ternio_protocol::frame::WEBSOCKET_SUBPROTOCOL as SUBPROTOCOL;
use ternio_protocol::prefix;
use ternio_protocol::websocket::Renewal;
use ternio_protocol::{Bytes, BytesMut, DisconnectReason, Frame};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode, header};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use crate::admission::{Pending, Permit, Refusal};
use crate::close::CloseNotice;
use crate::connection::{self, AfterFrame, Engine};
use crate::ids::Transport;
use crate::shared::ServerShared;
use crate::transport::ws_buffers::{CountingStream, payload_len};
use crate::transport::{Accept, Admitted, Exit, Io, accept_loop, in_span, shutdown_and_drain};

/// A WebSocket over a stream that counts what it reads.
type Ws<S> = WebSocketStream<CountingStream<S>>;

/// Rounds of work one connection does before letting other tasks run.
const BUDGET: usize = 32;

/// What tungstenite reads at a time. It reads from [`CountingStream`],
/// which has read the socket already and holds whole frames in memory, so
/// this is no system call's size; but tungstenite zero-fills this much of
/// its buffer before every read, twice a message (the read that finds the
/// frame and the one that finds nothing more). 2 KiB holds a 1 KiB message
/// and its header in one read; a larger message takes a few reads from
/// memory. (Its default, 128 KiB, cost more than the rest of an echo; at 8
/// KiB the zeroing still wrote 16 KiB per message.)
const TUNGSTENITE_READ: usize = 2 * 1024;

/// Serves WebSocket connections at `path` from `listener` until the server shuts down.
pub(crate) async fn serve_listener(
    listener: TcpListener,
    server: Arc<ServerShared>,
    path: Arc<str>,
) {
    accept_loop(listener, server, Arc::new(WsAccept { path })).await;
}

/// What the WebSocket listener does with accepted connections: admitted
/// ones are upgraded, refused ones get HTTP 503 before any upgrade work.
struct WsAccept {
    path: Arc<str>,
}

impl Accept for WsAccept {
    const TRANSPORT: Transport = Transport::WebSocket;
    const SETS_UP: bool = true;

    fn serve(&self, admitted: Admitted, server: Arc<ServerShared>) {
        let Admitted {
            stream,
            peer,
            permit,
            pending,
        } = admitted;
        let path = Arc::clone(&self.path);
        let tasks = server.tasks.clone();
        tasks.spawn(serve(stream, peer, permit, pending, server, path));
    }

    fn refuse(&self, stream: TcpStream, refusal: Refusal, _server: &Arc<ServerShared>) {
        refuse_upgrade_now(stream, refusal);
    }
}

/// Answers a refused peer with HTTP 503 and closes, at once: no task, no
/// upgrade, nothing kept. What the peer sent already is read away first
/// (a few KiB at most), so that the close is a FIN rather than a reset.
fn refuse_upgrade_now(stream: TcpStream, refusal: Refusal) {
    let response = refusal_response(&refusal);
    let mut scratch = [0u8; 1024];
    for _ in 0..8 {
        match stream.try_read(&mut scratch) {
            Ok(read) if read > 0 => {}
            _ => break,
        }
    }
    // A fresh socket's send buffer holds the whole answer.
    let _ = stream.try_write(response.as_bytes());
}

/// Answers a refused peer of a stream handed to the server with HTTP 503,
/// then closes (all within `linger`).
pub(crate) async fn refuse<S: Io>(mut stream: S, refusal: Refusal, linger: Duration) {
    let response = refusal_response(&refusal);
    let _ = tokio::time::timeout(linger, async move {
        stream.write_all(response.as_bytes()).await?;
        shutdown_and_drain(&mut stream).await
    })
    .await;
}

/// The HTTP 503 that tells a refused peer why, before any upgrade.
fn refusal_response(refusal: &Refusal) -> String {
    let reason = refusal.to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 1\r\n\
         Content-Type: text/plain\r\nContent-Length: {}\r\n\r\n{reason}",
        reason.len()
    )
}

/// Accepts the upgrade when the path matches and the subprotocols allow it.
#[allow(
    clippy::result_large_err,
    reason = "the signature of tungstenite's upgrade callback"
)]
fn negotiate(
    path: &str,
    request: &Request,
    mut response: Response,
) -> Result<Response, ErrorResponse> {
    if request.uri().path() != path {
        return Err(refuse_upgrade(
            StatusCode::NOT_FOUND,
            format!("no WebSocket endpoint at {}", request.uri().path()),
        ));
    }
    let mut offered = request
        .headers()
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .peekable();
    if offered.peek().is_none() {
        return Ok(response);
    }
    if offered.any(|name| name == SUBPROTOCOL) {
        response.headers_mut().insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static(SUBPROTOCOL),
        );
        Ok(response)
    } else {
        Err(refuse_upgrade(
            StatusCode::BAD_REQUEST,
            format!("subprotocol {SUBPROTOCOL} required"),
        ))
    }
}

fn refuse_upgrade(status: StatusCode, message: String) -> ErrorResponse {
    let mut response = ErrorResponse::new(Some(message));
    *response.status_mut() = status;
    response
}

/// The close code that goes with a `DISCONNECT` reason.
fn close_code(reason: DisconnectReason) -> CloseCode {
    match reason {
        DisconnectReason::Shutdown => CloseCode::Away,
        DisconnectReason::Malformed => CloseCode::Protocol,
        DisconnectReason::FrameTooLarge => CloseCode::Size,
        DisconnectReason::TooManyConnections => CloseCode::Again,
        DisconnectReason::DecryptFailed
        | DisconnectReason::HandshakeTimeout
        | DisconnectReason::SlowConsumer
        | DisconnectReason::Kicked => CloseCode::Policy,
        DisconnectReason::Normal | DisconnectReason::IdleTimeout | DisconnectReason::Other(_) => {
            CloseCode::Normal
        }
    }
}

struct WsConnection<S> {
    ws: Ws<S>,
    engine: Engine,
    /// False once the peer's close arrived or the stream ended.
    reading: bool,
    /// Messages (or an automatic pong or close reply) wait in tungstenite's buffer.
    needs_flush: bool,
    /// The close code to use instead of the one the reason implies.
    close_code: Option<CloseCode>,
    /// True once the peer's Close frame arrived.
    close_received: bool,
    /// What `ws` returned and carried: whether it may be made anew.
    renewal: Renewal,
}

/// Why the connection's loop stopped.
enum Stop {
    /// The connection is done.
    Done(Exit),
    /// The connection went quiet after a large message: its buffers go
    /// back, then the loop goes on.
    RenewBuffers,
}

/// Upgrades `stream` to a WebSocket at `path` and serves it until it
/// closes. `pending` is its place among the upgrades under way.
pub(crate) async fn serve<S: Io>(
    stream: S,
    peer: SocketAddr,
    permit: Permit,
    pending: Option<Pending>,
    server: Arc<ServerShared>,
    path: Arc<str>,
) {
    let max = server.config.max_frame_size;
    // tungstenite's own write buffer is bounded too: beyond it, sending
    // waits (and the write timeout applies), it never grows without end.
    let config = WebSocketConfig::default()
        .max_message_size(Some(max))
        .max_frame_size(Some(max))
        .read_buffer_size(TUNGSTENITE_READ)
        .max_write_buffer_size(server.config.outbound_high_water + max + 64 * 1024);
    #[allow(
        clippy::result_large_err,
        reason = "the signature of tungstenite's upgrade callback"
    )]
    let callback = |request: &Request, response: Response| negotiate(&path, request, response);
    let mut stream = CountingStream::new(stream);
    // The first frames are held to the limit before any handshake; the
    // engine's limit applies from its first read on.
    stream.set_frame_limit(server.config.frame_limit_before_handshake());
    let upgrade = tokio_tungstenite::accept_hdr_async_with_config(stream, callback, Some(config));
    let mut ws = match tokio::time::timeout(server.config.websocket_upgrade_timeout, upgrade).await
    {
        Ok(Ok(ws)) => ws,
        Ok(Err(error)) => {
            tracing::debug!(%peer, %error, "websocket upgrade refused");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "websocket upgrade timed out");
            return;
        }
    };
    // The upgrade is done: its place goes to the next one, and frames come.
    drop(pending);
    ws.get_mut().upgraded();
    let linger = server.config.close_linger;
    let connection = server.open_connection(peer, Transport::WebSocket);
    let id = connection.id;
    tracing::debug!(connection = %id, %peer, "websocket connection open");
    let mut conn = WsConnection {
        ws,
        engine: Engine::new(connection, Arc::clone(&server), permit),
        reading: true,
        needs_flush: false,
        close_code: None,
        close_received: false,
        renewal: Renewal::new(),
    };
    let span = tracing::info_span!("connection", id = id.0, %peer, transport = "websocket");
    in_span(span, async move {
        let exit = loop {
            match poll_fn(|cx| conn.poll_run(cx)).await {
                Stop::Done(Exit::Resume) => connection::resume(&mut conn.engine).await,
                Stop::Done(exit) => break exit,
                Stop::RenewBuffers => conn = conn.with_fresh_buffers().await,
            }
        };
        let cause = exit.cause(conn.engine.closed());
        conn.close(&exit, linger).await;
        connection::end_link(conn.engine, cause).await;
    })
    .await;
    tracing::debug!(connection = %id, "websocket link closed");
}

impl<S: Io> WsConnection<S> {
    fn poll_run(&mut self, cx: &mut TaskContext<'_>) -> Poll<Stop> {
        // Pushes and close orders wake this task from now on (the waker
        // is the same for every round).
        self.engine.register_waker(cx);
        for _ in 0..BUDGET {
            let mut progress = false;
            if self.reading && self.engine.wants_input() {
                // A frame's header is judged by the limit of now (smaller
                // before the handshake, on a server that requires one).
                self.ws.get_mut().set_frame_limit(self.engine.frame_limit());
                match self.ws.poll_next_unpin(cx) {
                    Poll::Ready(Some(Ok(message))) => {
                        progress = true;
                        self.note_message(&message);
                        self.renewal.note_returned(payload_len(&message), true);
                        if let (Message::Binary(bytes), Some(metrics)) =
                            (&message, self.engine.metrics())
                        {
                            metrics.frames_in.increment(1);
                            metrics.bytes_in.increment(bytes.len() as u64);
                        }
                        if let AfterFrame::PeerDisconnected(disconnect) = self.on_message(message) {
                            tracing::debug!(reason = %disconnect.reason, message = %disconnect.message, "peer disconnected");
                            return Poll::Ready(Stop::Done(Exit::PeerDisconnected));
                        }
                    }
                    Poll::Ready(Some(Err(WsError::Capacity(error)))) => {
                        progress = true;
                        let notice =
                            CloseNotice::new(DisconnectReason::FrameTooLarge, error.to_string());
                        self.engine.close_now(&notice);
                    }
                    Poll::Ready(Some(Err(WsError::Io(error)))) => {
                        let Some((announced, limit)) = self.ws.get_ref().refused() else {
                            return Poll::Ready(Stop::Done(Exit::Io(error)));
                        };
                        // Refused at its header, before its payload came.
                        progress = true;
                        self.reading = false;
                        let notice = CloseNotice::new(
                            DisconnectReason::FrameTooLarge,
                            format!("a frame of {announced} bytes announced; the limit is {limit}"),
                        );
                        self.engine.close_now(&notice);
                    }
                    Poll::Ready(Some(Err(error))) => {
                        return Poll::Ready(Stop::Done(Exit::Io(io::Error::other(error))));
                    }
                    Poll::Ready(None) => {
                        progress = true;
                        self.reading = false;
                    }
                    Poll::Pending => self.note_message_bytes(false),
                }
            } else {
                // Not reading: an unfinished message waits for the server
                // (or never comes), not for the peer.
                self.engine.note_frames(false, false);
            }
            progress |= self.engine.poll_work(cx);
            let written = match self.poll_write(cx) {
                Ok(written) => written,
                Err(error) => return Poll::Ready(Stop::Done(Exit::Io(error))),
            };
            progress |= written.is_some();
            let waiting = !self.engine.out.is_empty() || self.needs_flush;
            self.engine.note_writes(cx, waiting, written.unwrap_or(0));
            if let Some(stop) = self.engine.stop() {
                // A `DISCONNECT` and what is before it go out in `close`.
                return Poll::Ready(Stop::Done(Exit::of(stop)));
            }
            if !self.reading
                && self.engine.no_requests_running()
                && self.engine.out.is_empty()
                && !self.needs_flush
            {
                return Poll::Ready(Stop::Done(Exit::PeerClosed));
            }
            if !waiting && self.engine.take_went_quiet() && self.release_buffers() {
                return Poll::Ready(Stop::RenewBuffers);
            }
            if !progress {
                return Poll::Pending;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// Called when the connection went quiet with nothing to write: gives
    /// the outbound buffer back, and says whether tungstenite's buffers
    /// should go too (they grew for a message larger than its read size and
    /// hold nothing now: every byte read belongs to a message it returned).
    fn release_buffers(&mut self) -> bool {
        self.engine.out = BytesMut::new();
        // (`reading` is false once the peer's Close arrived.)
        self.reading
            && self.engine.closed().is_none()
            && self
                .renewal
                .may_renew_when_quiet(self.ws.get_ref().read_count())
    }

    /// The connection around a fresh tungstenite stream on the same socket;
    /// the old stream's buffers are freed. Only once `release_buffers` said so.
    async fn with_fresh_buffers(mut self) -> Self {
        let config = *self.ws.get_config();
        self.renewal.renewed();
        let stream = self.ws.into_inner();
        let ws = WebSocketStream::from_raw_socket(stream, Role::Server, Some(config)).await;
        tracing::trace!("websocket buffers given back");
        Self { ws, ..self }
    }

    /// Tells the engine what a message that tungstenite returned means for
    /// its timers: a data message is a whole frame; a control frame (ping,
    /// pong, close) is not, and does not extend an unfinished message's
    /// deadline either.
    fn note_message(&mut self, message: &Message) {
        let data = matches!(message, Message::Binary(_) | Message::Text(_));
        self.note_message_bytes(data);
    }

    /// Tells the engine whether a data message was completed (`completed`)
    /// and whether the peer left one unfinished: part of a frame, or the
    /// first fragments of a message (the socket knows both).
    fn note_message_bytes(&mut self, completed: bool) {
        let unfinished = self.ws.get_ref().holds_unfinished();
        self.engine.note_frames(completed, unfinished);
    }

    fn on_message(&mut self, message: Message) -> AfterFrame {
        match message {
            Message::Binary(bytes) => match Frame::parse(bytes, self.engine.frame_limit()) {
                Ok(frame) => self.engine.on_frame(frame),
                Err(error) => self.engine.close_now(&CloseNotice::new(
                    error.disconnect_reason(),
                    error.to_string(),
                )),
            },
            Message::Text(_) => {
                self.close_code = Some(CloseCode::Unsupported);
                self.engine.close_now(&CloseNotice::new(
                    DisconnectReason::Malformed,
                    "text messages are not part of the protocol",
                ))
            }
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {
                // tungstenite queued the pong: send it.
                self.needs_flush = true;
                AfterFrame::Continue
            }
            Message::Close(_) => {
                // tungstenite queued the close reply; the stream ends next.
                self.close_received = true;
                self.needs_flush = true;
                self.reading = false;
                AfterFrame::Continue
            }
        }
    }

    /// Hands every ready frame to the WebSocket as one binary message each,
    /// then flushes. Returns the bytes of the frames handed over when
    /// anything moved (a flush that completed moves none).
    fn poll_write(&mut self, cx: &mut TaskContext<'_>) -> io::Result<Option<usize>> {
        let mut moved = false;
        let mut bytes = 0;
        while !self.engine.out.is_empty() {
            match Pin::new(&mut self.ws).poll_ready(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(error)) => return Err(io::Error::other(error)),
                Poll::Pending => break,
            }
            let frame = next_frame(&mut self.engine.out);
            bytes += frame.len();
            self.renewal.note_written(frame.len());
            if let Some(metrics) = self.engine.metrics() {
                metrics.bytes_out.increment(frame.len() as u64);
            }
            Pin::new(&mut self.ws)
                .start_send(Message::Binary(frame))
                .map_err(io::Error::other)?;
            self.needs_flush = true;
            moved = true;
        }
        if self.needs_flush {
            match Pin::new(&mut self.ws).poll_flush(cx) {
                Poll::Ready(Ok(())) => {
                    self.needs_flush = false;
                    moved = true;
                }
                Poll::Ready(Err(WsError::ConnectionClosed)) => self.needs_flush = false,
                Poll::Ready(Err(error)) => return Err(io::Error::other(error)),
                Poll::Pending => {}
            }
        }
        Ok(moved.then_some(bytes))
    }

    /// Ends the connection with a complete close handshake: our Close frame
    /// (its code following the `DISCONNECT` reason), then the peer's.
    async fn close(&mut self, exit: &Exit, linger: Duration) {
        let code = match exit {
            Exit::Io(error) => {
                tracing::debug!(%error, "connection failed");
                return;
            }
            // The session goes to another link: this one is dropped as it is.
            Exit::TakenOver | Exit::Resume => return,
            Exit::Closed => self
                .close_code
                .or_else(|| self.engine.closed().map(close_code))
                .unwrap_or(CloseCode::Normal),
            Exit::PeerClosed | Exit::PeerDisconnected => CloseCode::Normal,
        };
        let mut close_received = self.close_received;
        let ws = &mut self.ws;
        let out = &mut self.engine.out;
        let _ = tokio::time::timeout(linger, async move {
            let handshake = async {
                while !out.is_empty() {
                    ws.feed(Message::Binary(next_frame(out))).await?;
                }
                ws.flush().await?;
                let frame = CloseFrame {
                    code,
                    reason: "".into(),
                };
                ws.close(Some(frame)).await?;
                // Wait for the peer's Close (tungstenite ends the stream on
                // it). After an oversized message tungstenite ends the stream
                // with the rest of that message still in the socket.
                while let Some(message) = ws.next().await {
                    if let Message::Close(_) = message? {
                        close_received = true;
                    }
                }
                Result::<(), WsError>::Ok(())
            };
            let _ = handshake.await;
            let stream = ws.get_mut().get_mut();
            if close_received {
                // Both Closes went by, nothing is left unread: the server
                // closes the TCP connection first.
                stream.shutdown().await
            } else {
                shutdown_and_drain(stream).await
            }
        })
        .await;
    }
}

/// Takes the first frame off the outbound buffer, without its length prefix
/// and without copying it.
fn next_frame(out: &mut BytesMut) -> Bytes {
    prefix::split(out)
        .expect("whole frames: the engine writes them whole")
        .freeze()
}
