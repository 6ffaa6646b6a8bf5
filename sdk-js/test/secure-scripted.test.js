// The secure client against a scripted server (test/fake-socket.js) that
// runs the responder's side of the handshake with src/secure: what a real
// server never sends, the client must still refuse as the contract says
// (docs/PROTOCOL.md sections 5.1 and 5.2): a malformed sealed REKEY is
// DISCONNECT MALFORMED (sealed), a sealed frame before the handshake
// completed is DISCONNECT DECRYPT_FAILED (plain), an answer that does not
// complete the handshake fails connect(); the server's REKEY is followed.

import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';

import { Client, DisconnectReason, Flags, SystemOpcode, decodeFrame, encodeFrame } from '../dist/index.js';
import { HandshakeState } from '../dist/secure/noise.js';
import { ReceivingCipher, SendingCipher } from '../dist/secure/seal.js';
import { FakeSocket } from './fake-socket.js';

const tick = () => new Promise((resolve) => setImmediate(resolve));

beforeEach(() => {
  FakeSocket.all = [];
  FakeSocket.mode = 'open';
});

/** The server's side: answers the client's NN HANDSHAKE; returns its ciphers. */
async function handshake(socket) {
  for (let i = 0; i < 10 && socket.sent.length === 0; i++) await tick();
  const request = decodeFrame(socket.sent[0]);
  assert.equal(request.opcode, SystemOpcode.HANDSHAKE);
  const responder = new HandshakeState({ pattern: 'NN', role: 'responder' });
  responder.readMessage(request.body.subarray(1));
  const message = responder.writeMessage();
  socket.receive(encodeFrame({ opcode: SystemOpcode.HANDSHAKE, flags: Flags.RESPONSE, requestId: request.requestId, body: message }));
  const keys = responder.split();
  return { send: new SendingCipher(keys.responderToInitiator), receive: new ReceivingCipher(keys.initiatorToResponder) };
}

/** A secure client connected to the scripted server (no keepalive, no reconnect): `{ client, socket, server }`. */
async function connected() {
  const connecting = Client.connect('ws://scripted/ws', { secure: true, WebSocket: FakeSocket, keepaliveInterval: 0, resume: false });
  await tick();
  const socket = FakeSocket.last;
  const server = await handshake(socket);
  const client = await connecting;
  return { client, socket, server };
}

/** Opens, with the server's cipher, every frame the client sent after the HANDSHAKE (all must be sealed). */
function opened(socket, server) {
  return socket.sent.slice(1).map((message) => {
    const { header, plain } = server.receive.openFrame(message);
    const frame = new Uint8Array(header.length + plain.length);
    frame.set(header);
    frame.set(plain, header.length);
    return decodeFrame(frame);
  });
}

test('the server\'s REKEY is followed: a sealed PING under the next key is answered with a sealed PONG', async () => {
  const { client, socket, server } = await connected();
  socket.receive(server.send.rekeyFrame());
  const ping = new Uint8Array(8).fill(7);
  socket.receive(server.send.sealFrame(encodeFrame({ opcode: SystemOpcode.PING, requestId: 5 }).subarray(0, 7), ping));
  await tick();
  const frames = opened(socket, server);
  const pong = frames.find((frame) => frame.opcode === SystemOpcode.PONG);
  assert.ok(pong, 'a PONG');
  assert.deepEqual([pong.requestId, pong.flags, [...pong.body]], [5, Flags.RESPONSE | Flags.ENCRYPTED, [...ping]]);
  assert.equal(client.isOpen, true);
  await client.close();
});

for (const [what, header, body] of [
  ['a body', { requestId: 0 }, Uint8Array.of(1)],
  ['an id', { requestId: 9 }, new Uint8Array(0)],
  ['RESPONSE', { requestId: 0, flags: Flags.RESPONSE }, new Uint8Array(0)],
]) {
  test(`a sealed REKEY with ${what} is DISCONNECT MALFORMED, sealed, and the client closes`, async () => {
    const { client, socket, server } = await connected();
    const head = encodeFrame({ opcode: SystemOpcode.REKEY, ...header }).subarray(0, 7);
    socket.receive(server.send.sealFrame(head, body));
    const info = await client.closed;
    assert.equal(info.local, true);
    const frames = opened(socket, server);
    assert.deepEqual(frames.map((frame) => [frame.opcode, frame.body[0]]), [[SystemOpcode.DISCONNECT, DisconnectReason.MALFORMED]]);
    assert.match(new TextDecoder().decode(frames[0].body.subarray(2)), /REKEY/);
  });
}

test('a sealed frame before the handshake completed: plain DISCONNECT DECRYPT_FAILED, connect() rejects', async () => {
  const connecting = Client.connect('ws://scripted/ws', { secure: true, WebSocket: FakeSocket, keepaliveInterval: 0 });
  await tick();
  const socket = FakeSocket.last;
  await tick();
  socket.receive(encodeFrame({ opcode: 0x0001, flags: Flags.ENCRYPTED, body: new Uint8Array(24) }));
  const error = await connecting.then(() => null, (thrown) => thrown);
  assert.equal(error?.kind, 'closed');
  assert.match(error.message, /DECRYPT_FAILED.*before the handshake completed/);
  const last = decodeFrame(socket.sent.at(-1));
  assert.deepEqual([last.opcode, last.flags, last.body[0]], [SystemOpcode.DISCONNECT, 0, DisconnectReason.DECRYPT_FAILED]);
});

test('an answer that does not complete the handshake, or a refusal: connect() rejects with a \'handshake\' error', async () => {
  for (const [answer, pattern] of [
    [(request) => encodeFrame({ opcode: SystemOpcode.HANDSHAKE, flags: Flags.RESPONSE, requestId: request.requestId, body: new Uint8Array(48) }), /does not complete/],
    [(request) => encodeFrame({ opcode: SystemOpcode.HANDSHAKE, flags: Flags.RESPONSE | Flags.ERROR, requestId: request.requestId, body: Uint8Array.of(9, 0, 0x6e, 0x6f) }), /refused the secure handshake \(error 9\): no/],
    [(request) => encodeFrame({ opcode: SystemOpcode.HANDSHAKE, flags: Flags.RESPONSE | Flags.ERROR, requestId: request.requestId, body: Uint8Array.of(8, 0) }), /with error 8/],
  ]) {
    const connecting = Client.connect('ws://scripted/ws', { secure: true, WebSocket: FakeSocket, keepaliveInterval: 0 });
    await tick();
    const socket = FakeSocket.last;
    await tick();
    socket.receive(answer(decodeFrame(socket.sent[0])));
    const error = await connecting.then(() => null, (thrown) => thrown);
    assert.equal(error?.kind, 'handshake', String(error));
    assert.match(error.message, pattern);
    assert.deepEqual(socket.frames().map((frame) => frame.opcode), [SystemOpcode.HANDSHAKE], 'nothing else sent');
  }
});

test('plain frames before the handshake answer reach nothing; the client sends nothing until the answer', async () => {
  const pushes = [];
  const connecting = Client.connect('ws://scripted/ws', { secure: true, WebSocket: FakeSocket, keepaliveInterval: 0, resume: false });
  await tick();
  const socket = FakeSocket.last;
  await tick();
  socket.receive(encodeFrame({ opcode: 0x0003, body: Uint8Array.of(1, 2, 3) }));
  socket.receive(encodeFrame({ opcode: SystemOpcode.PING, requestId: 3, body: new Uint8Array(8) }));
  assert.equal(socket.sent.length, 1);
  const server = await handshake(socket);
  const client = await connecting;
  client.on(0x0003, (body) => pushes.push(body));
  socket.receive(server.send.sealFrame(encodeFrame({ opcode: 0x0003 }).subarray(0, 7), Uint8Array.of(9)));
  assert.deepEqual(pushes, [Uint8Array.of(9)]);
  await client.close();
});
