/**
 * Ternio for the browser: the plain (unencrypted) part of the Ternio wire
 * contract, version 2, over WebSocket. One ES module, no build step, no
 * dependency; it also runs in Node ≥ 20 (whose `WebSocket` needs
 * `--experimental-websocket` before Node 22).
 *
 * - Frames: a 7-byte little-endian header (opcode u16, flags u8,
 *   request id u32) and a body; one frame per binary WebSocket message.
 * - The section-3 field codec: integers, floats, bool, strings, bytes,
 *   vectors, options, arrays, structs and enums, declared with
 *   {@link packet}, {@link struct} and friends.
 * - {@link Client}: requests matched by id with promises and timeouts,
 *   fire-and-forget sends, pushes by opcode, PING/PONG, DISCONNECT.
 * - Staying connected: a keepalive PING whose missing PONG drops a dead
 *   connection, a bounded outbound buffer (`bufferedAmount` checked before
 *   each send), a bounded connection attempt, and, with the option
 *   `reconnect` (off by default), reconnection with exponential backoff and
 *   full jitter that restarts only after a connection stayed up for a while,
 *   a longer floor after `DISCONNECT TOO_MANY_CONNECTIONS` or `SHUTDOWN`,
 *   and none after {@link Client#close}, `DISCONNECT KICKED` or `NORMAL`.
 *   `onStateChange` tells of `'open'`, `'reconnecting'` and `'closed'`.
 * - Session resumption (section 4.2, plain sessions), on with `reconnect`
 *   unless `resume: false`: a ticket, counted frames and their `ACK`s, a
 *   bounded replay buffer, and `RESUME` first on a new connection, so that
 *   requests in flight get their answers and pushes arrive once, in order.
 *   `onSessionChange` tells of `'resumed'` and `'lost'`. The plain ticket is
 *   a bearer token: use `wss://`.
 *
 * - Compression (section 6): COMPRESSED frames are always decoded, with an
 *   LZ4 block decoder of this module's own; the option `compress` sends
 *   bodies above a threshold compressed ({@link lz4CompressBlock}).
 *
 * Secure sessions (HANDSHAKE, sealed frames) are not implemented.
 *
 * @example
 * import { Client, packet, bytes } from './ternio.js';
 * const Echo = packet(0x0001, { payload: bytes }, { name: 'Echo' });
 * const client = await Client.connect('ws://127.0.0.1:7002/ws', {
 *   reconnect: true,
 *   onStateChange: (event) => console.log(event.state, event.error?.message ?? ''),
 * });
 * const reply = await client.request(Echo, { payload: new TextEncoder().encode('hi') });
 *
 * @module ternio
 */

// ---------------------------------------------------------------- constants

/** The WebSocket subprotocol a client offers. */
export const SUBPROTOCOL = 'ternio.v2';

/** Size of a frame header: opcode u16, flags u8, request id u32. */
export const HEADER_LEN = 7;

/** The largest frame (header and body) accepted unless configured otherwise: 1 MiB. */
export const DEFAULT_MAX_FRAME_SIZE = 1024 * 1024;

/** Frame flag bits (section 1); bits 3..7 are reserved and must be 0. */
export const Flags = Object.freeze({ RESPONSE: 0x01, ERROR: 0x02, ENCRYPTED: 0x04, COMPRESSED: 0x08 });

/** The flag bits the contract defines; the others are reserved. */
const KNOWN_FLAGS = 0x0f;

/** Opcodes of the system packets (section 4). */
export const SystemOpcode = Object.freeze({
  HANDSHAKE: 0xff01, PING: 0xff02, PONG: 0xff03, DISCONNECT: 0xff04, REKEY: 0xff05,
  CANCEL: 0xff06, DEADLINE: 0xff07, RESUME_TICKET: 0xff08, ACK: 0xff09, RESUME: 0xff0a,
  STREAM_ITEM: 0xff0d, STREAM_CREDIT: 0xff0e, STREAM_END: 0xff0f,
});

/** Items a stream's sender may send before any STREAM_CREDIT (docs/PROTOCOL.md section 4.5). */
export const STREAM_INITIAL_CREDIT = 32;

/** Error codes of `RESPONSE | ERROR` frames (section 2); 100 and up belong to the application. */
export const ErrorCode = Object.freeze({
  UNKNOWN_OPCODE: 1, MALFORMED: 2, UNAUTHORIZED: 3, RATE_LIMITED: 4, TIMEOUT: 5,
  ENCRYPTION_REQUIRED: 6, INTERNAL: 7, OVERLOADED: 8, HANDSHAKE_FAILED: 9, DECRYPT_FAILED: 10,
});

/** Reasons carried by `DISCONNECT` (section 4). */
export const DisconnectReason = Object.freeze({
  NORMAL: 1, SHUTDOWN: 2, MALFORMED: 3, FRAME_TOO_LARGE: 4, IDLE_TIMEOUT: 5,
  HANDSHAKE_TIMEOUT: 6, DECRYPT_FAILED: 7, TOO_MANY_CONNECTIONS: 8, SLOW_CONSUMER: 9, KICKED: 10,
});

const nameIn = (table, value) => Object.keys(table).find((key) => table[key] === value);
const hex = (opcode) => `0x${opcode.toString(16).padStart(4, '0').toUpperCase()}`;
const count = (n, what) => `${n} ${what}${n === 1 ? '' : 's'}`;
const show = (value) => (typeof value === 'bigint' ? `${value}n` : typeof value === 'string' ? JSON.stringify(value) : String(value));

// ------------------------------------------------------------------- errors

/**
 * Every error this module throws or rejects with. `kind` says which:
 * - `'remote'`: the server answered with an error frame; `code` and `remoteMessage` hold it;
 * - `'timeout'`: no response within the request's timeout (`timeout`, in ms);
 * - `'closed'`: the connection is closed or closed while the request waited;
 *   `disconnect` holds the server's `DISCONNECT` when it sent one;
 * - `'codec'`: a value does not encode, or bytes do not decode (`path` locates the field);
 * - `'protocol'`: the server sent something the contract does not allow.
 */
export class TernioError extends Error {
  /**
   * @param {'remote'|'timeout'|'closed'|'codec'|'protocol'} kind
   * @param {string} message
   * @param {{code?: number, remoteMessage?: string, timeout?: number,
   *   disconnect?: Disconnect|null, path?: Array<string|number>, cause?: unknown}} [details]
   */
  constructor(kind, message, details = {}) {
    super(message, 'cause' in details ? { cause: details.cause } : undefined);
    this.name = 'TernioError';
    /** Which kind of failure. */
    this.kind = kind;
    /** `'remote'`: the error code (see {@link ErrorCode}). */
    this.code = details.code;
    /** `'remote'`: the server's message, as sent. */
    this.remoteMessage = details.remoteMessage;
    /** `'timeout'`: the timeout that expired, in ms. */
    this.timeout = details.timeout;
    /** `'closed'`: the server's `DISCONNECT`, or null when it sent none. */
    this.disconnect = details.disconnect ?? null;
    /** `'codec'`: where in the value the problem is (field names and indexes). */
    this.path = details.path ?? [];
  }
}

const codecError = (reason) => Object.assign(new TernioError('codec', reason), { reason });

/** Runs `fn`, adding `segment` to the path of a codec error it throws. */
function within(segment, fn) {
  try {
    return fn();
  } catch (error) {
    if (error instanceof TernioError && error.kind === 'codec') error.path.unshift(segment);
    throw error;
  }
}

/** Runs a top-level encode or decode, naming the type and field in a codec error's message. */
function topLevel(type, fn) {
  try {
    return fn();
  } catch (error) {
    if (error instanceof TernioError && error.kind === 'codec') {
      const where = error.path.map((s) => (typeof s === 'number' ? `[${s}]` : `.${s}`)).join('');
      error.message = `${type.name}${where}: ${error.reason ?? error.message}`;
    }
    throw error;
  }
}

// ---------------------------------------------------------- writer, reader

class Writer {
  constructor(reserve = 0) {
    this.buf = new Uint8Array(64 + reserve);
    this.view = new DataView(this.buf.buffer);
    this.len = reserve;
  }

  /** Makes room for `n` bytes and returns where they start. */
  take(n) {
    if (this.len + n > this.buf.length) {
      const grown = new Uint8Array(Math.max(this.buf.length * 2, this.len + n));
      grown.set(this.buf.subarray(0, this.len));
      this.buf = grown;
      this.view = new DataView(grown.buffer);
    }
    const at = this.len;
    this.len += n;
    return at;
  }

  put(bytes) {
    const at = this.take(bytes.length);
    this.buf.set(bytes, at);
  }

  finish() {
    return this.buf.slice(0, this.len);
  }
}

class Reader {
  constructor(bytes) {
    this.bytes = bytes;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.pos = 0;
  }

  get remaining() {
    return this.bytes.length - this.pos;
  }

  /** Consumes `n` bytes and returns where they start. */
  take(n) {
    if (n > this.remaining) throw codecError(`needs ${count(n, 'more byte')}, ${this.remaining} left`);
    const at = this.pos;
    this.pos += n;
    return at;
  }
}

function toBytes(data) {
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  throw codecError(`expects a Uint8Array or ArrayBuffer, got ${show(data)}`);
}

// -------------------------------------------------------------- field types

/**
 * A field type of section 3: how one value is written and read. The
 * exported constants and the results of {@link vec}, {@link option},
 * {@link array}, {@link struct}, {@link enumType} and {@link packet} are types.
 * @typedef {object} Type
 * @property {string} name Its name in error messages.
 * @property {number} minSize The fewest bytes one value takes.
 * @property {(w: Writer, value: any) => void} write Appends a value (used by composite types).
 * @property {(r: Reader) => any} read Reads a value (used by composite types).
 * @property {(value: any) => Uint8Array} encode Encodes a value on its own (a whole body).
 * @property {(bytes: Uint8Array|ArrayBuffer) => any} decode Decodes a whole body; trailing bytes are an error.
 */

function defineType(name, minSize, write, read, extra = {}) {
  const type = {
    name, minSize, write, read, ...extra,
    encode(value) {
      const w = new Writer();
      topLevel(type, () => write(w, value));
      return w.finish();
    },
    decode(data) {
      return topLevel(type, () => {
        const r = new Reader(toBytes(data));
        const value = read(r);
        if (r.remaining) throw codecError(`${count(r.remaining, 'trailing byte')} after the last field`);
        return value;
      });
    },
  };
  return Object.freeze(type);
}

function integer(name, size, min, max, set, get) {
  return defineType(name, size, (w, v) => {
    if (!Number.isInteger(v) || v < min || v > max) {
      throw codecError(`${name} expects an integer in ${min}..=${max}, got ${show(v)}`);
    }
    const at = w.take(size);
    w.view[set](at, v, true);
  }, (r) => r.view[get](r.take(size), true));
}

function bigInteger(name, min, max, set, get) {
  return defineType(name, 8, (w, v) => {
    const ok = typeof v === 'bigint' || Number.isSafeInteger(v);
    if (!ok || BigInt(v) < min || BigInt(v) > max) {
      throw codecError(`${name} expects a BigInt (or safe integer) in ${min}..=${max}, got ${show(v)}`);
    }
    const at = w.take(8);
    w.view[set](at, BigInt(v), true);
  }, (r) => r.view[get](r.take(8), true));
}

function float(name, size, set, get) {
  return defineType(name, size, (w, v) => {
    if (typeof v !== 'number') throw codecError(`${name} expects a number, got ${show(v)}`);
    const at = w.take(size);
    w.view[set](at, v, true);
  }, (r) => r.view[get](r.take(size), true));
}

/** u8: one byte, 0..=255 (a number). */
export const u8 = integer('u8', 1, 0, 0xff, 'setUint8', 'getUint8');
/** i8: one byte, -128..=127 (a number). */
export const i8 = integer('i8', 1, -0x80, 0x7f, 'setInt8', 'getInt8');
/** u16: two bytes, little-endian (a number). */
export const u16 = integer('u16', 2, 0, 0xffff, 'setUint16', 'getUint16');
/** i16: two bytes, little-endian (a number). */
export const i16 = integer('i16', 2, -0x8000, 0x7fff, 'setInt16', 'getInt16');
/** u32: four bytes, little-endian (a number). */
export const u32 = integer('u32', 4, 0, 0xffffffff, 'setUint32', 'getUint32');
/** i32: four bytes, little-endian (a number). */
export const i32 = integer('i32', 4, -0x80000000, 0x7fffffff, 'setInt32', 'getInt32');
/** u64: eight bytes, little-endian; decodes to a BigInt, encodes a BigInt or a safe integer. */
export const u64 = bigInteger('u64', 0n, 0xffffffffffffffffn, 'setBigUint64', 'getBigUint64');
/** i64: eight bytes, little-endian; decodes to a BigInt, encodes a BigInt or a safe integer. */
export const i64 = bigInteger('i64', -(2n ** 63n), 2n ** 63n - 1n, 'setBigInt64', 'getBigInt64');
/** f32: IEEE 754 single precision (a number, rounded on encode). */
export const f32 = float('f32', 4, 'setFloat32', 'getFloat32');
/** f64: IEEE 754 double precision (a number). */
export const f64 = float('f64', 8, 'setFloat64', 'getFloat64');

/** bool: one byte, 0 or 1; any other byte does not decode. Encodes `true` or `false` only. */
export const bool = defineType('bool', 1, (w, v) => {
  if (typeof v !== 'boolean') throw codecError(`bool expects true or false, got ${show(v)}`);
  w.buf[w.take(1)] = v ? 1 : 0;
}, (r) => {
  const byte = r.bytes[r.take(1)];
  if (byte > 1) throw codecError(`bool must be 0 or 1, got ${byte}`);
  return byte === 1;
});

function writeVarint(w, value) {
  if (!Number.isInteger(value) || value < 0 || value > 0xffffffff) {
    throw codecError(`a length must be an integer in 0..=4294967295, got ${show(value)}`);
  }
  do {
    const low = value % 128;
    value = Math.floor(value / 128);
    w.buf[w.take(1)] = value > 0 ? low | 0x80 : low;
  } while (value > 0);
}

function readVarint(r) {
  let value = 0;
  for (let i = 0; i < 5; i++) {
    const byte = r.bytes[r.take(1)];
    value += (byte & 0x7f) * 2 ** (7 * i);
    if ((byte & 0x80) === 0) {
      if (value > 0xffffffff) throw codecError(`varint ${value} is above u32::MAX`);
      return value;
    }
  }
  throw codecError('varint longer than 5 bytes');
}

/** A length prefix on its own: unsigned LEB128, at most 5 bytes, at most u32::MAX (a number). */
export const varint = defineType('varint', 1, writeVarint, readVarint);

/** Reads a byte length and checks it fits in what is left, before taking anything. */
function readLength(r) {
  const len = readVarint(r);
  if (len > r.remaining) throw codecError(`length ${len} exceeds the ${count(r.remaining, 'byte')} left`);
  return len;
}

const utf8Encoder = new TextEncoder();
const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const lossyUtf8 = new TextDecoder('utf-8', { ignoreBOM: true });

/** String: varint byte length, then UTF-8. Invalid UTF-8 does not decode; lone surrogates do not encode. */
export const string = defineType('string', 1, (w, v) => {
  if (typeof v !== 'string') throw codecError(`string expects a string, got ${show(v)}`);
  if (typeof v.isWellFormed === 'function' && !v.isWellFormed()) {
    throw codecError('string holds a lone surrogate, which has no UTF-8 form');
  }
  const encoded = utf8Encoder.encode(v);
  writeVarint(w, encoded.length);
  w.put(encoded);
}, (r) => {
  const len = readLength(r);
  const at = r.take(len);
  try {
    return strictUtf8.decode(r.bytes.subarray(at, at + len));
  } catch {
    throw codecError('string is not valid UTF-8');
  }
});

/** Bytes (`Bytes`, `Vec<u8>`): varint length, then the bytes. Decodes to a Uint8Array (a copy). */
export const bytes = defineType('bytes', 1, (w, v) => {
  const data = toBytes(v);
  writeVarint(w, data.length);
  w.put(data);
}, (r) => {
  const len = readLength(r);
  const at = r.take(len);
  return r.bytes.slice(at, at + len);
});

function checkType(type, where) {
  if (!type || typeof type.write !== 'function' || typeof type.read !== 'function') {
    throw new TypeError(`${where} is not a Ternio type (u8, string, struct(...), ...)`);
  }
  return type;
}

function elements(name, v) {
  if (Array.isArray(v) || (ArrayBuffer.isView(v) && !(v instanceof DataView))) return v;
  throw codecError(`${name} expects an array, got ${show(v)}`);
}

/** Vec<T>: varint element count, then each element. Decodes to an Array. */
export function vec(type) {
  checkType(type, 'vec() element');
  const name = `vec<${type.name}>`;
  return defineType(name, 1, (w, v) => {
    const items = elements(name, v);
    writeVarint(w, items.length);
    for (let i = 0; i < items.length; i++) within(i, () => type.write(w, items[i]));
  }, (r) => {
    const n = readVarint(r);
    const fits = type.minSize === 0 ? n <= 65536 : n <= Math.floor(r.remaining / type.minSize);
    if (!fits) throw codecError(`count ${n} of ${type.name} exceeds what the ${count(r.remaining, 'byte')} left can hold`);
    const out = [];
    for (let i = 0; i < n; i++) out.push(within(i, () => type.read(r)));
    return out;
  });
}

/** Option<T>: byte 0 (none: `null`, or `undefined` on encode) or byte 1 followed by T. */
export function option(type) {
  checkType(type, 'option() inner');
  return defineType(`option<${type.name}>`, 1, (w, v) => {
    const some = v !== null && v !== undefined;
    w.buf[w.take(1)] = some ? 1 : 0;
    if (some) type.write(w, v);
  }, (r) => {
    const tag = r.bytes[r.take(1)];
    if (tag > 1) throw codecError(`option tag must be 0 or 1, got ${tag}`);
    return tag === 1 ? type.read(r) : null;
  });
}

/** [T; N]: exactly N elements, no count. Decodes to an Array. */
export function array(type, length) {
  checkType(type, 'array() element');
  if (!Number.isInteger(length) || length < 0) throw new TypeError(`array() length must be a count, got ${length}`);
  const name = `[${type.name}; ${length}]`;
  return defineType(name, type.minSize * length, (w, v) => {
    const items = elements(name, v);
    if (items.length !== length) throw codecError(`${name} expects ${length} elements, got ${items.length}`);
    for (let i = 0; i < length; i++) within(i, () => type.write(w, items[i]));
  }, (r) => {
    const out = [];
    for (let i = 0; i < length; i++) out.push(within(i, () => type.read(r)));
    return out;
  });
}

/** The [name, type] pairs of a field list, in declaration order. */
function fieldsOf(fields, owner) {
  if (Array.isArray(fields)) {
    for (const [key, type] of fields) checkType(type, `${owner} field ${key}`);
    return fields;
  }
  const entries = Object.entries(fields ?? {});
  const numeric = entries.filter(([key]) => /^\d+$/.test(key)).length;
  if (numeric && numeric !== entries.length) {
    // JavaScript lists integer-like keys first: the order would not be the declared one.
    throw new TypeError(`${owner}: mixes numeric and named fields; pass [name, type] pairs instead`);
  }
  for (const [key, type] of entries) checkType(type, `${owner} field ${key}`);
  return entries;
}

function writeFields(entries, w, v, name) {
  if (v === null || typeof v !== 'object') throw codecError(`${name} expects an object, got ${show(v)}`);
  for (const [key, type] of entries) within(key, () => type.write(w, v[key]));
}

function readFields(entries, r, out) {
  for (const [key, type] of entries) out[key] = within(key, () => type.read(r));
  return out;
}

/**
 * A struct: its fields in declaration order, no tags, no padding. Decodes
 * to a plain object with those keys.
 * @param {Record<string, Type>|Array<[string, Type]>} fields Field names and types, in order.
 * @param {string} [name] Its name in error messages.
 * @returns {Type}
 * @example const Point = struct({ x: i16, y: i16 }, 'Point');
 */
export function struct(fields, name = 'struct') {
  const entries = fieldsOf(fields, name);
  const minSize = entries.reduce((sum, [, type]) => sum + type.minSize, 0);
  return defineType(name, minSize, (w, v) => writeFields(entries, w, v, name),
    (r) => readFields(entries, r, {}));
}

/**
 * An enum: a u8 variant index (declaration order), then the variant's
 * fields. A value is an object whose `variant` key names the variant, with
 * the variant's fields beside it: `{ variant: 'Move', x: 3, y: -4 }`.
 * @param {Record<string, Record<string, Type>|Array<[string, Type]>|null>} variants
 *   Variant names, in declaration order, each with its fields (`null` or `{}` for none).
 * @param {string} [name] Its name in error messages.
 * @returns {Type}
 * @example const Kind = enumType({ Stop: null, Move: { x: i16, y: i16 } }, 'Kind');
 */
export function enumType(variants, name = 'enum') {
  const list = Object.entries(variants).map(([variant, fields]) => {
    const entries = fieldsOf(fields, `${name}::${variant}`);
    if (entries.some(([key]) => key === 'variant')) {
      throw new TypeError(`${name}::${variant}: a field may not be called "variant"`);
    }
    return [variant, entries];
  });
  if (list.length === 0 || list.length > 256) throw new TypeError(`${name}: needs 1 to 256 variants`);
  return defineType(name, 1, (w, v) => {
    const index = list.findIndex(([variant]) => variant === v?.variant);
    if (index < 0) {
      throw codecError(`${name} expects { variant: ${list.map(([n]) => JSON.stringify(n)).join(' | ')}, ... }, got variant ${show(v?.variant)}`);
    }
    w.buf[w.take(1)] = index;
    writeFields(list[index][1], w, v, name);
  }, (r) => {
    const index = r.bytes[r.take(1)];
    if (index >= list.length) throw codecError(`variant index ${index} out of range (${list.length} variants)`);
    const [variant, entries] = list[index];
    return readFields(entries, r, { variant });
  });
}

function checkOpcode(opcode, what = 'an application opcode', max = 0xfeff) {
  if (!Number.isInteger(opcode) || opcode < 0 || opcode > max) {
    throw new TypeError(`${show(opcode)} is not ${what} (0x0000..=${hex(max)})`);
  }
  return opcode;
}

/**
 * A packet type: a struct with an application opcode. Use it with
 * {@link Client#request}, {@link Client#send} and {@link Client#on}, or as
 * a field of another type (a nested packet encodes as its fields).
 * @param {number} opcode 0x0000..=0xFEFF.
 * @param {Record<string, Type>|Array<[string, Type]>} fields Field names and types, in order.
 * @param {{name?: string, response?: Type & {opcode: number}, compress?: boolean}} [options]
 *   `name` for messages; `response`: the packet type the server answers
 *   with, when it is not this one; `compress: false`: never sent
 *   compressed, even by a client with the option `compress` (for a packet
 *   that mixes secrets with what others choose: compression leaks their
 *   length, as in CRIME).
 * @returns {Type & {opcode: number, response?: Type}}
 * @example const Add = packet(0x0010, { a: i64, b: i64 }, { name: 'Add', response: Sum });
 */
export function packet(opcode, fields, options = {}) {
  checkOpcode(opcode);
  const name = options.name ?? `packet ${hex(opcode)}`;
  const base = struct(fields, name);
  if (options.response !== undefined) checkOpcode(options.response?.opcode, `${name}'s response packet type`);
  const compress = options.compress ?? true;
  if (typeof compress !== 'boolean') throw new TypeError(`${name}: compress must be true or false, got ${show(compress)}`);
  if (options.item !== undefined && typeof options.item?.decode !== 'function') {
    throw new TypeError(`${name}: item must be a type (the items of its stream)`);
  }
  return defineType(name, base.minSize, base.write, base.read, { opcode, response: options.response, compress, item: options.item });
}

// -------------------------------------------------------------- compression
//
// Section 6 of the contract: a COMPRESSED body is `uncompressed_len: u32` LE
// followed by an LZ4 block. The codec below is written from the LZ4 block
// format: a block is a series of sequences, each a token byte (high nibble:
// literal count, low nibble: match length - 4, a nibble of 15 continued by
// bytes that add up, 255 meaning another follows), the literals, a 2-byte
// LE offset back into the output and the match; the last sequence has
// literals only. Encoders leave the last 5 bytes as literals and start no
// match within the last 12 bytes.

const MIN_MATCH = 4;
const LAST_LITERALS = 5;
const MATCH_FIND_LIMIT = 12;
const MAX_OFFSET = 0xffff;
const HASH_BITS = 12;

/** Appends a length continued past a nibble of 15: bytes of 255, then the rest. */
function pushLength(out, rest) {
  while (rest >= 255) {
    out.push(255);
    rest -= 255;
  }
  out.push(rest);
}

/**
 * Compresses `input` as one LZ4 block (no frame header, no length): a greedy
 * encoder with a 4,096-entry hash table of 4-byte sequences. Deterministic:
 * the same input gives the same block (another encoder may give another
 * valid block).
 * @param {Uint8Array} input
 * @returns {Uint8Array}
 */
export function lz4CompressBlock(input) {
  const src = toBytes(input);
  const n = src.length;
  const out = [];
  const table = new Int32Array(1 << HASH_BITS).fill(-1);
  const read32 = (at) => (src[at] | (src[at + 1] << 8) | (src[at + 2] << 16) | (src[at + 3] << 24)) >>> 0;
  const hash = (word) => Math.imul(word, 2654435761) >>> (32 - HASH_BITS);
  const emit = (literalEnd, offset, matchLength) => {
    const literals = literalEnd - anchor;
    const matchCode = matchLength - MIN_MATCH;
    out.push((Math.min(literals, 15) << 4) | (offset ? Math.min(matchCode, 15) : 0));
    if (literals >= 15) pushLength(out, literals - 15);
    for (let k = anchor; k < literalEnd; k++) out.push(src[k]);
    if (!offset) return;
    out.push(offset & 0xff, offset >> 8);
    if (matchCode >= 15) pushLength(out, matchCode - 15);
  };
  let anchor = 0;
  let i = 0;
  // A match starts at least 12 bytes before the end and ends at least 5 before it.
  while (i + MATCH_FIND_LIMIT <= n) {
    const word = read32(i);
    const h = hash(word);
    const candidate = table[h];
    table[h] = i;
    if (candidate >= 0 && i - candidate <= MAX_OFFSET && read32(candidate) === word) {
      let length = MIN_MATCH;
      const end = n - LAST_LITERALS;
      while (i + length < end && src[candidate + length] === src[i + length]) length++;
      emit(i, i - candidate, length);
      i += length;
      anchor = i;
    } else {
      i++;
    }
  }
  emit(n, 0, 0);
  return Uint8Array.from(out);
}

/**
 * Decodes one LZ4 block into exactly `length` bytes. A block that does not
 * decode (cut short, an offset of 0 or before the start of the output) or
 * that decodes to fewer or more bytes is a `'codec'` {@link TernioError}.
 * @param {Uint8Array} block
 * @param {number} length The size the block must decode to.
 * @returns {Uint8Array}
 */
export function lz4DecompressBlock(block, length) {
  const src = toBytes(block);
  const out = new Uint8Array(length);
  let ip = 0;
  let op = 0;
  const more = (what) => {
    if (ip >= src.length) throw codecError(`LZ4 block ends inside ${what}`);
    return src[ip++];
  };
  const extend = (value, what) => {
    let byte;
    do {
      byte = more(what);
      value += byte;
    } while (byte === 255);
    return value;
  };
  for (;;) {
    const token = more('a token');
    let literals = token >> 4;
    if (literals === 15) literals = extend(literals, 'a literal length');
    if (ip + literals > src.length) throw codecError('LZ4 block ends inside its literals');
    if (op + literals > length) throw codecError(`LZ4 block decodes to more than the announced ${length} bytes`);
    out.set(src.subarray(ip, ip + literals), op);
    ip += literals;
    op += literals;
    if (ip === src.length) break; // the last sequence: literals only
    const offset = more('an offset') | (more('an offset') << 8);
    if (offset === 0 || offset > op) throw codecError(`LZ4 match offset ${offset} outside the ${op} bytes decoded`);
    let matchLength = token & 15;
    if (matchLength === 15) matchLength = extend(matchLength, 'a match length');
    matchLength += MIN_MATCH;
    if (op + matchLength > length) throw codecError(`LZ4 block decodes to more than the announced ${length} bytes`);
    // Byte by byte: a match may overlap what it writes (a run).
    for (let k = 0; k < matchLength; k++, op++) out[op] = out[op - offset];
  }
  if (op !== length) throw codecError(`LZ4 block decodes to ${op} bytes, not the announced ${length}`);
  return out;
}

/**
 * A body compressed as section 6 says: `uncompressed_len` (u32 LE), then
 * the LZ4 block.
 * @param {Uint8Array} body
 * @returns {Uint8Array}
 */
export function compressBody(body) {
  const data = toBytes(body);
  const block = lz4CompressBlock(data);
  const out = new Uint8Array(4 + block.length);
  new DataView(out.buffer).setUint32(0, data.length, true);
  out.set(block, 4);
  return out;
}

/**
 * Decompresses a COMPRESSED body. Its `uncompressed_len` is checked against
 * `maxLength` before anything is allocated: above it, a `'codec'`
 * {@link TernioError} with `tooLarge: true` (the contract's
 * `FRAME_TOO_LARGE`); a body that does not decode to exactly that length, a
 * `'codec'` one without it (`MALFORMED`).
 * @param {Uint8Array} body
 * @param {number} [maxLength=1048569] The largest body accepted (the default: 1 MiB frames).
 * @returns {Uint8Array}
 */
export function decompressBody(body, maxLength = DEFAULT_MAX_FRAME_SIZE - HEADER_LEN) {
  const data = toBytes(body);
  if (data.length < 4) throw codecError(`compressed body of ${count(data.length, 'byte')} has no room for its length`);
  const length = new DataView(data.buffer, data.byteOffset, data.byteLength).getUint32(0, true);
  if (length > maxLength) {
    throw Object.assign(codecError(`compressed body announces ${length} bytes, above the maximum of ${maxLength}`), { tooLarge: true });
  }
  return lz4DecompressBlock(data.subarray(4), length);
}

/**
 * A frame encoded for the wire (`data`: compressed when `threshold` says)
 * and uncompressed (`plain`: what the replay buffer keeps).
 */
function encodeBoth(frame, threshold) {
  const plain = encodeFrame(frame);
  const packed = maybeCompress(frame, threshold);
  return { data: packed === frame ? plain : encodeFrame(packed), plain };
}

/**
 * The frame's body compressed (and COMPRESSED set) when `threshold` is a
 * number, the body is at least that long and compressing makes it smaller;
 * the frame as it is otherwise.
 * @param {{opcode: number, flags?: number, requestId?: number, body: Uint8Array}} frame
 * @param {number|null|undefined} threshold
 */
export function maybeCompress(frame, threshold) {
  if (typeof threshold !== 'number' || frame.body.length < threshold) return frame;
  const compressed = compressBody(frame.body);
  if (compressed.length >= frame.body.length) return frame;
  return { ...frame, flags: (frame.flags ?? 0) | Flags.COMPRESSED, body: compressed };
}

// ------------------------------------------------------------------- frames

/**
 * One frame: the header's fields and the body.
 * @typedef {object} Frame
 * @property {number} opcode u16.
 * @property {number} flags Bits of {@link Flags}.
 * @property {number} requestId u32; 0 for pushes and fire-and-forget sends.
 * @property {Uint8Array} body The encoded packet (section 3).
 */

/**
 * Encodes a frame as one WebSocket message: the 7-byte header, then the
 * body (no length prefix; a TCP frame would be preceded by a u32 length).
 * @param {{opcode: number, flags?: number, requestId?: number, body?: Uint8Array}} frame
 * @returns {Uint8Array}
 */
export function encodeFrame({ opcode, flags = 0, requestId = 0, body = new Uint8Array(0) }) {
  checkOpcode(opcode, 'an opcode', 0xffff);
  if (!Number.isInteger(flags) || flags < 0 || flags > KNOWN_FLAGS) throw new TypeError(`invalid flags ${show(flags)}`);
  if (!Number.isInteger(requestId) || requestId < 0 || requestId > 0xffffffff) {
    throw new TypeError(`invalid request id ${show(requestId)}`);
  }
  const data = toBytes(body);
  const out = new Uint8Array(HEADER_LEN + data.length);
  const view = new DataView(out.buffer);
  view.setUint16(0, opcode, true);
  view.setUint8(2, flags);
  view.setUint32(3, requestId, true);
  out.set(data, HEADER_LEN);
  return out;
}

/**
 * Decodes one WebSocket message as a frame. A message shorter than the
 * header, or with a reserved flag bit set, is a `'codec'` {@link TernioError}.
 * The body is a view into `message`, not a copy.
 * @param {Uint8Array|ArrayBuffer} message
 * @returns {Frame}
 */
export function decodeFrame(message) {
  const data = toBytes(message);
  if (data.length < HEADER_LEN) throw codecError(`frame of ${count(data.length, 'byte')} is shorter than its 7-byte header`);
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const flags = view.getUint8(2);
  if (flags & ~KNOWN_FLAGS) throw codecError(`frame has reserved flag bits set (flags 0x${flags.toString(16)})`);
  return { opcode: view.getUint16(0, true), flags, requestId: view.getUint32(3, true), body: data.subarray(HEADER_LEN) };
}

/** The body of an ERROR frame or a DISCONNECT: a u16, then lossy UTF-8 text to the end. */
function codeAndText(body) {
  if (body.length < 2) return null;
  return { code: body[0] | (body[1] << 8), text: lossyUtf8.decode(body.subarray(2)) };
}

function codeAndTextBody(code, text) {
  const encoded = utf8Encoder.encode(text);
  const out = new Uint8Array(2 + encoded.length);
  out[0] = code & 0xff;
  out[1] = code >> 8;
  out.set(encoded, 2);
  return out;
}

function remoteError(body) {
  const parsed = codeAndText(body);
  if (!parsed) return new TernioError('protocol', `error frame body of ${count(body.length, 'byte')} has no code`);
  const { code, text } = parsed;
  const label = nameIn(ErrorCode, code) ?? (code >= 100 ? 'application error' : 'error');
  return new TernioError('remote', `${label} ${code}: ${text}`, { code, remoteMessage: text });
}

// --------------------------------------------------------------- resumption
//
// Section 4.2 of the contract, for plain sessions (pattern 0): every frame
// with an application opcode is counted, both ways, from the ticket on;
// each side keeps what it sent until the other's ACK, and a RESUME on a new
// connection replays what the other side lacks.

/** The replay buffer's default bound in bytes (7 per frame plus its plain body), as the Rust client's. */
export const DEFAULT_REPLAY_BYTES = 64 * 1024;
/** An ACK goes out once this many counted frames are unacknowledged (section 4.2's default)... */
export const ACK_EVERY_FRAMES = 128;
/** ... or this many bytes of them (7 per frame plus its plain body)... */
export const ACK_EVERY_BYTES = 16 * 1024;
/** ... or this many ms after the first unacknowledged one, whichever comes first. */
export const ACK_DELAY = 200;

const TICKET_LEN = 32;
/** RESUME's pattern for a plain session: no Noise handshake. */
const PLAIN_PATTERN = 0;

/** Whether frames with this opcode are counted, acknowledged and replayed (the application's). */
const isCounted = (opcode) => opcode <= 0xfeff;
/** The opcode of an encoded frame. */
const opcodeOf = (data) => data[0] | (data[1] << 8);

/**
 * The counted frames a side sent and the other has not acknowledged yet,
 * kept whole (header and plain body), bounded in bytes. A frame that would
 * pass the bound ends the buffer for good (`overflowed`): from then on the
 * session cannot be resumed, but frames are still numbered.
 */
export class ReplayBuffer {
  #frames = [];
  /** Where the first kept frame is in `#frames` (acknowledged ones before it are dropped lazily). */
  #head = 0;

  /** @param {number} [limit] The bound in bytes. */
  constructor(limit = DEFAULT_REPLAY_BYTES) {
    /** The bound, in bytes. */
    this.limit = limit;
    /** Counted frames sent so far (numbered from 0). */
    this.sent = 0;
    /** The number of the first frame kept. */
    this.first = 0;
    /** The highest count the other side acknowledged. */
    this.acknowledged = 0;
    /** Bytes kept. */
    this.bytes = 0;
    /** Whether a frame passed the bound: nothing is kept any more. */
    this.overflowed = false;
  }

  /** How many frames are kept. */
  get length() {
    return this.#frames.length - this.#head;
  }

  /**
   * Numbers and keeps a frame just sent (an encoded frame, body uncompressed).
   * @param {Uint8Array} frame
   * @returns {boolean} Whether it is kept (false: the buffer overflowed, now or before).
   */
  record(frame) {
    this.sent++;
    if (this.overflowed) return false;
    if (this.bytes + frame.length > this.limit) {
      this.overflowed = true;
      this.#frames = [];
      this.#head = 0;
      this.bytes = 0;
      return false;
    }
    this.#frames.push(frame);
    this.bytes += frame.length;
    return true;
  }

  /**
   * Takes the other side's count of frames received: the frames before it are dropped.
   * @param {number} received
   * @returns {string|null} Why the count is a protocol error (ahead of what was sent, or backwards), or null.
   */
  acknowledge(received) {
    if (received > this.sent) return `ACK of ${received} frames, but only ${this.sent} were sent`;
    if (received < this.acknowledged) return `ACK of ${received} frames after one of ${this.acknowledged}`;
    this.acknowledged = received;
    if (this.overflowed) return null;
    for (; this.first < received; this.first++) this.bytes -= this.#frames[this.#head++].length;
    if (this.#head > 64 && this.#head * 2 > this.#frames.length) {
      this.#frames = this.#frames.slice(this.#head);
      this.#head = 0;
    }
    return null;
  }

  /**
   * The frames the other side lacks when it received `received`, in order;
   * null when they are not all kept (or `received` is ahead of what was sent).
   * @param {number} received
   * @returns {Uint8Array[]|null}
   */
  replayFrom(received) {
    if (this.overflowed || received < this.first || received > this.sent) return null;
    return this.#frames.slice(this.#head + (received - this.first));
  }
}

/**
 * The count of counted frames received, and when it is due in an `ACK`:
 * once `frames` or `bytes` of them are unacknowledged (the delay is the
 * client's timer).
 */
export class AckSchedule {
  constructor({ frames = ACK_EVERY_FRAMES, bytes = ACK_EVERY_BYTES } = {}) {
    this.everyFrames = frames;
    this.everyBytes = bytes;
    /** Counted frames received so far. */
    this.count = 0;
    /** The count last acknowledged. */
    this.acked = 0;
    this.unackedBytes = 0;
  }

  /**
   * Counts a frame received of `size` bytes (header and plain body).
   * @returns {boolean} Whether an ACK is due now.
   */
  received(size) {
    this.count++;
    this.unackedBytes += size;
    return this.count - this.acked >= this.everyFrames || this.unackedBytes >= this.everyBytes;
  }

  /** Whether frames were received since the last acknowledgement. */
  get hasUnacked() {
    return this.count > this.acked;
  }

  /** Marks everything received acknowledged; returns the count to send. */
  take() {
    this.acked = this.count;
    this.unackedBytes = 0;
    return this.count;
  }
}

/**
 * The body of a plain session's `RESUME`: the ticket, the count of frames
 * received, pattern 0 and no Noise message.
 * @param {Uint8Array} ticket 32 bytes.
 * @param {number} received
 * @returns {Uint8Array}
 */
export function resumeBody(ticket, received) {
  const out = new Uint8Array(TICKET_LEN + 9);
  out.set(ticket, 0);
  new DataView(out.buffer).setBigUint64(TICKET_LEN, BigInt(received), true);
  out[TICKET_LEN + 8] = PLAIN_PATTERN;
  return out;
}

/** `RESUME_TICKET`'s answer: `{ ticket, ttl }` (ttl in ms), or null when the body is not one. */
function parseTicket(body) {
  if (body.length !== TICKET_LEN + 4) return null;
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  return { ticket: body.slice(0, TICKET_LEN), ttl: view.getUint32(TICKET_LEN, true) };
}

/** `RESUME`'s answer: `{ received, ticket, ttl, message }`, or null when the body is too short. */
function parseResumed(body) {
  if (body.length < 8 + TICKET_LEN + 4) return null;
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  return {
    received: Number(view.getBigUint64(0, true)),
    ticket: body.slice(8, 8 + TICKET_LEN),
    ttl: view.getUint32(8 + TICKET_LEN, true),
    message: body.subarray(12 + TICKET_LEN),
  };
}

/**
 * The client's side of a session's resumption: its ticket, what it sent
 * and keeps, what it received and acknowledges.
 */
class Session {
  constructor(replayBytes) {
    this.replayBytes = replayBytes;
    /** Resumptions so far, over the client's life. */
    this.resumptions = 0;
    this.reset();
  }

  /** Forgets the session: a new one starts, nothing recorded or counted until its ticket is asked for. */
  reset() {
    /** The current ticket; null when there is none, or the session can no longer be resumed. */
    this.ticket = null;
    /** How long the server keeps the session after a loss, in ms. */
    this.ttl = 0;
    /** The id of the `RESUME_TICKET` waiting for its answer. */
    this.ticketId = null;
    /** What was sent and not acknowledged: recording starts with the ticket's request. */
    this.replay = null;
    /** What was received: counting starts with the ticket's answer. */
    this.acks = null;
    /** Whether the server gave this session a ticket: its loss is worth reporting. */
    this.held = false;
    /** When (Date.now()) the connection was lost, while the session waits to be resumed. */
    this.lostAt = null;
    /** Why the session cannot be resumed, once its connection was lost: reported with the next connection. */
    this.ended = null;
  }

  /** Whether a lost connection can be resumed: a ticket, and every frame the server may lack kept. */
  get resumable() {
    return this.ticket !== null && this.replay !== null && !this.replay.overflowed;
  }

  /** `RESUME_TICKET` went out with id `id`: what is sent from now on is recorded. */
  asked(id) {
    this.ticketId = id;
    this.replay ??= new ReplayBuffer(this.replayBytes);
  }

  /** The server's ticket: what is received from now on is counted. */
  granted({ ticket, ttl }) {
    this.ticketId = null;
    this.ticket = ticket;
    this.ttl = ttl;
    this.acks ??= new AckSchedule();
    this.held = true;
  }

  /** Records a counted frame just sent; an overflow ends resumability (the connection goes on). */
  record(frame) {
    if (this.replay && !this.replay.record(frame)) this.ticket = null;
  }
}

function resumeOptions(option) {
  if (!option) return null;
  const replayBytes = option === true ? DEFAULT_REPLAY_BYTES : option.replayBytes ?? DEFAULT_REPLAY_BYTES;
  if (typeof replayBytes !== 'number' || !(replayBytes >= 0)) {
    throw new TypeError(`resume.replayBytes must be a number ≥ 0, got ${show(replayBytes)}`);
  }
  return { replayBytes };
}

// ------------------------------------------------------------------- client

/**
 * A `DISCONNECT` the server sent.
 * @typedef {object} Disconnect
 * @property {number} reason See {@link DisconnectReason}.
 * @property {string} reasonName Such as `'SHUTDOWN'` (`'UNKNOWN'` for an unlisted reason).
 * @property {string} message The server's text.
 */

/**
 * How a connection ended.
 * @typedef {object} CloseInfo
 * @property {number} code The WebSocket close code (1006: the connection dropped, or
 *   this side gave up on it: keepalive timeout, full outbound buffer, connect timeout).
 * @property {string} reason The WebSocket close reason (or this side's, such as `'keepalive timeout'`).
 * @property {Disconnect|null} disconnect The server's `DISCONNECT`, if it sent one.
 * @property {boolean} local Whether this side ended it: {@link Client#close}, a protocol
 *   violation by the server, a keepalive timeout or a full outbound buffer.
 */

/**
 * When and how a lost connection is re-established (the option `reconnect`).
 * Delays are in ms. Attempt `n` (from 1) waits a random time in
 * `[0, min(initialDelay * multiplier^(n-1), maxDelay))` ("full jitter").
 * After `DISCONNECT TOO_MANY_CONNECTIONS` or `SHUTDOWN` it waits at least
 * `refusalDelay`, plus a random time up to `max(refusalDelay, that range)`.
 * The attempt count goes back to 0 only once a connection has stayed up
 * for `healthyAfter`: a server that accepts and at once refuses does not
 * restart the backoff.
 * @typedef {object} ReconnectOptions
 * @property {number} [initialDelay=100] The range of the first attempt's delay.
 * @property {number} [maxDelay=5000] The largest range (before the refusal floor).
 * @property {number} [multiplier=2] How much the range grows per attempt (below 1 counts as 1).
 * @property {number} [refusalDelay=2000] The floor after `TOO_MANY_CONNECTIONS` (8) or `SHUTDOWN` (2).
 * @property {number} [healthyAfter=5000] How long a connection must stay up before the attempt count resets.
 * @property {number} [maxAttempts=10] Attempts in a row before the client closes for good (Infinity: never).
 */

/**
 * A change of the connection's state, given to `onStateChange`:
 * - `{ state: 'open', attempt }`: a connection is up; `attempt` is 0 for
 *   the first one, else the reconnect attempt that succeeded;
 * - `{ state: 'reconnecting', attempt, delay, error }`: the connection (or
 *   an attempt) was lost because of `error` (a `'closed'` {@link TernioError},
 *   with `disconnect` when the server said why, or `'protocol'` when the
 *   server broke the contract); attempt `attempt` starts in `delay` ms;
 * - `{ state: 'closed', info, error }`: the client is closed for good (as
 *   {@link Client#closed} says); `error` is what waiting requests were rejected with.
 * @typedef {{state: 'open', attempt: number}
 *   | {state: 'reconnecting', attempt: number, delay: number, error: TernioError}
 *   | {state: 'closed', info: CloseInfo, error: TernioError}} StateEvent
 */

/**
 * What became of the session on a new connection, given to
 * `onSessionChange` (with the option `resume`), just before the `'open'`
 * state event of that connection:
 * - `{ session: 'resumed', count, attempt }`: the session was resumed
 *   (resumption number `count`): the requests in flight get their answers
 *   and the pushes sent meanwhile arrive, each once and in order;
 * - `{ session: 'lost', reason, attempt }`: it could not be (the server
 *   refused or forgot it, its time to live passed, the client's replay
 *   buffer overflowed, or a `DISCONNECT` ended it): a new session starts on
 *   the connection, and the requests in flight failed (`'closed'`).
 * @typedef {{session: 'resumed', count: number, attempt: number}
 *   | {session: 'lost', reason: string, attempt: number}} SessionEvent
 */

/**
 * Resumption's settings (the option `resume`).
 * @typedef {object} ResumeOptions
 * @property {number} [replayBytes=65536] The bound of the replay buffer (frames sent and not
 *   acknowledged yet, 7 bytes each plus the body uncompressed); past it the session can no
 *   longer be resumed, but the connection goes on.
 */

/**
 * Options of a {@link Client}.
 * @typedef {object} ClientOptions
 * @property {number} [timeout=10000] Default request timeout in ms (0 or Infinity: none).
 *   While the client reconnects, the wait for the new connection counts toward it.
 * @property {(error: unknown) => void} [onError] Receives what no promise can: error frames
 *   without a request id (a failed fire-and-forget send), push handler exceptions, pushes
 *   that do not decode, an `onStateChange` that throws. Defaults to `console.error`.
 * @property {(event: StateEvent) => void} [onStateChange] Told when the connection opens,
 *   is lost and is re-established, or closes for good.
 * @property {boolean|ReconnectOptions} [reconnect=false] Whether (`true`: with the defaults)
 *   and how to re-establish a lost connection. Off by default.
 * @property {boolean|ResumeOptions} [resume=true] With `reconnect`, whether a reconnection
 *   resumes the session (contract section 4.2, plain sessions: the ticket is a bearer
 *   token, so use `wss://`): the client asks the server for a ticket once connected, and a
 *   lost connection keeps its requests in flight for the next one. Nothing happens without
 *   `reconnect`, nor with a server that does not offer resumption.
 * @property {(event: SessionEvent) => void} [onSessionChange] Told, with `resume`, whether
 *   each reconnection resumed the session or started a new one.
 * @property {number} [keepaliveInterval=15000] How long after a connection opens, or
 *   after the last keepalive PONG, the client sends a keepalive PING (0: no keepalive).
 * @property {number} [keepaliveTimeout=10000] How long the client waits for that PONG
 *   before it drops the connection as dead (and reconnects, if it does).
 * @property {number} [connectTimeout=10000] How long one connection attempt (the first
 *   or a reconnect) may take to open.
 * @property {number} [maxBufferedBytes=4194304] The outbound buffer's limit in bytes: a
 *   frame that would take the WebSocket's `bufferedAmount` above it drops the connection
 *   (the server does not read); it also bounds the requests that wait for a new connection.
 * @property {number|null} [compress=null] Compress the body of requests and sends of at
 *   least this many bytes when that makes them smaller (LZ4, contract section 6), except
 *   packet types declared with `compress: false`. `null` (the default): nothing is sent
 *   compressed. Compressed frames from the server are always decoded.
 * @property {number} [maxFrameSize=1048576] The largest frame (header and body) accepted
 *   from the server once decompressed; a compressed frame that announces more is
 *   `DISCONNECT FRAME_TOO_LARGE`, before anything is allocated for it.
 * @property {typeof WebSocket} [WebSocket] The WebSocket class to use (default: the global one).
 */

const OPEN = 1;

/** Reasons after which the client does not reconnect: the server ended the conversation on purpose. */
const FINAL_REASONS = [DisconnectReason.NORMAL, DisconnectReason.KICKED];
/** Reasons after which the next attempt waits at least `refusalDelay`. */
const REFUSAL_REASONS = [DisconnectReason.TOO_MANY_CONNECTIONS, DisconnectReason.SHUTDOWN];

/** Timers that must not keep Node running on their own (a browser's have no `unref`). */
const unref = (timer) => {
  timer?.unref?.();
  return timer;
};

function reconnectPolicy(option) {
  if (!option) return null;
  const given = option === true ? {} : option;
  const policy = {
    initialDelay: given.initialDelay ?? 100,
    maxDelay: given.maxDelay ?? 5000,
    multiplier: Math.max(1, given.multiplier ?? 2),
    refusalDelay: given.refusalDelay ?? 2000,
    healthyAfter: given.healthyAfter ?? 5000,
    maxAttempts: given.maxAttempts ?? 10,
  };
  for (const [key, value] of Object.entries(policy)) {
    if (typeof value !== 'number' || Number.isNaN(value) || value < 0) {
      throw new TypeError(`reconnect.${key} must be a number ≥ 0, got ${show(value)}`);
    }
  }
  return Object.freeze(policy);
}

/**
 * A connection to a Ternio server over WebSocket, re-established when lost
 * if the option `reconnect` says so.
 *
 * @example
 * const client = await Client.connect('ws://localhost:7002/ws', {
 *   reconnect: true,
 *   onStateChange: (event) => console.log(event.state, event.attempt ?? '', event.error?.message ?? ''),
 * });
 * const off = client.on(Note, (note) => console.log('note', note.seq));
 * const sum = await client.request(Add, { a: 2n, b: 3n }, { timeout: 5000 });
 * await client.close();
 */
export class Client {
  #WebSocket;
  #url = null;
  /** The current WebSocket (open, or an attempt in progress); null between attempts and once closed. */
  #ws = null;
  /** 'idle' | 'connecting' (the first connection) | 'open' | 'reconnecting' | 'closed'. */
  #state = 'idle';
  /** Requests by id: `sent` once on the wire; unsent ones wait for a connection. */
  #pending = new Map();
  /** Open streams by request id (docs/PROTOCOL.md section 4.5). */
  #streams = new Map();
  /** Ids of streams a lost connection failed, cancelled once the session resumes. */
  #abandonedStreams = [];
  /** Bytes of the requests that wait for a connection. */
  #queuedBytes = 0;
  #nextId = 1;
  #handlers = new Map();
  #unhandled = 0;
  /** The `DISCONNECT` received on the current connection. */
  #disconnect = null;
  /** close() was called. */
  #closing = false;
  /** The server broke the contract on the current connection. */
  #violated = false;
  #policy;
  /** Reconnect attempts since the last healthy connection. */
  #attempt = 0;
  /** The keepalive PING waiting for its PONG: `{ id, timer }`. */
  #keepalive = null;
  #timers = { connect: null, keepalive: null, healthy: null, retry: null, ack: null, resume: null };
  /** Resumption's state (section 4.2); null when the client does not resume sessions. */
  #session = null;
  /** The `RESUME` waiting for its answer on the current connection: `{ id }`. */
  #resuming = null;
  /** Settles the first connect(). */
  #connecting = null;
  #resolveClosed;

  /** @param {ClientOptions} [options] */
  constructor(options = {}) {
    this.#WebSocket = options.WebSocket ?? globalThis.WebSocket;
    this.#policy = reconnectPolicy(options.reconnect);
    const resume = resumeOptions(options.resume ?? true);
    if (this.#policy && resume) this.#session = new Session(resume.replayBytes);
    /** Default request timeout in ms (0 or Infinity: none). */
    this.timeout = options.timeout ?? 10000;
    /** Where errors that belong to no request go (see {@link ClientOptions}). */
    this.onError = options.onError ?? ((error) => console.error('ternio:', error));
    /**
     * Told of every change of the connection's state (see {@link StateEvent}).
     * @type {((event: StateEvent) => void)|null}
     */
    this.onStateChange = options.onStateChange ?? null;
    /**
     * Told whether each reconnection resumed the session (see {@link SessionEvent}).
     * @type {((event: SessionEvent) => void)|null}
     */
    this.onSessionChange = options.onSessionChange ?? null;
    /** Keepalive PING period in ms (0: none); read when a connection opens. */
    this.keepaliveInterval = options.keepaliveInterval ?? 15000;
    /** How long a keepalive PING waits for its PONG, in ms. */
    this.keepaliveTimeout = options.keepaliveTimeout ?? 10000;
    /** How long one connection attempt may take, in ms. */
    this.connectTimeout = options.connectTimeout ?? 10000;
    /** The outbound buffer's limit, in bytes. */
    this.maxBufferedBytes = options.maxBufferedBytes ?? 4 * 1024 * 1024;
    /** The compression threshold of what the client sends, in bytes (null: off). */
    this.compress = options.compress ?? null;
    if (this.compress !== null && (typeof this.compress !== 'number' || !(this.compress >= 0))) {
      throw new TypeError(`compress must be a number ≥ 0 or null, got ${show(this.compress)}`);
    }
    /** The largest frame accepted from the server once decompressed, in bytes. */
    this.maxFrameSize = options.maxFrameSize ?? DEFAULT_MAX_FRAME_SIZE;
    /**
     * Settles once the client has closed for good (after the last reconnect
     * attempt, when it reconnects), with how.
     * @type {Promise<CloseInfo>}
     */
    this.closed = new Promise((resolve) => { this.#resolveClosed = resolve; });
  }

  /**
   * Creates a client and connects it.
   * @param {string} url Such as `ws://host:port/ws` (or `wss://`).
   * @param {ClientOptions} [options]
   * @returns {Promise<Client>}
   */
  static async connect(url, options) {
    return new Client(options).connect(url);
  }

  /**
   * Opens the WebSocket, offering the subprotocol `ternio.v2`. Once per
   * client. When this first connection fails the client is closed: only a
   * connection that was once up is re-established.
   * @param {string} url
   * @returns {Promise<Client>} This client, once open; a `'closed'` {@link TernioError} if it cannot connect.
   */
  connect(url) {
    return new Promise((resolve, reject) => {
      if (this.#url !== null || this.#state !== 'idle') throw new Error('connect() may be called once per Client');
      if (typeof this.#WebSocket !== 'function') {
        throw new TernioError('closed', 'no WebSocket here (Node 20 needs --experimental-websocket, or pass options.WebSocket)');
      }
      this.#url = url;
      this.#state = 'connecting';
      this.#connecting = { resolve: () => resolve(this), reject };
      this.#dial();
    });
  }

  /** Whether a connection is open and not closing. */
  get isOpen() {
    return this.#state === 'open' && !this.#closing && !this.#violated && !this.#disconnect;
  }

  /**
   * `'idle'` (before connect()), `'connecting'` (the first connection),
   * `'open'`, `'reconnecting'` (between attempts, or during one) or `'closed'`.
   * @type {'idle'|'connecting'|'open'|'reconnecting'|'closed'}
   */
  get state() {
    return this.#state;
  }

  /** How many requests wait for their response (including those waiting for a new connection). */
  get inFlight() {
    return this.#pending.size;
  }

  /**
   * Whether a lost connection would be resumed now: the client resumes
   * sessions, the server gave a ticket, and the replay buffer has not
   * overflowed.
   */
  get resumable() {
    return this.#session?.resumable ?? false;
  }

  /** How many times the session was resumed so far. */
  get resumptions() {
    return this.#session?.resumptions ?? 0;
  }

  /** How many pushes arrived that no {@link Client#on} handler took (they are dropped). */
  get unhandledPushes() {
    return this.#unhandled;
  }

  /**
   * Sends a request and waits for its response. While the client
   * reconnects, the request waits for the new connection (within its
   * timeout); a request already sent when the connection is lost is
   * rejected at once (`'closed'`): the server may or may not have run it;
   * unless the session is resumable (option `resume`): then it is answered
   * on the resumed session, or rejected if the session is lost.
   *
   * The response is decoded with `options.response`, the packet type's
   * `response`, or the packet type itself (whichever has the response's
   * opcode); an acknowledgement (empty body, the request's opcode) resolves
   * to `undefined`. With a number instead of a packet type, `value` is the
   * raw body (a Uint8Array) and the promise resolves with the raw {@link Frame}.
   *
   * @param {(Type & {opcode: number})|number} packetType
   * @param {any} value
   * @param {{timeout?: number, response?: Type & {opcode: number}}} [options]
   * @returns {Promise<any>} Rejected with a {@link TernioError}: `'remote'`, `'timeout'`,
   *   `'closed'`, `'codec'` (the value or the response does not code) or `'protocol'`.
   */
  request(packetType, value, options = {}) {
    return new Promise((resolve, reject) => {
      const { opcode, body, name, compress } = this.#outgoing(packetType, value, true);
      const expected = options.response ?? packetType.response;
      const decode = typeof packetType === 'number' ? (frame) => frame : (frame) => {
        if (expected && frame.opcode === expected.opcode) return expected.decode(frame.body);
        if (frame.opcode === opcode) return frame.body.length === 0 ? undefined : packetType.decode(frame.body);
        throw new TernioError('protocol', `${name} answered with unexpected opcode ${hex(frame.opcode)}`);
      };
      this.#call(opcode, body, name, options.timeout, decode, resolve, reject, undefined, compress);
    });
  }

  /**
   * Sends a packet that expects no reply (request id 0). A server that
   * cannot handle it reports an error frame without id, given to `onError`.
   * It is not kept for later: while the client reconnects it throws.
   * @param {(Type & {opcode: number})|number} packetType A packet type, or an opcode with a raw body.
   * @param {any} value
   * @throws {TernioError} `'closed'` when not connected (or reconnecting), or when the
   *   outbound buffer is full (the connection is then dropped); `'codec'` when the value does not encode.
   */
  send(packetType, value) {
    const { opcode, body, compress } = this.#outgoing(packetType, value, false);
    const { data, plain } = encodeBoth({ opcode, body }, compress);
    const error = this.#write(data, plain);
    if (error) throw error;
  }

  /**
   * Calls `handler` for every push (a frame with request id 0) at this
   * opcode, with the decoded value (or the raw body for a number) and the frame.
   * Pushes without a handler are counted in {@link Client#unhandledPushes} and dropped.
   * Handlers belong to the client: they stay through reconnects.
   * @param {(Type & {opcode: number})|number} packetTypeOrOpcode
   * @param {(value: any, frame: Frame) => void} handler
   * @returns {() => void} Removes the handler.
   */
  on(packetTypeOrOpcode, handler) {
    const raw = typeof packetTypeOrOpcode === 'number';
    const opcode = checkOpcode(raw ? packetTypeOrOpcode : packetTypeOrOpcode?.opcode);
    if (typeof handler !== 'function') throw new TypeError('on() needs a handler function');
    const subscription = { type: raw ? null : packetTypeOrOpcode, handler };
    let set = this.#handlers.get(opcode);
    if (!set) this.#handlers.set(opcode, (set = new Set()));
    set.add(subscription);
    return () => {
      set.delete(subscription);
      if (set.size === 0 && this.#handlers.get(opcode) === set) this.#handlers.delete(opcode);
    };
  }

  /**
   * Sends a PING (a u64 timestamp) and waits for its PONG. While the
   * client reconnects, it waits for the new connection, like a request.
   * @param {{timeout?: number}} [options]
   * @returns {Promise<number>} The round trip, in milliseconds.
   */
  ping(options = {}) {
    return new Promise((resolve, reject) => {
      this.#assertUsable(true);
      const value = u64.encode(BigInt(Date.now()));
      let start;
      const decode = (frame) => {
        if (frame.opcode !== SystemOpcode.PONG || !sameBytes(frame.body, value)) {
          throw new TernioError('protocol', `PING answered with opcode ${hex(frame.opcode)} and another value`);
        }
        return performance.now() - start;
      };
      this.#call(SystemOpcode.PING, value, 'PING', options.timeout, decode, resolve, reject, () => { start = performance.now(); });
    });
  }

  /**
   * Sends `DISCONNECT NORMAL` and closes the WebSocket with code 1000; the
   * client does not reconnect after it. Requests still waiting are rejected
   * (`'closed'`) at once.
   * @param {string} [message] The DISCONNECT's text.
   * @returns {Promise<CloseInfo>} Settles once the WebSocket has closed (at
   *   once when no connection is open).
   */
  close(message = '') {
    if (this.#state === 'closed' || this.#closing) return this.closed;
    this.#closing = true;
    const ws = this.#ws;
    const error = new TernioError('closed', 'connection closed by the client');
    if (ws && this.#state === 'open' && !this.#violated) {
      if (ws.readyState === OPEN) this.#sendDisconnect(DisconnectReason.NORMAL, message);
      this.#failAll(() => error);
      this.#stopLinkTimers();
      ws.close(1000); // its close event ends the client
    } else {
      // Before connect(), between reconnect attempts or during one: nothing to wait for.
      if (ws) this.#abandon(ws);
      if (this.#connecting) this.#connecting.reject(error);
      this.#finish({ code: 1000, reason: '', disconnect: null, local: true }, error);
    }
    return this.closed;
  }

  // ------------------------------------------------------- the connection

  /** Opens a WebSocket to the URL: the first connection or a reconnect attempt. */
  #dial() {
    const url = this.#url;
    let ws;
    try {
      ws = new this.#WebSocket(url, SUBPROTOCOL);
    } catch (error) {
      const failure = new TernioError('closed', `cannot connect to ${url}: ${error.message}`, { cause: error });
      return this.#lost(null, { code: 1006, reason: '' }, failure);
    }
    this.#ws = ws;
    this.#disconnect = null;
    this.#violated = false;
    let opened = false;
    const current = () => this.#ws === ws;
    const failed = (code) => new TernioError('closed', `could not connect to ${url} (WebSocket close code ${code})`);
    ws.binaryType = 'arraybuffer';
    if (this.connectTimeout > 0 && this.connectTimeout !== Infinity) {
      this.#timers.connect = unref(setTimeout(() => {
        if (!current()) return;
        const timeout = this.connectTimeout;
        this.#lost(ws, { code: 1006, reason: 'connect timeout' },
          new TernioError('closed', `could not connect to ${url} within ${timeout} ms`, { timeout }));
      }, this.connectTimeout));
    }
    ws.onopen = () => {
      if (!current()) return;
      opened = true;
      this.#up();
    };
    ws.onerror = () => {
      // Once open, a close event follows an error. Before, some
      // implementations (Node 20's) fire no close: the attempt ends here.
      if (opened || !current()) return;
      this.#lost(ws, { code: 1006, reason: '' }, failed(1006));
    };
    ws.onmessage = (event) => {
      if (current()) this.#onMessage(event.data);
    };
    ws.onclose = (event) => {
      if (current()) this.#lost(ws, { code: event.code, reason: event.reason }, opened ? null : failed(event.code));
    };
  }

  /** The WebSocket opened: resume the session on it, or start a new one. */
  #up() {
    clearTimeout(this.#timers.connect);
    const session = this.#session;
    if (session?.lostAt != null && session.resumable) {
      const away = Date.now() - session.lostAt;
      if (away < session.ttl) return this.#resume();
      this.#sessionLost(`its time to live of ${session.ttl} ms passed (the connection was lost ${away} ms ago)`);
    } else if (session?.ended) {
      this.#sessionLost(session.ended);
    }
    this.#open(false);
  }

  /**
   * The connection carries the session, `resumed` or new (then the client
   * asks for its ticket): start the keepalive, send what waits, tell.
   */
  #open(resumed) {
    const attempt = this.#attempt;
    const first = this.#state === 'connecting';
    this.#state = 'open';
    if (!resumed) this.#askTicket();
    this.#startKeepalive(this.#ws);
    if (this.#policy) {
      const ws = this.#ws;
      this.#timers.healthy = unref(setTimeout(() => {
        if (this.#ws === ws) this.#attempt = 0;
      }, this.#policy.healthyAfter));
    }
    if (first) {
      this.#connecting.resolve();
      this.#connecting = null;
    }
    this.#emit({ state: 'open', attempt });
    this.#flush();
  }

  /** Sends the requests that waited for a connection, in the order they were made. */
  #flush() {
    for (const entry of this.#pending.values()) {
      if (entry.sent) continue;
      if (this.#state !== 'open') return;
      // When the buffer overflows here, the connection is dropped and the
      // request waits for the next one.
      if (this.#write(entry.data, entry.plain)) return;
      this.#queuedBytes -= entry.data.length;
      entry.sent = true;
      entry.onSent?.();
    }
  }

  /**
   * Writes one frame on the open connection, unless it would take the
   * outbound buffer past its limit: then the connection is dropped. A
   * counted frame is kept for replay (`plain`: the frame uncompressed)
   * unless `record` is false (a frame replayed, already kept).
   * @returns {TernioError|null} The error when the frame was not written.
   */
  #write(data, plain = data, record = true) {
    const ws = this.#ws;
    if (!ws) return new TernioError('closed', 'the connection is not open (the client is reconnecting)');
    const buffered = ws.bufferedAmount ?? 0;
    if (buffered + data.length > this.maxBufferedBytes) {
      const error = new TernioError('closed', `outbound buffer full: ${buffered} bytes wait to be sent, `
        + `${data.length} more would pass the limit of ${this.maxBufferedBytes}`);
      this.#lost(ws, { code: 1006, reason: 'outbound buffer full' }, error, true);
      return error;
    }
    ws.send(data);
    if (record && this.#session && isCounted(opcodeOf(plain))) this.#session.record(plain);
    return null;
  }

  // ------------------------------------------------------------ resumption

  /** A new session: asks the server for its ticket; what is sent from now on is kept. */
  #askTicket() {
    const session = this.#session;
    if (!session) return;
    session.reset();
    const id = this.#allocateId();
    session.asked(id);
    this.#write(encodeFrame({ opcode: SystemOpcode.RESUME_TICKET, requestId: id }));
  }

  /** The answer to `RESUME_TICKET`: counting starts; an error (no resumption there) ends recording. */
  #onTicket(frame) {
    const session = this.#session;
    const answer = frame.flags & Flags.ERROR ? null : parseTicket(frame.body);
    if (answer) session.granted(answer);
    else session.reset(); // the server does not resume sessions: the client goes on without
  }

  /**
   * Sends `RESUME` as the new connection's first frame, with the ticket
   * and the count of frames received; nothing else goes out until the
   * answer, which must come within `connectTimeout`.
   */
  #resume() {
    const ws = this.#ws;
    const session = this.#session;
    const id = this.#allocateId();
    this.#resuming = { id };
    const timeout = this.connectTimeout;
    if (timeout > 0 && timeout !== Infinity) {
      this.#timers.resume = unref(setTimeout(() => {
        if (this.#resuming?.id !== id) return;
        this.#lost(ws, { code: 1006, reason: 'resume timeout' },
          new TernioError('closed', `no answer to RESUME within ${timeout} ms`, { timeout }), true);
      }, timeout));
    }
    // The count sent is acknowledged by it.
    const body = resumeBody(session.ticket, session.acks.take());
    this.#write(encodeFrame({ opcode: SystemOpcode.RESUME, requestId: id, body }));
  }

  /**
   * The answer to `RESUME`. Refused: a new session on this connection.
   * Accepted: the new ticket, the server's count taken as an ACK, what it
   * lacks sent again, in order, before anything new.
   */
  #onResumed(frame) {
    clearTimeout(this.#timers.resume);
    this.#resuming = null;
    const session = this.#session;
    if (frame.flags & Flags.ERROR) {
      const refusal = remoteError(frame.body);
      this.#sessionLost(`the server refused to resume it: ${refusal.remoteMessage ?? refusal.message}`, refusal);
      return this.#open(false);
    }
    const answer = parseResumed(frame.body);
    if (!answer) return this.#violation(`answer to RESUME of ${count(frame.body.length, 'byte')}`);
    if (answer.message.length) return this.#violation('a Noise message in the answer to a plain RESUME');
    const lacking = session.replay.replayFrom(answer.received);
    if (!lacking || session.replay.acknowledge(answer.received)) {
      // Contract: DISCONNECT NORMAL, close, and a new session on a new connection.
      const reason = `the server received ${answer.received} frames: the client cannot replay from there`;
      const ws = this.#ws;
      this.#sendDisconnect(DisconnectReason.NORMAL, reason);
      this.#sessionLost(reason);
      return this.#lost(ws, { code: 1000, reason: '' }, new TernioError('closed', `session lost: ${reason}`), true);
    }
    session.granted(answer);
    session.lostAt = null;
    session.resumptions++;
    for (const data of lacking) if (this.#write(data, data, false)) return;
    const abandoned = this.#abandonedStreams;
    this.#abandonedStreams = [];
    for (const id of abandoned) {
      if (this.#write(encodeFrame({ opcode: SystemOpcode.CANCEL, body: u32.encode(id) }))) return;
    }
    this.#emitSession({ session: 'resumed', count: session.resumptions, attempt: this.#attempt });
    this.#open(true);
  }

  /**
   * The session could not be resumed: the requests in flight fail, the
   * application is told, and the next connection starts a new session.
   */
  #sessionLost(reason, cause) {
    const error = new TernioError('closed', `the session was lost (${reason}): the request was in flight (the server `
      + 'may or may not have run it); a new session starts', cause ? { cause } : {});
    this.#failSent(() => error);
    this.#abandonedStreams = [];
    this.#session.reset();
    this.#emitSession({ session: 'lost', reason, attempt: this.#attempt });
  }

  /**
   * Whether the connection just lost leaves a session to resume (then its
   * requests in flight stay): not after a `DISCONNECT` either way, a
   * protocol violation or an overflowed replay buffer. Notes when the loss
   * started, or why the session ended.
   */
  #keepsSession() {
    const session = this.#session;
    if (!session?.held) return false;
    if (session.resumable && !this.#disconnect && !this.#violated) {
      session.lostAt ??= Date.now();
      return true;
    }
    session.ended ??= this.#disconnect ? `it was ended by the ${describe(this.#disconnect)}`
      : this.#violated ? 'the server broke the protocol'
        : 'the client\'s replay buffer overflowed';
    session.ticket = null; // for good: a later attempt's loss does not revive it
    return false;
  }

  /** Counts a frame received (`frame`, decompressed); returns whether an `ACK` is due now. */
  #countReceived(frame) {
    const acks = this.#session?.acks;
    if (!acks || this.#resuming) return false;
    const due = acks.received(HEADER_LEN + frame.body.length);
    if (!due && !this.#timers.ack) {
      this.#timers.ack = unref(setTimeout(() => {
        this.#timers.ack = null;
        this.#sendAck();
      }, ACK_DELAY));
    }
    return due;
  }

  /** Sends `ACK` with the count of frames received, when some are unacknowledged. */
  #sendAck() {
    clearTimeout(this.#timers.ack);
    this.#timers.ack = null;
    const acks = this.#session?.acks;
    if (!acks?.hasUnacked || !this.isOpen) return;
    this.#write(encodeFrame({ opcode: SystemOpcode.ACK, body: u64.encode(BigInt(acks.take())) }));
  }

  /** The server's `ACK`: the frames it acknowledges leave the replay buffer. */
  #onAck(frame) {
    if (frame.requestId !== 0 || frame.flags & (Flags.RESPONSE | Flags.ERROR) || frame.body.length !== 8) {
      return this.#violation('malformed ACK');
    }
    const replay = this.#session?.replay;
    if (!replay) return;
    const received = Number(new DataView(frame.body.buffer, frame.body.byteOffset, 8).getBigUint64(0, true));
    const problem = replay.acknowledge(received);
    if (problem) this.#violation(problem);
  }

  #emitSession(event) {
    if (typeof this.onSessionChange !== 'function') return;
    try {
      this.onSessionChange(event);
    } catch (error) {
      this.#report(error);
    }
  }

  /** Stops the timers of the current connection. */
  #stopLinkTimers() {
    clearTimeout(this.#timers.connect);
    clearTimeout(this.#timers.keepalive);
    clearTimeout(this.#timers.healthy);
    clearTimeout(this.#timers.ack);
    clearTimeout(this.#timers.resume);
    this.#timers.ack = null;
    this.#resuming = null;
    if (this.#keepalive) clearTimeout(this.#keepalive.timer);
    this.#keepalive = null;
  }

  /** Lets go of a WebSocket without waiting for its close handshake. */
  #abandon(ws) {
    this.#stopLinkTimers();
    if (this.#ws === ws) this.#ws = null;
    ws.onopen = ws.onmessage = ws.onerror = ws.onclose = null;
    try {
      if (ws.readyState < 2) ws.close(1000);
    } catch {
      // already closing
    }
  }

  /**
   * The current connection (or attempt) is gone: closed by either side,
   * failed, dead (keepalive) or overflowing. Requests sent on it fail at
   * once, unless the session can be resumed; then the client reconnects,
   * or closes for good.
   * @param {object|null} ws The WebSocket (null when none was made).
   * @param {{code: number, reason: string}} how
   * @param {TernioError|null} failure Why, when the close event does not say it.
   * @param {boolean} [local] This side ended it.
   */
  #lost(ws, { code, reason }, failure, local = false) {
    if (ws) {
      if (ws !== this.#ws) return;
      this.#abandon(ws);
    }
    const disconnect = this.#disconnect;
    const info = { code, reason, disconnect, local: local || this.#closing || this.#violated };
    const error = failure ?? new TernioError('closed',
      disconnect ? describe(disconnect) : `connection closed (WebSocket close code ${code})`, { disconnect });
    if (this.#state === 'connecting') {
      this.#connecting.reject(error);
      this.#connecting = null;
      return this.#finish(info, error);
    }
    const final = !this.#policy || this.#closing || (disconnect && FINAL_REASONS.includes(disconnect.reason));
    if (final) return this.#finish(info, error);
    // A session to resume keeps its requests in flight: answered on the next connection.
    if (this.#keepsSession()) {
      this.#failStreams(error);
      return this.#retry(info, error);
    }
    const inFlight = new TernioError('closed', `${error.message}; the request was in flight (the server may or `
      + 'may not have run it), the client reconnects', { disconnect, cause: error });
    this.#failSent(() => inFlight);
    this.#retry(info, error);
  }

  /**
   * Fails every open stream with the lost connection's `error`: streams do
   * not survive a reconnection, even when the session resumes. Their ids
   * are cancelled once it does (docs/PROTOCOL.md section 4.5): the server
   * may still open one, from a request in the replay or a handler not done.
   */
  #failStreams(error) {
    const streams = [...this.#streams.values()];
    const failed = new TernioError('closed', `${error.message}; streams do not survive a reconnection`,
      { disconnect: error.disconnect, cause: error });
    for (const stream of streams) {
      const entry = this.#take(stream.id);
      if (!entry) continue;
      this.#abandonedStreams.push(stream.id);
      entry.reject(failed);
    }
  }

  /** Schedules the next reconnect attempt, or gives up. */
  #retry(info, error) {
    const policy = this.#policy;
    const attempt = ++this.#attempt;
    if (attempt > policy.maxAttempts) {
      const gaveUp = new TernioError('closed', `gave up reconnecting after ${count(policy.maxAttempts, 'attempt')}: ${error.message}`,
        { disconnect: error.disconnect, cause: error });
      return this.#finish(info, gaveUp);
    }
    const range = Math.min(policy.maxDelay, policy.initialDelay * policy.multiplier ** (attempt - 1));
    const refused = REFUSAL_REASONS.includes(error.disconnect?.reason);
    const delay = refused
      ? policy.refusalDelay + Math.random() * Math.max(range, policy.refusalDelay)
      : Math.random() * range;
    this.#state = 'reconnecting';
    this.#timers.retry = setTimeout(() => {
      this.#timers.retry = null;
      if (this.#state === 'reconnecting' && !this.#closing) this.#dial();
    }, delay);
    this.#emit({ state: 'reconnecting', attempt, delay, error });
  }

  /** Closes the client for good. */
  #finish(info, error) {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    this.#stopLinkTimers();
    clearTimeout(this.#timers.retry);
    this.#failAll(() => error);
    this.#resolveClosed(info);
    this.#emit({ state: 'closed', info, error });
  }

  #emit(event) {
    if (typeof this.onStateChange !== 'function') return;
    try {
      this.onStateChange(event);
    } catch (error) {
      this.#report(error);
    }
  }

  #startKeepalive(ws) {
    const interval = this.keepaliveInterval;
    if (!(interval > 0) || interval === Infinity) return;
    this.#timers.keepalive = unref(setTimeout(() => this.#keepalivePing(ws), interval));
  }

  /** Sends a keepalive PING; without its PONG in time, the connection is dropped. */
  #keepalivePing(ws) {
    if (this.#ws !== ws || !this.isOpen) return;
    const id = this.#allocateId();
    const timeout = this.keepaliveTimeout;
    const timer = unref(setTimeout(() => {
      if (this.#keepalive?.id !== id) return;
      this.#keepalive = null;
      this.#lost(ws, { code: 1006, reason: 'keepalive timeout' },
        new TernioError('closed', `no PONG to the keepalive PING within ${timeout} ms: the connection is dead`, { timeout }), true);
    }, timeout));
    this.#keepalive = { id, timer };
    this.#write(encodeFrame({ opcode: SystemOpcode.PING, requestId: id, body: u64.encode(BigInt(Date.now())) }));
  }

  // ----------------------------------------------------------- requests

  /**
   * Throws unless a packet can go out now (open) or, for a request, wait
   * for a new connection (reconnecting).
   */
  #assertUsable(canWait) {
    if (this.isOpen || (canWait && this.#state === 'reconnecting' && !this.#closing)) return;
    const why = this.#state === 'reconnecting' ? ' (reconnecting)' : this.#disconnect ? `: ${describe(this.#disconnect)}` : '';
    throw new TernioError('closed', `not connected${why}`, { disconnect: this.#disconnect });
  }

  /** The opcode and body of an outgoing packet; throws when closed or when the value does not encode. */
  #outgoing(packetType, value, canWait) {
    this.#assertUsable(canWait);
    if (typeof packetType === 'number') {
      return {
        opcode: checkOpcode(packetType), body: toBytes(value ?? new Uint8Array(0)), name: hex(packetType), compress: this.compress,
      };
    }
    if (typeof packetType?.opcode !== 'number') throw new TypeError('expects a packet type (from packet()) or an opcode');
    const compress = packetType.compress === false ? null : this.compress;
    return { opcode: packetType.opcode, body: packetType.encode(value), name: packetType.name, compress };
  }

  /** Sends a request (or keeps it until a connection is up) and registers what settles it. */
  #call(opcode, body, name, timeout = this.timeout, decode, resolve, reject, onSent, compress = null) {
    const requestId = this.#allocateId();
    const { data, plain } = encodeBoth({ opcode, requestId, body }, compress);
    const entry = { decode, resolve, reject, timer: null, data, plain, sent: false, onSent };
    if (this.#state === 'open') {
      entry.sent = true;
      const error = this.#write(data, plain);
      if (error) return reject(error);
      onSent?.();
    } else if (this.#queuedBytes + data.length > this.maxBufferedBytes) {
      return reject(new TernioError('closed', `reconnecting, and ${this.#queuedBytes} bytes of requests already wait `
        + `for the new connection: ${data.length} more would pass the limit of ${this.maxBufferedBytes}`));
    } else {
      this.#queuedBytes += data.length;
    }
    if (timeout > 0 && timeout !== Infinity) {
      entry.timer = setTimeout(() => {
        if (this.#take(requestId) !== entry) return;
        const waited = entry.sent ? '' : ' (it waited for a new connection)';
        reject(new TernioError('timeout', `no response to ${name} within ${timeout} ms${waited}`, { timeout }));
      }, timeout);
    }
    this.#pending.set(requestId, entry);
    return requestId;
  }

  /** Removes a pending request and returns it. */
  #take(requestId) {
    const entry = this.#pending.get(requestId);
    if (!entry) return undefined;
    this.#pending.delete(requestId);
    clearTimeout(entry.timer);
    if (!entry.sent) this.#queuedBytes -= entry.data.length;
    return entry;
  }

  /** The next request id: counts up from 1, skips 0 and ids still in flight. */
  #allocateId() {
    for (;;) {
      const id = this.#nextId;
      this.#nextId = id === 0xffffffff ? 1 : id + 1;
      const taken = this.#pending.has(id) || this.#streams.has(id) || this.#keepalive?.id === id
        || this.#session?.ticketId === id || this.#resuming?.id === id;
      if (!taken) return id;
    }
  }

  #failAll(makeError) {
    this.#failWhere(() => true, makeError);
  }

  /** Rejects the requests already sent; those waiting for a connection stay. */
  #failSent(makeError) {
    this.#failWhere((entry) => entry.sent, makeError);
  }

  #failWhere(which, makeError) {
    const entries = [];
    for (const [id, entry] of this.#pending) if (which(entry)) entries.push(this.#take(id));
    for (const entry of entries) entry.reject(makeError());
  }

  #sendDisconnect(reason, message) {
    this.#ws.send(encodeFrame({ opcode: SystemOpcode.DISCONNECT, body: codeAndTextBody(reason, message) }));
  }

  #reply(request, opcode, flags, body) {
    if (this.#ws.readyState === OPEN) {
      this.#write(encodeFrame({ opcode, flags: Flags.RESPONSE | flags, requestId: request.requestId, body }));
    }
  }

  #report(error) {
    try {
      this.onError(error);
    } catch {
      // an onError that throws has nowhere else to go
    }
  }

  /** The server broke the contract: DISCONNECT MALFORMED (or `disconnectReason`), then close (and reconnect, if the client does). */
  #violation(reason, disconnectReason = DisconnectReason.MALFORMED) {
    if (this.#closing || this.#violated) return;
    const ws = this.#ws;
    if (ws.readyState === OPEN) this.#sendDisconnect(disconnectReason, reason);
    this.#violated = true;
    const error = new TernioError('protocol', `server broke the protocol: ${reason}`);
    this.#failSent(() => error);
    if (this.#policy) return this.#lost(ws, { code: 1006, reason: 'protocol violation' }, error, true);
    this.#failAll(() => error);
    this.#stopLinkTimers();
    ws.close(1000); // its close event ends the client
  }

  #onMessage(data) {
    if (this.#closing || this.#violated) return;
    if (typeof data === 'string') return this.#violation('text message');
    let frame;
    try {
      frame = decodeFrame(data instanceof ArrayBuffer ? new Uint8Array(data) : data);
    } catch (error) {
      return this.#violation(error.message);
    }
    if (frame.flags & Flags.ENCRYPTED) return this.#violation('sealed frame without a secure session');
    if (frame.flags & Flags.COMPRESSED) {
      try {
        frame = { ...frame, flags: frame.flags & ~Flags.COMPRESSED, body: decompressBody(frame.body, this.maxFrameSize - HEADER_LEN) };
      } catch (error) {
        return this.#violation(error.message, error.tooLarge ? DisconnectReason.FRAME_TOO_LARGE : DisconnectReason.MALFORMED);
      }
    }
    if (frame.opcode === SystemOpcode.ACK) return this.#onAck(frame);
    // Counted whatever becomes of it (section 4.2); the ACK goes after it is taken.
    const due = isCounted(frame.opcode) && this.#countReceived(frame);
    this.#handle(frame);
    if (due) this.#sendAck();
  }

  /** Handles a frame received (decompressed). */
  #handle(frame) {
    if (frame.flags & Flags.RESPONSE) return this.#onResponse(frame);
    if (frame.requestId !== 0 && frame.flags & Flags.ERROR) {
      return this.#reply(frame, frame.opcode, Flags.ERROR, codeAndTextBody(ErrorCode.MALFORMED, 'ERROR flag on a request'));
    }
    switch (frame.opcode) {
      case SystemOpcode.PING:
        if (frame.requestId === 0) return;
        if (frame.body.length !== 8) {
          return this.#reply(frame, frame.opcode, Flags.ERROR, codeAndTextBody(ErrorCode.MALFORMED, 'PING body is not a u64'));
        }
        return this.#reply(frame, SystemOpcode.PONG, 0, frame.body);
      case SystemOpcode.DISCONNECT:
        return this.#onDisconnect(frame);
      case SystemOpcode.STREAM_ITEM:
      case SystemOpcode.STREAM_CREDIT:
      case SystemOpcode.STREAM_END:
        return this.#onStreamFrame(frame);
    }
    if (frame.requestId !== 0) {
      // This client answers no requests but PING.
      return this.#reply(frame, frame.opcode, Flags.ERROR, codeAndTextBody(ErrorCode.UNKNOWN_OPCODE, `no handler for opcode ${hex(frame.opcode)}`));
    }
    if (frame.opcode > 0xfeff) return; // a system packet without a reply
    this.#onPush(frame);
  }

  #onDisconnect(frame) {
    if (this.#disconnect) return;
    const parsed = codeAndText(frame.body) ?? { code: DisconnectReason.MALFORMED, text: 'unreadable DISCONNECT' };
    const disconnect = { reason: parsed.code, reasonName: nameIn(DisconnectReason, parsed.code) ?? 'UNKNOWN', message: parsed.text };
    this.#disconnect = disconnect;
    const error = new TernioError('closed', describe(disconnect), { disconnect });
    if (this.#policy && !FINAL_REASONS.includes(disconnect.reason)) {
      // The server closes next: no need to wait for it before reconnecting.
      return this.#lost(this.#ws, { code: 1000, reason: '' }, error);
    }
    this.#failAll(() => error);
    this.#stopLinkTimers(); // the server closes next; its close event ends the client
  }

  #onResponse(frame) {
    if (this.#resuming && frame.requestId === this.#resuming.id) return this.#onResumed(frame);
    if (this.#session?.ticketId != null && frame.requestId === this.#session.ticketId) return this.#onTicket(frame);
    if (this.#keepalive && frame.requestId === this.#keepalive.id) {
      // The server is there (whatever it answered): the next PING after the interval.
      clearTimeout(this.#keepalive.timer);
      this.#keepalive = null;
      return this.#startKeepalive(this.#ws);
    }
    const entry = this.#pending.get(frame.requestId);
    if (!entry || !entry.sent) {
      // Answers to nothing we wait for (say, after a timeout) are ignored;
      // an error without id reports a failed fire-and-forget send.
      if (frame.requestId === 0 && frame.flags & Flags.ERROR) this.#report(remoteError(frame.body));
      return;
    }
    this.#take(frame.requestId);
    if (frame.flags & Flags.ERROR) return entry.reject(remoteError(frame.body));
    try {
      entry.resolve(entry.decode(frame));
    } catch (error) {
      entry.reject(error);
    }
  }

  /** A stream frame: an item of a download, credit for an upload (docs/PROTOCOL.md section 4.5). */
  #onStreamFrame(frame) {
    if (frame.requestId === 0) return this.#violation('a stream frame without a stream id');
    const stream = this.#streams.get(frame.requestId);
    if (frame.opcode === SystemOpcode.STREAM_ITEM) {
      if (!stream) return; // it crossed the stream's end or a CANCEL
      if (stream.granted === 0) return this.#violation('a stream item beyond its credit');
      stream.granted--;
      stream.items.push(frame.body);
      return stream.wake();
    }
    if (frame.opcode === SystemOpcode.STREAM_CREDIT) {
      if (frame.body.length !== 4) return this.#violation('a STREAM_CREDIT body that is not 4 bytes');
      if (!stream) return;
      stream.credit += new DataView(frame.body.buffer, frame.body.byteOffset, 4).getUint32(0, true);
      return stream.wake();
    }
    // The server ends a download with its answer, never STREAM_END.
  }

  /** Opens a stream: sends the request (no timeout: the answer ends the stream) and registers its state. */
  #openStream(packetType, value) {
    if (!this.isOpen) this.#assertUsable(false);
    if (!this.isOpen) throw new TernioError('closed', 'a stream needs an open connection (it does not wait for a new one)');
    const { opcode, body, name, compress } = this.#outgoing(packetType, value, false);
    const stream = {
      name, items: [], granted: STREAM_INITIAL_CREDIT, credit: STREAM_INITIAL_CREDIT, taken: 0,
      ended: false, answer: undefined, error: null, waiters: [], id: 0,
      wake() {
        const waiters = this.waiters;
        this.waiters = [];
        for (const waiter of waiters) waiter();
      },
      wait() {
        return new Promise((resolve) => { this.waiters.push(resolve); });
      },
    };
    const resolve = (answer) => { stream.ended = true; stream.answer = answer; this.#streams.delete(stream.id); stream.wake(); };
    const reject = (error) => { stream.ended = true; stream.error = error; this.#streams.delete(stream.id); stream.wake(); };
    const decode = (frame) => frame;
    stream.id = this.#call(opcode, body, name, 0, decode, resolve, reject, undefined, compress);
    if (stream.id !== undefined && !stream.ended) this.#streams.set(stream.id, stream);
    return stream;
  }

  /** Sends a one-way stream frame for stream `id`. */
  #streamFrame(opcode, id, body) {
    const error = this.#write(encodeFrame({ opcode, requestId: id, body }));
    if (error) throw error;
  }

  /** Gives up stream `stream`: CANCEL to the server, its state dropped. */
  #cancelStream(stream) {
    if (stream.ended) return;
    stream.ended = true;
    this.#streams.delete(stream.id);
    if (this.#take(stream.id) && this.isOpen) {
      this.#write(encodeFrame({ opcode: SystemOpcode.CANCEL, body: u32.encode(stream.id) }));
    }
  }

  /**
   * Sends a request answered by a stream of items (docs/PROTOCOL.md
   * section 4.5) and returns them as an async iterable, in order:
   * `for await (const item of client.requestStream(CountTo, { count: 10 }, { item: Number })) ...`.
   * The iteration ends when the server's handler ended the stream; an
   * error from the server (`'remote'`) or a lost connection (`'closed'`:
   * streams do not survive a reconnection) is thrown by the iteration.
   * Leaving the loop early (`break`, `return`, a throw) sends `CANCEL`.
   *
   * The client holds at most 32 items not yet taken, and grants the server
   * more as the loop takes them: a loop that waits holds the server's
   * handler where it is.
   *
   * @param {Type & {opcode: number}} packetType The request's packet type.
   * @param {any} value
   * @param {{item?: Type}} [options] The items' type (else `packetType.item`).
   * @returns {AsyncIterableIterator<any>}
   * @throws {TernioError} `'closed'` when the connection is not open.
   */
  requestStream(packetType, value, options = {}) {
    const itemType = options.item ?? packetType.item;
    if (typeof itemType?.decode !== 'function') throw new TypeError('requestStream() needs the items\' type: options.item');
    const stream = this.#openStream(packetType, value);
    const client = this;
    return {
      [Symbol.asyncIterator]() { return this; },
      async next() {
        for (;;) {
          if (stream.items.length > 0) {
            const body = stream.items.shift();
            stream.taken++;
            if (stream.taken >= STREAM_INITIAL_CREDIT / 2 && !stream.ended) {
              const items = stream.taken;
              stream.taken = 0;
              stream.granted += items;
              try {
                client.#streamFrame(SystemOpcode.STREAM_CREDIT, stream.id, u32.encode(items));
              } catch {
                // the lost connection ends the stream
              }
            }
            return { value: itemType.decode(body), done: false };
          }
          if (stream.ended) {
            if (stream.error) {
              const error = stream.error;
              stream.error = null;
              throw error;
            }
            return { value: undefined, done: true };
          }
          await stream.wait();
        }
      },
      async return() {
        client.#cancelStream(stream);
        stream.items.length = 0;
        return { value: undefined, done: true };
      },
    };
  }

  /**
   * Sends a request that carries a stream of items to the server (an
   * upload, docs/PROTOCOL.md section 4.5). `send(item)` resolves once the
   * item is on its way, waiting for credit from the server; `finish()`
   * ends the upload and resolves with the server's answer; `fail(code,
   * message)` ends it as failed; `cancel()` sends `CANCEL`. If the server
   * answers before the upload ended, `send` rejects (`'closed'`, with
   * `answered: true`) and `finish()` gives that answer.
   *
   * @param {Type & {opcode: number, response?: Type}} packetType The request's packet type.
   * @param {any} value
   * @param {{item?: Type & {encode: Function}}} [options] The items' type (else `packetType.item`).
   */
  upload(packetType, value, options = {}) {
    const itemType = options.item ?? packetType.item;
    if (typeof itemType?.encode !== 'function') throw new TypeError('upload() needs the items\' type: options.item');
    const stream = this.#openStream(packetType, value);
    const client = this;
    const answer = () => {
      if (stream.error) throw stream.error;
      const frame = stream.answer;
      const expected = packetType.response;
      if (expected && frame.opcode === expected.opcode) return expected.decode(frame.body);
      if (frame.opcode === packetType.opcode && frame.body.length === 0) return undefined;
      throw new TernioError('protocol', `${stream.name} answered with unexpected opcode ${hex(frame.opcode)}`);
    };
    const end = async (code, message) => {
      if (!stream.ended) {
        client.#streamFrame(SystemOpcode.STREAM_END, stream.id, codeAndTextBody(code, message));
        while (!stream.ended) await stream.wait();
      }
      return answer();
    };
    return {
      async send(item) {
        const body = itemType.encode(item);
        while (!stream.ended && stream.credit === 0) await stream.wait();
        if (stream.ended) {
          throw stream.error ?? new TernioError('closed', `the server answered ${stream.name} before the upload ended`, { answered: true });
        }
        stream.credit--;
        client.#streamFrame(SystemOpcode.STREAM_ITEM, stream.id, body);
      },
      finish: () => end(0, ''),
      fail: (code, message = '') => end(Math.max(1, code), message),
      cancel: () => client.#cancelStream(stream),
    };
  }

  #onPush(frame) {
    const subscriptions = this.#handlers.get(frame.opcode);
    if (!subscriptions) {
      this.#unhandled++;
      return;
    }
    for (const { type, handler } of [...subscriptions]) {
      try {
        const result = handler(type ? type.decode(frame.body) : frame.body, frame);
        if (typeof result?.then === 'function') result.then(undefined, (error) => this.#report(error));
      } catch (error) {
        this.#report(error);
      }
    }
  }
}

function describe(disconnect) {
  const text = disconnect.message ? `: ${disconnect.message}` : '';
  return `server disconnected: ${disconnect.reasonName} (${disconnect.reason})${text}`;
}

function sameBytes(a, b) {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}
