//! How a [`BackplaneMessage`] (or a presence notice) travels in a Redis
//! message: an envelope around the encoded push frame, authenticated with
//! an HMAC-SHA256 under the cluster secret.
//!
//! ```text
//! version   u8      2
//! kind      u8      1 group, 2 everyone, 3 connection, 4 kick, 5 user,
//!                   6 kick user, 7 presence, 8 group frames
//! origin    u16 LE  the publishing node
//! flags     u8      bit 0: droppable (only for 1, 2, 3, 5, 8); the others 0
//! instance  u64 LE  the publishing process's random id
//! sequence  u64 LE  increasing per instance: its clock in µs, or one more
//! group:      name length u16 LE, name (UTF-8), frame
//! everyone:   frame
//! connection: connection id u64 LE, frame
//! kick:       connection id u64 LE, reason (UTF-8)
//! user:       user id length u16 LE, user id (UTF-8), frame
//! kick user:  user id length u16 LE, user id (UTF-8), reason (UTF-8)
//! presence:   group name length u16 LE, name (UTF-8), version u64 LE
//! group frames: name length u16 LE, name (UTF-8), then one or more of:
//!             frame length u32 LE (at least 7, a frame header), frame;
//!             filling the rest exactly
//! mac       32 bytes
//! ```
//!
//! A presence notice says that the origin node rewrote its members of the
//! group, at that version (see `presence`). Group frames are consecutive
//! broadcasts to one group that the publisher had queued together, in
//! their order: one envelope, one MAC and one `PUBLISH` for all of them.
//!
//! `mac = HMAC-SHA256(secret, "ternio-redis envelope v2\0" ‖ channel length
//! u32 LE ‖ channel ‖ every byte before the mac)`: it covers the whole
//! envelope and the channel it was published on, so an envelope copied to
//! another channel (another node's, another group's, another cluster's
//! prefix) does not verify. Instance and sequence are checked by
//! [`ReplayGuard`](crate::replay::ReplayGuard).
//!
//! The frame is the hub's encoded push (header + body, no length prefix,
//! never sealed). A received payload is checked for size, then its MAC, on
//! the buffer the Redis client handed over; only an authentic envelope is
//! copied, its frame once into a buffer every local member shares.

use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use ternio::backplane::BackplaneMessage;
use ternio::{ConnectionId, UserId};

use crate::counters::Rejection;
use crate::secret::ClusterSecret;

type HmacSha256 = Hmac<Sha256>;

const VERSION: u8 = 2;
const GROUP: u8 = 1;
const EVERYONE: u8 = 2;
const CONNECTION: u8 = 3;
const KICK: u8 = 4;
const USER: u8 = 5;
const KICK_USER: u8 = 6;
const PRESENCE: u8 = 7;
const GROUP_FRAMES: u8 = 8;
const DROPPABLE: u8 = 1;
/// Version, kind, origin, flags, instance, sequence.
const HEADER_LEN: usize = 21;
const MAC_LEN: usize = 32;
/// The bytes an envelope adds to what it carries (for a group: plus the
/// name and its length).
pub(crate) const OVERHEAD: usize = HEADER_LEN + MAC_LEN;
/// What the MAC starts with: no other use of the secret can collide.
const LABEL: &[u8] = b"ternio-redis envelope v2\0";

/// Who published an envelope, and its place in that publisher's sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    /// The publishing node.
    pub(crate) origin: u16,
    /// The publishing process (a random id drawn at start).
    pub(crate) instance: u64,
    /// Increasing with every envelope that process publishes.
    pub(crate) sequence: u64,
}

/// What an envelope carries.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Message {
    /// What a hub sent to the other nodes.
    Hub(BackplaneMessage),
    /// Several pushes to the members of `group`, in order: consecutive
    /// [`BackplaneMessage::Group`]s with one droppable flag, in one envelope.
    GroupFrames {
        /// The group.
        group: Arc<str>,
        /// The encoded push frames, in their order (at least one).
        frames: Vec<Bytes>,
        /// Whether a connection that is behind may miss them.
        droppable: bool,
    },
    /// The origin node rewrote its members of `group`, at `version`.
    Presence {
        /// The group.
        group: String,
        /// The version of its membership that the origin wrote.
        version: u64,
    },
}

impl From<BackplaneMessage> for Message {
    fn from(message: BackplaneMessage) -> Self {
        Self::Hub(message)
    }
}

/// An authentic message read from Redis: who sent it, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Envelope {
    pub(crate) stamp: Stamp,
    pub(crate) message: Message,
}

/// Why a Redis message was not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EnvelopeError {
    #[error("the message has {0} bytes, above the limit")]
    Oversized(usize),
    #[error("the message is truncated")]
    Truncated,
    #[error("unknown envelope version {0}")]
    Version(u8),
    #[error("the MAC does not verify: forged, corrupted, another secret or another channel")]
    Forged,
    #[error("unknown message kind {0}")]
    Kind(u8),
    #[error("unknown flags {0:#04x}")]
    Flags(u8),
    #[error("a name or reason is not UTF-8")]
    Utf8,
    #[error("not a valid user id")]
    User,
}

impl EnvelopeError {
    /// How it is counted.
    pub(crate) fn rejection(self) -> Rejection {
        match self {
            Self::Oversized(_) => Rejection::Oversized,
            Self::Forged => Rejection::Forged,
            Self::Truncated
            | Self::Version(_)
            | Self::Kind(_)
            | Self::Flags(_)
            | Self::Utf8
            | Self::User => Rejection::Malformed,
        }
    }
}

/// The cluster secret, ready to compute MACs: HMAC's keyed state with the
/// label absorbed, cloned for each envelope.
#[derive(Clone)]
pub(crate) struct EnvelopeKey {
    keyed: HmacSha256,
}

impl EnvelopeKey {
    pub(crate) fn new(secret: &ClusterSecret) -> Self {
        let mut keyed =
            HmacSha256::new_from_slice(secret.expose()).expect("HMAC takes a key of any length");
        keyed.update(LABEL);
        Self { keyed }
    }

    fn mac(&self, channel: &[u8], envelope: &[u8]) -> HmacSha256 {
        let mut mac = self.keyed.clone();
        // Channel names are far below 4 GiB.
        mac.update(&(channel.len() as u32).to_le_bytes());
        mac.update(channel);
        mac.update(envelope);
        mac
    }

    /// Encodes `message`, stamped `stamp`, for publishing on `channel`.
    pub(crate) fn seal(&self, channel: &[u8], stamp: Stamp, message: &Message) -> Vec<u8> {
        let (kind, droppable, size) = match message {
            Message::Hub(BackplaneMessage::Group {
                group,
                frame,
                droppable,
            }) => (GROUP, *droppable, 2 + group.len() + frame.len()),
            Message::Hub(BackplaneMessage::Everyone { frame, droppable }) => {
                (EVERYONE, *droppable, frame.len())
            }
            Message::Hub(BackplaneMessage::Connection {
                frame, droppable, ..
            }) => (CONNECTION, *droppable, 8 + frame.len()),
            Message::Hub(BackplaneMessage::Kick { reason, .. }) => (KICK, false, 8 + reason.len()),
            Message::Hub(BackplaneMessage::User {
                user,
                frame,
                droppable,
            }) => (USER, *droppable, 2 + user.len() + frame.len()),
            Message::Hub(BackplaneMessage::KickUser { user, reason }) => {
                (KICK_USER, false, 2 + user.len() + reason.len())
            }
            Message::GroupFrames {
                group,
                frames,
                droppable,
            } => (
                GROUP_FRAMES,
                *droppable,
                2 + group.len() + frames.iter().map(|frame| 4 + frame.len()).sum::<usize>(),
            ),
            Message::Presence { group, .. } => (PRESENCE, false, 2 + group.len() + 8),
        };
        let mut out = Vec::with_capacity(OVERHEAD + size);
        out.put_u8(VERSION);
        out.put_u8(kind);
        out.put_u16_le(stamp.origin);
        out.put_u8(if droppable { DROPPABLE } else { 0 });
        out.put_u64_le(stamp.instance);
        out.put_u64_le(stamp.sequence);
        match message {
            Message::Hub(BackplaneMessage::Group { group, frame, .. }) => {
                put_name(&mut out, group);
                out.put_slice(frame);
            }
            Message::Hub(BackplaneMessage::Everyone { frame, .. }) => out.put_slice(frame),
            Message::Hub(BackplaneMessage::Connection { id, frame, .. }) => {
                out.put_u64_le(id.0);
                out.put_slice(frame);
            }
            Message::Hub(BackplaneMessage::Kick { id, reason }) => {
                out.put_u64_le(id.0);
                out.put_slice(reason.as_bytes());
            }
            Message::Hub(BackplaneMessage::User { user, frame, .. }) => {
                put_name(&mut out, user);
                out.put_slice(frame);
            }
            Message::Hub(BackplaneMessage::KickUser { user, reason }) => {
                put_name(&mut out, user);
                out.put_slice(reason.as_bytes());
            }
            Message::GroupFrames { group, frames, .. } => {
                put_name(&mut out, group);
                for frame in frames {
                    // Frames are far below 4 GiB (the frame limit).
                    out.put_u32_le(frame.len() as u32);
                    out.put_slice(frame);
                }
            }
            Message::Presence { group, version } => {
                put_name(&mut out, group);
                out.put_u64_le(*version);
            }
        }
        let mac = self.mac(channel, &out).finalize().into_bytes();
        out.put_slice(&mac);
        out
    }

    /// Reads a payload received on `channel`: refused above `max_len`
    /// bytes before anything else, then unless its MAC verifies (in
    /// constant time), then unless it is well formed. Nothing is copied
    /// before the MAC verified.
    pub(crate) fn open(
        &self,
        channel: &[u8],
        payload: &[u8],
        max_len: usize,
    ) -> Result<Envelope, EnvelopeError> {
        if payload.len() > max_len {
            return Err(EnvelopeError::Oversized(payload.len()));
        }
        let Some(&version) = payload.first() else {
            return Err(EnvelopeError::Truncated);
        };
        if version != VERSION {
            return Err(EnvelopeError::Version(version));
        }
        if payload.len() < OVERHEAD {
            return Err(EnvelopeError::Truncated);
        }
        let (envelope, mac) = payload.split_at(payload.len() - MAC_LEN);
        self.mac(channel, envelope)
            .verify_slice(mac)
            .map_err(|_| EnvelopeError::Forged)?;
        parse(envelope)
    }
}

/// Parses an authentic envelope (without its MAC).
fn parse(mut bytes: &[u8]) -> Result<Envelope, EnvelopeError> {
    // The caller checked the length and the version.
    bytes.advance(1);
    let kind = bytes.get_u8();
    let origin = bytes.get_u16_le();
    let flags = bytes.get_u8();
    let instance = bytes.get_u64_le();
    let sequence = bytes.get_u64_le();
    let allowed = if matches!(kind, KICK | KICK_USER | PRESENCE) {
        0
    } else {
        DROPPABLE
    };
    if flags & !allowed != 0 {
        return Err(EnvelopeError::Flags(flags));
    }
    let droppable = flags & DROPPABLE != 0;
    let message = match kind {
        GROUP_FRAMES => {
            let group = name(&mut bytes)?;
            return Ok(Envelope {
                stamp: Stamp {
                    origin,
                    instance,
                    sequence,
                },
                message: Message::GroupFrames {
                    group: group.into(),
                    frames: frames(bytes)?,
                    droppable,
                },
            });
        }
        GROUP => {
            let group = name(&mut bytes)?;
            BackplaneMessage::Group {
                group: group.into(),
                frame: Bytes::copy_from_slice(bytes),
                droppable,
            }
        }
        EVERYONE => BackplaneMessage::Everyone {
            frame: Bytes::copy_from_slice(bytes),
            droppable,
        },
        CONNECTION => BackplaneMessage::Connection {
            id: connection_id(&mut bytes)?,
            frame: Bytes::copy_from_slice(bytes),
            droppable,
        },
        KICK => {
            let id = connection_id(&mut bytes)?;
            let reason = std::str::from_utf8(bytes).map_err(|_| EnvelopeError::Utf8)?;
            BackplaneMessage::Kick {
                id,
                reason: reason.to_owned(),
            }
        }
        USER => BackplaneMessage::User {
            user: user(&mut bytes)?,
            frame: Bytes::copy_from_slice(bytes),
            droppable,
        },
        KICK_USER => {
            let user = user(&mut bytes)?;
            let reason = std::str::from_utf8(bytes).map_err(|_| EnvelopeError::Utf8)?;
            BackplaneMessage::KickUser {
                user,
                reason: reason.to_owned(),
            }
        }
        PRESENCE => {
            let group = name(&mut bytes)?.to_owned();
            if bytes.len() != 8 {
                return Err(EnvelopeError::Truncated);
            }
            let version = bytes.get_u64_le();
            return Ok(Envelope {
                stamp: Stamp {
                    origin,
                    instance,
                    sequence,
                },
                message: Message::Presence { group, version },
            });
        }
        other => return Err(EnvelopeError::Kind(other)),
    };
    let message = Message::Hub(message);
    Ok(Envelope {
        stamp: Stamp {
            origin,
            instance,
            sequence,
        },
        message,
    })
}

/// Writes a name (a group's, a user's) with its length. Names are far
/// shorter than 64 KiB; a longer one is cut to the limit, which no name
/// matches.
fn put_name(out: &mut Vec<u8>, name: &str) {
    let name = &name.as_bytes()[..name.len().min(usize::from(u16::MAX))];
    out.put_u16_le(name.len() as u16);
    out.put_slice(name);
}

/// Reads a name written by [`put_name`].
fn name<'a>(bytes: &mut &'a [u8]) -> Result<&'a str, EnvelopeError> {
    if bytes.len() < 2 {
        return Err(EnvelopeError::Truncated);
    }
    let len = usize::from(bytes.get_u16_le());
    if bytes.len() < len {
        return Err(EnvelopeError::Truncated);
    }
    let (name, rest) = bytes.split_at(len);
    *bytes = rest;
    std::str::from_utf8(name).map_err(|_| EnvelopeError::Utf8)
}

/// Reads the frames of a group-frames envelope: one copy of them all,
/// which every frame shares. At least one; each at least a frame header
/// long (a publisher merges only push frames); their lengths must fill
/// `bytes` exactly.
fn frames(bytes: &[u8]) -> Result<Vec<Bytes>, EnvelopeError> {
    let mut count = 0;
    let mut rest = bytes;
    while !rest.is_empty() {
        let len = frame_len(&mut rest)?;
        rest = &rest[len..];
        count += 1;
    }
    if count == 0 {
        return Err(EnvelopeError::Truncated);
    }
    let all = Bytes::copy_from_slice(bytes);
    let mut frames = Vec::with_capacity(count);
    let mut at = 0;
    let mut rest = bytes;
    while !rest.is_empty() {
        let len = frame_len(&mut rest).expect("checked above");
        rest = &rest[len..];
        frames.push(all.slice(at + 4..at + 4 + len));
        at += 4 + len;
    }
    Ok(frames)
}

/// Reads one frame's length in a group-frames envelope, checking that
/// the frame is whole in `bytes` and at least a header long.
fn frame_len(bytes: &mut &[u8]) -> Result<usize, EnvelopeError> {
    if bytes.len() < 4 {
        return Err(EnvelopeError::Truncated);
    }
    let len = bytes.get_u32_le() as usize;
    if len < ternio::protocol::frame::HEADER_LEN || bytes.len() < len {
        return Err(EnvelopeError::Truncated);
    }
    Ok(len)
}

fn user(bytes: &mut &[u8]) -> Result<UserId, EnvelopeError> {
    UserId::new(name(bytes)?).map_err(|_| EnvelopeError::User)
}

fn connection_id(bytes: &mut &[u8]) -> Result<ConnectionId, EnvelopeError> {
    if bytes.len() < 8 {
        return Err(EnvelopeError::Truncated);
    }
    Ok(ConnectionId(bytes.get_u64_le()))
}

/// The envelope codec, reachable from the fuzz targets (`fuzz/`); not part
/// of the API.
pub mod fuzzing {
    use super::*;

    pub use super::Message;

    /// `message` sealed under `secret` for `channel`.
    pub fn seal(
        secret: &ClusterSecret,
        channel: &[u8],
        (origin, instance, sequence): (u16, u64, u64),
        message: &Message,
    ) -> Vec<u8> {
        let stamp = Stamp {
            origin,
            instance,
            sequence,
        };
        EnvelopeKey::new(secret).seal(channel, stamp, message)
    }

    /// `envelope` with a valid MAC under `secret` for `channel` appended,
    /// whatever it holds: what only a holder of the secret can publish.
    pub fn append_mac(secret: &ClusterSecret, channel: &[u8], envelope: &[u8]) -> Vec<u8> {
        let mac = EnvelopeKey::new(secret)
            .mac(channel, envelope)
            .finalize()
            .into_bytes();
        [envelope, &mac[..]].concat()
    }

    /// Opens `payload` received on `channel`, as a node with `secret` and a
    /// `max_len` limit does: the stamp and the message, or why not.
    pub fn open(
        secret: &ClusterSecret,
        channel: &[u8],
        payload: &[u8],
        max_len: usize,
    ) -> Result<((u16, u64, u64), Message), String> {
        EnvelopeKey::new(secret)
            .open(channel, payload, max_len)
            .map(|envelope| {
                let Stamp {
                    origin,
                    instance,
                    sequence,
                } = envelope.stamp;
                ((origin, instance, sequence), envelope.message)
            })
            .map_err(|error| error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHANNEL: &[u8] = b"app:group:lobby";
    const MAX: usize = 1 << 20;

    fn key() -> EnvelopeKey {
        EnvelopeKey::new(&ClusterSecret::new("a test secret, 32 bytes long...!").unwrap())
    }

    fn stamp() -> Stamp {
        Stamp {
            origin: 513,
            instance: 0x0123_4567_89ab_cdef,
            sequence: 1_800_000_000_000_000,
        }
    }

    fn group() -> Message {
        Message::Hub(BackplaneMessage::Group {
            group: "lobby".into(),
            frame: Bytes::from_static(b"\x05\x03\x00\x00\x00\x00\x00body"),
            droppable: true,
        })
    }

    fn round_trip(message: impl Into<Message>) {
        let message = message.into();
        let sealed = key().seal(CHANNEL, stamp(), &message);
        let opened = key().open(CHANNEL, &sealed, MAX).expect("opens");
        assert_eq!(
            opened,
            Envelope {
                stamp: stamp(),
                message
            }
        );
    }

    #[test]
    fn every_kind_round_trips() {
        let frame = Bytes::from_static(b"\x01\x02\x00\x00\x00\x00\x00body");
        round_trip(group());
        round_trip(BackplaneMessage::Everyone {
            frame: frame.clone(),
            droppable: false,
        });
        round_trip(BackplaneMessage::Connection {
            id: ConnectionId::new(3, 42),
            frame,
            droppable: false,
        });
        round_trip(BackplaneMessage::Kick {
            id: ConnectionId::new(3, 42),
            reason: "spamming".into(),
        });
        round_trip(BackplaneMessage::User {
            user: UserId::new("player-42").unwrap(),
            frame: Bytes::from_static(b"\x01\x02\x00\x00\x00\x00\x00body"),
            droppable: true,
        });
        round_trip(BackplaneMessage::KickUser {
            user: UserId::new("player-42").unwrap(),
            reason: "banned".into(),
        });
        round_trip(Message::Presence {
            group: "lobby".into(),
            version: 1_800_000_000_000_001,
        });
        round_trip(Message::GroupFrames {
            group: "lobby".into(),
            frames: vec![
                Bytes::from_static(b"\x05\x03\x00\x00\x00\x00\x00one"),
                Bytes::from_static(b"\x05\x03\x00\x00\x00\x00\x00"),
                Bytes::from_static(b"\x05\x03\x00\x00\x00\x00\x00three"),
            ],
            droppable: true,
        });
    }

    #[test]
    fn group_frames_must_fill_their_envelope_exactly() {
        let secret = ClusterSecret::new("a test secret, 32 bytes long...!").unwrap();
        let open = |body: &[u8]| {
            let mut envelope = vec![VERSION, GROUP_FRAMES, 1, 0, DROPPABLE];
            envelope.extend_from_slice(&[0; 16]);
            envelope.extend_from_slice(&[5, 0, b'l', b'o', b'b', b'b', b'y']);
            envelope.extend_from_slice(body);
            let payload = fuzzing::append_mac(&secret, CHANNEL, &envelope);
            key()
                .open(CHANNEL, &payload, MAX)
                .map(|opened| opened.message)
        };
        let seven = *b"1234567";
        let eight = *b"12345678";
        let body = [&[7, 0, 0, 0][..], &seven, &[8, 0, 0, 0], &eight].concat();
        assert_eq!(
            open(&body),
            Ok(Message::GroupFrames {
                group: "lobby".into(),
                frames: vec![
                    Bytes::copy_from_slice(&seven),
                    Bytes::copy_from_slice(&eight)
                ],
                droppable: true,
            })
        );
        for body in [
            // No frame at all.
            &[][..],
            // A length cut short, a frame longer than what is left, a byte
            // after the last frame.
            &[7, 0, 0],
            &[8, 0, 0, 0, b'1', b'2', b'3', b'4', b'5', b'6', b'7'],
            &[7, 0, 0, 0, b'1', b'2', b'3', b'4', b'5', b'6', b'7', 1],
            // Shorter than a frame header (empty included).
            &[6, 0, 0, 0, b'1', b'2', b'3', b'4', b'5', b'6'],
            &[0, 0, 0, 0],
            // A length near 4 GiB.
            &[0xff, 0xff, 0xff, 0xff, b'h'],
        ] {
            assert_eq!(open(body), Err(EnvelopeError::Truncated), "{body:?}");
        }
    }

    #[test]
    fn every_changed_byte_is_caught() {
        let sealed = key().seal(CHANNEL, stamp(), &group());
        for index in 1..sealed.len() {
            for bit in [0x01, 0x80] {
                let mut changed = sealed.clone();
                changed[index] ^= bit;
                assert_eq!(
                    key().open(CHANNEL, &changed, MAX),
                    Err(EnvelopeError::Forged),
                    "byte {index} bit {bit:#x}"
                );
            }
        }
        // Cut short or lengthened.
        assert_eq!(
            key().open(CHANNEL, &sealed[..sealed.len() - 1], MAX),
            Err(EnvelopeError::Forged)
        );
        let longer = [&sealed[..], b"x"].concat();
        assert_eq!(
            key().open(CHANNEL, &longer, MAX),
            Err(EnvelopeError::Forged)
        );
    }

    #[test]
    fn another_secret_or_channel_does_not_verify() {
        let sealed = key().seal(CHANNEL, stamp(), &group());
        let other =
            EnvelopeKey::new(&ClusterSecret::new("another secret, 32 bytes long..!").unwrap());
        assert_eq!(
            other.open(CHANNEL, &sealed, MAX),
            Err(EnvelopeError::Forged)
        );
        for channel in [
            &b"app:group:lobby2"[..],
            b"app:to-node:1",
            b"other:group:lobby",
            b"",
        ] {
            assert_eq!(
                key().open(channel, &sealed, MAX),
                Err(EnvelopeError::Forged)
            );
        }
    }

    #[test]
    fn the_size_is_checked_first() {
        let sealed = key().seal(CHANNEL, stamp(), &group());
        assert!(key().open(CHANNEL, &sealed, sealed.len()).is_ok());
        assert_eq!(
            key().open(CHANNEL, &sealed, sealed.len() - 1),
            Err(EnvelopeError::Oversized(sealed.len()))
        );
        // Before the version or the MAC.
        let junk = vec![0xff; 100];
        assert_eq!(
            key().open(CHANNEL, &junk, 99),
            Err(EnvelopeError::Oversized(100))
        );
    }

    #[test]
    fn foreign_payloads_are_refused() {
        assert_eq!(key().open(CHANNEL, b"", MAX), Err(EnvelopeError::Truncated));
        assert_eq!(
            key().open(CHANNEL, b"hello world", MAX),
            Err(EnvelopeError::Version(b'h'))
        );
        // A version 1 envelope, as earlier nodes (and forgers) wrote them.
        assert_eq!(
            key().open(CHANNEL, &[1, GROUP, 1, 0, 0, 5, 0, b'l'], MAX),
            Err(EnvelopeError::Version(1))
        );
        assert_eq!(
            key().open(CHANNEL, &[2; OVERHEAD - 1], MAX),
            Err(EnvelopeError::Truncated)
        );
        assert_eq!(
            key().open(CHANNEL, &[2; OVERHEAD + 10], MAX),
            Err(EnvelopeError::Forged)
        );
    }

    #[test]
    fn malformed_authentic_envelopes_are_refused() {
        let secret = ClusterSecret::new("a test secret, 32 bytes long...!").unwrap();
        let open = |envelope: &[u8]| {
            let payload = fuzzing::append_mac(&secret, CHANNEL, envelope);
            key().open(CHANNEL, &payload, MAX)
        };
        let header = |kind: u8, flags: u8| {
            let mut header = vec![VERSION, kind, 1, 0, flags];
            header.extend_from_slice(&[0; 16]);
            header
        };
        assert_eq!(open(&header(9, 0)), Err(EnvelopeError::Kind(9)));
        assert_eq!(open(&header(GROUP_FRAMES, 2)), Err(EnvelopeError::Flags(2)));
        assert_eq!(open(&header(GROUP, 2)), Err(EnvelopeError::Flags(2)));
        assert_eq!(open(&header(KICK, 1)), Err(EnvelopeError::Flags(1)));
        assert_eq!(open(&header(PRESENCE, 1)), Err(EnvelopeError::Flags(1)));
        assert_eq!(
            open(&[header(PRESENCE, 0), vec![1, 0, b'a', 1, 2]].concat()),
            Err(EnvelopeError::Truncated)
        );
        assert_eq!(
            open(&[header(USER, 0), vec![2, 0, b'a', b'\n']].concat()),
            Err(EnvelopeError::User)
        );
        assert_eq!(open(&header(GROUP, 0)), Err(EnvelopeError::Truncated));
        assert_eq!(
            open(&[header(GROUP, 0), vec![5, 0, b'a']].concat()),
            Err(EnvelopeError::Truncated)
        );
        assert_eq!(
            open(&[header(GROUP, 0), vec![1, 0, 0xff]].concat()),
            Err(EnvelopeError::Utf8)
        );
        assert_eq!(
            open(&[header(CONNECTION, 0), vec![1]].concat()),
            Err(EnvelopeError::Truncated)
        );
        assert_eq!(
            open(&[header(KICK, 0), vec![1; 8], vec![0xc3]].concat()),
            Err(EnvelopeError::Utf8)
        );
        assert!(open(&header(EVERYONE, 0)).is_ok());
    }
}
