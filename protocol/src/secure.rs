//! Secure sessions (section 5): the Noise handshake and sealed frames.
//!
//! The handshake is `Noise_NN_25519_ChaChaPoly_BLAKE2s` (anonymous) or
//! `Noise_NK_25519_ChaChaPoly_BLAKE2s` (the client pins the server's static
//! key), with the prologue `ternio/2` and empty payloads, run by the `snow`
//! crate. After it, each direction has its own key (Noise `Split()`: the
//! first key seals client-to-server frames, the second server-to-client).
//!
//! A sealed frame's body is `counter: u64` (little-endian), then the
//! ChaCha20-Poly1305 ciphertext of the plain body, then the 16-byte tag. The
//! nonce is four zero bytes and the counter; the associated data is the
//! frame's 7 header bytes as sent (with `ENCRYPTED` set). Counters are
//! exact (section 5.1): a sender counts from 0, and a receiver accepts only
//! the counter that follows the last one it accepted, so a replayed,
//! reordered or deleted frame is refused.
//!
//! Either side replaces the key of the direction it sends with a sealed
//! `REKEY` frame (section 5.2): [`Sealer::write_rekey`] writes it and then
//! changes the key; [`Opener::open`] changes its key after opening one.
//! [`RekeyPolicy`] says when a sealer is due to do so on its own.
//!
//! Per-frame sealing runs on one of two backends, chosen by feature
//! ([`AEAD_BACKEND`] names the one in use): AWS-LC (`aws-lc-rs`,
//! `aead-aws-lc`, the default) or RustCrypto's `chacha20poly1305`
//! (`aead-rustcrypto`, pure Rust, for wasm32 or a build without a C
//! compiler). Both give the same bytes (the test vectors pass on each).
//! RustCrypto's computes eight ChaCha blocks and four Poly1305 powers
//! whatever the message size: sealing a 32-byte frame costs several times
//! what it costs on AWS-LC (`protocol/README.md` has the figures of `cargo
//! bench -p ternio-bench --bench aead`). Both wipe each key when it is
//! dropped: AWS-LC keeps it in a heap context it wipes when freed,
//! RustCrypto's cipher wipes itself (and is boxed, so that a `REKEY` moves
//! no key). snow wipes nothing; its X25519 keys come from an implementation
//! of our own that does (`noise_builder`).

use std::fmt;
use std::time::Duration;
// std's `Instant::now` panics on wasm32-unknown-unknown; web-time's reads
// the browser's clock there (and is std's type everywhere else).
#[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
use std::time::Instant;
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
use web_time::Instant;

use bytes::{BufMut, BytesMut};
use zeroize::Zeroizing;

use crate::aead;
use crate::error::FrameError;
use crate::frame::{self, Flags, Framing, HEADER_LEN, Header};

/// The Noise prologue of contract v2.
pub const PROLOGUE: &[u8] = b"ternio/2";
/// Bytes of the counter in front of a sealed body.
pub const COUNTER_LEN: usize = 8;
/// Bytes of the authentication tag after a sealed body.
pub const TAG_LEN: usize = 16;
/// Bytes a sealed body adds to the plain one.
pub const SEAL_OVERHEAD: usize = COUNTER_LEN + TAG_LEN;
/// Bytes of an X25519 key.
pub const KEY_LEN: usize = 32;
/// The library that seals and opens frames, chosen by feature: `"aws-lc"`
/// (`aead-aws-lc`, the default, and the choice when both are on) or
/// `"rustcrypto"` (`aead-rustcrypto` alone).
pub const AEAD_BACKEND: &str = aead::BACKEND;

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
#[non_exhaustive]
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
    /// A `RESUME` answer whose plain fields (`received`, `ticket`,
    /// `ttl_ms`) are not the ones its second Noise message authenticates:
    /// changed on the way (docs/PROTOCOL.md section 4.2).
    #[error("the RESUME answer's fields are not the ones its Noise message authenticates")]
    AnswerMismatch,
}

impl From<snow::Error> for HandshakeError {
    fn from(error: snow::Error) -> Self {
        Self::Noise(error.to_string())
    }
}

/// A sealed frame that does not open: the connection must close with
/// `DISCONNECT DECRYPT_FAILED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The body is shorter than a counter and a tag.
    #[error("sealed body of {0} bytes is shorter than counter and tag")]
    TooShort(usize),
    /// A counter other than the one expected: a replayed or reordered
    /// frame (below it) or a deleted one (above it).
    #[error(
        "counter {counter} where {expected} was expected (a replayed, reordered or deleted frame)"
    )]
    OutOfOrder {
        /// The counter received.
        counter: u64,
        /// The counter that had to come next.
        expected: u64,
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
        // Not snow's `generate_keypair`: snow keeps a copy it never wipes.
        let mut private = Zeroizing::new([0u8; KEY_LEN]);
        aead::fill_random(&mut private[..]);
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

/// A snow builder whose X25519 keys (the server's static key in an NK
/// handshake, both ephemeral keys, and each Diffie-Hellman result) are
/// wiped when the handshake is dropped: snow's own implementation wipes
/// nothing. Everything else (hash, cipher, random source) is snow's.
pub(crate) fn noise_builder<'a>(params: snow::params::NoiseParams) -> snow::Builder<'a> {
    snow::Builder::with_resolver(params, Box::new(WipingResolver))
}

/// snow's default primitives, but X25519 from [`WipingX25519`].
struct WipingResolver;

impl snow::resolvers::CryptoResolver for WipingResolver {
    fn resolve_rng(&self) -> Option<Box<dyn snow::types::Random>> {
        snow::resolvers::DefaultResolver.resolve_rng()
    }

    fn resolve_dh(&self, choice: &snow::params::DHChoice) -> Option<Box<dyn snow::types::Dh>> {
        match choice {
            snow::params::DHChoice::Curve25519 => Some(Box::<WipingX25519>::default()),
            _ => None,
        }
    }

    fn resolve_hash(
        &self,
        choice: &snow::params::HashChoice,
    ) -> Option<Box<dyn snow::types::Hash>> {
        snow::resolvers::DefaultResolver.resolve_hash(choice)
    }

    fn resolve_cipher(
        &self,
        choice: &snow::params::CipherChoice,
    ) -> Option<Box<dyn snow::types::Cipher>> {
        snow::resolvers::DefaultResolver.resolve_cipher(choice)
    }
}

/// An X25519 key pair for snow that wipes its private key when dropped.
#[derive(Default)]
struct WipingX25519 {
    private: Zeroizing<[u8; KEY_LEN]>,
    public: [u8; KEY_LEN],
}

impl WipingX25519 {
    fn derive_public(&mut self) {
        self.public = curve25519_dalek::MontgomeryPoint::mul_base_clamped(*self.private).to_bytes();
    }
}

impl snow::types::Dh for WipingX25519 {
    fn name(&self) -> &'static str {
        "25519"
    }

    fn pub_len(&self) -> usize {
        KEY_LEN
    }

    fn priv_len(&self) -> usize {
        KEY_LEN
    }

    fn set(&mut self, private: &[u8]) {
        let len = private.len().min(KEY_LEN);
        self.private[..len].copy_from_slice(&private[..len]);
        self.derive_public();
    }

    fn generate(&mut self, rng: &mut dyn snow::types::Random) -> Result<(), snow::Error> {
        rng.try_fill_bytes(&mut self.private[..])?;
        self.derive_public();
        Ok(())
    }

    fn pubkey(&self) -> &[u8] {
        &self.public
    }

    fn privkey(&self) -> &[u8] {
        &self.private[..]
    }

    fn dh(&self, public: &[u8], out: &mut [u8]) -> Result<(), snow::Error> {
        let public: [u8; KEY_LEN] = public
            .get(..KEY_LEN)
            .and_then(|key| key.try_into().ok())
            .ok_or(snow::Error::Dh)?;
        let shared = Zeroizing::new(
            curve25519_dalek::MontgomeryPoint(public)
                .mul_clamped(*self.private)
                .to_bytes(),
        );
        out[..KEY_LEN].copy_from_slice(&shared[..]);
        Ok(())
    }
}

fn noise_params(pattern: Pattern) -> snow::params::NoiseParams {
    pattern.noise_name().parse().expect("a valid Noise name")
}

/// The client's half of a handshake.
pub struct Initiator {
    pattern: Pattern,
    state: snow::HandshakeState,
}

impl fmt::Debug for Initiator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Initiator")
            .field("pattern", &self.pattern)
            .finish_non_exhaustive()
    }
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
        let mut builder = noise_builder(params).prologue(PROLOGUE)?;
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
#[derive(Debug)]
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
        let mut builder = noise_builder(noise_params(pattern)).prologue(PROLOGUE)?;
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

/// What the session secret hashes in front of the two keys of `Split()`.
pub const SECRET_LABEL: &[u8] = b"ternio/2 secret";

/// BLAKE2s-256 of `parts`, one after the other (snow's BLAKE2s, whose
/// buffer is overwritten before it is dropped).
pub(crate) fn blake2s(parts: &[&[u8]]) -> Zeroizing<[u8; KEY_LEN]> {
    let mut hash = snow::resolvers::CryptoResolver::resolve_hash(
        &snow::resolvers::DefaultResolver,
        &snow::params::HashChoice::Blake2s,
    )
    .expect("snow is built with BLAKE2s");
    hash.reset();
    for part in parts {
        hash.input(part);
    }
    let mut out = Zeroizing::new([0u8; KEY_LEN]);
    hash.result(&mut out[..]);
    // The hasher holds the input in its buffer: overwrite it.
    hash.reset();
    hash.input(&[0u8; 64]);
    out
}

/// Which end of a handshake a [`SecureChannel`] is built for.
#[derive(Clone, Copy)]
pub(crate) enum Side {
    Client,
    Server,
}

pub(crate) fn channel(
    mut state: snow::HandshakeState,
    side: Side,
) -> Result<SecureChannel, HandshakeError> {
    if !state.is_handshake_finished() {
        return Err(HandshakeError::Noise("handshake not finished".into()));
    }
    let (mut client_to_server, mut server_to_client) = state.dangerously_get_raw_split();
    let handshake_hash = state.get_handshake_hash().to_vec();
    let session_secret = blake2s(&[SECRET_LABEL, &client_to_server, &server_to_client]);
    let (send, receive) = match side {
        Side::Client => (&client_to_server, &server_to_client),
        Side::Server => (&server_to_client, &client_to_server),
    };
    let channel = SecureChannel {
        sealer: Sealer::new(send),
        opener: Opener::new(receive),
        handshake_hash,
        session_secret,
    };
    // Wiped where they are, rather than moved into a wrapper (a move leaves a copy).
    zeroize::Zeroize::zeroize(&mut client_to_server);
    zeroize::Zeroize::zeroize(&mut server_to_client);
    Ok(channel)
}

/// Both directions of a completed handshake.
pub struct SecureChannel {
    /// Seals what this side sends.
    pub sealer: Sealer,
    /// Opens what this side receives.
    pub opener: Opener,
    /// Noise's handshake hash, the same on both sides (a channel binding).
    /// It hashes only what crossed the wire: anyone who saw the handshake
    /// can compute it, so it is no secret.
    pub handshake_hash: Vec<u8>,
    /// The session's secret, which only its two ends know:
    /// `BLAKE2s-256("ternio/2 secret" || k1 || k2)` of the two keys
    /// `Split()` gave (client-to-server first). What resumption
    /// ([`resume_psk`](crate::resume::resume_psk)) is keyed by.
    pub session_secret: Zeroizing<[u8; KEY_LEN]>,
}

impl fmt::Debug for SecureChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecureChannel")
            .field("next_send_counter", &self.sealer.next)
            .field("next_receive_counter", &self.opener.next)
            .finish_non_exhaustive()
    }
}

/// The AEAD key that follows `cipher`'s by `REKEY` (section 5.2).
fn rekeyed(cipher: &aead::Key) -> aead::Key {
    aead::Key::new(&aead::rekey(cipher))
}

/// The key a `REKEY` frame moves to from `key` (section 5.2): the first 32
/// bytes of the encryption, under `key`, of 32 zero bytes with the nonce of
/// counter 2^64 - 1 and empty associated data (no frame uses that counter).
/// For test vectors and other implementations to check against.
pub fn rekey(key: &[u8; KEY_LEN]) -> Zeroizing<[u8; KEY_LEN]> {
    aead::rekey(&aead::Key::new(key))
}

/// When a [`Sealer`] replaces its key on its own (section 5.2): after
/// `frames` sealed frames or `interval`, whichever comes first, counted
/// from the last key change.
///
/// With feature `serde`, it reads from a settings table such as
/// `{ frames = 65536, interval = "2m" }`; a missing key takes its default.
///
/// Built with [`RekeyPolicy::new`], [`RekeyPolicy::NEVER`] or
/// [`RekeyPolicy::default`]; the struct is `#[non_exhaustive]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(default, deny_unknown_fields)
)]
#[non_exhaustive]
pub struct RekeyPolicy {
    /// Frames sealed under one key before the next frame brings a `REKEY`.
    pub frames: u64,
    /// Time under one key before the next frame brings a `REKEY`.
    #[cfg_attr(feature = "serde", serde(with = "crate::config_format::duration"))]
    pub interval: Duration,
}

impl RekeyPolicy {
    /// Never rekey on its own (the peer's `REKEY` is still accepted).
    pub const NEVER: Self = Self {
        frames: u64::MAX,
        interval: Duration::MAX,
    };

    /// A new key after `frames` sealed frames or `interval`, whichever
    /// comes first.
    pub const fn new(frames: u64, interval: Duration) -> Self {
        Self { frames, interval }
    }
}

impl Default for RekeyPolicy {
    /// 65,536 frames or 2 minutes: a key then protects a bounded amount of
    /// traffic (and is wiped once replaced, which gives forward secrecy
    /// within a long session), at the cost of one 31-byte frame and one
    /// 32-byte encryption per change: about 1/65,536 of a busy link's
    /// frames, and nothing on an idle one (a change happens only when a
    /// frame is sent).
    fn default() -> Self {
        Self {
            frames: 65_536,
            interval: Duration::from_secs(120),
        }
    }
}

/// Seals outgoing frames with one direction's key and counter.
pub struct Sealer {
    cipher: aead::Key,
    next: u64,
    policy: RekeyPolicy,
    /// Frames sealed under the current key.
    under_key: u64,
    /// When the current key came into use.
    keyed_at: Instant,
}

/// Shows the counter and the rekey state, never the key.
impl fmt::Debug for Sealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sealer")
            .field("next_counter", &self.next)
            .field("under_key", &self.under_key)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Sealer {
    /// A sealer with `key`, counting from 0, rekeying by the default policy.
    pub fn new(key: &[u8; KEY_LEN]) -> Self {
        Self {
            cipher: aead::Key::new(key),
            next: 0,
            policy: RekeyPolicy::default(),
            under_key: 0,
            keyed_at: Instant::now(),
        }
    }

    /// Sets when this sealer is due to rekey ([`rekey_due`](Self::rekey_due)).
    pub fn set_rekey_policy(&mut self, policy: RekeyPolicy) {
        self.policy = policy;
    }

    /// The counter the next sealed frame will carry.
    pub fn next_counter(&self) -> u64 {
        self.next
    }

    /// Moves the counter: for tests of the counter's end only.
    #[doc(hidden)]
    pub fn set_next_counter_for_testing(&mut self, next: u64) {
        self.next = next;
    }

    /// Whether the rekey policy asks for a `REKEY` before the next frame.
    /// Reads the clock.
    pub fn rekey_due(&self) -> bool {
        self.under_key >= self.policy.frames || self.keyed_at.elapsed() >= self.policy.interval
    }

    /// Appends a sealed `REKEY` frame (request id 0, empty body) to `out`,
    /// then replaces the key: every later frame is sealed with the new one.
    pub fn write_rekey(
        &mut self,
        out: &mut BytesMut,
        framing: Framing,
    ) -> Result<usize, FrameError> {
        let header = Header::new(crate::system::REKEY, Flags::NONE, 0);
        let len = self.write_frame_with(out, framing, header, usize::MAX, |_| {})?;
        self.cipher = rekeyed(&self.cipher);
        self.under_key = 0;
        self.keyed_at = Instant::now();
        Ok(len)
    }

    /// Appends a `REKEY` frame and changes the key when the policy says
    /// it is time; returns whether it did.
    pub fn rekey_if_due(
        &mut self,
        out: &mut BytesMut,
        framing: Framing,
    ) -> Result<bool, FrameError> {
        if !self.rekey_due() {
            return Ok(false);
        }
        self.write_rekey(out, framing).map(|_| true)
    }

    /// Appends one sealed frame to `out`: the header with `ENCRYPTED` set,
    /// the counter, the encryption of whatever `body` writes, the tag. The
    /// size check applies to the sealed frame; on failure `out` is restored
    /// and the counter is not used. Fails with
    /// [`FrameError::CounterExhausted`] rather than seal with counter
    /// 2^64 - 1: the connection must close.
    pub fn write_frame_with(
        &mut self,
        out: &mut BytesMut,
        framing: Framing,
        header: Header,
        max_frame_size: usize,
        body: impl FnOnce(&mut BytesMut),
    ) -> Result<usize, FrameError> {
        self.write_frame_observed(out, framing, header, max_frame_size, body, |_| {})
    }

    /// [`write_frame_with`](Self::write_frame_with), showing `observe` the
    /// plain body just before it is sealed (a resumable session keeps a
    /// copy to replay under later keys). Not called when the frame is not
    /// written.
    pub fn write_frame_observed(
        &mut self,
        out: &mut BytesMut,
        framing: Framing,
        header: Header,
        max_frame_size: usize,
        body: impl FnOnce(&mut BytesMut),
        observe: impl FnOnce(&[u8]),
    ) -> Result<usize, FrameError> {
        self.write_frame_compressing(out, framing, header, max_frame_size, None, body, observe)
    }

    /// [`write_frame_observed`](Self::write_frame_observed), with the body
    /// compressed before it is sealed (section 6) when `compress` gives a
    /// threshold that the body reaches and compressing makes it smaller:
    /// `COMPRESSED` is then set in the header, which the tag authenticates.
    /// `observe` sees the body before compression. The size check applies
    /// to the uncompressed frame (what the receiver's check sees).
    #[allow(clippy::too_many_arguments)]
    pub fn write_frame_compressing(
        &mut self,
        out: &mut BytesMut,
        framing: Framing,
        header: Header,
        max_frame_size: usize,
        compress: Option<usize>,
        body: impl FnOnce(&mut BytesMut),
        observe: impl FnOnce(&[u8]),
    ) -> Result<usize, FrameError> {
        let counter = self.next;
        if counter == u64::MAX {
            return Err(FrameError::CounterExhausted);
        }
        let start = out.len();
        let header = Header {
            flags: header.flags.with(Flags::ENCRYPTED),
            ..header
        };
        frame::write_frame_with(
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
        observe(&out[plain_at..]);
        if let Some(threshold) = compress
            && crate::compression::compress_tail(out, plain_at, threshold)
        {
            out[header_at + 2] |= Flags::COMPRESSED.bits();
        }
        let (head, plain) = out[header_at..].split_at_mut(HEADER_LEN + COUNTER_LEN);
        let tag = self.cipher.seal(counter, &head[..HEADER_LEN], plain);
        out.extend_from_slice(&tag);
        let sealed_len = out.len() - header_at;
        if framing.prefix_len() > 0 {
            crate::prefix::set(out, start, sealed_len);
        }
        self.next = counter + 1;
        self.under_key += 1;
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

/// Opens incoming frames with one direction's key, accepting each counter
/// only in its turn.
pub struct Opener {
    cipher: aead::Key,
    next: u64,
}

/// Shows the counter, never the key.
impl fmt::Debug for Opener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Opener")
            .field("next_counter", &self.next)
            .finish_non_exhaustive()
    }
}

impl Opener {
    /// An opener with `key` that expects counter 0 first.
    pub fn new(key: &[u8; KEY_LEN]) -> Self {
        Self {
            cipher: aead::Key::new(key),
            next: 0,
        }
    }

    /// The counter the next sealed frame must carry.
    pub fn next_counter(&self) -> u64 {
        self.next
    }

    /// Opens a sealed body in place: on success `body` holds the plain body.
    /// `header` is the frame's header as received (with `ENCRYPTED` set).
    /// After opening a `REKEY` frame the opener moves to the next key
    /// (section 5.2); what else such a frame must look like is for the
    /// caller to check.
    pub fn open(&mut self, header: &Header, body: &mut BytesMut) -> Result<(), OpenError> {
        if body.len() < SEAL_OVERHEAD {
            return Err(OpenError::TooShort(body.len()));
        }
        let counter = u64::from_le_bytes(body[..COUNTER_LEN].try_into().expect("8 bytes"));
        // A sender never seals with 2^64 - 1 (section 5.1).
        if counter != self.next || counter == u64::MAX {
            return Err(OpenError::OutOfOrder {
                counter,
                expected: self.next,
            });
        }
        let tag_at = body.len() - TAG_LEN;
        self.cipher
            .open(counter, &header.to_bytes(), &mut body[COUNTER_LEN..])
            .map_err(|_| OpenError::BadTag)?;
        // A sender never uses counter 2^64 - 1, so this does not overflow.
        self.next = counter + 1;
        body.truncate(tag_at);
        let _ = body.split_to(COUNTER_LEN);
        if header.opcode == crate::system::REKEY {
            self.cipher = rekeyed(&self.cipher);
        }
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
            Err(OpenError::OutOfOrder {
                counter: 0,
                expected: 1
            })
        );
        // Counter 1 deleted: counter 2 is refused, and so is every later one.
        let _deleted = sealed(&mut client.sealer, header, b"one");
        let (sent, body) = sealed(&mut client.sealer, header, b"two");
        assert_eq!(
            server.opener.open(&sent, &mut body.clone()),
            Err(OpenError::OutOfOrder {
                counter: 2,
                expected: 1
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
    fn a_rekey_moves_both_sides_to_the_next_key_and_counters_go_on() {
        let (mut client, mut server) = handshake(None, None).unwrap();
        let header = Header::new(0x0010, Flags::NONE, 0);
        let (sent, mut body) = sealed(&mut client.sealer, header, b"before");
        server.opener.open(&sent, &mut body).unwrap();
        let mut out = BytesMut::new();
        client
            .sealer
            .write_rekey(&mut out, Framing::Message)
            .unwrap();
        let rekey = crate::Frame::parse(out.freeze(), usize::MAX).unwrap();
        assert_eq!(rekey.header.opcode, crate::system::REKEY);
        assert_eq!(rekey.header.request_id, 0);
        let mut body = BytesMut::from(&rekey.body[..]);
        server.opener.open(&rekey.header, &mut body).unwrap();
        assert!(body.is_empty());
        let (sent, body) = sealed(&mut client.sealer, header, b"after");
        assert_eq!(u64::from_le_bytes(body[..8].try_into().unwrap()), 2);
        server.opener.open(&sent, &mut body.clone()).unwrap();
        // An opener that missed the REKEY still holds the old key: refused.
        let (mut client, mut server) = handshake(None, None).unwrap();
        client
            .sealer
            .write_rekey(&mut BytesMut::new(), Framing::Message)
            .unwrap();
        server.opener.next = 1;
        let (sent, mut body) = sealed(&mut client.sealer, header, b"after");
        assert_eq!(server.opener.open(&sent, &mut body), Err(OpenError::BadTag));
    }

    #[test]
    fn the_policy_asks_for_a_rekey_after_its_frames_or_its_time() {
        let mut sealer = Sealer::new(&[7; KEY_LEN]);
        sealer.set_rekey_policy(RekeyPolicy::new(2, Duration::from_secs(3600)));
        let header = Header::new(1, Flags::NONE, 0);
        let mut out = BytesMut::new();
        assert!(!sealer.rekey_if_due(&mut out, Framing::Message).unwrap());
        for _ in 0..2 {
            assert!(!sealer.rekey_due());
            sealed(&mut sealer, header, b"x");
        }
        assert!(sealer.rekey_if_due(&mut out, Framing::Message).unwrap());
        assert!(!sealer.rekey_due());
        sealer.set_rekey_policy(RekeyPolicy::new(u64::MAX, Duration::ZERO));
        assert!(sealer.rekey_due());
        sealer.set_rekey_policy(RekeyPolicy::NEVER);
        assert!(!sealer.rekey_due());
    }

    #[test]
    fn the_last_counter_is_never_used() {
        let mut sealer = Sealer::new(&[7; KEY_LEN]);
        sealer.set_next_counter_for_testing(u64::MAX - 1);
        let header = Header::new(1, Flags::NONE, 0);
        sealed(&mut sealer, header, b"last");
        let mut out = BytesMut::new();
        assert_eq!(
            sealer.write_frame_with(&mut out, Framing::Message, header, usize::MAX, |_| {}),
            Err(FrameError::CounterExhausted)
        );
        assert!(out.is_empty());
        let mut opener = Opener::new(&[7; KEY_LEN]);
        opener.next = u64::MAX;
        let mut body = BytesMut::from(&[0xFF; 24][..]);
        assert!(matches!(
            opener.open(&header, &mut body),
            Err(OpenError::OutOfOrder { .. })
        ));
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
