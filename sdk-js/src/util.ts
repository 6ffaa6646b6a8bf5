/**
 * Small helpers the other modules share (not exported by the package).
 * @module
 */

/** The key of `table` whose value is `value`, if any. */
export const nameIn = (table: Readonly<Record<string, number>>, value: number): string | undefined =>
  Object.keys(table).find((key) => table[key] === value);

/** An opcode as `0x00FF`. */
export const hex = (opcode: number): string => `0x${opcode.toString(16).padStart(4, '0').toUpperCase()}`;

/** `n` and a noun, plural unless `n` is 1. */
export const count = (n: number, what: string): string => `${n} ${what}${n === 1 ? '' : 's'}`;

/** A value as error messages show it. */
export const show = (value: unknown): string =>
  (typeof value === 'bigint' ? `${value}n` : typeof value === 'string' ? JSON.stringify(value) : String(value));

/** Whether two byte arrays hold the same bytes. */
export const sameBytes = (a: Uint8Array, b: Uint8Array): boolean =>
  a.length === b.length && a.every((byte, i) => byte === b[i]);

/** Lets a timer not keep Node running on its own (a browser's timers have no `unref`). */
export function unref<T>(timer: T): T {
  (timer as { unref?: () => void } | undefined)?.unref?.();
  return timer;
}
