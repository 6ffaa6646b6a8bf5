//! Where the client connects, and how a new link is opened there: the
//! transport connects, the [`Link`] is made around it, and its tasks start
//! (reader, writer and keepalive), reporting to the client through
//! [`Inbound`].

use std::net::SocketAddr;
use std::sync::Arc;

use crate::error::ClientError;
use crate::inbound::Inbound;
use crate::keepalive;
use crate::link::{Link, Out};
use crate::outbound::Wire;
use crate::resuming;
use crate::shared::Shared;
use crate::socket;
use crate::stream::{self, DynConnector};
use crate::tasks::TaskSet;
use crate::tcp;
use crate::ws::{self, WsSender};

/// Where the client connects, kept for reconnecting.
pub(crate) enum Endpoint {
    /// The addresses a TCP address resolved to when the client first connected.
    Tcp(Vec<SocketAddr>),
    /// A `ws://` or `wss://` URL, and what `wss://` trusts.
    Ws(String, ws::Trust),
    /// What opens a stream that carries length-prefixed frames.
    Stream(Box<dyn DynConnector>),
}

/// A link just opened, with its reader, writer and keepalive tasks.
pub(crate) struct Opened {
    pub(crate) link: Arc<Link>,
    pub(crate) tasks: TaskSet,
}

impl Endpoint {
    /// The server's host, for its UDP listener: the first TCP address's
    /// IP, or the WebSocket URL's `host:port`; `None` for a stream of the
    /// application's.
    pub(crate) fn host(&self) -> Option<String> {
        match self {
            Self::Tcp(addresses) => addresses.first().map(|address| address.ip().to_string()),
            Self::Ws(url, _) => {
                let rest = url.split_once("://").map_or(url.as_str(), |(_, rest)| rest);
                let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
                // Past any user info; the port is ignored (the binding gives
                // the UDP port), so a missing one is made up.
                let authority = authority.rsplit('@').next().unwrap_or(authority);
                let has_port = if authority.starts_with('[') {
                    authority.contains("]:")
                } else {
                    authority.contains(':')
                };
                Some(if has_port {
                    authority.to_owned()
                } else {
                    format!("{authority}:0")
                })
            }
            Self::Stream(_) => None,
        }
    }

    /// Opens a new link. The caller bounds the time it takes.
    pub(crate) async fn open(&self, shared: &Arc<Shared>) -> Result<Opened, ClientError> {
        let config = shared.config();
        let (limit, max) = (config.outbound_limit(), config.max_frame_size);
        let (link, mut tasks) = match self {
            Self::Tcp(addresses) => {
                let out = tcp::connect(addresses, limit).await?;
                let link = Arc::new(
                    Link::new(Out::Tcp(Arc::clone(&out)))
                        .with_session(Arc::clone(shared.session())),
                );
                let inbound = Inbound::new(shared, &link);
                let reader = tcp::read_loop(inbound.clone(), Arc::clone(&out), max);
                let writer = socket::write_loop(inbound, out);
                (link, vec![tokio::spawn(reader), tokio::spawn(writer)])
            }
            Self::Ws(url, trust) => {
                let (out, reader) = ws::connect(url, trust, limit, max).await?;
                let sender = out.sender().clone();
                let link =
                    Arc::new(Link::new(Out::Ws(out)).with_session(Arc::clone(shared.session())));
                let inbound = Inbound::new(shared, &link);
                let writer = match sender {
                    WsSender::Socket(socket) => {
                        tokio::spawn(socket::write_loop(inbound.clone(), socket))
                    }
                    WsSender::Stream(stream) => {
                        tokio::spawn(socket::write_loop(inbound.clone(), stream))
                    }
                };
                let reader = reader.run(inbound);
                (link, vec![tokio::spawn(reader), writer])
            }
            Self::Stream(connector) => {
                let stream = connector.connect().await.map_err(ClientError::Connect)?;
                let (out, read) = stream::open(stream, limit, Wire::Tcp);
                let link = Arc::new(
                    Link::new(Out::Stream(Arc::clone(&out)))
                        .with_session(Arc::clone(shared.session())),
                );
                let inbound = Inbound::new(shared, &link);
                let reader = stream::read_loop(inbound.clone(), Arc::clone(&out), read, max);
                let writer = socket::write_loop(inbound, out);
                (link, vec![tokio::spawn(reader), tokio::spawn(writer)])
            }
        };
        tasks.extend(keepalive::spawn(shared, &link));
        if shared.wants_resume() {
            let session = Arc::clone(shared.session());
            tasks.push(tokio::spawn(resuming::acknowledge(
                session,
                Arc::clone(&link),
                config.max_frame_size,
            )));
        }
        Ok(Opened {
            link,
            tasks: TaskSet::new(tasks),
        })
    }
}
