//! Packets shared by the example servers and clients.

pub mod chat;
pub mod chat_settings;
pub mod echo;
pub mod game;
pub mod web;
