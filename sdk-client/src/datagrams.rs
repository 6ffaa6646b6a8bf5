//! The client's end of the datagram channel (docs/PROTOCOL.md section
//! 4.4): a UDP socket to the server's listener, the binding's two keys,
//! and the task that reads the socket (pushes go to the same
//! subscriptions as the stream's) and sends a keepalive when the client
//! has sent nothing for [`KEEPALIVE`] (for [`HELLO_RETRY`] while the
//! server may not know where the client is).

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use ternio_protocol::Encode;
use ternio_protocol::datagram::{
    DatagramKeys, DatagramOpener, DatagramSealer, SealError, is_datagram_header,
};
use ternio_protocol::frame::{Flags, HEADER_LEN, Header};
use ternio_protocol::system::{self, DatagramBinding};
use ternio_protocol::{Bytes, BytesMut};
use tokio::net::UdpSocket;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::error::ClientError;
use crate::push::Registry;
use crate::sync::lock;

/// How long the client goes without sending a datagram before it sends a
/// keepalive (NAT mappings last 30 s or more).
pub const KEEPALIVE: Duration = Duration::from_secs(10);

/// Until the first authentic datagram from the server shows that it knows
/// where the client is, how long the client goes without sending a
/// datagram before it sends a keepalive again: the one sent at binding
/// may have been lost, and nothing answers it. At most [`HELLO_RETRIES`]
/// times; then every [`KEEPALIVE`].
const HELLO_RETRY: Duration = Duration::from_millis(500);

/// How many times the client sends its keepalive again after
/// [`HELLO_RETRY`] (6 keepalives, all lost at 5 % loss: about 1 in 60 million).
const HELLO_RETRIES: u32 = 5;

/// Which way a [`Client::send_unreliable`](crate::Client::send_unreliable) went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Route {
    /// In a datagram: it may be lost.
    Datagram,
    /// On the stream: no datagram channel is bound.
    Stream,
}

/// A bound datagram channel.
pub(crate) struct Channel {
    socket: Arc<UdpSocket>,
    /// The sealer, the buffer each datagram is sealed into, and when the
    /// client last sent one.
    sealer: Mutex<(DatagramSealer, Vec<u8>, Instant)>,
    /// The server's address.
    pub(crate) server: SocketAddr,
    /// The task that reads the socket and sends keepalives.
    reader: OnceLock<AbortHandle>,
}

impl Drop for Channel {
    fn drop(&mut self) {
        if let Some(reader) = self.reader.get() {
            reader.abort();
        }
    }
}

impl Channel {
    /// Opens the channel of `binding`, whose keys come from the session
    /// secret `secret`, to the server's `host`; pushes go to `pushes`.
    pub(crate) async fn open(
        binding: &DatagramBinding,
        secret: &[u8],
        host: IpAddr,
        pushes: &Arc<Registry>,
    ) -> Result<Arc<Self>, ClientError> {
        let server = SocketAddr::new(host, binding.port);
        let local: SocketAddr = if host.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            ([0u16; 8], 0).into()
        };
        let socket = UdpSocket::bind(local).await.map_err(ClientError::Connect)?;
        socket.connect(server).await.map_err(ClientError::Connect)?;
        // Sends are `try_send`: they need the runtime to know the socket
        // is writable first.
        socket.writable().await.map_err(ClientError::Connect)?;
        let socket = Arc::new(socket);
        let keys = DatagramKeys::derive(secret, &binding.token);
        let max = usize::from(binding.max_datagram);
        let opener = DatagramOpener::new(&keys.server_to_client, binding.token);
        let channel = Arc::new(Self {
            socket: Arc::clone(&socket),
            sealer: Mutex::new((
                DatagramSealer::new(&keys.client_to_server, binding.token, max),
                Vec::with_capacity(max),
                Instant::now(),
            )),
            server,
            reader: OnceLock::new(),
        });
        let reader = tokio::spawn(read_loop(
            socket,
            opener,
            max,
            Arc::downgrade(pushes),
            Arc::downgrade(&channel),
        ));
        let _ = channel.reader.set(reader.abort_handle());
        // Tells the server where the client is.
        channel.keepalive();
        Ok(channel)
    }

    /// Seals and sends one frame; the socket's full buffer loses it, as
    /// the network may.
    pub(crate) fn send_frame(&self, frame: &[u8]) -> Result<(), SealError> {
        let mut sealer = lock(&self.sealer);
        let (sealer, buffer, last) = &mut *sealer;
        sealer.seal(frame, buffer)?;
        let _ = self.socket.try_send(buffer);
        *last = Instant::now();
        Ok(())
    }

    /// Sends `body` under `opcode` (request id 0) in a datagram.
    pub(crate) fn send<E: Encode + ?Sized>(&self, opcode: u16, body: &E) -> Result<(), SealError> {
        let mut frame = BytesMut::with_capacity(HEADER_LEN + body.encoded_len());
        frame.extend_from_slice(&Header::new(opcode, Flags::NONE, 0).to_bytes());
        body.encode(&mut frame);
        self.send_frame(&frame)
    }

    /// Sends a keepalive (`DATAGRAM_BIND`, id 0, empty).
    fn keepalive(&self) {
        let _ = self.send(system::DATAGRAM_BIND, &());
    }

    /// When the client last sent a datagram.
    fn last_sent(&self) -> Instant {
        lock(&self.sealer).2
    }
}

/// Reads the channel's socket: each authentic push goes to the
/// subscriptions; sends a keepalive whenever the client was quiet for
/// [`KEEPALIVE`], or for [`HELLO_RETRY`] (at most [`HELLO_RETRIES`] times)
/// until the server's first datagram arrived. Ends when the client or the
/// channel is gone.
async fn read_loop(
    socket: Arc<UdpSocket>,
    mut opener: DatagramOpener,
    max: usize,
    pushes: Weak<Registry>,
    channel: Weak<Channel>,
) {
    let mut buffer = vec![0u8; max + 1];
    // Whether the server has shown it knows where the client is, and how
    // many keepalives were sent again meanwhile.
    let (mut heard, mut retries) = (false, 0);
    loop {
        let quiet = if heard || retries >= HELLO_RETRIES {
            KEEPALIVE
        } else {
            HELLO_RETRY
        };
        let quiet_until = match channel.upgrade() {
            Some(channel) => channel.last_sent() + quiet,
            None => return,
        };
        let received = tokio::select! {
            received = socket.recv(&mut buffer) => received,
            () = tokio::time::sleep_until(quiet_until) => {
                match channel.upgrade() {
                    Some(channel) if channel.last_sent() + quiet <= Instant::now() => {
                        channel.keepalive();
                        if quiet == HELLO_RETRY {
                            retries += 1;
                        }
                    }
                    Some(_) => {}
                    None => return,
                }
                continue;
            }
        };
        let Ok(len) = received else {
            // An ICMP error of an earlier send: the next datagram may pass.
            continue;
        };
        if len > max {
            continue;
        }
        let Ok(range) = opener.open(&mut buffer[..len]) else {
            continue;
        };
        heard = true;
        let frame = &buffer[range];
        let Ok(header) = Header::parse(frame) else {
            continue;
        };
        if !is_datagram_header(&header) || header.is_system() {
            continue;
        }
        let Some(pushes) = pushes.upgrade() else {
            return;
        };
        let body = Bytes::copy_from_slice(&frame[HEADER_LEN..]);
        pushes.deliver(header.opcode, &body);
    }
}
