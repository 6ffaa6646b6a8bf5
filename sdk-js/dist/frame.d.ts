/**
 * Frames (section 1 of the contract): a 7-byte little-endian header
 * (opcode u16, flags u8, request id u32) and a body, one frame per binary
 * WebSocket message; and the bodies of error frames and `DISCONNECT`.
 * @module
 */
import { TernioError } from './errors.js';
/** One frame: the header's fields and the body. */
export interface Frame {
    /** u16. */
    opcode: number;
    /** Bits of {@link Flags}. */
    flags: number;
    /** u32; 0 for pushes and fire-and-forget sends. */
    requestId: number;
    /** The encoded packet (section 3). */
    body: Uint8Array;
}
/** A frame to encode: the flags, request id and body may be left out (0, 0, empty). */
export interface FrameInit {
    /** u16. */
    opcode: number;
    /** Bits of {@link Flags} (default 0). */
    flags?: number;
    /** u32 (default 0). */
    requestId?: number;
    /** The encoded packet (default empty). */
    body?: Uint8Array | ArrayBuffer;
}
/**
 * Encodes a frame as one WebSocket message: the 7-byte header, then the
 * body (no length prefix; a TCP frame would be preceded by a u32 length).
 */
export declare function encodeFrame({ opcode, flags, requestId, body }: FrameInit): Uint8Array;
/**
 * Decodes one WebSocket message as a frame. A message shorter than the
 * header, or with a reserved flag bit set, is a `'codec'` {@link TernioError}.
 * The body is a view into `message`, not a copy.
 */
export declare function decodeFrame(message: Uint8Array | ArrayBuffer): Frame;
/**
 * A frame encoded for the wire (`data`: compressed when `threshold` says)
 * and uncompressed (`plain`: what the replay buffer keeps).
 */
export declare function encodeBoth(frame: FrameInit & {
    body: Uint8Array;
}, threshold: number | null | undefined): {
    data: Uint8Array;
    plain: Uint8Array;
};
/** The opcode of an encoded frame. */
export declare const opcodeOf: (data: Uint8Array) => number;
/** The body of an ERROR frame or a DISCONNECT: a u16, then lossy UTF-8 text to the end. */
export declare function codeAndText(body: Uint8Array): {
    code: number;
    text: string;
} | null;
/** Encodes the body of an ERROR frame, a DISCONNECT or a STREAM_END. */
export declare function codeAndTextBody(code: number, text: string): Uint8Array;
/** The error an ERROR frame's body stands for (`'remote'`, or `'protocol'` when it has no code). */
export declare function remoteError(body: Uint8Array): TernioError;
