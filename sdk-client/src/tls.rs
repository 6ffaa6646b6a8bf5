//! TLS links (feature `tls`): length-prefixed frames inside TLS, over the
//! any-stream transport ([`Connector`]), with rustls and its `ring`
//! provider.

use std::fmt;
use std::io;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::error::ClientError;
use crate::stream::Connector;

/// Which servers a TLS link trusts: the system's root certificates, or
/// given CA certificates. Cheap to clone.
///
/// ```no_run
/// # async fn run() -> Result<(), ternio_client::ClientError> {
/// use ternio_client::{Client, ClientTls};
///
/// // A server whose certificate a public CA (one the system trusts) signed:
/// let client = Client::connect_tls("chat.example.com:7443", &ClientTls::system_roots()?).await?;
/// // A server whose certificate a private CA signed:
/// let ca = std::fs::read("ca.pem").map_err(ternio_client::ClientError::Connect)?;
/// let client = Client::connect_tls("10.0.0.7:7443", &ClientTls::with_ca_pem(&ca)?).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct ClientTls {
    config: Arc<rustls::ClientConfig>,
}

impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientTls").finish_non_exhaustive()
    }
}

impl ClientTls {
    /// Trusts the root certificates of the operating system's store (read
    /// with `rustls-native-certs`: the roots the host's administrator
    /// manages, including a company's own CA). Fails with
    /// [`ClientError::Tls`] when the store holds none that can be used.
    pub fn system_roots() -> Result<Self, ClientError> {
        let found = rustls_native_certs::load_native_certs();
        let mut roots = RootCertStore::empty();
        let (added, _ignored) = roots.add_parsable_certificates(found.certs);
        if added == 0 {
            let errors: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
            return Err(ClientError::Tls(format!(
                "no usable root certificate in the system's store ({})",
                errors.join("; ")
            )));
        }
        Self::with_roots(roots)
    }

    /// Trusts only the CA certificates in `pem` (one or more PEM
    /// `CERTIFICATE` sections): for servers whose certificates a private
    /// CA signed.
    pub fn with_ca_pem(pem: &[u8]) -> Result<Self, ClientError> {
        let certificates = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| ClientError::Tls(format!("CA certificates: {error}")))?;
        if certificates.is_empty() {
            return Err(ClientError::Tls(
                "no CERTIFICATE section in the CA PEM".to_owned(),
            ));
        }
        let mut roots = RootCertStore::empty();
        for certificate in certificates {
            roots
                .add(certificate)
                .map_err(|error| ClientError::Tls(format!("CA certificate: {error}")))?;
        }
        Self::with_roots(roots)
    }

    /// Runs a TLS handshake over `tcp`, checking the server's certificate
    /// for `host` (a DNS name or an IP address).
    pub(crate) async fn connect(
        &self,
        tcp: TcpStream,
        host: &str,
    ) -> Result<TlsStream<TcpStream>, ClientError> {
        let name = server_name(host)?;
        let connector = tokio_rustls::TlsConnector::from(Arc::clone(&self.config));
        connector
            .connect(name, tcp)
            .await
            .map_err(ClientError::Connect)
    }

    fn with_roots(roots: RootCertStore) -> Result<Self, ClientError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|error| ClientError::Tls(error.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Self {
            config: Arc::new(config),
        })
    }
}

/// A [`Connector`] that opens TCP to a `host:port` address and runs a TLS
/// handshake over it, checking the server's certificate for `host` (a DNS
/// name or an IP address). Give it to
/// [`Client::connect_stream_with`](crate::Client::connect_stream_with), or
/// use [`Client::connect_tls`](crate::Client::connect_tls); it connects
/// again, with a new handshake, for every reconnection. A certificate that
/// does not check out fails the connection with
/// [`ClientError::Connect`] and rustls' reason (such as
/// `invalid peer certificate: UnknownIssuer`).
#[derive(Clone, Debug)]
pub struct TlsConnector {
    host: String,
    port: u16,
    server_name: ServerName<'static>,
    tls: ClientTls,
}

impl TlsConnector {
    /// The connector to `address` (`host:port`; an IPv6 address in
    /// brackets) trusting what `tls` trusts.
    pub fn new(address: &str, tls: &ClientTls) -> Result<Self, ClientError> {
        let invalid = || ClientError::Tls(format!("{address}: not a host:port address"));
        let (host, port) = address.rsplit_once(':').ok_or_else(invalid)?;
        let port = port.parse().map_err(|_| invalid())?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let server_name = server_name(host)?;
        Ok(Self {
            host: host.to_owned(),
            port,
            server_name,
            tls: tls.clone(),
        })
    }
}

impl Connector for TlsConnector {
    type Stream = TlsStream<TcpStream>;

    async fn connect(&self) -> io::Result<Self::Stream> {
        let tcp = TcpStream::connect((self.host.as_str(), self.port)).await?;
        tcp.set_nodelay(true)?;
        let connector = tokio_rustls::TlsConnector::from(Arc::clone(&self.tls.config));
        connector.connect(self.server_name.clone(), tcp).await
    }
}

/// `host` as the name the server's certificate must hold.
fn server_name(host: &str) -> Result<ServerName<'static>, ClientError> {
    ServerName::try_from(host.to_owned())
        .map_err(|error| ClientError::Tls(format!("{host}: not a server name: {error}")))
}
