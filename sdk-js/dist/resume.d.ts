/**
 * Session resumption (section 4.2 of the contract): every frame with an
 * application opcode, and every stream frame, is counted, both ways, from
 * the ticket on; each side
 * keeps what it sent until the other's ACK, and a RESUME on a new
 * connection replays what the other side lacks. The bodies here are a
 * plain session's (pattern 0); a secure session's RESUME and its answer
 * carry a Noise message (`secure/session.ts`'s `startResume`).
 * @module
 */
/** The replay buffer's default bound in bytes (7 per frame plus its plain body), as the Rust client's. */
export declare const DEFAULT_REPLAY_BYTES: number;
/** An ACK goes out once this many counted frames are unacknowledged (section 4.2's default for clients)... */
export declare const ACK_EVERY_FRAMES = 1024;
/** ... or this many bytes of them (7 per frame plus its plain body), or half the server's replay bound if its ticket said it and that is less... */
export declare const ACK_EVERY_BYTES: number;
/** ... or this many ms after the first unacknowledged one, whichever comes first. */
export declare const ACK_DELAY = 200;
/**
 * When the server did not say its replay bound: once this many bytes are
 * unacknowledged with pushes or stream frames among them (what a server
 * holds while its replay buffer is full; answers alone do not count), the
 * ACK goes as soon as the client has handled what came in (a 0 ms timer),
 * not at a byte limit or the delay: a server waiting for room gets it at
 * once. Knowing the bound, the client goes by it instead
 * ({@link AckSchedule#dueSoon}).
 */
export declare const ACK_IDLE_BYTES: number;
/** `RESUME_TICKET`'s request body that asks for the server's replay bound (section 4.2). */
export declare const ASK_BOUND: Uint8Array<ArrayBuffer>;
/**
 * Whether frames with this opcode are counted, acknowledged and replayed:
 * the application's (`0x0000..=0xFEFF`) and, since 2026-12, the stream
 * frames (`STREAM_ITEM`, `STREAM_CREDIT`, `STREAM_END`, `STREAM_ITEMS`: `0xFF0D..=0xFF10`),
 * which resume with the session (docs/PROTOCOL.md sections 4.2 and 4.5).
 */
export declare const isCounted: (opcode: number) => boolean;
/**
 * The counted frames a side sent and the other has not acknowledged yet,
 * kept whole (header and plain body), bounded in bytes. A frame that would
 * pass the bound ends the buffer for good (`overflowed`): from then on the
 * session cannot be resumed, but frames are still numbered.
 */
export declare class ReplayBuffer {
    #private;
    /** The bound, in bytes. */
    limit: number;
    /** Counted frames sent so far (numbered from 0). */
    sent: number;
    /** The number of the first frame kept. */
    first: number;
    /** The highest count the other side acknowledged. */
    acknowledged: number;
    /** Bytes kept. */
    bytes: number;
    /** Whether a frame passed the bound: nothing is kept any more. */
    overflowed: boolean;
    /** @param limit The bound in bytes. */
    constructor(limit?: number);
    /** How many frames are kept. */
    get length(): number;
    /**
     * Numbers and keeps a frame just sent (an encoded frame, body uncompressed).
     * @returns Whether it is kept (false: the buffer overflowed, now or before).
     */
    record(frame: Uint8Array): boolean;
    /**
     * Whether a frame of `frameBytes` can be kept with `keepFree` bytes still
     * left: always once overflowed (nothing is kept) or when empty (a frame
     * that could never fit is not held back: waiting would not make room).
     */
    fits(frameBytes: number, keepFree: number): boolean;
    /**
     * Takes the other side's count of frames received: the frames before it are dropped.
     * @returns Why the count is a protocol error (ahead of what was sent, or backwards), or null.
     */
    acknowledge(received: number): string | null;
    /**
     * The frames the other side lacks when it received `received`, in order;
     * null when they are not all kept (or `received` is ahead of what was sent).
     */
    replayFrom(received: number): Uint8Array[] | null;
}
/**
 * The count of counted frames received, and when it is due in an `ACK`:
 * once `frames` or `bytes` of them are unacknowledged (the delay is the
 * client's timer).
 */
export declare class AckSchedule {
    #private;
    /** An ACK is due once this many frames are unacknowledged. */
    everyFrames: number;
    /** ... or this many bytes of them. */
    everyBytes: number;
    /** Counted frames received so far. */
    count: number;
    /** The count last acknowledged. */
    acked: number;
    /** Bytes received since the last acknowledgement. */
    unackedBytes: number;
    /** Whether pushes or stream frames (not answers) are among them. */
    heldBack: boolean;
    /** The server's replay bound, when its ticket said it. */
    bound: number | null;
    /** The largest push or stream frame received on the session: what a server that said its bound may be holding. */
    largestHeldBack: number;
    constructor({ frames, bytes }?: {
        frames?: number;
        bytes?: number;
    });
    /**
     * Counts a frame received of `size` bytes (header and plain body);
     * `heldBack`: a push or stream frame, which a server may hold until an
     * ACK makes room (not an answer).
     * @returns Whether an ACK is due now.
     */
    received(size: number, heldBack?: boolean): boolean;
    /**
     * Whether the ACK goes once what came in is handled. Knowing the server's
     * bound: when what is unacknowledged (answers included) and the largest
     * push or stream frame received come to more than three quarters of it
     * (a server holds a push that would leave less than a quarter free: it
     * may be holding one that large). Otherwise: once {@link ACK_IDLE_BYTES}
     * are unacknowledged, pushes or stream frames among them.
     */
    get dueSoon(): boolean;
    /** Whether frames were received since the last acknowledgement. */
    get hasUnacked(): boolean;
    /** Marks everything received acknowledged; returns the count to send. */
    take(): number;
}
/**
 * The body of a plain session's `RESUME`: the ticket (32 bytes), the count
 * of frames received, pattern 0 and no Noise message.
 */
export declare function resumeBody(ticket: Uint8Array, received: number): Uint8Array;
/** A ticket and how long (ms) the server keeps the session after a loss. */
export interface Ticket {
    /** 32 bytes. */
    ticket: Uint8Array;
    /** How long the server keeps the session after a loss, in ms. */
    ttl: number;
    /** The server's replay bound in bytes, when the request asked for it (`RESUME_TICKET`'s answer only). */
    replayBytes?: number;
}
/** `RESUME_TICKET`'s answer (36 bytes, or 40 with the server's replay bound), or null when the body is not one. */
export declare function parseTicket(body: Uint8Array): Ticket | null;
/** `RESUME`'s answer: the server's count received, the new ticket, its Noise message; null when too short. */
export declare function parseResumed(body: Uint8Array): (Ticket & {
    received: number;
    message: Uint8Array;
}) | null;
/** Resumption's settings (the client option `resume`). */
export interface ResumeOptions {
    /**
     * The bound of the replay buffer (frames sent and not acknowledged yet, 7
     * bytes each plus the body uncompressed; default 65536); past it the
     * session can no longer be resumed, but the connection goes on.
     */
    replayBytes?: number;
}
/**
 * The client's side of a session's resumption: its ticket, what it sent
 * and keeps, what it received and acknowledges.
 */
export declare class Session {
    /** The replay buffer's bound. */
    replayBytes: number;
    /** Resumptions so far, over the client's life. */
    resumptions: number;
    /** The current ticket; null when there is none, or the session can no longer be resumed. */
    ticket: Uint8Array | null;
    /** How long the server keeps the session after a loss, in ms. */
    ttl: number;
    /** The id of the `RESUME_TICKET` waiting for its answer. */
    ticketId: number | null;
    /** What was sent and not acknowledged: recording starts with the ticket's request. */
    replay: ReplayBuffer | null;
    /** What was received: counting starts with the ticket's answer. */
    acks: AckSchedule | null;
    /** Whether the server gave this session a ticket: its loss is worth reporting. */
    held: boolean;
    /** When (Date.now()) the connection was lost, while the session waits to be resumed. */
    lostAt: number | null;
    /** Why the session cannot be resumed, once its connection was lost: reported with the next connection. */
    ended: string | null;
    /**
     * Whether `RESUME_TICKET` goes without a body: a server refused the
     * request that asked for its bound as `MALFORMED` (it is older than that
     * request). For the client's life, as the Rust client.
     */
    plainTicket: boolean;
    constructor(replayBytes: number);
    /** Forgets the session: a new one starts, nothing recorded or counted until its ticket is asked for. */
    reset(): void;
    /** Whether a lost connection can be resumed: a ticket, and every frame the server may lack kept. */
    get resumable(): boolean;
    /** `RESUME_TICKET` went out with id `id`: what is sent from now on is recorded. */
    asked(id: number): void;
    /** The server's ticket (or a resumption's new one): what is received from now on is counted, and acknowledged by the server's bound if it said it. */
    granted({ ticket, ttl, replayBytes }: Ticket): void;
    /**
     * Whether a counted frame of `frameBytes` (header and plain body) may be
     * sent now without overflowing the replay buffer, a quarter of its bound
     * left for requests (as the Rust client): always when nothing is recorded.
     */
    hasRoom(frameBytes: number): boolean;
    /** Records a counted frame just sent; an overflow ends resumability (the connection goes on). */
    record(frame: Uint8Array): void;
}
/** The settings of the option `resume`, or null when off; throws a TypeError when invalid. */
export declare function resumeOptions(option: boolean | ResumeOptions | undefined): {
    replayBytes: number;
} | null;
