// End to end: the chat page of examples/chat_server.rs in headless Chromium
// (Debian's /usr/bin/chromium, driven by playwright-core) and a Rust client
// over TCP (examples/chat_bot.rs, on ternio-client) in one room, messages
// both ways, both sides checked; then the Rust client leaves and the server
// shuts down, and the page shows both.
//
//   cd tests/browser && npm ci && node --test
//
// It builds chat_server and chat_bot with `cargo build` (or uses the
// executables named by TERNIO_CHAT_SERVER and TERNIO_CHAT_BOT) and starts the
// server on ports the OS picks. CHROMIUM names another browser executable.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

import { Child, examples, launchChromium, root } from './support.mjs';

test('a page in Chromium and a Rust client chat in one room', { timeout: 120_000 }, async (t) => {
  const built = examples({ chat_server: 'TERNIO_CHAT_SERVER', chat_bot: 'TERNIO_CHAT_BOT' });

  const server = new Child('chat_server', built.chat_server,
    ['--tcp', '127.0.0.1:0', '--ws', '127.0.0.1:0', '--http', '127.0.0.1:0']);
  t.after(() => server.kill());
  const [, tcp] = await server.waitFor(/^chat over tcp on (\S+)$/);
  const [, ws] = await server.waitFor(/^chat over websocket on (\S+)$/);
  const [, site] = await server.waitFor(/^chat page on (http:\/\/\S+)$/);

  // The page is served as it is: the SDK byte for byte, config.json names
  // the WebSocket port, and nothing else is served.
  const sdk = await fetch(new URL('ternio.js', site));
  assert.equal(sdk.status, 200);
  assert.match(sdk.headers.get('content-type'), /^text\/javascript/);
  assert.equal(await sdk.text(), await readFile(join(root, 'sdk-js', 'dist', 'ternio.browser.js'), 'utf8'));
  const page = await fetch(site);
  assert.match(page.headers.get('content-security-policy'), /script-src 'self'/);
  const config = await (await fetch(new URL('config.json', site))).json();
  assert.equal(`ws://127.0.0.1:${config.websocket.port}${config.websocket.path}`, ws);
  assert.equal((await fetch(new URL('../Cargo.toml', site))).status, 404);
  assert.equal((await fetch(site, { method: 'POST', body: 'x' })).status, 405);

  // The Rust client: in the room first, answers one message, then leaves.
  const bot = new Child('chat_bot', built.chat_bot,
    ['--tcp', tcp, '--nick', 'rusty', '--room', 'lobby', '--replies', '1']);
  t.after(() => bot.kill());
  await bot.waitFor(/^ready: rusty in lobby with rusty$/);

  const context = await launchChromium(t, chromium);
  const tab = context.pages()[0] ?? await context.newPage();
  const problems = [];
  tab.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  tab.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warning') problems.push(`console ${message.type()}: ${message.text()}`);
  });

  await tab.goto(site);
  await tab.locator('#status', { hasText: `connected to ${ws}` }).waitFor();

  // Join from the page: the Rust client is in the room, and sees the page arrive.
  await tab.fill('#nick', 'web');
  await tab.fill('#room', 'lobby');
  await tab.click('#join');
  await tab.locator('#log li', { hasText: 'you joined lobby' }).waitFor();
  assert.deepEqual(await tab.locator('#members li').allTextContents(), ['rusty', 'web']);
  await bot.waitFor(/^joined \[lobby\] web$/);

  // Browser → Rust.
  await tab.fill('#text', 'hello from the browser');
  await tab.press('#text', 'Enter');
  await bot.waitFor(/^heard \[lobby\] web: hello from the browser$/);

  // Rust → browser: the answer shows on the page, and came back to the bot too.
  await tab.locator('#log li.message', { hasText: 'rusty: web, you said: hello from the browser' }).waitFor();
  await bot.waitFor(/^said \[lobby\]: web, you said: hello from the browser$/);
  assert.equal(await tab.inputValue('#text'), '', 'the input is cleared once the message is said');

  // The bot leaves after its one answer; the page learns it from the
  // server's presence hook (its connection closed, so it left the room).
  assert.deepEqual(await bot.exit(), { code: 0, signal: null });
  await tab.locator('#log li.event', { hasText: 'rusty left' }).waitFor();
  assert.deepEqual(await tab.locator('#members li').allTextContents(), ['web']);
  assert.deepEqual(await tab.locator('#log li').allTextContents(), [
    'you are web',
    'you joined lobby; here: rusty, web',
    'web: hello from the browser',
    'rusty: web, you said: hello from the browser',
    'rusty left',
  ]);

  // Ctrl-C on the server: the page is told why it was disconnected.
  server.kill('SIGINT');
  await tab.locator('#status', { hasText: 'disconnected (SHUTDOWN' }).waitFor();
  assert.equal(await tab.isDisabled('#text'), true);
  assert.deepEqual(await server.exit(), { code: 0, signal: null });

  assert.deepEqual(problems, []);
});
