//! What each test vector of docs/PROTOCOL.md is: the file of
//! `conformance/vectors/` it goes to, a description, and its input, in
//! words a client author in another language can rebuild it from. The
//! bytes themselves come from the code (`encoded()` in vectors.rs).

use serde_json::{Value, json};

/// One vector's description.
pub(crate) struct Entry {
    /// The vector's name, as in docs/PROTOCOL.md (`vector: NAME`).
    pub(crate) name: &'static str,
    /// The file of `conformance/vectors/` (without `.json`).
    pub(crate) file: &'static str,
    /// How the bytes travel: `tcp` (a frame with its length prefix),
    /// `websocket` (one binary message, no prefix), `udp` (one datagram) or
    /// `bytes` (a value: a key, a Noise message, a body, codec output).
    pub(crate) encoding: &'static str,
    /// What the vector shows.
    pub(crate) description: &'static str,
    /// What it is made of.
    pub(crate) input: Value,
}

/// The files, with what each holds.
pub(crate) const FILES: &[(&str, &str)] = &[
    (
        "frames",
        "Frames, requests, responses and errors (docs/PROTOCOL.md sections 1 and 2)",
    ),
    (
        "codec",
        "The field codec: varints and every field type (section 3)",
    ),
    (
        "system",
        "System packets: PING, PONG, DISCONNECT, CANCEL, DEADLINE, TIME (section 4)",
    ),
    (
        "streams",
        "Streams: STREAM_ITEM, STREAM_CREDIT, STREAM_END, STREAM_ITEMS (section 4.5)",
    ),
    (
        "compression",
        "Compressed frames, plain and sealed (section 6)",
    ),
    (
        "secure",
        "Noise NN and NK handshakes with fixed keys, sealed frames, REKEY (section 5)",
    ),
    (
        "resumption",
        "Resumption: tickets, ACK, RESUME plain and with NNpsk0/NKpsk0 (section 4.2)",
    ),
    (
        "datagrams",
        "Datagram channels: binding, keys, a sealed datagram (section 4.4)",
    ),
];

const ECHO: &str = "Echo { payload: Bytes } at opcode 0x0001";

fn echo(request_id: u32, flags: &str) -> Value {
    json!({ "packet": ECHO, "request_id": request_id, "flags": flags, "fields": { "payload": "ping" } })
}

fn keys() -> Value {
    json!({
        "server_static_private": "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
        "client_ephemeral_private": "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f",
        "server_ephemeral_private": "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f",
        "prologue": "ternio/2",
    })
}

const SECRET: &str = "606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f";
const TICKET: &str = "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f";
const NEW_TICKET: &str = "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf";
const TOKEN: &str = "d0d1d2d3d4d5d6d7";

fn entry(
    name: &'static str,
    file: &'static str,
    encoding: &'static str,
    description: &'static str,
    input: Value,
) -> Entry {
    Entry {
        name,
        file,
        encoding,
        description,
        input,
    }
}

/// Every vector of docs/PROTOCOL.md, described.
pub(crate) fn entries() -> Vec<Entry> {
    let mut entries = vec![
        entry(
            "echo-request",
            "frames",
            "tcp",
            "A request: Echo at opcode 0x0001, request id 1, as a TCP frame (u32 length prefix, 7-byte header, body).",
            echo(1, "none"),
        ),
        entry(
            "echo-response",
            "frames",
            "tcp",
            "Its response: the same packet with RESPONSE (0x01) set and the same request id.",
            echo(1, "RESPONSE"),
        ),
        entry(
            "echo-request-message",
            "frames",
            "websocket",
            "The echo request as a WebSocket binary message: one frame, no length prefix.",
            echo(1, "none"),
        ),
        entry(
            "ack",
            "frames",
            "tcp",
            "An acknowledgement: the answer of a handler that returns nothing, an empty body under the request's opcode with RESPONSE set.",
            json!({ "opcode": "0x0040", "request_id": 5, "flags": "RESPONSE", "body": "empty" }),
        ),
        entry(
            "error-unknown-opcode",
            "frames",
            "tcp",
            "An error answer (RESPONSE | ERROR): code u16 then a UTF-8 message to the end of the body, under the request's opcode.",
            json!({ "opcode": "0x0099", "request_id": 2, "flags": "RESPONSE | ERROR", "code": 1, "code_name": "UNKNOWN_OPCODE", "message": "no handler" }),
        ),
        entry(
            "varints",
            "codec",
            "bytes",
            "Varint lengths (unsigned LEB128) of 0, 127, 128, 300, 16384 and u32::MAX, one after the other.",
            json!({ "values": [0, 127, 128, 300, 16384, 4_294_967_295u32] }),
        ),
        entry(
            "sample-push",
            "codec",
            "tcp",
            "Every field type at once, as a push (request id 0) at opcode 0x0123.",
            json!({
                "opcode": "0x0123", "request_id": 0, "flags": "none",
                "declaration": "enum Kind { Stop, Move { x: i16, y: i16 } } struct Sample { a: u8, b: i16, c: u32, d: f32, e: bool, s: String, v: Vec<u16>, o: Option<i8>, n: Option<u64>, arr: [u8; 3], k: Kind }",
                "fields": {
                    "a": 255, "b": -2, "c": 300, "d": 1.5, "e": true, "s": "hé", "v": [1, 2],
                    "o": -1, "n": null, "arr": [9, 8, 7], "k": { "variant": "Move", "index": 1, "x": 3, "y": -4 }
                }
            }),
        ),
        entry(
            "ping",
            "system",
            "tcp",
            "PING (0xFF02) as a request, id 3, value 0x0102030405060708.",
            json!({ "opcode": "0xFF02", "request_id": 3, "flags": "none", "value": "0x0102030405060708" }),
        ),
        entry(
            "pong",
            "system",
            "tcp",
            "Its PONG (0xFF03): the same value, RESPONSE set, the same id.",
            json!({ "opcode": "0xFF03", "request_id": 3, "flags": "RESPONSE", "value": "0x0102030405060708" }),
        ),
        entry(
            "disconnect",
            "system",
            "tcp",
            "DISCONNECT (0xFF04) FRAME_TOO_LARGE: reason u16 then a UTF-8 text.",
            json!({ "opcode": "0xFF04", "request_id": 0, "flags": "none", "reason": 4, "reason_name": "FRAME_TOO_LARGE", "text": "too big" }),
        ),
        entry(
            "cancel",
            "system",
            "tcp",
            "CANCEL (0xFF06) of request 42 (section 4.1).",
            json!({ "opcode": "0xFF06", "request_id": 0, "flags": "none", "cancelled_request_id": 42 }),
        ),
        entry(
            "deadline",
            "system",
            "tcp",
            "DEADLINE (0xFF07) of 1500 ms announced for request 42 (section 4.1).",
            json!({ "opcode": "0xFF07", "request_id": 0, "flags": "none", "deadline_request_id": 42, "budget_ms": 1500 }),
        ),
        entry(
            "time-request",
            "system",
            "tcp",
            "TIME (0xFF0B) request, id 6, client_time in microseconds since the epoch (section 4.3).",
            json!({ "opcode": "0xFF0B", "request_id": 6, "flags": "none", "client_time": 1_700_000_000_000_000u64 }),
        ),
        entry(
            "time-response",
            "system",
            "tcp",
            "Its answer: client_time echoed, server_receive, server_send (a server clock about 5 s ahead).",
            json!({ "opcode": "0xFF0B", "request_id": 6, "flags": "RESPONSE", "client_time": 1_700_000_000_000_000u64, "server_receive": 1_700_000_005_010_000u64, "server_send": 1_700_000_005_010_050u64 }),
        ),
        entry(
            "stream-item",
            "streams",
            "tcp",
            "STREAM_ITEM (0xFF0D) of stream 7: a Chunk { data: Bytes } item, the stream's request id in the header.",
            json!({ "opcode": "0xFF0D", "request_id": 7, "flags": "none", "item": "Chunk { data: Bytes }", "fields": { "data": "abc" } }),
        ),
        entry(
            "stream-credit",
            "streams",
            "tcp",
            "STREAM_CREDIT (0xFF0E): the receiver of stream 7 grants 16 more items.",
            json!({ "opcode": "0xFF0E", "request_id": 7, "flags": "none", "items": 16 }),
        ),
        entry(
            "stream-credit-batches",
            "streams",
            "tcp",
            "STREAM_CREDIT with its fifth byte 1: the receiver of stream 7 grants 16 more items and accepts STREAM_ITEMS from now on.",
            json!({ "opcode": "0xFF0E", "request_id": 7, "flags": "none", "items": 16, "batches": true }),
        ),
        entry(
            "stream-items",
            "streams",
            "tcp",
            "STREAM_ITEMS (0xFF10) of stream 7: three Chunk items, \"abc\", \"\" and \"de\", each a varint length then the item's body.",
            json!({ "opcode": "0xFF10", "request_id": 7, "flags": "none", "item": "Chunk { data: Bytes }", "items": [{ "data": "abc" }, { "data": "" }, { "data": "de" }] }),
        ),
        entry(
            "stream-end",
            "streams",
            "tcp",
            "STREAM_END (0xFF0F) of upload 7, complete (code 0, empty text).",
            json!({ "opcode": "0xFF0F", "request_id": 7, "flags": "none", "code": 0, "text": "" }),
        ),
        entry(
            "stream-end-error",
            "streams",
            "tcp",
            "STREAM_END of upload 7, failed with application code 100 and the text disk.",
            json!({ "opcode": "0xFF0F", "request_id": 7, "flags": "none", "code": 100, "text": "disk" }),
        ),
        entry(
            "stream-complete",
            "streams",
            "tcp",
            "A download's end, complete: the acknowledgement of its request (opcode 0x0050, id 7).",
            json!({ "opcode": "0x0050", "request_id": 7, "flags": "RESPONSE", "body": "empty" }),
        ),
        entry(
            "compressed-echo-request",
            "compression",
            "tcp",
            "A compressed request (COMPRESSED 0x08): uncompressed_len u32 then an LZ4 block of the 50-byte body.",
            json!({ "packet": ECHO, "request_id": 9, "flags": "COMPRESSED", "fields": { "payload": "ternio ternio ternio ternio ternio ternio ternio!" } }),
        ),
        entry(
            "compressed-sealed-echo-request",
            "compression",
            "tcp",
            "The same request (id 10) compressed, then sealed (flags 0x0c, both in the associated data) with counter 0.",
            json!({ "packet": ECHO, "request_id": 10, "flags": "ENCRYPTED | COMPRESSED", "fields": { "payload": "ternio ternio ternio ternio ternio ternio ternio!" }, "key": SECRET, "counter": 0 }),
        ),
        entry(
            "server-static-public",
            "secure",
            "bytes",
            "The server's static X25519 public key, of the private key 00 01 .. 1f.",
            keys(),
        ),
    ];
    for pattern in ["NN", "NK"] {
        let noise = if pattern == "NN" {
            "Noise_NN_25519_ChaChaPoly_BLAKE2s"
        } else {
            "Noise_NK_25519_ChaChaPoly_BLAKE2s"
        };
        let mut input = keys();
        input["noise"] = json!(noise);
        input["pattern_byte"] = json!(if pattern == "NN" { 1 } else { 2 });
        if pattern == "NK" {
            input["pinned_server_public"] = json!("the server-static-public vector");
        }
        let described: [(&str, &str); 5] = if pattern == "NN" {
            [
                (
                    "nn-handshake-request-body",
                    "NN: the HANDSHAKE request body, pattern byte 1 then message 1 (e).",
                ),
                (
                    "nn-handshake-response-body",
                    "NN: the HANDSHAKE response body, message 2 (e, ee).",
                ),
                (
                    "nn-client-to-server-key",
                    "NN: the first key of Split(), sealing client-to-server frames.",
                ),
                (
                    "nn-server-to-client-key",
                    "NN: the second key of Split(), sealing server-to-client frames.",
                ),
                (
                    "nn-session-secret",
                    "NN: the session secret BLAKE2s-256(\"ternio/2 secret\" || k1 || k2), which resumption is keyed by.",
                ),
            ]
        } else {
            [
                (
                    "nk-handshake-request-body",
                    "NK: the HANDSHAKE request body, pattern byte 2 then message 1 (e, es).",
                ),
                (
                    "nk-handshake-response-body",
                    "NK: the HANDSHAKE response body, message 2 (e, ee).",
                ),
                (
                    "nk-client-to-server-key",
                    "NK: the first key of Split(), sealing client-to-server frames.",
                ),
                (
                    "nk-server-to-client-key",
                    "NK: the second key of Split(), sealing server-to-client frames.",
                ),
                (
                    "nk-session-secret",
                    "NK: the session secret BLAKE2s-256(\"ternio/2 secret\" || k1 || k2).",
                ),
            ]
        };
        for (name, description) in described {
            entries.push(entry(name, "secure", "bytes", description, input.clone()));
        }
    }
    let nk_session = "the NK session of the nk-* vectors";
    entries.extend([
        entry(
            "nk-sealed-echo-request",
            "secure",
            "tcp",
            "The client's first sealed frame on the NK session: counter 0, key nk-client-to-server-key, AAD the 7 header bytes with ENCRYPTED set.",
            json!({ "session": nk_session, "packet": ECHO, "request_id": 1, "flags": "ENCRYPTED", "fields": { "payload": "ping" }, "key": "nk-client-to-server-key", "counter": 0 }),
        ),
        entry(
            "nk-sealed-echo-response",
            "secure",
            "tcp",
            "The server's first sealed frame: the response to it, counter 0, key nk-server-to-client-key.",
            json!({ "session": nk_session, "packet": ECHO, "request_id": 1, "flags": "RESPONSE | ENCRYPTED", "fields": { "payload": "ping" }, "key": "nk-server-to-client-key", "counter": 0 }),
        ),
        entry(
            "nk-sealed-ping",
            "secure",
            "tcp",
            "The client's sealed PING (system frames are sealed too), id 2, counter 1.",
            json!({ "session": nk_session, "opcode": "0xFF02", "request_id": 2, "flags": "ENCRYPTED", "value": "0x0102030405060708", "key": "nk-client-to-server-key", "counter": 1 }),
        ),
        entry(
            "nk-sealed-rekey",
            "secure",
            "tcp",
            "The client's REKEY (0xFF05, id 0, empty body), counter 2: the last frame under the first key.",
            json!({ "session": nk_session, "opcode": "0xFF05", "request_id": 0, "flags": "ENCRYPTED", "body": "empty", "key": "nk-client-to-server-key", "counter": 2 }),
        ),
        entry(
            "nk-client-to-server-key-rekeyed",
            "secure",
            "bytes",
            "REKEY(nk-client-to-server-key): the first 32 bytes of ChaCha20-Poly1305 of 32 zero bytes, nonce 4 zero bytes then 0xFFFFFFFFFFFFFFFF, empty AAD.",
            json!({ "key": "nk-client-to-server-key" }),
        ),
        entry(
            "nk-sealed-echo-after-rekey",
            "secure",
            "tcp",
            "An echo request under the rekeyed key, id 3: counters go on (3), they are not reset.",
            json!({ "session": nk_session, "packet": ECHO, "request_id": 3, "flags": "ENCRYPTED", "fields": { "payload": "ping" }, "key": "nk-client-to-server-key-rekeyed", "counter": 3 }),
        ),
        entry(
            "nk-sealed-disconnect",
            "secure",
            "tcp",
            "The server's second sealed frame (counter 1): DISCONNECT SHUTDOWN with the text bye, sealed like any other frame.",
            json!({ "session": nk_session, "opcode": "0xFF04", "request_id": 0, "flags": "ENCRYPTED", "reason": 2, "reason_name": "SHUTDOWN", "text": "bye", "key": "nk-server-to-client-key", "counter": 1 }),
        ),
        entry(
            "resume-ticket-request",
            "resumption",
            "tcp",
            "RESUME_TICKET (0xFF08) as a request, id 4, empty body.",
            json!({ "opcode": "0xFF08", "request_id": 4, "flags": "none", "body": "empty" }),
        ),
        entry(
            "resume-ticket-response",
            "resumption",
            "tcp",
            "Its answer: ticket [u8; 32], ttl_ms u32.",
            json!({ "opcode": "0xFF08", "request_id": 4, "flags": "RESPONSE", "ticket": TICKET, "ttl_ms": 30000 }),
        ),
        entry(
            "resume-ticket-request-bound",
            "resumption",
            "tcp",
            "RESUME_TICKET as a request, id 4, whose body is the byte 1: the answer is to carry the server's replay bound.",
            json!({ "opcode": "0xFF08", "request_id": 4, "flags": "none", "body": "01" }),
        ),
        entry(
            "resume-ticket-response-bound",
            "resumption",
            "tcp",
            "Its answer: ticket [u8; 32], ttl_ms u32, replay_bytes u32 (65,536).",
            json!({ "opcode": "0xFF08", "request_id": 4, "flags": "RESPONSE", "ticket": TICKET, "ttl_ms": 30000, "replay_bytes": 65536 }),
        ),
        entry(
            "ack-frame",
            "resumption",
            "tcp",
            "ACK (0xFF09) of 40 counted frames, plain (sealed like any frame on a secure session).",
            json!({ "opcode": "0xFF09", "request_id": 0, "flags": "none", "received": 40 }),
        ),
        entry(
            "resume-psk",
            "resumption",
            "bytes",
            "The pre-shared key BLAKE2s-256(\"ternio/2 resume\" || secret).",
            json!({ "secret": SECRET }),
        ),
        entry(
            "resume-plain-request",
            "resumption",
            "tcp",
            "RESUME (0xFF0A) of a plain session, id 1: ticket, received 5, pattern 0, no Noise message.",
            json!({ "opcode": "0xFF0A", "request_id": 1, "flags": "none", "ticket": TICKET, "received": 5, "pattern": 0, "message": "" }),
        ),
        entry(
            "resumed-plain-response",
            "resumption",
            "tcp",
            "Its answer: received 3, the new ticket, ttl_ms, no Noise message.",
            json!({ "opcode": "0xFF0A", "request_id": 1, "flags": "RESPONSE", "received": 3, "ticket": NEW_TICKET, "ttl_ms": 30000, "message": "" }),
        ),
        entry(
            "resume-nnpsk0-request",
            "resumption",
            "tcp",
            "RESUME of a secure session with pattern 3 (Noise_NNpsk0_25519_ChaChaPoly_BLAKE2s, psk = resume-psk; prologue ternio/2 || ticket || received u64 LE || pattern, the 41 bytes of the body before message): message 1 is psk, e.",
            json!({ "opcode": "0xFF0A", "request_id": 1, "flags": "none", "ticket": TICKET, "received": 5, "pattern": 3, "secret": SECRET, "keys": keys() }),
        ),
        entry(
            "resumed-nnpsk0-response",
            "resumption",
            "tcp",
            "Its answer: received 3, the new ticket, ttl_ms, then message 2 (e, ee) whose payload is those 44 bytes (received u64 LE || ticket || ttl_ms u32 LE), encrypted: 92 bytes.",
            json!({ "opcode": "0xFF0A", "request_id": 1, "flags": "RESPONSE", "received": 3, "ticket": NEW_TICKET, "ttl_ms": 30000, "secret": SECRET, "keys": keys() }),
        ),
        entry(
            "resumed-nnpsk0-client-to-server-key",
            "resumption",
            "bytes",
            "The resumption's first key of Split(): client-to-server.",
            json!({ "handshake": "resume-nnpsk0-request and resumed-nnpsk0-response" }),
        ),
        entry(
            "resumed-nnpsk0-server-to-client-key",
            "resumption",
            "bytes",
            "The resumption's second key of Split(): server-to-client.",
            json!({ "handshake": "resume-nnpsk0-request and resumed-nnpsk0-response" }),
        ),
        entry(
            "resumed-nnpsk0-session-secret",
            "resumption",
            "bytes",
            "The resumption's session secret, which the next resumption's psk is made from.",
            json!({ "handshake": "resume-nnpsk0-request and resumed-nnpsk0-response" }),
        ),
        entry(
            "resumed-nnpsk0-sealed-replay",
            "resumption",
            "tcp",
            "The server's first frame after its answer: its counted frame number 5, a push Echo (id 0), replayed as first sent and sealed under the new server-to-client key, counter 0.",
            json!({ "packet": ECHO, "request_id": 0, "flags": "ENCRYPTED", "fields": { "payload": "ping" }, "key": "resumed-nnpsk0-server-to-client-key", "counter": 0 }),
        ),
        entry(
            "resume-nkpsk0-message-1",
            "resumption",
            "bytes",
            "The same resumption with pattern 4 (Noise_NKpsk0_25519_ChaChaPoly_BLAKE2s, pinning server-static-public; prologue ternio/2 || ticket || received 5 || pattern 4): RESUME's message (psk, e, es).",
            json!({ "ticket": TICKET, "received": 5, "pattern": 4, "secret": SECRET, "keys": keys() }),
        ),
        entry(
            "resume-nkpsk0-message-2",
            "resumption",
            "bytes",
            "NKpsk0: the answer's message (e, ee), its payload the answer's received 3, new ticket and ttl_ms 30000 (44 bytes), encrypted: 92 bytes.",
            json!({ "received": 3, "ticket": NEW_TICKET, "ttl_ms": 30000, "secret": SECRET, "keys": keys() }),
        ),
        entry(
            "resumed-nkpsk0-client-to-server-key",
            "resumption",
            "bytes",
            "NKpsk0: the first key of Split(), client-to-server.",
            json!({ "handshake": "resume-nkpsk0-message-1 and resume-nkpsk0-message-2" }),
        ),
        entry(
            "resumed-nkpsk0-server-to-client-key",
            "resumption",
            "bytes",
            "NKpsk0: the second key of Split(), server-to-client.",
            json!({ "handshake": "resume-nkpsk0-message-1 and resume-nkpsk0-message-2" }),
        ),
        entry(
            "datagram-bind-request",
            "datagrams",
            "tcp",
            "DATAGRAM_BIND (0xFF0C) request, id 6, empty body (before sealing: on the wire it is sealed like every frame of the session).",
            json!({ "opcode": "0xFF0C", "request_id": 6, "flags": "none", "body": "empty" }),
        ),
        entry(
            "datagram-bind-response",
            "datagrams",
            "tcp",
            "Its answer (before sealing): token [u8; 8], port u16, max_datagram u16.",
            json!({ "opcode": "0xFF0C", "request_id": 6, "flags": "RESPONSE", "token": TOKEN, "port": 7104, "max_datagram": 1200 }),
        ),
        entry(
            "datagram-client-to-server-key",
            "datagrams",
            "bytes",
            "BLAKE2s-256(\"ternio/2 datagram c2s\" || secret || token).",
            json!({ "secret": SECRET, "token": TOKEN }),
        ),
        entry(
            "datagram-server-to-client-key",
            "datagrams",
            "bytes",
            "BLAKE2s-256(\"ternio/2 datagram s2c\" || secret || token).",
            json!({ "secret": SECRET, "token": TOKEN }),
        ),
        entry(
            "datagram-sealed-push",
            "datagrams",
            "udp",
            "The server's first datagram (counter 0), the whole UDP payload: token, counter, the sealed frame of a push Echo (id 0, no flags), tag; AAD token || counter.",
            json!({ "packet": ECHO, "request_id": 0, "flags": "none", "fields": { "payload": "ping" }, "key": "datagram-server-to-client-key", "token": TOKEN, "counter": 0 }),
        ),
    ]);
    entries
}
