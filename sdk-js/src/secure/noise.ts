// A Noise handshake (The Noise Protocol Framework, revision 34) for the
// patterns Ternio uses, and only those: NN and NK for a session's
// HANDSHAKE, NNpsk0 and NKpsk0 for a secure session's RESUME
// (docs/PROTOCOL.md sections 5 and 4.2), all with 25519, ChaChaPoly and
// BLAKE2s. Written from the specification's sections 5 (processing rules),
// 4 (crypto functions) and 9 (pre-shared keys), on @noble primitives.

import { x25519 } from '@noble/curves/ed25519.js';
import { blake2s } from '@noble/hashes/blake2.js';
import { hmac } from '@noble/hashes/hmac.js';

import { ascii, blake2s256, concat, decrypt, encrypt, expectBytes, KEY_LEN, MAX_NONCE, TAG_LEN, wipe } from './aead.js';

/** The prologue of every Ternio handshake: the 8 ASCII bytes `ternio/2`. */
export const PROLOGUE: Uint8Array = ascii('ternio/2');

/** Bytes of an X25519 public key, and of Noise's DHLEN and HASHLEN here. */
export const DH_LEN = 32;

/** The Noise patterns Ternio runs. */
export type NoisePattern = 'NN' | 'NK' | 'NNpsk0' | 'NKpsk0';

/** The full Noise protocol name of each pattern Ternio runs. */
export const PROTOCOL_NAMES: Readonly<Record<NoisePattern, string>> = Object.freeze({
  NN: 'Noise_NN_25519_ChaChaPoly_BLAKE2s',
  NK: 'Noise_NK_25519_ChaChaPoly_BLAKE2s',
  NNpsk0: 'Noise_NNpsk0_25519_ChaChaPoly_BLAKE2s',
  NKpsk0: 'Noise_NKpsk0_25519_ChaChaPoly_BLAKE2s',
});

/** A handshake that cannot go on: a failed Noise step, a message of the wrong size, a misuse. */
export class HandshakeError extends Error {
  /** Makes the error with `message`. */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'HandshakeError';
  }
}

type Token = 'e' | 'es' | 'ee' | 'psk';

/** The tokens of message 1 (initiator to responder) and message 2 of each pattern. */
const MESSAGES: Record<NoisePattern, [Token[], Token[]]> = {
  NN: [['e'], ['e', 'ee']],
  NK: [['e', 'es'], ['e', 'ee']],
  NNpsk0: [['psk', 'e'], ['e', 'ee']],
  NKpsk0: [['psk', 'e', 'es'], ['e', 'ee']],
};

/** Whether the responder's static key is a pre-message (`<- s`) of `pattern`. */
function hasResponderStatic(pattern: NoisePattern): boolean {
  return pattern === 'NK' || pattern === 'NKpsk0';
}

function isPsk(pattern: NoisePattern): boolean {
  return pattern === 'NNpsk0' || pattern === 'NKpsk0';
}

/** HMAC-BLAKE2s (RFC 2104 with BLAKE2s-256, block length 64). */
function hmacBlake2s(key: Uint8Array, data: Uint8Array): Uint8Array {
  return hmac(blake2s, key, data);
}

/** Noise's HKDF(chaining_key, input_key_material, num_outputs), with 2 or 3 outputs. */
function hkdf(chainingKey: Uint8Array, ikm: Uint8Array, outputs: 2 | 3): Uint8Array[] {
  const tempKey = hmacBlake2s(chainingKey, ikm);
  const out1 = hmacBlake2s(tempKey, Uint8Array.of(0x01));
  const out2 = hmacBlake2s(tempKey, concat(out1, Uint8Array.of(0x02)));
  const result = [out1, out2];
  if (outputs === 3) result.push(hmacBlake2s(tempKey, concat(out2, Uint8Array.of(0x03))));
  wipe(tempKey);
  return result;
}

/** X25519 of a private and a public key; a low-order public key fails the handshake. */
function dh(privateKey: Uint8Array, publicKey: Uint8Array): Uint8Array {
  try {
    return x25519.getSharedSecret(privateKey, publicKey);
  } catch (error) {
    throw new HandshakeError('X25519 failed (an invalid public key)', { cause: error });
  }
}

/** The public key of an X25519 private key. */
export function x25519PublicKey(privateKey: Uint8Array): Uint8Array {
  expectBytes(privateKey, KEY_LEN, 'an X25519 private key');
  return x25519.getPublicKey(privateKey);
}

/** Noise's CipherState: a key (or none) and a nonce. */
class CipherState {
  key: Uint8Array | null = null;
  nonce = 0n;

  initializeKey(key: Uint8Array): void {
    wipe(this.key);
    this.key = key;
    this.nonce = 0n;
  }

  encryptWithAd(ad: Uint8Array, plain: Uint8Array): Uint8Array {
    if (!this.key) return plain.slice();
    if (this.nonce === MAX_NONCE) throw new HandshakeError('nonce exhausted');
    return encrypt(this.key, this.nonce++, ad, plain);
  }

  decryptWithAd(ad: Uint8Array, sealed: Uint8Array): Uint8Array {
    if (!this.key) return sealed.slice();
    if (this.nonce === MAX_NONCE) throw new HandshakeError('nonce exhausted');
    const plain = decrypt(this.key, this.nonce, ad, sealed);
    if (!plain) throw new HandshakeError('a handshake message does not authenticate');
    this.nonce++;
    return plain;
  }
}

/** Noise's SymmetricState: the chaining key, the handshake hash and a CipherState. */
class SymmetricState {
  ck: Uint8Array;
  h: Uint8Array;
  readonly cipher = new CipherState();

  constructor(protocolName: string) {
    const name = ascii(protocolName);
    if (name.length <= DH_LEN) {
      this.h = new Uint8Array(DH_LEN);
      this.h.set(name);
    } else {
      this.h = blake2s256(name);
    }
    this.ck = this.h.slice();
  }

  mixKey(ikm: Uint8Array): void {
    const [ck, tempK] = hkdf(this.ck, ikm, 2) as [Uint8Array, Uint8Array];
    wipe(this.ck);
    this.ck = ck;
    this.cipher.initializeKey(tempK);
  }

  mixHash(data: Uint8Array): void {
    this.h = blake2s256(this.h, data);
  }

  mixKeyAndHash(ikm: Uint8Array): void {
    const [ck, tempH, tempK] = hkdf(this.ck, ikm, 3) as [Uint8Array, Uint8Array, Uint8Array];
    wipe(this.ck);
    this.ck = ck;
    this.mixHash(tempH);
    this.cipher.initializeKey(tempK);
  }

  encryptAndHash(plain: Uint8Array): Uint8Array {
    const sealed = this.cipher.encryptWithAd(this.h, plain);
    this.mixHash(sealed);
    return sealed;
  }

  decryptAndHash(sealed: Uint8Array): Uint8Array {
    const plain = this.cipher.decryptWithAd(this.h, sealed);
    this.mixHash(sealed);
    return plain;
  }

  split(): [Uint8Array, Uint8Array] {
    return hkdf(this.ck, new Uint8Array(0), 2) as [Uint8Array, Uint8Array];
  }

  destroy(): void {
    wipe(this.ck);
    wipe(this.cipher.key);
    this.cipher.key = null;
  }
}

/** What a {@link HandshakeState} is built from. */
export interface HandshakeOptions {
  /** The Noise pattern. */
  pattern: NoisePattern;
  /** Whether this side sends message 1 (a Ternio client) or answers it (a server). */
  role: 'initiator' | 'responder';
  /** The prologue; Ternio's, `ternio/2`, when not given. */
  prologue?: Uint8Array;
  /** The responder's static public key (32 bytes): the initiator's pin for NK and NKpsk0. */
  remoteStaticKey?: Uint8Array;
  /** The responder's own static private key (32 bytes), for NK and NKpsk0. */
  staticPrivateKey?: Uint8Array;
  /** The pre-shared key (32 bytes) of NNpsk0 and NKpsk0. Copied, and the copy erased when done. */
  psk?: Uint8Array;
  /**
   * A fixed ephemeral private key (32 bytes), for test vectors only: a
   * real handshake draws a fresh random one, which this leaves out.
   */
  ephemeralPrivateKey?: Uint8Array;
}

/** The two keys of Split(): the first encrypts what the initiator sends, the second what the responder sends. */
export interface SplitKeys {
  /** Key of the initiator-to-responder (client-to-server) direction. */
  initiatorToResponder: Uint8Array;
  /** Key of the responder-to-initiator (server-to-client) direction. */
  responderToInitiator: Uint8Array;
}

/**
 * Noise's HandshakeState for the two-message patterns Ternio runs (NN, NK,
 * NNpsk0, NKpsk0), either role. A client uses the initiator:
 * `writeMessage()` gives message 1, `readMessage(message2)` reads the
 * answer, then `split()` gives the two transport keys and `handshakeHash`
 * Noise's `h`. The responder exists for tests and symmetry.
 */
export class HandshakeState {
  readonly #pattern: NoisePattern;
  readonly #initiator: boolean;
  readonly #symmetric: SymmetricState;
  readonly #messages: Token[][];
  #ephemeral: Uint8Array | null = null;
  #fixedEphemeral: Uint8Array | null;
  #staticPrivate: Uint8Array | null;
  #remoteEphemeral: Uint8Array | null = null;
  #remoteStatic: Uint8Array | null;
  #psk: Uint8Array | null;
  #next = 0;
  #failed = false;
  #split = false;

  /** Initializes the state (Noise's Initialize()): protocol name, prologue, pre-messages. */
  constructor(options: HandshakeOptions) {
    const { pattern, role } = options;
    if (!(pattern in MESSAGES)) throw new HandshakeError(`not a pattern Ternio runs: ${String(pattern)}`);
    if (role !== 'initiator' && role !== 'responder') throw new HandshakeError(`no such role: ${String(role)}`);
    this.#pattern = pattern;
    this.#initiator = role === 'initiator';
    this.#messages = MESSAGES[pattern];
    this.#symmetric = new SymmetricState(PROTOCOL_NAMES[pattern]);
    this.#symmetric.mixHash(options.prologue ?? PROLOGUE);

    this.#fixedEphemeral = null;
    if (options.ephemeralPrivateKey !== undefined) {
      expectBytes(options.ephemeralPrivateKey, KEY_LEN, 'the ephemeral private key');
      this.#fixedEphemeral = options.ephemeralPrivateKey.slice();
    }
    this.#psk = null;
    if (isPsk(pattern)) {
      if (options.psk === undefined) throw new HandshakeError(`${pattern} needs a pre-shared key`);
      expectBytes(options.psk, KEY_LEN, 'the pre-shared key');
      this.#psk = options.psk.slice();
    } else if (options.psk !== undefined) {
      throw new HandshakeError(`${pattern} takes no pre-shared key`);
    }

    this.#staticPrivate = null;
    this.#remoteStatic = null;
    if (hasResponderStatic(pattern)) {
      let responderStatic: Uint8Array;
      if (this.#initiator) {
        if (options.remoteStaticKey === undefined) throw new HandshakeError(`${pattern} needs the server's static public key`);
        expectBytes(options.remoteStaticKey, KEY_LEN, "the server's static public key");
        this.#remoteStatic = options.remoteStaticKey.slice();
        responderStatic = this.#remoteStatic;
      } else {
        if (options.staticPrivateKey === undefined) throw new HandshakeError(`${pattern} needs the server's static private key`);
        expectBytes(options.staticPrivateKey, KEY_LEN, "the server's static private key");
        this.#staticPrivate = options.staticPrivateKey.slice();
        responderStatic = x25519PublicKey(this.#staticPrivate);
      }
      // The pre-message `<- s`.
      this.#symmetric.mixHash(responderStatic);
    }
  }

  /** The pattern this handshake runs. */
  get pattern(): NoisePattern {
    return this.#pattern;
  }

  /** Whether both messages went through: `split()` and `handshakeHash` are then available. */
  get finished(): boolean {
    return this.#next === this.#messages.length && !this.#failed;
  }

  /** Whether it is this side's turn to write (else to read). */
  get writing(): boolean {
    return (this.#next % 2 === 0) === this.#initiator;
  }

  /**
   * Noise's handshake hash `h` once the handshake finished (a copy): the
   * same on both sides, a channel binding. It hashes only what crossed the
   * wire, so it is no secret (which is why resumption is keyed by the
   * session secret instead).
   */
  get handshakeHash(): Uint8Array {
    if (!this.finished) throw new HandshakeError('the handshake has not finished');
    return this.#symmetric.h.slice();
  }

  /** Writes this side's next message, with `payload` (empty in Ternio) encrypted in it. */
  writeMessage(payload: Uint8Array = new Uint8Array(0)): Uint8Array {
    const tokens = this.#turn(true);
    try {
      const parts: Uint8Array[] = [];
      for (const token of tokens) {
        if (token === 'e') {
          const ephemeral = this.#fixedEphemeral ?? x25519.utils.randomSecretKey();
          this.#fixedEphemeral = null;
          this.#ephemeral = ephemeral;
          const publicKey = x25519PublicKey(ephemeral);
          parts.push(publicKey);
          this.#symmetric.mixHash(publicKey);
          if (this.#psk) this.#symmetric.mixKey(publicKey);
        } else {
          this.#mixToken(token);
        }
      }
      parts.push(this.#symmetric.encryptAndHash(payload));
      this.#next++;
      return concat(...parts);
    } catch (error) {
      this.#fail();
      throw error;
    }
  }

  /** Reads the other side's next message; returns its payload (empty in Ternio). Fails the handshake on any bad byte. */
  readMessage(message: Uint8Array): Uint8Array {
    const tokens = this.#turn(false);
    try {
      if (!(message instanceof Uint8Array)) throw new TypeError('a handshake message is a Uint8Array');
      let at = 0;
      for (const token of tokens) {
        if (token === 'e') {
          if (message.length - at < DH_LEN) throw new HandshakeError('a handshake message is too short');
          const publicKey = message.slice(at, at + DH_LEN);
          at += DH_LEN;
          this.#remoteEphemeral = publicKey;
          this.#symmetric.mixHash(publicKey);
          if (this.#psk) this.#symmetric.mixKey(publicKey);
        } else {
          this.#mixToken(token);
        }
      }
      const rest = message.subarray(at);
      if (this.#symmetric.cipher.key && rest.length < TAG_LEN) throw new HandshakeError('a handshake message is too short');
      const payload = this.#symmetric.decryptAndHash(rest);
      this.#next++;
      return payload;
    } catch (error) {
      this.#fail();
      throw error;
    }
  }

  /**
   * Noise's Split(), once the handshake finished: the two transport keys
   * (new arrays, the caller's to erase). Erases the handshake's own secrets;
   * `handshakeHash` stays readable. Callable once.
   */
  split(): SplitKeys {
    if (!this.finished) throw new HandshakeError('the handshake has not finished');
    if (this.#split) throw new HandshakeError('split() was already called');
    const [initiatorToResponder, responderToInitiator] = this.#symmetric.split();
    this.#split = true;
    this.#erase();
    return { initiatorToResponder, responderToInitiator };
  }

  /** Erases every secret the handshake holds; the state can no longer be used. */
  destroy(): void {
    this.#failed = true;
    this.#erase();
  }

  #turn(writing: boolean): Token[] {
    if (this.#failed) throw new HandshakeError('the handshake failed or was given up');
    const tokens = this.#messages[this.#next];
    if (!tokens) throw new HandshakeError('the handshake has no more messages');
    if (this.writing !== writing) throw new HandshakeError(writing ? 'it is the other side\'s turn to write' : 'it is this side\'s turn to write');
    return tokens;
  }

  #mixToken(token: Exclude<Token, 'e'>): void {
    if (token === 'psk') {
      this.#symmetric.mixKeyAndHash(this.#psk!);
      return;
    }
    let secret: Uint8Array;
    if (token === 'ee') {
      secret = dh(this.#ephemeral!, this.#remoteEphemeral!);
    } else if (this.#initiator) {
      // es: the initiator's ephemeral with the responder's static.
      secret = dh(this.#ephemeral!, this.#remoteStatic!);
    } else {
      secret = dh(this.#staticPrivate!, this.#remoteEphemeral!);
    }
    this.#symmetric.mixKey(secret);
    wipe(secret);
  }

  #fail(): void {
    this.#failed = true;
    this.#erase();
  }

  #erase(): void {
    wipe(this.#ephemeral);
    wipe(this.#fixedEphemeral);
    wipe(this.#staticPrivate);
    wipe(this.#psk);
    this.#ephemeral = this.#fixedEphemeral = this.#staticPrivate = this.#psk = null;
    this.#symmetric.destroy();
  }
}
