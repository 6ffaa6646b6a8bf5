//! The examples' log output: `tracing` to standard error.

use std::io::IsTerminal;

/// Logs to standard error at `default_filter` (or what `RUST_LOG` says),
/// with ANSI colours only when standard error is a terminal: a log written
/// to a file or a pipe (systemd, Docker, `2> server.log`) stays plain text.
/// `NO_COLOR` set to anything turns colours off on a terminal too.
pub fn init(default_filter: &str) {
    let colours = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| default_filter.into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(colours)
        .init();
}
