//! Streams (docs/PROTOCOL.md section 4.5), the client's part: a request
//! answered by a stream of items ([`Client::request_stream`], an
//! [`ItemStream`]) and a request that carries a stream of items
//! ([`Client::upload`], an [`Uploader`]).
//!
//! A stream belongs to the session: on a resumable session
//! ([`ClientConfig::resume`](crate::ClientConfig::resume)) its frames are
//! counted and replayed like requests and answers, so a stream open when
//! the connection is lost goes on once the session is resumed, every item
//! delivered once and in order. When the session is not resumed (it was
//! not resumable, or the resumption failed: a new session), the stream
//! fails with [`ClientError::Closed`].

use std::fmt;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use ternio_protocol::frame::{Flags, HEADER_LEN, Header};
use ternio_protocol::replay::DEFAULT_REPLAY_LIMIT;
use ternio_protocol::stream::{
    BatchItems, CHUNK_SIZE, INITIAL_CREDIT, STREAM_CREDIT, STREAM_END, STREAM_ITEM, StreamCredit,
    StreamEnd,
};
use ternio_protocol::system::{self, Cancel};
use ternio_protocol::{Chunk, Encode, ErrorCode, Packet, Response, StreamRequest, UploadRequest};
use tokio::time::Instant;

use crate::client::{Client, success};
use crate::error::ClientError;
use crate::link_streams::{Arrived, Slot};
use crate::requests::{Failure, Outcome, deadline_after};
use crate::secure::Seal;
use crate::send::SendError;
use crate::shared::Shared;
use crate::sync::lock;

/// The chunks [`Uploader::send_reader`] sends on a resumable session: an
/// eighth of the client's replay buffer (less room for the frame's header
/// and the chunk's length), so that an upload keeps the session resumable.
const RESUMABLE_CHUNK_SIZE: usize = DEFAULT_REPLAY_LIMIT / 8 - 16;

/// What a stream needs of its request: its id, whether its frames go
/// sealed, and its state.
struct Opened {
    id: u32,
    sealed: bool,
    slot: Slot,
}

impl Shared {
    /// Opens a stream: registers request `opcode` (whose answer ends the
    /// stream, with no timeout) and its stream slot, then sends it on the
    /// current link.
    async fn open_stream<P: Packet>(
        &self,
        request: &P,
        download: bool,
    ) -> Result<Opened, ClientError> {
        let timeout = self.config().request_timeout;
        let deadline = deadline_after(Instant::now(), timeout);
        // The stream has no deadline of its own: its end may take long.
        let never = deadline_after(Instant::now(), Duration::MAX);
        let (link, opened) = self
            .links()
            .with_link(deadline, timeout, |requests, link| {
                if requests.len() >= self.config().max_in_flight {
                    return Err(ClientError::TooManyInFlight(requests.len()));
                }
                let sealed = self.seals(link, Seal::Auto)?;
                let id = requests.free_id();
                requests.insert(id, sealed, never, None);
                let slot = self.links().streams().insert(id);
                {
                    let mut state = lock(&slot);
                    if download {
                        state.granted = INITIAL_CREDIT;
                    } else {
                        state.credit = INITIAL_CREDIT;
                    }
                }
                Ok((Arc::clone(link), Opened { id, sealed, slot }))
            })
            .await?;
        let compress = self.config().compression.filter(|_| P::COMPRESS);
        let sent = link.send_compressing(
            Header::new(P::OPCODE, Flags::NONE, opened.id),
            request,
            self.config().max_frame_size,
            opened.sealed,
            compress,
        );
        if let Err(error) = sent {
            self.links()
                .with_requests(|requests| requests.remove(opened.id));
            self.links().streams().remove(opened.id, &opened.slot);
            return Err(match error {
                SendError::TooLarge(error) => ClientError::FrameTooLarge(error),
                SendError::NotSecure => ClientError::NotSecure,
                SendError::Handshaking => ClientError::HandshakeInProgress,
                SendError::Gone => ClientError::Closed(link.end_reason()),
                SendError::Lost(reason) => {
                    self.lose(&link, reason);
                    ClientError::Closed(link.end_reason())
                }
            });
        }
        if download {
            // A download accepts batches of items (`STREAM_ITEMS`) from the
            // start: a stream reply a handler returns at once sees this
            // before its first items (a later one, from an `async`
            // handler, drops it and sees the flag on the first grant). The
            // request is out: a failure here is the link's, which its
            // session's resumption or loss takes care of.
            self.send_credit(&opened, 0);
        }
        Ok(opened)
    }

    /// Sends a frame of stream `opened` on the session's current link,
    /// waiting for one while the client reconnects: a frame sent is
    /// recorded on a resumable session (and replayed if its link lost it),
    /// one refused by a lost link goes on the next. `Ok(false)`: the
    /// stream's request ended first (answered, or failed with its
    /// session); nothing was sent.
    async fn send_stream_frame<E: Encode + ?Sized>(
        &self,
        opened: &Opened,
        header: Header,
        body: &E,
    ) -> Result<bool, ClientError> {
        let never = deadline_after(Instant::now(), Duration::MAX);
        loop {
            let link = self
                .links()
                .with_link(never, Duration::MAX, |requests, link| {
                    Ok(requests.is_waiting(opened.id).then(|| Arc::clone(link)))
                })
                .await?;
            let Some(link) = link else {
                return Ok(false);
            };
            match link.send(header, body, self.config().max_frame_size, opened.sealed) {
                Ok(()) => return Ok(true),
                Err(SendError::TooLarge(error)) => return Err(ClientError::FrameTooLarge(error)),
                Err(SendError::NotSecure) => return Err(ClientError::NotSecure),
                Err(SendError::Handshaking) => return Err(ClientError::HandshakeInProgress),
                // Not sent: the link is gone. Its session is resumed (then
                // the frame goes on the next link) or lost (then the
                // request fails, and the loop ends).
                Err(SendError::Lost(reason)) => self.lose(&link, reason),
                Err(SendError::Gone) => self.lose(&link, link.end_reason()),
            }
        }
    }

    /// Sends `items` of credit for download `opened` on the current link,
    /// if there is one now; `false` when it could not go (the caller owes
    /// it, and sends it once a link is installed).
    fn send_credit(&self, opened: &Opened, items: u32) -> bool {
        let Ok(link) = self.links().current() else {
            return false;
        };
        let header = Header::new(STREAM_CREDIT, Flags::NONE, opened.id);
        // Every grant accepts batches: the server may have dropped the
        // first (its handler had not returned the stream yet).
        let credit = StreamCredit {
            items,
            batches: true,
        };
        match link.send(header, &credit, self.config().max_frame_size, opened.sealed) {
            Ok(()) => true,
            Err(SendError::Lost(reason)) => {
                self.lose(&link, reason);
                false
            }
            Err(_) => false,
        }
    }

    /// Closes a stream its handle dropped before its end: frees the slot
    /// and, if the server may still work on it, sends `CANCEL` (once the
    /// session is resumed, if no link is up now).
    fn drop_stream(&self, opened: &Opened) {
        self.links().streams().remove(opened.id, &opened.slot);
        let unanswered = self
            .links()
            .with_requests(|requests| requests.remove(opened.id));
        if !unanswered {
            return;
        }
        let cancel = Cancel {
            request_id: opened.id,
        };
        let sent = self.links().current().is_ok_and(|link| {
            link.send(
                Header::new(system::CANCEL, Flags::NONE, 0),
                &cancel,
                self.config().max_frame_size,
                opened.sealed,
            )
            .is_ok()
        });
        if sent {
            // Sent, not yet known to have arrived: again after a resumption.
            self.session().cancelled(opened.id);
        } else {
            // The server keeps the stream with the session: cancelled
            // once it is resumed (nothing to do if it is not resumable).
            self.session().abandon_streams(vec![opened.id]);
        }
    }
}

fn failure(failure: Failure) -> ClientError {
    match failure {
        Failure::Closed(reason) => ClientError::Closed(reason),
        Failure::TimedOut => ClientError::Timeout(Duration::MAX),
    }
}

impl Client {
    /// Sends `request` and returns the stream of items that answers it
    /// (docs/PROTOCOL.md section 4.5): each item as it comes, in order,
    /// then `None` once the server's handler ended it; an error
    /// ([`ClientError::Remote`]) ends it early.
    ///
    /// Flow control is the stream's own: the client lets the server send
    /// 32 items ahead of the application (more while the items stay small:
    /// 1 MiB of the largest seen so far, up to
    /// [`ClientConfig::max_stream_window`](crate::ClientConfig::max_stream_window)),
    /// and grants the server more as the application takes them, so a
    /// reader that stops holds the server's handler where it is. Dropping the stream before its end sends
    /// `CANCEL`: the server drops the handler's stream.
    ///
    /// The stream belongs to the session: when the connection is lost and
    /// the session is resumed ([`ClientConfig::resume`](crate::ClientConfig::resume)),
    /// it goes on on the new connection, every item delivered once and in
    /// order. When the session is not resumed (the client does not resume,
    /// or the resumption failed and a new session started), it fails with
    /// [`ClientError::Closed`]. Opening it waits for a connection within
    /// the request timeout; the stream itself has no timeout.
    pub async fn request_stream<Req: StreamRequest>(
        &self,
        request: &Req,
    ) -> Result<ItemStream<Req::Item>, ClientError> {
        let shared = Arc::clone(self.shared_arc());
        let opened = shared.open_stream(request, true).await?;
        Ok(ItemStream {
            shared,
            opened,
            taken: 0,
            window: INITIAL_CREDIT,
            largest: 0,
            batch: None,
            owed: 0,
            end: None,
            done: false,
            _item: PhantomData,
        })
    }

    /// Sends `request`, which opens an upload (docs/PROTOCOL.md section
    /// 4.5): send its items with [`Uploader::send`], then
    /// [`Uploader::finish`] for the server's answer. The server grants
    /// credit as its handler takes items, so `send` waits while the handler
    /// does not read. Dropping the uploader before `finish` sends `CANCEL`.
    ///
    /// Like a download, the upload belongs to the session: it goes on
    /// across a resumed session (`send` waits for the new connection), and
    /// fails with [`ClientError::Closed`] when the session is not resumed.
    pub async fn upload<Req: UploadRequest>(
        &self,
        request: &Req,
    ) -> Result<Uploader<Req>, ClientError> {
        let shared = Arc::clone(self.shared_arc());
        let opened = shared.open_stream(request, false).await?;
        Ok(Uploader {
            shared,
            opened,
            answer: None,
            done: false,
            _request: PhantomData,
        })
    }
}

/// Bytes of items a download aims to let the server send ahead of the
/// application, when its items are small.
const WINDOW_BYTES: usize = 1024 * 1024;

/// The window of a download whose largest item so far is `largest` bytes:
/// [`WINDOW_BYTES`] of such items, from [`INITIAL_CREDIT`] to `max`
/// ([`ClientConfig::max_stream_window`](crate::ClientConfig::max_stream_window)).
fn window_for(largest: usize, max: u32) -> u32 {
    let max = max.max(INITIAL_CREDIT);
    let items = WINDOW_BYTES / largest.max(1);
    u32::try_from(items)
        .unwrap_or(max)
        .clamp(INITIAL_CREDIT, max)
}

/// The items that answer a request ([`Client::request_stream`]): a
/// [`Stream`] of `Result<T, ClientError>`, in the server's order, ended by
/// `None` (complete) or by one `Err`.
pub struct ItemStream<T> {
    shared: Arc<Shared>,
    opened: Opened,
    /// Items taken since the last grant.
    taken: u32,
    /// The items the server may have sent and the application not taken:
    /// [`INITIAL_CREDIT`], wider for small items ([`window_for`]).
    window: u32,
    /// The largest item body seen so far.
    largest: usize,
    /// The rest of the batch the last item came in.
    batch: Option<BatchItems>,
    /// Credit granted and not sent yet: no link was up (sent once one is).
    owed: u32,
    /// The stream's answer, once collected while items still waited.
    end: Option<Outcome>,
    done: bool,
    _item: PhantomData<fn() -> T>,
}

impl<T> fmt::Debug for ItemStream<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ItemStream")
            .field("id", &self.opened.id)
            .finish_non_exhaustive()
    }
}

impl<T> ItemStream<T> {
    /// The ended stream's last item: `None`, or the error that ended it.
    fn end_with(&mut self, outcome: Outcome) -> Option<Result<T, ClientError>> {
        self.done = true;
        self.shared
            .links()
            .streams()
            .remove(self.opened.id, &self.opened.slot);
        match outcome.map_err(failure).and_then(success) {
            Ok(_) => None,
            Err(error) => Some(Err(error)),
        }
    }

    /// Sends the credit owed, if a link is up now.
    fn pay_owed(&mut self) {
        if self.owed > 0 && self.shared.send_credit(&self.opened, self.owed) {
            self.owed = 0;
        }
    }
    /// Counts an item of `len` bytes the application takes, and grants the
    /// server more once half the window is taken.
    fn took(&mut self, len: usize) {
        self.taken += 1;
        self.largest = self.largest.max(len);
        if self.taken < self.window / 2 {
            return;
        }
        // Small items: a wider window, so that credit is not what paces the
        // stream; it never shrinks below what was granted.
        let max = self.shared.config().max_stream_window;
        let window = window_for(self.largest, max).max(self.window);
        let items = std::mem::take(&mut self.taken) + (window - self.window);
        self.window = window;
        {
            let mut state = lock(&self.opened.slot);
            state.granted = state.granted.saturating_add(items);
        }
        // Without a link now, it goes once one is installed.
        self.owed = self.owed.saturating_add(items);
        self.pay_owed();
    }
}

impl<T: Packet> Stream for ItemStream<T> {
    type Item = Result<T, ClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        if this.owed > 0 {
            // Woken when a link is installed (registered before trying, so
            // that an installation meanwhile is not missed).
            lock(&this.opened.slot).waker = Some(cx.waker().clone());
            this.pay_owed();
        }
        if let Some(batch) = &mut this.batch {
            if let Some(range) = batch.next() {
                this.took(range.len());
                let body = this.batch.as_ref().expect("the batch being read").body();
                return Poll::Ready(Some(
                    T::decode_packet_within(body, range).map_err(ClientError::from),
                ));
            }
            this.batch = None;
        }
        let mut state = lock(&this.opened.slot);
        match state.items.pop_front() {
            Some(Arrived::One(body)) => {
                drop(state);
                this.took(body.len());
                return Poll::Ready(Some(T::decode_packet(&body).map_err(ClientError::from)));
            }
            Some(Arrived::Batch(batch)) => {
                drop(state);
                this.batch = Some(batch);
                // A checked batch holds an item: taken on the next poll.
                return self.poll_next(cx);
            }
            None => {}
        }
        state.waker = Some(cx.waker().clone());
        drop(state);
        if let Some(outcome) = this.end.take() {
            return Poll::Ready(this.end_with(outcome));
        }
        let id = this.opened.id;
        match this
            .shared
            .links()
            .with_requests(|requests| requests.poll(id, cx))
        {
            Poll::Ready(outcome) => {
                // Items come before the answer: any that raced in go first.
                if lock(&this.opened.slot).items.is_empty() {
                    Poll::Ready(this.end_with(outcome))
                } else {
                    this.end = Some(outcome);
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T> Drop for ItemStream<T> {
    fn drop(&mut self) {
        if !self.done && self.end.is_none() {
            self.shared.drop_stream(&self.opened);
        } else {
            self.shared
                .links()
                .streams()
                .remove(self.opened.id, &self.opened.slot);
        }
    }
}

/// An upload under way ([`Client::upload`]).
pub struct Uploader<Req: UploadRequest> {
    shared: Arc<Shared>,
    opened: Opened,
    /// The server's answer (or the request's failure), when it came before
    /// the upload's end.
    answer: Option<Outcome>,
    done: bool,
    _request: PhantomData<fn() -> Req>,
}

impl<Req: UploadRequest> fmt::Debug for Uploader<Req> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Uploader")
            .field("id", &self.opened.id)
            .finish_non_exhaustive()
    }
}

impl<Req: UploadRequest> Uploader<Req> {
    /// Sends one item, once the server granted credit for it and, on a
    /// resumable session, once the client's replay buffer has room for it
    /// (the server's acknowledgements make room: an upload never overflows
    /// it, which would end resumability, unless one item is larger than
    /// three quarters of it). Fails with [`ClientError::UploadEnded`] when
    /// the server answered the request before the upload ended (call
    /// [`finish`](Self::finish) for that answer), and with
    /// [`ClientError::Closed`] when the connection is lost and the session
    /// not resumed. While the client reconnects, it waits for the resumed
    /// session.
    pub async fn send(&mut self, item: &Req::Item) -> Result<(), ClientError> {
        std::future::poll_fn(|cx| self.poll_credit(cx)).await?;
        self.wait_for_room(HEADER_LEN + item.encoded_len()).await?;
        let header = Header::new(STREAM_ITEM, Flags::NONE, self.opened.id);
        if self
            .shared
            .send_stream_frame(&self.opened, header, item)
            .await?
        {
            return Ok(());
        }
        // The request ended first: its outcome says how.
        let outcome = self.collect().await;
        Err(self.ended(outcome))
    }

    /// The request's outcome, once it has one.
    async fn collect(&self) -> Outcome {
        let id = self.opened.id;
        std::future::poll_fn(|cx| {
            self.shared
                .links()
                .with_requests(|requests| requests.poll(id, cx))
        })
        .await
    }

    /// Keeps the request's `outcome`, which came before the upload's end,
    /// and returns the error `send` reports: the connection's loss, or the
    /// server's early answer.
    fn ended(&mut self, outcome: Outcome) -> ClientError {
        let error = match &outcome {
            Err(Failure::Closed(reason)) => ClientError::Closed(reason.clone()),
            _ => ClientError::UploadEnded,
        };
        self.answer = Some(outcome);
        error
    }

    /// Waits until the replay buffer has room for a frame of `frame_bytes`
    /// (at once when the session is not resumable), or the request ends.
    async fn wait_for_room(&mut self, frame_bytes: usize) -> Result<(), ClientError> {
        let session = Arc::clone(self.shared.session());
        let id = self.opened.id;
        loop {
            let changed = session.room_changed();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if session.has_room(frame_bytes) {
                return Ok(());
            }
            let shared = &self.shared;
            let ended = std::future::poll_fn(|cx| {
                if changed.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(None);
                }
                shared
                    .links()
                    .with_requests(|requests| requests.poll(id, cx))
                    .map(Some)
            })
            .await;
            if let Some(outcome) = ended {
                return Err(self.ended(outcome));
            }
        }
    }

    fn poll_credit(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ClientError>> {
        if let Some(answer) = &self.answer {
            return Poll::Ready(Err(match answer {
                Err(Failure::Closed(reason)) => ClientError::Closed(reason.clone()),
                _ => ClientError::UploadEnded,
            }));
        }
        let mut state = lock(&self.opened.slot);
        if state.credit > 0 {
            state.credit -= 1;
            return Poll::Ready(Ok(()));
        }
        state.waker = Some(cx.waker().clone());
        drop(state);
        let id = self.opened.id;
        match self
            .shared
            .links()
            .with_requests(|requests| requests.poll(id, cx))
        {
            Poll::Ready(outcome) => Poll::Ready(Err(self.ended(outcome))),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Ends the upload as complete (`STREAM_END` with code 0) and waits for
    /// the server's answer.
    pub async fn finish(self) -> Result<Req::Response, ClientError> {
        self.end(0, "").await
    }

    /// Ends the upload as failed, with `code` and `message` (`STREAM_END`):
    /// the handler's upload yields that error. Then waits for the answer.
    pub async fn fail(self, code: ErrorCode, message: &str) -> Result<Req::Response, ClientError> {
        self.end(code.to_u16().max(1), message).await
    }

    async fn end(mut self, code: u16, message: &str) -> Result<Req::Response, ClientError> {
        let outcome = match self.answer.take() {
            Some(outcome) => outcome,
            None => {
                let header = Header::new(STREAM_END, Flags::NONE, self.opened.id);
                let end = StreamEnd {
                    code,
                    message: message.to_owned(),
                };
                // Dropped on an error here: `CANCEL`, as any upload dropped.
                self.shared
                    .send_stream_frame(&self.opened, header, &end)
                    .await?;
                self.collect().await
            }
        };
        self.done = true;
        self.shared
            .links()
            .streams()
            .remove(self.opened.id, &self.opened.slot);
        let frame = success(outcome.map_err(failure)?)?;
        Ok(Req::Response::from_response(
            frame.header.opcode,
            &frame.body,
            Req::OPCODE,
        )?)
    }
}

impl<Req: UploadRequest<Item = Chunk>> Uploader<Req> {
    /// Sends what `reader` reads, to its end, as a byte stream: chunks of
    /// up to 64 KiB (about 8 KiB on a resumable session, an eighth of the
    /// client's replay buffer, so that the upload keeps the session
    /// resumable), each sent once the server granted credit for it (a file
    /// of any size, without holding it whole). Returns the bytes sent.
    pub async fn send_reader(
        &mut self,
        mut reader: impl tokio::io::AsyncRead + Unpin,
    ) -> Result<u64, ClientError> {
        use tokio::io::AsyncReadExt;
        let chunk_size = if self.shared.wants_resume() {
            RESUMABLE_CHUNK_SIZE
        } else {
            CHUNK_SIZE
        };
        let mut buf = ternio_protocol::BytesMut::with_capacity(chunk_size);
        let mut sent = 0u64;
        loop {
            buf.reserve(chunk_size);
            let read = (&mut reader)
                .take(chunk_size as u64)
                .read_buf(&mut buf)
                .await
                .map_err(ClientError::Connect)?;
            if read == 0 {
                return Ok(sent);
            }
            let data = buf.split().freeze();
            sent += data.len() as u64;
            self.send(&Chunk { data }).await?;
        }
    }
}

impl<Req: UploadRequest> Drop for Uploader<Req> {
    fn drop(&mut self) {
        if !self.done && self.answer.is_none() {
            self.shared.drop_stream(&self.opened);
        } else {
            self.shared
                .links()
                .streams()
                .remove(self.opened.id, &self.opened.slot);
        }
    }
}
