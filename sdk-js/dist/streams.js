/**
 * Streams (docs/PROTOCOL.md section 4.5): the state of one open stream,
 * the async iterator of a download and the handle of an upload. The
 * client feeds them frames and gives them a {@link StreamLink} to send theirs.
 * @module
 */
import { HEADER_LEN, STREAM_INITIAL_CREDIT, SystemOpcode } from './constants.js';
import { u32 } from './codec.js';
import { TernioError } from './errors.js';
import { codeAndTextBody } from './frame.js';
import { hex } from './util.js';
/** One open stream, as the client tracks it. */
export class StreamState {
    /** Its request's name, for messages. */
    name;
    /** Its id: its request's. */
    id = 0;
    /** Item bodies received and not taken yet. */
    items = [];
    /** Items the server may still send (a download's credit granted). */
    granted = STREAM_INITIAL_CREDIT;
    /** Items the client may still send (an upload's credit received). */
    credit = STREAM_INITIAL_CREDIT;
    /** Items taken since the last STREAM_CREDIT. */
    taken = 0;
    /** Whether it ended (answered, failed, cancelled). */
    ended = false;
    /** The answer's frame, once answered. */
    answer = undefined;
    /** Why it failed, until the application is told. */
    error = null;
    /** Removes the 'abort' listener of its request's signal, if it has one: called once it ends, however it ends. */
    release = null;
    #waiters = [];
    constructor(name) {
        this.name = name;
    }
    /** Wakes whoever waits for an item, credit or the end. */
    wake() {
        const waiters = this.#waiters;
        this.#waiters = [];
        for (const waiter of waiters)
            waiter();
    }
    /** Resolves at the next {@link StreamState#wake}. */
    wait() {
        return new Promise((resolve) => { this.#waiters.push(resolve); });
    }
}
/** The items of a download, in order, taken with `for await`; `return()` (leaving the loop) cancels it. */
export function downloadIterator(stream, itemType, link) {
    return {
        [Symbol.asyncIterator]() { return this; },
        async next() {
            for (;;) {
                if (stream.items.length > 0) {
                    const body = stream.items.shift();
                    stream.taken++;
                    if (stream.taken >= STREAM_INITIAL_CREDIT / 2 && !stream.ended) {
                        const items = stream.taken;
                        stream.taken = 0;
                        stream.granted += items;
                        try {
                            link.send(SystemOpcode.STREAM_CREDIT, stream.id, u32.encode(items));
                        }
                        catch {
                            // the lost connection ends the stream
                        }
                    }
                    return { value: itemType.decode(body), done: false };
                }
                if (stream.ended) {
                    if (stream.error) {
                        const error = stream.error;
                        stream.error = null;
                        throw error;
                    }
                    return { value: undefined, done: true };
                }
                await stream.wait();
            }
        },
        async return() {
            link.cancel(stream);
            stream.items.length = 0;
            return { value: undefined, done: true };
        },
    };
}
/** The handle of an upload of `packetType` whose items are of `itemType`. */
export function uploadHandle(stream, packetType, itemType, link) {
    const answer = () => {
        if (stream.error)
            throw stream.error;
        const frame = stream.answer;
        const expected = packetType.response;
        if (expected && frame.opcode === expected.opcode)
            return expected.decode(frame.body);
        if (frame.opcode === packetType.opcode && frame.body.length === 0)
            return undefined;
        throw new TernioError('protocol', `${stream.name} answered with unexpected opcode ${hex(frame.opcode)}`);
    };
    const end = async (code, message) => {
        if (!stream.ended) {
            link.send(SystemOpcode.STREAM_END, stream.id, codeAndTextBody(code, message));
            while (!stream.ended)
                await stream.wait();
        }
        return answer();
    };
    return {
        async send(item) {
            const body = itemType.encode(item);
            // Credit first, then room in the replay buffer: an upload on a
            // resumable session waits for the server's ACKs instead of
            // overflowing it (which would end resumability).
            const frameBytes = HEADER_LEN + body.length;
            while (!stream.ended && (stream.credit === 0 || !link.room(stream, frameBytes)))
                await stream.wait();
            if (stream.ended) {
                throw stream.error ?? (stream.answer
                    ? new TernioError('closed', `the server answered ${stream.name} before the upload ended`, { answered: true })
                    : new TernioError('closed', `${stream.name} was cancelled`));
            }
            stream.credit--;
            link.send(SystemOpcode.STREAM_ITEM, stream.id, body);
        },
        finish: () => end(0, ''),
        fail: (code, message = '') => end(Math.max(1, code), message),
        cancel: () => link.cancel(stream),
    };
}
