//! The supervisor task: one per client. It waits for the current link to be
//! lost, retires that link's tasks, and (when a reconnect policy allows)
//! opens new links until one is installed or the attempts run out. The
//! delays between attempts are [`Retry`]'s; this task owns their one sleep.

use std::sync::Arc;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::endpoint::{Endpoint, Opened};
use crate::error::{ClientError, CloseReason};
use crate::link::RETIRE_GRACE;
use crate::reconnect::{Retry, is_busy};
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
        let lost_at = Instant::now();
        tasks.retire(RETIRE_GRACE);
        // The loss chose the attempt to start with (see `Links::lose`).
        let ConnectionState::Reconnecting { attempt } = state else {
            return;
        };
        let lost = link
            .lost_reason()
            .cloned()
            .unwrap_or(CloseReason::PeerClosed);
        match reconnect(&shared, &endpoint, &mut changes, (attempt, lost_at), &lost).await {
            Some(next) => (link, tasks) = (next.link, next.tasks),
            None => return,
        }
    }
}

/// How one attempt ended.
enum Attempted {
    /// Its link is installed.
    Installed(Opened),
    /// The client was closed meanwhile.
    Closed,
    /// It failed: why, and whether the server said it is full or going away.
    Failed { error: String, busy: bool },
}

/// Runs attempts under the policy, from attempt `attempt`, until a new link
/// is installed (and returned), the client is closed, or the attempts run
/// out (the client is then closed with [`CloseReason::ReconnectFailed`]).
/// `lost` is why the last link ended.
async fn reconnect(
    shared: &Arc<Shared>,
    endpoint: &Endpoint,
    changes: &mut watch::Receiver<ConnectionState>,
    (attempt, lost_at): (u32, Instant),
    lost: &CloseReason,
) -> Option<Opened> {
    // The state only becomes Reconnecting when a policy is set.
    let mut retry = Retry::new(shared.config().reconnect.clone()?, attempt, lost);
    loop {
        let attempt = match retry.schedule(Instant::now()) {
            Ok(attempt) => attempt,
            Err(reason) => {
                shared.give_up(reason);
                return None;
            }
        };
        if !shared.set_attempt(attempt) {
            return None;
        }
        // The one sleep: until the attempt may start.
        while retry.on_timeout(Instant::now()).is_none() {
            let Some(due) = retry.next_deadline() else {
                break;
            };
            tokio::select! {
                () = tokio::time::sleep_until(due) => {}
                _ = changes.wait_for(ConnectionState::is_closed) => return None,
            }
        }
        match attempt_once(shared, endpoint, changes, attempt, lost_at).await {
            Attempted::Installed(opened) => {
                tracing::debug!(attempt, "client reconnected");
                return Some(opened);
            }
            Attempted::Closed => return None,
            Attempted::Failed { error, busy } => {
                tracing::debug!(attempt, %error, "reconnect attempt failed");
                retry.failed(error, busy);
            }
        }
    }
}

/// Runs attempt `attempt`: opens a link (within the connect timeout),
/// resumes the session on it (the link lost at `lost_at`) or starts a new
/// one (with the secure channel, if the client has one), and installs it.
/// No request waiting for the reconnection goes out on the link before
/// that is done.
/// Stops when the client is closed meanwhile (dropping the attempt's tasks).
async fn attempt_once(
    shared: &Arc<Shared>,
    endpoint: &Endpoint,
    changes: &mut watch::Receiver<ConnectionState>,
    attempt: u32,
    lost_at: Instant,
) -> Attempted {
    let timeout = shared.config().connect_timeout;
    let opened = tokio::select! {
        opened = tokio::time::timeout(timeout, endpoint.open(shared)) => match opened {
            Ok(opened) => opened,
            Err(_) => Err(ClientError::Timeout(timeout)),
        },
        _ = changes.wait_for(ConnectionState::is_closed) => return Attempted::Closed,
    };
    let opened = match opened {
        Ok(opened) => opened,
        // A WebSocket upgrade refused with 503 is the server's connection
        // limits: as busy as `TOO_MANY_CONNECTIONS`.
        Err(error) => {
            let busy = matches!(error, ClientError::UpgradeRefused(503));
            let error = error.to_string();
            return Attempted::Failed { error, busy };
        }
    };
    let resumed = tokio::select! {
        resumed = shared.resume_or_start(&opened.link, lost_at) => resumed,
        _ = changes.wait_for(ConnectionState::is_closed) => return Attempted::Closed,
    };
    match resumed {
        Ok(()) if shared.install(&opened.link, attempt) => Attempted::Installed(opened),
        Ok(()) => {
            opened.link.shutdown();
            if shared.state().is_closed() {
                return Attempted::Closed;
            }
            match opened.link.lost_reason() {
                Some(reason) => Attempted::Failed {
                    error: format!("the new connection ended at once: {reason}"),
                    busy: is_busy(reason),
                },
                None => Attempted::Failed {
                    error: "the new connection ended at once".to_owned(),
                    busy: false,
                },
            }
        }
        Err(error) => {
            opened.link.shutdown();
            Attempted::Failed {
                error: error.to_string(),
                busy: opened.link.lost_reason().is_some_and(is_busy),
            }
        }
    }
}
