//! The settings file of `examples/chat_server` (`--config`): where it
//! listens, the server's limits, and the Redis backplane. Each command-line
//! flag, when given, wins over the file; the file wins over the defaults.
//! `examples/chat_server.toml` is a commented example.

use std::net::SocketAddr;
use std::path::Path;

use serde::{Deserialize, Serialize};
use ternio::ServerConfig;
use ternio_redis::RedisSettings;

/// Everything `chat_server --config FILE` reads. Every key is optional;
/// an unknown one is an error that names it.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChatServerSettings {
    /// `[listen]`: the addresses of the listeners (flags `--tcp`, `--ws`,
    /// `--http`, `--metrics`).
    pub listen: Listen,
    /// Log every request (flag `--audit`). Default `false`.
    pub audit: bool,
    /// `[server]`: the framework's limits, `ternio::ServerConfig` (every
    /// key: `docs/CONFIGURATION.md`).
    pub server: ServerConfig,
    /// `[redis]`: join the other nodes that use this Redis. Absent (the
    /// default): a single node, unless `--redis URL` is given. The cluster
    /// secret is never in the file: it comes from `TERNIO_CLUSTER_SECRET`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis: Option<RedisSettings>,
}

/// The listeners of the chat server. Which listeners exist is the
/// application's choice (the framework's builder maps them), so their
/// addresses live in the application's settings, not in `ServerConfig`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Listen {
    /// The TCP listener. Default `127.0.0.1:7101`.
    pub tcp: SocketAddr,
    /// The WebSocket listener (path `/ws`). Default `127.0.0.1:7102`.
    pub ws: SocketAddr,
    /// The HTTP listener of the chat page. Default `127.0.0.1:7103`.
    pub http: SocketAddr,
    /// The Prometheus endpoint (`http://ADDR/metrics`). Default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<SocketAddr>,
}

impl Default for Listen {
    fn default() -> Self {
        Self {
            tcp: SocketAddr::from(([127, 0, 0, 1], 7101)),
            ws: SocketAddr::from(([127, 0, 0, 1], 7102)),
            http: SocketAddr::from(([127, 0, 0, 1], 7103)),
            metrics: None,
        }
    }
}

impl ChatServerSettings {
    /// Reads the settings in `text`.
    pub fn parse(text: &str) -> Result<Self, toml::de::Error> {
        toml::from_str(text)
    }

    /// Reads the settings file at `path`; the error names the file and,
    /// for a mistake in it, the line and the key.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        Self::parse(&text).map_err(|error| format!("{}: {error}", path.display()))
    }

    /// The settings as TOML (what `--print-config` shows), with the
    /// password of a Redis URL redacted.
    pub fn to_toml(&self) -> String {
        let shown = Self {
            redis: self.redis.as_ref().map(RedisSettings::redacted),
            ..self.clone()
        };
        toml::to_string(&shown).expect("the chat server's settings are plain TOML values")
    }
}
