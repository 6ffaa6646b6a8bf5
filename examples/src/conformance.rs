//! The conformance service: scripted behaviours that a client written in
//! another language must handle, each triggered by a request the client
//! sends. `examples/conformance_server.rs` serves it; docs/CONFORMANCE.md is
//! the checklist; `tests/conformance.rs` runs the checklist with the Rust
//! client.
//!
//! | opcode | request | what the server does |
//! |---|---|---|
//! | `0x0001` | [`Echo`] | answers with the same packet |
//! | `0x0002` | [`SecureEcho`] | the same, only for a sealed request (else error 6) |
//! | `0x0101` | [`Hold`] | answers only once a [`Release`] of its tag arrives |
//! | `0x0102` | [`Release`] | answers, then lets the [`Hold`] of its tag answer |
//! | `0x0103` | [`PushBurst`] | pushes `count` [`Notice`]s, then answers |
//! | `0x0104` | [`Notice`] | (a push only) |
//! | `0x0105` | [`Fail`] | answers error `code` with `message` (code 0: acknowledges) |
//! | `0x0106` | [`Guarded`] | refused with error 3 (needs a permission nobody has) |
//! | `0x0107` | [`Limited`] | one a second per connection; more: error 4 |
//! | `0x0108` | [`Slow`] | runs past its 100 ms limit: error 5 |
//! | `0x0109` | [`Crash`] | the handler panics: error 7, the connection stays up |
//! | `0x010A` | [`Kick`] | `DISCONNECT KICKED` with `text`, then the server closes |
//!
//! Any other application opcode is answered with error 1.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use ternio::{
    ConnectionId, Context, ErrorCode, HandlerError, Identity, Packet, RekeyPolicy, Server,
    ServerBuilder, State, packet_controller,
};
use tokio::sync::oneshot;

pub use crate::echo::{Echo, SecureEcho};

/// The conformance server's identity private key: the bytes `00 01 … 1f`,
/// the server static key of docs/PROTOCOL.md's secure-session vectors, so
/// that a client pins a key it knows in advance (vector
/// `server-static-public`). **Public, so no secret**: for tests only.
pub const IDENTITY_PRIVATE_KEY: [u8; 32] = {
    let mut key = [0u8; 32];
    let mut i = 0;
    while i < 32 {
        key[i] = i as u8;
        i += 1;
    }
    key
};

/// Frames the server seals under one key before it sends `REKEY`: small, so
/// that a client sees the server rekey within a few frames.
pub const REKEY_EVERY_FRAMES: u64 = 8;

/// Opcode 0x0101: answered with [`Held`] only once a [`Release`] with the
/// same tag arrives on the same connection (or after 10 s).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0101, response = Held)]
pub struct Hold {
    /// Names the hold.
    pub tag: u32,
}

/// Opcode 0x0111: the answer to [`Hold`].
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0111)]
pub struct Held {
    /// The [`Hold`]'s tag.
    pub tag: u32,
    /// Whether a [`Release`] ended it (false: 10 s passed).
    pub released: bool,
}

/// Opcode 0x0102: answered with [`Released`] at once; then the [`Hold`] of
/// the same tag is answered (at once when it arrives later).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0102, response = Released)]
pub struct Release {
    /// The tag of the [`Hold`] to answer.
    pub tag: u32,
}

/// Opcode 0x0112: the answer to [`Release`].
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0112)]
pub struct Released {
    /// The [`Release`]'s tag.
    pub tag: u32,
}

/// Opcode 0x0103: the server pushes `count` [`Notice`]s (`seq` 0 to
/// `count - 1`, in order) to the requesting connection, waits 20 ms, then
/// answers with [`BurstDone`].
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0103, response = BurstDone)]
pub struct PushBurst {
    /// How many pushes (at most 10,000).
    pub count: u32,
}

/// Opcode 0x0113: the answer to [`PushBurst`].
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0113)]
pub struct BurstDone {
    /// How many pushes were sent.
    pub count: u32,
}

/// Opcode 0x0104: a push (request id 0) of [`PushBurst`].
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0104)]
pub struct Notice {
    /// Its place in the burst, from 0.
    pub seq: u32,
    /// `notice <seq>`.
    pub text: String,
}

/// Opcode 0x0105: answered with error `code` and `message`; code 0 is
/// acknowledged instead. Codes 11 to 99 are not assigned: the server sends
/// 7 `INTERNAL` for them (docs/PROTOCOL.md section 2).
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0105, response = ())]
pub struct Fail {
    /// The error code to answer with.
    pub code: u16,
    /// The error's message.
    pub message: String,
}

/// Opcode 0x0106: requires permission 1, which no connection gets here:
/// always error 3 `UNAUTHORIZED`.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0106, response = ())]
pub struct Guarded;

/// Opcode 0x0107: rate-limited to one a second per connection (no burst):
/// the first is acknowledged, a second within the second gets error 4
/// `RATE_LIMITED`.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0107, response = ())]
pub struct Limited;

/// Opcode 0x0108: the handler sleeps 5 s under a 100 ms time limit: error 5
/// `TIMEOUT` after 100 ms.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0108, response = ())]
pub struct Slow;

/// Opcode 0x0109: the handler panics: error 7 `INTERNAL`, and the
/// connection stays up.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0109, response = ())]
pub struct Crash;

/// Opcode 0x010A: the server sends `DISCONNECT KICKED` (reason 10) with
/// `text` and closes the connection; the request may or may not be
/// acknowledged before.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x010A, response = ())]
pub struct Kick {
    /// The `DISCONNECT`'s text.
    pub text: String,
}

/// Holds and releases not yet matched, at most (beyond: error 8).
const MAX_SLOTS: usize = 4096;

/// A [`Hold`] waiting, or a [`Release`] that came before its [`Hold`].
#[derive(Debug)]
enum Slot {
    Waiting(oneshot::Sender<()>),
    Released,
}

/// The [`Hold`]s and early [`Release`]s, by connection and tag.
#[derive(Debug, Default)]
pub struct Holds {
    slots: Mutex<HashMap<(ConnectionId, u32), Slot>>,
}

impl Holds {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(ConnectionId, u32), Slot>> {
        self.slots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The scripted behaviours.
#[derive(Debug, Default)]
pub struct ConformanceController;

#[packet_controller(explicit)]
impl ConformanceController {
    fn echo(request: Echo) -> Echo {
        request
    }

    #[handler(encrypted)]
    fn secure_echo(request: SecureEcho) -> SecureEcho {
        request
    }

    async fn hold(request: Hold, ctx: &Context, holds: State<Holds>) -> Held {
        let key = (ctx.connection_id(), request.tag);
        let released = {
            let mut slots = holds.lock();
            match slots.remove(&key) {
                // The Release came first (both in one read, say): answer now,
                // which is still after the Release's answer.
                Some(Slot::Released) => None,
                _ => {
                    let (release, released) = oneshot::channel();
                    slots.insert(key, Slot::Waiting(release));
                    Some(released)
                }
            }
        };
        let released = match released {
            None => true,
            Some(released) => {
                let released = tokio::time::timeout(Duration::from_secs(10), released)
                    .await
                    .is_ok_and(|result| result.is_ok());
                holds.lock().remove(&key);
                released
            }
        };
        Held {
            tag: request.tag,
            released,
        }
    }

    fn release(
        request: Release,
        ctx: &Context,
        holds: State<Holds>,
    ) -> Result<Released, HandlerError> {
        let key = (ctx.connection_id(), request.tag);
        let mut slots = holds.lock();
        match slots.remove(&key) {
            Some(Slot::Waiting(release)) => {
                let _ = release.send(());
            }
            _ if slots.len() >= MAX_SLOTS => {
                return Err(HandlerError::new(
                    ErrorCode::Overloaded,
                    "too many releases wait for their Hold",
                ));
            }
            _ => {
                slots.insert(key, Slot::Released);
            }
        }
        Ok(Released { tag: request.tag })
    }

    async fn push_burst(request: PushBurst, ctx: &Context) -> Result<BurstDone, HandlerError> {
        if request.count > 10_000 {
            return Err(HandlerError::new(
                ErrorCode::Malformed,
                "at most 10,000 pushes",
            ));
        }
        for seq in 0..request.count {
            let notice = Notice {
                seq,
                text: format!("notice {seq}"),
            };
            if ctx.push(&notice).is_err() {
                return Err(HandlerError::new(ErrorCode::Internal, "push refused"));
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        Ok(BurstDone {
            count: request.count,
        })
    }

    fn fail(request: Fail) -> Result<(), HandlerError> {
        if request.code == 0 {
            return Ok(());
        }
        Err(HandlerError::new(
            ErrorCode::from_u16(request.code),
            request.message,
        ))
    }

    #[handler(permission = 1)]
    fn guarded(_request: Guarded) {}

    #[handler(rate_limit(1, 1))]
    fn limited(_request: Limited) {}

    #[handler(timeout_ms = 100)]
    async fn slow(_request: Slow) {
        tokio::time::sleep(Duration::from_secs(5)).await;
    }

    fn crash(_request: Crash) {
        panic!("conformance: this handler panics on purpose (error 7 INTERNAL)");
    }

    fn kick(request: Kick, ctx: &Context) {
        ctx.kick(&request.text);
    }
}

/// Replies and pushes whose body has at least this many bytes go
/// compressed (`COMPRESSED`, LZ4) when that makes them smaller.
pub const COMPRESS_FROM_BYTES: usize = 128;

/// How long the server waits for a frame before it closes a connection
/// (`DISCONNECT IDLE_TIMEOUT`); it sends a `PING` halfway through.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(4);

/// The conformance server's builder, without listeners: the controller, the
/// fixed identity ([`IDENTITY_PRIVATE_KEY`]), a server `REKEY` every
/// [`REKEY_EVERY_FRAMES`] sealed frames, a server `PING` after
/// `idle_timeout / 2` of silence, replies of [`COMPRESS_FROM_BYTES`] or
/// more compressed, and resumption (30 s, 64 KiB to replay).
pub fn conformance_server(idle_timeout: Duration) -> ServerBuilder {
    Server::builder()
        .discover_controllers(false)
        .controller(ConformanceController)
        .state(Holds::default())
        .declare_push::<Notice>()
        .identity(Identity::from_private_key(IDENTITY_PRIVATE_KEY))
        .rekey(RekeyPolicy::new(
            REKEY_EVERY_FRAMES,
            Duration::from_secs(3600),
        ))
        .idle_timeout(Some(idle_timeout))
        .compression(Some(COMPRESS_FROM_BYTES))
        .resumable(Duration::from_secs(30), 64 * 1024)
}
