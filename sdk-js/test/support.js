// What the tests against real servers share: a re-run under Node 20's
// WebSocket flag, and the example servers, built with cargo unless given.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Node 20 keeps its WebSocket behind a flag: registers one test, `name`,
 * that runs the test file `file` again with it and passes when that run does.
 */
export function rerunWithWebSocket(file, name) {
  test(`${name} (run again with --experimental-websocket)`, { timeout: 15 * 60_000 }, (t) => {
    const env = { ...process.env };
    delete env.NODE_TEST_CONTEXT;
    const run = spawnSync(process.execPath, ['--experimental-websocket', file], { env, encoding: 'utf8' });
    for (const line of run.stdout.split('\n').filter((l) => /^# (tests|pass|fail|skipped) /.test(l))) {
      t.diagnostic(line.slice(2));
    }
    assert.equal(run.status, 0, `${run.error ?? ''}\n${run.stdout}\n${run.stderr}`);
  });
}

/**
 * The executable of example `name`: the one the environment variable
 * `variable` names, or else built with cargo.
 */
export function exampleBinary(name, variable) {
  if (process.env[variable]) return process.env[variable];
  const build = spawnSync('cargo', ['build', '-p', 'ternio-examples', '--example', name, '--message-format=json-render-diagnostics'],
    { cwd: REPO, encoding: 'utf8', maxBuffer: 256 << 20 });
  if (build.error || build.status !== 0) {
    throw new Error(`cargo build --example ${name} failed (set ${variable} to use a built one):\n${build.error ?? build.stderr.slice(-4000)}`);
  }
  for (const line of build.stdout.split('\n')) {
    if (!line.startsWith('{')) continue;
    const message = JSON.parse(line);
    if (message.reason === 'compiler-artifact' && message.target?.name === name && message.executable) {
      return message.executable;
    }
  }
  throw new Error(`cargo built no ${name} executable`);
}

/**
 * Starts `binary` (the echo server) with a WebSocket listener on `ws` (by
 * default a port the OS picks) and the arguments `extra`; resolves once it
 * listens, with `{ child, url }`. The server is added to `started` at once,
 * so that the caller can kill it even when it fails to start.
 */
export function startEchoServer(binary, started, ws = '127.0.0.1:0', extra = []) {
  const child = spawn(binary, ['--tcp', '127.0.0.1:0', '--ws', ws, ...extra],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, RUST_LOG: 'warn' } });
  const server = { child, url: null };
  started.push(server);
  let output = '';
  child.stderr.setEncoding('utf8').on('data', (chunk) => { output += chunk; });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`echo server did not start within 20 s:\n${output}`)), 20_000);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`echo server exited (${code ?? signal}):\n${output}`));
    });
    child.stdout.setEncoding('utf8').on('data', (chunk) => {
      output += chunk;
      const found = output.match(/websocket listening on (ws:\/\/\S+)/);
      if (found) {
        clearTimeout(timer);
        server.url = found[1];
        resolve(server);
      }
    });
  });
}
