//! TLS (feature `tls`): frames and WebSocket inside TLS on real sockets,
//! certificates made here with rcgen; the client (`connect_tls`,
//! `wss://`) trusting only the test CA, refusing a server its CA did not sign; Noise inside TLS; a
//! certificate reload; a peer that never finishes its TLS handshake; and
//! examples/echo_server's TLS flags.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use ternio::protocol::frame::Frame;
use ternio::protocol::{DEFAULT_MAX_FRAME_SIZE, Decode};
use ternio::{Identity, ServerBuilder, ServerHandle, TlsConfig};
use ternio_client::{Client, ClientConfig, ClientError, ClientTls, SecureConfig};
use ternio_tests::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

/// A CA of the test, and the certificates it signs.
struct Ca {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    pem: String,
}

impl Ca {
    fn new(name: &str) -> Self {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let pem = params.self_signed(&key).unwrap().pem();
        Self {
            issuer: rcgen::Issuer::new(params, key),
            pem,
        }
    }

    /// The client side's trust in this CA only.
    fn trust(&self) -> ClientTls {
        ClientTls::with_ca_pem(self.pem.as_bytes()).unwrap()
    }

    /// Writes a certificate for 127.0.0.1 and localhost that this CA
    /// signed, and its key, into `dir` (`server.pem`, `server.key`).
    fn sign_into(&self, dir: &Path) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
            .unwrap()
            .signed_by(&key, &self.issuer)
            .unwrap();
        std::fs::write(dir.join("server.pem"), cert.pem()).unwrap();
        std::fs::write(dir.join("server.key"), key.serialize_pem()).unwrap();
    }
}

/// A temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static COUNT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "ternio-tls-{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn cert(&self) -> PathBuf {
        self.0.join("server.pem")
    }

    fn key(&self) -> PathBuf {
        self.0.join("server.key")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A test server with a TLS listener of frames and a `wss://` one at
/// `/ws`, with `tls`: returns their addresses and the handle.
fn tls_server(
    tls: &TlsConfig,
    configure: impl FnOnce(ServerBuilder) -> ServerBuilder,
) -> (SocketAddr, SocketAddr, ServerHandle) {
    let builder = test_server_builder()
        .map_tcp_tls("127.0.0.1:0", tls.clone())
        .map_websocket_tls("127.0.0.1:0", "/ws", tls.clone());
    let server = configure(builder).build().expect("the test server builds");
    let (tcp, ws) = (server.tcp_tls_addrs()[0], server.websocket_tls_addrs()[0]);
    assert!(server.tcp_addrs().is_empty() && server.websocket_addrs().is_empty());
    let handle = server.handle();
    tokio::spawn(server.run());
    (tcp, ws, handle)
}

/// A CA, a certificate it signed in a directory, and the server's TLS configuration of it.
fn certificates() -> (Ca, TempDir, TlsConfig) {
    let ca = Ca::new("Ternio test CA");
    let dir = TempDir::new();
    ca.sign_into(&dir.0);
    let tls = TlsConfig::from_pem_files(dir.cert(), dir.key()).unwrap();
    (ca, dir, tls)
}

/// A TLS client stream to `address` trusting `ca` only.
async fn tls_stream(
    address: SocketAddr,
    ca: &Ca,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.pem.as_bytes()).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = TcpStream::connect(address).await?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
}

/// Echoes `text` through a raw `wss://` client (tungstenite over a TLS
/// stream that trusts `ca` only).
async fn wss_echo(address: SocketAddr, ca: &Ca, text: &'static str) {
    let stream = tls_stream(address, ca).await.expect("the TLS handshake");
    let mut request = format!("wss://{address}/ws").into_client_request().unwrap();
    request.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        HeaderValue::from_static("ternio.v2"),
    );
    let (mut ws, _) = tokio_tungstenite::client_async(request, stream)
        .await
        .expect("the upgrade inside TLS");
    let payload = Bytes::from_static(text.as_bytes());
    ws.send(ws_request(
        &Echo {
            payload: payload.clone(),
        },
        7,
    ))
    .await
    .unwrap();
    let message = tokio::time::timeout(PATIENCE, ws.next())
        .await
        .expect("an answer in time")
        .expect("the stream is open")
        .expect("no error");
    let Message::Binary(bytes) = message else {
        panic!("expected a binary message, got {message:?}");
    };
    let frame = Frame::parse(bytes, DEFAULT_MAX_FRAME_SIZE).unwrap();
    assert_eq!(frame.header.request_id, 7);
    assert_eq!(Echo::decode_body(&frame.body).unwrap().payload, payload);
}

#[tokio::test]
async fn frames_and_websocket_travel_inside_tls_to_a_client_trusting_only_the_ca() {
    let (ca, _dir, tls) = certificates();
    let (tcp, ws, server) = tls_server(&tls, |b| b);
    let client = Client::connect_tls(&tcp.to_string(), &ca.trust())
        .await
        .unwrap();
    assert_echoed(&client, Bytes::from_static(b"inside tls")).await;
    assert_echoed(&client, Bytes::from(vec![7u8; 200_000])).await;
    // A name the certificate holds works as well as the address.
    let by_name = Client::connect_tls(&format!("localhost:{}", tcp.port()), &ca.trust())
        .await
        .unwrap();
    assert_echoed(&by_name, Bytes::from_static(b"by name")).await;
    wss_echo(ws, &ca, "inside wss").await;
    // The Rust client over wss://, trusting the CA only.
    let url = format!("wss://localhost:{}/ws", ws.port());
    let wss = Client::connect_wss_with(&url, &ca.trust(), ClientConfig::default())
        .await
        .unwrap();
    assert_echoed(&wss, Bytes::from_static(b"client over wss")).await;
    assert_echoed(&wss, Bytes::from(vec![9u8; 300_000])).await;
    // wss_echo dropped its stream without a close: the server sees it go
    // in its own time.
    eventually("three connections open", || server.connection_count() == 3).await;
    wss.close().await;
    eventually("the wss client's connection closed", || {
        server.connection_count() == 2
    })
    .await;
    // The same two through the builder.
    let built = Client::builder()
        .tls(format!("localhost:{}", tcp.port()))
        .trust(ca.trust())
        .connect()
        .await
        .unwrap();
    assert_echoed(&built, Bytes::from_static(b"builder over tls")).await;
    let built = Client::builder()
        .websocket(url)
        .trust(ca.trust())
        .connect()
        .await
        .unwrap();
    assert_echoed(&built, Bytes::from_static(b"builder over wss")).await;
}

#[tokio::test]
async fn a_client_that_does_not_trust_the_ca_fails_with_the_reason() {
    let (_ca, _dir, tls) = certificates();
    let (tcp, ws, server) = tls_server(&tls, |b| b);
    let stranger = Ca::new("Another CA");
    let error = Client::connect_tls(&tcp.to_string(), &stranger.trust())
        .await
        .unwrap_err();
    let ClientError::Connect(io) = &error else {
        panic!("expected a connect error, got {error:?}");
    };
    let text = io.to_string();
    assert!(
        text.contains("invalid peer certificate") && text.contains("UnknownIssuer"),
        "{text}"
    );
    assert!(tls_stream(ws, &stranger).await.is_err());
    let url = format!("wss://127.0.0.1:{}/ws", ws.port());
    let error = Client::connect_wss_with(&url, &stranger.trust(), ClientConfig::default())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("UnknownIssuer"), "{error}");
    // Without a CA given, wss:// trusts the system's roots only, which
    // did not sign the test CA.
    let error = Client::connect_ws(&url).await.unwrap_err();
    assert!(
        matches!(&error, ClientError::Connect(_) | ClientError::Tls(_)),
        "{error:?}"
    );
    eventually("no connection opened", || server.connection_count() == 0).await;
    // Bad CA material is a TLS setup error, before any connection.
    let error = ClientTls::with_ca_pem(b"not a certificate").unwrap_err();
    assert!(matches!(error, ClientError::Tls(_)), "{error:?}");
}

#[tokio::test]
async fn a_secure_session_runs_inside_tls() {
    let (ca, _dir, tls) = certificates();
    let identity = Identity::generate();
    let public = *identity.public_key();
    let (tcp, ws, _server) = tls_server(&tls, |b| {
        b.identity(identity)
            .require_encryption(true)
            .handshake_timeout(Duration::from_secs(2))
    });
    let mut config = ClientConfig::default();
    config.secure = Some(SecureConfig::pinned(public));
    let client = Client::connect_tls_with(&tcp.to_string(), &ca.trust(), config.clone())
        .await
        .unwrap();
    assert!(client.is_secure());
    let sum: Sum = client.request_async(&Add { a: 20, b: 22 }).await.unwrap();
    assert_eq!(sum, Sum(42));
    let url = format!("wss://127.0.0.1:{}/ws", ws.port());
    let client = Client::connect_wss_with(&url, &ca.trust(), config)
        .await
        .unwrap();
    assert!(client.is_secure());
    let sum: Sum = client.request_async(&Add { a: 2, b: 3 }).await.unwrap();
    assert_eq!(sum, Sum(5));
    // A wrong pinned key fails inside TLS as outside it.
    let mut config = ClientConfig::default();
    config.secure = Some(SecureConfig::pinned(*Identity::generate().public_key()));
    let error = Client::connect_tls_with(&tcp.to_string(), &ca.trust(), config)
        .await
        .unwrap_err();
    assert!(matches!(error, ClientError::KeyRejected(_)), "{error:?}");
}

/// Resumption inside TLS: a client that has read all the server sent
/// acknowledges the pushes it holds at once (docs/PROTOCOL.md section
/// 4.2). With a 14 KiB replay buffer the server holds 11-byte pushes at
/// 10.5 KiB (977 of them), under the client's 1,024-frame and 32 KiB
/// limits: before, each window waited for the 200 ms `ACK` delay, and
/// these 20,000 pushes took at least 20 of them (4 s).
#[tokio::test]
async fn pushes_held_for_acks_inside_tls_do_not_wait_for_the_ack_delay() {
    let (ca, _dir, tls) = certificates();
    let (tcp, ws, _server) = tls_server(&tls, |b| b.resumable(Duration::from_secs(30), 14 * 1024));
    let mut config = ClientConfig::default();
    config.reconnect = Some(quick_reconnect());
    let url = format!("wss://127.0.0.1:{}/ws", ws.port());
    let clients = [
        Client::connect_tls_with(&tcp.to_string(), &ca.trust(), config.clone())
            .await
            .unwrap(),
        Client::connect_wss_with(&url, &ca.trust(), config)
            .await
            .unwrap(),
    ];
    for client in clients {
        // Room for them all: the subscription does not slow the reader.
        let mut notes = client.subscribe_with_buffer::<Note>(20_000);
        let started = Instant::now();
        client
            .request_async(&PushMe { count: 20_000 })
            .await
            .unwrap();
        for seq in 0..20_000 {
            let note = tokio::time::timeout(Duration::from_secs(10), notes.next())
                .await
                .expect("a push within 10 s")
                .expect("a push");
            assert_eq!(note.seq, seq);
        }
        let took = started.elapsed();
        assert!(
            took < ternio::protocol::replay::ACK_DELAY * 10,
            "{took:?}: the pushes waited for the ACK delay"
        );
    }
}

#[tokio::test]
async fn a_reload_gives_new_connections_the_new_certificate_and_keeps_open_ones() {
    let (old_ca, dir, tls) = certificates();
    let (tcp, ws, _server) = tls_server(&tls, |b| b);
    let open = Client::connect_tls(&tcp.to_string(), &old_ca.trust())
        .await
        .unwrap();
    assert_echoed(&open, Bytes::from_static(b"before")).await;

    // A failed reload keeps the certificate in use.
    std::fs::write(dir.key(), "garbage").unwrap();
    assert!(tls.reload().is_err());
    let again = Client::connect_tls(&tcp.to_string(), &old_ca.trust()).await;
    assert!(again.is_ok(), "{:?}", again.err());

    let new_ca = Ca::new("The renewed CA");
    new_ca.sign_into(&dir.0);
    tls.reload().unwrap();
    let error = Client::connect_tls(&tcp.to_string(), &old_ca.trust())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("UnknownIssuer"), "{error}");
    let fresh = Client::connect_tls(&tcp.to_string(), &new_ca.trust())
        .await
        .unwrap();
    assert_echoed(&fresh, Bytes::from_static(b"after")).await;
    wss_echo(ws, &new_ca, "wss after").await;
    assert!(tls_stream(ws, &old_ca).await.is_err());
    // The connection opened before the reload goes on.
    assert_echoed(&open, Bytes::from_static(b"still here")).await;
}

/// What a stalling peer sends before it stops: nothing, or the first
/// bytes of a TLS ClientHello (a handshake record of 512 bytes announced,
/// 5 of them sent).
const STALLS: [&[u8]; 2] = [
    b"",
    &[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03],
];

#[tokio::test]
async fn a_peer_that_never_finishes_its_tls_handshake_is_closed_at_the_timeout() {
    let (ca, _dir, tls) = certificates();
    let timeout = Duration::from_millis(400);
    let (tcp, ws, server) = tls_server(&tls, |b| {
        b.max_connections(1)
            .max_pending_upgrades(4)
            .tls_handshake_timeout(timeout)
    });
    for address in [tcp, ws] {
        for stall in STALLS {
            // The last client's place comes free just after its connection
            // count went (when its task ends): an attacker that came before
            // is refused at once, and tries again.
            let deadline = Instant::now() + PATIENCE;
            let (started, mut attacker) = loop {
                let started = Instant::now();
                let mut attacker = TcpStream::connect(address).await.unwrap();
                let _ = attacker.write_all(stall).await;
                tokio::time::sleep(Duration::from_millis(50)).await;
                let mut byte = [0u8; 1];
                match tokio::time::timeout(Duration::from_millis(1), attacker.read(&mut byte)).await
                {
                    Err(_) => break (started, attacker),
                    Ok(read) => {
                        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
                        assert!(Instant::now() < deadline, "the place never came free");
                    }
                }
            };
            // While it stalls it holds the one connection place: an honest
            // client is refused (closed without a handshake).
            assert!(tls_stream(tcp, &ca).await.is_err(), "the place is held");
            // At the timeout the server closes it.
            let mut scratch = [0u8; 64];
            let read = tokio::time::timeout(PATIENCE, attacker.read(&mut scratch))
                .await
                .expect("the server closes the stalled connection");
            assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
            let elapsed = started.elapsed();
            assert!(elapsed >= timeout, "closed after {elapsed:?}");
            assert!(elapsed < timeout + Duration::from_secs(2), "{elapsed:?}");
            // And the place is free again.
            let mut client = None;
            eventually_async(PATIENCE, "a client connects after the stall", async || {
                client = Client::connect_tls(&tcp.to_string(), &ca.trust())
                    .await
                    .ok();
                client.is_some()
            })
            .await;
            let client = client.unwrap();
            assert_echoed(&client, Bytes::from_static(b"after the stall")).await;
            client.close().await;
            eventually("the client's connection closed", || {
                server.connection_count() == 0
            })
            .await;
        }
    }
}

/// Starts examples/echo_server (built by `cargo test --workspace`, or named
/// by `TERNIO_ECHO_SERVER`) with TLS listeners from `dir`'s certificate.
fn start_echo_server(dir: &TempDir) -> (Child, SocketAddr, SocketAddr, SocketAddr) {
    let binary = echo_server_binary();
    let mut child = Command::new(&binary)
        .args(["--tcp", "127.0.0.1:0", "--tcp-tls", "127.0.0.1:0"])
        .args(["--wss", "127.0.0.1:0", "--tls-cert"])
        .arg(dir.cert())
        .arg("--tls-key")
        .arg(dir.key())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the echo server starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut tcp, mut tls, mut wss) = (None, None, None);
    for line in lines.by_ref().map_while(Result::ok) {
        if let Some(address) = line.strip_prefix("tcp listening on ") {
            tcp = address.parse().ok();
        } else if let Some(address) = line.strip_prefix("tcp-tls listening on ") {
            tls = address.parse().ok();
        } else if let Some(url) = line.strip_prefix("websocket listening on wss://") {
            wss = url.trim_end_matches("/ws").parse().ok();
        }
        if line.starts_with("public key") {
            break;
        }
    }
    std::thread::spawn(move || lines.for_each(drop));
    let (tcp, tls, wss) = (tcp.unwrap(), tls.unwrap(), wss.unwrap());
    (child, tcp, tls, wss)
}

#[tokio::test]
async fn the_echo_server_example_serves_tls_and_wss_with_its_flags() {
    let ca = Ca::new("Ternio example CA");
    let dir = TempDir::new();
    ca.sign_into(&dir.0);
    let (mut child, tcp, tls, wss) = start_echo_server(&dir);
    let plain = Client::connect_tcp(tcp).await.unwrap();
    assert_echoed(&plain, Bytes::from_static(b"plain")).await;
    let client = Client::connect_tls(&tls.to_string(), &ca.trust())
        .await
        .unwrap();
    assert_echoed(&client, Bytes::from_static(b"example over tls")).await;
    wss_echo(wss, &ca, "example over wss").await;
    let url = format!("wss://127.0.0.1:{}/ws", wss.port());
    let client = Client::connect_wss_with(&url, &ca.trust(), ClientConfig::default())
        .await
        .unwrap();
    assert_echoed(&client, Bytes::from_static(b"example, client over wss")).await;
    let _ = child.kill();
    let _ = child.wait();
}

/// Writes a self-signed certificate for 127.0.0.1 and localhost, and its
/// key, into `dir` (`server.pem`, `server.key`), marked `CA:TRUE` as
/// `openssl req -x509` makes it with OpenSSL 3's default configuration.
fn self_signed_into(dir: &Path) -> String {
    self_signed_for(dir, &["127.0.0.1", "localhost"])
}

/// [`self_signed_into`] for the subject alternative names `names`.
fn self_signed_for(dir: &Path, names: &[&str]) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
    let mut params = rcgen::CertificateParams::new(names).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "localhost");
    let pem = params.self_signed(&key).unwrap().pem();
    std::fs::write(dir.join("server.pem"), &pem).unwrap();
    std::fs::write(dir.join("server.key"), key.serialize_pem()).unwrap();
    pem
}

/// `GET path` on a health listener: the status code.
async fn health_status(address: SocketAddr, path: &str) -> u16 {
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: probe\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut answer = String::new();
    tokio::time::timeout(PATIENCE, stream.read_to_string(&mut answer))
        .await
        .expect("an answer, then the close")
        .unwrap();
    answer
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {answer:?}"))
}

/// Waits until `client` is closed and asserts it was by `DISCONNECT
/// SHUTDOWN`.
async fn expect_shutdown(client: &Client, what: &str) {
    eventually_async(PATIENCE, "the client is closed", async || {
        client.close_reason().is_some()
    })
    .await;
    match client.close_reason() {
        Some(ternio_client::CloseReason::Disconnected(disconnect)) => {
            assert_eq!(
                disconnect.reason,
                ternio::DisconnectReason::Shutdown,
                "{what}: {disconnect:?}"
            );
        }
        other => panic!("{what}: expected DISCONNECT SHUTDOWN, got {other:?}"),
    }
}

/// What an outside probe of a deployment does: a self-signed certificate
/// (`CA:TRUE`, as `openssl req -x509` makes it), examples/echo_server with
/// only TLS listeners and health, echoes over TLS and `wss://` trusting
/// exactly that certificate, the probes, then SIGTERM with both clients
/// connected.
#[tokio::test]
async fn the_echo_server_example_serves_a_self_signed_certificate_and_stops_on_sigterm() {
    let dir = TempDir::new();
    let pem = self_signed_into(&dir.0);
    let mut child = Command::new(echo_server_binary())
        .args(["--tcp", "127.0.0.1:0", "--tcp-tls", "127.0.0.1:0"])
        .args(["--wss", "127.0.0.1:0", "--health", "127.0.0.1:0"])
        .arg("--tls-cert")
        .arg(dir.cert())
        .arg("--tls-key")
        .arg(dir.key())
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the echo server starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut tls, mut wss, mut health) = (None, None, None);
    for line in lines.by_ref().map_while(Result::ok) {
        if let Some(address) = line.strip_prefix("tcp-tls listening on ") {
            tls = address.parse::<SocketAddr>().ok();
        } else if let Some(url) = line.strip_prefix("websocket listening on wss://") {
            wss = url.trim_end_matches("/ws").parse::<SocketAddr>().ok();
        } else if let Some(rest) = line.strip_prefix("health on http://") {
            health = rest.split('/').next().and_then(|a| a.parse().ok());
        }
        if line.starts_with("public key") {
            break;
        }
    }
    std::thread::spawn(move || lines.for_each(drop));
    let (tls, wss, health): (SocketAddr, SocketAddr, SocketAddr) =
        (tls.unwrap(), wss.unwrap(), health.unwrap());

    // Trusted as a CA, the certificate is refused as the server's own.
    let as_ca = ClientTls::with_ca_pem(pem.as_bytes()).unwrap();
    match Client::connect_tls(&tls.to_string(), &as_ca).await {
        Err(ClientError::Connect(error)) => {
            assert!(error.to_string().contains("CaUsedAsEndEntity"), "{error}");
        }
        other => panic!("expected CaUsedAsEndEntity, got {other:?}"),
    }
    // Pinned, it is trusted.
    let pinned = ClientTls::with_certificate_pem(pem.as_bytes()).unwrap();
    let over_tls = Client::connect_tls(&tls.to_string(), &pinned)
        .await
        .unwrap();
    assert_echoed(&over_tls, Bytes::from_static(b"self-signed, over tls")).await;
    let url = format!("wss://localhost:{}/ws", wss.port());
    let over_wss = Client::connect_wss_with(&url, &pinned, ClientConfig::default())
        .await
        .unwrap();
    assert_echoed(&over_wss, Bytes::from_static(b"self-signed, over wss")).await;
    assert_eq!(health_status(health, "/healthz").await, 200);
    assert_eq!(health_status(health, "/readyz").await, 200);

    let started = Instant::now();
    ternio_tests::terminate(child.id());
    expect_shutdown(&over_tls, "the TLS client").await;
    expect_shutdown(&over_wss, "the wss client").await;
    drop((over_tls, over_wss));
    let bound = Duration::from_secs(30);
    let status = ternio_tests::exit_within(child, bound, "the echo server").await;
    assert!(started.elapsed() < bound);
    assert_eq!(status.code(), Some(0), "a clean exit: {status:?}");
}

#[tokio::test]
async fn a_pinned_certificate_refuses_another_certificate_and_another_name() {
    // The server's certificate is not the pinned one (though its own CA
    // signed it): refused.
    let (ca, _dir, tls) = certificates();
    let (tcp, _ws, _server) = tls_server(&tls, |b| b);
    let other = TempDir::new();
    let pinned_other = self_signed_into(&other.0);
    let error = Client::connect_tls(
        &tcp.to_string(),
        &ClientTls::with_certificate_pem(pinned_other.as_bytes()).unwrap(),
    )
    .await
    .expect_err("another certificate is refused");
    assert!(
        error.to_string().contains("not the pinned certificate"),
        "{error}"
    );
    drop(ca);

    // The pinned certificate, for a name it does not hold: refused (the
    // name check is kept).
    let dir = TempDir::new();
    let pem = self_signed_for(&dir.0, &["localhost"]);
    let tls = TlsConfig::from_pem_files(dir.cert(), dir.key()).unwrap();
    let (tcp, _ws, _server) = tls_server(&tls, |b| b);
    let pinned = ClientTls::with_certificate_pem(pem.as_bytes()).unwrap();
    let error = Client::connect_tls(&tcp.to_string(), &pinned)
        .await
        .expect_err("127.0.0.1 is not a name of the certificate");
    assert!(error.to_string().contains("not valid for name"), "{error}");
    // By a name it holds: trusted.
    let by_name = format!("localhost:{}", tcp.port());
    let client = Client::connect_tls(&by_name, &pinned).await.unwrap();
    assert_echoed(&client, Bytes::from_static(b"pinned, by name")).await;
    // No PEM section at all: refused at once.
    assert!(matches!(
        ClientTls::with_certificate_pem(b"not a certificate"),
        Err(ClientError::Tls(_))
    ));
}
