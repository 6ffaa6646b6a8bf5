// The checklist of docs/CONFORMANCE.md, with this client against the
// conformance server (examples/conformance_server.rs), built once with
// cargo (or taken from TERNIO_CONFORMANCE_SERVER) and started on free
// ports: checks 1, 2, 3, 4, 8, 9 and 10 on a plain session, then all ten
// (the handshakes, everything sealed, the server's REKEY every 8 frames)
// on an NN and an NK session (option `secure`).

import { test as testCheck, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';

import { Client, ErrorCode, DisconnectReason, Flags, SystemOpcode, packet, bytes, string, bool, u16, u32 } from '../dist/index.js';

import { exampleBinary, rerunWithWebSocket, startEchoServer } from './support.js';

const HERE = fileURLToPath(import.meta.url);

const Echo = packet(0x0001, { payload: bytes }, { name: 'Echo' });
const SecureEcho = packet(0x0002, { payload: bytes }, { name: 'SecureEcho' });
const Held = packet(0x0111, { tag: u32, released: bool }, { name: 'Held' });
const Hold = packet(0x0101, { tag: u32 }, { name: 'Hold', response: Held });
const Released = packet(0x0112, { tag: u32 }, { name: 'Released' });
const Release = packet(0x0102, { tag: u32 }, { name: 'Release', response: Released });
const BurstDone = packet(0x0113, { count: u32 }, { name: 'BurstDone' });
const PushBurst = packet(0x0103, { count: u32 }, { name: 'PushBurst', response: BurstDone });
const Notice = packet(0x0104, { seq: u32, text: string }, { name: 'Notice' });
const Fail = packet(0x0105, { code: u16, message: string }, { name: 'Fail' });
const Guarded = packet(0x0106, {}, { name: 'Guarded' });
const Limited = packet(0x0107, {}, { name: 'Limited' });
const Slow = packet(0x0108, {}, { name: 'Slow' });
const Crash = packet(0x0109, {}, { name: 'Crash' });
const Kick = packet(0x010a, { text: string }, { name: 'Kick' });
const Unserved = packet(0x0fff, {}, { name: 'Unserved' });
const text = (s) => new TextEncoder().encode(s);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
/** The conformance server's public identity (vector `server-static-public`). */
const SERVER_KEY = '8f40c5adb68f25624ae5b214ea767a6ec94d829d3d7b5e1ad1ba6f3e2138285f';

/** A WebSocket class that keeps every message the client receives. */
function recorder() {
  const received = [];
  class Recording extends globalThis.WebSocket {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', (event) => received.push(new Uint8Array(event.data)));
    }
  }
  return { Recording, received };
}

if (typeof globalThis.WebSocket !== 'function') {
  rerunWithWebSocket(HERE, 'conformance checklist');
} else {
  let server;
  const servers = [];
  before(async () => {
    const binary = exampleBinary('conformance_server', 'TERNIO_CONFORMANCE_SERVER');
    server = await startEchoServer(binary, servers, '127.0.0.1:0', ['--idle-timeout', '2']);
  }, { timeout: 15 * 60_000 });
  after(() => servers.forEach(({ child }) => child.kill('SIGKILL')));

  for (const [mode, secure] of [['plain', undefined], ['NN', true], ['NK', { pin: SERVER_KEY }]]) {
    checklist(mode, secure);
  }

  function checklist(mode, secure) {
    // No keepalive of the client's own: only the server's PINGs keep it up.
    const connect = (options = {}) => Client.connect(server.url, { keepaliveInterval: 600_000, secure, ...options });
    const test = (name, fn) => testCheck(`${mode}: ${name}`, fn);

    test('1 and 10: echo, and a long echo answered compressed', async () => {
      const client = await connect();
      assert.deepEqual(await client.request(Echo, { payload: text('ping') }), { payload: text('ping') });
      const long = text('ternio '.repeat(40));
      assert.deepEqual(await client.request(Echo, { payload: long }), { payload: long });
      await client.close();
    });

    test('2: two requests answered in the reverse order, matched by id', async () => {
      const client = await connect();
      const order = [];
      const held = client.request(Hold, { tag: 7 }).then((v) => { order.push('hold'); return v; });
      const released = client.request(Release, { tag: 7 }).then((v) => { order.push('release'); return v; });
      assert.deepEqual(await released, { tag: 7 });
      assert.deepEqual(await held, { tag: 7, released: true });
      assert.deepEqual(order, ['release', 'hold']);
      await client.close();
    });

    test('3: pushes between answers, in order', async () => {
      const client = await connect();
      const seen = [];
      client.on(Notice, (notice) => seen.push(notice));
      const [done, echoed] = await Promise.all([
        client.request(PushBurst, { count: 50 }),
        client.request(Echo, { payload: text('between') }),
      ]);
      assert.deepEqual(done, { count: 50 });
      assert.deepEqual(echoed, { payload: text('between') });
      assert.deepEqual(seen, Array.from({ length: 50 }, (_, seq) => ({ seq, text: `notice ${seq}` })));
      await client.close();
    });

    test('4: every error code a client can see, the connection staying up', async () => {
      const client = await connect();
      const code = (promise) => promise.then(
        () => assert.fail('an error answer'),
        (e) => { assert.equal(e.kind, 'remote', String(e)); return e.code; });
      for (const c of [1, 2, 3, 4, 5, 6, 7, 8, 9, 100, 4242]) {
        assert.equal(await code(client.request(Fail, { code: c, message: `error ${c}` })), c);
      }
      await client.request(Fail, { code: 0, message: '' });
      assert.equal(await code(client.request(Unserved, {})), ErrorCode.UNKNOWN_OPCODE);
      assert.equal(await code(client.request(0x0105, Uint8Array.of(1))), ErrorCode.MALFORMED);
      assert.equal(await code(client.request(Guarded, {})), ErrorCode.UNAUTHORIZED);
      await client.request(Limited, {});
      assert.equal(await code(client.request(Limited, {})), ErrorCode.RATE_LIMITED);
      assert.equal(await code(client.request(Slow, {})), ErrorCode.TIMEOUT);
      if (secure) assert.deepEqual(await client.request(SecureEcho, { payload: text('x') }), { payload: text('x') });
      else assert.equal(await code(client.request(SecureEcho, { payload: text('x') })), ErrorCode.ENCRYPTION_REQUIRED);
      assert.equal(await code(client.request(Crash, {})), ErrorCode.INTERNAL);
      assert.deepEqual(await client.request(Echo, { payload: text('alive') }), { payload: text('alive') });
      await client.close();
    });

    test('8: DISCONNECT KICKED with its text', async () => {
      const client = await connect();
      client.request(Kick, { text: 'conformance kick' }).catch(() => {});
      const info = await client.closed;
      assert.equal(info.disconnect?.reason, DisconnectReason.KICKED);
      assert.equal(info.disconnect.message, 'conformance kick');
    });

    test('9: the server PINGs a quiet client, which answers and stays up', async () => {
      const client = await connect();
      await sleep(3000);
      assert.ok(client.isOpen);
      assert.deepEqual(await client.request(Echo, { payload: text('alive') }), { payload: text('alive') });
      await client.close();
    });

    if (!secure) return;

    test('5: the handshake completes; pinning another key is refused with 9', async () => {
      const client = await connect();
      assert.equal(client.secureSession.pattern, mode);
      assert.deepEqual(await client.request(Echo, { payload: text('sealed') }), { payload: text('sealed') });
      await client.close();
      const refused = await connect({ secure: { pin: 'ab'.repeat(32) } }).then(() => null, (error) => error);
      assert.equal(refused?.kind, 'handshake', String(refused));
      assert.equal(refused.code, ErrorCode.HANDSHAKE_FAILED);
    });

    test('6: everything sealed both ways: SecureEcho answered, no DISCONNECT DECRYPT_FAILED', async () => {
      const { Recording, received } = recorder();
      const client = await connect({ WebSocket: Recording });
      assert.deepEqual(await client.request(SecureEcho, { payload: text('only sealed') }), { payload: text('only sealed') });
      assert.ok((await client.ping()) >= 0);
      assert.ok(client.isOpen);
      await client.close();
      assert.deepEqual(received.slice(1).filter((frame) => !(frame[2] & Flags.ENCRYPTED)), [], 'nothing plain after the handshake answer');
    });

    test('7: the server rekeys every 8 frames; the client follows, every notice arrives', async () => {
      const { Recording, received } = recorder();
      const client = await connect({ WebSocket: Recording });
      const seen = [];
      client.on(Notice, (notice) => seen.push(notice.seq));
      assert.deepEqual(await client.request(PushBurst, { count: 40 }), { count: 40 });
      assert.deepEqual(await client.request(Echo, { payload: text('after') }), { payload: text('after') });
      assert.deepEqual(seen, Array.from({ length: 40 }, (_, seq) => seq));
      const rekeys = received.filter((frame) => (frame[0] | (frame[1] << 8)) === SystemOpcode.REKEY);
      assert.ok(rekeys.length >= 4, `${rekeys.length} REKEYs`);
      await client.close();
    });
  }
}
