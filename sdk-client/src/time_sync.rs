//! Time sync's exchanges (docs/PROTOCOL.md section 4.3): `TIME` requests on
//! the client's connection, whose samples go to the [`Clock`] of `clock`;
//! and the background task of [`ClientConfig::clock_sync`].
//!
//! [`Clock`]: crate::clock::Clock
//! [`ClientConfig::clock_sync`]: crate::ClientConfig::clock_sync

use std::sync::Arc;
use std::time::{Duration, Instant};

use ternio_protocol::Response;
use ternio_protocol::system::{self, ErrorBody, TimeRequest, TimeResponse};

use crate::clock::{ClockEstimate, Sample};
use crate::error::ClientError;
use crate::secure::Seal;
use crate::shared::Shared;
use crate::state::ConnectionState;

/// How many exchanges [`Client::sync_clock`](crate::Client::sync_clock)
/// runs, one after the other.
pub(crate) const EXCHANGES: usize = 5;

/// The shortest interval of [`ClientConfig::clock_sync`](crate::ClientConfig::clock_sync):
/// a shorter one counts as this (five requests a second at most).
pub(crate) const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// One `TIME` exchange on `shared`'s connection; its sample joins the filter.
async fn exchange(shared: &Shared) -> Result<(), ClientError> {
    let clock = shared.clock();
    let timeout = shared.config().request_timeout;
    let sent = Instant::now();
    let t0 = clock.local().micros_at(sent);
    let frame = shared
        .call(
            system::TIME,
            &TimeRequest { client_time: t0 },
            timeout,
            Seal::Auto,
        )
        .await?;
    let t3 = clock.local().micros_at(Instant::now());
    if frame.header.flags.is_error() {
        let error = ErrorBody::parse(&frame.body)?;
        return Err(ClientError::Remote {
            code: error.code,
            message: error.message,
        });
    }
    let answer = TimeResponse::from_response(frame.header.opcode, &frame.body, system::TIME)?;
    if answer.client_time != t0 {
        return Err(ternio_protocol::DecodeError::Invalid(
            "TIME answer carries another client_time than the request",
        )
        .into());
    }
    let sample = Sample::new(t0, answer.server_receive, answer.server_send, t3).ok_or(
        ternio_protocol::DecodeError::Invalid(
            "TIME answer with impossible times (answered before read, or held longer than the round trip)",
        ),
    )?;
    clock.add(sample);
    Ok(())
}

/// Runs [`EXCHANGES`] exchanges one after the other and returns the
/// estimate; the first failure ends it.
pub(crate) async fn sync(shared: &Shared) -> Result<ClockEstimate, ClientError> {
    for _ in 0..EXCHANGES {
        exchange(shared).await?;
    }
    Ok(shared.clock().estimate().expect("a sample was just added"))
}

/// The task of [`ClientConfig::clock_sync`](crate::ClientConfig::clock_sync):
/// syncs now, every `interval`, and after each reconnection.
pub(crate) async fn keep_synced(shared: Arc<Shared>, interval: Duration) {
    let interval = interval.max(MIN_INTERVAL);
    let mut states = shared.state_changes();
    loop {
        if let Err(error) = sync(&shared).await {
            tracing::debug!(%error, "clock sync failed");
        }
        let reconnected = async {
            loop {
                if states.changed().await.is_err() {
                    return false;
                }
                match &*states.borrow_and_update() {
                    ConnectionState::Connected => return true,
                    ConnectionState::Closed(_) => return false,
                    ConnectionState::Reconnecting { .. } => {}
                }
            }
        };
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            again = reconnected => if !again { return },
        }
        if shared.state().is_closed() {
            return;
        }
    }
}
