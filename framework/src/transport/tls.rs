//! TLS listeners (feature `tls`): length-prefixed frames or WebSocket
//! (`wss://`) inside TLS, with rustls and its `ring` provider.
//!
//! The accept loop admits a connection before any work, as on the plain
//! listeners; the TLS handshake then runs in the connection's task, under
//! [`ServerConfig::tls_handshake_timeout`](crate::ServerConfig::tls_handshake_timeout),
//! holding a place among the connections being set up
//! ([`max_pending_upgrades`](crate::ServerConfig::max_pending_upgrades)),
//! so that a peer that opens TCP and never finishes its handshake holds
//! nothing beyond that timeout. Past the handshake, the stream is served
//! as any other ([`tcp::serve`], [`websocket::serve`]).

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::admission::{Pending, Permit, Refusal};
use crate::ids::Transport;
use crate::shared::ServerShared;
use crate::sync::lock;
use crate::transport::{Accept, Admitted, accept_loop, tcp, websocket};

/// A TLS certificate chain and private key, read from PEM files, for
/// [`ServerBuilder::map_tcp_tls`](crate::ServerBuilder::map_tcp_tls) and
/// [`map_websocket_tls`](crate::ServerBuilder::map_websocket_tls).
///
/// Clones share one configuration: [`reload`](Self::reload) reads the
/// files again and every listener given a clone uses the new certificate
/// for the connections it accepts from then on; connections already open
/// keep the session they negotiated. TLS 1.3 and 1.2 are offered (rustls'
/// safe defaults, `ring` provider); no client certificate is asked for.
///
/// ```no_run
/// # fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use ternio::{Server, TlsConfig};
///
/// let tls = TlsConfig::from_pem_files("/etc/ternio/chain.pem", "/etc/ternio/key.pem")?;
/// let server = Server::builder()
///     .map_tcp_tls("0.0.0.0:7443", tls.clone())
///     .map_websocket_tls("0.0.0.0:8443", "/ws", tls.clone())
///     .build()?;
/// // Later, once the files were renewed (say, on SIGHUP):
/// tls.reload()?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct TlsConfig {
    inner: Arc<Inner>,
}

struct Inner {
    cert: PathBuf,
    key: PathBuf,
    /// What new connections negotiate with.
    current: Mutex<Arc<rustls::ServerConfig>>,
}

/// Why a certificate or key could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The reading error.
        source: io::Error,
    },
    /// A file holds no usable PEM section (a `CERTIFICATE` in the chain
    /// file, a private key in the key file), or a malformed one.
    #[error("{}: {detail}", .path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// rustls refused the chain and key (such as a key that is not the
    /// certificate's).
    #[error("the certificate and key are not usable: {0}")]
    Rustls(#[from] rustls::Error),
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("cert", &self.inner.cert)
            .field("key", &self.inner.key)
            .finish_non_exhaustive()
    }
}

impl TlsConfig {
    /// Reads the certificate chain (PEM `CERTIFICATE` sections, the
    /// server's own first, then its intermediates) from `cert` and the
    /// private key (PKCS#8, PKCS#1 or SEC1 PEM) from `key`.
    pub fn from_pem_files(cert: impl AsRef<Path>, key: impl AsRef<Path>) -> Result<Self, TlsError> {
        let (cert, key) = (cert.as_ref().to_owned(), key.as_ref().to_owned());
        let current = load(&cert, &key)?;
        Ok(Self {
            inner: Arc::new(Inner {
                cert,
                key,
                current: Mutex::new(current),
            }),
        })
    }

    /// Reads both files again. On success, connections accepted from now
    /// on get the new certificate; open connections are not touched. On
    /// failure, the certificate in use stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let fresh = load(&self.inner.cert, &self.inner.key)?;
        *lock(&self.inner.current) = fresh;
        Ok(())
    }

    /// The acceptor for the next connection.
    fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(Arc::clone(&lock(&self.inner.current)))
    }
}

/// Reads a chain and a key, and makes a rustls configuration of them.
fn load(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| TlsError::Read {
            path: path.to_owned(),
            source,
        })
    };
    let pem_error = |path: &Path, detail: String| TlsError::Pem {
        path: path.to_owned(),
        detail,
    };
    let chain = CertificateDer::pem_slice_iter(&read(cert)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| pem_error(cert, error.to_string()))?;
    if chain.is_empty() {
        return Err(pem_error(cert, "no CERTIFICATE section".to_owned()));
    }
    let key_der = PrivateKeyDer::from_pem_slice(&read(key)?)
        .map_err(|error| pem_error(key, format!("no private key: {error}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)?;
    Ok(Arc::new(config))
}

/// Serves TLS connections from `listener` until the server shuts down:
/// length-prefixed frames, or with `path` a WebSocket upgrade at `path`.
pub(crate) async fn serve_listener(
    listener: TcpListener,
    server: Arc<ServerShared>,
    tls: TlsConfig,
    path: Option<Arc<str>>,
) {
    match path {
        None => accept_loop(listener, server, Arc::new(TlsTcpAccept { tls })).await,
        Some(path) => accept_loop(listener, server, Arc::new(TlsWsAccept { tls, path })).await,
    }
}

/// An admitted connection whose TLS handshake completed: the stream, the
/// peer, its permit, and its place among the connections being set up.
type Handshaken = (TlsStream<TcpStream>, SocketAddr, Permit, Option<Pending>);

/// Runs the TLS handshake of an admitted connection within the server's
/// TLS handshake timeout; `None` when it failed or took too long.
async fn handshake(
    acceptor: TlsAcceptor,
    admitted: Admitted,
    server: &ServerShared,
) -> Option<Handshaken> {
    let Admitted {
        stream,
        peer,
        permit,
        pending,
    } = admitted;
    let timeout = server.config.tls_handshake_timeout;
    match tokio::time::timeout(timeout, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => Some((stream, peer, permit, pending)),
        Ok(Err(error)) => {
            tracing::debug!(%peer, %error, "tls handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!(%peer, "tls handshake timed out");
            None
        }
    }
}

/// A TLS listener of length-prefixed frames.
struct TlsTcpAccept {
    tls: TlsConfig,
}

impl Accept for TlsTcpAccept {
    const TRANSPORT: Transport = Transport::Tcp;
    const SETS_UP: bool = true;

    fn serve(&self, admitted: Admitted, server: Arc<ServerShared>) {
        let acceptor = self.tls.acceptor();
        // Tracked, so that a shutdown waits for it.
        let tasks = server.tasks.clone();
        tasks.spawn(async move {
            let Some((stream, peer, permit, pending)) =
                handshake(acceptor, admitted, &server).await
            else {
                return;
            };
            // The handshake is done: its place goes to the next one.
            drop(pending);
            tcp::serve(stream, peer, server, permit).await;
        });
    }

    /// A refused peer is closed at once: telling it why would take a TLS
    /// handshake, the work a refusal is there to avoid.
    fn refuse(&self, stream: TcpStream, _refusal: Refusal, _server: &Arc<ServerShared>) {
        drop(stream);
    }
}

/// A TLS listener of WebSocket connections (`wss://`).
struct TlsWsAccept {
    tls: TlsConfig,
    path: Arc<str>,
}

impl Accept for TlsWsAccept {
    const TRANSPORT: Transport = Transport::WebSocket;
    const SETS_UP: bool = true;

    fn serve(&self, admitted: Admitted, server: Arc<ServerShared>) {
        let acceptor = self.tls.acceptor();
        let path = Arc::clone(&self.path);
        // Tracked, so that a shutdown waits for it.
        let tasks = server.tasks.clone();
        tasks.spawn(async move {
            let Some((stream, peer, permit, pending)) =
                handshake(acceptor, admitted, &server).await
            else {
                return;
            };
            // The upgrade follows: the pending place is held until it is done.
            websocket::serve(stream, peer, permit, pending, server, path).await;
        });
    }

    /// A refused peer is closed at once (an HTTP 503 would need a TLS
    /// handshake first).
    fn refuse(&self, stream: TcpStream, _refusal: Refusal, _server: &Arc<ServerShared>) {
        drop(stream);
    }
}
