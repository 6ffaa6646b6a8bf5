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
const PRIMITIVES = {
    u8: ['u8', 'number'], i8: ['i8', 'number'], u16: ['u16', 'number'], i16: ['i16', 'number'],
    u32: ['u32', 'number'], i32: ['i32', 'number'], u64: ['u64', 'bigint'], i64: ['i64', 'bigint'],
    f32: ['f32', 'number'], f64: ['f64', 'number'], bool: ['bool', 'boolean'], string: ['string', 'string'],
    bytes: ['bytes', 'Uint8Array'], unit: ['unit', 'null'],
};
const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
/** The namespace the generated code imports the SDK as. */
const NS = 'ternio';
/** A problem with the schema: the generator cannot describe it. */
export class SchemaError extends Error {
    constructor(message) {
        super(message);
        this.name = 'SchemaError';
    }
}
const hex = (opcode) => `0x${opcode.toString(16).padStart(4, '0').toUpperCase()}`;
const key = (name) => (IDENTIFIER.test(name) ? name : `'${name}'`);
const quote = (text) => `'${text.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
/**
 * Generates the code of `schema`.
 * @throws {SchemaError} When the schema is not `ternio/1`, or holds what the SDK cannot code.
 */
export function generate(schema, options = {}) {
    if (schema?.schema !== 'ternio/1')
        throw new SchemaError(`not a ternio/1 schema (its "schema" is ${JSON.stringify(schema?.schema)})`);
    const language = options.language ?? 'ts';
    const importFrom = options.importFrom ?? 'ternio';
    const packets = new Map(schema.packets.map((p) => [p.name, p]));
    const handlers = new Map(schema.handlers.map((h) => [h.request, h]));
    const types = schema.types;
    for (const name of Object.keys(types)) {
        if (!IDENTIFIER.test(name) || name === NS)
            throw new SchemaError(`type name ${JSON.stringify(name)} is not usable as an identifier`);
    }
    /** The type each reference needs first, to order the declarations. */
    const order = [];
    const state = new Map();
    /** References to a type not declared yet where they are used: lazy(). */
    const lazyRefs = new Set();
    const refsOf = (ref, out) => {
        if (typeof ref === 'string')
            return out;
        if ('vec' in ref)
            return refsOf(ref.vec, out);
        if ('option' in ref)
            return refsOf(ref.option, out);
        if ('array' in ref)
            return refsOf(ref.array, out);
        if ('ref' in ref)
            out.push(ref.ref);
        return out;
    };
    const visit = (name, from) => {
        if (!(name in types))
            throw new SchemaError(`${from} refers to ${name}, which the schema's types do not hold`);
        if (state.get(name) === 'done')
            return;
        if (state.get(name) === 'visiting') {
            lazyRefs.add(`${from}->${name}`);
            return;
        }
        state.set(name, 'visiting');
        const type = types[name];
        const fields = type.kind === 'struct' ? type.fields : type.variants.flatMap((v) => v.fields);
        for (const field of fields)
            for (const ref of refsOf(field.type, []))
                visit(ref, name);
        const { response, item } = packetExtras(name);
        for (const dependency of [response, ...refsOf(item ?? 'unit', [])]) {
            if (!dependency || dependency === name)
                continue;
            if (state.get(dependency) === 'visiting')
                throw new SchemaError(`${name} and ${dependency} answer each other`);
            visit(dependency, name);
        }
        state.set(name, 'done');
        order.push(name);
    };
    /** A packet's response packet (when another packet answers it) and its stream's item type. */
    function packetExtras(name) {
        const packet = packets.get(name);
        if (!packet)
            return { response: null, item: null };
        const handler = handlers.get(name);
        const response = handler?.response ?? packet.response;
        const item = handler?.stream_item ?? handler?.upload_item ?? null;
        return { response: response && typeof response === 'object' && 'packet' in response ? response.packet : null, item };
    }
    for (const name of Object.keys(types))
        visit(name, name);
    /** A reference as a codec expression and a TypeScript type, from within `owner`. */
    const codec = (ref, owner) => {
        if (typeof ref === 'string') {
            const primitive = PRIMITIVES[ref];
            if (!primitive)
                throw new SchemaError(`${owner}: unknown type ${JSON.stringify(ref)}`);
            return [`${NS}.${primitive[0]}`, primitive[1]];
        }
        if ('vec' in ref) {
            if (ref.vec === 'u8')
                return [`${NS}.bytes`, 'Uint8Array'];
            const [inner, ts] = codec(ref.vec, owner);
            return [`${NS}.vec(${inner})`, `Array<${ts}>`];
        }
        if ('option' in ref) {
            const [inner, ts] = codec(ref.option, owner);
            return [`${NS}.option(${inner})`, `${ts} | null`];
        }
        if ('array' in ref) {
            const [inner, ts] = codec(ref.array, owner);
            return [`${NS}.array(${inner}, ${ref.len})`, `Array<${ts}>`];
        }
        if ('ref' in ref) {
            const lazy = lazyRefs.has(`${owner}->${ref.ref}`);
            return [lazy ? `${NS}.lazy(() => ${ref.ref}, ${quote(ref.ref)})` : ref.ref, ref.ref];
        }
        if ('opaque' in ref)
            return [`${NS}.opaque(${quote(ref.opaque)})`, 'never'];
        throw new SchemaError(`${owner}: unknown type reference ${JSON.stringify(ref)}`);
    };
    const fieldList = (fields, owner) => {
        const codecs = fields.map((f) => `${key(f.name)}: ${codec(f.type, owner)[0]}`).join(', ');
        const members = fields.map((f) => `${key(f.name)}: ${codec(f.type, owner)[1]};`);
        const numeric = fields.filter((f) => /^\d+$/.test(f.name)).length;
        if (numeric && numeric !== fields.length)
            throw new SchemaError(`${owner} mixes numbered and named fields`);
        return { codecs: codecs ? `{ ${codecs} }` : '{}', members };
    };
    const responseType = (packet) => {
        const response = handlers.get(packet.name)?.response ?? packet.response;
        if (response === 'ack')
            return { ts: 'undefined', doc: 'answered with an acknowledgement (`undefined`)' };
        if (response && typeof response === 'object' && 'packet' in response) {
            return { ts: response.packet, doc: `answered with {@link ${response.packet}}` };
        }
        if (response && typeof response === 'object' && 'opaque' in response) {
            return { ts: 'unknown', doc: `answered with \`${response.opaque}\`, which the schema does not describe` };
        }
        return { ts: 'unknown', doc: '' };
    };
    const ts = language === 'ts';
    const code = [];
    const dts = [];
    const header = [
        `// Generated by ternio-codegen from ${options.source ?? 'a schema'} (ternio/1): do not edit; regenerate.`,
        '',
    ];
    code.push(...header, `import * as ${NS} from ${quote(importFrom)};`, '');
    dts.push(...header, `import type * as ${NS} from ${quote(options.typesFrom ?? importFrom)};`, '');
    for (const name of order) {
        const type = types[name];
        const packet = packets.get(name);
        /** The interface or type alias, the codec's doc comment, and its value and declaration. */
        let typeDecl;
        /** The declaration's doc comment (JavaScript puts it on the codec). */
        let doc;
        let codecDoc;
        let value;
        let valueType;
        if (type.kind === 'enum') {
            if (type.variants.length === 0)
                throw new SchemaError(`${name} is an enum without variants`);
            const union = type.variants.map((v) => {
                if (v.fields.some((f) => f.name === 'variant'))
                    throw new SchemaError(`${name}::${v.name} has a field called "variant"`);
                const { members } = fieldList(v.fields, name);
                return `  | { ${[`variant: ${quote(v.name)}`, ...members.map((m) => m.slice(0, -1))].join('; ')} }`;
            });
            doc = [`/** \`${name}\`: an enum, a \`variant\` and that variant's fields. */`];
            const variants = type.variants.map((v) => {
                const { codecs } = fieldList(v.fields, name);
                return `  ${key(v.name)}: ${v.fields.length ? codecs : 'null'},`;
            });
            value = `${NS}.enumType${ts ? `<${name}>` : ''}({\n${variants.join('\n')}\n}, ${quote(name)})`;
            typeDecl = [...doc, `export type ${name} =`, ...union.map((l, i) => (i === union.length - 1 ? `${l};` : l))];
            codecDoc = `/** The codec of {@link ${name}}. */`;
            valueType = `${NS}.Type<${name}>`;
        }
        else {
            const { codecs, members } = fieldList(type.fields, name);
            const optional = type.fields.filter((f) => f.optional).length;
            if (optional && !type.fields.slice(-optional).every((f) => f.optional)) {
                throw new SchemaError(`${name}: its optional fields are not all after the others`);
            }
            const body = members.length ? ['{', ...members.map((m) => `  ${m}`), '}'] : ['{}'];
            const withBody = (head) => [`${head} ${body[0]}`, ...body.slice(1)];
            if (!packet) {
                doc = [`/** \`${name}\`: a struct. */`];
                typeDecl = [...doc, ...withBody(`export interface ${name}`)];
                codecDoc = `/** The codec of {@link ${name}}. */`;
                value = `${NS}.struct(${codecs}, ${quote(name)})`;
                valueType = `${NS}.Type<${name}>`;
            }
            else {
                const handler = handlers.get(name);
                const response = responseType(packet);
                const { response: responsePacket, item } = packetExtras(name);
                const itemTs = item ? codec(item, name)[1] : 'never';
                const answers = schema.packets.filter((p) => p.name !== name && packetExtras(p.name).response === name);
                const facts = [
                    answers.length ? `the answer to ${answers.map((p) => `{@link ${p.name}}`).join(', ')}` : '',
                    handler && !handler.stream_item ? `a request (\`${handler.name}\`), ${response.doc}` : '',
                    handler?.stream_item ? `a request (\`${handler.name}\`) answered by a stream of {@link ${itemTs}}` : '',
                    packet.pushed ? 'pushed by the server' : '',
                    handler?.upload_item ? `an upload of {@link ${itemTs}}` : '',
                    packet.evolving ? `evolving${optional ? ` (its last ${optional} field${optional === 1 ? '' : 's'} optional: a body that ends before them decodes them as their defaults)` : ''}` : '',
                    packet.compress === false ? 'never sent compressed' : '',
                ].filter(Boolean);
                doc = [`/**`, ` * \`${name}\`, opcode ${hex(packet.opcode)}${facts.length ? `: ${facts.join('; ')}` : ''}.`, ' */'];
                typeDecl = [...doc, ...withBody(`export interface ${name}`)];
                const opts = [`name: ${quote(name)}`];
                if (responsePacket && responsePacket !== name)
                    opts.push(`response: ${responsePacket}`);
                if (item)
                    opts.push(`item: ${codec(item, name)[0]}`);
                if (packet.compress === false)
                    opts.push('compress: false');
                if (packet.evolving)
                    opts.push('evolving: true', ...(optional ? [`optional: ${optional}`] : []));
                valueType = `${NS}.PacketType<${name}, ${response.ts}, ${itemTs}>`;
                codecDoc = `/** The packet type of {@link ${name}}. */`;
                value = `${NS}.packet(${hex(packet.opcode)}, ${codecs}, { ${opts.join(', ')} })`;
            }
        }
        code.push(...(ts ? [...typeDecl, codecDoc] : doc), `export const ${name}${ts ? `: ${valueType}` : ''} = ${value};`, '');
        dts.push(...typeDecl, codecDoc, `export declare const ${name}: ${valueType};`, '');
    }
    const text = (list) => `${list.join('\n').trimEnd()}\n`;
    return ts ? { code: text(code) } : { code: text(code), declarations: text(dts) };
}
