// The generated code committed in the repository, each from an example
// schema: `node scripts/generated.mjs` writes it all again (run it after a
// schema or the generator changes); test/codegen.test.js fails when a
// file differs from what the generator gives now.
import { readFileSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';
import { fileURLToPath } from 'node:url';

import { generate } from '../dist/codegen.js';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Each output (from the repository's root): its schema, where it imports
 * the SDK from, and where its .d.ts imports the SDK's types from (the
 * pages load the bundle as ./ternio.js, which has none).
 */
export const GENERATED = [
  {
    schema: 'examples/schemas/chat_server.json', output: 'examples/web/chat/packets.js',
    importFrom: './ternio.js', typesFrom: '../../../sdk-js/dist/index.js',
  },
  {
    schema: 'examples/schemas/rooms.json', output: 'examples/web/rooms/packets.js',
    importFrom: './ternio.js', typesFrom: '../../../sdk-js/dist/index.js',
  },
  { schema: 'examples/schemas/echo_server.json', output: 'sdk-js/test/generated/echo_server.js', importFrom: '../../dist/index.js' },
  { schema: 'sdk-js/test/fixtures/sample.json', output: 'sdk-js/test/types/sample.ts', importFrom: '../../dist/index.js' },
];

/** The files of one entry of {@link GENERATED}: `[path from the root, text]` pairs. */
export function render({ schema, output, importFrom, typesFrom }) {
  const language = output.endsWith('.js') ? 'js' : 'ts';
  const parsed = JSON.parse(readFileSync(REPO + schema, 'utf8'));
  const { code, declarations } = generate(parsed, { language, importFrom, typesFrom, source: basename(schema) });
  const files = [[output, code]];
  if (declarations) files.push([output.replace(/\.js$/, '.d.ts'), declarations]);
  return files;
}

/** The repository's root, with a trailing slash. */
export const root = REPO;

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const entry of GENERATED) {
    for (const [path, text] of render(entry)) {
      writeFileSync(REPO + path, text);
      console.log(`wrote ${path}`);
    }
  }
}
