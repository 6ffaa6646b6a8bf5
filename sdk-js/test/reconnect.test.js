// Keepalive, reconnect, backoff, the outbound buffer's bound and the state
// events, against a scripted WebSocket, on Node's mock clock (no real waits).

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Client, TernioError, Flags, SystemOpcode, DisconnectReason, encodeFrame, packet, bytes, u32 } from '../dist/index.js';

import { FakeSocket } from './fake-socket.js';

const Echo = packet(0x0001, { payload: bytes }, { name: 'Echo' });
const Note = packet(0x0061, { seq: u32 }, { name: 'Note' });
const text = (s) => new TextEncoder().encode(s);
/** Lets queued microtasks and I/O callbacks run (setImmediate is not mocked). */
const settle = () => new Promise((resolve) => setImmediate(resolve));

function disconnectFrame(reason, message = '') {
  const t = text(message);
  return encodeFrame({ opcode: SystemOpcode.DISCONNECT, body: Uint8Array.of(reason & 0xff, reason >> 8, ...t) });
}

function echoReply(socket, frame) {
  socket.receive(encodeFrame({ opcode: frame.opcode, flags: Flags.RESPONSE, requestId: frame.requestId, body: frame.body }));
}

/**
 * A client on the mock clock, with Math.random fixed, recording its state
 * events. Resumption is off: these are reconnects that start new sessions
 * (resume.test.js has the resumed ones).
 */
async function setup(t, options = {}, random = 0.5) {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  t.mock.method(Math, 'random', () => random);
  FakeSocket.all = [];
  FakeSocket.mode = 'open';
  const events = [];
  const errors = [];
  const client = await Client.connect('ws://test/ws', {
    WebSocket: FakeSocket, resume: false, onError: (e) => errors.push(e), onStateChange: (e) => events.push(e), ...options,
  });
  return { client, events, errors };
}

/** Advances the mock clock by `ms`, letting the client react. */
async function advance(t, ms) {
  t.mock.timers.tick(ms);
  await settle();
}

const RECONNECT = { initialDelay: 100, maxDelay: 1000, multiplier: 2, refusalDelay: 3000, healthyAfter: 2000, maxAttempts: 10 };

test('keepalive: a PING after the interval, the next after its PONG; no PONG in time drops the connection', async (t) => {
  const { client, events } = await setup(t, { keepaliveInterval: 1000, keepaliveTimeout: 500 });
  const socket = FakeSocket.last;
  await advance(t, 999);
  assert.equal(socket.sent.length, 0);
  await advance(t, 1);
  const [ping] = socket.frames();
  assert.equal(ping.opcode, SystemOpcode.PING);
  assert.notEqual(ping.requestId, 0);
  assert.equal(client.inFlight, 0, 'the keepalive PING is not a request of the application');
  socket.receive(encodeFrame({ opcode: SystemOpcode.PONG, flags: Flags.RESPONSE, requestId: ping.requestId, body: ping.body }));
  await advance(t, 999);
  assert.equal(socket.sent.length, 1, 'the next PING waits a whole interval after the PONG');
  await advance(t, 1);
  assert.equal(socket.sent.length, 2);
  // A half-open connection: nothing comes back.
  await advance(t, 499);
  assert.ok(client.isOpen);
  await advance(t, 1);
  assert.ok(!client.isOpen);
  assert.equal(socket.closedWith, 1000, 'the dead WebSocket is closed, not waited for');
  assert.deepEqual(await client.closed, { code: 1006, reason: 'keepalive timeout', disconnect: null, local: true });
  assert.equal(events.at(-1).state, 'closed');
  assert.match(events.at(-1).error.message, /no PONG to the keepalive PING within 500 ms/);
});

test('keepalive timeout with reconnect: a new connection', async (t) => {
  const { client, events } = await setup(t, { keepaliveInterval: 1000, keepaliveTimeout: 500, reconnect: RECONNECT });
  await advance(t, 1000);
  await advance(t, 500);
  assert.equal(client.state, 'reconnecting');
  assert.deepEqual(events.map((e) => e.state), ['open', 'reconnecting']);
  assert.match(events[1].error.message, /keepalive/);
  await advance(t, events[1].delay);
  assert.equal(FakeSocket.all.length, 2);
  assert.ok(client.isOpen);
  assert.deepEqual(events.at(-1), { state: 'open', attempt: 1 });
  await client.close();
});

test('backoff: full jitter, growing while connections die young, reset only after healthyAfter', async (t) => {
  const { client, events } = await setup(t, { reconnect: RECONNECT, keepaliveInterval: 0 }, 0.75);
  const delays = () => events.filter((e) => e.state === 'reconnecting').map((e) => [e.attempt, e.delay]);
  // Accepted and dropped at once, five times: the attempt count keeps growing.
  for (let i = 0; i < 5; i++) {
    FakeSocket.last.drop(1006);
    await settle();
    await advance(t, events.at(-1).delay);
    assert.ok(client.isOpen);
    await advance(t, 1999); // not quite healthy
  }
  // full jitter: random 0.75 of min(100 * 2^(n-1), 1000)
  assert.deepEqual(delays(), [[1, 75], [2, 150], [3, 300], [4, 600], [5, 750]]);
  assert.deepEqual(events.filter((e) => e.state === 'open').map((e) => e.attempt), [0, 1, 2, 3, 4, 5]);
  // This one stays up for healthyAfter: the next loss starts again at attempt 1.
  await advance(t, 1);
  FakeSocket.last.drop(1006);
  await settle();
  assert.deepEqual(delays().at(-1), [1, 75]);
  t.mock.method(Math, 'random', () => 0);
  await advance(t, 75);
  FakeSocket.last.drop(1006);
  await settle();
  assert.deepEqual(delays().at(-1), [2, 0], 'full jitter goes down to 0');
  await client.close();
});

test('after TOO_MANY_CONNECTIONS or SHUTDOWN the delay is at least refusalDelay; other reasons have no floor', async (t) => {
  const { client, events } = await setup(t, { reconnect: RECONNECT, keepaliveInterval: 0 }, 0);
  const last = () => events.at(-1);
  FakeSocket.last.receive(disconnectFrame(DisconnectReason.TOO_MANY_CONNECTIONS, 'full'));
  assert.equal(last().state, 'reconnecting', 'no need to wait for the server to close');
  assert.equal(last().delay, 3000);
  assert.equal(last().error.disconnect.reasonName, 'TOO_MANY_CONNECTIONS');
  await advance(t, 2999);
  assert.equal(FakeSocket.all.length, 1, 'nothing before the floor');
  await advance(t, 1);
  assert.equal(FakeSocket.all.length, 2);
  // The accept-then-refuse server: refused again and again, never faster than the floor.
  t.mock.method(Math, 'random', () => 0.999);
  FakeSocket.last.receive(disconnectFrame(DisconnectReason.TOO_MANY_CONNECTIONS));
  assert.equal(last().attempt, 2);
  assert.ok(last().delay >= 3000 && last().delay < 6000, `${last().delay}: the floor, plus up to as much again`);
  await advance(t, last().delay);
  FakeSocket.last.receive(disconnectFrame(DisconnectReason.SHUTDOWN));
  assert.equal(last().attempt, 3);
  assert.ok(last().delay >= 3000);
  await advance(t, last().delay);
  FakeSocket.last.receive(disconnectFrame(DisconnectReason.IDLE_TIMEOUT));
  assert.equal(last().attempt, 4);
  assert.ok(last().delay < 800, `${last().delay}: full jitter only`);
  await client.close();
});

test('no reconnect after close(), DISCONNECT KICKED or NORMAL, nor when the first connect fails', async (t) => {
  const { client, events } = await setup(t, { reconnect: RECONNECT, keepaliveInterval: 0 });
  // For contrast: a dropped connection is re-established.
  FakeSocket.last.drop(1006);
  await settle();
  await advance(t, events.at(-1).delay);
  assert.equal(FakeSocket.all.length, 2);
  assert.ok(client.isOpen);
  await client.close();
  await advance(t, 60_000);
  assert.equal(FakeSocket.all.length, 2);
  assert.deepEqual(events.map((e) => e.state), ['open', 'reconnecting', 'open', 'closed']);
  assert.equal(events.at(-1).info.local, true);

  for (const reason of [DisconnectReason.KICKED, DisconnectReason.NORMAL]) {
    const other = await Client.connect('ws://test/ws', { WebSocket: FakeSocket, reconnect: RECONNECT, keepaliveInterval: 0 });
    const before = FakeSocket.all.length;
    const socket = FakeSocket.last;
    socket.receive(disconnectFrame(reason, 'bye'));
    socket.drop(1000);
    const info = await other.closed;
    assert.equal(info.disconnect.reason, reason);
    assert.equal(other.state, 'closed');
    await advance(t, 60_000);
    assert.equal(FakeSocket.all.length, before, `no new connection after ${info.disconnect.reasonName}`);
  }

  FakeSocket.mode = 'refuse';
  const refused = new Client({ WebSocket: FakeSocket, reconnect: RECONNECT });
  await assert.rejects(refused.connect('ws://test/ws'), (e) => e.kind === 'closed');
  const before = FakeSocket.all.length;
  await advance(t, 60_000);
  assert.equal(FakeSocket.all.length, before);
  assert.equal(refused.state, 'closed');
});

test('a server that breaks the contract gets DISCONNECT MALFORMED; the client reconnects', async (t) => {
  const { client, events } = await setup(t, { reconnect: RECONNECT, keepaliveInterval: 0 });
  const socket = FakeSocket.last;
  const inFlight = client.request(Echo, { payload: text('a') });
  const rejected = assert.rejects(inFlight, (e) => e.kind === 'protocol' && /server broke the protocol: text message/.test(e.message));
  socket.onmessage({ data: 'text' });
  await rejected;
  const disconnect = socket.frames()[1];
  assert.equal(disconnect.opcode, SystemOpcode.DISCONNECT);
  assert.deepEqual(disconnect.body.subarray(0, 2), Uint8Array.of(DisconnectReason.MALFORMED, 0));
  assert.equal(socket.closedWith, 1000);
  assert.equal(events.at(-1).state, 'reconnecting');
  assert.equal(events.at(-1).error.kind, 'protocol');
  await advance(t, events.at(-1).delay);
  assert.ok(client.isOpen);
  assert.equal(FakeSocket.all.length, 2);
  await client.close();
});

test('requests in flight fail at once; requests made while reconnecting wait for the new connection within their timeout', async (t) => {
  const { client, events } = await setup(t, { reconnect: RECONNECT, keepaliveInterval: 0, timeout: 5000 });
  const first = FakeSocket.last;
  const inFlight = client.request(Echo, { payload: text('a') });
  const rejected = assert.rejects(inFlight, (e) => e instanceof TernioError && e.kind === 'closed'
    && /close code 1006.*in flight.*reconnects/.test(e.message));
  first.drop(1006);
  await rejected;
  assert.equal(client.state, 'reconnecting');
  assert.equal(client.isOpen, false);
  assert.throws(() => client.send(Echo, { payload: text('x') }), (e) => e.kind === 'closed' && /reconnecting/.test(e.message));

  const waiting = client.request(Echo, { payload: text('b') });
  const ping = client.ping();
  const tooLate = assert.rejects(client.request(Echo, { payload: text('c') }, { timeout: 50 }),
    (e) => e.kind === 'timeout' && /no response to Echo within 50 ms \(it waited for a new connection\)/.test(e.message));
  assert.equal(client.inFlight, 3);
  await advance(t, 50);
  await tooLate;
  await advance(t, events.at(-1).delay);
  const second = FakeSocket.last;
  assert.notEqual(second, first);
  const [echo, pingFrame] = second.frames();
  assert.deepEqual(Echo.decode(echo.body), { payload: text('b') }, 'sent on the new connection, in order');
  echoReply(second, echo);
  second.receive(encodeFrame({ opcode: SystemOpcode.PONG, flags: Flags.RESPONSE, requestId: pingFrame.requestId, body: pingFrame.body }));
  assert.deepEqual(await waiting, { payload: text('b') });
  assert.equal(typeof await ping, 'number');
  await client.close();
});

test('pushes reach their handlers across reconnects', async (t) => {
  const { client, events } = await setup(t, { reconnect: RECONNECT, keepaliveInterval: 0 });
  const seen = [];
  client.on(Note, (note) => seen.push(note.seq));
  FakeSocket.last.receive(encodeFrame({ opcode: Note.opcode, body: Note.encode({ seq: 1 }) }));
  FakeSocket.last.receive(disconnectFrame(DisconnectReason.SHUTDOWN));
  await advance(t, events.at(-1).delay);
  assert.equal(FakeSocket.all.length, 2);
  FakeSocket.last.receive(encodeFrame({ opcode: Note.opcode, body: Note.encode({ seq: 2 }) }));
  assert.deepEqual(seen, [1, 2]);
  await client.close();
});

test('the outbound buffer is bounded: a frame past bufferedAmount\'s limit drops the connection', async (t) => {
  const { client, events } = await setup(t, { reconnect: RECONNECT, keepaliveInterval: 0, maxBufferedBytes: 1000 });
  const socket = FakeSocket.last;
  const sent = client.request(Echo, { payload: new Uint8Array(100) });
  socket.bufferedAmount = 900; // the server stopped reading
  const rejectedSent = assert.rejects(sent, (e) => e.kind === 'closed' && /in flight/.test(e.message));
  await assert.rejects(client.request(Echo, { payload: new Uint8Array(100) }),
    (e) => e.kind === 'closed' && /outbound buffer full: 900 bytes wait to be sent, 108 more would pass the limit of 1000/.test(e.message));
  await rejectedSent;
  assert.equal(socket.sent.length, 1, 'the frame over the limit was not sent');
  assert.equal(socket.closedWith, 1000);
  assert.equal(events.at(-1).state, 'reconnecting');
  assert.match(events.at(-1).error.message, /outbound buffer full/);
  // While reconnecting, the same bound holds for what waits.
  const waiting = client.request(Echo, { payload: new Uint8Array(900) });
  await assert.rejects(client.request(Echo, { payload: new Uint8Array(100) }),
    (e) => e.kind === 'closed' && /already wait for the new connection/.test(e.message));
  await advance(t, events.at(-1).delay);
  const [frame] = FakeSocket.last.frames();
  echoReply(FakeSocket.last, frame);
  assert.equal((await waiting).payload.length, 900);
  // Without reconnect, the client closes.
  const other = await Client.connect('ws://test/ws', { WebSocket: FakeSocket, keepaliveInterval: 0, maxBufferedBytes: 1000 });
  FakeSocket.last.bufferedAmount = 995;
  assert.throws(() => other.send(Echo, { payload: new Uint8Array(0) }), /outbound buffer full/);
  assert.deepEqual(await other.closed, { code: 1006, reason: 'outbound buffer full', disconnect: null, local: true });
  await client.close();
});

test('a connection attempt that never opens fails after connectTimeout; maxAttempts ends the client', async (t) => {
  const { client, events } = await setup(t, { reconnect: { ...RECONNECT, maxAttempts: 3 }, keepaliveInterval: 0, connectTimeout: 1000, timeout: 0 }, 0);
  FakeSocket.mode = 'hang';
  FakeSocket.last.drop(1006);
  await settle();
  const waiting = client.request(Echo, { payload: text('x') });
  const gaveUp = assert.rejects(waiting, (e) => e.kind === 'closed' && /gave up reconnecting after 3 attempts/.test(e.message));
  for (let attempt = 1; attempt <= 3; attempt++) {
    await advance(t, 0); // random 0: no delay
    assert.equal(FakeSocket.all.length, attempt + 1, `attempt ${attempt} started`);
    await advance(t, 999);
    assert.equal(client.state, 'reconnecting');
    await advance(t, 1);
  }
  assert.deepEqual(events.filter((e) => e.state === 'reconnecting').map((e) => e.attempt), [1, 2, 3]);
  assert.match(events[2].error.message, /could not connect to ws:\/\/test\/ws within 1000 ms/);
  assert.equal(client.state, 'closed');
  await gaveUp;
  assert.equal((await client.closed).code, 1006);
  assert.equal(events.at(-1).state, 'closed');

  // The first connection is bounded too.
  const slow = new Client({ WebSocket: FakeSocket, connectTimeout: 500 });
  const connecting = assert.rejects(slow.connect('ws://test/ws'), /within 500 ms/);
  await advance(t, 500);
  await connecting;
});

test('close() while reconnecting ends at once and rejects what waits', async (t) => {
  const { client, events } = await setup(t, { reconnect: RECONNECT, keepaliveInterval: 0 });
  FakeSocket.last.drop(1006);
  await settle();
  const waiting = client.request(Echo, { payload: text('x') });
  const info = await client.close();
  assert.deepEqual(info, { code: 1000, reason: '', disconnect: null, local: true });
  await assert.rejects(waiting, /closed by the client/);
  await advance(t, 60_000);
  assert.equal(FakeSocket.all.length, 1);
  assert.deepEqual(events.map((e) => e.state), ['open', 'reconnecting', 'closed']);
});

test('reconnect options are checked', () => {
  assert.throws(() => new Client({ reconnect: { initialDelay: -1 } }), /reconnect.initialDelay/);
  assert.throws(() => new Client({ reconnect: { maxAttempts: 'many' } }), /reconnect.maxAttempts/);
});

test('streams: a 5-byte STREAM_CREDIT is a grant; STREAM_ITEMS on a stream that did not accept batches is MALFORMED', async (t) => {
  const NumberItem = packet(0x0005, { value: u32 }, { name: 'Number' });
  const CountTo = packet(0x0004, { count: u32 }, { name: 'CountTo', item: NumberItem });
  const AddUp = packet(0x0006, {}, { name: 'AddUp', item: NumberItem });
  const { client } = await setup(t, { reconnect: RECONNECT, keepaliveInterval: 0 });
  const socket = FakeSocket.last;
  // An upload: its 32 initial items, then a credit of 2 with the fifth byte (batches: 1).
  const upload = client.upload(AddUp, {});
  await settle();
  const request = socket.frames().find((f) => f.opcode === AddUp.opcode);
  for (let i = 0; i < 32; i++) await upload.send({ value: i });
  const sending = upload.send({ value: 32 });
  await settle();
  const credit = Uint8Array.of(2, 0, 0, 0, 1);
  socket.receive(encodeFrame({ opcode: SystemOpcode.STREAM_CREDIT, requestId: request.requestId, body: credit }));
  await sending;
  assert.equal(socket.frames().filter((f) => f.opcode === SystemOpcode.STREAM_ITEM).length, 33);
  assert.equal(socket.closedWith, null, 'the connection stays up');
  // A download: a batch the client never accepted closes the connection MALFORMED.
  const download = client.requestStream(CountTo, { count: 3 })[Symbol.asyncIterator]();
  const first = download.next();
  await settle();
  const ask = socket.frames().find((f) => f.opcode === CountTo.opcode);
  const batch = Uint8Array.of(4, 1, 0, 0, 0);
  socket.receive(encodeFrame({ opcode: SystemOpcode.STREAM_ITEMS, requestId: ask.requestId, body: batch }));
  await assert.rejects(first, (e) => e.kind === 'protocol' || e.kind === 'closed');
  const disconnect = socket.frames().find((f) => f.opcode === SystemOpcode.DISCONNECT);
  assert.ok(disconnect, 'a DISCONNECT');
  assert.equal(disconnect.body[0], DisconnectReason.MALFORMED);
  await client.close();
});
