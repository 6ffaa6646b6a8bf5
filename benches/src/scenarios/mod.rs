//! The scenarios beyond the seed's echo: push throughput, group fan-out,
//! and a crowd of idle connections.

pub mod crowd;
pub mod fanout;
pub mod push;
