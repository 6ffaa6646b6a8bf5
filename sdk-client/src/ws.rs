//! The WebSocket transport (contract section 1.2): one frame per binary
//! message, subprotocol `ternio.v2`.
//!
//! Callers encode each frame as one masked binary message and write it
//! straight to the socket ([`SocketOut`]), as on TCP: no hop through a task.
//! tungstenite runs the upgrade and reads: the reader task parses each binary
//! message as a frame and hands it to [`LinkEvents::on_frame`]. tungstenite's own
//! writes (the upgrade request, pongs, Close frames) go through the same
//! outbound buffer, so they stay in order with the frames.
//!
//! tungstenite's read buffer grows to the largest message and stays so for
//! its stream's life: after a message above 64 KiB the reader puts a fresh
//! stream around the socket, once the old one holds nothing unread (see
//! [`Renewal`]).

use std::io;
use std::net::Shutdown;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures_util::StreamExt;
use ternio_protocol::buffers::READ_CHUNK;
use ternio_protocol::frame::WEBSOCKET_SUBPROTOCOL as SUBPROTOCOL;
use ternio_protocol::websocket::{ReadCount, Renewal};
use ternio_protocol::{BytesMut, Frame};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf, ReadHalf};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::error::{Error as WsError, ProtocolError};
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::http::header::SEC_WEBSOCKET_PROTOCOL;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use crate::error::{ClientError, CloseReason};
use crate::events::{LinkEvents, read_or_idle};
use crate::outbound::Wire;
use crate::socket::{SocketOut, read_draining};
use crate::stream::{BoxStream, StreamOut};
use crate::sync::lock;
#[cfg(feature = "tls")]
use crate::tls::ClientTls;

/// How long a reader keeps reading after its link is lost, so that the
/// close handshake completes.
const CLOSE_HANDSHAKE_TIME: Duration = Duration::from_secs(1);

/// Bytes of tungstenite's own writes (pongs, Close) that may wait unsent
/// before it has to wait for the socket.
const MAX_QUEUED_CONTROL: usize = 64 * 1024;

type Ws = WebSocketStream<WsSocket>;

/// The WebSocket side of a link: where frames are written, and the way to
/// ask the reader (which owns tungstenite's state) to send a Close frame.
pub(crate) struct WsOut {
    sender: WsSender,
    close: Mutex<Option<oneshot::Sender<CloseFrame>>>,
}

/// Where a WebSocket link's frames are written.
#[derive(Clone)]
pub(crate) enum WsSender {
    /// A TCP socket, written directly (`ws://`).
    Socket(Arc<SocketOut>),
    /// A TLS stream (`wss://`), through the any-stream writer.
    Stream(Arc<StreamOut>),
}

/// Checks `url` and makes the upgrade request that offers `ternio.v2`.
pub(crate) fn request_for(
    url: &str,
) -> Result<tokio_tungstenite::tungstenite::handshake::client::Request, ClientError> {
    let mut request = url
        .into_client_request()
        .map_err(|error| ClientError::InvalidUrl(format!("{url}: {error}")))?;
    match request.uri().scheme_str() {
        Some("ws") => {}
        #[cfg(feature = "tls")]
        Some("wss") => {}
        #[cfg(not(feature = "tls"))]
        Some("wss") => {
            return Err(ClientError::InvalidUrl(format!(
                "{url}: wss:// needs TLS, which this client is built without (feature `tls`)"
            )));
        }
        _ => return Err(ClientError::InvalidUrl(format!("{url}: not a ws:// URL"))),
    }
    request.headers_mut().insert(
        SEC_WEBSOCKET_PROTOCOL,
        HeaderValue::from_static(SUBPROTOCOL),
    );
    Ok(request)
}

/// What a `wss://` link trusts (feature `tls`; nothing without it).
#[cfg(feature = "tls")]
pub(crate) type Trust = Option<ClientTls>;
/// What a `wss://` link trusts (feature `tls`; nothing without it).
#[cfg(not(feature = "tls"))]
pub(crate) type Trust = Option<std::convert::Infallible>;

/// Connects to `url` and upgrades with subprotocol `ternio.v2`; the
/// socket's outbound buffer holds at most `limit` bytes, and messages of up
/// to `max_frame_size` are read. A `wss://` URL runs TLS first, trusting
/// `trust` (the system's roots when `None`). Returns the sending side of
/// the link and its reader, to be run as the link's reader task. The
/// caller bounds the time it takes.
pub(crate) async fn connect(
    url: &str,
    trust: &Trust,
    limit: usize,
    max_frame_size: usize,
) -> Result<(WsOut, WsReader), ClientError> {
    let request = request_for(url)?;
    let secure = request.uri().scheme_str() == Some("wss");
    let host = request.uri().host().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = request
        .uri()
        .port_u16()
        .unwrap_or(if secure { 443 } else { 80 });
    let stream = TcpStream::connect((host, port))
        .await
        .map_err(ClientError::Connect)?;
    stream.set_nodelay(true).map_err(ClientError::Connect)?;
    let (io, sender) = if secure {
        let stream = tls_stream(stream, host, trust).await?;
        let (out, read) = crate::stream::open(stream, limit, Wire::WebSocket);
        let io = WsIo::Stream {
            out: Arc::clone(&out),
            read,
        };
        (io, WsSender::Stream(out))
    } else {
        let socket = Arc::new(SocketOut::new(stream, Wire::WebSocket, limit));
        (WsIo::Socket(Arc::clone(&socket)), WsSender::Socket(socket))
    };
    // tungstenite zero-fills its whole read buffer before every read: a
    // small one (larger messages grow it) saves a 128 KiB memset per message.
    let config = WebSocketConfig::default()
        .max_message_size(Some(max_frame_size))
        .max_frame_size(Some(max_frame_size))
        .read_buffer_size(READ_CHUNK);
    let (ws, response) =
        tokio_tungstenite::client_async_with_config(request, WsSocket::new(io), Some(config))
            .await
            .map_err(upgrade_error)?;
    // tungstenite checks this too; the contract depends on it, so say it plainly.
    let selected = response.headers().get(SEC_WEBSOCKET_PROTOCOL);
    if selected.map(HeaderValue::as_bytes) != Some(SUBPROTOCOL.as_bytes()) {
        return Err(ClientError::Subprotocol(match selected {
            Some(value) => format!("it selected {value:?}"),
            None => "it selected none".to_owned(),
        }));
    }
    let (close, close_request) = oneshot::channel();
    let out = WsOut {
        sender,
        close: Mutex::new(Some(close)),
    };
    let reader = WsReader {
        ws,
        close_request,
        max_frame_size,
    };
    Ok((out, reader))
}

/// Runs TLS over `stream` for `host`, trusting `trust` (the system's
/// roots when `None`).
#[cfg(feature = "tls")]
async fn tls_stream(
    stream: TcpStream,
    host: &str,
    trust: &Trust,
) -> Result<BoxStream, ClientError> {
    let tls = match trust {
        Some(tls) => tls.clone(),
        None => ClientTls::system_roots()?,
    };
    let stream = tls.connect(stream, host).await?;
    Ok(Box::new(stream))
}

/// Without the `tls` feature, `request_for` refuses `wss://` before this.
#[cfg(not(feature = "tls"))]
async fn tls_stream(_: TcpStream, _: &str, _: &Trust) -> Result<BoxStream, ClientError> {
    Err(ClientError::InvalidUrl(
        "wss:// needs the `tls` feature".to_owned(),
    ))
}

fn upgrade_error(error: WsError) -> ClientError {
    match error {
        WsError::Io(error) => ClientError::Connect(error),
        WsError::Url(error) => ClientError::InvalidUrl(error.to_string()),
        WsError::Protocol(ProtocolError::SecWebSocketSubProtocolError(error)) => {
            ClientError::Subprotocol(error.to_string())
        }
        WsError::Http(response) => ClientError::UpgradeRefused(response.status().as_u16()),
        other => ClientError::WebSocket(other.to_string()),
    }
}

/// Why a link ended, from a WebSocket error.
fn ws_reason(error: WsError) -> CloseReason {
    match error {
        // Sending after a Close: the server's (ours would make the reason Local).
        WsError::ConnectionClosed
        | WsError::AlreadyClosed
        | WsError::Protocol(ProtocolError::SendAfterClosing) => CloseReason::PeerClosed,
        WsError::Io(error) => CloseReason::Io(error.kind(), error.to_string()),
        other => CloseReason::Protocol(other.to_string()),
    }
}

impl WsOut {
    /// Where frames are written.
    pub(crate) fn sender(&self) -> &WsSender {
        &self.sender
    }

    /// Takes no more frames; the reader closes the connection once the
    /// close handshake is over (or its time is up).
    pub(crate) fn stop(&self) {
        match &self.sender {
            WsSender::Socket(socket) => socket.stop(),
            WsSender::Stream(out) => out.stop(),
        }
    }

    /// Asks the reader to send the Close frame of an intentional close
    /// (code 1000); `false` when the link is ending already.
    pub(crate) fn send_close_normal(&self) -> bool {
        let frame = CloseFrame {
            code: CloseCode::Normal,
            reason: Utf8Bytes::from_static("client closed"),
        };
        lock(&self.close)
            .take()
            .is_some_and(|close| close.send(frame).is_ok())
    }
}

/// The connection as tungstenite sees it: reads come from the socket or
/// the TLS stream (and are counted), writes join the link's outbound
/// buffer behind the frames already queued.
pub(crate) struct WsSocket {
    io: WsIo,
    count: ReadCount,
}

/// What a [`WsSocket`] reads from and writes to.
enum WsIo {
    /// A TCP socket (`ws://`).
    Socket(Arc<SocketOut>),
    /// A TLS stream (`wss://`): its read half, and the writer of its write half.
    Stream {
        out: Arc<StreamOut>,
        read: ReadHalf<BoxStream>,
    },
}

impl WsSocket {
    fn new(io: WsIo) -> Self {
        Self {
            io,
            count: ReadCount::new(),
        }
    }
}

impl AsyncRead for WsSocket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let out = match &mut this.io {
            WsIo::Socket(out) => out,
            WsIo::Stream { out, read } => {
                let before = buf.filled().len();
                ready!(Pin::new(read).poll_read(cx, buf))?;
                let got = &buf.filled()[before..];
                if !got.is_empty() {
                    out.note_received();
                }
                this.count.count(got);
                return Poll::Ready(Ok(()));
            }
        };
        let stream = out.stream();
        loop {
            ready!(stream.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            let room = unfilled.len();
            match read_draining(stream, room, || stream.try_read(unfilled)) {
                Ok(n) => {
                    if n > 0 {
                        out.note_received();
                    }
                    this.count.count(&unfilled[..n]);
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Err(error) => return Poll::Ready(Err(error)),
            }
        }
    }
}

impl AsyncWrite for WsSocket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &self.io {
            WsIo::Socket(out) => {
                while out.queued() > MAX_QUEUED_CONTROL {
                    if out.try_flush()? {
                        break;
                    }
                    ready!(out.stream().poll_write_ready(cx))?;
                }
                out.send_raw(buf)?;
            }
            WsIo::Stream { out, .. } => {
                if out.queued() > MAX_QUEUED_CONTROL {
                    ready!(out.poll_flush(cx))?;
                }
                out.send_raw(buf)?;
            }
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &self.io {
            WsIo::Socket(out) => {
                while !out.try_flush()? {
                    ready!(out.stream().poll_write_ready(cx))?;
                }
                Poll::Ready(Ok(()))
            }
            WsIo::Stream { out, .. } => out.poll_flush(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.as_mut().poll_flush(cx))?;
        match &self.io {
            WsIo::Socket(out) => {
                Poll::Ready(socket2::SockRef::from(out.stream()).shutdown(Shutdown::Write))
            }
            WsIo::Stream { out, .. } => out.poll_shutdown(cx),
        }
    }
}

impl Drop for WsSocket {
    /// The reader is done with the connection (or was aborted): close it,
    /// even though the link still holds the socket (or the stream's writer).
    fn drop(&mut self) {
        match &self.io {
            WsIo::Socket(out) => {
                let _ = socket2::SockRef::from(out.stream()).shutdown(Shutdown::Both);
            }
            WsIo::Stream { out, .. } => out.shutdown(),
        }
    }
}

/// A link's reader, before its task runs: tungstenite's stream and the way
/// [`WsOut::send_close_normal`] asks it to send a Close frame.
pub(crate) struct WsReader {
    ws: Ws,
    close_request: oneshot::Receiver<CloseFrame>,
    max_frame_size: usize,
}

impl WsReader {
    /// The reader task: hands frames to `events` until the link ends, then
    /// keeps reading briefly so that the close handshake completes.
    pub(crate) async fn run(self, events: impl LinkEvents) {
        let reader = Reader {
            ws: self.ws,
            renewal: Renewal::new(),
            pinged: false,
        };
        let (reason, mut ws) = reader
            .read_until_closed(&events, self.max_frame_size, self.close_request)
            .await;
        events.reading_stopped();
        events.lost(reason);
        let _ = tokio::time::timeout(CLOSE_HANDSHAKE_TIME, async {
            while let Some(Ok(_)) = ws.next().await {}
        })
        .await;
        drop(ws);
        events.reader_done();
    }
}

/// The reading side of a link: tungstenite's stream, and what tells
/// whether it may be made anew to give its read buffer back.
struct Reader {
    ws: Ws,
    /// What `ws` returned: whether it may be made anew.
    renewal: Renewal,
    /// A ping came since `ws` was made: its pong may still wait in
    /// tungstenite, so `ws` is kept.
    pinged: bool,
}

impl Reader {
    /// Counts a message tungstenite returned.
    fn note(&mut self, message: &Message) {
        let payload = match message {
            Message::Close(Some(close)) => 2 + close.reason.len(),
            other => other.len(),
        };
        self.renewal.note_returned(payload, false);
        self.pinged |= matches!(message, Message::Ping(_));
    }

    /// Whether a large message went by and tungstenite now holds no byte
    /// it read and did not return (nor a pong to send).
    fn may_give_buffers_back(&self) -> bool {
        !self.pinged && self.renewal.may_renew_now(&self.ws.get_ref().count)
    }

    /// The reader with a fresh stream around the same socket: the old
    /// stream's buffers are freed. Only when `may_give_buffers_back`.
    async fn give_buffers_back(mut self) -> Self {
        let config = *self.ws.get_config();
        self.renewal.renewed();
        let socket = self.ws.into_inner();
        Self {
            ws: WebSocketStream::from_raw_socket(socket, Role::Client, Some(config)).await,
            ..self
        }
    }

    /// Reads until the link ends; returns why, and the stream (which reads
    /// on while the close handshake completes).
    async fn read_until_closed(
        mut self,
        events: &impl LinkEvents,
        max: usize,
        close_request: oneshot::Receiver<CloseFrame>,
    ) -> (CloseReason, Ws) {
        let mut close_request = Some(close_request);
        // Where sealed bodies are opened (see `LinkEvents::on_frame`).
        let mut open_buf = BytesMut::new();
        let reason = loop {
            let message = match close_request.as_mut() {
                Some(request) => tokio::select! {
                    biased;
                    message = read_or_idle(events, self.ws.next()) => message,
                    frame = request => {
                        close_request = None;
                        if let Ok(frame) = frame {
                            // Our Close; the server's answer ends the stream.
                            let _ = self.ws.close(Some(frame)).await;
                        }
                        continue;
                    }
                },
                None => read_or_idle(events, self.ws.next()).await,
            };
            let Some(message) = message else {
                break CloseReason::PeerClosed;
            };
            let message = match message {
                Ok(message) => message,
                Err(error) => break ws_reason(error),
            };
            self.note(&message);
            let refusal = match message {
                Message::Binary(bytes) => match Frame::parse(bytes, max) {
                    Ok(frame) => match hand_over(events, frame, &mut open_buf) {
                        // The server's own choice for this case (docs/PROTOCOL.md).
                        Some(reason @ CloseReason::DecryptFailed(_)) => {
                            (CloseCode::Policy, "decrypt failed", reason)
                        }
                        Some(reason) => break reason,
                        None => {
                            if self.may_give_buffers_back() {
                                self = self.give_buffers_back().await;
                            }
                            continue;
                        }
                    },
                    Err(error) => (
                        CloseCode::Protocol,
                        "malformed frame",
                        CloseReason::Protocol(error.to_string()),
                    ),
                },
                Message::Text(_) => (
                    CloseCode::Unsupported,
                    "text messages are not allowed",
                    CloseReason::Protocol("the server sent a text message".to_owned()),
                ),
                // tungstenite queued the reply, sent as the drain reads on.
                Message::Close(_) => break CloseReason::PeerClosed,
                // tungstenite answers pings itself; pongs need nothing.
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
            };
            let (code, text, reason) = refusal;
            let frame = CloseFrame {
                code,
                reason: Utf8Bytes::from_static(text),
            };
            let _ = self.ws.close(Some(frame)).await;
            break reason;
        };
        (reason, self.ws)
    }
}

/// Hands one message's frame to `events`, then tells it the frame was
/// handed over (a message is what one read of the WebSocket gives).
fn hand_over(
    events: &impl LinkEvents,
    frame: Frame,
    open_buf: &mut BytesMut,
) -> Option<CloseReason> {
    let handled = events.on_frame(frame, open_buf);
    events.frames_handed();
    handled
}
