/** Bytes of a ChaCha20-Poly1305 key, an X25519 key and a BLAKE2s-256 hash. */
export declare const KEY_LEN = 32;
/** Bytes of a ChaCha20-Poly1305 tag. */
export declare const TAG_LEN = 16;
/** The largest u64, 2^64 - 1: the nonce REKEY uses, which no frame may use. */
export declare const MAX_NONCE: bigint;
/** The label the session secret hashes in front of Split()'s two keys. */
export declare const SECRET_LABEL: Uint8Array;
/** The label the resumption pre-shared key hashes in front of the session secret. */
export declare const PSK_LABEL: Uint8Array;
/** The ASCII (or Latin-1) bytes of `text`. */
export declare function ascii(text: string): Uint8Array;
/** `parts` one after the other, in a new array. */
export declare function concat(...parts: Uint8Array[]): Uint8Array;
/** Overwrites `bytes` with zeros (what JavaScript allows of erasing a key). */
export declare function wipe(bytes: Uint8Array | null | undefined): void;
/** Checks that `bytes` is a Uint8Array of exactly `length` bytes. */
export declare function expectBytes(bytes: unknown, length: number, what: string): asserts bytes is Uint8Array;
/** Noise's ChaChaPoly nonce for `counter`: 4 zero bytes, then the counter as u64 little-endian. */
export declare function chachaNonce(counter: bigint): Uint8Array;
/** ChaCha20-Poly1305 encryption of `plain` under `key`, nonce `counter`, associated data `ad`: ciphertext then 16-byte tag. */
export declare function encrypt(key: Uint8Array, counter: bigint, ad: Uint8Array, plain: Uint8Array): Uint8Array;
/**
 * ChaCha20-Poly1305 decryption of `sealed` (ciphertext then tag) under
 * `key`, nonce `counter`, associated data `ad`. Returns the plain bytes, or
 * `null` when the tag does not verify (or `sealed` is shorter than a tag).
 */
export declare function decrypt(key: Uint8Array, counter: bigint, ad: Uint8Array, sealed: Uint8Array): Uint8Array | null;
/**
 * Noise's `REKEY(k)` (docs/PROTOCOL.md section 5.2): the first 32 bytes of
 * the encryption under `key`, with the nonce of counter 2^64 - 1 and empty
 * associated data, of 32 zero bytes. Returns a new array; `key` is untouched.
 */
export declare function rekey(key: Uint8Array): Uint8Array;
/** BLAKE2s-256 of `parts`, one after the other. */
export declare function blake2s256(...parts: Uint8Array[]): Uint8Array;
/**
 * The session secret of a handshake (docs/PROTOCOL.md section 4.2):
 * `BLAKE2s-256("ternio/2 secret" || k1 || k2)` of the two keys Split()
 * gave, `k1` the client-to-server one, before any REKEY.
 */
export declare function sessionSecret(clientToServer: Uint8Array, serverToClient: Uint8Array): Uint8Array;
/**
 * The pre-shared key of a resumption (docs/PROTOCOL.md section 4.2):
 * `BLAKE2s-256("ternio/2 resume" || secret)`, where `secret` is the session
 * secret of the session's latest handshake.
 */
export declare function resumePsk(secret: Uint8Array): Uint8Array;
