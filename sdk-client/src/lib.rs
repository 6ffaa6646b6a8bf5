//! The Ternio client SDK.
//!
//! Connect, then call the server's handlers with typed requests:
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

mod client;
mod config;
mod connection;
mod error;

pub use ternio_protocol as protocol;
pub use ternio_protocol::{Bytes, DisconnectReason, ErrorCode, Packet, Response};

pub use ternio_macros::{Codec, Packet};

pub use client::Client;
pub use config::ClientConfig;
pub use error::{ClientError, CloseReason};
