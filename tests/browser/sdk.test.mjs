// The SDK's browser bundle (sdk-js/dist/ternio.browser.js) in headless
// Chromium against the real echo server (examples/echo_server.rs) over
// WebSocket: requests through hand-declared packets and through the code
// ternio-codegen generates from the server's schema, a download, an
// aborted request, a secure session (NK, pinning the key the server
// prints; the @noble cryptography bundled), and a reconnection after the
// server restarts.
//
//   cd tests/browser && npm ci && node --test sdk.test.mjs
//
// It builds the echo server with `cargo build` (or uses the executable
// named by TERNIO_ECHO_SERVER). The page is served by a small HTTP server
// of the test's own: the bundle as /ternio.js, the generated packets as
// /packets.js.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

import { Child, examples, launchChromium, root } from './support.mjs';

const { generate } = await import(pathToFileURL(join(root, 'sdk-js/dist/codegen.js')).href);

/** Serves the page, the bundle and the generated packets on a free port; resolves with its URL. */
async function site() {
  const schema = JSON.parse(await readFile(join(root, 'examples/schemas/echo_server.json'), 'utf8'));
  const files = {
    '/': ['text/html', '<!doctype html><meta charset="utf-8"><title>sdk</title>'],
    '/ternio.js': ['text/javascript', await readFile(join(root, 'sdk-js/dist/ternio.browser.js'), 'utf8')],
    '/packets.js': ['text/javascript', generate(schema, { language: 'js', importFrom: './ternio.js' }).code],
  };
  const server = createServer((request, response) => {
    const file = files[request.url];
    response.writeHead(file ? 200 : 404, { 'content-type': file ? file[0] : 'text/plain' });
    response.end(file ? file[1] : 'not found');
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${server.address().port}/` };
}

/** Starts the echo server with its WebSocket listener on `ws`; resolves with the child, its URL and its public key (hex). */
async function echo(executable, ws = '127.0.0.1:0') {
  const child = new Child('echo_server', executable, ['--tcp', '127.0.0.1:0', '--ws', ws], { RUST_LOG: 'warn' });
  const [, url] = await child.waitFor(/^websocket listening on (ws:\/\/\S+)$/);
  const [, key] = await child.waitFor(/^public key: ([0-9a-f]{64})$/);
  return { child, url, key };
}

test('the browser bundle in Chromium: typed requests, a stream, an abort, a secure session, a reconnection', { timeout: 120_000 }, async (t) => {
  const executable = examples({ echo_server: 'TERNIO_ECHO_SERVER' }).echo_server;
  let server = await echo(executable);
  t.after(() => server.child.kill());
  const page = await site();
  t.after(() => page.server.close());

  const context = await launchChromium(t, chromium);
  const tab = await context.newPage();
  const errors = [];
  tab.on('pageerror', (error) => errors.push(error.message));
  await tab.goto(page.url);

  // Requests, typed and hand-declared; a download; an abort.
  const results = await tab.evaluate(async (url) => {
    const { Client, TernioError, packet, bytes } = await import('/ternio.js');
    const generated = await import('/packets.js');
    const text = (s) => new TextEncoder().encode(s);
    const client = await Client.connect(url);
    const Echo = packet(0x0001, { payload: bytes }, { name: 'Echo' });
    const hand = await client.request(Echo, { payload: text('by hand') });
    const typed = await client.request(generated.Echo, { payload: text('typed') });
    const numbers = [];
    for await (const number of client.requestStream(generated.CountTo, { count: 40 })) numbers.push(number.value);
    const upload = client.upload(generated.AddUp, {});
    for (const value of [5, 6, 7]) await upload.send({ value });
    const total = await upload.finish();
    const controller = new AbortController();
    const aborted = client.request(generated.Echo, { payload: text('never') }, { signal: controller.signal });
    controller.abort();
    const abort = await aborted.then(() => 'resolved', (error) => error instanceof TernioError && error.kind);
    const ping = await client.ping();
    await client.close();
    return {
      hand: new TextDecoder().decode(hand.payload),
      typed: new TextDecoder().decode(typed.payload),
      numbers,
      total: String(total.sum),
      totalIsBigInt: typeof total.sum === 'bigint',
      abort,
      ping: ping >= 0,
    };
  }, server.url);
  assert.deepEqual(results, {
    hand: 'by hand',
    typed: 'typed',
    numbers: Array.from({ length: 40 }, (_, i) => i),
    total: '18',
    totalIsBigInt: true,
    abort: 'aborted',
    ping: true,
  });

  // A secure session: NK pinning the key the server printed, every frame
  // sealed (SecureEcho's handler requires it), the client rekeying every 8
  // frames; a wrong pin is refused.
  const secure = await tab.evaluate(async ({ url, key }) => {
    const { Client, packet, bytes } = await import('/ternio.js');
    const SecureEcho = packet(0x0002, { payload: bytes }, { name: 'SecureEcho' });
    const client = await Client.connect(url, { secure: { pin: key }, rekey: { frames: 8 } });
    const replies = [];
    for (let i = 0; i < 20; i++) {
      const reply = await client.request(SecureEcho, { payload: new TextEncoder().encode(`sealed ${i}`) });
      replies.push(new TextDecoder().decode(reply.payload));
    }
    const pattern = client.secureSession.pattern;
    await client.close();
    const refused = await Client.connect(url, { secure: { pin: 'ab'.repeat(32) } })
      .then(() => 'connected', (error) => `${error.kind} ${error.code}`);
    return { pattern, last: replies.at(-1), count: replies.length, refused };
  }, { url: server.url, key: server.key });
  assert.deepEqual(secure, { pattern: 'NK', last: 'sealed 19', count: 20, refused: 'handshake 9' });

  // A reconnection: the server is killed and started again on its port;
  // the client comes back by itself and a request made meanwhile goes through.
  const port = new URL(server.url).port;
  await tab.evaluate(async (url) => {
    const { Client } = await import('/ternio.js');
    window.states = [];
    window.client = await Client.connect(url, {
      reconnect: { initialDelay: 50, maxDelay: 200, maxAttempts: Infinity },
      onStateChange: (event) => window.states.push(event.state),
    });
  }, server.url);
  server.child.kill();
  await server.child.exit();
  await tab.waitForFunction(() => window.states.includes('reconnecting'));
  const answer = tab.evaluate(async () => {
    const { Echo } = await import('/packets.js');
    const reply = await window.client.request(Echo, { payload: new TextEncoder().encode('back') }, { timeout: 20_000 });
    return new TextDecoder().decode(reply.payload);
  });
  server = await echo(executable, `127.0.0.1:${port}`);
  assert.equal(await answer, 'back');
  const states = await tab.evaluate(async () => {
    await window.client.close();
    return window.states;
  });
  assert.equal(states[0], 'open');
  assert.equal(states[1], 'reconnecting');
  assert.deepEqual(states.slice(-2), ['open', 'closed']);
  assert.deepEqual(errors, []);
});
