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
/** A tuple field's name: its position. */
const POSITION = /^(0|[1-9][0-9]*)$/;
/**
 * Words that cannot name a type: reserved in JavaScript or TypeScript
 * (`export const delete`, `export interface class`), or predefined types
 * an interface cannot take the name of.
 */
const RESERVED = new Set([
    'break', 'case', 'catch', 'class', 'const', 'continue', 'debugger', 'default', 'delete', 'do', 'else', 'enum',
    'export', 'extends', 'false', 'finally', 'for', 'function', 'if', 'import', 'in', 'instanceof', 'new', 'null',
    'return', 'super', 'switch', 'this', 'throw', 'true', 'try', 'typeof', 'var', 'void', 'while', 'with', 'yield',
    'let', 'static', 'implements', 'interface', 'package', 'private', 'protected', 'public', 'await', 'arguments',
    'eval', 'undefined', 'NaN', 'Infinity', 'any', 'unknown', 'never', 'object', 'number', 'bigint', 'boolean',
    'string', 'symbol',
]);
/** The namespace the generated code imports the SDK as. */
const NS = 'ternio';
/** The highest opcode of an application packet (`0xFF00..` are the protocol's). */
const MAX_OPCODE = 0xfeff;
/** The longest `[T; N]` the generator takes. */
const MAX_ARRAY_LEN = 0xffff_ffff;
/** How deeply type references may nest (`Vec<Option<...>>`). */
const MAX_NESTING = 64;
/** A packet's flags, true or false when present. */
const FLAGS = ['pushed', 'droppable', 'unreliable', 'compress', 'evolving'];
/** A problem with the schema: the generator cannot describe it. */
export class SchemaError extends Error {
    constructor(message) {
        super(message);
        this.name = 'SchemaError';
    }
}
const own = (object, name) => Object.hasOwn(object, name);
const isObject = (value) => typeof value === 'object' && value !== null && !Array.isArray(value);
const hex = (opcode) => `0x${opcode.toString(16).padStart(4, '0').toUpperCase()}`;
/** A string literal: quotes, backslashes, control characters and line terminators escaped. */
const quote = (text) => `'${text.replace(/\\/g, '\\\\').replace(/'/g, "\\'")
    .replace(/[\u0000-\u001f\u007f\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)}'`;
const key = (name) => (IDENTIFIER.test(name) ? name : quote(name));
/** Text for a comment: no line terminator or control character, no `*` `/` that would end it. */
const comment = (text) => text.replace(/[\u0000-\u001f\u007f\u2028\u2029]/g, ' ').replace(/\*\//g, '*\\/');
/** `base.name`, or `base["name"]` for a name that is not an identifier. */
const member = (base, name) => (IDENTIFIER.test(name) ? `${base}.${name}` : `${base}[${JSON.stringify(name)}]`);
function fail(path, problem) {
    throw new SchemaError(`${path}: ${problem}`);
}
/**
 * Checks the whole schema before any code is generated from it. A schema
 * is a server's: every name, number and string it holds ends up in the
 * generated code, so each must be what the format says (a type or field
 * name an identifier, an opcode a number in range, a reference a type the
 * schema holds) or the schema is refused.
 * @throws {SchemaError} Naming the path of the first problem, as `types.Foo.fields[2].name: ...`.
 */
function validate(schema) {
    if (!isObject(schema) || schema.schema !== 'ternio/1') {
        throw new SchemaError(`not a ternio/1 schema (its "schema" is ${JSON.stringify(isObject(schema) ? schema.schema : undefined)})`);
    }
    const { types, packets, handlers } = schema;
    if (!isObject(types))
        fail('types', 'not an object');
    if (!Array.isArray(packets))
        fail('packets', 'not a list');
    if (!Array.isArray(handlers))
        fail('handlers', 'not a list');
    for (const name of Object.keys(types)) {
        if (!IDENTIFIER.test(name))
            fail(member('types', name), 'not an identifier');
        if (name === NS || RESERVED.has(name))
            fail(member('types', name), `${name} cannot name a type in the generated code`);
    }
    const typeName = (name, path) => {
        if (typeof name !== 'string')
            fail(path, 'not a string');
        if (!own(types, name))
            fail(path, `refers to ${JSON.stringify(name)}, which the schema's types do not hold`);
        return name;
    };
    const ref = (value, path, depth = 0) => {
        if (depth > MAX_NESTING)
            fail(path, `nested more than ${MAX_NESTING} deep`);
        if (typeof value === 'string') {
            if (!own(PRIMITIVES, value))
                fail(path, `unknown type ${JSON.stringify(value)}`);
        }
        else if (!isObject(value)) {
            fail(path, 'not a type reference');
        }
        else if (own(value, 'vec')) {
            ref(value.vec, `${path}.vec`, depth + 1);
        }
        else if (own(value, 'option')) {
            ref(value.option, `${path}.option`, depth + 1);
        }
        else if (own(value, 'array')) {
            const len = value.len;
            if (typeof len !== 'number' || !Number.isInteger(len) || len < 0 || len > MAX_ARRAY_LEN) {
                fail(`${path}.len`, `not a length (an integer 0..=${MAX_ARRAY_LEN})`);
            }
            ref(value.array, `${path}.array`, depth + 1);
        }
        else if (own(value, 'ref')) {
            typeName(value.ref, `${path}.ref`);
        }
        else if (own(value, 'opaque')) {
            if (typeof value.opaque !== 'string')
                fail(`${path}.opaque`, 'not a string');
        }
        else {
            fail(path, 'not a type reference');
        }
    };
    const fieldName = (name, path, seen, positions) => {
        if (typeof name !== 'string' || !(IDENTIFIER.test(name) || (positions && POSITION.test(name)))) {
            fail(path, positions ? 'not an identifier (or a tuple position)' : 'not an identifier');
        }
        if (name === '__proto__')
            fail(path, '__proto__ cannot be a name in the generated code');
        if (seen.has(name))
            fail(path, `a second ${name}`);
        seen.add(name);
    };
    const fields = (list, path) => {
        if (!Array.isArray(list))
            fail(path, 'not a list of fields');
        const seen = new Set();
        list.forEach((field, i) => {
            const at = `${path}[${i}]`;
            if (!isObject(field))
                fail(at, 'not a field');
            fieldName(field.name, `${at}.name`, seen, true);
            if (field.optional !== undefined && typeof field.optional !== 'boolean')
                fail(`${at}.optional`, 'not true or false');
            ref(field.type, `${at}.type`);
        });
    };
    for (const [name, type] of Object.entries(types)) {
        const at = member('types', name);
        if (!isObject(type))
            fail(at, 'not a type');
        if (type.kind === 'struct') {
            if (type.evolving !== undefined && typeof type.evolving !== 'boolean')
                fail(`${at}.evolving`, 'not true or false');
            fields(type.fields, `${at}.fields`);
        }
        else if (type.kind === 'enum') {
            const variants = type.variants;
            if (!Array.isArray(variants) || variants.length === 0 || variants.length > 256)
                fail(`${at}.variants`, 'not a list of 1 to 256 variants');
            const seen = new Set();
            variants.forEach((variant, i) => {
                const vat = `${at}.variants[${i}]`;
                if (!isObject(variant))
                    fail(vat, 'not a variant');
                if (variant.index !== i)
                    fail(`${vat}.index`, `not ${i} (the variants are in index order)`);
                fieldName(variant.name, `${vat}.name`, seen, false);
                fields(variant.fields, `${vat}.fields`);
            });
        }
        else {
            fail(`${at}.kind`, 'neither "struct" nor "enum"');
        }
    }
    const opcode = (value, path) => {
        if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_OPCODE) {
            fail(path, `not an opcode (an integer 0..=${MAX_OPCODE})`);
        }
        return value;
    };
    const packetNames = new Set();
    const opcodes = new Set();
    packets.forEach((packet, i) => {
        const at = `packets[${i}]`;
        if (!isObject(packet))
            fail(at, 'not a packet');
        const code = opcode(packet.opcode, `${at}.opcode`);
        if (opcodes.has(code))
            fail(`${at}.opcode`, `a second packet with opcode ${hex(code)}`);
        opcodes.add(code);
        const name = typeName(packet.name, `${at}.name`);
        if (packetNames.has(name))
            fail(`${at}.name`, `a second packet called ${name}`);
        packetNames.add(name);
        for (const flag of FLAGS) {
            if (packet[flag] !== undefined && typeof packet[flag] !== 'boolean')
                fail(`${at}.${flag}`, 'not true or false');
        }
        const depth = packet.max_depth;
        if (depth !== undefined && (typeof depth !== 'number' || !Number.isSafeInteger(depth) || depth < 0))
            fail(`${at}.max_depth`, 'not a count');
    });
    const response = (value, path) => {
        if (value === null || value === undefined || value === 'ack')
            return;
        if (!isObject(value)) {
            fail(path, 'not a response');
        }
        else if (own(value, 'packet')) {
            if (typeof value.packet !== 'string' || !packetNames.has(value.packet)) {
                fail(`${path}.packet`, `refers to ${JSON.stringify(value.packet)}, which is not a packet of the schema`);
            }
        }
        else if (own(value, 'opaque')) {
            if (typeof value.opaque !== 'string')
                fail(`${path}.opaque`, 'not a string');
        }
        else {
            fail(path, 'not a response');
        }
    };
    packets.forEach((packet, i) => response(packet.response, `packets[${i}].response`));
    const requests = new Set();
    handlers.forEach((handler, i) => {
        const at = `handlers[${i}]`;
        if (!isObject(handler))
            fail(at, 'not a handler');
        opcode(handler.opcode, `${at}.opcode`);
        if (typeof handler.name !== 'string')
            fail(`${at}.name`, 'not a string');
        const request = handler.request;
        if (typeof request !== 'string' || !packetNames.has(request)) {
            fail(`${at}.request`, `refers to ${JSON.stringify(request)}, which is not a packet of the schema`);
        }
        if (requests.has(request))
            fail(`${at}.request`, `a second handler of ${request}`);
        requests.add(request);
        response(handler.response, `${at}.response`);
        for (const item of ['stream_item', 'upload_item']) {
            if (handler[item] !== null && handler[item] !== undefined)
                ref(handler[item], `${at}.${item}`);
        }
    });
}
/**
 * Generates the code of `schema`.
 * @throws {SchemaError} When the schema is not `ternio/1`, or holds what the SDK cannot code.
 */
export function generate(schema, options = {}) {
    validate(schema);
    const language = options.language ?? 'ts';
    const importFrom = options.importFrom ?? 'ternio';
    const packets = new Map(schema.packets.map((p) => [p.name, p]));
    const handlers = new Map(schema.handlers.map((h) => [h.request, h]));
    const types = schema.types;
    /** The type each reference needs first, to order the declarations. */
    const order = [];
    const state = new Map();
    /** References to a type not declared yet where they are used: lazy(). */
    const lazyRefs = new Set();
    const refsOf = (ref, out) => {
        if (typeof ref === 'string')
            return out;
        if (own(ref, 'vec'))
            return refsOf(ref.vec, out);
        if (own(ref, 'option'))
            return refsOf(ref.option, out);
        if (own(ref, 'array'))
            return refsOf(ref.array, out);
        if (own(ref, 'ref'))
            out.push(ref.ref);
        return out;
    };
    const visit = (name, from) => {
        if (!own(types, name))
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
        return { response: response && typeof response === 'object' && own(response, 'packet') ? response.packet : null, item };
    }
    for (const name of Object.keys(types))
        visit(name, name);
    /** A reference as a codec expression and a TypeScript type, from within `owner`. */
    const codec = (ref, owner) => {
        if (typeof ref === 'string') {
            if (!own(PRIMITIVES, ref))
                throw new SchemaError(`${owner}: unknown type ${JSON.stringify(ref)}`);
            const primitive = PRIMITIVES[ref];
            return [`${NS}.${primitive[0]}`, primitive[1]];
        }
        if (own(ref, 'vec')) {
            const { vec } = ref;
            if (vec === 'u8')
                return [`${NS}.bytes`, 'Uint8Array'];
            const [inner, ts] = codec(vec, owner);
            return [`${NS}.vec(${inner})`, `Array<${ts}>`];
        }
        if (own(ref, 'option')) {
            const [inner, ts] = codec(ref.option, owner);
            return [`${NS}.option(${inner})`, `${ts} | null`];
        }
        if (own(ref, 'array')) {
            const { array, len } = ref;
            const [inner, ts] = codec(array, owner);
            return [`${NS}.array(${inner}, ${len})`, `Array<${ts}>`];
        }
        if (own(ref, 'ref')) {
            const name = ref.ref;
            const lazy = lazyRefs.has(`${owner}->${name}`);
            return [lazy ? `${NS}.lazy(() => ${name}, ${quote(name)})` : name, name];
        }
        if (own(ref, 'opaque'))
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
        if (response && typeof response === 'object' && own(response, 'packet')) {
            const { packet: name } = response;
            return { ts: name, doc: `answered with {@link ${name}}` };
        }
        if (response && typeof response === 'object' && own(response, 'opaque')) {
            const { opaque } = response;
            return { ts: 'unknown', doc: `answered with \`${comment(opaque)}\`, which the schema does not describe` };
        }
        return { ts: 'unknown', doc: '' };
    };
    const ts = language === 'ts';
    const code = [];
    const dts = [];
    const header = [
        `// Generated by ternio-codegen from ${comment(options.source ?? 'a schema')} (ternio/1): do not edit; regenerate.`,
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
                    handler && !handler.stream_item ? `a request (\`${comment(handler.name)}\`), ${response.doc}` : '',
                    handler?.stream_item ? `a request (\`${comment(handler.name)}\`) answered by a stream of {@link ${itemTs}}` : '',
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
