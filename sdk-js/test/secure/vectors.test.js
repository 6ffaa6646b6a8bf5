// Every secure-session and resumption vector of docs/PROTOCOL.md
// (conformance/vectors/secure.json and resumption.json), reproduced byte
// for byte by the TypeScript secure layer (dist/secure, built by `npm test`).

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { HandshakeError, HandshakeState, PROLOGUE, x25519PublicKey } from '../../dist/secure/noise.js';
import { rekey, resumePsk, sessionSecret } from '../../dist/secure/aead.js';
import { ENCRYPTED, ReceivingCipher, REKEY_OPCODE, SendingCipher } from '../../dist/secure/seal.js';
import { parseTicketAnswer, startHandshake, startResume } from '../../dist/secure/session.js';
import {
  CLIENT_EPHEMERAL, SECURE, RESUMPTION, SERVER_EPHEMERAL, SERVER_STATIC_PRIVATE,
  counting, docVector, header, hex, vector,
} from './vectors.js';

const SERVER_KEY = vector('server-static-public');
const ECHO_PING = Uint8Array.of(4, 0x70, 0x69, 0x6e, 0x67); // Echo { payload: "ping" }
const TICKET = counting(0x80);
const NEW_TICKET = counting(0xa0);
const SECRET = counting(0x60);
/** The RESUME body's 41 bytes before the message (ticket, received 5, pattern): the prologue's tail. */
const resumeFields = (pattern) => Uint8Array.of(...TICKET, 5, 0, 0, 0, 0, 0, 0, 0, pattern);
/** The answer's 44 bytes before the message (received 3, the new ticket, ttl_ms 30,000): message 2's payload. */
const ANSWER_FIELDS = Uint8Array.of(3, 0, 0, 0, 0, 0, 0, 0, ...NEW_TICKET, 0x30, 0x75, 0, 0);
/** The prologue of a resumption of pattern 3 or 4. */
const resumePrologue = (pattern) => Uint8Array.of(...PROLOGUE, ...resumeFields(pattern));

/**
 * Runs `pattern` both ways with the vectors' fixed keys (and, for a
 * resumption, its prologue and message 2's payload); returns the messages,
 * keys and hashes.
 */
function run(pattern, psk, prologue, payload = new Uint8Array(0)) {
  const initiator = new HandshakeState({
    pattern, role: 'initiator', ephemeralPrivateKey: CLIENT_EPHEMERAL, ...(prologue ? { prologue } : {}),
    ...(pattern.startsWith('NK') ? { remoteStaticKey: SERVER_KEY } : {}), ...(psk ? { psk } : {}),
  });
  const responder = new HandshakeState({
    pattern, role: 'responder', ephemeralPrivateKey: SERVER_EPHEMERAL, ...(prologue ? { prologue } : {}),
    ...(pattern.startsWith('NK') ? { staticPrivateKey: SERVER_STATIC_PRIVATE } : {}), ...(psk ? { psk } : {}),
  });
  const message1 = initiator.writeMessage();
  assert.equal(responder.readMessage(message1).length, 0);
  const message2 = responder.writeMessage(payload);
  assert.equal(hex(initiator.readMessage(message2)), hex(payload));
  assert.ok(initiator.finished && responder.finished);
  assert.deepEqual(initiator.handshakeHash, responder.handshakeHash, 'both sides agree on h');
  const keys = initiator.split();
  const theirs = responder.split();
  assert.deepEqual(keys, theirs, 'both sides agree on the keys');
  return { message1, message2, keys, hash: initiator.handshakeHash };
}

/** A vector's bytes split into its 7-byte header and body. */
function frame(name) {
  const bytes = vector(name);
  return { header: bytes.subarray(0, 7), body: bytes.subarray(7), bytes };
}

test('the JSON vectors are the ones docs/PROTOCOL.md shows', () => {
  for (const map of [SECURE, RESUMPTION]) {
    for (const [name, v] of map) {
      const doc = docVector(name);
      assert.ok(doc, `docs/PROTOCOL.md has vector ${name}`);
      assert.equal(hex(doc), v.hex, name);
    }
  }
});

test('server-static-public is X25519 of 00..1f', () => {
  assert.equal(hex(x25519PublicKey(SERVER_STATIC_PRIVATE)), hex(SERVER_KEY));
});

for (const pattern of ['NN', 'NK']) {
  const p = pattern.toLowerCase();
  test(`${pattern}: handshake messages, Split() keys and session secret`, () => {
    const { message1, message2, keys } = run(pattern);
    const request = vector(`${p}-handshake-request-body`);
    assert.equal(request[0], pattern === 'NN' ? 1 : 2);
    assert.equal(hex(message1), hex(request.subarray(1)));
    assert.equal(hex(message2), hex(vector(`${p}-handshake-response-body`)));
    assert.equal(hex(keys.initiatorToResponder), hex(vector(`${p}-client-to-server-key`)));
    assert.equal(hex(keys.responderToInitiator), hex(vector(`${p}-server-to-client-key`)));
    assert.equal(hex(sessionSecret(keys.initiatorToResponder, keys.responderToInitiator)), hex(vector(`${p}-session-secret`)));
  });

  test(`${pattern}: startHandshake gives the request body and finish the session secret`, () => {
    const pending = startHandshake({
      pattern, ephemeralPrivateKey: CLIENT_EPHEMERAL, ...(pattern === 'NK' ? { serverKey: SERVER_KEY } : {}),
    });
    assert.equal(pending.pattern, pattern);
    assert.equal(hex(pending.body), hex(vector(`${p}-handshake-request-body`)));
    const channel = pending.finish(vector(`${p}-handshake-response-body`));
    assert.equal(hex(channel.sessionSecret), hex(vector(`${p}-session-secret`)));
    assert.equal(hex(channel.handshakeHash), hex(run(pattern).hash));
    assert.equal(channel.serverKey === null, pattern === 'NN');
  });
}

test('startHandshake picks NK when given a server key, NN otherwise', () => {
  assert.equal(hex(startHandshake({ serverKey: SERVER_KEY, ephemeralPrivateKey: CLIENT_EPHEMERAL }).body),
    hex(vector('nk-handshake-request-body')));
  assert.equal(hex(startHandshake({ ephemeralPrivateKey: CLIENT_EPHEMERAL }).body), hex(vector('nn-handshake-request-body')));
  // Random ephemerals: two handshakes differ.
  assert.notEqual(hex(startHandshake().body), hex(startHandshake().body));
});

test('REKEY(nk-client-to-server-key) is nk-client-to-server-key-rekeyed', () => {
  assert.equal(hex(rekey(vector('nk-client-to-server-key'))), hex(vector('nk-client-to-server-key-rekeyed')));
});

test('the NK session: the client seals the echo, PING, REKEY and echo after it byte for byte', () => {
  const channel = startHandshake({ serverKey: SERVER_KEY, ephemeralPrivateKey: CLIENT_EPHEMERAL })
    .finish(vector('nk-handshake-response-body'));
  const { send } = channel;

  const echo = send.sealFrame(header(0x0001, 0, 1), ECHO_PING);
  assert.equal(hex(echo), hex(vector('nk-sealed-echo-request')));

  const ping = new Uint8Array(8);
  new DataView(ping.buffer).setBigUint64(0, 0x0102030405060708n, true);
  // seal() takes the header exactly as sent, ENCRYPTED set.
  const pingHeader = header(0xff02, ENCRYPTED, 2);
  const pingBody = send.seal(pingHeader, ping);
  assert.equal(hex(pingHeader) + hex(pingBody), hex(vector('nk-sealed-ping')));

  assert.equal(send.nextCounter, 2n);
  assert.equal(hex(send.rekeyFrame()), hex(vector('nk-sealed-rekey')));
  assert.equal(send.framesUnderKey, 0);

  assert.equal(hex(send.sealFrame(header(0x0001, 0, 3), ECHO_PING)), hex(vector('nk-sealed-echo-after-rekey')));
  assert.equal(send.nextCounter, 4n);
});

test('the NK session: the client opens the server\'s echo answer and sealed DISCONNECT', () => {
  const { receive } = startHandshake({ serverKey: SERVER_KEY, ephemeralPrivateKey: CLIENT_EPHEMERAL })
    .finish(vector('nk-handshake-response-body'));
  const answer = frame('nk-sealed-echo-response');
  assert.equal(answer.header[2], 0x01 | ENCRYPTED);
  assert.equal(hex(receive.open(answer.header, answer.body)), hex(ECHO_PING));
  const bye = receive.openFrame(frame('nk-sealed-disconnect').bytes);
  assert.equal(hex(bye.header), hex(header(0xff04, ENCRYPTED, 0)));
  assert.equal(hex(bye.plain), hex(Uint8Array.of(2, 0, ...Buffer.from('bye'))));
  assert.equal(receive.nextCounter, 2n);
});

test('a server-side view: the client frames open in turn, the receiver following REKEY', () => {
  // A receiving cipher keyed with the client-to-server key, as a server's.
  const receive = new ReceivingCipher(vector('nk-client-to-server-key'));
  assert.equal(hex(receive.openFrame(vector('nk-sealed-echo-request')).plain), hex(ECHO_PING));
  assert.equal(new DataView(receive.openFrame(vector('nk-sealed-ping')).plain.buffer).getBigUint64(0, true), 0x0102030405060708n);
  const rk = receive.openFrame(vector('nk-sealed-rekey'));
  assert.equal(new DataView(rk.header.buffer).getUint16(0, true), REKEY_OPCODE);
  assert.equal(rk.plain.length, 0);
  assert.equal(hex(receive.openFrame(vector('nk-sealed-echo-after-rekey')).plain), hex(ECHO_PING));
});

test('RESUME_TICKET answer and ACK vectors read as documented', () => {
  const request = vector('resume-ticket-request');
  assert.equal(hex(request), hex(header(0xff08, 0, 4)));
  const answer = frame('resume-ticket-response');
  assert.equal(hex(answer.header), hex(header(0xff08, 0x01, 4)));
  const { ticket, ttlMs } = parseTicketAnswer(answer.body);
  assert.equal(hex(ticket), hex(TICKET));
  assert.equal(ttlMs, 30_000);
  assert.equal(hex(vector('resume-ticket-request-bound')), hex(Uint8Array.of(...header(0xff08, 0, 4), 1)));
  const bound = parseTicketAnswer(frame('resume-ticket-response-bound').body);
  assert.equal(hex(bound.ticket), hex(TICKET));
  assert.equal(bound.ttlMs, 30_000);
  assert.equal(bound.replayBytes, 65_536);
  assert.equal(parseTicketAnswer(answer.body).replayBytes, undefined);
  assert.throws(() => parseTicketAnswer(new Uint8Array(37)), TypeError);
  const ack = frame('ack-frame');
  assert.equal(new DataView(ack.body.buffer, ack.body.byteOffset).getBigUint64(0, true), 40n);
});

test('a plain session resumes: the RESUME body and the answer', () => {
  const pending = startResume({ ticket: TICKET, received: 5n, secure: null });
  assert.equal(pending.pattern, 0);
  const request = frame('resume-plain-request');
  assert.equal(hex(request.header), hex(header(0xff0a, 0, 1)));
  assert.equal(hex(pending.body), hex(request.body));
  const answer = frame('resumed-plain-response');
  assert.equal(hex(answer.header), hex(header(0xff0a, 0x01, 1)));
  const resumed = pending.finish(answer.body);
  assert.equal(resumed.received, 3n);
  assert.equal(hex(resumed.ticket), hex(NEW_TICKET));
  assert.equal(resumed.ttlMs, 30_000);
  assert.equal(resumed.channel, null);
});

test('resume-psk is BLAKE2s("ternio/2 resume" || secret)', () => {
  assert.equal(hex(resumePsk(SECRET)), hex(vector('resume-psk')));
});

test('NNpsk0 resumption: messages, keys, secret, and the sealed replay', () => {
  const psk = vector('resume-psk');
  const { message1, message2, keys } = run('NNpsk0', psk, resumePrologue(3), ANSWER_FIELDS);
  assert.equal(message1.length, 48);
  assert.equal(message2.length, 92, 'e, then the 44 bytes of the answer encrypted, and their tag');
  assert.equal(hex(keys.initiatorToResponder), hex(vector('resumed-nnpsk0-client-to-server-key')));
  assert.equal(hex(keys.responderToInitiator), hex(vector('resumed-nnpsk0-server-to-client-key')));

  const pending = startResume({
    ticket: TICKET, received: 5n, secure: { sessionSecret: SECRET, serverKey: null }, ephemeralPrivateKey: CLIENT_EPHEMERAL,
  });
  assert.equal(pending.pattern, 3);
  const request = frame('resume-nnpsk0-request');
  assert.equal(hex(request.header), hex(header(0xff0a, 0, 1)));
  assert.equal(hex(pending.body), hex(request.body));
  assert.equal(hex(request.body.subarray(0, 41)), hex(resumeFields(3)));
  assert.equal(hex(request.body.subarray(41)), hex(message1));

  const answer = frame('resumed-nnpsk0-response');
  assert.equal(hex(answer.header), hex(header(0xff0a, 0x01, 1)));
  assert.equal(hex(answer.body.subarray(0, 44)), hex(ANSWER_FIELDS));
  assert.equal(hex(answer.body.subarray(44)), hex(message2), 'the server side reproduces message 2');
  const resumed = pending.finish(answer.body);
  assert.equal(resumed.received, 3n);
  assert.equal(hex(resumed.ticket), hex(NEW_TICKET));
  assert.equal(resumed.ttlMs, 30_000);
  assert.equal(hex(resumed.channel.sessionSecret), hex(vector('resumed-nnpsk0-session-secret')));
  assert.equal(resumed.channel.serverKey, null);

  const replay = resumed.channel.receive.openFrame(vector('resumed-nnpsk0-sealed-replay'));
  assert.equal(hex(replay.header), hex(header(0x0001, ENCRYPTED, 0)));
  assert.equal(hex(replay.plain), hex(ECHO_PING));
  // The server's side: the same frame sealed under its sending key, counter 0.
  const server = new SendingCipher(vector('resumed-nnpsk0-server-to-client-key'));
  assert.equal(hex(server.sealFrame(header(0x0001, 0, 0), ECHO_PING)), hex(vector('resumed-nnpsk0-sealed-replay')));
});

test('NKpsk0 resumption: messages and keys', () => {
  const psk = vector('resume-psk');
  const { message1, message2, keys } = run('NKpsk0', psk, resumePrologue(4), ANSWER_FIELDS);
  assert.equal(hex(message1), hex(vector('resume-nkpsk0-message-1')));
  assert.equal(hex(message2), hex(vector('resume-nkpsk0-message-2')));
  assert.equal(hex(keys.initiatorToResponder), hex(vector('resumed-nkpsk0-client-to-server-key')));
  assert.equal(hex(keys.responderToInitiator), hex(vector('resumed-nkpsk0-server-to-client-key')));

  const pending = startResume({
    ticket: TICKET, received: 5n, secure: { sessionSecret: SECRET, serverKey: SERVER_KEY }, ephemeralPrivateKey: CLIENT_EPHEMERAL,
  });
  assert.equal(pending.pattern, 4);
  assert.equal(hex(pending.body.subarray(0, 41)), hex(Uint8Array.of(...TICKET, 5, 0, 0, 0, 0, 0, 0, 0, 4)));
  assert.equal(hex(pending.body.subarray(41)), hex(vector('resume-nkpsk0-message-1')));
  const answer = new Uint8Array([...ANSWER_FIELDS, ...vector('resume-nkpsk0-message-2')]);
  const resumed = pending.finish(answer);
  assert.equal(hex(resumed.channel.serverKey), hex(SERVER_KEY));
  assert.equal(hex(resumed.channel.sessionSecret),
    hex(sessionSecret(vector('resumed-nkpsk0-client-to-server-key'), vector('resumed-nkpsk0-server-to-client-key'))));
  // Its send key is the vector's: the frame a server opens with it.
  const sealed = resumed.channel.send.sealFrame(header(0x0001, 0, 9), ECHO_PING);
  const server = new ReceivingCipher(vector('resumed-nkpsk0-client-to-server-key'));
  assert.equal(hex(server.openFrame(sealed).plain), hex(ECHO_PING));
});

/** A fresh NNpsk0 RESUME of the vectors (ticket, received 5). */
const pendingNn = () => startResume({
  ticket: TICKET, received: 5n, secure: { sessionSecret: SECRET, serverKey: null }, ephemeralPrivateKey: CLIENT_EPHEMERAL,
});

test('a RESUME answer changed on the way fails finish: nothing of it is used', () => {
  const genuine = frame('resumed-nnpsk0-response').body;
  // The plain fields, each changed: received (either way), the ticket, ttl_ms.
  const changes = [
    (body) => { body[0] = 2; },
    (body) => { body[0] = 4; },
    (body) => { body[8 + 31] ^= 1; },
    (body) => { body[40] ^= 0xff; },
  ];
  for (const change of changes) {
    const body = genuine.slice();
    change(body);
    const pending = pendingNn();
    assert.throws(() => pending.finish(body), HandshakeError);
    pending.abandon();
  }
  // A flipped bit of message 2 (its encrypted payload) fails its tag.
  const flipped = genuine.slice();
  flipped[44 + 40] ^= 1;
  assert.throws(() => pendingNn().finish(flipped), HandshakeError);
  // An answer of the earlier rule (message 2 of 48 bytes, empty payload) is refused by its size.
  assert.throws(() => pendingNn().finish(genuine.subarray(0, 44 + 48)), /must be 136 bytes/);
  // The genuine one still resumes.
  assert.equal(pendingNn().finish(genuine).received, 3n);
});

test('a RESUME changed on the way does not authenticate at the server (prologue)', () => {
  const psk = vector('resume-psk');
  const body = frame('resume-nnpsk0-request').body;
  const serverReads = (fields) => {
    const responder = new HandshakeState({
      pattern: 'NNpsk0', role: 'responder', psk, ephemeralPrivateKey: SERVER_EPHEMERAL,
      prologue: Uint8Array.of(...PROLOGUE, ...fields),
    });
    return responder.readMessage(body.subarray(41));
  };
  assert.equal(serverReads(body.subarray(0, 41)).length, 0, 'the genuine request authenticates');
  const changed = body.slice(0, 41);
  changed[32] = 4; // received 5 -> 4: the server would replay a frame the client has
  assert.throws(() => serverReads(changed), HandshakeError);
});
