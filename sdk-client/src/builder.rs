//! [`ClientBuilder`]: where a client connects and how it behaves, in one
//! chain of calls. The `Client::connect_*` functions are its shortcuts.

use std::fmt;
use std::time::Duration;

use ternio_protocol::secure::RekeyPolicy;

use crate::client::Client;
use crate::config::{ClientConfig, Keepalive, SecureConfig};
use crate::error::ClientError;
use crate::reconnect::ReconnectPolicy;
use crate::stream::{Connector, DynConnector};
#[cfg(feature = "tls")]
use crate::tls::ClientTls;

/// Where the client connects.
enum Target {
    Tcp(String),
    WebSocket(String),
    #[cfg(feature = "tls")]
    Tls(String),
    Stream(Box<dyn DynConnector>),
}

/// Builds a [`Client`] (from [`Client::builder`]): one transport
/// ([`tcp`](Self::tcp), [`websocket`](Self::websocket), [`tls`](Self::tls)
/// or [`stream`](Self::stream)), then any settings, then
/// [`connect`](Self::connect). A setting left alone keeps its
/// [`ClientConfig`] default.
///
/// ```no_run
/// use std::time::Duration;
/// use ternio_client::{Client, ReconnectPolicy};
///
/// # async fn run(server_key: [u8; 32]) -> Result<(), ternio_client::ClientError> {
/// let client = Client::builder()
///     .tcp("127.0.0.1:7001")
///     .pin(server_key)
///     .reconnect(ReconnectPolicy::default())
///     .request_timeout(Duration::from_secs(5))
///     .connect()
///     .await?;
/// # Ok(())
/// # }
/// ```
#[must_use = "a builder does nothing until `connect` is awaited"]
pub struct ClientBuilder {
    target: Option<Target>,
    config: ClientConfig,
    #[cfg(feature = "tls")]
    trust: Option<ClientTls>,
}

impl Client {
    /// A [`ClientBuilder`] with the default [`ClientConfig`] and no
    /// transport yet.
    pub fn builder() -> ClientBuilder {
        ClientBuilder {
            target: None,
            config: ClientConfig::default(),
            #[cfg(feature = "tls")]
            trust: None,
        }
    }
}

impl ClientBuilder {
    /// Length-prefixed frames over TCP to `address` (`host:port`), resolved
    /// once when connecting.
    pub fn tcp(mut self, address: impl Into<String>) -> Self {
        self.target = Some(Target::Tcp(address.into()));
        self
    }

    /// WebSocket to a `ws://` URL, or with the `tls` feature a `wss://` one
    /// (checked against [`trust`](Self::trust), or the system's roots).
    pub fn websocket(mut self, url: impl Into<String>) -> Self {
        self.target = Some(Target::WebSocket(url.into()));
        self
    }

    /// Length-prefixed frames inside TLS to `address` (`host:port`, the
    /// host checked against the server's certificate), as a server's
    /// `map_tcp_tls` listener serves them (feature `tls`).
    #[cfg(feature = "tls")]
    pub fn tls(mut self, address: impl Into<String>) -> Self {
        self.target = Some(Target::Tls(address.into()));
        self
    }

    /// The certificates a [`tls`](Self::tls) or `wss://` connection trusts
    /// (feature `tls`). Default: the system's root certificates.
    #[cfg(feature = "tls")]
    pub fn trust(mut self, tls: ClientTls) -> Self {
        self.trust = Some(tls);
        self
    }

    /// A byte stream that `connector` opens, once per connection (see
    /// [`Client::connect_stream`]).
    pub fn stream(mut self, connector: impl Connector) -> Self {
        self.target = Some(Target::Stream(Box::new(connector)));
        self
    }

    /// Every setting at once, as from a settings file; the calls after it
    /// change single settings again.
    pub fn config(mut self, config: ClientConfig) -> Self {
        self.config = config;
        self
    }

    /// A secure session pinning the server's public key (`Noise_NK`) on
    /// every connection ([`ClientConfig::secure`]).
    pub fn pin(self, server_key: [u8; 32]) -> Self {
        self.secure(SecureConfig::pinned(server_key))
    }

    /// A secure session as `secure` says on every connection
    /// ([`ClientConfig::secure`]).
    pub fn secure(mut self, secure: SecureConfig) -> Self {
        self.config.secure = Some(secure);
        self
    }

    /// Re-establishes lost connections by `policy` ([`ClientConfig::reconnect`]).
    pub fn reconnect(mut self, policy: ReconnectPolicy) -> Self {
        self.config.reconnect = Some(policy);
        self
    }

    /// How a quiet connection is checked, or `None` not to
    /// ([`ClientConfig::keepalive`]).
    pub fn keepalive(mut self, keepalive: Option<Keepalive>) -> Self {
        self.config.keepalive = keepalive;
        self
    }

    /// [`ClientConfig::request_timeout`].
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.config.request_timeout = timeout;
        self
    }

    /// [`ClientConfig::connect_timeout`].
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = timeout;
        self
    }

    /// [`ClientConfig::max_frame_size`].
    pub fn max_frame_size(mut self, bytes: usize) -> Self {
        self.config.max_frame_size = bytes;
        self
    }

    /// [`ClientConfig::max_in_flight`].
    pub fn max_in_flight(mut self, requests: usize) -> Self {
        self.config.max_in_flight = requests;
        self
    }

    /// [`ClientConfig::send_deadlines`].
    pub fn send_deadlines(mut self, on: bool) -> Self {
        self.config.send_deadlines = on;
        self
    }

    /// [`ClientConfig::resume`]: whether a reconnection resumes the session.
    pub fn resume(mut self, on: bool) -> Self {
        self.config.resume = on;
        self
    }

    /// [`ClientConfig::clock_sync`]: how often to re-estimate the server's
    /// clock in the background, or `None` not to.
    pub fn clock_sync(mut self, interval: Option<Duration>) -> Self {
        self.config.clock_sync = interval;
        self
    }

    /// [`ClientConfig::push_buffer`].
    pub fn push_buffer(mut self, pushes: usize) -> Self {
        self.config.push_buffer = pushes;
        self
    }

    /// [`ClientConfig::compression`].
    pub fn compression(mut self, threshold: Option<usize>) -> Self {
        self.config.compression = threshold;
        self
    }

    /// [`ClientConfig::rekey`].
    pub fn rekey(mut self, policy: RekeyPolicy) -> Self {
        self.config.rekey = policy;
        self
    }

    /// Connects as set up. Fails with [`ClientError::NoTransport`] when no
    /// transport was chosen, and otherwise as the matching `connect_*`
    /// function does.
    pub async fn connect(self) -> Result<Client, ClientError> {
        let config = self.config;
        match self.target.ok_or(ClientError::NoTransport)? {
            Target::Tcp(address) => Client::connect_tcp_with(address.as_str(), config).await,
            #[cfg(feature = "tls")]
            Target::WebSocket(url) => match self.trust {
                Some(trust) if url.starts_with("wss://") => {
                    Client::connect_wss_with(&url, &trust, config).await
                }
                _ => Client::connect_ws_with(&url, config).await,
            },
            #[cfg(not(feature = "tls"))]
            Target::WebSocket(url) => Client::connect_ws_with(&url, config).await,
            #[cfg(feature = "tls")]
            Target::Tls(address) => {
                let trust = match self.trust {
                    Some(trust) => trust,
                    None => ClientTls::system_roots()?,
                };
                Client::connect_tls_with(&address, &trust, config).await
            }
            Target::Stream(connector) => Client::connect_boxed_stream(connector, config).await,
        }
    }
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let target = match &self.target {
            None => "none".to_owned(),
            Some(Target::Tcp(address)) => format!("tcp {address}"),
            Some(Target::WebSocket(url)) => format!("websocket {url}"),
            #[cfg(feature = "tls")]
            Some(Target::Tls(address)) => format!("tls {address}"),
            Some(Target::Stream(_)) => "stream".to_owned(),
        };
        f.debug_struct("ClientBuilder")
            .field("target", &target)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}
