/**
 * {@link TernioError}, the one error class of the SDK, and the helpers
 * that locate a codec error in a value.
 * @module
 */
/** A `DISCONNECT` the server sent. */
export interface Disconnect {
    /** See {@link DisconnectReason}. */
    reason: number;
    /** Such as `'SHUTDOWN'` (`'UNKNOWN'` for an unlisted reason). */
    reasonName: string;
    /** The server's text. */
    message: string;
}
/** Which kind of failure a {@link TernioError} is. */
export type ErrorKind = 'remote' | 'timeout' | 'closed' | 'codec' | 'protocol' | 'aborted' | 'handshake';
/** What a {@link TernioError} may carry besides its kind and message. */
export interface ErrorDetails {
    /** `'remote'` (and `'handshake'` when the server refused it): the error code. */
    code?: number | undefined;
    /** `'remote'` (and `'handshake'` when the server refused it): the server's message. */
    remoteMessage?: string | undefined;
    /** `'timeout'`: the timeout that expired, in ms. */
    timeout?: number | undefined;
    /** `'closed'`: the server's `DISCONNECT`. */
    disconnect?: Disconnect | null | undefined;
    /** `'codec'`: where in the value the problem is. */
    path?: Array<string | number>;
    /** What caused it (`Error`'s own `cause`). */
    cause?: unknown;
    /** `'closed'` from an upload: the server answered before it ended. */
    answered?: boolean;
}
/**
 * Every error this SDK throws or rejects with. `kind` says which:
 * - `'remote'`: the server answered with an error frame; `code` and `remoteMessage` hold it;
 * - `'timeout'`: no response within the request's timeout (`timeout`, in ms);
 * - `'closed'`: the connection is closed or closed while the request waited;
 *   `disconnect` holds the server's `DISCONNECT` when it sent one;
 * - `'aborted'`: the request's `AbortSignal` was aborted (`cause` holds the signal's reason);
 * - `'codec'`: a value does not encode, or bytes do not decode (`path` locates the field);
 * - `'protocol'`: the server sent something the contract does not allow;
 * - `'handshake'`: the secure session (option `secure`) could not be set up
 *   on a connection: the server refused the handshake (`code`, `remoteMessage`;
 *   error 9 to an NK handshake: the pinned key is not the server's), or its
 *   answer did not complete it (for NK, not the pinned server).
 */
export declare class TernioError extends Error {
    /** Which kind of failure. */
    kind: ErrorKind;
    /** `'remote'` and a refused `'handshake'`: the error code (see {@link ErrorCode}). */
    code: number | undefined;
    /** `'remote'` and a refused `'handshake'`: the server's message, as sent. */
    remoteMessage: string | undefined;
    /** `'timeout'`: the timeout that expired, in ms. */
    timeout: number | undefined;
    /** `'closed'`: the server's `DISCONNECT`, or null when it sent none. */
    disconnect: Disconnect | null;
    /** `'codec'`: where in the value the problem is (field names and indexes). */
    path: Array<string | number>;
    /** `'codec'`: the problem, without the location {@link TernioError#message} adds. */
    reason?: string;
    /** `'codec'` from a compressed body: it announced more than the largest frame accepted. */
    tooLarge?: boolean;
    /** `'closed'` from an upload's `send`: the server answered before the upload ended. */
    answered?: boolean;
    /**
     * @param kind Which kind of failure.
     * @param message What happened.
     * @param details What the kind carries.
     */
    constructor(kind: ErrorKind, message: string, details?: ErrorDetails);
}
/** A `'codec'` error whose message is `reason` (until {@link topLevel} locates it). */
export declare const codecError: (reason: string) => TernioError;
/** Runs `fn`, adding `segment` to the path of a codec error it throws. */
export declare function within<T>(segment: string | number, fn: () => T): T;
/** Runs a top-level encode or decode, naming the type and field in a codec error's message. */
export declare function topLevel<T>(type: {
    name: string;
}, fn: () => T): T;
