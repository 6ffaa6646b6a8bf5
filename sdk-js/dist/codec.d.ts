/**
 * The field codec of section 3 of the contract: integers, floats, bool,
 * strings, bytes, vectors, options, arrays, structs, enums and packets
 * (structs with an opcode), each a {@link Type} that encodes and decodes
 * one value.
 * @module
 */
/** A growing byte buffer that composite types append to. */
export declare class Writer {
    /** The bytes so far (and room for more). */
    buf: Uint8Array;
    /** A view of {@link Writer#buf}. */
    view: DataView;
    /** How many bytes of {@link Writer#buf} are written. */
    len: number;
    /** @param reserve Bytes left at the start, for a header written later. */
    constructor(reserve?: number);
    /** Makes room for `n` bytes and returns where they start. */
    take(n: number): number;
    /** Appends `bytes`. */
    put(bytes: Uint8Array): void;
    /** The bytes written, as a copy. */
    finish(): Uint8Array;
}
/** A cursor over bytes that composite types read from. */
export declare class Reader {
    /** The bytes read. */
    readonly bytes: Uint8Array;
    /** A view of {@link Reader#bytes}. */
    readonly view: DataView;
    /** Where the next read starts. */
    pos: number;
    constructor(bytes: Uint8Array);
    /** Bytes not read yet. */
    get remaining(): number;
    /** Consumes `n` bytes and returns where they start. */
    take(n: number): number;
}
/** Bytes as a Uint8Array (a view, not a copy); anything else is a `'codec'` error. */
export declare function toBytes(data: unknown): Uint8Array;
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
export type StructValue<F> = F extends ReadonlyArray<unknown> ? Record<string, any> : {
    [K in keyof F]: ValueOf<F[K]>;
};
/** Makes a frozen {@link Type} from its name, size and functions. */
export declare function defineType<T, X extends object = object>(name: string, minSize: number, write: (w: Writer, value: T) => void, read: (r: Reader) => T, defaultValue: () => T, extra?: X): Type<T> & X;
/** u8: one byte, 0..=255 (a number). */
export declare const u8: Type<number>;
/** i8: one byte, -128..=127 (a number). */
export declare const i8: Type<number>;
/** u16: two bytes, little-endian (a number). */
export declare const u16: Type<number>;
/** i16: two bytes, little-endian (a number). */
export declare const i16: Type<number>;
/** u32: four bytes, little-endian (a number). */
export declare const u32: Type<number>;
/** i32: four bytes, little-endian (a number). */
export declare const i32: Type<number>;
/** u64: eight bytes, little-endian; decodes to a BigInt, encodes a BigInt (or, untyped, a safe integer). */
export declare const u64: Type<bigint>;
/** i64: eight bytes, little-endian; decodes to a BigInt, encodes a BigInt (or, untyped, a safe integer). */
export declare const i64: Type<bigint>;
/** f32: IEEE 754 single precision (a number, rounded on encode). */
export declare const f32: Type<number>;
/** f64: IEEE 754 double precision (a number). */
export declare const f64: Type<number>;
/** bool: one byte, 0 or 1; any other byte does not decode. Encodes `true` or `false` only. */
export declare const bool: Type<boolean>;
/** `()`: no bytes; decodes to `null`, encodes anything. */
export declare const unit: Type<null>;
/** A length prefix on its own: unsigned LEB128, at most 5 bytes, at most u32::MAX (a number). */
export declare const varint: Type<number>;
/** UTF-8 encoding of strings. */
export declare const utf8Encoder: TextEncoder;
/** String: varint byte length, then UTF-8. Invalid UTF-8 does not decode; lone surrogates do not encode. */
export declare const string: Type<string>;
/** Bytes (`Bytes`, `Vec<u8>`): varint length, then the bytes. Decodes to a Uint8Array (a copy). */
export declare const bytes: Type<Uint8Array>;
/** Throws a TypeError unless `type` is a {@link Type}. */
export declare function checkType<T>(type: Type<T>, where: string): Type<T>;
/** Vec<T>: varint element count, then each element. Decodes to an Array. */
export declare function vec<T>(type: Type<T>): Type<T[]>;
/** Option<T>: byte 0 (none: `null`, or `undefined` on encode) or byte 1 followed by T. */
export declare function option<T>(type: Type<T>): Type<T | null>;
/** [T; N]: exactly N elements, no count. Decodes to an Array. */
export declare function array<T>(type: Type<T>, length: number): Type<T[]>;
/**
 * A type defined later, for recursive types: `get` is called on first use.
 * Its `minSize` is 0 (a vector of it is bounded by count, not by bytes).
 * @example const Tree = struct({ value: u32, children: vec(lazy(() => Tree, 'Tree')) }, 'Tree');
 */
export declare function lazy<T>(get: () => Type<T>, name?: string): Type<T>;
/**
 * A type the schema cannot see into (a hand-written Rust `Encode`): it
 * neither encodes nor decodes; declare the packet by hand to use it.
 */
export declare function opaque(rustName: string): Type<never>;
/**
 * A struct: its fields in declaration order, no tags, no padding. Decodes
 * to a plain object with those keys.
 * @param fields Field names and types, in order.
 * @param name Its name in error messages.
 * @example const Point = struct({ x: i16, y: i16 }, 'Point');
 */
export declare function struct<F extends Fields>(fields: F, name?: string): Type<StructValue<F>>;
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
export declare function enumType<T extends {
    variant: string;
} = {
    variant: string;
} & Record<string, any>>(variants: Record<string, Fields | null>, name?: string): Type<T>;
/** Throws a TypeError unless `opcode` is an integer in `0..=max`. */
export declare function checkOpcode(opcode: unknown, what?: string, max?: number): number;
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
    readonly __types?: {
        response: R;
        item: I;
    };
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
export declare function packet<F extends Fields, R, I = unknown>(opcode: number, fields: F, options: PacketOptions<R, I> & {
    response: PacketType<R, any, any>;
}): PacketType<StructValue<F>, R, I>;
export declare function packet<F extends Fields, R = SelfResponse<StructValue<F>>, I = unknown>(opcode: number, fields: F, options?: PacketOptions<never, I>): PacketType<StructValue<F>, R, I>;
