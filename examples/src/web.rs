//! A small static-file responder for the example pages, and the chat page
//! that `chat_server --http` serves.
//!
//! Why not a web framework: the page is a handful of files that never
//! change while the server runs, so they are compiled into the binary
//! ([`Site`]) and nothing is read from disk: a request names one of them or
//! gets 404, and no path can reach outside the site. What is left is HTTP
//! itself, kept deliberately narrow:
//!
//! - the request head is parsed by `httparse` (already in the tree, under
//!   the WebSocket stack), limited to 8 KiB and 32 headers and read within
//!   10 s; anything else gets 400, 408 or 431;
//! - only `GET` and `HEAD` (405 otherwise), no request body (411/413 for
//!   one), one request per connection (`Connection: close`); after the
//!   response, up to 64 KiB the client still sends are read and discarded
//!   for at most 2 s, so that closing does not reset the connection under
//!   a response the client has not read yet;
//! - at most 64 connections at once; more wait in the accept queue;
//! - each response says its length, type and `nosniff`, is not cached, and
//!   HTML pages carry a Content-Security-Policy that allows only the page's
//!   own scripts and styles and WebSocket connections.
//!
//! That is enough for a browser on the same machine or network to load the
//! page; it is not a general web server.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ternio::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// Longest request head read (request line and headers).
const MAX_HEAD: usize = 8 * 1024;
/// Most headers accepted in one request.
const MAX_HEADERS: usize = 32;
/// How long a client may take to send its request head.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long writing a response may take.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection lingers after its response, for the client to close.
const LINGER: Duration = Duration::from_secs(2);
/// Most bytes read and discarded while lingering.
const MAX_DRAIN: usize = 64 * 1024;
/// Connections served at once.
const MAX_CONNECTIONS: usize = 64;

/// What HTML pages may load and connect to: their own scripts and styles
/// only, and WebSocket connections anywhere (the page is told its server's
/// WebSocket address, on another port than the page).
const HTML_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self' ws: wss:; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// One file of a [`Site`]: its media type and its bytes.
#[derive(Debug, Clone)]
struct File {
    content_type: &'static str,
    body: Bytes,
}

/// A fixed set of files by path, served by [`serve`]. `/` serves
/// `/index.html`.
#[derive(Debug, Clone, Default)]
pub struct Site {
    files: HashMap<String, File>,
}

impl Site {
    /// An empty site.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the file at `path` (which starts with `/`), with
    /// its media type, such as `text/html; charset=utf-8`.
    pub fn file(mut self, path: &str, content_type: &'static str, body: impl Into<Bytes>) -> Self {
        assert!(path.starts_with('/'), "a site path starts with '/'");
        self.files.insert(
            path.to_owned(),
            File {
                content_type,
                body: body.into(),
            },
        );
        self
    }

    /// The paths of the site's files, sorted.
    pub fn paths(&self) -> Vec<&str> {
        let mut paths: Vec<&str> = self.files.keys().map(String::as_str).collect();
        paths.sort_unstable();
        paths
    }

    fn get(&self, path: &str) -> Option<&File> {
        let path = if path == "/" { "/index.html" } else { path };
        self.files.get(path)
    }
}

/// `config.json` of a page: the port and path of the WebSocket listener at
/// `websocket`.
fn websocket_config(websocket: SocketAddr, path: &str) -> String {
    format!(
        "{{\"websocket\":{{\"port\":{},\"path\":\"{}\"}}}}\n",
        websocket.port(),
        json_escape(path)
    )
}

/// The chat page: `index.html`, `chat.js`, `chat.css` and `packets.js`
/// (generated from the server's schema) from `examples/web/chat/`, the
/// browser SDK's bundle `sdk-js/dist/ternio.browser.js` as `ternio.js`, and
/// `config.json`, which tells the page the port and path of the chat
/// server's WebSocket listener at `websocket`. The page connects to that
/// port on the host it was loaded from (or to the URL in its `?ws=`
/// parameter).
pub fn chat_site(websocket: SocketAddr, path: &str) -> Site {
    let config = websocket_config(websocket, path);
    Site::new()
        .file(
            "/index.html",
            "text/html; charset=utf-8",
            include_str!("../web/chat/index.html"),
        )
        .file(
            "/chat.js",
            "text/javascript; charset=utf-8",
            include_str!("../web/chat/chat.js"),
        )
        .file(
            "/chat.css",
            "text/css; charset=utf-8",
            include_str!("../web/chat/chat.css"),
        )
        .file(
            "/packets.js",
            "text/javascript; charset=utf-8",
            include_str!("../web/chat/packets.js"),
        )
        .file(
            "/ternio.js",
            "text/javascript; charset=utf-8",
            include_str!("../../sdk-js/dist/ternio.browser.js"),
        )
        .file("/config.json", "application/json", config)
}

/// The room game's page: `index.html`, `page.js`, `rooms.js`, `rooms.css`
/// and `packets.js` (generated from the server's schema) from
/// `examples/web/rooms/`, the browser SDK's bundle
/// `sdk-js/dist/ternio.browser.js` as `ternio.js`, and `config.json` with
/// the port and path of the WebSocket listener at `websocket` (as
/// [`chat_site`] does).
pub fn rooms_site(websocket: SocketAddr, path: &str) -> Site {
    let config = websocket_config(websocket, path);
    Site::new()
        .file(
            "/index.html",
            "text/html; charset=utf-8",
            include_str!("../web/rooms/index.html"),
        )
        .file(
            "/page.js",
            "text/javascript; charset=utf-8",
            include_str!("../web/rooms/page.js"),
        )
        .file(
            "/rooms.js",
            "text/javascript; charset=utf-8",
            include_str!("../web/rooms/rooms.js"),
        )
        .file(
            "/packets.js",
            "text/javascript; charset=utf-8",
            include_str!("../web/rooms/packets.js"),
        )
        .file(
            "/rooms.css",
            "text/css; charset=utf-8",
            include_str!("../web/rooms/rooms.css"),
        )
        .file(
            "/ternio.js",
            "text/javascript; charset=utf-8",
            include_str!("../../sdk-js/dist/ternio.browser.js"),
        )
        .file("/config.json", "application/json", config)
}

/// Escapes `text` for a JSON string.
fn json_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// Serves `site` on `listener` until the task is dropped or aborted: one
/// task per connection, at most 64 at once.
pub async fn serve(listener: TcpListener, site: Site) {
    let site = Arc::new(site);
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors and the like: wait, then go on.
                tracing::warn!(%error, "http accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let site = Arc::clone(&site);
        tokio::spawn(async move {
            if let Err(error) = respond(stream, &site).await {
                tracing::debug!(%peer, %error, "http connection failed");
            }
            drop(slot);
        });
    }
}

/// A response line: status code and reason phrase.
struct Status(u16, &'static str);

const OK: Status = Status(200, "OK");
const BAD_REQUEST: Status = Status(400, "Bad Request");
const NOT_FOUND: Status = Status(404, "Not Found");
const METHOD_NOT_ALLOWED: Status = Status(405, "Method Not Allowed");
const REQUEST_TIMEOUT: Status = Status(408, "Request Timeout");
const LENGTH_REQUIRED: Status = Status(411, "Length Required");
const CONTENT_TOO_LARGE: Status = Status(413, "Content Too Large");
const HEADERS_TOO_LARGE: Status = Status(431, "Request Header Fields Too Large");

/// Reads one request head from `stream` and answers it.
async fn respond(mut stream: TcpStream, site: &Site) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let outcome = tokio::time::timeout(READ_TIMEOUT, read_head(&mut stream, &mut head)).await;
    let response = match outcome {
        Err(_) => error_response(REQUEST_TIMEOUT),
        Ok(Err(error)) => return Err(error),
        Ok(Ok(Head::TooLarge)) => error_response(HEADERS_TOO_LARGE),
        Ok(Ok(Head::Closed)) => return Ok(()),
        Ok(Ok(Head::Complete)) => answer(&head, site),
    };
    tokio::time::timeout(WRITE_TIMEOUT, async {
        stream.write_all(&response).await?;
        stream.shutdown().await
    })
    .await
    .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "write timed out"))??;
    // Closing with unread bytes in the socket (a head cut short by 431, a
    // pipelined request) would send a reset, which can destroy the response
    // before the client reads it: read what is left first, within bounds.
    let _ = tokio::time::timeout(LINGER, drain(&mut stream)).await;
    Ok(())
}

/// Reads and discards until the client closes, at most [`MAX_DRAIN`] bytes.
async fn drain(stream: &mut TcpStream) -> std::io::Result<()> {
    let mut chunk = [0u8; 2048];
    let mut drained = 0;
    while drained < MAX_DRAIN {
        match stream.read(&mut chunk).await? {
            0 => break,
            read => drained += read,
        }
    }
    Ok(())
}

/// How reading a request head ended.
enum Head {
    /// `head` holds everything up to and including the blank line (and
    /// maybe a little more).
    Complete,
    /// The head is longer than [`MAX_HEAD`].
    TooLarge,
    /// The client closed before finishing its head.
    Closed,
}

async fn read_head(stream: &mut TcpStream, head: &mut Vec<u8>) -> std::io::Result<Head> {
    let mut chunk = [0u8; 2048];
    loop {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Ok(Head::Closed);
        }
        // Look for the blank line from a little before the new bytes.
        let from = head.len().saturating_sub(3);
        head.extend_from_slice(&chunk[..read]);
        if let Some(at) = head[from..].windows(4).position(|w| w == b"\r\n\r\n") {
            let end = from + at + 4;
            return Ok(if end > MAX_HEAD {
                Head::TooLarge
            } else {
                Head::Complete
            });
        }
        if head.len() > MAX_HEAD {
            return Ok(Head::TooLarge);
        }
    }
}

/// The response to a complete request head.
fn answer(head: &[u8], site: &Site) -> Vec<u8> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let (method, target) = match request.parse(head) {
        Ok(httparse::Status::Complete(_)) => (
            request.method.unwrap_or_default(),
            request.path.unwrap_or_default(),
        ),
        Err(httparse::Error::TooManyHeaders) => return error_response(HEADERS_TOO_LARGE),
        _ => return error_response(BAD_REQUEST),
    };
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => {
            let mut response = error_response(METHOD_NOT_ALLOWED);
            insert_header(&mut response, "Allow: GET, HEAD");
            return response;
        }
    };
    for header in request.headers.iter() {
        if header.name.eq_ignore_ascii_case("transfer-encoding") {
            return error_response(LENGTH_REQUIRED);
        }
        if header.name.eq_ignore_ascii_case("content-length") && header.value != b"0" {
            return error_response(CONTENT_TOO_LARGE);
        }
    }
    // The query string (such as `?ws=...`) is for the page, not for us.
    let path = target.split(['?', '#']).next().unwrap_or_default();
    match site.get(path) {
        Some(file) => response(OK, file.content_type, &file.body, head_only),
        None => error_response(NOT_FOUND),
    }
}

/// A complete response: status line, headers, body (left out for `HEAD`).
fn response(status: Status, content_type: &str, body: &[u8], head_only: bool) -> Vec<u8> {
    let Status(code, reason) = status;
    let mut out = format!(
        "HTTP/1.1 {code} {reason}\r\n\
         Content-Type: {content_type}\r\n\
         Content-Length: {}\r\n\
         Cache-Control: no-cache\r\n\
         X-Content-Type-Options: nosniff\r\n\
         Referrer-Policy: no-referrer\r\n\
         Connection: close\r\n",
        body.len()
    );
    if content_type.starts_with("text/html") {
        let _ = write!(out, "Content-Security-Policy: {HTML_POLICY}\r\n");
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    if !head_only {
        out.extend_from_slice(body);
    }
    out
}

/// A plain-text error response.
fn error_response(status: Status) -> Vec<u8> {
    let text = format!("{} {}\n", status.0, status.1);
    response(status, "text/plain; charset=utf-8", text.as_bytes(), false)
}

/// Adds a header line to a complete response (before its blank line).
fn insert_header(response: &mut Vec<u8>, line: &str) {
    if let Some(end) = response.windows(4).position(|w| w == b"\r\n\r\n") {
        let at = end + 2;
        let line = format!("{line}\r\n");
        response.splice(at..at, line.into_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site() -> Site {
        Site::new()
            .file("/index.html", "text/html; charset=utf-8", "<p>hi</p>")
            .file("/a.js", "text/javascript", "x")
    }

    fn text(response: Vec<u8>) -> String {
        String::from_utf8(response).unwrap()
    }

    #[test]
    fn serves_files_and_index() {
        let page = text(answer(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", &site()));
        assert!(page.starts_with("HTTP/1.1 200 OK\r\n"), "{page}");
        assert!(page.contains("Content-Length: 9\r\n"));
        assert!(page.contains("Content-Security-Policy: "));
        assert!(page.ends_with("\r\n\r\n<p>hi</p>"));
        let script = text(answer(b"GET /a.js?v=1 HTTP/1.1\r\n\r\n", &site()));
        assert!(script.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(!script.contains("Content-Security-Policy"));
        assert!(script.ends_with("\r\n\r\nx"));
    }

    #[test]
    fn head_has_no_body() {
        let head = text(answer(b"HEAD /a.js HTTP/1.1\r\n\r\n", &site()));
        assert!(head.contains("Content-Length: 1\r\n"));
        assert!(head.ends_with("\r\n\r\n"));
    }

    #[test]
    fn refuses_what_it_does_not_serve() {
        let status = |request: &[u8]| text(answer(request, &site()))[9..12].to_owned();
        assert_eq!(status(b"GET /../Cargo.toml HTTP/1.1\r\n\r\n"), "404");
        assert_eq!(status(b"GET /index.html/ HTTP/1.1\r\n\r\n"), "404");
        assert_eq!(
            status(b"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"),
            "405"
        );
        assert_eq!(
            status(b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            "411"
        );
        assert_eq!(
            status(b"GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\n"),
            "413"
        );
        assert_eq!(status(b"GARBAGE\r\n\r\n"), "400");
        let many = format!("GET / HTTP/1.1\r\n{}\r\n", "A: b\r\n".repeat(40));
        assert_eq!(status(many.as_bytes()), "431");
        let allow = text(answer(b"DELETE / HTTP/1.1\r\n\r\n", &site()));
        assert!(allow.contains("\r\nAllow: GET, HEAD\r\n"), "{allow}");
    }

    async fn exchange(address: SocketAddr, request: &[u8]) -> String {
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream.write_all(request).await.unwrap();
        stream.shutdown().await.unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.unwrap();
        String::from_utf8(response).unwrap()
    }

    #[tokio::test]
    async fn serves_over_tcp() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let server = tokio::spawn(serve(listener, site()));
        let page = exchange(address, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(page.starts_with("HTTP/1.1 200 OK\r\n"), "{page}");
        assert!(page.ends_with("\r\n\r\n<p>hi</p>"), "{page}");

        // A head that arrives in pieces.
        let mut stream = TcpStream::connect(address).await.unwrap();
        for piece in [&b"GET /a.js HT"[..], b"TP/1.1\r\n", b"Host: x\r\n\r", b"\n"] {
            stream.write_all(piece).await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.unwrap();
        assert!(response.ends_with(b"\r\n\r\nx"));

        // A head too large is refused, and the response still arrives whole.
        let big = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(20_000));
        let refused = exchange(address, big.as_bytes()).await;
        assert!(refused.starts_with("HTTP/1.1 431 "), "{refused}");

        // A client that stops sending before its head is complete gets nothing.
        assert_eq!(exchange(address, b"GET / HT").await, "");
        server.abort();
    }

    #[test]
    fn chat_site_tells_the_websocket_port() {
        let site = chat_site("127.0.0.1:7102".parse().unwrap(), "/ws");
        let config = text(answer(b"GET /config.json HTTP/1.1\r\n\r\n", &site));
        assert!(config.ends_with("{\"websocket\":{\"port\":7102,\"path\":\"/ws\"}}\n"));
        assert_eq!(
            site.paths(),
            [
                "/chat.css",
                "/chat.js",
                "/config.json",
                "/index.html",
                "/packets.js",
                "/ternio.js"
            ]
        );
    }
}
