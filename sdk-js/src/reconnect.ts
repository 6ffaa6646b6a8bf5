/**
 * When and how the client re-establishes a lost connection (the option
 * `reconnect`): the backoff's settings and the reasons that change it.
 * @module
 */

import { DisconnectReason } from './constants.js';
import { show } from './util.js';

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
export const FINAL_REASONS: readonly number[] = [DisconnectReason.NORMAL, DisconnectReason.KICKED];
/** Reasons after which the next attempt waits at least `refusalDelay`. */
export const REFUSAL_REASONS: readonly number[] = [DisconnectReason.TOO_MANY_CONNECTIONS, DisconnectReason.SHUTDOWN];

/** The policy of the option `reconnect`, or null when off; throws a TypeError when invalid. */
export function reconnectPolicy(option: boolean | ReconnectOptions | undefined): ReconnectPolicy | null {
  if (!option) return null;
  const given: ReconnectOptions = option === true ? {} : option;
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
export function retryDelay(policy: ReconnectPolicy, attempt: number, refused: boolean): number {
  const range = Math.min(policy.maxDelay, policy.initialDelay * policy.multiplier ** (attempt - 1));
  return refused
    ? policy.refusalDelay + Math.random() * Math.max(range, policy.refusalDelay)
    : Math.random() * range;
}
