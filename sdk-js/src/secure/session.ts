// What a Ternio client calls to run a secure session: the HANDSHAKE request
// body and its answer (docs/PROTOCOL.md section 5), and a secure session's
// RESUME body and its answer (section 4.2), each giving the two cipher
// states of the session's frames.

import { concat, expectBytes, KEY_LEN, resumePsk, sessionSecret, TAG_LEN, wipe } from './aead.js';
import { DH_LEN, HandshakeError, HandshakeState, PROLOGUE } from './noise.js';
import { ReceivingCipher, SendingCipher, type Clock, type RekeyPolicy } from './seal.js';

/** The `pattern` byte of a HANDSHAKE request: 1 NN, 2 NK. */
export const HANDSHAKE_PATTERN = Object.freeze({ NN: 1, NK: 2 } as const);

/** The `pattern` byte of a RESUME request: 0 plain, 3 NNpsk0, 4 NKpsk0. */
export const RESUME_PATTERN = Object.freeze({ plain: 0, NNpsk0: 3, NKpsk0: 4 } as const);

/** Bytes of a resumption ticket. */
export const TICKET_LEN = 32;

/** Bytes of message 2 of a HANDSHAKE (`e, ee`): an ephemeral key and an empty payload's tag. (A secure resumption's is {@link RESUMED_MESSAGE_LEN}.) */
export const SECOND_MESSAGE_LEN = DH_LEN + TAG_LEN;

/** The fields of a RESUME request before the Noise message: ticket, received u64, pattern u8. */
const RESUME_FIXED_LEN = TICKET_LEN + 8 + 1;

/** The fields of a RESUME answer before the Noise message: received u64, ticket, ttl_ms u32. */
const RESUMED_FIXED_LEN = 8 + TICKET_LEN + 4;

/**
 * Bytes of message 2 of a secure resumption (`e, ee`): an ephemeral key,
 * then the answer's 44 plain bytes before the message (received, ticket,
 * ttl_ms) encrypted as its payload, and their tag: 92.
 */
export const RESUMED_MESSAGE_LEN = DH_LEN + RESUMED_FIXED_LEN + TAG_LEN;

/** How a session's keys are used once it is up. */
export interface ChannelOptions {
  /** When the sending side rekeys on its own; Ternio's 65,536 frames or 2 minutes when not given. */
  rekeyPolicy?: RekeyPolicy;
  /** The clock of the rekey policy's time threshold. */
  clock?: Clock;
}

/** A secure session's two directions, once a handshake (or a resumption) completed. */
export interface SecureChannel {
  /** Seals every frame the client sends from now on. */
  readonly send: SendingCipher;
  /** Opens every frame the server sends from now on. */
  readonly receive: ReceivingCipher;
  /** Noise's handshake hash `h` (32 bytes): a channel binding, no secret. */
  readonly handshakeHash: Uint8Array;
  /**
   * The session secret (32 bytes), `BLAKE2s-256("ternio/2 secret" || k1 || k2)`:
   * what the next resumption is keyed by. Keep it while the session may
   * resume; erase it (`fill(0)`) when the session ends.
   */
  readonly sessionSecret: Uint8Array;
  /** The server's static public key this session pinned (NK, NKpsk0), or `null` (NN, NNpsk0). Resumption pins it again. */
  readonly serverKey: Uint8Array | null;
}

/** What a {@link startHandshake} needs. */
export interface HandshakeStart {
  /** `'NK'` pins `serverKey`; `'NN'` pins nothing. Defaults to NK when `serverKey` is given, else NN. */
  pattern?: 'NN' | 'NK';
  /** The server's static X25519 public key (32 bytes), for NK. */
  serverKey?: Uint8Array;
  /** A fixed ephemeral private key: for test vectors only. */
  ephemeralPrivateKey?: Uint8Array;
}

/** A HANDSHAKE on its way: send `body`, then finish with the answer's body. */
export interface PendingHandshake {
  /** The body of the HANDSHAKE request (opcode 0xFF01, any non-zero id, sent plain): pattern byte, then message 1. */
  readonly body: Uint8Array;
  /** The pattern byte in `body`. */
  readonly pattern: 'NN' | 'NK';
  /**
   * Reads the body of the HANDSHAKE response (message 2, 48 bytes) and
   * returns the session's channel. Throws a {@link HandshakeError} when it
   * is not the answer of a server holding the pinned key, or not 48 bytes.
   */
  finish(answer: Uint8Array, options?: ChannelOptions): SecureChannel;
  /** Erases the handshake's secrets without finishing (the server refused it, the connection went). */
  abandon(): void;
}

function channelOf(state: HandshakeState, serverKey: Uint8Array | null, options: ChannelOptions): SecureChannel {
  const handshakeHash = state.handshakeHash;
  const keys = state.split();
  const sending: { policy?: RekeyPolicy; clock?: Clock } = {};
  if (options.rekeyPolicy) sending.policy = options.rekeyPolicy;
  if (options.clock) sending.clock = options.clock;
  const channel: SecureChannel = {
    send: new SendingCipher(keys.initiatorToResponder, sending),
    receive: new ReceivingCipher(keys.responderToInitiator),
    handshakeHash,
    sessionSecret: sessionSecret(keys.initiatorToResponder, keys.responderToInitiator),
    serverKey: serverKey ? serverKey.slice() : null,
  };
  wipe(keys.initiatorToResponder);
  wipe(keys.responderToInitiator);
  return channel;
}

function finishWith(state: HandshakeState, answer: Uint8Array, serverKey: Uint8Array | null, options: ChannelOptions): SecureChannel {
  if (!(answer instanceof Uint8Array) || answer.length !== SECOND_MESSAGE_LEN) {
    state.destroy();
    throw new HandshakeError(`the second handshake message must be ${SECOND_MESSAGE_LEN} bytes`);
  }
  state.readMessage(answer);
  return channelOf(state, serverKey, options);
}

/**
 * Starts a secure session's handshake (section 5): NN, or NK pinning the
 * server's static key. The client sends `body` as a HANDSHAKE request,
 * sends nothing else until the answer, then calls `finish` with the
 * RESPONSE's body and seals every later frame with the channel's `send`.
 * On an ERROR answer (such as 9 HANDSHAKE_FAILED) it calls `abandon`.
 */
export function startHandshake(start: HandshakeStart = {}): PendingHandshake {
  const pattern = start.pattern ?? (start.serverKey ? 'NK' : 'NN');
  let serverKey: Uint8Array | null = null;
  if (pattern === 'NK') {
    if (start.serverKey === undefined) throw new HandshakeError('NK needs the server key');
    expectBytes(start.serverKey, KEY_LEN, 'the server key');
    serverKey = start.serverKey.slice();
  } else if (pattern !== 'NN') {
    throw new HandshakeError(`not a HANDSHAKE pattern: ${String(pattern)}`);
  } else if (start.serverKey !== undefined) {
    throw new HandshakeError('NN pins no server key (use NK)');
  }
  const state = new HandshakeState({
    pattern,
    role: 'initiator',
    ...(serverKey ? { remoteStaticKey: serverKey } : {}),
    ...(start.ephemeralPrivateKey ? { ephemeralPrivateKey: start.ephemeralPrivateKey } : {}),
  });
  const message = state.writeMessage();
  const body = new Uint8Array(1 + message.length);
  body[0] = HANDSHAKE_PATTERN[pattern];
  body.set(message, 1);
  return {
    body,
    pattern,
    finish: (answer, options = {}) => finishWith(state, answer, serverKey, options),
    abandon: () => state.destroy(),
  };
}

/** What a {@link startResume} needs. */
export interface ResumeStart {
  /** The session's current ticket (32 bytes). */
  ticket: Uint8Array;
  /** Counted frames the client received from the server on the session. */
  received: bigint;
  /**
   * The session's secure state: its latest session secret and the server key
   * it pinned (`null` when it pinned none), as the last {@link SecureChannel}
   * gave them; `null` for a plain session (pattern 0).
   */
  secure: { sessionSecret: Uint8Array; serverKey: Uint8Array | null } | null;
  /** A fixed ephemeral private key: for test vectors only. */
  ephemeralPrivateKey?: Uint8Array;
}

/** The RESUME answer, read. */
export interface Resumed {
  /** Counted frames the server received from the client: an ACK, and where the client's replay starts. */
  readonly received: bigint;
  /** The session's new ticket (the old one is dead). */
  readonly ticket: Uint8Array;
  /** How long (ms) the server keeps the session after it loses the connection. */
  readonly ttlMs: number;
  /** The resumed session's new channel (fresh keys, counters from 0), or `null` on a plain session. */
  readonly channel: SecureChannel | null;
}

/** A RESUME on its way: send `body`, then finish with the answer's body. */
export interface PendingResume {
  /** The body of the RESUME request (opcode 0xFF0A, non-zero id, sent plain as the connection's first frame). */
  readonly body: Uint8Array;
  /** The pattern byte in `body`: 0 plain, 3 NNpsk0, 4 NKpsk0. */
  readonly pattern: 0 | 3 | 4;
  /**
   * Reads the body of the RESUME RESPONSE (received, new ticket, ttl_ms,
   * then message 2 on a secure session) and returns it with the resumed
   * channel. Throws a {@link HandshakeError} when the answer is malformed,
   * its Noise message fails, or (secure) the fields message 2 carries
   * encrypted are not the plain ones: the answer was changed on the way,
   * and nothing of it may be used (the session is lost).
   */
  finish(answer: Uint8Array, options?: ChannelOptions): Resumed;
  /** Erases the handshake's secrets without finishing (refused: the session is lost). */
  abandon(): void;
}

/**
 * Starts a RESUME (section 4.2). For a secure session it runs
 * `Noise_NNpsk0` (or `Noise_NKpsk0` when the session pinned the server's
 * key), keyed by `BLAKE2s-256("ternio/2 resume" || sessionSecret)`. The
 * client sends `body` as the first frame of the new connection (plain),
 * sends nothing else until the answer, then calls `finish` with the
 * RESPONSE body: the returned channel seals and opens every later frame
 * (the replay included), and its `sessionSecret` keys the next resumption.
 * On an ERROR answer it calls `abandon` and treats the session as lost.
 *
 * The plain fields are bound to the handshake: the prologue is `ternio/2`
 * followed by the body's 41 bytes before the message (ticket, received,
 * pattern), and the server's message 2 carries the answer's 44 bytes before
 * it (received, ticket, ttl_ms), encrypted, which `finish` requires to
 * equal the plain ones.
 */
export function startResume(start: ResumeStart): PendingResume {
  expectBytes(start.ticket, TICKET_LEN, 'a ticket');
  if (typeof start.received !== 'bigint' || start.received < 0n || start.received >= 1n << 64n) {
    throw new RangeError('received is a u64 (bigint)');
  }
  let state: HandshakeState | null = null;
  let serverKey: Uint8Array | null = null;
  let pattern: 0 | 3 | 4 = RESUME_PATTERN.plain;
  let message: Uint8Array = new Uint8Array(0);
  if (start.secure?.serverKey) pattern = RESUME_PATTERN.NKpsk0;
  else if (start.secure) pattern = RESUME_PATTERN.NNpsk0;
  // The body's fields before the message: the prologue's tail on a secure session.
  const fields = new Uint8Array(RESUME_FIXED_LEN);
  fields.set(start.ticket, 0);
  new DataView(fields.buffer).setBigUint64(TICKET_LEN, start.received, true);
  fields[TICKET_LEN + 8] = pattern;
  if (start.secure) {
    const { sessionSecret: secret } = start.secure;
    expectBytes(secret, KEY_LEN, 'the session secret');
    if (start.secure.serverKey) {
      expectBytes(start.secure.serverKey, KEY_LEN, 'the server key');
      serverKey = start.secure.serverKey.slice();
    }
    const psk = resumePsk(secret);
    try {
      state = new HandshakeState({
        pattern: serverKey ? 'NKpsk0' : 'NNpsk0',
        role: 'initiator',
        prologue: concat(PROLOGUE, fields),
        psk,
        ...(serverKey ? { remoteStaticKey: serverKey } : {}),
        ...(start.ephemeralPrivateKey ? { ephemeralPrivateKey: start.ephemeralPrivateKey } : {}),
      });
    } finally {
      wipe(psk);
    }
    message = state.writeMessage();
  } else if (start.ephemeralPrivateKey !== undefined) {
    throw new HandshakeError('a plain session resumes with no handshake');
  }
  const body = new Uint8Array(RESUME_FIXED_LEN + message.length);
  body.set(fields, 0);
  body.set(message, RESUME_FIXED_LEN);

  const finish = (answer: Uint8Array, options: ChannelOptions = {}): Resumed => {
    const expected = RESUMED_FIXED_LEN + (state ? RESUMED_MESSAGE_LEN : 0);
    if (!(answer instanceof Uint8Array) || answer.length !== expected) {
      state?.destroy();
      throw new HandshakeError(`a RESUME answer of pattern ${pattern} must be ${expected} bytes`);
    }
    const read = new DataView(answer.buffer, answer.byteOffset, answer.length);
    const received = read.getBigUint64(0, true);
    const ticket = answer.slice(8, 8 + TICKET_LEN);
    const ttlMs = read.getUint32(8 + TICKET_LEN, true);
    let channel: SecureChannel | null = null;
    if (state) {
      // Message 2's payload is the plain fields, authenticated: changed on the way, they differ.
      const payload = state.readMessage(answer.subarray(RESUMED_FIXED_LEN));
      if (!equal(payload, answer.subarray(0, RESUMED_FIXED_LEN))) {
        state.destroy();
        throw new HandshakeError("the RESUME answer's fields are not the ones its Noise message authenticates");
      }
      channel = channelOf(state, serverKey, options);
    }
    return { received, ticket, ttlMs, channel };
  };
  return { body, pattern, finish, abandon: () => state?.destroy() };
}

function equal(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

/** The RESUME_TICKET answer, read. */
export interface TicketAnswer {
  /** The ticket that names the session on the server (32 bytes). */
  readonly ticket: Uint8Array;
  /** How long (ms) the server keeps the session after it loses the connection. */
  readonly ttlMs: number;
  /** The server's replay bound in bytes, when the request asked for it (the body `01`). */
  readonly replayBytes?: number;
}

/**
 * Reads the body of a RESUME_TICKET response (section 4.2): `ticket:
 * [u8; 32]`, `ttl_ms: u32`, and `replay_bytes: u32` when the request
 * asked for it. Throws a TypeError when it is neither 36 nor 40 bytes.
 */
export function parseTicketAnswer(body: Uint8Array): TicketAnswer {
  if (!(body instanceof Uint8Array) || (body.length !== TICKET_LEN + 4 && body.length !== TICKET_LEN + 8)) {
    throw new TypeError(`a RESUME_TICKET answer is ${TICKET_LEN + 4} bytes, or ${TICKET_LEN + 8} with the replay bound`);
  }
  const ticket = body.slice(0, TICKET_LEN);
  const view = new DataView(body.buffer, body.byteOffset, body.length);
  const ttlMs = view.getUint32(TICKET_LEN, true);
  return body.length === TICKET_LEN + 8 ? { ticket, ttlMs, replayBytes: view.getUint32(TICKET_LEN + 4, true) } : { ticket, ttlMs };
}
