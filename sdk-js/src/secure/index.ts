// The secure-session layer of the TypeScript SDK: Noise handshakes, sealed
// frames, resumption's handshake (docs/PROTOCOL.md sections 4.2 and 5).
// Standalone: plain Uint8Arrays in and out, no dependency on the rest of
// the SDK.

export * from './aead.js';
export * from './noise.js';
export * from './seal.js';
export * from './session.js';
