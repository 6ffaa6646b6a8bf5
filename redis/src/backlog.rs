//! What Redis delivered to the node's subscription and the subscriber has
//! not taken yet: bounded in bytes.
//!
//! The Redis client reads the subscription's socket on a task of its own
//! and hands each message over without waiting; the subscriber opens and
//! delivers each one, which can take much longer (a group of many local
//! members). With nothing to bound it, a burst from the other nodes would
//! pile up here for as long as it lasts, where Redis, whose own bound on a
//! slow subscriber (`client-output-buffer-limit pubsub`) only sees a
//! socket read as fast as it can be, cannot stop it. Past
//! [`RedisConfig::subscription_backlog`](crate::RedisConfig::subscription_backlog)
//! the messages are dropped and the subscriber ends the
//! link once it has delivered those that fit: the node reconnects and
//! reads its views again, as after Redis itself dropped it. A message
//! larger than any envelope is dropped at once (the subscriber counts it
//! `oversized`) rather than held: one such message, which anyone who may
//! publish to Redis can send, must not make the node reconnect.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use redis::aio::{AsyncPushSender, SendError};
use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc;

/// What a message counts for besides its bytes (its allocations).
const MESSAGE_OVERHEAD: usize = 128;

/// One push from the Redis client, or word that one was dropped.
enum Item {
    Push(PushInfo, usize),
    Oversized { channel: Vec<u8>, len: usize },
    Overflowed,
}

/// The bytes waiting, and whether any message was dropped.
struct State {
    bytes: AtomicUsize,
    limit: usize,
    /// The largest payload worth holding (the largest envelope).
    max_message: usize,
    overflowed: AtomicBool,
}

/// The Redis client's side: gives each push to the subscriber, or drops
/// it once the backlog is full.
pub(crate) struct BacklogSender {
    items: mpsc::UnboundedSender<Item>,
    state: Arc<State>,
}

/// The subscriber's side.
pub(crate) struct Backlog {
    items: mpsc::UnboundedReceiver<Item>,
    state: Arc<State>,
}

/// A message Redis delivered, as the subscriber takes it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Incoming {
    /// A message published on `channel`.
    Message { channel: Vec<u8>, payload: Vec<u8> },
    /// The subscription's connection closed.
    Closed,
    /// A message of `len` bytes on `channel`, larger than `max_message`,
    /// was dropped.
    Oversized { channel: Vec<u8>, len: usize },
    /// Messages were dropped: the backlog held `limit` bytes.
    Overflowed { limit: usize },
    /// Anything else (a subscription's confirmation).
    Other,
}

/// A backlog of at most `limit` bytes, of messages of at most
/// `max_message` bytes each.
pub(crate) fn backlog(limit: usize, max_message: usize) -> (BacklogSender, Backlog) {
    let (sender, receiver) = mpsc::unbounded_channel();
    let state = Arc::new(State {
        bytes: AtomicUsize::new(0),
        limit,
        max_message,
        overflowed: AtomicBool::new(false),
    });
    (
        BacklogSender {
            items: sender,
            state: Arc::clone(&state),
        },
        Backlog {
            items: receiver,
            state,
        },
    )
}

/// What `info` counts for in the backlog.
fn size_of(info: &PushInfo) -> usize {
    let bytes: usize = info
        .data
        .iter()
        .map(|value| match value {
            Value::BulkString(bytes) => bytes.len(),
            _ => 0,
        })
        .sum();
    MESSAGE_OVERHEAD + bytes
}

impl AsyncPushSender for BacklogSender {
    fn send(&self, info: PushInfo) -> Result<(), SendError> {
        if self.state.overflowed.load(Ordering::Acquire) {
            return Err(SendError);
        }
        if info.kind == PushKind::Message
            && let [Value::BulkString(channel), Value::BulkString(payload), ..] = &info.data[..]
            && payload.len() > self.state.max_message
        {
            let oversized = Item::Oversized {
                channel: channel.clone(),
                len: payload.len(),
            };
            return self.items.send(oversized).map_err(|_| SendError);
        }
        let size = size_of(&info);
        let before = self.state.bytes.fetch_add(size, Ordering::AcqRel);
        if before + size > self.state.limit && info.kind != PushKind::Disconnection {
            self.state.bytes.fetch_sub(size, Ordering::AcqRel);
            self.state.overflowed.store(true, Ordering::Release);
            // The subscriber learns it after the messages that fit.
            let _ = self.items.send(Item::Overflowed);
            return Err(SendError);
        }
        self.items
            .send(Item::Push(info, size))
            .map_err(|_| SendError)
    }
}

impl Backlog {
    /// The next message; `None` once the Redis client dropped its side.
    pub(crate) async fn next(&mut self) -> Option<Incoming> {
        let info = match self.items.recv().await? {
            Item::Push(info, size) => {
                self.state.bytes.fetch_sub(size, Ordering::AcqRel);
                info
            }
            Item::Oversized { channel, len } => return Some(Incoming::Oversized { channel, len }),
            Item::Overflowed => {
                return Some(Incoming::Overflowed {
                    limit: self.state.limit,
                });
            }
        };
        Some(match info.kind {
            PushKind::Message => {
                let mut data = info.data.into_iter();
                match (data.next(), data.next()) {
                    (Some(Value::BulkString(channel)), Some(Value::BulkString(payload))) => {
                        Incoming::Message { channel, payload }
                    }
                    _ => Incoming::Other,
                }
            }
            PushKind::Disconnection => Incoming::Closed,
            _ => Incoming::Other,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(payload_len: usize) -> PushInfo {
        PushInfo {
            kind: PushKind::Message,
            data: vec![
                Value::BulkString(b"channel".to_vec()),
                Value::BulkString(vec![7; payload_len]),
            ],
        }
    }

    #[tokio::test]
    async fn messages_past_the_bound_are_dropped_and_the_subscriber_told_after_those_that_fit() {
        let size = size_of(&message(1000));
        let (sender, mut backlog) = backlog(3 * size, 2000);
        for _ in 0..3 {
            sender.send(message(1000)).unwrap();
        }
        // The fourth does not fit, nor does anything after it.
        assert!(sender.send(message(1000)).is_err());
        assert!(sender.send(message(1)).is_err());
        for _ in 0..3 {
            let Some(Incoming::Message { channel, payload }) = backlog.next().await else {
                panic!("a message that fit");
            };
            assert_eq!((channel.as_slice(), payload.len()), (&b"channel"[..], 1000));
        }
        assert_eq!(
            backlog.next().await,
            Some(Incoming::Overflowed { limit: 3 * size })
        );
        // Taken messages give their room back.
        assert_eq!(backlog.state.bytes.load(Ordering::Acquire), 0);
    }

    #[tokio::test]
    async fn a_message_larger_than_an_envelope_is_dropped_alone() {
        let (sender, mut backlog) = backlog(3 * size_of(&message(1000)), 2000);
        // Larger than the whole backlog: dropped, and nothing else.
        sender.send(message(1 << 20)).unwrap();
        sender.send(message(1000)).unwrap();
        assert_eq!(
            backlog.next().await,
            Some(Incoming::Oversized {
                channel: b"channel".to_vec(),
                len: 1 << 20
            })
        );
        assert!(matches!(
            backlog.next().await,
            Some(Incoming::Message { .. })
        ));
        assert_eq!(backlog.state.bytes.load(Ordering::Acquire), 0);
    }

    #[tokio::test]
    async fn the_end_of_the_connection_passes_a_full_backlog() {
        let size = size_of(&message(1000));
        let (sender, mut backlog) = backlog(size, 2000);
        sender.send(message(1000)).unwrap();
        let closed = PushInfo {
            kind: PushKind::Disconnection,
            data: Vec::new(),
        };
        sender.send(closed).unwrap();
        assert!(matches!(
            backlog.next().await,
            Some(Incoming::Message { .. })
        ));
        assert_eq!(backlog.next().await, Some(Incoming::Closed));
    }

    #[tokio::test]
    async fn a_backlog_taken_as_it_comes_never_overflows() {
        let (sender, mut backlog) = backlog(4 * size_of(&message(1000)), 2000);
        for _ in 0..10_000 {
            sender.send(message(1000)).unwrap();
            assert!(matches!(
                backlog.next().await,
                Some(Incoming::Message { .. })
            ));
        }
        // Confirmations pass as `Other`; the end as `Closed`, then `None`.
        let confirmation = PushInfo {
            kind: PushKind::Subscribe,
            data: vec![Value::BulkString(b"channel".to_vec()), Value::Int(1)],
        };
        sender.send(confirmation).unwrap();
        assert_eq!(backlog.next().await, Some(Incoming::Other));
        let closed = PushInfo {
            kind: PushKind::Disconnection,
            data: Vec::new(),
        };
        sender.send(closed).unwrap();
        drop(sender);
        assert_eq!(backlog.next().await, Some(Incoming::Closed));
        assert_eq!(backlog.next().await, None);
    }
}
