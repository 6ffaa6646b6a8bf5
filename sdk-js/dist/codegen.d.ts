/**
 * The code generator behind `ternio-codegen`: from a server's schema
 * (docs/SCHEMA.md, `"schema": "ternio/1"`) to typed TypeScript (or
 * JavaScript and its `.d.ts`): for each struct and enum an interface (a
 * discriminated union for an enum) and its codec, for each packet a
 * {@link PacketType} whose type carries its response and stream items,
 * so that `client.request(Add, { a, b })` checks the value and resolves
 * to a `Sum`.
 * @module
 */
/** A type reference of the schema. */
export type SchemaTypeRef = string | {
    vec: SchemaTypeRef;
} | {
    option: SchemaTypeRef;
} | {
    array: SchemaTypeRef;
    len: number;
} | {
    ref: string;
} | {
    opaque: string;
};
/** A field of a struct or enum variant. */
export interface SchemaField {
    /** The Rust field name, or its position (`"0"`) in a tuple struct. */
    name: string;
    /** Its type. */
    type: SchemaTypeRef;
    /** A trailing optional field of an evolving packet. */
    optional: boolean;
}
/** A response: a packet, an acknowledgement, or a type the schema cannot see into. */
export type SchemaResponse = {
    packet: string;
} | 'ack' | {
    opaque: string;
} | null;
/** An entry of the schema's `packets`. */
export interface SchemaPacket {
    /** 0x0000..=0xFEFF. */
    opcode: number;
    /** Its name, also its key in the schema's `types`. */
    name: string;
    /** What its `#[packet(response = T)]` declares. */
    response: SchemaResponse;
    /** Declared as pushed by the server. */
    pushed: boolean;
    /** False: never sent compressed. */
    compress: boolean;
    /** May gain optional fields at its end. */
    evolving: boolean;
    /** Keys this generator does not read (`droppable`, `max_depth`, ...). */
    [key: string]: unknown;
}
/** An entry of the schema's `handlers`. */
export interface SchemaHandler {
    /** Its request's opcode. */
    opcode: number;
    /** `Controller::method`. */
    name: string;
    /** The name of its request packet. */
    request: string;
    /** What it answers with. */
    response: SchemaResponse;
    /** The items of the stream it answers with, if it does. */
    stream_item: SchemaTypeRef | null;
    /** The items of the upload it takes, if it does. */
    upload_item: SchemaTypeRef | null;
    /** Keys this generator does not read (`async`, `policies`, ...). */
    [key: string]: unknown;
}
/** An entry of the schema's `types`. */
export type SchemaType = {
    kind: 'struct';
    evolving?: boolean;
    fields: SchemaField[];
} | {
    kind: 'enum';
    variants: Array<{
        index: number;
        name: string;
        fields: SchemaField[];
    }>;
};
/** A schema document, `ternio/1`. */
export interface Schema {
    /** The format's version: `"ternio/1"`. */
    schema: string;
    /** Every packet, by opcode. */
    packets: SchemaPacket[];
    /** Every handler, by opcode. */
    handlers: SchemaHandler[];
    /** Every struct and enum (packets included), by name. */
    types: Record<string, SchemaType>;
}
/** Options of {@link generate}. */
export interface GenerateOptions {
    /** `'ts'`: one TypeScript module; `'js'`: an ES module and its declarations. */
    language?: 'ts' | 'js';
    /** Where the generated code imports the SDK from (default `'ternio'`). */
    importFrom?: string;
    /**
     * JavaScript only: where its `.d.ts` imports the SDK's types from, when
     * not from `importFrom` (a page that loads the bundle as `./ternio.js`
     * has no types there).
     */
    typesFrom?: string;
    /** The schema's file name, named in the header. */
    source?: string;
}
/** What {@link generate} returns: `code` (TypeScript or JavaScript) and, for JavaScript, `declarations`. */
export interface Generated {
    /** The module: TypeScript, or JavaScript. */
    code: string;
    /** For JavaScript: its `.d.ts`. */
    declarations?: string;
}
/** A problem with the schema: the generator cannot describe it. */
export declare class SchemaError extends Error {
    constructor(message: string);
}
/**
 * Generates the code of `schema`.
 * @throws {SchemaError} When the schema is not `ternio/1`, or holds what the SDK cannot code.
 */
export declare function generate(schema: Schema, options?: GenerateOptions): Generated;
