//! TLS links (feature `tls`): length-prefixed frames inside TLS, over the
//! any-stream transport ([`Connector`]), with rustls and its `ring`
//! provider.

use std::fmt;
use std::io;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{WebPkiSupportedAlgorithms, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::error::ClientError;
use crate::stream::Connector;

/// Which servers a TLS link trusts: the system's root certificates, given
/// CA certificates, or exactly one server certificate (pinned). Cheap to
/// clone.
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
/// // A server with a self-signed certificate, trusted as is (pinned):
/// let cert = std::fs::read("server.pem").map_err(ternio_client::ClientError::Connect)?;
/// let client =
///     Client::connect_tls("127.0.0.1:7443", &ClientTls::with_certificate_pem(&cert)?).await?;
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

    /// Trusts exactly one server certificate, the first PEM `CERTIFICATE`
    /// section of `pem` (pinning): for a server with a self-signed
    /// certificate, such as one from `openssl req -x509` (which OpenSSL 3
    /// marks `CA:TRUE`, a certificate [`with_ca_pem`](Self::with_ca_pem)
    /// refuses as the server's own: `CaUsedAsEndEntity`).
    ///
    /// A handshake succeeds only if the server presents that very
    /// certificate (byte for byte, whatever else it sends after it), proves
    /// it holds its key (the handshake's signature is checked), and the
    /// certificate names the host connected to in its `subjectAltName`
    /// (the name check is kept: make the certificate with, for example,
    /// `-addext "subjectAltName=DNS:localhost,IP:127.0.0.1"`). Its issuer
    /// and validity dates are not checked: the pin is the trust, and a new
    /// certificate on the server needs the new one here.
    pub fn with_certificate_pem(pem: &[u8]) -> Result<Self, ClientError> {
        let certificate = CertificateDer::pem_slice_iter(pem)
            .next()
            .ok_or_else(|| {
                ClientError::Tls("no CERTIFICATE section in the certificate PEM".to_owned())
            })?
            .map_err(|error| ClientError::Tls(format!("certificate: {error}")))?;
        ParsedCertificate::try_from(&certificate)
            .map_err(|error| ClientError::Tls(format!("certificate: {error}")))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = PinnedCertificate {
            certificate,
            algorithms: provider.signature_verification_algorithms,
        };
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|error| ClientError::Tls(error.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        Ok(Self {
            config: Arc::new(config),
        })
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

/// The verifier of [`ClientTls::with_certificate_pem`]: the server's
/// certificate is trusted if it is the pinned one and names the host.
#[derive(Debug)]
struct PinnedCertificate {
    certificate: CertificateDer<'static>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for PinnedCertificate {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if end_entity.as_ref() != self.certificate.as_ref() {
            let reason = io::Error::other("not the pinned certificate");
            return Err(rustls::Error::InvalidCertificate(CertificateError::Other(
                rustls::OtherError(Arc::new(reason)),
            )));
        }
        let parsed = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_name(&parsed, server_name)?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
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
