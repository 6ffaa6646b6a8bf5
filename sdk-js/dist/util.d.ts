/**
 * Small helpers the other modules share (not exported by the package).
 * @module
 */
/** The key of `table` whose value is `value`, if any. */
export declare const nameIn: (table: Readonly<Record<string, number>>, value: number) => string | undefined;
/** An opcode as `0x00FF`. */
export declare const hex: (opcode: number) => string;
/** `n` and a noun, plural unless `n` is 1. */
export declare const count: (n: number, what: string) => string;
/** A value as error messages show it. */
export declare const show: (value: unknown) => string;
/** Whether two byte arrays hold the same bytes. */
export declare const sameBytes: (a: Uint8Array, b: Uint8Array) => boolean;
/** Lets a timer not keep Node running on its own (a browser's timers have no `unref`). */
export declare function unref<T>(timer: T): T;
