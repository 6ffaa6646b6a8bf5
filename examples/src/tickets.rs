//! Token login, a recipe: a login ticket signed with HMAC-SHA256, which a
//! login service hands the client and a [`Login`] request presents; the
//! handler checks it and signs the connection in with
//! [`ConnectionHandle::sign_in`](ternio::ConnectionHandle::sign_in).
//!
//! A ticket is text, `v1.<user>.<expiry>.<mac>`:
//!
//! - `user`: the user id's UTF-8 bytes in lowercase hex (so that no user
//!   id can hold the separator);
//! - `expiry`: the moment it stops being valid, in seconds since the Unix
//!   epoch, in decimal;
//! - `mac`: HMAC-SHA256, under the secret the login service and the
//!   servers share, of the text before it (`v1.<user>.<expiry>`), in
//!   lowercase hex (64 digits).
//!
//! [`TicketKey::verify`] refuses a ticket longer than [`MAX_TICKET_LEN`],
//! then checks the MAC in constant time before it reads anything else, then
//! the expiry. A ticket is a bearer credential until it expires: keep the
//! lifetime short (a minute or so: it is only presented at login), and send
//! it over TLS or a secure session. A JWT checked with a well-kept crate
//! (`jsonwebtoken`) fits the same handler, when the tokens come from an
//! identity provider.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//!
//! use ternio::UserId;
//! use ternio_examples::tickets::{TicketError, TicketKey};
//!
//! let key = TicketKey::new(b"a secret of 32 bytes or more, from a vault").unwrap();
//! let ann = UserId::new("ann").unwrap();
//! let now = SystemTime::now();
//! let ticket = key.issue(&ann, now + Duration::from_secs(60));
//! assert_eq!(key.verify(&ticket, now), Ok(ann));
//! assert_eq!(key.verify(&ticket, now + Duration::from_secs(61)), Err(TicketError::Expired));
//! ```

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use ternio::users::MAX_NAME_LEN;
use ternio::{Context, ErrorCode, HandlerError, Packet, State, UserId, packet_controller};

/// The shortest secret [`TicketKey::new`] accepts, in bytes.
pub const MIN_SECRET_LEN: usize = 32;

/// The longest ticket [`TicketKey::verify`] reads, in bytes: a user id of
/// [`MAX_NAME_LEN`] bytes, the largest expiry, and the separators.
pub const MAX_TICKET_LEN: usize = VERSION.len() + 1 + 2 * MAX_NAME_LEN + 1 + 20 + 1 + 2 * MAC_LEN;

/// The format's version, the ticket's first field.
const VERSION: &str = "v1";

/// The MAC's length in bytes.
const MAC_LEN: usize = 32;

/// The key that issues and checks tickets: the secret the login service
/// and every server share.
#[derive(Clone)]
pub struct TicketKey {
    mac: Hmac<Sha256>,
}

impl TicketKey {
    /// A key from `secret`, of at least [`MIN_SECRET_LEN`] random bytes.
    pub fn new(secret: &[u8]) -> Result<Self, ShortSecret> {
        if secret.len() < MIN_SECRET_LEN {
            return Err(ShortSecret(secret.len()));
        }
        let mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
        Ok(Self { mac })
    }

    /// A ticket for `user`, valid until `expires_at` (to the second, rounded
    /// down).
    pub fn issue(&self, user: &UserId, expires_at: SystemTime) -> String {
        let signed = format!(
            "{VERSION}.{}.{}",
            hex(user.as_bytes()),
            unix_seconds(expires_at)
        );
        let mut mac = self.mac.clone();
        mac.update(signed.as_bytes());
        let tag = mac.finalize().into_bytes();
        format!("{signed}.{}", hex(&tag))
    }

    /// The user `ticket` was issued for, if this key signed it and it has
    /// not expired at `now`.
    pub fn verify(&self, ticket: &str, now: SystemTime) -> Result<UserId, TicketError> {
        if ticket.len() > MAX_TICKET_LEN {
            return Err(TicketError::TooLong);
        }
        let (signed, tag) = ticket.rsplit_once('.').ok_or(TicketError::Malformed)?;
        let tag = unhex(tag).ok_or(TicketError::Malformed)?;
        if tag.len() != MAC_LEN {
            return Err(TicketError::Malformed);
        }
        let mut mac = self.mac.clone();
        mac.update(signed.as_bytes());
        // Constant time: how much of a forged tag is right does not show.
        mac.verify_slice(&tag)
            .map_err(|_| TicketError::BadSignature)?;
        // Signed by this key: what follows was written by `issue`.
        let mut fields = signed.split('.');
        let (Some(VERSION), Some(user), Some(expiry), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(TicketError::Malformed);
        };
        let user = unhex(user)
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .and_then(|text| UserId::new(text).ok())
            .ok_or(TicketError::Malformed)?;
        let expiry: u64 = expiry.parse().map_err(|_| TicketError::Malformed)?;
        if unix_seconds(now) >= expiry {
            return Err(TicketError::Expired);
        }
        Ok(user)
    }
}

impl fmt::Debug for TicketKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the secret.
        f.write_str("TicketKey(..)")
    }
}

/// A secret shorter than [`MIN_SECRET_LEN`] bytes (its length).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShortSecret(pub usize);

impl fmt::Display for ShortSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a ticket secret needs at least {MIN_SECRET_LEN} bytes, this one has {}",
            self.0
        )
    }
}

impl std::error::Error for ShortSecret {}

/// Why a ticket was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TicketError {
    /// Longer than [`MAX_TICKET_LEN`]: not read at all.
    TooLong,
    /// Not of the ticket's format.
    Malformed,
    /// Its MAC is wrong: forged, altered, or signed with another key.
    BadSignature,
    /// Past its expiry.
    Expired,
}

impl fmt::Display for TicketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::TooLong => "the ticket is too long",
            Self::Malformed => "the ticket is malformed",
            Self::BadSignature => "the ticket's signature is wrong",
            Self::Expired => "the ticket has expired",
        })
    }
}

impl std::error::Error for TicketError {}

/// Seconds since the Unix epoch (0 before it).
fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// `bytes` in lowercase hex.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    text
}

/// The bytes of lowercase hex `text`, if it is that.
fn unhex(text: &str) -> Option<Vec<u8>> {
    fn digit(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    if !text.len().is_multiple_of(2) {
        return None;
    }
    text.as_bytes()
        .chunks_exact(2)
        .map(|pair| Some((digit(pair[0])? << 4) | digit(pair[1])?))
        .collect()
}

/// 0x0400: signs the connection in with a ticket; answered with
/// [`LoggedIn`], or error 3 `UNAUTHORIZED` for a ticket refused.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0400, response = LoggedIn)]
pub struct Login {
    /// The ticket, from [`TicketKey::issue`].
    pub ticket: String,
}

/// 0x0401: the answer to [`Login`].
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0401)]
pub struct LoggedIn {
    /// The user the connection is signed in as now.
    pub user: String,
}

/// Serves [`Login`] with the [`TicketKey`] given to the server as state:
/// `.state(key).controller(TicketController)`.
#[derive(Debug, Default)]
pub struct TicketController;

#[packet_controller(explicit)]
impl TicketController {
    /// Checks the ticket, then signs the connection in as its user. A
    /// ticket refused leaves the connection as it was.
    fn login(
        request: Login,
        ctx: &Context,
        key: State<TicketKey>,
    ) -> Result<LoggedIn, HandlerError> {
        let user = key
            .verify(&request.ticket, SystemTime::now())
            .map_err(|error| HandlerError::new(ErrorCode::Unauthorized, error.to_string()))?;
        ctx.sign_in(user.clone());
        Ok(LoggedIn {
            user: user.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn key() -> TicketKey {
        TicketKey::new(SECRET).unwrap()
    }

    fn at(seconds: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(seconds)
    }

    #[test]
    fn a_ticket_is_version_user_expiry_and_mac() {
        let ticket = key().issue(&UserId::new("ann").unwrap(), at(1_700_000_000));
        let fields: Vec<&str> = ticket.split('.').collect();
        assert_eq!(fields[..3], ["v1", "616e6e", "1700000000"]);
        assert_eq!(fields[3].len(), 64);
        // The MAC of the text before it, with the shared secret.
        let mut mac = Hmac::<Sha256>::new_from_slice(SECRET).unwrap();
        mac.update(b"v1.616e6e.1700000000");
        assert_eq!(fields[3], hex(&mac.finalize().into_bytes()));
    }

    #[test]
    fn a_ticket_is_valid_until_its_expiry() {
        let ann = UserId::new("ann").unwrap();
        let ticket = key().issue(&ann, at(1000));
        assert_eq!(key().verify(&ticket, at(999)), Ok(ann));
        assert_eq!(key().verify(&ticket, at(1000)), Err(TicketError::Expired));
        assert_eq!(key().verify(&ticket, at(5000)), Err(TicketError::Expired));
    }

    #[test]
    fn any_user_id_goes_through_even_with_dots() {
        for id in ["a.b.c", "é".repeat(64).as_str(), "x"] {
            let user = UserId::new(id).unwrap();
            let ticket = key().issue(&user, at(1000));
            assert!(ticket.len() <= MAX_TICKET_LEN);
            assert_eq!(key().verify(&ticket, at(1)), Ok(user));
        }
    }

    #[test]
    fn another_key_or_a_changed_field_breaks_the_signature() {
        let ticket = key().issue(&UserId::new("ann").unwrap(), at(1000));
        let other = TicketKey::new(b"another secret of thirty-two bytes").unwrap();
        assert_eq!(other.verify(&ticket, at(1)), Err(TicketError::BadSignature));
        // Another user ("bob"), a later expiry, another version: each
        // changes the signed text.
        for forged in [
            ticket.replace("616e6e", "626f62"),
            ticket.replace(".1000.", ".9999."),
            ticket.replacen("v1", "v2", 1),
        ] {
            assert_eq!(key().verify(&forged, at(1)), Err(TicketError::BadSignature));
        }
        // A MAC off by one bit.
        let (signed, tag) = ticket.rsplit_once('.').unwrap();
        let mut bytes = unhex(tag).unwrap();
        bytes[31] ^= 1;
        let flipped = format!("{signed}.{}", hex(&bytes));
        assert_eq!(
            key().verify(&flipped, at(1)),
            Err(TicketError::BadSignature)
        );
    }

    #[test]
    fn a_malformed_or_oversized_ticket_is_refused_before_the_mac() {
        let key = key();
        for bad in [
            "",
            "v1",
            "v1.616e6e.1000.",
            "v1.616e6e.1000.zz",
            "v1.616e6e.1000.00",
            &format!("v1.616e6e.1000.{}", "A".repeat(64)),
        ] {
            assert_eq!(
                key.verify(bad, at(1)),
                Err(TicketError::Malformed),
                "{bad:?}"
            );
        }
        let huge = "a".repeat(MAX_TICKET_LEN + 1);
        assert_eq!(key.verify(&huge, at(1)), Err(TicketError::TooLong));
    }

    #[test]
    fn a_signed_ticket_of_the_wrong_shape_is_malformed() {
        // Signed with the key, but not by `issue`: a user id with a newline,
        // an extra field, a bad number.
        let key = key();
        let sign = |signed: &str| {
            let mut mac = key.mac.clone();
            mac.update(signed.as_bytes());
            format!("{signed}.{}", hex(&mac.finalize().into_bytes()))
        };
        for signed in [
            "v1.610a62.1000",
            "v1.616e6e.1000.1",
            "v1.616e6e.-1",
            "v1..1000",
        ] {
            assert_eq!(
                key.verify(&sign(signed), at(1)),
                Err(TicketError::Malformed),
                "{signed}"
            );
        }
        assert_eq!(
            key.verify(&sign("v1.616e6e.1000"), at(1)),
            Ok(UserId::new("ann").unwrap())
        );
    }

    #[test]
    fn a_short_secret_is_refused_and_never_printed() {
        assert_eq!(TicketKey::new(b"short").unwrap_err(), ShortSecret(5));
        assert_eq!(format!("{:?}", key()), "TicketKey(..)");
    }

    #[test]
    fn hex_goes_both_ways() {
        assert_eq!(hex(&[0x00, 0xab, 0xff]), "00abff");
        assert_eq!(unhex("00abff"), Some(vec![0x00, 0xab, 0xff]));
        assert_eq!(unhex("0"), None);
        assert_eq!(unhex("0G"), None);
    }
}
