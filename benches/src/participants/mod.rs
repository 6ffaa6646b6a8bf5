//! The participants of the comparison: what each one's server child runs,
//! and the idiomatic client the harness drives it with.

pub mod grpc;
pub mod raw_tcp;
pub mod raw_ws;
pub mod ternio;

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use bytes::Bytes;

use crate::tls::TlsMaterial;

/// One stack under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Participant {
    /// Hand-written tokio echo with a u32 length prefix: the floor.
    RawTcp,
    /// Plain tokio-tungstenite binary echo, configured as Ternio configures
    /// tungstenite.
    RawWs,
    /// Ternio over TCP, `ternio-client`'s `request_async`.
    TernioTcp,
    /// Ternio over WebSocket.
    TernioWs,
    /// Ternio over TCP after an NK handshake, every request sealed.
    TernioTcpAead,
    /// Ternio over WebSocket after an NK handshake, every request sealed.
    TernioWsAead,
    /// tonic unary calls over h2c.
    TonicUnary,
    /// One tonic bidirectional stream per client over h2c.
    TonicDuplex,
    /// tonic unary calls over HTTP/2 and TLS.
    TonicUnaryTls,
    /// One tonic bidirectional stream per client over HTTP/2 and TLS.
    TonicDuplexTls,
    /// Diagnostic: Ternio's TCP server with a hand-written client (no SDK).
    TernioTcpLean,
    /// Diagnostic: ternio-tcp with resumption on (the server keeps what it
    /// sends until acknowledged, the client too, both acknowledge).
    TernioTcpResume,
    /// Ternio's WebSocket server driven by raw-ws's own client (no SDK):
    /// the like-for-like WebSocket comparison, which the budgets use.
    TernioWsLean,
}

impl Participant {
    /// Every participant of the default run, in the order of the report's tables.
    pub const ALL: [Participant; 11] = [
        Participant::RawTcp,
        Participant::RawWs,
        Participant::TernioTcp,
        Participant::TernioWs,
        Participant::TernioWsLean,
        Participant::TernioTcpAead,
        Participant::TernioWsAead,
        Participant::TonicUnary,
        Participant::TonicDuplex,
        Participant::TonicUnaryTls,
        Participant::TonicDuplexTls,
    ];

    /// The order participants run in within one run of a cell: the two
    /// sides of each budget's ratio side by side, so that their windows
    /// run one right after the other (the host's speed changes within a
    /// minute). raw-tcp sits between ternio-tcp and ternio-tcp-lean, raw-ws
    /// between ternio-ws and ternio-ws-lean; ternio-tcp-aead and
    /// ternio-tcp-resume next to ternio-tcp; tonic-duplex close by.
    pub const RUN_ORDER: [Participant; 13] = [
        Participant::TonicUnary,
        Participant::TonicUnaryTls,
        Participant::TonicDuplexTls,
        Participant::TonicDuplex,
        Participant::TernioTcpResume,
        Participant::TernioTcpAead,
        Participant::TernioTcp,
        Participant::RawTcp,
        Participant::TernioTcpLean,
        Participant::TernioWsLean,
        Participant::RawWs,
        Participant::TernioWs,
        Participant::TernioWsAead,
    ];

    /// Diagnostic participants: not run unless named with `--only`; they
    /// split Ternio's server cost from its client's.
    pub const DIAGNOSTIC: [Participant; 2] =
        [Participant::TernioTcpLean, Participant::TernioTcpResume];

    /// The participant's name on the command line and in the report.
    pub fn name(self) -> &'static str {
        match self {
            Participant::RawTcp => "raw-tcp",
            Participant::RawWs => "raw-ws",
            Participant::TernioTcp => "ternio-tcp",
            Participant::TernioWs => "ternio-ws",
            Participant::TernioTcpAead => "ternio-tcp-aead",
            Participant::TernioWsAead => "ternio-ws-aead",
            Participant::TonicUnary => "tonic-unary",
            Participant::TonicDuplex => "tonic-duplex",
            Participant::TonicUnaryTls => "tonic-unary-tls",
            Participant::TonicDuplexTls => "tonic-duplex-tls",
            Participant::TernioTcpLean => "ternio-tcp-lean",
            Participant::TernioTcpResume => "ternio-tcp-resume",
            Participant::TernioWsLean => "ternio-ws-lean",
        }
    }

    /// The participant named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .chain(Self::DIAGNOSTIC)
            .find(|p| p.name() == name)
    }

    /// Whether this is a hand-written baseline rather than a framework.
    pub fn is_baseline(self) -> bool {
        matches!(self, Participant::RawTcp | Participant::RawWs)
    }

    /// Whether this is Ternio's server behind a baseline's client rather
    /// than a framework's own stack (left out of the rankings).
    pub fn is_lean(self) -> bool {
        matches!(self, Participant::TernioTcpLean | Participant::TernioWsLean)
    }

    /// Whether it is one of Ternio's sealed participants (a secure
    /// session: every frame ChaCha20-Poly1305).
    pub fn is_sealed(self) -> bool {
        matches!(self, Participant::TernioTcpAead | Participant::TernioWsAead)
    }

    /// Whether its server needs the harness's TLS certificate.
    pub fn uses_tls(self) -> bool {
        matches!(
            self,
            Participant::TonicUnaryTls | Participant::TonicDuplexTls
        )
    }

    /// Why this participant cannot run in this build, if it cannot (every
    /// participant can today; kept for stacks whose API is still landing).
    pub fn unavailable(self) -> Option<&'static str> {
        None
    }

    /// What one line of the report says this participant runs.
    pub fn description(self) -> &'static str {
        match self {
            Participant::RawTcp => {
                "baseline: hand-written tokio echo, u32 length prefix, one read and one write per batch"
            }
            Participant::RawWs => {
                "baseline: plain tokio-tungstenite binary echo, server and client with Ternio's read buffer (8 KiB)"
            }
            Participant::TernioTcp => {
                "`#[packet_controller]` echo over `map_tcp`; client `request_async`"
            }
            Participant::TernioWs => {
                "the same over `map_websocket` (`/ws`); client `Client::connect_ws`"
            }
            Participant::TernioTcpAead => {
                "NK handshake (X25519), then every request and reply sealed (ChaCha20-Poly1305); `#[handler(encrypted)]`"
            }
            Participant::TernioWsAead => "the same over WebSocket",
            Participant::TonicUnary => {
                "tonic unary call with a hand-written bytes codec (no protoc), h2c; one channel per client"
            }
            Participant::TonicDuplex => {
                "one bidirectional tonic stream per client, one write and one read per call, h2c"
            }
            Participant::TonicUnaryTls => {
                "tonic unary over HTTP/2 + TLS 1.3 (rustls, ring; self-signed ECDSA P-256 made by rcgen at start)"
            }
            Participant::TonicDuplexTls => "tonic duplex over HTTP/2 + TLS 1.3",
            Participant::TernioTcpLean => {
                "diagnostic: the ternio-tcp server, driven by a hand-written client written like raw-tcp's"
            }
            Participant::TernioTcpResume => {
                "diagnostic: ternio-tcp with resumption on: `resumable(30 s, 64 KiB)` on the server, a client with a reconnect policy that asked for a ticket (both keep what they send until acknowledged)"
            }
            Participant::TernioWsLean => {
                "the ternio-ws server, driven by raw-ws's own client (tokio-tungstenite, the same settings): the WebSocket budgets compare it with raw-ws"
            }
        }
    }
}

impl fmt::Display for Participant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The listen backlog of every server child that binds its own listener:
/// the one Ternio's servers get by default (`ServerConfig::listen_backlog`,
/// 1,024). tokio's `TcpListener::bind` gets mio's 128 (the standard
/// library's), which a crowd connecting at once overflows: the kernel then
/// drops SYNs, and each dropped one costs its client a retransmission
/// timeout (1 s, then 2 s, 4 s…).
pub fn listen_backlog() -> u32 {
    ::ternio::ServerConfig::default().listen_backlog
}

/// A listener on 127.0.0.1 (a free port) with Ternio's default backlog,
/// for the raw servers and tonic, on the current runtime.
pub fn bind_loopback() -> io::Result<tokio::net::TcpListener> {
    bind_loopback_on(Listen::FREE)
}

/// Where a server child's listener binds, and whether it shares its port
/// with the child's other servers (`SO_REUSEPORT`: one server per
/// current-thread runtime, see [`RUNTIME_VAR`](crate::child::RUNTIME_VAR)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listen {
    /// The address; port 0 takes a free one.
    pub addr: SocketAddr,
    /// Whether the listener sets `SO_REUSEPORT`.
    pub reuse_port: bool,
}

impl Listen {
    /// A free port of 127.0.0.1, not shared.
    pub const FREE: Listen = Listen {
        addr: SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0),
        reuse_port: false,
    };
}

/// [`bind_loopback`] at `listen`'s address, with `SO_REUSEPORT` if it asks.
pub fn bind_loopback_on(listen: Listen) -> io::Result<tokio::net::TcpListener> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    if listen.reuse_port {
        socket.set_reuseport(true)?;
    }
    socket.bind(listen.addr)?;
    socket.listen(listen_backlog())
}

/// What a server child serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// A participant's echo server (for Ternio: also push, fan-out and the
    /// backplane scenario's standalone case).
    Echo(Participant),
    /// The raw-socket push server: writes 64 B frames as fast as the peer drains.
    RawTcpPush,
    /// The raw-socket fan-out server: subscribers, and broadcasts to all of them.
    RawTcpFanout,
    /// Ternio's TCP server (the `ternio-tcp` controller) as one node of a
    /// cluster: with a Redis backplane whose URL, key prefix and cluster
    /// secret it reads from
    /// [`REDIS_URL_VAR`](crate::scenarios::backplane::REDIS_URL_VAR),
    /// [`REDIS_PREFIX_VAR`](crate::scenarios::backplane::REDIS_PREFIX_VAR) and
    /// [`REDIS_SECRET_VAR`](crate::scenarios::backplane::REDIS_SECRET_VAR).
    BackplaneNode,
}

impl ServerKind {
    /// The name given to the hidden `serve` subcommand.
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Echo(participant) => participant.name(),
            ServerKind::RawTcpPush => "raw-tcp-push",
            ServerKind::RawTcpFanout => "raw-tcp-fanout",
            ServerKind::BackplaneNode => "ternio-backplane-node",
        }
    }

    /// The kind named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "raw-tcp-push" => Some(ServerKind::RawTcpPush),
            "raw-tcp-fanout" => Some(ServerKind::RawTcpFanout),
            "ternio-backplane-node" => Some(ServerKind::BackplaneNode),
            other => Participant::parse(other).map(ServerKind::Echo),
        }
    }
}

/// Where a server child listens, and what its clients need to know.
#[derive(Clone)]
pub struct Endpoint {
    /// The listening address on 127.0.0.1.
    pub addr: SocketAddr,
    /// The server's static public key, for Ternio's NK handshake.
    pub public_key: Option<[u8; 32]>,
    /// The certificate a TLS client trusts.
    pub tls: Option<Arc<TlsMaterial>>,
}

impl Endpoint {
    /// Parses the child's `ready addr=… [key=…]` line.
    pub fn parse_ready(line: &str, tls: Option<Arc<TlsMaterial>>) -> Result<Self> {
        let mut fields = line.split_whitespace();
        if fields.next() != Some("ready") {
            bail!("the server child said {line:?} instead of `ready`");
        }
        let mut addr = None;
        let mut public_key = None;
        for field in fields {
            match field.split_once('=') {
                Some(("addr", value)) => addr = Some(value.parse().context("bad address")?),
                Some(("key", value)) => public_key = Some(parse_key(value)?),
                _ => {}
            }
        }
        Ok(Self {
            addr: addr.context("the ready line has no address")?,
            public_key,
            tls,
        })
    }
}

fn parse_key(hex: &str) -> Result<[u8; 32]> {
    if hex.len() != 64 {
        bail!("a public key is 64 hex digits, not {}", hex.len());
    }
    let mut key = [0u8; 32];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).context("bad hex in key")?;
    }
    Ok(key)
}

/// One connection of a participant's idiomatic client, doing echoes.
pub enum EchoClient {
    /// Raw length-prefixed TCP.
    RawTcp(raw_tcp::EchoClient),
    /// Raw WebSocket.
    RawWs(raw_ws::EchoClient),
    /// `ternio-client`.
    Ternio(ternio::EchoClient),
    /// A hand-written client of Ternio's protocol.
    TernioLean(ternio::LeanClient),
    /// tonic unary.
    TonicUnary(grpc::UnaryClient),
    /// tonic duplex.
    TonicDuplex(grpc::DuplexClient),
}

impl EchoClient {
    /// Opens one connection to `participant`'s server at `endpoint`.
    pub async fn connect(participant: Participant, endpoint: &Endpoint) -> Result<Self> {
        Ok(match participant {
            Participant::RawTcp => {
                EchoClient::RawTcp(raw_tcp::EchoClient::connect(endpoint.addr).await?)
            }
            Participant::RawWs => {
                EchoClient::RawWs(raw_ws::EchoClient::connect(endpoint.addr, None).await?)
            }
            Participant::TernioTcp
            | Participant::TernioWs
            | Participant::TernioTcpAead
            | Participant::TernioWsAead
            | Participant::TernioTcpResume => {
                EchoClient::Ternio(ternio::EchoClient::connect(participant, endpoint).await?)
            }
            Participant::TernioTcpLean | Participant::TernioWsLean => EchoClient::TernioLean(
                ternio::LeanClient::connect(participant, endpoint.addr).await?,
            ),
            Participant::TonicUnary | Participant::TonicUnaryTls => {
                EchoClient::TonicUnary(grpc::UnaryClient::connect(endpoint).await?)
            }
            Participant::TonicDuplex | Participant::TonicDuplexTls => {
                EchoClient::TonicDuplex(grpc::DuplexClient::connect(endpoint).await?)
            }
        })
    }

    /// Sends `payload`, waits for the echo, and checks it is the same bytes.
    pub async fn echo(&mut self, payload: &Bytes) -> Result<()> {
        let reply = match self {
            EchoClient::RawTcp(client) => return client.echo(payload).await,
            EchoClient::RawWs(client) => client.echo(payload).await?,
            EchoClient::Ternio(client) => client.echo(payload).await?,
            EchoClient::TernioLean(client) => client.echo(payload).await?,
            EchoClient::TonicUnary(client) => client.echo(payload).await?,
            EchoClient::TonicDuplex(client) => client.echo(payload).await?,
        };
        check_echo(payload, &reply)
    }

    /// Closes the connection the way its stack does.
    pub async fn close(self) {
        match self {
            EchoClient::RawTcp(_) | EchoClient::TonicUnary(_) => {}
            EchoClient::RawWs(client) => client.close().await,
            EchoClient::TernioLean(client) => client.close().await,
            EchoClient::Ternio(client) => client.close().await,
            EchoClient::TonicDuplex(client) => client.close().await,
        }
    }
}

/// Fails unless `reply` holds the bytes of `payload`.
pub fn check_echo(payload: &[u8], reply: &[u8]) -> Result<()> {
    if payload != reply {
        bail!(
            "the echo differs: sent {} bytes, got {} bytes back",
            payload.len(),
            reply.len()
        );
    }
    Ok(())
}
