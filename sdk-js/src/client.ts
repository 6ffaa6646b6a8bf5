/**
 * {@link Client}: a connection to a Ternio server over WebSocket, with
 * requests matched by id, pushes, PING, keepalive, reconnection with
 * backoff, session resumption, compression and streams.
 *
 * Every frame goes out through {@link Client}'s `#transmit` and comes in
 * through its `#onMessage`: the one place each where a secure session
 * (option `secure`, docs/PROTOCOL.md section 5) seals and opens frames.
 * @module
 */

import {
  DEFAULT_MAX_FRAME_SIZE, DisconnectReason, ErrorCode, Flags, HEADER_LEN, SUBPROTOCOL, SystemOpcode,
} from './constants.js';
import { checkOpcode, toBytes, u32, u64, type PacketType, type Type } from './codec.js';
import { TernioError, type Disconnect } from './errors.js';
import type { CloseInfo, SessionEvent, StateEvent } from './events.js';
import {
  codeAndText, codeAndTextBody, decodeFrame, encodeBoth, encodeFrame, opcodeOf, remoteError, type Frame,
} from './frame.js';
import { decompressBody } from './lz4.js';
import { FINAL_REASONS, REFUSAL_REASONS, reconnectPolicy, retryDelay, type ReconnectOptions, type ReconnectPolicy } from './reconnect.js';
import {
  ACK_DELAY, ASK_BOUND, isCounted, parseResumed, parseTicket, resumeBody, resumeOptions, Session, type ResumeOptions,
} from './resume.js';
import { downloadIterator, StreamState, uploadHandle, type StreamLink, type Upload } from './streams.js';
import { count, hex, nameIn, sameBytes, show, unref } from './util.js';
import { wipe } from './secure/aead.js';
import { OpenError, SealError, DEFAULT_REKEY_POLICY, type RekeyPolicy } from './secure/seal.js';
import {
  startHandshake, startResume, type PendingHandshake, type PendingResume, type SecureChannel,
} from './secure/session.js';

/**
 * The option `secure`: a secure session (docs/PROTOCOL.md section 5) on
 * every connection, as the Rust client's `SecureConfig`.
 */
export interface SecureOptions {
  /**
   * The server's static X25519 public key (its identity: 32 bytes, or the 64
   * hex digits the server prints): the handshake is then `Noise_NK` and only
   * that server can complete it. Without it (`null`, the default), `Noise_NN`:
   * hidden from a passive eavesdropper only, not from a man in the middle.
   */
  pin?: Uint8Array | string | null;
}

/** The option `rekey`: when the client replaces the key of what it sends (section 5.2). */
export interface RekeyOptions {
  /** Frames sealed under one key before the next one brings a `REKEY` (default 65536). */
  frames?: number;
  /** Milliseconds under one key before the next frame brings a `REKEY` (default 120000). */
  intervalMs?: number;
}

/** What {@link Client#secureSession} tells of the current connection's secure session. */
export interface SecureSessionInfo {
  /** `'NK'` when the client pinned the server's key, else `'NN'` (a resumed session keeps its pattern's pin). */
  pattern: 'NN' | 'NK';
  /** The server key pinned (a copy), or null. */
  serverKey: Uint8Array | null;
  /** Noise's handshake hash `h` of the connection's handshake (or resumption): a channel binding, no secret. */
  handshakeHash: Uint8Array;
}

/** The option `secure`, read: the pinned key or none; throws a TypeError when invalid. */
function secureOptions(option: boolean | SecureOptions | undefined): { pin: Uint8Array | null } | null {
  if (option === undefined || option === false) return null;
  if (option === true) return { pin: null };
  if (typeof option !== 'object' || option === null) throw new TypeError(`secure must be true, false or { pin }, got ${show(option)}`);
  const pin = option.pin ?? null;
  if (pin === null) return { pin: null };
  if (typeof pin === 'string') {
    if (!/^[0-9a-fA-F]{64}$/.test(pin)) throw new TypeError('secure.pin must be the server\'s public key: 32 bytes or 64 hex digits');
    return { pin: Uint8Array.from(pin.match(/../g)!, (byte) => parseInt(byte, 16)) };
  }
  if (!(pin instanceof Uint8Array) || pin.length !== 32) {
    throw new TypeError('secure.pin must be the server\'s public key: 32 bytes or 64 hex digits');
  }
  return { pin: pin.slice() };
}

/** The option `rekey`, read; throws a TypeError when invalid. */
function rekeyPolicy(option: RekeyOptions | undefined): RekeyPolicy {
  const frames = option?.frames ?? DEFAULT_REKEY_POLICY.frames;
  const intervalMs = option?.intervalMs ?? DEFAULT_REKEY_POLICY.intervalMs;
  if (typeof frames !== 'number' || !(frames >= 1)) throw new TypeError(`rekey.frames must be a number ≥ 1, got ${show(frames)}`);
  if (typeof intervalMs !== 'number' || !(intervalMs >= 0)) {
    throw new TypeError(`rekey.intervalMs must be a number ≥ 0, got ${show(intervalMs)}`);
  }
  return { frames, intervalMs };
}

/** What the client needs of a WebSocket (the browser's, Node's, or a stand-in). */
export interface WebSocketLike {
  /** Set to `'arraybuffer'` by the client. */
  binaryType: string;
  /** 0 connecting, 1 open, 2 closing, 3 closed. */
  readonly readyState: number;
  /** Bytes sent and not yet handed to the network (the outbound buffer's bound reads it). */
  readonly bufferedAmount?: number;
  /** Sends one binary message. */
  send(data: Uint8Array): void;
  /** Starts the close handshake. */
  close(code?: number, reason?: string): void;
  /** Set by the client: the connection opened. */
  onopen: ((event: unknown) => void) | null;
  /** Set by the client: the connection failed. */
  onerror: ((event: unknown) => void) | null;
  /** Set by the client: a message arrived (`data` an ArrayBuffer for binary ones). */
  onmessage: ((event: { data: unknown }) => void) | null;
  /** Set by the client: the connection closed. */
  onclose: ((event: { code: number; reason: string }) => void) | null;
}

/** A WebSocket class: `new WebSocket(url, protocol)`. */
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocketLike;

/** Options of a {@link Client}. */
export interface ClientOptions {
  /**
   * Default request timeout in ms (0 or Infinity: none; default 10000).
   * While the client reconnects, the wait for the new connection counts toward it.
   */
  timeout?: number;
  /**
   * Receives what no promise can: error frames without a request id (a failed
   * fire-and-forget send), push handler exceptions, pushes that do not decode,
   * an `onStateChange` that throws. Defaults to `console.error`.
   */
  onError?: (error: unknown) => void;
  /** Told when the connection opens, is lost and is re-established, or closes for good. */
  onStateChange?: ((event: StateEvent) => void) | null;
  /** Whether (`true`: with the defaults) and how to re-establish a lost connection. Off by default. */
  reconnect?: boolean | ReconnectOptions;
  /**
   * With `reconnect`, whether a reconnection resumes the session (contract
   * section 4.2; on a plain session the ticket is a bearer token, so use
   * `wss://` or `secure`); default true. Nothing happens without
   * `reconnect`, nor with a server that does not offer resumption.
   */
  resume?: boolean | ResumeOptions;
  /** Told, with `resume`, whether each reconnection resumed the session or started a new one. */
  onSessionChange?: ((event: SessionEvent) => void) | null;
  /** ms after a connection opens, or after the last keepalive PONG, before a keepalive PING (0: none; default 15000). */
  keepaliveInterval?: number;
  /** ms the keepalive PING waits for its PONG before the connection is dropped as dead (default 10000). */
  keepaliveTimeout?: number;
  /** ms one connection attempt (the first or a reconnect) may take to open (default 10000). */
  connectTimeout?: number;
  /**
   * The outbound buffer's limit in bytes (default 4 MiB): a frame that would
   * take the WebSocket's `bufferedAmount` above it drops the connection; it
   * also bounds the requests that wait for a new connection.
   */
  maxBufferedBytes?: number;
  /**
   * Compress the body of requests and sends of at least this many bytes when
   * that makes them smaller (LZ4, contract section 6), except packet types
   * declared with `compress: false`. `null` (the default): nothing is sent
   * compressed. Compressed frames from the server are always decoded.
   */
  compress?: number | null;
  /**
   * The largest frame (header and body) accepted from the server once
   * decompressed (default 1 MiB); a compressed frame that announces more is
   * `DISCONNECT FRAME_TOO_LARGE`, before anything is allocated for it.
   */
  maxFrameSize?: number;
  /**
   * A secure session (docs/PROTOCOL.md section 5) on every connection:
   * `true` for `Noise_NN`, `{ pin }` for `Noise_NK` pinning the server's
   * key. The handshake runs before anything else on each connection (a
   * reconnection runs it again, or resumes the session with its secret);
   * then every frame both ways is sealed. Off by default.
   */
  secure?: boolean | SecureOptions;
  /** With `secure`: when the client rekeys what it sends (default: after 65536 frames or 2 minutes under one key). */
  rekey?: RekeyOptions;
  /** The WebSocket class to use (default: the global one). */
  WebSocket?: WebSocketConstructor;
}

/** Options of {@link Client#request}. */
export interface RequestOptions {
  /** This request's timeout in ms (0 or Infinity: none); default: the client's. */
  timeout?: number;
  /**
   * Gives the request up when aborted: it rejects with an `'aborted'`
   * {@link TernioError} and, when it was sent, the server is sent `CANCEL`.
   * An already-aborted signal sends nothing.
   */
  signal?: AbortSignal;
}

/** Options of {@link Client#requestStream} and {@link Client#upload}. */
export interface StreamOptions<I> {
  /** The items' type (else the packet type's `item`). */
  item?: Type<I>;
  /** Cancels the stream when aborted (`CANCEL`); the iteration or the upload rejects with an `'aborted'` {@link TernioError}. */
  signal?: AbortSignal;
}

/** The connection's state: see {@link Client#state}. */
export type ClientState = 'idle' | 'connecting' | 'open' | 'reconnecting' | 'closed';

/** A request waiting for its answer (or for a connection to be sent on). */
interface Pending {
  decode: (frame: Frame) => unknown;
  resolve: (value: any) => void;
  reject: (error: unknown) => void;
  timer: ReturnType<typeof setTimeout> | null;
  data: Uint8Array;
  plain: Uint8Array;
  /** Whether it is on the wire (else it waits for a connection). */
  sent: boolean;
  onSent: (() => void) | undefined;
}

interface Subscription {
  type: PacketType<any, any, any> | null;
  handler: (value: any, frame: Frame) => unknown;
}

type Timer = ReturnType<typeof setTimeout> | null;

const OPEN = 1;

/** A packet's value, its encoding and how it is sent. */
interface Outgoing {
  opcode: number;
  body: Uint8Array;
  name: string;
  compress: number | null;
}

function describe(disconnect: Disconnect): string {
  const text = disconnect.message ? `: ${disconnect.message}` : '';
  return `server disconnected: ${disconnect.reasonName} (${disconnect.reason})${text}`;
}

/** The `'aborted'` error of a request or stream whose signal was aborted. */
function abortedError(name: string, signal: AbortSignal): TernioError {
  return new TernioError('aborted', `${name} was aborted`, { cause: signal.reason });
}

/**
 * A connection to a Ternio server over WebSocket, re-established when lost
 * if the option `reconnect` says so.
 *
 * @example
 * const client = await Client.connect('ws://localhost:7002/ws', {
 *   reconnect: true,
 *   onStateChange: (event) => console.log(event.state),
 * });
 * const off = client.on(Note, (note) => console.log('note', note.seq));
 * const sum = await client.request(Add, { a: 2n, b: 3n }, { timeout: 5000 });
 * await client.close();
 */
export class Client {
  #WebSocket: WebSocketConstructor | undefined;
  #url: string | null = null;
  /** The current WebSocket (open, or an attempt in progress); null between attempts and once closed. */
  #ws: WebSocketLike | null = null;
  #state: ClientState = 'idle';
  /** Requests by id: `sent` once on the wire; unsent ones wait for a connection. */
  #pending = new Map<number, Pending>();
  /** Open streams by request id (docs/PROTOCOL.md section 4.5). */
  #streams = new Map<number, StreamState>();
  /** Uploads waiting for room in the replay buffer: woken by an `ACK` or a change of session. */
  #roomWaiters = new Set<StreamState>();
  /**
   * Ids to `CANCEL` once the session resumes: requests and streams
   * aborted while the connection was down.
   */
  #cancelOnResume: number[] = [];
  /** Bytes of the requests that wait for a connection. */
  #queuedBytes = 0;
  #nextId = 1;
  #handlers = new Map<number, Set<Subscription>>();
  #unhandled = 0;
  /** The `DISCONNECT` received on the current connection. */
  #disconnect: Disconnect | null = null;
  /** close() was called. */
  #closing = false;
  /** The server broke the contract on the current connection. */
  #violated = false;
  #policy: ReconnectPolicy | null;
  /** Reconnect attempts since the last healthy connection. */
  #attempt = 0;
  /** The keepalive PING waiting for its PONG. */
  #keepalive: { id: number; timer: Timer } | null = null;
  #timers: Record<'connect' | 'keepalive' | 'healthy' | 'retry' | 'ack' | 'resume' | 'handshake', Timer> = {
    connect: null, keepalive: null, healthy: null, retry: null, ack: null, resume: null, handshake: null,
  };
  /** Resumption's state (section 4.2); null when the client does not resume sessions. */
  #session: Session | null = null;
  /** The `RESUME` waiting for its answer on the current connection (`pending`: a secure session's). */
  #resuming: { id: number; pending: PendingResume | null } | null = null;
  /** The option `secure`: null for plain sessions. */
  #secure: { pin: Uint8Array | null } | null;
  /** The option `rekey`. */
  #rekey: RekeyPolicy;
  /** The current connection's secure channel, once its handshake (or resumption) completed. */
  #channel: SecureChannel | null = null;
  /** The `HANDSHAKE` waiting for its answer on the current connection. */
  #handshaking: { id: number; pending: PendingHandshake } | null = null;
  /** The secret of the secure session's latest handshake: what its next resumption is keyed by. */
  #sessionSecret: Uint8Array | null = null;
  /** Settles the first connect(). */
  #connecting: { resolve: () => void; reject: (error: unknown) => void } | null = null;
  #resolveClosed!: (info: CloseInfo) => void;

  /** Default request timeout in ms (0 or Infinity: none). */
  timeout: number;
  /** Where errors that belong to no request go (see {@link ClientOptions}). */
  onError: (error: unknown) => void;
  /** Told of every change of the connection's state (see {@link StateEvent}). */
  onStateChange: ((event: StateEvent) => void) | null;
  /** Told whether each reconnection resumed the session (see {@link SessionEvent}). */
  onSessionChange: ((event: SessionEvent) => void) | null;
  /** Keepalive PING period in ms (0: none); read when a connection opens. */
  keepaliveInterval: number;
  /** How long a keepalive PING waits for its PONG, in ms. */
  keepaliveTimeout: number;
  /** How long one connection attempt may take, in ms. */
  connectTimeout: number;
  /** The outbound buffer's limit, in bytes. */
  maxBufferedBytes: number;
  /** The compression threshold of what the client sends, in bytes (null: off). */
  compress: number | null;
  /** The largest frame accepted from the server once decompressed, in bytes. */
  maxFrameSize: number;
  /**
   * Settles once the client has closed for good (after the last reconnect
   * attempt, when it reconnects), with how.
   */
  readonly closed: Promise<CloseInfo>;

  /** @param options See {@link ClientOptions}. */
  constructor(options: ClientOptions = {}) {
    this.#WebSocket = options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    this.#policy = reconnectPolicy(options.reconnect);
    this.#secure = secureOptions(options.secure);
    this.#rekey = rekeyPolicy(options.rekey);
    const resume = resumeOptions(options.resume ?? true);
    if (this.#policy && resume) this.#session = new Session(resume.replayBytes);
    this.timeout = options.timeout ?? 10000;
    this.onError = options.onError ?? ((error) => console.error('ternio:', error));
    this.onStateChange = options.onStateChange ?? null;
    this.onSessionChange = options.onSessionChange ?? null;
    this.keepaliveInterval = options.keepaliveInterval ?? 15000;
    this.keepaliveTimeout = options.keepaliveTimeout ?? 10000;
    this.connectTimeout = options.connectTimeout ?? 10000;
    this.maxBufferedBytes = options.maxBufferedBytes ?? 4 * 1024 * 1024;
    this.compress = options.compress ?? null;
    if (this.compress !== null && (typeof this.compress !== 'number' || !(this.compress >= 0))) {
      throw new TypeError(`compress must be a number ≥ 0 or null, got ${show(this.compress)}`);
    }
    this.maxFrameSize = options.maxFrameSize ?? DEFAULT_MAX_FRAME_SIZE;
    this.closed = new Promise((resolve) => { this.#resolveClosed = resolve; });
  }

  /**
   * Creates a client and connects it.
   * @param url Such as `ws://host:port/ws` (or `wss://`).
   * @param options See {@link ClientOptions}.
   */
  static async connect(url: string, options?: ClientOptions): Promise<Client> {
    return new Client(options).connect(url);
  }

  /**
   * Opens the WebSocket, offering the subprotocol `ternio.v2`. Once per
   * client. When this first connection fails the client is closed: only a
   * connection that was once up is re-established.
   * @returns This client, once open; a `'closed'` {@link TernioError} if it cannot connect.
   */
  connect(url: string): Promise<Client> {
    return new Promise((resolve, reject) => {
      if (this.#url !== null || this.#state !== 'idle') throw new Error('connect() may be called once per Client');
      if (typeof this.#WebSocket !== 'function') {
        throw new TernioError('closed', 'no WebSocket here (Node 20 needs --experimental-websocket, or pass options.WebSocket)');
      }
      this.#url = url;
      this.#state = 'connecting';
      this.#connecting = { resolve: () => resolve(this), reject };
      this.#dial();
    });
  }

  /** Whether a connection is open and not closing. */
  get isOpen(): boolean {
    return this.#state === 'open' && !this.#closing && !this.#violated && !this.#disconnect;
  }

  /**
   * `'idle'` (before connect()), `'connecting'` (the first connection),
   * `'open'`, `'reconnecting'` (between attempts, or during one) or `'closed'`.
   */
  get state(): ClientState {
    return this.#state;
  }

  /** How many requests wait for their response (including those waiting for a new connection). */
  get inFlight(): number {
    return this.#pending.size;
  }

  /**
   * Whether a lost connection would be resumed now: the client resumes
   * sessions, the server gave a ticket, and the replay buffer has not
   * overflowed.
   */
  get resumable(): boolean {
    return this.#session?.resumable ?? false;
  }

  /**
   * The current connection's secure session (option `secure`), once its
   * handshake or resumption completed; null on a plain client, and while
   * a connection is being set up.
   */
  get secureSession(): SecureSessionInfo | null {
    const channel = this.#channel;
    if (!channel) return null;
    return {
      pattern: channel.serverKey ? 'NK' : 'NN',
      serverKey: channel.serverKey ? channel.serverKey.slice() : null,
      handshakeHash: channel.handshakeHash.slice(),
    };
  }

  /** How many times the session was resumed so far. */
  get resumptions(): number {
    return this.#session?.resumptions ?? 0;
  }

  /** How many pushes arrived that no {@link Client#on} handler took (they are dropped). */
  get unhandledPushes(): number {
    return this.#unhandled;
  }

  /**
   * Sends a request and waits for its response. While the client
   * reconnects, the request waits for the new connection (within its
   * timeout); a request already sent when the connection is lost is
   * rejected at once (`'closed'`): the server may or may not have run it;
   * unless the session is resumable (option `resume`): then it is answered
   * on the resumed session, or rejected if the session is lost.
   *
   * The response is decoded with `options.response`, the packet type's
   * `response`, or the packet type itself (whichever has the response's
   * opcode); an acknowledgement (empty body, the request's opcode) resolves
   * to `undefined`. With a number instead of a packet type, `value` is the
   * raw body (a Uint8Array) and the promise resolves with the raw {@link Frame}.
   *
   * With `options.signal`, aborting gives the request up: it rejects with
   * an `'aborted'` {@link TernioError} and the server is sent `CANCEL`
   * (when the request was sent; after a resumption, when it was sent on the
   * lost connection); an already-aborted signal sends nothing.
   *
   * @returns Rejected with a {@link TernioError}: `'remote'`, `'timeout'`, `'closed'`,
   *   `'aborted'`, `'codec'` (the value or the response does not code) or `'protocol'`.
   */
  request<T, R>(packetType: PacketType<T, any, any>, value: T,
    options: RequestOptions & { response: PacketType<R, any, any> }): Promise<R>;
  request<T, R>(packetType: PacketType<T, R, any>, value: T, options?: RequestOptions): Promise<R>;
  request(opcode: number, body?: Uint8Array | ArrayBuffer, options?: RequestOptions): Promise<Frame>;
  request(packetType: PacketType<any, any, any> | number, value: unknown,
    options: RequestOptions & { response?: PacketType<any, any, any> } = {}): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const { signal } = options;
      const outgoing = this.#outgoing(packetType, value, true);
      if (signal?.aborted) return reject(abortedError(outgoing.name, signal));
      const { opcode, name } = outgoing;
      const expected = options.response ?? (typeof packetType === 'number' ? undefined : packetType.response);
      const decode = typeof packetType === 'number' ? (frame: Frame) => frame : (frame: Frame) => {
        if (expected && frame.opcode === expected.opcode) return expected.decode(frame.body);
        if (frame.opcode === opcode) return frame.body.length === 0 ? undefined : packetType.decode(frame.body);
        throw new TernioError('protocol', `${name} answered with unexpected opcode ${hex(frame.opcode)}`);
      };
      if (!signal) return this.#call(outgoing, options.timeout, decode, resolve, reject);
      const onAbort = () => {
        if (id !== undefined) this.#abortRequest(id, abortedError(name, signal));
      };
      const settle = <A>(fn: (arg: A) => void) => (arg: A) => {
        signal.removeEventListener('abort', onAbort);
        fn(arg);
      };
      const id = this.#call(outgoing, options.timeout, decode, settle(resolve), settle(reject));
      if (id !== undefined) signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /**
   * Sends a packet that expects no reply (request id 0). A server that
   * cannot handle it reports an error frame without id, given to `onError`.
   * It is not kept for later: while the client reconnects it throws.
   * @throws {TernioError} `'closed'` when not connected (or reconnecting), or when the
   *   outbound buffer is full (the connection is then dropped); `'codec'` when the value does not encode.
   */
  send<T>(packetType: PacketType<T, any, any>, value: T): void;
  send(opcode: number, body?: Uint8Array | ArrayBuffer): void;
  send(packetType: PacketType<any, any, any> | number, value?: unknown): void {
    const { opcode, body, compress } = this.#outgoing(packetType, value, false);
    const { data, plain } = encodeBoth({ opcode, body }, compress);
    const error = this.#write(data, plain);
    if (error) throw error;
  }

  /**
   * Calls `handler` for every push (a frame with request id 0) at this
   * opcode, with the decoded value (or the raw body for a number) and the frame.
   * Pushes without a handler are counted in {@link Client#unhandledPushes} and dropped.
   * Handlers belong to the client: they stay through reconnects.
   * @returns Removes the handler.
   */
  on<T>(packetType: PacketType<T, any, any>, handler: (value: T, frame: Frame) => unknown): () => void;
  on(opcode: number, handler: (body: Uint8Array, frame: Frame) => unknown): () => void;
  on(packetTypeOrOpcode: PacketType<any, any, any> | number, handler: (value: any, frame: Frame) => unknown): () => void {
    const raw = typeof packetTypeOrOpcode === 'number';
    const opcode = checkOpcode(raw ? packetTypeOrOpcode : packetTypeOrOpcode?.opcode);
    if (typeof handler !== 'function') throw new TypeError('on() needs a handler function');
    const subscription: Subscription = { type: raw ? null : packetTypeOrOpcode, handler };
    let set = this.#handlers.get(opcode);
    if (!set) this.#handlers.set(opcode, (set = new Set()));
    set.add(subscription);
    const subscriptions = set;
    return () => {
      subscriptions.delete(subscription);
      if (subscriptions.size === 0 && this.#handlers.get(opcode) === subscriptions) this.#handlers.delete(opcode);
    };
  }

  /**
   * Sends a PING (a u64 timestamp) and waits for its PONG. While the
   * client reconnects, it waits for the new connection, like a request.
   * @returns The round trip, in milliseconds.
   */
  ping(options: { timeout?: number } = {}): Promise<number> {
    return new Promise((resolve, reject) => {
      this.#assertUsable(true);
      const value = u64.encode(BigInt(Date.now()));
      let start = 0;
      const decode = (frame: Frame) => {
        if (frame.opcode !== SystemOpcode.PONG || !sameBytes(frame.body, value)) {
          throw new TernioError('protocol', `PING answered with opcode ${hex(frame.opcode)} and another value`);
        }
        return performance.now() - start;
      };
      const outgoing = { opcode: SystemOpcode.PING, body: value, name: 'PING', compress: null };
      this.#call(outgoing, options.timeout, decode, resolve, reject, () => { start = performance.now(); });
    });
  }

  /**
   * Sends `DISCONNECT NORMAL` and closes the WebSocket with code 1000; the
   * client does not reconnect after it. Requests still waiting are rejected
   * (`'closed'`) at once.
   * @param message The DISCONNECT's text.
   * @returns Settles once the WebSocket has closed (at once when no connection is open).
   */
  close(message = ''): Promise<CloseInfo> {
    if (this.#state === 'closed' || this.#closing) return this.closed;
    this.#closing = true;
    const ws = this.#ws;
    const error = new TernioError('closed', 'connection closed by the client');
    if (ws && this.#state === 'open' && !this.#violated) {
      if (ws.readyState === OPEN) this.#sendDisconnect(DisconnectReason.NORMAL, message);
      this.#failAll(() => error);
      this.#stopLinkTimers();
      ws.close(1000); // its close event ends the client
    } else {
      // Before connect(), between reconnect attempts or during one: nothing to wait for.
      if (ws) this.#abandon(ws);
      if (this.#connecting) this.#connecting.reject(error);
      this.#finish({ code: 1000, reason: '', disconnect: null, local: true }, error);
    }
    return this.closed;
  }

  /**
   * Sends a request answered by a stream of items (docs/PROTOCOL.md
   * section 4.5) and returns them as an async iterable, in order:
   * `for await (const item of client.requestStream(CountTo, { count: 10 })) ...`.
   * The iteration ends when the server's handler ended the stream; an
   * error from the server (`'remote'`), or a lost connection whose
   * session is not resumed (`'closed'`), is thrown by the iteration. On a
   * resumable session (option `resume`) the stream belongs to the session:
   * it goes on once the session is resumed, every item once and in order.
   * Leaving the loop early (`break`, `return`, a throw) or aborting
   * `options.signal` sends `CANCEL` (the loop then throws `'aborted'`).
   *
   * The client holds at most 32 items not yet taken, and grants the server
   * more as the loop takes them: a loop that waits holds the server's
   * handler where it is.
   *
   * @throws {TernioError} `'closed'` when the connection is not open; `'aborted'` when the signal already is.
   */
  requestStream<T, I>(packetType: PacketType<T, any, I>, value: T, options: StreamOptions<I> = {}): AsyncIterableIterator<I> {
    const itemType = options.item ?? packetType.item;
    if (typeof itemType?.decode !== 'function') throw new TypeError('requestStream() needs the items\' type: options.item');
    const stream = this.#openStream(packetType, value, options.signal);
    return downloadIterator(stream, itemType, this.#streamLink);
  }

  /**
   * Sends a request that carries a stream of items to the server (an
   * upload, docs/PROTOCOL.md section 4.5). `send(item)` resolves once the
   * item is on its way, waiting for credit from the server (and, on a
   * resumable session, for room in the replay buffer); `finish()`
   * ends the upload and resolves with the server's answer; `fail(code,
   * message)` ends it as failed; `cancel()` (or aborting `options.signal`)
   * sends `CANCEL`. If the server answers before the upload ended, `send`
   * rejects (`'closed'`, with `answered: true`) and `finish()` gives that answer.
   * Like a download, an upload goes on across a resumed session (what
   * `send` hands over while the connection is down is kept and replayed),
   * and fails (`'closed'`) when the session is not resumed.
   *
   * @throws {TernioError} `'closed'` when the connection is not open; `'aborted'` when the signal already is.
   */
  upload<T, R, I>(packetType: PacketType<T, R, I>, value: T, options: StreamOptions<I> = {}): Upload<I, R> {
    const itemType = options.item ?? packetType.item;
    if (typeof itemType?.encode !== 'function') throw new TypeError('upload() needs the items\' type: options.item');
    const stream = this.#openStream(packetType, value, options.signal);
    return uploadHandle(stream, packetType, itemType, this.#streamLink);
  }

  // -------------------------------------------------- the seam: frames out, frames in

  /**
   * Puts one encoded frame on the WebSocket: every frame the client sends
   * passes here, and only here. Once the connection's secure session is up,
   * the frame is sealed here (section 5.1), after a `REKEY` when the rekey
   * policy says one is due (section 5.2); before, and on a plain client, it
   * goes as it is. (The one plain frame of a secure session, `DISCONNECT
   * DECRYPT_FAILED`, does not come here: see `#decryptFailed`.)
   */
  #transmit(ws: WebSocketLike, frame: Uint8Array): void {
    const channel = this.#channel;
    if (channel === null) {
      ws.send(frame);
      return;
    }
    let sealed: Uint8Array[];
    try {
      sealed = channel.send.sealFrames(frame.subarray(0, HEADER_LEN), frame.subarray(HEADER_LEN));
    } catch (error) {
      if (!(error instanceof SealError)) throw error;
      // Counter 2^64 - 1 is never used: the connection closes first.
      const lost = new TernioError('closed', `the secure session cannot seal more: ${error.message}`, { cause: error });
      queueMicrotask(() => this.#lost(ws, { code: 1006, reason: 'sealing failed' }, lost, true));
      return;
    }
    for (const message of sealed) ws.send(message);
  }

  /**
   * One WebSocket message from the server: every frame the client receives
   * starts here. A secure session opens it here, before it is handled.
   */
  #onMessage(data: unknown): void {
    if (this.#closing || this.#violated) return;
    if (typeof data === 'string') return this.#violation('text message');
    let frame: Frame;
    const bytes = data instanceof ArrayBuffer ? new Uint8Array(data) : (data as Uint8Array);
    try {
      frame = decodeFrame(bytes);
    } catch (error) {
      return this.#violation((error as Error).message);
    }
    if (this.#secure) {
      const opened = this.#openSealed(frame, bytes);
      if (!opened) return;
      frame = opened;
    } else if (frame.flags & Flags.ENCRYPTED) {
      return this.#violation('sealed frame without a secure session');
    }
    if (frame.flags & Flags.COMPRESSED) {
      try {
        frame = { ...frame, flags: frame.flags & ~Flags.COMPRESSED, body: decompressBody(frame.body, this.maxFrameSize - HEADER_LEN) };
      } catch (error) {
        const tooLarge = (error as TernioError).tooLarge;
        return this.#violation((error as Error).message, tooLarge ? DisconnectReason.FRAME_TOO_LARGE : DisconnectReason.MALFORMED);
      }
    }
    if (frame.opcode === SystemOpcode.ACK) return this.#onAck(frame);
    // Counted whatever becomes of it (section 4.2); the ACK goes after it is taken.
    const due = isCounted(frame.opcode) && this.#countReceived(frame);
    this.#handle(frame);
    if (due) this.#sendAck();
  }

  /**
   * A frame received by a secure client (`bytes` as received): opened once
   * the connection's session is up; before, only the answer to its
   * `HANDSHAKE` or `RESUME` (plain) is taken. Returns the frame to handle
   * (opened, `ENCRYPTED` cleared), or null when it was taken or refused here.
   */
  #openSealed(frame: Frame, bytes: Uint8Array): Frame | null {
    const channel = this.#channel;
    if (channel === null) {
      // The handshake (or resumption) is under way: the server seals nothing yet.
      if (frame.flags & Flags.ENCRYPTED) {
        this.#decryptFailed('a sealed frame before the handshake completed');
        return null;
      }
      const answer = frame.flags & Flags.RESPONSE && frame.requestId !== 0;
      if (answer && frame.requestId === this.#handshaking?.id) {
        this.#onHandshakeAnswer(frame);
        return null;
      }
      if (answer && frame.requestId === this.#resuming?.id) return frame; // #onResumed
      if (frame.opcode === SystemOpcode.DISCONNECT) {
        // Anyone on the path can write a plain DISCONNECT: it loses this
        // connection, and never ends the session (a forged KICKED would).
        const disconnect = this.#parseDisconnect(frame);
        this.#lost(this.#ws, { code: 1006, reason: 'plain DISCONNECT' }, new TernioError('closed',
          `a plain DISCONNECT before the secure handshake completed, treated as a lost connection: ${describe(disconnect)}`,
          { disconnect }));
        return null;
      }
      // Nothing plain reaches the application of a secure client.
      return null;
    }
    if (!(frame.flags & Flags.ENCRYPTED)) {
      // Section 5.1: the server seals everything once the session is up but
      // its DISCONNECT DECRYPT_FAILED; a plain DISCONNECT is a lost
      // connection whatever its reason (anyone on the path can write one).
      if (frame.opcode === SystemOpcode.DISCONNECT) {
        const disconnect = this.#parseDisconnect(frame);
        const what = `a plain DISCONNECT on a secure session, treated as a lost connection: ${describe(disconnect)}`;
        if (disconnect.reason === DisconnectReason.DECRYPT_FAILED) {
          // The server's own report (or a forgery of it): the connection goes, without an answer.
          this.#lost(this.#ws, { code: 1006, reason: 'plain DISCONNECT' }, new TernioError('closed', what, { disconnect }), true);
        } else {
          this.#decryptFailed(what);
        }
      } else {
        this.#decryptFailed(`a plain frame (opcode ${hex(frame.opcode)}) on a secure session`);
      }
      return null;
    }
    let plain: Uint8Array;
    try {
      plain = channel.receive.open(bytes.subarray(0, HEADER_LEN), frame.body);
    } catch (error) {
      if (!(error instanceof OpenError)) throw error;
      this.#decryptFailed(error.message);
      return null;
    }
    const flags = frame.flags & ~Flags.ENCRYPTED;
    if (frame.opcode === SystemOpcode.REKEY) {
      // Opening it moved the receiving key on; it must be exactly a REKEY (section 5.2).
      if (frame.requestId !== 0 || plain.length !== 0 || flags !== 0) {
        this.#violation('a REKEY that is not sealed, empty and without id');
      }
      return null;
    }
    return { ...frame, flags, body: plain };
  }

  /** A `DISCONNECT`'s reason and text. */
  #parseDisconnect(frame: Frame): Disconnect {
    const parsed = codeAndText(frame.body) ?? { code: DisconnectReason.MALFORMED, text: 'unreadable DISCONNECT' };
    return { reason: parsed.code, reasonName: nameIn(DisconnectReason, parsed.code) ?? 'UNKNOWN', message: parsed.text };
  }

  /**
   * A frame failed the secure session's checks (section 5.1): a sealed
   * frame that does not open (tag, counter, length), one before the
   * handshake completed, or a plain frame after it. Tells the server
   * `DISCONNECT DECRYPT_FAILED`, the one frame a secure session sends
   * plain, and drops the connection. As in the Rust client the session is
   * not ended by it (someone on the path wrote the frame): with `reconnect`
   * it is resumed on a new connection.
   */
  #decryptFailed(reason: string): void {
    if (this.#closing || this.#violated) return;
    const ws = this.#ws;
    if (!ws) return;
    if (ws.readyState === OPEN) {
      ws.send(encodeFrame({ opcode: SystemOpcode.DISCONNECT, body: codeAndTextBody(DisconnectReason.DECRYPT_FAILED, reason) }));
    }
    this.#lost(ws, { code: 1006, reason: 'decrypt failed' },
      new TernioError('closed', `a frame failed the secure session's checks (the client sent DISCONNECT DECRYPT_FAILED): ${reason}`),
      true);
  }

  // ------------------------------------------------------- the connection

  /** Opens a WebSocket to the URL: the first connection or a reconnect attempt. */
  #dial(): void {
    const url = this.#url!;
    let ws: WebSocketLike;
    try {
      ws = new this.#WebSocket!(url, SUBPROTOCOL);
    } catch (error) {
      const failure = new TernioError('closed', `cannot connect to ${url}: ${(error as Error).message}`, { cause: error });
      return this.#lost(null, { code: 1006, reason: '' }, failure);
    }
    this.#ws = ws;
    this.#disconnect = null;
    this.#violated = false;
    let opened = false;
    const current = () => this.#ws === ws;
    const failed = (code: number) => new TernioError('closed', `could not connect to ${url} (WebSocket close code ${code})`);
    ws.binaryType = 'arraybuffer';
    if (this.connectTimeout > 0 && this.connectTimeout !== Infinity) {
      this.#timers.connect = unref(setTimeout(() => {
        if (!current()) return;
        const timeout = this.connectTimeout;
        this.#lost(ws, { code: 1006, reason: 'connect timeout' },
          new TernioError('closed', `could not connect to ${url} within ${timeout} ms`, { timeout }));
      }, this.connectTimeout));
    }
    ws.onopen = () => {
      if (!current()) return;
      opened = true;
      this.#up();
    };
    ws.onerror = () => {
      // Once open, a close event follows an error. Before, some
      // implementations (Node 20's) fire no close: the attempt ends here.
      if (opened || !current()) return;
      this.#lost(ws, { code: 1006, reason: '' }, failed(1006));
    };
    ws.onmessage = (event) => {
      if (current()) this.#onMessage(event.data);
    };
    ws.onclose = (event) => {
      if (current()) this.#lost(ws, { code: event.code, reason: event.reason }, opened ? null : failed(event.code));
    };
  }

  /**
   * The WebSocket opened: resume the session on it, or start a new one
   * (after the handshake, on a secure client).
   */
  #up(): void {
    clearTimeout(this.#timers.connect ?? undefined);
    const session = this.#session;
    if (session?.lostAt != null && session.resumable) {
      const away = Date.now() - session.lostAt;
      if (away < session.ttl) return this.#resume();
      this.#sessionLost(`its time to live of ${session.ttl} ms passed (the connection was lost ${away} ms ago)`);
    } else if (session?.ended || session?.lostAt != null) {
      // (A stream frame kept while the connection was down can overflow the replay buffer.)
      this.#sessionLost(session.ended ?? 'the client\'s replay buffer overflowed');
    }
    this.#start();
  }

  /** A new session on the current connection: the handshake first on a secure client. */
  #start(): void {
    if (this.#secure) return this.#handshake();
    this.#open(false);
  }

  /**
   * Sends `HANDSHAKE` (section 5: NN, or NK with the pinned key), plain,
   * as the connection's first frame; nothing else goes out until the
   * answer, which must come within `connectTimeout`.
   */
  #handshake(): void {
    const ws = this.#ws!;
    const pin = this.#secure!.pin;
    const pending = startHandshake(pin ? { serverKey: pin } : {});
    const id = this.#allocateId();
    this.#handshaking = { id, pending };
    const timeout = this.connectTimeout;
    if (timeout > 0 && timeout !== Infinity) {
      this.#timers.handshake = unref(setTimeout(() => {
        if (this.#handshaking?.id !== id || this.#ws !== ws) return;
        this.#lost(ws, { code: 1006, reason: 'handshake timeout' },
          new TernioError('closed', `no answer to the secure HANDSHAKE within ${timeout} ms`, { timeout }), true);
      }, timeout));
    }
    this.#write(encodeFrame({ opcode: SystemOpcode.HANDSHAKE, requestId: id, body: pending.body }));
  }

  /**
   * The answer to `HANDSHAKE` (plain): the session's keys, then the
   * connection carries the new session. A refusal, or an answer that does
   * not complete the handshake, fails the connection: a secure client never
   * carries on in plain. On the first connection `connect()` rejects with a
   * `'handshake'` {@link TernioError}; later, it is a failed reconnect attempt.
   */
  #onHandshakeAnswer(frame: Frame): void {
    clearTimeout(this.#timers.handshake ?? undefined);
    const { pending } = this.#handshaking!;
    this.#handshaking = null;
    const pinned = this.#secure!.pin !== null;
    if (frame.flags & Flags.ERROR) {
      pending.abandon();
      const refusal = remoteError(frame.body);
      const said = refusal.remoteMessage ?? refusal.message;
      const message = refusal.code === ErrorCode.HANDSHAKE_FAILED && pinned
        ? 'the server refused the NK handshake (error 9): the pinned key is not this server\'s public key, '
          + `or the server has no identity key; the server said: ${said}`
        : refusal.code === ErrorCode.HANDSHAKE_FAILED
          ? `the server refused the secure handshake (error 9): ${said}`
          : `the server answered the secure handshake with error ${refusal.code ?? '(none)'}: ${said}`;
      return this.#handshakeFailed(new TernioError('handshake', message, {
        code: refusal.code, remoteMessage: refusal.remoteMessage, cause: refusal,
      }));
    }
    let channel: SecureChannel;
    try {
      if (frame.opcode !== SystemOpcode.HANDSHAKE) throw new Error(`the server answered it with opcode ${hex(frame.opcode)}`);
      channel = pending.finish(frame.body, { rekeyPolicy: this.#rekey });
    } catch (error) {
      pending.abandon();
      return this.#handshakeFailed(new TernioError('handshake',
        `the server's answer does not complete the secure handshake: ${(error as Error).message}`, { cause: error }));
    }
    this.#install(channel);
    this.#open(false);
  }

  /** The handshake failed: the connection goes (nothing was sent on it but the handshake). */
  #handshakeFailed(error: TernioError): void {
    this.#lost(this.#ws, { code: 1006, reason: 'handshake failed' }, error, true);
  }

  /** `channel` seals and opens the current connection's frames from now on, and its secret keys the next resumption. */
  #install(channel: SecureChannel): void {
    this.#channel = channel;
    if (this.#sessionSecret !== channel.sessionSecret) wipe(this.#sessionSecret);
    this.#sessionSecret = channel.sessionSecret;
  }

  /** Erases the current connection's keys and any handshake under way on it (the session's secret stays). */
  #dropSecure(): void {
    this.#handshaking?.pending.abandon();
    this.#handshaking = null;
    this.#resuming?.pending?.abandon();
    const channel = this.#channel;
    this.#channel = null;
    channel?.send.destroy();
    channel?.receive.destroy();
  }

  /**
   * The connection carries the session, `resumed` or new (then the client
   * asks for its ticket): start the keepalive, send what waits, tell.
   */
  #open(resumed: boolean): void {
    const attempt = this.#attempt;
    const first = this.#state === 'connecting';
    this.#state = 'open';
    if (!resumed) this.#askTicket();
    this.#startKeepalive(this.#ws!);
    if (this.#policy) {
      const ws = this.#ws;
      this.#timers.healthy = unref(setTimeout(() => {
        if (this.#ws === ws) this.#attempt = 0;
      }, this.#policy.healthyAfter));
    }
    if (first) {
      this.#connecting!.resolve();
      this.#connecting = null;
    }
    this.#emit({ state: 'open', attempt });
    this.#flush();
  }

  /** Sends the requests that waited for a connection, in the order they were made. */
  #flush(): void {
    for (const entry of this.#pending.values()) {
      if (entry.sent) continue;
      if (this.#state !== 'open') return;
      // When the buffer overflows here, the connection is dropped and the
      // request waits for the next one.
      if (this.#write(entry.data, entry.plain)) return;
      this.#queuedBytes -= entry.data.length;
      entry.sent = true;
      entry.onSent?.();
    }
  }

  /**
   * Writes one frame on the open connection, unless it would take the
   * outbound buffer past its limit: then the connection is dropped. A
   * counted frame is kept for replay (`plain`: the frame uncompressed)
   * unless `record` is false (a frame replayed, already kept).
   * @returns The error when the frame was not written.
   */
  #write(data: Uint8Array, plain: Uint8Array = data, record = true): TernioError | null {
    const ws = this.#ws;
    if (!ws) return new TernioError('closed', 'the connection is not open (the client is reconnecting)');
    const buffered = ws.bufferedAmount ?? 0;
    if (buffered + data.length > this.maxBufferedBytes) {
      const error = new TernioError('closed', `outbound buffer full: ${buffered} bytes wait to be sent, `
        + `${data.length} more would pass the limit of ${this.maxBufferedBytes}`);
      this.#lost(ws, { code: 1006, reason: 'outbound buffer full' }, error, true);
      return error;
    }
    this.#transmit(ws, data);
    if (record && this.#session && isCounted(opcodeOf(plain))) this.#session.record(plain);
    return null;
  }

  /** Sends `CANCEL` of request (or stream) `id` on the open connection. */
  #sendCancel(id: number): TernioError | null {
    return this.#write(encodeFrame({ opcode: SystemOpcode.CANCEL, body: u32.encode(id) }));
  }

  // ------------------------------------------------------------ resumption

  /** A new session: asks the server for its ticket; what is sent from now on is kept. */
  #askTicket(): void {
    const session = this.#session;
    if (!session) return;
    session.reset();
    this.#wakeRoomWaiters();
    const id = this.#allocateId();
    session.asked(id);
    // The server's replay bound tells when to acknowledge (section 4.2).
    const body = session.plainTicket ? undefined : ASK_BOUND;
    this.#write(encodeFrame({ opcode: SystemOpcode.RESUME_TICKET, requestId: id, body }));
  }

  /**
   * The answer to `RESUME_TICKET`: counting starts; an error (no resumption
   * there) ends recording. `MALFORMED` to the request that asked for the
   * bound: a server older than that request; asked again without it.
   */
  #onTicket(frame: Frame): void {
    const session = this.#session!;
    const answer = frame.flags & Flags.ERROR ? null : parseTicket(frame.body);
    if (answer) return session.granted(answer);
    session.reset(); // the server does not resume sessions: the client goes on without
    this.#wakeRoomWaiters();
    if (frame.flags & Flags.ERROR && !session.plainTicket && codeAndText(frame.body)?.code === ErrorCode.MALFORMED) {
      session.plainTicket = true;
      this.#askTicket();
    }
  }

  /**
   * Sends `RESUME` as the new connection's first frame, with the ticket
   * and the count of frames received; nothing else goes out until the
   * answer, which must come within `connectTimeout`.
   */
  #resume(): void {
    const ws = this.#ws!;
    const session = this.#session!;
    const id = this.#allocateId();
    this.#resuming = { id, pending: null };
    const timeout = this.connectTimeout;
    if (timeout > 0 && timeout !== Infinity) {
      this.#timers.resume = unref(setTimeout(() => {
        if (this.#resuming?.id !== id) return;
        this.#lost(ws, { code: 1006, reason: 'resume timeout' },
          new TernioError('closed', `no answer to RESUME within ${timeout} ms`, { timeout }), true);
      }, timeout));
    }
    // The count sent is acknowledged by it.
    const received = session.acks!.take();
    let body: Uint8Array;
    if (this.#secure) {
      // NNpsk0, or NKpsk0 with the pinned key, keyed by the session's secret (section 4.2).
      const pending = startResume({
        ticket: session.ticket!, received: BigInt(received),
        secure: { sessionSecret: this.#sessionSecret!, serverKey: this.#secure.pin },
      });
      this.#resuming.pending = pending;
      body = pending.body;
    } else {
      body = resumeBody(session.ticket!, received);
    }
    this.#write(encodeFrame({ opcode: SystemOpcode.RESUME, requestId: id, body }));
  }

  /**
   * The answer to `RESUME`. Refused: a new session on this connection.
   * Accepted: the new ticket, the server's count taken as an ACK, what it
   * lacks sent again, in order, before anything new.
   */
  #onResumed(frame: Frame): void {
    clearTimeout(this.#timers.resume ?? undefined);
    const pending = this.#resuming!.pending;
    this.#resuming = null;
    const session = this.#session!;
    if (frame.flags & Flags.ERROR) {
      pending?.abandon();
      const refusal = remoteError(frame.body);
      this.#sessionLost(`the server refused to resume it: ${refusal.remoteMessage ?? refusal.message}`, refusal);
      // The connection goes on as a fresh one: a secure client runs its handshake on it.
      return this.#start();
    }
    let answer: { received: number; ticket: Uint8Array; ttl: number };
    if (pending) {
      // A secure session: the resumption's handshake gives the new keys; the replay below is sealed with them.
      try {
        const resumed = pending.finish(frame.body, { rekeyPolicy: this.#rekey });
        answer = { received: Number(resumed.received), ticket: resumed.ticket, ttl: resumed.ttlMs };
        this.#install(resumed.channel!);
      } catch (error) {
        pending.abandon();
        return this.#violation(`answer to a secure RESUME: ${(error as Error).message}`);
      }
    } else {
      const parsed = parseResumed(frame.body);
      if (!parsed) return this.#violation(`answer to RESUME of ${count(frame.body.length, 'byte')}`);
      if (parsed.message.length) return this.#violation('a Noise message in the answer to a plain RESUME');
      answer = parsed;
    }
    const replay = session.replay!;
    const lacking = replay.replayFrom(answer.received);
    if (!lacking || replay.acknowledge(answer.received)) {
      // Contract: DISCONNECT NORMAL, close, and a new session on a new connection.
      const reason = `the server received ${answer.received} frames: the client cannot replay from there`;
      const ws = this.#ws;
      this.#sendDisconnect(DisconnectReason.NORMAL, reason);
      this.#sessionLost(reason);
      return this.#lost(ws, { code: 1000, reason: '' }, new TernioError('closed', `session lost: ${reason}`), true);
    }
    session.granted(answer);
    session.lostAt = null;
    session.resumptions++;
    this.#wakeRoomWaiters();
    for (const data of lacking) if (this.#write(data, data, false)) return;
    const cancelled = this.#cancelOnResume;
    this.#cancelOnResume = [];
    for (const id of cancelled) if (this.#sendCancel(id)) return;
    this.#emitSession({ session: 'resumed', count: session.resumptions, attempt: this.#attempt });
    this.#open(true);
  }

  /**
   * The session could not be resumed: the requests in flight fail, the
   * application is told, and the next connection starts a new session.
   */
  #sessionLost(reason: string, cause?: unknown): void {
    const error = new TernioError('closed', `the session was lost (${reason}): the request was in flight (the server `
      + 'may or may not have run it); a new session starts', cause ? { cause } : {});
    this.#failSent(() => error);
    this.#cancelOnResume = [];
    this.#session!.reset();
    this.#wakeRoomWaiters();
    this.#emitSession({ session: 'lost', reason, attempt: this.#attempt });
  }

  /**
   * Whether the connection just lost leaves a session to resume (then its
   * requests in flight stay): not after a `DISCONNECT` either way, a
   * protocol violation or an overflowed replay buffer. Notes when the loss
   * started, or why the session ended.
   */
  #keepsSession(): boolean {
    const session = this.#session;
    if (!session?.held) return false;
    if (session.resumable && !this.#disconnect && !this.#violated) {
      session.lostAt ??= Date.now();
      return true;
    }
    session.ended ??= this.#disconnect ? `it was ended by the ${describe(this.#disconnect)}`
      : this.#violated ? 'the server broke the protocol'
        : 'the client\'s replay buffer overflowed';
    session.ticket = null; // for good: a later attempt's loss does not revive it
    return false;
  }

  /** Counts a frame received (`frame`, decompressed); returns whether an `ACK` is due now. */
  #countReceived(frame: Frame): boolean {
    const acks = this.#session?.acks;
    if (!acks || this.#resuming) return false;
    const answer = (frame.flags & Flags.RESPONSE) !== 0 && frame.requestId !== 0;
    // `dueSoon` only turns true between ACKs, and the timer is set to 0 ms
    // when it does: a timer set while it was true already is that one.
    const wasSoon = acks.dueSoon;
    const due = acks.received(HEADER_LEN + frame.body.length, !answer);
    if (due) return true;
    // Enough pushes that the server may be holding more: the ACK goes on
    // the next turn of the event loop, after what already came in.
    const soon = acks.dueSoon;
    if (!this.#timers.ack || (soon && !wasSoon)) {
      clearTimeout(this.#timers.ack ?? undefined);
      this.#timers.ack = unref(setTimeout(() => {
        this.#timers.ack = null;
        this.#sendAck();
      }, soon ? 0 : ACK_DELAY));
    }
    return false;
  }

  /** Sends `ACK` with the count of frames received, when some are unacknowledged. */
  #sendAck(): void {
    clearTimeout(this.#timers.ack ?? undefined);
    this.#timers.ack = null;
    const acks = this.#session?.acks;
    if (!acks?.hasUnacked || !this.isOpen) return;
    this.#write(encodeFrame({ opcode: SystemOpcode.ACK, body: u64.encode(BigInt(acks.take())) }));
  }

  /** The server's `ACK`: the frames it acknowledges leave the replay buffer. */
  #onAck(frame: Frame): void {
    if (frame.requestId !== 0 || frame.flags & (Flags.RESPONSE | Flags.ERROR) || frame.body.length !== 8) {
      return this.#violation('malformed ACK');
    }
    const replay = this.#session?.replay;
    if (!replay) return;
    const received = Number(new DataView(frame.body.buffer, frame.body.byteOffset, 8).getBigUint64(0, true));
    const problem = replay.acknowledge(received);
    if (problem) return this.#violation(problem);
    this.#wakeRoomWaiters();
  }

  #emitSession(event: SessionEvent): void {
    if (typeof this.onSessionChange !== 'function') return;
    try {
      this.onSessionChange(event);
    } catch (error) {
      this.#report(error);
    }
  }

  /** Stops the timers of the current connection. */
  #stopLinkTimers(): void {
    for (const key of ['connect', 'keepalive', 'healthy', 'ack', 'resume', 'handshake'] as const) clearTimeout(this.#timers[key] ?? undefined);
    this.#timers.ack = null;
    this.#resuming?.pending?.abandon();
    this.#resuming = null;
    if (this.#keepalive) clearTimeout(this.#keepalive.timer ?? undefined);
    this.#keepalive = null;
  }

  /** Lets go of a WebSocket without waiting for its close handshake. */
  #abandon(ws: WebSocketLike): void {
    this.#stopLinkTimers();
    if (this.#ws === ws) {
      this.#ws = null;
      this.#dropSecure();
    }
    ws.onopen = ws.onmessage = ws.onerror = ws.onclose = null;
    try {
      if (ws.readyState < 2) ws.close(1000);
    } catch {
      // already closing
    }
  }

  /**
   * The current connection (or attempt) is gone: closed by either side,
   * failed, dead (keepalive) or overflowing. Requests sent on it fail at
   * once, unless the session can be resumed; then the client reconnects,
   * or closes for good.
   * @param ws The WebSocket (null when none was made).
   * @param how The close code and reason.
   * @param failure Why, when the close event does not say it.
   * @param local This side ended it.
   */
  #lost(ws: WebSocketLike | null, { code, reason }: { code: number; reason: string }, failure: TernioError | null,
    local = false): void {
    if (ws) {
      if (ws !== this.#ws) return;
      this.#abandon(ws);
    }
    const disconnect = this.#disconnect;
    const info: CloseInfo = { code, reason, disconnect, local: local || this.#closing || this.#violated };
    const error = failure ?? new TernioError('closed',
      disconnect ? describe(disconnect) : `connection closed (WebSocket close code ${code})`, { disconnect });
    if (this.#state === 'connecting') {
      this.#connecting!.reject(error);
      this.#connecting = null;
      return this.#finish(info, error);
    }
    const final = !this.#policy || this.#closing || (disconnect && FINAL_REASONS.includes(disconnect.reason));
    if (final) return this.#finish(info, error);
    // A session to resume keeps its requests in flight, and its streams: they go on on the next connection.
    if (this.#keepsSession()) return this.#retry(info, error);
    const inFlight = new TernioError('closed', `${error.message}; the request was in flight (the server may or `
      + 'may not have run it), the client reconnects', { disconnect, cause: error });
    this.#failSent(() => inFlight);
    this.#retry(info, error);
  }

  /** Schedules the next reconnect attempt, or gives up. */
  #retry(info: CloseInfo, error: TernioError): void {
    const policy = this.#policy!;
    const attempt = ++this.#attempt;
    if (attempt > policy.maxAttempts) {
      const gaveUp = new TernioError('closed', `gave up reconnecting after ${count(policy.maxAttempts, 'attempt')}: ${error.message}`,
        { disconnect: error.disconnect, cause: error });
      return this.#finish(info, gaveUp);
    }
    const delay = retryDelay(policy, attempt, REFUSAL_REASONS.includes(error.disconnect?.reason ?? -1));
    this.#state = 'reconnecting';
    this.#timers.retry = setTimeout(() => {
      this.#timers.retry = null;
      if (this.#state === 'reconnecting' && !this.#closing) this.#dial();
    }, delay);
    this.#emit({ state: 'reconnecting', attempt, delay, error });
  }

  /** Closes the client for good. */
  #finish(info: CloseInfo, error: TernioError): void {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    this.#stopLinkTimers();
    this.#dropSecure();
    wipe(this.#sessionSecret);
    this.#sessionSecret = null;
    clearTimeout(this.#timers.retry ?? undefined);
    this.#failAll(() => error);
    this.#resolveClosed(info);
    this.#emit({ state: 'closed', info, error });
  }

  #emit(event: StateEvent): void {
    if (typeof this.onStateChange !== 'function') return;
    try {
      this.onStateChange(event);
    } catch (error) {
      this.#report(error);
    }
  }

  #startKeepalive(ws: WebSocketLike): void {
    const interval = this.keepaliveInterval;
    if (!(interval > 0) || interval === Infinity) return;
    this.#timers.keepalive = unref(setTimeout(() => this.#keepalivePing(ws), interval));
  }

  /** Sends a keepalive PING; without its PONG in time, the connection is dropped. */
  #keepalivePing(ws: WebSocketLike): void {
    if (this.#ws !== ws || !this.isOpen) return;
    const id = this.#allocateId();
    const timeout = this.keepaliveTimeout;
    const timer = unref(setTimeout(() => {
      if (this.#keepalive?.id !== id) return;
      this.#keepalive = null;
      this.#lost(ws, { code: 1006, reason: 'keepalive timeout' },
        new TernioError('closed', `no PONG to the keepalive PING within ${timeout} ms: the connection is dead`, { timeout }), true);
    }, timeout));
    this.#keepalive = { id, timer };
    this.#write(encodeFrame({ opcode: SystemOpcode.PING, requestId: id, body: u64.encode(BigInt(Date.now())) }));
  }

  // ----------------------------------------------------------- requests

  /**
   * Throws unless a packet can go out now (open) or, for a request, wait
   * for a new connection (reconnecting).
   */
  #assertUsable(canWait: boolean): void {
    if (this.isOpen || (canWait && this.#state === 'reconnecting' && !this.#closing)) return;
    const why = this.#state === 'reconnecting' ? ' (reconnecting)' : this.#disconnect ? `: ${describe(this.#disconnect)}` : '';
    throw new TernioError('closed', `not connected${why}`, { disconnect: this.#disconnect });
  }

  /** The opcode and body of an outgoing packet; throws when closed or when the value does not encode. */
  #outgoing(packetType: PacketType<any, any, any> | number, value: unknown, canWait: boolean): Outgoing {
    this.#assertUsable(canWait);
    if (typeof packetType === 'number') {
      return {
        opcode: checkOpcode(packetType), body: toBytes(value ?? new Uint8Array(0)), name: hex(packetType), compress: this.compress,
      };
    }
    if (typeof packetType?.opcode !== 'number') throw new TypeError('expects a packet type (from packet()) or an opcode');
    const compress = packetType.compress === false ? null : this.compress;
    return { opcode: packetType.opcode, body: packetType.encode(value), name: packetType.name, compress };
  }

  /**
   * Sends a request (or keeps it until a connection is up) and registers
   * what settles it; returns its id, or undefined when it was rejected at once.
   */
  #call({ opcode, body, name, compress }: Outgoing, timeout: number = this.timeout, decode: (frame: Frame) => unknown,
    resolve: (value: any) => void, reject: (error: unknown) => void, onSent?: () => void): number | undefined {
    const requestId = this.#allocateId();
    const { data, plain } = encodeBoth({ opcode, requestId, body }, compress);
    const entry: Pending = { decode, resolve, reject, timer: null, data, plain, sent: false, onSent };
    if (this.#state === 'open') {
      entry.sent = true;
      const error = this.#write(data, plain);
      if (error) {
        reject(error);
        return undefined;
      }
      onSent?.();
    } else if (this.#queuedBytes + data.length > this.maxBufferedBytes) {
      reject(new TernioError('closed', `reconnecting, and ${this.#queuedBytes} bytes of requests already wait `
        + `for the new connection: ${data.length} more would pass the limit of ${this.maxBufferedBytes}`));
      return undefined;
    } else {
      this.#queuedBytes += data.length;
    }
    if (timeout > 0 && timeout !== Infinity) {
      entry.timer = setTimeout(() => {
        if (this.#pending.get(requestId) !== entry) return;
        const waited = entry.sent ? '' : ' (it waited for a new connection)';
        // Given up like an aborted request: the server is told (CANCEL), as
        // the Rust client does, so its handler stops and no late answer comes.
        this.#abortRequest(requestId, new TernioError('timeout', `no response to ${name} within ${timeout} ms${waited}`, { timeout }));
      }, timeout);
    }
    this.#pending.set(requestId, entry);
    return requestId;
  }

  /**
   * Gives up request `id` (its signal was aborted, or it timed out): rejects it with
   * `error` and, if it went out, cancels it on the server now or, when the
   * connection is down and the session may resume, once it does.
   */
  #abortRequest(id: number, error: TernioError): void {
    const entry = this.#take(id);
    if (!entry) return;
    if (entry.sent) {
      if (this.isOpen) this.#sendCancel(id);
      else if (this.#session?.resumable) this.#cancelOnResume.push(id);
    }
    entry.reject(error);
  }

  /** Removes a pending request and returns it. */
  #take(requestId: number): Pending | undefined {
    const entry = this.#pending.get(requestId);
    if (!entry) return undefined;
    this.#pending.delete(requestId);
    clearTimeout(entry.timer ?? undefined);
    if (!entry.sent) this.#queuedBytes -= entry.data.length;
    return entry;
  }

  /** The next request id: counts up from 1, skips 0 and ids still in flight. */
  #allocateId(): number {
    for (;;) {
      const id = this.#nextId;
      this.#nextId = id === 0xffffffff ? 1 : id + 1;
      const taken = this.#pending.has(id) || this.#streams.has(id) || this.#keepalive?.id === id
        || this.#session?.ticketId === id || this.#resuming?.id === id || this.#handshaking?.id === id;
      if (!taken) return id;
    }
  }

  #failAll(makeError: () => unknown): void {
    this.#failWhere(() => true, makeError);
  }

  /** Rejects the requests already sent; those waiting for a connection stay. */
  #failSent(makeError: () => unknown): void {
    this.#failWhere((entry) => entry.sent, makeError);
  }

  #failWhere(which: (entry: Pending) => boolean, makeError: () => unknown): void {
    const entries: Pending[] = [];
    for (const [id, entry] of this.#pending) if (which(entry)) entries.push(this.#take(id)!);
    for (const entry of entries) entry.reject(makeError());
  }

  #sendDisconnect(reason: number, message: string): void {
    this.#transmit(this.#ws!, encodeFrame({ opcode: SystemOpcode.DISCONNECT, body: codeAndTextBody(reason, message) }));
  }

  #reply(request: Frame, opcode: number, flags: number, body: Uint8Array): void {
    if (this.#ws!.readyState === OPEN) {
      this.#write(encodeFrame({ opcode, flags: Flags.RESPONSE | flags, requestId: request.requestId, body }));
    }
  }

  #report(error: unknown): void {
    try {
      this.onError(error);
    } catch {
      // an onError that throws has nowhere else to go
    }
  }

  /** The server broke the contract: DISCONNECT MALFORMED (or `disconnectReason`), then close (and reconnect, if the client does). */
  #violation(reason: string, disconnectReason: number = DisconnectReason.MALFORMED): void {
    if (this.#closing || this.#violated) return;
    const ws = this.#ws!;
    if (ws.readyState === OPEN) this.#sendDisconnect(disconnectReason, reason);
    this.#violated = true;
    const error = new TernioError('protocol', `server broke the protocol: ${reason}`);
    this.#failSent(() => error);
    if (this.#policy) return this.#lost(ws, { code: 1006, reason: 'protocol violation' }, error, true);
    this.#failAll(() => error);
    this.#stopLinkTimers();
    ws.close(1000); // its close event ends the client
  }

  /** Handles a frame received (decompressed). */
  #handle(frame: Frame): void {
    if (frame.flags & Flags.RESPONSE) return this.#onResponse(frame);
    if (frame.requestId !== 0 && frame.flags & Flags.ERROR) {
      return this.#reply(frame, frame.opcode, Flags.ERROR, codeAndTextBody(ErrorCode.MALFORMED, 'ERROR flag on a request'));
    }
    switch (frame.opcode) {
      case SystemOpcode.PING:
        if (frame.requestId === 0) return;
        if (frame.body.length !== 8) {
          return this.#reply(frame, frame.opcode, Flags.ERROR, codeAndTextBody(ErrorCode.MALFORMED, 'PING body is not a u64'));
        }
        return this.#reply(frame, SystemOpcode.PONG, 0, frame.body);
      case SystemOpcode.DISCONNECT:
        return this.#onDisconnect(frame);
      case SystemOpcode.STREAM_ITEM:
      case SystemOpcode.STREAM_ITEMS:
      case SystemOpcode.STREAM_CREDIT:
      case SystemOpcode.STREAM_END:
        return this.#onStreamFrame(frame);
    }
    if (frame.requestId !== 0) {
      // This client answers no requests but PING.
      return this.#reply(frame, frame.opcode, Flags.ERROR, codeAndTextBody(ErrorCode.UNKNOWN_OPCODE, `no handler for opcode ${hex(frame.opcode)}`));
    }
    if (frame.opcode > 0xfeff) return; // a system packet without a reply
    this.#onPush(frame);
  }

  #onDisconnect(frame: Frame): void {
    if (this.#disconnect) return;
    const disconnect = this.#parseDisconnect(frame);
    this.#disconnect = disconnect;
    const error = new TernioError('closed', describe(disconnect), { disconnect });
    if (this.#policy && !FINAL_REASONS.includes(disconnect.reason)) {
      // The server closes next: no need to wait for it before reconnecting.
      return this.#lost(this.#ws, { code: 1000, reason: '' }, error);
    }
    this.#failAll(() => error);
    this.#stopLinkTimers(); // the server closes next; its close event ends the client
  }

  #onResponse(frame: Frame): void {
    if (this.#resuming && frame.requestId === this.#resuming.id) return this.#onResumed(frame);
    if (this.#session?.ticketId != null && frame.requestId === this.#session.ticketId) return this.#onTicket(frame);
    if (this.#keepalive && frame.requestId === this.#keepalive.id) {
      // The server is there (whatever it answered): the next PING after the interval.
      clearTimeout(this.#keepalive.timer ?? undefined);
      this.#keepalive = null;
      return this.#startKeepalive(this.#ws!);
    }
    const entry = this.#pending.get(frame.requestId);
    if (!entry || !entry.sent) {
      // Answers to nothing we wait for (say, after a timeout) are ignored;
      // an error without id reports a failed fire-and-forget send.
      if (frame.requestId === 0 && frame.flags & Flags.ERROR) this.#report(remoteError(frame.body));
      return;
    }
    this.#take(frame.requestId);
    if (frame.flags & Flags.ERROR) return entry.reject(remoteError(frame.body));
    try {
      entry.resolve(entry.decode(frame));
    } catch (error) {
      entry.reject(error);
    }
  }

  // ------------------------------------------------------------- streams

  /** What the streams of this client send through. */
  #streamLink: StreamLink = {
    send: (opcode, id, body) => {
      const frame = encodeFrame({ opcode, requestId: id, body });
      const session = this.#session;
      if (!this.isOpen && session?.lostAt != null && session.resumable) {
        // No connection, a session to resume: the frame is counted and kept now, and the
        // resumption's replay sends it (stream frames resume with the session, section 4.5).
        session.record(frame);
        return;
      }
      const error = this.#write(frame);
      if (error) throw error;
    },
    cancel: (stream) => this.#cancelStream(stream),
    room: (stream, frameBytes) => {
      if (this.#session?.hasRoom(frameBytes) ?? true) return true;
      this.#roomWaiters.add(stream);
      return false;
    },
  };

  /** Wakes the uploads waiting for room in the replay buffer, to look again. */
  #wakeRoomWaiters(): void {
    if (this.#roomWaiters.size === 0) return;
    const waiting = [...this.#roomWaiters];
    this.#roomWaiters.clear();
    for (const stream of waiting) stream.wake();
  }

  /** A stream frame: an item of a download, credit for an upload (docs/PROTOCOL.md section 4.5). */
  #onStreamFrame(frame: Frame): void {
    if (frame.requestId === 0) return this.#violation('a stream frame without a stream id');
    const stream = this.#streams.get(frame.requestId);
    if (frame.opcode === SystemOpcode.STREAM_ITEM) {
      if (!stream) return; // it crossed the stream's end or a CANCEL
      if (stream.granted === 0) return this.#violation('a stream item beyond its credit');
      stream.granted--;
      stream.items.push(frame.body);
      return stream.wake();
    }
    if (frame.opcode === SystemOpcode.STREAM_ITEMS) {
      // This client never accepts batches (no fifth byte in its credit).
      if (!stream) return;
      return this.#violation('STREAM_ITEMS on a stream that did not accept batches');
    }
    if (frame.opcode === SystemOpcode.STREAM_CREDIT) {
      // items: u32, then optionally batches: u8 (0 or 1; this client never sends batches).
      const valid = frame.body.length === 4 || (frame.body.length === 5 && frame.body[4]! <= 1);
      if (!valid) return this.#violation('a STREAM_CREDIT body that is not 4 or 5 bytes');
      if (!stream) return;
      stream.credit += new DataView(frame.body.buffer, frame.body.byteOffset, 4).getUint32(0, true);
      return stream.wake();
    }
    // The server ends a download with its answer, never STREAM_END.
  }

  /**
   * Opens a stream: sends the request (no timeout: the answer ends the
   * stream) and registers its state; `signal` cancels it.
   */
  #openStream(packetType: PacketType<any, any, any>, value: unknown, signal: AbortSignal | undefined): StreamState {
    if (!this.isOpen) this.#assertUsable(false);
    if (!this.isOpen) throw new TernioError('closed', 'a stream needs an open connection (it does not wait for a new one)');
    const outgoing = this.#outgoing(packetType, value, false);
    if (signal?.aborted) throw abortedError(outgoing.name, signal);
    const stream = new StreamState(outgoing.name);
    const onAbort = () => this.#cancelStream(stream, abortedError(stream.name, signal!));
    const resolve = (answer: Frame) => { stream.answer = answer; this.#endStream(stream); };
    const reject = (error: unknown) => { stream.error = error; this.#endStream(stream); };
    const id = this.#call(outgoing, 0, (frame) => frame, resolve, reject);
    if (id !== undefined) stream.id = id;
    if (id !== undefined && !stream.ended) {
      this.#streams.set(id, stream);
      if (signal) {
        signal.addEventListener('abort', onAbort, { once: true });
        stream.release = () => signal.removeEventListener('abort', onAbort);
      }
    }
    return stream;
  }

  /**
   * Ends `stream`, however it ends (answered, failed, cancelled, its
   * signal aborted): its state dropped, its signal's listener removed (a
   * long-lived signal would otherwise keep one per stream), its reader or
   * uploader woken.
   */
  #endStream(stream: StreamState): void {
    stream.ended = true;
    this.#streams.delete(stream.id);
    this.#roomWaiters.delete(stream);
    stream.release?.();
    stream.release = null;
    stream.wake();
  }

  /** Gives up `stream`: CANCEL to the server, its state dropped; `error`, if any, is what its reader or uploader gets. */
  #cancelStream(stream: StreamState, error?: TernioError): void {
    if (stream.ended) return;
    if (error) stream.error = error;
    const entry = this.#take(stream.id);
    this.#endStream(stream);
    if (!entry) return;
    if (this.isOpen) this.#sendCancel(stream.id);
    else if (this.#session?.resumable) this.#cancelOnResume.push(stream.id);
  }

  #onPush(frame: Frame): void {
    const subscriptions = this.#handlers.get(frame.opcode);
    if (!subscriptions) {
      this.#unhandled++;
      return;
    }
    for (const { type, handler } of [...subscriptions]) {
      try {
        const result = handler(type ? type.decode(frame.body) : frame.body, frame) as { then?: unknown } | undefined;
        if (typeof result?.then === 'function') (result as Promise<unknown>).then(undefined, (error) => this.#report(error));
      } catch (error) {
        this.#report(error);
      }
    }
  }
}
