//! What the workspace's tests and benchmarks share, kept out of any
//! published crate: the `redis-server` process that the backplane tests
//! (`redis/tests`) and ternio-bench's backplane scenario start and own.

pub mod redis_server;
