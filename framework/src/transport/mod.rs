//! Transports: sockets in, frames out. Each drives a [`Session`](crate::connection::Session).

pub(crate) mod tcp;
