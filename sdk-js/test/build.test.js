// dist/ is committed (the example servers embed the browser bundle, and a
// cargo build must not need npm): it must be exactly what src/ builds to.
// This builds src/ again into a temporary directory and compares every file.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SDK = fileURLToPath(new URL('../', import.meta.url));

test('dist/ is what src/ builds to (run npm run build in sdk-js after a change)', { timeout: 180_000 }, () => {
  const out = mkdtempSync(join(tmpdir(), 'ternio-dist-'));
  try {
    const tsc = spawnSync(process.execPath, [join(SDK, 'node_modules/typescript/bin/tsc'), '-p', SDK, '--outDir', out],
      { encoding: 'utf8' });
    assert.equal(tsc.error, undefined, 'typescript is installed (npm ci in sdk-js)');
    assert.equal(tsc.status, 0, tsc.stdout + tsc.stderr);
    const bundle = spawnSync(process.execPath, [join(SDK, 'scripts/bundle.mjs'), join(out, 'ternio.browser.js')],
      { encoding: 'utf8' });
    assert.equal(bundle.status, 0, bundle.stdout + bundle.stderr);
    const files = (dir) => readdirSync(dir, { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile())
      .map((entry) => join(entry.parentPath ?? entry.path, entry.name).slice(dir.length + 1))
      .sort();
    const built = files(out);
    assert.deepEqual(files(join(SDK, 'dist')), built);
    for (const file of built) {
      assert.ok(readFileSync(join(SDK, 'dist', file)).equals(readFileSync(join(out, file))), `dist/${file} differs from a fresh build`);
    }
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
