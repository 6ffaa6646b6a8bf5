/**
 * When and how the client re-establishes a lost connection (the option
 * `reconnect`): the backoff's settings and the reasons that change it.
 * @module
 */
/**
 * When and how a lost connection is re-established (the option `reconnect`).
 * Delays are in ms. Attempt `n` (from 1) waits a random time in
 * `[0, min(initialDelay * multiplier^(n-1), maxDelay))` ("full jitter").
 * After `DISCONNECT TOO_MANY_CONNECTIONS` or `SHUTDOWN` it waits at least
 * `refusalDelay`, plus a random time up to `max(refusalDelay, that range)`.
 * The attempt count goes back to 0 only once a connection has stayed up
 * for `healthyAfter`: a server that accepts and at once refuses does not
 * restart the backoff.
 */
export interface ReconnectOptions {
    /** The range of the first attempt's delay (default 100). */
    initialDelay?: number;
    /** The largest range, before the refusal floor (default 5000). */
    maxDelay?: number;
    /** How much the range grows per attempt; below 1 counts as 1 (default 2). */
    multiplier?: number;
    /** The floor after `TOO_MANY_CONNECTIONS` (8) or `SHUTDOWN` (2) (default 2000). */
    refusalDelay?: number;
    /** How long a connection must stay up before the attempt count resets (default 5000). */
    healthyAfter?: number;
    /** Attempts in a row before the client closes for good; Infinity: never (default 10). */
    maxAttempts?: number;
}
/** {@link ReconnectOptions} with every default filled in. */
export type ReconnectPolicy = Readonly<Required<ReconnectOptions>>;
/** Reasons after which the client does not reconnect: the server ended the conversation on purpose. */
export declare const FINAL_REASONS: readonly number[];
/** Reasons after which the next attempt waits at least `refusalDelay`. */
export declare const REFUSAL_REASONS: readonly number[];
/** The policy of the option `reconnect`, or null when off; throws a TypeError when invalid. */
export declare function reconnectPolicy(option: boolean | ReconnectOptions | undefined): ReconnectPolicy | null;
/**
 * The delay before reconnect attempt `attempt` (from 1), in ms; `refused`:
 * the server said `TOO_MANY_CONNECTIONS` or `SHUTDOWN`.
 */
export declare function retryDelay(policy: ReconnectPolicy, attempt: number, refused: boolean): number;
