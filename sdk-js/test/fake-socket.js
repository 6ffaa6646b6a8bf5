// A WebSocket stand-in for the tests on Node's mock clock (reconnect and
// resume): it records what the client sends, and the test plays the server.

import { decodeFrame } from '../dist/index.js';

/** A WebSocket stand-in: records what the client sends; the test plays the server. */
export class FakeSocket {
  /** Every socket made, in order. */
  static all = [];
  /** What the next sockets do: 'open', 'refuse' (close 1006 before opening) or 'hang' (never open). */
  static mode = 'open';

  constructor(url, protocols) {
    this.url = url;
    this.protocols = protocols;
    this.readyState = 0;
    this.bufferedAmount = 0;
    this.sent = [];
    this.closedWith = null;
    FakeSocket.all.push(this);
    const mode = FakeSocket.mode;
    queueMicrotask(() => {
      if (mode === 'hang') return;
      if (mode === 'refuse') return this.drop(1006);
      this.readyState = 1;
      this.onopen?.({});
    });
  }

  send(data) {
    if (this.readyState !== 1) throw new Error('not open');
    this.sent.push(new Uint8Array(data));
  }

  close(code) {
    this.closedWith = code;
    if (this.readyState > 1) return;
    this.readyState = 2;
    queueMicrotask(() => this.drop(code));
  }

  receive(data) {
    this.onmessage?.({ data: data.slice().buffer });
  }

  drop(code = 1006) {
    if (this.readyState === 3) return;
    this.readyState = 3;
    this.onclose?.({ code, reason: '' });
  }

  frames() {
    return this.sent.map((m) => decodeFrame(m));
  }

  static get last() {
    return FakeSocket.all.at(-1);
  }
}
