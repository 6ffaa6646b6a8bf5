//! Ternio: a realtime server framework.
//!
//! Define packets with `#[derive(Packet)]`, answer them in a
//! `#[packet_controller]`, map a listener, run:
//!
//! ```no_run
//! use ternio::{Bytes, Packet, Server, packet_controller};
//!
//! #[derive(Packet)]
//! #[packet(opcode = 0x0001, response = Echo)]
//! struct Echo {
//!     payload: Bytes,
//! }
//!
//! #[derive(Default)]
//! struct EchoController;
//!
//! #[packet_controller]
//! impl EchoController {
//!     fn echo(request: Echo) -> Echo {
//!         request
//!     }
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let server = Server::builder().map_tcp("127.0.0.1:7001").build()?;
//! server.run().await?;
//! # Ok(())
//! # }
//! ```
//!
//! Controllers register themselves through `inventory`, and explicitly with
//! [`ServerBuilder::controller`]. The wire contract lives in
//! [`protocol`] (the `ternio-protocol` crate), re-exported here.
//!
//! The crate root holds what an application uses: the server and its
//! builder, the [`Context`] and other handler parameters, the [`Hub`] and
//! [`ConnectionHandle`], the errors it meets. [`extract`] says how a
//! handler's parameters are built, and how to write one that may refuse a
//! request or await. Two modules serve other readers: [`middleware`], for code that runs around every request (and
//! the built-in [`Policies`](middleware::Policies) and
//! [`AuditLog`](middleware::AuditLog)), and [`backplane`], for what
//! carries a hub's traffic between the nodes of a cluster. For operators,
//! [`metrics`] lists the metrics the server exports
//! ([`ServerBuilder::metrics`], or `ServerBuilder::prometheus` with the
//! feature `prometheus`): names, labels, histogram buckets.
//!
//! Cargo features (all off by default): `tls`, the TLS listeners
//! (`ServerBuilder::map_tcp_tls`, `map_websocket_tls` for `wss://`, and
//! `TlsConfig`, whose certificate reloads without a restart; rustls with
//! the `ring` provider); `prometheus`, a Prometheus endpoint for the
//! metrics; `serde`, [`ServerConfig`] read from a settings file
//! (`Deserialize` and `Serialize`: every key optional, unknown keys
//! refused, durations written `"30s"`; every key and its default in
//! `docs/CONFIGURATION.md`).

// Lets the macros name this crate `::ternio` from inside it too.
extern crate self as ternio;

mod admission;
pub mod around;
pub mod backplane;
mod binding;
mod build_error;
mod builder;
mod close;
mod config;
mod connection;
mod context;
mod dispatch;
pub mod extract;
mod health;
mod hub;
mod identity;
mod ids;
mod keeper;
pub mod metrics;
pub mod middleware;
mod names;
mod outbox;
mod panics;
mod presence;
mod registry;
mod reply;
pub mod room;
mod server;
mod sessions;
mod shared;
mod signal;
mod store;
mod stream;
mod sync;
pub mod testing;
mod transport;
mod udp;
mod upload;
pub mod users;

pub use ternio_protocol as protocol;
pub use ternio_protocol::{
    AppCode, AppError, Bytes, Chunk, DisconnectReason, ErrorCode, HandlerError, IntoReply, Packet,
    Request, StreamRequest, UploadRequest,
};

pub use ternio_macros::{Codec, Packet, packet_controller};

pub use build_error::BuildError;
pub use builder::ServerBuilder;
pub use close::CloseCause;
pub use config::{ServerConfig, SlowConsumerPolicy};
pub use context::Context;
pub use dispatch::Controller;
pub use extract::{FromContext, FromContextAsync, State, Stored};
pub use hub::{ConnectionHandle, Hub};
pub use identity::Identity;
pub use ids::{ConnectionId, Transport};
pub use middleware::Rejection;
pub use names::ClaimError;
pub use outbox::{Delivery, PushError, Route};
pub use presence::{Member, PresenceChange, PresenceEvent};
pub use server::{Server, ServerHandle, Shutdown};
pub use signal::shutdown_signal;
pub use store::ConnectionStore;
pub use stream::{StreamReply, Upload};
pub use ternio_protocol::secure::RekeyPolicy;
#[cfg(feature = "tls")]
pub use transport::tls::{TlsConfig, TlsError};
pub use users::{InvalidName, UserId};

/// What the code that `#[packet_controller]` generates names; not an API.
#[doc(hidden)]
pub mod __private {
    pub use crate::dispatch::{
        Answers, AnswersOpaque, Controller, ControllerRegistration, Discoverable, HandlerSpec,
        check_reply, checked_opaque_reply,
    };
    pub use crate::extract::{CheckState, extract, extract_async};
    pub use inventory;
}
