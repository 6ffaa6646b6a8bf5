// ternio-codegen: the committed generated code is what the generator gives
// now, the generated codecs match the conformance vectors
// (conformance/vectors/codec.json), evolving and recursive packets decode
// as docs/PROTOCOL.md section 3.1 says, the CLI writes what it says, and the
// generated types check what they should (tsc on test/types).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { generate, SchemaError } from '../dist/codegen.js';
import { TernioError } from '../dist/index.js';
import { GENERATED, render, root } from '../scripts/generated.mjs';

const SDK = fileURLToPath(new URL('../', import.meta.url));
const SAMPLE = JSON.parse(readFileSync(join(SDK, 'test/fixtures/sample.json'), 'utf8'));
const fromHex = (hex) => Uint8Array.from(hex.match(/../g) ?? [], (b) => parseInt(b, 16));

/** Imports the JavaScript generated from `schema` (from a temporary directory, importing dist/ by URL). */
async function load(schema) {
  const { code } = generate(schema, { language: 'js', importFrom: pathToFileURL(join(SDK, 'dist/index.js')).href });
  const dir = mkdtempSync(join(tmpdir(), 'ternio-codegen-'));
  try {
    writeFileSync(join(dir, 'packets.js'), code);
    return await import(pathToFileURL(join(dir, 'packets.js')).href);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('the committed generated code is what the generator gives now', () => {
  for (const entry of GENERATED) {
    for (const [path, text] of render(entry)) {
      assert.equal(readFileSync(root + path, 'utf8'), text, `${path} is stale: run node sdk-js/scripts/generated.mjs`);
    }
  }
});

test('generating twice gives the same bytes; TypeScript and JavaScript declare the same packets', () => {
  const once = generate(SAMPLE, { language: 'ts' }).code;
  assert.equal(generate(structuredClone(SAMPLE), { language: 'ts' }).code, once);
  const js = generate(SAMPLE, { language: 'js' });
  const names = (text, pattern) => [...text.matchAll(pattern)].map((m) => m[1]);
  assert.deepEqual(names(js.code, /^export const (\w+)/gm), names(once, /^export const (\w+)/gm));
  assert.deepEqual(names(js.declarations, /^export declare const (\w+)/gm), names(once, /^export const (\w+)/gm));
  assert.doesNotMatch(js.code, /^export (interface|type) |^export const \w+: |enumType</m);
});

test('generated codecs encode and decode the conformance vectors', async () => {
  const { vectors } = JSON.parse(readFileSync(join(root, 'conformance/vectors/codec.json'), 'utf8'));
  const vector = vectors.find((v) => v.name === 'sample-push');
  const { Sample } = await load(SAMPLE);
  assert.equal(Sample.opcode, Number(vector.frame.opcode));
  const { k: { index, ...k }, ...fields } = vector.input.fields;
  const value = { ...fields, n: fields.n === null ? null : BigInt(fields.n), k };
  assert.equal(index, 1);
  const body = fromHex(vector.frame.body_hex);
  assert.deepEqual(Sample.encode(value), body);
  assert.deepEqual(Sample.decode(body), value);
});

test('an evolving packet: a body cut at a field boundary among the optional fields, or extended', async () => {
  const { Profile, Kind, Point } = await load(SAMPLE);
  assert.equal(Profile.evolving, true);
  assert.equal(Profile.compress, false);
  const full = { name: 'ada', age: 36, tags: ['x'], kind: { variant: 'Move', x: 1, y: 2 }, home: { 0: 1.5, 1: -2 } };
  const body = Profile.encode(full);
  assert.deepEqual(Profile.decode(body), full);
  const nameOnly = Profile.encode({ ...full }).subarray(0, 4); // string "ada"
  assert.deepEqual(Profile.decode(nameOnly), { name: 'ada', age: 0, tags: [], kind: { variant: 'Stop' }, home: null });
  const upToTags = body.subarray(0, 4 + 1 + 3);
  assert.deepEqual(Profile.decode(upToTags), { name: 'ada', age: 36, tags: ['x'], kind: { variant: 'Stop' }, home: null });
  // Bytes after the last field: a newer peer's fields, ignored.
  const extended = Uint8Array.from([...body, 7, 7, 7]);
  assert.deepEqual(Profile.decode(extended), full);
  // Cut inside a field, or before a required one: MALFORMED.
  assert.throws(() => Profile.decode(body.subarray(0, 2)), (error) => error instanceof TernioError && error.kind === 'codec');
  assert.throws(() => Profile.decode(new Uint8Array(0)), /Profile\.name/);
  assert.throws(() => Profile.decode(body.subarray(0, body.length - 1)), /Profile\.home/);
  // Nested, it is a plain struct; Kind and Point are not evolving.
  assert.throws(() => Kind.decode(Uint8Array.from([0, 9])), /trailing/);
  assert.equal(Point.evolving, undefined);
});

test('a recursive type, a stream item, responses', async () => {
  const { Tree, Plant, Add, Sum, Count, Point } = await load(SAMPLE);
  const tree = { value: 1, children: [{ value: 2, children: [] }, { value: 3, children: [{ value: 4, children: [] }] }] };
  assert.deepEqual(Tree.decode(Tree.encode(tree)), tree);
  assert.equal(Plant.response, Tree);
  assert.equal(Add.response, Sum);
  assert.equal(Count.response, undefined);
  assert.equal(Count.item, Point);
  assert.deepEqual(Add.encode({ a: -1n, b: 2n }), fromHex('ffffffffffffffff0200000000000000'));
});

test('schemas the generator refuses, with the reason', () => {
  assert.throws(() => generate({ ...SAMPLE, schema: 'ternio/2' }), SchemaError);
  const dangling = structuredClone(SAMPLE);
  dangling.types.Add.fields[0].type = { ref: 'Nowhere' };
  assert.throws(() => generate(dangling), /^SchemaError: types\.Add\.fields\[0\]\.type\.ref: refers to "Nowhere"/);
  const misplaced = structuredClone(SAMPLE);
  misplaced.types.Profile.fields[0].optional = true;
  misplaced.types.Profile.fields[1].optional = false;
  assert.throws(() => generate(misplaced), /optional fields are not all after the others/);
});

test('the CLI writes JavaScript and its declarations, or TypeScript', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ternio-codegen-cli-'));
  try {
    const cli = join(SDK, 'bin/ternio-codegen.js');
    const schema = join(root, 'examples/schemas/chat_server.json');
    let run = spawnSync(process.execPath, [cli, schema, '-o', join(dir, 'chat.js'), '--import', './ternio.js',
      '--types', '../../../sdk-js/dist/index.js'], { encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    assert.equal(readFileSync(join(dir, 'chat.js'), 'utf8'), readFileSync(join(root, 'examples/web/chat/packets.js'), 'utf8'));
    assert.equal(readFileSync(join(dir, 'chat.d.ts'), 'utf8'), readFileSync(join(root, 'examples/web/chat/packets.d.ts'), 'utf8'));
    run = spawnSync(process.execPath, [cli, schema], { encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    assert.match(run.stdout, /^export const JoinRoom: ternio\.PacketType<JoinRoom, RoomInfo, never> = /m);
    run = spawnSync(process.execPath, [cli, join(dir, 'missing.json')], { encoding: 'utf8' });
    assert.equal(run.status, 1);
    assert.match(run.stderr, /^ternio-codegen: .*missing\.json/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the generated types check values and answers (tsc on test/types)', { timeout: 120_000 }, () => {
  const tsc = join(SDK, 'node_modules/typescript/bin/tsc');
  const run = spawnSync(process.execPath, [tsc, '-p', join(SDK, 'test/types')], { encoding: 'utf8' });
  assert.equal(run.error, undefined, 'typescript is installed (npm ci in sdk-js)');
  assert.equal(run.status, 0, run.stdout + run.stderr);
});
