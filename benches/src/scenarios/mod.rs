//! The scenarios beyond the seed's echo: push throughput, group fan-out,
//! a crowd of idle connections, and broadcasts across a Redis backplane.

pub mod backplane;
pub mod crowd;
pub mod fanout;
pub mod push;
