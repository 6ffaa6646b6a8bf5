//! The TLS certificate of the tonic TLS participants: self-signed, made by
//! rcgen when the harness starts, handed to the server children through
//! their environment.

use anyhow::{Context as _, Result};

use crate::participants::grpc::TLS_DOMAIN;

/// Environment variable carrying the certificate's PEM to a server child.
const CERT_VAR: &str = "TERNIO_BENCH_TLS_CERT";
/// Environment variable carrying the private key's PEM to a server child.
const KEY_VAR: &str = "TERNIO_BENCH_TLS_KEY";

/// A certificate and its private key, in PEM.
#[derive(Debug, Clone)]
pub struct TlsMaterial {
    /// The self-signed certificate (what the client trusts).
    pub cert_pem: String,
    /// The certificate's private key (ECDSA P-256).
    pub key_pem: String,
}

impl TlsMaterial {
    /// Makes a new self-signed certificate for `localhost`.
    pub fn generate() -> Result<Self> {
        let certified = rcgen::generate_simple_self_signed(vec![TLS_DOMAIN.to_owned()])?;
        Ok(Self {
            cert_pem: certified.cert.pem(),
            key_pem: certified.signing_key.serialize_pem(),
        })
    }

    /// The environment a server child needs to read it back.
    pub fn env(&self) -> [(&'static str, &str); 2] {
        [(CERT_VAR, &self.cert_pem), (KEY_VAR, &self.key_pem)]
    }

    /// What the harness put in this (child) process's environment.
    pub fn from_env() -> Result<Self> {
        Ok(Self {
            cert_pem: std::env::var(CERT_VAR).context("no TLS certificate in the environment")?,
            key_pem: std::env::var(KEY_VAR).context("no TLS key in the environment")?,
        })
    }
}
