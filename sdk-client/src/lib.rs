//! The Ternio client SDK.
//!
//! Connect over TCP or WebSocket, then call the server's handlers with
//! typed requests:
//!
//! ```no_run
//! use ternio_client::{Bytes, Client, Packet};
//!
//! #[derive(Packet)]
//! #[packet(opcode = 0x0001)]
//! struct Echo {
//!     payload: Bytes,
//! }
//!
//! # async fn run() -> Result<(), ternio_client::ClientError> {
//! let client = Client::connect_tcp("127.0.0.1:7001").await?;
//! // or: Client::connect_ws("ws://127.0.0.1:7002/ws").await?
//! let reply: Echo = client.request_async(&Echo { payload: Bytes::from_static(b"hi") }).await?;
//! assert_eq!(&reply.payload[..], b"hi");
//! println!("round trip: {:?}", client.ping().await?);
//! # Ok(())
//! # }
//! ```
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
//! use ternio_client::{Client, ClientConfig, ConnectionState, ReconnectPolicy};
//!
//! # async fn run() -> Result<(), ternio_client::ClientError> {
//! let config = ClientConfig {
//!     reconnect: Some(ReconnectPolicy::default()),
//!     ..ClientConfig::default()
//! };
//! let client = Client::connect_tcp_with("127.0.0.1:7001", config).await?;
//! let mut states = client.state_changes();
//! while states.changed().await.is_ok() {
//!     match &*states.borrow() {
//!         ConnectionState::Connected => println!("connected"),
//!         ConnectionState::Reconnecting { attempt } => println!("reconnecting ({attempt})"),
//!         ConnectionState::Closed(reason) => println!("closed: {reason}"),
//!     }
//! }
//! # Ok(())
//! # }
//! ```

mod client;
mod config;
mod error;
mod link;
mod reconnect;
mod shared;
mod state;
mod supervisor;
mod tasks;
mod tcp;
mod ws;

pub use ternio_protocol as protocol;
pub use ternio_protocol::{Bytes, DisconnectReason, ErrorCode, Packet, Response};

pub use ternio_macros::{Codec, Packet};

pub use client::Client;
pub use config::ClientConfig;
pub use error::{ClientError, CloseReason};
pub use reconnect::ReconnectPolicy;
pub use state::ConnectionState;
