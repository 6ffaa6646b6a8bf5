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
import { show } from './util.js';
/** The replay buffer's default bound in bytes (7 per frame plus its plain body), as the Rust client's. */
export const DEFAULT_REPLAY_BYTES = 64 * 1024;
/** An ACK goes out once this many counted frames are unacknowledged (section 4.2's default for clients)... */
export const ACK_EVERY_FRAMES = 1024;
/** ... or this many bytes of them (7 per frame plus its plain body), or half the server's replay bound if its ticket said it and that is less... */
export const ACK_EVERY_BYTES = 32 * 1024;
/** ... or this many ms after the first unacknowledged one, whichever comes first. */
export const ACK_DELAY = 200;
/**
 * When the server did not say its replay bound: once this many bytes are
 * unacknowledged with pushes or stream frames among them (what a server
 * holds while its replay buffer is full; answers alone do not count), the
 * ACK goes as soon as the client has handled what came in (a 0 ms timer),
 * not at a byte limit or the delay: a server waiting for room gets it at
 * once. Knowing the bound, the client goes by it instead
 * ({@link AckSchedule#dueSoon}).
 */
export const ACK_IDLE_BYTES = 8 * 1024;
const TICKET_LEN = 32;
/** `RESUME_TICKET`'s request body that asks for the server's replay bound (section 4.2). */
export const ASK_BOUND = Uint8Array.of(1);
/** RESUME's pattern for a plain session: no Noise handshake. */
const PLAIN_PATTERN = 0;
/**
 * Whether frames with this opcode are counted, acknowledged and replayed:
 * the application's (`0x0000..=0xFEFF`) and, since 2026-12, the stream
 * frames (`STREAM_ITEM`, `STREAM_CREDIT`, `STREAM_END`, `STREAM_ITEMS`: `0xFF0D..=0xFF10`),
 * which resume with the session (docs/PROTOCOL.md sections 4.2 and 4.5).
 */
export const isCounted = (opcode) => opcode <= 0xfeff || (opcode >= 0xff0d && opcode <= 0xff10);
/**
 * The counted frames a side sent and the other has not acknowledged yet,
 * kept whole (header and plain body), bounded in bytes. A frame that would
 * pass the bound ends the buffer for good (`overflowed`): from then on the
 * session cannot be resumed, but frames are still numbered.
 */
export class ReplayBuffer {
    #frames = [];
    /** Where the first kept frame is in `#frames` (acknowledged ones before it are dropped lazily). */
    #head = 0;
    /** The bound, in bytes. */
    limit;
    /** Counted frames sent so far (numbered from 0). */
    sent = 0;
    /** The number of the first frame kept. */
    first = 0;
    /** The highest count the other side acknowledged. */
    acknowledged = 0;
    /** Bytes kept. */
    bytes = 0;
    /** Whether a frame passed the bound: nothing is kept any more. */
    overflowed = false;
    /** @param limit The bound in bytes. */
    constructor(limit = DEFAULT_REPLAY_BYTES) {
        this.limit = limit;
    }
    /** How many frames are kept. */
    get length() {
        return this.#frames.length - this.#head;
    }
    /**
     * Numbers and keeps a frame just sent (an encoded frame, body uncompressed).
     * @returns Whether it is kept (false: the buffer overflowed, now or before).
     */
    record(frame) {
        this.sent++;
        if (this.overflowed)
            return false;
        if (this.bytes + frame.length > this.limit) {
            this.overflowed = true;
            this.#frames = [];
            this.#head = 0;
            this.bytes = 0;
            return false;
        }
        this.#frames.push(frame);
        this.bytes += frame.length;
        return true;
    }
    /**
     * Whether a frame of `frameBytes` can be kept with `keepFree` bytes still
     * left: always once overflowed (nothing is kept) or when empty (a frame
     * that could never fit is not held back: waiting would not make room).
     */
    fits(frameBytes, keepFree) {
        return this.overflowed || this.length === 0 || this.bytes + frameBytes + keepFree <= this.limit;
    }
    /**
     * Takes the other side's count of frames received: the frames before it are dropped.
     * @returns Why the count is a protocol error (ahead of what was sent, or backwards), or null.
     */
    acknowledge(received) {
        if (received > this.sent)
            return `ACK of ${received} frames, but only ${this.sent} were sent`;
        if (received < this.acknowledged)
            return `ACK of ${received} frames after one of ${this.acknowledged}`;
        this.acknowledged = received;
        if (this.overflowed)
            return null;
        for (; this.first < received; this.first++)
            this.bytes -= this.#frames[this.#head++].length;
        if (this.#head > 64 && this.#head * 2 > this.#frames.length) {
            this.#frames = this.#frames.slice(this.#head);
            this.#head = 0;
        }
        return null;
    }
    /**
     * The frames the other side lacks when it received `received`, in order;
     * null when they are not all kept (or `received` is ahead of what was sent).
     */
    replayFrom(received) {
        if (this.overflowed || received < this.first || received > this.sent)
            return null;
        return this.#frames.slice(this.#head + (received - this.first));
    }
}
/**
 * The count of counted frames received, and when it is due in an `ACK`:
 * once `frames` or `bytes` of them are unacknowledged (the delay is the
 * client's timer).
 */
export class AckSchedule {
    /** An ACK is due once this many frames are unacknowledged. */
    everyFrames;
    /** ... or this many bytes of them. */
    everyBytes;
    /** Counted frames received so far. */
    count = 0;
    /** The count last acknowledged. */
    acked = 0;
    /** Bytes received since the last acknowledgement. */
    unackedBytes = 0;
    /** Whether pushes or stream frames (not answers) are among them. */
    heldBack = false;
    /** The server's replay bound, when its ticket said it. */
    bound = null;
    /** The largest push or stream frame received on the session: what a server that said its bound may be holding. */
    largestHeldBack = 0;
    constructor({ frames = ACK_EVERY_FRAMES, bytes = ACK_EVERY_BYTES } = {}) {
        this.everyFrames = frames;
        this.everyBytes = bytes;
    }
    /**
     * Counts a frame received of `size` bytes (header and plain body);
     * `heldBack`: a push or stream frame, which a server may hold until an
     * ACK makes room (not an answer).
     * @returns Whether an ACK is due now.
     */
    received(size, heldBack = false) {
        this.count++;
        this.unackedBytes += size;
        if (heldBack) {
            this.heldBack = true;
            if (size > this.largestHeldBack)
                this.largestHeldBack = size;
        }
        return this.count - this.acked >= this.everyFrames || this.unackedBytes >= this.#everyBytes;
    }
    /** The bytes at which an ACK is due: `everyBytes`, or half the server's bound if that is less. */
    get #everyBytes() {
        return this.bound === null ? this.everyBytes : Math.min(this.everyBytes, Math.max(1, Math.floor(this.bound / 2)));
    }
    /**
     * Whether the ACK goes once what came in is handled. Knowing the server's
     * bound: when what is unacknowledged (answers included) and the largest
     * push or stream frame received come to more than three quarters of it
     * (a server holds a push that would leave less than a quarter free: it
     * may be holding one that large). Otherwise: once {@link ACK_IDLE_BYTES}
     * are unacknowledged, pushes or stream frames among them.
     */
    get dueSoon() {
        if (this.bound === null)
            return this.heldBack && this.unackedBytes >= ACK_IDLE_BYTES;
        const forPushes = this.bound - Math.floor(this.bound / 4);
        return this.unackedBytes > 0 && this.largestHeldBack > 0 && this.unackedBytes + this.largestHeldBack > forPushes;
    }
    /** Whether frames were received since the last acknowledgement. */
    get hasUnacked() {
        return this.count > this.acked;
    }
    /** Marks everything received acknowledged; returns the count to send. */
    take() {
        this.acked = this.count;
        this.unackedBytes = 0;
        this.heldBack = false;
        return this.count;
    }
}
/**
 * The body of a plain session's `RESUME`: the ticket (32 bytes), the count
 * of frames received, pattern 0 and no Noise message.
 */
export function resumeBody(ticket, received) {
    const out = new Uint8Array(TICKET_LEN + 9);
    out.set(ticket, 0);
    new DataView(out.buffer).setBigUint64(TICKET_LEN, BigInt(received), true);
    out[TICKET_LEN + 8] = PLAIN_PATTERN;
    return out;
}
/** `RESUME_TICKET`'s answer (36 bytes, or 40 with the server's replay bound), or null when the body is not one. */
export function parseTicket(body) {
    if (body.length !== TICKET_LEN + 4 && body.length !== TICKET_LEN + 8)
        return null;
    const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
    const ticket = { ticket: body.slice(0, TICKET_LEN), ttl: view.getUint32(TICKET_LEN, true) };
    if (body.length === TICKET_LEN + 8)
        ticket.replayBytes = view.getUint32(TICKET_LEN + 4, true);
    return ticket;
}
/** `RESUME`'s answer: the server's count received, the new ticket, its Noise message; null when too short. */
export function parseResumed(body) {
    if (body.length < 8 + TICKET_LEN + 4)
        return null;
    const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
    return {
        received: Number(view.getBigUint64(0, true)),
        ticket: body.slice(8, 8 + TICKET_LEN),
        ttl: view.getUint32(8 + TICKET_LEN, true),
        message: body.subarray(12 + TICKET_LEN),
    };
}
/**
 * The client's side of a session's resumption: its ticket, what it sent
 * and keeps, what it received and acknowledges.
 */
export class Session {
    /** The replay buffer's bound. */
    replayBytes;
    /** Resumptions so far, over the client's life. */
    resumptions = 0;
    /** The current ticket; null when there is none, or the session can no longer be resumed. */
    ticket = null;
    /** How long the server keeps the session after a loss, in ms. */
    ttl = 0;
    /** The id of the `RESUME_TICKET` waiting for its answer. */
    ticketId = null;
    /** What was sent and not acknowledged: recording starts with the ticket's request. */
    replay = null;
    /** What was received: counting starts with the ticket's answer. */
    acks = null;
    /** Whether the server gave this session a ticket: its loss is worth reporting. */
    held = false;
    /** When (Date.now()) the connection was lost, while the session waits to be resumed. */
    lostAt = null;
    /** Why the session cannot be resumed, once its connection was lost: reported with the next connection. */
    ended = null;
    /**
     * Whether `RESUME_TICKET` goes without a body: a server refused the
     * request that asked for its bound as `MALFORMED` (it is older than that
     * request). For the client's life, as the Rust client.
     */
    plainTicket = false;
    constructor(replayBytes) {
        this.replayBytes = replayBytes;
    }
    /** Forgets the session: a new one starts, nothing recorded or counted until its ticket is asked for. */
    reset() {
        this.ticket = null;
        this.ttl = 0;
        this.ticketId = null;
        this.replay = null;
        this.acks = null;
        this.held = false;
        this.lostAt = null;
        this.ended = null;
    }
    /** Whether a lost connection can be resumed: a ticket, and every frame the server may lack kept. */
    get resumable() {
        return this.ticket !== null && this.replay !== null && !this.replay.overflowed;
    }
    /** `RESUME_TICKET` went out with id `id`: what is sent from now on is recorded. */
    asked(id) {
        this.ticketId = id;
        this.replay ??= new ReplayBuffer(this.replayBytes);
    }
    /** The server's ticket (or a resumption's new one): what is received from now on is counted, and acknowledged by the server's bound if it said it. */
    granted({ ticket, ttl, replayBytes }) {
        this.ticketId = null;
        this.ticket = ticket;
        this.ttl = ttl;
        this.acks ??= new AckSchedule();
        // A resumption's answer says no bound: the session keeps the one its ticket gave.
        if (replayBytes !== undefined)
            this.acks.bound = Math.max(1, replayBytes);
        this.held = true;
    }
    /**
     * Whether a counted frame of `frameBytes` (header and plain body) may be
     * sent now without overflowing the replay buffer, a quarter of its bound
     * left for requests (as the Rust client): always when nothing is recorded.
     */
    hasRoom(frameBytes) {
        return this.replay?.fits(frameBytes, Math.floor(this.replay.limit / 4)) ?? true;
    }
    /** Records a counted frame just sent; an overflow ends resumability (the connection goes on). */
    record(frame) {
        if (this.replay && !this.replay.record(frame))
            this.ticket = null;
    }
}
/** The settings of the option `resume`, or null when off; throws a TypeError when invalid. */
export function resumeOptions(option) {
    if (!option)
        return null;
    const replayBytes = option === true ? DEFAULT_REPLAY_BYTES : option.replayBytes ?? DEFAULT_REPLAY_BYTES;
    if (typeof replayBytes !== 'number' || !(replayBytes >= 0)) {
        throw new TypeError(`resume.replayBytes must be a number ≥ 0, got ${show(replayBytes)}`);
    }
    return { replayBytes };
}
