// A TCP proxy that understands WebSocket framing (RFC 6455) well enough to
// play the attacker of docs/PROTOCOL.md section 5.1 on a Ternio connection:
// it forwards the upgrade, then reads the server's WebSocket frames (one
// Ternio frame each, unmasked) and the client's (masked), and can insert a
// frame of its own into what the client receives, or flip a byte of a frame
// the server sent. It notes every Ternio frame each side sent (the client's
// unmasked), so that a test can see what the client answered.

import net from 'node:net';

/** Parses whole WebSocket frames out of `buffer`: `{ frames: [{ fin, opcode, payload, raw }], rest }`. */
function parseFrames(buffer) {
  const frames = [];
  let offset = 0;
  for (;;) {
    if (buffer.length - offset < 2) break;
    const b0 = buffer[offset];
    const b1 = buffer[offset + 1];
    let length = b1 & 0x7f;
    let at = offset + 2;
    if (length === 126) {
      if (buffer.length - at < 2) break;
      length = buffer.readUInt16BE(at);
      at += 2;
    } else if (length === 127) {
      if (buffer.length - at < 8) break;
      length = Number(buffer.readBigUInt64BE(at));
      at += 8;
    }
    const masked = (b1 & 0x80) !== 0;
    const mask = masked ? buffer.subarray(at, at + 4) : null;
    if (masked) at += 4;
    if (buffer.length - at < length) break;
    const payload = Buffer.from(buffer.subarray(at, at + length));
    if (mask) for (let i = 0; i < payload.length; i++) payload[i] ^= mask[i & 3];
    frames.push({ fin: (b0 & 0x80) !== 0, opcode: b0 & 0x0f, payload, raw: buffer.subarray(offset, at + length) });
    offset = at + length;
  }
  return { frames, rest: buffer.subarray(offset) };
}

/** One unmasked binary WebSocket frame (what a server sends) carrying `payload`. */
export function serverFrame(payload) {
  const length = payload.length;
  const head = length < 126 ? Buffer.from([0x82, length])
    : length < 65536 ? Buffer.from([0x82, 126, length >> 8, length & 0xff])
      : Buffer.concat([Buffer.from([0x82, 127]), (() => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(length)); return b; })()]);
  return Buffer.concat([head, payload]);
}

export class TamperProxy {
  #server;
  #target;
  /** The connections open now: `{ client, upstream, inject(payload), corruptNext(offset) }`. */
  connections = [];
  /** Every Ternio frame (WebSocket binary payload) the clients sent, in order, per connection. */
  fromClient = [];
  /** Every Ternio frame the server sent, per connection (as sent, before any tampering). */
  fromServer = [];

  static start(target) {
    const proxy = new TamperProxy(target);
    return new Promise((resolve) => proxy.#server.listen(0, '127.0.0.1', () => resolve(proxy)));
  }

  constructor(target) {
    this.#target = target;
    this.#server = net.createServer((client) => this.#carry(client));
  }

  get port() {
    return this.#server.address().port;
  }

  /** The latest connection. */
  get last() {
    return this.connections[this.connections.length - 1];
  }

  close() {
    for (const { client, upstream } of this.connections) {
      client.destroy();
      upstream.destroy();
    }
    return new Promise((resolve) => this.#server.close(resolve));
  }

  #carry(client) {
    client.on('error', () => {});
    const upstream = net.connect(this.#target.port, this.#target.host);
    upstream.on('error', () => {});
    const index = this.connections.length;
    const fromClient = [];
    const fromServer = [];
    this.fromClient.push(fromClient);
    this.fromServer.push(fromServer);
    let corrupt = null;
    const connection = {
      client,
      upstream,
      /** Sends `payload` (a Ternio frame) to the client as if the server had, between two whole frames. */
      inject: (payload) => client.write(serverFrame(Buffer.from(payload))),
      /** Flips a byte (`offset` into the Ternio frame) of the next frame the server sends. */
      corruptNext: (offset) => { corrupt = offset; },
      index,
    };
    this.connections.push(connection);

    // Client to server: forwarded as it comes; the frames parsed on the side.
    let clientUpgraded = false;
    let clientBuffer = Buffer.alloc(0);
    client.on('data', (chunk) => {
      upstream.write(chunk);
      clientBuffer = Buffer.concat([clientBuffer, chunk]);
      if (!clientUpgraded) {
        const end = clientBuffer.indexOf('\r\n\r\n');
        if (end < 0) return;
        clientUpgraded = true;
        clientBuffer = clientBuffer.subarray(end + 4);
      }
      const { frames, rest } = parseFrames(clientBuffer);
      clientBuffer = Buffer.from(rest);
      for (const frame of frames) if (frame.opcode === 2) fromClient.push(frame.payload);
    });

    // Server to client: the upgrade answer as it is, then frame by frame (so
    // that an injected frame lands between two whole ones).
    let serverUpgraded = false;
    let serverBuffer = Buffer.alloc(0);
    upstream.on('data', (chunk) => {
      serverBuffer = Buffer.concat([serverBuffer, chunk]);
      if (!serverUpgraded) {
        const end = serverBuffer.indexOf('\r\n\r\n');
        if (end < 0) return;
        serverUpgraded = true;
        client.write(serverBuffer.subarray(0, end + 4));
        serverBuffer = serverBuffer.subarray(end + 4);
      }
      const { frames, rest } = parseFrames(serverBuffer);
      serverBuffer = Buffer.from(rest);
      for (const frame of frames) {
        if (frame.opcode !== 2) {
          client.write(frame.raw);
          continue;
        }
        fromServer.push(frame.payload);
        if (corrupt !== null && frame.payload.length > corrupt) {
          const payload = Buffer.from(frame.payload);
          payload[corrupt] ^= 0x01;
          corrupt = null;
          client.write(serverFrame(payload));
        } else {
          client.write(frame.raw);
        }
      }
    });
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  }
}
