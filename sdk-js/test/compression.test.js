// Compression (contract section 6): this module's LZ4 block codec against
// the vectors of docs/PROTOCOL.md (blocks made by the Rust side, with
// lz4_flex), against itself, and against what an attacker sends; and the
// client decoding compressed frames from a fake server.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createDecipheriv } from 'node:crypto';

import {
  TernioError, Flags, DisconnectReason, SystemOpcode, decodeFrame, encodeFrame, packet, bytes,
  lz4CompressBlock, lz4DecompressBlock, compressBody, decompressBody, maybeCompress, Client,
} from '../dist/index.js';

const DOC = readFileSync(new URL('../../docs/PROTOCOL.md', import.meta.url), 'utf8');

function vector(name) {
  const block = DOC.split(`vector: ${name}\n`)[1].split('```')[0];
  return Uint8Array.from(block.split(/\s+/).filter(Boolean).map((b) => parseInt(b, 16)));
}

const Echo = packet(0x0001, { payload: bytes }, { name: 'Echo' });
const text = (s) => new TextEncoder().encode(s);
const PAYLOAD = 'ternio ternio ternio ternio ternio ternio ternio!';
const codecError = (pattern) => (error) => error instanceof TernioError && error.kind === 'codec' && pattern.test(error.message);

/** xorshift noise: does not compress. */
function noise(length, seed = 0x2545f491) {
  let state = seed;
  return Uint8Array.from({ length }, () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return state & 0xff;
  });
}

/** Inputs with every shape the format has: empty, tiny, runs, long literals, long matches, far offsets. */
function samples() {
  const out = [new Uint8Array(0), text('a'), text('abcdefghijkl'), text('abcdefghijklm'), new Uint8Array(13), new Uint8Array(100_000)];
  out.push(text('ab'.repeat(500)), text(`${'x'.repeat(14)}${'yz'.repeat(30)}`), noise(15), noise(16), noise(300), noise(70_000));
  const mixed = new Uint8Array(200_000);
  for (let i = 0; i < mixed.length; i++) mixed[i] = i % 70_000 < 100 ? 7 : (i * 31) % 253;
  out.push(mixed);
  const far = new Uint8Array(140_000);
  far.set(noise(1000, 7), 0);
  far.set(noise(1000, 7), 66_000); // the same bytes 66,000 back: beyond an LZ4 offset
  far.set(noise(1000, 7), 130_000);
  out.push(far);
  for (let n = 0; n < 64; n++) out.push(text('0123456789'.repeat(n).slice(0, n * 3)));
  return out;
}

test('the Rust side\'s compressed vector decodes to the documented echo', () => {
  const frame = vector('compressed-echo-request');
  assert.equal(new DataView(frame.buffer).getUint32(0, true), frame.length - 4);
  const decoded = decodeFrame(frame.subarray(4));
  assert.equal(decoded.flags, Flags.COMPRESSED);
  assert.equal(decoded.requestId, 9);
  const body = decompressBody(decoded.body);
  assert.deepEqual(Echo.decode(body), { payload: text(PAYLOAD) });
});

test('the compressed sealed vector opens (Node\'s cipher) with COMPRESSED authenticated, then decodes', () => {
  const frame = Buffer.from(vector('compressed-sealed-echo-request'));
  const key = Buffer.from(Array.from({ length: 32 }, (_, i) => 0x60 + i));
  const header = frame.subarray(4, 11);
  assert.equal(header[2], Flags.ENCRYPTED | Flags.COMPRESSED);
  const counter = frame.readBigUInt64LE(11);
  assert.equal(counter, 0n);
  const sealed = frame.subarray(19, frame.length - 16);
  const tag = frame.subarray(frame.length - 16);
  const open = (aad) => {
    const decipher = createDecipheriv('chacha20-poly1305', key, Buffer.alloc(12), { authTagLength: 16 });
    decipher.setAAD(aad, { plaintextLength: sealed.length });
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(sealed), decipher.final()]);
  };
  const cleared = Buffer.from(header);
  cleared[2] &= ~Flags.COMPRESSED;
  assert.throws(() => open(cleared), 'the flag is in the associated data');
  const plain = open(header);
  assert.deepEqual(Echo.decode(decompressBody(plain)), { payload: text(PAYLOAD) });
});

test('our encoder: a valid block for the vector\'s body (not necessarily the same bytes)', () => {
  const body = Echo.encode({ payload: text(PAYLOAD) });
  const compressed = compressBody(body);
  assert.ok(compressed.length < body.length);
  assert.deepEqual(decompressBody(compressed), body);
  assert.deepEqual(lz4CompressBlock(body), lz4CompressBlock(body), 'deterministic');
});

test('round trips of every shape, and the format\'s end rules hold', () => {
  for (const input of samples()) {
    const block = lz4CompressBlock(input);
    assert.deepEqual(lz4DecompressBlock(block, input.length), input, `length ${input.length}`);
    // A block that only has literals is at most 1 + length/255 + 1 bytes larger.
    assert.ok(block.length <= input.length + Math.ceil(input.length / 255) + 1);
    // The last sequence: literals only, at least 5 of them (or all, when shorter).
    assert.ok(lastLiterals(block) >= Math.min(5, input.length), `length ${input.length}`);
  }
  assert.ok(lz4CompressBlock(new Uint8Array(100_000)).length < 500, 'zeros compress');
});

/** The literal count of a block's last sequence, walking the block. */
function lastLiterals(block) {
  let ip = 0;
  for (;;) {
    const token = block[ip++];
    let literals = token >> 4;
    if (literals === 15) for (let b = 255; b === 255; literals += b) b = block[ip++];
    ip += literals;
    if (ip === block.length) return literals;
    ip += 2;
    if ((token & 15) === 15) for (let b = 255; b === 255;) b = block[ip++];
  }
}

test('an attacker\'s blocks are refused: cut short, bad offsets, more or fewer bytes than announced', () => {
  const input = text('hello hello hello hello hello hello!');
  const block = lz4CompressBlock(input);
  assert.deepEqual(lz4DecompressBlock(block, input.length), input);
  for (let cut = 0; cut < block.length; cut++) {
    assert.throws(() => lz4DecompressBlock(block.subarray(0, cut), input.length), codecError(/LZ4/), `cut at ${cut}`);
  }
  assert.throws(() => lz4DecompressBlock(block, input.length + 1), codecError(/not the announced/));
  assert.throws(() => lz4DecompressBlock(block, input.length - 1), codecError(/more than the announced/));
  // Offset 0, and an offset before the start of the output.
  assert.throws(() => lz4DecompressBlock(Uint8Array.from([0x10, 0x61, 0x00, 0x00, 0x00]), 10), codecError(/offset 0/));
  assert.throws(() => lz4DecompressBlock(Uint8Array.from([0x10, 0x61, 0x02, 0x00, 0x00]), 10), codecError(/offset 2/));
  // A literal length that runs past the block.
  assert.throws(() => lz4DecompressBlock(Uint8Array.from([0xf0, 0xff, 0xff, 0x01]), 1000), codecError(/LZ4/));
});

test('the announced length is checked before anything is allocated', () => {
  const bomb = Uint8Array.from([0xff, 0xff, 0xff, 0xff, 0x1f, 0, 0, 0, 0, 0]);
  assert.throws(() => decompressBody(bomb), (error) => error.kind === 'codec' && error.tooLarge === true);
  const body = compressBody(new Uint8Array(1000));
  assert.throws(() => decompressBody(body, 999), (error) => error.tooLarge === true);
  assert.equal(decompressBody(body, 1000).length, 1000);
  assert.throws(() => decompressBody(Uint8Array.from([1, 0])), codecError(/no room for its length/));
});

test('maybeCompress: only at the threshold and only when smaller', () => {
  const body = new Uint8Array(100);
  assert.equal(maybeCompress({ opcode: 1, body }, null).flags, undefined);
  assert.equal(maybeCompress({ opcode: 1, body }, 101).body, body);
  const compressed = maybeCompress({ opcode: 1, flags: Flags.RESPONSE, body }, 100);
  assert.equal(compressed.flags, Flags.RESPONSE | Flags.COMPRESSED);
  assert.deepEqual(decompressBody(compressed.body), body);
  const random = noise(100);
  assert.equal(maybeCompress({ opcode: 1, body: random }, 0).body, random);
  assert.throws(() => packet(0x0002, {}, { compress: 'no' }), TypeError);
  assert.equal(packet(0x0002, {}, { compress: false }).compress, false);
  assert.equal(Echo.compress, true);
});

/** A WebSocket stand-in (as in client.test.js): records what the client sends; the test plays the server. */
class FakeSocket {
  static last = null;

  constructor(url, protocols) {
    this.url = url;
    this.protocols = protocols;
    this.readyState = 0;
    this.sent = [];
    FakeSocket.last = this;
    queueMicrotask(() => {
      this.readyState = 1;
      this.onopen?.({});
    });
  }

  send(data) {
    if (this.readyState !== 1) throw new Error('not open');
    this.sent.push(decodeFrame(new Uint8Array(data)));
  }

  close(code) {
    if (this.readyState > 1) return;
    this.readyState = 2;
    setTimeout(() => {
      this.readyState = 3;
      this.onclose?.({ code, reason: '' });
    }, 1);
  }

  receive(frame) {
    this.onmessage?.({ data: encodeFrame(frame).slice().buffer });
  }
}

test('the client decodes compressed answers and pushes, and sends compressed by its threshold', async () => {
  const client = await Client.connect('ws://fake/ws', { WebSocket: FakeSocket, keepaliveInterval: 0, compress: 32 });
  const socket = FakeSocket.last;
  const payload = text('x'.repeat(500));
  const answer = client.request(Echo, { payload });
  const [request] = socket.sent;
  assert.equal(request.flags, Flags.COMPRESSED);
  assert.deepEqual(Echo.decode(decompressBody(request.body)), { payload });
  socket.receive({ opcode: 1, flags: Flags.RESPONSE | Flags.COMPRESSED, requestId: request.requestId, body: compressBody(Echo.encode({ payload })) });
  assert.deepEqual(await answer, { payload });
  const pushed = new Promise((resolve) => client.on(Echo, (value, frame) => resolve({ value, frame })));
  socket.receive({ opcode: 1, flags: Flags.COMPRESSED, body: compressBody(Echo.encode({ payload })) });
  const { value, frame } = await pushed;
  assert.deepEqual(value, { payload });
  assert.equal(frame.flags, 0, 'the handler sees the frame decompressed');
  // Below the threshold, and an opt-out type: plain.
  client.send(Echo, { payload: text('short') });
  client.send(packet(0x0001, { payload: bytes }, { compress: false }), { payload });
  assert.deepEqual(socket.sent.slice(1).map((f) => f.flags), [0, 0]);
  await client.close();
});

test('the client answers a bomb with DISCONNECT FRAME_TOO_LARGE and a corrupt block with MALFORMED', async () => {
  for (const [body, reason] of [
    [Uint8Array.from([0xff, 0xff, 0xff, 0x7f, 0x1f, 0, 0, 0, 0, 0]), DisconnectReason.FRAME_TOO_LARGE],
    [Uint8Array.from([50, 0, 0, 0, 0xf0, 0xff, 0x01]), DisconnectReason.MALFORMED],
  ]) {
    const errors = [];
    const client = await Client.connect('ws://fake/ws', { WebSocket: FakeSocket, keepaliveInterval: 0, onError: (e) => errors.push(e) });
    const socket = FakeSocket.last;
    socket.receive({ opcode: 1, flags: Flags.COMPRESSED, body });
    const disconnect = socket.sent.find((f) => f.opcode === SystemOpcode.DISCONNECT);
    assert.ok(disconnect, 'a DISCONNECT');
    assert.equal(disconnect.body[0] | (disconnect.body[1] << 8), reason);
    await client.closed;
  }
});
