//! What the backplane tests share.

// Each test file uses a part of it.
#![allow(dead_code)]

pub(crate) mod redis_server;
