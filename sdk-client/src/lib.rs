//! The Ternio client SDK.
//!
//! Connect over TCP or WebSocket (or any byte stream a [`Connector`] opens:
//! [`Client::connect_stream`]), then call the server's handlers with typed
//! requests:
//!
//! ```no_run
//! use ternio_client::{Bytes, Client, Packet};
//!
//! #[derive(Packet)]
//! #[packet(opcode = 0x0001, response = Echo)]
//! struct Echo {
//!     payload: Bytes,
//! }
//!
//! # async fn run() -> Result<(), ternio_client::ClientError> {
//! let client = Client::connect_tcp("127.0.0.1:7001").await?;
//! // or: Client::connect_ws("ws://127.0.0.1:7002/ws").await?
//! let reply = client.request_async(&Echo { payload: Bytes::from_static(b"hi") }).await?;
//! assert_eq!(&reply.payload[..], b"hi");
//! println!("round trip: {:?}", client.ping().await?);
//! # Ok(())
//! # }
//! ```
//!
//! With the `tls` feature (on by default), [`Client::connect_tls`] carries
//! the frames inside TLS, and [`Client::connect_ws`] takes `wss://` URLs;
//! `ClientTls` says which certificates are trusted (the system's roots, or
//! a given CA).
//!
//! With the `serde` feature (off by default), [`ClientConfig`] (with
//! [`ReconnectPolicy`], [`Keepalive`] and [`SecureConfig`]) is read from a
//! settings file: every key optional, unknown keys refused, durations
//! written `"30s"`, `"off"` for what can be off. Every key and its
//! default: `docs/CONFIGURATION.md`.
//!
//! One connection carries any number of requests at once (up to
//! [`ClientConfig::max_in_flight`]); their responses may come back in any
//! order. When the connection closes, every pending request fails at once
//! with [`ClientError::Closed`].
//!
//! With [`ClientConfig::reconnect`] set to a [`ReconnectPolicy`], a lost
//! connection is re-established in the background, and requests issued
//! meanwhile wait for it:
//!
//! ```no_run
//! use ternio_client::{Client, ConnectionState, ReconnectPolicy};
//!
//! # async fn run() -> Result<(), ternio_client::ClientError> {
//! let client = Client::builder()
//!     .tcp("127.0.0.1:7001")
//!     .reconnect(ReconnectPolicy::default())
//!     .connect()
//!     .await?;
//! let mut states = client.state_changes();
//! while states.changed().await.is_ok() {
//!     match &*states.borrow() {
//!         ConnectionState::Connected => println!("connected"),
//!         ConnectionState::Reconnecting { attempt } => println!("reconnecting ({attempt})"),
//!         ConnectionState::Closed(reason) => println!("closed: {reason}"),
//!         // `ConnectionState` is non-exhaustive: later versions add states.
//!         _ => {}
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! The policy's delays grow across connections that do not last (a server
//! that accepts and then refuses is not retried at once, again and again),
//! are spread at random ("full jitter"), and wait longer after the server
//! said it is full or shutting down: see [`ReconnectPolicy`].
//!
//! Two bounds apply to every connection, by default. A [`Keepalive`]
//! sends a `PING` when the server has been silent for a while, and
//! declares the connection lost ([`CloseReason::KeepaliveTimeout`]) when
//! nothing comes back: a server that vanished without closing the
//! connection is noticed. And the bytes waiting to be written are bounded
//! ([`ClientConfig::max_outbound`]): a server that stops reading costs the
//! client at most that much, then the connection is lost
//! ([`CloseReason::OutboundFull`]). Either loss reconnects under the policy.
//!
//! ## Secure sessions
//!
//! [`Client::handshake`] runs the Noise handshake of contract section 5:
//! `NK` when it is given the server's public key (pin it: only that server
//! can complete it), `NN` without (anonymous: it stops a passive
//! eavesdropper, not an active man in the middle). Afterwards every frame in
//! both directions is sealed (contract v2), system frames included, with
//! exact counters and periodic rekeying: a frame that fails the checks, or
//! comes plain, closes the connection with [`CloseReason::DecryptFailed`]
//! (and the reconnect policy applies). Once a secure session was asked for,
//! nothing goes out plain: if a handshake fails, requests fail with
//! [`ClientError::NotSecure`]. [`ClientConfig::secure`] runs the
//! handshake as part of connecting, and with a reconnect policy a secure
//! session is set up again on every new connection before requests flow:
//!
//! ```no_run
//! use ternio_client::{Client, ClientError};
//! use ternio_client::protocol::secure::key_from_hex;
//!
//! # async fn run() -> Result<(), ClientError> {
//! let key = key_from_hex("8f40c5adb68f25624ae5b214ea767a6ec94d829d3d7b5e1ad1ba6f3e2138285f")
//!     .expect("64 hex digits");
//! // Either after connecting...
//! let client = Client::connect_tcp("127.0.0.1:7001").await?;
//! match client.handshake(Some(&key)).await {
//!     Ok(()) => {}
//!     Err(ClientError::KeyRejected(message)) => eprintln!("not the server we know: {message}"),
//!     Err(other) => return Err(other),
//! }
//! // ...or as part of connecting.
//! let client = Client::builder()
//!     .websocket("ws://127.0.0.1:7002/ws")
//!     .pin(key) // SecureConfig::pinned(key) in ClientConfig::secure
//!     .connect()
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! ## Pushes
//!
//! The server's pushes arrive through [`Client::subscribe`] (a
//! [`Subscription`], which is a `Stream`) or [`Client::on`] (a callback).
//! Subscriptions belong to the client, so they outlive reconnects; pushes
//! nobody subscribed to are counted ([`Client::unhandled_pushes`]) and
//! dropped.
//!
//! ```no_run
//! use ternio_client::{Client, Packet};
//!
//! #[derive(Debug, Packet)]
//! #[packet(opcode = 0x0112)]
//! struct ChatMessage {
//!     room: String,
//!     nick: String,
//!     text: String,
//! }
//!
//! # async fn run() -> Result<(), ternio_client::ClientError> {
//! let client = Client::connect_tcp("127.0.0.1:7101").await?;
//! let mut messages = client.subscribe::<ChatMessage>();
//! while let Some(message) = messages.next().await {
//!     println!("[{}] {}: {}", message.room, message.nick, message.text);
//! }
//! # Ok(())
//! # }
//! ```

mod builder;
mod client;
mod clock;
mod config;
mod datagrams;
mod endpoint;
mod error;
mod events;
mod handshake;
mod id_table;
mod inbound;
mod item_streams;
mod keepalive;
mod keeper;
mod link;
mod link_streams;
mod links;
mod outbound;
mod push;
mod received;
mod reconnect;
mod requests;
mod resume;
mod resuming;
mod secure;
mod send;
mod shared;
mod socket;
mod state;
mod stream;
mod supervisor;
mod sync;
mod tasks;
mod tcp;
mod time_sync;
#[cfg(feature = "tls")]
mod tls;
#[cfg(test)]
mod wake_count;
mod ws;

pub use ternio_protocol as protocol;
pub use ternio_protocol::{
    AppCode, Bytes, Chunk, DisconnectReason, ErrorCode, Packet, Request, Response, StreamRequest,
    UploadRequest,
};

pub use ternio_macros::{Codec, Packet};

pub use builder::ClientBuilder;
pub use client::Client;
pub use clock::ClockEstimate;
pub use config::{ClientConfig, Keepalive, SecureConfig};
pub use datagrams::{KEEPALIVE as DATAGRAM_KEEPALIVE, Route};
pub use error::{ClientError, CloseReason};
pub use item_streams::{ItemStream, Uploader};
pub use push::{Subscription, SubscriptionGuard};
pub use reconnect::ReconnectPolicy;
pub use state::{ConnectionState, SessionEvent};
pub use stream::Connector;
#[cfg(feature = "tls")]
pub use tls::{ClientTls, TlsConnector};
