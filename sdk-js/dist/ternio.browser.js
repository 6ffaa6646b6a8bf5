// The Ternio browser SDK, dist/ternio.browser.js, built from sdk-js/src by `npm run build`.
// One ES module, no dependency; the package's README documents it. Licence: MIT OR Apache-2.0.

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
  STREAM_END: 65295
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
  /** `'remote'`: the error code (see {@link ErrorCode}). */
  code;
  /** `'remote'`: the server's message, as sent. */
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
var ACK_EVERY_FRAMES = 128;
var ACK_EVERY_BYTES = 16 * 1024;
var ACK_DELAY = 200;
var TICKET_LEN = 32;
var PLAIN_PATTERN = 0;
var isCounted = (opcode) => opcode <= 65279;
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
  constructor({ frames = ACK_EVERY_FRAMES, bytes: bytes2 = ACK_EVERY_BYTES } = {}) {
    this.everyFrames = frames;
    this.everyBytes = bytes2;
  }
  /**
   * Counts a frame received of `size` bytes (header and plain body).
   * @returns Whether an ACK is due now.
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
};
function resumeBody(ticket, received) {
  const out = new Uint8Array(TICKET_LEN + 9);
  out.set(ticket, 0);
  new DataView(out.buffer).setBigUint64(TICKET_LEN, BigInt(received), true);
  out[TICKET_LEN + 8] = PLAIN_PATTERN;
  return out;
}
function parseTicket(body) {
  if (body.length !== TICKET_LEN + 4) return null;
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  return { ticket: body.slice(0, TICKET_LEN), ttl: view.getUint32(TICKET_LEN, true) };
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
      while (!stream.ended && stream.credit === 0) await stream.wait();
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

// src/client.ts
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
  /**
   * Ids to `CANCEL` once the session resumes: streams a lost connection
   * failed, and requests aborted while it was down.
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
    resume: null
  };
  /** Resumption's state (section 4.2); null when the client does not resume sessions. */
  #session = null;
  /** The `RESUME` waiting for its answer on the current connection. */
  #resuming = null;
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
   * error from the server (`'remote'`) or a lost connection (`'closed'`:
   * streams do not survive a reconnection) is thrown by the iteration.
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
   * item is on its way, waiting for credit from the server; `finish()`
   * ends the upload and resolves with the server's answer; `fail(code,
   * message)` ends it as failed; `cancel()` (or aborting `options.signal`)
   * sends `CANCEL`. If the server answers before the upload ended, `send`
   * rejects (`'closed'`, with `answered: true`) and `finish()` gives that answer.
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
   * passes here, and only here. A secure session seals it here.
   */
  #transmit(ws, frame) {
    ws.send(frame);
  }
  /**
   * One WebSocket message from the server: every frame the client receives
   * starts here. A secure session opens it here, before it is handled.
   */
  #onMessage(data) {
    if (this.#closing || this.#violated) return;
    if (typeof data === "string") return this.#violation("text message");
    let frame;
    try {
      frame = decodeFrame(data instanceof ArrayBuffer ? new Uint8Array(data) : data);
    } catch (error) {
      return this.#violation(error.message);
    }
    if (frame.flags & Flags.ENCRYPTED) return this.#violation("sealed frame without a secure session");
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
  /** The WebSocket opened: resume the session on it, or start a new one. */
  #up() {
    clearTimeout(this.#timers.connect ?? void 0);
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
    const id = this.#allocateId();
    session.asked(id);
    this.#write(encodeFrame({ opcode: SystemOpcode.RESUME_TICKET, requestId: id }));
  }
  /** The answer to `RESUME_TICKET`: counting starts; an error (no resumption there) ends recording. */
  #onTicket(frame) {
    const session = this.#session;
    const answer = frame.flags & Flags.ERROR ? null : parseTicket(frame.body);
    if (answer) session.granted(answer);
    else session.reset();
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
        this.#lost(
          ws,
          { code: 1006, reason: "resume timeout" },
          new TernioError("closed", `no answer to RESUME within ${timeout} ms`, { timeout }),
          true
        );
      }, timeout));
    }
    const body = resumeBody(session.ticket, session.acks.take());
    this.#write(encodeFrame({ opcode: SystemOpcode.RESUME, requestId: id, body }));
  }
  /**
   * The answer to `RESUME`. Refused: a new session on this connection.
   * Accepted: the new ticket, the server's count taken as an ACK, what it
   * lacks sent again, in order, before anything new.
   */
  #onResumed(frame) {
    clearTimeout(this.#timers.resume ?? void 0);
    this.#resuming = null;
    const session = this.#session;
    if (frame.flags & Flags.ERROR) {
      const refusal = remoteError(frame.body);
      this.#sessionLost(`the server refused to resume it: ${refusal.remoteMessage ?? refusal.message}`, refusal);
      return this.#open(false);
    }
    const answer = parseResumed(frame.body);
    if (!answer) return this.#violation(`answer to RESUME of ${count(frame.body.length, "byte")}`);
    if (answer.message.length) return this.#violation("a Noise message in the answer to a plain RESUME");
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
    if (problem) this.#violation(problem);
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
    for (const key of ["connect", "keepalive", "healthy", "ack", "resume"]) clearTimeout(this.#timers[key] ?? void 0);
    this.#timers.ack = null;
    this.#resuming = null;
    if (this.#keepalive) clearTimeout(this.#keepalive.timer ?? void 0);
    this.#keepalive = null;
  }
  /** Lets go of a WebSocket without waiting for its close handshake. */
  #abandon(ws) {
    this.#stopLinkTimers();
    if (this.#ws === ws) this.#ws = null;
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
    if (this.#keepsSession()) {
      this.#failStreams(error);
      return this.#retry(info, error);
    }
    const inFlight = new TernioError("closed", `${error.message}; the request was in flight (the server may or may not have run it), the client reconnects`, { disconnect, cause: error });
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
    const failed = new TernioError(
      "closed",
      `${error.message}; streams do not survive a reconnection`,
      { disconnect: error.disconnect, cause: error }
    );
    for (const stream of streams) {
      const entry = this.#take(stream.id);
      if (!entry) continue;
      this.#cancelOnResume.push(stream.id);
      entry.reject(failed);
    }
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
        if (this.#take(requestId) !== entry) return;
        const waited = entry.sent ? "" : " (it waited for a new connection)";
        reject(new TernioError("timeout", `no response to ${name} within ${timeout} ms${waited}`, { timeout }));
      }, timeout);
    }
    this.#pending.set(requestId, entry);
    return requestId;
  }
  /**
   * Gives up request `id` (its signal was aborted): rejects it with
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
      const taken = this.#pending.has(id) || this.#streams.has(id) || this.#keepalive?.id === id || this.#session?.ticketId === id || this.#resuming?.id === id;
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
    const parsed = codeAndText(frame.body) ?? { code: DisconnectReason.MALFORMED, text: "unreadable DISCONNECT" };
    const disconnect = { reason: parsed.code, reasonName: nameIn(DisconnectReason, parsed.code) ?? "UNKNOWN", message: parsed.text };
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
      const error = this.#write(encodeFrame({ opcode, requestId: id, body }));
      if (error) throw error;
    },
    cancel: (stream) => this.#cancelStream(stream)
  };
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
    if (frame.opcode === SystemOpcode.STREAM_CREDIT) {
      if (frame.body.length !== 4) return this.#violation("a STREAM_CREDIT body that is not 4 bytes");
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
    const done = () => {
      stream.ended = true;
      this.#streams.delete(stream.id);
      signal?.removeEventListener("abort", onAbort);
      stream.wake();
    };
    const resolve = (answer) => {
      stream.answer = answer;
      done();
    };
    const reject = (error) => {
      stream.error = error;
      done();
    };
    const id = this.#call(outgoing, 0, (frame) => frame, resolve, reject);
    if (id !== void 0) stream.id = id;
    if (id !== void 0 && !stream.ended) {
      this.#streams.set(id, stream);
      signal?.addEventListener("abort", onAbort, { once: true });
    }
    return stream;
  }
  /** Gives up `stream`: CANCEL to the server, its state dropped; `error`, if any, is what its reader or uploader gets. */
  #cancelStream(stream, error) {
    if (stream.ended) return;
    stream.ended = true;
    if (error) stream.error = error;
    this.#streams.delete(stream.id);
    if (this.#take(stream.id) && this.isOpen) this.#sendCancel(stream.id);
    stream.wake();
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
