/**
 * When and how the client re-establishes a lost connection (the option
 * `reconnect`): the backoff's settings and the reasons that change it.
 * @module
 */
import { DisconnectReason } from './constants.js';
import { show } from './util.js';
/** Reasons after which the client does not reconnect: the server ended the conversation on purpose. */
export const FINAL_REASONS = [DisconnectReason.NORMAL, DisconnectReason.KICKED];
/** Reasons after which the next attempt waits at least `refusalDelay`. */
export const REFUSAL_REASONS = [DisconnectReason.TOO_MANY_CONNECTIONS, DisconnectReason.SHUTDOWN];
/** The policy of the option `reconnect`, or null when off; throws a TypeError when invalid. */
export function reconnectPolicy(option) {
    if (!option)
        return null;
    const given = option === true ? {} : option;
    const policy = {
        initialDelay: given.initialDelay ?? 100,
        maxDelay: given.maxDelay ?? 5000,
        multiplier: Math.max(1, given.multiplier ?? 2),
        refusalDelay: given.refusalDelay ?? 2000,
        healthyAfter: given.healthyAfter ?? 5000,
        maxAttempts: given.maxAttempts ?? 10,
    };
    for (const [key, value] of Object.entries(policy)) {
        if (typeof value !== 'number' || Number.isNaN(value) || value < 0) {
            throw new TypeError(`reconnect.${key} must be a number ≥ 0, got ${show(value)}`);
        }
    }
    return Object.freeze(policy);
}
/**
 * The delay before reconnect attempt `attempt` (from 1), in ms; `refused`:
 * the server said `TOO_MANY_CONNECTIONS` or `SHUTDOWN`.
 */
export function retryDelay(policy, attempt, refused) {
    const range = Math.min(policy.maxDelay, policy.initialDelay * policy.multiplier ** (attempt - 1));
    return refused
        ? policy.refusalDelay + Math.random() * Math.max(range, policy.refusalDelay)
        : Math.random() * range;
}
