/**
 * Compression (section 6 of the contract): a COMPRESSED body is
 * `uncompressed_len: u32` LE followed by an LZ4 block. The codec is written
 * from the LZ4 block format: a block is a series of sequences, each a token
 * byte (high nibble: literal count, low nibble: match length - 4, a nibble
 * of 15 continued by bytes that add up, 255 meaning another follows), the
 * literals, a 2-byte LE offset back into the output and the match; the last
 * sequence has literals only. Encoders leave the last 5 bytes as literals
 * and start no match within the last 12 bytes.
 * @module
 */

import { DEFAULT_MAX_FRAME_SIZE, Flags, HEADER_LEN } from './constants.js';
import { toBytes } from './codec.js';
import { codecError } from './errors.js';
import { count } from './util.js';

const MIN_MATCH = 4;
const LAST_LITERALS = 5;
const MATCH_FIND_LIMIT = 12;
const MAX_OFFSET = 0xffff;
const HASH_BITS = 12;

/** Appends a length continued past a nibble of 15: bytes of 255, then the rest. */
function pushLength(out: number[], rest: number): void {
  while (rest >= 255) {
    out.push(255);
    rest -= 255;
  }
  out.push(rest);
}

/**
 * Compresses `input` as one LZ4 block (no frame header, no length): a greedy
 * encoder with a 4,096-entry hash table of 4-byte sequences. Deterministic:
 * the same input gives the same block (another encoder may give another
 * valid block).
 */
export function lz4CompressBlock(input: Uint8Array | ArrayBuffer): Uint8Array {
  const src = toBytes(input);
  const n = src.length;
  const out: number[] = [];
  const table = new Int32Array(1 << HASH_BITS).fill(-1);
  const read32 = (at: number): number =>
    (src[at]! | (src[at + 1]! << 8) | (src[at + 2]! << 16) | (src[at + 3]! << 24)) >>> 0;
  const hash = (word: number): number => Math.imul(word, 2654435761) >>> (32 - HASH_BITS);
  let anchor = 0;
  const emit = (literalEnd: number, offset: number, matchLength: number): void => {
    const literals = literalEnd - anchor;
    const matchCode = matchLength - MIN_MATCH;
    out.push((Math.min(literals, 15) << 4) | (offset ? Math.min(matchCode, 15) : 0));
    if (literals >= 15) pushLength(out, literals - 15);
    for (let k = anchor; k < literalEnd; k++) out.push(src[k]!);
    if (!offset) return;
    out.push(offset & 0xff, offset >> 8);
    if (matchCode >= 15) pushLength(out, matchCode - 15);
  };
  let i = 0;
  // A match starts at least 12 bytes before the end and ends at least 5 before it.
  while (i + MATCH_FIND_LIMIT <= n) {
    const word = read32(i);
    const h = hash(word);
    const candidate = table[h]!;
    table[h] = i;
    if (candidate >= 0 && i - candidate <= MAX_OFFSET && read32(candidate) === word) {
      let length = MIN_MATCH;
      const end = n - LAST_LITERALS;
      while (i + length < end && src[candidate + length] === src[i + length]) length++;
      emit(i, i - candidate, length);
      i += length;
      anchor = i;
    } else {
      i++;
    }
  }
  emit(n, 0, 0);
  return Uint8Array.from(out);
}

/**
 * Decodes one LZ4 block into exactly `length` bytes. A block that does not
 * decode (cut short, an offset of 0 or before the start of the output) or
 * that decodes to fewer or more bytes is a `'codec'` {@link TernioError}.
 * @param block The block.
 * @param length The size the block must decode to.
 */
export function lz4DecompressBlock(block: Uint8Array | ArrayBuffer, length: number): Uint8Array {
  const src = toBytes(block);
  const out = new Uint8Array(length);
  let ip = 0;
  let op = 0;
  const more = (what: string): number => {
    if (ip >= src.length) throw codecError(`LZ4 block ends inside ${what}`);
    return src[ip++]!;
  };
  const extend = (value: number, what: string): number => {
    let byte;
    do {
      byte = more(what);
      value += byte;
    } while (byte === 255);
    return value;
  };
  for (;;) {
    const token = more('a token');
    let literals = token >> 4;
    if (literals === 15) literals = extend(literals, 'a literal length');
    if (ip + literals > src.length) throw codecError('LZ4 block ends inside its literals');
    if (op + literals > length) throw codecError(`LZ4 block decodes to more than the announced ${length} bytes`);
    out.set(src.subarray(ip, ip + literals), op);
    ip += literals;
    op += literals;
    if (ip === src.length) break; // the last sequence: literals only
    const offset = more('an offset') | (more('an offset') << 8);
    if (offset === 0 || offset > op) throw codecError(`LZ4 match offset ${offset} outside the ${op} bytes decoded`);
    let matchLength = token & 15;
    if (matchLength === 15) matchLength = extend(matchLength, 'a match length');
    matchLength += MIN_MATCH;
    if (op + matchLength > length) throw codecError(`LZ4 block decodes to more than the announced ${length} bytes`);
    // Byte by byte: a match may overlap what it writes (a run).
    for (let k = 0; k < matchLength; k++, op++) out[op] = out[op - offset]!;
  }
  if (op !== length) throw codecError(`LZ4 block decodes to ${op} bytes, not the announced ${length}`);
  return out;
}

/** A body compressed as section 6 says: `uncompressed_len` (u32 LE), then the LZ4 block. */
export function compressBody(body: Uint8Array | ArrayBuffer): Uint8Array {
  const data = toBytes(body);
  const block = lz4CompressBlock(data);
  const out = new Uint8Array(4 + block.length);
  new DataView(out.buffer).setUint32(0, data.length, true);
  out.set(block, 4);
  return out;
}

/**
 * Decompresses a COMPRESSED body. Its `uncompressed_len` is checked against
 * `maxLength` before anything is allocated: above it, a `'codec'`
 * {@link TernioError} with `tooLarge: true` (the contract's
 * `FRAME_TOO_LARGE`); a body that does not decode to exactly that length, a
 * `'codec'` one without it (`MALFORMED`).
 * @param body The compressed body.
 * @param maxLength The largest body accepted (default: that of a 1 MiB frame, 1048569).
 */
export function decompressBody(body: Uint8Array | ArrayBuffer, maxLength = DEFAULT_MAX_FRAME_SIZE - HEADER_LEN): Uint8Array {
  const data = toBytes(body);
  if (data.length < 4) throw codecError(`compressed body of ${count(data.length, 'byte')} has no room for its length`);
  const length = new DataView(data.buffer, data.byteOffset, data.byteLength).getUint32(0, true);
  if (length > maxLength) {
    throw Object.assign(codecError(`compressed body announces ${length} bytes, above the maximum of ${maxLength}`), { tooLarge: true });
  }
  return lz4DecompressBlock(data.subarray(4), length);
}

/** A frame as {@link maybeCompress} takes it. */
export interface FrameFields {
  /** u16. */
  opcode: number;
  /** Bits of {@link Flags}. */
  flags?: number;
  /** u32. */
  requestId?: number;
  /** The body, to compress or not. */
  body: Uint8Array;
}

/**
 * The frame's body compressed (and COMPRESSED set) when `threshold` is a
 * number, the body is at least that long and compressing makes it smaller;
 * the frame as it is otherwise.
 */
export function maybeCompress<F extends FrameFields>(frame: F, threshold: number | null | undefined): F {
  if (typeof threshold !== 'number' || frame.body.length < threshold) return frame;
  const compressed = compressBody(frame.body);
  if (compressed.length >= frame.body.length) return frame;
  return { ...frame, flags: (frame.flags ?? 0) | Flags.COMPRESSED, body: compressed };
}
