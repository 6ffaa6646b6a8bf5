//! The health endpoints, on their own HTTP listener
//! ([`ServerBuilder::health`](crate::ServerBuilder::health)): `/healthz`
//! answers 200 while the process serves at all, `/readyz` answers 200 while
//! the server should be sent new clients and 503 otherwise (draining, or its
//! backplane disconnected).
//!
//! A minimal HTTP/1.1 responder: one request per connection (`Connection:
//! close`), a request head of at most [`MAX_REQUEST_HEAD`] bytes, the
//! whole exchange within [`ServerConfig::health_timeout`](crate::ServerConfig::health_timeout),
//! at most [`MAX_HEALTH_CONNECTIONS`] answered at once (the next ones wait
//! in the listen backlog). Probes are small and rare. With the `prometheus`
//! feature and the Prometheus endpoint given the health listener's address,
//! it serves `/metrics` too (the page the exporter renders); nothing else.

use std::borrow::Cow;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use crate::shared::ServerShared;
use crate::transport::shutdown_and_drain;

/// Connections the health listener answers at once.
pub(crate) const MAX_HEALTH_CONNECTIONS: usize = 64;
/// The longest request head (request line and headers) read; longer gets 431.
pub(crate) const MAX_REQUEST_HEAD: usize = 4096;

/// Renders the Prometheus page that `/metrics` answers with.
pub(crate) type MetricsPage = Arc<dyn Fn() -> String + Send + Sync>;

/// Answers health probes on `listener` (and `/metrics`, with `metrics`)
/// until the task is aborted (the server aborts it once drained). Dropping
/// the task drops the connections being answered.
pub(crate) async fn serve_listener(
    listener: TcpListener,
    server: Arc<ServerShared>,
    metrics: Option<MetricsPage>,
) {
    let mut answering = JoinSet::new();
    loop {
        tokio::select! {
            Some(_) = answering.join_next(), if !answering.is_empty() => {}
            accepted = listener.accept(), if answering.len() < MAX_HEALTH_CONNECTIONS => {
                match accepted {
                    Ok((stream, _)) => {
                        let server = Arc::clone(&server);
                        let metrics = metrics.clone();
                        let timeout = server.config.health_timeout;
                        answering.spawn(async move {
                            let answered = answer(stream, &server, metrics.as_ref());
                            let _ = tokio::time::timeout(timeout, answered).await;
                        });
                    }
                    Err(error) => {
                        tracing::warn!(%error, "health listener: accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        }
    }
}

/// Reads one request head and answers it; then closes.
async fn answer(
    mut stream: TcpStream,
    server: &ServerShared,
    metrics: Option<&MetricsPage>,
) -> io::Result<()> {
    let mut head = [0u8; MAX_REQUEST_HEAD];
    let mut len = 0;
    let end = loop {
        if len == head.len() {
            return respond(
                &mut stream,
                Status::TooLarge,
                false,
                Body::text("request head too large\n"),
            )
            .await;
        }
        let read = stream.read(&mut head[len..]).await?;
        if read == 0 {
            return Ok(());
        }
        // The end of the head may straddle two reads: look a little back.
        let from = len.saturating_sub(3);
        len += read;
        if let Some(at) = find(&head[from..len], b"\r\n\r\n") {
            break from + at;
        }
    };
    let line = head[..end]
        .split(|&b| b == b'\n')
        .next()
        .unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let (status, head_only, body) = route(line, server, metrics);
    respond(&mut stream, status, head_only, body).await
}

/// A response's body and its content type.
struct Body {
    content_type: &'static str,
    text: Cow<'static, str>,
}

impl Body {
    /// Plain text.
    fn text(text: &'static str) -> Self {
        Self {
            content_type: "text/plain; charset=utf-8",
            text: Cow::Borrowed(text),
        }
    }
}

/// What a request line gets: status, whether only the head is sent, body.
fn route(
    line: &[u8],
    server: &ServerShared,
    metrics: Option<&MetricsPage>,
) -> (Status, bool, Body) {
    let mut parts = line.split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return (Status::BadRequest, false, Body::text("bad request\n"));
    };
    if !version.starts_with(b"HTTP/1.") {
        return (Status::BadRequest, false, Body::text("bad request\n"));
    }
    let head_only = match method {
        b"GET" => false,
        b"HEAD" => true,
        _ => {
            return (
                Status::MethodNotAllowed,
                false,
                Body::text("GET or HEAD only\n"),
            );
        }
    };
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    let (status, body) = match path {
        b"/healthz" => (Status::Ok, Body::text("ok\n")),
        b"/readyz" if server.is_ready() => (Status::Ok, Body::text("ready\n")),
        b"/readyz" if server.is_draining() => (Status::Unavailable, Body::text("draining\n")),
        b"/readyz" => (Status::Unavailable, Body::text("backplane disconnected\n")),
        b"/metrics" if metrics.is_some() => {
            let render = metrics.expect("checked");
            let body = Body {
                content_type: "text/plain; version=0.0.4; charset=utf-8",
                text: Cow::Owned(render()),
            };
            (Status::Ok, body)
        }
        _ => (Status::NotFound, Body::text("not found\n")),
    };
    (status, head_only, body)
}

/// The statuses the responder sends.
#[derive(Clone, Copy)]
enum Status {
    Ok,
    BadRequest,
    NotFound,
    MethodNotAllowed,
    TooLarge,
    Unavailable,
}

impl Status {
    fn line(self) -> &'static str {
        match self {
            Self::Ok => "200 OK",
            Self::BadRequest => "400 Bad Request",
            Self::NotFound => "404 Not Found",
            Self::MethodNotAllowed => "405 Method Not Allowed",
            Self::TooLarge => "431 Request Header Fields Too Large",
            Self::Unavailable => "503 Service Unavailable",
        }
    }
}

/// Writes the response (the body unless `head_only`), closes the writing
/// side, and reads away what the peer still sends until it closes (within
/// the caller's timeout): unread input would turn the close into a reset,
/// which could cost the peer the response.
async fn respond(
    stream: &mut TcpStream,
    status: Status,
    head_only: bool,
    body: Body,
) -> io::Result<()> {
    let mut response = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nConnection: close\r\n\r\n",
        status.line(),
        body.content_type,
        body.text.len()
    );
    if !head_only {
        response.push_str(&body.text);
    }
    stream.write_all(response.as_bytes()).await?;
    shutdown_and_drain(stream).await
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}
