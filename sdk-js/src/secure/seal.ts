// Sealed frames (docs/PROTOCOL.md sections 5.1 and 5.2): one cipher state
// per direction, with exact counters, REKEY, and Ternio's rekey policy.

import { decrypt, encrypt, expectBytes, KEY_LEN, MAX_NONCE, rekey, TAG_LEN, wipe } from './aead.js';

/** Bytes of a frame header: opcode u16, flags u8, request id u32. */
export const HEADER_LEN = 7;

/** Bytes of a sealed body's counter (u64 little-endian). */
export const COUNTER_LEN = 8;

/** The smallest sealed body: a counter and a tag (an empty plain body). */
export const SEAL_OVERHEAD = COUNTER_LEN + TAG_LEN;

/** The header flag of a sealed frame. */
export const ENCRYPTED = 0x04;

/** The opcode of `REKEY` (section 5.2). */
export const REKEY_OPCODE = 0xff05;

/** Milliseconds from some fixed origin; only differences are used. */
export type Clock = () => number;

/** When a {@link SendingCipher} is due to rekey: after `frames` sealed frames or `intervalMs` milliseconds under one key, whichever comes first. */
export interface RekeyPolicy {
  /** Frames sealed under one key before the next frame brings a REKEY. */
  readonly frames: number;
  /** Milliseconds under one key before the next frame brings a REKEY. */
  readonly intervalMs: number;
}

/** Ternio's policy (section 5.2): 65,536 frames or 2 minutes. */
export const DEFAULT_REKEY_POLICY: RekeyPolicy = Object.freeze({ frames: 65_536, intervalMs: 120_000 });

/** Never rekey on one's own (a peer's REKEY is still followed). */
export const NEVER_REKEY: RekeyPolicy = Object.freeze({ frames: Infinity, intervalMs: Infinity });

/** A monotonic clock where there is one (browsers, Node), else the wall clock. */
const defaultClock: Clock = () => {
  const performance = (globalThis as { performance?: { now(): number } }).performance;
  return performance ? performance.now() : Date.now();
};

/** What a {@link SendingCipher} is given besides its key. */
export interface SendingOptions {
  /** When to rekey on its own; {@link DEFAULT_REKEY_POLICY} when not given. */
  policy?: RekeyPolicy;
  /** The clock of the time threshold; a monotonic one when not given. */
  clock?: Clock;
  /** The counter of the first frame; 0 when not given. For tests of the counter's end. */
  nextCounter?: bigint;
}

/** Why a frame could not be sealed. */
export type SealErrorKind = 'counter-exhausted' | 'destroyed';

/** A frame that cannot be sealed: the connection must close (counter 2^64 - 1 is never used). */
export class SealError extends Error {
  /** Why. */
  readonly kind: SealErrorKind;

  /** Makes the error of `kind`. */
  constructor(kind: SealErrorKind, message: string) {
    super(message);
    this.name = 'SealError';
    this.kind = kind;
  }
}

/** Why a sealed frame was refused. Each is answered with a plain `DISCONNECT DECRYPT_FAILED` and a close. */
export type OpenErrorKind =
  /** The body is shorter than 24 bytes (counter and tag). */
  | 'too-short'
  /** The counter is not the expected one (a replay, reordering or deletion), or is 2^64 - 1. */
  | 'out-of-order'
  /** The tag does not verify: the key, header, counter or body differ from what was sealed. */
  | 'bad-tag'
  /** The header lacks ENCRYPTED: not a sealed frame. */
  | 'not-sealed'
  /** The cipher was destroyed. */
  | 'destroyed';

/** A sealed frame that was refused; nothing changed in the {@link ReceivingCipher}. */
export class OpenError extends Error {
  /** Why. */
  readonly kind: OpenErrorKind;
  /** The frame's counter, when it had one. */
  readonly counter: bigint | undefined;
  /** The counter expected. */
  readonly expected: bigint;

  /** Makes the error of `kind`. */
  constructor(kind: OpenErrorKind, expected: bigint, counter?: bigint) {
    super(
      kind === 'out-of-order'
        ? `sealed frame with counter ${counter}, expected ${expected}`
        : kind === 'too-short'
          ? 'sealed body shorter than 24 bytes'
          : kind === 'bad-tag'
            ? 'sealed frame does not authenticate'
            : kind === 'not-sealed'
              ? 'frame without ENCRYPTED where a sealed one was expected'
              : 'the cipher was destroyed',
    );
    this.name = 'OpenError';
    this.kind = kind;
    this.counter = counter;
    this.expected = expected;
  }
}

function checkHeader(header: Uint8Array): void {
  expectBytes(header, HEADER_LEN, 'a frame header');
}

/** The opcode of a 7-byte header. */
function opcodeOf(header: Uint8Array): number {
  return header[0]! | (header[1]! << 8);
}

/**
 * Seals what one side sends (section 5.1): counter u64 LE, then the
 * ChaCha20-Poly1305 ciphertext of the plain body and its tag, under this
 * direction's key, with the nonce of the counter and the 7 header bytes as
 * the associated data. Counters start at 0 and go up by one per frame,
 * across REKEYs; 2^64 - 1 is refused.
 */
export class SendingCipher {
  #key: Uint8Array | null;
  #next: bigint;
  #underKey = 0;
  #keyedAt: number;
  readonly #policy: RekeyPolicy;
  readonly #clock: Clock;

  /** A sending cipher with `key` (copied; the caller may erase its own). */
  constructor(key: Uint8Array, options: SendingOptions = {}) {
    expectBytes(key, KEY_LEN, 'a sending key');
    this.#key = key.slice();
    this.#next = options.nextCounter ?? 0n;
    if (this.#next < 0n || this.#next > MAX_NONCE) throw new RangeError('a counter is a u64');
    this.#policy = options.policy ?? DEFAULT_REKEY_POLICY;
    this.#clock = options.clock ?? defaultClock;
    this.#keyedAt = this.#clock();
  }

  /** The counter the next sealed frame will carry. */
  get nextCounter(): bigint {
    return this.#next;
  }

  /** Frames sealed under the current key. */
  get framesUnderKey(): number {
    return this.#underKey;
  }

  /** Whether the rekey policy asks for a REKEY before the next frame (reads the clock). */
  rekeyDue(): boolean {
    return this.#underKey >= this.#policy.frames || this.#clock() - this.#keyedAt >= this.#policy.intervalMs;
  }

  /**
   * Seals `plain` for `header`, the 7 header bytes exactly as they will be
   * sent (ENCRYPTED must be set in them: they are the associated data).
   * Returns the sealed body: counter, ciphertext, tag. Throws a
   * {@link SealError} `counter-exhausted` rather than use counter 2^64 - 1:
   * the connection must then close. Does not rekey by itself: see
   * {@link sealFrames}.
   */
  seal(header: Uint8Array, plain: Uint8Array): Uint8Array {
    checkHeader(header);
    if ((header[2]! & ENCRYPTED) === 0) throw new TypeError('a sealed frame has ENCRYPTED set in its header');
    const key = this.#liveKey();
    const counter = this.#next;
    if (counter === MAX_NONCE) throw new SealError('counter-exhausted', 'the sending counter is exhausted: close the connection');
    const sealed = encrypt(key, counter, header, plain);
    const body = new Uint8Array(COUNTER_LEN + sealed.length);
    new DataView(body.buffer).setBigUint64(0, counter, true);
    body.set(sealed, COUNTER_LEN);
    this.#next = counter + 1n;
    this.#underKey++;
    return body;
  }

  /**
   * One whole sealed frame (a WebSocket message; TCP adds its length
   * prefix): `header` with ENCRYPTED set (a copy; `header` is untouched),
   * then the sealed body of `plain`.
   */
  sealFrame(header: Uint8Array, plain: Uint8Array): Uint8Array {
    checkHeader(header);
    const sent = header.slice();
    sent[2]! |= ENCRYPTED;
    const body = this.seal(sent, plain);
    const frame = new Uint8Array(HEADER_LEN + body.length);
    frame.set(sent);
    frame.set(body, HEADER_LEN);
    return frame;
  }

  /**
   * The sealed REKEY frame (opcode 0xFF05, ENCRYPTED, id 0, empty body)
   * under the current key, after which the key is replaced by REKEY(key)
   * (the old one erased): every later frame is sealed with the new key.
   * Send it before anything sealed after this call.
   */
  rekeyFrame(): Uint8Array {
    const header = Uint8Array.of(REKEY_OPCODE & 0xff, REKEY_OPCODE >> 8, ENCRYPTED, 0, 0, 0, 0);
    const frame = this.sealFrame(header, new Uint8Array(0));
    this.#replaceKey();
    return frame;
  }

  /**
   * What to send for one frame under the rekey policy: a REKEY frame first
   * when one is due (checked now, as section 5.2 says: an idle connection
   * does not rekey, its next frame does), then the frame itself, as
   * {@link sealFrame} makes it. Send the frames in order.
   */
  sealFrames(header: Uint8Array, plain: Uint8Array): Uint8Array[] {
    const frames: Uint8Array[] = [];
    if (this.rekeyDue()) frames.push(this.rekeyFrame());
    frames.push(this.sealFrame(header, plain));
    return frames;
  }

  /** Erases the key; the cipher seals nothing more. */
  destroy(): void {
    wipe(this.#key);
    this.#key = null;
  }

  #liveKey(): Uint8Array {
    if (!this.#key) throw new SealError('destroyed', 'the sending cipher was destroyed');
    return this.#key;
  }

  #replaceKey(): void {
    const old = this.#liveKey();
    this.#key = rekey(old);
    wipe(old);
    this.#underKey = 0;
    this.#keyedAt = this.#clock();
  }
}

/** What a {@link ReceivingCipher} is given besides its key. */
export interface ReceivingOptions {
  /** The counter of the first frame expected; 0 when not given. For tests of the counter's end. */
  nextCounter?: bigint;
}

/**
 * Opens what the other side sealed (section 5.1), accepting each counter
 * only in its turn, and follows the other side's REKEY (section 5.2).
 */
export class ReceivingCipher {
  #key: Uint8Array | null;
  #next: bigint;

  /** A receiving cipher with `key` (copied), expecting counter 0 first. */
  constructor(key: Uint8Array, options: ReceivingOptions = {}) {
    expectBytes(key, KEY_LEN, 'a receiving key');
    this.#key = key.slice();
    this.#next = options.nextCounter ?? 0n;
    if (this.#next < 0n || this.#next > MAX_NONCE) throw new RangeError('a counter is a u64');
  }

  /** The counter the next sealed frame must carry. */
  get nextCounter(): bigint {
    return this.#next;
  }

  /**
   * Opens a sealed `body` (counter, ciphertext, tag) received with
   * `header`, the 7 header bytes as received (ENCRYPTED set). Returns the
   * plain body (a new array). Throws an {@link OpenError} for a body shorter
   * than 24 bytes, a counter other than the expected one (or 2^64 - 1), or a
   * tag that fails; nothing changes then. After opening a REKEY frame
   * (opcode 0xFF05) the key is replaced by REKEY(key), the old one erased.
   * Whether such a frame is well formed (id 0, empty body, no RESPONSE or
   * ERROR) is the caller's to check (`DISCONNECT MALFORMED`).
   */
  open(header: Uint8Array, body: Uint8Array): Uint8Array {
    checkHeader(header);
    if (!this.#key) throw new OpenError('destroyed', this.#next);
    if ((header[2]! & ENCRYPTED) === 0) throw new OpenError('not-sealed', this.#next);
    if (body.length < SEAL_OVERHEAD) throw new OpenError('too-short', this.#next);
    const counter = new DataView(body.buffer, body.byteOffset, COUNTER_LEN).getBigUint64(0, true);
    // A sender never seals with 2^64 - 1 (section 5.1).
    if (counter !== this.#next || counter === MAX_NONCE) throw new OpenError('out-of-order', this.#next, counter);
    const plain = decrypt(this.#key, counter, header, body.subarray(COUNTER_LEN));
    if (!plain) throw new OpenError('bad-tag', this.#next, counter);
    this.#next = counter + 1n;
    if (opcodeOf(header) === REKEY_OPCODE) {
      const old = this.#key;
      this.#key = rekey(old);
      wipe(old);
    }
    return plain;
  }

  /**
   * Opens one whole sealed frame (a WebSocket message: header then sealed
   * body), as {@link open} does. Returns the header as received and the
   * plain body.
   */
  openFrame(frame: Uint8Array): { header: Uint8Array; plain: Uint8Array } {
    if (frame.length < HEADER_LEN) throw new OpenError('too-short', this.#next);
    const header = frame.slice(0, HEADER_LEN);
    return { header, plain: this.open(header, frame.subarray(HEADER_LEN)) };
  }

  /** Erases the key; the cipher opens nothing more. */
  destroy(): void {
    wipe(this.#key);
    this.#key = null;
  }
}
