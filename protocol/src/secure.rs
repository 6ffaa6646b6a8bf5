//! Secure sessions (section 5): the Noise handshake and sealed frames.
//!
//! The handshake is `Noise_NN_25519_ChaChaPoly_BLAKE2s` (anonymous) or
//! `Noise_NK_25519_ChaChaPoly_BLAKE2s` (the client pins the server's static
//! key), with the prologue `ternio/1` and empty payloads, run by the `snow`
//! crate. After it, each direction has its own key (Noise `Split()`: the
//! first key seals client-to-server frames, the second server-to-client).
//!
//! A sealed frame's body is `counter: u64` (little-endian), then the
//! ChaCha20-Poly1305 ciphertext of the plain body, then the 16-byte tag. The
//! nonce is four zero bytes and the counter; the associated data is the
//! frame's 7 header bytes as sent (with `ENCRYPTED` set). A sender counts
//! from 0; a receiver accepts only counters strictly above the last it
//! accepted. Keys are zeroized when dropped.
//!
//! Per-frame sealing runs on AWS-LC (`aws-lc-rs`): RustCrypto's
//! `chacha20poly1305` computes eight ChaCha blocks and four Poly1305
//! powers whatever the message size, about 1.5 µs for a 32-byte frame
//! against 0.2 µs here (`cargo bench -p ternio-bench --bench aead`).
//! AWS-LC keeps each key in a heap context it wipes when freed.

use std::fmt;

use aws_lc_rs::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
use bytes::{BufMut, BytesMut};
use zeroize::Zeroizing;

use crate::error::FrameError;
use crate::frame::{self, Flags, Framing, HEADER_LEN, Header, LENGTH_PREFIX_LEN};

/// The Noise prologue of contract v1.
pub const PROLOGUE: &[u8] = b"ternio/1";
/// Bytes of the counter in front of a sealed body.
pub const COUNTER_LEN: usize = 8;
/// Bytes of the authentication tag after a sealed body.
pub const TAG_LEN: usize = 16;
/// Bytes a sealed body adds to the plain one.
pub const SEAL_OVERHEAD: usize = COUNTER_LEN + TAG_LEN;
/// Bytes of an X25519 key.
pub const KEY_LEN: usize = 32;

/// The handshake patterns of section 5, with their `pattern` byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pattern {
    /// 1: `Noise_NN`: anonymous; protects against eavesdropping, not
    /// against an active man in the middle.
    Nn,
    /// 2: `Noise_NK`: the client pins the server's static public key.
    Nk,
}

impl Pattern {
    /// The `pattern` byte of a `HANDSHAKE` request.
    pub const fn to_u8(self) -> u8 {
        match self {
            Self::Nn => 1,
            Self::Nk => 2,
        }
    }

    /// The pattern of a `pattern` byte.
    pub const fn from_u8(byte: u8) -> Option<Self> {
        match byte {
            1 => Some(Self::Nn),
            2 => Some(Self::Nk),
            _ => None,
        }
    }

    /// The full Noise protocol name.
    pub const fn noise_name(self) -> &'static str {
        match self {
            Self::Nn => "Noise_NN_25519_ChaChaPoly_BLAKE2s",
            Self::Nk => "Noise_NK_25519_ChaChaPoly_BLAKE2s",
        }
    }

    /// The size of the first handshake message (`e`, or `e, es`).
    pub const fn first_message_len(self) -> usize {
        match self {
            Self::Nn => KEY_LEN,
            Self::Nk => KEY_LEN + TAG_LEN,
        }
    }
}

/// Bytes of the second handshake message (`e, ee`).
pub const SECOND_MESSAGE_LEN: usize = KEY_LEN + TAG_LEN;

/// Why a handshake failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    /// The `HANDSHAKE` body is empty or names no known pattern.
    #[error("unknown handshake pattern {0:?}")]
    UnknownPattern(Option<u8>),
    /// A handshake message of the wrong size.
    #[error("handshake message of {got} bytes, expected {expected}")]
    WrongLength {
        /// The size received.
        got: usize,
        /// The size the pattern implies.
        expected: usize,
    },
    /// NK asked of a server that has no identity key.
    #[error("NK needs a server identity, and this server has none")]
    NoIdentity,
    /// A Noise step failed: for NK, usually a pinned key that is not the server's.
    #[error("Noise handshake failed: {0}")]
    Noise(String),
}

impl From<snow::Error> for HandshakeError {
    fn from(error: snow::Error) -> Self {
        Self::Noise(error.to_string())
    }
}

/// A sealed frame that does not open: the connection must close with
/// `DISCONNECT DECRYPT_FAILED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// The body is shorter than a counter and a tag.
    #[error("sealed body of {0} bytes is shorter than counter and tag")]
    TooShort(usize),
    /// A counter not strictly above the last one accepted (a replay).
    #[error("counter {counter} is not above the last accepted, {last}")]
    Replayed {
        /// The counter received.
        counter: u64,
        /// The last counter accepted.
        last: u64,
    },
    /// The tag does not authenticate the header and ciphertext.
    #[error("authentication failed")]
    BadTag,
}

/// An X25519 static key pair: a server's identity.
#[derive(Clone)]
pub struct StaticKeypair {
    private: Zeroizing<[u8; KEY_LEN]>,
    public: [u8; KEY_LEN],
}

impl StaticKeypair {
    /// A new random key pair.
    pub fn generate() -> Self {
        let builder = snow::Builder::new(noise_params(Pattern::Nk));
        let keypair = builder
            .generate_keypair()
            .expect("the system random source works");
        let mut private = Zeroizing::new([0u8; KEY_LEN]);
        private.copy_from_slice(&keypair.private);
        let mut discarded = keypair.private;
        zeroize::Zeroize::zeroize(&mut discarded);
        Self::from_private(*private)
    }

    /// The key pair of a private key (its public key is derived).
    pub fn from_private(private: [u8; KEY_LEN]) -> Self {
        let public = curve25519_dalek::MontgomeryPoint::mul_base_clamped(private).to_bytes();
        Self {
            private: Zeroizing::new(private),
            public,
        }
    }

    /// The public key, which clients pin.
    pub fn public(&self) -> &[u8; KEY_LEN] {
        &self.public
    }

    /// The private key.
    pub fn private(&self) -> &[u8; KEY_LEN] {
        &self.private
    }
}

impl fmt::Debug for StaticKeypair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticKeypair")
            .field("public", &to_hex(&self.public))
            .finish_non_exhaustive()
    }
}

/// Lower-case hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(DIGITS[usize::from(byte >> 4)] as char);
        text.push(DIGITS[usize::from(byte & 0x0F)] as char);
    }
    text
}

/// A 32-byte key from 64 hex digits (surrounding whitespace ignored).
pub fn key_from_hex(text: &str) -> Option<[u8; KEY_LEN]> {
    let text = text.trim().as_bytes();
    if text.len() != KEY_LEN * 2 {
        return None;
    }
    let mut key = [0u8; KEY_LEN];
    for (byte, pair) in key.iter_mut().zip(text.chunks(2)) {
        let digit = |c: u8| (c as char).to_digit(16);
        *byte = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
    }
    Some(key)
}

fn noise_params(pattern: Pattern) -> snow::params::NoiseParams {
    pattern.noise_name().parse().expect("a valid Noise name")
}

/// The client's half of a handshake.
pub struct Initiator {
    pattern: Pattern,
    state: snow::HandshakeState,
}

impl Initiator {
    /// Starts `Noise_NN`, or `Noise_NK` when `server_key` pins the server's
    /// public key.
    pub fn new(server_key: Option<&[u8; KEY_LEN]>) -> Result<Self, HandshakeError> {
        Self::build(server_key, None)
    }

    /// As [`new`](Self::new) with a fixed ephemeral key: for test vectors only.
    #[doc(hidden)]
    pub fn with_ephemeral(
        server_key: Option<&[u8; KEY_LEN]>,
        ephemeral: &[u8; KEY_LEN],
    ) -> Result<Self, HandshakeError> {
        Self::build(server_key, Some(ephemeral))
    }

    fn build(
        server_key: Option<&[u8; KEY_LEN]>,
        ephemeral: Option<&[u8; KEY_LEN]>,
    ) -> Result<Self, HandshakeError> {
        let pattern = if server_key.is_some() {
            Pattern::Nk
        } else {
            Pattern::Nn
        };
        let params = noise_params(pattern);
        let mut builder = snow::Builder::new(params).prologue(PROLOGUE)?;
        if let Some(key) = server_key {
            builder = builder.remote_public_key(key)?;
        }
        if let Some(key) = ephemeral {
            builder = builder.fixed_ephemeral_key_for_testing_only(key);
        }
        Ok(Self {
            pattern,
            state: builder.build_initiator()?,
        })
    }

    /// The pattern in use.
    pub fn pattern(&self) -> Pattern {
        self.pattern
    }

    /// The body of the `HANDSHAKE` request: the pattern byte, then the
    /// first Noise message.
    pub fn request_body(&mut self) -> Result<Vec<u8>, HandshakeError> {
        // snow wants room for a tag even where the message carries none.
        let mut body = vec![0u8; 1 + self.pattern.first_message_len() + TAG_LEN];
        body[0] = self.pattern.to_u8();
        let len = self.state.write_message(&[], &mut body[1..])?;
        body.truncate(1 + len);
        Ok(body)
    }

    /// Reads the server's answer (the second Noise message) and derives the
    /// session's keys.
    pub fn finish(mut self, message: &[u8]) -> Result<SecureChannel, HandshakeError> {
        if message.len() != SECOND_MESSAGE_LEN {
            return Err(HandshakeError::WrongLength {
                got: message.len(),
                expected: SECOND_MESSAGE_LEN,
            });
        }
        let mut payload = [0u8; SECOND_MESSAGE_LEN];
        self.state.read_message(message, &mut payload)?;
        channel(self.state, Side::Client)
    }
}

/// The server's half: answers a `HANDSHAKE` request body in one step.
pub struct Responder;

impl Responder {
    /// Answers the body of a `HANDSHAKE` request: returns the second Noise
    /// message (the response body) and the session's keys. `identity` is
    /// the server's static key pair, needed for NK.
    pub fn respond(
        body: &[u8],
        identity: Option<&StaticKeypair>,
    ) -> Result<(Vec<u8>, SecureChannel), HandshakeError> {
        Self::respond_with(body, identity, None)
    }

    /// As [`respond`](Self::respond) with a fixed ephemeral key: for test vectors only.
    #[doc(hidden)]
    pub fn respond_with(
        body: &[u8],
        identity: Option<&StaticKeypair>,
        ephemeral: Option<&[u8; KEY_LEN]>,
    ) -> Result<(Vec<u8>, SecureChannel), HandshakeError> {
        let pattern = Pattern::from_u8(*body.first().ok_or(HandshakeError::UnknownPattern(None))?)
            .ok_or(HandshakeError::UnknownPattern(body.first().copied()))?;
        let message = &body[1..];
        if message.len() != pattern.first_message_len() {
            return Err(HandshakeError::WrongLength {
                got: message.len(),
                expected: pattern.first_message_len(),
            });
        }
        let mut builder = snow::Builder::new(noise_params(pattern)).prologue(PROLOGUE)?;
        if pattern == Pattern::Nk {
            let identity = identity.ok_or(HandshakeError::NoIdentity)?;
            builder = builder.local_private_key(identity.private())?;
        }
        if let Some(key) = ephemeral {
            builder = builder.fixed_ephemeral_key_for_testing_only(key);
        }
        let mut state = builder.build_responder()?;
        let mut payload = [0u8; KEY_LEN + TAG_LEN];
        state.read_message(message, &mut payload)?;
        let mut reply = vec![0u8; SECOND_MESSAGE_LEN + TAG_LEN];
        let len = state.write_message(&[], &mut reply)?;
        reply.truncate(len);
        Ok((reply, channel(state, Side::Server)?))
    }
}

#[derive(Clone, Copy)]
enum Side {
    Client,
    Server,
}

fn channel(mut state: snow::HandshakeState, side: Side) -> Result<SecureChannel, HandshakeError> {
    if !state.is_handshake_finished() {
        return Err(HandshakeError::Noise("handshake not finished".into()));
    }
    let (client_to_server, server_to_client) = state.dangerously_get_raw_split();
    let (client_to_server, server_to_client) = (
        Zeroizing::new(client_to_server),
        Zeroizing::new(server_to_client),
    );
    let handshake_hash = state.get_handshake_hash().to_vec();
    let (send, receive) = match side {
        Side::Client => (&client_to_server, &server_to_client),
        Side::Server => (&server_to_client, &client_to_server),
    };
    Ok(SecureChannel {
        sealer: Sealer::new(send),
        opener: Opener::new(receive),
        handshake_hash,
    })
}

/// Both directions of a completed handshake.
pub struct SecureChannel {
    /// Seals what this side sends.
    pub sealer: Sealer,
    /// Opens what this side receives.
    pub opener: Opener,
    /// Noise's handshake hash, the same on both sides (a channel binding).
    pub handshake_hash: Vec<u8>,
}

impl fmt::Debug for SecureChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecureChannel")
            .field("next_send_counter", &self.sealer.next)
            .field("last_received_counter", &self.opener.last)
            .finish_non_exhaustive()
    }
}

fn nonce(counter: u64) -> Nonce {
    let mut nonce = [0u8; 12];
    nonce[4..].copy_from_slice(&counter.to_le_bytes());
    Nonce::assume_unique_for_key(nonce)
}

/// One direction's ChaCha20-Poly1305 key, held by AWS-LC (which wipes it
/// when the key is dropped).
fn aead_key(key: &[u8; KEY_LEN]) -> LessSafeKey {
    let key = UnboundKey::new(&CHACHA20_POLY1305, key)
        .expect("a 32-byte key is a valid ChaCha20-Poly1305 key");
    LessSafeKey::new(key)
}

/// Seals outgoing frames with one direction's key and counter.
pub struct Sealer {
    cipher: LessSafeKey,
    next: u64,
}

impl Sealer {
    /// A sealer with `key`, counting from 0.
    pub fn new(key: &[u8; KEY_LEN]) -> Self {
        Self {
            cipher: aead_key(key),
            next: 0,
        }
    }

    /// The counter the next sealed frame will carry.
    pub fn next_counter(&self) -> u64 {
        self.next
    }

    /// Appends one sealed frame to `out`: the header with `ENCRYPTED` set,
    /// the counter, the encryption of whatever `body` writes, the tag. The
    /// size check applies to the sealed frame; on failure `out` is restored.
    pub fn write_frame_with(
        &mut self,
        out: &mut BytesMut,
        framing: Framing,
        header: Header,
        max_frame_size: usize,
        body: impl FnOnce(&mut BytesMut),
    ) -> Result<usize, FrameError> {
        let start = out.len();
        let header = Header {
            flags: header.flags.with(Flags::ENCRYPTED),
            ..header
        };
        let counter = self.next;
        let len = frame::write_frame_with(
            out,
            framing,
            header,
            max_frame_size.saturating_sub(TAG_LEN),
            |out| {
                out.put_u64_le(counter);
                body(out);
            },
        )?;
        let header_at = start + framing.prefix_len();
        let plain_at = header_at + HEADER_LEN + COUNTER_LEN;
        let (head, plain) = out[header_at..].split_at_mut(HEADER_LEN + COUNTER_LEN);
        let aad: [u8; HEADER_LEN] = head[..HEADER_LEN].try_into().expect("7 bytes");
        let tag = self
            .cipher
            .seal_in_place_separate_tag(nonce(counter), Aad::from(aad), plain)
            .expect("a frame is far below ChaCha20-Poly1305's message limit");
        debug_assert_eq!(out.len() - plain_at + HEADER_LEN + COUNTER_LEN, len);
        out.extend_from_slice(tag.as_ref());
        let sealed_len = len + TAG_LEN;
        if framing.prefix_len() > 0 {
            out[start..start + LENGTH_PREFIX_LEN]
                .copy_from_slice(&(sealed_len as u32).to_le_bytes());
        }
        self.next = counter
            .checked_add(1)
            .expect("2^64 frames sent on one session");
        Ok(sealed_len)
    }

    /// Appends the sealed form of an encoded plain frame (header + body, no
    /// prefix), such as a push encoded once for many connections.
    pub fn seal_encoded(
        &mut self,
        out: &mut BytesMut,
        framing: Framing,
        frame: &[u8],
        max_frame_size: usize,
    ) -> Result<usize, FrameError> {
        let header = Header::parse(frame)?;
        self.write_frame_with(out, framing, header, max_frame_size, |out| {
            out.extend_from_slice(&frame[HEADER_LEN..])
        })
    }
}

/// Opens incoming frames with one direction's key, refusing replays.
pub struct Opener {
    cipher: LessSafeKey,
    last: Option<u64>,
}

impl Opener {
    /// An opener with `key` that has accepted nothing yet.
    pub fn new(key: &[u8; KEY_LEN]) -> Self {
        Self {
            cipher: aead_key(key),
            last: None,
        }
    }

    /// Opens a sealed body in place: on success `body` holds the plain body.
    /// `header` is the frame's header as received (with `ENCRYPTED` set).
    pub fn open(&mut self, header: &Header, body: &mut BytesMut) -> Result<(), OpenError> {
        if body.len() < SEAL_OVERHEAD {
            return Err(OpenError::TooShort(body.len()));
        }
        let counter = u64::from_le_bytes(body[..COUNTER_LEN].try_into().expect("8 bytes"));
        if let Some(last) = self.last
            && counter <= last
        {
            return Err(OpenError::Replayed { counter, last });
        }
        let tag_at = body.len() - TAG_LEN;
        self.cipher
            .open_in_place(
                nonce(counter),
                Aad::from(header.to_bytes()),
                &mut body[COUNTER_LEN..],
            )
            .map_err(|_| OpenError::BadTag)?;
        self.last = Some(counter);
        body.truncate(tag_at);
        let _ = body.split_to(COUNTER_LEN);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn handshake(
        server: Option<&StaticKeypair>,
        pin: Option<&[u8; KEY_LEN]>,
    ) -> Result<(SecureChannel, SecureChannel), HandshakeError> {
        let mut initiator = Initiator::new(pin)?;
        let request = initiator.request_body()?;
        let (reply, server_channel) = Responder::respond(&request, server)?;
        Ok((initiator.finish(&reply)?, server_channel))
    }

    fn sealed(sealer: &mut Sealer, header: Header, plain: &[u8]) -> (Header, BytesMut) {
        let mut out = BytesMut::new();
        sealer
            .write_frame_with(&mut out, Framing::Message, header, usize::MAX, |out| {
                out.extend_from_slice(plain)
            })
            .unwrap();
        let frame = crate::Frame::parse(out.freeze(), usize::MAX).unwrap();
        (frame.header, BytesMut::from(&frame.body[..]))
    }

    #[test]
    fn both_patterns_agree_on_keys_and_messages_have_the_contract_sizes() {
        let identity = StaticKeypair::generate();
        for pin in [None, Some(identity.public())] {
            let mut initiator = Initiator::new(pin).unwrap();
            let request = initiator.request_body().unwrap();
            assert_eq!(request.len(), 1 + initiator.pattern().first_message_len());
            let (reply, mut server) = Responder::respond(&request, Some(&identity)).unwrap();
            assert_eq!(reply.len(), SECOND_MESSAGE_LEN);
            let mut client = initiator.finish(&reply).unwrap();
            assert_eq!(client.handshake_hash, server.handshake_hash);
            let header = Header::new(0x0001, Flags::NONE, 9);
            let (sent, mut body) = sealed(&mut client.sealer, header, b"to the server");
            server.opener.open(&sent, &mut body).unwrap();
            assert_eq!(&body[..], b"to the server");
            let (sent, mut body) = sealed(&mut server.sealer, header, b"to the client");
            client.opener.open(&sent, &mut body).unwrap();
            assert_eq!(&body[..], b"to the client");
        }
    }

    #[test]
    fn a_wrong_pin_or_a_missing_identity_fails() {
        let identity = StaticKeypair::generate();
        let other = StaticKeypair::generate();
        assert!(matches!(
            handshake(Some(&identity), Some(other.public())),
            Err(HandshakeError::Noise(_))
        ));
        assert_eq!(
            handshake(None, Some(identity.public())).err(),
            Some(HandshakeError::NoIdentity)
        );
        assert_eq!(
            Responder::respond(&[], None).err(),
            Some(HandshakeError::UnknownPattern(None))
        );
        assert_eq!(
            Responder::respond(&[3; 33], None).err(),
            Some(HandshakeError::UnknownPattern(Some(3)))
        );
        assert!(matches!(
            Responder::respond(&[1; 20], None),
            Err(HandshakeError::WrongLength { .. })
        ));
    }

    #[test]
    fn tampering_and_replays_are_refused() {
        let (mut client, mut server) = handshake(None, None).unwrap();
        let header = Header::new(0x0010, Flags::NONE, 1);
        let (sent, body) = sealed(&mut client.sealer, header, b"sixteen bytes!!!");
        // A flipped bit anywhere in the ciphertext or tag.
        for at in COUNTER_LEN..body.len() {
            let mut bad = body.clone();
            bad[at] ^= 0x01;
            assert_eq!(server.opener.open(&sent, &mut bad), Err(OpenError::BadTag));
        }
        // A changed header (the associated data).
        let other = Header {
            request_id: 2,
            ..sent
        };
        assert_eq!(
            server.opener.open(&other, &mut body.clone()),
            Err(OpenError::BadTag)
        );
        // The real one opens once; again is a replay.
        server.opener.open(&sent, &mut body.clone()).unwrap();
        assert_eq!(
            server.opener.open(&sent, &mut body.clone()),
            Err(OpenError::Replayed {
                counter: 0,
                last: 0
            })
        );
        assert_eq!(
            server
                .opener
                .open(&sent, &mut BytesMut::from(&[0u8; 23][..])),
            Err(OpenError::TooShort(23))
        );
        let _ = Bytes::new();
    }

    #[test]
    fn hex_round_trips() {
        let keypair = StaticKeypair::generate();
        let text = to_hex(keypair.private());
        assert_eq!(text.len(), 64);
        assert_eq!(
            StaticKeypair::from_private(key_from_hex(&text).unwrap()).public(),
            keypair.public()
        );
        assert_eq!(key_from_hex("zz"), None);
        assert_eq!(key_from_hex(&"g".repeat(64)), None);
    }
}
