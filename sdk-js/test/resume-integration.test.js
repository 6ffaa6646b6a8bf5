// Resumption against the real echo server (examples/echo_server.rs, which
// resumes plain sessions for 30 s unless told otherwise) over WebSocket,
// through a proxy that cuts connections at random points (mid-frame
// included): every request answered once, every push once and in order;
// past the time to live, or on a server that does not know the ticket,
// the session is lost and a new one starts.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';

import { Client, Flags, ErrorCode, decodeFrame, packet, bytes, u32, u64 } from '../dist/index.js';

import { CuttingProxy } from './cutting-proxy.js';
import { exampleBinary, rerunWithWebSocket, startEchoServer } from './support.js';

const HERE = fileURLToPath(import.meta.url);

const Echo = packet(0x0001, { payload: bytes }, { name: 'Echo' });
// Sent on the stream, the echo server acknowledges it and pushes it back.
const DatagramEcho = packet(0x0003, { payload: bytes }, { name: 'DatagramEcho' });
const NumberItem = packet(0x0005, { value: u32 }, { name: 'Number' });
const CountTo = packet(0x0004, { count: u32 }, { name: 'CountTo', item: NumberItem });
const Total = packet(0x0007, { sum: u64 }, { name: 'Total' });
const AddUp = packet(0x0006, {}, { name: 'AddUp', response: Total, item: NumberItem });
const text = (s) => new TextEncoder().encode(s);
const untext = (b) => new TextDecoder().decode(b);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Quick reconnects, forever (the test's own timeout bounds it). */
const RECONNECT = { initialDelay: 5, maxDelay: 50, healthyAfter: 1000, maxAttempts: Infinity };

if (typeof globalThis.WebSocket !== 'function') {
  rerunWithWebSocket(HERE, 'resumption integration tests');
} else {
  let binary;
  before(() => {
    binary = exampleBinary('echo_server', 'TERNIO_ECHO_SERVER');
  }, { timeout: 15 * 60_000 });

  const servers = [];
  const proxies = [];
  after(async () => {
    servers.forEach(({ child }) => child.kill('SIGKILL'));
    await Promise.all(proxies.map((proxy) => proxy.close()));
  });

  /** An echo server and a proxy to it; the client's URL goes through the proxy. */
  async function serverBehindProxy(seed, budget, extra = []) {
    const server = await startEchoServer(binary, servers, '127.0.0.1:0', extra);
    const { hostname, port } = new URL(server.url);
    const proxy = await CuttingProxy.start({ host: hostname, port: Number(port) }, seed, budget);
    proxies.push(proxy);
    return { server, proxy, url: `ws://127.0.0.1:${proxy.port}/ws` };
  }

  /**
   * A WebSocket that notes every answer (RESPONSE frame with an
   * application opcode) it hands the client, by request id: each must come
   * once, whatever the cuts.
   */
  function answerCounter() {
    const answers = new Map();
    class Counting extends globalThis.WebSocket {
      constructor(...args) {
        super(...args);
        this.addEventListener('message', (event) => {
          if (typeof event.data === 'string') return;
          const frame = decodeFrame(new Uint8Array(event.data));
          if (frame.flags & Flags.RESPONSE && frame.opcode <= 0xfeff && frame.requestId !== 0) {
            answers.set(frame.requestId, (answers.get(frame.requestId) ?? 0) + 1);
          }
        });
      }
    }
    return { Counting, answers };
  }

  test('through random cuts: requests (sequential and concurrent) answered once each, pushes once and in order', { timeout: 60_000 }, async (t) => {
    // Budgets from 1,200 bytes: a connection's WebSocket upgrade, RESUME and
    // its answer (about 700 bytes) always get through, so no cut loses the
    // answer that rotates the ticket (section 4.2: the session would then be
    // lost); every later byte may be cut.
    const { proxy, url } = await serverBehindProxy(0xc0ffee, [1200, 6000]);
    const { Counting, answers } = answerCounter();
    const sessions = [];
    const client = await Client.connect(url, {
      WebSocket: Counting, reconnect: RECONNECT, keepaliveInterval: 0, timeout: 30_000,
      onSessionChange: (event) => sessions.push(event),
    });
    t.after(() => client.close());
    const pushes = [];
    client.on(DatagramEcho, (value) => pushes.push(untext(value.payload)));
    const expectedPushes = [];
    // Sequential requests, with a push asked for every third.
    for (let i = 0; i < 150; i++) {
      assert.deepEqual(await client.request(Echo, { payload: text(`seq ${i}`) }), { payload: text(`seq ${i}`) });
      if (i % 3 === 0) {
        expectedPushes.push(`push ${i}`);
        assert.equal(await client.request(DatagramEcho, { payload: text(`push ${i}`) }), undefined);
      }
    }
    // Concurrent batches: requests and pushes in flight together when the cuts land.
    for (let batch = 0; batch < 6; batch++) {
      const requests = [];
      for (let i = 0; i < 40; i++) {
        const payload = `batch ${batch} ${i}`;
        requests.push(client.request(Echo, { payload: text(payload) }).then((answer) => assert.equal(untext(answer.payload), payload)));
        if (i % 4 === 0) {
          expectedPushes.push(`push ${batch} ${i}`);
          requests.push(client.request(DatagramEcho, { payload: text(`push ${batch} ${i}`) }));
        }
      }
      await Promise.all(requests);
    }
    // Every push has been queued before its request was answered; the last may still be on its way.
    for (let waited = 0; pushes.length < expectedPushes.length && waited < 5000; waited += 10) await sleep(10);
    assert.deepEqual(pushes, expectedPushes, 'each push once, in order');
    const twice = [...answers].filter(([, n]) => n !== 1);
    assert.deepEqual(twice, [], 'each answer reached the client once');
    assert.equal(client.inFlight, 0);
    assert.ok(proxy.cuts >= 3, `only ${proxy.cuts} cuts`);
    assert.deepEqual(sessions.filter((e) => e.session !== 'resumed'), [], 'never lost');
    assert.ok(client.resumptions >= 3, `${client.resumptions} resumptions`);
    t.diagnostic(`${proxy.cuts} cuts, ${client.resumptions} resumptions, ${answers.size} answers, ${pushes.length} pushes`);
  });

  test('streams resume with the session: a download and an upload open across cuts, every item once and in order', { timeout: 30_000 }, async (t) => {
    const { proxy, url } = await serverBehindProxy(2, null);
    const sessions = [];
    const client = await Client.connect(url, {
      reconnect: RECONNECT, keepaliveInterval: 0, onSessionChange: (event) => sessions.push(event),
    });
    t.after(() => client.close());
    for (let waited = 0; !client.resumable && waited < 2000; waited += 10) await sleep(10);
    const resumedTimes = async (count) => {
      for (let waited = 0; sessions.length < count && waited < 5000; waited += 10) await sleep(10);
      assert.deepEqual(sessions.map((event) => event.session), Array(count).fill('resumed'));
    };
    // A download: cut three times while it is under way (credit holds the server 32 items ahead).
    const count = 3000;
    const download = client.requestStream(CountTo, { count })[Symbol.asyncIterator]();
    let next = 0;
    for (let cut = 1; cut <= 3; cut++) {
      for (let i = 0; i < 500; i++) assert.equal((await download.next()).value.value, next++);
      proxy.cutAll();
      // What arrived before the cut, then (once resumed) the rest: the loop grants credit meanwhile.
      for (let i = 0; i < 40; i++) assert.equal((await download.next()).value.value, next++);
      await resumedTimes(cut);
    }
    for (;;) {
      const { value, done } = await download.next();
      if (done) break;
      assert.equal(value.value, next++);
    }
    assert.equal(next, count, 'every item, once, in order');
    // An upload: items sent while the connection is down are kept and replayed.
    const upload = client.upload(AddUp, {});
    let sum = 0n;
    for (let value = 0; value < 2000; value++) {
      await upload.send({ value });
      sum += BigInt(value);
      if (value % 500 === 250) proxy.cutAll();
    }
    assert.deepEqual(await upload.finish(), { sum }, 'every item once');
    await resumedTimes(7);
    assert.ok(client.resumable, 'the session is still resumable');
    const seen = [];
    for await (const number of client.requestStream(CountTo, { count: 100 })) seen.push(number.value);
    assert.equal(seen.length, 100);
  });

  test('an upload larger than the replay buffer waits for the server\'s ACKs: the session stays resumable', { timeout: 30_000 }, async (t) => {
    const { proxy, url } = await serverBehindProxy(4, null);
    const sessions = [];
    const client = await Client.connect(url, {
      reconnect: RECONNECT, keepaliveInterval: 0, resume: { replayBytes: 1024 },
      onSessionChange: (event) => sessions.push(event),
    });
    t.after(() => client.close());
    for (let waited = 0; !client.resumable && waited < 2000; waited += 10) await sleep(10);
    assert.ok(client.resumable, 'a ticket');
    // 600 items of 11 bytes each (7 of header, a u32): 6.6 KB through a
    // replay buffer of 1 KiB, sent as fast as the server's credit allows.
    // The server acknowledges every 128 frames or 200 ms: the client must
    // wait for its ACKs (93 frames fill the buffer; it waits at 69, a
    // quarter of the bound kept for requests).
    const upload = client.upload(AddUp, {});
    let sum = 0n;
    for (let value = 0; value < 600; value++) {
      await upload.send({ value });
      sum += BigInt(value);
      assert.ok(client.resumable, `the replay buffer overflowed at item ${value}`);
    }
    assert.deepEqual(await upload.finish(), { sum });
    // A cut now is resumed, not lost.
    proxy.cutAll();
    assert.deepEqual(await client.request(Echo, { payload: text('after') }), { payload: text('after') });
    assert.deepEqual(sessions.map((event) => event.session), ['resumed']);
  });

  test('once the server\'s replay buffer overflowed, its ACKs still make room for an upload', { timeout: 30_000 }, async (t) => {
    // The echo server keeps 64 KiB; this client 200 KB.
    const { url } = await serverBehindProxy(5, null);
    const client = await Client.connect(url, {
      reconnect: RECONNECT, keepaliveInterval: 0, resume: { replayBytes: 200_000 },
    });
    t.after(() => client.close());
    for (let waited = 0; !client.resumable && waited < 2000; waited += 10) await sleep(10);
    // A 70 KB answer overflows the server's buffer: it can no longer resume
    // the session, but it goes on counting and acknowledging.
    const big = new Uint8Array(70_000).fill(7);
    assert.deepEqual(await client.request(Echo, { payload: big }), { payload: big });
    // 20,000 items of 11 bytes: 220 KB, more than the client's 150 KB of room.
    const upload = client.upload(AddUp, {});
    let sum = 0n;
    for (let value = 0; value < 20_000; value++) {
      await upload.send({ value });
      sum += BigInt(value);
    }
    assert.deepEqual(await upload.finish(), { sum });
  });

  test('through random cuts: a download and an upload, every item once and in order', { timeout: 60_000 }, async (t) => {
    // Budgets from 1,200 bytes, as above: RESUME and its answer always get through.
    const { proxy, url } = await serverBehindProxy(0x5eed, [1200, 8000]);
    const client = await Client.connect(url, { reconnect: RECONNECT, keepaliveInterval: 0, timeout: 30_000 });
    t.after(() => client.close());
    let next = 0;
    for await (const number of client.requestStream(CountTo, { count: 5000 })) assert.equal(number.value, next++);
    assert.equal(next, 5000, 'every item, once');
    const upload = client.upload(AddUp, {});
    let sum = 0n;
    for (let value = 0; value < 3000; value++) {
      await upload.send({ value });
      sum += BigInt(value);
    }
    assert.deepEqual(await upload.finish(), { sum });
    assert.ok(proxy.cuts >= 3, `only ${proxy.cuts} cuts`);
    assert.ok(client.resumptions >= 3, `only ${client.resumptions} resumptions`);
  });

  test('a stream whose session is lost (past its time to live) fails (\'closed\')', { timeout: 30_000 }, async (t) => {
    const { proxy, url } = await serverBehindProxy(3, null, ['--resume-ttl', '1']);
    const sessions = [];
    const client = await Client.connect(url, {
      reconnect: RECONNECT, keepaliveInterval: 0, onSessionChange: (event) => sessions.push(event),
    });
    t.after(() => client.close());
    for (let waited = 0; !client.resumable && waited < 2000; waited += 10) await sleep(10);
    const download = client.requestStream(CountTo, { count: 1_000_000 })[Symbol.asyncIterator]();
    assert.equal((await download.next()).value.value, 0);
    proxy.setOpen(false);
    proxy.cutAll();
    await sleep(2500);
    proxy.setOpen(true);
    let error = null;
    for (;;) {
      try {
        if ((await download.next()).done) break;
      } catch (thrown) {
        error = thrown;
        break;
      }
    }
    assert.equal(error?.kind, 'closed', String(error));
    assert.deepEqual(sessions.map((event) => event.session), ['lost']);
  });

  test('past the time to live: \'lost\', and a new session that works', { timeout: 30_000 }, async (t) => {
    const { proxy, url } = await serverBehindProxy(1, null, ['--resume-ttl', '1']);
    const sessions = [];
    const client = await Client.connect(url, {
      reconnect: RECONNECT, keepaliveInterval: 0, onSessionChange: (event) => sessions.push(event),
    });
    t.after(() => client.close());
    assert.deepEqual(await client.request(Echo, { payload: text('before') }), { payload: text('before') });
    assert.equal(client.resumable, true);
    // The network is down for longer than the server keeps the session.
    proxy.setOpen(false);
    proxy.cutAll();
    await sleep(2500);
    proxy.setOpen(true);
    assert.deepEqual(await client.request(Echo, { payload: text('after') }), { payload: text('after') });
    assert.equal(sessions.length, 1);
    assert.equal(sessions[0].session, 'lost');
    assert.match(sessions[0].reason, /time to live of 1000 ms passed/);
    assert.equal(client.resumptions, 0);
    // The new session has its own ticket: a cut now is resumed.
    for (let waited = 0; !client.resumable && waited < 2000; waited += 10) await sleep(10);
    proxy.cutAll();
    assert.deepEqual(await client.request(Echo, { payload: text('resumed') }), { payload: text('resumed') });
    assert.deepEqual(sessions.map((e) => e.session), ['lost', 'resumed']);
  });

  test('a server that does not know the ticket (restarted) refuses it: in-flight requests fail, \'lost\', a new session', { timeout: 30_000 }, async (t) => {
    const first = await startEchoServer(binary, servers);
    const sessions = [];
    const client = await Client.connect(first.url, {
      reconnect: RECONNECT, keepaliveInterval: 0, timeout: 20_000, onSessionChange: (event) => sessions.push(event),
    });
    t.after(() => client.close());
    assert.deepEqual(await client.request(Echo, { payload: text('before') }), { payload: text('before') });
    for (let waited = 0; !client.resumable && waited < 2000; waited += 10) await sleep(10);
    // Stopped, the server cannot answer: the request stays in flight.
    first.child.kill('SIGSTOP');
    await sleep(100);
    const inFlight = client.request(Echo, { payload: text('in flight') }).then(() => null, (error) => error);
    await sleep(100);
    const exited = new Promise((resolve) => first.child.once('exit', resolve));
    first.child.kill('SIGKILL');
    await exited;
    await sleep(200);
    assert.equal(client.inFlight, 1, 'kept for a resumption while the client reconnects');
    const second = await startEchoServer(binary, servers, new URL(first.url).host); // the same port
    const error = await inFlight;
    assert.equal(error?.kind, 'closed');
    assert.match(error.message, /the session was lost \(the server refused to resume it: .*\): the request was in flight/);
    assert.equal(error.cause?.code, ErrorCode.HANDSHAKE_FAILED);
    assert.deepEqual(sessions.map((e) => e.session), ['lost']);
    assert.deepEqual(await client.request(Echo, { payload: text('after') }), { payload: text('after') });
    await client.close();
    second.child.kill('SIGKILL');
  });
}
