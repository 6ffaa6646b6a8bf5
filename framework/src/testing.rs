//! Handlers under test without a server or a socket.
//!
//! A [`TestServer`] holds what handlers share (the state given with
//! [`state`](TestServer::state), and a hub with its groups); each
//! [`TestConnection`] is one connection of it: it gives a handler its
//! [`Context`] and its other parameters ([`extract`](TestConnection::extract)),
//! and collects what is pushed to it. A handler is an ordinary function (or
//! method) of its controller, called directly:
//!
//! ```
//! use std::sync::atomic::{AtomicU64, Ordering};
//!
//! use ternio::testing::TestServer;
//! use ternio::{Context, Packet, State, packet_controller};
//!
//! #[derive(Packet)]
//! #[packet(opcode = 0x0010, response = Joined)]
//! struct Join { room: String }
//!
//! #[derive(Debug, PartialEq, Packet)]
//! #[packet(opcode = 0x0011)]
//! struct Joined { members: u32 }
//!
//! #[derive(Default)]
//! struct Stats { joins: AtomicU64 }
//!
//! struct Rooms;
//!
//! #[packet_controller(explicit)]
//! impl Rooms {
//!     fn join(request: Join, ctx: &Context, stats: State<Stats>) -> Joined {
//!         stats.joins.fetch_add(1, Ordering::Relaxed);
//!         let hub = ctx.hub();
//!         hub.join(&request.room, ctx.connection_id());
//!         let members = hub.members(&request.room).len() as u32;
//!         let _ = hub.broadcast_group(&request.room, &Joined { members });
//!         Joined { members }
//!     }
//! }
//!
//! let server = TestServer::new().state(Stats::default());
//! let (ann, bob) = (server.connect(), server.connect());
//! let joined = Rooms::join(Join { room: "lobby".into() }, &ann.context(), ann.extract());
//! assert_eq!(joined, Joined { members: 1 });
//! Rooms::join(Join { room: "lobby".into() }, &bob.context(), bob.extract());
//!
//! // What the room heard, in order.
//! assert_eq!(ann.pushes::<Joined>(), [Joined { members: 1 }, Joined { members: 2 }]);
//! assert_eq!(bob.pushes::<Joined>(), [Joined { members: 2 }]);
//! assert_eq!(server.extract::<State<Stats>>().joins.load(Ordering::Relaxed), 2);
//! ```
//!
//! For a test of the whole path (middleware, policies, the wire) without a
//! port, a server with no listener serves in-memory pipes
//! ([`ServerHandle::connect_in_memory`](crate::ServerHandle::connect_in_memory)),
//! which the client's `Client::connect_stream` opens, one per connection
//! (a reconnect gets a new one):
//!
//! ```
//! use ternio::{Bytes, Packet, Server, packet_controller};
//! use ternio_client::Client;
//!
//! #[derive(Packet)]
//! #[packet(opcode = 0x0001, response = Echo)]
//! struct Echo { payload: Bytes }
//!
//! struct EchoController;
//!
//! #[packet_controller(explicit)]
//! impl EchoController {
//!     fn echo(request: Echo) -> Echo { request }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let server = Server::builder()
//!     .discover_controllers(false) // only this test's controller
//!     .controller(EchoController)
//!     .build()
//!     .unwrap();
//! let handle = server.handle();
//! tokio::spawn(server.run());
//!
//! let client = Client::connect_stream(move || {
//!     let pipe = handle.connect_in_memory();
//!     async move { Ok(pipe) }
//! })
//! .await
//! .unwrap();
//! let reply: Echo = client.request_async(&Echo { payload: Bytes::from_static(b"hi") }).await.unwrap();
//! assert_eq!(&reply.payload[..], b"hi");
//! # }
//! ```

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use ternio_protocol::frame::{self, DEFAULT_MAX_FRAME_SIZE, Header};
use ternio_protocol::{Bytes, DisconnectReason, Frame, Packet};

use crate::config::ServerConfig;
use crate::context::Context;
use crate::extract::{FromContext, FromContextAsync};
use crate::hub::{ConnectionHandle, Hub};
use crate::ids::{ConnectionId, Transport};
use crate::middleware::Rejection;
use crate::outbox::Outbox;
use crate::registry::{ConnectionShared, HubShared, LinkAddress};
use crate::store::{AppState, ConnectionStore};

/// What the handlers of a test share: state, and a hub of the test's
/// connections. See the [module](self) for an example.
pub struct TestServer {
    state: Arc<AppState>,
    hub: Arc<HubShared>,
    next_id: AtomicU64,
    config: ServerConfig,
}

impl Default for TestServer {
    fn default() -> Self {
        Self::new()
    }
}

impl TestServer {
    /// A server with no state and no connections, with the default limits
    /// of [`ServerConfig`] (frame size, outbox).
    pub fn new() -> Self {
        Self {
            state: Arc::default(),
            hub: HubShared::new(DEFAULT_MAX_FRAME_SIZE, None, None, None),
            next_id: AtomicU64::new(1),
            config: ServerConfig::default(),
        }
    }

    /// Adds shared state, as [`ServerBuilder::state`](crate::ServerBuilder::state)
    /// does: handlers take it as `State<T>`.
    ///
    /// # Panics
    ///
    /// After the first [`connect`](Self::connect): the connections share
    /// the state as it was.
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        Arc::get_mut(&mut self.state)
            .expect("TestServer::state comes before the first connect")
            .insert(Arc::new(value));
        self
    }

    /// A new connection (over TCP, from 127.0.0.1, permission 0), in the
    /// hub until it is dropped.
    pub fn connect(&self) -> TestConnection {
        let id = ConnectionId(self.next_id.fetch_add(1, Ordering::Relaxed));
        let shared = Arc::new(ConnectionShared {
            id,
            link: LinkAddress::new(
                SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
                Transport::Tcp,
            ),
            outbox: Outbox::new(self.config.max_outbox_bytes, self.config.slow_consumer),
            state: Arc::clone(&self.state),
            hub: Arc::clone(&self.hub),
            permission: AtomicU32::new(0),
            store: ConnectionStore::default(),
            rate_limiters: Default::default(),
            groups: Default::default(),
            user: Default::default(),
            names: Default::default(),
            datagrams: Default::default(),
        });
        self.hub.insert(Arc::clone(&shared), |_| {});
        TestConnection {
            shared,
            next_request: AtomicU32::new(1),
        }
    }

    /// The hub of the test's connections.
    pub fn hub(&self) -> Hub {
        Hub::new(Arc::clone(&self.hub))
    }

    /// A handler parameter that needs no connection, such as `State<T>` or
    /// `Hub`, to look at after the handler ran.
    ///
    /// # Panics
    ///
    /// When it needs a connection (`Stored<T>`, `Context`): use
    /// [`TestConnection::extract`].
    pub fn extract<E: FromContext>(&self) -> E {
        let connection = self.connect();
        connection.extract()
    }
}

impl fmt::Debug for TestServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestServer")
            .field("connections", &self.hub.len())
            .finish_non_exhaustive()
    }
}

/// One connection of a [`TestServer`]: the [`Context`] of its requests,
/// its handle, and the frames pushed to it. Leaves the hub (and its
/// groups) when dropped.
pub struct TestConnection {
    shared: Arc<ConnectionShared>,
    next_request: AtomicU32,
}

impl TestConnection {
    /// The context of a new request on this connection (request ids count
    /// up from 1; the opcode is 0).
    pub fn context(&self) -> Context {
        let id = self.next_request.fetch_add(1, Ordering::Relaxed);
        Context::new(
            Arc::clone(&self.shared),
            Header::new(0, frame::Flags::NONE, id),
        )
    }

    /// A handler parameter for a request on this connection, as the server
    /// builds it: `State<T>`, `Stored<T>`, `Hub`, `ConnectionHandle`,
    /// `Context`, or the application's own [`FromContext`] types. To see
    /// a refusal, extract `Result<E, E::Rejection>` (or `Option<E>`).
    ///
    /// # Panics
    ///
    /// When `E` refuses the request (its rejection is in the message), as
    /// `State<T>` does for a `T` never given to [`TestServer::state`].
    pub fn extract<E: FromContext>(&self) -> E {
        E::from_context(&self.context()).unwrap_or_else(|rejection| refused::<E>(rejection.into()))
    }

    /// [`extract`](Self::extract) for a parameter of an `async` handler
    /// (a [`FromContextAsync`] type).
    ///
    /// # Panics
    ///
    /// When `E` refuses the request.
    pub async fn extract_async<E: FromContextAsync<M>, M>(&self) -> E {
        E::from_context_async(&self.context())
            .await
            .unwrap_or_else(|rejection| refused::<E>(rejection.into()))
    }

    /// The connection's handle (id, permission, store, groups, pushes).
    pub fn handle(&self) -> ConnectionHandle {
        ConnectionHandle::new(Arc::clone(&self.shared))
    }

    /// Takes every frame pushed to this connection so far, oldest first.
    pub fn frames(&self) -> Vec<Frame> {
        let mut frames = Vec::new();
        self.shared.outbox.take_frames(|bytes| {
            let header = Header::parse(bytes).expect("pushes carry a whole header");
            let body = Bytes::copy_from_slice(&bytes[frame::HEADER_LEN..]);
            frames.push(Frame { header, body });
            true
        });
        frames
    }

    /// Takes every frame pushed to this connection so far and decodes those
    /// of `P`, oldest first; frames of other opcodes are dropped.
    ///
    /// # Panics
    ///
    /// When a frame with `P`'s opcode does not decode as `P`.
    pub fn pushes<P: Packet>(&self) -> Vec<P> {
        self.frames()
            .into_iter()
            .filter(|frame| frame.header.opcode == P::OPCODE)
            .map(|frame| {
                P::decode_packet(&frame.body).unwrap_or_else(|error| {
                    panic!("a push of {} that does not decode: {error}", P::NAME)
                })
            })
            .collect()
    }

    /// How the connection was told to close (a kick, a slow consumer), if
    /// it was: the reason its `DISCONNECT` would carry, and the text.
    pub fn closed(&self) -> Option<(DisconnectReason, String)> {
        let order = self.shared.outbox.take_close()?;
        let notice = order.notice;
        // Kept for the next look: a close order stands.
        let seen = (notice.reason, notice.message.clone());
        self.shared.outbox.close(notice, order.graceful);
        Some(seen)
    }
}

/// The panic of an `extract` whose extractor refused.
fn refused<E>(rejection: Rejection) -> ! {
    panic!(
        "{} refused the request: {} ({})",
        std::any::type_name::<E>(),
        rejection.message,
        rejection.code
    )
}

impl Drop for TestConnection {
    fn drop(&mut self) {
        self.shared.hub.remove(self.shared.id);
    }
}

impl fmt::Debug for TestConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestConnection")
            .field("id", &self.shared.id)
            .field("queued_bytes", &self.shared.outbox.queued_bytes())
            .finish_non_exhaustive()
    }
}
