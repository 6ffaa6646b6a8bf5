/**
 * The numbers of the wire contract (docs/PROTOCOL.md): the subprotocol,
 * the frame header, flags, system opcodes, error codes and disconnect
 * reasons.
 * @module
 */
/** The WebSocket subprotocol a client offers. */
export declare const SUBPROTOCOL = "ternio.v2";
/** Size of a frame header: opcode u16, flags u8, request id u32. */
export declare const HEADER_LEN = 7;
/** The largest frame (header and body) accepted unless configured otherwise: 1 MiB. */
export declare const DEFAULT_MAX_FRAME_SIZE: number;
/** Frame flag bits (section 1); bits 3..7 are reserved and must be 0. */
export declare const Flags: Readonly<{
    readonly RESPONSE: 1;
    readonly ERROR: 2;
    readonly ENCRYPTED: 4;
    readonly COMPRESSED: 8;
}>;
/** The flag bits the contract defines; the others are reserved. */
export declare const KNOWN_FLAGS = 15;
/** Opcodes of the system packets (section 4). */
export declare const SystemOpcode: Readonly<{
    readonly HANDSHAKE: 65281;
    readonly PING: 65282;
    readonly PONG: 65283;
    readonly DISCONNECT: 65284;
    readonly REKEY: 65285;
    readonly CANCEL: 65286;
    readonly DEADLINE: 65287;
    readonly RESUME_TICKET: 65288;
    readonly ACK: 65289;
    readonly RESUME: 65290;
    readonly STREAM_ITEM: 65293;
    readonly STREAM_CREDIT: 65294;
    readonly STREAM_END: 65295;
    readonly STREAM_ITEMS: 65296;
}>;
/** Items a stream's sender may send before any STREAM_CREDIT (docs/PROTOCOL.md section 4.5). */
export declare const STREAM_INITIAL_CREDIT = 32;
/** Error codes of `RESPONSE | ERROR` frames (section 2); 100 and up belong to the application. */
export declare const ErrorCode: Readonly<{
    readonly UNKNOWN_OPCODE: 1;
    readonly MALFORMED: 2;
    readonly UNAUTHORIZED: 3;
    readonly RATE_LIMITED: 4;
    readonly TIMEOUT: 5;
    readonly ENCRYPTION_REQUIRED: 6;
    readonly INTERNAL: 7;
    readonly OVERLOADED: 8;
    readonly HANDSHAKE_FAILED: 9;
    readonly DECRYPT_FAILED: 10;
}>;
/** Reasons carried by `DISCONNECT` (section 4). */
export declare const DisconnectReason: Readonly<{
    readonly NORMAL: 1;
    readonly SHUTDOWN: 2;
    readonly MALFORMED: 3;
    readonly FRAME_TOO_LARGE: 4;
    readonly IDLE_TIMEOUT: 5;
    readonly HANDSHAKE_TIMEOUT: 6;
    readonly DECRYPT_FAILED: 7;
    readonly TOO_MANY_CONNECTIONS: 8;
    readonly SLOW_CONSUMER: 9;
    readonly KICKED: 10;
}>;
