//! The keepalive task: one per link when [`ClientConfig::keepalive`] is
//! set. It sends a `PING` when the server has been silent for the
//! interval, and declares the link lost when the server stays silent for
//! the timeout after it (the rules are on [`Keepalive`]).
//!
//! The reader only counts its reads (no clock read on the hot path); this
//! task looks at the count every half interval. A count unchanged since the
//! look that first saw it means silence since that look at least: the
//! `PING` follows between one and one and a half intervals of silence.
//!
//! [`ClientConfig::keepalive`]: crate::ClientConfig::keepalive

use std::sync::Arc;

use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::config::Keepalive;
use crate::error::CloseReason;
use crate::link::Link;
use crate::send::SendError;
use crate::shared::Shared;

/// Starts `link`'s keepalive task, if the client has a keepalive.
pub(crate) fn spawn(shared: &Arc<Shared>, link: &Arc<Link>) -> Option<JoinHandle<()>> {
    let keepalive = shared.config().keepalive?;
    Some(tokio::spawn(run(
        Arc::clone(shared),
        Arc::clone(link),
        keepalive,
    )))
}

/// Watches `link` until it is lost.
async fn run(shared: Arc<Shared>, link: Arc<Link>, keepalive: Keepalive) {
    let (interval, timeout) = (keepalive.interval(), keepalive.timeout());
    let step = interval / 2;
    // The read count last seen, and the look that first saw it: nothing
    // came since then.
    let mut seen = link.reads();
    let mut quiet_since = Instant::now();
    let mut next_look = quiet_since + step;
    loop {
        tokio::time::sleep_until(next_look).await;
        next_look += step;
        if link.lost_reason().is_some() {
            return;
        }
        let reads = link.reads();
        if reads != seen {
            (seen, quiet_since) = (reads, Instant::now());
            continue;
        }
        if quiet_since.elapsed() < interval {
            continue;
        }
        let sent = Instant::now();
        match shared.keepalive_ping(&link) {
            Ok(()) => {}
            // The handshake's own timeout bounds its wait: look again after it.
            Err(SendError::Handshaking) => {
                let mut handshaking = link.handshaking();
                let _ = handshaking.wait_for(|waiting| !*waiting).await;
                (seen, quiet_since) = (link.reads(), Instant::now());
                next_look = quiet_since + step;
                continue;
            }
            // Nothing may go out plain on this link: it has no keepalive.
            Err(SendError::NotSecure) => return,
            Err(SendError::Lost(reason)) => {
                shared.lose(&link, reason);
                return;
            }
            Err(SendError::Gone | SendError::TooLarge(_)) => return,
        }
        tokio::time::sleep_until(sent + timeout).await;
        if link.lost_reason().is_some() {
            return;
        }
        let reads = link.reads();
        if reads == seen {
            tracing::debug!(?interval, ?timeout, "the server stayed silent after a PING");
            shared.lose(&link, CloseReason::KeepaliveTimeout { interval, timeout });
            return;
        }
        (seen, quiet_since) = (reads, Instant::now());
        next_look = quiet_since + step;
    }
}
