/**
 * Streams (docs/PROTOCOL.md section 4.5): the state of one open stream,
 * the async iterator of a download and the handle of an upload. The
 * client feeds them frames and gives them a {@link StreamLink} to send theirs.
 * @module
 */
import { type PacketType, type Type } from './codec.js';
import { type Frame } from './frame.js';
/** One open stream, as the client tracks it. */
export declare class StreamState {
    #private;
    /** Its request's name, for messages. */
    readonly name: string;
    /** Its id: its request's. */
    id: number;
    /** Item bodies received and not taken yet. */
    items: Uint8Array[];
    /** Items the server may still send (a download's credit granted). */
    granted: number;
    /** Items the client may still send (an upload's credit received). */
    credit: number;
    /** Items taken since the last STREAM_CREDIT. */
    taken: number;
    /** Whether it ended (answered, failed, cancelled). */
    ended: boolean;
    /** The answer's frame, once answered. */
    answer: Frame | undefined;
    /** Why it failed, until the application is told. */
    error: unknown;
    /** Removes the 'abort' listener of its request's signal, if it has one: called once it ends, however it ends. */
    release: (() => void) | null;
    constructor(name: string);
    /** Wakes whoever waits for an item, credit or the end. */
    wake(): void;
    /** Resolves at the next {@link StreamState#wake}. */
    wait(): Promise<void>;
}
/** What a stream needs from the client. */
export interface StreamLink {
    /** Sends a one-way stream frame (STREAM_ITEM, STREAM_CREDIT, STREAM_END) for stream `id`; throws when it cannot. */
    send(opcode: number, id: number, body: Uint8Array): void;
    /** Gives the stream up: CANCEL to the server, its state dropped. */
    cancel(stream: StreamState): void;
    /**
     * Whether an item frame of `frameBytes` (header and body) fits the
     * session's replay buffer now (always when the session is not
     * resumable); when it does not, `stream` is woken once it may (an `ACK`
     * came, or the session changed).
     */
    room(stream: StreamState, frameBytes: number): boolean;
}
/** The items of a download, in order, taken with `for await`; `return()` (leaving the loop) cancels it. */
export declare function downloadIterator<I>(stream: StreamState, itemType: Type<I>, link: StreamLink): AsyncIterableIterator<I>;
/** An upload in progress (see {@link Client#upload}). */
export interface Upload<I, R> {
    /**
     * Sends one item, once the server's credit allows and, on a resumable
     * session, once the replay buffer has room for it; rejects once the
     * upload has ended.
     */
    send(item: I): Promise<void>;
    /** Ends the upload (`STREAM_END` code 0) and resolves with the server's answer. */
    finish(): Promise<R>;
    /** Ends the upload as failed (`STREAM_END` with `code`, at least 1) and resolves with the server's answer. */
    fail(code: number, message?: string): Promise<R>;
    /** Gives the upload up: `CANCEL`, and no answer. */
    cancel(): void;
}
/** The handle of an upload of `packetType` whose items are of `itemType`. */
export declare function uploadHandle<I, R>(stream: StreamState, packetType: PacketType<any, R, any>, itemType: Type<I>, link: StreamLink): Upload<I, R>;
