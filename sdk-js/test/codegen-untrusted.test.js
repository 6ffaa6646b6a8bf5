// ternio-codegen takes a server's schema as untrusted input: a name, a
// number or a string in it must never become code in the generated module.
// Each schema here tries; each is refused with the path of what is wrong,
// or (for free text that only goes into comments and strings) generates a
// module that imports without running anything of the schema's.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { generate, SchemaError } from '../dist/codegen.js';

const SDK = fileURLToPath(new URL('../', import.meta.url));
const ROOT = join(SDK, '..');
const SAMPLE = JSON.parse(readFileSync(join(SDK, 'test/fixtures/sample.json'), 'utf8'));
const INDEX = pathToFileURL(join(SDK, 'dist/index.js')).href;

/** The sample schema, changed by `edit`. */
function sample(edit) {
  const schema = structuredClone(SAMPLE);
  edit(schema);
  return schema;
}

/** Imports the JavaScript generated from `schema` (from a temporary directory). */
async function load(schema) {
  const { code } = generate(schema, { language: 'js', importFrom: INDEX });
  const dir = mkdtempSync(join(tmpdir(), 'ternio-codegen-untrusted-'));
  try {
    writeFileSync(join(dir, 'packets.js'), code);
    return { code, module: await import(pathToFileURL(join(dir, 'packets.js')).href) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * `schema` is refused with a SchemaError whose message is `message`
 * (path first). Were it not, the code it generates would run the schema's
 * `globalThis[marker] = 1` on import: the test imports what it generates
 * then, so that a generator that lets it through fails here on both counts.
 */
async function refused(schema, message, marker) {
  let generated = null;
  try {
    generated = generate(schema, { language: 'js', importFrom: INDEX });
  } catch (error) {
    assert.ok(error instanceof SchemaError, `a SchemaError, not ${error}`);
    assert.match(error.message, message);
    return;
  }
  if (marker) {
    delete globalThis[marker];
    await load(schema).catch(() => {});
    const ran = globalThis[marker] !== undefined;
    delete globalThis[marker];
    assert.ok(!ran, `the schema's code ran on import:\n${generated.code}`);
  }
  assert.fail(`not refused; generated:\n${generated.code}`);
}

test('a field name that breaks out of its quotes is refused', async () => {
  const schema = sample((s) => { s.types.Add.fields[0].name = "a': (globalThis.pwned1 = 1), 'b"; });
  await refused(schema, /^types\.Add\.fields\[0\]\.name: not an identifier/, 'pwned1');
  // Other names that are no identifier, and __proto__ (which would set the codec object's prototype).
  for (const name of ['a-b', '01', '', 'a b', '__proto__']) {
    await refused(sample((s) => { s.types.Add.fields[1].name = name; }), /^types\.Add\.fields\[1\]\.name: /);
  }
  await refused(sample((s) => { s.types.Add.fields[1].name = 'a'; }), /^types\.Add\.fields\[1\]\.name: a second a/);
});

test('an enum variant name that breaks out of its quotes is refused', async () => {
  const schema = sample((s) => { s.types.Kind.variants[0].name = "Stop': (globalThis.pwned3 = 1), 'Go"; });
  await refused(schema, /^types\.Kind\.variants\[0\]\.name: not an identifier/, 'pwned3');
  await refused(sample((s) => { s.types.Kind.variants[1].index = 7; }), /^types\.Kind\.variants\[1\]\.index: /);
});

test('a handler name or an opaque response that closes its doc comment stays in the comment', async () => {
  const schema = sample((s) => {
    s.handlers[0].name = 'C::m */ globalThis.pwned2 = 1; /*';
    s.handlers[1].name = 'C::n\u2028*/ globalThis.pwned4 = 1; /*\n';
    s.handlers[0].response = { opaque: 'x::Y */ globalThis.pwned5 = 1; /*' };
  });
  for (const marker of ['pwned2', 'pwned4', 'pwned5']) delete globalThis[marker];
  const { code, module } = await load(schema);
  for (const marker of ['pwned2', 'pwned4', 'pwned5']) assert.equal(globalThis[marker], undefined, `${marker} ran:\n${code}`);
  assert.equal(module.Add.opcode, 16);
  // Each doc comment is one line that closes only at its end.
  for (const line of code.split('\n').filter((l) => l.startsWith(' * '))) assert.doesNotMatch(line, /\*\//, line);
  assert.doesNotMatch(code, /\u2028/);
  const ts = generate(schema, { language: 'ts' }).code;
  assert.match(ts, /`C::m \*\\\/ globalThis\.pwned2 = 1; \/\*`/);
});

test('an opaque name with quotes, backslashes and line breaks is a string in the code, not code', async () => {
  const name = "x'\n+ (globalThis.pwned6 = 1) + '\\\u2028";
  const schema = sample((s) => { s.types.Plant.fields[0].type = { opaque: name }; });
  delete globalThis.pwned6;
  const { code, module } = await load(schema);
  assert.equal(globalThis.pwned6, undefined, code);
  assert.throws(() => module.Plant.encode({ depth: 1 }), (error) => error.message.includes(`${name} has a hand-written encoding`));
});

test('an array length that is not an integer in range is refused', async () => {
  const inject = sample((s) => { s.types.Add.fields[0].type = { array: 'u8', len: '1) && (globalThis.pwned7 = 1' }; });
  await refused(inject, /^types\.Add\.fields\[0\]\.type\.len: not a length/, 'pwned7');
  for (const len of [1.5, -1, 2 ** 32, null, undefined]) {
    await refused(sample((s) => { s.types.Add.fields[0].type = { vec: { array: 'u8', len } }; }),
      /^types\.Add\.fields\[0\]\.type\.vec\.len: not a length/);
  }
});

test('an opcode that is not an integer 0..=0xFEFF is refused', async () => {
  for (const opcode of ['16', '0x10', 16.5, -1, 0xff00, null]) {
    await refused(sample((s) => { s.packets[0].opcode = opcode; }), /^packets\[0\]\.opcode: not an opcode/);
  }
  await refused(sample((s) => { s.handlers[0].opcode = '16'; }), /^handlers\[0\]\.opcode: not an opcode/);
  await refused(sample((s) => { s.packets[1].opcode = 16; }), /^packets\[1\]\.opcode: a second packet with opcode 0x0010/);
  for (const max_depth of [1.5, '64', -1]) {
    await refused(sample((s) => { s.packets[2].max_depth = max_depth; }), /^packets\[2\]\.max_depth: not a count/);
  }
});

test('names of Object.prototype are not types', async () => {
  for (const name of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
    await refused(sample((s) => { s.types.Add.fields[0].type = { ref: name }; }),
      new RegExp(`^types\\.Add\\.fields\\[0\\]\\.type\\.ref: refers to "${name}", which the schema's types do not hold`));
    await refused(sample((s) => { s.types.Add.fields[0].type = name; }), /^types\.Add\.fields\[0\]\.type: unknown type/);
    await refused(sample((s) => { s.handlers[0].response = { packet: name }; }), /^handlers\[0\]\.response\.packet: refers to/);
  }
  await refused(sample((s) => { s.packets[0].name = 'constructor'; }), /^packets\[0\]\.name: refers to "constructor"/);
});

test('type names that are not identifiers, or reserved, are refused; references must name packets', async () => {
  for (const name of ['delete', 'class', 'string', 'ternio', 'A-B', 'x:y']) {
    await refused(sample((s) => { s.types[name] = { kind: 'struct', fields: [] }; }), /^types(\.|\[)/);
  }
  await refused(sample((s) => { s.types.Add.kind = 'union'; }), /^types\.Add\.kind: /);
  await refused(sample((s) => { s.packets[0].response = { packet: 'Point' }; }),
    /^packets\[0\]\.response\.packet: refers to "Point", which is not a packet/);
  await refused(sample((s) => { s.handlers[0].request = 'Sum, globalThis.pwned9 = 1'; }), /^handlers\[0\]\.request: /);
  await refused(sample((s) => { s.handlers[2].stream_item = { ref: 'Nowhere' }; }), /^handlers\[2\]\.stream_item\.ref: /);
  await refused(sample((s) => { s.packets[0].pushed = 'yes'; }), /^packets\[0\]\.pushed: not true or false/);
});

test('the CLI refuses an injecting schema, naming the path, exits 1 and writes nothing', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ternio-codegen-untrusted-cli-'));
  try {
    const input = join(dir, 'evil.json');
    writeFileSync(input, JSON.stringify(sample((s) => { s.types.Add.fields[0].name = "a': (globalThis.pwned1 = 1), 'b"; })));
    const output = join(dir, 'packets.js');
    const run = spawnSync(process.execPath, [join(SDK, 'bin/ternio-codegen.js'), input, '-o', output], { encoding: 'utf8' });
    assert.equal(run.status, 1, run.stderr);
    assert.match(run.stderr, /^ternio-codegen: types\.Add\.fields\[0\]\.name: not an identifier/);
    assert.equal(existsSync(output), false);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('every example schema passes the checks', () => {
  const dir = join(ROOT, 'examples/schemas');
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.json'))) {
    const schema = JSON.parse(readFileSync(join(dir, file), 'utf8'));
    for (const language of ['ts', 'js']) assert.doesNotThrow(() => generate(schema, { language }), file);
  }
});
