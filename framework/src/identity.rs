//! The server's identity: a static X25519 key pair that clients pin for
//! `Noise_NK` handshakes.

use std::fmt;
use std::io::{self, Write};
use std::path::Path;

use ternio_protocol::secure::{self, KEY_LEN, StaticKeypair};
use zeroize::Zeroizing;

/// A server's static key pair. Clients pin its [`public_hex`](Self::public_hex).
///
/// Stored as a text file holding the private key in 64 hex digits; on Unix
/// the file is created readable by its owner only (mode 0600).
#[derive(Clone)]
pub struct Identity {
    keypair: StaticKeypair,
}

impl Identity {
    /// A new random identity.
    pub fn generate() -> Self {
        Self {
            keypair: StaticKeypair::generate(),
        }
    }

    /// The identity of a private key.
    pub fn from_private_key(private: [u8; KEY_LEN]) -> Self {
        Self {
            keypair: StaticKeypair::from_private(private),
        }
    }

    /// The public key.
    pub fn public_key(&self) -> &[u8; KEY_LEN] {
        self.keypair.public()
    }

    /// The public key as 64 lower-case hex digits.
    pub fn public_hex(&self) -> String {
        secure::to_hex(self.keypair.public())
    }

    pub(crate) fn keypair(&self) -> &StaticKeypair {
        &self.keypair
    }

    /// Reads an identity saved by [`save`](Self::save).
    pub fn load(path: impl AsRef<Path>) -> io::Result<Self> {
        let text = Zeroizing::new(std::fs::read_to_string(path.as_ref())?);
        let private = secure::key_from_hex(&text).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} does not hold a 64-digit hex key",
                    path.as_ref().display()
                ),
            )
        })?;
        Ok(Self::from_private_key(private))
    }

    /// Writes the private key as hex to a new file at `path` (mode 0600 on
    /// Unix). Fails if the file exists: an identity is never overwritten.
    pub fn save(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(path)?;
        let text = Zeroizing::new(secure::to_hex(self.keypair.private()));
        file.write_all(text.as_bytes())?;
        file.write_all(b"\n")?;
        file.sync_all()
    }

    /// Loads the identity at `path`, or creates and saves a new one there
    /// when the file does not exist.
    pub fn load_or_generate(path: impl AsRef<Path>) -> io::Result<Self> {
        let path = path.as_ref();
        match Self::load(path) {
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                let identity = Self::generate();
                identity.save(path)?;
                Ok(identity)
            }
            other => other,
        }
    }
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("public", &self.public_hex())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_load_and_refuse_to_overwrite() {
        let dir = std::env::temp_dir().join(format!("ternio-identity-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("server.key");
        let _ = std::fs::remove_file(&path);
        let created = Identity::load_or_generate(&path).unwrap();
        let loaded = Identity::load_or_generate(&path).unwrap();
        assert_eq!(created.public_key(), loaded.public_key());
        assert_eq!(created.public_hex().len(), 64);
        assert!(
            created.save(&path).is_err(),
            "an existing identity is never overwritten"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(&path, "not a key").unwrap();
        assert_eq!(
            Identity::load(&path).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
