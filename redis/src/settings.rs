//! [`RedisSettings`]: the part of a [`RedisConfig`] that can sit in a
//! settings file (feature `serde`): everything but the cluster secret.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use crate::config::{DEFAULT_MAX_ENVELOPE_SIZE, DEFAULT_SUBSCRIPTION_BACKLOG, RedisConfig};
use crate::secret::ClusterSecret;

/// The settings of a [`RedisBackplane`](crate::RedisBackplane) as a
/// settings file gives them: every [`RedisConfig`] field but the cluster
/// secret, with the CA certificate as a path. Every key is optional and
/// takes the default of [`RedisConfig::new`]; an unknown key is an error
/// that names it; durations are written `"30s"` or `"250ms"`.
///
/// The [`ClusterSecret`] is never read from it: the secret comes from the
/// environment or from a key file only the server's user reads, and joins
/// the settings in [`into_config`](Self::into_config). A `url` with a
/// password (`redis://:password@host/`) is a secret too: give such a URL
/// the same way, not in the file.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use ternio_redis::{ClusterSecret, RedisSettings};
///
/// let settings: RedisSettings = toml::from_str(
///     r#"
///     url = "redis://10.0.0.7:6379/"
///     prefix = "chat"
///     heartbeat_interval = "500ms"
///     "#,
/// )?;
/// # let secret = "32 random bytes, from elsewhere!".to_owned();
/// // secret = std::env::var("TERNIO_CLUSTER_SECRET")?
/// let config = settings.into_config(ClusterSecret::new(secret)?)?;
/// assert_eq!(config.prefix, "chat");
/// # Ok(())
/// # }
/// ```
///
/// `#[non_exhaustive]`: start from [`RedisSettings::default`] (or a
/// settings file) and set fields.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct RedisSettings {
    /// [`RedisConfig::url`]. Default `redis://127.0.0.1:6379/`.
    pub url: String,
    /// The PEM file of [`RedisConfig::tls_ca_certificate`], read by
    /// [`into_config`](Self::into_config). Default none (the system's roots).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_ca_file: Option<PathBuf>,
    /// [`RedisConfig::max_envelope_size`], in bytes.
    pub max_envelope_size: usize,
    /// [`RedisConfig::max_message_age`].
    #[serde(with = "ternio::protocol::config_format::duration")]
    pub max_message_age: Duration,
    /// [`RedisConfig::prefix`].
    pub prefix: String,
    /// [`RedisConfig::node_id`]; none (the default) claims a free one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_id: Option<u16>,
    /// [`RedisConfig::heartbeat_interval`].
    #[serde(with = "ternio::protocol::config_format::duration")]
    pub heartbeat_interval: Duration,
    /// [`RedisConfig::node_ttl`].
    #[serde(with = "ternio::protocol::config_format::duration")]
    pub node_ttl: Duration,
    /// [`RedisConfig::queue_capacity`].
    pub queue_capacity: usize,
    /// [`RedisConfig::subscription_backlog`].
    pub subscription_backlog: usize,
    /// [`RedisConfig::reconnect_delay`].
    #[serde(with = "ternio::protocol::config_format::duration")]
    pub reconnect_delay: Duration,
    /// [`RedisConfig::max_reconnect_delay`].
    #[serde(with = "ternio::protocol::config_format::duration")]
    pub max_reconnect_delay: Duration,
    /// [`RedisConfig::response_timeout`].
    #[serde(with = "ternio::protocol::config_format::duration")]
    pub response_timeout: Duration,
    /// [`RedisConfig::merge_broadcasts`].
    pub merge_broadcasts: bool,
}

/// Where Redis listens on a machine of its own defaults.
const DEFAULT_URL: &str = "redis://127.0.0.1:6379/";

impl Default for RedisSettings {
    /// The defaults of [`RedisConfig::new`], with Redis on this host's
    /// port 6379.
    fn default() -> Self {
        Self {
            url: DEFAULT_URL.to_owned(),
            tls_ca_file: None,
            max_envelope_size: DEFAULT_MAX_ENVELOPE_SIZE,
            max_message_age: Duration::from_secs(30),
            prefix: "ternio".to_owned(),
            node_id: None,
            heartbeat_interval: Duration::from_secs(1),
            node_ttl: Duration::from_secs(5),
            queue_capacity: 65_536,
            subscription_backlog: DEFAULT_SUBSCRIPTION_BACKLOG,
            reconnect_delay: Duration::from_millis(100),
            max_reconnect_delay: Duration::from_secs(2),
            response_timeout: Duration::from_secs(2),
            merge_broadcasts: true,
        }
    }
}

impl RedisSettings {
    /// These settings with the user and password of `url`
    /// (`redis://user:password@host/`) replaced by `<redacted>`: what to
    /// print or log.
    pub fn redacted(&self) -> Self {
        Self {
            url: crate::config::redacted_url(&self.url),
            ..self.clone()
        }
    }

    /// The [`RedisConfig`] of these settings and the cluster's `secret`,
    /// with the CA certificate read from `tls_ca_file` if one is named.
    /// Fails if that file cannot be read, with an error naming it.
    pub fn into_config(self, secret: ClusterSecret) -> io::Result<RedisConfig> {
        let tls_ca_certificate = match &self.tls_ca_file {
            Some(path) => Some(std::fs::read(path).map_err(|error| {
                io::Error::new(
                    error.kind(),
                    format!(
                        "reading the Redis CA certificate {} (tls_ca_file): {error}",
                        path.display()
                    ),
                )
            })?),
            None => None,
        };
        // Every field named: a field added to `RedisConfig` must be decided
        // on here too.
        Ok(RedisConfig {
            url: self.url,
            secret,
            tls_ca_certificate,
            max_envelope_size: self.max_envelope_size,
            max_message_age: self.max_message_age,
            prefix: self.prefix,
            node_id: self.node_id,
            heartbeat_interval: self.heartbeat_interval,
            node_ttl: self.node_ttl,
            queue_capacity: self.queue_capacity,
            subscription_backlog: self.subscription_backlog,
            reconnect_delay: self.reconnect_delay,
            max_reconnect_delay: self.max_reconnect_delay,
            response_timeout: self.response_timeout,
            merge_broadcasts: self.merge_broadcasts,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> ClusterSecret {
        ClusterSecret::new("the cluster secret, 32 bytes....").unwrap()
    }

    #[test]
    fn the_defaults_are_those_of_redis_config_new() {
        let from_settings = RedisSettings::default().into_config(secret()).unwrap();
        let from_new = RedisConfig::new(DEFAULT_URL, secret());
        assert_eq!(format!("{from_settings:?}"), format!("{from_new:?}"));
        let empty: RedisSettings = toml::from_str("").unwrap();
        assert_eq!(empty, RedisSettings::default());
        let text = toml::to_string(&RedisSettings::default()).unwrap();
        assert_eq!(
            toml::from_str::<RedisSettings>(&text).unwrap(),
            RedisSettings::default()
        );
    }

    #[test]
    fn a_file_sets_what_it_names() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, "-----BEGIN CERTIFICATE-----").unwrap();
        let settings: RedisSettings = toml::from_str(&format!(
            "url = \"rediss://redis.internal:6380/\"\n\
             tls_ca_file = {ca:?}\n\
             node_id = 7\n\
             node_ttl = \"3s\"\n\
             reconnect_delay = \"50ms\"\n"
        ))
        .unwrap();
        let config = settings.into_config(secret()).unwrap();
        assert_eq!(config.url, "rediss://redis.internal:6380/");
        assert_eq!(
            config.tls_ca_certificate.as_deref(),
            Some(&b"-----BEGIN CERTIFICATE-----"[..])
        );
        assert_eq!(config.node_id, Some(7));
        assert_eq!(config.node_ttl, Duration::from_secs(3));
        assert_eq!(config.reconnect_delay, Duration::from_millis(50));
        assert_eq!(config.prefix, "ternio");
    }

    #[test]
    fn mistakes_are_errors_that_name_them() {
        let error = toml::from_str::<RedisSettings>("secret = \"hunter2\"")
            .unwrap_err()
            .to_string();
        assert!(error.contains("unknown field `secret`"), "{error}");
        let error = toml::from_str::<RedisSettings>("node_id = 70000")
            .unwrap_err()
            .to_string();
        assert!(error.contains("node_id"), "{error}");
        let settings = RedisSettings {
            tls_ca_file: Some("/nonexistent/ca.pem".into()),
            ..RedisSettings::default()
        };
        let error = settings.into_config(secret()).unwrap_err().to_string();
        assert!(error.contains("/nonexistent/ca.pem"), "{error}");
    }
}
