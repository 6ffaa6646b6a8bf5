//! Streams (docs/PROTOCOL.md section 4.5), the client's part: a request
//! answered by a stream of items ([`Client::request_stream`], an
//! [`ItemStream`]) and a request that carries a stream of items
//! ([`Client::upload`], an [`Uploader`]).
//!
//! A stream lives on the link it was opened on: when that link is lost, the
//! stream fails with [`ClientError::Closed`], even when the session is
//! resumed on a new link (items are not replayed); open it again.

use std::fmt;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use ternio_protocol::frame::{Flags, Header};
use ternio_protocol::stream::{
    BatchItems, CHUNK_SIZE, INITIAL_CREDIT, STREAM_CREDIT, STREAM_END, STREAM_ITEM, StreamCredit,
    StreamEnd,
};
use ternio_protocol::system::{self, Cancel};
use ternio_protocol::{Chunk, ErrorCode, Packet, Response, StreamRequest, UploadRequest};
use tokio::time::Instant;

use crate::client::{Client, success};
use crate::error::ClientError;
use crate::link::Link;
use crate::link_streams::{Arrived, Slot};
use crate::requests::{Failure, Outcome, deadline_after};
use crate::secure::Seal;
use crate::send::SendError;
use crate::shared::Shared;
use crate::sync::lock;

/// What a stream needs of its link and request slot.
struct Opened {
    link: Arc<Link>,
    id: u32,
    sealed: bool,
    slot: Slot,
}

impl Shared {
    /// Opens a stream: registers request `opcode` (whose answer ends the
    /// stream, with no timeout) and its stream slot on the current link,
    /// then sends it.
    async fn open_stream<P: Packet>(
        &self,
        request: &P,
        download: bool,
    ) -> Result<Opened, ClientError> {
        let timeout = self.config().request_timeout;
        let deadline = deadline_after(Instant::now(), timeout);
        // The stream has no deadline of its own: its end may take long.
        let never = deadline_after(Instant::now(), Duration::MAX);
        let opened = self
            .links()
            .with_link(deadline, timeout, |requests, link| {
                if requests.len() >= self.config().max_in_flight {
                    return Err(ClientError::TooManyInFlight(requests.len()));
                }
                let sealed = self.seals(link, Seal::Auto)?;
                let id = requests.free_id();
                requests.insert(id, sealed, never);
                let slot = link.streams().insert(id);
                {
                    let mut state = lock(&slot);
                    if download {
                        state.granted = INITIAL_CREDIT;
                    } else {
                        state.credit = INITIAL_CREDIT;
                    }
                }
                Ok(Opened {
                    link: Arc::clone(link),
                    id,
                    sealed,
                    slot,
                })
            })
            .await?;
        let compress = self.config().compression.filter(|_| P::COMPRESS);
        let sent = opened.link.send_compressing(
            Header::new(P::OPCODE, Flags::NONE, opened.id),
            request,
            self.config().max_frame_size,
            opened.sealed,
            compress,
        );
        // A download accepts batches of items (`STREAM_ITEMS`) from the start.
        let sent = sent.and_then(|()| {
            if !download {
                return Ok(());
            }
            let accept = StreamCredit {
                items: 0,
                batches: true,
            };
            let header = Header::new(STREAM_CREDIT, Flags::NONE, opened.id);
            let max = self.config().max_frame_size;
            opened.link.send(header, &accept, max, opened.sealed)
        });
        if let Err(error) = sent {
            self.links()
                .with_requests(|requests| requests.remove(opened.id));
            opened.link.streams().remove(opened.id);
            return Err(match error {
                SendError::TooLarge(error) => ClientError::FrameTooLarge(error),
                SendError::NotSecure => ClientError::NotSecure,
                SendError::Handshaking => ClientError::HandshakeInProgress,
                SendError::Gone => ClientError::Closed(opened.link.end_reason()),
                SendError::Lost(reason) => {
                    self.lose(&opened.link, reason);
                    ClientError::Closed(opened.link.end_reason())
                }
            });
        }
        Ok(opened)
    }

    /// Sends a one-way stream frame for stream `id` on `link`.
    fn send_stream_frame<E: ternio_protocol::Encode>(
        &self,
        link: &Arc<Link>,
        header: Header,
        body: &E,
        sealed: bool,
    ) -> Result<(), ClientError> {
        match link.send(header, body, self.config().max_frame_size, sealed) {
            Ok(()) => Ok(()),
            Err(SendError::TooLarge(error)) => Err(ClientError::FrameTooLarge(error)),
            Err(SendError::Lost(reason)) => {
                self.lose(link, reason);
                Err(ClientError::Closed(link.end_reason()))
            }
            Err(_) => Err(ClientError::Closed(link.end_reason())),
        }
    }

    /// Closes a stream its handle dropped before its end: frees the slot
    /// and, if the server may still work on it, sends `CANCEL`.
    fn drop_stream(&self, opened: &Opened) {
        opened.link.streams().remove(opened.id);
        let unanswered = self
            .links()
            .with_requests(|requests| requests.remove(opened.id));
        if unanswered && opened.link.lost_reason().is_none() {
            let _ = opened.link.send(
                Header::new(system::CANCEL, Flags::NONE, 0),
                &Cancel {
                    request_id: opened.id,
                },
                self.config().max_frame_size,
                opened.sealed,
            );
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
    /// The stream lives on its connection: if that connection is lost the
    /// stream fails with [`ClientError::Closed`], even when the session is
    /// resumed ([`ClientConfig::resume`](crate::ClientConfig::resume)).
    /// Opening it waits for a connection within the request timeout; the
    /// stream itself has no timeout.
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
    /// A lost connection fails the upload with [`ClientError::Closed`].
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
        self.opened.link.streams().remove(self.opened.id);
        match outcome.map_err(failure).and_then(success) {
            Ok(_) => None,
            Err(error) => Some(Err(error)),
        }
    }
}

impl<T> ItemStream<T> {
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
        // A failure shows as the lost link.
        let _ = self.shared.send_stream_frame(
            &self.opened.link,
            Header::new(STREAM_CREDIT, Flags::NONE, self.opened.id),
            &StreamCredit::items(items),
            self.opened.sealed,
        );
    }
}

impl<T: Packet> Stream for ItemStream<T> {
    type Item = Result<T, ClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        if let Some(batch) = &mut this.batch {
            if let Some(range) = batch.next() {
                let item = T::decode_packet_within(batch.body(), range.clone());
                this.took(range.len());
                return Poll::Ready(Some(item.map_err(ClientError::from)));
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
        let lost = state
            .lost
            .clone()
            .or_else(|| this.opened.link.lost_reason().cloned());
        if let Some(reason) = lost {
            drop(state);
            this.shared
                .links()
                .with_requests(|requests| requests.remove(this.opened.id));
            return Poll::Ready(this.end_with(Err(Failure::Closed(reason))));
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
            self.opened.link.streams().remove(self.opened.id);
        }
    }
}

/// An upload under way ([`Client::upload`]).
pub struct Uploader<Req: UploadRequest> {
    shared: Arc<Shared>,
    opened: Opened,
    /// The server's answer, when it came before the upload's end.
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
    /// Sends one item, once the server granted credit for it. Fails with
    /// [`ClientError::UploadEnded`] when the server answered the request
    /// before the upload ended (call [`finish`](Self::finish) for that
    /// answer), and with [`ClientError::Closed`] when the connection is lost.
    pub async fn send(&mut self, item: &Req::Item) -> Result<(), ClientError> {
        std::future::poll_fn(|cx| self.poll_credit(cx)).await?;
        self.shared.send_stream_frame(
            &self.opened.link,
            Header::new(STREAM_ITEM, Flags::NONE, self.opened.id),
            item,
            self.opened.sealed,
        )
    }

    fn poll_credit(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ClientError>> {
        if self.answer.is_some() {
            return Poll::Ready(Err(ClientError::UploadEnded));
        }
        let mut state = lock(&self.opened.slot);
        let lost = state
            .lost
            .clone()
            .or_else(|| self.opened.link.lost_reason().cloned());
        if let Some(reason) = lost {
            return Poll::Ready(Err(ClientError::Closed(reason)));
        }
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
            Poll::Ready(outcome) => {
                self.answer = Some(outcome);
                Poll::Ready(Err(ClientError::UploadEnded))
            }
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
        self.done = true;
        let outcome = match self.answer.take() {
            Some(outcome) => outcome,
            None => {
                let lost = lock(&self.opened.slot).lost.clone();
                if let Some(reason) = lost {
                    self.shared
                        .links()
                        .with_requests(|requests| requests.remove(self.opened.id));
                    self.opened.link.streams().remove(self.opened.id);
                    return Err(ClientError::Closed(reason));
                }
                self.shared.send_stream_frame(
                    &self.opened.link,
                    Header::new(STREAM_END, Flags::NONE, self.opened.id),
                    &StreamEnd {
                        code,
                        message: message.to_owned(),
                    },
                    self.opened.sealed,
                )?;
                let id = self.opened.id;
                let shared = Arc::clone(&self.shared);
                let slot = Arc::clone(&self.opened.slot);
                std::future::poll_fn(move |cx| {
                    if let Some(reason) = lock(&slot).lost.clone() {
                        shared.links().with_requests(|requests| requests.remove(id));
                        return Poll::Ready(Err(Failure::Closed(reason)));
                    }
                    lock(&slot).waker = Some(cx.waker().clone());
                    shared
                        .links()
                        .with_requests(|requests| requests.poll(id, cx))
                })
                .await
            }
        };
        self.opened.link.streams().remove(self.opened.id);
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
    /// up to 64 KiB, each sent once the server granted credit for it (a
    /// file of any size, without holding it whole). Returns the bytes sent.
    pub async fn send_reader(
        &mut self,
        mut reader: impl tokio::io::AsyncRead + Unpin,
    ) -> Result<u64, ClientError> {
        use tokio::io::AsyncReadExt;
        let mut buf = ternio_protocol::BytesMut::with_capacity(CHUNK_SIZE);
        let mut sent = 0u64;
        loop {
            buf.reserve(CHUNK_SIZE);
            let read = (&mut reader)
                .take(CHUNK_SIZE as u64)
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
            self.opened.link.streams().remove(self.opened.id);
        }
    }
}
