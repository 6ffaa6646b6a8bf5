//! The schema export (docs/SCHEMA.md): the JSON of hand-made packets and
//! handlers, clashes reported as errors, and the schemas of the example
//! servers checked against the files committed in `examples/schemas/`.
//!
//! When an example's packets or handlers change on purpose, regenerate its
//! file with `TERNIO_SCHEMA_OVERWRITE=1 cargo test -p ternio-tests --test
//! schema` (after `cargo build -p ternio-examples --examples`) and commit
//! it: a client generated from the old file would no longer match.

use std::path::Path;
use std::process::Command;

use futures_util::StreamExt;
use ternio::protocol::schema::{SCHEMA_VERSION, SchemaBuilder};
use ternio::{
    Bytes, Codec, HandlerError, Packet, Server, StreamReply, StreamRequest, Upload, UploadRequest,
    packet_controller,
};
use ternio_tests::example_binary;

/// How shapes are drawn: an enum with unit, tuple and struct variants.
#[derive(Debug, Clone, Codec)]
enum Shape {
    Dot,
    Circle(f32),
    Rect { w: u16, h: u16 },
}

/// A nested struct.
#[derive(Debug, Clone, Codec)]
struct Point {
    x: i32,
    y: i32,
}

/// 0x0A00: a request with every kind of field, answered with [`Drawn`].
#[derive(Debug, Clone, Packet)]
#[packet(opcode = 0x0A00, response = Drawn)]
struct Draw {
    shapes: Vec<Shape>,
    origin: Point,
    label: Option<String>,
    color: [u8; 3],
    data: Bytes,
    visible: bool,
}

/// 0x0A01: a tuple struct.
#[derive(Debug, Clone, Packet)]
#[packet(opcode = 0x0A01)]
struct Drawn(u32, u64);

/// 0x0A02: answered with an acknowledgement.
#[derive(Debug, Clone, Packet)]
#[packet(opcode = 0x0A02, response = ())]
struct Clear;

/// 0x0A03: an evolving packet with an optional trailing field, pushed.
#[derive(Debug, Clone, Packet)]
#[packet(opcode = 0x0A03, evolving, droppable)]
struct Profile {
    name: String,
    #[packet(optional)]
    avatar: Option<String>,
}

/// 0x0A04: answered with a stream of [`Tick`]s.
#[derive(Debug, Clone, Packet)]
#[packet(opcode = 0x0A04, response = ())]
struct Watch;

impl StreamRequest for Watch {
    type Item = Tick;
}

/// 0x0A05: a stream item.
#[derive(Debug, Clone, Packet)]
#[packet(opcode = 0x0A05)]
struct Tick(u64);

/// 0x0A06: carries an upload of [`Tick`]s, answered with [`Drawn`].
#[derive(Debug, Clone, Packet)]
#[packet(opcode = 0x0A06, response = Drawn, compress = false)]
struct Send;

impl UploadRequest for Send {
    type Item = Tick;
}

#[derive(Default)]
struct Canvas;

#[packet_controller]
impl Canvas {
    #[handler(encrypted, permission = 2, rate_limit(10, 20), timeout_ms = 500)]
    fn draw(_request: Draw) -> Drawn {
        Drawn(1, 2)
    }

    #[handler(signed_in, concurrency = 3)]
    async fn clear(_request: Clear) -> Result<(), HandlerError> {
        Ok(())
    }

    fn watch(_request: Watch) -> StreamReply<Tick> {
        StreamReply::new(futures_util::stream::iter([Tick(1)]))
    }

    async fn send(_request: Send, mut upload: Upload<Tick>) -> Drawn {
        let mut count = 0;
        while let Some(Ok(_)) = upload.next().await {
            count += 1;
        }
        Drawn(count, 0)
    }
}

const CANVAS: &str = r#"{
  "schema": "ternio/1",
  "packets": [
    {"opcode": 2560, "name": "Draw", "response": {"packet": "Drawn"}, "pushed": false, "droppable": false, "unreliable": false, "compress": true, "evolving": false, "max_depth": 64},
    {"opcode": 2561, "name": "Drawn", "response": null, "pushed": false, "droppable": false, "unreliable": false, "compress": true, "evolving": false, "max_depth": 64},
    {"opcode": 2562, "name": "Clear", "response": "ack", "pushed": false, "droppable": false, "unreliable": false, "compress": true, "evolving": false, "max_depth": 64},
    {"opcode": 2563, "name": "Profile", "response": null, "pushed": true, "droppable": true, "unreliable": false, "compress": true, "evolving": true, "max_depth": 64},
    {"opcode": 2564, "name": "Watch", "response": "ack", "pushed": false, "droppable": false, "unreliable": false, "compress": true, "evolving": false, "max_depth": 64},
    {"opcode": 2566, "name": "Send", "response": {"packet": "Drawn"}, "pushed": false, "droppable": false, "unreliable": false, "compress": false, "evolving": false, "max_depth": 64}
  ],
  "handlers": [
    {"opcode": 2560, "name": "Canvas::draw", "request": "Draw", "response": {"packet": "Drawn"}, "async": false, "policies": {"encrypted": true, "signed_in": false, "permission": 2, "rate_limit": {"per_second": 10, "burst": 20}, "timeout_ms": 500, "concurrency": null}, "stream_item": null, "upload_item": null},
    {"opcode": 2562, "name": "Canvas::clear", "request": "Clear", "response": "ack", "async": true, "policies": {"encrypted": false, "signed_in": true, "permission": null, "rate_limit": null, "timeout_ms": null, "concurrency": 3}, "stream_item": null, "upload_item": null},
    {"opcode": 2564, "name": "Canvas::watch", "request": "Watch", "response": "ack", "async": false, "policies": {"encrypted": false, "signed_in": false, "permission": null, "rate_limit": null, "timeout_ms": null, "concurrency": null}, "stream_item": {"ref": "Tick"}, "upload_item": null},
    {"opcode": 2566, "name": "Canvas::send", "request": "Send", "response": {"packet": "Drawn"}, "async": true, "policies": {"encrypted": false, "signed_in": false, "permission": null, "rate_limit": null, "timeout_ms": null, "concurrency": null}, "stream_item": null, "upload_item": {"ref": "Tick"}}
  ],
  "types": {
    "Clear": {"kind": "struct", "evolving": false, "fields": []},
    "Draw": {"kind": "struct", "evolving": false, "fields": [
      {"name": "shapes", "type": {"vec": {"ref": "Shape"}}, "optional": false},
      {"name": "origin", "type": {"ref": "Point"}, "optional": false},
      {"name": "label", "type": {"option": "string"}, "optional": false},
      {"name": "color", "type": {"array": "u8", "len": 3}, "optional": false},
      {"name": "data", "type": "bytes", "optional": false},
      {"name": "visible", "type": "bool", "optional": false}
    ]},
    "Drawn": {"kind": "struct", "evolving": false, "fields": [
      {"name": "0", "type": "u32", "optional": false},
      {"name": "1", "type": "u64", "optional": false}
    ]},
    "Point": {"kind": "struct", "evolving": false, "fields": [
      {"name": "x", "type": "i32", "optional": false},
      {"name": "y", "type": "i32", "optional": false}
    ]},
    "Profile": {"kind": "struct", "evolving": true, "fields": [
      {"name": "name", "type": "string", "optional": false},
      {"name": "avatar", "type": {"option": "string"}, "optional": true}
    ]},
    "Send": {"kind": "struct", "evolving": false, "fields": []},
    "Shape": {"kind": "enum", "variants": [
      {"index": 0, "name": "Dot", "fields": []},
      {"index": 1, "name": "Circle", "fields": [
        {"name": "0", "type": "f32", "optional": false}
      ]},
      {"index": 2, "name": "Rect", "fields": [
        {"name": "w", "type": "u16", "optional": false},
        {"name": "h", "type": "u16", "optional": false}
      ]}
    ]},
    "Tick": {"kind": "struct", "evolving": false, "fields": [
      {"name": "0", "type": "u64", "optional": false}
    ]},
    "Watch": {"kind": "struct", "evolving": false, "fields": []}
  }
}
"#;

#[test]
fn a_server_describes_its_handlers_packets_and_types() {
    let schema = Server::builder()
        .discover_controllers(false)
        .controller(Canvas)
        .declare_push::<Profile>()
        .schema()
        .expect("no clash");
    let json = schema.to_json();
    assert_eq!(json, CANVAS, "got:\n{json}");
    // Valid JSON, and the version is where docs/SCHEMA.md says.
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["schema"], SCHEMA_VERSION);
}

#[test]
fn a_packet_alone_brings_its_types_and_its_response() {
    let mut builder = SchemaBuilder::new();
    builder.packet::<Draw>();
    let schema = builder.finish().unwrap();
    let names: Vec<_> = schema.types.keys().copied().collect();
    assert_eq!(names, ["Draw", "Drawn", "Point", "Shape"]);
    let packets: Vec<_> = schema.packets.iter().map(|p| p.name).collect();
    assert_eq!(packets, ["Draw", "Drawn"]);
    assert!(schema.handlers.is_empty());
}

mod other {
    use ternio::{Codec, Packet};

    /// Another `Point`, of another module: its name clashes.
    #[derive(Debug, Clone, Codec)]
    pub struct Point {
        pub z: u8,
    }

    /// 0x0A10: uses this module's `Point`.
    #[derive(Debug, Clone, Packet)]
    #[packet(opcode = 0x0A10)]
    pub struct Place {
        pub at: Point,
    }

    /// 0x0A00: the opcode of `Draw`.
    #[derive(Debug, Clone, Packet)]
    #[packet(opcode = 0x0A00)]
    pub struct Scribble;
}

#[test]
fn two_types_with_one_name_are_an_error() {
    let mut builder = SchemaBuilder::new();
    builder.packet::<Draw>();
    builder.packet::<other::Place>();
    let error = builder.finish().unwrap_err().to_string();
    assert_eq!(
        error,
        "schema: two types are named `Point`: `schema::Point` and `schema::other::Point`; \
         rename one"
    );
}

#[test]
fn two_packets_with_one_opcode_are_an_error() {
    let mut builder = SchemaBuilder::new();
    builder.packet::<Draw>();
    builder.packet::<other::Scribble>();
    let error = builder.finish().unwrap_err().to_string();
    assert_eq!(error, "schema: opcode 0x0A00 is both `Draw` and `Scribble`");
}

/// The example servers and the files their schemas are checked against.
const EXAMPLES: [(&str, &str); 5] = [
    ("echo_server", "TERNIO_ECHO_SERVER"),
    ("conformance_server", "TERNIO_CONFORMANCE_SERVER"),
    ("chat_server", "TERNIO_CHAT_SERVER"),
    ("game", "TERNIO_GAME"),
    ("rooms", "TERNIO_ROOMS"),
];

#[test]
fn the_examples_schemas_match_the_committed_files() {
    let overwrite = std::env::var_os("TERNIO_SCHEMA_OVERWRITE").is_some_and(|v| v == "1");
    let directory = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is in the workspace")
        .join("examples/schemas");
    let mut stale = Vec::new();
    for (name, variable) in EXAMPLES {
        let output = Command::new(example_binary(name, variable))
            .arg("--schema")
            .output()
            .unwrap_or_else(|error| panic!("{name} --schema runs: {error}"));
        assert!(
            output.status.success(),
            "{name} --schema failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let json = String::from_utf8(output.stdout).expect("the schema is UTF-8");
        serde_json::from_str::<serde_json::Value>(&json)
            .unwrap_or_else(|error| panic!("{name} --schema is not JSON: {error}\n{json}"));
        let file = directory.join(format!("{name}.json"));
        if overwrite {
            std::fs::write(&file, &json).unwrap();
            continue;
        }
        let committed = std::fs::read_to_string(&file).unwrap_or_default();
        if committed != json {
            stale.push(format!("{} (from `{name} --schema`)", file.display()));
        }
    }
    assert!(
        stale.is_empty(),
        "the schema of an example changed; if on purpose, regenerate the files with\n    \
         TERNIO_SCHEMA_OVERWRITE=1 cargo test -p ternio-tests --test schema\n\
         and commit them (clients generated from them change too). Stale:\n  {}",
        stale.join("\n  ")
    );
}
