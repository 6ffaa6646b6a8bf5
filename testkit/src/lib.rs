//! What the workspace's tests and benchmarks share, kept out of any
//! published crate: the `redis-server` process that the backplane tests
//! (`redis/tests`) and ternio-bench's backplane scenario start and own, and
//! a reader of a server's Prometheus endpoint.

pub mod prometheus;
pub mod redis_server;
