//! Who is behind a connection: a [`UserId`], set by a login handler with
//! [`ConnectionHandle::sign_in`](crate::ConnectionHandle::sign_in), and
//! what names the cluster-wide name registry accepts. A leaf: it depends on
//! nothing in the crate.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// The longest user id or registered name, in bytes.
pub const MAX_NAME_LEN: usize = 128;

/// The id of a signed-in user: 1 to [`MAX_NAME_LEN`] bytes of UTF-8 with
/// no control character. Cheap to clone (one reference count).
///
/// A user may have several connections at once (a phone and a browser, on
/// different nodes): [`Hub::send_user`](crate::Hub::send_user) reaches
/// them all.
///
/// ```
/// use ternio::UserId;
///
/// let user = UserId::new("player-42").unwrap();
/// assert_eq!(user.as_str(), "player-42");
/// assert!(UserId::new("").is_err());
/// assert!(UserId::new("tab\there").is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UserId(Arc<str>);

impl UserId {
    /// `id` as a user id, if it is 1 to [`MAX_NAME_LEN`] bytes with no
    /// control character.
    pub fn new(id: impl AsRef<str>) -> Result<Self, InvalidName> {
        let id = id.as_ref();
        check_name(id)?;
        Ok(Self(id.into()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for UserId {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for UserId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for UserId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl TryFrom<&str> for UserId {
    type Error = InvalidName;

    fn try_from(id: &str) -> Result<Self, InvalidName> {
        Self::new(id)
    }
}

impl TryFrom<String> for UserId {
    type Error = InvalidName;

    fn try_from(id: String) -> Result<Self, InvalidName> {
        Self::new(id)
    }
}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

/// Why a text is not a valid [`UserId`] or registered name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidName {
    /// Empty.
    #[error("a name or user id cannot be empty")]
    Empty,
    /// Longer than [`MAX_NAME_LEN`] bytes.
    #[error("a name or user id has at most {MAX_NAME_LEN} bytes, this one has {0}")]
    TooLong(usize),
    /// Holds a control character (a newline, a tab, a NUL…).
    #[error("a name or user id cannot hold control characters")]
    ControlCharacter,
}

/// Whether `name` is 1 to [`MAX_NAME_LEN`] bytes with no control character.
pub(crate) fn check_name(name: &str) -> Result<(), InvalidName> {
    if name.is_empty() {
        return Err(InvalidName::Empty);
    }
    if name.len() > MAX_NAME_LEN {
        return Err(InvalidName::TooLong(name.len()));
    }
    if name.chars().any(char::is_control) {
        return Err(InvalidName::ControlCharacter);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_ids_are_bounded_printable_text() {
        assert_eq!(UserId::new("ann").unwrap().to_string(), "ann");
        assert_eq!(UserId::new("é".repeat(64)).unwrap().len(), 128);
        assert_eq!(UserId::new("a".repeat(129)), Err(InvalidName::TooLong(129)));
        assert_eq!(UserId::new(""), Err(InvalidName::Empty));
        assert_eq!(UserId::new("a\nb"), Err(InvalidName::ControlCharacter));
        assert_eq!(UserId::new("a\u{7f}"), Err(InvalidName::ControlCharacter));
    }
}
