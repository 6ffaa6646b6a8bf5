/**
 * What the client tells the application: how a connection ended, changes
 * of the connection's state, and what became of the session.
 * @module
 */
import type { Disconnect, TernioError } from './errors.js';
/** How a connection ended. */
export interface CloseInfo {
    /**
     * The WebSocket close code (1006: the connection dropped, or this side
     * gave up on it: keepalive timeout, full outbound buffer, connect timeout).
     */
    code: number;
    /** The WebSocket close reason (or this side's, such as `'keepalive timeout'`). */
    reason: string;
    /** The server's `DISCONNECT`, if it sent one. */
    disconnect: Disconnect | null;
    /**
     * Whether this side ended it: {@link Client#close}, a protocol violation
     * by the server, a keepalive timeout or a full outbound buffer.
     */
    local: boolean;
}
/**
 * A change of the connection's state, given to `onStateChange`:
 * - `{ state: 'open', attempt }`: a connection is up; `attempt` is 0 for
 *   the first one, else the reconnect attempt that succeeded;
 * - `{ state: 'reconnecting', attempt, delay, error }`: the connection (or
 *   an attempt) was lost because of `error` (a `'closed'` {@link TernioError},
 *   with `disconnect` when the server said why, or `'protocol'` when the
 *   server broke the contract); attempt `attempt` starts in `delay` ms;
 * - `{ state: 'closed', info, error }`: the client is closed for good (as
 *   {@link Client#closed} says); `error` is what waiting requests were rejected with.
 */
export type StateEvent = {
    state: 'open';
    attempt: number;
} | {
    state: 'reconnecting';
    attempt: number;
    delay: number;
    error: TernioError;
} | {
    state: 'closed';
    info: CloseInfo;
    error: TernioError;
};
/**
 * What became of the session on a new connection, given to
 * `onSessionChange` (with the option `resume`), just before the `'open'`
 * state event of that connection:
 * - `{ session: 'resumed', count, attempt }`: the session was resumed
 *   (resumption number `count`): the requests in flight get their answers
 *   and the pushes sent meanwhile arrive, each once and in order;
 * - `{ session: 'lost', reason, attempt }`: it could not be (the server
 *   refused or forgot it, its time to live passed, the client's replay
 *   buffer overflowed, or a `DISCONNECT` ended it): a new session starts on
 *   the connection, and the requests in flight failed (`'closed'`).
 */
export type SessionEvent = {
    session: 'resumed';
    count: number;
    attempt: number;
} | {
    session: 'lost';
    reason: string;
    attempt: number;
};
