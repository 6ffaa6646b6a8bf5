// The secure-session vectors of docs/PROTOCOL.md (contract v2, sections 5.1
// and 5.2), checked with Node's own ChaCha20-Poly1305 (OpenSSL): an
// implementation independent of the Rust one that wrote them.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createCipheriv, createDecipheriv } from 'node:crypto';

const DOC = readFileSync(new URL('../../docs/PROTOCOL.md', import.meta.url), 'utf8');

function vector(name) {
  const block = DOC.split(`vector: ${name}\n`)[1].split('```')[0];
  return Buffer.from(block.split(/\s+/).filter(Boolean).map((b) => parseInt(b, 16)));
}

/** Noise's ChaChaPoly nonce: 4 zero bytes, then the counter as u64 LE. */
function nonce(counter) {
  const n = Buffer.alloc(12);
  n.writeBigUInt64LE(counter, 4);
  return n;
}

/** Opens a sealed TCP frame (length prefix included) with `key`. */
function open(frame, key) {
  assert.equal(frame.readUInt32LE(0), frame.length - 4, 'length prefix');
  const header = frame.subarray(4, 11);
  assert.equal(header[2] & 0x04, 0x04, 'ENCRYPTED set');
  const counter = frame.readBigUInt64LE(11);
  const sealed = frame.subarray(19, frame.length - 16);
  const tag = frame.subarray(frame.length - 16);
  const decipher = createDecipheriv('chacha20-poly1305', key, nonce(counter), { authTagLength: 16 });
  decipher.setAAD(header, { plaintextLength: sealed.length });
  decipher.setAuthTag(tag);
  const plain = Buffer.concat([decipher.update(sealed), decipher.final()]);
  return { opcode: header.readUInt16LE(0), flags: header[2], requestId: header.readUInt32LE(3), counter, plain };
}

/** REKEY(k): the first 32 bytes of encrypting 32 zero bytes at counter 2^64 - 1. */
function rekey(key) {
  const cipher = createCipheriv('chacha20-poly1305', key, nonce(0xffffffffffffffffn), { authTagLength: 16 });
  cipher.setAAD(Buffer.alloc(0), { plaintextLength: 32 });
  return Buffer.concat([cipher.update(Buffer.alloc(32)), cipher.final()]).subarray(0, 32);
}

test('the rekeyed key is Noise REKEY of the client-to-server key', () => {
  assert.deepEqual(rekey(vector('nk-client-to-server-key')), vector('nk-client-to-server-key-rekeyed'));
});

test('the client frames open in turn, with the new key after REKEY', () => {
  const key = vector('nk-client-to-server-key');
  const echo = open(vector('nk-sealed-echo-request'), key);
  assert.deepEqual([echo.opcode, echo.requestId, echo.counter], [0x0001, 1, 0n]);
  assert.deepEqual(echo.plain, Buffer.from([4, 0x70, 0x69, 0x6e, 0x67]));

  const ping = open(vector('nk-sealed-ping'), key);
  assert.deepEqual([ping.opcode, ping.requestId, ping.counter], [0xff02, 2, 1n]);
  assert.equal(ping.plain.readBigUInt64LE(0), 0x0102030405060708n);

  const rk = open(vector('nk-sealed-rekey'), key);
  assert.deepEqual([rk.opcode, rk.flags, rk.requestId, rk.counter, rk.plain.length], [0xff05, 0x04, 0, 2n, 0]);

  const after = vector('nk-sealed-echo-after-rekey');
  assert.throws(() => open(after, key), 'the old key no longer opens');
  const again = open(after, vector('nk-client-to-server-key-rekeyed'));
  assert.deepEqual([again.opcode, again.requestId, again.counter], [0x0001, 3, 3n]);
});

test('the server seals its DISCONNECT like any other frame', () => {
  const key = vector('nk-server-to-client-key');
  assert.equal(open(vector('nk-sealed-echo-response'), key).counter, 0n);
  const bye = open(vector('nk-sealed-disconnect'), key);
  assert.deepEqual([bye.opcode, bye.requestId, bye.counter], [0xff04, 0, 1n]);
  assert.equal(bye.plain.readUInt16LE(0), 2, 'SHUTDOWN');
  assert.equal(bye.plain.subarray(2).toString('utf8'), 'bye');
});
