/** The prologue of every Ternio handshake: the 8 ASCII bytes `ternio/2`. */
export declare const PROLOGUE: Uint8Array;
/** Bytes of an X25519 public key, and of Noise's DHLEN and HASHLEN here. */
export declare const DH_LEN = 32;
/** The Noise patterns Ternio runs. */
export type NoisePattern = 'NN' | 'NK' | 'NNpsk0' | 'NKpsk0';
/** The full Noise protocol name of each pattern Ternio runs. */
export declare const PROTOCOL_NAMES: Readonly<Record<NoisePattern, string>>;
/** A handshake that cannot go on: a failed Noise step, a message of the wrong size, a misuse. */
export declare class HandshakeError extends Error {
    /** Makes the error with `message`. */
    constructor(message: string, options?: {
        cause?: unknown;
    });
}
/** The public key of an X25519 private key. */
export declare function x25519PublicKey(privateKey: Uint8Array): Uint8Array;
/** What a {@link HandshakeState} is built from. */
export interface HandshakeOptions {
    /** The Noise pattern. */
    pattern: NoisePattern;
    /** Whether this side sends message 1 (a Ternio client) or answers it (a server). */
    role: 'initiator' | 'responder';
    /** The prologue; Ternio's, `ternio/2`, when not given. */
    prologue?: Uint8Array;
    /** The responder's static public key (32 bytes): the initiator's pin for NK and NKpsk0. */
    remoteStaticKey?: Uint8Array;
    /** The responder's own static private key (32 bytes), for NK and NKpsk0. */
    staticPrivateKey?: Uint8Array;
    /** The pre-shared key (32 bytes) of NNpsk0 and NKpsk0. Copied, and the copy erased when done. */
    psk?: Uint8Array;
    /**
     * A fixed ephemeral private key (32 bytes), for test vectors only: a
     * real handshake draws a fresh random one, which this leaves out.
     */
    ephemeralPrivateKey?: Uint8Array;
}
/** The two keys of Split(): the first encrypts what the initiator sends, the second what the responder sends. */
export interface SplitKeys {
    /** Key of the initiator-to-responder (client-to-server) direction. */
    initiatorToResponder: Uint8Array;
    /** Key of the responder-to-initiator (server-to-client) direction. */
    responderToInitiator: Uint8Array;
}
/**
 * Noise's HandshakeState for the two-message patterns Ternio runs (NN, NK,
 * NNpsk0, NKpsk0), either role. A client uses the initiator:
 * `writeMessage()` gives message 1, `readMessage(message2)` reads the
 * answer, then `split()` gives the two transport keys and `handshakeHash`
 * Noise's `h`. The responder exists for tests and symmetry.
 */
export declare class HandshakeState {
    #private;
    /** Initializes the state (Noise's Initialize()): protocol name, prologue, pre-messages. */
    constructor(options: HandshakeOptions);
    /** The pattern this handshake runs. */
    get pattern(): NoisePattern;
    /** Whether both messages went through: `split()` and `handshakeHash` are then available. */
    get finished(): boolean;
    /** Whether it is this side's turn to write (else to read). */
    get writing(): boolean;
    /**
     * Noise's handshake hash `h` once the handshake finished (a copy): the
     * same on both sides, a channel binding. It hashes only what crossed the
     * wire, so it is no secret (which is why resumption is keyed by the
     * session secret instead).
     */
    get handshakeHash(): Uint8Array;
    /** Writes this side's next message, with `payload` (empty in Ternio) encrypted in it. */
    writeMessage(payload?: Uint8Array): Uint8Array;
    /** Reads the other side's next message; returns its payload (empty in Ternio). Fails the handshake on any bad byte. */
    readMessage(message: Uint8Array): Uint8Array;
    /**
     * Noise's Split(), once the handshake finished: the two transport keys
     * (new arrays, the caller's to erase). Erases the handshake's own secrets;
     * `handshakeHash` stays readable. Callable once.
     */
    split(): SplitKeys;
    /** Erases every secret the handshake holds; the state can no longer be used. */
    destroy(): void;
}
