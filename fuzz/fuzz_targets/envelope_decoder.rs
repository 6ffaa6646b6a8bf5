//! The Redis backplane's envelope decoder fed arbitrary Redis messages: it
//! never panics and opens nothing without a valid MAC; and the same bytes
//! given a valid MAC (what only a holder of the cluster secret can publish)
//! are parsed without a panic, refused above the size limit, and, when
//! accepted, encode back to exactly the bytes received.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ternio_redis::ClusterSecret;
use ternio_redis::fuzzing::{append_mac, open, seal};

const CHANNEL: &[u8] = b"ternio:group:lobby";

fuzz_target!(|input: (u16, &[u8])| {
    let (limit, data) = input;
    let limit = usize::from(limit);
    let secret = ClusterSecret::new("the fuzz target's secret, 32 B..").expect("long enough");

    // As anyone can publish it: no MAC is guessed.
    assert!(open(&secret, CHANNEL, data, usize::MAX).is_err());
    assert!(open(&secret, CHANNEL, data, limit).is_err());

    // As a holder of the secret could publish it.
    let sealed = append_mac(&secret, CHANNEL, data);
    if let Ok((stamp, message)) = open(&secret, CHANNEL, &sealed, usize::MAX) {
        assert_eq!(seal(&secret, CHANNEL, stamp, &message), sealed);
        // Another channel does not verify.
        assert!(open(&secret, b"ternio:everyone", &sealed, usize::MAX).is_err());
    }
    if sealed.len() > limit {
        assert!(open(&secret, CHANNEL, &sealed, limit).is_err());
    }
});
