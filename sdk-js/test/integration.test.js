// The Client against the real echo server (examples/echo_server.rs) over
// WebSocket. The server is built once with cargo (or taken from the
// TERNIO_ECHO_SERVER environment variable) and started on ports the OS picks.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';

import { Client, TernioError, ErrorCode, DisconnectReason, Flags, packet, bytes, u32, u64 } from '../dist/index.js';

import * as generated from './generated/echo_server.js';
import { exampleBinary, rerunWithWebSocket, startEchoServer } from './support.js';

const HERE = fileURLToPath(import.meta.url);

const Echo = packet(0x0001, { payload: bytes }, { name: 'Echo' });
const Unhandled = packet(0x0099, {}, { name: 'Unhandled' });
const NumberItem = packet(0x0005, { value: u32 }, { name: 'Number' });
const CountTo = packet(0x0004, { count: u32 }, { name: 'CountTo', item: NumberItem });
const Total = packet(0x0007, { sum: u64 }, { name: 'Total' });
const AddUp = packet(0x0006, {}, { name: 'AddUp', response: Total, item: NumberItem });
const text = (s) => new TextEncoder().encode(s);

if (typeof globalThis.WebSocket !== 'function') {
  rerunWithWebSocket(HERE, 'integration tests');
} else {
  let binary;

  before(() => {
    binary = exampleBinary('echo_server', 'TERNIO_ECHO_SERVER');
  }, { timeout: 15 * 60_000 });

  const servers = [];
  after(() => servers.forEach(({ child }) => child.kill('SIGKILL')));

  /** Starts an echo server (by default on free ports); resolves once it listens, with its WebSocket URL. */
  const startServer = (ws = '127.0.0.1:0', extra = []) => startEchoServer(binary, servers, ws, extra);

  const exited = (child) => new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', resolve);
  });

  let shared;
  const sharedServer = async () => (shared ??= await startServer());

  test('request and response', async () => {
    const client = await Client.connect((await sharedServer()).url);
    assert.ok(client.isOpen);
    assert.deepEqual(await client.request(Echo, { payload: text('ping') }), { payload: text('ping') });
    assert.deepEqual(await client.request(Echo, { payload: new Uint8Array(0) }), { payload: new Uint8Array(0) });
    const big = new Uint8Array(100_000).map((_, i) => i % 251);
    assert.deepEqual(await client.request(Echo, { payload: big }, { timeout: 5000 }), { payload: big });
    await client.close();
  });

  test('streams: a download as an async iterator, in order; leaving the loop cancels; an upload', async () => {
    const client = await Client.connect((await sharedServer()).url);
    const seen = [];
    for await (const number of client.requestStream(CountTo, { count: 1000 })) seen.push(number.value);
    assert.deepEqual(seen, Array.from({ length: 1000 }, (_, i) => i));
    // Leaving early sends CANCEL; the connection goes on.
    let taken = 0;
    for await (const number of client.requestStream(CountTo, { count: 1_000_000 })) {
      assert.equal(number.value, taken);
      if (++taken === 50) break;
    }
    assert.equal(client.inFlight, 0);
    const upload = client.upload(AddUp, {});
    for (let value = 0; value < 500; value++) await upload.send({ value });
    assert.deepEqual(await upload.finish(), { sum: 124750n });
    assert.deepEqual(await client.request(Echo, { payload: text('after') }), { payload: text('after') });
    await client.close();
  });

  test('generated packets (test/generated/echo_server.js, from the schema): a request, a download, an upload', async () => {
    const client = await Client.connect((await sharedServer()).url);
    assert.deepEqual(await client.request(generated.Echo, { payload: text('typed') }), { payload: text('typed') });
    const seen = [];
    for await (const number of client.requestStream(generated.CountTo, { count: 5 })) seen.push(number.value);
    assert.deepEqual(seen, [0, 1, 2, 3, 4]);
    const upload = client.upload(generated.AddUp, {});
    for (const value of [1, 2, 3]) await upload.send({ value });
    assert.deepEqual(await upload.finish(), { sum: 6n });
    await client.close();
  });

  test('compression: compressed both ways with --compress, the opt-out and small bodies plain', async () => {
    const server = await startServer('127.0.0.1:0', ['--compress', '64']);
    const seen = { sent: [], received: [] };
    // A WebSocket that notes the flags byte of every frame both ways.
    class Spy extends globalThis.WebSocket {
      constructor(...args) {
        super(...args);
        this.addEventListener('message', (event) => {
          if (typeof event.data !== 'string') seen.received.push(new Uint8Array(event.data)[2]);
        });
      }

      send(data) {
        seen.sent.push(data[2]);
        super.send(data);
      }
    }
    const client = await Client.connect(server.url, { compress: 64, WebSocket: Spy, keepaliveInterval: 0 });
    const payload = text('a compressible payload, '.repeat(200));
    assert.deepEqual(await client.request(Echo, { payload }), { payload });
    assert.deepEqual(seen, { sent: [Flags.COMPRESSED], received: [Flags.RESPONSE | Flags.COMPRESSED] });
    // Small: plain both ways.
    seen.sent.length = seen.received.length = 0;
    assert.deepEqual(await client.request(Echo, { payload: text('ping') }), { payload: text('ping') });
    assert.deepEqual(seen, { sent: [0], received: [Flags.RESPONSE] });
    // A type that opts out goes plain; the server's answer (its Echo) is compressed.
    const PlainEcho = packet(0x0001, { payload: bytes }, { name: 'PlainEcho', compress: false });
    seen.sent.length = seen.received.length = 0;
    assert.deepEqual(await client.request(PlainEcho, { payload }), { payload });
    assert.deepEqual(seen, { sent: [0], received: [Flags.RESPONSE | Flags.COMPRESSED] });
    // Noise does not shrink: plain both ways.
    let state = 0x2545f491;
    const noise = new Uint8Array(5000).map(() => {
      state ^= state << 13;
      state ^= state >>> 17;
      state ^= state << 5;
      return state & 0xff;
    });
    seen.sent.length = seen.received.length = 0;
    assert.deepEqual(await client.request(Echo, { payload: noise }), { payload: noise });
    assert.deepEqual(seen, { sent: [0], received: [Flags.RESPONSE] });
    await client.close();
    // A server without --compress decodes compressed requests and answers plain.
    const plainServer = await sharedServer();
    seen.sent.length = seen.received.length = 0;
    const other = await Client.connect(plainServer.url, { compress: 0, WebSocket: Spy, keepaliveInterval: 0 });
    assert.deepEqual(await other.request(Echo, { payload }), { payload });
    assert.deepEqual(seen, { sent: [Flags.COMPRESSED], received: [Flags.RESPONSE] });
    await other.close();
  });

  test('200 pipelined requests', async () => {
    const client = await Client.connect((await sharedServer()).url);
    const promises = Array.from({ length: 200 }, (_, i) => client.request(Echo, { payload: text(`message ${i}`) }));
    assert.equal(client.inFlight, 200);
    const answers = await Promise.all(promises);
    answers.forEach((answer, i) => assert.deepEqual(answer, { payload: text(`message ${i}`) }));
    assert.equal(client.inFlight, 0);
    await client.close();
  });

  test('ping', async () => {
    const client = await Client.connect((await sharedServer()).url);
    const ms = await client.ping();
    assert.equal(typeof ms, 'number');
    assert.ok(ms >= 0 && ms < 5000, `round trip ${ms} ms`);
    await client.close();
  });

  test('errors: unknown opcode (code 1), malformed body (code 2), a failed send', async () => {
    const errors = [];
    let reported;
    const onError = new Promise((resolve) => { reported = resolve; });
    const client = await Client.connect((await sharedServer()).url, { onError: (e) => { errors.push(e); reported(); } });
    await assert.rejects(client.request(Unhandled, {}), (e) => {
      assert.ok(e instanceof TernioError);
      assert.equal(e.kind, 'remote');
      assert.equal(e.code, ErrorCode.UNKNOWN_OPCODE);
      assert.match(e.remoteMessage, /0x0099/);
      return true;
    });
    await assert.rejects(client.request(0x0001, Uint8Array.of(5)), (e) => e.kind === 'remote' && e.code === ErrorCode.MALFORMED);
    await assert.rejects(client.request(0x0001, Uint8Array.of(0, 0)), (e) => e.code === ErrorCode.MALFORMED, 'trailing bytes');
    client.send(Unhandled, {});
    await onError;
    assert.equal(errors[0].code, ErrorCode.UNKNOWN_OPCODE);
    // The connection stays usable.
    assert.deepEqual(await client.request(Echo, { payload: text('still here') }), { payload: text('still here') });
    client.send(Echo, { payload: text('fire and forget') });
    assert.deepEqual(await client.request(Echo, { payload: text('after') }), { payload: text('after') });
    assert.equal(errors.length, 1, 'a fire-and-forget Echo gets no answer');
    await client.close();
  });

  test('connect fails cleanly: a path the server does not map, a port nobody listens on', async () => {
    const { url } = await sharedServer();
    await assert.rejects(Client.connect(url.replace(/\/ws$/, '/nowhere')), (e) => e instanceof TernioError && e.kind === 'closed');
    await assert.rejects(Client.connect('ws://127.0.0.1:1/ws'), (e) => e instanceof TernioError && e.kind === 'closed');
  });

  test('close() ends the connection with DISCONNECT NORMAL and code 1000', async () => {
    const client = await Client.connect((await sharedServer()).url);
    await client.request(Echo, { payload: text('x') });
    const info = await client.close();
    assert.deepEqual(info, { code: 1000, reason: '', disconnect: null, local: true });
    await assert.rejects(client.request(Echo, { payload: text('y') }), (e) => e.kind === 'closed');
    // The server is still there for others.
    const other = await Client.connect(shared.url);
    assert.deepEqual(await other.request(Echo, { payload: text('z') }), { payload: text('z') });
    await other.close();
  });

  test('pending requests reject promptly when the server goes away', async () => {
    const server = await startServer();
    const client = await Client.connect(server.url, { timeout: 30_000 });
    await client.request(Echo, { payload: text('warm') });
    // Stopped, the server cannot answer: these stay pending until the kill.
    server.child.kill('SIGSTOP');
    await new Promise((resolve) => setTimeout(resolve, 200)); // the signal lands
    const promises = Array.from({ length: 10 }, (_, i) => client.request(Echo, { payload: text(`${i}`) }));
    const settled = Promise.allSettled(promises);
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(client.inFlight, 10);
    const start = performance.now();
    server.child.kill('SIGKILL');
    await exited(server.child);
    const results = await settled;
    const elapsed = performance.now() - start;
    for (const result of results) {
      assert.equal(result.status, 'rejected');
      assert.ok(result.reason instanceof TernioError);
      assert.equal(result.reason.kind, 'closed');
    }
    assert.ok(elapsed < 2000, `rejected after ${elapsed} ms`);
    const info = await client.closed;
    assert.equal(info.disconnect, null);
    assert.equal(info.local, false);
  });

  test('a server shutdown arrives as DISCONNECT SHUTDOWN', async () => {
    const server = await startServer();
    const client = await Client.connect(server.url);
    await client.request(Echo, { payload: text('x') });
    server.child.kill('SIGINT'); // the echo server shuts down on ctrl-c
    const info = await client.closed;
    assert.equal(info.disconnect?.reason, DisconnectReason.SHUTDOWN);
    assert.equal(info.disconnect.reasonName, 'SHUTDOWN');
    assert.equal(info.code, 1001);
    await assert.rejects(client.request(Echo, { payload: text('y') }),
      (e) => e.kind === 'closed' && e.disconnect.reason === DisconnectReason.SHUTDOWN);
    await exited(server.child);
  });

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const hostPort = (url) => new URL(url).host;

  /** Resolves with the next state event of this kind that `events` records. */
  function nextEvent(events, state) {
    const from = events.length;
    return new Promise((resolve) => {
      const check = setInterval(() => {
        const found = events.slice(from).find((e) => e.state === state);
        if (found) {
          clearInterval(check);
          resolve(found);
        }
      }, 10);
    });
  }

  test('reconnect: the server is killed and restarted; the client comes back and requests go through', { timeout: 60_000 }, async (t) => {
    const first = await startServer();
    const events = [];
    const client = await Client.connect(first.url, {
      timeout: 30_000,
      reconnect: { initialDelay: 100, maxDelay: 500, maxAttempts: 100 },
      resume: false, // resume.test.js has the resumed session's side
      onStateChange: (event) => events.push(event),
    });
    t.after(() => client.close()); // also when an assertion fails: no reconnecting forever
    assert.deepEqual(await client.request(Echo, { payload: text('before') }), { payload: text('before') });
    // A request in flight when the server dies fails at once, not at its 30 s timeout.
    first.child.kill('SIGSTOP');
    await sleep(200);
    const inFlight = client.request(Echo, { payload: text('in flight') });
    const inFlightSettled = inFlight.then(() => null, (error) => error);
    await sleep(100);
    const start = performance.now();
    first.child.kill('SIGKILL');
    await exited(first.child);
    const error = await inFlightSettled;
    assert.ok(error instanceof TernioError && error.kind === 'closed', String(error));
    assert.match(error.message, /in flight/);
    assert.ok(performance.now() - start < 2000);
    await nextEvent(events, 'reconnecting');
    assert.equal(client.state, 'reconnecting');
    // A request made now waits for the new connection.
    const waiting = client.request(Echo, { payload: text('waited') });
    await sleep(1000); // a few attempts fail: nobody listens
    assert.ok(events.filter((e) => e.state === 'reconnecting').length >= 2);
    const opened = nextEvent(events, 'open');
    const second = await startServer(hostPort(first.url)); // the same port
    assert.equal(second.url, first.url);
    assert.ok((await opened).attempt >= 1);
    assert.deepEqual(await waiting, { payload: text('waited') });
    assert.deepEqual(await client.request(Echo, { payload: text('after') }), { payload: text('after') });
    assert.equal(typeof await client.ping(), 'number');
    await client.close();
    second.child.kill('SIGKILL');
  });

  test('a server that stops reading: the outbound buffer\'s bound drops the connection', { timeout: 60_000 }, async (t) => {
    const server = await startServer();
    t.after(() => server.child.kill('SIGKILL'));
    const limit = 1 << 20;
    const client = await Client.connect(server.url, { maxBufferedBytes: limit, keepaliveInterval: 0 });
    const chunk = { payload: new Uint8Array(64 * 1024) };
    // While the server reads, paced sends do not fill the buffer.
    for (let i = 0; i < 100; i++) {
      client.send(Echo, chunk);
      await sleep(1);
    }
    assert.deepEqual(await client.request(Echo, { payload: text('reads') }), { payload: text('reads') });
    // Stopped, it reads nothing: the kernel's buffers fill, then bufferedAmount grows.
    server.child.kill('SIGSTOP');
    await sleep(200);
    const pending = client.request(Echo, { payload: text('stuck') }, { timeout: 60_000 });
    const pendingSettled = pending.then(() => null, (error) => error);
    let error = null;
    let sent = 0;
    while (!error && sent < 1000) { // 64 MB at most
      try {
        client.send(Echo, chunk);
        sent++;
      } catch (e) {
        error = e;
      }
      await sleep(1);
    }
    assert.ok(error, `${sent} frames of 64 KiB sent to a server that reads nothing`);
    assert.equal(error.kind, 'closed');
    assert.match(error.message, /outbound buffer full: \d+ bytes wait to be sent/);
    assert.equal((await pendingSettled)?.kind, 'closed', 'the request in flight fails at once');
    assert.deepEqual(await client.closed, { code: 1006, reason: 'outbound buffer full', disconnect: null, local: true });
  });
}
