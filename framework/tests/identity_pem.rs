//! Identity files in PEM: keys written by OpenSSL load with the public key
//! OpenSSL derives, keys we write are read by OpenSSL, and anything but an
//! X25519 PKCS#8 key is refused with a reason.

use std::path::Path;
use std::process::Command;

use ternio::Identity;

/// Runs `openssl` with `args` and returns what it printed.
fn openssl(args: &[&str]) -> Vec<u8> {
    let output = Command::new("openssl")
        .args(args)
        .output()
        .expect("the openssl command, which these tests compare with (Debian: openssl)");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// The X25519 public key OpenSSL derives from the private key in `pem`.
fn openssl_public_key(pem: &Path) -> Vec<u8> {
    let der = openssl(&[
        "pkey",
        "-in",
        pem.to_str().unwrap(),
        "-pubout",
        "-outform",
        "DER",
    ]);
    // SubjectPublicKeyInfo: 12 bytes of header, then the key.
    assert_eq!(der.len(), 44);
    der[12..].to_vec()
}

#[test]
fn a_key_from_openssl_genpkey_loads_with_the_public_key_openssl_derives() {
    let dir = tempfile::tempdir().unwrap();
    for n in 0..3 {
        let path = dir.path().join(format!("openssl-{n}.pem"));
        openssl(&[
            "genpkey",
            "-algorithm",
            "X25519",
            "-out",
            path.to_str().unwrap(),
        ]);
        let identity = Identity::load(&path).unwrap();
        assert_eq!(identity.public_key()[..], openssl_public_key(&path)[..]);
    }
}

#[test]
fn save_pem_writes_what_openssl_writes_for_the_same_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.pem");
    let identity = Identity::generate();
    identity.save_pem(&path).unwrap();
    let ours = std::fs::read(&path).unwrap();
    // OpenSSL re-encodes the key it read: the same bytes, so the same form.
    assert_eq!(openssl(&["pkey", "-in", path.to_str().unwrap()]), ours);
    assert_eq!(identity.public_key()[..], openssl_public_key(&path)[..]);
    assert_eq!(
        Identity::load(&path).unwrap().public_key(),
        identity.public_key()
    );
    assert!(identity.save_pem(&path).is_err(), "never overwritten");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

/// Made by `openssl genpkey -algorithm X25519`; its public key as printed by
/// `openssl pkey -pubout -outform DER | tail -c 32 | xxd -p -c 64`.
const OPENSSL_X25519: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VuBCIEIFgZGc9adLI7jzH6L+3qpcx30dWYdXjlVqOPLk6QZnlp
-----END PRIVATE KEY-----
";
const OPENSSL_X25519_PUBLIC: &str =
    "a8d57a7a736c116d74f2e2368deb816583ffab72da0a88f91722ef59ccc0f27f";

/// `load` of a file holding `contents`.
fn load(contents: &str) -> std::io::Result<Identity> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.key");
    std::fs::write(&path, contents).unwrap();
    Identity::load(&path)
}

/// The message of the error that `load` of `contents` fails with.
fn refusal(contents: &str) -> String {
    let error = load(contents).expect_err("refused");
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidData, "{error}");
    error.to_string()
}

#[test]
fn a_known_openssl_key_loads_in_either_line_ending() {
    for text in [
        OPENSSL_X25519.to_owned(),
        OPENSSL_X25519.replace('\n', "\r\n"),
        format!("\n{}\n\n", OPENSSL_X25519),
    ] {
        assert_eq!(load(&text).unwrap().public_hex(), OPENSSL_X25519_PUBLIC);
    }
}

#[test]
fn other_keys_and_broken_pem_are_refused_with_the_reason() {
    // Made by `openssl genpkey -algorithm Ed25519`: OID 1.3.101.112.
    let ed25519 = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIJQNk0ZPkMU1jcg72cEng+bewdB16cnLP2ArbWgSfv6Q
-----END PRIVATE KEY-----
";
    assert!(refusal(ed25519).contains("Ed25519 key, not an X25519 one"));
    // The public half, as `openssl pkey -pubout` prints it.
    let public = "-----BEGIN PUBLIC KEY-----
MCowBQYDK2VuAyEAqNV6enNsEW108uI2jeuBZYP/q3LaCoj5FyLvWczA8n8=
-----END PUBLIC KEY-----
";
    assert!(refusal(public).contains("\"PUBLIC KEY\""));
    let encrypted = OPENSSL_X25519.replace("PRIVATE KEY", "ENCRYPTED PRIVATE KEY");
    assert!(refusal(&encrypted).contains("\"ENCRYPTED PRIVATE KEY\""));
    // A character outside Base64.
    let bad_base64 = OPENSSL_X25519.replace("MC4C", "MC4!");
    assert!(refusal(&bad_base64).contains("not valid PEM"));
    // Labels that do not match.
    let mismatched = OPENSSL_X25519.replace("END PRIVATE", "END PUBLIC");
    assert!(refusal(&mismatched).contains("not valid PEM"));
    // One byte more after the key: 49 bytes of DER.
    let trailing = OPENSSL_X25519.replace("Znlp\n", "Znlp\nAA==\n");
    assert!(refusal(&trailing).contains("X25519 key of 49 bytes"));
    // A key one byte short, in a DER that says so (47 bytes).
    let short = "-----BEGIN PRIVATE KEY-----
MC0CAQAwBQYDK2VuBCEEH1gZGc9adLI7jzH6L+3qpcx30dWYdXjlVqOPLk6QZnk=
-----END PRIVATE KEY-----
";
    assert!(refusal(short).contains("X25519 key of 47 bytes"));
    // Not PEM, not hex.
    assert!(refusal("MC4CAQAwBQYDK2VuBCIE").contains("neither 64 hex digits nor a PEM"));
}
