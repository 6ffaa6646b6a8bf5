//! `ternio-tcp`, `ternio-ws` and their AEAD variants: a
//! `#[packet_controller]` served by `ternio::Server`, and `ternio-client`'s
//! `request_async` on the harness side.
//!
//! The same controller serves the scenarios beyond the echo: `StartPush`
//! starts a task that pushes 64 B packets to the connection as fast as its
//! push queue drains, `JoinGroup`, `Broadcast` and `GroupMembers` use the
//! hub (across nodes when the server has a backplane).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context as _, Result};
use bytes::{Buf, Bytes, BytesMut};
use ternio::protocol::Decode;
use ternio::protocol::frame::{self, Flags, Framing, Header, WEBSOCKET_SUBPROTOCOL};
use ternio::{
    ConnectionHandle, Context, Hub, Identity, Packet, Server, ServerHandle, packet_controller,
};
use ternio_client::Client;
use ternio_redis::RedisBackplane;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::participants::{Endpoint, Listen, Participant, raw_ws};

/// Times a push task found its connection's outbox above the high
/// water mark (it then waits for the connection to take frames).
pub static PUSH_BACKOFFS: AtomicU64 = AtomicU64::new(0);

/// Opcode 0x0001: answered with the same payload.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0001, response = Echo)]
pub struct Echo {
    /// The bytes to echo.
    pub payload: Bytes,
}

/// Opcode 0x0002: the same, for encrypted requests only.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0002, response = SecureEcho)]
pub struct SecureEcho {
    /// The bytes to echo.
    pub payload: Bytes,
}

/// Opcode 0x0010: starts pushing `Pushed` packets of `size` bytes to this
/// connection until it closes. Answered with an acknowledgement.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0010, response = ())]
pub struct StartPush {
    /// Payload bytes of each pushed packet.
    pub size: u32,
}

/// Opcode 0x0011: what the server pushes (and broadcasts).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0011)]
pub struct Pushed {
    /// The pushed bytes.
    pub payload: Bytes,
}

/// Opcode 0x0020: puts this connection in `group`. Acknowledged.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0020, response = ())]
pub struct JoinGroup {
    /// The group's name.
    pub group: String,
}

/// Opcode 0x0021: pushes `payload` to every member of `group`.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0021, response = BroadcastReply)]
pub struct Broadcast {
    /// The group's name.
    pub group: String,
    /// The bytes each member receives in a `Pushed`.
    pub payload: Bytes,
}

/// The answer to `Broadcast`: how many members it reached.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0022)]
pub struct BroadcastReply {
    /// Members whose queue took the frame.
    pub queued: u32,
    /// Members that missed it.
    pub missed: u32,
}

/// Opcode 0x0023: how many members `group` has on every node of the
/// cluster (`Hub::cluster_members`; this node's alone without a backplane).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0023, response = GroupMembersReply)]
pub struct GroupMembers {
    /// The group's name.
    pub group: String,
}

/// The answer to `GroupMembers`.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0024)]
pub struct GroupMembersReply {
    /// Members on every node; 0 when the backplane could not say.
    pub members: u32,
}

/// The benchmark's handlers.
#[derive(Default)]
pub struct BenchController;

#[packet_controller(explicit)]
impl BenchController {
    fn echo(request: Echo) -> Echo {
        request
    }

    #[handler(encrypted)]
    fn secure_echo(request: SecureEcho) -> SecureEcho {
        request
    }

    fn start_push(request: StartPush, ctx: &Context) {
        let packet = Pushed {
            payload: Bytes::from(vec![0xA5; request.size as usize]),
        };
        tokio::spawn(push_until_closed(ctx.connection(), packet));
    }

    fn join_group(request: JoinGroup, ctx: &Context) {
        ctx.hub().join(&request.group, ctx.connection_id());
    }

    fn broadcast(request: Broadcast, ctx: &Context) -> BroadcastReply {
        let packet = Pushed {
            payload: request.payload,
        };
        match ctx.hub().broadcast_group(&request.group, &packet) {
            Ok(delivery) => BroadcastReply {
                queued: delivery.queued as u32,
                missed: (delivery.dropped + delivery.failed) as u32,
            },
            Err(_) => BroadcastReply {
                queued: 0,
                missed: u32::MAX,
            },
        }
    }

    async fn group_members(request: GroupMembers, hub: Hub) -> GroupMembersReply {
        let members = hub
            .cluster_members(&request.group)
            .await
            .map_or(0, |ids| ids.len() as u32);
        GroupMembersReply { members }
    }
}

/// Bytes of pushes that may wait in a connection's outbox before the
/// push task backs off: half the server's default queue limit (1 MiB), whose
/// overflow would disconnect the connection as a slow consumer.
const PUSH_HIGH_WATER: usize = 512 * 1024;

/// Pushes `packet` to `connection` until it closes, keeping its outbox
/// queue under [`PUSH_HIGH_WATER`]: above it, the task waits until the
/// connection has taken frames (`ConnectionHandle::queue_below`).
async fn push_until_closed(connection: ConnectionHandle, packet: Pushed) {
    let mut since_yield = 0u32;
    loop {
        if connection.queued_bytes() >= PUSH_HIGH_WATER {
            PUSH_BACKOFFS.fetch_add(1, Ordering::Relaxed);
            if connection.queue_below(PUSH_HIGH_WATER).await.is_err() {
                return;
            }
            continue;
        }
        if connection.push(&packet).is_err() {
            return;
        }
        since_yield += 1;
        if since_yield == 64 {
            since_yield = 0;
            tokio::task::yield_now().await;
        }
    }
}

/// A running Ternio server child: where it listens, its public key, and a
/// handle for its connection count.
pub struct Running {
    /// The listening address.
    pub addr: SocketAddr,
    /// The identity's public key, in hex.
    pub public_key: String,
    /// The server's handle.
    pub handle: ServerHandle,
}

/// Builds and starts (on the current runtime) `participant`'s server with
/// default settings plus an identity, on 127.0.0.1 with a free port; with
/// `backplane`, as one node of a cluster. Loopback is exempt from the per-IP
/// limits: every bench client comes from 127.0.0.1 (10,000 in the crowd).
pub fn start(participant: Participant, backplane: Option<RedisBackplane>) -> Result<Running> {
    start_on(participant, backplane, Listen::FREE)
}

/// [`start`], listening at `listen` (a given port, shared with
/// `SO_REUSEPORT` by the child's other servers if it says so).
pub fn start_on(
    participant: Participant,
    backplane: Option<RedisBackplane>,
    listen: Listen,
) -> Result<Running> {
    let identity = Identity::generate();
    let public_key = identity.public_hex();
    let mut builder = Server::builder()
        .discover_controllers(false)
        .controller(BenchController)
        .identity(identity)
        .exempt_loopback(true)
        .reuse_port(listen.reuse_port);
    if let Some(backplane) = backplane {
        builder = builder.backplane(backplane);
    }
    if participant == Participant::TernioTcpResume {
        builder = builder.resumable(std::time::Duration::from_secs(30), 64 * 1024);
    }
    let websocket = matches!(
        participant,
        Participant::TernioWs | Participant::TernioWsAead | Participant::TernioWsLean
    );
    let server = if websocket {
        builder.map_websocket(listen.addr, "/ws").build()?
    } else {
        builder.map_tcp(listen.addr).build()?
    };
    let addr = if websocket {
        server.websocket_addrs()[0]
    } else {
        server.tcp_addrs()[0]
    };
    let handle = server.handle();
    tokio::spawn(server.run());
    Ok(Running {
        addr,
        public_key,
        handle,
    })
}

/// A `ternio-client` connection doing echoes (sealed ones after an NK
/// handshake for the AEAD participants).
pub struct EchoClient {
    client: Client,
    sealed: bool,
}

impl EchoClient {
    /// Connects over the participant's transport, and for the AEAD ones
    /// runs the NK handshake against the server's public key.
    pub async fn connect(participant: Participant, endpoint: &Endpoint) -> Result<Self> {
        let client = connect_client(participant, endpoint.addr).await?;
        let sealed = participant.is_sealed();
        if sealed {
            handshake(&client, endpoint).await?;
        }
        Ok(Self { client, sealed })
    }

    /// Sends one echo request and returns the echoed payload.
    pub async fn echo(&mut self, payload: &Bytes) -> Result<Bytes> {
        if self.sealed {
            let request = SecureEcho {
                payload: payload.clone(),
            };
            let reply: SecureEcho = self.client.request_async(&request).await?;
            Ok(reply.payload)
        } else {
            let request = Echo {
                payload: payload.clone(),
            };
            let reply: Echo = self.client.request_async(&request).await?;
            Ok(reply.payload)
        }
    }

    /// Closes the client (`DISCONNECT NORMAL`).
    pub async fn close(self) {
        self.client.close().await;
    }
}

/// Connects `ternio-client` over TCP or WebSocket, as `participant` does.
pub async fn connect_client(participant: Participant, addr: SocketAddr) -> Result<Client> {
    Ok(match participant {
        Participant::TernioWs | Participant::TernioWsAead => {
            Client::connect_ws(&format!("ws://{addr}/ws")).await?
        }
        // A reconnect policy: the client asks for a ticket, and both sides
        // keep and acknowledge what they send.
        Participant::TernioTcpResume => {
            Client::builder()
                .tcp(addr.to_string())
                .reconnect(ternio_client::ReconnectPolicy::default())
                .connect()
                .await?
        }
        _ => Client::connect_tcp(addr).await?,
    })
}

/// Runs the NK handshake, pinning the key the server child printed.
async fn handshake(client: &Client, endpoint: &Endpoint) -> Result<()> {
    let key = endpoint
        .public_key
        .context("the server child did not give its public key")?;
    client.handshake(Some(&key)).await?;
    if !client.is_secure() {
        anyhow::bail!("the handshake completed but the session is not secure");
    }
    Ok(())
}

/// A TCP frame (length prefix included) holding `packet` as a request
/// with id `request_id`, for clients that speak the protocol on a raw socket.
pub fn request_frame<P: Packet>(packet: &P, request_id: u32) -> Vec<u8> {
    let mut out = BytesMut::new();
    frame::write_frame(
        &mut out,
        Framing::LengthPrefixed,
        Header::new(P::OPCODE, Flags::NONE, request_id),
        packet,
        usize::MAX,
    )
    .expect("a small request always encodes");
    out.to_vec()
}

/// A hand-written client of Ternio's echo, written like the raw baselines'
/// clients (one task, one write and one read per call): it drives Ternio's
/// server without the SDK, to split the server's cost from the client's.
/// Over WebSocket it is raw-ws's own client ([`raw_ws::EchoClient`]), so
/// `ternio-ws-lean` and `raw-ws` differ by their servers alone.
pub enum LeanClient {
    /// Length-prefixed frames on a TCP stream.
    Tcp {
        /// The connection.
        stream: TcpStream,
        /// The request being encoded.
        output: BytesMut,
        /// What has arrived.
        input: BytesMut,
        /// The last request id.
        id: u32,
    },
    /// One frame per binary WebSocket message.
    Ws {
        /// raw-ws's client, offering Ternio's subprotocol.
        client: Box<raw_ws::EchoClient>,
        /// Where requests are encoded: each is split off as the message
        /// sent, and its room taken back once tungstenite has written it
        /// (no allocation per request).
        output: BytesMut,
        /// The last request id.
        id: u32,
    },
}

impl LeanClient {
    /// Connects over the participant's transport (WebSocket with `ternio.v2`).
    pub async fn connect(participant: Participant, addr: SocketAddr) -> Result<Self> {
        if participant == Participant::TernioWsLean {
            let client = raw_ws::EchoClient::connect(addr, Some(WEBSOCKET_SUBPROTOCOL)).await?;
            return Ok(LeanClient::Ws {
                client: Box::new(client),
                output: BytesMut::with_capacity(8 * 1024),
                id: 0,
            });
        }
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(LeanClient::Tcp {
            stream,
            output: BytesMut::with_capacity(8 * 1024),
            input: BytesMut::with_capacity(8 * 1024),
            id: 0,
        })
    }

    /// One echo request; returns the echoed payload.
    pub async fn echo(&mut self, payload: &Bytes) -> Result<Bytes> {
        let request = Echo {
            payload: payload.clone(),
        };
        match self {
            LeanClient::Tcp {
                stream,
                output,
                input,
                id,
            } => {
                *id = id.wrapping_add(1).max(1);
                output.clear();
                frame::write_frame(
                    output,
                    Framing::LengthPrefixed,
                    Header::new(Echo::OPCODE, Flags::NONE, *id),
                    &request,
                    usize::MAX,
                )?;
                stream.write_all(output).await?;
                loop {
                    if input.len() >= 4 {
                        let len =
                            u32::from_le_bytes([input[0], input[1], input[2], input[3]]) as usize;
                        if input.len() >= 4 + len {
                            input.advance(4);
                            let frame = input.split_to(len).freeze();
                            return answer(&frame, *id);
                        }
                    }
                    if stream.read_buf(input).await? == 0 {
                        anyhow::bail!("the server closed the connection");
                    }
                }
            }
            LeanClient::Ws { client, output, id } => {
                *id = id.wrapping_add(1).max(1);
                frame::write_frame(
                    output,
                    Framing::Message,
                    Header::new(Echo::OPCODE, Flags::NONE, *id),
                    &request,
                    usize::MAX,
                )?;
                let message = output.split().freeze();
                let frame = client.echo(&message).await?;
                drop(message);
                answer(&frame, *id)
            }
        }
    }

    /// Closes the connection as raw-ws's client does (the WebSocket close
    /// handshake); a TCP one is dropped, as raw-tcp's is.
    pub async fn close(self) {
        if let LeanClient::Ws { client, .. } = self {
            client.close().await;
        }
    }
}

/// The payload of the echo response `frame` (header and body) to request `id`.
fn answer(frame: &Bytes, id: u32) -> Result<Bytes> {
    let header = Header::parse(frame)?;
    if !header.flags.is_response() || header.flags.is_error() || header.request_id != id {
        anyhow::bail!("unexpected answer {header:?}");
    }
    Ok(Echo::decode_body(&frame.slice(7..))?.payload)
}
