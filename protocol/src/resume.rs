//! Session resumption's handshake (docs/PROTOCOL.md section 4.2).
//!
//! A secure session resumes on a new connection with a Noise handshake
//! keyed, besides its ephemeral keys, by a pre-shared key that only the two
//! ends of the session know: [`resume_psk`] of the session secret of the
//! session's latest handshake (its first, or its last resumption; see
//! [`SecureChannel::session_secret`]). Not of its handshake hash, which
//! anyone who saw the handshake can compute. A stolen ticket, even with
//! the whole handshake seen, resumes nothing. The patterns are
//! `Noise_NNpsk0_25519_ChaChaPoly_BLAKE2s` and, when the client pins the
//! server's key, `Noise_NKpsk0_25519_ChaChaPoly_BLAKE2s`, with the prologue
//! `ternio/2` and empty payloads, run by snow with the same wiping X25519 as
//! [`secure`]. Both messages are 48 bytes.
//!
//! A plain session resumes with pattern 0 and no handshake: its ticket is a
//! bearer token.

use std::fmt;

use zeroize::Zeroizing;

use crate::secure::{
    self, HandshakeError, KEY_LEN, PROLOGUE, SecureChannel, Side, StaticKeypair, TAG_LEN, blake2s,
};

/// What the resumption PSK hashes in front of the session secret.
pub const PSK_LABEL: &[u8] = b"ternio/2 resume";

/// Bytes of each resumption handshake message (`psk, e` or `psk, e, es`,
/// then `e, ee`: an ephemeral key and an empty payload's tag).
pub const RESUME_MESSAGE_LEN: usize = KEY_LEN + TAG_LEN;

/// The pre-shared key of a resumption:
/// `BLAKE2s-256("ternio/2 resume" || secret)`, where `secret` is the session
/// secret of the session's latest handshake.
pub fn resume_psk(session_secret: &[u8]) -> Zeroizing<[u8; KEY_LEN]> {
    blake2s(&[PSK_LABEL, session_secret])
}

/// The `pattern` byte of a `RESUME` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResumePattern {
    /// 0: a plain session; no handshake, empty messages.
    Plain,
    /// 3: `Noise_NNpsk0`, for a session the client opened without pinning
    /// the server's key.
    NnPsk0,
    /// 4: `Noise_NKpsk0`, for a session the client opened pinning the
    /// server's static public key.
    NkPsk0,
}

impl ResumePattern {
    /// The `pattern` byte.
    pub const fn to_u8(self) -> u8 {
        match self {
            Self::Plain => 0,
            Self::NnPsk0 => 3,
            Self::NkPsk0 => 4,
        }
    }

    /// The pattern of a `pattern` byte.
    pub const fn from_u8(byte: u8) -> Option<Self> {
        match byte {
            0 => Some(Self::Plain),
            3 => Some(Self::NnPsk0),
            4 => Some(Self::NkPsk0),
            _ => None,
        }
    }

    /// The full Noise protocol name; `None` for [`Plain`](Self::Plain).
    pub const fn noise_name(self) -> Option<&'static str> {
        match self {
            Self::Plain => None,
            Self::NnPsk0 => Some("Noise_NNpsk0_25519_ChaChaPoly_BLAKE2s"),
            Self::NkPsk0 => Some("Noise_NKpsk0_25519_ChaChaPoly_BLAKE2s"),
        }
    }

    /// The pattern that resumes a session whose first handshake was
    /// `session` (`None`: a plain session). A `RESUME` whose pattern is not
    /// this one is refused.
    pub const fn for_session(session: Option<secure::Pattern>) -> Self {
        match session {
            None => Self::Plain,
            Some(secure::Pattern::Nn) => Self::NnPsk0,
            Some(secure::Pattern::Nk) => Self::NkPsk0,
        }
    }

    /// The size of each of the two messages: 0 for a plain session, else
    /// [`RESUME_MESSAGE_LEN`].
    pub const fn message_len(self) -> usize {
        match self {
            Self::Plain => 0,
            Self::NnPsk0 | Self::NkPsk0 => RESUME_MESSAGE_LEN,
        }
    }
}

fn noise_params(name: &str) -> snow::params::NoiseParams {
    name.parse().expect("a valid Noise name")
}

/// Overwrites snow's copy of the PSK (snow wipes nothing) before the
/// handshake state is dropped.
fn forget_psk(state: &mut snow::HandshakeState) {
    let _ = state.set_psk(0, &[0u8; KEY_LEN]);
}

/// The client's half of a resumption handshake.
pub struct ResumeInitiator {
    pattern: ResumePattern,
    /// `None` once [`finish`](Self::finish) took it.
    state: Option<snow::HandshakeState>,
}

/// Overwrites snow's copy of the PSK when the handshake is given up.
impl Drop for ResumeInitiator {
    fn drop(&mut self) {
        if let Some(state) = &mut self.state {
            forget_psk(state);
        }
    }
}

impl fmt::Debug for ResumeInitiator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResumeInitiator")
            .field("pattern", &self.pattern)
            .finish_non_exhaustive()
    }
}

impl ResumeInitiator {
    /// Starts `Noise_NNpsk0`, or `Noise_NKpsk0` when `server_key` pins the
    /// server's public key, keyed by the session secret of the session's
    /// latest handshake.
    pub fn new(
        server_key: Option<&[u8; KEY_LEN]>,
        session_secret: &[u8],
    ) -> Result<Self, HandshakeError> {
        Self::build(server_key, session_secret, None)
    }

    /// As [`new`](Self::new) with a fixed ephemeral key: for test vectors only.
    #[doc(hidden)]
    pub fn with_ephemeral(
        server_key: Option<&[u8; KEY_LEN]>,
        session_secret: &[u8],
        ephemeral: &[u8; KEY_LEN],
    ) -> Result<Self, HandshakeError> {
        Self::build(server_key, session_secret, Some(ephemeral))
    }

    fn build(
        server_key: Option<&[u8; KEY_LEN]>,
        session_secret: &[u8],
        ephemeral: Option<&[u8; KEY_LEN]>,
    ) -> Result<Self, HandshakeError> {
        let pattern = if server_key.is_some() {
            ResumePattern::NkPsk0
        } else {
            ResumePattern::NnPsk0
        };
        let psk = resume_psk(session_secret);
        let name = pattern.noise_name().expect("a Noise pattern");
        let mut builder = secure::noise_builder(noise_params(name))
            .prologue(PROLOGUE)?
            .psk(0, &psk)?;
        if let Some(key) = server_key {
            builder = builder.remote_public_key(key)?;
        }
        if let Some(key) = ephemeral {
            builder = builder.fixed_ephemeral_key_for_testing_only(key);
        }
        Ok(Self {
            pattern,
            state: Some(builder.build_initiator()?),
        })
    }

    /// The pattern in use.
    pub fn pattern(&self) -> ResumePattern {
        self.pattern
    }

    /// The first Noise message: the `message` of the `RESUME` request.
    pub fn message(&mut self) -> Result<Vec<u8>, HandshakeError> {
        let mut message = vec![0u8; RESUME_MESSAGE_LEN];
        let state = self.state.as_mut().expect("taken only by finish");
        let len = state.write_message(&[], &mut message)?;
        message.truncate(len);
        Ok(message)
    }

    /// Reads the server's second message (the `message` of `RESUMED`) and
    /// derives the resumed session's keys; their `session_secret` is this
    /// resumption's, which the next resumption is keyed by.
    pub fn finish(mut self, message2: &[u8]) -> Result<SecureChannel, HandshakeError> {
        if message2.len() != RESUME_MESSAGE_LEN {
            return Err(HandshakeError::WrongLength {
                got: message2.len(),
                expected: RESUME_MESSAGE_LEN,
            });
        }
        let mut state = self.state.take().expect("taken only by finish");
        let mut payload = [0u8; RESUME_MESSAGE_LEN];
        let read = state.read_message(message2, &mut payload);
        forget_psk(&mut state);
        read?;
        secure::channel(state, Side::Client)
    }
}

/// The server's half of a resumption handshake, in one step.
#[derive(Debug)]
pub struct ResumeResponder;

impl ResumeResponder {
    /// Answers the `pattern` and first `message` of a `RESUME` request, for
    /// the session whose latest session secret is `session_secret`: returns
    /// the second message (the `message` of `RESUMED`) and the resumed
    /// session's keys. `identity` is the server's static key pair, needed
    /// for `NKpsk0`.
    ///
    /// Pattern 0 (plain) has no handshake and is
    /// [`HandshakeError::UnknownPattern`] here, as is any unknown byte; the
    /// caller checks that the pattern is the session's
    /// ([`ResumePattern::for_session`]) first. A message made with another
    /// secret fails with [`HandshakeError::Noise`].
    pub fn respond(
        pattern: u8,
        message1: &[u8],
        identity: Option<&StaticKeypair>,
        session_secret: &[u8],
    ) -> Result<(Vec<u8>, SecureChannel), HandshakeError> {
        Self::respond_with(pattern, message1, identity, session_secret, None)
    }

    /// As [`respond`](Self::respond) with a fixed ephemeral key: for test
    /// vectors only.
    #[doc(hidden)]
    pub fn respond_with(
        pattern: u8,
        message1: &[u8],
        identity: Option<&StaticKeypair>,
        session_secret: &[u8],
        ephemeral: Option<&[u8; KEY_LEN]>,
    ) -> Result<(Vec<u8>, SecureChannel), HandshakeError> {
        let resume_pattern = ResumePattern::from_u8(pattern)
            .filter(|pattern| *pattern != ResumePattern::Plain)
            .ok_or(HandshakeError::UnknownPattern(Some(pattern)))?;
        if message1.len() != RESUME_MESSAGE_LEN {
            return Err(HandshakeError::WrongLength {
                got: message1.len(),
                expected: RESUME_MESSAGE_LEN,
            });
        }
        let psk = resume_psk(session_secret);
        let name = resume_pattern.noise_name().expect("a Noise pattern");
        let mut builder = secure::noise_builder(noise_params(name))
            .prologue(PROLOGUE)?
            .psk(0, &psk)?;
        if resume_pattern == ResumePattern::NkPsk0 {
            let identity = identity.ok_or(HandshakeError::NoIdentity)?;
            builder = builder.local_private_key(identity.private())?;
        }
        if let Some(key) = ephemeral {
            builder = builder.fixed_ephemeral_key_for_testing_only(key);
        }
        let mut state = builder.build_responder()?;
        let mut payload = [0u8; RESUME_MESSAGE_LEN];
        let read = state.read_message(message1, &mut payload);
        if let Err(error) = read {
            forget_psk(&mut state);
            return Err(error.into());
        }
        let mut reply = vec![0u8; RESUME_MESSAGE_LEN];
        let written = state.write_message(&[], &mut reply);
        forget_psk(&mut state);
        reply.truncate(written?);
        Ok((reply, secure::channel(state, Side::Server)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{Flags, Framing, Header};
    use crate::secure::{Initiator, Responder};
    use bytes::BytesMut;

    /// A first handshake: its session secret, which both ends agree on,
    /// and its (public) handshake hash.
    fn first(pin: Option<&[u8; KEY_LEN]>, identity: &StaticKeypair) -> (Vec<u8>, Vec<u8>) {
        let mut initiator = Initiator::new(pin).unwrap();
        let request = initiator.request_body().unwrap();
        let (reply, server) = Responder::respond(&request, Some(identity)).unwrap();
        let client = initiator.finish(&reply).unwrap();
        assert_eq!(client.handshake_hash, server.handshake_hash);
        assert_eq!(*client.session_secret, *server.session_secret);
        assert_ne!(&client.session_secret[..], &client.handshake_hash[..]);
        (client.session_secret.to_vec(), client.handshake_hash)
    }

    #[test]
    fn patterns_round_trip_and_match_sessions() {
        for pattern in [
            ResumePattern::Plain,
            ResumePattern::NnPsk0,
            ResumePattern::NkPsk0,
        ] {
            assert_eq!(ResumePattern::from_u8(pattern.to_u8()), Some(pattern));
        }
        assert_eq!(ResumePattern::from_u8(1), None);
        assert_eq!(ResumePattern::from_u8(2), None);
        assert_eq!(ResumePattern::for_session(None), ResumePattern::Plain);
        assert_eq!(
            ResumePattern::for_session(Some(secure::Pattern::Nk)),
            ResumePattern::NkPsk0
        );
        assert_eq!(ResumePattern::Plain.noise_name(), None);
    }

    #[test]
    fn a_resumption_agrees_on_fresh_keys_and_a_fresh_secret() {
        let identity = StaticKeypair::generate();
        for pin in [None, Some(identity.public())] {
            let (h, public_hash) = first(pin, &identity);
            let mut initiator = ResumeInitiator::new(pin, &h).unwrap();
            let message = initiator.message().unwrap();
            assert_eq!(message.len(), RESUME_MESSAGE_LEN);
            let (reply, mut server) = ResumeResponder::respond(
                initiator.pattern().to_u8(),
                &message,
                Some(&identity),
                &h,
            )
            .unwrap();
            assert_eq!(reply.len(), RESUME_MESSAGE_LEN);
            let mut client = initiator.finish(&reply).unwrap();
            assert_eq!(client.handshake_hash, server.handshake_hash);
            assert_eq!(*client.session_secret, *server.session_secret);
            assert_ne!(&client.session_secret[..], &h[..]);
            let header = Header::new(1, Flags::NONE, 1);
            let mut out = BytesMut::new();
            client
                .sealer
                .write_frame_with(&mut out, Framing::Message, header, usize::MAX, |out| {
                    out.extend_from_slice(b"again")
                })
                .unwrap();
            let frame = crate::Frame::parse(out.freeze(), usize::MAX).unwrap();
            let mut body = BytesMut::from(&frame.body[..]);
            server.opener.open(&frame.header, &mut body).unwrap();
            assert_eq!(&body[..], b"again");
            // The next resumption is keyed by this one's secret.
            let mut next = ResumeInitiator::new(pin, &client.session_secret[..]).unwrap();
            let message = next.message().unwrap();
            let pattern = next.pattern().to_u8();
            assert!(
                ResumeResponder::respond(
                    pattern,
                    &message,
                    Some(&identity),
                    &server.session_secret[..]
                )
                .is_ok()
            );
            assert!(ResumeResponder::respond(pattern, &message, Some(&identity), &h).is_err());
            // Keyed by the handshake hash, which an observer can compute,
            // a resumption fails.
            let mut forged = ResumeInitiator::new(pin, &public_hash).unwrap();
            let message = forged.message().unwrap();
            assert!(ResumeResponder::respond(pattern, &message, Some(&identity), &h).is_err());
        }
    }

    #[test]
    fn the_wrong_secret_fails_on_the_responder() {
        let identity = StaticKeypair::generate();
        for pin in [None, Some(identity.public())] {
            let (h, _) = first(pin, &identity);
            let mut initiator = ResumeInitiator::new(pin, &h).unwrap();
            let message = initiator.message().unwrap();
            let mut wrong = h.clone();
            wrong[0] ^= 1;
            assert!(matches!(
                ResumeResponder::respond(
                    initiator.pattern().to_u8(),
                    &message,
                    Some(&identity),
                    &wrong
                ),
                Err(HandshakeError::Noise(_))
            ));
        }
    }

    #[test]
    fn nkpsk0_needs_the_server_identity_and_plain_has_no_handshake() {
        let identity = StaticKeypair::generate();
        let (h, _) = first(Some(identity.public()), &identity);
        let mut initiator = ResumeInitiator::new(Some(identity.public()), &h).unwrap();
        assert_eq!(initiator.pattern(), ResumePattern::NkPsk0);
        let message = initiator.message().unwrap();
        assert_eq!(
            ResumeResponder::respond(4, &message, None, &h).err(),
            Some(HandshakeError::NoIdentity)
        );
        // Another identity than the one pinned fails too.
        let other = StaticKeypair::generate();
        assert!(matches!(
            ResumeResponder::respond(4, &message, Some(&other), &h),
            Err(HandshakeError::Noise(_))
        ));
        // NN's message under NK's pattern, or the reverse, fails.
        assert!(ResumeResponder::respond(3, &message, Some(&identity), &h).is_err());
        assert_eq!(
            ResumeResponder::respond(0, &[], Some(&identity), &h).err(),
            Some(HandshakeError::UnknownPattern(Some(0)))
        );
        assert_eq!(
            ResumeResponder::respond(1, &message, Some(&identity), &h).err(),
            Some(HandshakeError::UnknownPattern(Some(1)))
        );
        assert!(matches!(
            ResumeResponder::respond(4, &message[..40], Some(&identity), &h),
            Err(HandshakeError::WrongLength { got: 40, .. })
        ));
    }

    #[test]
    fn the_psk_depends_on_every_byte_of_the_secret() {
        let a = resume_psk(&[7; 32]);
        let mut other = [7; 32];
        other[31] = 8;
        assert_ne!(*a, *resume_psk(&other));
        assert_eq!(*a, *resume_psk(&[7; 32]));
    }
}
