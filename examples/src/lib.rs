//! Packets and pieces shared by the example servers and clients.

pub mod chat;
pub mod chat_settings;
pub mod conformance;
pub mod echo;
pub mod game;
pub mod logging;
pub mod rooms;
pub mod tickets;
pub mod web;

/// docs/GUIDE.md, compiled as doctests (`cargo test -p ternio-examples
/// --doc`): every Rust block of the guide builds, and those not marked
/// `no_run` run against a server on 127.0.0.1.
#[doc = include_str!("../../docs/GUIDE.md")]
mod guide {}
