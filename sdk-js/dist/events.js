/**
 * What the client tells the application: how a connection ended, changes
 * of the connection's state, and what became of the session.
 * @module
 */
export {};
