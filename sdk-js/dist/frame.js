/**
 * Frames (section 1 of the contract): a 7-byte little-endian header
 * (opcode u16, flags u8, request id u32) and a body, one frame per binary
 * WebSocket message; and the bodies of error frames and `DISCONNECT`.
 * @module
 */
import { ErrorCode, HEADER_LEN, KNOWN_FLAGS } from './constants.js';
import { checkOpcode, toBytes, utf8Encoder } from './codec.js';
import { codecError, TernioError } from './errors.js';
import { maybeCompress } from './lz4.js';
import { count, nameIn, show } from './util.js';
/**
 * Encodes a frame as one WebSocket message: the 7-byte header, then the
 * body (no length prefix; a TCP frame would be preceded by a u32 length).
 */
export function encodeFrame({ opcode, flags = 0, requestId = 0, body = new Uint8Array(0) }) {
    checkOpcode(opcode, 'an opcode', 0xffff);
    if (!Number.isInteger(flags) || flags < 0 || flags > KNOWN_FLAGS)
        throw new TypeError(`invalid flags ${show(flags)}`);
    if (!Number.isInteger(requestId) || requestId < 0 || requestId > 0xffffffff) {
        throw new TypeError(`invalid request id ${show(requestId)}`);
    }
    const data = toBytes(body);
    const out = new Uint8Array(HEADER_LEN + data.length);
    const view = new DataView(out.buffer);
    view.setUint16(0, opcode, true);
    view.setUint8(2, flags);
    view.setUint32(3, requestId, true);
    out.set(data, HEADER_LEN);
    return out;
}
/**
 * Decodes one WebSocket message as a frame. A message shorter than the
 * header, or with a reserved flag bit set, is a `'codec'` {@link TernioError}.
 * The body is a view into `message`, not a copy.
 */
export function decodeFrame(message) {
    const data = toBytes(message);
    if (data.length < HEADER_LEN)
        throw codecError(`frame of ${count(data.length, 'byte')} is shorter than its 7-byte header`);
    const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
    const flags = view.getUint8(2);
    if (flags & ~KNOWN_FLAGS)
        throw codecError(`frame has reserved flag bits set (flags 0x${flags.toString(16)})`);
    return { opcode: view.getUint16(0, true), flags, requestId: view.getUint32(3, true), body: data.subarray(HEADER_LEN) };
}
/**
 * A frame encoded for the wire (`data`: compressed when `threshold` says)
 * and uncompressed (`plain`: what the replay buffer keeps).
 */
export function encodeBoth(frame, threshold) {
    const plain = encodeFrame(frame);
    const packed = maybeCompress(frame, threshold);
    return { data: packed === frame ? plain : encodeFrame(packed), plain };
}
/** The opcode of an encoded frame. */
export const opcodeOf = (data) => data[0] | (data[1] << 8);
const lossyUtf8 = new TextDecoder('utf-8', { ignoreBOM: true });
/** The body of an ERROR frame or a DISCONNECT: a u16, then lossy UTF-8 text to the end. */
export function codeAndText(body) {
    if (body.length < 2)
        return null;
    return { code: body[0] | (body[1] << 8), text: lossyUtf8.decode(body.subarray(2)) };
}
/** Encodes the body of an ERROR frame, a DISCONNECT or a STREAM_END. */
export function codeAndTextBody(code, text) {
    const encoded = utf8Encoder.encode(text);
    const out = new Uint8Array(2 + encoded.length);
    out[0] = code & 0xff;
    out[1] = code >> 8;
    out.set(encoded, 2);
    return out;
}
/** The error an ERROR frame's body stands for (`'remote'`, or `'protocol'` when it has no code). */
export function remoteError(body) {
    const parsed = codeAndText(body);
    if (!parsed)
        return new TernioError('protocol', `error frame body of ${count(body.length, 'byte')} has no code`);
    const { code, text } = parsed;
    const label = nameIn(ErrorCode, code) ?? (code >= 100 ? 'application error' : 'error');
    return new TernioError('remote', `${label} ${code}: ${text}`, { code, remoteMessage: text });
}
