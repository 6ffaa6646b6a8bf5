// A TCP proxy that cuts the connections it carries, as tests/src/proxy.rs
// does for the Rust tests: each connection is forwarded byte for byte to
// the target until a budget of bytes drawn at random for it (counted over
// both directions, so a cut lands anywhere: in the WebSocket upgrade,
// inside a frame, between frames) runs out; then both sides are reset.

import net from 'node:net';

export class CuttingProxy {
  #server;
  #target;
  /** xorshift32 state: the budgets are reproducible from the seed. */
  #random;
  #budget;
  /** The cut functions of the connections open now. */
  #live = new Set();
  #open = true;

  /** How many connections were cut (by their budget or {@link CuttingProxy#cutAll}). */
  cuts = 0;
  /** How many connections were accepted. */
  connections = 0;

  /**
   * A proxy on a free port of 127.0.0.1 to `target` (`{ host, port }`),
   * cutting each connection after a number of bytes in `[min, max)` drawn
   * with `seed`; `null` for no budget (only cutAll cuts).
   * @returns {Promise<CuttingProxy>}
   */
  static start(target, seed, budget) {
    const proxy = new CuttingProxy(target, seed, budget);
    return new Promise((resolve) => proxy.#server.listen(0, '127.0.0.1', () => resolve(proxy)));
  }

  constructor(target, seed, budget) {
    this.#target = target;
    this.#random = (seed >>> 0) || 1;
    this.#budget = budget;
    this.#server = net.createServer((client) => this.#carry(client));
  }

  /** The port clients connect to. */
  get port() {
    return this.#server.address().port;
  }

  /** Cuts every connection open now. */
  cutAll() {
    for (const cut of [...this.#live]) cut();
  }

  /** While false, new connections are reset at once: a network that is down. */
  setOpen(open) {
    this.#open = open;
  }

  /** Stops listening and cuts what is open. */
  close() {
    this.cutAll();
    return new Promise((resolve) => this.#server.close(resolve));
  }

  /** The byte budget of a new connection (Infinity: none). */
  #draw() {
    if (!this.#budget) return Infinity;
    let x = this.#random;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.#random = x >>> 0;
    const [min, max] = this.#budget;
    return min + (this.#random % (max - min));
  }

  #carry(client) {
    client.on('error', () => {});
    if (!this.#open) return client.resetAndDestroy();
    this.connections++;
    const upstream = net.connect(this.#target.port, this.#target.host);
    upstream.on('error', () => {});
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    let budget = this.#draw();
    let done = false;
    const cut = (counted = true) => {
      if (done) return;
      done = true;
      this.#live.delete(cut);
      if (counted) this.cuts++;
      for (const socket of [client, upstream]) {
        try {
          socket.resetAndDestroy();
        } catch {
          socket.destroy(); // not connected yet
        }
      }
    };
    this.#live.add(cut);
    const forward = (from, to) => {
      from.on('data', (chunk) => {
        if (done) return;
        if (chunk.length < budget) {
          budget -= chunk.length;
          to.write(chunk);
          return;
        }
        // The budget ends inside this chunk: its first part goes, then both sides are reset.
        const part = chunk.subarray(0, budget);
        budget = 0;
        if (part.length) to.write(part, () => cut());
        else cut();
      });
      // One side closed or failed: so does the other (not a cut of the proxy's).
      from.on('close', () => cut(false));
    };
    forward(client, upstream);
    forward(upstream, client);
  }
}
