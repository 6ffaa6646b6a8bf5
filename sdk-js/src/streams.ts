/**
 * Streams (docs/PROTOCOL.md section 4.5): the state of one open stream,
 * the async iterator of a download and the handle of an upload. The
 * client feeds them frames and gives them a {@link StreamLink} to send theirs.
 * @module
 */

import { HEADER_LEN, STREAM_INITIAL_CREDIT, SystemOpcode } from './constants.js';
import { u32, type PacketType, type Type } from './codec.js';
import { TernioError } from './errors.js';
import { codeAndTextBody, type Frame } from './frame.js';
import { hex } from './util.js';

/** One open stream, as the client tracks it. */
export class StreamState {
  /** Its request's name, for messages. */
  readonly name: string;
  /** Its id: its request's. */
  id = 0;
  /** Item bodies received and not taken yet. */
  items: Uint8Array[] = [];
  /** Items the server may still send (a download's credit granted). */
  granted = STREAM_INITIAL_CREDIT;
  /** Items the client may still send (an upload's credit received). */
  credit = STREAM_INITIAL_CREDIT;
  /** Items taken since the last STREAM_CREDIT. */
  taken = 0;
  /** Whether it ended (answered, failed, cancelled). */
  ended = false;
  /** The answer's frame, once answered. */
  answer: Frame | undefined = undefined;
  /** Why it failed, until the application is told. */
  error: unknown = null;
  /** Removes the 'abort' listener of its request's signal, if it has one: called once it ends, however it ends. */
  release: (() => void) | null = null;
  #waiters: Array<() => void> = [];

  constructor(name: string) {
    this.name = name;
  }

  /** Wakes whoever waits for an item, credit or the end. */
  wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const waiter of waiters) waiter();
  }

  /** Resolves at the next {@link StreamState#wake}. */
  wait(): Promise<void> {
    return new Promise((resolve) => { this.#waiters.push(resolve); });
  }
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
export function downloadIterator<I>(stream: StreamState, itemType: Type<I>, link: StreamLink): AsyncIterableIterator<I> {
  return {
    [Symbol.asyncIterator]() { return this; },
    async next(): Promise<IteratorResult<I>> {
      for (;;) {
        if (stream.items.length > 0) {
          const body = stream.items.shift()!;
          stream.taken++;
          if (stream.taken >= STREAM_INITIAL_CREDIT / 2 && !stream.ended) {
            const items = stream.taken;
            stream.taken = 0;
            stream.granted += items;
            try {
              link.send(SystemOpcode.STREAM_CREDIT, stream.id, u32.encode(items));
            } catch {
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
    async return(): Promise<IteratorResult<I>> {
      link.cancel(stream);
      stream.items.length = 0;
      return { value: undefined, done: true };
    },
  };
}

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
export function uploadHandle<I, R>(stream: StreamState, packetType: PacketType<any, R, any>, itemType: Type<I>,
  link: StreamLink): Upload<I, R> {
  const answer = (): R => {
    if (stream.error) throw stream.error;
    const frame = stream.answer!;
    const expected = packetType.response;
    if (expected && frame.opcode === expected.opcode) return expected.decode(frame.body);
    if (frame.opcode === packetType.opcode && frame.body.length === 0) return undefined as R;
    throw new TernioError('protocol', `${stream.name} answered with unexpected opcode ${hex(frame.opcode)}`);
  };
  const end = async (code: number, message: string): Promise<R> => {
    if (!stream.ended) {
      link.send(SystemOpcode.STREAM_END, stream.id, codeAndTextBody(code, message));
      while (!stream.ended) await stream.wait();
    }
    return answer();
  };
  return {
    async send(item: I): Promise<void> {
      const body = itemType.encode(item);
      // Credit first, then room in the replay buffer: an upload on a
      // resumable session waits for the server's ACKs instead of
      // overflowing it (which would end resumability).
      const frameBytes = HEADER_LEN + body.length;
      while (!stream.ended && (stream.credit === 0 || !link.room(stream, frameBytes))) await stream.wait();
      if (stream.ended) {
        throw stream.error ?? (stream.answer
          ? new TernioError('closed', `the server answered ${stream.name} before the upload ended`, { answered: true })
          : new TernioError('closed', `${stream.name} was cancelled`));
      }
      stream.credit--;
      link.send(SystemOpcode.STREAM_ITEM, stream.id, body);
    },
    finish: () => end(0, ''),
    fail: (code: number, message = '') => end(Math.max(1, code), message),
    cancel: () => link.cancel(stream),
  };
}
