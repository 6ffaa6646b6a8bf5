//! The macros of Ternio: `#[derive(Packet)]`, `#[derive(Codec)]` and
//! `#[packet_controller]`.
//!
//! Use them through `ternio` (the server) or `ternio-client`, which
//! re-export them; `ternio-protocol` alone works too. Generated code names
//! the protocol crate by an absolute path found in the manifest of the crate
//! being compiled: `::ternio::protocol` when it depends on `ternio`, else
//! `::ternio_client::protocol` when it depends on `ternio-client`, else
//! `::ternio_protocol`. (A crate that *is* one of these names itself the same
//! way, through `extern crate self as <name>;`.)
//!
//! Every mistake the macros can see is a compile error with a span on the
//! offending token; a field type with no encoding is caught by the compiler
//! through the protocol traits, at the field.

mod codec;
mod controller;
mod crate_path;
mod errors;
mod handler;
mod handler_attr;
mod packet;
mod packet_attr;

use proc_macro::TokenStream;
use syn::{DeriveInput, parse_macro_input};

/// Derives `Encode`, `Decode` and `Packet` for a struct or an enum, following
/// section 3 of the wire contract.
///
/// ```
/// use ternio_macros::Packet;
/// use ternio_protocol::{Bytes, BytesMut, Decode, Encode, Packet as _};
///
/// #[derive(Packet, Debug, PartialEq)]
/// #[packet(opcode = 0x0001)]
/// struct Join {
///     room: String,
///     seat: Option<u8>,
/// }
///
/// let join = Join { room: "lobby".into(), seat: Some(3) };
/// let mut body = BytesMut::new();
/// join.encode(&mut body);
/// assert_eq!(&body[..], [5, b'l', b'o', b'b', b'b', b'y', 1, 3]);
/// assert_eq!(Join::decode_body(&body.freeze()).unwrap(), join);
/// assert_eq!((Join::OPCODE, Join::NAME), (0x0001, "Join"));
/// ```
///
/// # Encoding
///
/// - A struct (named, tuple or unit) is its fields in declaration order,
///   each through its own `Encode`/`Decode`; its `MIN_LEN` is the sum of the
///   fields' (0 for a unit struct).
/// - An enum is a `u8` index, the variant's position in declaration order,
///   followed by that variant's fields. Its `MIN_LEN` is 1. An unknown index
///   decodes as `DecodeError::InvalidVariant { index, type_name }`.
///
/// # Attribute
///
/// `#[packet(opcode = 0x0001)]` is required: an integer literal (unsuffixed
/// or `u16`) in the application range `0x0000..=0xFEFF`. `Packet::NAME` is the
/// type's name. The flag `droppable` (`#[packet(opcode = 0x0010, droppable)]`)
/// sets `Packet::DROPPABLE`: a push of this type may be dropped for a
/// connection that falls behind, under the server's slow-consumer policy.
/// The flag `unreliable` sets `Packet::UNRELIABLE`: a push of this type
/// goes over the connection's datagram channel when it has one (it may then
/// be lost or reordered), over the stream otherwise.
/// `compress = false` sets `Packet::COMPRESS` to `false`: a frame of this
/// type is never sent compressed, even when the sender compresses (for a
/// packet that mixes secrets with what an attacker controls: compression
/// leaks their length, as in CRIME).
///
/// `response = T` pairs a request with its answer: it implements
/// `Request` with `type Response = T`, where `T` is the packet the
/// handler answers with, or `()` for an acknowledgement
/// (`#[packet(opcode = 0x0010, response = Sum)]`). The client's
/// `request_async` then returns `T`, and `#[packet_controller]` checks that
/// the packet's handler returns `T` (or `Result<T, E>`). Every packet a
/// controller handles declares one.
///
/// # Compile errors
///
/// A missing, non-literal or out-of-range opcode (the system range
/// `0xFF00..=0xFFFF` is reserved), an unknown or repeated key in
/// `#[packet(...)]`, a `response` that is not a type (a type that is neither
/// a packet nor `()` is reported by the compiler at that type), `#[packet]`
/// on a field or a variant, a generic type, a union, an enum with no
/// variant, more than 256 variants, or an explicit discriminant (`A = 5`:
/// the index is the declaration order). A field whose
/// type has no encoding is reported by the compiler at that field.
#[proc_macro_derive(Packet, attributes(packet))]
pub fn derive_packet(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    packet::derive_packet(&input).into()
}

/// Derives `Encode` and `Decode` for a struct or an enum nested in packets:
/// the same encoding as [`derive(Packet)`](derive@Packet), with no opcode and
/// no `Packet` impl.
///
/// ```
/// use ternio_macros::{Codec, Packet};
///
/// #[derive(Codec)]
/// enum Shape {
///     Dot,
///     Circle(f32),
///     Rect { width: f32, height: f32 },
/// }
///
/// #[derive(Packet)]
/// #[packet(opcode = 0x0010)]
/// struct Draw {
///     shapes: Vec<Shape>,
/// }
/// ```
///
/// `#[packet(...)]` on a `Codec` type is a compile error: the opcode would
/// be read by nothing. Derive `Packet` for a type that is also sent alone.
#[proc_macro_derive(Codec, attributes(packet))]
pub fn derive_codec(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    packet::derive_codec(&input).into()
}

/// Makes a controller out of an inherent impl block: every `fn` in the block
/// is a handler. Keep helper methods in a separate impl block.
///
/// ```ignore
/// use ternio::{Context, State, packet_controller};
///
/// #[derive(Default)]
/// struct Rooms;
///
/// #[packet_controller]
/// impl Rooms {
///     // No receiver, a sync handler that answers with a packet.
///     fn ping(request: Ping) -> Pong {
///         Pong { value: request.value }
///     }
///
///     // `&self`, extractors after the request, options as builder calls.
///     #[handler(encrypted, timeout_ms = 500)]
///     async fn join(&self, request: Join, ctx: &Context, store: State<Store>) -> Result<Joined, HandlerError> {
///         /* ... */
///     }
/// }
/// ```
///
/// # Handlers
///
/// - The receiver is `&self` (or `self: &Self`) or none; `self`, `&mut self`
///   and other receivers are refused.
/// - The first parameter is the request packet, by value; its type's
///   `Packet::OPCODE` routes requests to the handler.
/// - Each further parameter is an extractor: `&Context` is the handler's
///   context (any type path whose last segment is `Context`); `T` is
///   `<T as FromContext>::from_context(ctx)`; `&T` a reference to it. Each
///   `T` is also recorded with `HandlerSpec::extractor::<T>()` for the
///   server's start-up checks. Parameter patterns are the method's own
///   business (`State(store): State<Store>` works).
/// - `async fn` handlers become `HandlerSpec::asynchronous`, others
///   `HandlerSpec::sync`. The return type is left to the `IntoReply` bound.
/// - The request packet must declare its response
///   (`#[packet(opcode = 0x0010, response = Sum)]`), and the handler must
///   answer with it: return `Sum` or `Result<Sum, E>` (or `()` and
///   `Result<(), E>` for `response = ()`); a handler that returns
///   `impl IntoReply` names it, as `impl IntoReply<Response = Sum>`. Either
///   mistake is a compile error that names the packet and both types.
/// - Two handlers of one request type in a block are a compile error on
///   the second (unless their `#[cfg(...)]`s differ).
/// - A handler's name is `"Controller::method"`.
/// - `#[handler(key, key = value, key(a, b))]` (any number, in order) become
///   `.key()`, `.key(value)`, `.key(a, b)` on the handler's `HandlerSpec`;
///   they are removed from the emitted impl block.
/// - `#[cfg(...)]` on a method applies to its handler too.
/// - Generic methods, `unsafe` or `extern` ones, and a method with no
///   request parameter are compile errors, as are a trait impl and a
///   generic impl block. Items other than `fn` are left alone.
///
/// # Registration
///
/// The controller (which must then be `Default`, or the compile error says
/// to write `#[packet_controller(explicit)]`) is submitted to `inventory` as
/// `ControllerRegistration::new::<C>("C")` (these types are in
/// `ternio::__private`: the generated code's, not an API).
/// `#[packet_controller(explicit)]` leaves that out, for a controller that is
/// built by hand and passed to `Server::builder().controller(instance)`.
///
/// # Generated code
///
/// Next to the impl block, `impl ::ternio::__private::Controller for C` whose
/// `handlers(self: Arc<Self>)` returns one `HandlerSpec` per method. A sync
/// handler is `HandlerSpec::sync::<Req, R>(name, move |request, ctx:
/// &Context| ...)`; an async one is `HandlerSpec::asynchronous::<Req, R, _>(
/// name, move |request, ctx: Context| async move { ... })`, where `R` is the
/// declared return type (`_` when it mentions `impl Trait`). Before it,
/// `check_reply::<Req, R>()` checks the response at compile time; with
/// `impl Trait`, `checked_opaque_reply::<Req, _>(reply)` wraps the value
/// the method returns.
#[proc_macro_attribute]
pub fn packet_controller(attr: TokenStream, item: TokenStream) -> TokenStream {
    controller::expand(attr.into(), item.into()).into()
}
