// The refusals of the secure layer (docs/PROTOCOL.md sections 5, 5.1, 5.2,
// 4.2) and the rekey policy, against the compiled dist/secure.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { HandshakeError, HandshakeState, x25519PublicKey } from '../../dist/secure/noise.js';
import {
  DEFAULT_REKEY_POLICY, ENCRYPTED, NEVER_REKEY, OpenError, ReceivingCipher, REKEY_OPCODE, SealError, SendingCipher,
} from '../../dist/secure/seal.js';
import { startHandshake, startResume } from '../../dist/secure/session.js';
import { CLIENT_EPHEMERAL, counting, header, hex, vector } from './vectors.js';

const KEY = counting(0x10);
const MAX = (1n << 64n) - 1n;
const ECHO_PING = Uint8Array.of(4, 0x70, 0x69, 0x6e, 0x67);

/** A sender and a receiver on one key; `sealed(n)` seals echo `n`. */
function pair(options = {}) {
  const send = new SendingCipher(KEY, options);
  const receive = new ReceivingCipher(KEY, options.nextCounter === undefined ? {} : { nextCounter: options.nextCounter });
  return { send, receive, sealed: (id) => send.sealFrame(header(0x0001, 0, id), ECHO_PING) };
}

function openError(kind) {
  return (error) => error instanceof OpenError && error.kind === kind;
}

test('frames open in order and the sealed body is counter, ciphertext, tag', () => {
  const { receive, sealed } = pair();
  for (let i = 0; i < 3; i++) {
    const frame = sealed(i + 1);
    assert.equal(frame.length, 7 + 8 + ECHO_PING.length + 16);
    assert.equal(frame[2] & ENCRYPTED, ENCRYPTED);
    assert.equal(new DataView(frame.buffer).getBigUint64(7, true), BigInt(i));
    assert.equal(hex(receive.openFrame(frame).plain), hex(ECHO_PING));
  }
  assert.equal(receive.nextCounter, 3n);
});

test('a tampered tag, ciphertext or counter is refused and changes nothing', () => {
  const { receive, sealed } = pair();
  const frame = sealed(1);
  for (const at of [frame.length - 1, 7 + 8, 7]) {
    const bad = frame.slice();
    bad[at] ^= 0x01;
    assert.throws(() => receive.openFrame(bad), at === 7 ? openError('out-of-order') : openError('bad-tag'));
  }
  assert.equal(receive.nextCounter, 0n);
  assert.equal(hex(receive.openFrame(frame).plain), hex(ECHO_PING), 'the genuine frame still opens');
});

test('a changed header (the associated data) is refused', () => {
  const { receive, sealed } = pair();
  const frame = sealed(1);
  for (const [at, bit] of [[0, 0x01], [2, 0x01], [2, 0x08], [3, 0x01], [6, 0x80]]) {
    const bad = frame.slice();
    bad[at] ^= bit;
    assert.throws(() => receive.openFrame(bad), openError('bad-tag'), `header byte ${at}`);
  }
  const plain = frame.slice();
  plain[2] &= ~ENCRYPTED;
  assert.throws(() => receive.openFrame(plain), openError('not-sealed'));
});

test('a skipped or replayed counter is refused', () => {
  const { receive, sealed } = pair();
  const first = sealed(1);
  const second = sealed(2);
  const third = sealed(3);
  assert.throws(() => receive.openFrame(second), (e) => openError('out-of-order')(e) && e.counter === 1n && e.expected === 0n);
  receive.openFrame(first);
  assert.throws(() => receive.openFrame(first), openError('out-of-order'), 'replayed');
  assert.throws(() => receive.openFrame(third), openError('out-of-order'), 'second deleted');
  receive.openFrame(second);
  receive.openFrame(third);
});

test('a body shorter than 24 bytes is refused', () => {
  const { receive, sealed } = pair();
  const frame = sealed(1);
  const h = frame.subarray(0, 7);
  for (const length of [0, 8, 23]) {
    assert.throws(() => receive.open(h, new Uint8Array(length)), openError('too-short'));
  }
  // 24 bytes: an empty plain body, which opens when genuine.
  const { send, receive: r2 } = pair();
  const empty = send.sealFrame(header(0x0001, 0, 1), new Uint8Array(0));
  assert.equal(empty.length - 7, 24);
  assert.equal(r2.openFrame(empty).plain.length, 0);
});

test('the sender refuses counter 2^64 - 1 and the receiver never accepts it', () => {
  const { send, receive, sealed } = pair({ nextCounter: MAX - 1n, policy: NEVER_REKEY });
  assert.equal(hex(receive.openFrame(sealed(1)).plain), hex(ECHO_PING));
  assert.equal(send.nextCounter, MAX);
  assert.throws(() => sealed(2), (e) => e instanceof SealError && e.kind === 'counter-exhausted');
  assert.throws(() => send.rekeyFrame(), (e) => e instanceof SealError && e.kind === 'counter-exhausted');
  assert.equal(send.nextCounter, MAX, 'the counter was not used');
  // A frame carrying 2^64 - 1 (sealed by hand, as a broken peer would) is refused.
  const rogue = new ReceivingCipher(KEY, { nextCounter: MAX });
  const body = new Uint8Array(24);
  new DataView(body.buffer).setBigUint64(0, MAX, true);
  assert.throws(() => rogue.open(header(0x0001, ENCRYPTED, 1), body), openError('out-of-order'));
});

test('seal() wants the header as sent, ENCRYPTED set; a destroyed cipher seals and opens nothing', () => {
  const { send, receive, sealed } = pair();
  assert.throws(() => send.seal(header(0x0001, 0, 1), ECHO_PING), TypeError);
  assert.throws(() => send.seal(new Uint8Array(6), ECHO_PING), TypeError);
  const frame = sealed(1);
  send.destroy();
  receive.destroy();
  assert.throws(() => sealed(2), (e) => e instanceof SealError && e.kind === 'destroyed');
  assert.throws(() => receive.openFrame(frame), openError('destroyed'));
});

test('REKEY: both sides move to the next key, counters go on, the old key no longer opens', () => {
  const { send, receive, sealed } = pair();
  receive.openFrame(sealed(1));
  const rk = send.rekeyFrame();
  assert.equal(hex(rk.subarray(0, 7)), hex(header(REKEY_OPCODE, ENCRYPTED, 0)));
  assert.equal(rk.length, 31);
  const after = sealed(2);
  assert.equal(new DataView(after.buffer).getBigUint64(7, true), 2n);
  const stale = new ReceivingCipher(KEY, { nextCounter: 2n });
  assert.throws(() => stale.openFrame(after), openError('bad-tag'));
  receive.openFrame(rk);
  assert.equal(hex(receive.openFrame(after).plain), hex(ECHO_PING));
});

test('the rekey policy: after its frames or its interval, checked when a frame is sealed', () => {
  let now = 1_000;
  const { send, receive } = pair({ policy: { frames: 3, intervalMs: 10_000 }, clock: () => now });
  const frames = [];
  const sendOne = (id) => {
    const out = send.sealFrames(header(0x0001, 0, id), ECHO_PING);
    frames.push(...out);
    return out.length;
  };
  assert.deepEqual([sendOne(1), sendOne(2), sendOne(3)], [1, 1, 1]);
  assert.equal(send.rekeyDue(), true);
  assert.equal(sendOne(4), 2, 'REKEY before the 4th frame');
  assert.equal(send.framesUnderKey, 1);
  now += 9_999;
  assert.equal(sendOne(5), 1);
  now += 1;
  assert.equal(send.rekeyDue(), true, 'the interval passed');
  assert.equal(sendOne(6), 2);
  // An idle sender does not rekey until it sends.
  now += 1_000_000;
  assert.equal(send.framesUnderKey, 1);
  for (const frame of frames) receive.openFrame(frame);
  assert.equal(receive.nextCounter, 8n, '6 frames and 2 REKEYs, one counter sequence');
  assert.deepEqual(DEFAULT_REKEY_POLICY, { frames: 65_536, intervalMs: 120_000 });
});

test('the default policy rekeys after 65,536 frames', () => {
  const send = new SendingCipher(KEY, { clock: () => 0 });
  for (let i = 0; i < 65_536; i++) send.seal(header(0x0001, ENCRYPTED, 0), new Uint8Array(0));
  assert.equal(send.rekeyDue(), true);
  assert.equal(send.sealFrames(header(0x0001, 0, 0), new Uint8Array(0)).length, 2);
});

test('NK with a wrong pinned server key fails on the server\'s answer', () => {
  const wrong = x25519PublicKey(counting(0x01));
  const pending = startHandshake({ serverKey: wrong, ephemeralPrivateKey: CLIENT_EPHEMERAL });
  assert.throws(() => pending.finish(vector('nk-handshake-response-body')), HandshakeError);
  // And a server holding the other key refuses message 1 (its es differs).
  const server = new HandshakeState({ pattern: 'NK', role: 'responder', staticPrivateKey: counting(0x00) });
  assert.throws(() => server.readMessage(pending.body.subarray(1)), HandshakeError);
});

test('a tampered or mis-sized handshake answer fails, and a failed handshake cannot go on', () => {
  for (const pattern of ['NN', 'NK']) {
    const p = pattern.toLowerCase();
    const start = { pattern, ephemeralPrivateKey: CLIENT_EPHEMERAL, ...(pattern === 'NK' ? { serverKey: vector('server-static-public') } : {}) };
    const answer = vector(`${p}-handshake-response-body`);
    for (const at of [0, 40, 47]) {
      const bad = answer.slice();
      bad[at] ^= 0x80;
      assert.throws(() => startHandshake(start).finish(bad), HandshakeError, `${pattern} byte ${at}`);
    }
    assert.throws(() => startHandshake(start).finish(answer.subarray(0, 47)), HandshakeError);
    assert.throws(() => startHandshake(start).finish(new Uint8Array([...answer, 0])), HandshakeError);
    const pending = startHandshake(start);
    assert.throws(() => pending.finish(answer.subarray(0, 32)), HandshakeError);
    assert.throws(() => pending.finish(answer), HandshakeError, 'given up after a failure');
  }
  assert.throws(() => startHandshake({ pattern: 'NK' }), HandshakeError);
  assert.throws(() => startHandshake({ pattern: 'XX' }), HandshakeError);
});

test('a resumption with the wrong session secret fails on the server\'s answer', () => {
  const answer = vector('resumed-nnpsk0-response').subarray(7);
  const good = startResume({
    ticket: counting(0x80), received: 5n, secure: { sessionSecret: counting(0x60), serverKey: null }, ephemeralPrivateKey: CLIENT_EPHEMERAL,
  });
  assert.ok(good.finish(answer).channel);
  const wrong = startResume({
    ticket: counting(0x80), received: 5n, secure: { sessionSecret: counting(0x61), serverKey: null }, ephemeralPrivateKey: CLIENT_EPHEMERAL,
  });
  assert.throws(() => wrong.finish(answer), HandshakeError);
  // A plain resumption's answer carries no message; a secure one's must.
  assert.throws(() => startResume({ ticket: counting(0x80), received: 5n, secure: null }).finish(answer), HandshakeError);
  assert.throws(() => startResume({ ticket: counting(0x80), received: -1n, secure: null }), RangeError);
  assert.throws(() => startResume({ ticket: new Uint8Array(31), received: 0n, secure: null }), TypeError);
});

test('a server ephemeral of low order (an all-zero shared secret) fails the handshake', () => {
  const answer = new Uint8Array(48); // e = 0, the point of order 1
  assert.throws(() => startHandshake({ ephemeralPrivateKey: CLIENT_EPHEMERAL }).finish(answer), HandshakeError);
});
