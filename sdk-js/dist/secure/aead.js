// The primitives Ternio's secure sessions are made of (docs/PROTOCOL.md
// sections 5 to 5.2): ChaCha20-Poly1305 with Noise's nonce, REKEY, BLAKE2s,
// and the session secret and resumption key derived from Split()'s keys.
// All built on @noble/ciphers and @noble/hashes.
import { chacha20poly1305 } from '@noble/ciphers/chacha.js';
import { blake2s } from '@noble/hashes/blake2.js';
/** Bytes of a ChaCha20-Poly1305 key, an X25519 key and a BLAKE2s-256 hash. */
export const KEY_LEN = 32;
/** Bytes of a ChaCha20-Poly1305 tag. */
export const TAG_LEN = 16;
/** The largest u64, 2^64 - 1: the nonce REKEY uses, which no frame may use. */
export const MAX_NONCE = (1n << 64n) - 1n;
/** The label the session secret hashes in front of Split()'s two keys. */
export const SECRET_LABEL = ascii('ternio/2 secret');
/** The label the resumption pre-shared key hashes in front of the session secret. */
export const PSK_LABEL = ascii('ternio/2 resume');
/** The ASCII (or Latin-1) bytes of `text`. */
export function ascii(text) {
    const out = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++)
        out[i] = text.charCodeAt(i) & 0xff;
    return out;
}
/** `parts` one after the other, in a new array. */
export function concat(...parts) {
    let length = 0;
    for (const part of parts)
        length += part.length;
    const out = new Uint8Array(length);
    let at = 0;
    for (const part of parts) {
        out.set(part, at);
        at += part.length;
    }
    return out;
}
/** Overwrites `bytes` with zeros (what JavaScript allows of erasing a key). */
export function wipe(bytes) {
    if (bytes)
        bytes.fill(0);
}
/** Checks that `bytes` is a Uint8Array of exactly `length` bytes. */
export function expectBytes(bytes, length, what) {
    if (!(bytes instanceof Uint8Array) || bytes.length !== length) {
        throw new TypeError(`${what} must be a Uint8Array of ${length} bytes`);
    }
}
/** Noise's ChaChaPoly nonce for `counter`: 4 zero bytes, then the counter as u64 little-endian. */
export function chachaNonce(counter) {
    if (counter < 0n || counter > MAX_NONCE)
        throw new RangeError('a nonce counter is a u64');
    const nonce = new Uint8Array(12);
    new DataView(nonce.buffer).setBigUint64(4, counter, true);
    return nonce;
}
/** ChaCha20-Poly1305 encryption of `plain` under `key`, nonce `counter`, associated data `ad`: ciphertext then 16-byte tag. */
export function encrypt(key, counter, ad, plain) {
    return chacha20poly1305(key, chachaNonce(counter), ad).encrypt(plain);
}
/**
 * ChaCha20-Poly1305 decryption of `sealed` (ciphertext then tag) under
 * `key`, nonce `counter`, associated data `ad`. Returns the plain bytes, or
 * `null` when the tag does not verify (or `sealed` is shorter than a tag).
 */
export function decrypt(key, counter, ad, sealed) {
    if (sealed.length < TAG_LEN)
        return null;
    try {
        return chacha20poly1305(key, chachaNonce(counter), ad).decrypt(sealed);
    }
    catch {
        return null;
    }
}
/**
 * Noise's `REKEY(k)` (docs/PROTOCOL.md section 5.2): the first 32 bytes of
 * the encryption under `key`, with the nonce of counter 2^64 - 1 and empty
 * associated data, of 32 zero bytes. Returns a new array; `key` is untouched.
 */
export function rekey(key) {
    expectBytes(key, KEY_LEN, 'a key');
    const out = encrypt(key, MAX_NONCE, new Uint8Array(0), new Uint8Array(KEY_LEN));
    const next = out.slice(0, KEY_LEN);
    wipe(out);
    return next;
}
/** BLAKE2s-256 of `parts`, one after the other. */
export function blake2s256(...parts) {
    const hash = blake2s.create();
    for (const part of parts)
        hash.update(part);
    return hash.digest();
}
/**
 * The session secret of a handshake (docs/PROTOCOL.md section 4.2):
 * `BLAKE2s-256("ternio/2 secret" || k1 || k2)` of the two keys Split()
 * gave, `k1` the client-to-server one, before any REKEY.
 */
export function sessionSecret(clientToServer, serverToClient) {
    expectBytes(clientToServer, KEY_LEN, 'the client-to-server key');
    expectBytes(serverToClient, KEY_LEN, 'the server-to-client key');
    return blake2s256(SECRET_LABEL, clientToServer, serverToClient);
}
/**
 * The pre-shared key of a resumption (docs/PROTOCOL.md section 4.2):
 * `BLAKE2s-256("ternio/2 resume" || secret)`, where `secret` is the session
 * secret of the session's latest handshake.
 */
export function resumePsk(secret) {
    expectBytes(secret, KEY_LEN, 'a session secret');
    return blake2s256(PSK_LABEL, secret);
}
