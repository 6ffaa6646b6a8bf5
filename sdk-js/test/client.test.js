// The Client against a scripted WebSocket: what it sends, byte for byte
// (the vectors of docs/PROTOCOL.md), and how it takes what a server sends.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import {
  Client, TernioError, Flags, SystemOpcode, ErrorCode, encodeFrame, decodeFrame,
  packet, bytes, u32, i64, u64, string, SUBPROTOCOL,
} from '../dist/index.js';

const DOC = readFileSync(new URL('../../docs/PROTOCOL.md', import.meta.url), 'utf8');

/** The bytes of a documented vector. */
function vector(name) {
  const block = DOC.split(`vector: ${name}\n`)[1].split('```')[0];
  return Uint8Array.from(block.split(/\s+/).filter(Boolean).map((b) => parseInt(b, 16)));
}

/** A documented TCP vector as a WebSocket message (its length prefix stripped). */
const message = (name) => vector(name).subarray(4);

/** A WebSocket stand-in: records what the client sends; the test plays the server. */
class FakeSocket {
  static last = null;

  constructor(url, protocols) {
    this.url = url;
    this.protocols = protocols;
    this.readyState = 0;
    this.sent = [];
    this.closedWith = null;
    FakeSocket.last = this;
    queueMicrotask(() => {
      if (this.constructor.refuse === 'error only') return this.onerror?.({}); // as Node 20 does
      if (this.constructor.refuse) return this.drop(1006);
      this.readyState = 1;
      this.onopen?.({});
    });
  }

  send(data) {
    if (this.readyState !== 1) throw new Error('not open');
    this.sent.push(new Uint8Array(data));
  }

  close(code) {
    this.closedWith = code;
    if (this.readyState > 1) return;
    this.readyState = 2;
    setTimeout(() => this.drop(code), 1);
  }

  /** The server sends one message. */
  receive(data) {
    const copy = data instanceof Uint8Array ? data.slice().buffer : data;
    this.onmessage?.({ data: copy });
  }

  /** The connection ends with this close code. */
  drop(code = 1006) {
    if (this.readyState === 3) return;
    this.readyState = 3;
    this.onclose?.({ code, reason: '' });
  }

  frames() {
    return this.sent.map((m) => decodeFrame(m));
  }
}

const Echo = packet(0x0001, { payload: bytes }, { name: 'Echo' });
const Sum = packet(0x0011, { value: i64 }, { name: 'Sum' });
const Add = packet(0x0010, { a: i64, b: i64 }, { name: 'Add', response: Sum });
const Bump = packet(0x0040, { by: u64 }, { name: 'Bump' });
const Unhandled = packet(0x0099, {}, { name: 'Unhandled' });
const Note = packet(0x0061, { seq: u32 }, { name: 'Note' });
const text = (s) => new TextEncoder().encode(s);
const ignore = (promise) => promise.catch(() => {});
const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

async function connect(options = {}) {
  const errors = [];
  const client = await Client.connect('ws://test/ws', { WebSocket: FakeSocket, onError: (e) => errors.push(e), ...options });
  return { client, socket: FakeSocket.last, errors };
}

function reply(socket, request, { opcode = request.opcode, flags = Flags.RESPONSE, body = new Uint8Array(0) } = {}) {
  socket.receive(encodeFrame({ opcode, flags, requestId: request.requestId, body }));
}

test('connect offers ternio.v2 and asks for ArrayBuffers', async () => {
  const { client, socket } = await connect();
  assert.equal(socket.url, 'ws://test/ws');
  assert.equal(SUBPROTOCOL, 'ternio.v2');
  assert.equal(socket.protocols, SUBPROTOCOL);
  assert.equal(socket.binaryType, 'arraybuffer');
  assert.ok(client.isOpen);
});

test('connect fails with a closed TernioError', async () => {
  class Refused extends FakeSocket {
    static refuse = true;
  }
  const client = new Client({ WebSocket: Refused });
  await assert.rejects(client.connect('ws://nowhere/ws'), (e) => e instanceof TernioError && e.kind === 'closed');
  assert.equal((await client.closed).code, 1006);
  class ErrorOnly extends FakeSocket {
    static refuse = 'error only';
  }
  const other = new Client({ WebSocket: ErrorOnly });
  await assert.rejects(other.connect('ws://nowhere/ws'), (e) => e instanceof TernioError && e.kind === 'closed');
  assert.equal((await other.closed).code, 1006);
  await assert.rejects(new Client({ WebSocket: {} }).connect('ws://x/ws'), /no WebSocket/);
});

test('a request is the documented bytes; its response resolves it', async () => {
  const { client, socket } = await connect();
  const promise = client.request(Echo, { payload: text('ping') });
  assert.deepEqual(socket.sent[0], vector('echo-request-message'));
  socket.receive(message('echo-response'));
  assert.deepEqual(await promise, { payload: text('ping') });
  assert.equal(client.inFlight, 0);
});

test('responses match by id, in any order, with their own packet type', async () => {
  const { client, socket } = await connect();
  const first = client.request(Add, { a: 2n, b: 3n });
  const second = client.request(Add, { a: 10n, b: -1n });
  const [a, b] = socket.frames();
  assert.notEqual(a.requestId, b.requestId);
  reply(socket, b, { opcode: Sum.opcode, body: Sum.encode({ value: 9n }) });
  reply(socket, a, { opcode: Sum.opcode, body: Sum.encode({ value: 5n }) });
  assert.deepEqual(await first, { value: 5n });
  assert.deepEqual(await second, { value: 9n });
});

test('ids are unique among requests in flight', async () => {
  const { client, socket } = await connect();
  const promises = Array.from({ length: 1000 }, (_, i) => client.request(Echo, { payload: text(String(i)) }));
  const ids = socket.frames().map((f) => f.requestId);
  assert.equal(new Set(ids).size, 1000);
  assert.ok(!ids.includes(0));
  for (const frame of socket.frames()) reply(socket, frame, { body: frame.body });
  const answers = await Promise.all(promises);
  answers.forEach((answer, i) => assert.deepEqual(answer.payload, text(String(i))));
});

test('vector ack: an acknowledgement resolves to undefined', async () => {
  const { client, socket } = await connect();
  const promises = Array.from({ length: 5 }, () => client.request(Bump, { by: 1n }));
  socket.receive(message('ack')); // id 5
  assert.equal(await promises[4], undefined);
  assert.equal(client.inFlight, 4);
  promises.slice(0, 4).forEach(ignore);
  await client.close();
});

test('vector error-unknown-opcode: a remote TernioError with code and message', async () => {
  const { client, socket } = await connect();
  ignore(client.request(Echo, { payload: text('') })); // id 1
  const promise = client.request(Unhandled, {}); // id 2
  assert.deepEqual(socket.frames()[1], { opcode: 0x0099, flags: 0, requestId: 2, body: new Uint8Array(0) });
  socket.receive(message('error-unknown-opcode'));
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof TernioError);
    assert.equal(e.kind, 'remote');
    assert.equal(e.code, ErrorCode.UNKNOWN_OPCODE);
    assert.equal(e.remoteMessage, 'no handler');
    assert.equal(e.message, 'UNKNOWN_OPCODE 1: no handler');
    return true;
  });
  await client.close();
});

test('an error without id goes to onError; error text is read lossily', async () => {
  const { client, socket, errors } = await connect();
  client.send(Unhandled, {});
  assert.deepEqual(socket.frames()[0], { opcode: 0x0099, flags: 0, requestId: 0, body: new Uint8Array(0) });
  socket.receive(encodeFrame({ opcode: 0x0099, flags: Flags.RESPONSE | Flags.ERROR, body: Uint8Array.of(101, 0, 0xff) }));
  assert.equal(errors.length, 1);
  assert.equal(errors[0].code, 101);
  assert.equal(errors[0].remoteMessage, '\ufffd');
});

test('timeouts reject and CANCEL the request on the server; a late answer is ignored', async () => {
  const { client, socket } = await connect({ timeout: 20 });
  const promise = client.request(Echo, { payload: text('slow') });
  await assert.rejects(promise, (e) => e.kind === 'timeout' && e.timeout === 20 && /within 20 ms/.test(e.message));
  assert.equal(client.inFlight, 0);
  const [slow, cancel] = socket.frames();
  assert.equal(cancel.opcode, SystemOpcode.CANCEL);
  assert.deepEqual(cancel.body, u32.encode(slow.requestId));
  reply(socket, slow, { body: Echo.encode({ payload: text('slow') }) });
  const quick = client.request(Echo, { payload: text('x') }, { timeout: 1000 });
  reply(socket, socket.frames()[2], { body: Echo.encode({ payload: text('x') }) });
  assert.deepEqual(await quick, { payload: text('x') });
});

test('a response that does not decode, or under another opcode, rejects the request', async () => {
  const { client, socket } = await connect();
  const bad = client.request(Echo, { payload: text('x') });
  reply(socket, socket.frames()[0], { body: Uint8Array.of(5) });
  await assert.rejects(bad, (e) => e.kind === 'codec' && /^Echo\.payload: length 5/.test(e.message));
  const other = client.request(Echo, { payload: text('x') });
  reply(socket, socket.frames()[1], { opcode: 0x0042, body: Uint8Array.of(1) });
  await assert.rejects(other, (e) => e.kind === 'protocol' && /unexpected opcode 0x0042/.test(e.message));
  await assert.rejects(client.request(Echo, { payload: 'not bytes' }), (e) => e.kind === 'codec');
  assert.equal(socket.sent.length, 2, 'a value that does not encode sends nothing');
});

test('pushes: by opcode, decoded, unsubscribe, unhandled ones counted', async () => {
  const { client, socket, errors } = await connect();
  const seen = [];
  const off = client.on(Note, (note, frame) => seen.push([note.seq, frame.requestId]));
  const raw = [];
  const offRaw = client.on(0x0061, (body) => raw.push(body));
  socket.receive(encodeFrame({ opcode: Note.opcode, body: Note.encode({ seq: 7 }) }));
  assert.deepEqual(seen, [[7, 0]]);
  assert.deepEqual(raw, [Uint8Array.of(7, 0, 0, 0)]);
  off();
  offRaw();
  socket.receive(encodeFrame({ opcode: Note.opcode, body: Note.encode({ seq: 8 }) }));
  assert.equal(seen.length, 1);
  assert.equal(client.unhandledPushes, 1);

  // The documented push, to a handler of its type.
  const Sample = packet(0x0123, {}, { name: 'Sample' });
  client.on(Sample, () => {});
  socket.receive(message('sample-push'));
  assert.equal(errors.length, 1, 'a push that does not decode goes to onError');
  assert.match(errors[0].message, /^Sample: \d+ trailing bytes/);

  // A throwing handler does not stop the others, nor the client.
  client.on(Note, () => { throw new Error('boom'); });
  client.on(Note, async () => { throw new Error('async boom'); });
  client.on(Note, (note) => seen.push([note.seq, 'after']));
  socket.receive(encodeFrame({ opcode: Note.opcode, body: Note.encode({ seq: 9 }) }));
  await tick();
  assert.deepEqual(seen.at(-1), [9, 'after']);
  assert.deepEqual(errors.slice(1).map((e) => e.message), ['boom', 'async boom']);
  assert.equal(client.unhandledPushes, 1);
});

test('vector ping: the client answers a PING with the documented PONG', async () => {
  const { socket } = await connect();
  socket.receive(message('ping'));
  assert.deepEqual(socket.sent[0], message('pong'));
  socket.receive(encodeFrame({ opcode: SystemOpcode.PING, body: u64.encode(1n) }));
  assert.equal(socket.sent.length, 1, 'a PING with id 0 gets no PONG');
});

test('ping() measures the round trip to the PONG', async () => {
  const { client, socket } = await connect();
  const promise = client.ping();
  const [ping] = socket.frames();
  assert.equal(ping.opcode, SystemOpcode.PING);
  assert.equal(ping.body.length, 8);
  assert.ok(Math.abs(Number(u64.decode(ping.body)) - Date.now()) < 5000, 'a timestamp');
  reply(socket, ping, { opcode: SystemOpcode.PONG, body: ping.body });
  const ms = await promise;
  assert.equal(typeof ms, 'number');
  assert.ok(ms >= 0);
});

test('the client answers requests it has no handler for with UNKNOWN_OPCODE', async () => {
  const { socket } = await connect();
  socket.receive(encodeFrame({ opcode: 0x0300, requestId: 9, body: Uint8Array.of(1) }));
  const [answer] = socket.frames();
  assert.deepEqual({ ...answer, body: answer.body.subarray(0, 2) },
    { opcode: 0x0300, flags: Flags.RESPONSE | Flags.ERROR, requestId: 9, body: Uint8Array.of(1, 0) });
});

test('vector disconnect: pending requests reject at once with the reason', async () => {
  const { client, socket } = await connect();
  const promise = client.request(Echo, { payload: text('x') });
  socket.receive(message('disconnect'));
  await assert.rejects(promise, (e) => {
    assert.equal(e.kind, 'closed');
    assert.deepEqual(e.disconnect, { reason: 4, reasonName: 'FRAME_TOO_LARGE', message: 'too big' });
    assert.equal(e.message, 'server disconnected: FRAME_TOO_LARGE (4): too big');
    return true;
  });
  assert.ok(!client.isOpen);
  await assert.rejects(client.request(Echo, { payload: text('y') }), (e) => e.kind === 'closed' && e.disconnect.reason === 4);
  assert.throws(() => client.send(Echo, { payload: text('z') }), (e) => e.kind === 'closed');
  socket.drop(1009);
  assert.deepEqual(await client.closed, {
    code: 1009, reason: '', local: false,
    disconnect: { reason: 4, reasonName: 'FRAME_TOO_LARGE', message: 'too big' },
  });
});

test('a dropped connection rejects every pending request', async () => {
  const { client, socket } = await connect({ timeout: 0 });
  const promises = [client.request(Echo, { payload: text('a') }), client.ping()];
  socket.drop(1006);
  for (const promise of promises) {
    await assert.rejects(promise, (e) => e.kind === 'closed' && e.disconnect === null && /close code 1006/.test(e.message));
  }
  assert.deepEqual(await client.closed, { code: 1006, reason: '', local: false, disconnect: null });
});

test('close() sends DISCONNECT NORMAL, then closes with 1000', async () => {
  const { client, socket } = await connect();
  const promise = client.request(Echo, { payload: text('a') });
  const closed = client.close('bye');
  await assert.rejects(promise, (e) => e.kind === 'closed' && /closed by the client/.test(e.message));
  const [, disconnect] = socket.frames();
  assert.deepEqual(disconnect, { opcode: SystemOpcode.DISCONNECT, flags: 0, requestId: 0, body: Uint8Array.of(1, 0, ...text('bye')) });
  assert.equal(socket.closedWith, 1000);
  assert.deepEqual(await closed, { code: 1000, reason: '', local: true, disconnect: null });
  assert.equal(await client.close(), await closed, 'a second close() changes nothing');
  assert.equal(socket.sent.length, 2);
});

test('a server that breaks the contract gets DISCONNECT MALFORMED and a close', async () => {
  for (const bad of ['text', Uint8Array.of(1, 0, 0x08, 0, 0, 0, 0), Uint8Array.of(1, 0),
    encodeFrame({ opcode: 1, flags: Flags.ENCRYPTED | Flags.RESPONSE, requestId: 1 })]) {
    const { client, socket } = await connect();
    const promise = client.request(Echo, { payload: text('a') });
    socket.receive(bad);
    await assert.rejects(promise, (e) => e.kind === 'protocol' && /server broke the protocol/.test(e.message));
    const disconnect = socket.frames()[1];
    assert.equal(disconnect.opcode, SystemOpcode.DISCONNECT);
    assert.deepEqual(disconnect.body.subarray(0, 2), Uint8Array.of(3, 0));
    assert.equal(socket.closedWith, 1000);
    assert.equal((await client.closed).local, true);
  }
});

test('request() and send() refuse what is not a packet type', async () => {
  const { client } = await connect();
  await assert.rejects(client.request({}, {}), TypeError);
  assert.throws(() => client.send(0xff02, new Uint8Array(8)), TypeError, 'system opcodes are not for send()');
  assert.throws(() => client.on(string, () => {}), TypeError);
});
