//! What the backplane tests share.

pub(crate) mod redis_server;
