//! The supervisor task: one per client. It waits for the current link to be
//! lost, retires that link's tasks, and (when a reconnect policy allows)
//! opens new links until one is installed or the attempts run out.

use std::sync::Arc;

use tokio::sync::watch;

use crate::endpoint::{Endpoint, Opened};
use crate::error::{ClientError, CloseReason};
use crate::link::{Link, RETIRE_GRACE};
use crate::reconnect::{Backoff, is_busy};
use crate::shared::Shared;
use crate::state::ConnectionState;

/// Supervises the client's links, starting with the installed one, until
/// the client closes for good.
pub(crate) async fn supervise(shared: Arc<Shared>, endpoint: Endpoint, installed: Opened) {
    let mut changes = shared.state_changes();
    let Opened {
        mut link,
        mut tasks,
    } = installed;
    loop {
        let state = match changes.wait_for(|state| !state.is_connected()).await {
            Ok(state) => state.clone(),
            Err(_) => return,
        };
        tasks.retire(RETIRE_GRACE);
        // The loss chose the attempt to start with (see `Shared::lose`).
        let ConnectionState::Reconnecting { attempt } = state else {
            return;
        };
        let lost = link
            .lost_reason()
            .cloned()
            .unwrap_or(CloseReason::PeerClosed);
        match reconnect(&shared, &endpoint, &mut changes, attempt, &lost).await {
            Some(next) => (link, tasks) = (next.link, next.tasks),
            None => return,
        }
    }
}

/// Runs attempts under the policy, from attempt `attempt`, until a new link
/// is installed (and returned), the client is closed, or the attempts run
/// out (the client is then closed with [`CloseReason::ReconnectFailed`]).
/// `lost` is why the last link ended.
async fn reconnect(
    shared: &Arc<Shared>,
    endpoint: &Endpoint,
    changes: &mut watch::Receiver<ConnectionState>,
    mut attempt: u32,
    lost: &CloseReason,
) -> Option<Opened> {
    // The state only becomes Reconnecting when a policy is set.
    let mut backoff = Backoff::new(shared.config().reconnect.clone()?);
    let mut last_error = format!("the connection was lost: {lost}");
    // The server said it is full or going away: the next delay has a floor.
    let mut busy = is_busy(lost);
    loop {
        if backoff
            .policy()
            .max_attempts
            .is_some_and(|max| attempt > max)
        {
            shared.give_up(CloseReason::ReconnectFailed {
                attempts: attempt - 1,
                last_error,
            });
            return None;
        }
        if !shared.set_attempt(attempt) {
            return None;
        }
        let delay = backoff.delay(attempt, busy);
        busy = false;
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            _ = changes.wait_for(ConnectionState::is_closed) => return None,
        }
        let timeout = shared.config().connect_timeout;
        // A close while connecting stops the attempt (and drops its tasks).
        let opened = tokio::select! {
            opened = tokio::time::timeout(timeout, endpoint.open(shared)) => match opened {
                Ok(opened) => opened,
                Err(_) => Err(ClientError::Timeout(timeout)),
            },
            _ = changes.wait_for(ConnectionState::is_closed) => return None,
        };
        let opened = match opened {
            Ok(opened) => opened,
            Err(error) => {
                // A WebSocket upgrade refused with 503 is the server's
                // connection limits: as busy as `TOO_MANY_CONNECTIONS`.
                busy = matches!(error, ClientError::UpgradeRefused(503));
                last_error = error.to_string();
                tracing::debug!(attempt, error = %last_error, "reconnect attempt failed");
                attempt = attempt.saturating_add(1);
                continue;
            }
        };
        // A close while the session is set up stops the attempt too.
        let resumed = tokio::select! {
            resumed = resume_secure_channel(shared, &opened.link) => resumed,
            _ = changes.wait_for(ConnectionState::is_closed) => return None,
        };
        match resumed {
            Ok(()) if shared.install(&opened.link, attempt) => {
                tracing::debug!(attempt, "client reconnected");
                return Some(opened);
            }
            Ok(()) => {
                opened.link.shutdown();
                if shared.state().is_closed() {
                    return None;
                }
                last_error = match opened.link.lost_reason() {
                    Some(reason) => {
                        busy = is_busy(reason);
                        format!("the new connection ended at once: {reason}")
                    }
                    None => "the new connection ended at once".to_owned(),
                };
            }
            Err(error) => {
                opened.link.shutdown();
                busy = opened.link.lost_reason().is_some_and(is_busy);
                last_error = error.to_string();
            }
        }
        tracing::debug!(attempt, error = %last_error, "reconnect attempt failed");
        attempt = attempt.saturating_add(1);
    }
}

/// **The hook for secure sessions.** Runs on every re-established link after
/// the transport is up and before the link is installed, so that no request
/// waiting for the reconnection goes out on it before this completes.
///
/// A client whose session was secure (by [`ClientConfig::secure`] or a
/// completed [`Client::handshake`]) runs the same handshake again here
/// (same pattern, same pinned key): the new connection has no session, and
/// the server would reject sealed frames on it (`DECRYPT_FAILED`); the new
/// session has fresh keys, and both directions' counters start at 0. The
/// link's reader processes the answer, as it would on an installed link. An
/// error here (the server's key changed, say) counts as a failed attempt.
///
/// [`ClientConfig::secure`]: crate::ClientConfig::secure
/// [`Client::handshake`]: crate::Client::handshake
async fn resume_secure_channel(shared: &Shared, link: &Arc<Link>) -> Result<(), ClientError> {
    shared.secure_new_link(link).await
}
