// The browser bundle: the SDK in one ES module, dist/ternio.browser.js (or
// the file named as the first argument), for pages that load it without a
// bundler of their own (the example servers serve it as /ternio.js). Run by
// `npm run build` after tsc.
import { build } from 'esbuild';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const outfile = process.argv[2] ? resolve(process.argv[2]) : fileURLToPath(new URL('../dist/ternio.browser.js', import.meta.url));

await build({
  // The path comments in the bundle are relative to it: the same from any directory.
  absWorkingDir: fileURLToPath(new URL('..', import.meta.url)),
  entryPoints: [fileURLToPath(new URL('../src/index.ts', import.meta.url))],
  outfile,
  bundle: true,
  format: 'esm',
  platform: 'neutral',
  target: 'es2022',
  charset: 'utf8',
  // Keeps the @noble packages' licence comments (MIT, which asks for its notice in copies).
  legalComments: 'inline',
  banner: {
    js: '// The Ternio browser SDK, dist/ternio.browser.js, built from sdk-js/src by `npm run build`.\n'
      + '// One ES module; the package\'s README documents it. Licence: MIT OR Apache-2.0.\n'
      + '// It includes @noble/curves, @noble/ciphers and @noble/hashes (MIT License, (c) 2022 Paul Miller,\n'
      + '// https://paulmillr.com/noble/), the cryptography of secure sessions.',
  },
  logLevel: 'warning',
});
