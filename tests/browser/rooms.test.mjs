// End to end: the room game's page (examples/rooms.rs, docs/GUIDE.md) in two
// tabs of headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core): two players log in and join one room, one moves with
// the arrow keys and both boards show it, then one tab closes and the
// other board loses that player.
//
//   cd tests/browser && npm ci && node --test
//
// It builds the rooms example with `cargo build` (or uses the executable
// named by TERNIO_ROOMS_SERVER) and starts it on ports the OS picks.
// CHROMIUM names another browser executable.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { chromium } from 'playwright-core';

import { STEP, examples, launchChromium } from './support.mjs';

/** Starts the server; resolves with the child and its page's URL once it serves. */
function start(executable) {
  const child = spawn(executable, ['--tcp', '127.0.0.1:0', '--ws', '127.0.0.1:0', '--http', '127.0.0.1:0'],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, RUST_LOG: 'warn' } });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (text) => { stderr += text; });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`rooms did not start within ${STEP} ms:\n${stderr}`)), STEP);
    child.once('exit', (code, signal) => reject(new Error(`rooms exited (${code ?? signal}):\n${stderr}`)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      const page = line.match(/^rooms page on (http:\/\/\S+)$/);
      if (page) {
        clearTimeout(timer);
        resolve({ child, site: page[1] });
      }
    });
  });
}

/** The board's row `y` as the page draws it (16 cells, one character each). */
async function row(tab, y) {
  const board = await tab.textContent('#board');
  return board.split('\n')[y].replaceAll(' ', '');
}

test('two tabs play in one room: log in, join, move with the arrow keys, leave', { timeout: 120_000 }, async (t) => {
  const { child, site } = await start(examples({ rooms: 'TERNIO_ROOMS_SERVER' }).rooms);
  t.after(() => child.kill('SIGKILL'));

  const context = await launchChromium(t, chromium);
  const problems = [];
  const open = async (name) => {
    const tab = await context.newPage();
    tab.on('pageerror', (error) => problems.push(`${name}: page error: ${error.message}`));
    tab.on('console', (message) => {
      if (message.type() === 'error' || message.type() === 'warning') problems.push(`${name}: console ${message.type()}: ${message.text()}`);
    });
    await tab.goto(site);
    await tab.fill('#name', name);
    await tab.fill('#room', 'lobby');
    await tab.click('#join');
    await tab.locator('#status', { hasText: 'in lobby: move with the arrow keys' }).waitFor();
    return tab;
  };

  const ann = await open('ann');
  const bob = await open('bob');
  // Both start in the middle; Bob's board came from the answer to JoinRoom.
  assert.equal(await bob.textContent('#players'), 'ann, bob');
  await ann.locator('#players', { hasText: 'ann, bob' }).waitFor();

  // Bob steps right and down: both boards show him there, and the count.
  await bob.keyboard.press('ArrowRight');
  await ann.locator('#moves', { hasText: '1' }).waitFor();
  await bob.keyboard.press('ArrowDown');
  await ann.locator('#moves', { hasText: '2' }).waitFor();
  for (const tab of [ann, bob]) {
    await tab.locator('#moves', { hasText: '2' }).waitFor();
    assert.equal(await row(tab, 8), '········A·······');
    assert.equal(await row(tab, 9), '·········B······');
  }

  // Bob's tab closes: Ann's board loses him.
  await bob.close();
  await ann.locator('#players', { hasText: /^ann$/ }).waitFor();
  assert.equal(await row(ann, 9), '················');

  assert.deepEqual(problems, []);
});
