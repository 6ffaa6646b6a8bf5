// AbortSignal on requests and streams, against the real servers: the
// conformance server's Hold (an async handler that waits for its Release)
// and the echo server's CountTo (a download) and AddUp (an upload). A spy WebSocket notes every
// frame both ways, so the tests see the CANCEL go out and no answer come.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';

import { Client, TernioError, SystemOpcode, decodeFrame, packet, bool, bytes, u32, u64 } from '../dist/index.js';
import { exampleBinary, rerunWithWebSocket, startEchoServer } from './support.js';

const HERE = fileURLToPath(import.meta.url);

const Held = packet(0x0111, { tag: u32, released: bool }, { name: 'Held' });
const Hold = packet(0x0101, { tag: u32 }, { name: 'Hold', response: Held });
const Released = packet(0x0112, { tag: u32 }, { name: 'Released' });
const Release = packet(0x0102, { tag: u32 }, { name: 'Release', response: Released });
const NumberItem = packet(0x0005, { value: u32 }, { name: 'Number' });
const CountTo = packet(0x0004, { count: u32 }, { name: 'CountTo', item: NumberItem });
const Echo = packet(0x0001, { payload: bytes }, { name: 'Echo' });
const Total = packet(0x0007, { sum: u64 }, { name: 'Total' });
const AddUp = packet(0x0006, {}, { name: 'AddUp', response: Total, item: NumberItem });

if (typeof globalThis.WebSocket !== 'function') {
  rerunWithWebSocket(HERE, 'abort tests');
} else {
  const servers = [];
  let conformance;
  let echo;
  before(async () => {
    conformance = await startEchoServer(exampleBinary('conformance_server', 'TERNIO_CONFORMANCE_SERVER'), servers);
    echo = await startEchoServer(exampleBinary('echo_server', 'TERNIO_ECHO_SERVER'), servers);
  }, { timeout: 15 * 60_000 });
  after(() => servers.forEach(({ child }) => child.kill('SIGKILL')));

  /** A client whose WebSocket notes every frame: `sent` and `received`, decoded. */
  async function spied(url) {
    const seen = { sent: [], received: [] };
    class Spy extends globalThis.WebSocket {
      constructor(...args) {
        super(...args);
        this.addEventListener('message', (event) => seen.received.push(decodeFrame(new Uint8Array(event.data))));
      }

      send(data) {
        seen.sent.push(decodeFrame(data));
        super.send(data);
      }
    }
    const client = await Client.connect(url, { WebSocket: Spy, keepaliveInterval: 0 });
    return { client, seen };
  }

  const isAborted = (reason) => (error) => error instanceof TernioError && error.kind === 'aborted'
    && error.cause === reason;

  test('a request that times out is cancelled on the server too (CANCEL), as in the Rust client', async () => {
    const { client, seen } = await spied(conformance.url);
    const held = client.request(Hold, { tag: 9 }, { timeout: 100 });
    const request = seen.sent.find((frame) => frame.opcode === Hold.opcode);
    await assert.rejects(held, (error) => error instanceof TernioError && error.kind === 'timeout');
    assert.equal(client.inFlight, 0);
    const cancel = seen.sent.at(-1);
    assert.equal(cancel.opcode, SystemOpcode.CANCEL);
    assert.deepEqual(cancel.body, u32.encode(request.requestId));
    // Released now, the Hold is not answered: the server dropped it.
    assert.deepEqual(await client.request(Release, { tag: 9 }), { tag: 9 });
    const second = client.request(Hold, { tag: 10 });
    assert.deepEqual(await client.request(Release, { tag: 10 }), { tag: 10 });
    assert.deepEqual(await second, { tag: 10, released: true });
    assert.equal(seen.received.filter((frame) => frame.requestId === request.requestId).length, 0);
    await client.close();
  });

  test('an aborted request rejects with kind aborted and sends CANCEL; the server drops it', async () => {
    const { client, seen } = await spied(conformance.url);
    const controller = new AbortController();
    const held = client.request(Hold, { tag: 7 }, { signal: controller.signal });
    const request = seen.sent.find((frame) => frame.opcode === Hold.opcode);
    assert.ok(request, 'the Hold went out');
    const reason = new Error('the user went away');
    controller.abort(reason);
    await assert.rejects(held, isAborted(reason));
    assert.equal(client.inFlight, 0);
    const cancel = seen.sent.at(-1);
    assert.equal(cancel.opcode, SystemOpcode.CANCEL);
    assert.equal(cancel.requestId, 0);
    assert.deepEqual(cancel.body, u32.encode(request.requestId));
    // Released: the Hold would be answered now, had the server not dropped it.
    // The Release is answered first either way; a Hold of another tag,
    // released after, is answered after any answer to the first would have been.
    assert.deepEqual(await client.request(Release, { tag: 7 }), { tag: 7 });
    const second = client.request(Hold, { tag: 8 });
    assert.deepEqual(await client.request(Release, { tag: 8 }), { tag: 8 });
    assert.deepEqual(await second, { tag: 8, released: true });
    assert.equal(seen.received.filter((frame) => frame.requestId === request.requestId).length, 0);
    await client.close();
  });

  test('an already-aborted signal sends nothing', async () => {
    const { client, seen } = await spied(conformance.url);
    const sentBefore = seen.sent.length;
    const reason = new Error('never mind');
    await assert.rejects(client.request(Hold, { tag: 9 }, { signal: AbortSignal.abort(reason) }), isAborted(reason));
    assert.equal(seen.sent.length, sentBefore);
    assert.equal(client.inFlight, 0);
    assert.throws(() => client.requestStream(Hold, { tag: 9 }, { item: Held, signal: AbortSignal.abort(reason) }),
      isAborted(reason));
    assert.equal(seen.sent.length, sentBefore);
    await client.close();
  });

  test('a request answered before the abort is not cancelled', async () => {
    const { client, seen } = await spied(conformance.url);
    const controller = new AbortController();
    const released = await client.request(Release, { tag: 3 }, { signal: controller.signal });
    assert.deepEqual(released, { tag: 3 });
    controller.abort();
    assert.equal(seen.sent.filter((frame) => frame.opcode === SystemOpcode.CANCEL).length, 0);
    await client.close();
  });

  test('an aborted download throws aborted from its loop and sends CANCEL of its id', async () => {
    const { client, seen } = await spied(echo.url);
    const controller = new AbortController();
    const reason = new Error('enough');
    const numbers = [];
    await assert.rejects(async () => {
      for await (const number of client.requestStream(CountTo, { count: 1_000_000 }, { signal: controller.signal })) {
        numbers.push(number.value);
        if (numbers.length === 40) controller.abort(reason);
      }
    }, isAborted(reason));
    assert.deepEqual(numbers.slice(0, 40), Array.from({ length: 40 }, (_, i) => i));
    const request = seen.sent.find((frame) => frame.opcode === CountTo.opcode);
    const cancels = seen.sent.filter((frame) => frame.opcode === SystemOpcode.CANCEL);
    assert.deepEqual(cancels.map((frame) => frame.body), [u32.encode(request.requestId)]);
    assert.equal(client.inFlight, 0);
    assert.ok((await client.ping()) >= 0);
    await client.close();
  });

  /** An AbortController whose signal notes the 'abort' listeners added to it and not removed since. */
  function countingController() {
    const controller = new AbortController();
    const { signal } = controller;
    const listeners = new Set();
    const add = signal.addEventListener.bind(signal);
    const remove = signal.removeEventListener.bind(signal);
    signal.addEventListener = (type, listener, options) => {
      if (type === 'abort') listeners.add(listener);
      add(type, listener, options);
    };
    signal.removeEventListener = (type, listener, options) => {
      if (type === 'abort') listeners.delete(listener);
      remove(type, listener, options);
    };
    return { controller, signal, listeners };
  }

  test('one signal for many streams and requests: each removes its abort listener however it ends', async () => {
    const { client, seen } = await spied(echo.url);
    const { controller, signal, listeners } = countingController();
    const N = 25;
    // Downloads left early: return() cancels them.
    for (let i = 0; i < N; i++) {
      let taken = 0;
      for await (const number of client.requestStream(CountTo, { count: 1_000_000 }, { signal })) {
        assert.equal(number.value, taken);
        if (++taken === 3) break;
      }
    }
    assert.equal(listeners.size, 0, 'downloads left with break');
    // Uploads given up with cancel().
    for (let i = 0; i < N; i++) {
      const upload = client.upload(AddUp, {}, { signal });
      await upload.send({ value: i });
      upload.cancel();
      await assert.rejects(upload.send({ value: 0 }), /cancelled/);
    }
    assert.equal(listeners.size, 0, 'uploads cancelled');
    // Ended by the server's answer, and requests: these already removed theirs.
    for (let i = 0; i < N; i++) {
      const numbers = [];
      for await (const number of client.requestStream(CountTo, { count: 2 }, { signal })) numbers.push(number.value);
      assert.deepEqual(numbers, [0, 1]);
      const upload = client.upload(AddUp, {}, { signal });
      await upload.send({ value: 2 });
      assert.deepEqual(await upload.finish(), { sum: 2n });
      const payload = Uint8Array.of(i);
      assert.deepEqual(await client.request(Echo, { payload }, { signal }), { payload });
    }
    assert.equal(listeners.size, 0, 'streams answered');
    assert.equal(client.inFlight, 0);
    const cancels = seen.sent.filter((frame) => frame.opcode === SystemOpcode.CANCEL);
    assert.equal(cancels.length, 2 * N, 'each download left and each upload cancelled sent its CANCEL');
    // The signal still aborts what is open on it.
    const reason = new Error('now');
    const download = client.requestStream(CountTo, { count: 1_000_000 }, { signal });
    await assert.rejects(async () => {
      for await (const number of download) if (number.value === 5) controller.abort(reason);
    }, isAborted(reason));
    assert.equal(listeners.size, 0, 'aborted');
    await client.close();
  });
}
