//! How a [`BackplaneMessage`] travels in a Redis message: a small envelope
//! around the encoded push frame, which is carried as it is.
//!
//! ```text
//! version  u8      1
//! kind     u8      1 group, 2 everyone, 3 connection, 4 kick
//! origin   u16 LE  the publishing node
//! flags    u8      bit 0: droppable
//! group:      name length u16 LE, name (UTF-8), frame
//! everyone:   frame
//! connection: connection id u64 LE, frame
//! kick:       connection id u64 LE, reason (UTF-8)
//! ```
//!
//! The frame is the hub's encoded push (header + body, no length prefix,
//! never sealed); on the receiving node it is a view of the received
//! buffer, shared by every local member.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use ternio::{BackplaneMessage, ConnectionId};

const VERSION: u8 = 1;
const GROUP: u8 = 1;
const EVERYONE: u8 = 2;
const CONNECTION: u8 = 3;
const KICK: u8 = 4;
const DROPPABLE: u8 = 1;
const FIXED_LEN: usize = 5;

/// A message read from Redis: who sent it, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Envelope {
    pub(crate) origin: u16,
    pub(crate) message: BackplaneMessage,
}

/// Why a Redis message is not one of ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EnvelopeError {
    #[error("the message is truncated")]
    Truncated,
    #[error("unknown envelope version {0}")]
    Version(u8),
    #[error("unknown message kind {0}")]
    Kind(u8),
    #[error("a name or reason is not UTF-8")]
    Utf8,
}

/// Encodes `message` from node `origin`.
pub(crate) fn encode(origin: u16, message: &BackplaneMessage) -> Vec<u8> {
    let (kind, droppable, extra, frame_len) = match message {
        BackplaneMessage::Group {
            group,
            frame,
            droppable,
        } => (GROUP, *droppable, 2 + group.len(), frame.len()),
        BackplaneMessage::Everyone { frame, droppable } => (EVERYONE, *droppable, 0, frame.len()),
        BackplaneMessage::Connection {
            frame, droppable, ..
        } => (CONNECTION, *droppable, 8, frame.len()),
        BackplaneMessage::Kick { reason, .. } => (KICK, false, 8, reason.len()),
    };
    let mut out = Vec::with_capacity(FIXED_LEN + extra + frame_len);
    out.put_u8(VERSION);
    out.put_u8(kind);
    out.put_u16_le(origin);
    out.put_u8(if droppable { DROPPABLE } else { 0 });
    match message {
        BackplaneMessage::Group { group, frame, .. } => {
            // Group names are far shorter than 64 KiB; a longer one is cut
            // to the limit, which no member's name matches.
            let name = &group.as_bytes()[..group.len().min(usize::from(u16::MAX))];
            out.put_u16_le(name.len() as u16);
            out.put_slice(name);
            out.put_slice(frame);
        }
        BackplaneMessage::Everyone { frame, .. } => out.put_slice(frame),
        BackplaneMessage::Connection { id, frame, .. } => {
            out.put_u64_le(id.0);
            out.put_slice(frame);
        }
        BackplaneMessage::Kick { id, reason } => {
            out.put_u64_le(id.0);
            out.put_slice(reason.as_bytes());
        }
    }
    out
}

/// Decodes a Redis message's payload, copied once into a buffer that the
/// frame then shares.
pub(crate) fn decode(payload: &[u8]) -> Result<Envelope, EnvelopeError> {
    let mut bytes = BytesMut::from(payload).freeze();
    if bytes.len() < FIXED_LEN {
        return Err(EnvelopeError::Truncated);
    }
    let version = bytes.get_u8();
    if version != VERSION {
        return Err(EnvelopeError::Version(version));
    }
    let kind = bytes.get_u8();
    let origin = bytes.get_u16_le();
    let droppable = bytes.get_u8() & DROPPABLE != 0;
    let message = match kind {
        GROUP => {
            if bytes.len() < 2 {
                return Err(EnvelopeError::Truncated);
            }
            let len = usize::from(bytes.get_u16_le());
            if bytes.len() < len {
                return Err(EnvelopeError::Truncated);
            }
            let name = bytes.split_to(len);
            let group = std::str::from_utf8(&name).map_err(|_| EnvelopeError::Utf8)?;
            BackplaneMessage::Group {
                group: group.into(),
                frame: bytes,
                droppable,
            }
        }
        EVERYONE => BackplaneMessage::Everyone {
            frame: bytes,
            droppable,
        },
        CONNECTION => BackplaneMessage::Connection {
            id: connection_id(&mut bytes)?,
            frame: bytes,
            droppable,
        },
        KICK => {
            let id = connection_id(&mut bytes)?;
            let reason = String::from_utf8(bytes.to_vec()).map_err(|_| EnvelopeError::Utf8)?;
            BackplaneMessage::Kick { id, reason }
        }
        other => return Err(EnvelopeError::Kind(other)),
    };
    Ok(Envelope { origin, message })
}

fn connection_id(bytes: &mut Bytes) -> Result<ConnectionId, EnvelopeError> {
    if bytes.len() < 8 {
        return Err(EnvelopeError::Truncated);
    }
    Ok(ConnectionId(bytes.get_u64_le()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(message: BackplaneMessage) {
        let encoded = encode(513, &message);
        let decoded = decode(&encoded).expect("decodes");
        assert_eq!(
            decoded,
            Envelope {
                origin: 513,
                message
            }
        );
    }

    #[test]
    fn every_kind_round_trips() {
        let frame = Bytes::from_static(b"\x01\x02\x00\x00\x00\x00\x00body");
        round_trip(BackplaneMessage::Group {
            group: "lobby".into(),
            frame: frame.clone(),
            droppable: true,
        });
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
    }

    #[test]
    fn foreign_payloads_are_refused() {
        assert_eq!(decode(b""), Err(EnvelopeError::Truncated));
        assert_eq!(decode(b"hello world"), Err(EnvelopeError::Version(b'h')));
        assert_eq!(decode(&[1, 9, 0, 0, 0]), Err(EnvelopeError::Kind(9)));
        assert_eq!(
            decode(&[1, GROUP, 0, 0, 0, 5, 0, b'a']),
            Err(EnvelopeError::Truncated)
        );
        assert_eq!(
            decode(&[1, CONNECTION, 0, 0, 0, 1]),
            Err(EnvelopeError::Truncated)
        );
    }
}
