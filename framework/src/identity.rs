//! The server's identity: a static X25519 key pair that clients pin for
//! `Noise_NK` handshakes, and the file that holds it.

use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;

use pem_rfc7468::LineEnding;
use ternio_protocol::secure::{self, KEY_LEN, StaticKeypair};
use zeroize::Zeroizing;

/// A server's static key pair. Clients pin its [`public_hex`](Self::public_hex).
///
/// Its file holds the private key as 64 hex digits, as [`save`](Self::save)
/// writes it, or as an unencrypted PKCS#8 PEM `PRIVATE KEY`, as
/// [`save_pem`](Self::save_pem) and `openssl genpkey -algorithm X25519`
/// write it. Saving creates the file atomically, readable by its owner only
/// (mode 0600 on Unix), and never replaces an existing one; loading warns
/// when group or others may read or write it. This copy of the private key
/// is zeroized when the identity is dropped.
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

    /// Reads an identity saved by [`save`](Self::save) or
    /// [`save_pem`](Self::save_pem), or written by
    /// `openssl genpkey -algorithm X25519`.
    ///
    /// On Unix, logs a warning when group or others may read or write the
    /// file.
    pub fn load(path: impl AsRef<Path>) -> io::Result<Self> {
        let path = path.as_ref();
        let contents = File::open(path)
            .and_then(|mut file| {
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    let mode = file.metadata()?.permissions().mode();
                    if let Some(problem) = permission_problem(path, mode) {
                        tracing::warn!("{problem}");
                    }
                }
                read_small(&mut file)
            })
            .map_err(|error| with_path(path, error))?;
        let private = parse_key(&contents).map_err(|why| invalid_data(path, why))?;
        Ok(Self::from_private_key(*private))
    }

    /// Writes the private key as hex to a new file at `path` (mode 0600 on
    /// Unix). Fails with `AlreadyExists` if the file exists: an identity is
    /// never overwritten.
    ///
    /// The key is written to a temporary file in the same directory, synced,
    /// then linked into place and the directory synced: a crash leaves no
    /// file at `path` or a complete one, never a partial one.
    pub fn save(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let hex = Zeroizing::new(secure::to_hex(self.keypair.private()));
        // Its final size from the start: a buffer that grows leaves the
        // key in the block it was moved out of, which nothing wipes.
        let mut text = Zeroizing::new(Vec::with_capacity(hex.len() + 1));
        text.extend_from_slice(hex.as_bytes());
        text.push(b'\n');
        let path = path.as_ref();
        write_new(path, &text).map_err(|error| with_path(path, error))
    }

    /// As [`save`](Self::save), in the PEM form of
    /// `openssl genpkey -algorithm X25519`: an unencrypted PKCS#8
    /// `PRIVATE KEY`, which OpenSSL and other tools read.
    pub fn save_pem(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let mut der = Zeroizing::new([0u8; PKCS8_X25519_LEN]);
        der[..PKCS8_X25519_PREFIX.len()].copy_from_slice(&PKCS8_X25519_PREFIX);
        der[PKCS8_X25519_PREFIX.len()..].copy_from_slice(self.keypair.private());
        let mut buffer = Zeroizing::new([0u8; 128]);
        let pem = pem_rfc7468::encode(PEM_LABEL, LineEnding::LF, &*der, &mut *buffer)
            .expect("a 48-byte document fits in 128 bytes of PEM");
        let path = path.as_ref();
        write_new(path, pem.as_bytes()).map_err(|error| with_path(path, error))
    }

    /// Loads the identity at `path`, or creates and saves a new one there
    /// when no file exists.
    ///
    /// A file that exists but cannot be read or does not hold a key is an
    /// error, never replaced: clients pinned its key. When another process
    /// creates the file first, its identity is loaded.
    pub fn load_or_generate(path: impl AsRef<Path>) -> io::Result<Self> {
        let path = path.as_ref();
        match Self::load(path) {
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                let identity = Self::generate();
                match identity.save(path) {
                    Ok(()) => Ok(identity),
                    // Another process saved its identity first: use that one.
                    Err(error) if error.kind() == io::ErrorKind::AlreadyExists => Self::load(path),
                    Err(error) => Err(error),
                }
            }
            other => other,
        }
    }
}

/// What is wrong with an identity file of `mode`, if anything: group or
/// others may read it (and learn the key) or write it (and put in a key
/// they know).
#[cfg(unix)]
fn permission_problem(path: &Path, mode: u32) -> Option<String> {
    (mode & 0o077 != 0).then(|| {
        format!(
            "identity key file {path} has mode {mode:03o}: group or others may read or \
             change the server's private key; run `chmod 600 {path}`",
            path = path.display(),
            mode = mode & 0o777,
        )
    })
}

/// The PEM label of an unencrypted PKCS#8 private key (RFC 7468).
const PEM_LABEL: &str = "PRIVATE KEY";

/// The DER of a PKCS#8 X25519 private key (RFC 5208, RFC 8410) up to the
/// key itself: `SEQUENCE` (46 bytes) { `INTEGER` 0 (version 1),
/// `SEQUENCE` { `OID` 1.3.101.110 (X25519) }, `OCTET STRING` (34 bytes)
/// { `OCTET STRING` (32 bytes) } }. DER has one encoding for each value,
/// so this is the only form of such a key without the optional attributes
/// and public key, and it is the form `openssl genpkey` writes.
const PKCS8_X25519_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x6e, 0x04, 0x22, 0x04, 0x20,
];
/// Bytes of that DER document: the prefix and the key.
const PKCS8_X25519_LEN: usize = PKCS8_X25519_PREFIX.len() + KEY_LEN;

/// The private key in the contents of an identity file: 64 hex digits, or
/// a PEM PKCS#8 X25519 key. The error says what the contents are instead.
fn parse_key(contents: &[u8]) -> Result<Zeroizing<[u8; KEY_LEN]>, String> {
    let text = contents.trim_ascii();
    if text.is_empty() {
        return Err(
            "is empty: delete it to make a new identity (which clients must then pin)".into(),
        );
    }
    if text.starts_with(b"-----BEGIN ") {
        return key_from_pem(text);
    }
    std::str::from_utf8(text)
        .ok()
        .and_then(secure::key_from_hex)
        .map(Zeroizing::new)
        .ok_or_else(|| {
            "holds neither 64 hex digits nor a PEM X25519 private key \
             (as `openssl genpkey -algorithm X25519` writes)"
                .into()
        })
}

/// The private key of a PEM PKCS#8 X25519 key.
fn key_from_pem(pem: &[u8]) -> Result<Zeroizing<[u8; KEY_LEN]>, String> {
    // Decoded, PEM is shorter than its text: one buffer, wiped afterwards.
    let mut buffer = Zeroizing::new(vec![0u8; pem.len()]);
    let (label, der) = pem_rfc7468::decode(pem, &mut buffer)
        .map_err(|error| format!("is not valid PEM: {error}"))?;
    if label != PEM_LABEL {
        return Err(format!(
            "holds a PEM \"{label}\", not an unencrypted \"{PEM_LABEL}\" (PKCS#8)"
        ));
    }
    key_from_pkcs8(der)
}

/// The private key of a PKCS#8 X25519 key in DER.
fn key_from_pkcs8(der: &[u8]) -> Result<Zeroizing<[u8; KEY_LEN]>, String> {
    if let Some(key) = der.strip_prefix(&PKCS8_X25519_PREFIX)
        && key.len() == KEY_LEN
    {
        let mut private = Zeroizing::new([0u8; KEY_LEN]);
        private.copy_from_slice(key);
        return Ok(private);
    }
    // The RFC 8410 algorithms share the prefix up to the last OID byte.
    let algorithm = match der.get(5..12) {
        Some([0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, last]) => match last {
            0x6e => Some("X25519"),
            0x6f => Some("X448"),
            0x70 => Some("Ed25519"),
            0x71 => Some("Ed448"),
            _ => None,
        },
        _ => None,
    };
    Err(match algorithm {
        Some("X25519") => format!(
            "holds a PKCS#8 X25519 key of {} bytes, not the {PKCS8_X25519_LEN} bytes \
             `openssl genpkey -algorithm X25519` writes (trailing bytes, attributes \
             or an embedded public key are not accepted)",
            der.len()
        ),
        Some(other) => format!("holds a PKCS#8 {other} key, not an X25519 one"),
        None => "holds PEM that is not a PKCS#8 X25519 private key".into(),
    })
}

/// Largest identity file read: a key in any accepted format is far smaller.
const MAX_FILE_LEN: usize = 4096;

/// Reads a whole file of at most [`MAX_FILE_LEN`] bytes into one buffer that
/// is never reallocated (which would leave copies of the key behind) and is
/// zeroized when dropped.
fn read_small(file: &mut File) -> io::Result<Zeroizing<Vec<u8>>> {
    let mut buffer = Zeroizing::new(vec![0u8; MAX_FILE_LEN + 1]);
    let mut len = 0;
    while len < buffer.len() {
        match file.read(&mut buffer[len..]) {
            Ok(0) => break,
            Ok(read) => len += read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    if len > MAX_FILE_LEN {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {MAX_FILE_LEN} bytes, not an identity key file"),
        ));
    }
    buffer.truncate(len);
    Ok(buffer)
}

/// `error`, of the same kind, with `path` in front of its message.
fn with_path(path: &Path, error: io::Error) -> io::Error {
    io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}

/// An `InvalidData` error: "`path` `why`".
fn invalid_data(path: &Path, why: impl fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{} {why}", path.display()),
    )
}

/// Creates `path` holding `contents`, atomically and without replacing an
/// existing file.
///
/// The contents go to a new temporary file with a random name in the same
/// directory (mode 0600 from creation on Unix), which is synced and then
/// given its final name with `renameat2(RENAME_NOREPLACE)` or, where that is
/// missing, a hard link and an unlink of the temporary name (`tempfile`'s
/// `persist_noclobber`): both fail if `path` exists. The directory is synced
/// last so that the new name survives a crash. A temporary file left by a
/// crash does not stand in the way of a later save (names are random).
fn write_new(path: &Path, contents: &[u8]) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut prefix = OsString::from(".");
    prefix.push(name);
    prefix.push(".");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600));
    // Dropped on any error below, the temporary file is removed.
    let mut temp = builder.tempfile_in(dir)?;
    #[cfg(test)]
    tests::crash_point("created");
    temp.write_all(contents)?;
    #[cfg(test)]
    tests::crash_point("written");
    temp.as_file().sync_all()?;
    #[cfg(test)]
    tests::crash_point("synced");
    temp.persist_noclobber(path).map_err(|error| error.error)?;
    #[cfg(test)]
    tests::crash_point("linked");
    #[cfg(unix)]
    File::open(dir)?.sync_all()?;
    Ok(())
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
    use std::process::{Command, Stdio};

    /// In a child process of `a_crash_at_any_step_leaves_no_key_or_a_whole_one`:
    /// the step of [`write_new`] at which it exits.
    const CRASH_AT: &str = "TERNIO_IDENTITY_TEST_CRASH_AT";
    /// The path that child saves to.
    const CRASH_PATH: &str = "TERNIO_IDENTITY_TEST_CRASH_PATH";
    /// The exit status of a child that reached its crash point.
    const CRASHED: i32 = 86;

    /// Exits at once, as a crash would (no destructor runs, so the
    /// temporary file stays), when this process was told to at `step`.
    pub(super) fn crash_point(step: &str) {
        if std::env::var_os(CRASH_AT).is_some_and(|at| at == step) {
            std::process::exit(CRASHED);
        }
    }

    /// Not a test on its own: in a child process, a save that crashes at
    /// the step named by [`CRASH_AT`].
    #[test]
    fn child_crashing_save() {
        let Some(path) = std::env::var_os(CRASH_PATH) else {
            return;
        };
        Identity::generate().save(path).unwrap();
    }

    #[test]
    fn a_crash_at_any_step_leaves_no_key_or_a_whole_one() {
        for (step, key_visible) in [
            ("created", false),
            ("written", false),
            ("synced", false),
            ("linked", true),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("server.key");
            let status = Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "identity::tests::child_crashing_save"])
                .env(CRASH_AT, step)
                .env(CRASH_PATH, &path)
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert_eq!(status.code(), Some(CRASHED), "crashed at {step}");
            assert_eq!(path.exists(), key_visible, "after a crash at {step}");
            if key_visible {
                Identity::load(&path).unwrap();
            }
            // What the crash left does not stop the next start.
            let identity = Identity::load_or_generate(&path).unwrap();
            assert_eq!(
                Identity::load(&path).unwrap().public_key(),
                identity.public_key()
            );
        }
    }

    /// The names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn save_load_and_refuse_to_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.key");
        let created = Identity::load_or_generate(&path).unwrap();
        let loaded = Identity::load_or_generate(&path).unwrap();
        assert_eq!(created.public_key(), loaded.public_key());
        assert_eq!(created.public_hex().len(), 64);
        let saved = std::fs::read(&path).unwrap();
        assert_eq!(saved.len(), 65, "64 hex digits and a newline");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let other = Identity::generate();
        assert_eq!(
            other.save(&path).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists,
            "an existing identity is never overwritten"
        );
        assert_eq!(std::fs::read(&path).unwrap(), saved);
        assert_eq!(
            names(dir.path()),
            ["server.key"],
            "no temporary file is left behind, after success or failure"
        );
    }

    #[test]
    fn a_path_without_a_file_name_is_refused() {
        assert_eq!(
            Identity::generate().save("/").unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }

    #[test]
    fn stale_temporary_files_do_not_block_a_save() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.key");
        // What a crash between creating and renaming leaves: half a key
        // under a temporary name of the same shape as ours.
        let stale = [".server.key.AAAAAA.tmp", ".server.key.tmp", ".server.key."];
        for name in stale {
            std::fs::write(dir.path().join(name), "0123456789abcdef").unwrap();
        }
        let identity = Identity::generate();
        identity.save(&path).unwrap();
        assert_eq!(
            Identity::load(&path).unwrap().public_key(),
            identity.public_key()
        );
        let mut expected: Vec<_> = stale.iter().map(|name| name.to_string()).collect();
        expected.push("server.key".into());
        expected.sort();
        assert_eq!(names(dir.path()), expected, "stale files are left alone");
    }

    #[test]
    fn an_existing_file_that_is_not_a_key_is_an_error_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.key");
        for contents in ["", "\n", "not a key", "ab".repeat(31).as_str()] {
            std::fs::write(&path, contents).unwrap();
            let error = Identity::load_or_generate(&path).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{contents:?}");
            assert!(error.to_string().contains("server.key"), "{error}");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), contents);
        }
        std::fs::write(&path, vec![b'0'; MAX_FILE_LEN + 1]).unwrap();
        let error = Identity::load_or_generate(&path).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(error.to_string().contains("server.key"), "{error}");
        // Unreadable: a directory where the file should be (a mode of 000
        // would not do, tests may run as root).
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert_ne!(
            Identity::load_or_generate(&path).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert!(path.is_dir());
        assert_eq!(names(dir.path()), ["server.key"]);
    }

    #[cfg(unix)]
    #[test]
    fn group_or_other_access_is_a_problem_owner_access_is_not() {
        let path = Path::new("/srv/server.key");
        for mode in [0o600, 0o400, 0o200, 0o100600] {
            assert_eq!(permission_problem(path, mode), None, "{mode:o}");
        }
        for mode in [0o640, 0o604, 0o620, 0o602, 0o610, 0o666, 0o100644] {
            let problem = permission_problem(path, mode).expect("a problem");
            assert!(
                problem.contains(&format!("mode {:03o}", mode & 0o777))
                    && problem.contains("`chmod 600 /srv/server.key`"),
                "{problem}"
            );
        }
    }

    /// A `tracing` writer into a shared buffer.
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// What `tracing` logs while `f` runs on this thread.
    fn logs_of<T>(f: impl FnOnce() -> T) -> (T, String) {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let result = tracing::subscriber::with_default(subscriber, f);
        let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        (result, logs)
    }

    #[cfg(unix)]
    #[test]
    fn loading_a_file_others_can_read_warns_how_to_fix_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.key");
        Identity::generate().save(&path).unwrap();
        let (loaded, logs) = logs_of(|| Identity::load(&path));
        loaded.unwrap();
        assert_eq!(logs, "", "mode 0600: nothing to say");

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let (loaded, logs) = logs_of(|| Identity::load(&path));
        loaded.unwrap();
        assert!(
            logs.contains("WARN")
                && logs.contains("mode 644")
                && logs.contains(&format!("chmod 600 {}", path.display())),
            "{logs}"
        );
    }

    #[test]
    fn hex_with_surrounding_whitespace_loads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.key");
        let identity = Identity::generate();
        let hex = secure::to_hex(identity.keypair().private());
        std::fs::write(&path, format!("  {}\r\n\n", hex.to_uppercase())).unwrap();
        assert_eq!(
            Identity::load(&path).unwrap().public_key(),
            identity.public_key()
        );
    }
}
