// The checklist of docs/CONFORMANCE.md that a plain WebSocket client can
// run (checks 1, 2, 3, 4, 8, 9, 10), with this client against the
// conformance server (examples/conformance_server.rs), built once with
// cargo (or taken from TERNIO_CONFORMANCE_SERVER) and started on free ports.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';

import { Client, ErrorCode, DisconnectReason, packet, bytes, string, bool, u16, u32 } from '../dist/index.js';

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

  // No keepalive of the client's own: only the server's PINGs keep it up.
  const connect = () => Client.connect(server.url, { keepaliveInterval: 600_000 });

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
    assert.equal(await code(client.request(SecureEcho, { payload: text('x') })), ErrorCode.ENCRYPTION_REQUIRED);
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
}
