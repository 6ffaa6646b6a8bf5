// What the browser tests share: where the repository is, how Chromium is
// started, how long a step may take, and the example servers they run.

import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository's root. */
export const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The browser: Debian's Chromium, or the executable CHROMIUM names. */
export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
/** Headless, and none of the background traffic a closed network refuses. */
export const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];
/** How long one step may take (a page element, a server's start, a line from a process). */
export const STEP = 15_000;

/**
 * The executables of the examples `given` maps to an environment variable
 * each ({ chat_server: 'TERNIO_CHAT_SERVER' }): the ones those variables
 * name when all are set, or else built with cargo. Returns { name: path }.
 */
export function examples(given) {
  const named = Object.fromEntries(Object.entries(given).map(([name, variable]) => [name, process.env[variable]]));
  if (Object.values(named).every(Boolean)) return named;
  const args = ['build', '-p', 'ternio-examples', '--message-format=json-render-diagnostics'];
  for (const name of Object.keys(given)) args.push('--example', name);
  const output = execFileSync('cargo', args,
    { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 256 * 1024 * 1024 });
  const built = {};
  for (const line of output.split('\n')) {
    if (!line.startsWith('{')) continue;
    const message = JSON.parse(line);
    if (message.reason === 'compiler-artifact' && message.executable && message.target.kind.includes('example')) {
      built[message.target.name] = message.executable;
    }
  }
  for (const name of Object.keys(given)) {
    if (!built[name]) throw new Error(`cargo built no ${name} executable (built: ${JSON.stringify(built)})`);
  }
  return built;
}
