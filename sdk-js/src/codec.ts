/**
 * The field codec of section 3 of the contract: integers, floats, bool,
 * strings, bytes, vectors, options, arrays, structs, enums and packets
 * (structs with an opcode), each a {@link Type} that encodes and decodes
 * one value.
 * @module
 */

import { codecError, topLevel, within } from './errors.js';
import { count, hex, show } from './util.js';

/** A growing byte buffer that composite types append to. */
export class Writer {
  /** The bytes so far (and room for more). */
  buf: Uint8Array;
  /** A view of {@link Writer#buf}. */
  view: DataView;
  /** How many bytes of {@link Writer#buf} are written. */
  len: number;

  /** @param reserve Bytes left at the start, for a header written later. */
  constructor(reserve = 0) {
    this.buf = new Uint8Array(64 + reserve);
    this.view = new DataView(this.buf.buffer);
    this.len = reserve;
  }

  /** Makes room for `n` bytes and returns where they start. */
  take(n: number): number {
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
  put(bytes: Uint8Array): void {
    const at = this.take(bytes.length);
    this.buf.set(bytes, at);
  }

  /** The bytes written, as a copy. */
  finish(): Uint8Array {
    return this.buf.slice(0, this.len);
  }
}

/** A cursor over bytes that composite types read from. */
export class Reader {
  /** The bytes read. */
  readonly bytes: Uint8Array;
  /** A view of {@link Reader#bytes}. */
  readonly view: DataView;
  /** Where the next read starts. */
  pos: number;

  constructor(bytes: Uint8Array) {
    this.bytes = bytes;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.pos = 0;
  }

  /** Bytes not read yet. */
  get remaining(): number {
    return this.bytes.length - this.pos;
  }

  /** Consumes `n` bytes and returns where they start. */
  take(n: number): number {
    if (n > this.remaining) throw codecError(`needs ${count(n, 'more byte')}, ${this.remaining} left`);
    const at = this.pos;
    this.pos += n;
    return at;
  }
}

/** Bytes as a Uint8Array (a view, not a copy); anything else is a `'codec'` error. */
export function toBytes(data: unknown): Uint8Array {
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  throw codecError(`expects a Uint8Array or ArrayBuffer, got ${show(data)}`);
}

/**
 * A field type of section 3: how one value of `T` is written and read.
 * The exported constants and the results of {@link vec}, {@link option},
 * {@link array}, {@link struct}, {@link enumType}, {@link lazy} and
 * {@link packet} are types.
 */
export interface Type<T> {
  /** Its name in error messages. */
  readonly name: string;
  /** The fewest bytes one value takes. */
  readonly minSize: number;
  /** Appends a value (used by composite types). */
  write(w: Writer, value: T): void;
  /** Reads a value (used by composite types). */
  read(r: Reader): T;
  /** Encodes a value on its own (a whole body). */
  encode(value: T): Uint8Array;
  /** Decodes a whole body; trailing bytes are an error (but see evolving packets). */
  decode(bytes: Uint8Array | ArrayBuffer): T;
  /** The value a field of this type takes when an evolving packet's body ends before it. */
  defaultValue(): T;
}

/** The value type of a {@link Type}. */
export type ValueOf<X> = X extends Type<infer V> ? V : never;

/** Field names and types, in declaration order: an object, or `[name, type]` pairs. */
export type Fields = Record<string, Type<any>> | ReadonlyArray<readonly [string, Type<any>]>;

/** The value of a struct with fields `F` (any object for `[name, type]` pairs). */
export type StructValue<F> = F extends ReadonlyArray<unknown>
  ? Record<string, any>
  : { [K in keyof F]: ValueOf<F[K]> };

/** Makes a frozen {@link Type} from its name, size and functions. */
export function defineType<T, X extends object = object>(
  name: string,
  minSize: number,
  write: (w: Writer, value: T) => void,
  read: (r: Reader) => T,
  defaultValue: () => T,
  extra?: X,
): Type<T> & X {
  const type = {
    name, minSize, write, read, defaultValue, ...(extra as X),
    encode(value: T): Uint8Array {
      const w = new Writer();
      topLevel(type, () => write(w, value));
      return w.finish();
    },
    decode(data: Uint8Array | ArrayBuffer): T {
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

type IntSetter = 'setUint8' | 'setInt8' | 'setUint16' | 'setInt16' | 'setUint32' | 'setInt32';
type IntGetter = 'getUint8' | 'getInt8' | 'getUint16' | 'getInt16' | 'getUint32' | 'getInt32';

function integer(name: string, size: number, min: number, max: number, set: IntSetter, get: IntGetter): Type<number> {
  return defineType<number>(name, size, (w, v) => {
    if (!Number.isInteger(v) || v < min || v > max) {
      throw codecError(`${name} expects an integer in ${min}..=${max}, got ${show(v)}`);
    }
    const at = w.take(size);
    w.view[set](at, v, true);
  }, (r) => r.view[get](r.take(size), true), () => 0);
}

function bigInteger(name: string, min: bigint, max: bigint, set: 'setBigUint64' | 'setBigInt64',
  get: 'getBigUint64' | 'getBigInt64'): Type<bigint> {
  return defineType<bigint>(name, 8, (w, v) => {
    const ok = typeof v === 'bigint' || Number.isSafeInteger(v);
    if (!ok || BigInt(v) < min || BigInt(v) > max) {
      throw codecError(`${name} expects a BigInt (or safe integer) in ${min}..=${max}, got ${show(v)}`);
    }
    const at = w.take(8);
    w.view[set](at, BigInt(v), true);
  }, (r) => r.view[get](r.take(8), true), () => 0n);
}

function float(name: string, size: number, set: 'setFloat32' | 'setFloat64', get: 'getFloat32' | 'getFloat64'): Type<number> {
  return defineType<number>(name, size, (w, v) => {
    if (typeof v !== 'number') throw codecError(`${name} expects a number, got ${show(v)}`);
    const at = w.take(size);
    w.view[set](at, v, true);
  }, (r) => r.view[get](r.take(size), true), () => 0);
}

/** u8: one byte, 0..=255 (a number). */
export const u8: Type<number> = integer('u8', 1, 0, 0xff, 'setUint8', 'getUint8');
/** i8: one byte, -128..=127 (a number). */
export const i8: Type<number> = integer('i8', 1, -0x80, 0x7f, 'setInt8', 'getInt8');
/** u16: two bytes, little-endian (a number). */
export const u16: Type<number> = integer('u16', 2, 0, 0xffff, 'setUint16', 'getUint16');
/** i16: two bytes, little-endian (a number). */
export const i16: Type<number> = integer('i16', 2, -0x8000, 0x7fff, 'setInt16', 'getInt16');
/** u32: four bytes, little-endian (a number). */
export const u32: Type<number> = integer('u32', 4, 0, 0xffffffff, 'setUint32', 'getUint32');
/** i32: four bytes, little-endian (a number). */
export const i32: Type<number> = integer('i32', 4, -0x80000000, 0x7fffffff, 'setInt32', 'getInt32');
/** u64: eight bytes, little-endian; decodes to a BigInt, encodes a BigInt (or, untyped, a safe integer). */
export const u64: Type<bigint> = bigInteger('u64', 0n, 0xffffffffffffffffn, 'setBigUint64', 'getBigUint64');
/** i64: eight bytes, little-endian; decodes to a BigInt, encodes a BigInt (or, untyped, a safe integer). */
export const i64: Type<bigint> = bigInteger('i64', -(2n ** 63n), 2n ** 63n - 1n, 'setBigInt64', 'getBigInt64');
/** f32: IEEE 754 single precision (a number, rounded on encode). */
export const f32: Type<number> = float('f32', 4, 'setFloat32', 'getFloat32');
/** f64: IEEE 754 double precision (a number). */
export const f64: Type<number> = float('f64', 8, 'setFloat64', 'getFloat64');

/** bool: one byte, 0 or 1; any other byte does not decode. Encodes `true` or `false` only. */
export const bool: Type<boolean> = defineType<boolean>('bool', 1, (w, v) => {
  if (typeof v !== 'boolean') throw codecError(`bool expects true or false, got ${show(v)}`);
  w.buf[w.take(1)] = v ? 1 : 0;
}, (r) => {
  const byte = r.bytes[r.take(1)]!;
  if (byte > 1) throw codecError(`bool must be 0 or 1, got ${byte}`);
  return byte === 1;
}, () => false);

/** `()`: no bytes; decodes to `null`, encodes anything. */
export const unit: Type<null> = defineType<null>('unit', 0, () => {}, () => null, () => null);

function writeVarint(w: Writer, value: number): void {
  if (!Number.isInteger(value) || value < 0 || value > 0xffffffff) {
    throw codecError(`a length must be an integer in 0..=4294967295, got ${show(value)}`);
  }
  do {
    const low = value % 128;
    value = Math.floor(value / 128);
    w.buf[w.take(1)] = value > 0 ? low | 0x80 : low;
  } while (value > 0);
}

function readVarint(r: Reader): number {
  let value = 0;
  for (let i = 0; i < 5; i++) {
    const byte = r.bytes[r.take(1)]!;
    value += (byte & 0x7f) * 2 ** (7 * i);
    if ((byte & 0x80) === 0) {
      if (value > 0xffffffff) throw codecError(`varint ${value} is above u32::MAX`);
      return value;
    }
  }
  throw codecError('varint longer than 5 bytes');
}

/** A length prefix on its own: unsigned LEB128, at most 5 bytes, at most u32::MAX (a number). */
export const varint: Type<number> = defineType<number>('varint', 1, writeVarint, readVarint, () => 0);

/** Reads a byte length and checks it fits in what is left, before taking anything. */
function readLength(r: Reader): number {
  const len = readVarint(r);
  if (len > r.remaining) throw codecError(`length ${len} exceeds the ${count(r.remaining, 'byte')} left`);
  return len;
}

/** UTF-8 encoding of strings. */
export const utf8Encoder = new TextEncoder();
const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** String: varint byte length, then UTF-8. Invalid UTF-8 does not decode; lone surrogates do not encode. */
export const string: Type<string> = defineType<string>('string', 1, (w, v) => {
  if (typeof v !== 'string') throw codecError(`string expects a string, got ${show(v)}`);
  const wellFormed = (v as { isWellFormed?: () => boolean }).isWellFormed;
  if (typeof wellFormed === 'function' && !wellFormed.call(v)) {
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
}, () => '');

/** Bytes (`Bytes`, `Vec<u8>`): varint length, then the bytes. Decodes to a Uint8Array (a copy). */
export const bytes: Type<Uint8Array> = defineType<Uint8Array>('bytes', 1, (w, v) => {
  const data = toBytes(v);
  writeVarint(w, data.length);
  w.put(data);
}, (r) => {
  const len = readLength(r);
  const at = r.take(len);
  return r.bytes.slice(at, at + len);
}, () => new Uint8Array(0));

/** Throws a TypeError unless `type` is a {@link Type}. */
export function checkType<T>(type: Type<T>, where: string): Type<T> {
  if (!type || typeof type.write !== 'function' || typeof type.read !== 'function') {
    throw new TypeError(`${where} is not a Ternio type (u8, string, struct(...), ...)`);
  }
  return type;
}

function elements<T>(name: string, v: unknown): ArrayLike<T> {
  if (Array.isArray(v) || (ArrayBuffer.isView(v) && !(v instanceof DataView))) return v as unknown as ArrayLike<T>;
  throw codecError(`${name} expects an array, got ${show(v)}`);
}

/** Vec<T>: varint element count, then each element. Decodes to an Array. */
export function vec<T>(type: Type<T>): Type<T[]> {
  checkType(type, 'vec() element');
  const name = `vec<${type.name}>`;
  return defineType<T[]>(name, 1, (w, v) => {
    const items = elements<T>(name, v);
    writeVarint(w, items.length);
    for (let i = 0; i < items.length; i++) within(i, () => type.write(w, items[i]!));
  }, (r) => {
    const n = readVarint(r);
    const fits = type.minSize === 0 ? n <= 65536 : n <= Math.floor(r.remaining / type.minSize);
    if (!fits) throw codecError(`count ${n} of ${type.name} exceeds what the ${count(r.remaining, 'byte')} left can hold`);
    const out: T[] = [];
    for (let i = 0; i < n; i++) out.push(within(i, () => type.read(r)));
    return out;
  }, () => []);
}

/** Option<T>: byte 0 (none: `null`, or `undefined` on encode) or byte 1 followed by T. */
export function option<T>(type: Type<T>): Type<T | null> {
  checkType(type, 'option() inner');
  return defineType<T | null>(`option<${type.name}>`, 1, (w, v) => {
    const some = v !== null && v !== undefined;
    w.buf[w.take(1)] = some ? 1 : 0;
    if (some) type.write(w, v);
  }, (r) => {
    const tag = r.bytes[r.take(1)]!;
    if (tag > 1) throw codecError(`option tag must be 0 or 1, got ${tag}`);
    return tag === 1 ? type.read(r) : null;
  }, () => null);
}

/** [T; N]: exactly N elements, no count. Decodes to an Array. */
export function array<T>(type: Type<T>, length: number): Type<T[]> {
  checkType(type, 'array() element');
  if (!Number.isInteger(length) || length < 0) throw new TypeError(`array() length must be a count, got ${length}`);
  const name = `[${type.name}; ${length}]`;
  return defineType<T[]>(name, type.minSize * length, (w, v) => {
    const items = elements<T>(name, v);
    if (items.length !== length) throw codecError(`${name} expects ${length} elements, got ${items.length}`);
    for (let i = 0; i < length; i++) within(i, () => type.write(w, items[i]!));
  }, (r) => {
    const out: T[] = [];
    for (let i = 0; i < length; i++) out.push(within(i, () => type.read(r)));
    return out;
  }, () => Array.from({ length }, () => type.defaultValue()));
}

/**
 * A type defined later, for recursive types: `get` is called on first use.
 * Its `minSize` is 0 (a vector of it is bounded by count, not by bytes).
 * @example const Tree = struct({ value: u32, children: vec(lazy(() => Tree, 'Tree')) }, 'Tree');
 */
export function lazy<T>(get: () => Type<T>, name = 'lazy'): Type<T> {
  let resolved: Type<T> | null = null;
  const target = (): Type<T> => (resolved ??= checkType(get(), `lazy(${name})`));
  return defineType<T>(name, 0, (w, v) => target().write(w, v), (r) => target().read(r), () => target().defaultValue());
}

/**
 * A type the schema cannot see into (a hand-written Rust `Encode`): it
 * neither encodes nor decodes; declare the packet by hand to use it.
 */
export function opaque(rustName: string): Type<never> {
  const refuse = (): never => {
    throw codecError(`${rustName} has a hand-written encoding the schema does not describe`);
  };
  return defineType<never>(rustName, 0, refuse, refuse, refuse);
}

type Entry = readonly [string, Type<any>];

/** The [name, type] pairs of a field list, in declaration order. */
function fieldsOf(fields: Fields | null | undefined, owner: string): Entry[] {
  if (Array.isArray(fields)) {
    for (const [key, type] of fields as Entry[]) checkType(type, `${owner} field ${key}`);
    return fields as Entry[];
  }
  const entries = Object.entries(fields ?? {}) as Entry[];
  const numeric = entries.filter(([key]) => /^\d+$/.test(key)).length;
  if (numeric && numeric !== entries.length) {
    // JavaScript lists integer-like keys first: the order would not be the declared one.
    throw new TypeError(`${owner}: mixes numeric and named fields; pass [name, type] pairs instead`);
  }
  for (const [key, type] of entries) checkType(type, `${owner} field ${key}`);
  return entries;
}

function writeFields(entries: Entry[], w: Writer, v: unknown, name: string): void {
  if (v === null || typeof v !== 'object') throw codecError(`${name} expects an object, got ${show(v)}`);
  const value = v as Record<string, unknown>;
  for (const [key, type] of entries) within(key, () => type.write(w, value[key]));
}

function readFields<T extends Record<string, unknown>>(entries: Entry[], r: Reader, out: T): T {
  for (const [key, type] of entries) (out as Record<string, unknown>)[key] = within(key, () => type.read(r));
  return out;
}

function defaults<T extends Record<string, unknown>>(entries: Entry[], out: T): T {
  for (const [key, type] of entries) (out as Record<string, unknown>)[key] = type.defaultValue();
  return out;
}

/**
 * A struct: its fields in declaration order, no tags, no padding. Decodes
 * to a plain object with those keys.
 * @param fields Field names and types, in order.
 * @param name Its name in error messages.
 * @example const Point = struct({ x: i16, y: i16 }, 'Point');
 */
export function struct<F extends Fields>(fields: F, name = 'struct'): Type<StructValue<F>> {
  const entries = fieldsOf(fields, name);
  const minSize = entries.reduce((sum, [, type]) => sum + type.minSize, 0);
  return defineType<StructValue<F>>(name, minSize, (w, v) => writeFields(entries, w, v, name),
    (r) => readFields(entries, r, {}) as StructValue<F>, () => defaults(entries, {}) as StructValue<F>);
}

/**
 * An enum: a u8 variant index (declaration order), then the variant's
 * fields. A value is an object whose `variant` key names the variant, with
 * the variant's fields beside it: `{ variant: 'Move', x: 3, y: -4 }`. Its
 * default (an evolving packet's missing field) is its first variant, which
 * must have no fields.
 * @param variants Variant names, in declaration order, each with its fields (`null` or `{}` for none).
 * @param name Its name in error messages.
 * @example const Kind = enumType({ Stop: null, Move: { x: i16, y: i16 } }, 'Kind');
 */
export function enumType<T extends { variant: string } = { variant: string } & Record<string, any>>(
  variants: Record<string, Fields | null>, name = 'enum'): Type<T> {
  const list = Object.entries(variants).map(([variant, fields]) => {
    const entries = fieldsOf(fields, `${name}::${variant}`);
    if (entries.some(([key]) => key === 'variant')) {
      throw new TypeError(`${name}::${variant}: a field may not be called "variant"`);
    }
    return [variant, entries] as const;
  });
  if (list.length === 0 || list.length > 256) throw new TypeError(`${name}: needs 1 to 256 variants`);
  return defineType<T>(name, 1, (w, v) => {
    const index = list.findIndex(([variant]) => variant === (v as { variant?: unknown } | null)?.variant);
    if (index < 0) {
      throw codecError(`${name} expects { variant: ${list.map(([n]) => JSON.stringify(n)).join(' | ')}, ... }, `
        + `got variant ${show((v as { variant?: unknown } | null)?.variant)}`);
    }
    w.buf[w.take(1)] = index;
    writeFields(list[index]![1], w, v, name);
  }, (r) => {
    const index = r.bytes[r.take(1)]!;
    if (index >= list.length) throw codecError(`variant index ${index} out of range (${list.length} variants)`);
    const [variant, entries] = list[index]!;
    return readFields(entries, r, { variant }) as unknown as T;
  }, () => {
    const [variant, entries] = list[0]!;
    if (entries.length) throw codecError(`${name} has no default: its first variant ${variant} has fields`);
    return { variant } as unknown as T;
  });
}

/** Throws a TypeError unless `opcode` is an integer in `0..=max`. */
export function checkOpcode(opcode: unknown, what = 'an application opcode', max = 0xfeff): number {
  if (typeof opcode !== 'number' || !Number.isInteger(opcode) || opcode < 0 || opcode > max) {
    throw new TypeError(`${show(opcode)} is not ${what} (0x0000..=${hex(max)})`);
  }
  return opcode;
}

/**
 * A packet type: a struct of type `T` with an application opcode, whose
 * requests are answered with `R` and whose stream (download or upload)
 * carries items of `I`. Use it with {@link Client#request}, {@link Client#send}
 * and {@link Client#on}, or as a field of another type (a nested packet
 * encodes as its fields).
 */
export interface PacketType<T, R = unknown, I = unknown> extends Type<T> {
  /** Its opcode, 0x0000..=0xFEFF. */
  readonly opcode: number;
  /** The packet type the server answers with, when it is not this one. */
  readonly response: PacketType<R, any, any> | undefined;
  /** False: never sent compressed. */
  readonly compress: boolean;
  /** The type of the items of its stream (a download's or an upload's). */
  readonly item: Type<I> | undefined;
  /** Whether it is evolving (docs/PROTOCOL.md section 3.1): see {@link PacketOptions#evolving}. */
  readonly evolving: boolean;
  /**
   * Type-level only, never set: what its requests resolve to (`R`) and
   * its stream's items (`I`), for `request`, `requestStream` and `upload`.
   */
  readonly __types?: { response: R; item: I };
}

/** The options of {@link packet}. */
export interface PacketOptions<R = unknown, I = unknown> {
  /** Its name in messages (default: `packet 0x0010`). */
  name?: string;
  /** The packet type the server answers with, when it is not this one. */
  response?: PacketType<R, any, any>;
  /**
   * `false`: never sent compressed, even by a client with the option
   * `compress` (for a packet that mixes secrets with what others choose:
   * compression leaks their length, as in CRIME).
   */
  compress?: boolean;
  /** The type of the items of its stream: what a download yields, or what an upload sends. */
  item?: Type<I>;
  /**
   * An evolving packet (docs/PROTOCOL.md section 3.1): as a whole body,
   * bytes after its last field are ignored, and a body that ends at a field
   * boundary before one of its last `optional` fields decodes that field and
   * those after it as their defaults. Nested in another type, it is a plain
   * struct.
   */
  evolving?: boolean;
  /** With `evolving`: how many of its last fields are optional (default 0). */
  optional?: number;
}

/**
 * What a request of a packet declared without `response` resolves to: its
 * own type, or `undefined` for an acknowledgement. An annotation narrows it
 * (`const Say: PacketType<Say, undefined> = packet(...)`), as generated code does.
 */
export type SelfResponse<T> = T | undefined;

/**
 * Declares a packet type: its opcode, its fields in order, and options.
 * @param opcode 0x0000..=0xFEFF.
 * @param fields Field names and types, in order.
 * @param options Its name, response, compression, stream item and evolution.
 * @example const Add = packet(0x0010, { a: i64, b: i64 }, { name: 'Add', response: Sum });
 */
export function packet<F extends Fields, R, I = unknown>(opcode: number, fields: F,
  options: PacketOptions<R, I> & { response: PacketType<R, any, any> }): PacketType<StructValue<F>, R, I>;
export function packet<F extends Fields, R = SelfResponse<StructValue<F>>, I = unknown>(opcode: number, fields: F,
  options?: PacketOptions<never, I>): PacketType<StructValue<F>, R, I>;
export function packet(opcode: number, fields: Fields, options: PacketOptions<any, any> = {}): PacketType<any, any, any> {
  checkOpcode(opcode);
  const name = options.name ?? `packet ${hex(opcode)}`;
  const base = struct(fields, name);
  if (options.response !== undefined) checkOpcode(options.response?.opcode, `${name}'s response packet type`);
  const compress = options.compress ?? true;
  if (typeof compress !== 'boolean') throw new TypeError(`${name}: compress must be true or false, got ${show(compress)}`);
  if (options.item !== undefined && typeof options.item?.decode !== 'function') {
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
  /** A whole body: cut short at a field boundary among the optional fields, or extended. */
  const decode = (data: Uint8Array | ArrayBuffer): unknown => topLevel(type, () => {
    const r = new Reader(toBytes(data));
    const out: Record<string, unknown> = {};
    entries.forEach(([key, field], i) => {
      out[key] = i >= required && r.remaining === 0 ? field.defaultValue() : within(key, () => field.read(r));
    });
    return out;
  });
  return Object.freeze({ ...type, decode });
}

