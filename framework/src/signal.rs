//! The signals that stop a server: [`shutdown_signal`].

use std::future::Future;

/// A future that resolves when the process receives SIGINT (Ctrl-C) or
/// SIGTERM (what `kill`, systemd, Docker and Kubernetes send to stop it);
/// off Unix, on Ctrl-C. It logs which signal came, at info level. Hand it
/// to [`Server::run_until`](crate::Server::run_until):
///
/// ```no_run
/// # async fn run(server: ternio::Server) -> std::io::Result<()> {
/// server.run_until(ternio::shutdown_signal()).await
/// # }
/// ```
///
/// The handlers are installed when this function is called, not when the
/// future is first polled: a signal that comes in between is not lost (and
/// does not kill the process). Call it inside a tokio runtime with signals
/// enabled (`#[tokio::main]` is). If a handler cannot be installed, the
/// error is logged and only the other signal stops the server.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let install = |kind: SignalKind, name: &'static str| match signal(kind) {
            Ok(signal) => Some(signal),
            Err(error) => {
                tracing::error!(%error, "cannot handle {name}");
                None
            }
        };
        let mut interrupt = install(SignalKind::interrupt(), "SIGINT");
        let mut terminate = install(SignalKind::terminate(), "SIGTERM");
        async move {
            let name = tokio::select! {
                Some(()) = recv(&mut interrupt) => "SIGINT",
                Some(()) = recv(&mut terminate) => "SIGTERM",
                // Both handlers gone (the runtime is shutting down): wait on.
                else => std::future::pending::<&'static str>().await,
            };
            tracing::info!("{name} received: shutting down");
        }
    }
    #[cfg(not(unix))]
    {
        async {
            match tokio::signal::ctrl_c().await {
                Ok(()) => tracing::info!("Ctrl-C received: shutting down"),
                Err(error) => {
                    tracing::error!(%error, "cannot handle Ctrl-C");
                    std::future::pending::<()>().await
                }
            }
        }
    }
}

/// The next delivery of `signal`; never, without a handler.
#[cfg(unix)]
async fn recv(signal: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match signal {
        Some(signal) => signal.recv().await,
        None => std::future::pending().await,
    }
}
