// What the browser tests share: where the repository is, how Chromium is
// started, how long a step may take, the example servers they run, the
// child processes they read, and a redis-server of their own.

import { execFileSync, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { createInterface } from 'node:readline';
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
 * Starts headless Chromium with a profile of its own, closed and removed
 * when test `t` ends; `chromium` is playwright-core's. Returns the browser
 * context, each step bounded by STEP.
 */
export async function launchChromium(t, chromium) {
  const userDataDir = await mkdtemp(join(tmpdir(), 'ternio-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS,
  });
  t.after(async () => {
    await context.close();
    await rm(userDataDir, { recursive: true, force: true });
  });
  context.setDefaultTimeout(STEP);
  return context;
}

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

/**
 * A child process whose stdout is read line by line; `env` is added to
 * this process's environment.
 */
export class Child {
  constructor(name, executable, args, env = {}) {
    this.name = name;
    this.lines = [];
    this.stderr = '';
    this.waiters = [];
    this.process = spawn(executable, args,
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    this.exited = new Promise((resolve) => this.process.once('exit', (code, signal) => resolve({ code, signal })));
    this.process.stderr.setEncoding('utf8').on('data', (text) => { this.stderr += text; });
    createInterface({ input: this.process.stdout }).on('line', (line) => {
      this.lines.push(line);
      for (const waiter of [...this.waiters]) waiter();
    });
  }

  /** Waits for a line of stdout (earlier ones included) that matches `pattern`; returns the match. */
  waitFor(pattern, timeout = STEP) {
    return new Promise((resolve, reject) => {
      const check = () => {
        for (const line of this.lines) {
          const match = line.match(pattern);
          if (match) {
            done();
            resolve(match);
            return true;
          }
        }
        return false;
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`${this.name}: no line matching ${pattern} within ${timeout} ms; stdout:\n`
          + `${this.lines.join('\n')}\nstderr:\n${this.stderr}`));
      }, timeout);
      const done = () => {
        clearTimeout(timer);
        this.waiters = this.waiters.filter((waiter) => waiter !== check);
      };
      if (!check()) this.waiters.push(check);
    });
  }

  /** Waits for the process to exit (within `timeout`); returns `{ code, signal }`. */
  async exit(timeout = STEP) {
    let timer;
    const late = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${this.name} did not exit within ${timeout} ms; stdout:\n`
        + `${this.lines.join('\n')}\nstderr:\n${this.stderr}`)), timeout);
    });
    try {
      return await Promise.race([this.exited, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  kill(signal = 'SIGKILL') {
    if (this.process.exitCode === null && this.process.signalCode === null) this.process.kill(signal);
  }
}

/** A port of 127.0.0.1 that was free a moment ago. */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/**
 * Starts a `redis-server` of the test's own on a free port of 127.0.0.1,
 * without persistence (TERNIO_REDIS_SERVER names another program, as for
 * the Rust tests); resolves with `{ child, url }` once it accepts
 * connections. Kill the child when done.
 */
export async function startRedis() {
  const program = process.env.TERNIO_REDIS_SERVER || 'redis-server';
  // The port may be taken again before redis-server binds it: then it
  // exits, and another is tried.
  for (let attempt = 1; ; attempt += 1) {
    const port = await freePort();
    const child = new Child('redis-server', program, ['--port', String(port), '--bind', '127.0.0.1',
      '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--loglevel', 'notice']);
    const started = await Promise.race([
      child.waitFor(/Ready to accept connections/).then(() => true, () => false),
      child.exited.then(() => false),
    ]);
    if (started) return { child, url: `redis://127.0.0.1:${port}/` };
    child.kill();
    if (attempt === 5) {
      throw new Error(`${program} did not start (is Debian's redis-server package installed?); stdout:\n`
        + `${child.lines.join('\n')}\nstderr:\n${child.stderr}`);
    }
  }
}
