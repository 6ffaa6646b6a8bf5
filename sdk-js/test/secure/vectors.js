// The vectors of conformance/vectors/*.json (docs/PROTOCOL.md, "Test
// vectors"), by name, as bytes. A `tcp` vector is returned without its
// length prefix (one frame, as a WebSocket message carries it).

import { readFileSync } from 'node:fs';

const ROOT = new URL('../../../', import.meta.url);
const DOC = readFileSync(new URL('docs/PROTOCOL.md', ROOT), 'utf8');

function load(file) {
  const json = JSON.parse(readFileSync(new URL(`conformance/vectors/${file}.json`, ROOT), 'utf8'));
  return new Map(json.vectors.map((v) => [v.name, v]));
}

export const SECURE = load('secure');
export const RESUMPTION = load('resumption');

/** The vector `name` of either file, as the JSON gives it. */
export function raw(name) {
  const v = SECURE.get(name) ?? RESUMPTION.get(name);
  if (!v) throw new Error(`no vector ${name}`);
  return v;
}

/** The bytes of vector `name`; for a TCP frame, the frame without its u32 length prefix (checked). */
export function vector(name) {
  const v = raw(name);
  const bytes = new Uint8Array(Buffer.from(v.hex, 'hex'));
  if (v.encoding !== 'tcp') return bytes;
  const length = new DataView(bytes.buffer).getUint32(0, true);
  if (length !== bytes.length - 4) throw new Error(`vector ${name}: length prefix ${length}, ${bytes.length - 4} bytes`);
  return bytes.subarray(4);
}

/** The hex block of vector `name` in docs/PROTOCOL.md, as bytes. */
export function docVector(name) {
  const block = DOC.split(`vector: ${name}\n`)[1]?.split('```')[0];
  if (block === undefined) return undefined;
  return new Uint8Array(Buffer.from(block.split(/\s+/).filter(Boolean).join(''), 'hex'));
}

/** 32 bytes counting up from `first`: the vectors' fixed keys (00..1f, 20..3f, 40..5f, 60..7f, 80..9f, a0..bf). */
export function counting(first) {
  return Uint8Array.from({ length: 32 }, (_, i) => first + i);
}

export const SERVER_STATIC_PRIVATE = counting(0x00);
export const CLIENT_EPHEMERAL = counting(0x20);
export const SERVER_EPHEMERAL = counting(0x40);

/** A 7-byte header. */
export function header(opcode, flags, requestId) {
  const h = new Uint8Array(7);
  const view = new DataView(h.buffer);
  view.setUint16(0, opcode, true);
  h[2] = flags;
  view.setUint32(3, requestId, true);
  return h;
}

export const hex = (bytes) => Buffer.from(bytes).toString('hex');
