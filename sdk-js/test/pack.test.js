// The npm package as a user gets it: `npm pack`, installed into a new
// project (no network: its dependencies, the @noble packages, are packed
// from node_modules, where `npm ci` put them, and installed beside it), then imported,
// its types checked by tsc, its browser bundle and its CLI run. Also: the
// licence files it ships are the repository's.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SDK = fileURLToPath(new URL('../', import.meta.url));
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';

const run = (command, args, cwd) => {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', env: { ...process.env, npm_config_update_notifier: 'false' } });
  assert.equal(result.status, 0, `${command} ${args.join(' ')}:\n${result.error ?? ''}${result.stdout}${result.stderr}`);
  return result.stdout;
};

test('the licence files are the repository\'s', () => {
  for (const file of ['LICENSE-MIT', 'LICENSE-APACHE']) {
    assert.equal(readFileSync(join(SDK, file), 'utf8'), readFileSync(join(SDK, '..', file), 'utf8'), file);
  }
});

test('npm pack installs into a project and works there: import, types, browser bundle, CLI', { timeout: 180_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'ternio-pack-'));
  try {
    const [{ filename, files }] = JSON.parse(run(NPM, ['pack', '--json', '--pack-destination', dir], SDK));
    const paths = files.map((file) => file.path).sort();
    assert.ok(paths.includes('dist/index.d.ts') && paths.includes('dist/ternio.browser.js') && paths.includes('bin/ternio-codegen.js'));
    assert.ok(paths.includes('LICENSE-MIT') && paths.includes('LICENSE-APACHE') && paths.includes('README.md'));
    assert.deepEqual(paths.filter((path) => /^(src|test|scripts|node_modules)\//.test(path)), []);

    const project = join(dir, 'project');
    run(process.execPath, ['-e', `require('fs').mkdirSync(${JSON.stringify(project)})`]);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
    // The dependencies, at the locked versions, from node_modules: npm's cache
    // may hold their tarballs but not the registry's metadata it would resolve them with.
    const noble = ['ciphers', 'curves', 'hashes'].map((name) => {
      const [{ filename: tarball }] = JSON.parse(run(NPM, ['pack', '--json', '--pack-destination', dir,
        join(SDK, 'node_modules/@noble', name)], SDK));
      return join(dir, tarball);
    });
    run(NPM, ['install', '--offline', '--no-audit', '--no-fund', join(dir, filename), ...noble], project);
    const installed = JSON.parse(readFileSync(join(project, 'package.json'), 'utf8')).dependencies;
    assert.deepEqual(Object.keys(installed).sort(), ['@noble/ciphers', '@noble/curves', '@noble/hashes', 'ternio']);

    writeFileSync(join(project, 'use.mjs'), `
      import { Client, packet, i64, TernioError } from 'ternio';
      import { generate } from 'ternio/codegen';
      import * as browser from 'ternio/browser';
      const Sum = packet(0x11, { value: i64 }, { name: 'Sum' });
      const bytes = Sum.encode({ value: 5n });
      if (Sum.decode(bytes).value !== 5n || typeof Client !== 'function' || typeof generate !== 'function') process.exit(2);
      if (browser.Sum !== undefined || typeof browser.Client !== 'function' || !(new browser.TernioError('codec', 'x').kind)) process.exit(3);
      console.log('ok', bytes.length, TernioError.name);
    `);
    assert.equal(run(process.execPath, ['use.mjs'], project).trim(), 'ok 8 TernioError');

    // The types resolve through the exports map, and are checked.
    writeFileSync(join(project, 'typed.ts'), `
      import { Client, packet, i64 } from 'ternio';
      const Sum = packet(0x11, { value: i64 }, { name: 'Sum' });
      const Add = packet(0x10, { a: i64, b: i64 }, { name: 'Add', response: Sum });
      export async function add(client: Client): Promise<bigint> {
        return (await client.request(Add, { a: 1n, b: 2n })).value;
      }
      // @ts-expect-error an i64 field takes a bigint
      export const wrong = (client: Client) => client.request(Add, { a: 1, b: 2n });
    `);
    writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({
      compilerOptions: { strict: true, noEmit: true, module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', lib: ['ES2022', 'DOM'], types: [] },
      files: ['typed.ts'],
    }));
    run(process.execPath, [join(SDK, 'node_modules/typescript/bin/tsc'), '-p', project], project);

    // The CLI, as npx runs it.
    const schema = join(SDK, '..', 'examples/schemas/echo_server.json');
    const generated = run(process.execPath, [join(project, 'node_modules/.bin/ternio-codegen'), schema], project);
    assert.match(generated, /^export const Echo: ternio\.PacketType<Echo, Echo, never> = /m);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
