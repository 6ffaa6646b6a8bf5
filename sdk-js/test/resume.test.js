// Session resumption (docs/PROTOCOL.md section 4.2) for plain sessions,
// against a scripted WebSocket on Node's mock clock (no real waits): the
// wire bytes against the contract's resumption vectors, the ACK schedule,
// the replay buffer and its overflow, ticket rotation, refusals.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import {
  Client, Flags, SystemOpcode, DisconnectReason, ErrorCode, ReplayBuffer, AckSchedule,
  encodeFrame, packet, bytes, u32, u64,
} from '../dist/index.js';

import { FakeSocket } from './fake-socket.js';

const Echo = packet(0x0001, { payload: bytes }, { name: 'Echo' });
const Note = packet(0x0061, { seq: u32 }, { name: 'Note' });
const text = (s) => new TextEncoder().encode(s);
const settle = () => new Promise((resolve) => setImmediate(resolve));

const PROTOCOL = readFileSync(new URL('../../docs/PROTOCOL.md', import.meta.url), 'utf8');

/** Vector `name` of docs/PROTOCOL.md as a WebSocket message: its TCP length prefix checked and removed. */
function vector(name) {
  const block = PROTOCOL.match(new RegExp(`\`\`\`text\\nvector: ${name}\\n([0-9a-f\\s]+)\`\`\``));
  assert.ok(block, `vector ${name} in docs/PROTOCOL.md`);
  const all = Uint8Array.from(block[1].trim().split(/\s+/), (h) => parseInt(h, 16));
  const length = new DataView(all.buffer).getUint32(0, true);
  assert.equal(length, all.length - 4, `vector ${name}: its length prefix`);
  return all.subarray(4);
}

/** A frame with another request id (the vectors' ids are not the ones the client picks). */
function withId(frame, id) {
  const out = frame.slice();
  new DataView(out.buffer).setUint32(3, id, true);
  return out;
}

const range = (from, n) => Uint8Array.from({ length: n }, (_, i) => from + i);
const TICKET = range(0x80, 32);
const NEW_TICKET = range(0xa0, 32);

const RECONNECT = { initialDelay: 100, maxDelay: 1000, healthyAfter: 2000, maxAttempts: 10 };

/** A resuming client on the mock clock (clock at 1,000,000 ms), recording its events. */
async function setup(t, options = {}, random = 0) {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 });
  t.mock.method(Math, 'random', () => random);
  FakeSocket.all = [];
  FakeSocket.mode = 'open';
  const events = [];
  const sessions = [];
  const errors = [];
  const client = await Client.connect('ws://test/ws', {
    WebSocket: FakeSocket,
    reconnect: RECONNECT,
    keepaliveInterval: 0,
    timeout: 0,
    onError: (e) => errors.push(e),
    onStateChange: (e) => events.push(e),
    onSessionChange: (e) => {
      sessions.push(e);
      events.push(e);
    },
    ...options,
  });
  return { client, events, sessions, errors };
}

async function advance(t, ms) {
  t.mock.timers.tick(ms);
  await settle();
}

/** The frames `socket` carried with this opcode. */
const sentWith = (socket, opcode) => socket.frames().filter((f) => f.opcode === opcode);

/**
 * Answers the RESUME_TICKET the client sent on `socket` (the last one), as
 * a server that does not say its replay bound unless `bound` is given.
 */
function grant(socket, ticket = TICKET, ttl = 30_000, bound = null) {
  const ask = sentWith(socket, SystemOpcode.RESUME_TICKET).at(-1);
  const body = new Uint8Array(bound === null ? 36 : 40);
  body.set(ticket);
  new DataView(body.buffer).setUint32(32, ttl, true);
  if (bound !== null) new DataView(body.buffer).setUint32(36, bound, true);
  socket.receive(encodeFrame({ opcode: SystemOpcode.RESUME_TICKET, flags: Flags.RESPONSE, requestId: ask.requestId, body }));
}

/** The server's answer to the RESUME on `socket`: it received `received` frames. */
function resumed(socket, received, ticket = NEW_TICKET, ttl = 30_000) {
  const [resume] = sentWith(socket, SystemOpcode.RESUME);
  const body = new Uint8Array(44);
  const view = new DataView(body.buffer);
  view.setBigUint64(0, BigInt(received), true);
  body.set(ticket, 8);
  view.setUint32(40, ttl, true);
  socket.receive(encodeFrame({ opcode: SystemOpcode.RESUME, flags: Flags.RESPONSE, requestId: resume.requestId, body }));
}

function refuse(socket, code, message) {
  const [resume] = sentWith(socket, SystemOpcode.RESUME);
  const body = Uint8Array.of(code, 0, ...text(message));
  socket.receive(encodeFrame({ opcode: SystemOpcode.RESUME, flags: Flags.RESPONSE | Flags.ERROR, requestId: resume.requestId, body }));
}

function ackFrame(received, requestId = 0) {
  return encodeFrame({ opcode: SystemOpcode.ACK, requestId, body: u64.encode(BigInt(received)) });
}

const push = (seq) => encodeFrame({ opcode: Note.opcode, body: Note.encode({ seq }) });
const echoReply = (socket, frame) => socket.receive(encodeFrame({ opcode: frame.opcode, flags: Flags.RESPONSE, requestId: frame.requestId, body: frame.body }));
/** The count an ACK carries. */
const ackCount = (frame) => Number(u64.decode(frame.body));

/** Drops the connection and lets the client's next attempt open (delays are 0 with random 0). */
async function dropAndReconnect(t, socket, events) {
  socket.drop(1006);
  await settle();
  await advance(t, events.at(-1).delay ?? 0);
  assert.notEqual(FakeSocket.last, socket, 'a new connection');
  return FakeSocket.last;
}

test('the wire bytes of a plain resumption are the contract\'s vectors; tickets rotate', async (t) => {
  const { client, events, sessions } = await setup(t);
  const first = FakeSocket.last;
  // RESUME_TICKET is the first frame, asking for the server's bound; the
  // answer gives the ticket and the bound.
  const [ask] = first.frames();
  assert.deepEqual(first.sent[0], withId(vector('resume-ticket-request-bound'), ask.requestId));
  first.receive(withId(vector('resume-ticket-response-bound'), ask.requestId));
  assert.equal(client.resumable, true);
  // The client receives 5 counted frames and sends 3, which the server does not answer.
  const seen = [];
  client.on(Note, (note) => seen.push(note.seq));
  for (let seq = 1; seq <= 5; seq++) first.receive(push(seq));
  const answers = [1, 2, 3].map((i) => client.request(Echo, { payload: text(`r${i}`) }));
  const requests = sentWith(first, Echo.opcode);
  assert.equal(sentWith(first, SystemOpcode.ACK).length, 0, 'no ACK due yet (5 frames, under 200 ms)');

  const second = await dropAndReconnect(t, first, events);
  assert.equal(client.inFlight, 3, 'the requests in flight wait for the resumed session');
  assert.equal(second.sent.length, 1, 'RESUME is the first frame, and nothing follows before its answer');
  const [resume] = second.frames();
  assert.deepEqual(second.sent[0], withId(vector('resume-plain-request'), resume.requestId));
  assert.equal(client.state, 'reconnecting', 'not open before the answer');
  // The server received the 3 requests: nothing to replay; it answers them now.
  second.receive(withId(vector('resumed-plain-response'), resume.requestId));
  assert.equal(second.sent.length, 1, 'nothing replayed');
  assert.deepEqual(sessions, [{ session: 'resumed', count: 1, attempt: 1 }]);
  assert.deepEqual(events.slice(-2).map((e) => e.session ?? e.state), ['resumed', 'open']);
  assert.equal(client.resumptions, 1);
  for (const frame of requests) echoReply(second, frame);
  assert.deepEqual(await Promise.all(answers), [1, 2, 3].map((i) => ({ payload: text(`r${i}`) })));

  // The next resumption presents the new ticket and the count so far (5 + 3 answers).
  const third = await dropAndReconnect(t, second, events);
  const [again] = third.frames();
  assert.equal(again.opcode, SystemOpcode.RESUME);
  assert.deepEqual(again.body.subarray(0, 32), NEW_TICKET);
  assert.equal(Number(u64.decode(again.body.subarray(32, 40))), 8);
  assert.equal(again.body[40], 0, 'pattern 0: a plain session');
  assert.equal(again.body.length, 41, 'no Noise message');
  resumed(third, 3, TICKET);
  assert.deepEqual(sessions.at(-1), { session: 'resumed', count: 2, attempt: 2 }, 'attempts count up until a connection stays up');
  // Pushes the server replays or sends later reach their handler once each.
  third.receive(push(6));
  assert.deepEqual(seen, [1, 2, 3, 4, 5, 6]);
  await client.close();
});

test('ACK schedule: every 1,024 frames, at 32 KiB, 200 ms after the first unacknowledged one; none when all is acknowledged', async (t) => {
  const { client } = await setup(t);
  const socket = FakeSocket.last;
  const acks = () => sentWith(socket, SystemOpcode.ACK).map(ackCount);
  // Before the ticket's answer nothing is counted.
  socket.receive(push(0));
  grant(socket);
  for (let i = 1; i <= 40; i++) socket.receive(push(i));
  await advance(t, 199);
  assert.deepEqual(acks(), []);
  await advance(t, 1);
  assert.deepEqual(acks(), [40], '200 ms after the first unacknowledged one');
  assert.deepEqual(socket.sent.filter((m) => m[0] === 0x09 && m[1] === 0xff).at(-1), vector('ack-frame'));
  for (let i = 41; i <= 1063; i++) socket.receive(push(i));
  assert.deepEqual(acks(), [40]);
  socket.receive(push(1064));
  assert.deepEqual(acks(), [40, 1064], 'the 1,024th unacknowledged frame: at once');
  await advance(t, 10_000);
  assert.deepEqual(acks(), [40, 1064], 'nothing more while everything is acknowledged');
  // 32 KiB of frames (7 bytes of header and the body each): four of 8,185 bytes of body.
  const big = (n) => encodeFrame({ opcode: 0x0070, body: new Uint8Array(n) });
  for (let i = 0; i < 3; i++) socket.receive(big(8185));
  assert.deepEqual(acks(), [40, 1064]);
  socket.receive(big(8185));
  assert.deepEqual(acks(), [40, 1064, 1068], '32,768 bytes: at once');
  // Every counted frame counts: answers, errors without id, frames nobody waits for; system frames do not.
  const answer = client.request(Echo, { payload: text('a') });
  echoReply(socket, sentWith(socket, Echo.opcode)[0]);
  await answer;
  socket.receive(encodeFrame({ opcode: 0x0099, flags: Flags.RESPONSE | Flags.ERROR, body: Uint8Array.of(1, 0) }));
  socket.receive(encodeFrame({ opcode: 0x0001, flags: Flags.RESPONSE, requestId: 999, body: Uint8Array.of(0) }));
  socket.receive(encodeFrame({ opcode: SystemOpcode.PING, requestId: 0, body: new Uint8Array(8) }));
  await advance(t, 200);
  assert.deepEqual(acks(), [40, 1064, 1068, 1071]);
  await client.close();
});

test('8 KiB with pushes or stream frames among them are acknowledged once what came in is handled; answers alone wait for the delay', async (t) => {
  const { client } = await setup(t);
  const socket = FakeSocket.last;
  const acks = () => sentWith(socket, SystemOpcode.ACK).map(ackCount);
  grant(socket);
  // Answers (a server never holds them): 8 KiB of them wait for the delay.
  const answers = [1, 2].map(() => client.request(Echo, { payload: new Uint8Array(4096) }));
  for (const frame of sentWith(socket, Echo.opcode)) echoReply(socket, frame);
  await Promise.all(answers);
  await advance(t, 0);
  assert.deepEqual(acks(), [], 'answers alone: no early ACK');
  await advance(t, 200);
  assert.deepEqual(acks(), [2]);
  // Pushes: under 8 KiB, the delay; at 8 KiB, the next turn of the event loop.
  const note = (n) => encodeFrame({ opcode: 0x0070, body: new Uint8Array(n) });
  socket.receive(note(4089)); // 4,096 bytes with its header
  await advance(t, 0);
  assert.deepEqual(acks(), [2]);
  socket.receive(note(4089));
  assert.deepEqual(acks(), [2], 'not within the turn that brought it');
  await advance(t, 0);
  assert.deepEqual(acks(), [2, 4], 'once what came in was handled');
  await advance(t, 1000);
  assert.deepEqual(acks(), [2, 4], 'nothing more while everything is acknowledged');
  // Answers count toward the 8 KiB once a push is among them.
  const more = [1, 2].map(() => client.request(Echo, { payload: new Uint8Array(4096) }));
  for (const frame of sentWith(socket, Echo.opcode).slice(2)) echoReply(socket, frame);
  await Promise.all(more);
  socket.receive(note(1));
  await advance(t, 0);
  assert.deepEqual(acks(), [2, 4, 7]);
  await client.close();
});

test('knowing the server\'s bound: an ACK at half of it, and once what came in is handled only when the largest push may not fit', async (t) => {
  const { client } = await setup(t);
  const socket = FakeSocket.last;
  const acks = () => sentWith(socket, SystemOpcode.ACK).map(ackCount);
  grant(socket, TICKET, 30_000, 16 * 1024);
  const note = (n) => encodeFrame({ opcode: 0x0070, body: new Uint8Array(n) });
  // Half the bound, 8 KiB: at once (the 8 KiB idle rule no longer applies).
  socket.receive(note(4089)); // 4,096 bytes with its header
  await advance(t, 0);
  assert.deepEqual(acks(), [], '4 KiB and a 4 KiB push fit in the 12 KiB pushes may take');
  socket.receive(note(4089));
  assert.deepEqual(acks(), [2], 'half the bound: at once');
  // 4 KiB then 9 KiB: by bytes; the largest push is now 9 KiB.
  socket.receive(note(4089));
  await advance(t, 0);
  assert.deepEqual(acks(), [2]);
  socket.receive(note(9209));
  assert.deepEqual(acks(), [2, 4]);
  // 3 KiB: with a 9 KiB push, 12 KiB fit; one byte more does not.
  socket.receive(note(3065));
  await advance(t, 0);
  assert.deepEqual(acks(), [2, 4], '3 KiB + 9 KiB fit in 12 KiB');
  socket.receive(note(1));
  assert.deepEqual(acks(), [2, 4], 'not within the turn that brought it');
  await advance(t, 0);
  assert.deepEqual(acks(), [2, 4, 6], 'once what came in was handled');
  await client.close();
});

test('the bound the ticket gave holds after a resumption, whose answer says none', async (t) => {
  const { client, events } = await setup(t);
  const first = FakeSocket.last;
  grant(first, TICKET, 30_000, 16 * 1024);
  const second = await dropAndReconnect(t, first, events);
  resumed(second, 0);
  assert.equal(client.state, 'open');
  second.receive(encodeFrame({ opcode: 0x0070, body: new Uint8Array(8185) }));
  assert.deepEqual(sentWith(second, SystemOpcode.ACK).map(ackCount), [1], 'half the bound: at once');
  await client.close();
});

test('a server older than the bound\'s request answers MALFORMED: the client asks again without it, once, and keeps the 8 KiB rule', async (t) => {
  const { client } = await setup(t);
  const socket = FakeSocket.last;
  const asks = () => sentWith(socket, SystemOpcode.RESUME_TICKET);
  const [ask] = asks();
  assert.deepEqual(ask.body, Uint8Array.of(1));
  const malformed = (id) => socket.receive(encodeFrame({
    opcode: SystemOpcode.RESUME_TICKET, flags: Flags.RESPONSE | Flags.ERROR, requestId: id, body: Uint8Array.of(ErrorCode.MALFORMED, 0),
  }));
  malformed(ask.requestId);
  assert.equal(asks().length, 2, 'asked again');
  assert.deepEqual(socket.sent.at(-1), withId(vector('resume-ticket-request'), asks()[1].requestId), 'with an empty body');
  grant(socket);
  assert.equal(client.resumable, true);
  const acks = () => sentWith(socket, SystemOpcode.ACK).map(ackCount);
  const note = (n) => encodeFrame({ opcode: 0x0070, body: new Uint8Array(n) });
  socket.receive(note(8185));
  await advance(t, 0);
  assert.deepEqual(acks(), [1], '8 KiB with a push: the next turn, as without a bound');
  await client.close();
});

test('MALFORMED to the request without the bound too: no third request, no resumption', async (t) => {
  const { client } = await setup(t);
  const socket = FakeSocket.last;
  const asks = () => sentWith(socket, SystemOpcode.RESUME_TICKET);
  for (const expected of [1, 2]) {
    assert.equal(asks().length, expected);
    socket.receive(encodeFrame({
      opcode: SystemOpcode.RESUME_TICKET, flags: Flags.RESPONSE | Flags.ERROR, requestId: asks().at(-1).requestId,
      body: Uint8Array.of(ErrorCode.MALFORMED, 0),
    }));
  }
  assert.equal(asks().length, 2);
  assert.equal(client.resumable, false);
  await client.close();
});

test('the replay buffer: trimmed by the server\'s ACKs; an overflow ends resumability, not the connection', async (t) => {
  // Each request below is 28 bytes kept (7 of header, 21 of body).
  const { client, events, sessions } = await setup(t, { resume: { replayBytes: 100 } });
  const socket = FakeSocket.last;
  grant(socket);
  const echo = (s) => client.request(Echo, { payload: text(s.padEnd(20, '.')) });
  const answer = async (promise) => {
    echoReply(socket, sentWith(socket, Echo.opcode).at(-1));
    return promise;
  };
  for (let i = 0; i < 3; i++) await answer(echo(`a${i}`));
  assert.equal(client.resumable, true, '84 bytes kept');
  socket.receive(ackFrame(3));
  for (let i = 0; i < 3; i++) await answer(echo(`b${i}`));
  assert.equal(client.resumable, true, 'the first three left the buffer with the ACK');
  const inFlight = echo('c0'); // 112 bytes: past the bound
  assert.equal(client.resumable, false);
  assert.equal(client.isOpen, true, 'the connection goes on');
  assert.deepEqual(await answer(inFlight), { payload: text('c0'.padEnd(20, '.')) });
  socket.receive(ackFrame(7)); // ACKs are still taken (and checked)
  const lostWith = echo('c1');
  const failed = assert.rejects(lostWith, (e) => e.kind === 'closed' && /in flight/.test(e.message));
  const next = await dropAndReconnect(t, socket, events);
  await failed;
  assert.deepEqual(sessions, [{ session: 'lost', reason: 'the client\'s replay buffer overflowed', attempt: 1 }]);
  assert.deepEqual(next.frames().map((f) => f.opcode), [SystemOpcode.RESUME_TICKET], 'a new session: no RESUME');
  await client.close();
});

test('ReplayBuffer.fits: whether a frame can wait for room (as the Rust client\'s)', () => {
  // 7 + 10 bytes a frame: three fit in 60, not four.
  const buffer = new ReplayBuffer(60);
  assert.equal(buffer.fits(100, 0), true, 'an empty buffer takes even a frame past the bound');
  for (let i = 0; i < 3; i++) {
    assert.equal(buffer.fits(17, 0), true);
    buffer.record(new Uint8Array(17));
  }
  assert.equal(buffer.fits(17, 0), false, 'a fourth would overflow: wait');
  assert.equal(buffer.fits(9, 0), true, 'a smaller one still fits');
  assert.equal(buffer.fits(9, 1), false, 'unless that much is kept free');
  buffer.acknowledge(1);
  assert.equal(buffer.fits(17, 0), true, 'the ACK made room');
  buffer.record(new Uint8Array(100));
  assert.equal(buffer.overflowed, true);
  assert.equal(buffer.fits(1000, 0), true, 'an overflowed buffer keeps nothing: nothing to wait for');
});

test('ACKs the contract forbids are DISCONNECT MALFORMED: ahead of what was sent, backwards, with an id', async (t) => {
  for (const [bad, why] of [[[5], /ACK of 5 frames, but only 1 were sent/], [[1, 0], /ACK of 0 frames after one of 1/], [[[1, 7]], /malformed ACK/]]) {
    const { client, events, sessions } = await setup(t);
    const socket = FakeSocket.last;
    grant(socket);
    client.send(Echo, { payload: text('x') });
    for (const ack of bad) socket.receive(Array.isArray(ack) ? ackFrame(...ack) : ackFrame(ack));
    const disconnect = sentWith(socket, SystemOpcode.DISCONNECT)[0];
    assert.equal(disconnect?.body[0], DisconnectReason.MALFORMED);
    assert.match(new TextDecoder().decode(disconnect.body.subarray(2)), why);
    assert.equal(events.at(-1).state, 'reconnecting');
    await advance(t, events.at(-1).delay);
    assert.equal(sessions[0]?.session, 'lost', 'the DISCONNECT ended the session');
    assert.equal(sentWith(FakeSocket.last, SystemOpcode.RESUME).length, 0);
    await client.close();
    t.mock.timers.reset();
  }
});

test('a resumption replays what the server lacks, in order, before what waited; answers come once', async (t) => {
  const { client, events } = await setup(t);
  const first = FakeSocket.last;
  grant(first);
  const answers = [1, 2, 3, 4].map((i) => client.request(Echo, { payload: text(`r${i}`) }));
  client.send(Note, { seq: 5 });
  first.receive(ackFrame(1));
  const sent = first.sent.slice(1); // after RESUME_TICKET: the 4 requests and the send
  echoReply(first, sentWith(first, Echo.opcode)[0]); // request 1 answered before the loss
  first.drop(1006);
  await settle();
  const waiting = client.request(Echo, { payload: text('r6') }); // made while reconnecting
  await advance(t, events.at(-1).delay);
  const second = FakeSocket.last;
  const [resume] = second.frames();
  assert.equal(Number(u64.decode(resume.body.subarray(32, 40))), 1, 'the answer to request 1 was received');
  resumed(second, 2); // the server got requests 1 and 2
  const after = second.sent.slice(1);
  assert.deepEqual(after.slice(0, 3), sent.slice(2), 'requests 3 and 4 and the send, as first sent');
  assert.deepEqual(Echo.decode(second.frames()[4].body), { payload: text('r6') }, 'then what waited');
  assert.equal(second.sent.length, 5, 'no new RESUME_TICKET: the session goes on');
  // Answers for 2, 3, 4 and 6 on the new connection; each request settles once.
  for (const frame of sentWith(second, Echo.opcode)) echoReply(second, frame);
  echoReply(second, sentWith(first, Echo.opcode)[1]);
  assert.deepEqual((await Promise.all(answers)).map((a) => new TextDecoder().decode(a.payload)), ['r1', 'r2', 'r3', 'r4']);
  assert.deepEqual(await waiting, { payload: text('r6') });
  assert.equal(client.inFlight, 0);
  // What was replayed is still kept until acknowledged: the next loss replays it again if need be.
  const third = await dropAndReconnect(t, second, events);
  resumed(third, 3);
  assert.deepEqual(third.sent.slice(1), [...sent.slice(3), after[3]], 'request 4, the send, request 6');
  await client.close();
});

test('a request aborted while the connection is down is cancelled once the session resumes, after the replay', async (t) => {
  const { client, events } = await setup(t);
  const first = FakeSocket.last;
  grant(first);
  const controller = new AbortController();
  const aborted = client.request(Echo, { payload: text('gone') }, { signal: controller.signal });
  const kept = client.request(Echo, { payload: text('kept') });
  const [gone] = sentWith(first, Echo.opcode);
  first.drop(1006);
  await settle();
  controller.abort();
  await assert.rejects(aborted, (error) => error.kind === 'aborted');
  // A request waiting for the connection is dropped: nothing goes out for it.
  const waiting = new AbortController();
  const never = client.request(Echo, { payload: text('never') }, { signal: waiting.signal });
  waiting.abort();
  await assert.rejects(never, (error) => error.kind === 'aborted');
  await advance(t, events.at(-1).delay);
  const second = FakeSocket.last;
  resumed(second, 0); // the server lacks both requests: both are replayed, then the CANCEL
  const frames = second.frames().slice(1);
  assert.deepEqual(frames.map((f) => f.opcode), [Echo.opcode, Echo.opcode, SystemOpcode.CANCEL]);
  assert.equal(frames[0].requestId, gone.requestId);
  assert.deepEqual(frames[2].body, u32.encode(gone.requestId));
  echoReply(second, frames[0]); // an answer that crossed the CANCEL is ignored
  echoReply(second, frames[1]);
  assert.deepEqual(await kept, { payload: text('kept') });
  assert.equal(client.inFlight, 0);
  await client.close();
});

test('a compressed request is kept and replayed uncompressed', async (t) => {
  const { client, events } = await setup(t, { compress: 0 });
  grant(FakeSocket.last);
  const payload = text('compressible '.repeat(50));
  const answer = client.request(Echo, { payload });
  const [sent] = sentWith(FakeSocket.last, Echo.opcode);
  assert.ok(sent.flags & Flags.COMPRESSED, 'sent compressed');
  const second = await dropAndReconnect(t, FakeSocket.last, events);
  resumed(second, 0);
  const [replayed] = sentWith(second, Echo.opcode);
  assert.equal(replayed.flags, 0);
  assert.deepEqual(replayed.body, Echo.encode({ payload }), 'the plain body, as section 6 says of replays');
  echoReply(second, replayed);
  assert.deepEqual(await answer, { payload });
  await client.close();
});

test('a refused RESUME: the requests in flight fail, \'lost\', a new session on the same connection', async (t) => {
  const { client, events, sessions } = await setup(t);
  const first = FakeSocket.last;
  grant(first);
  const inFlight = client.request(Echo, { payload: text('in flight') });
  const failed = assert.rejects(inFlight, (e) => e.kind === 'closed'
    && /the session was lost \(the server refused to resume it: unknown ticket\)/.test(e.message) && e.cause?.code === ErrorCode.HANDSHAKE_FAILED);
  first.drop(1006);
  await settle();
  const waiting = client.request(Echo, { payload: text('waiting') });
  await advance(t, events.at(-1).delay);
  const second = FakeSocket.last;
  refuse(second, ErrorCode.HANDSHAKE_FAILED, 'unknown ticket');
  await failed;
  assert.deepEqual(sessions, [{ session: 'lost', reason: 'the server refused to resume it: unknown ticket', attempt: 1 }]);
  assert.deepEqual(events.slice(-2).map((e) => e.session ?? e.state), ['lost', 'open']);
  const frames = second.frames();
  assert.deepEqual(frames.map((f) => f.opcode), [SystemOpcode.RESUME, SystemOpcode.RESUME_TICKET, Echo.opcode]);
  assert.equal(client.resumable, false, 'until the new ticket comes');
  grant(second);
  assert.equal(client.resumable, true);
  echoReply(second, frames[2]);
  assert.deepEqual(await waiting, { payload: text('waiting') });
  await client.close();
});

test('past the ticket\'s time to live the client does not try: \'lost\', a new session', async (t) => {
  const { client, events, sessions } = await setup(t, { reconnect: { ...RECONNECT, initialDelay: 2000, maxDelay: 5000 } }, 0.75);
  const first = FakeSocket.last;
  grant(first, TICKET, 1000);
  const failed = assert.rejects(client.request(Echo, { payload: text('x') }), /time to live of 1000 ms passed/);
  first.drop(1006);
  await settle();
  assert.equal(events.at(-1).delay, 1500);
  await advance(t, 1500);
  await failed;
  assert.equal(sessions[0].session, 'lost');
  assert.match(sessions[0].reason, /time to live of 1000 ms passed \(the connection was lost 1500 ms ago\)/);
  assert.deepEqual(FakeSocket.last.frames().map((f) => f.opcode), [SystemOpcode.RESUME_TICKET]);
  await client.close();
});

test('a RESUME that gets no answer within connectTimeout: another attempt resumes', async (t) => {
  const { client, events, sessions } = await setup(t, { connectTimeout: 500 });
  grant(FakeSocket.last);
  const answer = client.request(Echo, { payload: text('x') });
  const request = sentWith(FakeSocket.last, Echo.opcode)[0];
  const second = await dropAndReconnect(t, FakeSocket.last, events);
  await advance(t, 500);
  assert.equal(second.closedWith, 1000);
  assert.match(events.at(-1).error.message, /no answer to RESUME within 500 ms/);
  await advance(t, events.at(-1).delay);
  const third = FakeSocket.last;
  assert.deepEqual(third.frames().map((f) => f.opcode), [SystemOpcode.RESUME]);
  resumed(third, 0);
  assert.deepEqual(third.frames()[1], request, 'replayed');
  echoReply(third, request);
  assert.deepEqual(await answer, { payload: text('x') });
  assert.deepEqual(sessions.map((e) => e.session), ['resumed']);
  await client.close();
});

test('a server count outside what the client keeps: DISCONNECT NORMAL, \'lost\', a new session on a new connection', async (t) => {
  const { client, events, sessions } = await setup(t);
  grant(FakeSocket.last);
  client.send(Echo, { payload: text('x') });
  const second = await dropAndReconnect(t, FakeSocket.last, events);
  resumed(second, 2); // one was sent
  const [disconnect] = sentWith(second, SystemOpcode.DISCONNECT);
  assert.equal(disconnect.body[0], DisconnectReason.NORMAL);
  assert.equal(second.closedWith, 1000);
  assert.match(sessions[0].reason, /the server received 2 frames: the client cannot replay from there/);
  await advance(t, events.at(-1).delay);
  assert.deepEqual(FakeSocket.last.frames().map((f) => f.opcode), [SystemOpcode.RESUME_TICKET]);
  await client.close();
});

test('a DISCONNECT ends the session: requests fail at once, no RESUME, \'lost\' on the next connection', async (t) => {
  const { client, events, sessions } = await setup(t);
  const first = FakeSocket.last;
  grant(first);
  const failed = assert.rejects(client.request(Echo, { payload: text('x') }), (e) => e.disconnect?.reasonName === 'SHUTDOWN');
  first.receive(encodeFrame({ opcode: SystemOpcode.DISCONNECT, body: Uint8Array.of(DisconnectReason.SHUTDOWN, 0) }));
  await failed;
  await advance(t, events.at(-1).delay);
  assert.deepEqual(FakeSocket.last.frames().map((f) => f.opcode), [SystemOpcode.RESUME_TICKET]);
  assert.equal(sessions.length, 1);
  assert.match(sessions[0].reason, /ended by the server disconnected: SHUTDOWN/);
  await client.close();
});

test('a server that does not resume sessions: reconnects start new sessions, without session events', async (t) => {
  const { client, events, sessions } = await setup(t);
  const socket = FakeSocket.last;
  const [ask] = socket.frames();
  socket.receive(encodeFrame({ opcode: ask.opcode, flags: Flags.RESPONSE | Flags.ERROR, requestId: ask.requestId, body: Uint8Array.of(1, 0) }));
  assert.equal(client.resumable, false);
  const failed = assert.rejects(client.request(Echo, { payload: text('x') }), /in flight/);
  for (let i = 0; i < 40; i++) socket.receive(push(i));
  await advance(t, 1000);
  assert.equal(sentWith(socket, SystemOpcode.ACK).length, 0, 'nothing counted');
  const next = await dropAndReconnect(t, socket, events);
  await failed;
  assert.deepEqual(next.frames().map((f) => f.opcode), [SystemOpcode.RESUME_TICKET]);
  assert.deepEqual(sessions, []);
  await client.close();
});

test('resume is on with reconnect by default, off without it or with resume: false', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  FakeSocket.all = [];
  FakeSocket.mode = 'open';
  for (const [options, asks] of [[{ reconnect: true }, 1], [{}, 0], [{ reconnect: true, resume: false }, 0]]) {
    const client = await Client.connect('ws://test/ws', { WebSocket: FakeSocket, keepaliveInterval: 0, ...options });
    assert.equal(sentWith(FakeSocket.last, SystemOpcode.RESUME_TICKET).length, asks, JSON.stringify(options));
    await client.close();
  }
  assert.throws(() => new Client({ reconnect: true, resume: { replayBytes: -1 } }), /resume.replayBytes/);
});

test('ReplayBuffer and AckSchedule on their own', () => {
  const replay = new ReplayBuffer(20);
  const frame = (n) => new Uint8Array(n);
  assert.equal(replay.record(frame(8)), true);
  assert.equal(replay.record(frame(8)), true);
  assert.equal(replay.acknowledge(1), null);
  assert.equal(replay.bytes, 8);
  assert.equal(replay.replayFrom(0), null, 'frame 0 is no longer kept');
  assert.deepEqual(replay.replayFrom(1).map((f) => f.length), [8]);
  assert.deepEqual(replay.replayFrom(2), []);
  assert.equal(replay.replayFrom(3), null);
  assert.equal(replay.record(frame(13)), false, '8 + 13 > 20');
  assert.equal(replay.overflowed, true);
  assert.equal(replay.sent, 3);
  assert.equal(replay.acknowledge(3), null, 'counts are still checked');
  assert.match(replay.acknowledge(2), /after one of 3/);
  assert.equal(replay.replayFrom(3), null);
  const acks = new AckSchedule({ frames: 2, bytes: 100 });
  assert.equal(acks.received(10), false);
  assert.equal(acks.received(10), true);
  assert.equal(acks.take(), 2);
  assert.equal(acks.hasUnacked, false);
  assert.equal(acks.received(100), true);
  // The server's bound: half of it, at most `bytes`.
  const bounded = new AckSchedule({ frames: 1024, bytes: 32 * 1024 });
  bounded.bound = 1 << 20;
  assert.equal(bounded.received(32 * 1024 - 1, true), false, 'a large bound: 32 KiB at most');
  assert.equal(bounded.dueSoon, false);
  assert.equal(bounded.received(1, true), true);
  bounded.take();
  bounded.bound = 1000;
  assert.equal(bounded.received(499), false);
  assert.equal(bounded.received(1), true, 'half of a small bound');
});
