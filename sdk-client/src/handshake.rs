//! Secure channels at the client's level: whether the application asked for
//! one (from then on nothing goes out plain, and every new link sets one up
//! before it carries requests), running a handshake on one link, and taking
//! the server's answer to it.
//!
//! The answer is taken on the link's reader task, not by the caller that
//! asked for the handshake: the server seals every push it writes after
//! that answer, so the keys must be in place before the reader takes the
//! next frame. The caller waits for the outcome on a oneshot channel.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use ternio_protocol::frame::{Flags, Header};
use ternio_protocol::secure::{HandshakeError, Initiator, RekeyPolicy};
use ternio_protocol::system;
use tokio::time::Instant;

use crate::config::SecureConfig;
use crate::error::{ClientError, CloseReason};
use crate::link::Link;
use crate::secure::{PendingHandshake, RawBody, Seal};
use crate::send::{Mode, SendError};
use crate::sync::lock;

/// The secure channel the application asked for, if it did.
pub(crate) struct Security {
    /// What every new link sets up before it carries requests: from the
    /// config, or recorded when the application asks for a handshake.
    wanted: Mutex<Option<SecureConfig>>,
    /// Whether `wanted` is set: from then on nothing goes out plain
    /// (requests without a secure channel fail with `NotSecure`).
    is_wanted: AtomicBool,
}

impl Security {
    /// Wanting what `config` says (nothing when `None`).
    pub(crate) fn new(config: Option<SecureConfig>) -> Self {
        Self {
            wanted: Mutex::new(config),
            is_wanted: AtomicBool::new(config.is_some()),
        }
    }

    /// The secure channel new links set up, if the client wants one.
    pub(crate) fn wanted(&self) -> Option<SecureConfig> {
        *lock(&self.wanted)
    }

    /// Records that the application wants the secure channel `pin` names:
    /// every later link sets it up, and nothing goes out plain.
    fn want(&self, pin: Option<[u8; 32]>) {
        let mut wanted = lock(&self.wanted);
        if wanted.is_none() {
            *wanted = Some(SecureConfig { pin });
        }
        self.is_wanted.store(true, Ordering::Release);
    }

    /// Whether a frame for `link` goes out sealed, as `seal` asks: always
    /// once the link's secure channel is up (contract section 5.1); never
    /// without one when it must be sealed, which it must once the
    /// application asked for a secure channel (no silent downgrade after a
    /// failed handshake).
    pub(crate) fn seals(&self, link: &Link, seal: Seal) -> Result<bool, ClientError> {
        // Once up, a link's secure channel stays up: the sealer will be there.
        if link.is_secure() {
            return Ok(true);
        }
        match seal {
            Seal::Auto if !self.is_wanted.load(Ordering::Acquire) => Ok(false),
            _ => Err(ClientError::NotSecure),
        }
    }
}

/// One handshake to run on a link: its request id, the pinned key (`NK`)
/// or none (`NN`), and its deadline (`timeout` after it began).
pub(crate) struct Attempt {
    pub(crate) id: u32,
    pub(crate) pin: Option<[u8; 32]>,
    pub(crate) deadline: Instant,
    pub(crate) timeout: Duration,
}

/// Sends `HANDSHAKE` on `link` as `attempt` says and waits for the reader
/// to take the answer (see [`answer`]). From now on `security` wants a
/// secure channel. `lose` is called when sending shows the link lost.
pub(crate) async fn run(
    security: &Security,
    link: &Arc<Link>,
    attempt: Attempt,
    max_frame_size: usize,
    lose: impl FnOnce(CloseReason),
) -> Result<(), ClientError> {
    let noise = |error: HandshakeError| ClientError::Handshake(error.to_string());
    let Attempt {
        id,
        pin,
        deadline,
        timeout,
    } = attempt;
    let mut initiator = Initiator::new(pin.as_ref()).map_err(noise)?;
    let body = initiator.request_body().map_err(noise)?;
    let outcome = link.begin_handshake(id, initiator, pin)?;
    // Asked for once, a secure channel is never given up for plain.
    security.want(pin);
    let header = Header::new(system::HANDSHAKE, Flags::NONE, id);
    match link.send_as(Mode::Handshake, header, &RawBody(&body), max_frame_size) {
        Ok(()) => {}
        Err(SendError::TooLarge(error)) => {
            link.take_handshake(id);
            link.fail_handshake();
            return Err(ClientError::FrameTooLarge(error));
        }
        // The loss fails the handshake: `outcome` says so.
        Err(SendError::Gone | SendError::NotSecure | SendError::Handshaking) => {}
        Err(SendError::Lost(reason)) => lose(reason),
    }
    match tokio::time::timeout_at(deadline, outcome).await {
        Err(_) => Err(ClientError::Timeout(timeout)),
        Ok(Err(_)) => Err(ClientError::Closed(link.end_reason())),
        Ok(Ok(outcome)) => outcome,
    }
}

/// Takes the answer (`header`, `body`, `sealed` when it came sealed) to the
/// handshake `pending` under way on `link`: puts the keys in place before
/// the reader takes the next frame (the server seals every push after this
/// answer), then tells the caller. Returns why to close the link, if the
/// two sides now disagree about the secure channel.
pub(crate) fn answer(
    link: &Link,
    pending: PendingHandshake,
    (header, body, sealed): (Header, &Bytes, bool),
    rekey: RekeyPolicy,
) -> Option<CloseReason> {
    let answer = pending.answer(header, body, sealed);
    match answer.channel {
        Some(channel) => {
            link.complete_handshake(channel, rekey);
            tracing::debug!(nk = answer.pin.is_some(), "secure session established");
        }
        None => link.fail_handshake(),
    }
    let _ = answer.done.send(answer.outcome);
    answer.close
}
