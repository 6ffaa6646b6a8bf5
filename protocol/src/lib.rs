//! The Ternio wire contract, version 2, with no I/O.
//!
//! This crate owns every byte that a Ternio server and client exchange:
//!
//! - [`buffers`]: how big a connection's buffers grow (the read size) and
//!   when they give memory back;
//! - [`frame`]: the 7-byte [`Header`], its [`Flags`],
//!   the incremental [`FrameDecoder`] for length-prefixed
//!   streams, and frame encoding;
//! - [`codec`]: the field encoding of section 3 (integers, varint lengths,
//!   strings, zero-copy [`Bytes`], vectors, options, arrays);
//! - [`compression`]: compressed bodies (section 6), LZ4 blocks;
//! - [`prefix`]: the TCP length prefix, for buffers of whole frames;
//! - [`packet`]: the [`Packet`] trait that ties a type to its opcode;
//! - [`schema`]: the description of packets, types and handlers exported
//!   as versioned JSON (docs/SCHEMA.md);
//! - [`system`]: `PING`, `PONG`, `DISCONNECT`, `HANDSHAKE`, `REKEY`,
//!   `CANCEL`, `DEADLINE`, and resumption's `RESUME_TICKET`, `ACK` and
//!   `RESUME`;
//! - [`resume`]: the handshake that resumes a secure session on a new
//!   connection;
//! - [`replay`]: the [`ReplayBuffer`] of frames not yet acknowledged and
//!   the [`AckSchedule`] of frames received, for resumable sessions;
//! - [`error`]: error codes, disconnect reasons and decoding errors;
//! - [`reply`]: how a handler's return value becomes a response frame, and
//!   [`Request`], which pairs a request packet with its response;
//! - `config_format` (feature `serde`): how settings files write durations
//!   (`"30s"`) and settings turned off (`"off"`);
//! - [`websocket`]: counting WebSocket bytes, to know when a WebSocket
//!   library's buffers hold nothing unread.
//!
//! The server (`ternio`) and the client (`ternio-client`) both use it; neither
//! frames or encodes by hand.
//!
//! Features choose the library that seals frames in [`secure`] sessions:
//! `aead-aws-lc` (the default: AWS-LC, a C build) or `aead-rustcrypto`
//! (pure Rust, for wasm32 or a build without a C compiler). One of them is
//! required; with both, AWS-LC is used.

// Lets `#[derive(Packet)]` name this crate as `::ternio_protocol` from inside it.
extern crate self as ternio_protocol;

mod aead;
pub mod buffers;
pub mod codec;
pub mod compression;
#[cfg(feature = "serde")]
pub mod config_format;
pub mod datagram;
pub mod error;
pub mod frame;
pub mod packet;
pub mod prefix;
pub mod replay;
pub mod reply;
pub mod resume;
pub mod schema;
pub mod secure;
pub mod stream;
pub mod system;
pub mod websocket;

pub use bytes::{Bytes, BytesMut};
pub use codec::{Decode, Encode, Reader};
pub use error::{AppCode, DecodeError, DisconnectReason, ErrorCode, FrameError};
pub use frame::{DEFAULT_MAX_FRAME_SIZE, Flags, Frame, FrameDecoder, Framing, HEADER_LEN, Header};
pub use packet::Packet;
pub use replay::{AckDue, AckError, AckSchedule, ReplayBuffer};
pub use reply::{AppError, HandlerError, IntoReply, ReplySink, Request, Response, ResponseError};
pub use resume::{ResumeInitiator, ResumePattern, ResumeResponder, resume_psk};
pub use stream::{Chunk, ItemSource, StreamRequest, UploadRequest};
pub use system::{Ack, Resume, ResumeTicket, Resumed, Ticket, TicketRequest};
