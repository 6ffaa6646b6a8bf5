//! [`ClusterSecret`]: the key every node of a cluster shares, under which
//! each envelope carries a MAC.

use std::fmt;

use zeroize::Zeroizing;

/// The shortest secret accepted, in bytes.
pub const MIN_SECRET_LEN: usize = 16;

/// The key the nodes of one cluster share: every envelope a node publishes
/// carries an HMAC-SHA256 under it, and a node delivers only envelopes whose
/// MAC it verifies. Anyone who holds it can speak for any node, so keep it
/// as you keep a password; give it 32 random bytes (at least 16).
///
/// Its bytes are wiped when it is dropped, and never printed (`Debug` shows
/// `ClusterSecret(<redacted>)`).
#[derive(Clone)]
pub struct ClusterSecret(Zeroizing<Vec<u8>>);

/// A cluster secret shorter than [`MIN_SECRET_LEN`] bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a cluster secret needs at least {MIN_SECRET_LEN} bytes, got {0}")]
pub struct SecretTooShort(pub usize);

impl ClusterSecret {
    /// The secret `bytes` (at least [`MIN_SECRET_LEN`] of them: 32 random
    /// bytes is the right size). A `String` or `Vec<u8>` is taken without a
    /// copy, and wiped with the secret.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<Self, SecretTooShort> {
        let bytes = Zeroizing::new(bytes.into());
        if bytes.len() < MIN_SECRET_LEN {
            return Err(SecretTooShort(bytes.len()));
        }
        Ok(Self(bytes))
    }

    pub(crate) fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClusterSecret(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_secrets_are_refused() {
        assert_eq!(ClusterSecret::new("").unwrap_err(), SecretTooShort(0));
        assert_eq!(
            ClusterSecret::new("fifteen bytes!!").unwrap_err(),
            SecretTooShort(15)
        );
        assert!(ClusterSecret::new("sixteen bytes!!!").is_ok());
    }

    #[test]
    fn debug_does_not_show_the_secret() {
        let secret = ClusterSecret::new("correct horse battery staple").unwrap();
        assert_eq!(format!("{secret:?}"), "ClusterSecret(<redacted>)");
    }
}
