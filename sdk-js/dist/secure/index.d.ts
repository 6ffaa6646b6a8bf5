export * from './aead.js';
export * from './noise.js';
export * from './seal.js';
export * from './session.js';
