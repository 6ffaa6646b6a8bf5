// The room game's client side (examples/web/rooms/rooms.js, quoted by
// docs/GUIDE.md chapter 7) against the real example server
// (examples/rooms.rs) over WebSocket. rooms.js, packets.js and ternio.js
// are fetched from the page the server serves, as a browser would load
// them, and imported from a temporary directory. The server is built once with cargo
// (or taken from the TERNIO_ROOMS_SERVER environment variable) and started
// on ports the OS picks.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { exampleBinary, rerunWithWebSocket } from './support.js';

const HERE = fileURLToPath(import.meta.url);
const TOKEN = 'guide-admin-token';

if (typeof globalThis.WebSocket !== 'function') {
  rerunWithWebSocket(HERE, 'rooms tests');
} else {
  let server;
  let Game;
  let dir;

  /** Starts the server on free ports; resolves with its child, WebSocket URL and page URL. */
  function startServer(binary) {
    const child = spawn(binary, ['--tcp', '127.0.0.1:0', '--ws', '127.0.0.1:0', '--http', '127.0.0.1:0'],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, RUST_LOG: 'warn', ROOMS_ADMIN_TOKEN: TOKEN } });
    let output = '';
    child.stderr.setEncoding('utf8').on('data', (chunk) => { output += chunk; });
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`rooms server did not start within 20 s:\n${output}`)), 20_000);
      child.on('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`rooms server exited (${code ?? signal}):\n${output}`));
      });
      child.stdout.setEncoding('utf8').on('data', (chunk) => {
        output += chunk;
        const ws = output.match(/rooms over websocket on (ws:\/\/\S+)/);
        const page = output.match(/rooms page on (http:\/\/\S+)/);
        if (ws && page) {
          clearTimeout(timer);
          resolve({ child, url: ws[1], page: page[1] });
        }
      });
    });
  }

  before(async () => {
    server = await startServer(exampleBinary('rooms', 'TERNIO_ROOMS_SERVER'));
    // What the page loads, from the page's own server.
    dir = mkdtempSync(join(tmpdir(), 'ternio-rooms-'));
    for (const file of ['rooms.js', 'packets.js', 'ternio.js', 'page.js', 'index.html']) {
      const response = await fetch(new URL(file, server.page));
      assert.equal(response.status, 200, file);
      writeFileSync(join(dir, file), await response.text());
    }
    ({ Game } = await import(pathToFileURL(join(dir, 'rooms.js')).href));
  }, { timeout: 15 * 60_000 });

  after(() => {
    server?.child.kill('SIGKILL');
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Resolves once `predicate(game)` holds after a change of the board. */
  function until(game, predicate) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the board never got there')), 5000);
      const check = () => {
        if (predicate(game)) {
          clearTimeout(timer);
          resolve();
        }
      };
      const before = game.onChange;
      game.onChange = (g) => { before(g); check(); };
      check();
    });
  }

  test('two players share a room: joins, moves and departures reach both boards', async () => {
    const ann = await Game.connect(server.url);
    assert.deepEqual(await ann.login('ann'), { name: 'ann', level: 1 });
    const joined = await ann.join('lobby');
    assert.deepEqual(joined, { room: 'lobby', players: [{ name: 'ann', x: 8, y: 8 }] });

    const bob = await Game.connect(server.url);
    await bob.login('bob');
    await bob.join('lobby');
    assert.deepEqual([...bob.players.keys()].sort(), ['ann', 'bob']);
    await until(ann, (g) => g.players.has('bob'));

    await bob.move(1, -1);
    await until(ann, (g) => g.players.get('bob')?.x === 9);
    assert.deepEqual(ann.players.get('bob'), { x: 9, y: 7 });
    assert.equal(ann.moves, 1n);

    await bob.close();
    await until(ann, (g) => !g.players.has('bob'));
    await ann.close();
  });

  test('the server refuses what the rules forbid', async () => {
    const eve = await Game.connect(server.url);
    // No login: permission 1 is missing (UNAUTHORIZED, 3).
    await assert.rejects(eve.join('lobby'), (error) => error.kind === 'remote' && error.code === 3);
    await eve.login('eve');
    await assert.rejects(eve.move(1, 0), (error) => error.code === 103); // not in a room
    await eve.join('arena');
    await assert.rejects(eve.move(2, 0), (error) => error.code === 102); // one step at a time
    await eve.close();
  });

  test('an admin kicks a player', async () => {
    const admin = await Game.connect(server.url);
    assert.deepEqual(await admin.login('root', TOKEN), { name: 'root', level: 2 });
    const mallory = await Game.connect(server.url);
    await mallory.login('mallory');
    await assert.rejects(mallory.client.request(0x0305, new Uint8Array([0])), (error) => error.code === 3);
    // Kick { name: 'mallory' }: a string is a varint length and UTF-8.
    const name = new TextEncoder().encode('mallory');
    await admin.client.request(0x0305, new Uint8Array([name.length, ...name]));
    const closed = await mallory.client.closed;
    assert.equal(closed.disconnect?.reasonName, 'KICKED');
    await admin.close();
  });
}
