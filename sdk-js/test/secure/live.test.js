// The secure layer against the Rust echo server over WebSocket: an NN
// handshake and a sealed SecureEcho (a handler that requires encryption),
// the same over NK pinning the server's identity, then a RESUME of the NK
// session on a new connection (NKpsk0) and a sealed echo under the resumed
// keys. Needs the echo server: TERNIO_ECHO_SERVER names it (scripts/test
// builds it); the test is skipped without it. Node 20 keeps WebSocket
// behind a flag: the file then runs itself again with it.

import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { ENCRYPTED, HEADER_LEN } from '../../dist/secure/seal.js';
import { parseTicketAnswer, startHandshake, startResume } from '../../dist/secure/session.js';
import { counting, header, hex, vector } from './vectors.js';

const SERVER = process.env.TERNIO_ECHO_SERVER;
const RESPONSE = 0x01;
const ERROR = 0x02;
const HANDSHAKE = 0xff01;
const RESUME_TICKET = 0xff08;
const RESUME = 0xff0a;
const SECURE_ECHO = 0x0002;

if (!SERVER) {
  test('live secure session against the echo server', { skip: 'TERNIO_ECHO_SERVER is not set' }, () => {});
} else if (typeof globalThis.WebSocket !== 'function') {
  test('live secure session (run again with --experimental-websocket)', { timeout: 120_000 }, () => {
    const env = { ...process.env };
    delete env.NODE_TEST_CONTEXT;
    const run = spawnSync(process.execPath, ['--experimental-websocket', fileURLToPath(import.meta.url)], { env, encoding: 'utf8' });
    assert.equal(run.status, 0, `${run.error ?? ''}\n${run.stdout}\n${run.stderr}`);
  });
} else {
  liveTests();
}

/** Starts the echo server with a WebSocket listener and the identity 00..1f; resolves with `{ child, url }`. */
function startServer(dir) {
  const identity = join(dir, 'server.key');
  writeFileSync(identity, hex(counting(0x00)) + '\n', { mode: 0o600 });
  const child = spawn(SERVER, ['--tcp', '127.0.0.1:0', '--ws', '127.0.0.1:0', '--identity', identity],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, RUST_LOG: 'warn' } });
  let output = '';
  child.stderr.setEncoding('utf8').on('data', (chunk) => { output += chunk; });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`echo server did not start:\n${output}`)), 20_000);
    child.on('exit', (code, signal) => { clearTimeout(timer); reject(new Error(`echo server exited (${code ?? signal}):\n${output}`)); });
    child.stdout.setEncoding('utf8').on('data', (chunk) => {
      output += chunk;
      const found = output.match(/websocket listening on (ws:\/\/\S+)/);
      if (found) { clearTimeout(timer); resolve({ child, url: found[1] }); }
    });
  });
}

/**
 * A WebSocket speaking frames: `send(bytes)`, and `next()` for the next
 * frame as `{ header, body }`, opened with `channel.receive` once a channel
 * is set (sealed frames must then be; plain ones fail the test).
 */
async function connect(url) {
  const socket = new WebSocket(url, 'ternio.v2');
  socket.binaryType = 'arraybuffer';
  const queue = [];
  const waiting = [];
  const connection = {
    channel: null,
    send: (bytes) => socket.send(bytes),
    next: () => (queue.length ? Promise.resolve(queue.shift()) : new Promise((resolve, reject) => waiting.push({ resolve, reject }))),
    close: () => socket.close(),
  };
  socket.addEventListener('message', (event) => {
    const frame = new Uint8Array(event.data);
    let item;
    try {
      const h = frame.slice(0, HEADER_LEN);
      if (h[2] & ENCRYPTED) {
        assert.ok(connection.channel, 'a sealed frame before the handshake');
        item = { header: h, body: connection.channel.receive.open(h, frame.subarray(HEADER_LEN)) };
      } else {
        assert.equal(connection.channel, null, `a plain frame on a secure session: ${hex(frame)}`);
        item = { header: h, body: frame.slice(HEADER_LEN) };
      }
    } catch (error) {
      item = { error };
    }
    const waiter = waiting.shift();
    if (waiter) item.error ? waiter.reject(item.error) : waiter.resolve(item);
    else queue.push(item);
  });
  await new Promise((resolve, reject) => {
    socket.addEventListener('open', resolve, { once: true });
    socket.addEventListener('error', () => reject(new Error(`cannot connect to ${url}`)), { once: true });
  });
  assert.equal(socket.protocol, 'ternio.v2');
  return connection;
}

/** The next frame answering request `id` (skipping ACKs and other system frames with id 0). */
async function answer(connection, opcode, id) {
  for (;;) {
    const frame = await connection.next();
    const view = new DataView(frame.header.buffer);
    if (view.getUint32(3, true) !== id) continue;
    assert.equal(view.getUint16(0, true), opcode);
    assert.equal(frame.header[2] & ERROR, 0, `error answer: ${hex(frame.body)}`);
    assert.equal(frame.header[2] & RESPONSE, RESPONSE);
    return frame.body;
  }
}

const frameOf = (h, body) => new Uint8Array([...h, ...body]);
const echoBody = (text) => Uint8Array.of(text.length, ...Buffer.from(text));

/** Runs a handshake on `connection` and a sealed SecureEcho; returns the channel. */
async function handshakeAndEcho(connection, start) {
  const pending = startHandshake(start);
  connection.send(frameOf(header(HANDSHAKE, 0, 1), pending.body));
  const reply = await answer(connection, HANDSHAKE, 1);
  connection.channel = pending.finish(reply);
  for (const frame of connection.channel.send.sealFrames(header(SECURE_ECHO, 0, 2), echoBody('sealed ping'))) connection.send(frame);
  assert.equal(hex(await answer(connection, SECURE_ECHO, 2)), hex(echoBody('sealed ping')));
  return connection.channel;
}

/**
 * Asks for a ticket on `connection` (its channel's REKEY first: the next
 * frame proves the server followed it), drops the connection, and resumes
 * the session on a new one with a sealed SecureEcho under the new keys.
 */
async function rekeyTicketResume(url, connection, pattern) {
  const { channel } = connection;
  connection.send(channel.send.rekeyFrame());
  connection.send(channel.send.sealFrame(header(RESUME_TICKET, 0, 3), new Uint8Array(0)));
  const { ticket, ttlMs } = parseTicketAnswer(await answer(connection, RESUME_TICKET, 3));
  assert.ok(ttlMs > 0);
  connection.close();

  // The new connection: RESUME first, plain; nothing counted was received after the ticket.
  const second = await connect(url);
  const pending = startResume({ ticket, received: 0n, secure: { sessionSecret: channel.sessionSecret, serverKey: channel.serverKey } });
  assert.equal(pending.pattern, pattern);
  second.send(frameOf(header(RESUME, 0, 1), pending.body));
  const resumed = pending.finish(await answer(second, RESUME, 1));
  assert.equal(resumed.received, 0n);
  assert.notEqual(hex(resumed.ticket), hex(ticket), 'tickets rotate');
  assert.notEqual(hex(resumed.channel.sessionSecret), hex(channel.sessionSecret));
  second.channel = resumed.channel;
  second.send(resumed.channel.send.sealFrame(header(SECURE_ECHO, 0, 2), echoBody('resumed')));
  assert.equal(hex(await answer(second, SECURE_ECHO, 2)), hex(echoBody('resumed')));
  second.close();
}

function liveTests() {
  const dir = mkdtempSync(join(tmpdir(), 'ternio-secure-'));
  let server;
  after(() => {
    server?.child.removeAllListeners('exit');
    server?.child.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  test('live: NN handshake, a sealed SecureEcho, REKEY, RESUME (NNpsk0) with the Rust echo server', { timeout: 30_000 }, async () => {
    server = await startServer(dir);
    const connection = await connect(server.url);
    const channel = await handshakeAndEcho(connection, {});
    assert.equal(channel.serverKey, null);
    assert.equal(channel.send.nextCounter, 1n);
    assert.equal(channel.receive.nextCounter, 1n);
    await rekeyTicketResume(server.url, connection, 3);
  });

  test('live: NK pinning the server identity, REKEY, RESUME (NKpsk0)', { timeout: 30_000 }, async () => {
    const connection = await connect(server.url);
    await handshakeAndEcho(connection, { serverKey: vector('server-static-public') });
    await rekeyTicketResume(server.url, connection, 4);
  });

  test('live: NK pinning another key is refused with HANDSHAKE_FAILED', { timeout: 30_000 }, async () => {
    const connection = await connect(server.url);
    const pending = startHandshake({ serverKey: vector('nk-client-to-server-key') });
    connection.send(frameOf(header(HANDSHAKE, 0, 1), pending.body));
    const frame = await connection.next();
    assert.equal(frame.header[2], RESPONSE | ERROR);
    assert.equal(new DataView(frame.body.buffer).getUint16(0, true), 9, 'HANDSHAKE_FAILED');
    pending.abandon();
    connection.close();
  });
}
