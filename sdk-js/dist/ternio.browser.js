// The Ternio browser SDK, dist/ternio.browser.js, built from sdk-js/src by `npm run build`.
// One ES module; the package's README documents it. Licence: MIT OR Apache-2.0.
// It includes @noble/curves, @noble/ciphers and @noble/hashes (MIT License, (c) 2022 Paul Miller,
// https://paulmillr.com/noble/), the cryptography of secure sessions.

// src/constants.ts
var SUBPROTOCOL = "ternio.v2";
var HEADER_LEN = 7;
var DEFAULT_MAX_FRAME_SIZE = 1024 * 1024;
var Flags = Object.freeze({ RESPONSE: 1, ERROR: 2, ENCRYPTED: 4, COMPRESSED: 8 });
var KNOWN_FLAGS = 15;
var SystemOpcode = Object.freeze({
  HANDSHAKE: 65281,
  PING: 65282,
  PONG: 65283,
  DISCONNECT: 65284,
  REKEY: 65285,
  CANCEL: 65286,
  DEADLINE: 65287,
  RESUME_TICKET: 65288,
  ACK: 65289,
  RESUME: 65290,
  STREAM_ITEM: 65293,
  STREAM_CREDIT: 65294,
  STREAM_END: 65295,
  STREAM_ITEMS: 65296
});
var STREAM_INITIAL_CREDIT = 32;
var ErrorCode = Object.freeze({
  UNKNOWN_OPCODE: 1,
  MALFORMED: 2,
  UNAUTHORIZED: 3,
  RATE_LIMITED: 4,
  TIMEOUT: 5,
  ENCRYPTION_REQUIRED: 6,
  INTERNAL: 7,
  OVERLOADED: 8,
  HANDSHAKE_FAILED: 9,
  DECRYPT_FAILED: 10
});
var DisconnectReason = Object.freeze({
  NORMAL: 1,
  SHUTDOWN: 2,
  MALFORMED: 3,
  FRAME_TOO_LARGE: 4,
  IDLE_TIMEOUT: 5,
  HANDSHAKE_TIMEOUT: 6,
  DECRYPT_FAILED: 7,
  TOO_MANY_CONNECTIONS: 8,
  SLOW_CONSUMER: 9,
  KICKED: 10
});

// src/errors.ts
var TernioError = class extends Error {
  /** Which kind of failure. */
  kind;
  /** `'remote'` and a refused `'handshake'`: the error code (see {@link ErrorCode}). */
  code;
  /** `'remote'` and a refused `'handshake'`: the server's message, as sent. */
  remoteMessage;
  /** `'timeout'`: the timeout that expired, in ms. */
  timeout;
  /** `'closed'`: the server's `DISCONNECT`, or null when it sent none. */
  disconnect;
  /** `'codec'`: where in the value the problem is (field names and indexes). */
  path;
  /** `'codec'`: the problem, without the location {@link TernioError#message} adds. */
  reason;
  /** `'codec'` from a compressed body: it announced more than the largest frame accepted. */
  tooLarge;
  /** `'closed'` from an upload's `send`: the server answered before the upload ended. */
  answered;
  /**
   * @param kind Which kind of failure.
   * @param message What happened.
   * @param details What the kind carries.
   */
  constructor(kind, message, details = {}) {
    super(message, "cause" in details ? { cause: details.cause } : void 0);
    this.name = "TernioError";
    this.kind = kind;
    this.code = details.code;
    this.remoteMessage = details.remoteMessage;
    this.timeout = details.timeout;
    this.disconnect = details.disconnect ?? null;
    this.path = details.path ?? [];
    if (details.answered !== void 0) this.answered = details.answered;
  }
};
var codecError = (reason) => Object.assign(new TernioError("codec", reason), { reason });
function within(segment, fn) {
  try {
    return fn();
  } catch (error) {
    if (error instanceof TernioError && error.kind === "codec") error.path.unshift(segment);
    throw error;
  }
}
function topLevel(type, fn) {
  try {
    return fn();
  } catch (error) {
    if (error instanceof TernioError && error.kind === "codec") {
      const where = error.path.map((s) => typeof s === "number" ? `[${s}]` : `.${s}`).join("");
      error.message = `${type.name}${where}: ${error.reason ?? error.message}`;
    }
    throw error;
  }
}

// src/util.ts
var nameIn = (table, value) => Object.keys(table).find((key) => table[key] === value);
var hex = (opcode) => `0x${opcode.toString(16).padStart(4, "0").toUpperCase()}`;
var count = (n, what) => `${n} ${what}${n === 1 ? "" : "s"}`;
var show = (value) => typeof value === "bigint" ? `${value}n` : typeof value === "string" ? JSON.stringify(value) : String(value);
var sameBytes = (a, b) => a.length === b.length && a.every((byte, i) => byte === b[i]);
function unref(timer) {
  timer?.unref?.();
  return timer;
}

// src/codec.ts
var Writer = class {
  /** The bytes so far (and room for more). */
  buf;
  /** A view of {@link Writer#buf}. */
  view;
  /** How many bytes of {@link Writer#buf} are written. */
  len;
  /** @param reserve Bytes left at the start, for a header written later. */
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
  /** Appends `bytes`. */
  put(bytes2) {
    const at = this.take(bytes2.length);
    this.buf.set(bytes2, at);
  }
  /** The bytes written, as a copy. */
  finish() {
    return this.buf.slice(0, this.len);
  }
};
var Reader = class {
  /** The bytes read. */
  bytes;
  /** A view of {@link Reader#bytes}. */
  view;
  /** Where the next read starts. */
  pos;
  constructor(bytes2) {
    this.bytes = bytes2;
    this.view = new DataView(bytes2.buffer, bytes2.byteOffset, bytes2.byteLength);
    this.pos = 0;
  }
  /** Bytes not read yet. */
  get remaining() {
    return this.bytes.length - this.pos;
  }
  /** Consumes `n` bytes and returns where they start. */
  take(n) {
    if (n > this.remaining) throw codecError(`needs ${count(n, "more byte")}, ${this.remaining} left`);
    const at = this.pos;
    this.pos += n;
    return at;
  }
};
function toBytes(data) {
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  throw codecError(`expects a Uint8Array or ArrayBuffer, got ${show(data)}`);
}
function defineType(name, minSize, write, read, defaultValue, extra) {
  const type = {
    name,
    minSize,
    write,
    read,
    defaultValue,
    ...extra,
    encode(value) {
      const w = new Writer();
      topLevel(type, () => write(w, value));
      return w.finish();
    },
    decode(data) {
      return topLevel(type, () => {
        const r = new Reader(toBytes(data));
        const value = read(r);
        if (r.remaining) throw codecError(`${count(r.remaining, "trailing byte")} after the last field`);
        return value;
      });
    }
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
  }, (r) => r.view[get](r.take(size), true), () => 0);
}
function bigInteger(name, min, max, set, get) {
  return defineType(name, 8, (w, v) => {
    const ok = typeof v === "bigint" || Number.isSafeInteger(v);
    if (!ok || BigInt(v) < min || BigInt(v) > max) {
      throw codecError(`${name} expects a BigInt (or safe integer) in ${min}..=${max}, got ${show(v)}`);
    }
    const at = w.take(8);
    w.view[set](at, BigInt(v), true);
  }, (r) => r.view[get](r.take(8), true), () => 0n);
}
function float(name, size, set, get) {
  return defineType(name, size, (w, v) => {
    if (typeof v !== "number") throw codecError(`${name} expects a number, got ${show(v)}`);
    const at = w.take(size);
    w.view[set](at, v, true);
  }, (r) => r.view[get](r.take(size), true), () => 0);
}
var u8 = integer("u8", 1, 0, 255, "setUint8", "getUint8");
var i8 = integer("i8", 1, -128, 127, "setInt8", "getInt8");
var u16 = integer("u16", 2, 0, 65535, "setUint16", "getUint16");
var i16 = integer("i16", 2, -32768, 32767, "setInt16", "getInt16");
var u32 = integer("u32", 4, 0, 4294967295, "setUint32", "getUint32");
var i32 = integer("i32", 4, -2147483648, 2147483647, "setInt32", "getInt32");
var u64 = bigInteger("u64", 0n, 0xffffffffffffffffn, "setBigUint64", "getBigUint64");
var i64 = bigInteger("i64", -(2n ** 63n), 2n ** 63n - 1n, "setBigInt64", "getBigInt64");
var f32 = float("f32", 4, "setFloat32", "getFloat32");
var f64 = float("f64", 8, "setFloat64", "getFloat64");
var bool = defineType("bool", 1, (w, v) => {
  if (typeof v !== "boolean") throw codecError(`bool expects true or false, got ${show(v)}`);
  w.buf[w.take(1)] = v ? 1 : 0;
}, (r) => {
  const byte = r.bytes[r.take(1)];
  if (byte > 1) throw codecError(`bool must be 0 or 1, got ${byte}`);
  return byte === 1;
}, () => false);
var unit = defineType("unit", 0, () => {
}, () => null, () => null);
function writeVarint(w, value) {
  if (!Number.isInteger(value) || value < 0 || value > 4294967295) {
    throw codecError(`a length must be an integer in 0..=4294967295, got ${show(value)}`);
  }
  do {
    const low = value % 128;
    value = Math.floor(value / 128);
    w.buf[w.take(1)] = value > 0 ? low | 128 : low;
  } while (value > 0);
}
function readVarint(r) {
  let value = 0;
  for (let i = 0; i < 5; i++) {
    const byte = r.bytes[r.take(1)];
    value += (byte & 127) * 2 ** (7 * i);
    if ((byte & 128) === 0) {
      if (value > 4294967295) throw codecError(`varint ${value} is above u32::MAX`);
      return value;
    }
  }
  throw codecError("varint longer than 5 bytes");
}
var varint = defineType("varint", 1, writeVarint, readVarint, () => 0);
function readLength(r) {
  const len = readVarint(r);
  if (len > r.remaining) throw codecError(`length ${len} exceeds the ${count(r.remaining, "byte")} left`);
  return len;
}
var utf8Encoder = new TextEncoder();
var strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
var string = defineType("string", 1, (w, v) => {
  if (typeof v !== "string") throw codecError(`string expects a string, got ${show(v)}`);
  const wellFormed = v.isWellFormed;
  if (typeof wellFormed === "function" && !wellFormed.call(v)) {
    throw codecError("string holds a lone surrogate, which has no UTF-8 form");
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
    throw codecError("string is not valid UTF-8");
  }
}, () => "");
var bytes = defineType("bytes", 1, (w, v) => {
  const data = toBytes(v);
  writeVarint(w, data.length);
  w.put(data);
}, (r) => {
  const len = readLength(r);
  const at = r.take(len);
  return r.bytes.slice(at, at + len);
}, () => new Uint8Array(0));
function checkType(type, where) {
  if (!type || typeof type.write !== "function" || typeof type.read !== "function") {
    throw new TypeError(`${where} is not a Ternio type (u8, string, struct(...), ...)`);
  }
  return type;
}
function elements(name, v) {
  if (Array.isArray(v) || ArrayBuffer.isView(v) && !(v instanceof DataView)) return v;
  throw codecError(`${name} expects an array, got ${show(v)}`);
}
function vec(type) {
  checkType(type, "vec() element");
  const name = `vec<${type.name}>`;
  return defineType(name, 1, (w, v) => {
    const items = elements(name, v);
    writeVarint(w, items.length);
    for (let i = 0; i < items.length; i++) within(i, () => type.write(w, items[i]));
  }, (r) => {
    const n = readVarint(r);
    const fits = type.minSize === 0 ? n <= 65536 : n <= Math.floor(r.remaining / type.minSize);
    if (!fits) throw codecError(`count ${n} of ${type.name} exceeds what the ${count(r.remaining, "byte")} left can hold`);
    const out = [];
    for (let i = 0; i < n; i++) out.push(within(i, () => type.read(r)));
    return out;
  }, () => []);
}
function option(type) {
  checkType(type, "option() inner");
  return defineType(`option<${type.name}>`, 1, (w, v) => {
    const some = v !== null && v !== void 0;
    w.buf[w.take(1)] = some ? 1 : 0;
    if (some) type.write(w, v);
  }, (r) => {
    const tag = r.bytes[r.take(1)];
    if (tag > 1) throw codecError(`option tag must be 0 or 1, got ${tag}`);
    return tag === 1 ? type.read(r) : null;
  }, () => null);
}
function array(type, length) {
  checkType(type, "array() element");
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
  }, () => Array.from({ length }, () => type.defaultValue()));
}
function lazy(get, name = "lazy") {
  let resolved = null;
  const target = () => resolved ??= checkType(get(), `lazy(${name})`);
  return defineType(name, 0, (w, v) => target().write(w, v), (r) => target().read(r), () => target().defaultValue());
}
function opaque(rustName) {
  const refuse = () => {
    throw codecError(`${rustName} has a hand-written encoding the schema does not describe`);
  };
  return defineType(rustName, 0, refuse, refuse, refuse);
}
function fieldsOf(fields, owner) {
  if (Array.isArray(fields)) {
    for (const [key, type] of fields) checkType(type, `${owner} field ${key}`);
    return fields;
  }
  const entries = Object.entries(fields ?? {});
  const numeric = entries.filter(([key]) => /^\d+$/.test(key)).length;
  if (numeric && numeric !== entries.length) {
    throw new TypeError(`${owner}: mixes numeric and named fields; pass [name, type] pairs instead`);
  }
  for (const [key, type] of entries) checkType(type, `${owner} field ${key}`);
  return entries;
}
function writeFields(entries, w, v, name) {
  if (v === null || typeof v !== "object") throw codecError(`${name} expects an object, got ${show(v)}`);
  const value = v;
  for (const [key, type] of entries) within(key, () => type.write(w, value[key]));
}
function readFields(entries, r, out) {
  for (const [key, type] of entries) out[key] = within(key, () => type.read(r));
  return out;
}
function defaults(entries, out) {
  for (const [key, type] of entries) out[key] = type.defaultValue();
  return out;
}
function struct(fields, name = "struct") {
  const entries = fieldsOf(fields, name);
  const minSize = entries.reduce((sum, [, type]) => sum + type.minSize, 0);
  return defineType(
    name,
    minSize,
    (w, v) => writeFields(entries, w, v, name),
    (r) => readFields(entries, r, {}),
    () => defaults(entries, {})
  );
}
function enumType(variants, name = "enum") {
  const list = Object.entries(variants).map(([variant, fields]) => {
    const entries = fieldsOf(fields, `${name}::${variant}`);
    if (entries.some(([key]) => key === "variant")) {
      throw new TypeError(`${name}::${variant}: a field may not be called "variant"`);
    }
    return [variant, entries];
  });
  if (list.length === 0 || list.length > 256) throw new TypeError(`${name}: needs 1 to 256 variants`);
  return defineType(name, 1, (w, v) => {
    const index = list.findIndex(([variant]) => variant === v?.variant);
    if (index < 0) {
      throw codecError(`${name} expects { variant: ${list.map(([n]) => JSON.stringify(n)).join(" | ")}, ... }, got variant ${show(v?.variant)}`);
    }
    w.buf[w.take(1)] = index;
    writeFields(list[index][1], w, v, name);
  }, (r) => {
    const index = r.bytes[r.take(1)];
    if (index >= list.length) throw codecError(`variant index ${index} out of range (${list.length} variants)`);
    const [variant, entries] = list[index];
    return readFields(entries, r, { variant });
  }, () => {
    const [variant, entries] = list[0];
    if (entries.length) throw codecError(`${name} has no default: its first variant ${variant} has fields`);
    return { variant };
  });
}
function checkOpcode(opcode, what = "an application opcode", max = 65279) {
  if (typeof opcode !== "number" || !Number.isInteger(opcode) || opcode < 0 || opcode > max) {
    throw new TypeError(`${show(opcode)} is not ${what} (0x0000..=${hex(max)})`);
  }
  return opcode;
}
function packet(opcode, fields, options = {}) {
  checkOpcode(opcode);
  const name = options.name ?? `packet ${hex(opcode)}`;
  const base = struct(fields, name);
  if (options.response !== void 0) checkOpcode(options.response?.opcode, `${name}'s response packet type`);
  const compress = options.compress ?? true;
  if (typeof compress !== "boolean") throw new TypeError(`${name}: compress must be true or false, got ${show(compress)}`);
  if (options.item !== void 0 && typeof options.item?.decode !== "function") {
    throw new TypeError(`${name}: item must be a type (the items of its stream)`);
  }
  const evolving = options.evolving ?? false;
  const extra = { opcode, response: options.response, compress, item: options.item, evolving };
  if (!evolving) return defineType(name, base.minSize, base.write, base.read, base.defaultValue, extra);
  const entries = fieldsOf(fields, name);
  const optional = options.optional ?? 0;
  if (!Number.isInteger(optional) || optional < 0 || optional > entries.length) {
    throw new TypeError(`${name}: optional must count some of its ${entries.length} fields, got ${show(optional)}`);
  }
  const required = entries.length - optional;
  const type = defineType(name, base.minSize, base.write, base.read, base.defaultValue, extra);
  const decode = (data) => topLevel(type, () => {
    const r = new Reader(toBytes(data));
    const out = {};
    entries.forEach(([key, field], i) => {
      out[key] = i >= required && r.remaining === 0 ? field.defaultValue() : within(key, () => field.read(r));
    });
    return out;
  });
  return Object.freeze({ ...type, decode });
}

// src/lz4.ts
var MIN_MATCH = 4;
var LAST_LITERALS = 5;
var MATCH_FIND_LIMIT = 12;
var MAX_OFFSET = 65535;
var HASH_BITS = 12;
function pushLength(out, rest) {
  while (rest >= 255) {
    out.push(255);
    rest -= 255;
  }
  out.push(rest);
}
function lz4CompressBlock(input) {
  const src = toBytes(input);
  const n = src.length;
  const out = [];
  const table = new Int32Array(1 << HASH_BITS).fill(-1);
  const read32 = (at) => (src[at] | src[at + 1] << 8 | src[at + 2] << 16 | src[at + 3] << 24) >>> 0;
  const hash = (word) => Math.imul(word, 2654435761) >>> 32 - HASH_BITS;
  let anchor = 0;
  const emit = (literalEnd, offset, matchLength) => {
    const literals = literalEnd - anchor;
    const matchCode = matchLength - MIN_MATCH;
    out.push(Math.min(literals, 15) << 4 | (offset ? Math.min(matchCode, 15) : 0));
    if (literals >= 15) pushLength(out, literals - 15);
    for (let k = anchor; k < literalEnd; k++) out.push(src[k]);
    if (!offset) return;
    out.push(offset & 255, offset >> 8);
    if (matchCode >= 15) pushLength(out, matchCode - 15);
  };
  let i = 0;
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
function lz4DecompressBlock(block, length) {
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
  for (; ; ) {
    const token = more("a token");
    let literals = token >> 4;
    if (literals === 15) literals = extend(literals, "a literal length");
    if (ip + literals > src.length) throw codecError("LZ4 block ends inside its literals");
    if (op + literals > length) throw codecError(`LZ4 block decodes to more than the announced ${length} bytes`);
    out.set(src.subarray(ip, ip + literals), op);
    ip += literals;
    op += literals;
    if (ip === src.length) break;
    const offset = more("an offset") | more("an offset") << 8;
    if (offset === 0 || offset > op) throw codecError(`LZ4 match offset ${offset} outside the ${op} bytes decoded`);
    let matchLength = token & 15;
    if (matchLength === 15) matchLength = extend(matchLength, "a match length");
    matchLength += MIN_MATCH;
    if (op + matchLength > length) throw codecError(`LZ4 block decodes to more than the announced ${length} bytes`);
    for (let k = 0; k < matchLength; k++, op++) out[op] = out[op - offset];
  }
  if (op !== length) throw codecError(`LZ4 block decodes to ${op} bytes, not the announced ${length}`);
  return out;
}
function compressBody(body) {
  const data = toBytes(body);
  const block = lz4CompressBlock(data);
  const out = new Uint8Array(4 + block.length);
  new DataView(out.buffer).setUint32(0, data.length, true);
  out.set(block, 4);
  return out;
}
function decompressBody(body, maxLength = DEFAULT_MAX_FRAME_SIZE - HEADER_LEN) {
  const data = toBytes(body);
  if (data.length < 4) throw codecError(`compressed body of ${count(data.length, "byte")} has no room for its length`);
  const length = new DataView(data.buffer, data.byteOffset, data.byteLength).getUint32(0, true);
  if (length > maxLength) {
    throw Object.assign(codecError(`compressed body announces ${length} bytes, above the maximum of ${maxLength}`), { tooLarge: true });
  }
  return lz4DecompressBlock(data.subarray(4), length);
}
function maybeCompress(frame, threshold) {
  if (typeof threshold !== "number" || frame.body.length < threshold) return frame;
  const compressed = compressBody(frame.body);
  if (compressed.length >= frame.body.length) return frame;
  return { ...frame, flags: (frame.flags ?? 0) | Flags.COMPRESSED, body: compressed };
}

// src/frame.ts
function encodeFrame({ opcode, flags = 0, requestId = 0, body = new Uint8Array(0) }) {
  checkOpcode(opcode, "an opcode", 65535);
  if (!Number.isInteger(flags) || flags < 0 || flags > KNOWN_FLAGS) throw new TypeError(`invalid flags ${show(flags)}`);
  if (!Number.isInteger(requestId) || requestId < 0 || requestId > 4294967295) {
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
function decodeFrame(message) {
  const data = toBytes(message);
  if (data.length < HEADER_LEN) throw codecError(`frame of ${count(data.length, "byte")} is shorter than its 7-byte header`);
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const flags = view.getUint8(2);
  if (flags & ~KNOWN_FLAGS) throw codecError(`frame has reserved flag bits set (flags 0x${flags.toString(16)})`);
  return { opcode: view.getUint16(0, true), flags, requestId: view.getUint32(3, true), body: data.subarray(HEADER_LEN) };
}
function encodeBoth(frame, threshold) {
  const plain = encodeFrame(frame);
  const packed = maybeCompress(frame, threshold);
  return { data: packed === frame ? plain : encodeFrame(packed), plain };
}
var opcodeOf = (data) => data[0] | data[1] << 8;
var lossyUtf8 = new TextDecoder("utf-8", { ignoreBOM: true });
function codeAndText(body) {
  if (body.length < 2) return null;
  return { code: body[0] | body[1] << 8, text: lossyUtf8.decode(body.subarray(2)) };
}
function codeAndTextBody(code, text) {
  const encoded = utf8Encoder.encode(text);
  const out = new Uint8Array(2 + encoded.length);
  out[0] = code & 255;
  out[1] = code >> 8;
  out.set(encoded, 2);
  return out;
}
function remoteError(body) {
  const parsed = codeAndText(body);
  if (!parsed) return new TernioError("protocol", `error frame body of ${count(body.length, "byte")} has no code`);
  const { code, text } = parsed;
  const label = nameIn(ErrorCode, code) ?? (code >= 100 ? "application error" : "error");
  return new TernioError("remote", `${label} ${code}: ${text}`, { code, remoteMessage: text });
}

// src/resume.ts
var DEFAULT_REPLAY_BYTES = 64 * 1024;
var ACK_EVERY_FRAMES = 1024;
var ACK_EVERY_BYTES = 32 * 1024;
var ACK_DELAY = 200;
var ACK_IDLE_BYTES = 8 * 1024;
var TICKET_LEN = 32;
var ASK_BOUND = Uint8Array.of(1);
var PLAIN_PATTERN = 0;
var isCounted = (opcode) => opcode <= 65279 || opcode >= 65293 && opcode <= 65296;
var ReplayBuffer = class {
  #frames = [];
  /** Where the first kept frame is in `#frames` (acknowledged ones before it are dropped lazily). */
  #head = 0;
  /** The bound, in bytes. */
  limit;
  /** Counted frames sent so far (numbered from 0). */
  sent = 0;
  /** The number of the first frame kept. */
  first = 0;
  /** The highest count the other side acknowledged. */
  acknowledged = 0;
  /** Bytes kept. */
  bytes = 0;
  /** Whether a frame passed the bound: nothing is kept any more. */
  overflowed = false;
  /** @param limit The bound in bytes. */
  constructor(limit = DEFAULT_REPLAY_BYTES) {
    this.limit = limit;
  }
  /** How many frames are kept. */
  get length() {
    return this.#frames.length - this.#head;
  }
  /**
   * Numbers and keeps a frame just sent (an encoded frame, body uncompressed).
   * @returns Whether it is kept (false: the buffer overflowed, now or before).
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
   * Whether a frame of `frameBytes` can be kept with `keepFree` bytes still
   * left: always once overflowed (nothing is kept) or when empty (a frame
   * that could never fit is not held back: waiting would not make room).
   */
  fits(frameBytes, keepFree) {
    return this.overflowed || this.length === 0 || this.bytes + frameBytes + keepFree <= this.limit;
  }
  /**
   * Takes the other side's count of frames received: the frames before it are dropped.
   * @returns Why the count is a protocol error (ahead of what was sent, or backwards), or null.
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
   */
  replayFrom(received) {
    if (this.overflowed || received < this.first || received > this.sent) return null;
    return this.#frames.slice(this.#head + (received - this.first));
  }
};
var AckSchedule = class {
  /** An ACK is due once this many frames are unacknowledged. */
  everyFrames;
  /** ... or this many bytes of them. */
  everyBytes;
  /** Counted frames received so far. */
  count = 0;
  /** The count last acknowledged. */
  acked = 0;
  /** Bytes received since the last acknowledgement. */
  unackedBytes = 0;
  /** Whether pushes or stream frames (not answers) are among them. */
  heldBack = false;
  /** The server's replay bound, when its ticket said it. */
  bound = null;
  /** The largest push or stream frame received on the session: what a server that said its bound may be holding. */
  largestHeldBack = 0;
  constructor({ frames = ACK_EVERY_FRAMES, bytes: bytes2 = ACK_EVERY_BYTES } = {}) {
    this.everyFrames = frames;
    this.everyBytes = bytes2;
  }
  /**
   * Counts a frame received of `size` bytes (header and plain body);
   * `heldBack`: a push or stream frame, which a server may hold until an
   * ACK makes room (not an answer).
   * @returns Whether an ACK is due now.
   */
  received(size, heldBack = false) {
    this.count++;
    this.unackedBytes += size;
    if (heldBack) {
      this.heldBack = true;
      if (size > this.largestHeldBack) this.largestHeldBack = size;
    }
    return this.count - this.acked >= this.everyFrames || this.unackedBytes >= this.#everyBytes;
  }
  /** The bytes at which an ACK is due: `everyBytes`, or half the server's bound if that is less. */
  get #everyBytes() {
    return this.bound === null ? this.everyBytes : Math.min(this.everyBytes, Math.max(1, Math.floor(this.bound / 2)));
  }
  /**
   * Whether the ACK goes once what came in is handled. Knowing the server's
   * bound: when what is unacknowledged (answers included) and the largest
   * push or stream frame received come to more than three quarters of it
   * (a server holds a push that would leave less than a quarter free: it
   * may be holding one that large). Otherwise: once {@link ACK_IDLE_BYTES}
   * are unacknowledged, pushes or stream frames among them.
   */
  get dueSoon() {
    if (this.bound === null) return this.heldBack && this.unackedBytes >= ACK_IDLE_BYTES;
    const forPushes = this.bound - Math.floor(this.bound / 4);
    return this.unackedBytes > 0 && this.largestHeldBack > 0 && this.unackedBytes + this.largestHeldBack > forPushes;
  }
  /** Whether frames were received since the last acknowledgement. */
  get hasUnacked() {
    return this.count > this.acked;
  }
  /** Marks everything received acknowledged; returns the count to send. */
  take() {
    this.acked = this.count;
    this.unackedBytes = 0;
    this.heldBack = false;
    return this.count;
  }
};
function resumeBody(ticket, received) {
  const out = new Uint8Array(TICKET_LEN + 9);
  out.set(ticket, 0);
  new DataView(out.buffer).setBigUint64(TICKET_LEN, BigInt(received), true);
  out[TICKET_LEN + 8] = PLAIN_PATTERN;
  return out;
}
function parseTicket(body) {
  if (body.length !== TICKET_LEN + 4 && body.length !== TICKET_LEN + 8) return null;
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const ticket = { ticket: body.slice(0, TICKET_LEN), ttl: view.getUint32(TICKET_LEN, true) };
  if (body.length === TICKET_LEN + 8) ticket.replayBytes = view.getUint32(TICKET_LEN + 4, true);
  return ticket;
}
function parseResumed(body) {
  if (body.length < 8 + TICKET_LEN + 4) return null;
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  return {
    received: Number(view.getBigUint64(0, true)),
    ticket: body.slice(8, 8 + TICKET_LEN),
    ttl: view.getUint32(8 + TICKET_LEN, true),
    message: body.subarray(12 + TICKET_LEN)
  };
}
var Session = class {
  /** The replay buffer's bound. */
  replayBytes;
  /** Resumptions so far, over the client's life. */
  resumptions = 0;
  /** The current ticket; null when there is none, or the session can no longer be resumed. */
  ticket = null;
  /** How long the server keeps the session after a loss, in ms. */
  ttl = 0;
  /** The id of the `RESUME_TICKET` waiting for its answer. */
  ticketId = null;
  /** What was sent and not acknowledged: recording starts with the ticket's request. */
  replay = null;
  /** What was received: counting starts with the ticket's answer. */
  acks = null;
  /** Whether the server gave this session a ticket: its loss is worth reporting. */
  held = false;
  /** When (Date.now()) the connection was lost, while the session waits to be resumed. */
  lostAt = null;
  /** Why the session cannot be resumed, once its connection was lost: reported with the next connection. */
  ended = null;
  /**
   * Whether `RESUME_TICKET` goes without a body: a server refused the
   * request that asked for its bound as `MALFORMED` (it is older than that
   * request). For the client's life, as the Rust client.
   */
  plainTicket = false;
  constructor(replayBytes) {
    this.replayBytes = replayBytes;
  }
  /** Forgets the session: a new one starts, nothing recorded or counted until its ticket is asked for. */
  reset() {
    this.ticket = null;
    this.ttl = 0;
    this.ticketId = null;
    this.replay = null;
    this.acks = null;
    this.held = false;
    this.lostAt = null;
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
  /** The server's ticket (or a resumption's new one): what is received from now on is counted, and acknowledged by the server's bound if it said it. */
  granted({ ticket, ttl, replayBytes }) {
    this.ticketId = null;
    this.ticket = ticket;
    this.ttl = ttl;
    this.acks ??= new AckSchedule();
    if (replayBytes !== void 0) this.acks.bound = Math.max(1, replayBytes);
    this.held = true;
  }
  /**
   * Whether a counted frame of `frameBytes` (header and plain body) may be
   * sent now without overflowing the replay buffer, a quarter of its bound
   * left for requests (as the Rust client): always when nothing is recorded.
   */
  hasRoom(frameBytes) {
    return this.replay?.fits(frameBytes, Math.floor(this.replay.limit / 4)) ?? true;
  }
  /** Records a counted frame just sent; an overflow ends resumability (the connection goes on). */
  record(frame) {
    if (this.replay && !this.replay.record(frame)) this.ticket = null;
  }
};
function resumeOptions(option2) {
  if (!option2) return null;
  const replayBytes = option2 === true ? DEFAULT_REPLAY_BYTES : option2.replayBytes ?? DEFAULT_REPLAY_BYTES;
  if (typeof replayBytes !== "number" || !(replayBytes >= 0)) {
    throw new TypeError(`resume.replayBytes must be a number ≥ 0, got ${show(replayBytes)}`);
  }
  return { replayBytes };
}

// src/reconnect.ts
var FINAL_REASONS = [DisconnectReason.NORMAL, DisconnectReason.KICKED];
var REFUSAL_REASONS = [DisconnectReason.TOO_MANY_CONNECTIONS, DisconnectReason.SHUTDOWN];
function reconnectPolicy(option2) {
  if (!option2) return null;
  const given = option2 === true ? {} : option2;
  const policy = {
    initialDelay: given.initialDelay ?? 100,
    maxDelay: given.maxDelay ?? 5e3,
    multiplier: Math.max(1, given.multiplier ?? 2),
    refusalDelay: given.refusalDelay ?? 2e3,
    healthyAfter: given.healthyAfter ?? 5e3,
    maxAttempts: given.maxAttempts ?? 10
  };
  for (const [key, value] of Object.entries(policy)) {
    if (typeof value !== "number" || Number.isNaN(value) || value < 0) {
      throw new TypeError(`reconnect.${key} must be a number ≥ 0, got ${show(value)}`);
    }
  }
  return Object.freeze(policy);
}
function retryDelay(policy, attempt, refused) {
  const range = Math.min(policy.maxDelay, policy.initialDelay * policy.multiplier ** (attempt - 1));
  return refused ? policy.refusalDelay + Math.random() * Math.max(range, policy.refusalDelay) : Math.random() * range;
}

// src/streams.ts
var StreamState = class {
  /** Its request's name, for messages. */
  name;
  /** Its id: its request's. */
  id = 0;
  /** Item bodies received and not taken yet. */
  items = [];
  /** Items the server may still send (a download's credit granted). */
  granted = STREAM_INITIAL_CREDIT;
  /** Items the client may still send (an upload's credit received). */
  credit = STREAM_INITIAL_CREDIT;
  /** Items taken since the last STREAM_CREDIT. */
  taken = 0;
  /** Whether it ended (answered, failed, cancelled). */
  ended = false;
  /** The answer's frame, once answered. */
  answer = void 0;
  /** Why it failed, until the application is told. */
  error = null;
  /** Removes the 'abort' listener of its request's signal, if it has one: called once it ends, however it ends. */
  release = null;
  #waiters = [];
  constructor(name) {
    this.name = name;
  }
  /** Wakes whoever waits for an item, credit or the end. */
  wake() {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const waiter of waiters) waiter();
  }
  /** Resolves at the next {@link StreamState#wake}. */
  wait() {
    return new Promise((resolve) => {
      this.#waiters.push(resolve);
    });
  }
};
function downloadIterator(stream, itemType, link) {
  return {
    [Symbol.asyncIterator]() {
      return this;
    },
    async next() {
      for (; ; ) {
        if (stream.items.length > 0) {
          const body = stream.items.shift();
          stream.taken++;
          if (stream.taken >= STREAM_INITIAL_CREDIT / 2 && !stream.ended) {
            const items = stream.taken;
            stream.taken = 0;
            stream.granted += items;
            try {
              link.send(SystemOpcode.STREAM_CREDIT, stream.id, u32.encode(items));
            } catch {
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
          return { value: void 0, done: true };
        }
        await stream.wait();
      }
    },
    async return() {
      link.cancel(stream);
      stream.items.length = 0;
      return { value: void 0, done: true };
    }
  };
}
function uploadHandle(stream, packetType, itemType, link) {
  const answer = () => {
    if (stream.error) throw stream.error;
    const frame = stream.answer;
    const expected = packetType.response;
    if (expected && frame.opcode === expected.opcode) return expected.decode(frame.body);
    if (frame.opcode === packetType.opcode && frame.body.length === 0) return void 0;
    throw new TernioError("protocol", `${stream.name} answered with unexpected opcode ${hex(frame.opcode)}`);
  };
  const end = async (code, message) => {
    if (!stream.ended) {
      link.send(SystemOpcode.STREAM_END, stream.id, codeAndTextBody(code, message));
      while (!stream.ended) await stream.wait();
    }
    return answer();
  };
  return {
    async send(item) {
      const body = itemType.encode(item);
      const frameBytes = HEADER_LEN + body.length;
      while (!stream.ended && (stream.credit === 0 || !link.room(stream, frameBytes))) await stream.wait();
      if (stream.ended) {
        throw stream.error ?? (stream.answer ? new TernioError("closed", `the server answered ${stream.name} before the upload ended`, { answered: true }) : new TernioError("closed", `${stream.name} was cancelled`));
      }
      stream.credit--;
      link.send(SystemOpcode.STREAM_ITEM, stream.id, body);
    },
    finish: () => end(0, ""),
    fail: (code, message = "") => end(Math.max(1, code), message),
    cancel: () => link.cancel(stream)
  };
}

// node_modules/@noble/ciphers/utils.js
/*! noble-ciphers - MIT License (c) 2023 Paul Miller (paulmillr.com) */
function isBytes(a) {
  return a instanceof Uint8Array || ArrayBuffer.isView(a) && a.constructor.name === "Uint8Array" && "BYTES_PER_ELEMENT" in a && a.BYTES_PER_ELEMENT === 1;
}
var atitle = (title) => title ? `"${title}" ` : "";
function abool(value, title = "") {
  if (typeof value !== "boolean")
    throw new TypeError(atitle(title) + "expected boolean, got type=" + typeof value);
  return value;
}
function anumber(n, title = "") {
  if (typeof n !== "number")
    throw new TypeError(atitle(title) + "expected number, got " + typeof n);
  if (!Number.isSafeInteger(n) || n < 0)
    throw new RangeError(atitle(title) + "expected integer >= 0, got " + n);
  return n;
}
function abytes(value, length, title = "") {
  if (isBytes(value) && (length === void 0 || value.length === length))
    return value;
  if (length !== void 0)
    anumber(length, "length");
  const bytes2 = isBytes(value);
  const ofLen = length !== void 0 ? ` of length ${length}` : "";
  const got = bytes2 ? `length=${value.length}` : `type=${typeof value}`;
  const message = atitle(title) + "expected Uint8Array" + ofLen + ", got " + got;
  if (!bytes2)
    throw new TypeError(message);
  throw new RangeError(message);
}
var aobject = (value, label) => {
  if (value === null || typeof value !== "object" || Array.isArray(value))
    throw new TypeError(label === "object" ? "expected valid options object" : `"${label}" expected object, got type=${typeof value}`);
};
function aexists(instance, checkFinished = true) {
  if (instance.destroyed)
    throw new Error("hash was destroyed");
  if (checkFinished && instance.finished)
    throw new Error("digest() was already called");
}
function aoutput(out, instance) {
  abytes(out, void 0, "output");
  const min = instance.outputLen;
  if (!(out.length >= min)) {
    throw new RangeError('"output" expected length >= ' + min);
  }
}
function u322(arr) {
  return new Uint32Array(arr.buffer, arr.byteOffset, Math.floor(arr.byteLength / 4));
}
function clean(...arrays) {
  for (let i = 0; i < arrays.length; i++) {
    arrays[i].fill(0);
  }
}
function createView(arr) {
  return new DataView(arr.buffer, arr.byteOffset, arr.byteLength);
}
var isLE = /* @__PURE__ */ (() => new Uint8Array(new Uint32Array([287454020]).buffer)[0] === 68)();
function byteSwap(word) {
  return word << 24 & 4278190080 | word << 8 & 16711680 | word >>> 8 & 65280 | word >>> 24 & 255;
}
function byteSwap32(arr) {
  for (let i = 0; i < arr.length; i++) {
    arr[i] = byteSwap(arr[i]);
  }
  return arr;
}
var swap32IfBE = isLE ? (u) => u : byteSwap32;
function overlapBytes(a, b) {
  if (!a.byteLength || !b.byteLength)
    return false;
  return a.buffer === b.buffer && // best we can do, may fail with an obscure Proxy
  a.byteOffset < b.byteOffset + b.byteLength && // a starts before b end
  b.byteOffset < a.byteOffset + a.byteLength;
}
function complexOverlapBytes(input, output) {
  if (overlapBytes(input, output) && input.byteOffset < output.byteOffset)
    throw new Error("complex overlap of input and output is not supported");
}
function checkOpts(defaults2, opts) {
  aobject(defaults2, "defaults");
  aobject(opts, "opts");
  const merged = Object.assign(defaults2, opts);
  return merged;
}
function equalBytes(a, b) {
  a = abytes(a);
  b = abytes(b);
  if (a.length !== b.length)
    return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++)
    diff |= a[i] ^ b[i];
  return diff === 0;
}
function wrapMacConstructor(keyLen, macCons, fromMsg) {
  const mac = macCons;
  const getArgs = fromMsg || (() => []);
  const macC = (msg, key) => mac(key, ...getArgs(msg)).update(msg).digest();
  const tmp = mac(new Uint8Array(keyLen), ...getArgs(new Uint8Array(0)));
  macC.outputLen = tmp.outputLen;
  macC.blockLen = tmp.blockLen;
  macC.create = (key, ...args) => mac(key, ...args);
  return macC;
}
var wrapCipher = /* @__NO_SIDE_EFFECTS__ */ (params, constructor) => {
  function wrappedCipher(key, ...args) {
    abytes(key, void 0, "key");
    if (params.nonceLength !== void 0) {
      const nonce = args[0];
      abytes(nonce, params.varSizeNonce ? void 0 : params.nonceLength, "nonce");
    }
    const tagl = params.tagLength;
    const aadStart = params.nonceLength !== void 0 ? 1 : 0;
    if (!params.withAAD) {
      for (let i = aadStart; i < args.length; i++)
        if (isBytes(args[i]))
          throw new Error("AAD not supported");
    }
    if (params.withAAD && args[aadStart] !== void 0)
      abytes(args[aadStart], void 0, "AAD");
    const cipher = constructor(key, ...args);
    const checkOutput = (fnLength, output) => {
      if (output !== void 0) {
        if (fnLength !== 2)
          throw new Error("cipher output not supported");
        abytes(output, void 0, "output");
      }
    };
    let called = false;
    const wrCipher = {
      encrypt(data, output) {
        if (called)
          throw new Error("cannot encrypt() twice with same key + nonce");
        called = true;
        abytes(data, void 0, "data");
        checkOutput(cipher.encrypt.length, output);
        return cipher.encrypt(data, output);
      },
      decrypt(data, output) {
        abytes(data, void 0, "data");
        if (tagl && data.length < tagl)
          throw new Error('"ciphertext" expected length >= tagLength=' + tagl);
        checkOutput(cipher.decrypt.length, output);
        return cipher.decrypt(data, output);
      }
    };
    return wrCipher;
  }
  Object.assign(wrappedCipher, params);
  return wrappedCipher;
};
function getOutput(expectedLength, out, onlyAligned = true) {
  if (out === void 0)
    return new Uint8Array(expectedLength);
  abytes(out, expectedLength, "output");
  if (onlyAligned && !isAligned32(out))
    throw new Error("invalid output, must be aligned");
  return out;
}
function u64Lengths(dataLength, aadLength, isLE3) {
  anumber(dataLength);
  anumber(aadLength);
  abool(isLE3);
  const num = new Uint8Array(16);
  const view = createView(num);
  view.setBigUint64(0, BigInt(aadLength), isLE3);
  view.setBigUint64(8, BigInt(dataLength), isLE3);
  return num;
}
function isAligned32(bytes2) {
  return bytes2.byteOffset % 4 === 0;
}
function copyBytes(bytes2) {
  return Uint8Array.from(abytes(bytes2));
}

// node_modules/@noble/ciphers/_arx.js
var encodeStr = (str) => Uint8Array.from(str.split(""), (c) => c.charCodeAt(0));
var sigma16_32 = /* @__PURE__ */ (() => swap32IfBE(u322(encodeStr("expand 16-byte k"))))();
var sigma32_32 = /* @__PURE__ */ (() => swap32IfBE(u322(encodeStr("expand 32-byte k"))))();
function rotl(a, b) {
  return a << b | a >>> 32 - b;
}
var BLOCK_LEN = 64;
var BLOCK_LEN32 = 16;
var MAX_COUNTER = /* @__PURE__ */ (() => 2 ** 32 - 1)();
var U32_EMPTY = /* @__PURE__ */ Uint32Array.of();
function runCipher(core, sigma, key, nonce, data, output, counter, rounds) {
  const len = data.length;
  const block = new Uint8Array(BLOCK_LEN);
  const b32 = u322(block);
  const isAligned = isLE && isAligned32(data) && isAligned32(output);
  const d32 = isAligned ? u322(data) : U32_EMPTY;
  const o32 = isAligned ? u322(output) : U32_EMPTY;
  if (!isLE) {
    for (let pos = 0; pos < len; counter++) {
      core(sigma, key, nonce, b32, counter, rounds);
      swap32IfBE(b32);
      if (counter >= MAX_COUNTER)
        throw new Error("arx: counter overflow");
      const take = Math.min(BLOCK_LEN, len - pos);
      for (let j = 0, posj; j < take; j++) {
        posj = pos + j;
        output[posj] = data[posj] ^ block[j];
      }
      pos += take;
    }
    return;
  }
  for (let pos = 0; pos < len; counter++) {
    core(sigma, key, nonce, b32, counter, rounds);
    if (counter >= MAX_COUNTER)
      throw new Error("arx: counter overflow");
    const take = Math.min(BLOCK_LEN, len - pos);
    if (isAligned && take === BLOCK_LEN) {
      const pos32 = pos / 4;
      if (pos % 4 !== 0)
        throw new Error("arx: invalid block position");
      for (let j = 0, posj; j < BLOCK_LEN32; j++) {
        posj = pos32 + j;
        o32[posj] = d32[posj] ^ b32[j];
      }
      pos += BLOCK_LEN;
      continue;
    }
    for (let j = 0, posj; j < take; j++) {
      posj = pos + j;
      output[posj] = data[posj] ^ block[j];
    }
    pos += take;
  }
}
function createCipher(core, opts) {
  const { allowShortKeys, extendNonceFn, counterLength, counterRight, rounds } = checkOpts({ allowShortKeys: false, counterLength: 8, counterRight: false, rounds: 20 }, opts);
  if (typeof core !== "function")
    throw new Error("core must be a function");
  anumber(counterLength);
  anumber(rounds);
  abool(counterRight);
  abool(allowShortKeys);
  return (key, nonce, data, output, counter = 0) => {
    abytes(key, void 0, "key");
    abytes(nonce, void 0, "nonce");
    abytes(data, void 0, "data");
    const len = data.length;
    const hasOutput = output !== void 0;
    output = getOutput(len, output, false);
    if (hasOutput)
      complexOverlapBytes(data, output);
    anumber(counter);
    if (counter < 0 || counter >= MAX_COUNTER)
      throw new Error("arx: counter overflow");
    const toClean = [];
    let l = key.length;
    let k;
    let sigma;
    if (l === 32) {
      toClean.push(k = copyBytes(key));
      sigma = sigma32_32;
    } else if (l === 16 && allowShortKeys) {
      k = new Uint8Array(32);
      k.set(key);
      k.set(key, 16);
      sigma = sigma16_32;
      toClean.push(k);
    } else {
      abytes(key, 32, "arx key");
      throw new Error("invalid key size");
    }
    if (!isLE || !isAligned32(nonce))
      toClean.push(nonce = copyBytes(nonce));
    let k32 = u322(k);
    if (extendNonceFn) {
      if (nonce.length !== 24)
        throw new Error("arx: extended nonce must be 24 bytes");
      const n16 = nonce.subarray(0, 16);
      if (isLE)
        extendNonceFn(sigma, k32, u322(n16), k32);
      else {
        const sigmaRaw = swap32IfBE(Uint32Array.from(sigma));
        extendNonceFn(sigmaRaw, k32, u322(n16), k32);
        clean(sigmaRaw);
        swap32IfBE(k32);
      }
      nonce = nonce.subarray(16);
    } else if (!isLE)
      swap32IfBE(k32);
    const nonceNcLen = 16 - counterLength;
    if (nonceNcLen !== nonce.length)
      throw new Error(`arx: nonce must be ${nonceNcLen} or 16 bytes`);
    if (nonceNcLen !== 12) {
      const nc = new Uint8Array(12);
      nc.set(nonce, counterRight ? 0 : 12 - nonce.length);
      nonce = nc;
      toClean.push(nonce);
    }
    const n32 = swap32IfBE(u322(nonce));
    try {
      runCipher(core, sigma, k32, n32, data, output, counter, rounds);
      return output;
    } finally {
      clean(...toClean);
    }
  };
}

// node_modules/@noble/ciphers/_poly1305.js
function u8to16(a, i) {
  return a[i++] & 255 | (a[i++] & 255) << 8;
}
var Poly1305 = class {
  blockLen = 16;
  outputLen = 16;
  buffer = new Uint8Array(16);
  r = new Uint16Array(10);
  // Allocating 1 array with .subarray() here is slower than 3
  h = new Uint16Array(10);
  pad = new Uint16Array(8);
  pos = 0;
  finished = false;
  destroyed = false;
  // Can be speed-up using BigUint64Array, at the cost of complexity
  constructor(key) {
    key = copyBytes(abytes(key, 32, "key"));
    const t0 = u8to16(key, 0);
    const t1 = u8to16(key, 2);
    const t2 = u8to16(key, 4);
    const t3 = u8to16(key, 6);
    const t4 = u8to16(key, 8);
    const t5 = u8to16(key, 10);
    const t6 = u8to16(key, 12);
    const t7 = u8to16(key, 14);
    this.r[0] = t0 & 8191;
    this.r[1] = (t0 >>> 13 | t1 << 3) & 8191;
    this.r[2] = (t1 >>> 10 | t2 << 6) & 7939;
    this.r[3] = (t2 >>> 7 | t3 << 9) & 8191;
    this.r[4] = (t3 >>> 4 | t4 << 12) & 255;
    this.r[5] = t4 >>> 1 & 8190;
    this.r[6] = (t4 >>> 14 | t5 << 2) & 8191;
    this.r[7] = (t5 >>> 11 | t6 << 5) & 8065;
    this.r[8] = (t6 >>> 8 | t7 << 8) & 8191;
    this.r[9] = t7 >>> 5 & 127;
    for (let i = 0; i < 8; i++)
      this.pad[i] = u8to16(key, 16 + 2 * i);
  }
  process(data, offset, isLast = false) {
    const hibit = isLast ? 0 : 1 << 11;
    const { h, r } = this;
    const r0 = r[0];
    const r1 = r[1];
    const r2 = r[2];
    const r3 = r[3];
    const r4 = r[4];
    const r5 = r[5];
    const r6 = r[6];
    const r7 = r[7];
    const r8 = r[8];
    const r9 = r[9];
    const t0 = u8to16(data, offset + 0);
    const t1 = u8to16(data, offset + 2);
    const t2 = u8to16(data, offset + 4);
    const t3 = u8to16(data, offset + 6);
    const t4 = u8to16(data, offset + 8);
    const t5 = u8to16(data, offset + 10);
    const t6 = u8to16(data, offset + 12);
    const t7 = u8to16(data, offset + 14);
    let h0 = h[0] + (t0 & 8191);
    let h1 = h[1] + ((t0 >>> 13 | t1 << 3) & 8191);
    let h2 = h[2] + ((t1 >>> 10 | t2 << 6) & 8191);
    let h3 = h[3] + ((t2 >>> 7 | t3 << 9) & 8191);
    let h4 = h[4] + ((t3 >>> 4 | t4 << 12) & 8191);
    let h5 = h[5] + (t4 >>> 1 & 8191);
    let h6 = h[6] + ((t4 >>> 14 | t5 << 2) & 8191);
    let h7 = h[7] + ((t5 >>> 11 | t6 << 5) & 8191);
    let h8 = h[8] + ((t6 >>> 8 | t7 << 8) & 8191);
    let h9 = h[9] + (t7 >>> 5 | hibit);
    let c = 0;
    let d0 = c + h0 * r0 + h1 * (5 * r9) + h2 * (5 * r8) + h3 * (5 * r7) + h4 * (5 * r6);
    c = d0 >>> 13;
    d0 &= 8191;
    d0 += h5 * (5 * r5) + h6 * (5 * r4) + h7 * (5 * r3) + h8 * (5 * r2) + h9 * (5 * r1);
    c += d0 >>> 13;
    d0 &= 8191;
    let d1 = c + h0 * r1 + h1 * r0 + h2 * (5 * r9) + h3 * (5 * r8) + h4 * (5 * r7);
    c = d1 >>> 13;
    d1 &= 8191;
    d1 += h5 * (5 * r6) + h6 * (5 * r5) + h7 * (5 * r4) + h8 * (5 * r3) + h9 * (5 * r2);
    c += d1 >>> 13;
    d1 &= 8191;
    let d2 = c + h0 * r2 + h1 * r1 + h2 * r0 + h3 * (5 * r9) + h4 * (5 * r8);
    c = d2 >>> 13;
    d2 &= 8191;
    d2 += h5 * (5 * r7) + h6 * (5 * r6) + h7 * (5 * r5) + h8 * (5 * r4) + h9 * (5 * r3);
    c += d2 >>> 13;
    d2 &= 8191;
    let d3 = c + h0 * r3 + h1 * r2 + h2 * r1 + h3 * r0 + h4 * (5 * r9);
    c = d3 >>> 13;
    d3 &= 8191;
    d3 += h5 * (5 * r8) + h6 * (5 * r7) + h7 * (5 * r6) + h8 * (5 * r5) + h9 * (5 * r4);
    c += d3 >>> 13;
    d3 &= 8191;
    let d4 = c + h0 * r4 + h1 * r3 + h2 * r2 + h3 * r1 + h4 * r0;
    c = d4 >>> 13;
    d4 &= 8191;
    d4 += h5 * (5 * r9) + h6 * (5 * r8) + h7 * (5 * r7) + h8 * (5 * r6) + h9 * (5 * r5);
    c += d4 >>> 13;
    d4 &= 8191;
    let d5 = c + h0 * r5 + h1 * r4 + h2 * r3 + h3 * r2 + h4 * r1;
    c = d5 >>> 13;
    d5 &= 8191;
    d5 += h5 * r0 + h6 * (5 * r9) + h7 * (5 * r8) + h8 * (5 * r7) + h9 * (5 * r6);
    c += d5 >>> 13;
    d5 &= 8191;
    let d6 = c + h0 * r6 + h1 * r5 + h2 * r4 + h3 * r3 + h4 * r2;
    c = d6 >>> 13;
    d6 &= 8191;
    d6 += h5 * r1 + h6 * r0 + h7 * (5 * r9) + h8 * (5 * r8) + h9 * (5 * r7);
    c += d6 >>> 13;
    d6 &= 8191;
    let d7 = c + h0 * r7 + h1 * r6 + h2 * r5 + h3 * r4 + h4 * r3;
    c = d7 >>> 13;
    d7 &= 8191;
    d7 += h5 * r2 + h6 * r1 + h7 * r0 + h8 * (5 * r9) + h9 * (5 * r8);
    c += d7 >>> 13;
    d7 &= 8191;
    let d8 = c + h0 * r8 + h1 * r7 + h2 * r6 + h3 * r5 + h4 * r4;
    c = d8 >>> 13;
    d8 &= 8191;
    d8 += h5 * r3 + h6 * r2 + h7 * r1 + h8 * r0 + h9 * (5 * r9);
    c += d8 >>> 13;
    d8 &= 8191;
    let d9 = c + h0 * r9 + h1 * r8 + h2 * r7 + h3 * r6 + h4 * r5;
    c = d9 >>> 13;
    d9 &= 8191;
    d9 += h5 * r4 + h6 * r3 + h7 * r2 + h8 * r1 + h9 * r0;
    c += d9 >>> 13;
    d9 &= 8191;
    c = (c << 2) + c | 0;
    c = c + d0 | 0;
    d0 = c & 8191;
    c = c >>> 13;
    d1 += c;
    h[0] = d0;
    h[1] = d1;
    h[2] = d2;
    h[3] = d3;
    h[4] = d4;
    h[5] = d5;
    h[6] = d6;
    h[7] = d7;
    h[8] = d8;
    h[9] = d9;
  }
  finalize() {
    const { h, pad } = this;
    const g = new Uint16Array(10);
    let c = h[1] >>> 13;
    h[1] &= 8191;
    for (let i = 2; i < 10; i++) {
      h[i] += c;
      c = h[i] >>> 13;
      h[i] &= 8191;
    }
    h[0] += c * 5;
    c = h[0] >>> 13;
    h[0] &= 8191;
    h[1] += c;
    c = h[1] >>> 13;
    h[1] &= 8191;
    h[2] += c;
    g[0] = h[0] + 5;
    c = g[0] >>> 13;
    g[0] &= 8191;
    for (let i = 1; i < 10; i++) {
      g[i] = h[i] + c;
      c = g[i] >>> 13;
      g[i] &= 8191;
    }
    g[9] -= 1 << 13;
    let mask = (c ^ 1) - 1;
    for (let i = 0; i < 10; i++)
      g[i] &= mask;
    mask = ~mask;
    for (let i = 0; i < 10; i++)
      h[i] = h[i] & mask | g[i];
    h[0] = (h[0] | h[1] << 13) & 65535;
    h[1] = (h[1] >>> 3 | h[2] << 10) & 65535;
    h[2] = (h[2] >>> 6 | h[3] << 7) & 65535;
    h[3] = (h[3] >>> 9 | h[4] << 4) & 65535;
    h[4] = (h[4] >>> 12 | h[5] << 1 | h[6] << 14) & 65535;
    h[5] = (h[6] >>> 2 | h[7] << 11) & 65535;
    h[6] = (h[7] >>> 5 | h[8] << 8) & 65535;
    h[7] = (h[8] >>> 8 | h[9] << 5) & 65535;
    let f = h[0] + pad[0];
    h[0] = f & 65535;
    for (let i = 1; i < 8; i++) {
      f = (h[i] + pad[i] | 0) + (f >>> 16) | 0;
      h[i] = f & 65535;
    }
    clean(g);
  }
  update(data) {
    aexists(this);
    abytes(data);
    data = copyBytes(data);
    const { buffer, blockLen } = this;
    const len = data.length;
    for (let pos = 0; pos < len; ) {
      const take = Math.min(blockLen - this.pos, len - pos);
      if (take === blockLen) {
        for (; blockLen <= len - pos; pos += blockLen)
          this.process(data, pos);
        continue;
      }
      buffer.set(data.subarray(pos, pos + take), this.pos);
      this.pos += take;
      pos += take;
      if (this.pos === blockLen) {
        this.process(buffer, 0, false);
        this.pos = 0;
      }
    }
    return this;
  }
  destroy() {
    this.destroyed = true;
    clean(this.h, this.r, this.buffer, this.pad);
  }
  digestInto(out) {
    aexists(this);
    aoutput(out, this);
    this.finished = true;
    const { buffer, h } = this;
    let { pos } = this;
    if (pos) {
      buffer[pos++] = 1;
      for (; pos < 16; pos++)
        buffer[pos] = 0;
      this.process(buffer, 0, true);
    }
    this.finalize();
    let opos = 0;
    for (let i = 0; i < 8; i++) {
      out[opos++] = h[i] >>> 0;
      out[opos++] = h[i] >>> 8;
    }
  }
  digest() {
    const { buffer, outputLen } = this;
    this.digestInto(buffer);
    const res = buffer.slice(0, outputLen);
    this.destroy();
    return res;
  }
};
var poly1305 = /* @__PURE__ */ wrapMacConstructor(32, (key) => new Poly1305(key));

// node_modules/@noble/ciphers/chacha.js
function chachaCore(s, k, n, out, cnt, rounds = 20) {
  let y00 = s[0], y01 = s[1], y02 = s[2], y03 = s[3], y04 = k[0], y05 = k[1], y06 = k[2], y07 = k[3], y08 = k[4], y09 = k[5], y10 = k[6], y11 = k[7], y12 = cnt, y13 = n[0], y14 = n[1], y15 = n[2];
  let x00 = y00, x01 = y01, x02 = y02, x03 = y03, x04 = y04, x05 = y05, x06 = y06, x07 = y07, x08 = y08, x09 = y09, x10 = y10, x11 = y11, x12 = y12, x13 = y13, x14 = y14, x15 = y15;
  for (let r = 0; r < rounds; r += 2) {
    x00 = x00 + x04 | 0;
    x12 = rotl(x12 ^ x00, 16);
    x08 = x08 + x12 | 0;
    x04 = rotl(x04 ^ x08, 12);
    x00 = x00 + x04 | 0;
    x12 = rotl(x12 ^ x00, 8);
    x08 = x08 + x12 | 0;
    x04 = rotl(x04 ^ x08, 7);
    x01 = x01 + x05 | 0;
    x13 = rotl(x13 ^ x01, 16);
    x09 = x09 + x13 | 0;
    x05 = rotl(x05 ^ x09, 12);
    x01 = x01 + x05 | 0;
    x13 = rotl(x13 ^ x01, 8);
    x09 = x09 + x13 | 0;
    x05 = rotl(x05 ^ x09, 7);
    x02 = x02 + x06 | 0;
    x14 = rotl(x14 ^ x02, 16);
    x10 = x10 + x14 | 0;
    x06 = rotl(x06 ^ x10, 12);
    x02 = x02 + x06 | 0;
    x14 = rotl(x14 ^ x02, 8);
    x10 = x10 + x14 | 0;
    x06 = rotl(x06 ^ x10, 7);
    x03 = x03 + x07 | 0;
    x15 = rotl(x15 ^ x03, 16);
    x11 = x11 + x15 | 0;
    x07 = rotl(x07 ^ x11, 12);
    x03 = x03 + x07 | 0;
    x15 = rotl(x15 ^ x03, 8);
    x11 = x11 + x15 | 0;
    x07 = rotl(x07 ^ x11, 7);
    x00 = x00 + x05 | 0;
    x15 = rotl(x15 ^ x00, 16);
    x10 = x10 + x15 | 0;
    x05 = rotl(x05 ^ x10, 12);
    x00 = x00 + x05 | 0;
    x15 = rotl(x15 ^ x00, 8);
    x10 = x10 + x15 | 0;
    x05 = rotl(x05 ^ x10, 7);
    x01 = x01 + x06 | 0;
    x12 = rotl(x12 ^ x01, 16);
    x11 = x11 + x12 | 0;
    x06 = rotl(x06 ^ x11, 12);
    x01 = x01 + x06 | 0;
    x12 = rotl(x12 ^ x01, 8);
    x11 = x11 + x12 | 0;
    x06 = rotl(x06 ^ x11, 7);
    x02 = x02 + x07 | 0;
    x13 = rotl(x13 ^ x02, 16);
    x08 = x08 + x13 | 0;
    x07 = rotl(x07 ^ x08, 12);
    x02 = x02 + x07 | 0;
    x13 = rotl(x13 ^ x02, 8);
    x08 = x08 + x13 | 0;
    x07 = rotl(x07 ^ x08, 7);
    x03 = x03 + x04 | 0;
    x14 = rotl(x14 ^ x03, 16);
    x09 = x09 + x14 | 0;
    x04 = rotl(x04 ^ x09, 12);
    x03 = x03 + x04 | 0;
    x14 = rotl(x14 ^ x03, 8);
    x09 = x09 + x14 | 0;
    x04 = rotl(x04 ^ x09, 7);
  }
  let oi = 0;
  out[oi++] = y00 + x00 | 0;
  out[oi++] = y01 + x01 | 0;
  out[oi++] = y02 + x02 | 0;
  out[oi++] = y03 + x03 | 0;
  out[oi++] = y04 + x04 | 0;
  out[oi++] = y05 + x05 | 0;
  out[oi++] = y06 + x06 | 0;
  out[oi++] = y07 + x07 | 0;
  out[oi++] = y08 + x08 | 0;
  out[oi++] = y09 + x09 | 0;
  out[oi++] = y10 + x10 | 0;
  out[oi++] = y11 + x11 | 0;
  out[oi++] = y12 + x12 | 0;
  out[oi++] = y13 + x13 | 0;
  out[oi++] = y14 + x14 | 0;
  out[oi++] = y15 + x15 | 0;
}
var chacha20 = /* @__PURE__ */ createCipher(chachaCore, {
  counterRight: false,
  counterLength: 4,
  allowShortKeys: false
});
var ZEROS16 = /* @__PURE__ */ new Uint8Array(16);
var updatePadded = (h, msg) => {
  h.update(msg);
  const leftover = msg.length % 16;
  if (leftover)
    h.update(ZEROS16.subarray(leftover));
};
var ZEROS32 = /* @__PURE__ */ new Uint8Array(32);
function computeTag(fn, key, nonce, ciphertext, AAD) {
  if (AAD !== void 0)
    abytes(AAD, void 0, "AAD");
  const authKey = fn(key, nonce, ZEROS32);
  const lengths = u64Lengths(ciphertext.length, AAD ? AAD.length : 0, true);
  const h = poly1305.create(authKey);
  if (AAD)
    updatePadded(h, AAD);
  updatePadded(h, ciphertext);
  h.update(lengths);
  const res = h.digest();
  clean(authKey, lengths);
  return res;
}
var _poly1305_aead = (xorStream) => (key, nonce, AAD) => {
  const tagLength = 16;
  return {
    encrypt(plaintext, output) {
      const plength = plaintext.length;
      output = getOutput(plength + tagLength, output, false);
      output.set(plaintext);
      const oPlain = output.subarray(0, -tagLength);
      xorStream(key, nonce, oPlain, oPlain, 1);
      const tag = computeTag(xorStream, key, nonce, oPlain, AAD);
      output.set(tag, plength);
      clean(tag);
      return output;
    },
    decrypt(ciphertext, output) {
      output = getOutput(ciphertext.length - tagLength, output, false);
      const data = ciphertext.subarray(0, -tagLength);
      const passedTag = ciphertext.subarray(-tagLength);
      const tag = computeTag(xorStream, key, nonce, data, AAD);
      if (!equalBytes(passedTag, tag)) {
        clean(tag);
        throw new Error("invalid tag");
      }
      output.set(ciphertext.subarray(0, -tagLength));
      xorStream(key, nonce, output, output, 1);
      clean(tag);
      return output;
    }
  };
};
var chacha20poly1305 = /* @__PURE__ */ wrapCipher(
  { blockSize: 64, nonceLength: 12, tagLength: 16, withAAD: true },
  /* @__PURE__ */ _poly1305_aead(chacha20)
);

// node_modules/@noble/hashes/utils.js
function isBytes2(a) {
  return a instanceof Uint8Array || ArrayBuffer.isView(a) && a.constructor.name === "Uint8Array" && "BYTES_PER_ELEMENT" in a && a.BYTES_PER_ELEMENT === 1;
}
var atitle2 = (title) => title ? `"${title}" ` : "";
function anumber2(n, title = "") {
  if (typeof n !== "number")
    throw new TypeError(atitle2(title) + "expected number, got " + typeof n);
  if (!Number.isSafeInteger(n) || n < 0)
    throw new RangeError(atitle2(title) + "expected integer >= 0, got " + n);
  return n;
}
function abytes2(value, length, title = "") {
  if (isBytes2(value) && (length === void 0 || value.length === length))
    return value;
  if (length !== void 0)
    anumber2(length, "length");
  const bytes2 = isBytes2(value);
  const ofLen = length !== void 0 ? ` of length ${length}` : "";
  const got = bytes2 ? `length=${value.length}` : `type=${typeof value}`;
  const message = atitle2(title) + "expected Uint8Array" + ofLen + ", got " + got;
  if (!bytes2)
    throw new TypeError(message);
  throw new RangeError(message);
}
function copyBytes2(bytes2) {
  return Uint8Array.from(abytes2(bytes2));
}
function ahash(h) {
  if (typeof h !== "function" || typeof h.create !== "function")
    throw new TypeError("expected hash wrapped by utils.createHasher");
  anumber2(h.outputLen);
  anumber2(h.blockLen);
  if (h.outputLen < 1 || h.blockLen < 1)
    throw new Error("hash blockLen / outputLen must be >= 1");
}
var aobject2 = (value, label) => {
  if (value === null || typeof value !== "object" || Array.isArray(value))
    throw new TypeError((label === "object" ? "" : `"${label}" `) + "expected object, got type=" + typeof value);
};
var aopts = (value, label) => {
  aobject2(value, label);
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null)
    throw new TypeError(`"${label}" expected plain object`);
  if (Object.hasOwn(value, "__proto__"))
    throw new TypeError(`"${label}.__proto__" is not allowed`);
};
function aexists2(instance, checkFinished = true) {
  if (instance.destroyed)
    throw new Error("hash was destroyed");
  if (checkFinished && instance.finished)
    throw new Error("digest() was already called");
}
function aoutput2(out, instance) {
  abytes2(out, void 0, "output");
  const min = instance.outputLen;
  if (!(out.length >= min)) {
    throw new RangeError('"output" expected length >= ' + min);
  }
}
function u323(arr) {
  return new Uint32Array(arr.buffer, arr.byteOffset, Math.floor(arr.byteLength / 4));
}
function clean2(...arrays) {
  for (let i = 0; i < arrays.length; i++) {
    arrays[i].fill(0);
  }
}
function rotr(word, shift) {
  return word << 32 - shift | word >>> shift;
}
var isLE2 = /* @__PURE__ */ (() => new Uint8Array(new Uint32Array([287454020]).buffer)[0] === 68)();
function byteSwap2(word) {
  return word << 24 & 4278190080 | word << 8 & 16711680 | word >>> 8 & 65280 | word >>> 24 & 255;
}
var swap8IfBE = isLE2 ? (n) => n : (n) => byteSwap2(n) >>> 0;
function byteSwap322(arr) {
  for (let i = 0; i < arr.length; i++) {
    arr[i] = byteSwap2(arr[i]);
  }
  return arr;
}
var swap32IfBE2 = isLE2 ? (u) => u : byteSwap322;
var hasHexBuiltin = /* @__PURE__ */ (() => (
  // @ts-ignore
  typeof Uint8Array.from([]).toHex === "function" && typeof Uint8Array.fromHex === "function"
))();
var hexes = /* @__PURE__ */ Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));
function bytesToHex(bytes2) {
  abytes2(bytes2);
  if (hasHexBuiltin)
    return bytes2.toHex();
  let hex2 = "";
  for (let i = 0; i < bytes2.length; i++) {
    hex2 += hexes[bytes2[i]];
  }
  return hex2;
}
function asciiToBase16(ch) {
  return ch >= 48 && ch <= 57 ? ch - 48 : ch >= 65 && ch <= 70 ? ch - (65 - 10) : ch >= 97 && ch <= 102 ? ch - (97 - 10) : void 0;
}
function hexToBytes(hex2) {
  if (typeof hex2 !== "string")
    throw new TypeError("hex string expected, got " + typeof hex2);
  if (hasHexBuiltin) {
    try {
      return Uint8Array.fromHex(hex2);
    } catch (error) {
      if (error instanceof SyntaxError)
        throw new RangeError(error.message);
      throw error;
    }
  }
  const hl = hex2.length;
  const al = hl / 2;
  if (hl % 2)
    throw new RangeError("hex string expected, got unpadded hex of length " + hl);
  const array2 = new Uint8Array(al);
  for (let ai = 0, hi = 0; ai < al; ai++, hi += 2) {
    const n1 = asciiToBase16(hex2.charCodeAt(hi));
    const n2 = asciiToBase16(hex2.charCodeAt(hi + 1));
    if (n1 === void 0 || n2 === void 0) {
      const char = hex2[hi] + hex2[hi + 1];
      throw new RangeError('hex string expected, got non-hex character "' + char + '" at index ' + hi);
    }
    array2[ai] = n1 * 16 + n2;
  }
  return array2;
}
function checkOpts2(defaults2, opts, title = "opts") {
  aopts(defaults2, "defaults");
  if (opts !== void 0)
    aopts(opts, title);
  const merged = Object.assign(/* @__PURE__ */ Object.create(null), defaults2, opts);
  return merged;
}
function createHasher(hashCons, info = {}) {
  if (typeof hashCons !== "function")
    throw new TypeError('"hashCons" expected function, got type=' + typeof hashCons);
  info = checkOpts2({}, info, "info");
  const hashC = (msg, opts) => hashCons(opts).update(msg).digest();
  const tmp = hashCons(void 0);
  hashC.outputLen = tmp.outputLen;
  hashC.blockLen = tmp.blockLen;
  hashC.canXOF = tmp.canXOF;
  hashC.create = (opts) => hashCons(opts);
  Object.assign(hashC, info);
  return Object.freeze(hashC);
}
function randomBytes2(bytesLength = 32) {
  anumber2(bytesLength, "bytesLength");
  const cr = typeof globalThis === "object" ? globalThis.crypto : null;
  if (typeof cr?.getRandomValues !== "function")
    throw new Error("crypto.getRandomValues must be defined");
  if (bytesLength > 65536)
    throw new RangeError(`"bytesLength" expected <= 65536, got ${bytesLength}`);
  return cr.getRandomValues(new Uint8Array(bytesLength));
}

// node_modules/@noble/hashes/_blake.js
var BSIGMA = /* @__PURE__ */ Uint8Array.from([
  0,
  1,
  2,
  3,
  4,
  5,
  6,
  7,
  8,
  9,
  10,
  11,
  12,
  13,
  14,
  15,
  14,
  10,
  4,
  8,
  9,
  15,
  13,
  6,
  1,
  12,
  0,
  2,
  11,
  7,
  5,
  3,
  11,
  8,
  12,
  0,
  5,
  2,
  15,
  13,
  10,
  14,
  3,
  6,
  7,
  1,
  9,
  4,
  7,
  9,
  3,
  1,
  13,
  12,
  11,
  14,
  2,
  6,
  5,
  10,
  4,
  0,
  15,
  8,
  9,
  0,
  5,
  7,
  2,
  4,
  10,
  15,
  14,
  1,
  11,
  12,
  6,
  8,
  3,
  13,
  2,
  12,
  6,
  10,
  0,
  11,
  8,
  3,
  4,
  13,
  7,
  5,
  15,
  14,
  1,
  9,
  12,
  5,
  1,
  15,
  14,
  13,
  4,
  10,
  0,
  7,
  6,
  3,
  9,
  2,
  8,
  11,
  13,
  11,
  7,
  14,
  12,
  1,
  3,
  9,
  5,
  0,
  15,
  4,
  8,
  6,
  2,
  10,
  6,
  15,
  14,
  9,
  11,
  3,
  0,
  8,
  12,
  2,
  13,
  7,
  1,
  4,
  10,
  5,
  10,
  2,
  8,
  4,
  7,
  6,
  1,
  5,
  15,
  11,
  9,
  14,
  3,
  12,
  13,
  0,
  0,
  1,
  2,
  3,
  4,
  5,
  6,
  7,
  8,
  9,
  10,
  11,
  12,
  13,
  14,
  15,
  14,
  10,
  4,
  8,
  9,
  15,
  13,
  6,
  1,
  12,
  0,
  2,
  11,
  7,
  5,
  3,
  // Blake1, unused in others
  11,
  8,
  12,
  0,
  5,
  2,
  15,
  13,
  10,
  14,
  3,
  6,
  7,
  1,
  9,
  4,
  7,
  9,
  3,
  1,
  13,
  12,
  11,
  14,
  2,
  6,
  5,
  10,
  4,
  0,
  15,
  8,
  9,
  0,
  5,
  7,
  2,
  4,
  10,
  15,
  14,
  1,
  11,
  12,
  6,
  8,
  3,
  13,
  2,
  12,
  6,
  10,
  0,
  11,
  8,
  3,
  4,
  13,
  7,
  5,
  15,
  14,
  1,
  9
]);
function G1s(a, b, c, d, x) {
  a = a + b + x | 0;
  d = rotr(d ^ a, 16);
  c = c + d | 0;
  b = rotr(b ^ c, 12);
  return { a, b, c, d };
}
function G2s(a, b, c, d, x) {
  a = a + b + x | 0;
  d = rotr(d ^ a, 8);
  c = c + d | 0;
  b = rotr(b ^ c, 7);
  return { a, b, c, d };
}

// node_modules/@noble/hashes/_u64.js
var fromNumH = (n) => n / 2 ** 32 | 0;
var fromNumL = (n) => n >>> 0;

// node_modules/@noble/hashes/_md.js
var SHA256_IV = /* @__PURE__ */ Uint32Array.from([
  1779033703,
  3144134277,
  1013904242,
  2773480762,
  1359893119,
  2600822924,
  528734635,
  1541459225
]);

// node_modules/@noble/hashes/blake2.js
function checkBlake2Opts(outputLen, opts = {}, keyLen, saltLen, persLen) {
  anumber2(keyLen);
  if (outputLen <= 0 || outputLen > keyLen)
    throw new Error('"dkLen" must be 1..' + keyLen + ", got " + outputLen);
  const { key, salt, personalization } = opts;
  if (key !== void 0 && (key.length < 1 || key.length > keyLen))
    throw new Error('"key" expected to be undefined or of length=1..' + keyLen);
  if (salt !== void 0)
    abytes2(salt, saltLen, "salt");
  if (personalization !== void 0)
    abytes2(personalization, persLen, "personalization");
}
var _BLAKE2 = class {
  buffer;
  buffer32;
  finished = false;
  destroyed = false;
  length = 0;
  pos = 0;
  blockLen;
  outputLen;
  canXOF = false;
  constructor(blockLen, outputLen) {
    anumber2(blockLen);
    anumber2(outputLen);
    this.blockLen = blockLen;
    this.outputLen = outputLen;
    this.buffer = new Uint8Array(blockLen);
    this.buffer32 = u323(this.buffer);
  }
  update(data) {
    aexists2(this);
    abytes2(data);
    const { blockLen, buffer, buffer32 } = this;
    const len = data.length;
    const offset = data.byteOffset;
    const buf = data.buffer;
    for (let pos = 0; pos < len; ) {
      if (this.pos === blockLen) {
        swap32IfBE2(buffer32);
        this.compress(buffer32, 0, false);
        swap32IfBE2(buffer32);
        this.pos = 0;
      }
      const take = Math.min(blockLen - this.pos, len - pos);
      const dataOffset = offset + pos;
      if (take === blockLen && !(dataOffset % 4) && pos + take < len) {
        const data32 = new Uint32Array(buf, dataOffset, Math.floor((len - pos) / 4));
        swap32IfBE2(data32);
        for (let pos32 = 0; pos + blockLen < len; pos32 += buffer32.length, pos += blockLen) {
          this.length += blockLen;
          this.compress(data32, pos32, false);
        }
        swap32IfBE2(data32);
        continue;
      }
      buffer.set(pos === 0 && take === len ? data : data.subarray(pos, pos + take), this.pos);
      this.pos += take;
      this.length += take;
      pos += take;
    }
    return this;
  }
  digestInto(out) {
    aexists2(this);
    aoutput2(out, this);
    if (out.byteOffset & 3)
      throw new RangeError('"output" expected 4-byte aligned byteOffset, got ' + out.byteOffset);
    const { pos, buffer32 } = this;
    this.finished = true;
    this.buffer.fill(0, pos);
    swap32IfBE2(buffer32);
    this.compress(buffer32, 0, true);
    swap32IfBE2(buffer32);
    const state = this.get();
    const out32 = out === this.buffer ? buffer32 : u323(out);
    const full = Math.floor(this.outputLen / 4);
    for (let i = 0; i < full; i++)
      out32[i] = swap8IfBE(state[i]);
    const tail = this.outputLen % 4;
    if (!tail)
      return;
    const off = full * 4;
    const word = state[full];
    for (let i = 0; i < tail; i++)
      out[off + i] = word >>> 8 * i;
  }
  digest() {
    const { buffer, outputLen } = this;
    this.digestInto(buffer);
    const res = buffer.slice(0, outputLen);
    this.destroy();
    return res;
  }
  _cloneInto(to) {
    const { buffer, length, finished, destroyed, outputLen, pos } = this;
    to ||= new this.constructor({ dkLen: outputLen });
    to.set(...this.get());
    to.buffer.set(buffer);
    to.destroyed = destroyed;
    to.finished = finished;
    to.length = length;
    to.pos = pos;
    to.outputLen = outputLen;
    return to;
  }
  clone() {
    return this._cloneInto();
  }
};
function _compress(s, offset, msg, rounds, v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15) {
  let j = 0;
  for (let i = 0; i < rounds; i++) {
    ({ a: v0, b: v4, c: v8, d: v12 } = G1s(v0, v4, v8, v12, msg[offset + s[j++]]));
    ({ a: v0, b: v4, c: v8, d: v12 } = G2s(v0, v4, v8, v12, msg[offset + s[j++]]));
    ({ a: v1, b: v5, c: v9, d: v13 } = G1s(v1, v5, v9, v13, msg[offset + s[j++]]));
    ({ a: v1, b: v5, c: v9, d: v13 } = G2s(v1, v5, v9, v13, msg[offset + s[j++]]));
    ({ a: v2, b: v6, c: v10, d: v14 } = G1s(v2, v6, v10, v14, msg[offset + s[j++]]));
    ({ a: v2, b: v6, c: v10, d: v14 } = G2s(v2, v6, v10, v14, msg[offset + s[j++]]));
    ({ a: v3, b: v7, c: v11, d: v15 } = G1s(v3, v7, v11, v15, msg[offset + s[j++]]));
    ({ a: v3, b: v7, c: v11, d: v15 } = G2s(v3, v7, v11, v15, msg[offset + s[j++]]));
    ({ a: v0, b: v5, c: v10, d: v15 } = G1s(v0, v5, v10, v15, msg[offset + s[j++]]));
    ({ a: v0, b: v5, c: v10, d: v15 } = G2s(v0, v5, v10, v15, msg[offset + s[j++]]));
    ({ a: v1, b: v6, c: v11, d: v12 } = G1s(v1, v6, v11, v12, msg[offset + s[j++]]));
    ({ a: v1, b: v6, c: v11, d: v12 } = G2s(v1, v6, v11, v12, msg[offset + s[j++]]));
    ({ a: v2, b: v7, c: v8, d: v13 } = G1s(v2, v7, v8, v13, msg[offset + s[j++]]));
    ({ a: v2, b: v7, c: v8, d: v13 } = G2s(v2, v7, v8, v13, msg[offset + s[j++]]));
    ({ a: v3, b: v4, c: v9, d: v14 } = G1s(v3, v4, v9, v14, msg[offset + s[j++]]));
    ({ a: v3, b: v4, c: v9, d: v14 } = G2s(v3, v4, v9, v14, msg[offset + s[j++]]));
  }
  return { v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15 };
}
var B2S_IV = /* @__PURE__ */ SHA256_IV.slice();
var _BLAKE2s = class extends _BLAKE2 {
  // Internal state, same as SHA-256
  v0 = B2S_IV[0] | 0;
  v1 = B2S_IV[1] | 0;
  v2 = B2S_IV[2] | 0;
  v3 = B2S_IV[3] | 0;
  v4 = B2S_IV[4] | 0;
  v5 = B2S_IV[5] | 0;
  v6 = B2S_IV[6] | 0;
  v7 = B2S_IV[7] | 0;
  constructor(opts = {}) {
    opts = checkOpts2({}, opts);
    const olen = opts.dkLen === void 0 ? 32 : opts.dkLen;
    super(64, olen);
    checkBlake2Opts(olen, opts, 32, 8, 8);
    let { key, personalization, salt } = opts;
    let keyLength = 0;
    if (key !== void 0) {
      abytes2(key, void 0, "key");
      keyLength = key.length;
    }
    this.v0 ^= this.outputLen | keyLength << 8 | 1 << 16 | 1 << 24;
    if (salt !== void 0) {
      abytes2(salt, void 0, "salt");
      const slt = u323(copyBytes2(salt));
      this.v4 ^= swap8IfBE(slt[0]);
      this.v5 ^= swap8IfBE(slt[1]);
    }
    if (personalization !== void 0) {
      abytes2(personalization, void 0, "personalization");
      const pers = u323(copyBytes2(personalization));
      this.v6 ^= swap8IfBE(pers[0]);
      this.v7 ^= swap8IfBE(pers[1]);
    }
    if (key !== void 0) {
      const tmp = new Uint8Array(this.blockLen);
      tmp.set(key);
      this.update(tmp);
      clean2(tmp);
    }
  }
  get() {
    const { v0, v1, v2, v3, v4, v5, v6, v7 } = this;
    return [v0, v1, v2, v3, v4, v5, v6, v7];
  }
  // prettier-ignore
  set(v0, v1, v2, v3, v4, v5, v6, v7) {
    this.v0 = v0 | 0;
    this.v1 = v1 | 0;
    this.v2 = v2 | 0;
    this.v3 = v3 | 0;
    this.v4 = v4 | 0;
    this.v5 = v5 | 0;
    this.v6 = v6 | 0;
    this.v7 = v7 | 0;
  }
  compress(msg, offset, isLast) {
    const l = fromNumL(this.length);
    const h = fromNumH(this.length);
    const { v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15 } = _compress(BSIGMA, offset, msg, 10, this.v0, this.v1, this.v2, this.v3, this.v4, this.v5, this.v6, this.v7, B2S_IV[0], B2S_IV[1], B2S_IV[2], B2S_IV[3], l ^ B2S_IV[4], h ^ B2S_IV[5], isLast ? ~B2S_IV[6] : B2S_IV[6], B2S_IV[7]);
    this.v0 ^= v0 ^ v8;
    this.v1 ^= v1 ^ v9;
    this.v2 ^= v2 ^ v10;
    this.v3 ^= v3 ^ v11;
    this.v4 ^= v4 ^ v12;
    this.v5 ^= v5 ^ v13;
    this.v6 ^= v6 ^ v14;
    this.v7 ^= v7 ^ v15;
  }
  destroy() {
    this.destroyed = true;
    clean2(this.buffer32);
    this.set(0, 0, 0, 0, 0, 0, 0, 0);
  }
};
var blake2s = /* @__PURE__ */ createHasher((opts) => new _BLAKE2s(opts));

// src/secure/aead.ts
var KEY_LEN = 32;
var TAG_LEN = 16;
var MAX_NONCE = (1n << 64n) - 1n;
var SECRET_LABEL = ascii("ternio/2 secret");
var PSK_LABEL = ascii("ternio/2 resume");
function ascii(text) {
  const out = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i) & 255;
  return out;
}
function concat(...parts) {
  let length = 0;
  for (const part of parts) length += part.length;
  const out = new Uint8Array(length);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}
function wipe(bytes2) {
  if (bytes2) bytes2.fill(0);
}
function expectBytes(bytes2, length, what) {
  if (!(bytes2 instanceof Uint8Array) || bytes2.length !== length) {
    throw new TypeError(`${what} must be a Uint8Array of ${length} bytes`);
  }
}
function chachaNonce(counter) {
  if (counter < 0n || counter > MAX_NONCE) throw new RangeError("a nonce counter is a u64");
  const nonce = new Uint8Array(12);
  new DataView(nonce.buffer).setBigUint64(4, counter, true);
  return nonce;
}
function encrypt(key, counter, ad, plain) {
  return chacha20poly1305(key, chachaNonce(counter), ad).encrypt(plain);
}
function decrypt(key, counter, ad, sealed) {
  if (sealed.length < TAG_LEN) return null;
  try {
    return chacha20poly1305(key, chachaNonce(counter), ad).decrypt(sealed);
  } catch {
    return null;
  }
}
function rekey(key) {
  expectBytes(key, KEY_LEN, "a key");
  const out = encrypt(key, MAX_NONCE, new Uint8Array(0), new Uint8Array(KEY_LEN));
  const next = out.slice(0, KEY_LEN);
  wipe(out);
  return next;
}
function blake2s256(...parts) {
  const hash = blake2s.create();
  for (const part of parts) hash.update(part);
  return hash.digest();
}
function sessionSecret(clientToServer, serverToClient) {
  expectBytes(clientToServer, KEY_LEN, "the client-to-server key");
  expectBytes(serverToClient, KEY_LEN, "the server-to-client key");
  return blake2s256(SECRET_LABEL, clientToServer, serverToClient);
}
function resumePsk(secret) {
  expectBytes(secret, KEY_LEN, "a session secret");
  return blake2s256(PSK_LABEL, secret);
}

// src/secure/seal.ts
var HEADER_LEN2 = 7;
var COUNTER_LEN = 8;
var SEAL_OVERHEAD = COUNTER_LEN + TAG_LEN;
var ENCRYPTED = 4;
var REKEY_OPCODE = 65285;
var DEFAULT_REKEY_POLICY = Object.freeze({ frames: 65536, intervalMs: 12e4 });
var NEVER_REKEY = Object.freeze({ frames: Infinity, intervalMs: Infinity });
var defaultClock = () => {
  const performance2 = globalThis.performance;
  return performance2 ? performance2.now() : Date.now();
};
var SealError = class extends Error {
  /** Why. */
  kind;
  /** Makes the error of `kind`. */
  constructor(kind, message) {
    super(message);
    this.name = "SealError";
    this.kind = kind;
  }
};
var OpenError = class extends Error {
  /** Why. */
  kind;
  /** The frame's counter, when it had one. */
  counter;
  /** The counter expected. */
  expected;
  /** Makes the error of `kind`. */
  constructor(kind, expected, counter) {
    super(
      kind === "out-of-order" ? `sealed frame with counter ${counter}, expected ${expected}` : kind === "too-short" ? "sealed body shorter than 24 bytes" : kind === "bad-tag" ? "sealed frame does not authenticate" : kind === "not-sealed" ? "frame without ENCRYPTED where a sealed one was expected" : "the cipher was destroyed"
    );
    this.name = "OpenError";
    this.kind = kind;
    this.counter = counter;
    this.expected = expected;
  }
};
function checkHeader(header) {
  expectBytes(header, HEADER_LEN2, "a frame header");
}
function opcodeOf2(header) {
  return header[0] | header[1] << 8;
}
var SendingCipher = class {
  #key;
  #next;
  #underKey = 0;
  #keyedAt;
  #policy;
  #clock;
  /** A sending cipher with `key` (copied; the caller may erase its own). */
  constructor(key, options = {}) {
    expectBytes(key, KEY_LEN, "a sending key");
    this.#key = key.slice();
    this.#next = options.nextCounter ?? 0n;
    if (this.#next < 0n || this.#next > MAX_NONCE) throw new RangeError("a counter is a u64");
    this.#policy = options.policy ?? DEFAULT_REKEY_POLICY;
    this.#clock = options.clock ?? defaultClock;
    this.#keyedAt = this.#clock();
  }
  /** The counter the next sealed frame will carry. */
  get nextCounter() {
    return this.#next;
  }
  /** Frames sealed under the current key. */
  get framesUnderKey() {
    return this.#underKey;
  }
  /** Whether the rekey policy asks for a REKEY before the next frame (reads the clock). */
  rekeyDue() {
    return this.#underKey >= this.#policy.frames || this.#clock() - this.#keyedAt >= this.#policy.intervalMs;
  }
  /**
   * Seals `plain` for `header`, the 7 header bytes exactly as they will be
   * sent (ENCRYPTED must be set in them: they are the associated data).
   * Returns the sealed body: counter, ciphertext, tag. Throws a
   * {@link SealError} `counter-exhausted` rather than use counter 2^64 - 1:
   * the connection must then close. Does not rekey by itself: see
   * {@link sealFrames}.
   */
  seal(header, plain) {
    checkHeader(header);
    if ((header[2] & ENCRYPTED) === 0) throw new TypeError("a sealed frame has ENCRYPTED set in its header");
    const key = this.#liveKey();
    const counter = this.#next;
    if (counter === MAX_NONCE) throw new SealError("counter-exhausted", "the sending counter is exhausted: close the connection");
    const sealed = encrypt(key, counter, header, plain);
    const body = new Uint8Array(COUNTER_LEN + sealed.length);
    new DataView(body.buffer).setBigUint64(0, counter, true);
    body.set(sealed, COUNTER_LEN);
    this.#next = counter + 1n;
    this.#underKey++;
    return body;
  }
  /**
   * One whole sealed frame (a WebSocket message; TCP adds its length
   * prefix): `header` with ENCRYPTED set (a copy; `header` is untouched),
   * then the sealed body of `plain`.
   */
  sealFrame(header, plain) {
    checkHeader(header);
    const sent = header.slice();
    sent[2] |= ENCRYPTED;
    const body = this.seal(sent, plain);
    const frame = new Uint8Array(HEADER_LEN2 + body.length);
    frame.set(sent);
    frame.set(body, HEADER_LEN2);
    return frame;
  }
  /**
   * The sealed REKEY frame (opcode 0xFF05, ENCRYPTED, id 0, empty body)
   * under the current key, after which the key is replaced by REKEY(key)
   * (the old one erased): every later frame is sealed with the new key.
   * Send it before anything sealed after this call.
   */
  rekeyFrame() {
    const header = Uint8Array.of(REKEY_OPCODE & 255, REKEY_OPCODE >> 8, ENCRYPTED, 0, 0, 0, 0);
    const frame = this.sealFrame(header, new Uint8Array(0));
    this.#replaceKey();
    return frame;
  }
  /**
   * What to send for one frame under the rekey policy: a REKEY frame first
   * when one is due (checked now, as section 5.2 says: an idle connection
   * does not rekey, its next frame does), then the frame itself, as
   * {@link sealFrame} makes it. Send the frames in order.
   */
  sealFrames(header, plain) {
    const frames = [];
    if (this.rekeyDue()) frames.push(this.rekeyFrame());
    frames.push(this.sealFrame(header, plain));
    return frames;
  }
  /** Erases the key; the cipher seals nothing more. */
  destroy() {
    wipe(this.#key);
    this.#key = null;
  }
  #liveKey() {
    if (!this.#key) throw new SealError("destroyed", "the sending cipher was destroyed");
    return this.#key;
  }
  #replaceKey() {
    const old = this.#liveKey();
    this.#key = rekey(old);
    wipe(old);
    this.#underKey = 0;
    this.#keyedAt = this.#clock();
  }
};
var ReceivingCipher = class {
  #key;
  #next;
  /** A receiving cipher with `key` (copied), expecting counter 0 first. */
  constructor(key, options = {}) {
    expectBytes(key, KEY_LEN, "a receiving key");
    this.#key = key.slice();
    this.#next = options.nextCounter ?? 0n;
    if (this.#next < 0n || this.#next > MAX_NONCE) throw new RangeError("a counter is a u64");
  }
  /** The counter the next sealed frame must carry. */
  get nextCounter() {
    return this.#next;
  }
  /**
   * Opens a sealed `body` (counter, ciphertext, tag) received with
   * `header`, the 7 header bytes as received (ENCRYPTED set). Returns the
   * plain body (a new array). Throws an {@link OpenError} for a body shorter
   * than 24 bytes, a counter other than the expected one (or 2^64 - 1), or a
   * tag that fails; nothing changes then. After opening a REKEY frame
   * (opcode 0xFF05) the key is replaced by REKEY(key), the old one erased.
   * Whether such a frame is well formed (id 0, empty body, no RESPONSE or
   * ERROR) is the caller's to check (`DISCONNECT MALFORMED`).
   */
  open(header, body) {
    checkHeader(header);
    if (!this.#key) throw new OpenError("destroyed", this.#next);
    if ((header[2] & ENCRYPTED) === 0) throw new OpenError("not-sealed", this.#next);
    if (body.length < SEAL_OVERHEAD) throw new OpenError("too-short", this.#next);
    const counter = new DataView(body.buffer, body.byteOffset, COUNTER_LEN).getBigUint64(0, true);
    if (counter !== this.#next || counter === MAX_NONCE) throw new OpenError("out-of-order", this.#next, counter);
    const plain = decrypt(this.#key, counter, header, body.subarray(COUNTER_LEN));
    if (!plain) throw new OpenError("bad-tag", this.#next, counter);
    this.#next = counter + 1n;
    if (opcodeOf2(header) === REKEY_OPCODE) {
      const old = this.#key;
      this.#key = rekey(old);
      wipe(old);
    }
    return plain;
  }
  /**
   * Opens one whole sealed frame (a WebSocket message: header then sealed
   * body), as {@link open} does. Returns the header as received and the
   * plain body.
   */
  openFrame(frame) {
    if (frame.length < HEADER_LEN2) throw new OpenError("too-short", this.#next);
    const header = frame.slice(0, HEADER_LEN2);
    return { header, plain: this.open(header, frame.subarray(HEADER_LEN2)) };
  }
  /** Erases the key; the cipher opens nothing more. */
  destroy() {
    wipe(this.#key);
    this.#key = null;
  }
};

// node_modules/@noble/curves/utils.js
/*! noble-curves - MIT License (c) 2022 Paul Miller (paulmillr.com) */
function aarray(item, title, inner = () => {
}) {
  if (!Array.isArray(item))
    throw new TypeError(`"${title}" expected array, got type=${typeof item}`);
  for (let i = 0; i < item.length; i++)
    inner(item[i], `${title}[${i}]`);
  return item;
}
var abytes3 = (value, length, title) => abytes2(value, length, title);
var anumber3 = anumber2;
function aobject3(value, title = "object") {
  if (value === null || typeof value !== "object" || Array.isArray(value))
    throw new TypeError(title === "object" ? "expected valid options object" : `"${title}" expected object, got type=${typeof value}`);
  return value;
}
function afunction(value, title) {
  if (typeof value !== "function")
    throw new TypeError(`"${title}" is invalid: expected function, got ${typeof value}`);
  return value;
}
var bytesToHex2 = bytesToHex;
var hexToBytes2 = (hex2) => hexToBytes(hex2);
var isBytes3 = isBytes2;
var randomBytes3 = (bytesLength) => randomBytes2(bytesLength);
var _0n = /* @__PURE__ */ BigInt(0);
var _1n = /* @__PURE__ */ BigInt(1);
var atitle3 = (title) => title ? `"${title}" ` : "";
function abool2(value, title = "") {
  if (typeof value !== "boolean")
    throw new TypeError(atitle3(title) + "expected boolean, got type=" + typeof value);
  return value;
}
function abignumber(n) {
  if (typeof n === "bigint") {
    if (!isPosBig(n))
      throw new RangeError("positive bigint expected, got " + n);
  } else
    anumber3(n);
  return n;
}
function asafenumber(value, title = "") {
  if (typeof value !== "number") {
    const prefix = title && `"${title}" `;
    throw new TypeError(prefix + "expected number, got type=" + typeof value);
  }
  if (!Number.isSafeInteger(value)) {
    const prefix = title && `"${title}" `;
    throw new RangeError(prefix + "expected safe integer, got " + value);
  }
}
function hexToNumber(hex2) {
  if (typeof hex2 !== "string")
    throw new TypeError("hex string expected, got " + typeof hex2);
  return hex2 === "" ? _0n : BigInt("0x" + hex2);
}
function bytesToNumberBE(bytes2) {
  return hexToNumber(bytesToHex(bytes2));
}
function bytesToNumberLE(bytes2) {
  return hexToNumber(bytesToHex(copyBytes3(abytes2(bytes2)).reverse()));
}
function numberToBytesBE(n, len) {
  anumber2(len);
  if (len === 0)
    throw new Error("zero output length is invalid");
  n = abignumber(n);
  const expectedLen = len * 2;
  const hex2 = n.toString(16);
  if (hex2.length > expectedLen)
    throw new RangeError("number is too large");
  return hexToBytes(hex2.padStart(expectedLen, "0"));
}
function numberToBytesLE(n, len) {
  return numberToBytesBE(n, len).reverse();
}
function copyBytes3(bytes2) {
  return Uint8Array.from(abytes3(bytes2));
}
function isPosBig(n) {
  return typeof n === "bigint" && _0n <= n;
}
function inRange(n, min, max) {
  return isPosBig(n) && isPosBig(min) && isPosBig(max) && min <= n && n < max;
}
function aInRange(title, n, min, max) {
  if (!inRange(n, min, max))
    throw new RangeError("expected valid " + title + ": " + min + " <= n < " + max + ", got " + n);
}
function bitLen(n) {
  if (n < _0n)
    throw new Error("expected non-negative bigint, got " + n);
  return n === _0n ? 0 : n.toString(2).length;
}
var bitMask = (n) => {
  asafenumber(n, "n");
  return (_1n << BigInt(n)) - _1n;
};
function validateObject(object, fields = {}, optFields = {}, title = "object") {
  aobject3(object, title);
  aobject3(fields, "fields");
  aobject3(optFields, "optFields");
  function checkField(fieldName, expectedType, isOpt) {
    const label = title === "object" ? `param "${String(fieldName)}"` : `"${title}.${String(fieldName)}"`;
    const val = object[fieldName];
    if (!Object.hasOwn(object, fieldName) && (isOpt ? val !== void 0 : expectedType !== "function")) {
      throw new TypeError(`${label} is invalid: expected own property`);
    }
    if (isOpt && val === void 0)
      return;
    const current = typeof val;
    if (current !== expectedType || val === null)
      throw new TypeError(`${label} is invalid: expected ${expectedType}, got ${current}`);
  }
  const iter = (f, isOpt) => Object.entries(f).forEach(([k, v]) => checkField(k, v, isOpt));
  iter(fields, false);
  iter(optFields, true);
}

// node_modules/@noble/curves/abstract/modular.js
/*! noble-curves - MIT License (c) 2022 Paul Miller (paulmillr.com) */
var _0n2 = /* @__PURE__ */ BigInt(0);
var _1n2 = /* @__PURE__ */ BigInt(1);
var _2n = /* @__PURE__ */ BigInt(2);
var _3n = /* @__PURE__ */ BigInt(3);
var _4n = /* @__PURE__ */ BigInt(4);
var _5n = /* @__PURE__ */ BigInt(5);
var _7n = /* @__PURE__ */ BigInt(7);
var _8n = /* @__PURE__ */ BigInt(8);
var _9n = /* @__PURE__ */ BigInt(9);
var _15n = /* @__PURE__ */ BigInt(15);
var _16n = /* @__PURE__ */ BigInt(16);
var POW_WINDOWED_MIN = /* @__PURE__ */ BigInt("0x10000000000000000");
function mod(a, b) {
  if (b <= _0n2)
    throw new Error("mod: expected positive modulus, got " + b);
  const result = a % b;
  return result >= _0n2 ? result : b + result;
}
function pow(num, power, modulo) {
  if (modulo <= _1n2)
    throw new Error("pow: expected modulus > 1, got " + modulo);
  if (typeof power !== "bigint")
    throw new TypeError("invalid exponent: expected bigint, got " + typeof power);
  if (power < _0n2)
    throw new Error("invalid exponent, negatives unsupported");
  if (power === _0n2)
    return _1n2;
  if (power === _1n2)
    return num;
  let d = num % modulo;
  if (d < _0n2)
    d += modulo;
  if (power < POW_WINDOWED_MIN) {
    let p2 = _1n2;
    while (power > _0n2) {
      if (power & _1n2)
        p2 = p2 * d % modulo;
      d = d * d % modulo;
      power >>= _1n2;
    }
    return p2;
  }
  const digits = [];
  while (power > _0n2) {
    digits.push(Number(power & _15n));
    power >>= _4n;
  }
  const table = new Array(16);
  table[0] = _1n2;
  table[1] = d;
  for (let i = 2; i < 16; i++)
    table[i] = table[i - 1] * d % modulo;
  let p = table[digits[digits.length - 1]];
  for (let w = digits.length - 2; w >= 0; w--) {
    p = p * p % modulo;
    p = p * p % modulo;
    p = p * p % modulo;
    p = p * p % modulo;
    const digit = digits[w];
    if (digit !== 0)
      p = p * table[digit] % modulo;
  }
  return p;
}
function pow2(x, power, modulo) {
  if (modulo <= _1n2)
    throw new Error("pow2: expected modulus > 1, got " + modulo);
  if (power < _0n2)
    throw new Error("pow2: expected non-negative exponent, got " + power);
  let res = x;
  while (power-- > _0n2) {
    res *= res;
    res %= modulo;
  }
  return res;
}
function invert(number, modulo) {
  if (number === _0n2)
    throw new Error("invert: expected non-zero number");
  if (modulo <= _1n2)
    throw new Error("invert: expected modulus > 1, got " + modulo);
  let a = mod(number, modulo);
  let b = modulo;
  let x = _0n2, u = _1n2;
  while (a !== _0n2) {
    const q = b / a;
    const r = b - a * q;
    const m = x - u * q;
    b = a, a = r, x = u, u = m;
  }
  const gcd = b;
  if (gcd !== _1n2)
    throw new Error("invert: does not exist");
  return mod(x, modulo);
}
function assertIsSquare(Fp, root, n) {
  const F = Fp;
  if (!F.eql(F.sqr(root), n))
    throw new Error("Cannot find square root");
}
function aoddModulus(order, fnName) {
  if ((order & _1n2) === _0n2)
    throw new Error(fnName + ": expected odd modulus, got " + order);
}
function sqrt3mod4(Fp, n) {
  const F = Fp;
  const p1div4 = (F.ORDER + _1n2) / _4n;
  const root = F.pow(n, p1div4);
  assertIsSquare(F, root, n);
  return root;
}
function sqrt5mod8(Fp, n) {
  const F = Fp;
  const p5div8 = (F.ORDER - _5n) / _8n;
  const n2 = F.mul(n, _2n);
  const v = F.pow(n2, p5div8);
  const nv = F.mul(n, v);
  const i = F.mul(F.mul(nv, _2n), v);
  const root = F.mul(nv, F.sub(i, F.ONE));
  assertIsSquare(F, root, n);
  return root;
}
function sqrt9mod16(P) {
  const Fp_ = Field(P);
  const tn = tonelliShanks(P);
  const c1 = tn(Fp_, Fp_.neg(Fp_.ONE));
  const c2 = tn(Fp_, c1);
  const c3 = tn(Fp_, Fp_.neg(c1));
  const c4 = (P + _7n) / _16n;
  return ((Fp, n) => {
    const F = Fp;
    let tv1 = F.pow(n, c4);
    let tv2 = F.mul(tv1, c1);
    const tv3 = F.mul(tv1, c2);
    const tv4 = F.mul(tv1, c3);
    const e1 = F.eql(F.sqr(tv2), n);
    const e2 = F.eql(F.sqr(tv3), n);
    tv1 = F.cmov(tv1, tv2, e1);
    tv2 = F.cmov(tv4, tv3, e2);
    const e3 = F.eql(F.sqr(tv2), n);
    const root = F.cmov(tv1, tv2, e3);
    assertIsSquare(F, root, n);
    return root;
  });
}
function tonelliShanks(P) {
  if (P < _3n)
    throw new Error("sqrt is not defined for small field");
  aoddModulus(P, "tonelliShanks");
  let Q = P - _1n2;
  let S = 0;
  while (Q % _2n === _0n2) {
    Q /= _2n;
    S++;
  }
  let Z = _2n;
  const _Fp = Field(P);
  while (FpLegendre(_Fp, Z) === 1) {
    if (Z++ > 1e3)
      throw new Error("Cannot find square root: probably non-prime P");
  }
  if (S === 1)
    return sqrt3mod4;
  let cc = _Fp.pow(Z, Q);
  const Q1div2 = (Q + _1n2) / _2n;
  return function tonelliSlow(Fp, n) {
    const F = Fp;
    if (F.is0(n))
      return n;
    if (FpLegendre(F, n) !== 1)
      throw new Error("Cannot find square root");
    let M = S;
    let c = F.mul(F.ONE, cc);
    let t = F.pow(n, Q);
    let R = F.pow(n, Q1div2);
    while (!F.eql(t, F.ONE)) {
      if (F.is0(t))
        throw new Error("Cannot find square root: probably non-prime P");
      let i = 1;
      let t_tmp = F.sqr(t);
      while (!F.eql(t_tmp, F.ONE)) {
        i++;
        t_tmp = F.sqr(t_tmp);
        if (i === M)
          throw new Error("Cannot find square root");
      }
      const exponent = _1n2 << BigInt(M - i - 1);
      const b = F.pow(c, exponent);
      M = i;
      c = F.sqr(b);
      t = F.mul(t, c);
      R = F.mul(R, b);
    }
    return R;
  };
}
function FpSqrt(P) {
  aoddModulus(P, "Fp.sqrt");
  if (P % _4n === _3n)
    return sqrt3mod4;
  if (P % _8n === _5n)
    return sqrt5mod8;
  if (P % _16n === _9n)
    return sqrt9mod16(P);
  return tonelliShanks(P);
}
var isNegativeLE = (num, modulo) => (mod(num, modulo) & _1n2) === _1n2;
var FIELD_FIELDS = [
  "create",
  "isValid",
  "is0",
  "neg",
  "inv",
  "sqrt",
  "sqr",
  "eql",
  "add",
  "sub",
  "mul",
  "pow",
  "div",
  "addN",
  "subN",
  "mulN",
  "sqrN"
];
function validateField(field) {
  aobject3(field, "field");
  if (typeof field.ORDER !== "bigint")
    throw new TypeError('param "ORDER" is invalid: expected bigint, got ' + typeof field.ORDER);
  asafenumber(field.BYTES, "BYTES");
  asafenumber(field.BITS, "BITS");
  for (const name of FIELD_FIELDS)
    afunction(field[name], "field." + name);
  if (field.BYTES < 1 || field.BITS < 1)
    throw new Error("invalid field: expected BYTES/BITS > 0");
  if (field.ORDER <= _1n2)
    throw new Error("invalid field: expected ORDER > 1, got " + field.ORDER);
  return field;
}
function FpInvertBatch(Fp, nums, passZero = false) {
  validateField(Fp);
  aarray(nums, "nums");
  abool2(passZero, "passZero");
  const F = Fp;
  const inverted = new Array(nums.length).fill(passZero ? F.ZERO : void 0);
  const multipliedAcc = nums.reduce((acc, num, i) => {
    if (F.is0(num))
      return acc;
    inverted[i] = acc;
    return F.mul(acc, num);
  }, F.ONE);
  const invertedAcc = F.inv(multipliedAcc);
  nums.reduceRight((acc, num, i) => {
    if (F.is0(num))
      return acc;
    inverted[i] = F.mul(acc, inverted[i]);
    return F.mul(acc, num);
  }, invertedAcc);
  return inverted;
}
function FpLegendre(Fp, n) {
  validateField(Fp);
  const F = Fp;
  aoddModulus(F.ORDER, "FpLegendre");
  const p1mod2 = (F.ORDER - _1n2) / _2n;
  const powered = F.pow(n, p1mod2);
  const yes = F.eql(powered, F.ONE);
  const zero = F.eql(powered, F.ZERO);
  const no = F.eql(powered, F.neg(F.ONE));
  if (!yes && !zero && !no)
    throw new Error("invalid Legendre symbol result");
  return yes ? 1 : zero ? 0 : -1;
}
function nLength(n, nBitLength) {
  if (nBitLength !== void 0)
    anumber3(nBitLength);
  if (n <= _0n2)
    throw new Error("invalid n length: expected positive n, got " + n);
  if (nBitLength !== void 0 && nBitLength < 1)
    throw new Error("invalid n length: expected positive bit length, got " + nBitLength);
  const bits = bitLen(n);
  if (nBitLength !== void 0 && nBitLength < bits)
    throw new Error(`invalid n length: expected nBitLength (${nBitLength}) >= bitLen(n) (${bits})`);
  const _nBitLength = nBitLength !== void 0 ? nBitLength : bits;
  const nByteLength = Math.ceil(_nBitLength / 8);
  return { nBitLength: _nBitLength, nByteLength };
}
var FIELD_SQRT = /* @__PURE__ */ new WeakMap();
var _Field = class {
  ORDER;
  BITS;
  BYTES;
  isLE;
  ZERO = _0n2;
  ONE = _1n2;
  _lengths;
  _mod;
  constructor(ORDER, opts = {}) {
    if (ORDER <= _1n2)
      throw new Error("invalid field: expected ORDER > 1, got " + ORDER);
    let _nbitLength = void 0;
    this.isLE = false;
    if (opts != null && typeof opts === "object") {
      if (typeof opts.BITS === "number")
        _nbitLength = opts.BITS;
      if (typeof opts.sqrt === "function")
        Object.defineProperty(this, "sqrt", { value: opts.sqrt, enumerable: true });
      if (typeof opts.isLE === "boolean")
        this.isLE = opts.isLE;
      if (opts.allowedLengths)
        this._lengths = Object.freeze(opts.allowedLengths.slice());
      if (typeof opts.modFromBytes === "boolean")
        this._mod = opts.modFromBytes;
    }
    const { nBitLength, nByteLength } = nLength(ORDER, _nbitLength);
    if (nByteLength > 2048)
      throw new Error("invalid field: expected ORDER of <= 2048 bytes");
    this.ORDER = ORDER;
    this.BITS = nBitLength;
    this.BYTES = nByteLength;
    Object.freeze(this);
  }
  create(num) {
    return mod(num, this.ORDER);
  }
  isValid(num) {
    if (typeof num !== "bigint")
      throw new TypeError("invalid field element: expected bigint, got " + typeof num);
    return _0n2 <= num && num < this.ORDER;
  }
  is0(num) {
    return num === _0n2;
  }
  // is valid and invertible
  isValidNot0(num) {
    return !this.is0(num) && this.isValid(num);
  }
  isOdd(num) {
    return (num & _1n2) === _1n2;
  }
  neg(num) {
    return mod(-num, this.ORDER);
  }
  eql(lhs, rhs) {
    return lhs === rhs;
  }
  sqr(num) {
    return mod(num * num, this.ORDER);
  }
  add(lhs, rhs) {
    return mod(lhs + rhs, this.ORDER);
  }
  sub(lhs, rhs) {
    return mod(lhs - rhs, this.ORDER);
  }
  mul(lhs, rhs) {
    return mod(lhs * rhs, this.ORDER);
  }
  pow(num, power) {
    return pow(num, power, this.ORDER);
  }
  div(lhs, rhs) {
    return mod(lhs * invert(rhs, this.ORDER), this.ORDER);
  }
  // Same as above, but doesn't normalize
  sqrN(num) {
    return num * num;
  }
  addN(lhs, rhs) {
    return lhs + rhs;
  }
  subN(lhs, rhs) {
    return lhs - rhs;
  }
  mulN(lhs, rhs) {
    return lhs * rhs;
  }
  inv(num) {
    return invert(num, this.ORDER);
  }
  sqrt(num) {
    let sqrt = FIELD_SQRT.get(this);
    if (!sqrt)
      FIELD_SQRT.set(this, sqrt = FpSqrt(this.ORDER));
    return sqrt(this, num);
  }
  toBytes(num) {
    return this.isLE ? numberToBytesLE(num, this.BYTES) : numberToBytesBE(num, this.BYTES);
  }
  fromBytes(bytes2, skipValidation = false) {
    abytes3(bytes2);
    const { _lengths: allowedLengths, BYTES, isLE: isLE3, ORDER, _mod: modFromBytes } = this;
    if (allowedLengths) {
      if (bytes2.length < 1 || !allowedLengths.includes(bytes2.length) || bytes2.length > BYTES) {
        throw new Error("Field.fromBytes: expected " + allowedLengths + " bytes, got " + bytes2.length);
      }
      const padded = new Uint8Array(BYTES);
      padded.set(bytes2, isLE3 ? 0 : padded.length - bytes2.length);
      bytes2 = padded;
    }
    if (bytes2.length !== BYTES)
      throw new Error("Field.fromBytes: expected " + BYTES + " bytes, got " + bytes2.length);
    let scalar = isLE3 ? bytesToNumberLE(bytes2) : bytesToNumberBE(bytes2);
    if (modFromBytes)
      scalar = mod(scalar, ORDER);
    if (!skipValidation) {
      if (!this.isValid(scalar))
        throw new Error("invalid field element: outside of range 0..ORDER");
    }
    return scalar;
  }
  // TODO: we don't need it here, move out to separate fn
  invertBatch(lst) {
    return FpInvertBatch(this, lst, true);
  }
  // We can't move this out because Fp6, Fp12 implement it
  // and it's unclear what to return in there.
  cmov(a, b, condition) {
    abool2(condition, "condition");
    return condition ? b : a;
  }
};
function Field(ORDER, opts = {}) {
  Object.freeze(_Field.prototype);
  return new _Field(ORDER, opts);
}

// node_modules/@noble/curves/abstract/curve.js
/*! noble-curves - MIT License (c) 2022 Paul Miller (paulmillr.com) */
var _0n3 = /* @__PURE__ */ BigInt(0);
var _1n3 = /* @__PURE__ */ BigInt(1);
var _4n2 = /* @__PURE__ */ BigInt(4);
var BLIND_BYTES = 16;
var BLIND_BITS = 128;
var FW_WINDOW = 5;
var TABLE_BYTES_MAX = /* @__PURE__ */ (() => 2 ** 31)();
function validatePointCons(Point) {
  const pc = Point;
  if (typeof pc !== "function")
    throw new TypeError('"Point" expected constructor, got type=' + typeof Point);
  afunction(pc.fromAffine, "Point.fromAffine");
  afunction(pc.fromBytes, "Point.fromBytes");
  afunction(pc.fromHex, "Point.fromHex");
  aobject3(pc.BASE, "Point.BASE");
  aobject3(pc.ZERO, "Point.ZERO");
  validateField(pc.Fp);
  validateField(pc.Fn);
}
function normalizeZ(c, points) {
  validatePointCons(c);
  validateMSMPoints(points, c);
  const invertedZs = FpInvertBatch(c.Fp, points.map((p) => p.Z));
  return points.map((p, i) => c.fromAffine(p.toAffine(invertedZs[i])));
}
function validateW(W, bits, min = 1) {
  if (!Number.isSafeInteger(W) || W < min || W > bits)
    throw new Error("invalid window size, expected [" + min + ".." + bits + "], got W=" + W);
}
function validateTableBytes(numPoints, fpBytes) {
  const bytes2 = numPoints * (4 * fpBytes + 128);
  if (bytes2 > TABLE_BYTES_MAX)
    throw new Error("invalid window size: table would need ~" + Math.ceil(bytes2 / 2 ** 20) + " MiB, max " + TABLE_BYTES_MAX / 2 ** 20 + " MiB");
}
function probeRandomBytes(randomBytes4, length) {
  if (randomBytes4 === void 0)
    return void 0;
  afunction(randomBytes4, "randomBytes");
  try {
    const probe = randomBytes4(length);
    if (!isBytes3(probe) || probe.length !== length)
      return void 0;
  } catch {
    return void 0;
  }
  return randomBytes4;
}
function validateMSMPoints(points, c) {
  aarray(points, "points");
  points.forEach((p, i) => {
    if (!(p instanceof c))
      throw new Error("invalid point at index " + i);
  });
}
function validateMSMScalars(scalars, field, maxScalar) {
  if (!Array.isArray(scalars))
    throw new Error("array of scalars expected");
  scalars.forEach((s, i) => {
    const ok = maxScalar === void 0 ? field.isValid(s) : isPosBig(s) && s < maxScalar;
    if (!ok)
      throw new Error("invalid scalar at index " + i);
  });
}
var pointWindowSizes = /* @__PURE__ */ new WeakMap();
function getWindowSize(P) {
  return pointWindowSizes.get(P) || 1;
}
function oddMultiples(p, size) {
  const dbl = p.double();
  const t = [p];
  for (let j = 1; j < size; j++)
    t.push(t[j - 1].add(dbl));
  return t;
}
function wnafDigits(n, W) {
  const size = 2 ** W;
  const half = size / 2;
  const mask = BigInt(size - 1);
  const d = [];
  while (n > _0n3) {
    let w = 0;
    if (n & _1n3) {
      w = Number(n & mask);
      if (w >= half)
        w -= size;
      n -= BigInt(w);
    }
    d.push(w);
    n >>= _1n3;
  }
  return d;
}
function signedWindowDigits(n, W, windows) {
  const size = 2 ** W;
  const half = size / 2;
  const mask = BigInt(size - 1);
  const shiftBy = BigInt(W);
  const d = [];
  for (let w = 0; w < windows; w++) {
    let v = Number(n & mask);
    n >>= shiftBy;
    if (v > half) {
      v -= size;
      n += _1n3;
    }
    d.push(v);
  }
  if (n !== _0n3)
    throw new Error("invalid wnaf");
  return d;
}
function wnafWalk(zero, tables, digits) {
  let max = 0;
  for (const d of digits)
    max = Math.max(max, d.length);
  let acc = zero;
  for (let bit = max - 1; bit >= 0; bit--) {
    if (bit !== max - 1)
      acc = acc.double();
    for (let i = 0; i < digits.length; i++) {
      const w = digits[i][bit];
      if (w) {
        const item = tables[i][Math.abs(w) - 1 >> 1];
        acc = acc.add(w < 0 ? item.negate() : item);
      }
    }
  }
  return acc;
}
var ScalarMultiplier = class {
  Point;
  BASE;
  ZERO;
  randomBytes;
  wnafPrecomputes = /* @__PURE__ */ new WeakMap();
  baseCanBeBlinded;
  bits;
  // Parametrized with a given Point class (not individual point)
  constructor(Point, randomBytes4) {
    validatePointCons(Point);
    this.randomBytes = probeRandomBytes(randomBytes4, BLIND_BYTES);
    this.Point = Point;
    this.BASE = Point.BASE;
    this.ZERO = Point.ZERO;
    this.bits = Point.Fn.BITS;
  }
  /**
   * Creates a signed fixed-window wNAF precomputation table: for every window w, the
   * multiples `[1..2^(W−1)]⋅2^(w⋅W)⋅P`, flattened. All doublings are baked into the table,
   * so cached multiplication is additions-only. `windows = ceil(bits/W) + 1`: the extra
   * window absorbs the final carry of signed-digit recoding.
   * For a 256-bit curve and W=6, the table is 44⋅32 = 1408 points.
   * @param point - Point instance
   * @param W - window size
   * @param bits - scalar bitlength the table must cover
   */
  buildWnafTable(point, W, bits) {
    const windows = Math.ceil(bits / W) + 1;
    const half = 2 ** (W - 1);
    const comp = [];
    let base = point;
    for (let w = 0; w < windows; w++) {
      let acc = base;
      for (let i = 0; i < half; i++) {
        comp.push(acc);
        acc = acc.add(base);
      }
      base = comp[comp.length - 1].double();
    }
    return { W, bits, windows, comp };
  }
  /**
   * Implements ec multiplication using precomputed signed fixed-window wNAF tables.
   * Constant-time: fixed window count with one table addition per window — zero digits feed
   * the fake accumulator — and no doublings; the lookup scans the whole window slice.
   * Scalar bounds are validated by the public entry points ({@link ScalarMultiplier.mulCT},
   * {@link ScalarMultiplier.mulCTBlinded}, {@link ScalarMultiplier.mulUnsafe});
   * signedWindowDigits throws if `n` exceeds the table.
   * @returns real and fake (for const-time) points
   */
  wnafCachedCT(precomputes, n) {
    const { W, windows, comp } = precomputes;
    const half = 2 ** (W - 1);
    const digits = signedWindowDigits(n, W, windows);
    let p = this.ZERO;
    let f = this.BASE;
    for (let w = 0; w < windows; w++) {
      const digit = digits[w];
      const start = w * half;
      const idx = Math.abs(digit) - 1;
      let sel = comp[start];
      for (let i = 1; i < half; i++)
        sel = i === idx ? comp[start + i] : sel;
      const neg = sel.negate();
      if (digit === 0)
        f = f.add(comp[start]);
      else
        p = p.add(digit < 0 ? neg : sel);
    }
    return { p, f };
  }
  // Cache key is point identity plus (W, bits); at most two entries exist per point (public-width
  // `Fn.BITS` and blinded `Fn.BITS + BLIND_BITS`). Callers must not reuse the same point with
  // incompatible `transform(...)` layouts and expect a separate cache entry.
  getWnafPrecomputes(W, point, bits, transform) {
    let entries = this.wnafPrecomputes.get(point);
    let comp = entries?.find((entry) => entry.W === W && entry.bits === bits);
    if (!comp) {
      comp = this.buildWnafTable(point, W, bits);
      if (typeof transform === "function")
        comp = { ...comp, comp: transform(comp.comp) };
      if (!entries) {
        entries = [];
        this.wnafPrecomputes.set(point, entries);
      }
      entries.push(comp);
    }
    return comp;
  }
  assertPoint(point) {
    if (!(point instanceof this.Point))
      throw new TypeError('"point" expected Point instance, got type=' + typeof point);
  }
  // Shared prologue of the constant-time entry points. Rejects scalar 0: in key/signature-style
  // callers a zero scalar means broken upstream plumbing, and concrete Points already reject it.
  // Uses inRange instead of Fn.isValidNot0: validateField() only certifies the arithmetic subset.
  validateMulInput(point, scalar) {
    this.assertPoint(point);
    if (!inRange(scalar, _1n3, this.Point.Fn.ORDER))
      throw new Error("invalid scalar");
  }
  // Constant-time dispatch shared by mulCT / mulCTBlinded. Un-precomputed points (W===1, e.g.
  // ECDH peer keys) skip building a throwaway cached table in favor of a small fixed-window
  // multiply. `n` must be < 2^bits.
  runCT(point, n, bits, transform) {
    const W = getWindowSize(point);
    if (W === 1)
      return this.fixedWindowCT(point, n, bits);
    return this.wnafCachedCT(this.getWnafPrecomputes(W, point, bits, transform), n);
  }
  mulCT(point, scalar, transform) {
    this.validateMulInput(point, scalar);
    return this.runCT(point, scalar, this.bits, transform);
  }
  mulCTBlinded(point, scalar, transform) {
    this.validateMulInput(point, scalar);
    if (this.randomBytes === void 0)
      throw new Error("randomBytes is required for scalar blinding");
    const bits = this.Point.Fn.BITS + BLIND_BITS;
    const blind = this.randomBytes(BLIND_BYTES);
    if (!isBytes3(blind) || blind.length !== BLIND_BYTES)
      throw new Error("randomBytes returned invalid byte array");
    blind[0] = blind[0] & 63 | 128;
    const n = scalar + bytesToNumberBE(blind) * this.Point.Fn.ORDER;
    return this.runCT(point, n, bits, transform);
  }
  /**
   * Constant-time multiplication `n*point` for an un-precomputed point, via a small fixed window.
   * A cached wNAF table only pays off when reused; a flat 2^FW_WINDOW table (`size-1` adds) is
   * far cheaper to build for a single use. The point-operation sequence is independent of `n`:
   * build the table, then per window exactly FW_WINDOW doublings, a data-oblivious scan over
   * every table entry, and one addition (adds the identity when the window digit is 0 — never
   * skipped).
   *
   * `n` must be `< 2^bits`. Assumes complete addition (adding the identity costs the same as any
   * add), which holds for the Weierstrass/Edwards point types used here. The table is left in
   * projective form (no normalizeZ): normalizing this small a table costs more than the
   * mixed-add savings it would buy for a single multiply.
   * @returns real point `p`; `f` duplicates it only to match {@link wnafCachedCT}'s return shape
   * (this path needs no fake accumulator — its op-count is already scalar-independent).
   */
  fixedWindowCT(point, n, bits) {
    const W = FW_WINDOW;
    const size = 1 << W;
    const mask = bitMask(W);
    const table = new Array(size);
    table[0] = this.ZERO;
    for (let i = 1; i < size; i++)
      table[i] = table[i - 1].add(point);
    const windows = Math.ceil(bits / W);
    let acc = this.ZERO;
    for (let window = windows - 1; window >= 0; window--) {
      if (window !== windows - 1)
        for (let d = 0; d < W; d++)
          acc = acc.double();
      const digit = Number(n >> BigInt(window * W) & mask);
      let sel = table[0];
      for (let i = 1; i < size; i++)
        sel = i === digit ? table[i] : sel;
      acc = acc.add(sel);
    }
    return { p: acc, f: acc };
  }
  shouldBlind(point, cofactor) {
    if (this.randomBytes === void 0)
      return false;
    if (cofactor === _1n3)
      return true;
    if (point !== this.BASE)
      return false;
    if (this.baseCanBeBlinded === void 0)
      this.baseCanBeBlinded = this.mulUnsafe(this.BASE, this.Point.Fn.ORDER).is0();
    return this.baseCanBeBlinded;
  }
  mulSecret(point, scalar, cofactor, transform) {
    return this.shouldBlind(point, cofactor) ? this.mulCTBlinded(point, scalar, transform) : this.mulCT(point, scalar, transform);
  }
  mulUnsafe(point, scalar, transform) {
    this.assertPoint(point);
    if (!isPosBig(scalar))
      throw new Error("invalid scalar");
    const W = getWindowSize(point);
    if (W === 1 || scalar >= this.Point.Fn.ORDER)
      return mulAddUnsafe(this.Point, [point], [scalar], true);
    const precomputes = this.getWnafPrecomputes(W, point, this.bits, transform);
    return this.wnafCachedCT(precomputes, scalar).p;
  }
  // Remembers the window size used for precomputed wNAF multiplication of the given point
  // and drops any previously built tables. Usually only the base point is precomputed.
  // W=1 resets the point to the un-precomputed (table-less) paths.
  // W is additionally capped so tables stay under ~2 GiB ({@link TABLE_BYTES_MAX}).
  setWindowSize(point, W) {
    this.assertPoint(point);
    validateW(W, this.bits);
    const windows = Math.ceil((this.bits + BLIND_BITS) / W) + 1;
    validateTableBytes(windows * 2 ** (W - 1), this.Point.Fp.BYTES);
    pointWindowSizes.set(point, W);
    this.wnafPrecomputes.delete(point);
  }
  // True when a window size is set: tables themselves are built lazily on first multiply.
  hasWindowSize(point) {
    return getWindowSize(point) !== 1;
  }
};
function mulAddUnsafe(c, points, scalars, allowOversized = false) {
  validatePointCons(c);
  validateMSMPoints(points, c);
  abool2(allowOversized, "allowOversized");
  validateMSMScalars(scalars, c.Fn, allowOversized ? c.Fn.ORDER ** _4n2 : void 0);
  if (points.length !== scalars.length)
    throw new Error("arrays of points and scalars must have equal length");
  const tables = points.map((p) => oddMultiples(p, 4));
  const digits = scalars.map((n) => wnafDigits(n, 4));
  return wnafWalk(c.ZERO, tables, digits);
}
function createField(order, field, isLE3) {
  if (field) {
    if (field.ORDER !== order)
      throw new Error("Field.ORDER must match order: Fp == p, Fn == n");
    validateField(field);
    return field;
  } else {
    return Field(order, { isLE: isLE3 });
  }
}
function createCurveFields(type, CURVE, curveOpts = {}, FpFnLE) {
  if (type !== "weierstrass" && type !== "edwards")
    throw new Error('expected curve type "weierstrass" or "edwards"');
  if (FpFnLE === void 0)
    FpFnLE = type === "edwards";
  if (!CURVE || typeof CURVE !== "object")
    throw new Error(`expected valid ${type} CURVE object`);
  validateObject(curveOpts);
  for (const p of ["p", "n", "h"]) {
    const val = CURVE[p];
    if (!(isPosBig(val) && val !== _0n3))
      throw new Error(`CURVE.${p} must be positive bigint`);
  }
  const Fp = createField(CURVE.p, curveOpts.Fp, FpFnLE);
  const Fn = createField(CURVE.n, curveOpts.Fn, FpFnLE);
  const _b = type === "weierstrass" ? "b" : "d";
  const params = ["Gx", "Gy", "a", _b];
  for (const p of params) {
    if (!Fp.isValid(CURVE[p]))
      throw new Error(`CURVE.${p} must be valid field element of CURVE.Fp`);
  }
  CURVE = Object.freeze(Object.assign({}, CURVE));
  return { CURVE, Fp, Fn };
}
function createKeygen(randomSecretKey, getPublicKey) {
  return function keygen(seed) {
    const secretKey = randomSecretKey(seed);
    return { secretKey, publicKey: getPublicKey(secretKey) };
  };
}

// node_modules/@noble/curves/abstract/edwards.js
/*! noble-curves - MIT License (c) 2022 Paul Miller (paulmillr.com) */
var _0n4 = /* @__PURE__ */ BigInt(0);
var _1n4 = /* @__PURE__ */ BigInt(1);
var _2n2 = /* @__PURE__ */ BigInt(2);
var _4n3 = /* @__PURE__ */ BigInt(4);
var _8n2 = /* @__PURE__ */ BigInt(8);
function isEdValidXY(Fp, CURVE, x, y) {
  const x2 = Fp.sqr(x);
  const y2 = Fp.sqr(y);
  const left = Fp.add(Fp.mul(CURVE.a, x2), y2);
  const right = Fp.add(Fp.ONE, Fp.mul(CURVE.d, Fp.mul(x2, y2)));
  return Fp.eql(left, right);
}
function edwards(params, extraOpts = {}) {
  validateObject(extraOpts, {}, {}, "extraOpts");
  const opts = extraOpts;
  const validated = createCurveFields("edwards", params, opts, opts.FpFnLE);
  const { Fp, Fn } = validated;
  let CURVE = validated.CURVE;
  const { h: cofactor } = CURVE;
  if (FpLegendre(Fp, CURVE.a) !== 1)
    throw new Error("edwards: CURVE.a must be a square in Fp for complete addition formulas");
  if (FpLegendre(Fp, CURVE.d) !== -1)
    throw new Error("edwards: CURVE.d must be a non-square in Fp for complete addition formulas");
  validateObject(opts, {}, { uvRatio: "function", randomBytes: "function" });
  const randomBytes4 = opts.randomBytes === void 0 ? randomBytes3 : opts.randomBytes;
  const MASK = _2n2 << BigInt(Fp.BYTES * 8) - _1n4;
  function isOdd(n) {
    if (!Fp.isOdd)
      throw new Error("Field does not have .isOdd()");
    return Fp.isOdd(n);
  }
  const uvRatio2 = opts.uvRatio === void 0 ? (u, v) => {
    try {
      return { isValid: true, value: Fp.sqrt(Fp.div(u, v)) };
    } catch (e) {
      return { isValid: false, value: _0n4 };
    }
  } : opts.uvRatio;
  if (!isEdValidXY(Fp, CURVE, CURVE.Gx, CURVE.Gy))
    throw new Error("bad curve params: generator point");
  const mulA = Fp.eql(CURVE.a, Fp.neg(Fp.ONE)) ? (x) => Fp.neg(x) : Fp.eql(CURVE.a, Fp.ONE) ? (x) => x : (x) => Fp.mul(CURVE.a, x);
  function acoord(title, n, banZero = false) {
    const min = banZero ? _1n4 : _0n4;
    aInRange("coordinate " + title, n, min, MASK);
    return n;
  }
  function aedpoint(other) {
    if (!(other instanceof Point))
      throw new Error("EdwardsPoint expected");
  }
  class Point {
    static BASE = new Point(CURVE.Gx, CURVE.Gy, Fp.ONE, Fp.mul(CURVE.Gx, CURVE.Gy));
    static ZERO = new Point(Fp.ZERO, Fp.ONE, Fp.ONE, Fp.ZERO);
    static Fp = Fp;
    static Fn = Fn;
    X;
    Y;
    Z;
    T;
    constructor(X, Y, Z, T) {
      this.X = acoord("x", X);
      this.Y = acoord("y", Y);
      this.Z = acoord("z", Z, true);
      this.T = acoord("t", T);
      Object.freeze(this);
    }
    static CURVE() {
      return CURVE;
    }
    /**
     * Create one extended Edwards point from affine coordinates.
     * Does NOT validate that the point is on-curve or torsion-free.
     * Use `.assertValidity()` on adversarial inputs.
     */
    static fromAffine(p) {
      if (p instanceof Point)
        throw new Error("extended point not allowed");
      const { x, y } = p || {};
      acoord("x", x);
      acoord("y", y);
      return new Point(x, y, Fp.ONE, Fp.mul(x, y));
    }
    // Uses algo from RFC8032 5.1.3.
    static fromBytes(bytes2, zip215 = false) {
      const len = Fp.BYTES;
      const { a, d } = CURVE;
      bytes2 = copyBytes3(abytes3(bytes2, len, "point"));
      abool2(zip215, "zip215");
      const normed = copyBytes3(bytes2);
      const lastByte = bytes2[len - 1];
      normed[len - 1] = lastByte & ~128;
      const y = bytesToNumberLE(normed);
      const max = zip215 ? MASK : Fp.ORDER;
      aInRange("point.y", y, _0n4, max);
      const y2 = Fp.sqr(y);
      const u = Fp.sub(y2, Fp.ONE);
      const v = Fp.sub(Fp.mulN(d, y2), a);
      let { isValid, value: x } = uvRatio2(u, v);
      if (!isValid)
        throw new Error("bad point: invalid y coordinate");
      const isXOdd = isOdd(x);
      const isLastByteOdd = (lastByte & 128) !== 0;
      if (!zip215 && Fp.is0(x) && isLastByteOdd)
        throw new Error("bad point: x=0 and x_0=1");
      if (isLastByteOdd !== isXOdd)
        x = Fp.neg(x);
      return Point.fromAffine({ x, y });
    }
    static fromHex(hex2, zip215 = false) {
      return Point.fromBytes(hexToBytes2(hex2), zip215);
    }
    get x() {
      return this.toAffine().x;
    }
    get y() {
      return this.toAffine().y;
    }
    precompute(windowSize = 6, isLazy = true) {
      wnaf.setWindowSize(this, windowSize);
      if (!isLazy)
        this.multiply(_2n2);
      return this;
    }
    // Useful in fromAffine() - not for fromBytes(), which always created valid points.
    assertValidity() {
      const p = this;
      const { a, d } = CURVE;
      if (p.is0())
        throw new Error("bad point: ZERO");
      const { X, Y, Z, T } = p;
      const X2 = Fp.sqr(X);
      const Y2 = Fp.sqr(Y);
      const Z2 = Fp.sqr(Z);
      const Z4 = Fp.sqr(Z2);
      const aX2 = Fp.mul(X2, a);
      const left = Fp.mul(Fp.add(aX2, Y2), Z2);
      const right = Fp.add(Z4, Fp.mul(d, Fp.mul(X2, Y2)));
      if (!Fp.eql(left, right))
        throw new Error("bad point: equation left != right (1)");
      const XY = Fp.mul(X, Y);
      const ZT = Fp.mul(Z, T);
      if (!Fp.eql(XY, ZT))
        throw new Error("bad point: equation left != right (2)");
    }
    // Compare one point to another.
    equals(other) {
      aedpoint(other);
      const { X: X1, Y: Y1, Z: Z1 } = this;
      const { X: X2, Y: Y2, Z: Z2 } = other;
      const X1Z2 = Fp.mul(X1, Z2);
      const X2Z1 = Fp.mul(X2, Z1);
      const Y1Z2 = Fp.mul(Y1, Z2);
      const Y2Z1 = Fp.mul(Y2, Z1);
      return Fp.eql(X1Z2, X2Z1) && Fp.eql(Y1Z2, Y2Z1);
    }
    is0() {
      return this.equals(Point.ZERO);
    }
    negate() {
      return new Point(Fp.neg(this.X), this.Y, this.Z, Fp.neg(this.T));
    }
    // Fast algo for doubling Extended Point.
    // https://hyperelliptic.org/EFD/g1p/auto-twisted-extended.html#doubling-dbl-2008-hwcd
    // Cost: 4M + 4S + 1*a + 6add + 1*2.
    double() {
      const { X: X1, Y: Y1, Z: Z1 } = this;
      const A = Fp.sqr(X1);
      const B = Fp.sqr(Y1);
      const C = Fp.mul(Fp.sqr(Z1), _2n2);
      const D = mulA(A);
      const x1y1 = Fp.addN(X1, Y1);
      const E = Fp.sub(Fp.subN(Fp.sqr(x1y1), A), B);
      const G = Fp.addN(D, B);
      const F = Fp.subN(G, C);
      const H = Fp.subN(D, B);
      const X3 = Fp.mul(E, F);
      const Y3 = Fp.mul(G, H);
      const T3 = Fp.mul(E, H);
      const Z3 = Fp.mul(F, G);
      return new Point(X3, Y3, Z3, T3);
    }
    // Fast algo for adding 2 Extended Points.
    // https://hyperelliptic.org/EFD/g1p/auto-twisted-extended.html#addition-add-2008-hwcd
    // Cost: 9M + 1*a + 1*d + 7add.
    add(other) {
      aedpoint(other);
      const { d } = CURVE;
      const { X: X1, Y: Y1, Z: Z1, T: T1 } = this;
      const { X: X2, Y: Y2, Z: Z2, T: T2 } = other;
      const A = Fp.mul(X1, X2);
      const B = Fp.mul(Y1, Y2);
      const C = Fp.mul(Fp.mulN(T1, d), T2);
      const D = Fp.mul(Z1, Z2);
      const E = Fp.sub(Fp.subN(Fp.mulN(Fp.addN(X1, Y1), Fp.addN(X2, Y2)), A), B);
      const F = Fp.subN(D, C);
      const G = Fp.addN(D, C);
      const H = Fp.sub(B, mulA(A));
      const X3 = Fp.mul(E, F);
      const Y3 = Fp.mul(G, H);
      const T3 = Fp.mul(E, H);
      const Z3 = Fp.mul(F, G);
      return new Point(X3, Y3, Z3, T3);
    }
    subtract(other) {
      aedpoint(other);
      return this.add(other.negate());
    }
    // Constant-time multiplication.
    multiply(scalar) {
      if (!Fn.isValidNot0(scalar))
        throw new RangeError("invalid scalar: expected 1 <= sc < curve.n");
      const { p, f } = wnaf.mulSecret(this, scalar, cofactor, normalize);
      return normalize([p, f])[0];
    }
    // Non-constant-time multiplication. Uses double-and-add algorithm.
    // It's faster, but should only be used when you don't care about
    // an exposed private key e.g. sig verification.
    // Keeps the same subgroup-scalar contract: 0 is allowed for public-scalar callers, but
    // n and larger values are rejected instead of being reduced mod n to the identity point.
    multiplyUnsafe(scalar) {
      if (!Fn.isValid(scalar))
        throw new RangeError("invalid scalar: expected 0 <= sc < curve.n");
      if (scalar === _0n4)
        return Point.ZERO;
      if (this.is0() || scalar === _1n4)
        return this;
      return wnaf.mulUnsafe(this, scalar, normalize);
    }
    // Checks if point is of small order.
    // If you add something to small order point, you will have "dirty"
    // point with torsion component.
    // Clears cofactor and checks if the result is 0.
    isSmallOrder() {
      return this.clearCofactor().is0();
    }
    // Multiplies point by curve order and checks if the result is 0.
    // Returns `false` is the point is dirty.
    isTorsionFree() {
      return wnaf.mulUnsafe(this, CURVE.n).is0();
    }
    // Converts Extended point to default (x, y) coordinates.
    // Can accept precomputed Z^-1 - for example, from invertBatch.
    toAffine(invertedZ) {
      const p = this;
      let iz = invertedZ;
      if (iz != null && typeof iz !== "bigint")
        throw new TypeError('"invertedZ" expected bigint, got type=' + typeof iz);
      const { X, Y, Z } = p;
      const is0 = p.is0();
      if (iz == null)
        iz = is0 ? Fp.create(_8n2) : Fp.inv(Z);
      const x = Fp.mul(X, iz);
      const y = Fp.mul(Y, iz);
      const zz = Fp.mul(Z, iz);
      if (is0)
        return { x: Fp.ZERO, y: Fp.ONE };
      if (!Fp.eql(zz, Fp.ONE))
        throw new Error("invZ was invalid");
      return { x, y };
    }
    clearCofactor() {
      if (cofactor === _1n4)
        return this;
      if (cofactor === _2n2)
        return this.double();
      if (cofactor === _4n3)
        return this.double().double();
      if (cofactor === _8n2)
        return this.double().double().double();
      return this.multiplyUnsafe(cofactor);
    }
    toBytes() {
      const { x, y } = this.toAffine();
      const bytes2 = Fp.toBytes(y);
      bytes2[bytes2.length - 1] |= isOdd(x) ? 128 : 0;
      return bytes2;
    }
    toHex() {
      return bytesToHex2(this.toBytes());
    }
    toString() {
      return `<Point ${this.is0() ? "ZERO" : this.toHex()}>`;
    }
  }
  const normalize = (points) => normalizeZ(Point, points);
  const wnaf = new ScalarMultiplier(Point, randomBytes4);
  if (wnaf.bits >= 6)
    Point.BASE.precompute(6);
  Object.freeze(Point.prototype);
  Object.freeze(Point);
  return Point;
}

// node_modules/@noble/curves/abstract/montgomery.js
/*! noble-curves - MIT License (c) 2022 Paul Miller (paulmillr.com) */
var _0n5 = /* @__PURE__ */ BigInt(0);
var _1n5 = /* @__PURE__ */ BigInt(1);
var _2n3 = /* @__PURE__ */ BigInt(2);
function cmask(P, swap) {
  return P + swap - (swap >> _1n5 << _1n5);
}
function cswap(P) {
  const offset = BigInt(6) * P;
  return (mask, x_2, x_3) => {
    const sum = x_2 + x_3;
    const d = offset + x_3 - x_2;
    const a = (d * mask + x_2) % P;
    return { x_2: a, x_3: sum - a };
  };
}
function validateOpts(curve) {
  validateObject(curve, {
    P: "bigint",
    type: "string",
    adjustScalarBytes: "function",
    powPminus2: "function"
  }, {
    randomBytes: "function",
    scalarMultBase: "function"
  });
  return Object.freeze({ ...curve });
}
function montgomery(curveDef) {
  const CURVE = validateOpts(curveDef);
  const { P, type, adjustScalarBytes: adjustScalarBytes2, powPminus2, randomBytes: rand } = CURVE;
  const mulBaseHook = CURVE.scalarMultBase;
  const is25519 = type === "x25519";
  if (!is25519 && type !== "x448")
    throw new Error("invalid type");
  const randomBytes_ = rand === void 0 ? randomBytes3 : rand;
  const montgomeryBits = is25519 ? 255 : 448;
  const swap = cswap(P);
  const fieldLen = is25519 ? 32 : 56;
  const Gu = is25519 ? BigInt(9) : BigInt(5);
  const a24 = is25519 ? BigInt(121665) : BigInt(39081);
  const minScalar = is25519 ? _2n3 ** BigInt(254) : _2n3 ** BigInt(447);
  const maxAdded = is25519 ? BigInt(8) * (_2n3 ** BigInt(251) - _1n5) : BigInt(4) * (_2n3 ** BigInt(445) - _1n5);
  const maxScalar = minScalar + maxAdded + _1n5;
  const modP = (n) => mod(n, P);
  const GuBytes = encodeU(Gu);
  function encodeU(u) {
    return numberToBytesLE(modP(u), fieldLen);
  }
  function decodeU(u) {
    const _u = copyBytes3(abytes3(u, fieldLen, "uCoordinate"));
    if (is25519)
      _u[31] &= 127;
    return modP(bytesToNumberLE(_u));
  }
  function decodeScalar(scalar) {
    return bytesToNumberLE(adjustScalarBytes2(copyBytes3(abytes3(scalar, fieldLen, "scalar"))));
  }
  const lowOrderU = new Set(is25519 ? [
    _0n5,
    _1n5,
    P - _1n5,
    BigInt("325606250916557431795983626356110631294008115727848805560023387167927233504"),
    BigInt("39382357235489614581723060781553021112529911719440698176882885853963445705823")
  ] : [_0n5, _1n5, P - _1n5]);
  function scalarMult(scalar, u) {
    const pointU = decodeU(u);
    if (lowOrderU.has(pointU))
      throw new Error("invalid private or public key received");
    const pu = montgomeryLadder(pointU, decodeScalar(scalar));
    if (pu === _0n5)
      throw new Error("invalid private or public key received");
    return encodeU(pu);
  }
  function scalarMultBase(scalar) {
    if (mulBaseHook === void 0)
      return scalarMult(scalar, GuBytes);
    const k = decodeScalar(scalar);
    aInRange("scalar", k, minScalar, maxScalar);
    const pu = modP(mulBaseHook(k));
    if (pu === _0n5)
      throw new Error("invalid private or public key received");
    return encodeU(pu);
  }
  const getPublicKey = scalarMultBase;
  const getSharedSecret = scalarMult;
  function montgomeryLadder(u, scalar) {
    aInRange("u", u, _0n5, P);
    aInRange("scalar", scalar, minScalar, maxScalar);
    const k = scalar;
    const x_1 = u;
    let x_2 = _1n5;
    let z_2 = _0n5;
    let x_3 = u;
    let z_3 = _1n5;
    const kx = k ^ k >> _1n5;
    for (let t = BigInt(montgomeryBits - 1); t >= _0n5; t--) {
      const mask2 = cmask(P, kx >> t);
      ({ x_2, x_3 } = swap(mask2, x_2, x_3));
      ({ x_2: z_2, x_3: z_3 } = swap(mask2, z_2, z_3));
      const A = x_2 + z_2;
      const AA = modP(A * A);
      const B = x_2 - z_2;
      const BB = modP(B * B);
      const E = AA - BB;
      const C = x_3 + z_3;
      const D = x_3 - z_3;
      const DA = modP(D * A);
      const CB = modP(C * B);
      const dacb = DA + CB;
      const da_cb = DA - CB;
      x_3 = modP(dacb * dacb);
      z_3 = modP(x_1 * modP(da_cb * da_cb));
      x_2 = modP(AA * BB);
      z_2 = modP(E * (AA + modP(a24 * E)));
    }
    const mask = cmask(P, k);
    ({ x_2, x_3 } = swap(mask, x_2, x_3));
    ({ x_2: z_2, x_3: z_3 } = swap(mask, z_2, z_3));
    const z2 = powPminus2(z_2);
    return modP(x_2 * z2);
  }
  const lengths = {
    secretKey: fieldLen,
    publicKey: fieldLen,
    seed: fieldLen
  };
  const randomSecretKey = (seed) => {
    seed = seed === void 0 ? randomBytes_(fieldLen) : seed;
    abytes3(seed, lengths.seed, "seed");
    return seed;
  };
  const utils = { randomSecretKey };
  Object.freeze(lengths);
  Object.freeze(utils);
  return Object.freeze({
    keygen: createKeygen(randomSecretKey, getPublicKey),
    getSharedSecret,
    getPublicKey,
    scalarMult,
    scalarMultBase,
    utils,
    GuBytes: GuBytes.slice(),
    lengths
  });
}

// node_modules/@noble/curves/ed25519.js
/*! noble-curves - MIT License (c) 2022 Paul Miller (paulmillr.com) */
var _0n6 = /* @__PURE__ */ BigInt(0);
var _1n6 = /* @__PURE__ */ BigInt(1);
var _2n4 = /* @__PURE__ */ BigInt(2);
var _3n2 = /* @__PURE__ */ BigInt(3);
var _5n2 = /* @__PURE__ */ BigInt(5);
var _8n3 = /* @__PURE__ */ BigInt(8);
var ed25519_CURVE_p = /* @__PURE__ */ BigInt("0x7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffed");
var ed25519_CURVE = /* @__PURE__ */ (() => ({
  p: ed25519_CURVE_p,
  n: BigInt("0x1000000000000000000000000000000014def9dea2f79cd65812631a5cf5d3ed"),
  h: _8n3,
  a: BigInt("0x7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffec"),
  d: BigInt("0x52036cee2b6ffe738cc740797779e89800700a4d4141d8ab75eb4dca135978a3"),
  Gx: BigInt("0x216936d3cd6e53fec0a4e231fdd6dc5c692cc7609525a7b2c9562d608f25d51a"),
  Gy: BigInt("0x6666666666666666666666666666666666666666666666666666666666666658")
}))();
function ed25519_pow_2_252_3(x) {
  const _10n = BigInt(10), _20n = BigInt(20), _40n = BigInt(40), _80n = BigInt(80);
  const P = ed25519_CURVE_p;
  const x2 = x * x % P;
  const b2 = x2 * x % P;
  const b4 = pow2(b2, _2n4, P) * b2 % P;
  const b5 = pow2(b4, _1n6, P) * x % P;
  const b10 = pow2(b5, _5n2, P) * b5 % P;
  const b20 = pow2(b10, _10n, P) * b10 % P;
  const b40 = pow2(b20, _20n, P) * b20 % P;
  const b80 = pow2(b40, _40n, P) * b40 % P;
  const b160 = pow2(b80, _80n, P) * b80 % P;
  const b240 = pow2(b160, _80n, P) * b80 % P;
  const b250 = pow2(b240, _10n, P) * b10 % P;
  const pow_p_5_8 = pow2(b250, _2n4, P) * x % P;
  return { pow_p_5_8, b2 };
}
function adjustScalarBytes(bytes2) {
  bytes2[0] &= 248;
  bytes2[31] &= 127;
  bytes2[31] |= 64;
  return bytes2;
}
var ED25519_SQRT_M1 = /* @__PURE__ */ BigInt("19681161376707505956807079304988542015446066515923890162744021073123829784752");
function uvRatio(u, v) {
  const P = ed25519_CURVE_p;
  const v3 = mod(v * v * v, P);
  const v7 = mod(v3 * v3 * v, P);
  const pow3 = ed25519_pow_2_252_3(u * v7).pow_p_5_8;
  let x = mod(u * v3 * pow3, P);
  const vx2 = mod(v * x * x, P);
  const root1 = x;
  const root2 = mod(x * ED25519_SQRT_M1, P);
  const useRoot1 = vx2 === u;
  const useRoot2 = vx2 === mod(-u, P);
  const noRoot = vx2 === mod(-u * ED25519_SQRT_M1, P);
  if (useRoot1)
    x = root1;
  if (useRoot2 || noRoot)
    x = root2;
  if (isNegativeLE(x, P))
    x = mod(-x, P);
  return { isValid: useRoot1 || useRoot2, value: x };
}
var ed25519_Point = /* @__PURE__ */ edwards(ed25519_CURVE, { uvRatio });
var x25519 = /* @__PURE__ */ (() => {
  const P = ed25519_CURVE_p;
  const powPminus2 = (x) => {
    const { pow_p_5_8, b2 } = ed25519_pow_2_252_3(x);
    return mod(pow2(pow_p_5_8, _3n2, P) * b2, P);
  };
  return montgomery({
    P,
    type: "x25519",
    powPminus2,
    adjustScalarBytes,
    // ~3x faster fixed-base: [k]B on the birationally-equivalent Edwards curve using cached
    // base tables, mapped back via u = (1+y)/(1-y) = (Z+Y)/(Z-Y) with one Fermat inversion.
    // Same construction as libsodium's crypto_scalarmult_curve25519_base.
    scalarMultBase: (k) => {
      const kn = mod(k, ed25519_Point.Fn.ORDER);
      if (kn === _0n6)
        return _0n6;
      const p = ed25519_Point.BASE.multiply(kn);
      return mod((p.Z + p.Y) * powPminus2(mod(p.Z - p.Y, P)), P);
    }
  });
})();

// node_modules/@noble/hashes/hmac.js
var _HMAC = class {
  oHash;
  iHash;
  blockLen;
  outputLen;
  canXOF = false;
  finished = false;
  destroyed = false;
  constructor(hash, key) {
    ahash(hash);
    abytes2(key, void 0, "key");
    this.iHash = hash.create();
    if (typeof this.iHash.update !== "function")
      throw new Error("expected Hash instance");
    this.blockLen = this.iHash.blockLen;
    this.outputLen = this.iHash.outputLen;
    const blockLen = this.blockLen;
    const pad = new Uint8Array(blockLen);
    pad.set(key.length > blockLen ? hash.create().update(key).digest() : key);
    for (let i = 0; i < pad.length; i++)
      pad[i] ^= 54;
    this.iHash.update(pad);
    this.oHash = hash.create();
    for (let i = 0; i < pad.length; i++)
      pad[i] ^= 54 ^ 92;
    this.oHash.update(pad);
    clean2(pad);
  }
  update(buf) {
    aexists2(this);
    this.iHash.update(buf);
    return this;
  }
  digestInto(out) {
    aexists2(this);
    aoutput2(out, this);
    this.finished = true;
    const buf = out.subarray(0, this.outputLen);
    this.iHash.digestInto(buf);
    this.oHash.update(buf);
    this.oHash.digestInto(buf);
    this.destroy();
  }
  digest() {
    const out = new Uint8Array(this.oHash.outputLen);
    this.digestInto(out);
    return out;
  }
  _cloneInto(to) {
    to ||= Object.create(Object.getPrototypeOf(this), {});
    const { oHash, iHash, finished, destroyed, blockLen, outputLen, canXOF } = this;
    to = to;
    to.finished = finished;
    to.destroyed = destroyed;
    to.blockLen = blockLen;
    to.outputLen = outputLen;
    to.canXOF = canXOF;
    to.oHash = oHash._cloneInto(to.oHash);
    to.iHash = iHash._cloneInto(to.iHash);
    return to;
  }
  clone() {
    return this._cloneInto();
  }
  destroy() {
    this.destroyed = true;
    this.oHash.destroy();
    this.iHash.destroy();
  }
};
var hmac = /* @__PURE__ */ (() => {
  const hmac_ = ((hash, key, message) => new _HMAC(hash, key).update(message).digest());
  hmac_.create = (hash, key) => new _HMAC(hash, key);
  return hmac_;
})();

// src/secure/noise.ts
var PROLOGUE = ascii("ternio/2");
var DH_LEN = 32;
var PROTOCOL_NAMES = Object.freeze({
  NN: "Noise_NN_25519_ChaChaPoly_BLAKE2s",
  NK: "Noise_NK_25519_ChaChaPoly_BLAKE2s",
  NNpsk0: "Noise_NNpsk0_25519_ChaChaPoly_BLAKE2s",
  NKpsk0: "Noise_NKpsk0_25519_ChaChaPoly_BLAKE2s"
});
var HandshakeError = class extends Error {
  /** Makes the error with `message`. */
  constructor(message, options) {
    super(message, options);
    this.name = "HandshakeError";
  }
};
var MESSAGES = {
  NN: [["e"], ["e", "ee"]],
  NK: [["e", "es"], ["e", "ee"]],
  NNpsk0: [["psk", "e"], ["e", "ee"]],
  NKpsk0: [["psk", "e", "es"], ["e", "ee"]]
};
function hasResponderStatic(pattern) {
  return pattern === "NK" || pattern === "NKpsk0";
}
function isPsk(pattern) {
  return pattern === "NNpsk0" || pattern === "NKpsk0";
}
function hmacBlake2s(key, data) {
  return hmac(blake2s, key, data);
}
function hkdf(chainingKey, ikm, outputs) {
  const tempKey = hmacBlake2s(chainingKey, ikm);
  const out1 = hmacBlake2s(tempKey, Uint8Array.of(1));
  const out2 = hmacBlake2s(tempKey, concat(out1, Uint8Array.of(2)));
  const result = [out1, out2];
  if (outputs === 3) result.push(hmacBlake2s(tempKey, concat(out2, Uint8Array.of(3))));
  wipe(tempKey);
  return result;
}
function dh(privateKey, publicKey) {
  try {
    return x25519.getSharedSecret(privateKey, publicKey);
  } catch (error) {
    throw new HandshakeError("X25519 failed (an invalid public key)", { cause: error });
  }
}
function x25519PublicKey(privateKey) {
  expectBytes(privateKey, KEY_LEN, "an X25519 private key");
  return x25519.getPublicKey(privateKey);
}
var CipherState = class {
  key = null;
  nonce = 0n;
  initializeKey(key) {
    wipe(this.key);
    this.key = key;
    this.nonce = 0n;
  }
  encryptWithAd(ad, plain) {
    if (!this.key) return plain.slice();
    if (this.nonce === MAX_NONCE) throw new HandshakeError("nonce exhausted");
    return encrypt(this.key, this.nonce++, ad, plain);
  }
  decryptWithAd(ad, sealed) {
    if (!this.key) return sealed.slice();
    if (this.nonce === MAX_NONCE) throw new HandshakeError("nonce exhausted");
    const plain = decrypt(this.key, this.nonce, ad, sealed);
    if (!plain) throw new HandshakeError("a handshake message does not authenticate");
    this.nonce++;
    return plain;
  }
};
var SymmetricState = class {
  ck;
  h;
  cipher = new CipherState();
  constructor(protocolName) {
    const name = ascii(protocolName);
    if (name.length <= DH_LEN) {
      this.h = new Uint8Array(DH_LEN);
      this.h.set(name);
    } else {
      this.h = blake2s256(name);
    }
    this.ck = this.h.slice();
  }
  mixKey(ikm) {
    const [ck, tempK] = hkdf(this.ck, ikm, 2);
    wipe(this.ck);
    this.ck = ck;
    this.cipher.initializeKey(tempK);
  }
  mixHash(data) {
    this.h = blake2s256(this.h, data);
  }
  mixKeyAndHash(ikm) {
    const [ck, tempH, tempK] = hkdf(this.ck, ikm, 3);
    wipe(this.ck);
    this.ck = ck;
    this.mixHash(tempH);
    this.cipher.initializeKey(tempK);
  }
  encryptAndHash(plain) {
    const sealed = this.cipher.encryptWithAd(this.h, plain);
    this.mixHash(sealed);
    return sealed;
  }
  decryptAndHash(sealed) {
    const plain = this.cipher.decryptWithAd(this.h, sealed);
    this.mixHash(sealed);
    return plain;
  }
  split() {
    return hkdf(this.ck, new Uint8Array(0), 2);
  }
  destroy() {
    wipe(this.ck);
    wipe(this.cipher.key);
    this.cipher.key = null;
  }
};
var HandshakeState = class {
  #pattern;
  #initiator;
  #symmetric;
  #messages;
  #ephemeral = null;
  #fixedEphemeral;
  #staticPrivate;
  #remoteEphemeral = null;
  #remoteStatic;
  #psk;
  #next = 0;
  #failed = false;
  #split = false;
  /** Initializes the state (Noise's Initialize()): protocol name, prologue, pre-messages. */
  constructor(options) {
    const { pattern, role } = options;
    if (!(pattern in MESSAGES)) throw new HandshakeError(`not a pattern Ternio runs: ${String(pattern)}`);
    if (role !== "initiator" && role !== "responder") throw new HandshakeError(`no such role: ${String(role)}`);
    this.#pattern = pattern;
    this.#initiator = role === "initiator";
    this.#messages = MESSAGES[pattern];
    this.#symmetric = new SymmetricState(PROTOCOL_NAMES[pattern]);
    this.#symmetric.mixHash(options.prologue ?? PROLOGUE);
    this.#fixedEphemeral = null;
    if (options.ephemeralPrivateKey !== void 0) {
      expectBytes(options.ephemeralPrivateKey, KEY_LEN, "the ephemeral private key");
      this.#fixedEphemeral = options.ephemeralPrivateKey.slice();
    }
    this.#psk = null;
    if (isPsk(pattern)) {
      if (options.psk === void 0) throw new HandshakeError(`${pattern} needs a pre-shared key`);
      expectBytes(options.psk, KEY_LEN, "the pre-shared key");
      this.#psk = options.psk.slice();
    } else if (options.psk !== void 0) {
      throw new HandshakeError(`${pattern} takes no pre-shared key`);
    }
    this.#staticPrivate = null;
    this.#remoteStatic = null;
    if (hasResponderStatic(pattern)) {
      let responderStatic;
      if (this.#initiator) {
        if (options.remoteStaticKey === void 0) throw new HandshakeError(`${pattern} needs the server's static public key`);
        expectBytes(options.remoteStaticKey, KEY_LEN, "the server's static public key");
        this.#remoteStatic = options.remoteStaticKey.slice();
        responderStatic = this.#remoteStatic;
      } else {
        if (options.staticPrivateKey === void 0) throw new HandshakeError(`${pattern} needs the server's static private key`);
        expectBytes(options.staticPrivateKey, KEY_LEN, "the server's static private key");
        this.#staticPrivate = options.staticPrivateKey.slice();
        responderStatic = x25519PublicKey(this.#staticPrivate);
      }
      this.#symmetric.mixHash(responderStatic);
    }
  }
  /** The pattern this handshake runs. */
  get pattern() {
    return this.#pattern;
  }
  /** Whether both messages went through: `split()` and `handshakeHash` are then available. */
  get finished() {
    return this.#next === this.#messages.length && !this.#failed;
  }
  /** Whether it is this side's turn to write (else to read). */
  get writing() {
    return this.#next % 2 === 0 === this.#initiator;
  }
  /**
   * Noise's handshake hash `h` once the handshake finished (a copy): the
   * same on both sides, a channel binding. It hashes only what crossed the
   * wire, so it is no secret (which is why resumption is keyed by the
   * session secret instead).
   */
  get handshakeHash() {
    if (!this.finished) throw new HandshakeError("the handshake has not finished");
    return this.#symmetric.h.slice();
  }
  /** Writes this side's next message, with `payload` (empty in Ternio) encrypted in it. */
  writeMessage(payload = new Uint8Array(0)) {
    const tokens = this.#turn(true);
    try {
      const parts = [];
      for (const token of tokens) {
        if (token === "e") {
          const ephemeral = this.#fixedEphemeral ?? x25519.utils.randomSecretKey();
          this.#fixedEphemeral = null;
          this.#ephemeral = ephemeral;
          const publicKey = x25519PublicKey(ephemeral);
          parts.push(publicKey);
          this.#symmetric.mixHash(publicKey);
          if (this.#psk) this.#symmetric.mixKey(publicKey);
        } else {
          this.#mixToken(token);
        }
      }
      parts.push(this.#symmetric.encryptAndHash(payload));
      this.#next++;
      return concat(...parts);
    } catch (error) {
      this.#fail();
      throw error;
    }
  }
  /** Reads the other side's next message; returns its payload (empty in Ternio). Fails the handshake on any bad byte. */
  readMessage(message) {
    const tokens = this.#turn(false);
    try {
      if (!(message instanceof Uint8Array)) throw new TypeError("a handshake message is a Uint8Array");
      let at = 0;
      for (const token of tokens) {
        if (token === "e") {
          if (message.length - at < DH_LEN) throw new HandshakeError("a handshake message is too short");
          const publicKey = message.slice(at, at + DH_LEN);
          at += DH_LEN;
          this.#remoteEphemeral = publicKey;
          this.#symmetric.mixHash(publicKey);
          if (this.#psk) this.#symmetric.mixKey(publicKey);
        } else {
          this.#mixToken(token);
        }
      }
      const rest = message.subarray(at);
      if (this.#symmetric.cipher.key && rest.length < TAG_LEN) throw new HandshakeError("a handshake message is too short");
      const payload = this.#symmetric.decryptAndHash(rest);
      this.#next++;
      return payload;
    } catch (error) {
      this.#fail();
      throw error;
    }
  }
  /**
   * Noise's Split(), once the handshake finished: the two transport keys
   * (new arrays, the caller's to erase). Erases the handshake's own secrets;
   * `handshakeHash` stays readable. Callable once.
   */
  split() {
    if (!this.finished) throw new HandshakeError("the handshake has not finished");
    if (this.#split) throw new HandshakeError("split() was already called");
    const [initiatorToResponder, responderToInitiator] = this.#symmetric.split();
    this.#split = true;
    this.#erase();
    return { initiatorToResponder, responderToInitiator };
  }
  /** Erases every secret the handshake holds; the state can no longer be used. */
  destroy() {
    this.#failed = true;
    this.#erase();
  }
  #turn(writing) {
    if (this.#failed) throw new HandshakeError("the handshake failed or was given up");
    const tokens = this.#messages[this.#next];
    if (!tokens) throw new HandshakeError("the handshake has no more messages");
    if (this.writing !== writing) throw new HandshakeError(writing ? "it is the other side's turn to write" : "it is this side's turn to write");
    return tokens;
  }
  #mixToken(token) {
    if (token === "psk") {
      this.#symmetric.mixKeyAndHash(this.#psk);
      return;
    }
    let secret;
    if (token === "ee") {
      secret = dh(this.#ephemeral, this.#remoteEphemeral);
    } else if (this.#initiator) {
      secret = dh(this.#ephemeral, this.#remoteStatic);
    } else {
      secret = dh(this.#staticPrivate, this.#remoteEphemeral);
    }
    this.#symmetric.mixKey(secret);
    wipe(secret);
  }
  #fail() {
    this.#failed = true;
    this.#erase();
  }
  #erase() {
    wipe(this.#ephemeral);
    wipe(this.#fixedEphemeral);
    wipe(this.#staticPrivate);
    wipe(this.#psk);
    this.#ephemeral = this.#fixedEphemeral = this.#staticPrivate = this.#psk = null;
    this.#symmetric.destroy();
  }
};

// src/secure/session.ts
var HANDSHAKE_PATTERN = Object.freeze({ NN: 1, NK: 2 });
var RESUME_PATTERN = Object.freeze({ plain: 0, NNpsk0: 3, NKpsk0: 4 });
var TICKET_LEN2 = 32;
var SECOND_MESSAGE_LEN = DH_LEN + TAG_LEN;
var RESUME_FIXED_LEN = TICKET_LEN2 + 8 + 1;
var RESUMED_FIXED_LEN = 8 + TICKET_LEN2 + 4;
var RESUMED_MESSAGE_LEN = DH_LEN + RESUMED_FIXED_LEN + TAG_LEN;
function channelOf(state, serverKey, options) {
  const handshakeHash = state.handshakeHash;
  const keys = state.split();
  const sending = {};
  if (options.rekeyPolicy) sending.policy = options.rekeyPolicy;
  if (options.clock) sending.clock = options.clock;
  const channel = {
    send: new SendingCipher(keys.initiatorToResponder, sending),
    receive: new ReceivingCipher(keys.responderToInitiator),
    handshakeHash,
    sessionSecret: sessionSecret(keys.initiatorToResponder, keys.responderToInitiator),
    serverKey: serverKey ? serverKey.slice() : null
  };
  wipe(keys.initiatorToResponder);
  wipe(keys.responderToInitiator);
  return channel;
}
function finishWith(state, answer, serverKey, options) {
  if (!(answer instanceof Uint8Array) || answer.length !== SECOND_MESSAGE_LEN) {
    state.destroy();
    throw new HandshakeError(`the second handshake message must be ${SECOND_MESSAGE_LEN} bytes`);
  }
  state.readMessage(answer);
  return channelOf(state, serverKey, options);
}
function startHandshake(start = {}) {
  const pattern = start.pattern ?? (start.serverKey ? "NK" : "NN");
  let serverKey = null;
  if (pattern === "NK") {
    if (start.serverKey === void 0) throw new HandshakeError("NK needs the server key");
    expectBytes(start.serverKey, KEY_LEN, "the server key");
    serverKey = start.serverKey.slice();
  } else if (pattern !== "NN") {
    throw new HandshakeError(`not a HANDSHAKE pattern: ${String(pattern)}`);
  } else if (start.serverKey !== void 0) {
    throw new HandshakeError("NN pins no server key (use NK)");
  }
  const state = new HandshakeState({
    pattern,
    role: "initiator",
    ...serverKey ? { remoteStaticKey: serverKey } : {},
    ...start.ephemeralPrivateKey ? { ephemeralPrivateKey: start.ephemeralPrivateKey } : {}
  });
  const message = state.writeMessage();
  const body = new Uint8Array(1 + message.length);
  body[0] = HANDSHAKE_PATTERN[pattern];
  body.set(message, 1);
  return {
    body,
    pattern,
    finish: (answer, options = {}) => finishWith(state, answer, serverKey, options),
    abandon: () => state.destroy()
  };
}
function startResume(start) {
  expectBytes(start.ticket, TICKET_LEN2, "a ticket");
  if (typeof start.received !== "bigint" || start.received < 0n || start.received >= 1n << 64n) {
    throw new RangeError("received is a u64 (bigint)");
  }
  let state = null;
  let serverKey = null;
  let pattern = RESUME_PATTERN.plain;
  let message = new Uint8Array(0);
  if (start.secure?.serverKey) pattern = RESUME_PATTERN.NKpsk0;
  else if (start.secure) pattern = RESUME_PATTERN.NNpsk0;
  const fields = new Uint8Array(RESUME_FIXED_LEN);
  fields.set(start.ticket, 0);
  new DataView(fields.buffer).setBigUint64(TICKET_LEN2, start.received, true);
  fields[TICKET_LEN2 + 8] = pattern;
  if (start.secure) {
    const { sessionSecret: secret } = start.secure;
    expectBytes(secret, KEY_LEN, "the session secret");
    if (start.secure.serverKey) {
      expectBytes(start.secure.serverKey, KEY_LEN, "the server key");
      serverKey = start.secure.serverKey.slice();
    }
    const psk = resumePsk(secret);
    try {
      state = new HandshakeState({
        pattern: serverKey ? "NKpsk0" : "NNpsk0",
        role: "initiator",
        prologue: concat(PROLOGUE, fields),
        psk,
        ...serverKey ? { remoteStaticKey: serverKey } : {},
        ...start.ephemeralPrivateKey ? { ephemeralPrivateKey: start.ephemeralPrivateKey } : {}
      });
    } finally {
      wipe(psk);
    }
    message = state.writeMessage();
  } else if (start.ephemeralPrivateKey !== void 0) {
    throw new HandshakeError("a plain session resumes with no handshake");
  }
  const body = new Uint8Array(RESUME_FIXED_LEN + message.length);
  body.set(fields, 0);
  body.set(message, RESUME_FIXED_LEN);
  const finish = (answer, options = {}) => {
    const expected = RESUMED_FIXED_LEN + (state ? RESUMED_MESSAGE_LEN : 0);
    if (!(answer instanceof Uint8Array) || answer.length !== expected) {
      state?.destroy();
      throw new HandshakeError(`a RESUME answer of pattern ${pattern} must be ${expected} bytes`);
    }
    const read = new DataView(answer.buffer, answer.byteOffset, answer.length);
    const received = read.getBigUint64(0, true);
    const ticket = answer.slice(8, 8 + TICKET_LEN2);
    const ttlMs = read.getUint32(8 + TICKET_LEN2, true);
    let channel = null;
    if (state) {
      const payload = state.readMessage(answer.subarray(RESUMED_FIXED_LEN));
      if (!equal(payload, answer.subarray(0, RESUMED_FIXED_LEN))) {
        state.destroy();
        throw new HandshakeError("the RESUME answer's fields are not the ones its Noise message authenticates");
      }
      channel = channelOf(state, serverKey, options);
    }
    return { received, ticket, ttlMs, channel };
  };
  return { body, pattern, finish, abandon: () => state?.destroy() };
}
function equal(a, b) {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i] ^ b[i];
  return diff === 0;
}

// src/client.ts
function secureOptions(option2) {
  if (option2 === void 0 || option2 === false) return null;
  if (option2 === true) return { pin: null };
  if (typeof option2 !== "object" || option2 === null) throw new TypeError(`secure must be true, false or { pin }, got ${show(option2)}`);
  const pin = option2.pin ?? null;
  if (pin === null) return { pin: null };
  if (typeof pin === "string") {
    if (!/^[0-9a-fA-F]{64}$/.test(pin)) throw new TypeError("secure.pin must be the server's public key: 32 bytes or 64 hex digits");
    return { pin: Uint8Array.from(pin.match(/../g), (byte) => parseInt(byte, 16)) };
  }
  if (!(pin instanceof Uint8Array) || pin.length !== 32) {
    throw new TypeError("secure.pin must be the server's public key: 32 bytes or 64 hex digits");
  }
  return { pin: pin.slice() };
}
function rekeyPolicy(option2) {
  const frames = option2?.frames ?? DEFAULT_REKEY_POLICY.frames;
  const intervalMs = option2?.intervalMs ?? DEFAULT_REKEY_POLICY.intervalMs;
  if (typeof frames !== "number" || !(frames >= 1)) throw new TypeError(`rekey.frames must be a number ≥ 1, got ${show(frames)}`);
  if (typeof intervalMs !== "number" || !(intervalMs >= 0)) {
    throw new TypeError(`rekey.intervalMs must be a number ≥ 0, got ${show(intervalMs)}`);
  }
  return { frames, intervalMs };
}
var OPEN = 1;
function describe(disconnect) {
  const text = disconnect.message ? `: ${disconnect.message}` : "";
  return `server disconnected: ${disconnect.reasonName} (${disconnect.reason})${text}`;
}
function abortedError(name, signal) {
  return new TernioError("aborted", `${name} was aborted`, { cause: signal.reason });
}
var Client = class _Client {
  #WebSocket;
  #url = null;
  /** The current WebSocket (open, or an attempt in progress); null between attempts and once closed. */
  #ws = null;
  #state = "idle";
  /** Requests by id: `sent` once on the wire; unsent ones wait for a connection. */
  #pending = /* @__PURE__ */ new Map();
  /** Open streams by request id (docs/PROTOCOL.md section 4.5). */
  #streams = /* @__PURE__ */ new Map();
  /** Uploads waiting for room in the replay buffer: woken by an `ACK` or a change of session. */
  #roomWaiters = /* @__PURE__ */ new Set();
  /**
   * Ids to `CANCEL` once the session resumes: requests and streams
   * aborted while the connection was down.
   */
  #cancelOnResume = [];
  /** Bytes of the requests that wait for a connection. */
  #queuedBytes = 0;
  #nextId = 1;
  #handlers = /* @__PURE__ */ new Map();
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
  /** The keepalive PING waiting for its PONG. */
  #keepalive = null;
  #timers = {
    connect: null,
    keepalive: null,
    healthy: null,
    retry: null,
    ack: null,
    resume: null,
    handshake: null
  };
  /** Resumption's state (section 4.2); null when the client does not resume sessions. */
  #session = null;
  /** The `RESUME` waiting for its answer on the current connection (`pending`: a secure session's). */
  #resuming = null;
  /** The option `secure`: null for plain sessions. */
  #secure;
  /** The option `rekey`. */
  #rekey;
  /** The current connection's secure channel, once its handshake (or resumption) completed. */
  #channel = null;
  /** The `HANDSHAKE` waiting for its answer on the current connection. */
  #handshaking = null;
  /** The secret of the secure session's latest handshake: what its next resumption is keyed by. */
  #sessionSecret = null;
  /** Settles the first connect(). */
  #connecting = null;
  #resolveClosed;
  /** Default request timeout in ms (0 or Infinity: none). */
  timeout;
  /** Where errors that belong to no request go (see {@link ClientOptions}). */
  onError;
  /** Told of every change of the connection's state (see {@link StateEvent}). */
  onStateChange;
  /** Told whether each reconnection resumed the session (see {@link SessionEvent}). */
  onSessionChange;
  /** Keepalive PING period in ms (0: none); read when a connection opens. */
  keepaliveInterval;
  /** How long a keepalive PING waits for its PONG, in ms. */
  keepaliveTimeout;
  /** How long one connection attempt may take, in ms. */
  connectTimeout;
  /** The outbound buffer's limit, in bytes. */
  maxBufferedBytes;
  /** The compression threshold of what the client sends, in bytes (null: off). */
  compress;
  /** The largest frame accepted from the server once decompressed, in bytes. */
  maxFrameSize;
  /**
   * Settles once the client has closed for good (after the last reconnect
   * attempt, when it reconnects), with how.
   */
  closed;
  /** @param options See {@link ClientOptions}. */
  constructor(options = {}) {
    this.#WebSocket = options.WebSocket ?? globalThis.WebSocket;
    this.#policy = reconnectPolicy(options.reconnect);
    this.#secure = secureOptions(options.secure);
    this.#rekey = rekeyPolicy(options.rekey);
    const resume = resumeOptions(options.resume ?? true);
    if (this.#policy && resume) this.#session = new Session(resume.replayBytes);
    this.timeout = options.timeout ?? 1e4;
    this.onError = options.onError ?? ((error) => console.error("ternio:", error));
    this.onStateChange = options.onStateChange ?? null;
    this.onSessionChange = options.onSessionChange ?? null;
    this.keepaliveInterval = options.keepaliveInterval ?? 15e3;
    this.keepaliveTimeout = options.keepaliveTimeout ?? 1e4;
    this.connectTimeout = options.connectTimeout ?? 1e4;
    this.maxBufferedBytes = options.maxBufferedBytes ?? 4 * 1024 * 1024;
    this.compress = options.compress ?? null;
    if (this.compress !== null && (typeof this.compress !== "number" || !(this.compress >= 0))) {
      throw new TypeError(`compress must be a number ≥ 0 or null, got ${show(this.compress)}`);
    }
    this.maxFrameSize = options.maxFrameSize ?? DEFAULT_MAX_FRAME_SIZE;
    this.closed = new Promise((resolve) => {
      this.#resolveClosed = resolve;
    });
  }
  /**
   * Creates a client and connects it.
   * @param url Such as `ws://host:port/ws` (or `wss://`).
   * @param options See {@link ClientOptions}.
   */
  static async connect(url, options) {
    return new _Client(options).connect(url);
  }
  /**
   * Opens the WebSocket, offering the subprotocol `ternio.v2`. Once per
   * client. When this first connection fails the client is closed: only a
   * connection that was once up is re-established.
   * @returns This client, once open; a `'closed'` {@link TernioError} if it cannot connect.
   */
  connect(url) {
    return new Promise((resolve, reject) => {
      if (this.#url !== null || this.#state !== "idle") throw new Error("connect() may be called once per Client");
      if (typeof this.#WebSocket !== "function") {
        throw new TernioError("closed", "no WebSocket here (Node 20 needs --experimental-websocket, or pass options.WebSocket)");
      }
      this.#url = url;
      this.#state = "connecting";
      this.#connecting = { resolve: () => resolve(this), reject };
      this.#dial();
    });
  }
  /** Whether a connection is open and not closing. */
  get isOpen() {
    return this.#state === "open" && !this.#closing && !this.#violated && !this.#disconnect;
  }
  /**
   * `'idle'` (before connect()), `'connecting'` (the first connection),
   * `'open'`, `'reconnecting'` (between attempts, or during one) or `'closed'`.
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
  /**
   * The current connection's secure session (option `secure`), once its
   * handshake or resumption completed; null on a plain client, and while
   * a connection is being set up.
   */
  get secureSession() {
    const channel = this.#channel;
    if (!channel) return null;
    return {
      pattern: channel.serverKey ? "NK" : "NN",
      serverKey: channel.serverKey ? channel.serverKey.slice() : null,
      handshakeHash: channel.handshakeHash.slice()
    };
  }
  /** How many times the session was resumed so far. */
  get resumptions() {
    return this.#session?.resumptions ?? 0;
  }
  /** How many pushes arrived that no {@link Client#on} handler took (they are dropped). */
  get unhandledPushes() {
    return this.#unhandled;
  }
  request(packetType, value, options = {}) {
    return new Promise((resolve, reject) => {
      const { signal } = options;
      const outgoing = this.#outgoing(packetType, value, true);
      if (signal?.aborted) return reject(abortedError(outgoing.name, signal));
      const { opcode, name } = outgoing;
      const expected = options.response ?? (typeof packetType === "number" ? void 0 : packetType.response);
      const decode = typeof packetType === "number" ? (frame) => frame : (frame) => {
        if (expected && frame.opcode === expected.opcode) return expected.decode(frame.body);
        if (frame.opcode === opcode) return frame.body.length === 0 ? void 0 : packetType.decode(frame.body);
        throw new TernioError("protocol", `${name} answered with unexpected opcode ${hex(frame.opcode)}`);
      };
      if (!signal) return this.#call(outgoing, options.timeout, decode, resolve, reject);
      const onAbort = () => {
        if (id !== void 0) this.#abortRequest(id, abortedError(name, signal));
      };
      const settle = (fn) => (arg) => {
        signal.removeEventListener("abort", onAbort);
        fn(arg);
      };
      const id = this.#call(outgoing, options.timeout, decode, settle(resolve), settle(reject));
      if (id !== void 0) signal.addEventListener("abort", onAbort, { once: true });
    });
  }
  send(packetType, value) {
    const { opcode, body, compress } = this.#outgoing(packetType, value, false);
    const { data, plain } = encodeBoth({ opcode, body }, compress);
    const error = this.#write(data, plain);
    if (error) throw error;
  }
  on(packetTypeOrOpcode, handler) {
    const raw = typeof packetTypeOrOpcode === "number";
    const opcode = checkOpcode(raw ? packetTypeOrOpcode : packetTypeOrOpcode?.opcode);
    if (typeof handler !== "function") throw new TypeError("on() needs a handler function");
    const subscription = { type: raw ? null : packetTypeOrOpcode, handler };
    let set = this.#handlers.get(opcode);
    if (!set) this.#handlers.set(opcode, set = /* @__PURE__ */ new Set());
    set.add(subscription);
    const subscriptions = set;
    return () => {
      subscriptions.delete(subscription);
      if (subscriptions.size === 0 && this.#handlers.get(opcode) === subscriptions) this.#handlers.delete(opcode);
    };
  }
  /**
   * Sends a PING (a u64 timestamp) and waits for its PONG. While the
   * client reconnects, it waits for the new connection, like a request.
   * @returns The round trip, in milliseconds.
   */
  ping(options = {}) {
    return new Promise((resolve, reject) => {
      this.#assertUsable(true);
      const value = u64.encode(BigInt(Date.now()));
      let start = 0;
      const decode = (frame) => {
        if (frame.opcode !== SystemOpcode.PONG || !sameBytes(frame.body, value)) {
          throw new TernioError("protocol", `PING answered with opcode ${hex(frame.opcode)} and another value`);
        }
        return performance.now() - start;
      };
      const outgoing = { opcode: SystemOpcode.PING, body: value, name: "PING", compress: null };
      this.#call(outgoing, options.timeout, decode, resolve, reject, () => {
        start = performance.now();
      });
    });
  }
  /**
   * Sends `DISCONNECT NORMAL` and closes the WebSocket with code 1000; the
   * client does not reconnect after it. Requests still waiting are rejected
   * (`'closed'`) at once.
   * @param message The DISCONNECT's text.
   * @returns Settles once the WebSocket has closed (at once when no connection is open).
   */
  close(message = "") {
    if (this.#state === "closed" || this.#closing) return this.closed;
    this.#closing = true;
    const ws = this.#ws;
    const error = new TernioError("closed", "connection closed by the client");
    if (ws && this.#state === "open" && !this.#violated) {
      if (ws.readyState === OPEN) this.#sendDisconnect(DisconnectReason.NORMAL, message);
      this.#failAll(() => error);
      this.#stopLinkTimers();
      ws.close(1e3);
    } else {
      if (ws) this.#abandon(ws);
      if (this.#connecting) this.#connecting.reject(error);
      this.#finish({ code: 1e3, reason: "", disconnect: null, local: true }, error);
    }
    return this.closed;
  }
  /**
   * Sends a request answered by a stream of items (docs/PROTOCOL.md
   * section 4.5) and returns them as an async iterable, in order:
   * `for await (const item of client.requestStream(CountTo, { count: 10 })) ...`.
   * The iteration ends when the server's handler ended the stream; an
   * error from the server (`'remote'`), or a lost connection whose
   * session is not resumed (`'closed'`), is thrown by the iteration. On a
   * resumable session (option `resume`) the stream belongs to the session:
   * it goes on once the session is resumed, every item once and in order.
   * Leaving the loop early (`break`, `return`, a throw) or aborting
   * `options.signal` sends `CANCEL` (the loop then throws `'aborted'`).
   *
   * The client holds at most 32 items not yet taken, and grants the server
   * more as the loop takes them: a loop that waits holds the server's
   * handler where it is.
   *
   * @throws {TernioError} `'closed'` when the connection is not open; `'aborted'` when the signal already is.
   */
  requestStream(packetType, value, options = {}) {
    const itemType = options.item ?? packetType.item;
    if (typeof itemType?.decode !== "function") throw new TypeError("requestStream() needs the items' type: options.item");
    const stream = this.#openStream(packetType, value, options.signal);
    return downloadIterator(stream, itemType, this.#streamLink);
  }
  /**
   * Sends a request that carries a stream of items to the server (an
   * upload, docs/PROTOCOL.md section 4.5). `send(item)` resolves once the
   * item is on its way, waiting for credit from the server (and, on a
   * resumable session, for room in the replay buffer); `finish()`
   * ends the upload and resolves with the server's answer; `fail(code,
   * message)` ends it as failed; `cancel()` (or aborting `options.signal`)
   * sends `CANCEL`. If the server answers before the upload ended, `send`
   * rejects (`'closed'`, with `answered: true`) and `finish()` gives that answer.
   * Like a download, an upload goes on across a resumed session (what
   * `send` hands over while the connection is down is kept and replayed),
   * and fails (`'closed'`) when the session is not resumed.
   *
   * @throws {TernioError} `'closed'` when the connection is not open; `'aborted'` when the signal already is.
   */
  upload(packetType, value, options = {}) {
    const itemType = options.item ?? packetType.item;
    if (typeof itemType?.encode !== "function") throw new TypeError("upload() needs the items' type: options.item");
    const stream = this.#openStream(packetType, value, options.signal);
    return uploadHandle(stream, packetType, itemType, this.#streamLink);
  }
  // -------------------------------------------------- the seam: frames out, frames in
  /**
   * Puts one encoded frame on the WebSocket: every frame the client sends
   * passes here, and only here. Once the connection's secure session is up,
   * the frame is sealed here (section 5.1), after a `REKEY` when the rekey
   * policy says one is due (section 5.2); before, and on a plain client, it
   * goes as it is. (The one plain frame of a secure session, `DISCONNECT
   * DECRYPT_FAILED`, does not come here: see `#decryptFailed`.)
   */
  #transmit(ws, frame) {
    const channel = this.#channel;
    if (channel === null) {
      ws.send(frame);
      return;
    }
    let sealed;
    try {
      sealed = channel.send.sealFrames(frame.subarray(0, HEADER_LEN), frame.subarray(HEADER_LEN));
    } catch (error) {
      if (!(error instanceof SealError)) throw error;
      const lost = new TernioError("closed", `the secure session cannot seal more: ${error.message}`, { cause: error });
      queueMicrotask(() => this.#lost(ws, { code: 1006, reason: "sealing failed" }, lost, true));
      return;
    }
    for (const message of sealed) ws.send(message);
  }
  /**
   * One WebSocket message from the server: every frame the client receives
   * starts here. A secure session opens it here, before it is handled.
   */
  #onMessage(data) {
    if (this.#closing || this.#violated) return;
    if (typeof data === "string") return this.#violation("text message");
    let frame;
    const bytes2 = data instanceof ArrayBuffer ? new Uint8Array(data) : data;
    try {
      frame = decodeFrame(bytes2);
    } catch (error) {
      return this.#violation(error.message);
    }
    if (this.#secure) {
      const opened = this.#openSealed(frame, bytes2);
      if (!opened) return;
      frame = opened;
    } else if (frame.flags & Flags.ENCRYPTED) {
      return this.#violation("sealed frame without a secure session");
    }
    if (frame.flags & Flags.COMPRESSED) {
      try {
        frame = { ...frame, flags: frame.flags & ~Flags.COMPRESSED, body: decompressBody(frame.body, this.maxFrameSize - HEADER_LEN) };
      } catch (error) {
        const tooLarge = error.tooLarge;
        return this.#violation(error.message, tooLarge ? DisconnectReason.FRAME_TOO_LARGE : DisconnectReason.MALFORMED);
      }
    }
    if (frame.opcode === SystemOpcode.ACK) return this.#onAck(frame);
    const due = isCounted(frame.opcode) && this.#countReceived(frame);
    this.#handle(frame);
    if (due) this.#sendAck();
  }
  /**
   * A frame received by a secure client (`bytes` as received): opened once
   * the connection's session is up; before, only the answer to its
   * `HANDSHAKE` or `RESUME` (plain) is taken. Returns the frame to handle
   * (opened, `ENCRYPTED` cleared), or null when it was taken or refused here.
   */
  #openSealed(frame, bytes2) {
    const channel = this.#channel;
    if (channel === null) {
      if (frame.flags & Flags.ENCRYPTED) {
        this.#decryptFailed("a sealed frame before the handshake completed");
        return null;
      }
      const answer = frame.flags & Flags.RESPONSE && frame.requestId !== 0;
      if (answer && frame.requestId === this.#handshaking?.id) {
        this.#onHandshakeAnswer(frame);
        return null;
      }
      if (answer && frame.requestId === this.#resuming?.id) return frame;
      if (frame.opcode === SystemOpcode.DISCONNECT) {
        const disconnect = this.#parseDisconnect(frame);
        this.#lost(this.#ws, { code: 1006, reason: "plain DISCONNECT" }, new TernioError(
          "closed",
          `a plain DISCONNECT before the secure handshake completed, treated as a lost connection: ${describe(disconnect)}`,
          { disconnect }
        ));
        return null;
      }
      return null;
    }
    if (!(frame.flags & Flags.ENCRYPTED)) {
      if (frame.opcode === SystemOpcode.DISCONNECT) {
        const disconnect = this.#parseDisconnect(frame);
        const what = `a plain DISCONNECT on a secure session, treated as a lost connection: ${describe(disconnect)}`;
        if (disconnect.reason === DisconnectReason.DECRYPT_FAILED) {
          this.#lost(this.#ws, { code: 1006, reason: "plain DISCONNECT" }, new TernioError("closed", what, { disconnect }), true);
        } else {
          this.#decryptFailed(what);
        }
      } else {
        this.#decryptFailed(`a plain frame (opcode ${hex(frame.opcode)}) on a secure session`);
      }
      return null;
    }
    let plain;
    try {
      plain = channel.receive.open(bytes2.subarray(0, HEADER_LEN), frame.body);
    } catch (error) {
      if (!(error instanceof OpenError)) throw error;
      this.#decryptFailed(error.message);
      return null;
    }
    const flags = frame.flags & ~Flags.ENCRYPTED;
    if (frame.opcode === SystemOpcode.REKEY) {
      if (frame.requestId !== 0 || plain.length !== 0 || flags !== 0) {
        this.#violation("a REKEY that is not sealed, empty and without id");
      }
      return null;
    }
    return { ...frame, flags, body: plain };
  }
  /** A `DISCONNECT`'s reason and text. */
  #parseDisconnect(frame) {
    const parsed = codeAndText(frame.body) ?? { code: DisconnectReason.MALFORMED, text: "unreadable DISCONNECT" };
    return { reason: parsed.code, reasonName: nameIn(DisconnectReason, parsed.code) ?? "UNKNOWN", message: parsed.text };
  }
  /**
   * A frame failed the secure session's checks (section 5.1): a sealed
   * frame that does not open (tag, counter, length), one before the
   * handshake completed, or a plain frame after it. Tells the server
   * `DISCONNECT DECRYPT_FAILED`, the one frame a secure session sends
   * plain, and drops the connection. As in the Rust client the session is
   * not ended by it (someone on the path wrote the frame): with `reconnect`
   * it is resumed on a new connection.
   */
  #decryptFailed(reason) {
    if (this.#closing || this.#violated) return;
    const ws = this.#ws;
    if (!ws) return;
    if (ws.readyState === OPEN) {
      ws.send(encodeFrame({ opcode: SystemOpcode.DISCONNECT, body: codeAndTextBody(DisconnectReason.DECRYPT_FAILED, reason) }));
    }
    this.#lost(
      ws,
      { code: 1006, reason: "decrypt failed" },
      new TernioError("closed", `a frame failed the secure session's checks (the client sent DISCONNECT DECRYPT_FAILED): ${reason}`),
      true
    );
  }
  // ------------------------------------------------------- the connection
  /** Opens a WebSocket to the URL: the first connection or a reconnect attempt. */
  #dial() {
    const url = this.#url;
    let ws;
    try {
      ws = new this.#WebSocket(url, SUBPROTOCOL);
    } catch (error) {
      const failure = new TernioError("closed", `cannot connect to ${url}: ${error.message}`, { cause: error });
      return this.#lost(null, { code: 1006, reason: "" }, failure);
    }
    this.#ws = ws;
    this.#disconnect = null;
    this.#violated = false;
    let opened = false;
    const current = () => this.#ws === ws;
    const failed = (code) => new TernioError("closed", `could not connect to ${url} (WebSocket close code ${code})`);
    ws.binaryType = "arraybuffer";
    if (this.connectTimeout > 0 && this.connectTimeout !== Infinity) {
      this.#timers.connect = unref(setTimeout(() => {
        if (!current()) return;
        const timeout = this.connectTimeout;
        this.#lost(
          ws,
          { code: 1006, reason: "connect timeout" },
          new TernioError("closed", `could not connect to ${url} within ${timeout} ms`, { timeout })
        );
      }, this.connectTimeout));
    }
    ws.onopen = () => {
      if (!current()) return;
      opened = true;
      this.#up();
    };
    ws.onerror = () => {
      if (opened || !current()) return;
      this.#lost(ws, { code: 1006, reason: "" }, failed(1006));
    };
    ws.onmessage = (event) => {
      if (current()) this.#onMessage(event.data);
    };
    ws.onclose = (event) => {
      if (current()) this.#lost(ws, { code: event.code, reason: event.reason }, opened ? null : failed(event.code));
    };
  }
  /**
   * The WebSocket opened: resume the session on it, or start a new one
   * (after the handshake, on a secure client).
   */
  #up() {
    clearTimeout(this.#timers.connect ?? void 0);
    const session = this.#session;
    if (session?.lostAt != null && session.resumable) {
      const away = Date.now() - session.lostAt;
      if (away < session.ttl) return this.#resume();
      this.#sessionLost(`its time to live of ${session.ttl} ms passed (the connection was lost ${away} ms ago)`);
    } else if (session?.ended || session?.lostAt != null) {
      this.#sessionLost(session.ended ?? "the client's replay buffer overflowed");
    }
    this.#start();
  }
  /** A new session on the current connection: the handshake first on a secure client. */
  #start() {
    if (this.#secure) return this.#handshake();
    this.#open(false);
  }
  /**
   * Sends `HANDSHAKE` (section 5: NN, or NK with the pinned key), plain,
   * as the connection's first frame; nothing else goes out until the
   * answer, which must come within `connectTimeout`.
   */
  #handshake() {
    const ws = this.#ws;
    const pin = this.#secure.pin;
    const pending = startHandshake(pin ? { serverKey: pin } : {});
    const id = this.#allocateId();
    this.#handshaking = { id, pending };
    const timeout = this.connectTimeout;
    if (timeout > 0 && timeout !== Infinity) {
      this.#timers.handshake = unref(setTimeout(() => {
        if (this.#handshaking?.id !== id || this.#ws !== ws) return;
        this.#lost(
          ws,
          { code: 1006, reason: "handshake timeout" },
          new TernioError("closed", `no answer to the secure HANDSHAKE within ${timeout} ms`, { timeout }),
          true
        );
      }, timeout));
    }
    this.#write(encodeFrame({ opcode: SystemOpcode.HANDSHAKE, requestId: id, body: pending.body }));
  }
  /**
   * The answer to `HANDSHAKE` (plain): the session's keys, then the
   * connection carries the new session. A refusal, or an answer that does
   * not complete the handshake, fails the connection: a secure client never
   * carries on in plain. On the first connection `connect()` rejects with a
   * `'handshake'` {@link TernioError}; later, it is a failed reconnect attempt.
   */
  #onHandshakeAnswer(frame) {
    clearTimeout(this.#timers.handshake ?? void 0);
    const { pending } = this.#handshaking;
    this.#handshaking = null;
    const pinned = this.#secure.pin !== null;
    if (frame.flags & Flags.ERROR) {
      pending.abandon();
      const refusal = remoteError(frame.body);
      const said = refusal.remoteMessage ?? refusal.message;
      const message = refusal.code === ErrorCode.HANDSHAKE_FAILED && pinned ? `the server refused the NK handshake (error 9): the pinned key is not this server's public key, or the server has no identity key; the server said: ${said}` : refusal.code === ErrorCode.HANDSHAKE_FAILED ? `the server refused the secure handshake (error 9): ${said}` : `the server answered the secure handshake with error ${refusal.code ?? "(none)"}: ${said}`;
      return this.#handshakeFailed(new TernioError("handshake", message, {
        code: refusal.code,
        remoteMessage: refusal.remoteMessage,
        cause: refusal
      }));
    }
    let channel;
    try {
      if (frame.opcode !== SystemOpcode.HANDSHAKE) throw new Error(`the server answered it with opcode ${hex(frame.opcode)}`);
      channel = pending.finish(frame.body, { rekeyPolicy: this.#rekey });
    } catch (error) {
      pending.abandon();
      return this.#handshakeFailed(new TernioError(
        "handshake",
        `the server's answer does not complete the secure handshake: ${error.message}`,
        { cause: error }
      ));
    }
    this.#install(channel);
    this.#open(false);
  }
  /** The handshake failed: the connection goes (nothing was sent on it but the handshake). */
  #handshakeFailed(error) {
    this.#lost(this.#ws, { code: 1006, reason: "handshake failed" }, error, true);
  }
  /** `channel` seals and opens the current connection's frames from now on, and its secret keys the next resumption. */
  #install(channel) {
    this.#channel = channel;
    if (this.#sessionSecret !== channel.sessionSecret) wipe(this.#sessionSecret);
    this.#sessionSecret = channel.sessionSecret;
  }
  /** Erases the current connection's keys and any handshake under way on it (the session's secret stays). */
  #dropSecure() {
    this.#handshaking?.pending.abandon();
    this.#handshaking = null;
    this.#resuming?.pending?.abandon();
    const channel = this.#channel;
    this.#channel = null;
    channel?.send.destroy();
    channel?.receive.destroy();
  }
  /**
   * The connection carries the session, `resumed` or new (then the client
   * asks for its ticket): start the keepalive, send what waits, tell.
   */
  #open(resumed) {
    const attempt = this.#attempt;
    const first = this.#state === "connecting";
    this.#state = "open";
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
    this.#emit({ state: "open", attempt });
    this.#flush();
  }
  /** Sends the requests that waited for a connection, in the order they were made. */
  #flush() {
    for (const entry of this.#pending.values()) {
      if (entry.sent) continue;
      if (this.#state !== "open") return;
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
   * @returns The error when the frame was not written.
   */
  #write(data, plain = data, record = true) {
    const ws = this.#ws;
    if (!ws) return new TernioError("closed", "the connection is not open (the client is reconnecting)");
    const buffered = ws.bufferedAmount ?? 0;
    if (buffered + data.length > this.maxBufferedBytes) {
      const error = new TernioError("closed", `outbound buffer full: ${buffered} bytes wait to be sent, ${data.length} more would pass the limit of ${this.maxBufferedBytes}`);
      this.#lost(ws, { code: 1006, reason: "outbound buffer full" }, error, true);
      return error;
    }
    this.#transmit(ws, data);
    if (record && this.#session && isCounted(opcodeOf(plain))) this.#session.record(plain);
    return null;
  }
  /** Sends `CANCEL` of request (or stream) `id` on the open connection. */
  #sendCancel(id) {
    return this.#write(encodeFrame({ opcode: SystemOpcode.CANCEL, body: u32.encode(id) }));
  }
  // ------------------------------------------------------------ resumption
  /** A new session: asks the server for its ticket; what is sent from now on is kept. */
  #askTicket() {
    const session = this.#session;
    if (!session) return;
    session.reset();
    this.#wakeRoomWaiters();
    const id = this.#allocateId();
    session.asked(id);
    const body = session.plainTicket ? void 0 : ASK_BOUND;
    this.#write(encodeFrame({ opcode: SystemOpcode.RESUME_TICKET, requestId: id, body }));
  }
  /**
   * The answer to `RESUME_TICKET`: counting starts; an error (no resumption
   * there) ends recording. `MALFORMED` to the request that asked for the
   * bound: a server older than that request; asked again without it.
   */
  #onTicket(frame) {
    const session = this.#session;
    const answer = frame.flags & Flags.ERROR ? null : parseTicket(frame.body);
    if (answer) return session.granted(answer);
    session.reset();
    this.#wakeRoomWaiters();
    if (frame.flags & Flags.ERROR && !session.plainTicket && codeAndText(frame.body)?.code === ErrorCode.MALFORMED) {
      session.plainTicket = true;
      this.#askTicket();
    }
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
    this.#resuming = { id, pending: null };
    const timeout = this.connectTimeout;
    if (timeout > 0 && timeout !== Infinity) {
      this.#timers.resume = unref(setTimeout(() => {
        if (this.#resuming?.id !== id) return;
        this.#lost(
          ws,
          { code: 1006, reason: "resume timeout" },
          new TernioError("closed", `no answer to RESUME within ${timeout} ms`, { timeout }),
          true
        );
      }, timeout));
    }
    const received = session.acks.take();
    let body;
    if (this.#secure) {
      const pending = startResume({
        ticket: session.ticket,
        received: BigInt(received),
        secure: { sessionSecret: this.#sessionSecret, serverKey: this.#secure.pin }
      });
      this.#resuming.pending = pending;
      body = pending.body;
    } else {
      body = resumeBody(session.ticket, received);
    }
    this.#write(encodeFrame({ opcode: SystemOpcode.RESUME, requestId: id, body }));
  }
  /**
   * The answer to `RESUME`. Refused: a new session on this connection.
   * Accepted: the new ticket, the server's count taken as an ACK, what it
   * lacks sent again, in order, before anything new.
   */
  #onResumed(frame) {
    clearTimeout(this.#timers.resume ?? void 0);
    const pending = this.#resuming.pending;
    this.#resuming = null;
    const session = this.#session;
    if (frame.flags & Flags.ERROR) {
      pending?.abandon();
      const refusal = remoteError(frame.body);
      this.#sessionLost(`the server refused to resume it: ${refusal.remoteMessage ?? refusal.message}`, refusal);
      return this.#start();
    }
    let answer;
    if (pending) {
      try {
        const resumed = pending.finish(frame.body, { rekeyPolicy: this.#rekey });
        answer = { received: Number(resumed.received), ticket: resumed.ticket, ttl: resumed.ttlMs };
        this.#install(resumed.channel);
      } catch (error) {
        pending.abandon();
        return this.#violation(`answer to a secure RESUME: ${error.message}`);
      }
    } else {
      const parsed = parseResumed(frame.body);
      if (!parsed) return this.#violation(`answer to RESUME of ${count(frame.body.length, "byte")}`);
      if (parsed.message.length) return this.#violation("a Noise message in the answer to a plain RESUME");
      answer = parsed;
    }
    const replay = session.replay;
    const lacking = replay.replayFrom(answer.received);
    if (!lacking || replay.acknowledge(answer.received)) {
      const reason = `the server received ${answer.received} frames: the client cannot replay from there`;
      const ws = this.#ws;
      this.#sendDisconnect(DisconnectReason.NORMAL, reason);
      this.#sessionLost(reason);
      return this.#lost(ws, { code: 1e3, reason: "" }, new TernioError("closed", `session lost: ${reason}`), true);
    }
    session.granted(answer);
    session.lostAt = null;
    session.resumptions++;
    this.#wakeRoomWaiters();
    for (const data of lacking) if (this.#write(data, data, false)) return;
    const cancelled = this.#cancelOnResume;
    this.#cancelOnResume = [];
    for (const id of cancelled) if (this.#sendCancel(id)) return;
    this.#emitSession({ session: "resumed", count: session.resumptions, attempt: this.#attempt });
    this.#open(true);
  }
  /**
   * The session could not be resumed: the requests in flight fail, the
   * application is told, and the next connection starts a new session.
   */
  #sessionLost(reason, cause) {
    const error = new TernioError("closed", `the session was lost (${reason}): the request was in flight (the server may or may not have run it); a new session starts`, cause ? { cause } : {});
    this.#failSent(() => error);
    this.#cancelOnResume = [];
    this.#session.reset();
    this.#wakeRoomWaiters();
    this.#emitSession({ session: "lost", reason, attempt: this.#attempt });
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
    session.ended ??= this.#disconnect ? `it was ended by the ${describe(this.#disconnect)}` : this.#violated ? "the server broke the protocol" : "the client's replay buffer overflowed";
    session.ticket = null;
    return false;
  }
  /** Counts a frame received (`frame`, decompressed); returns whether an `ACK` is due now. */
  #countReceived(frame) {
    const acks = this.#session?.acks;
    if (!acks || this.#resuming) return false;
    const answer = (frame.flags & Flags.RESPONSE) !== 0 && frame.requestId !== 0;
    const wasSoon = acks.dueSoon;
    const due = acks.received(HEADER_LEN + frame.body.length, !answer);
    if (due) return true;
    const soon = acks.dueSoon;
    if (!this.#timers.ack || soon && !wasSoon) {
      clearTimeout(this.#timers.ack ?? void 0);
      this.#timers.ack = unref(setTimeout(() => {
        this.#timers.ack = null;
        this.#sendAck();
      }, soon ? 0 : ACK_DELAY));
    }
    return false;
  }
  /** Sends `ACK` with the count of frames received, when some are unacknowledged. */
  #sendAck() {
    clearTimeout(this.#timers.ack ?? void 0);
    this.#timers.ack = null;
    const acks = this.#session?.acks;
    if (!acks?.hasUnacked || !this.isOpen) return;
    this.#write(encodeFrame({ opcode: SystemOpcode.ACK, body: u64.encode(BigInt(acks.take())) }));
  }
  /** The server's `ACK`: the frames it acknowledges leave the replay buffer. */
  #onAck(frame) {
    if (frame.requestId !== 0 || frame.flags & (Flags.RESPONSE | Flags.ERROR) || frame.body.length !== 8) {
      return this.#violation("malformed ACK");
    }
    const replay = this.#session?.replay;
    if (!replay) return;
    const received = Number(new DataView(frame.body.buffer, frame.body.byteOffset, 8).getBigUint64(0, true));
    const problem = replay.acknowledge(received);
    if (problem) return this.#violation(problem);
    this.#wakeRoomWaiters();
  }
  #emitSession(event) {
    if (typeof this.onSessionChange !== "function") return;
    try {
      this.onSessionChange(event);
    } catch (error) {
      this.#report(error);
    }
  }
  /** Stops the timers of the current connection. */
  #stopLinkTimers() {
    for (const key of ["connect", "keepalive", "healthy", "ack", "resume", "handshake"]) clearTimeout(this.#timers[key] ?? void 0);
    this.#timers.ack = null;
    this.#resuming?.pending?.abandon();
    this.#resuming = null;
    if (this.#keepalive) clearTimeout(this.#keepalive.timer ?? void 0);
    this.#keepalive = null;
  }
  /** Lets go of a WebSocket without waiting for its close handshake. */
  #abandon(ws) {
    this.#stopLinkTimers();
    if (this.#ws === ws) {
      this.#ws = null;
      this.#dropSecure();
    }
    ws.onopen = ws.onmessage = ws.onerror = ws.onclose = null;
    try {
      if (ws.readyState < 2) ws.close(1e3);
    } catch {
    }
  }
  /**
   * The current connection (or attempt) is gone: closed by either side,
   * failed, dead (keepalive) or overflowing. Requests sent on it fail at
   * once, unless the session can be resumed; then the client reconnects,
   * or closes for good.
   * @param ws The WebSocket (null when none was made).
   * @param how The close code and reason.
   * @param failure Why, when the close event does not say it.
   * @param local This side ended it.
   */
  #lost(ws, { code, reason }, failure, local = false) {
    if (ws) {
      if (ws !== this.#ws) return;
      this.#abandon(ws);
    }
    const disconnect = this.#disconnect;
    const info = { code, reason, disconnect, local: local || this.#closing || this.#violated };
    const error = failure ?? new TernioError(
      "closed",
      disconnect ? describe(disconnect) : `connection closed (WebSocket close code ${code})`,
      { disconnect }
    );
    if (this.#state === "connecting") {
      this.#connecting.reject(error);
      this.#connecting = null;
      return this.#finish(info, error);
    }
    const final = !this.#policy || this.#closing || disconnect && FINAL_REASONS.includes(disconnect.reason);
    if (final) return this.#finish(info, error);
    if (this.#keepsSession()) return this.#retry(info, error);
    const inFlight = new TernioError("closed", `${error.message}; the request was in flight (the server may or may not have run it), the client reconnects`, { disconnect, cause: error });
    this.#failSent(() => inFlight);
    this.#retry(info, error);
  }
  /** Schedules the next reconnect attempt, or gives up. */
  #retry(info, error) {
    const policy = this.#policy;
    const attempt = ++this.#attempt;
    if (attempt > policy.maxAttempts) {
      const gaveUp = new TernioError(
        "closed",
        `gave up reconnecting after ${count(policy.maxAttempts, "attempt")}: ${error.message}`,
        { disconnect: error.disconnect, cause: error }
      );
      return this.#finish(info, gaveUp);
    }
    const delay = retryDelay(policy, attempt, REFUSAL_REASONS.includes(error.disconnect?.reason ?? -1));
    this.#state = "reconnecting";
    this.#timers.retry = setTimeout(() => {
      this.#timers.retry = null;
      if (this.#state === "reconnecting" && !this.#closing) this.#dial();
    }, delay);
    this.#emit({ state: "reconnecting", attempt, delay, error });
  }
  /** Closes the client for good. */
  #finish(info, error) {
    if (this.#state === "closed") return;
    this.#state = "closed";
    this.#stopLinkTimers();
    this.#dropSecure();
    wipe(this.#sessionSecret);
    this.#sessionSecret = null;
    clearTimeout(this.#timers.retry ?? void 0);
    this.#failAll(() => error);
    this.#resolveClosed(info);
    this.#emit({ state: "closed", info, error });
  }
  #emit(event) {
    if (typeof this.onStateChange !== "function") return;
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
      this.#lost(
        ws,
        { code: 1006, reason: "keepalive timeout" },
        new TernioError("closed", `no PONG to the keepalive PING within ${timeout} ms: the connection is dead`, { timeout }),
        true
      );
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
    if (this.isOpen || canWait && this.#state === "reconnecting" && !this.#closing) return;
    const why = this.#state === "reconnecting" ? " (reconnecting)" : this.#disconnect ? `: ${describe(this.#disconnect)}` : "";
    throw new TernioError("closed", `not connected${why}`, { disconnect: this.#disconnect });
  }
  /** The opcode and body of an outgoing packet; throws when closed or when the value does not encode. */
  #outgoing(packetType, value, canWait) {
    this.#assertUsable(canWait);
    if (typeof packetType === "number") {
      return {
        opcode: checkOpcode(packetType),
        body: toBytes(value ?? new Uint8Array(0)),
        name: hex(packetType),
        compress: this.compress
      };
    }
    if (typeof packetType?.opcode !== "number") throw new TypeError("expects a packet type (from packet()) or an opcode");
    const compress = packetType.compress === false ? null : this.compress;
    return { opcode: packetType.opcode, body: packetType.encode(value), name: packetType.name, compress };
  }
  /**
   * Sends a request (or keeps it until a connection is up) and registers
   * what settles it; returns its id, or undefined when it was rejected at once.
   */
  #call({ opcode, body, name, compress }, timeout = this.timeout, decode, resolve, reject, onSent) {
    const requestId = this.#allocateId();
    const { data, plain } = encodeBoth({ opcode, requestId, body }, compress);
    const entry = { decode, resolve, reject, timer: null, data, plain, sent: false, onSent };
    if (this.#state === "open") {
      entry.sent = true;
      const error = this.#write(data, plain);
      if (error) {
        reject(error);
        return void 0;
      }
      onSent?.();
    } else if (this.#queuedBytes + data.length > this.maxBufferedBytes) {
      reject(new TernioError("closed", `reconnecting, and ${this.#queuedBytes} bytes of requests already wait for the new connection: ${data.length} more would pass the limit of ${this.maxBufferedBytes}`));
      return void 0;
    } else {
      this.#queuedBytes += data.length;
    }
    if (timeout > 0 && timeout !== Infinity) {
      entry.timer = setTimeout(() => {
        if (this.#pending.get(requestId) !== entry) return;
        const waited = entry.sent ? "" : " (it waited for a new connection)";
        this.#abortRequest(requestId, new TernioError("timeout", `no response to ${name} within ${timeout} ms${waited}`, { timeout }));
      }, timeout);
    }
    this.#pending.set(requestId, entry);
    return requestId;
  }
  /**
   * Gives up request `id` (its signal was aborted, or it timed out): rejects it with
   * `error` and, if it went out, cancels it on the server now or, when the
   * connection is down and the session may resume, once it does.
   */
  #abortRequest(id, error) {
    const entry = this.#take(id);
    if (!entry) return;
    if (entry.sent) {
      if (this.isOpen) this.#sendCancel(id);
      else if (this.#session?.resumable) this.#cancelOnResume.push(id);
    }
    entry.reject(error);
  }
  /** Removes a pending request and returns it. */
  #take(requestId) {
    const entry = this.#pending.get(requestId);
    if (!entry) return void 0;
    this.#pending.delete(requestId);
    clearTimeout(entry.timer ?? void 0);
    if (!entry.sent) this.#queuedBytes -= entry.data.length;
    return entry;
  }
  /** The next request id: counts up from 1, skips 0 and ids still in flight. */
  #allocateId() {
    for (; ; ) {
      const id = this.#nextId;
      this.#nextId = id === 4294967295 ? 1 : id + 1;
      const taken = this.#pending.has(id) || this.#streams.has(id) || this.#keepalive?.id === id || this.#session?.ticketId === id || this.#resuming?.id === id || this.#handshaking?.id === id;
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
    this.#transmit(this.#ws, encodeFrame({ opcode: SystemOpcode.DISCONNECT, body: codeAndTextBody(reason, message) }));
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
    }
  }
  /** The server broke the contract: DISCONNECT MALFORMED (or `disconnectReason`), then close (and reconnect, if the client does). */
  #violation(reason, disconnectReason = DisconnectReason.MALFORMED) {
    if (this.#closing || this.#violated) return;
    const ws = this.#ws;
    if (ws.readyState === OPEN) this.#sendDisconnect(disconnectReason, reason);
    this.#violated = true;
    const error = new TernioError("protocol", `server broke the protocol: ${reason}`);
    this.#failSent(() => error);
    if (this.#policy) return this.#lost(ws, { code: 1006, reason: "protocol violation" }, error, true);
    this.#failAll(() => error);
    this.#stopLinkTimers();
    ws.close(1e3);
  }
  /** Handles a frame received (decompressed). */
  #handle(frame) {
    if (frame.flags & Flags.RESPONSE) return this.#onResponse(frame);
    if (frame.requestId !== 0 && frame.flags & Flags.ERROR) {
      return this.#reply(frame, frame.opcode, Flags.ERROR, codeAndTextBody(ErrorCode.MALFORMED, "ERROR flag on a request"));
    }
    switch (frame.opcode) {
      case SystemOpcode.PING:
        if (frame.requestId === 0) return;
        if (frame.body.length !== 8) {
          return this.#reply(frame, frame.opcode, Flags.ERROR, codeAndTextBody(ErrorCode.MALFORMED, "PING body is not a u64"));
        }
        return this.#reply(frame, SystemOpcode.PONG, 0, frame.body);
      case SystemOpcode.DISCONNECT:
        return this.#onDisconnect(frame);
      case SystemOpcode.STREAM_ITEM:
      case SystemOpcode.STREAM_ITEMS:
      case SystemOpcode.STREAM_CREDIT:
      case SystemOpcode.STREAM_END:
        return this.#onStreamFrame(frame);
    }
    if (frame.requestId !== 0) {
      return this.#reply(frame, frame.opcode, Flags.ERROR, codeAndTextBody(ErrorCode.UNKNOWN_OPCODE, `no handler for opcode ${hex(frame.opcode)}`));
    }
    if (frame.opcode > 65279) return;
    this.#onPush(frame);
  }
  #onDisconnect(frame) {
    if (this.#disconnect) return;
    const disconnect = this.#parseDisconnect(frame);
    this.#disconnect = disconnect;
    const error = new TernioError("closed", describe(disconnect), { disconnect });
    if (this.#policy && !FINAL_REASONS.includes(disconnect.reason)) {
      return this.#lost(this.#ws, { code: 1e3, reason: "" }, error);
    }
    this.#failAll(() => error);
    this.#stopLinkTimers();
  }
  #onResponse(frame) {
    if (this.#resuming && frame.requestId === this.#resuming.id) return this.#onResumed(frame);
    if (this.#session?.ticketId != null && frame.requestId === this.#session.ticketId) return this.#onTicket(frame);
    if (this.#keepalive && frame.requestId === this.#keepalive.id) {
      clearTimeout(this.#keepalive.timer ?? void 0);
      this.#keepalive = null;
      return this.#startKeepalive(this.#ws);
    }
    const entry = this.#pending.get(frame.requestId);
    if (!entry || !entry.sent) {
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
  // ------------------------------------------------------------- streams
  /** What the streams of this client send through. */
  #streamLink = {
    send: (opcode, id, body) => {
      const frame = encodeFrame({ opcode, requestId: id, body });
      const session = this.#session;
      if (!this.isOpen && session?.lostAt != null && session.resumable) {
        session.record(frame);
        return;
      }
      const error = this.#write(frame);
      if (error) throw error;
    },
    cancel: (stream) => this.#cancelStream(stream),
    room: (stream, frameBytes) => {
      if (this.#session?.hasRoom(frameBytes) ?? true) return true;
      this.#roomWaiters.add(stream);
      return false;
    }
  };
  /** Wakes the uploads waiting for room in the replay buffer, to look again. */
  #wakeRoomWaiters() {
    if (this.#roomWaiters.size === 0) return;
    const waiting = [...this.#roomWaiters];
    this.#roomWaiters.clear();
    for (const stream of waiting) stream.wake();
  }
  /** A stream frame: an item of a download, credit for an upload (docs/PROTOCOL.md section 4.5). */
  #onStreamFrame(frame) {
    if (frame.requestId === 0) return this.#violation("a stream frame without a stream id");
    const stream = this.#streams.get(frame.requestId);
    if (frame.opcode === SystemOpcode.STREAM_ITEM) {
      if (!stream) return;
      if (stream.granted === 0) return this.#violation("a stream item beyond its credit");
      stream.granted--;
      stream.items.push(frame.body);
      return stream.wake();
    }
    if (frame.opcode === SystemOpcode.STREAM_ITEMS) {
      if (!stream) return;
      return this.#violation("STREAM_ITEMS on a stream that did not accept batches");
    }
    if (frame.opcode === SystemOpcode.STREAM_CREDIT) {
      const valid = frame.body.length === 4 || frame.body.length === 5 && frame.body[4] <= 1;
      if (!valid) return this.#violation("a STREAM_CREDIT body that is not 4 or 5 bytes");
      if (!stream) return;
      stream.credit += new DataView(frame.body.buffer, frame.body.byteOffset, 4).getUint32(0, true);
      return stream.wake();
    }
  }
  /**
   * Opens a stream: sends the request (no timeout: the answer ends the
   * stream) and registers its state; `signal` cancels it.
   */
  #openStream(packetType, value, signal) {
    if (!this.isOpen) this.#assertUsable(false);
    if (!this.isOpen) throw new TernioError("closed", "a stream needs an open connection (it does not wait for a new one)");
    const outgoing = this.#outgoing(packetType, value, false);
    if (signal?.aborted) throw abortedError(outgoing.name, signal);
    const stream = new StreamState(outgoing.name);
    const onAbort = () => this.#cancelStream(stream, abortedError(stream.name, signal));
    const resolve = (answer) => {
      stream.answer = answer;
      this.#endStream(stream);
    };
    const reject = (error) => {
      stream.error = error;
      this.#endStream(stream);
    };
    const id = this.#call(outgoing, 0, (frame) => frame, resolve, reject);
    if (id !== void 0) stream.id = id;
    if (id !== void 0 && !stream.ended) {
      this.#streams.set(id, stream);
      if (signal) {
        signal.addEventListener("abort", onAbort, { once: true });
        stream.release = () => signal.removeEventListener("abort", onAbort);
      }
    }
    return stream;
  }
  /**
   * Ends `stream`, however it ends (answered, failed, cancelled, its
   * signal aborted): its state dropped, its signal's listener removed (a
   * long-lived signal would otherwise keep one per stream), its reader or
   * uploader woken.
   */
  #endStream(stream) {
    stream.ended = true;
    this.#streams.delete(stream.id);
    this.#roomWaiters.delete(stream);
    stream.release?.();
    stream.release = null;
    stream.wake();
  }
  /** Gives up `stream`: CANCEL to the server, its state dropped; `error`, if any, is what its reader or uploader gets. */
  #cancelStream(stream, error) {
    if (stream.ended) return;
    if (error) stream.error = error;
    const entry = this.#take(stream.id);
    this.#endStream(stream);
    if (!entry) return;
    if (this.isOpen) this.#sendCancel(stream.id);
    else if (this.#session?.resumable) this.#cancelOnResume.push(stream.id);
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
        if (typeof result?.then === "function") result.then(void 0, (error) => this.#report(error));
      } catch (error) {
        this.#report(error);
      }
    }
  }
};
export {
  ACK_DELAY,
  ACK_EVERY_BYTES,
  ACK_EVERY_FRAMES,
  ACK_IDLE_BYTES,
  AckSchedule,
  Client,
  DEFAULT_MAX_FRAME_SIZE,
  DEFAULT_REPLAY_BYTES,
  DisconnectReason,
  ErrorCode,
  Flags,
  HEADER_LEN,
  Reader,
  ReplayBuffer,
  STREAM_INITIAL_CREDIT,
  SUBPROTOCOL,
  SystemOpcode,
  TernioError,
  Writer,
  array,
  bool,
  bytes,
  compressBody,
  decodeFrame,
  decompressBody,
  encodeFrame,
  enumType,
  f32,
  f64,
  i16,
  i32,
  i64,
  i8,
  lazy,
  lz4CompressBlock,
  lz4DecompressBlock,
  maybeCompress,
  opaque,
  option,
  packet,
  resumeBody,
  string,
  struct,
  u16,
  u32,
  u64,
  u8,
  unit,
  varint,
  vec
};
