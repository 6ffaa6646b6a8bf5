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
/**
 * Compresses `input` as one LZ4 block (no frame header, no length): a greedy
 * encoder with a 4,096-entry hash table of 4-byte sequences. Deterministic:
 * the same input gives the same block (another encoder may give another
 * valid block).
 */
export declare function lz4CompressBlock(input: Uint8Array | ArrayBuffer): Uint8Array;
/**
 * Decodes one LZ4 block into exactly `length` bytes. A block that does not
 * decode (cut short, an offset of 0 or before the start of the output) or
 * that decodes to fewer or more bytes is a `'codec'` {@link TernioError}.
 * @param block The block.
 * @param length The size the block must decode to.
 */
export declare function lz4DecompressBlock(block: Uint8Array | ArrayBuffer, length: number): Uint8Array;
/** A body compressed as section 6 says: `uncompressed_len` (u32 LE), then the LZ4 block. */
export declare function compressBody(body: Uint8Array | ArrayBuffer): Uint8Array;
/**
 * Decompresses a COMPRESSED body. Its `uncompressed_len` is checked against
 * `maxLength` before anything is allocated: above it, a `'codec'`
 * {@link TernioError} with `tooLarge: true` (the contract's
 * `FRAME_TOO_LARGE`); a body that does not decode to exactly that length, a
 * `'codec'` one without it (`MALFORMED`).
 * @param body The compressed body.
 * @param maxLength The largest body accepted (default: that of a 1 MiB frame, 1048569).
 */
export declare function decompressBody(body: Uint8Array | ArrayBuffer, maxLength?: number): Uint8Array;
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
export declare function maybeCompress<F extends FrameFields>(frame: F, threshold: number | null | undefined): F;
