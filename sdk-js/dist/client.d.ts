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
import { type PacketType, type Type } from './codec.js';
import type { CloseInfo, SessionEvent, StateEvent } from './events.js';
import { type Frame } from './frame.js';
import { type ReconnectOptions } from './reconnect.js';
import { type ResumeOptions } from './resume.js';
import { type Upload } from './streams.js';
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
    onmessage: ((event: {
        data: unknown;
    }) => void) | null;
    /** Set by the client: the connection closed. */
    onclose: ((event: {
        code: number;
        reason: string;
    }) => void) | null;
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
export declare class Client {
    #private;
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
    constructor(options?: ClientOptions);
    /**
     * Creates a client and connects it.
     * @param url Such as `ws://host:port/ws` (or `wss://`).
     * @param options See {@link ClientOptions}.
     */
    static connect(url: string, options?: ClientOptions): Promise<Client>;
    /**
     * Opens the WebSocket, offering the subprotocol `ternio.v2`. Once per
     * client. When this first connection fails the client is closed: only a
     * connection that was once up is re-established.
     * @returns This client, once open; a `'closed'` {@link TernioError} if it cannot connect.
     */
    connect(url: string): Promise<Client>;
    /** Whether a connection is open and not closing. */
    get isOpen(): boolean;
    /**
     * `'idle'` (before connect()), `'connecting'` (the first connection),
     * `'open'`, `'reconnecting'` (between attempts, or during one) or `'closed'`.
     */
    get state(): ClientState;
    /** How many requests wait for their response (including those waiting for a new connection). */
    get inFlight(): number;
    /**
     * Whether a lost connection would be resumed now: the client resumes
     * sessions, the server gave a ticket, and the replay buffer has not
     * overflowed.
     */
    get resumable(): boolean;
    /**
     * The current connection's secure session (option `secure`), once its
     * handshake or resumption completed; null on a plain client, and while
     * a connection is being set up.
     */
    get secureSession(): SecureSessionInfo | null;
    /** How many times the session was resumed so far. */
    get resumptions(): number;
    /** How many pushes arrived that no {@link Client#on} handler took (they are dropped). */
    get unhandledPushes(): number;
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
    request<T, R>(packetType: PacketType<T, any, any>, value: T, options: RequestOptions & {
        response: PacketType<R, any, any>;
    }): Promise<R>;
    request<T, R>(packetType: PacketType<T, R, any>, value: T, options?: RequestOptions): Promise<R>;
    request(opcode: number, body?: Uint8Array | ArrayBuffer, options?: RequestOptions): Promise<Frame>;
    /**
     * Sends a packet that expects no reply (request id 0). A server that
     * cannot handle it reports an error frame without id, given to `onError`.
     * It is not kept for later: while the client reconnects it throws.
     * @throws {TernioError} `'closed'` when not connected (or reconnecting), or when the
     *   outbound buffer is full (the connection is then dropped); `'codec'` when the value does not encode.
     */
    send<T>(packetType: PacketType<T, any, any>, value: T): void;
    send(opcode: number, body?: Uint8Array | ArrayBuffer): void;
    /**
     * Calls `handler` for every push (a frame with request id 0) at this
     * opcode, with the decoded value (or the raw body for a number) and the frame.
     * Pushes without a handler are counted in {@link Client#unhandledPushes} and dropped.
     * Handlers belong to the client: they stay through reconnects.
     * @returns Removes the handler.
     */
    on<T>(packetType: PacketType<T, any, any>, handler: (value: T, frame: Frame) => unknown): () => void;
    on(opcode: number, handler: (body: Uint8Array, frame: Frame) => unknown): () => void;
    /**
     * Sends a PING (a u64 timestamp) and waits for its PONG. While the
     * client reconnects, it waits for the new connection, like a request.
     * @returns The round trip, in milliseconds.
     */
    ping(options?: {
        timeout?: number;
    }): Promise<number>;
    /**
     * Sends `DISCONNECT NORMAL` and closes the WebSocket with code 1000; the
     * client does not reconnect after it. Requests still waiting are rejected
     * (`'closed'`) at once.
     * @param message The DISCONNECT's text.
     * @returns Settles once the WebSocket has closed (at once when no connection is open).
     */
    close(message?: string): Promise<CloseInfo>;
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
    requestStream<T, I>(packetType: PacketType<T, any, I>, value: T, options?: StreamOptions<I>): AsyncIterableIterator<I>;
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
    upload<T, R, I>(packetType: PacketType<T, R, I>, value: T, options?: StreamOptions<I>): Upload<I, R>;
}
