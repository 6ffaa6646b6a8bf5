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
//! server's key, `Noise_NKpsk0_25519_ChaChaPoly_BLAKE2s`, run by snow with
//! the same wiping X25519 as [`secure`].
//!
//! The fields that travel plain are bound to the handshake, so that nobody
//! on the path can change them: the prologue is `ternio/2` followed by the
//! `RESUME` request's `ticket`, `received` and `pattern` ([`resume_prologue`]),
//! and the server's second message carries, encrypted, its answer's
//! `received`, `ticket` and `ttl_ms` ([`resumed_fields`]), which the client
//! requires to equal the plain ones. Message 1 is 48 bytes, message 2 92.
//!
//! A plain session resumes with pattern 0 and no handshake: its ticket is a
//! bearer token.

use std::fmt;

use zeroize::Zeroizing;

use crate::secure::{
    self, HandshakeError, KEY_LEN, PROLOGUE, SecureChannel, Side, StaticKeypair, TAG_LEN, blake2s,
};
use crate::system::{Resume, Resumed, TICKET_LEN, Ticket};

/// What the resumption PSK hashes in front of the session secret.
pub const PSK_LABEL: &[u8] = b"ternio/2 resume";

/// Bytes of the first resumption handshake message, the `message` of
/// `RESUME` (`psk, e` or `psk, e, es`: an ephemeral key and an empty
/// payload's tag).
pub const RESUME_MESSAGE_LEN: usize = KEY_LEN + TAG_LEN;

/// Bytes of the `RESUME` fields before `message` (`ticket`, `received`,
/// `pattern`), which the prologue carries.
pub const RESUME_FIELDS_LEN: usize = TICKET_LEN + 8 + 1;

/// Bytes of the answer's fields before `message` (`received`, `ticket`,
/// `ttl_ms`), which message 2 carries encrypted as its payload.
pub const RESUMED_FIELDS_LEN: usize = 8 + TICKET_LEN + 4;

/// Bytes of the second resumption handshake message, the `message` of the
/// answer (`e, ee`: an ephemeral key, then the answer's fields encrypted,
/// and their tag).
pub const RESUMED_MESSAGE_LEN: usize = KEY_LEN + RESUMED_FIELDS_LEN + TAG_LEN;

/// The prologue of a resumption handshake: `ternio/2`, then the `RESUME`
/// request's fields before `message` as they are encoded (`ticket`,
/// `received` as u64 little-endian, `pattern`). A field changed on the way
/// makes the server's prologue differ from the client's, and message 1
/// fail.
pub fn resume_prologue(
    ticket: &Ticket,
    received: u64,
    pattern: ResumePattern,
) -> [u8; PROLOGUE.len() + RESUME_FIELDS_LEN] {
    let mut prologue = [0u8; PROLOGUE.len() + RESUME_FIELDS_LEN];
    let (label, fields) = prologue.split_at_mut(PROLOGUE.len());
    label.copy_from_slice(PROLOGUE);
    fields[..TICKET_LEN].copy_from_slice(ticket.as_bytes());
    fields[TICKET_LEN..TICKET_LEN + 8].copy_from_slice(&received.to_le_bytes());
    fields[TICKET_LEN + 8] = pattern.to_u8();
    prologue
}

/// The payload of message 2: the answer's fields before `message`, as
/// they are encoded (`received` as u64 little-endian, `ticket`, `ttl_ms`
/// as u32 little-endian).
pub fn resumed_fields(received: u64, ticket: &Ticket, ttl_ms: u32) -> [u8; RESUMED_FIELDS_LEN] {
    let mut fields = [0u8; RESUMED_FIELDS_LEN];
    fields[..8].copy_from_slice(&received.to_le_bytes());
    fields[8..8 + TICKET_LEN].copy_from_slice(ticket.as_bytes());
    fields[8 + TICKET_LEN..].copy_from_slice(&ttl_ms.to_le_bytes());
    fields
}

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

    /// The size of the `RESUME` request's message: 0 for a plain session,
    /// else [`RESUME_MESSAGE_LEN`].
    pub const fn request_message_len(self) -> usize {
        match self {
            Self::Plain => 0,
            Self::NnPsk0 | Self::NkPsk0 => RESUME_MESSAGE_LEN,
        }
    }

    /// The size of the answer's message: 0 for a plain session, else
    /// [`RESUMED_MESSAGE_LEN`].
    pub const fn answer_message_len(self) -> usize {
        match self {
            Self::Plain => 0,
            Self::NnPsk0 | Self::NkPsk0 => RESUMED_MESSAGE_LEN,
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
    /// latest handshake, for the `RESUME` of `ticket` reporting `received`
    /// counted frames (both bound to the handshake by its prologue).
    pub fn new(
        server_key: Option<&[u8; KEY_LEN]>,
        session_secret: &[u8],
        ticket: &Ticket,
        received: u64,
    ) -> Result<Self, HandshakeError> {
        Self::build(server_key, session_secret, ticket, received, None)
    }

    /// As [`new`](Self::new) with a fixed ephemeral key: for test vectors only.
    #[doc(hidden)]
    pub fn with_ephemeral(
        server_key: Option<&[u8; KEY_LEN]>,
        session_secret: &[u8],
        ticket: &Ticket,
        received: u64,
        ephemeral: &[u8; KEY_LEN],
    ) -> Result<Self, HandshakeError> {
        Self::build(
            server_key,
            session_secret,
            ticket,
            received,
            Some(ephemeral),
        )
    }

    fn build(
        server_key: Option<&[u8; KEY_LEN]>,
        session_secret: &[u8],
        ticket: &Ticket,
        received: u64,
        ephemeral: Option<&[u8; KEY_LEN]>,
    ) -> Result<Self, HandshakeError> {
        let pattern = if server_key.is_some() {
            ResumePattern::NkPsk0
        } else {
            ResumePattern::NnPsk0
        };
        let psk = resume_psk(session_secret);
        let name = pattern.noise_name().expect("a Noise pattern");
        let prologue = resume_prologue(ticket, received, pattern);
        let mut builder = secure::noise_builder(noise_params(name))
            .prologue(&prologue)?
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

    /// Reads the server's answer: its second message (the answer's
    /// `message`), whose payload must be the answer's plain fields
    /// (`received`, `ticket`, `ttl_ms`), else
    /// [`HandshakeError::AnswerMismatch`]: the answer was changed on the
    /// way, and none of its fields may be trusted. Derives the resumed
    /// session's keys; their `session_secret` is this resumption's, which
    /// the next resumption is keyed by.
    pub fn finish(mut self, answer: &Resumed) -> Result<SecureChannel, HandshakeError> {
        let message2 = &answer.message[..];
        if message2.len() != RESUMED_MESSAGE_LEN {
            return Err(HandshakeError::WrongLength {
                got: message2.len(),
                expected: RESUMED_MESSAGE_LEN,
            });
        }
        let mut state = self.state.take().expect("taken only by finish");
        let mut payload = [0u8; RESUMED_MESSAGE_LEN];
        let read = state.read_message(message2, &mut payload);
        forget_psk(&mut state);
        let len = read?;
        let expected = resumed_fields(answer.received, &answer.ticket, answer.ttl_ms);
        if payload[..len] != expected[..] {
            return Err(HandshakeError::AnswerMismatch);
        }
        secure::channel(state, Side::Client)
    }
}

/// The server's half of a resumption handshake: [`read`](Self::read) the
/// `RESUME`, then, once the session is taken over and the answer's fields
/// are known, [`answer`](Self::answer).
pub struct ResumeResponder {
    /// `None` once [`answer`](Self::answer) took it.
    state: Option<snow::HandshakeState>,
}

/// Overwrites snow's copy of the PSK when the handshake is given up.
impl Drop for ResumeResponder {
    fn drop(&mut self) {
        if let Some(state) = &mut self.state {
            forget_psk(state);
        }
    }
}

impl fmt::Debug for ResumeResponder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResumeResponder").finish_non_exhaustive()
    }
}

impl ResumeResponder {
    /// Reads the `pattern` and first `message` of a `RESUME` request, for
    /// the session whose latest session secret is `session_secret`, with the
    /// prologue made of the request's `ticket`, `received` and `pattern`.
    /// `identity` is the server's static key pair, needed for `NKpsk0`.
    ///
    /// Pattern 0 (plain) has no handshake and is
    /// [`HandshakeError::UnknownPattern`] here, as is any unknown byte; the
    /// caller checks that the pattern is the session's
    /// ([`ResumePattern::for_session`]) first. A message made with another
    /// secret, or a request whose fields were changed on the way, fails with
    /// [`HandshakeError::Noise`].
    pub fn read(
        request: &Resume,
        identity: Option<&StaticKeypair>,
        session_secret: &[u8],
    ) -> Result<Self, HandshakeError> {
        Self::read_with(request, identity, session_secret, None)
    }

    /// As [`read`](Self::read) with a fixed ephemeral key: for test
    /// vectors only.
    #[doc(hidden)]
    pub fn read_with(
        request: &Resume,
        identity: Option<&StaticKeypair>,
        session_secret: &[u8],
        ephemeral: Option<&[u8; KEY_LEN]>,
    ) -> Result<Self, HandshakeError> {
        let pattern = request.pattern;
        let resume_pattern = ResumePattern::from_u8(pattern)
            .filter(|pattern| *pattern != ResumePattern::Plain)
            .ok_or(HandshakeError::UnknownPattern(Some(pattern)))?;
        let message1 = &request.message[..];
        if message1.len() != RESUME_MESSAGE_LEN {
            return Err(HandshakeError::WrongLength {
                got: message1.len(),
                expected: RESUME_MESSAGE_LEN,
            });
        }
        let psk = resume_psk(session_secret);
        let name = resume_pattern.noise_name().expect("a Noise pattern");
        let prologue = resume_prologue(&request.ticket, request.received, resume_pattern);
        let mut builder = secure::noise_builder(noise_params(name))
            .prologue(&prologue)?
            .psk(0, &psk)?;
        if resume_pattern == ResumePattern::NkPsk0 {
            let identity = identity.ok_or(HandshakeError::NoIdentity)?;
            builder = builder.local_private_key(identity.private())?;
        }
        if let Some(key) = ephemeral {
            builder = builder.fixed_ephemeral_key_for_testing_only(key);
        }
        let mut responder = Self {
            state: Some(builder.build_responder()?),
        };
        let state = responder.state.as_mut().expect("just set");
        let mut payload = [0u8; RESUME_MESSAGE_LEN];
        state.read_message(message1, &mut payload)?;
        Ok(responder)
    }

    /// Writes the second message, the `message` of the answer whose plain
    /// fields are `received`, `ticket` and `ttl_ms` (its payload carries
    /// them, encrypted), and derives the resumed session's keys.
    pub fn answer(
        mut self,
        received: u64,
        ticket: &Ticket,
        ttl_ms: u32,
    ) -> Result<(Vec<u8>, SecureChannel), HandshakeError> {
        let mut state = self.state.take().expect("taken only here");
        let fields = resumed_fields(received, ticket, ttl_ms);
        let mut reply = vec![0u8; RESUMED_MESSAGE_LEN];
        let written = state.write_message(&fields, &mut reply);
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
    use bytes::{Bytes, BytesMut};

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

    const TICKET: Ticket = Ticket([0x80; TICKET_LEN]);
    const NEW_TICKET: Ticket = Ticket([0xa0; TICKET_LEN]);

    /// A `RESUME` request as the client sends it.
    fn request(initiator: &mut ResumeInitiator, ticket: &Ticket, received: u64) -> Resume {
        Resume {
            ticket: ticket.clone(),
            received,
            pattern: initiator.pattern().to_u8(),
            message: initiator.message().unwrap().into(),
        }
    }

    /// The server's answer to `request`, with its own fields.
    fn answer(
        request: &Resume,
        identity: &StaticKeypair,
        secret: &[u8],
        received: u64,
    ) -> (Resumed, SecureChannel) {
        let responder = ResumeResponder::read(request, Some(identity), secret).unwrap();
        let (message, channel) = responder.answer(received, &NEW_TICKET, 30_000).unwrap();
        let resumed = Resumed {
            received,
            ticket: NEW_TICKET,
            ttl_ms: 30_000,
            message: message.into(),
        };
        (resumed, channel)
    }

    #[test]
    fn a_resumption_agrees_on_fresh_keys_and_a_fresh_secret() {
        let identity = StaticKeypair::generate();
        for pin in [None, Some(identity.public())] {
            let (h, public_hash) = first(pin, &identity);
            let mut initiator = ResumeInitiator::new(pin, &h, &TICKET, 5).unwrap();
            let resume = request(&mut initiator, &TICKET, 5);
            assert_eq!(resume.message.len(), RESUME_MESSAGE_LEN);
            let (resumed, mut server) = answer(&resume, &identity, &h, 3);
            assert_eq!(resumed.message.len(), RESUMED_MESSAGE_LEN);
            assert_eq!(RESUMED_MESSAGE_LEN, 92);
            let mut client = initiator.finish(&resumed).unwrap();
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
            let mut next =
                ResumeInitiator::new(pin, &client.session_secret[..], &NEW_TICKET, 0).unwrap();
            let resume = request(&mut next, &NEW_TICKET, 0);
            assert!(
                ResumeResponder::read(&resume, Some(&identity), &server.session_secret[..]).is_ok()
            );
            assert!(ResumeResponder::read(&resume, Some(&identity), &h).is_err());
            // Keyed by the handshake hash, which an observer can compute,
            // a resumption fails.
            let mut forged = ResumeInitiator::new(pin, &public_hash, &TICKET, 5).unwrap();
            let resume = request(&mut forged, &TICKET, 5);
            assert!(ResumeResponder::read(&resume, Some(&identity), &h).is_err());
        }
    }

    #[test]
    fn a_request_changed_on_the_way_fails_on_the_responder() {
        let identity = StaticKeypair::generate();
        for pin in [None, Some(identity.public())] {
            let (h, _) = first(pin, &identity);
            let mut initiator = ResumeInitiator::new(pin, &h, &TICKET, 5).unwrap();
            let genuine = request(&mut initiator, &TICKET, 5);
            for received in [4, 6, 0, u64::MAX] {
                let changed = Resume {
                    received,
                    ..genuine.clone()
                };
                assert!(matches!(
                    ResumeResponder::read(&changed, Some(&identity), &h),
                    Err(HandshakeError::Noise(_))
                ));
            }
            let mut ticket = TICKET;
            ticket.0[31] ^= 1;
            let changed = Resume {
                ticket,
                ..genuine.clone()
            };
            assert!(ResumeResponder::read(&changed, Some(&identity), &h).is_err());
            assert!(ResumeResponder::read(&genuine, Some(&identity), &h).is_ok());
        }
    }

    #[test]
    fn an_answer_changed_on_the_way_fails_on_the_initiator() {
        let identity = StaticKeypair::generate();
        for pin in [None, Some(identity.public())] {
            let (h, _) = first(pin, &identity);
            let changes: [fn(&mut Resumed); 4] = [
                |resumed| resumed.received += 1,
                |resumed| resumed.received -= 1,
                |resumed| resumed.ticket.0[0] ^= 1,
                |resumed| resumed.ttl_ms = u32::MAX,
            ];
            for change in changes {
                let mut initiator = ResumeInitiator::new(pin, &h, &TICKET, 5).unwrap();
                let resume = request(&mut initiator, &TICKET, 5);
                let (mut resumed, _) = answer(&resume, &identity, &h, 3);
                change(&mut resumed);
                assert_eq!(
                    initiator.finish(&resumed).err(),
                    Some(HandshakeError::AnswerMismatch)
                );
            }
            // A flipped bit of the message itself fails its tag.
            let mut initiator = ResumeInitiator::new(pin, &h, &TICKET, 5).unwrap();
            let resume = request(&mut initiator, &TICKET, 5);
            let (mut resumed, _) = answer(&resume, &identity, &h, 3);
            let mut message = resumed.message.to_vec();
            message[KEY_LEN] ^= 1;
            resumed.message = message.into();
            assert!(matches!(
                initiator.finish(&resumed),
                Err(HandshakeError::Noise(_))
            ));
            // A message 2 of the earlier rule (48 bytes) is refused.
            let mut initiator = ResumeInitiator::new(pin, &h, &TICKET, 5).unwrap();
            let resume = request(&mut initiator, &TICKET, 5);
            let (mut resumed, _) = answer(&resume, &identity, &h, 3);
            resumed.message = resumed.message.slice(..RESUME_MESSAGE_LEN);
            assert!(matches!(
                initiator.finish(&resumed),
                Err(HandshakeError::WrongLength {
                    got: 48,
                    expected: 92
                })
            ));
        }
    }

    #[test]
    fn the_wrong_secret_fails_on_the_responder() {
        let identity = StaticKeypair::generate();
        for pin in [None, Some(identity.public())] {
            let (h, _) = first(pin, &identity);
            let mut initiator = ResumeInitiator::new(pin, &h, &TICKET, 5).unwrap();
            let resume = request(&mut initiator, &TICKET, 5);
            let mut wrong = h.clone();
            wrong[0] ^= 1;
            assert!(matches!(
                ResumeResponder::read(&resume, Some(&identity), &wrong),
                Err(HandshakeError::Noise(_))
            ));
        }
    }

    #[test]
    fn nkpsk0_needs_the_server_identity_and_plain_has_no_handshake() {
        let identity = StaticKeypair::generate();
        let (h, _) = first(Some(identity.public()), &identity);
        let mut initiator = ResumeInitiator::new(Some(identity.public()), &h, &TICKET, 5).unwrap();
        assert_eq!(initiator.pattern(), ResumePattern::NkPsk0);
        let resume = request(&mut initiator, &TICKET, 5);
        let with = |pattern: u8, message: &[u8]| Resume {
            pattern,
            message: Bytes::copy_from_slice(message),
            ..resume.clone()
        };
        assert_eq!(
            ResumeResponder::read(&resume, None, &h).err(),
            Some(HandshakeError::NoIdentity)
        );
        // Another identity than the one pinned fails too.
        let other = StaticKeypair::generate();
        assert!(matches!(
            ResumeResponder::read(&resume, Some(&other), &h),
            Err(HandshakeError::Noise(_))
        ));
        // NN's message under NK's pattern, or the reverse, fails.
        assert!(ResumeResponder::read(&with(3, &resume.message), Some(&identity), &h).is_err());
        assert_eq!(
            ResumeResponder::read(&with(0, &[]), Some(&identity), &h).err(),
            Some(HandshakeError::UnknownPattern(Some(0)))
        );
        assert_eq!(
            ResumeResponder::read(&with(1, &resume.message), Some(&identity), &h).err(),
            Some(HandshakeError::UnknownPattern(Some(1)))
        );
        assert!(matches!(
            ResumeResponder::read(&with(4, &resume.message[..40]), Some(&identity), &h),
            Err(HandshakeError::WrongLength { got: 40, .. })
        ));
    }

    #[test]
    fn the_prologue_and_payload_are_the_fields_as_encoded() {
        use crate::Encode;
        let resume = Resume {
            ticket: TICKET,
            received: 0x0102_0304_0506_0708,
            pattern: 3,
            message: Bytes::new(),
        };
        let mut encoded = BytesMut::new();
        resume.encode(&mut encoded);
        let prologue = resume_prologue(&TICKET, resume.received, ResumePattern::NnPsk0);
        assert_eq!(&prologue[..8], b"ternio/2");
        assert_eq!(&prologue[8..], &encoded[..]);
        let resumed = Resumed {
            received: 0x0102_0304_0506_0708,
            ticket: NEW_TICKET,
            ttl_ms: 30_000,
            message: Bytes::new(),
        };
        let mut encoded = BytesMut::new();
        resumed.encode(&mut encoded);
        assert_eq!(
            &resumed_fields(resumed.received, &NEW_TICKET, 30_000)[..],
            &encoded[..]
        );
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
