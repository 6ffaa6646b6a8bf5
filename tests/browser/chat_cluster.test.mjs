// End to end: the chat page on two nodes of a cluster. A redis-server of
// the test's own, two examples/chat_server.rs nodes joined through it
// (`--redis`), and one page in headless Chromium on each node, each served
// by its own node and connected to its own node's WebSocket listener. Both
// pages join one room: a nickname taken on one node is refused on the
// other, both pages list both members, messages go both ways, and when one
// page closes the other hears that its user left.
//
//   cd tests/browser && npm ci && node --test
//
// It builds chat_server with `cargo build` (or uses the executable named by
// TERNIO_CHAT_SERVER), runs `redis-server` (or the program named by
// TERNIO_REDIS_SERVER) on a free port, and starts the nodes on ports the OS
// picks. CHROMIUM names another browser executable.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

import { Child, STEP, examples, launchChromium, startRedis } from './support.mjs';

/** Waits until the page's "in the room" list is `expected` (sorted, as the page shows it). */
async function members(tab, expected) {
  const deadline = Date.now() + STEP;
  for (;;) {
    const shown = await tab.locator('#members li').allTextContents();
    if (JSON.stringify(shown) === JSON.stringify(expected)) return;
    if (Date.now() > deadline) assert.deepEqual(shown, expected, 'the page lists the room\'s members');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Takes `nick` and joins `room` from the page's form. */
async function enter(tab, nick, room) {
  await tab.fill('#nick', nick);
  await tab.fill('#room', room);
  await tab.click('#join');
}

/** Says `text` from the page. */
async function say(tab, text) {
  await tab.fill('#text', text);
  await tab.press('#text', 'Enter');
}

test('pages on two nodes of a cluster share a room', { timeout: 120_000 }, async (t) => {
  const built = examples({ chat_server: 'TERNIO_CHAT_SERVER' });

  const redis = await startRedis();
  t.after(() => redis.child.kill());
  // Every node of a cluster has the same secret.
  const env = { TERNIO_CLUSTER_SECRET: randomBytes(32).toString('hex') };
  const nodes = [];
  for (const name of ['one', 'two']) {
    const server = new Child(`chat_server ${name}`, built.chat_server, ['--redis', redis.url,
      '--tcp', '127.0.0.1:0', '--ws', '127.0.0.1:0', '--http', '127.0.0.1:0'], env);
    t.after(() => server.kill());
    const [, id] = await server.waitFor(/^node (\d+) of the cluster on /);
    const [, ws] = await server.waitFor(/^chat over websocket on (\S+)$/);
    const [, site] = await server.waitFor(/^chat page on (http:\/\/\S+)$/);
    nodes.push({ server, id, ws, site });
  }
  assert.notEqual(nodes[0].id, nodes[1].id, 'two nodes of one cluster');

  const context = await launchChromium(t, chromium);
  const problems = [];
  const open = async (node) => {
    const tab = await context.newPage();
    tab.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    tab.on('console', (message) => {
      if (message.type() === 'error' || message.type() === 'warning') problems.push(`console ${message.type()}: ${message.text()}`);
    });
    await tab.goto(node.site);
    // Each page connects to its own node (config.json names its WebSocket port).
    await tab.locator('#status', { hasText: `connected to ${node.ws}` }).waitFor();
    return tab;
  };
  const ann = await open(nodes[0]);
  const bob = await open(nodes[1]);

  await enter(ann, 'ann', 'lobby');
  await ann.locator('#log li', { hasText: 'you joined lobby' }).waitFor();
  await members(ann, ['ann']);

  // A nickname taken on node one is refused on node two.
  await enter(bob, 'ann', 'lobby');
  await bob.locator('#log li.error', { hasText: 'ann is taken' }).waitFor();

  // Both pages list both members: bob's from the answer to his join, which
  // names the members on every node; ann's from his join, told by node two.
  await enter(bob, 'bob', 'lobby');
  await bob.locator('#log li', { hasText: 'you joined lobby' }).waitFor();
  await members(bob, ['ann', 'bob']);
  await ann.locator('#log li.event', { hasText: 'bob joined' }).waitFor();
  await members(ann, ['ann', 'bob']);

  // Messages both ways, each shown on both pages.
  await say(ann, 'hello from node one');
  await bob.locator('#log li.message', { hasText: 'ann: hello from node one' }).waitFor();
  await say(bob, 'hello from node two');
  for (const tab of [ann, bob]) {
    await tab.locator('#log li.message', { hasText: 'bob: hello from node two' }).waitFor();
    const said = await tab.locator('#log li.message').allTextContents();
    assert.deepEqual(said, ['ann: hello from node one', 'bob: hello from node two']);
  }
  assert.deepEqual(await bob.locator('#log li').allTextContents(), [
    'cannot join lobby as ann: ann is taken',
    'you are bob',
    'you joined lobby; here: ann, bob',
    'ann: hello from node one',
    'bob: hello from node two',
  ]);

  // Bob's page closes: node two tells node one, and ann's page shows it.
  await bob.close();
  await ann.locator('#log li.event', { hasText: 'bob left' }).waitFor();
  await members(ann, ['ann']);
  assert.deepEqual(await ann.locator('#log li').allTextContents(), [
    'you are ann',
    'you joined lobby; here: ann',
    'bob joined',
    'ann: hello from node one',
    'bob: hello from node two',
    'bob left',
  ]);

  // Ctrl-C on both nodes: each stops cleanly.
  for (const { server } of nodes) server.kill('SIGINT');
  await ann.locator('#status', { hasText: 'disconnected (SHUTDOWN' }).waitFor();
  for (const { server } of nodes) assert.deepEqual(await server.exit(), { code: 0, signal: null });

  assert.deepEqual(problems, []);
});
