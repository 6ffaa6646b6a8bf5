// What the tests against real servers share: a re-run under Node 20's
// WebSocket flag, and the example servers, built with cargo unless given.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
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
