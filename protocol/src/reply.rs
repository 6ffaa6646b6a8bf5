//! How a handler's return value becomes the answer to a request (section 2):
//! a packet, an acknowledgement for `()`, or an error for `Err`; and
//! [`Request`], the response type a request packet declares.

use std::fmt;

use bytes::Bytes;

use crate::error::{DecodeError, ErrorCode};
use crate::packet::Packet;

/// Where a reply is written: the server writes it as a frame straight into
/// the connection's outbound buffer, or keeps it for later.
pub trait ReplySink {
    /// What writing the reply yields.
    type Output;
    /// The reply is `packet`, with its own opcode.
    fn packet<P: Packet>(self, packet: &P) -> Self::Output;
    /// The reply is an acknowledgement: an empty body with the request's opcode.
    fn ack(self) -> Self::Output;
    /// The reply is an error with `code` and `message`.
    fn error(self, code: u16, message: &dyn fmt::Display) -> Self::Output;
    /// The reply is a stream of items (docs/PROTOCOL.md section 4.5),
    /// ended by an acknowledgement or an error. A sink that cannot stream
    /// answers `INTERNAL`.
    fn stream(self, items: Box<dyn crate::stream::ItemSource>) -> Self::Output
    where
        Self: Sized,
    {
        drop(items);
        self.error(
            ErrorCode::Internal.to_u16(),
            &"a stream reply cannot be sent here",
        )
    }
}

/// A value a handler may return: a packet, `()`, or `Result<T, E>` where
/// `T` is one of those and `E` an [`AppError`].
#[diagnostic::on_unimplemented(
    message = "a handler cannot return `{Self}`",
    label = "not a packet, `()`, or `Result<_, E>` with `E: AppError`",
    note = "return a #[derive(Packet)] type, `()`, or `Result<T, E>` where `E` implements `ternio::AppError`"
)]
pub trait IntoReply {
    /// What the requester reads back: the packet itself for a packet, `()`
    /// (an acknowledgement) for `()`, and `T`'s for `Result<T, E>`.
    type Response: Response;
    /// Writes the reply into `sink`.
    fn into_reply<S: ReplySink>(self, sink: S) -> S::Output;

    /// For a stream reply, the type of its items for the schema
    /// (docs/SCHEMA.md), added to `schema`; `None` for any other reply.
    fn describe_stream(
        schema: &mut crate::schema::SchemaBuilder,
    ) -> Option<crate::schema::TypeRef> {
        let _ = schema;
        None
    }
}

impl<P: Packet> IntoReply for P {
    type Response = P;
    fn into_reply<S: ReplySink>(self, sink: S) -> S::Output {
        sink.packet(&self)
    }
}

impl IntoReply for () {
    type Response = ();
    fn into_reply<S: ReplySink>(self, sink: S) -> S::Output {
        sink.ack()
    }
}

impl<T: IntoReply, E: AppError> IntoReply for Result<T, E> {
    type Response = T::Response;
    fn describe_stream(
        schema: &mut crate::schema::SchemaBuilder,
    ) -> Option<crate::schema::TypeRef> {
        T::describe_stream(schema)
    }
    fn into_reply<S: ReplySink>(self, sink: S) -> S::Output {
        match self {
            Ok(value) => value.into_reply(sink),
            Err(error) => sink.error(error.code().to_u16(), &error),
        }
    }
}

/// An error a handler returns: its code and, through `Display`, its message.
///
/// The code is the application's own ([`AppCode`](crate::AppCode), 100 and above), or one
/// of the contract's on purpose (say [`ErrorCode::Unauthorized`]); the
/// server sends [`ErrorCode::Unassigned`] codes (0, 11 to 99) as
/// `INTERNAL`.
pub trait AppError: fmt::Display {
    /// The error code sent to the client.
    fn code(&self) -> ErrorCode;
}

/// A ready-made [`AppError`]: a code and a message.
///
/// ```
/// use ternio_protocol::{AppCode, ErrorCode, HandlerError};
///
/// const ROOM_FULL: AppCode = AppCode::new(100);
/// let full = HandlerError::new(ROOM_FULL, "the room is full");
/// let refused = HandlerError::new(ErrorCode::Unauthorized, "log in first");
/// # assert_eq!(full.code, ROOM_FULL);
/// # assert_eq!(refused.code, ErrorCode::Unauthorized);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerError {
    /// The error code.
    pub code: ErrorCode,
    /// The message.
    pub message: String,
}

impl HandlerError {
    /// An error with `code` (an [`AppCode`](crate::AppCode), or one of the contract's
    /// [`ErrorCode`]s) and `message`.
    pub fn new(code: impl Into<ErrorCode>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for HandlerError {}

impl AppError for HandlerError {
    fn code(&self) -> ErrorCode {
        self.code
    }
}

/// A value a requester expects back: a packet, or `()` for an
/// acknowledgement (an empty body with the request's opcode).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a response",
    label = "not a #[derive(Packet)] type or `()`",
    note = "a response is the packet a handler answers with, or `()` for an acknowledgement"
)]
pub trait Response: Sized {
    /// Reads the value from a successful `RESPONSE` frame.
    fn from_response(opcode: u16, body: &Bytes, request_opcode: u16)
    -> Result<Self, ResponseError>;

    /// Describes the response for the schema, adding a packet to `schema`.
    fn describe_response(schema: &mut crate::schema::SchemaBuilder) -> crate::schema::ResponseRef {
        let _ = schema;
        crate::schema::ResponseRef::Opaque(std::any::type_name::<Self>())
    }
}

impl<P: Packet> Response for P {
    fn describe_response(schema: &mut crate::schema::SchemaBuilder) -> crate::schema::ResponseRef {
        crate::schema::ResponseRef::Named(schema.packet::<P>())
    }

    fn from_response(
        opcode: u16,
        body: &Bytes,
        _request_opcode: u16,
    ) -> Result<Self, ResponseError> {
        if opcode != P::OPCODE {
            return Err(ResponseError::UnexpectedOpcode {
                expected: P::OPCODE,
                got: opcode,
            });
        }
        Ok(P::decode_packet(body)?)
    }
}

impl Response for () {
    fn describe_response(_: &mut crate::schema::SchemaBuilder) -> crate::schema::ResponseRef {
        crate::schema::ResponseRef::Acknowledgement
    }

    fn from_response(
        opcode: u16,
        body: &Bytes,
        request_opcode: u16,
    ) -> Result<Self, ResponseError> {
        if opcode != request_opcode {
            return Err(ResponseError::UnexpectedOpcode {
                expected: request_opcode,
                got: opcode,
            });
        }
        if !body.is_empty() {
            return Err(ResponseError::Decode(DecodeError::TrailingBytes(
                body.len(),
            )));
        }
        Ok(())
    }
}

/// A packet sent as a request, with the type its handler answers with:
/// `#[packet(opcode = 0x0010, response = Sum)]` declares `Sum`, and
/// `response = ()` an acknowledgement.
///
/// The client's `request_async` returns `Self::Response`, and
/// `#[packet_controller]` checks that the packet's handler returns it (as
/// is, or as the `T` of a `Result<T, E>`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` declares no response",
    label = "`{Self}` has no `response = ...` in its #[packet(...)]",
    note = "declare what its handler answers with: #[packet(opcode = 0x...., response = MyReply)], \
            or `response = ()` for an acknowledgement"
)]
pub trait Request: Packet {
    /// What the handler answers with: a packet, or `()` for an
    /// acknowledgement.
    type Response: Response;

    /// Describes [`Response`](Self::Response) for the schema (what
    /// [`Packet::describe_response`] of a derived request calls).
    #[doc(hidden)]
    fn describe_declared_response(
        schema: &mut crate::schema::SchemaBuilder,
    ) -> crate::schema::ResponseRef {
        <Self::Response as Response>::describe_response(schema)
    }
}

/// A response that is not the one expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResponseError {
    /// The response carries another opcode than the expected type's.
    #[error("expected a response with opcode {expected:#06X}, got {got:#06X}")]
    UnexpectedOpcode {
        /// The opcode of the expected type.
        expected: u16,
        /// The opcode received.
        got: u16,
    },
    /// The body does not decode as the expected type.
    #[error("the response does not decode: {0}")]
    Decode(#[from] DecodeError),
}
