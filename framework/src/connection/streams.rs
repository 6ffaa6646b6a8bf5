//! Streams (docs/PROTOCOL.md section 4.5), the engine's part: the
//! downloads it sends (a handler's [`StreamReply`](crate::StreamReply)),
//! polled only while the peer granted credit, and the uploads it receives,
//! handed to their handlers within the credit the engine granted.
//!
//! Both are bounded: at most `max_streams_per_connection` open at once,
//! and an upload holds at most the credit granted (the peer's item beyond
//! it closes the connection `MALFORMED`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use ternio_protocol::FrameError;
use ternio_protocol::frame::{Flags, HEADER_LEN, Header};
use ternio_protocol::secure::{COUNTER_LEN, TAG_LEN};
use ternio_protocol::stream::{
    CHUNK_LEN_ROOM, INITIAL_CREDIT, ItemSource, STREAM_CREDIT, STREAM_END, STREAM_ITEM,
    STREAM_ITEMS, StreamCredit, StreamEnd, put_batch_item,
};
use ternio_protocol::{
    Bytes, BytesMut, Decode, DisconnectReason, Encode, ErrorCode, HandlerError, ReplySink,
};
use tokio::time::Sleep;

use super::requests::THROUGH_ALL;
use super::{AfterFrame, Engine};
use crate::close::CloseNotice;
use crate::middleware::Outcome;
use crate::upload::{End, UploadShared};

/// Items one download may send in one round of the connection's task
/// before the others (and the socket write) get their turn.
const ROUND: u32 = 256;

/// Bytes one download may write in one round.
const ROUND_BYTES: usize = 64 * 1024;

/// The bytes a batch of items (`STREAM_ITEMS`) aims at: enough to make a
/// frame's header, seal and hand-over cost next to nothing per item (a
/// hundred items of 64 bytes), small enough that one frame does not hold
/// up a flaky link (a cut mid-frame sends the whole frame again).
const BATCH_BYTES: usize = 8 * 1024;

/// Items smaller than this (encoded) go in batches (`STREAM_ITEMS`) to a
/// peer that accepts them; a larger one goes alone, encoded straight into
/// the outbound buffer (batching it would save nothing and cost a copy).
const BATCHED_ITEM: usize = 4 * 1024;

/// A download: a handler's stream of items on its way to the peer.
pub(super) struct Download {
    /// The request that opened it.
    header: Header,
    /// The handler's index in the dispatch table.
    handler: usize,
    started: Option<std::time::Instant>,
    items: Box<dyn ItemSource>,
    /// The items the peer still accepts.
    credit: u32,
    /// Whether the peer accepts `STREAM_ITEMS` on this stream.
    batches: bool,
    /// Whether the last item sent was too large to batch
    /// ([`BATCHED_ITEM`]): the next goes alone, without a copy.
    large: bool,
    /// The handler's time limit or the peer's `DEADLINE`, if either.
    deadline: Option<Pin<Box<Sleep>>>,
}

/// An upload the peer sends.
struct UploadEntry {
    id: u32,
    shared: Arc<UploadShared>,
    /// The items the peer may still send.
    credit: u32,
}

/// The open streams of a connection.
#[derive(Default)]
pub(super) struct Streams {
    downloads: Vec<Download>,
    uploads: Vec<UploadEntry>,
    /// Where the next round starts (round robin among downloads).
    cursor: usize,
    /// Holds a batch's first item until it is known to have one
    /// ([`Engine::send_batch`]); kept to be reused.
    scratch: BytesMut,
}

impl Streams {
    /// How many streams are open.
    pub(super) fn open(&self) -> usize {
        self.downloads.len() + self.uploads.len()
    }

    /// Whether no download is open.
    pub(super) fn no_downloads(&self) -> bool {
        self.downloads.is_empty()
    }

    /// Whether no stream is open: [`Engine::poll_streams`] has nothing to
    /// do (checked inline, before the call, on every round of an echo).
    #[inline]
    pub(super) fn none_open(&self) -> bool {
        self.downloads.is_empty() && self.uploads.is_empty()
    }

    /// Opens the upload of request `id`: its shared state, for the handler;
    /// `grant_due` wakes the connection when the handler made room.
    pub(super) fn open_upload(
        &mut self,
        id: u32,
        grant_due: impl Fn() + Send + Sync + 'static,
    ) -> Arc<UploadShared> {
        let shared = Arc::new(UploadShared::new(grant_due));
        self.uploads.push(UploadEntry {
            id,
            shared: Arc::clone(&shared),
            credit: INITIAL_CREDIT,
        });
        shared
    }

    /// Closes the upload of request `id` (its request ended): items still
    /// coming are dropped.
    pub(super) fn request_ended(&mut self, id: u32) {
        if self.uploads.is_empty() {
            return;
        }
        if let Some(position) = self.uploads.iter().position(|entry| entry.id == id) {
            let entry = self.uploads.swap_remove(position);
            entry.shared.end(End::Failed(HandlerError::new(
                ErrorCode::Internal,
                "the request ended",
            )));
        }
    }
}

impl Engine {
    /// Opens a download for the request `header` whose handler (at `index`)
    /// returned a stream; refused `OVERLOADED` past the connection's limit
    /// of open streams.
    pub(super) fn open_download(
        &mut self,
        header: Header,
        index: usize,
        started: Option<std::time::Instant>,
        items: Box<dyn ItemSource>,
        deadline: Option<Pin<Box<Sleep>>>,
    ) {
        if self.streams.open() >= self.server.config.max_streams_per_connection {
            drop(items);
            let limit = self.server.config.max_streams_per_connection;
            let outcome = self.error(
                header,
                ErrorCode::Overloaded,
                &format_args!("too many open streams on this connection (at most {limit})"),
            );
            self.finish_stream(header, index, outcome, started);
            return;
        }
        self.streams.downloads.push(Download {
            header,
            handler: index,
            started,
            items,
            credit: INITIAL_CREDIT,
            batches: false,
            large: false,
            deadline,
        });
    }

    /// Runs the `after` hooks of a stream that ended.
    fn finish_stream(
        &self,
        header: Header,
        index: usize,
        outcome: Outcome,
        started: Option<std::time::Instant>,
    ) {
        let server = Arc::clone(&self.server);
        let handler = server.table.handler(index);
        self.after(header, handler, THROUGH_ALL, outcome, started);
    }

    /// Sends what the open streams have ready: items of the downloads with
    /// credit (a round of at most [`ROUND`] items or [`ROUND_BYTES`] each, while the outbound buffer
    /// is below its high-water mark), their ends, and the credit the
    /// uploads' handlers made room for. Returns whether anything happened.
    pub(super) fn poll_streams(&mut self, cx: &mut TaskContext<'_>) -> bool {
        let mut progress = false;
        if !self.streams.uploads.is_empty() {
            progress |= self.grant_upload_credit();
        }
        if self.streams.downloads.is_empty() || self.closed.is_some() {
            return progress;
        }
        let high_water = self.server.config.outbound_high_water;
        // Closing, the connection reads no more credit: a download that
        // has none left cannot go on, and ends now rather than at the grace.
        let closing = self.closing.is_some();
        // On a resumable session every item is kept until the client
        // acknowledges it: a byte stream's chunks are cut to fit.
        let item_limit = self
            .resume
            .as_ref()
            .map(|resume| chunk_bytes(resume.replay.limit()));
        let mut downloads = std::mem::take(&mut self.streams.downloads);
        let count = downloads.len();
        let start = self.streams.cursor % count;
        let mut ended = Vec::new();
        for offset in 0..count {
            let position = (start + offset) % count;
            let download = &mut downloads[position];
            if download
                .deadline
                .as_mut()
                .is_some_and(|deadline| deadline.as_mut().poll(cx).is_ready())
            {
                ended.push((position, Ended::TimedOut));
                continue;
            }
            if closing && download.credit == 0 {
                ended.push((position, Ended::Failed(closing_error())));
                continue;
            }
            if let Some(bytes) = item_limit {
                download.items.limit_item_bytes(bytes);
            }
            let mut sent = 0;
            let round_end = self.out.len() + ROUND_BYTES;
            // A download that batches is bounded by the round's bytes alone.
            while download.credit > 0
                && (sent < ROUND || download.batches)
                && self.out.len() < high_water.min(round_end)
                && self.replay_has_room()
            {
                // A batch is bounded in bytes (BATCH_BYTES), not in items.
                let batch = download.batches && !download.large && download.credit > 1;
                let (polled, items) = if batch {
                    self.send_batch(download, cx, download.credit)
                } else {
                    self.send_item(download, cx)
                };
                download.credit -= items;
                sent += items;
                progress |= items > 0;
                match polled {
                    Poll::Ready(Some(Ok(()))) => {}
                    Poll::Ready(Some(Err(error))) => {
                        progress = true;
                        ended.push((position, Ended::Failed(error)));
                        break;
                    }
                    Poll::Ready(None) => {
                        progress = true;
                        ended.push((position, Ended::Complete));
                        break;
                    }
                    Poll::Pending => break,
                }
            }
        }
        self.streams.cursor = start + 1;
        // Ends, in the order of the positions from the last (so that
        // `swap_remove` leaves the others' positions valid).
        ended.sort_by_key(|end| std::cmp::Reverse(end.0));
        for (position, end) in ended {
            progress = true;
            let download = downloads.swap_remove(position);
            let Download {
                header,
                handler,
                started,
                items,
                ..
            } = download;
            drop(items);
            let name = self.server.table.handler(handler).name;
            let outcome = match end {
                Ended::Complete => self.reply_to(header).ack(),
                Ended::Failed(error) => self.reply_to(header).error(error.code.to_u16(), &error),
                Ended::TimedOut => self.reply_to(header).error(
                    ErrorCode::Timeout.to_u16(),
                    &format_args!("{name} ran past its time limit"),
                ),
            };
            self.finish_stream(header, handler, outcome, started);
        }
        // Streams opened meanwhile (none can be: only this engine opens them).
        downloads.append(&mut self.streams.downloads);
        self.streams.downloads = downloads;
        progress
    }

    /// Polls one item of `download` and sends it as a `STREAM_ITEM`.
    /// Returns what the poll gave (an item not sent shows as an error) and
    /// how many items were sent.
    fn send_item(&mut self, download: &mut Download, cx: &mut TaskContext<'_>) -> (Polled, u32) {
        if download.items.reads_bytes() && self.security.sealer().is_none() && self.resume.is_none()
        {
            return self.send_read_chunk(download, cx);
        }
        let id = download.header.request_id;
        let mut written = Ok(0);
        let polled = download.items.poll_item(cx, &mut |encode| {
            written = self
                .write_stream_frame(Header::new(STREAM_ITEM, Flags::NONE, id), |out| encode(out));
        });
        match (polled, written) {
            (Poll::Ready(Some(Ok(()))), Err(error)) => (Poll::Ready(Some(Err(not_sent(error)))), 0),
            (Poll::Ready(Some(Ok(()))), Ok(len)) => {
                download.large = len >= BATCHED_ITEM;
                (Poll::Ready(Some(Ok(()))), 1)
            }
            (polled, _) => (polled, 0),
        }
    }

    /// Reads a byte stream's next chunk straight into its `STREAM_ITEM`
    /// frame ([`ItemSource::poll_read_chunk`]): the chunk after a large one
    /// (after a small one the next goes into a batch, [`Self::send_batch`]).
    /// Only on a plain session that is not resumable: there a frame begun
    /// for a read that brought nothing is taken back out of `out` as if
    /// never written (nothing was sealed, counted or kept for replay).
    fn send_read_chunk(
        &mut self,
        download: &mut Download,
        cx: &mut TaskContext<'_>,
    ) -> (Polled, u32) {
        let header = Header::new(STREAM_ITEM, Flags::NONE, download.header.request_id);
        let max = self
            .server
            .config
            .max_frame_size
            .saturating_sub(HEADER_LEN + CHUNK_LEN_ROOM);
        let start = self.out.len();
        let mut polled = None;
        let written = self.write_stream_frame(header, |out| {
            polled = Some(download.items.poll_read_chunk(cx, out, max));
        });
        // Never `None` on a plain frame (its body is always written); if it
        // were, the stream ends rather than waits with no waker registered.
        let polled = polled.unwrap_or_else(|| {
            Poll::Ready(Some(Err(HandlerError::new(
                ErrorCode::Internal,
                "a byte stream's chunk was not read into its frame",
            ))))
        });
        match (polled, written) {
            (Poll::Ready(Some(Ok(()))), Ok(len)) => {
                download.large = len >= BATCHED_ITEM;
                (Poll::Ready(Some(Ok(()))), 1)
            }
            (Poll::Ready(Some(Ok(()))), Err(error)) => (Poll::Ready(Some(Err(not_sent(error)))), 0),
            (polled, _) => {
                self.out.truncate(start);
                (polled, 0)
            }
        }
    }

    /// Sends the items `download` has ready, at most `limit` (its credit),
    /// as one `STREAM_ITEMS` frame of about [`BATCH_BYTES`] (the stream's
    /// receiver accepted batches). The first item is polled before the
    /// frame is begun (an empty batch is never sent), and one that is not
    /// small ([`BATCHED_ITEM`]) goes alone, as a `STREAM_ITEM`. Returns how the batch ended
    /// (`Ready(Some(Ok))`: it is full) and how many items were sent.
    fn send_batch(
        &mut self,
        download: &mut Download,
        cx: &mut TaskContext<'_>,
        limit: u32,
    ) -> (Polled, u32) {
        let id = download.header.request_id;
        let mut first = std::mem::take(&mut self.streams.scratch);
        first.clear();
        let polled = download
            .items
            .poll_item(cx, &mut |encode| encode(&mut first));
        if !matches!(polled, Poll::Ready(Some(Ok(())))) {
            self.streams.scratch = first;
            return (polled, 0);
        }
        let max_body = self
            .server
            .config
            .max_frame_size
            .saturating_sub(HEADER_LEN + COUNTER_LEN + TAG_LEN);
        // Room for one more item of up to half a frame past the target,
        // and no more than the replay buffer holds without the answers'
        // quarter (a batch waits for the client's ACKs as its items would).
        let target = BATCH_BYTES.min(max_body / 2).min(self.replay_room());
        if first.len() >= target.min(BATCHED_ITEM) {
            download.large = true;
            let written =
                self.write_stream_frame(Header::new(STREAM_ITEM, Flags::NONE, id), |out| {
                    out.extend_from_slice(&first);
                });
            if first.capacity() <= BATCHED_ITEM {
                self.streams.scratch = first;
            }
            return match written {
                Ok(_) => (polled, 1),
                Err(error) => (Poll::Ready(Some(Err(not_sent(error)))), 0),
            };
        }
        let mut sent = 1;
        let mut ended = Poll::Ready(Some(Ok(())));
        // An item that took the batch past the frame's limit: sent alone.
        let mut spilled = None;
        let written = self.write_stream_frame(Header::new(STREAM_ITEMS, Flags::NONE, id), |out| {
            let start = out.len();
            put_batch_item(out, |out: &mut BytesMut| out.extend_from_slice(&first));
            let room = target.saturating_sub(out.len() - start);
            let batch = download.items.poll_batch(cx, limit - 1, room, out);
            sent += batch.items;
            ended = batch.polled;
            if batch.items == 0 {
                return;
            }
            let prefix = out[batch.last..]
                .iter()
                .take_while(|byte| **byte >= 0x80)
                .count()
                + 1;
            let last = out.len() - batch.last - prefix;
            // The last item was not small, or took the batch past a frame.
            if last >= BATCHED_ITEM || out.len() - start > max_body {
                spilled = Some(BytesMut::from(&out[batch.last + prefix..]));
                out.truncate(batch.last);
            }
        });
        // Not kept whatever its size: a large first item is rare.
        self.streams.scratch = if first.capacity() > BATCHED_ITEM {
            BytesMut::new()
        } else {
            first
        };
        if let Err(error) = written {
            return (Poll::Ready(Some(Err(not_sent(error)))), 0);
        }
        if let Some(spilled) = spilled {
            download.large = spilled.len() >= BATCHED_ITEM;
            let written =
                self.write_stream_frame(Header::new(STREAM_ITEM, Flags::NONE, id), |out| {
                    out.extend_from_slice(&spilled);
                });
            if let Err(error) = written {
                return (Poll::Ready(Some(Err(not_sent(error)))), sent - 1);
            }
        }
        (ended, sent)
    }

    /// The bytes a download's batch may take in the replay buffer: what is
    /// left beyond the quarter kept for answers (less a frame header), on a
    /// resumable session; otherwise no bound. (A batch smaller than its
    /// first item sends that item alone.)
    fn replay_room(&self) -> usize {
        match &self.resume {
            Some(resume) if !resume.replay.is_overflowed() => {
                let limit = resume.replay.limit();
                (limit - limit / 4)
                    .saturating_sub(resume.replay.bytes())
                    .saturating_sub(HEADER_LEN)
            }
            _ => usize::MAX,
        }
    }

    /// Whether a download may write an item now as far as resumption goes:
    /// always on a session that is not resumable; on one that is, while
    /// the replay buffer has room beyond the quarter of its bound kept for
    /// answers, as pushes are held (section 4.2), so that a download waits
    /// for the client's `ACK`s instead of overflowing the buffer. An item
    /// larger than the room left still overflows it (resumability ends,
    /// the stream goes on). As pushes, downloads wait only while the
    /// connection reads (the `ACK` that frees room comes in with the rest).
    fn replay_has_room(&self) -> bool {
        self.resume.as_ref().is_none_or(|resume| {
            resume.replay.fits(1, resume.replay.limit() / 4) || !self.wants_input()
        })
    }

    /// Sends `STREAM_CREDIT` for the uploads whose handlers took items.
    fn grant_upload_credit(&mut self) -> bool {
        let mut grants = Vec::new();
        for entry in &mut self.streams.uploads {
            if let Some(items) = entry.shared.take_grant() {
                entry.credit = entry.credit.saturating_add(items);
                grants.push((entry.id, items));
            }
        }
        for &(id, items) in &grants {
            let _ = self.write_stream_frame(Header::new(STREAM_CREDIT, Flags::NONE, id), |out| {
                StreamCredit::items(items).encode(out);
            });
        }
        !grants.is_empty()
    }

    /// Handles `STREAM_ITEM`, `STREAM_CREDIT` and `STREAM_END` from the
    /// peer. A malformed one (flags, a body that is not its fields) or an
    /// item beyond the credit granted closes the connection `MALFORMED`;
    /// one for a stream not open (it crossed the stream's end or a
    /// `CANCEL`) is dropped.
    pub(super) fn on_stream_frame(&mut self, header: Header, body: Bytes) -> AfterFrame {
        if header.flags.is_response() || header.flags.is_error() || header.request_id == 0 {
            return self.stream_violation(
                "a stream frame with RESPONSE or ERROR set, or without a stream id",
            );
        }
        let id = header.request_id;
        match header.opcode {
            // This server never accepts batches on an upload.
            STREAM_ITEMS if self.streams.uploads.iter().any(|entry| entry.id == id) => {
                return self.stream_violation("STREAM_ITEMS on an upload that did not accept them");
            }
            STREAM_ITEM => {
                let Some(entry) = self.streams.uploads.iter_mut().find(|entry| entry.id == id)
                else {
                    return AfterFrame::Continue;
                };
                if entry.credit == 0 {
                    return self.stream_violation("an upload item beyond its credit");
                }
                entry.credit -= 1;
                entry.shared.push(body);
            }
            STREAM_CREDIT => {
                let Ok(credit) = StreamCredit::decode_body(&body) else {
                    return self.stream_violation("a STREAM_CREDIT body that is not 4 or 5 bytes");
                };
                if let Some(download) = self
                    .streams
                    .downloads
                    .iter_mut()
                    .find(|download| download.header.request_id == id)
                {
                    download.credit = download.credit.saturating_add(credit.items);
                    download.batches |= credit.batches;
                }
            }
            STREAM_END => {
                let Ok(end) = StreamEnd::decode_body(&body) else {
                    return self.stream_violation("a STREAM_END body shorter than its code");
                };
                if let Some(position) = self.streams.uploads.iter().position(|entry| entry.id == id)
                {
                    let entry = self.streams.uploads.swap_remove(position);
                    entry.shared.end(match end.code {
                        0 => End::Complete,
                        code => {
                            End::Failed(HandlerError::new(ErrorCode::from_u16(code), end.message))
                        }
                    });
                }
            }
            _ => {}
        }
        AfterFrame::Continue
    }

    fn stream_violation(&mut self, why: &str) -> AfterFrame {
        self.close_now(&CloseNotice::new(DisconnectReason::Malformed, why))
    }

    /// Ends the download of request `id` on the peer's `CANCEL`: its stream
    /// is dropped, nothing is sent. Returns whether there was one.
    pub(super) fn cancel_download(&mut self, id: u32) -> bool {
        let Some(position) = self
            .streams
            .downloads
            .iter()
            .position(|download| download.header.request_id == id)
        else {
            return false;
        };
        let download = self.streams.downloads.swap_remove(position);
        self.drop_download(download);
        true
    }

    /// Drops a download before its end (its handler's stream first): it
    /// counts as cancelled, and nothing is sent.
    fn drop_download(&mut self, download: Download) {
        drop(download.items);
        self.finish_stream(
            download.header,
            download.handler,
            Outcome::Cancelled,
            download.started,
        );
    }

    /// Fails every open upload: the connection is closing and reads no
    /// more of their items (their handlers answer, and the close goes on).
    pub(super) fn fail_uploads_for_close(&mut self) {
        for entry in &self.streams.uploads {
            entry.shared.end(End::Failed(closing_error()));
        }
    }

    /// Drops every open stream (the connection ends: closed, or its
    /// session not resumed within its time to live): downloads count as
    /// cancelled, uploads fail. A resumable session's streams outlive a
    /// lost link: they wait with the session (section 4.5).
    pub(super) fn end_streams(&mut self) {
        for entry in std::mem::take(&mut self.streams.uploads) {
            entry.shared.end(End::Failed(HandlerError::new(
                ErrorCode::Internal,
                "the connection was lost",
            )));
        }
        for download in std::mem::take(&mut self.streams.downloads) {
            self.drop_download(download);
        }
    }
}

/// How a download ended in a round.
enum Ended {
    Complete,
    Failed(HandlerError),
    TimedOut,
}

/// What polling a download's items gave.
type Polled = Poll<Option<Result<(), HandlerError>>>;

/// The error that ends a download whose item could not be written.
fn not_sent(error: FrameError) -> HandlerError {
    HandlerError::new(
        ErrorCode::Internal,
        format!("a stream item not sent: {error}"),
    )
}

/// The most a byte stream's chunk body takes on a resumable session whose
/// replay buffer is bounded by `replay_limit` bytes: an eighth of it, less
/// a frame header (so that a chunk always fits in the quarter kept for
/// answers); a large buffer keeps the usual 64 KiB chunks
/// ([`CHUNK_SIZE`](ternio_protocol::stream::CHUNK_SIZE), plus room for the
/// chunk's length).
fn chunk_bytes(replay_limit: usize) -> usize {
    (replay_limit / 8)
        .saturating_sub(ternio_protocol::frame::HEADER_LEN)
        .clamp(1, ternio_protocol::stream::CHUNK_SIZE + 8)
}

/// Why a stream ends when its connection closes before it could finish.
fn closing_error() -> HandlerError {
    HandlerError::new(ErrorCode::Internal, "the connection is closing")
}
