// The client's secure sessions (option `secure`, docs/PROTOCOL.md sections
// 4.2, 5, 5.1, 5.2) against the real echo server (examples/echo_server.rs)
// over WebSocket: NN and NK (requests, a handler that requires encryption,
// pushes, streams), a wrong pin refused, REKEY both ways under load, a
// secure session resumed through a proxy that cuts connections, and an
// attacker on the path (test/tamper-proxy.js) whose plain frames, forged
// DISCONNECT and flipped bytes make the client send DISCONNECT
// DECRYPT_FAILED and drop the connection without delivering anything of
// them.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import {
  Client, DisconnectReason, Flags, SystemOpcode, decodeFrame, encodeFrame, packet, bytes, u32, u64,
} from '../dist/index.js';

import { CuttingProxy } from './cutting-proxy.js';
import { TamperProxy } from './tamper-proxy.js';
import { exampleBinary, rerunWithWebSocket } from './support.js';

const HERE = fileURLToPath(import.meta.url);

const Echo = packet(0x0001, { payload: bytes }, { name: 'Echo' });
// The echo server's handler for it requires encryption: a plain request gets ENCRYPTION_REQUIRED.
const SecureEcho = packet(0x0002, { payload: bytes }, { name: 'SecureEcho' });
// Sent on the stream, the echo server acknowledges it and pushes it back.
const DatagramEcho = packet(0x0003, { payload: bytes }, { name: 'DatagramEcho' });
const NumberItem = packet(0x0005, { value: u32 }, { name: 'Number' });
const CountTo = packet(0x0004, { count: u32 }, { name: 'CountTo', item: NumberItem });
const Total = packet(0x0007, { sum: u64 }, { name: 'Total' });
const AddUp = packet(0x0006, {}, { name: 'AddUp', response: Total, item: NumberItem });
const text = (s) => new TextEncoder().encode(s);
const untext = (b) => new TextDecoder().decode(b);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const opcodeOf = (frame) => frame[0] | (frame[1] << 8);
const isRekey = (frame) => opcodeOf(frame) === SystemOpcode.REKEY;

/** Quick reconnects, forever (the test's own timeout bounds it). */
const RECONNECT = { initialDelay: 5, maxDelay: 50, healthyAfter: 1000, maxAttempts: Infinity };

if (typeof globalThis.WebSocket !== 'function') {
  rerunWithWebSocket(HERE, 'secure client tests');
} else {
  let binary;
  const dir = mkdtempSync(join(tmpdir(), 'ternio-secure-'));
  before(() => {
    binary = exampleBinary('echo_server', 'TERNIO_ECHO_SERVER');
  }, { timeout: 15 * 60_000 });

  const children = [];
  const proxies = [];
  after(async () => {
    children.forEach((child) => child.kill('SIGKILL'));
    await Promise.all(proxies.map((proxy) => proxy.close()));
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * Starts the echo server with a WebSocket listener and an identity of its
   * own; resolves with `{ child, url, key }`, `key` the public key it prints
   * (64 hex digits).
   */
  function startServer(extra = [], { ws = '127.0.0.1:0', identity = join(dir, `server-${children.length}.key`) } = {}) {
    // The identity file is created by the server when missing.
    const child = spawn(binary, ['--tcp', '127.0.0.1:0', '--ws', ws, '--identity', identity, ...extra],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, RUST_LOG: 'warn' } });
    children.push(child);
    let output = '';
    child.stderr.setEncoding('utf8').on('data', (chunk) => { output += chunk; });
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`echo server did not start within 20 s:\n${output}`)), 20_000);
      child.on('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`echo server exited (${code ?? signal}):\n${output}`));
      });
      child.stdout.setEncoding('utf8').on('data', (chunk) => {
        output += chunk;
        const url = output.match(/websocket listening on (ws:\/\/\S+)/);
        const key = output.match(/public key: ([0-9a-f]{64})/);
        if (url && key) {
          clearTimeout(timer);
          resolve({ child, url: url[1], key: key[1] });
        }
      });
    });
  }

  /** The echo server (started once) for the tests that need no server of their own. */
  let shared;
  const server = async () => (shared ??= await startServer());

  /**
   * A WebSocket class that notes every message both ways, as the bytes the
   * client sent and received (before the client's own handling).
   */
  function recorder() {
    const sent = [];
    const received = [];
    class Recording extends globalThis.WebSocket {
      constructor(...args) {
        super(...args);
        this.addEventListener('message', (event) => {
          if (typeof event.data !== 'string') received.push(new Uint8Array(event.data));
        });
      }

      send(data) {
        sent.push(new Uint8Array(data));
        super.send(data);
      }
    }
    return { Recording, sent, received };
  }

  test('NN: the handshake first, then every frame sealed both ways: requests, a handler that requires encryption, pushes, streams', { timeout: 30_000 }, async (t) => {
    const { url } = await server();
    const { Recording, sent, received } = recorder();
    const client = await Client.connect(url, { secure: true, WebSocket: Recording });
    t.after(() => client.close());
    assert.equal(client.secureSession.pattern, 'NN');
    assert.equal(client.secureSession.serverKey, null);
    assert.equal(client.secureSession.handshakeHash.length, 32);

    assert.deepEqual(await client.request(Echo, { payload: text('hello') }), { payload: text('hello') });
    assert.deepEqual(await client.request(SecureEcho, { payload: text('secret') }), { payload: text('secret') });
    const pushes = [];
    client.on(DatagramEcho, (value) => pushes.push(untext(value.payload)));
    for (let i = 0; i < 5; i++) assert.equal(await client.request(DatagramEcho, { payload: text(`push ${i}`) }), undefined);
    for (let waited = 0; pushes.length < 5 && waited < 5000; waited += 10) await sleep(10);
    assert.deepEqual(pushes, ['push 0', 'push 1', 'push 2', 'push 3', 'push 4']);
    const numbers = [];
    for await (const number of client.requestStream(CountTo, { count: 100 })) numbers.push(number.value);
    assert.deepEqual(numbers, [...Array(100).keys()]);
    const upload = client.upload(AddUp, {});
    for (let value = 1; value <= 50; value++) await upload.send({ value });
    assert.deepEqual(await upload.finish(), { sum: 1275n });
    assert.ok((await client.ping()) >= 0);

    // On the wire: HANDSHAKE (pattern 1, 32 bytes of `e`) plain, the answer
    // plain, then nothing plain either way; no payload in clear.
    const first = decodeFrame(sent[0]);
    assert.equal(first.opcode, SystemOpcode.HANDSHAKE);
    assert.equal(first.flags, 0);
    assert.deepEqual([first.body[0], first.body.length], [1, 33]);
    const answer = decodeFrame(received[0]);
    assert.equal(answer.opcode, SystemOpcode.HANDSHAKE);
    assert.equal(answer.flags, Flags.RESPONSE);
    assert.equal(answer.body.length, 48);
    for (const frame of [...sent.slice(1), ...received.slice(1)]) {
      assert.equal(frame[2] & Flags.ENCRYPTED, Flags.ENCRYPTED, `frame ${opcodeOf(frame).toString(16)} sealed`);
    }
    const clear = (frame) => Buffer.from(frame).includes('secret') || Buffer.from(frame).includes('push 3');
    assert.equal([...sent, ...received].filter(clear).length, 0, 'no payload in clear');
  });

  test('NK pinning the server\'s key (hex or bytes): sealed requests; a plain client is refused the encrypted handler', { timeout: 30_000 }, async (t) => {
    const { url, key } = await server();
    for (const pin of [key, Buffer.from(key, 'hex')]) {
      const { Recording, sent } = recorder();
      const client = await Client.connect(url, { secure: { pin }, WebSocket: Recording });
      t.after(() => client.close());
      assert.equal(client.secureSession.pattern, 'NK');
      assert.equal(Buffer.from(client.secureSession.serverKey).toString('hex'), key);
      const first = decodeFrame(sent[0]);
      assert.deepEqual([first.opcode, first.body[0], first.body.length], [SystemOpcode.HANDSHAKE, 2, 49]);
      const answers = await Promise.all([...Array(50).keys()].map((i) => client.request(SecureEcho, { payload: text(`nk ${i}`) })));
      assert.deepEqual(answers.map((a) => untext(a.payload)), [...Array(50).keys()].map((i) => `nk ${i}`));
      await client.close();
    }
    const plain = await Client.connect(url);
    t.after(() => plain.close());
    assert.equal(plain.secureSession, null);
    await assert.rejects(plain.request(SecureEcho, { payload: text('x') }), (error) => error.kind === 'remote' && error.code === 6);
  });

  test('a wrong pin: connect() rejects with a \'handshake\' error that says so, and nothing but the handshake was sent', { timeout: 30_000 }, async () => {
    const { url } = await server();
    const { Recording, sent } = recorder();
    const client = new Client({ secure: { pin: 'ab'.repeat(32) }, WebSocket: Recording, reconnect: RECONNECT });
    const error = await client.connect(url).then(() => null, (thrown) => thrown);
    assert.equal(error?.kind, 'handshake', String(error));
    assert.equal(error.code, 9);
    assert.match(error.message, /refused the NK handshake \(error 9\): the pinned key is not this server's public key/);
    assert.equal(client.state, 'closed');
    assert.deepEqual(sent.map((frame) => opcodeOf(frame)), [SystemOpcode.HANDSHAKE]);
    assert.equal((await client.closed).local, true);
  });

  test('options are checked: a pin is 32 bytes or 64 hex digits; rekey thresholds are numbers', () => {
    assert.throws(() => new Client({ secure: { pin: 'abc' } }), /secure.pin/);
    assert.throws(() => new Client({ secure: { pin: new Uint8Array(31) } }), /secure.pin/);
    assert.throws(() => new Client({ secure: 'yes' }), /secure must be/);
    assert.throws(() => new Client({ rekey: { frames: 0 } }), /rekey.frames/);
    assert.throws(() => new Client({ rekey: { intervalMs: -1 } }), /rekey.intervalMs/);
    assert.equal(new Client({ secure: false }).secureSession, null);
  });

  test('REKEY both ways under load: the client every 50 frames, the server after its 65,536th; every answer right', { timeout: 120_000 }, async (t) => {
    const { url } = await server();
    const { Recording, sent, received } = recorder();
    const client = await Client.connect(url, {
      secure: true, rekey: { frames: 50 }, WebSocket: Recording, maxBufferedBytes: 64 << 20, timeout: 60_000,
    });
    t.after(() => client.close());
    const payload = new Uint8Array(1);
    // 70,000 answers: the server's own policy (65,536 frames under one key) rekeys once.
    for (let batch = 0; batch < 35; batch++) {
      const answers = [];
      for (let i = 0; i < 2000; i++) answers.push(client.request(Echo, { payload: Uint8Array.of(i & 0xff) }));
      const got = await Promise.all(answers);
      got.forEach((answer, i) => assert.equal(answer.payload[0], i & 0xff));
    }
    assert.deepEqual(await client.request(SecureEcho, { payload }), { payload });
    const clientRekeys = sent.filter(isRekey).length;
    const serverRekeys = received.filter(isRekey).length;
    t.diagnostic(`${clientRekeys} REKEYs sent, ${serverRekeys} received over ${sent.length} and ${received.length} frames`);
    // Before each 51st frame under a key: (frames - 1) / 51 of them, give or take.
    assert.ok(clientRekeys >= Math.floor((sent.length - 1) / 51) - 1, `${clientRekeys} REKEYs for ${sent.length} frames`);
    assert.ok(serverRekeys >= 1, 'the server rekeyed');
    for (const frame of sent.filter(isRekey)) assert.deepEqual([...frame.subarray(2, 7)], [Flags.ENCRYPTED, 0, 0, 0, 0]);
  });

  test('a secure session resumes through random cuts (NKpsk0): every answer once, every push once and in order, the replay sealed under the new keys', { timeout: 90_000 }, async (t) => {
    const { url: direct, key } = await server();
    const { hostname, port } = new URL(direct);
    // Budgets from 1,400 bytes: the WebSocket upgrade, RESUME with its Noise
    // message and the answer (about 800 bytes) always get through.
    const proxy = await CuttingProxy.start({ host: hostname, port: Number(port) }, 0x5ec0de, [1400, 6000]);
    proxies.push(proxy);
    const url = `ws://127.0.0.1:${proxy.port}/ws`;
    const answers = new Map();
    const resumes = [];
    const plainAfterHandshake = [];
    class Watching extends globalThis.WebSocket {
      #secure = false;
      constructor(...args) {
        super(...args);
        this.addEventListener('message', (event) => {
          const frame = new Uint8Array(event.data);
          if (!(frame[2] & Flags.ENCRYPTED)) {
            if (this.#secure) plainAfterHandshake.push(frame);
            this.#secure = true; // the answer to HANDSHAKE or RESUME
            return;
          }
          // The header is authenticated, not encrypted: the answer's id is readable.
          const { opcode, flags, requestId } = decodeFrame(frame);
          if (flags & Flags.RESPONSE && opcode <= 0xfeff) answers.set(requestId, (answers.get(requestId) ?? 0) + 1);
        });
      }

      send(data) {
        const frame = new Uint8Array(data);
        if (opcodeOf(frame) === SystemOpcode.RESUME) resumes.push(frame);
        super.send(data);
      }
    }
    const sessions = [];
    const client = await Client.connect(url, {
      secure: { pin: key }, rekey: { frames: 64 }, WebSocket: Watching, reconnect: RECONNECT, keepaliveInterval: 0,
      timeout: 30_000, onSessionChange: (event) => sessions.push(event),
    });
    t.after(() => client.close());
    const pushes = [];
    client.on(DatagramEcho, (value) => pushes.push(untext(value.payload)));
    const expectedPushes = [];
    for (let i = 0; i < 120; i++) {
      assert.deepEqual(await client.request(SecureEcho, { payload: text(`seq ${i}`) }), { payload: text(`seq ${i}`) });
      if (i % 3 === 0) {
        expectedPushes.push(`push ${i}`);
        assert.equal(await client.request(DatagramEcho, { payload: text(`push ${i}`) }), undefined);
      }
    }
    for (let batch = 0; batch < 6; batch++) {
      const requests = [];
      for (let i = 0; i < 40; i++) {
        const payload = `batch ${batch} ${i}`;
        requests.push(client.request(SecureEcho, { payload: text(payload) }).then((answer) => assert.equal(untext(answer.payload), payload)));
        if (i % 4 === 0) {
          expectedPushes.push(`push ${batch} ${i}`);
          requests.push(client.request(DatagramEcho, { payload: text(`push ${batch} ${i}`) }));
        }
      }
      await Promise.all(requests);
    }
    for (let waited = 0; pushes.length < expectedPushes.length && waited < 5000; waited += 10) await sleep(10);
    assert.deepEqual(pushes, expectedPushes, 'each push once, in order');
    assert.deepEqual([...answers].filter(([, n]) => n !== 1), [], 'each answer reached the client once');
    assert.equal(client.inFlight, 0);
    assert.ok(proxy.cuts >= 3, `only ${proxy.cuts} cuts`);
    assert.deepEqual(sessions.filter((e) => e.session !== 'resumed'), [], 'never lost');
    assert.ok(client.resumptions >= 3, `${client.resumptions} resumptions`);
    // Every RESUME is NKpsk0: pattern 4, then the 48-byte Noise message.
    for (const frame of resumes) {
      const { body } = decodeFrame(frame);
      assert.deepEqual([body.length, body[40]], [41 + 48, 4]);
    }
    assert.deepEqual(plainAfterHandshake, [], 'nothing plain after the handshake');
    assert.equal(client.secureSession.pattern, 'NK');
    t.diagnostic(`${proxy.cuts} cuts, ${client.resumptions} resumptions, ${answers.size} answers, ${pushes.length} pushes`);
  });

  test('an NN session resumes with NNpsk0, three times in a row (each resumption keyed by the secret of the one before)', { timeout: 30_000 }, async (t) => {
    const { url: direct } = await server();
    const { hostname, port } = new URL(direct);
    const proxy = await CuttingProxy.start({ host: hostname, port: Number(port) }, 3, null);
    proxies.push(proxy);
    const { Recording, sent } = recorder();
    const sessions = [];
    const client = await Client.connect(`ws://127.0.0.1:${proxy.port}/ws`, {
      secure: true, WebSocket: Recording, reconnect: RECONNECT, keepaliveInterval: 0,
      onSessionChange: (event) => sessions.push(event.session),
    });
    t.after(() => client.close());
    for (let round = 0; round < 3; round++) {
      for (let waited = 0; !client.resumable && waited < 2000; waited += 10) await sleep(10);
      const hash = client.secureSession.handshakeHash;
      const answer = client.request(SecureEcho, { payload: text(`round ${round}`) });
      proxy.cutAll();
      assert.deepEqual(await answer, { payload: text(`round ${round}`) });
      assert.notDeepEqual(client.secureSession.handshakeHash, hash, 'new keys');
    }
    assert.deepEqual(sessions, ['resumed', 'resumed', 'resumed']);
    const patterns = sent.filter((f) => opcodeOf(f) === SystemOpcode.RESUME).map((f) => decodeFrame(f).body[40]);
    assert.deepEqual(patterns, [3, 3, 3]);
  });

  test('a restarted server refuses the secure RESUME: \'lost\', then a new handshake on the same connection, and the client goes on', { timeout: 30_000 }, async (t) => {
    const identity = join(dir, 'restarted.key');
    const first = await startServer([], { identity });
    const { key } = first;
    const { Recording, sent } = recorder();
    const sessions = [];
    const client = await Client.connect(first.url, {
      secure: { pin: key }, WebSocket: Recording, reconnect: RECONNECT, keepaliveInterval: 0, timeout: 20_000,
      onSessionChange: (event) => sessions.push(event),
    });
    t.after(() => client.close());
    assert.deepEqual(await client.request(SecureEcho, { payload: text('before') }), { payload: text('before') });
    for (let waited = 0; !client.resumable && waited < 2000; waited += 10) await sleep(10);
    first.child.kill('SIGKILL');
    // Made while the client reconnects, the request waits for the new session.
    for (let waited = 0; client.state !== 'reconnecting' && waited < 5000; waited += 10) await sleep(10);
    const answer = client.request(SecureEcho, { payload: text('after') });
    const second = await startServer([], { ws: new URL(first.url).host, identity });
    assert.equal(second.key, key, 'the same identity');
    assert.deepEqual(await answer, { payload: text('after') });
    assert.deepEqual(sessions.map((event) => event.session), ['lost']);
    assert.match(sessions[0].reason, /refused to resume it/);
    // On the connection that resumed nothing: RESUME (NKpsk0), then HANDSHAKE (NK).
    const opcodes = sent.map((frame) => opcodeOf(frame));
    const resume = opcodes.lastIndexOf(SystemOpcode.RESUME);
    assert.ok(resume > 0, 'a RESUME was sent');
    assert.equal(opcodes[resume + 1], SystemOpcode.HANDSHAKE);
    assert.equal(decodeFrame(sent[resume + 1]).body[0], 2);
    assert.equal(client.secureSession.pattern, 'NK');
  });

  /** A secure client behind a tampering proxy, with its pushes and errors noted. */
  async function behindAttacker(t, options = {}) {
    const { url: direct, key } = await server();
    const { hostname, port } = new URL(direct);
    const proxy = await TamperProxy.start({ host: hostname, port: Number(port) });
    proxies.push(proxy);
    const pushes = [];
    const states = [];
    const client = await Client.connect(`ws://127.0.0.1:${proxy.port}/ws`, {
      secure: { pin: key }, keepaliveInterval: 0, onStateChange: (event) => states.push(event), ...options,
    });
    t.after(() => client.close());
    client.on(DatagramEcho, (value) => pushes.push(untext(value.payload)));
    // A first exchange: the session is up and has a ticket.
    assert.deepEqual(await client.request(SecureEcho, { payload: text('before') }), { payload: text('before') });
    for (let waited = 0; (options.reconnect && !client.resumable) && waited < 2000; waited += 10) await sleep(10);
    return { proxy, client, pushes, states };
  }

  /** The plain DISCONNECT DECRYPT_FAILED the client sent on connection `index` (waited for a while), or undefined. */
  async function decryptFailedSent(proxy, index) {
    const find = () => proxy.fromClient[index].map((f) => decodeFrame(f)).find((frame) =>
      frame.opcode === SystemOpcode.DISCONNECT && frame.flags === 0 && frame.body[0] === DisconnectReason.DECRYPT_FAILED);
    for (let waited = 0; !find() && waited < 2000; waited += 10) await sleep(10);
    return find();
  }

  test('attacker: a plain push injected into a secure session is never delivered: DISCONNECT DECRYPT_FAILED (plain), the client closes', { timeout: 30_000 }, async (t) => {
    const { proxy, client, pushes, states } = await behindAttacker(t);
    proxy.last.inject(encodeFrame({ opcode: DatagramEcho.opcode, body: DatagramEcho.encode({ payload: text('INJECTED') }) }));
    const info = await client.closed;
    assert.equal(info.reason, 'decrypt failed');
    assert.equal(info.local, true);
    const closed = states.find((event) => event.state === 'closed');
    assert.match(closed.error.message, /DECRYPT_FAILED/);
    const disconnect = await decryptFailedSent(proxy, 0);
    assert.ok(disconnect, 'the client sent a plain DISCONNECT DECRYPT_FAILED');
    assert.match(new TextDecoder().decode(disconnect.body.subarray(2)), /a plain frame \(opcode 0x0003\) on a secure session/);
    assert.deepEqual(pushes, []);
  });

  test('attacker: a flipped byte in a sealed frame fails its tag: DECRYPT_FAILED, the answer it carried never delivered', { timeout: 30_000 }, async (t) => {
    const { proxy, client } = await behindAttacker(t);
    proxy.last.corruptNext(20); // inside the ciphertext of the next frame from the server
    const error = await client.request(SecureEcho, { payload: text('tampered') }).then(() => null, (thrown) => thrown);
    assert.equal(error?.kind, 'closed', String(error));
    assert.match(error.message, /DISCONNECT DECRYPT_FAILED/);
    assert.equal((await client.closed).reason, 'decrypt failed');
    assert.ok(await decryptFailedSent(proxy, 0));
  });

  test('attacker: a forged plain DISCONNECT KICKED is a lost connection, not a kick: DECRYPT_FAILED, the client reconnects and resumes the session (a DECRYPT_FAILED ends the link, not the session)', { timeout: 30_000 }, async (t) => {
    const { proxy, client, pushes, states } = await behindAttacker(t, { reconnect: RECONNECT });
    const sessions = [];
    client.onSessionChange = (event) => sessions.push(event);
    proxy.last.inject(encodeFrame({ opcode: SystemOpcode.DISCONNECT, body: Uint8Array.of(DisconnectReason.KICKED, 0, 0x62, 0x79, 0x65) }));
    for (let waited = 0; sessions.length === 0 && waited < 5000; waited += 10) await sleep(10);
    assert.ok(await decryptFailedSent(proxy, 0), 'DECRYPT_FAILED on the first connection');
    const lost = states.find((event) => event.state === 'reconnecting');
    assert.match(lost.error.message, /a plain DISCONNECT on a secure session, treated as a lost connection: server disconnected: KICKED \(10\): bye/);
    // The client's DECRYPT_FAILED ends the link, not the session (section 4.2): it resumes.
    assert.deepEqual(sessions.map((event) => event.session), ['resumed']);
    assert.deepEqual(await client.request(SecureEcho, { payload: text('after') }), { payload: text('after') });
    assert.equal(client.state, 'open');
    assert.equal(client.secureSession.pattern, 'NK');
    // A plain push on the new connection: the same, and nothing delivered.
    for (let waited = 0; !client.resumable && waited < 2000; waited += 10) await sleep(10);
    proxy.last.inject(encodeFrame({ opcode: DatagramEcho.opcode, body: DatagramEcho.encode({ payload: text('INJECTED') }) }));
    for (let waited = 0; sessions.length < 2 && waited < 5000; waited += 10) await sleep(10);
    assert.ok(await decryptFailedSent(proxy, proxy.connections.length - 2), 'DECRYPT_FAILED on the second connection');
    assert.deepEqual(await client.request(SecureEcho, { payload: text('still') }), { payload: text('still') });
    assert.deepEqual(pushes, []);
  });

  test('attacker: a forged plain DISCONNECT DECRYPT_FAILED drops the connection without an answer: the session resumes, requests in flight answered', { timeout: 30_000 }, async (t) => {
    const { proxy, client, pushes } = await behindAttacker(t, { reconnect: RECONNECT });
    const sessions = [];
    client.onSessionChange = (event) => sessions.push(event.session);
    const first = proxy.last;
    // Stopped, the server answers nothing: the request is in flight when the forgery comes.
    first.upstream.pause();
    const answer = client.request(SecureEcho, { payload: text('in flight') });
    await sleep(50);
    first.inject(encodeFrame({ opcode: SystemOpcode.DISCONNECT, body: Uint8Array.of(DisconnectReason.DECRYPT_FAILED, 0) }));
    assert.deepEqual(await answer, { payload: text('in flight') });
    assert.deepEqual(sessions, ['resumed']);
    assert.equal(await decryptFailedSent(proxy, 0), undefined, 'no answer to it');
    assert.deepEqual(pushes, []);
  });

}
