/**
 * The numbers of the wire contract (docs/PROTOCOL.md): the subprotocol,
 * the frame header, flags, system opcodes, error codes and disconnect
 * reasons.
 * @module
 */

/** The WebSocket subprotocol a client offers. */
export const SUBPROTOCOL = 'ternio.v2';

/** Size of a frame header: opcode u16, flags u8, request id u32. */
export const HEADER_LEN = 7;

/** The largest frame (header and body) accepted unless configured otherwise: 1 MiB. */
export const DEFAULT_MAX_FRAME_SIZE = 1024 * 1024;

/** Frame flag bits (section 1); bits 3..7 are reserved and must be 0. */
export const Flags = Object.freeze({ RESPONSE: 0x01, ERROR: 0x02, ENCRYPTED: 0x04, COMPRESSED: 0x08 } as const);

/** The flag bits the contract defines; the others are reserved. */
export const KNOWN_FLAGS = 0x0f;

/** Opcodes of the system packets (section 4). */
export const SystemOpcode = Object.freeze({
  HANDSHAKE: 0xff01, PING: 0xff02, PONG: 0xff03, DISCONNECT: 0xff04, REKEY: 0xff05,
  CANCEL: 0xff06, DEADLINE: 0xff07, RESUME_TICKET: 0xff08, ACK: 0xff09, RESUME: 0xff0a,
  STREAM_ITEM: 0xff0d, STREAM_CREDIT: 0xff0e, STREAM_END: 0xff0f, STREAM_ITEMS: 0xff10,
} as const);

/** Items a stream's sender may send before any STREAM_CREDIT (docs/PROTOCOL.md section 4.5). */
export const STREAM_INITIAL_CREDIT = 32;

/** Error codes of `RESPONSE | ERROR` frames (section 2); 100 and up belong to the application. */
export const ErrorCode = Object.freeze({
  UNKNOWN_OPCODE: 1, MALFORMED: 2, UNAUTHORIZED: 3, RATE_LIMITED: 4, TIMEOUT: 5,
  ENCRYPTION_REQUIRED: 6, INTERNAL: 7, OVERLOADED: 8, HANDSHAKE_FAILED: 9, DECRYPT_FAILED: 10,
} as const);

/** Reasons carried by `DISCONNECT` (section 4). */
export const DisconnectReason = Object.freeze({
  NORMAL: 1, SHUTDOWN: 2, MALFORMED: 3, FRAME_TOO_LARGE: 4, IDLE_TIMEOUT: 5,
  HANDSHAKE_TIMEOUT: 6, DECRYPT_FAILED: 7, TOO_MANY_CONNECTIONS: 8, SLOW_CONSUMER: 9, KICKED: 10,
} as const);
