//! Resumption's state at the client (docs/PROTOCOL.md section 4.2): the
//! ticket, the frames sent and kept until the server acknowledges them, and
//! the count of frames received that `ACK`s report. The exchanges on a
//! link are in `resuming`.
//!
//! The frames sent are recorded under the session's lock, in the same
//! critical section that queues them on the link, so that their numbers
//! are the order they reach the wire. The frames received are counted on
//! the link's reader task, in the order they arrive, without a lock (see
//! `received`); the answers to `RESUME_TICKET` and `RESUME` are taken there
//! too, so that counting starts, and new keys are in place, before the next
//! frame is read.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ternio_protocol::frame::Header;
use ternio_protocol::replay::ReplayBuffer;
use ternio_protocol::resume::ResumeInitiator;
use ternio_protocol::system::{self, Ack, ErrorBody, ResumeTicket, Resumed, Ticket};
use ternio_protocol::{Decode, Encode, ErrorCode};
use tokio::sync::{Notify, oneshot};

use crate::error::{ClientError, CloseReason};
use crate::received::{Batch, Received, Taken};
use crate::send::{SendError, TakeAck};
use crate::sync::lock;

/// The session's resumption state, shared by its links.
pub(crate) struct Session {
    state: Mutex<State>,
    /// The frames received, and from which link they are taken.
    received: Received,
    /// Held while an `ACK`'s count is taken and the `ACK` queued, so that
    /// `ACK`s leave in the order of their counts (the server refuses one
    /// lower than an earlier one), whether the reader or the acknowledging
    /// task sends them.
    ack_order: Mutex<()>,
    /// Wakes the acknowledging task at the first frame since an `ACK`.
    pub(crate) ack_due: Notify,
    /// Wakes the uploads waiting for room in the replay buffer: an `ACK`
    /// came, or the session changed.
    room: Notify,
    /// Set once a server refused a `RESUME_TICKET` that asked for its
    /// replay bound (a server from before 2026-12): ask with an empty body.
    plain_ticket: AtomicBool,
}

/// A link reader's [`Batch`], and the session it counts for: closed when
/// dropped (the link's tasks are gone), should the reader have stopped
/// inside a read (a panic), since a `RESUME` waits for open batches.
pub(crate) struct ReadBatch {
    session: Arc<Session>,
    batch: Batch,
}

impl ReadBatch {
    /// A batch of `session`'s, for one link's reader.
    pub(crate) fn new(session: &Arc<Session>) -> Self {
        Self {
            session: Arc::clone(session),
            batch: Batch::default(),
        }
    }

    /// The batch, for the reader alone.
    pub(crate) fn batch(&self) -> &Batch {
        &self.batch
    }
}

impl Drop for ReadBatch {
    fn drop(&mut self) {
        self.session.end_read(&self.batch);
    }
}

#[derive(Default)]
struct State {
    /// The frames sent since the ticket was asked for, until acknowledged;
    /// `None` when not recording.
    replay: Option<ReplayBuffer>,
    ticket: Option<Ticket>,
    ttl: Duration,
    /// Resumptions so far.
    resumed: u64,
    /// Where a frame's plain body is encoded to be recorded (reused).
    scratch: BytesMut,
    /// Why the server ended the session, to report once a link is back.
    ended: Option<String>,
    /// Streams dropped while no link was up, to cancel once the session
    /// resumes (at most [`MAX_ABANDONED`]).
    abandoned: Vec<u32>,
    /// Streams whose `CANCEL` went on a link that may have lost it (a
    /// system frame is not replayed): cancelled again once the session
    /// resumes on another link (at most [`MAX_ABANDONED`], the oldest
    /// forgotten first: a link that lived on delivered them).
    cancelled: std::collections::VecDeque<u32>,
}

/// The most streams a resumption cancels; more were never open at once on
/// a server (its `max_streams_per_connection` is far below).
const MAX_ABANDONED: usize = 1024;

/// Why a `RESUME` did not resume the session.
pub(crate) enum ResumeFailed {
    /// The server refused it: the connection is a new session.
    Refused(String),
    /// The connection failed: another attempt may resume.
    Link(ClientError),
}

/// A `RESUME` sent on a link and not answered yet.
pub(crate) struct PendingResume {
    pub(crate) id: u32,
    /// The resumption handshake of a secure session.
    pub(crate) initiator: Option<ResumeInitiator>,
    /// Where the outcome goes.
    pub(crate) done: oneshot::Sender<Result<Resumed, ResumeFailed>>,
}

impl Session {
    pub(crate) fn new() -> Self {
        Self {
            state: Mutex::new(State::default()),
            received: Received::default(),
            ack_order: Mutex::new(()),
            ack_due: Notify::new(),
            room: Notify::new(),
            plain_ticket: AtomicBool::new(false),
        }
    }

    /// Whether the session can be resumed: it has a ticket, and keeps every
    /// frame the server has not acknowledged.
    pub(crate) fn is_resumable(&self) -> bool {
        let state = lock(&self.state);
        state.ticket.is_some()
            && state
                .replay
                .as_ref()
                .is_some_and(|replay| !replay.is_overflowed())
    }

    /// Why a session that existed cannot be resumed although its link was
    /// only lost: the server ended it with a `DISCONNECT`, or its replay
    /// buffer overflowed (the server may lack frames this client can no
    /// longer send again). `None` when it can be, or never was.
    pub(crate) fn lost_reason(&self) -> Option<String> {
        let state = lock(&self.state);
        if let Some(why) = &state.ended {
            return Some(why.clone());
        }
        state
            .replay
            .as_ref()
            .is_some_and(ReplayBuffer::is_overflowed)
            .then(|| {
                "the client's replay buffer overflowed: the session could not be resumed".into()
            })
    }

    /// Ends the session because the server sent `DISCONNECT` (contract
    /// section 4.2: the client does not resume then); `why` is reported
    /// with the next connection's [`SessionEvent::Lost`](crate::SessionEvent).
    pub(crate) fn end(&self, why: String) {
        let mut state = lock(&self.state);
        if state.ticket.take().is_some() {
            state.ended = Some(why);
        }
    }

    /// How long the server keeps the session after a loss.
    pub(crate) fn ttl(&self) -> Duration {
        lock(&self.state).ttl
    }

    /// Resumptions so far.
    pub(crate) fn resumptions(&self) -> u64 {
        lock(&self.state).resumed
    }

    /// Forgets the session: a new one starts (nothing recorded or counted
    /// until its ticket is asked for).
    pub(crate) fn reset(&self) {
        let mut state = lock(&self.state);
        *state = State {
            resumed: state.resumed,
            ..State::default()
        };
        self.received.reset();
        drop(state);
        self.room.notify_waiters();
    }

    /// Takes the frames of the link tagged `tag` from now on (0: none):
    /// those of any other link are refused. Called as the current link (or
    /// the one resuming) changes.
    pub(crate) fn accept(&self, tag: u64) {
        self.received.accept(tag);
    }

    /// Sends `header` + `body` on the link tagged `tag` with `send`,
    /// recording it when it is counted and the session records: under the
    /// session's lock, so that the order of the records is the order on
    /// the wire. The `RESUME_TICKET` request starts the recording. A
    /// counted frame carries the session's `ACK` along (`send` gets what
    /// takes its count) once half of what calls for an `ACK` is unacknowledged
    /// ([`Received::ack_rides_along`]). A frame recorded is encoded once:
    /// `send` gets its body encoded (`Some`), to send as it is; `None`:
    /// `send` encodes `body` itself.
    pub(crate) fn send<E: Encode + ?Sized>(
        &self,
        header: Header,
        body: &E,
        tag: u64,
        send: impl FnOnce(Option<TakeAck<'_>>, Option<&[u8]>) -> Result<(), SendError>,
    ) -> Result<(), SendError> {
        let counted = header.is_counted();
        let starts = header.opcode == system::RESUME_TICKET && !header.flags.is_response();
        if !counted && !starts {
            return send(None, None);
        }
        let mut state = lock(&self.state);
        if starts {
            send(None, None)?;
            if state.replay.is_none() {
                state.replay = Some(ReplayBuffer::default());
            }
            return Ok(());
        }
        // The count taken and the `ACK` queued under `ack_order`, as in
        // `send_ack`; taken by the link only once it can queue the `ACK`.
        let order = self
            .received
            .ack_rides_along(tag)
            .then(|| lock(&self.ack_order));
        let take = || self.received.take_ack().map(|received| Ack { received });
        let ack = order.as_ref().map(|_| &take as TakeAck<'_>);
        let State {
            replay: Some(replay),
            scratch,
            ..
        } = &mut *state
        else {
            drop(state);
            return send(ack, None);
        };
        scratch.clear();
        body.encode(scratch);
        let sent = send(ack, Some(&scratch[..]));
        drop(order);
        let kept = sent.is_ok() && replay.record(header, scratch);
        if scratch.capacity() > 64 * 1024 {
            // A large frame's room goes back.
            *scratch = BytesMut::new();
        }
        sent?;
        if !kept {
            tracing::debug!("replay buffer full: the session is no longer resumable");
            state.ticket = None;
        }
        Ok(())
    }

    /// Notes streams dropped while no link could carry their `CANCEL`, to
    /// cancel on resumption.
    pub(crate) fn abandon_streams(&self, ids: Vec<u32>) {
        if ids.is_empty() {
            return;
        }
        let mut state = lock(&self.state);
        if state.ticket.is_none() {
            // Not resumable: the server drops them with the session.
            return;
        }
        let room = MAX_ABANDONED.saturating_sub(state.abandoned.len());
        state.abandoned.extend(ids.into_iter().take(room));
    }

    /// Notes that the `CANCEL` of stream `id` went on the current link: if
    /// that link is lost, the `CANCEL` may be lost with it, and goes again
    /// after the resumption (a stale one is dropped by the server; ids are
    /// not reused before the id counter wraps).
    pub(crate) fn cancelled(&self, id: u32) {
        let mut state = lock(&self.state);
        if state.ticket.is_none() {
            return;
        }
        if state.cancelled.len() >= MAX_ABANDONED {
            state.cancelled.pop_front();
        }
        state.cancelled.push_back(id);
    }

    /// The streams to cancel now that the session resumed on a new link:
    /// those dropped while no link was up, and those whose `CANCEL` went on
    /// a link that was lost since.
    pub(crate) fn take_abandoned(&self) -> Vec<u32> {
        let mut state = lock(&self.state);
        let mut ids = std::mem::take(&mut state.abandoned);
        ids.extend(state.cancelled.drain(..));
        ids
    }

    /// Takes a frame of `bytes` (header and plain body) that came on the
    /// link tagged `tag` (a push or an answer: an application opcode), for
    /// the reader whose batch is `batch`, counting it when the session
    /// counts. `None`: the link is not the one whose frames are taken, drop
    /// the frame; `Some(true)`: an `ACK` is due now. The first frame since
    /// an `ACK` wakes the acknowledging task. `held_back`: a push or stream
    /// frame, not an answer ([`Received::take`]).
    pub(crate) fn received(
        &self,
        batch: &Batch,
        tag: u64,
        bytes: usize,
        held_back: bool,
    ) -> Option<bool> {
        match self.received.take(batch, tag, bytes, held_back) {
            Taken::Refused => None,
            Taken::Quiet => Some(false),
            Taken::First => {
                self.ack_due.notify_one();
                Some(false)
            }
            Taken::AckNow => Some(true),
        }
    }

    /// Adds what `batch` took to the count, before an `ACK` reports it.
    pub(crate) fn publish(&self, batch: &Batch) {
        self.received.publish(batch);
    }

    /// The reader handed over what it read: what `batch` took is in the
    /// count.
    pub(crate) fn end_read(&self, batch: &Batch) {
        self.received.end(batch);
    }

    /// Completes once no reader is inside a read, so that the count shows
    /// every frame delivered. A reader ends its batch when it waits for
    /// more or stops, so this is short, unless a push handler holds the
    /// reader: it checks again at once a few times, then every
    /// millisecond.
    pub(crate) async fn settled(&self) {
        let mut checks = 0u32;
        while !self.received.settled() {
            checks += 1;
            if checks < 64 {
                tokio::task::yield_now().await;
            } else {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }

    /// Whether an idle reader acknowledges now ([`Received::ack_when_idle`]).
    pub(crate) fn ack_when_idle(&self) -> bool {
        self.received.ack_when_idle()
    }

    /// Whether frames came since the last `ACK`.
    pub(crate) fn has_unacked(&self) -> bool {
        self.received.has_unacked()
    }

    /// Sends the `ACK` of what came since the last one with `send`, if
    /// anything did; the count is taken and the `ACK` queued under one
    /// lock, so that `ACK`s leave in the order of their counts.
    pub(crate) fn send_ack(
        &self,
        send: impl FnOnce(TakeAck<'_>) -> Result<(), SendError>,
    ) -> Result<(), SendError> {
        let _order = lock(&self.ack_order);
        send(&|| self.received.take_ack().map(|received| Ack { received }))
    }

    /// Takes the server's `ACK`: the frames it acknowledges are dropped.
    pub(crate) fn on_ack(&self, header: Header, body: &Bytes) -> Option<CloseReason> {
        let ack = match Ack::decode_body(body) {
            Ok(ack) if header.request_id == 0 => ack,
            _ => return Some(CloseReason::Protocol("a malformed ACK".into())),
        };
        let mut state = lock(&self.state);
        let replay = state.replay.as_mut()?;
        match replay.acknowledge(ack.received) {
            Ok(()) => {
                drop(state);
                self.room.notify_waiters();
                None
            }
            Err(error) => Some(CloseReason::Protocol(format!("ACK: {error}"))),
        }
    }

    /// Whether a counted frame of `frame_bytes` (7 of header plus the plain
    /// body) may be sent now without overflowing the replay buffer, a
    /// quarter of its bound left for requests: always when the session does
    /// not record (or overflowed already); a frame that could never fit
    /// waits for an empty buffer (then overflows it: waiting would not
    /// make room).
    pub(crate) fn has_room(&self, frame_bytes: usize) -> bool {
        lock(&self.state)
            .replay
            .as_ref()
            .is_none_or(|replay| replay.fits(frame_bytes, replay.limit() / 4))
    }

    /// Completes when the replay buffer may have more room: an `ACK` came
    /// (or the `received` of the answer to a resumption), or the session
    /// changed. Create it, then check [`has_room`](Self::has_room).
    pub(crate) fn room_changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.room.notified()
    }

    /// Whether `RESUME_TICKET` asks for the server's replay bound: unless
    /// a server refused such a request.
    pub(crate) fn asks_bound(&self) -> bool {
        !self.plain_ticket.load(Ordering::Relaxed)
    }

    /// Takes the answer to `RESUME_TICKET`: counting starts with the next
    /// frame. An error (a server that does not resume sessions) stops the
    /// recording. Returns whether to ask again with an empty body: the
    /// server refused the request that asked for its bound as malformed
    /// (it is older than that request), the first time.
    pub(crate) fn on_ticket(&self, header: Header, body: &Bytes) -> bool {
        let refused_form = header.flags.is_error()
            && ErrorBody::parse(body).is_ok_and(|error| error.code == ErrorCode::Malformed)
            && !self.plain_ticket.swap(true, Ordering::Relaxed);
        let mut state = lock(&self.state);
        let ticket = (!header.flags.is_error())
            .then(|| ResumeTicket::decode_body(body).ok())
            .flatten();
        match ticket {
            Some(answer) => {
                state.ticket = Some(answer.ticket);
                state.ttl = Duration::from_millis(u64::from(answer.ttl_ms));
                self.received.set_bound(answer.replay_bytes);
                self.received.start();
            }
            None => {
                tracing::debug!("the server does not resume sessions");
                *state = State {
                    resumed: state.resumed,
                    ..State::default()
                };
                self.received.reset();
                drop(state);
                self.room.notify_waiters();
            }
        }
        refused_form
    }

    /// The ticket and the count of frames received, for a `RESUME`: call
    /// it once [`settled`](Self::settled), after the link whose frames are
    /// taken changed.
    pub(crate) fn resume_request(&self) -> Result<(Ticket, u64), ResumeFailed> {
        let state = lock(&self.state);
        let ticket = state.ticket.clone().ok_or_else(|| {
            ResumeFailed::Refused(
                "the session has no ticket (or no longer keeps what it sent)".into(),
            )
        })?;
        Ok((ticket, self.received.count()))
    }

    /// Takes the server's answer to a `RESUME`: its new ticket, and its
    /// count as an acknowledgement; returns the frames it lacks, to send
    /// again first.
    pub(crate) fn resumed(&self, resumed: &Resumed) -> Result<Vec<(Header, Bytes)>, ResumeFailed> {
        let mut state = lock(&self.state);
        state.ticket = Some(resumed.ticket.clone());
        state.ttl = Duration::from_millis(u64::from(resumed.ttl_ms));
        let replay = state
            .replay
            .as_mut()
            .ok_or_else(|| ResumeFailed::Refused("nothing kept to replay".into()))?;
        let lacking: Option<Vec<(Header, Bytes)>> =
            replay.replay_from(resumed.received).map(|frames| {
                frames
                    .map(|(header, body)| (header, Bytes::copy_from_slice(body)))
                    .collect()
            });
        let Some(frames) = lacking.filter(|_| replay.acknowledge(resumed.received).is_ok()) else {
            return Err(ResumeFailed::Refused(format!(
                "the server received {} frames: the client cannot replay from there",
                resumed.received
            )));
        };
        state.resumed += 1;
        drop(state);
        self.room.notify_waiters();
        Ok(frames)
    }
}

#[cfg(test)]
mod tests {
    use ternio_protocol::frame::Flags;

    use super::*;

    /// The link takes the count only when the `ACK` can go
    /// (`Outbound::queue_ack`): a counted frame that cannot go (a
    /// handshake waits) leaves the frames received unacknowledged, and the
    /// next frame that goes carries their `ACK`, its body encoded once.
    #[test]
    fn the_count_of_an_ack_that_rides_along_is_taken_by_the_link() {
        let session = Session::new();
        session.accept(1);
        session.received.start();
        session.received.set_bound(Some(64 * 1024));
        lock(&session.state).replay = Some(ReplayBuffer::default());
        let batch = Batch::default();
        for _ in 0..20 {
            assert_eq!(session.received(&batch, 1, 1037, true), Some(false));
        }
        session.end_read(&batch);
        let header = Header::new(0x0A00, Flags::NONE, 0);
        let waiting = session.send(header, &5u8, 1, |take, encoded| {
            assert!(take.is_some(), "an ACK rides along from 16 KiB");
            assert_eq!(encoded, Some(&[5u8][..]));
            Err(SendError::Handshaking)
        });
        assert!(matches!(waiting, Err(SendError::Handshaking)));
        assert!(session.has_unacked(), "20 frames never acknowledged");
        let mut carried = None;
        session
            .send(header, &5u8, 1, |take, _| {
                carried = take.and_then(|take| take());
                Ok(())
            })
            .unwrap();
        assert_eq!(carried.map(|ack| ack.received), Some(20));
        assert!(!session.has_unacked());
    }
}
