//! `raw-ws`: a plain tokio-tungstenite binary echo, server and client,
//! configured the way Ternio configures tungstenite for itself: an 8 KiB
//! read buffer on both sides ([`READ_BUFFER`]) and Nagle off on both
//! sides; tungstenite's defaults otherwise.
//!
//! The same client drives Ternio's WebSocket server in `ternio-ws-lean`
//! (with Ternio's subprotocol and frames inside the messages), so that the
//! WebSocket budgets compare two servers behind one client.

use std::net::SocketAddr;

use anyhow::{Result, bail};
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::http::header::SEC_WEBSOCKET_PROTOCOL;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::participants::raw_tcp::Counted;

/// Bytes tungstenite reads from the socket at a time, on both sides: what
/// `ternio-client` (`sdk-client/src/ws.rs`) sets, and what Ternio's server
/// reads from its socket at a time (it hands tungstenite whole frames from
/// memory, `framework/src/transport/ws_buffers.rs`). tungstenite zero-fills
/// the free part of its read buffer before every read, so its default of
/// 128 KiB costs a 128 KiB memset per message read (and holds 128 KiB per
/// idle connection); larger messages still grow the buffer as they need.
pub const READ_BUFFER: usize = 8 * 1024;

/// tungstenite's configuration for both sides: its defaults, with the read
/// buffer Ternio uses.
pub fn config() -> WebSocketConfig {
    WebSocketConfig::default().read_buffer_size(READ_BUFFER)
}

/// Serves WebSocket echo connections (any path) until the process ends.
pub async fn serve_echo(listener: TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let _counted = Counted::new();
            let Ok(mut ws) =
                tokio_tungstenite::accept_async_with_config(stream, Some(config())).await
            else {
                return;
            };
            while let Some(Ok(message)) = ws.next().await {
                let answered = match message {
                    Message::Binary(data) => ws.send(Message::Binary(data)).await.is_ok(),
                    Message::Close(_) => false,
                    _ => true,
                };
                if !answered {
                    return;
                }
            }
        });
    }
}

/// Opens a WebSocket to `ws://addr/ws` (offering `subprotocol`, if any)
/// with [`config`], Nagle off.
pub async fn connect(
    addr: SocketAddr,
    subprotocol: Option<&'static str>,
) -> Result<WebSocketStream<MaybeTlsStream<TcpStream>>> {
    let mut request = format!("ws://{addr}/ws").into_client_request()?;
    if let Some(subprotocol) = subprotocol {
        request.headers_mut().insert(
            SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static(subprotocol),
        );
    }
    let (ws, _) =
        tokio_tungstenite::connect_async_with_config(request, Some(config()), true).await?;
    Ok(ws)
}

/// One WebSocket connection doing echoes: each call sends one binary
/// message and waits for the next binary message.
pub struct EchoClient {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl EchoClient {
    /// Connects to `ws://addr/ws`, offering `subprotocol` if any (see [`connect`]).
    pub async fn connect(addr: SocketAddr, subprotocol: Option<&'static str>) -> Result<Self> {
        Ok(Self {
            ws: connect(addr, subprotocol).await?,
        })
    }

    /// Sends `message` as one binary message and returns the answer.
    pub async fn echo(&mut self, message: &Bytes) -> Result<Bytes> {
        self.ws.send(Message::Binary(message.clone())).await?;
        loop {
            match self.ws.next().await {
                Some(Ok(Message::Binary(data))) => return Ok(data),
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                Some(Ok(other)) => bail!("unexpected WebSocket message: {other:?}"),
                Some(Err(error)) => return Err(error.into()),
                None => bail!("the WebSocket server closed the connection"),
            }
        }
    }

    /// Completes the close handshake.
    pub async fn close(mut self) {
        let _ = self.ws.close(None).await;
    }
}
