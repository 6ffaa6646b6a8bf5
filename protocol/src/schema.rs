//! A description of packets and the types in them, in wire order, exported
//! as the versioned JSON of docs/SCHEMA.md (`"schema": "ternio/1"`).
//!
//! Every field type describes itself through [`Decode::describe`]
//! (`#[derive(Packet)]` and `#[derive(Codec)]` generate it); a
//! [`SchemaBuilder`] collects packets, the types they use, and the handlers
//! a server registers, and [`Schema::to_json`] writes them out.
//!
//! ```
//! use ternio_macros::{Codec, Packet};
//! use ternio_protocol::schema::SchemaBuilder;
//!
//! #[derive(Codec)]
//! enum Shape { Dot, Circle(f32) }
//!
//! #[derive(Packet)]
//! #[packet(opcode = 0x0010, response = ())]
//! struct Draw { shapes: Vec<Shape> }
//!
//! let mut builder = SchemaBuilder::new();
//! builder.packet::<Draw>();
//! let json = builder.finish().unwrap().to_json();
//! assert!(json.contains(r#""schema": "ternio/1""#));
//! assert!(json.contains(r#""Shape": {"#));
//! ```

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use crate::codec::Decode;
use crate::packet::Packet;
use crate::reply::Response;

/// The version tag of the JSON schema format (its `"schema"` key).
pub const SCHEMA_VERSION: &str = "ternio/1";

/// A field's type, as it appears where it is used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeRef {
    /// A fixed-width or other built-in type: `u8` … `f64`, `bool`,
    /// `string`, `bytes` or `unit`.
    Builtin(&'static str),
    /// `Vec<T>`: a count, then the elements. (Not named `Vec`, nor the
    /// next `Option`: the compiler would then spell the standard types
    /// with their full paths in its messages.)
    List(Box<TypeRef>),
    /// `Option<T>`: a tag byte, then `T` when it is 1.
    Optional(Box<TypeRef>),
    /// `[T; N]`: `N` elements, no count.
    Array(Box<TypeRef>, usize),
    /// A struct or enum defined in the schema's `types`, by name.
    Named(&'static str),
    /// A type with a hand-written encoding the schema cannot see into: its
    /// Rust name.
    Opaque(&'static str),
}

/// One field of a struct or of an enum variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Its name, or its position (`"0"`, `"1"` …) in a tuple struct.
    pub name: &'static str,
    /// Its type.
    pub ty: TypeRef,
    /// Whether it is a trailing optional field of an evolving packet: a
    /// body that ends before it decodes it as its default.
    pub optional: bool,
}

/// One variant of an enum, at its wire index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// Its name.
    pub name: &'static str,
    /// Its fields in wire order.
    pub fields: Vec<Field>,
}

/// The definition of a struct or an enum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeDef {
    /// A struct: its fields in wire order.
    Struct {
        /// The fields.
        fields: Vec<Field>,
        /// Whether the packet is evolving (docs/PROTOCOL.md, section 3.1):
        /// trailing bytes after its known fields are ignored.
        evolving: bool,
    },
    /// An enum: a `u8` index, then the variant's fields.
    Enum {
        /// The variants, in index order.
        variants: Vec<Variant>,
    },
}

/// What answers a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseRef {
    /// A packet, by name.
    Named(&'static str),
    /// An acknowledgement: an empty body under the request's opcode. (Not
    /// named `Ack`: the compiler would then spell `system::Ack` with its
    /// full path in its messages.)
    Acknowledgement,
    /// A type the schema cannot see into, by Rust name.
    Opaque(&'static str),
}

/// A packet: a type sent on its own under an opcode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketInfo {
    /// Its opcode.
    pub opcode: u16,
    /// Its name, also the name of its type in `types`.
    pub name: &'static str,
    /// The response it declares (`response = T`), if any.
    pub response: Option<ResponseRef>,
    /// Whether the server declared that it pushes it
    /// ([`SchemaBuilder::push`]).
    pub pushed: bool,
    /// `Packet::DROPPABLE`.
    pub droppable: bool,
    /// `Packet::UNRELIABLE`.
    pub unreliable: bool,
    /// `Packet::COMPRESS`.
    pub compress: bool,
    /// `Packet::EVOLVING`.
    pub evolving: bool,
    /// `Packet::MAX_DEPTH`.
    pub max_depth: usize,
}

/// The policies of a handler, as its `#[handler(...)]` attribute set them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policies {
    /// A plain request is refused (error 6).
    pub encrypted: bool,
    /// A connection that did not sign in is refused (error 3).
    pub signed_in: bool,
    /// The permission level a connection needs.
    pub permission: Option<u32>,
    /// Requests per second and burst, per connection.
    pub rate_limit: Option<(u32, u32)>,
    /// The time limit, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// Requests running at once across the server.
    pub concurrency: Option<usize>,
}

/// A handler: the opcode it answers and what it answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerInfo {
    /// Its name, `Controller::method`.
    pub name: &'static str,
    /// The opcode of its request packet.
    pub opcode: u16,
    /// Its request packet, by name.
    pub request: &'static str,
    /// What it answers with.
    pub response: ResponseRef,
    /// Whether it is an `async` handler.
    pub asynchronous: bool,
    /// Its policies.
    pub policies: Policies,
    /// For a handler that answers with a stream, the type of its items
    /// (sent as `STREAM_ITEM` frames before the answer).
    pub stream_item: Option<TypeRef>,
    /// For a handler that takes an upload, the type of the items the
    /// client sends (as `STREAM_ITEM` frames after the request).
    pub upload_item: Option<TypeRef>,
}

/// What a server knows of a handler besides its request and response
/// types: what [`SchemaBuilder::handler`] records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerDescription {
    /// Its name, `Controller::method`.
    pub name: &'static str,
    /// Whether it is an `async` handler.
    pub asynchronous: bool,
    /// Its policies.
    pub policies: Policies,
    /// The items of its stream reply, if it answers with one.
    pub stream_item: Option<TypeRef>,
    /// The items of its upload, if it takes one.
    pub upload_item: Option<TypeRef>,
}

/// A schema could not be built: two types or packets clash.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("schema: {0}")]
pub struct SchemaError(pub String);

/// Collects packets, types and handlers into a [`Schema`].
#[derive(Debug, Default)]
pub struct SchemaBuilder {
    /// Defined types by name, with the Rust path that defined them; `None`
    /// while one is being described (so recursive types end).
    types: BTreeMap<&'static str, (&'static str, Option<TypeDef>)>,
    packets: BTreeMap<u16, PacketInfo>,
    handlers: BTreeMap<u16, HandlerInfo>,
    errors: Vec<String>,
}

impl SchemaBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts the definition of type `name` from `rust_path`: `true` when
    /// the caller is to describe it and then call [`define`](Self::define),
    /// `false` when it is known (or being described) already. A different
    /// Rust type under the same name is an error of [`finish`](Self::finish).
    pub fn begin(&mut self, name: &'static str, rust_path: &'static str) -> bool {
        match self.types.get(name) {
            Some((path, _)) => {
                if *path != rust_path {
                    self.errors.push(format!(
                        "two types are named `{name}`: `{path}` and `{rust_path}`; rename one"
                    ));
                }
                false
            }
            None => {
                self.types.insert(name, (rust_path, None));
                true
            }
        }
    }

    /// Ends the definition of type `name` that [`begin`](Self::begin) started.
    pub fn define(&mut self, name: &'static str, def: TypeDef) {
        if let Some((_, slot)) = self.types.get_mut(name) {
            *slot = Some(def);
        }
    }

    /// Adds packet `P`, its types and the response it declares; returns its
    /// name.
    pub fn packet<P: Packet>(&mut self) -> &'static str {
        if let Some(known) = self.packets.get(&P::OPCODE) {
            if known.name != P::NAME {
                self.errors.push(format!(
                    "opcode {:#06X} is both `{}` and `{}`",
                    P::OPCODE,
                    known.name,
                    P::NAME
                ));
            }
            return P::NAME;
        }
        // Inserted before its response is described: a packet that answers
        // with itself stops here.
        self.packets.insert(
            P::OPCODE,
            PacketInfo {
                opcode: P::OPCODE,
                name: P::NAME,
                response: None,
                pushed: false,
                droppable: P::DROPPABLE,
                unreliable: P::UNRELIABLE,
                compress: P::COMPRESS,
                evolving: P::EVOLVING,
                max_depth: P::MAX_DEPTH,
            },
        );
        match P::describe(self) {
            TypeRef::Named(name) if name == P::NAME => {}
            // A hand-written packet: its body is one value of that type.
            other => {
                if self.begin(P::NAME, std::any::type_name::<P>()) {
                    let fields = vec![Field {
                        name: "0",
                        ty: other,
                        optional: false,
                    }];
                    let def = TypeDef::Struct {
                        fields,
                        evolving: P::EVOLVING,
                    };
                    self.define(P::NAME, def);
                }
            }
        }
        let response = P::describe_response(self);
        if let Some(info) = self.packets.get_mut(&P::OPCODE) {
            info.response = response;
        }
        P::NAME
    }

    /// Adds packet `P` as [`packet`](Self::packet) does, marked as one the
    /// server pushes; returns its name.
    pub fn push<P: Packet>(&mut self) -> &'static str {
        let name = self.packet::<P>();
        if let Some(info) = self.packets.get_mut(&P::OPCODE)
            && info.name == P::NAME
        {
            info.pushed = true;
        }
        name
    }

    /// Adds a handler of `Req` that answers with `Resp` (a packet or `()`).
    pub fn handler<Req: Packet, Resp: Response>(&mut self, handler: HandlerDescription) {
        let HandlerDescription {
            name,
            asynchronous,
            policies,
            stream_item,
            upload_item,
        } = handler;
        let request = self.packet::<Req>();
        let response = Resp::describe_response(self);
        if let Some(known) = self.handlers.get(&Req::OPCODE) {
            self.errors.push(format!(
                "opcode {:#06X} has two handlers: `{}` and `{name}`",
                Req::OPCODE,
                known.name
            ));
            return;
        }
        self.handlers.insert(
            Req::OPCODE,
            HandlerInfo {
                name,
                opcode: Req::OPCODE,
                request,
                response,
                asynchronous,
                policies,
                stream_item,
                upload_item,
            },
        );
    }

    /// The schema, or the first clash found.
    pub fn finish(self) -> Result<Schema, SchemaError> {
        if let Some(error) = self.errors.into_iter().next() {
            return Err(SchemaError(error));
        }
        let types = self
            .types
            .into_iter()
            .filter_map(|(name, (_, def))| def.map(|def| (name, def)))
            .collect();
        Ok(Schema {
            types,
            packets: self.packets.into_values().collect(),
            handlers: self.handlers.into_values().collect(),
        })
    }
}

/// The packets, types and handlers of an application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    /// Struct and enum definitions by name.
    pub types: BTreeMap<&'static str, TypeDef>,
    /// Packets by opcode.
    pub packets: Vec<PacketInfo>,
    /// Handlers by opcode.
    pub handlers: Vec<HandlerInfo>,
}

impl Schema {
    /// The JSON of docs/SCHEMA.md: stable (sorted by opcode and by name),
    /// indented by two spaces, ending with a newline.
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = self.write_json(&mut out);
        out
    }

    fn write_json(&self, out: &mut String) -> fmt::Result {
        writeln!(out, "{{")?;
        writeln!(out, "  \"schema\": {},", json_str(SCHEMA_VERSION))?;
        writeln!(out, "  \"packets\": [")?;
        for (i, packet) in self.packets.iter().enumerate() {
            let response = match &packet.response {
                Some(response) => response_json(response),
                None => "null".to_owned(),
            };
            write!(
                out,
                "    {{\"opcode\": {}, \"name\": {}, \"response\": {response}, \
                 \"pushed\": {}, \"droppable\": {}, \"unreliable\": {}, \"compress\": {}, \
                 \"evolving\": {}, \"max_depth\": {}}}",
                packet.opcode,
                json_str(packet.name),
                packet.pushed,
                packet.droppable,
                packet.unreliable,
                packet.compress,
                packet.evolving,
                packet.max_depth
            )?;
            writeln!(out, "{}", comma(i, self.packets.len()))?;
        }
        writeln!(out, "  ],")?;
        writeln!(out, "  \"handlers\": [")?;
        for (i, handler) in self.handlers.iter().enumerate() {
            let p = &handler.policies;
            let rate_limit = match p.rate_limit {
                Some((per_second, burst)) => {
                    format!("{{\"per_second\": {per_second}, \"burst\": {burst}}}")
                }
                None => "null".to_owned(),
            };
            write!(
                out,
                "    {{\"opcode\": {}, \"name\": {}, \"request\": {}, \"response\": {}, \
                 \"async\": {}, \"policies\": {{\"encrypted\": {}, \"signed_in\": {}, \
                 \"permission\": {}, \"rate_limit\": {rate_limit}, \"timeout_ms\": {}, \
                 \"concurrency\": {}}}, \"stream_item\": {}, \"upload_item\": {}}}",
                handler.opcode,
                json_str(handler.name),
                json_str(handler.request),
                response_json(&handler.response),
                handler.asynchronous,
                p.encrypted,
                p.signed_in,
                json_opt(p.permission),
                json_opt(p.timeout_ms),
                json_opt(p.concurrency),
                handler
                    .stream_item
                    .as_ref()
                    .map_or_else(|| "null".to_owned(), type_json),
                handler
                    .upload_item
                    .as_ref()
                    .map_or_else(|| "null".to_owned(), type_json),
            )?;
            writeln!(out, "{}", comma(i, self.handlers.len()))?;
        }
        writeln!(out, "  ],")?;
        writeln!(out, "  \"types\": {{")?;
        for (i, (name, def)) in self.types.iter().enumerate() {
            write!(out, "    {}: ", json_str(name))?;
            match def {
                TypeDef::Struct { fields, evolving } => {
                    write!(
                        out,
                        "{{\"kind\": \"struct\", \"evolving\": {evolving}, \"fields\": ["
                    )?;
                    if fields.is_empty() {
                        write!(out, "]}}")?;
                    } else {
                        writeln!(out)?;
                        write_fields(out, fields, "      ")?;
                        write!(out, "    ]}}")?;
                    }
                }
                TypeDef::Enum { variants } => {
                    writeln!(out, "{{\"kind\": \"enum\", \"variants\": [")?;
                    for (index, variant) in variants.iter().enumerate() {
                        write!(
                            out,
                            "      {{\"index\": {index}, \"name\": {}, \"fields\": [",
                            json_str(variant.name)
                        )?;
                        if variant.fields.is_empty() {
                            write!(out, "]}}")?;
                        } else {
                            writeln!(out)?;
                            write_fields(out, &variant.fields, "        ")?;
                            write!(out, "      ]}}")?;
                        }
                        writeln!(out, "{}", comma(index, variants.len()))?;
                    }
                    write!(out, "    ]}}")?;
                }
            }
            writeln!(out, "{}", comma(i, self.types.len()))?;
        }
        writeln!(out, "  }}")?;
        writeln!(out, "}}")
    }
}

fn write_fields(out: &mut String, fields: &[Field], indent: &str) -> fmt::Result {
    for (i, field) in fields.iter().enumerate() {
        writeln!(
            out,
            "{indent}{{\"name\": {}, \"type\": {}, \"optional\": {}}}{}",
            json_str(field.name),
            type_json(&field.ty),
            field.optional,
            comma(i, fields.len())
        )?;
    }
    Ok(())
}

fn comma(i: usize, len: usize) -> &'static str {
    if i + 1 < len { "," } else { "" }
}

fn json_opt<T: fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "null".to_owned(), |value| value.to_string())
}

/// A type as JSON: a string for a built-in type, an object otherwise.
fn type_json(ty: &TypeRef) -> String {
    match ty {
        TypeRef::Builtin(name) => json_str(name),
        TypeRef::List(inner) => format!("{{\"vec\": {}}}", type_json(inner)),
        TypeRef::Optional(inner) => format!("{{\"option\": {}}}", type_json(inner)),
        TypeRef::Array(inner, len) => {
            format!("{{\"array\": {}, \"len\": {len}}}", type_json(inner))
        }
        TypeRef::Named(name) => format!("{{\"ref\": {}}}", json_str(name)),
        TypeRef::Opaque(name) => format!("{{\"opaque\": {}}}", json_str(name)),
    }
}

fn response_json(response: &ResponseRef) -> String {
    match response {
        ResponseRef::Named(name) => format!("{{\"packet\": {}}}", json_str(name)),
        ResponseRef::Acknowledgement => "\"ack\"".to_owned(),
        ResponseRef::Opaque(name) => format!("{{\"opaque\": {}}}", json_str(name)),
    }
}

/// `text` as a JSON string literal.
fn json_str(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The description of a struct or enum field list: what the derives call
/// for each field, so that generated code stays short.
pub fn field<T: Decode>(schema: &mut SchemaBuilder, name: &'static str, optional: bool) -> Field {
    Field {
        name,
        ty: T::describe(schema),
        optional,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped() {
        assert_eq!(json_str("a\"b\\c\n\u{1}"), r#""a\"b\\c\n\u0001""#);
    }

    #[test]
    fn builtins_describe_themselves() {
        let mut schema = SchemaBuilder::new();
        assert_eq!(
            type_json(&<Vec<Option<[u16; 3]>>>::describe(&mut schema)),
            r#"{"vec": {"option": {"array": "u16", "len": 3}}}"#
        );
        assert_eq!(
            type_json(&<Box<crate::Bytes>>::describe(&mut schema)),
            r#""bytes""#
        );
        assert_eq!(type_json(&String::describe(&mut schema)), r#""string""#);
        assert_eq!(type_json(&<()>::describe(&mut schema)), r#""unit""#);
    }
}
