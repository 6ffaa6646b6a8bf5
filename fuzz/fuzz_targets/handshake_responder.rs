//! The server's handshake responder answering arbitrary `HANDSHAKE` bodies,
//! with and without an identity: an error or a session, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ternio_protocol::secure::{Responder, StaticKeypair};

fuzz_target!(|data: &[u8]| {
    let identity = StaticKeypair::from_private([7; 32]);
    let with = Responder::respond(data, Some(&identity));
    let without = Responder::respond(data, None);
    if let Ok((reply, _)) = &with {
        assert_eq!(reply.len(), 48);
    }
    // Without an identity only NN can succeed.
    if without.is_ok() {
        assert_eq!(data.first(), Some(&1));
    }
});
