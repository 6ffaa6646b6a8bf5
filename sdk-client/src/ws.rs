//! The WebSocket transport (contract section 1.2): one frame per binary
//! message, subprotocol `ternio.v1`.
//!
//! Callers encode a frame and queue it as a message; the writer task sends
//! whatever is queued and flushes once. The reader task parses each binary
//! message as a frame and hands it to [`Shared::on_frame`]; tungstenite
//! answers the server's WebSocket pings and Close while it reads.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use ternio_protocol::frame::{self, Framing, Header};
use ternio_protocol::secure::{Sealer, TAG_LEN};
use ternio_protocol::{BytesMut, Encode, Frame};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::error::{Error as WsError, ProtocolError};
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::http::header::SEC_WEBSOCKET_PROTOCOL;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::error::{ClientError, CloseReason};
use crate::link::{Link, Out, SendError};
use crate::shared::{Shared, lock};
use crate::supervisor::Opened;
use crate::tasks::TaskSet;

/// The subprotocol the client offers and requires the server to select.
pub(crate) const SUBPROTOCOL: &str = "ternio.v1";

/// How long a reader keeps reading after its link is lost, so that the
/// close handshake completes.
const CLOSE_HANDSHAKE_TIME: Duration = Duration::from_secs(1);

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Messages for the writer task, and the buffer frames are encoded in.
struct Queue {
    buf: BytesMut,
    /// `None` once the link is shut: the writer sends what it has and stops.
    sender: Option<mpsc::UnboundedSender<Message>>,
    /// Seals frames once the secure session is up: under this lock, so
    /// that counters are queued in order.
    sealer: Option<Sealer>,
}

/// The sending half of a WebSocket link.
pub(crate) struct WsOut {
    queue: Mutex<Queue>,
}

/// Checks `url` and makes the upgrade request that offers `ternio.v1`.
pub(crate) fn request_for(
    url: &str,
) -> Result<tokio_tungstenite::tungstenite::handshake::client::Request, ClientError> {
    let mut request = url
        .into_client_request()
        .map_err(|error| ClientError::InvalidUrl(format!("{url}: {error}")))?;
    match request.uri().scheme_str() {
        Some("ws") => {}
        Some("wss") => {
            return Err(ClientError::InvalidUrl(format!(
                "{url}: wss:// needs TLS, which this client is built without"
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

/// Connects to `url`, upgrades with subprotocol `ternio.v1`, and starts the
/// link's reader and writer tasks. The caller bounds the time it takes.
pub(crate) async fn open(url: &str, shared: &Arc<Shared>) -> Result<Opened, ClientError> {
    let max = shared.config().max_frame_size;
    // tungstenite zero-fills its whole read buffer before every read: a
    // small one (larger messages grow it) saves a 128 KiB memset per message.
    let config = WebSocketConfig::default()
        .max_message_size(Some(max))
        .max_frame_size(Some(max))
        .read_buffer_size(4 * 1024);
    let (ws, response) =
        tokio_tungstenite::connect_async_with_config(request_for(url)?, Some(config), true)
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
    let (sink, stream) = ws.split();
    let (sender, receiver) = mpsc::unbounded_channel();
    let link = Arc::new(Link::new(Out::Ws(WsOut {
        queue: Mutex::new(Queue {
            buf: BytesMut::new(),
            sender: Some(sender),
            sealer: None,
        }),
    })));
    let tasks = TaskSet::new(vec![
        tokio::spawn(read_loop(Arc::clone(shared), Arc::clone(&link), stream)),
        tokio::spawn(write_loop(
            Arc::clone(shared),
            Arc::clone(&link),
            sink,
            receiver,
        )),
    ]);
    Ok(Opened { link, tasks })
}

fn upgrade_error(error: WsError) -> ClientError {
    match error {
        WsError::Io(error) => ClientError::Connect(error),
        WsError::Url(error) => ClientError::InvalidUrl(error.to_string()),
        WsError::Protocol(ProtocolError::SecWebSocketSubProtocolError(error)) => {
            ClientError::Subprotocol(error.to_string())
        }
        WsError::Http(response) => ClientError::WebSocket(format!(
            "the server answered HTTP {} instead of switching protocols",
            response.status()
        )),
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
    /// Encodes one frame (sealed when `seal` says so) as one binary message
    /// and queues it.
    pub(crate) fn send<E: Encode + ?Sized>(
        &self,
        header: Header,
        body: &E,
        max_frame_size: usize,
        seal: bool,
    ) -> Result<(), SendError> {
        let mut queue = lock(&self.queue);
        let queue = &mut *queue;
        let Some(sender) = &queue.sender else {
            return Err(SendError::Gone);
        };
        if seal {
            let sealer = queue.sealer.as_mut().ok_or(SendError::NotSecure)?;
            sealer.write_frame_with(
                &mut queue.buf,
                Framing::Message,
                header,
                max_frame_size,
                |out| {
                    out.reserve(body.encoded_len() + TAG_LEN);
                    body.encode(out);
                },
            )
        } else {
            frame::write_frame(
                &mut queue.buf,
                Framing::Message,
                header,
                body,
                max_frame_size,
            )
        }
        .map_err(SendError::TooLarge)?;
        let message = Message::Binary(queue.buf.split().freeze());
        sender.send(message).map_err(|_| SendError::Gone)
    }

    /// Seals every frame sent with `seal` from now on.
    pub(crate) fn set_sealer(&self, sealer: Sealer) {
        lock(&self.queue).sealer = Some(sealer);
    }

    /// Queues a WebSocket Close frame; `false` when the link is shut already.
    fn send_close(&self, code: CloseCode, reason: &'static str) -> bool {
        let queue = lock(&self.queue);
        let frame = CloseFrame {
            code,
            reason: Utf8Bytes::from_static(reason),
        };
        queue
            .sender
            .as_ref()
            .is_some_and(|sender| sender.send(Message::Close(Some(frame))).is_ok())
    }

    /// Queues the Close frame of an intentional close (code 1000).
    pub(crate) fn send_close_normal(&self) -> bool {
        self.send_close(CloseCode::Normal, "client closed")
    }

    /// Lets the writer send what is queued, then stop.
    pub(crate) fn shutdown(&self) {
        lock(&self.queue).sender = None;
    }
}

/// The writer task: sends every queued message, then flushes once.
async fn write_loop(
    shared: Arc<Shared>,
    link: Arc<Link>,
    mut sink: SplitSink<Ws, Message>,
    mut queue: mpsc::UnboundedReceiver<Message>,
) {
    while let Some(message) = queue.recv().await {
        let result = async {
            sink.feed(message).await?;
            while let Ok(message) = queue.try_recv() {
                sink.feed(message).await?;
            }
            sink.flush().await
        }
        .await;
        if let Err(error) = result {
            shared.lose(&link, ws_reason(error));
            return;
        }
    }
}

/// The reader task: hands frames to [`Shared::on_frame`] until the link
/// ends, then keeps reading briefly so that the close handshake completes.
async fn read_loop(shared: Arc<Shared>, link: Arc<Link>, mut stream: SplitStream<Ws>) {
    let reason = read_until_closed(&shared, &link, &mut stream).await;
    shared.lose(&link, reason);
    let _ = tokio::time::timeout(CLOSE_HANDSHAKE_TIME, async {
        while let Some(Ok(_)) = stream.next().await {}
    })
    .await;
    link.set_reader_done();
}

async fn read_until_closed(
    shared: &Shared,
    link: &Arc<Link>,
    stream: &mut SplitStream<Ws>,
) -> CloseReason {
    let max = shared.config().max_frame_size;
    while let Some(message) = stream.next().await {
        let message = match message {
            Ok(message) => message,
            Err(error) => return ws_reason(error),
        };
        match message {
            Message::Binary(bytes) => match Frame::parse(bytes, max) {
                Ok(frame) => {
                    if let Some(reason) = shared.on_frame(link, frame) {
                        if matches!(reason, CloseReason::DecryptFailed(_)) {
                            // The server's own choice for this case (docs/PROTOCOL.md).
                            send_close(link, CloseCode::Policy, "decrypt failed");
                        }
                        return reason;
                    }
                }
                Err(error) => {
                    send_close(link, CloseCode::Protocol, "malformed frame");
                    return CloseReason::Protocol(error.to_string());
                }
            },
            Message::Text(_) => {
                send_close(
                    link,
                    CloseCode::Unsupported,
                    "text messages are not allowed",
                );
                return CloseReason::Protocol("the server sent a text message".to_owned());
            }
            // tungstenite queued the reply, sent as the drain reads on.
            Message::Close(_) => return CloseReason::PeerClosed,
            // tungstenite answers pings itself; pongs need nothing.
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
        }
    }
    CloseReason::PeerClosed
}

fn send_close(link: &Link, code: CloseCode, reason: &'static str) {
    if let Some(out) = link.ws_out() {
        out.send_close(code, reason);
    }
}
