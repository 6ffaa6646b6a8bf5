/** Bytes of a frame header: opcode u16, flags u8, request id u32. */
export declare const HEADER_LEN = 7;
/** Bytes of a sealed body's counter (u64 little-endian). */
export declare const COUNTER_LEN = 8;
/** The smallest sealed body: a counter and a tag (an empty plain body). */
export declare const SEAL_OVERHEAD: number;
/** The header flag of a sealed frame. */
export declare const ENCRYPTED = 4;
/** The opcode of `REKEY` (section 5.2). */
export declare const REKEY_OPCODE = 65285;
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
export declare const DEFAULT_REKEY_POLICY: RekeyPolicy;
/** Never rekey on one's own (a peer's REKEY is still followed). */
export declare const NEVER_REKEY: RekeyPolicy;
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
export declare class SealError extends Error {
    /** Why. */
    readonly kind: SealErrorKind;
    /** Makes the error of `kind`. */
    constructor(kind: SealErrorKind, message: string);
}
/** Why a sealed frame was refused. Each is answered with a plain `DISCONNECT DECRYPT_FAILED` and a close. */
export type OpenErrorKind = 
/** The body is shorter than 24 bytes (counter and tag). */
'too-short'
/** The counter is not the expected one (a replay, reordering or deletion), or is 2^64 - 1. */
 | 'out-of-order'
/** The tag does not verify: the key, header, counter or body differ from what was sealed. */
 | 'bad-tag'
/** The header lacks ENCRYPTED: not a sealed frame. */
 | 'not-sealed'
/** The cipher was destroyed. */
 | 'destroyed';
/** A sealed frame that was refused; nothing changed in the {@link ReceivingCipher}. */
export declare class OpenError extends Error {
    /** Why. */
    readonly kind: OpenErrorKind;
    /** The frame's counter, when it had one. */
    readonly counter: bigint | undefined;
    /** The counter expected. */
    readonly expected: bigint;
    /** Makes the error of `kind`. */
    constructor(kind: OpenErrorKind, expected: bigint, counter?: bigint);
}
/**
 * Seals what one side sends (section 5.1): counter u64 LE, then the
 * ChaCha20-Poly1305 ciphertext of the plain body and its tag, under this
 * direction's key, with the nonce of the counter and the 7 header bytes as
 * the associated data. Counters start at 0 and go up by one per frame,
 * across REKEYs; 2^64 - 1 is refused.
 */
export declare class SendingCipher {
    #private;
    /** A sending cipher with `key` (copied; the caller may erase its own). */
    constructor(key: Uint8Array, options?: SendingOptions);
    /** The counter the next sealed frame will carry. */
    get nextCounter(): bigint;
    /** Frames sealed under the current key. */
    get framesUnderKey(): number;
    /** Whether the rekey policy asks for a REKEY before the next frame (reads the clock). */
    rekeyDue(): boolean;
    /**
     * Seals `plain` for `header`, the 7 header bytes exactly as they will be
     * sent (ENCRYPTED must be set in them: they are the associated data).
     * Returns the sealed body: counter, ciphertext, tag. Throws a
     * {@link SealError} `counter-exhausted` rather than use counter 2^64 - 1:
     * the connection must then close. Does not rekey by itself: see
     * {@link sealFrames}.
     */
    seal(header: Uint8Array, plain: Uint8Array): Uint8Array;
    /**
     * One whole sealed frame (a WebSocket message; TCP adds its length
     * prefix): `header` with ENCRYPTED set (a copy; `header` is untouched),
     * then the sealed body of `plain`.
     */
    sealFrame(header: Uint8Array, plain: Uint8Array): Uint8Array;
    /**
     * The sealed REKEY frame (opcode 0xFF05, ENCRYPTED, id 0, empty body)
     * under the current key, after which the key is replaced by REKEY(key)
     * (the old one erased): every later frame is sealed with the new key.
     * Send it before anything sealed after this call.
     */
    rekeyFrame(): Uint8Array;
    /**
     * What to send for one frame under the rekey policy: a REKEY frame first
     * when one is due (checked now, as section 5.2 says: an idle connection
     * does not rekey, its next frame does), then the frame itself, as
     * {@link sealFrame} makes it. Send the frames in order.
     */
    sealFrames(header: Uint8Array, plain: Uint8Array): Uint8Array[];
    /** Erases the key; the cipher seals nothing more. */
    destroy(): void;
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
export declare class ReceivingCipher {
    #private;
    /** A receiving cipher with `key` (copied), expecting counter 0 first. */
    constructor(key: Uint8Array, options?: ReceivingOptions);
    /** The counter the next sealed frame must carry. */
    get nextCounter(): bigint;
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
    open(header: Uint8Array, body: Uint8Array): Uint8Array;
    /**
     * Opens one whole sealed frame (a WebSocket message: header then sealed
     * body), as {@link open} does. Returns the header as received and the
     * plain body.
     */
    openFrame(frame: Uint8Array): {
        header: Uint8Array;
        plain: Uint8Array;
    };
    /** Erases the key; the cipher opens nothing more. */
    destroy(): void;
}
