//! The server's UDP listener ([`ServerBuilder::map_udp`](crate::ServerBuilder::map_udp)):
//! the bindings of every connection's datagram channel by token, and the
//! task that reads the socket (docs/PROTOCOL.md section 4.4).
//!
//! What an unauthenticated sender can make the server do: one hash-map
//! lookup per datagram, and one AEAD check when the datagram names a live
//! token (tokens are random, but travel in clear). Nothing is ever sent in
//! answer to a datagram, so the listener amplifies nothing; a datagram that
//! fails any check changes no state.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use ternio_protocol::datagram::{
    DATAGRAM_OVERHEAD, DatagramKeys, Token, generate_token, is_datagram_header, token_of,
};
use ternio_protocol::frame::{HEADER_LEN, Header};
use ternio_protocol::system::{self, DatagramBinding};
use ternio_protocol::{Bytes, BytesMut};
use tokio::net::UdpSocket;
use tokio::sync::watch;

use crate::binding::Binding;
use crate::registry::ConnectionShared;
use crate::sync::lock;

/// A binding, and the connection its frames go to.
type Bound = (Arc<Binding>, Weak<ConnectionShared>);

/// The server's datagram channels.
pub(crate) struct Datagrams {
    /// The socket bound at build time, until `run` takes it.
    bound: Mutex<Option<std::net::UdpSocket>>,
    socket: OnceLock<Arc<UdpSocket>>,
    address: SocketAddr,
    /// The port a binding's answer names: the socket's own, or the one
    /// [`ServerConfig::datagram_port`](crate::ServerConfig::datagram_port) sets.
    port: u16,
    max: usize,
    bindings: Mutex<HashMap<Token, Bound>>,
    /// Datagrams dropped, by why (for logs and tests).
    pub(crate) unknown: AtomicU64,
    pub(crate) refused: AtomicU64,
    pub(crate) received: AtomicU64,
}

impl Datagrams {
    /// The channels of `socket` (bound, not yet registered with the
    /// runtime), whose datagrams are at most `max` bytes; clients are told
    /// to send to `port` when given, to the socket's own port otherwise.
    pub(crate) fn new(
        socket: std::net::UdpSocket,
        max: usize,
        port: Option<u16>,
    ) -> io::Result<Self> {
        socket.set_nonblocking(true)?;
        let address = socket.local_addr()?;
        Ok(Self {
            bound: Mutex::new(Some(socket)),
            socket: OnceLock::new(),
            address,
            port: port.unwrap_or(address.port()),
            max,
            bindings: Mutex::default(),
            unknown: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            received: AtomicU64::new(0),
        })
    }

    /// The address the UDP socket is bound to.
    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// Binds a datagram channel to `connection`, whose session secret is
    /// `secret`, replacing the one it had; `None` before the listener runs.
    pub(crate) fn bind(
        &self,
        connection: &Arc<ConnectionShared>,
        secret: &[u8],
    ) -> Option<DatagramBinding> {
        let socket = Arc::clone(self.socket.get()?);
        let token = loop {
            let token = generate_token();
            if !lock(&self.bindings).contains_key(&token) {
                break token;
            }
        };
        let keys = DatagramKeys::derive(secret, &token);
        let binding = Arc::new(Binding::new(&keys, token, self.max, socket));
        lock(&self.bindings).insert(token, (Arc::clone(&binding), Arc::downgrade(connection)));
        if let Some(old) = connection.datagrams.set(Some(binding)) {
            lock(&self.bindings).remove(&old.token);
        }
        Some(DatagramBinding {
            token,
            port: self.port,
            max_datagram: self.max.min(usize::from(u16::MAX)) as u16,
        })
    }

    /// Forgets `connection`'s binding (it closed).
    pub(crate) fn unbind(&self, connection: &ConnectionShared) {
        if let Some(binding) = connection.datagrams.set(None) {
            lock(&self.bindings).remove(&binding.token);
        }
    }

    /// Reads the socket until the server shuts down: each authentic
    /// datagram's frame goes to its connection's task.
    pub(crate) async fn run(
        self: Arc<Self>,
        mut shutdown: watch::Receiver<bool>,
    ) -> io::Result<()> {
        let Some(bound) = lock(&self.bound).take() else {
            return Ok(());
        };
        let socket = Arc::new(UdpSocket::from_std(bound)?);
        let _ = self.socket.set(Arc::clone(&socket));
        tracing::info!(address = %self.address, "listening (udp datagrams)");
        // One byte more than the largest: a longer datagram shows as such.
        let mut buffer = vec![0u8; self.max + 1];
        loop {
            let received = tokio::select! {
                received = socket.recv_from(&mut buffer) => received,
                _ = shutdown.wait_for(|stop| *stop) => return Ok(()),
            };
            let (len, from) = match received {
                Ok(received) => received,
                // ICMP errors of earlier sends (ECONNREFUSED and the like)
                // surface here on some systems: they end nothing.
                Err(error) => {
                    tracing::debug!(%error, "udp: receive failed");
                    continue;
                }
            };
            self.on_datagram(&mut buffer[..len], from);
        }
    }

    /// Checks one datagram and hands its frame to its connection.
    fn on_datagram(&self, datagram: &mut [u8], from: SocketAddr) {
        if datagram.len() > self.max || datagram.len() < DATAGRAM_OVERHEAD + HEADER_LEN {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let Some(token) = token_of(datagram) else {
            return;
        };
        let Some((binding, connection)) = lock(&self.bindings).get(&token).cloned() else {
            self.unknown.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if connection.strong_count() == 0 {
            // The connection is gone without unbinding: its entry goes too
            // (and no AEAD check is spent on it).
            lock(&self.bindings).remove(&token);
            self.unknown.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let Ok(range) = binding.open(datagram, from) else {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let frame = &datagram[range];
        let Ok(header) = Header::parse(frame) else {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if !is_datagram_header(&header) {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.received.fetch_add(1, Ordering::Relaxed);
        if header.opcode == system::DATAGRAM_BIND || header.is_system() {
            // A keepalive (its address is taken), or nothing to do.
            return;
        }
        let Some(connection) = connection.upgrade() else {
            // The connection is gone without unbinding: its entry goes too.
            lock(&self.bindings).remove(&token);
            return;
        };
        let mut copy = BytesMut::with_capacity(frame.len());
        copy.extend_from_slice(frame);
        let frame: Bytes = copy.freeze();
        if connection.datagrams.queue(frame) {
            connection.outbox.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use ternio_protocol::datagram::DatagramSealer;
    use ternio_protocol::frame::Flags;

    use super::*;
    use crate::registry::test_connection as connection;

    #[tokio::test]
    async fn a_binding_whose_connection_is_gone_leaves_the_table_on_its_next_datagram() {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let datagrams = Datagrams::new(socket.try_clone().unwrap(), 1200, None).unwrap();
        let _ = datagrams
            .socket
            .set(Arc::new(UdpSocket::from_std(socket).unwrap()));
        let connection = connection();
        let secret = [5u8; 32];
        let binding = datagrams.bind(&connection, &secret).expect("bound");
        // Gone without unbinding.
        drop(connection);
        let keys = DatagramKeys::derive(&secret, &binding.token);
        let mut sealer = DatagramSealer::new(&keys.client_to_server, binding.token, 1200);
        let frame = Header::new(0x0100, Flags::NONE, 0).to_bytes();
        let mut datagram = Vec::new();
        sealer.seal(&frame, &mut datagram).unwrap();
        assert!(lock(&datagrams.bindings).contains_key(&binding.token));
        datagrams.on_datagram(&mut datagram, "127.0.0.1:9".parse().unwrap());
        assert!(!lock(&datagrams.bindings).contains_key(&binding.token));
    }
}
