//! `raw-ws`: a plain tokio-tungstenite binary echo, server and client,
//! with default settings and Nagle off on both sides.

use std::net::SocketAddr;

use anyhow::{Result, bail};
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::participants::raw_tcp::Counted;

/// Serves WebSocket echo connections (any path) until the process ends.
pub async fn serve_echo(listener: TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let _counted = Counted::new();
            let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
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

/// One WebSocket connection doing echoes.
pub struct EchoClient {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl EchoClient {
    /// Connects to `ws://addr/ws`, Nagle off.
    pub async fn connect(addr: SocketAddr) -> Result<Self> {
        let (ws, _) =
            tokio_tungstenite::connect_async_with_config(format!("ws://{addr}/ws"), None, true)
                .await?;
        Ok(Self { ws })
    }

    /// Sends `payload` as one binary message and returns the answer.
    pub async fn echo(&mut self, payload: &Bytes) -> Result<Bytes> {
        self.ws.send(Message::Binary(payload.clone())).await?;
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
