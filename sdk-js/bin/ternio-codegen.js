#!/usr/bin/env node
// ternio-codegen: typed code from a Ternio server's schema (docs/SCHEMA.md).
//
//   ternio-codegen schema.json -o packets.ts              TypeScript
//   ternio-codegen schema.json -o packets.js              JavaScript and packets.d.ts
//   ternio-codegen schema.json -o packets.js --import ./ternio.js --types ternio
//
// Without -o, TypeScript goes to stdout. --import names where the generated
// code imports the SDK from (default: 'ternio'); --types, where the .d.ts
// of JavaScript output imports its types from (default: the same).
import { readFileSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';

import { generate } from '../dist/codegen.js';

const USAGE = 'usage: ternio-codegen <schema.json> [-o <out.ts|out.js>] [--import <module>] [--types <module>]';

function parse(args) {
  const options = { input: null, output: null, importFrom: 'ternio', typesFrom: null };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === '-h' || arg === '--help') return null;
    if (arg === '-o' || arg === '--out') options.output = args[++i];
    else if (arg === '--import') options.importFrom = args[++i];
    else if (arg === '--types') options.typesFrom = args[++i];
    else if (arg.startsWith('-') || options.input) throw new Error(`unexpected argument ${arg}`);
    else options.input = arg;
  }
  if (!options.input || [options.output, options.importFrom, options.typesFrom].includes(undefined)) throw new Error('missing argument');
  return options;
}

try {
  const options = parse(process.argv.slice(2));
  if (!options) {
    console.log(USAGE);
    process.exit(0);
  }
  const schema = JSON.parse(readFileSync(options.input, 'utf8'));
  const language = options.output?.endsWith('.js') ? 'js' : 'ts';
  const { code, declarations } = generate(schema, {
    language, importFrom: options.importFrom, typesFrom: options.typesFrom ?? undefined, source: basename(options.input),
  });
  if (!options.output) {
    process.stdout.write(code);
  } else {
    writeFileSync(options.output, code);
    if (declarations) writeFileSync(options.output.replace(/\.js$/, '.d.ts'), declarations);
  }
} catch (error) {
  console.error(`ternio-codegen: ${error.message}\n${USAGE}`);
  process.exit(1);
}
