// The field codec and frames, against the test vectors of docs/PROTOCOL.md
// (parsed from the document, as protocol/tests/vectors.rs does).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import {
  TernioError, Flags, SystemOpcode, ErrorCode, DisconnectReason, encodeFrame, decodeFrame,
  packet, struct, enumType, vec, option, array, varint,
  u8, i8, u16, i16, u32, i32, u64, i64, f32, f64, bool, string, bytes,
} from '../dist/index.js';

const DOC = readFileSync(new URL('../../docs/PROTOCOL.md', import.meta.url), 'utf8');

/** The named hex blocks of the document: `vector: NAME`, then hex bytes until the closing fence. */
function documented() {
  const vectors = new Map();
  const lines = DOC.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i].startsWith('vector: ')) continue;
    const name = lines[i].slice('vector: '.length).trim();
    const out = [];
    for (i++; i < lines.length && !lines[i].startsWith('```'); i++) {
      for (const word of lines[i].split(/\s+/).filter(Boolean)) {
        assert.match(word, /^[0-9a-f]{2}$/i, `${name}: bad hex ${word}`);
        out.push(parseInt(word, 16));
      }
    }
    assert.ok(!vectors.has(name), `vector ${name} twice`);
    vectors.set(name, Uint8Array.from(out));
  }
  return vectors;
}

const VECTORS = documented();
const vector = (name) => {
  assert.ok(VECTORS.has(name), `docs/PROTOCOL.md has vector ${name}`);
  return VECTORS.get(name);
};

/** A TCP vector without its u32 length prefix (checked), i.e. a WebSocket message. */
function message(name) {
  const tcp = vector(name);
  const len = new DataView(tcp.buffer, tcp.byteOffset).getUint32(0, true);
  assert.equal(len, tcp.length - 4, `${name}: length prefix`);
  return tcp.subarray(4);
}

const text = (s) => new TextEncoder().encode(s);
const hexBytes = (s) => Uint8Array.from(s.split(/\s+/).filter(Boolean).map((b) => parseInt(b, 16)));
const codecError = (pattern) => (error) => {
  assert.ok(error instanceof TernioError, `a TernioError, got ${error}`);
  assert.equal(error.kind, 'codec');
  assert.match(error.message, pattern);
  return true;
};

const Echo = packet(0x0001, { payload: bytes }, { name: 'Echo' });
const Kind = enumType({ Stop: null, Move: { x: i16, y: i16 } }, 'Kind');
const Sample = packet(0x0123, {
  a: u8, b: i16, c: u32, d: f32, e: bool, s: string, v: vec(u16),
  o: option(i8), n: option(u64), arr: array(u8, 3), k: Kind,
}, { name: 'Sample' });
const sample = {
  a: 0xff, b: -2, c: 300, d: 1.5, e: true, s: 'hé', v: [1, 2],
  o: -1, n: null, arr: [9, 8, 7], k: { variant: 'Move', x: 3, y: -4 },
};

test('the document holds the plain vectors this module checks', () => {
  for (const name of ['echo-request', 'echo-response', 'echo-request-message', 'ack', 'error-unknown-opcode',
    'ping', 'pong', 'disconnect', 'varints', 'sample-push']) {
    vector(name);
  }
});

test('vector echo-request-message: an Echo request as a WebSocket message', () => {
  const bytesOut = encodeFrame({ opcode: Echo.opcode, requestId: 1, body: Echo.encode({ payload: text('ping') }) });
  assert.deepEqual(bytesOut, vector('echo-request-message'));
  const frame = decodeFrame(vector('echo-request-message'));
  assert.deepEqual({ ...frame, body: Echo.decode(frame.body) },
    { opcode: 1, flags: 0, requestId: 1, body: { payload: text('ping') } });
});

test('vectors echo-request and echo-response, without their TCP length prefix', () => {
  const body = Echo.encode({ payload: text('ping') });
  assert.deepEqual(encodeFrame({ opcode: 1, requestId: 1, body }), message('echo-request'));
  assert.deepEqual(encodeFrame({ opcode: 1, flags: Flags.RESPONSE, requestId: 1, body }), message('echo-response'));
  assert.deepEqual(message('echo-request'), vector('echo-request-message'));
});

test('vector ack: an empty body under the request opcode', () => {
  assert.deepEqual(encodeFrame({ opcode: 0x0040, flags: Flags.RESPONSE, requestId: 5 }), message('ack'));
  const frame = decodeFrame(message('ack'));
  assert.equal(frame.body.length, 0);
});

test('vector error-unknown-opcode: code u16 then the UTF-8 message to the end', () => {
  const body = new Uint8Array([ErrorCode.UNKNOWN_OPCODE, 0, ...text('no handler')]);
  const frame = { opcode: 0x0099, flags: Flags.RESPONSE | Flags.ERROR, requestId: 2, body };
  assert.deepEqual(encodeFrame(frame), message('error-unknown-opcode'));
  assert.deepEqual(decodeFrame(message('error-unknown-opcode')), frame);
});

test('vectors ping and pong: a u64 value', () => {
  const value = u64.encode(0x0102030405060708n);
  assert.deepEqual(encodeFrame({ opcode: SystemOpcode.PING, requestId: 3, body: value }), message('ping'));
  assert.deepEqual(encodeFrame({ opcode: SystemOpcode.PONG, flags: Flags.RESPONSE, requestId: 3, body: value }), message('pong'));
  assert.equal(u64.decode(decodeFrame(message('ping')).body), 0x0102030405060708n);
});

test('vector disconnect: reason u16 then text', () => {
  const Disconnect = struct({ reason: u16 });
  const body = new Uint8Array([...Disconnect.encode({ reason: DisconnectReason.FRAME_TOO_LARGE }), ...text('too big')]);
  assert.deepEqual(encodeFrame({ opcode: SystemOpcode.DISCONNECT, body }), message('disconnect'));
});

test('vector varints: 0, 127, 128, 300, 16384, u32::MAX', () => {
  const values = [0, 127, 128, 300, 16384, 0xffffffff];
  assert.deepEqual(array(varint, 6).encode(values), vector('varints'));
  assert.deepEqual(array(varint, 6).decode(vector('varints')), values);
});

test('vector sample-push: every field type at once, as a push', () => {
  const frame = { opcode: 0x0123, flags: 0, requestId: 0, body: Sample.encode(sample) };
  assert.deepEqual(encodeFrame(frame), message('sample-push'));
  const decoded = decodeFrame(message('sample-push'));
  assert.equal(decoded.opcode, Sample.opcode);
  assert.deepEqual(Sample.decode(decoded.body), sample);
});

test('integers: ranges, little-endian, BigInt for 64 bits', () => {
  const cases = [
    [u8, 255, 'ff'], [i8, -128, '80'], [u16, 0x1234, '34 12'], [i16, -2, 'fe ff'],
    [u32, 0xffffffff, 'ff ff ff ff'], [i32, -0x80000000, '00 00 00 80'],
    [u64, 0xffffffffffffffffn, 'ff ff ff ff ff ff ff ff'], [i64, -(2n ** 63n), '00 00 00 00 00 00 00 80'],
    [f64, -0.5, '00 00 00 00 00 00 e0 bf'], [f32, 1.5, '00 00 c0 3f'],
  ];
  for (const [type, value, encoded] of cases) {
    assert.deepEqual(type.encode(value), hexBytes(encoded), `${type.name} ${value}`);
    assert.deepEqual(type.decode(hexBytes(encoded)), value, `${type.name} ${encoded}`);
  }
  assert.deepEqual(u64.encode(300), u64.encode(300n), 'a safe integer encodes as u64');
  assert.throws(() => u8.encode(256), codecError(/u8 expects an integer in 0\.\.=255, got 256/));
  assert.throws(() => i8.encode(1.5), codecError(/i8/));
  assert.throws(() => u32.encode(-1), codecError(/u32/));
  assert.throws(() => u16.encode('1'), codecError(/u16/));
  assert.throws(() => u64.encode(-1n), codecError(/u64/));
  assert.throws(() => u64.encode(2n ** 64n), codecError(/u64/));
  assert.throws(() => i64.encode(2n ** 63n), codecError(/i64/));
  assert.throws(() => u64.encode(2 ** 60), codecError(/u64/), 'an unsafe integer number is refused');
  assert.throws(() => u32.decode(hexBytes('01 02 03')), codecError(/needs 4 more bytes, 3 left/));
  assert.ok(Number.isNaN(f32.decode(f32.encode(NaN))));
});

test('bool: 0 or 1 only', () => {
  assert.deepEqual(bool.encode(false), hexBytes('00'));
  assert.equal(bool.decode(hexBytes('01')), true);
  assert.throws(() => bool.decode(hexBytes('02')), codecError(/bool must be 0 or 1, got 2/));
  assert.throws(() => bool.encode(1), codecError(/true or false/));
});

test('varint: at most 5 bytes, at most u32::MAX, overlong accepted', () => {
  assert.equal(varint.decode(hexBytes('80 00')), 0, 'overlong within 5 bytes');
  assert.equal(varint.decode(hexBytes('ff ff ff ff 0f')), 0xffffffff);
  assert.throws(() => varint.decode(hexBytes('ff ff ff ff 1f')), codecError(/above u32::MAX/));
  assert.throws(() => varint.decode(hexBytes('80 80 80 80 80 00')), codecError(/longer than 5 bytes/));
  assert.throws(() => varint.decode(hexBytes('80')), codecError(/needs 1 more byte, 0 left/));
  assert.throws(() => varint.encode(2 ** 32), codecError(/length/));
});

test('string: strict UTF-8', () => {
  assert.deepEqual(string.encode('hé'), hexBytes('03 68 c3 a9'));
  assert.equal(string.decode(hexBytes('03 68 c3 a9')), 'hé');
  assert.equal(string.decode(hexBytes('03 ef bb bf')), '\ufeff', 'a BOM is kept, as Rust keeps it');
  assert.equal(string.decode(hexBytes('04 f0 9f 98 80')), '😀');
  for (const bad of ['02 c3 28', '02 c0 80', '03 ed a0 80', '01 ff', '01 c3']) {
    assert.throws(() => string.decode(hexBytes(bad)), codecError(/not valid UTF-8/), bad);
  }
  assert.throws(() => string.decode(hexBytes('05 61')), codecError(/length 5 exceeds the 1 byte left/));
  assert.throws(() => string.encode('\ud800'), codecError(/lone surrogate/));
  assert.throws(() => string.encode(5), codecError(/expects a string/));
});

test('bytes: a length and a copy', () => {
  const input = hexBytes('03 01 02 03');
  const out = bytes.decode(input);
  assert.deepEqual(out, hexBytes('01 02 03'));
  input[1] = 9;
  assert.equal(out[0], 1, 'decoded bytes do not alias the message');
  assert.deepEqual(bytes.encode(new Uint8Array([7]).buffer), hexBytes('01 07'));
  assert.throws(() => bytes.encode('abc'), codecError(/Uint8Array/));
});

test('vec, option, array', () => {
  assert.deepEqual(vec(u16).encode([1, 2]), hexBytes('02 01 00 02 00'));
  assert.deepEqual(vec(u16).encode(new Uint16Array([1, 2])), hexBytes('02 01 00 02 00'));
  assert.deepEqual(vec(string).decode(hexBytes('02 01 61 00')), ['a', '']);
  assert.throws(() => vec(u16).decode(hexBytes('03 01 00 02 00')), codecError(/count 3 of u16 exceeds/));
  assert.throws(() => vec(u32).decode(hexBytes('ff ff ff ff 0f')), codecError(/count 4294967295/), 'refused before reading');
  const Empty = struct({});
  assert.equal(vec(Empty).decode(hexBytes('80 80 04')).length, 65536);
  assert.throws(() => vec(Empty).decode(hexBytes('81 80 04')), codecError(/count 65537/));
  assert.deepEqual(option(u8).encode(null), hexBytes('00'));
  assert.deepEqual(option(u8).encode(undefined), hexBytes('00'));
  assert.deepEqual(option(u8).encode(0), hexBytes('01 00'));
  assert.equal(option(u8).decode(hexBytes('00')), null);
  assert.throws(() => option(u8).decode(hexBytes('02 00')), codecError(/option tag must be 0 or 1, got 2/));
  assert.deepEqual(array(i8, 2).encode([-1, 1]), hexBytes('ff 01'));
  assert.throws(() => array(i8, 2).encode([1]), codecError(/expects 2 elements, got 1/));
  assert.throws(() => vec(u8).encode('ab'), codecError(/expects an array/));
});

test('struct and enum: declared order, clear errors with the field path', () => {
  const Point = struct({ x: i16, y: i16 }, 'Point');
  const Line = packet(0x0200, { from: Point, to: Point, tags: vec(string) }, { name: 'Line' });
  const line = { from: { x: 1, y: 2 }, to: { x: -1, y: -2 }, tags: ['a'] };
  assert.deepEqual(Line.decode(Line.encode(line)), line);
  assert.throws(() => Line.encode({ ...line, to: { x: 1 } }), codecError(/^Line\.to\.y: i16 expects an integer/));
  assert.throws(() => Line.encode({ ...line, tags: ['a', 7] }), codecError(/^Line\.tags\[1\]: string expects a string/));
  assert.throws(() => Line.decode(hexBytes('01 00 02 00 03 00 04 00 00 ff')), codecError(/^Line: 1 trailing byte after/));
  assert.throws(() => Line.decode(hexBytes('01 00 02 00 03 00')), codecError(/^Line\.to\.y: needs 2 more bytes/));
  assert.throws(() => Point.encode(null), codecError(/Point expects an object/));
  // Sample: a nested packet is its fields.
  const Wrapper = struct({ echo: Echo, after: u8 });
  assert.deepEqual(Wrapper.encode({ echo: { payload: text('x') }, after: 1 }), hexBytes('01 78 01'));
  // Tuple-like fields (integer keys) keep their order; pairs for anything else.
  const Pair = struct([['b', u8], ['1', u8]]);
  assert.deepEqual(Pair.encode({ b: 1, 1: 2 }), hexBytes('01 02'));
  assert.deepEqual(struct({ 0: u8, 1: u16 }).encode([5, 6]), hexBytes('05 06 00'));
  assert.throws(() => struct({ b: u8, 1: u8 }), TypeError);
  assert.throws(() => struct({ a: 'u8' }), /field a is not a Ternio type/);

  assert.deepEqual(Kind.encode({ variant: 'Stop' }), hexBytes('00'));
  assert.deepEqual(Kind.decode(hexBytes('00')), { variant: 'Stop' });
  assert.throws(() => Kind.decode(hexBytes('02')), codecError(/variant index 2 out of range \(2 variants\)/));
  assert.throws(() => Kind.encode({ variant: 'Jump' }), codecError(/Kind expects \{ variant: "Stop" \| "Move"/));
  assert.throws(() => Kind.encode({ variant: 'Move', x: 1 }), codecError(/^Kind\.y: i16/));
  assert.throws(() => enumType({ A: { variant: u8 } }), TypeError);
});

test('packet: application opcodes only', () => {
  assert.throws(() => packet(0xff00, {}), TypeError);
  assert.throws(() => packet(-1, {}), TypeError);
  assert.equal(packet(0xfeff, {}).opcode, 0xfeff);
  assert.equal(packet(0x10, {}).name, 'packet 0x0010');
  const Sum = packet(0x0011, { value: i64 });
  assert.equal(packet(0x0010, { a: i64, b: i64 }, { response: Sum }).response, Sum);
  assert.throws(() => packet(0x0010, {}, { response: u8 }), TypeError);
});

test('frames: header checks', () => {
  assert.throws(() => decodeFrame(hexBytes('01 00 00 01 00 00')), codecError(/shorter than its 7-byte header/));
  assert.throws(() => decodeFrame(hexBytes('01 00 10 01 00 00 00')), codecError(/reserved flag bits/));
  assert.throws(() => decodeFrame(hexBytes('01 00 80 01 00 00 00')), codecError(/reserved flag bits/));
  const frame = decodeFrame(hexBytes('ff ff 07 ff ff ff ff 2a').buffer);
  assert.deepEqual(frame, { opcode: 0xffff, flags: 7, requestId: 0xffffffff, body: hexBytes('2a') });
  assert.deepEqual(encodeFrame(frame), hexBytes('ff ff 07 ff ff ff ff 2a'));
  assert.throws(() => encodeFrame({ opcode: 0x10000 }), TypeError);
  assert.throws(() => encodeFrame({ opcode: 1, flags: 0x10 }), TypeError);
  assert.equal(decodeFrame(hexBytes('01 00 08 01 00 00 00')).flags, Flags.COMPRESSED);
  assert.throws(() => encodeFrame({ opcode: 1, requestId: 2 ** 32 }), TypeError);
});
