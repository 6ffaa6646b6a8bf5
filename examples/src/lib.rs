//! Packets shared by the example servers and clients.

pub mod chat;
pub mod echo;
pub mod game;
pub mod rooms;
pub mod web;
