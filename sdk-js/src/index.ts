/**
 * Ternio for the browser and Node: the Ternio wire contract, version 2,
 * over WebSocket, plain or in secure sessions. It runs in current browsers
 * and in Node ≥ 20.19 (whose `WebSocket` needs `--experimental-websocket`
 * before Node 22); its one dependency is the audited @noble cryptography
 * (X25519, ChaCha20-Poly1305, BLAKE2s), bundled into the browser build.
 *
 * - Frames ({@link encodeFrame}, {@link decodeFrame}): a 7-byte
 *   little-endian header (opcode u16, flags u8, request id u32) and a body;
 *   one frame per binary WebSocket message.
 * - The section-3 field codec: integers, floats, bool, strings, bytes,
 *   vectors, options, arrays, structs and enums, declared with
 *   {@link packet}, {@link struct} and friends, or generated from a
 *   server's schema by `ternio-codegen`.
 * - {@link Client}: requests matched by id with promises, timeouts and
 *   `AbortSignal`s, fire-and-forget sends, pushes by opcode, PING/PONG,
 *   DISCONNECT, a keepalive, reconnection with backoff and state events,
 *   session resumption (section 4.2), compression (section 6), streams
 *   (section 4.5), and secure sessions (option `secure`, section 5: a
 *   Noise NN or NK handshake on every connection, every frame sealed,
 *   REKEY both ways, resumption with NNpsk0/NKpsk0).
 *
 * @example
 * import { Client, packet, bytes } from 'ternio';
 * const Echo = packet(0x0001, { payload: bytes }, { name: 'Echo' });
 * const client = await Client.connect('ws://127.0.0.1:7002/ws', { reconnect: true });
 * const reply = await client.request(Echo, { payload: new TextEncoder().encode('hi') });
 *
 * @module ternio
 */

export {
  SUBPROTOCOL, HEADER_LEN, DEFAULT_MAX_FRAME_SIZE, Flags, SystemOpcode, STREAM_INITIAL_CREDIT, ErrorCode, DisconnectReason,
} from './constants.js';
export { TernioError, type Disconnect, type ErrorKind, type ErrorDetails } from './errors.js';
export {
  Writer, Reader, u8, i8, u16, i16, u32, i32, u64, i64, f32, f64, bool, unit, varint, string, bytes,
  vec, option, array, struct, enumType, packet, lazy, opaque,
  type Type, type ValueOf, type Fields, type StructValue, type PacketType, type PacketOptions, type SelfResponse,
} from './codec.js';
export {
  lz4CompressBlock, lz4DecompressBlock, compressBody, decompressBody, maybeCompress, type FrameFields,
} from './lz4.js';
export { encodeFrame, decodeFrame, type Frame, type FrameInit } from './frame.js';
export {
  DEFAULT_REPLAY_BYTES, ACK_EVERY_FRAMES, ACK_EVERY_BYTES, ACK_DELAY, ACK_IDLE_BYTES, ReplayBuffer, AckSchedule, resumeBody,
  type ResumeOptions,
} from './resume.js';
export type { ReconnectOptions } from './reconnect.js';
export type { CloseInfo, StateEvent, SessionEvent } from './events.js';
export type { Upload } from './streams.js';
export {
  Client, type ClientOptions, type RequestOptions, type StreamOptions, type ClientState, type WebSocketLike,
  type WebSocketConstructor, type SecureOptions, type RekeyOptions, type SecureSessionInfo,
} from './client.js';
