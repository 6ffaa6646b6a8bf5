//! Packets and pieces shared by the example servers and clients.

pub mod chat;
pub mod echo;
pub mod game;
pub mod logging;
pub mod web;
