//! Streams (docs/PROTOCOL.md section 4.5): a handler that answers with many
//! items ([`StreamReply`]) or takes many items from the client ([`Upload`]).
//!
//! ```
//! use ternio::{Packet, StreamReply, StreamRequest, packet_controller};
//!
//! #[derive(Packet)]
//! #[packet(opcode = 0x0030, response = ())]
//! struct Count {
//!     up_to: u32,
//! }
//!
//! impl StreamRequest for Count {
//!     type Item = Number;
//! }
//!
//! #[derive(Packet)]
//! #[packet(opcode = 0x0031)]
//! struct Number(u32);
//!
//! #[derive(Default)]
//! struct Counter;
//!
//! #[packet_controller]
//! impl Counter {
//!     /// Items go out as the client grants credit: a client that stops
//!     /// reading stops this stream from being polled.
//!     fn count(request: Count) -> StreamReply<Number> {
//!         StreamReply::new(futures_util::stream::iter((0..request.up_to).map(Number)))
//!     }
//! }
//! ```

use std::fmt;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context as TaskContext, Poll};

use bytes::BufMut;
use futures_util::{Stream, StreamExt};
use ternio_protocol::codec::put_len;
use ternio_protocol::schema::{SchemaBuilder, TypeRef};
use ternio_protocol::stream::{
    BatchPoll, CHUNK_LEN_ROOM, CHUNK_SIZE, ItemSource, WriteItem, put_batch_item, put_chunk_with,
};
use ternio_protocol::{
    AppError, Bytes, BytesMut, Chunk, ErrorCode, HandlerError, IntoReply, Packet, ReplySink,
};
use tokio::io::AsyncRead;

use crate::context::Context;
use crate::extract::FromContext;
use crate::middleware::Rejection;
use crate::panics::panic_message;
use crate::upload::{End, UploadShared};

/// What a handler returns to answer its request with a stream of `P`s
/// (docs/PROTOCOL.md section 4.5). The request declares `response = ()`
/// and implements [`StreamRequest`](ternio_protocol::StreamRequest) with
/// `Item = P`.
///
/// The server polls the stream only while the client has granted credit
/// (and the connection's outbound buffer is below its high-water mark; on
/// a resumable session, while its replay buffer has room), so a client
/// that stops reading holds the stream where it is. The stream ends with
/// an acknowledgement when it returns `None`, or with the error of its
/// first `Err` item; a `CANCEL` from the client, the handler's time limit,
/// or a lost link whose session is not resumed drops it. On a resumable
/// session the stream outlives a lost link: it waits with the session and
/// goes on once the client resumes it.
pub struct StreamReply<P> {
    /// The handler's stream as the connection polls it (its type known
    /// inside, so that polling an item is no dynamic call).
    source: Box<dyn ItemSource>,
    _item: PhantomData<fn() -> P>,
}

impl<P> fmt::Debug for StreamReply<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamReply").finish_non_exhaustive()
    }
}

impl<P: Packet> StreamReply<P> {
    /// A stream reply of `items`, complete when they end.
    pub fn new(items: impl Stream<Item = P> + Send + 'static) -> Self {
        Self::of(items.map(Ok), None)
    }

    /// A stream reply of `items` that may fail midway: the first `Err`
    /// ends the stream with its code and message.
    pub fn try_new<E: AppError>(items: impl Stream<Item = Result<P, E>> + Send + 'static) -> Self {
        let items = items
            .map(|item| item.map_err(|error| HandlerError::new(error.code(), error.to_string())));
        Self::of(items, None)
    }

    fn of<S>(items: S, chunk_limit: Option<Arc<AtomicUsize>>) -> Self
    where
        S: Stream<Item = Result<P, HandlerError>> + Send + 'static,
    {
        Self {
            source: Box::new(Source {
                items: Box::pin(items),
                done: false,
                chunk_limit,
            }),
            _item: PhantomData,
        }
    }
}

impl StreamReply<Chunk> {
    /// A byte stream read from `reader`, in chunks of up to 64 KiB (smaller
    /// on a resumable session: at most an eighth of its replay buffer, so
    /// that the stream keeps the session resumable): a file of any size
    /// goes out without ever being held whole. A read error ends the
    /// stream with `INTERNAL`.
    pub fn bytes(reader: impl AsyncRead + Send + 'static) -> Self {
        Self {
            source: Box::new(ReadSource {
                reader: Box::pin(reader),
                buf: BytesMut::new(),
                limit: CHUNK_SIZE,
                done: false,
            }),
            _item: PhantomData,
        }
    }

    /// A byte stream of `data`, cut into chunks of up to 64 KiB (smaller on
    /// a resumable session, as [`bytes`](Self::bytes)'s; views of `data`,
    /// not copies).
    pub fn from_bytes(data: Bytes) -> Self {
        Self::cut(Box::pin(futures_util::stream::iter([Ok(data)])))
    }

    fn cut(reads: Pin<Box<dyn Stream<Item = Result<Bytes, HandlerError>> + Send>>) -> Self {
        let limit = Arc::new(AtomicUsize::new(CHUNK_SIZE));
        let chunks = Cut {
            reads,
            rest: Bytes::new(),
            limit: Arc::clone(&limit),
        };
        Self::of(chunks, Some(limit))
    }
}

/// Byte reads cut into chunks of at most `limit` bytes (read at each chunk).
struct Cut {
    reads: Pin<Box<dyn Stream<Item = Result<Bytes, HandlerError>> + Send>>,
    /// What is left of the last read.
    rest: Bytes,
    limit: Arc<AtomicUsize>,
}

impl Stream for Cut {
    type Item = Result<Chunk, HandlerError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if !self.rest.is_empty() {
                let size = self.limit.load(Ordering::Relaxed).clamp(1, CHUNK_SIZE);
                let size = size.min(self.rest.len());
                let data = self.rest.split_to(size);
                return Poll::Ready(Some(Ok(Chunk { data })));
            }
            match std::task::ready!(self.reads.as_mut().poll_next(cx)) {
                Some(Ok(data)) => self.rest = data,
                Some(Err(error)) => return Poll::Ready(Some(Err(error))),
                None => return Poll::Ready(None),
            }
        }
    }
}

/// A byte stream read from a reader ([`StreamReply::bytes`]). On a plain
/// session that is not resumable a read that follows a large chunk (the
/// steady state of a download) goes straight into its frame
/// ([`ItemSource::poll_read_chunk`]), as a raw socket's read goes into the
/// buffer it writes from; otherwise it goes into a buffer of its own,
/// reused, and from there into the frame (sealed, kept for replay, or
/// batched with other small chunks).
struct ReadSource<R> {
    reader: Pin<Box<R>>,
    /// The last read, on the path through a buffer.
    buf: BytesMut,
    /// The most bytes a chunk carries ([`CHUNK_SIZE`], less on a resumable
    /// session).
    limit: usize,
    /// The end, an error or a panic ends the stream: nothing is read after.
    done: bool,
}

impl<R: AsyncRead + Send> ReadSource<R> {
    /// One read of at most `max` bytes (and the chunk limit) into `out`:
    /// `Ready(Some(Ok(())))` when bytes came, anything else ends or holds
    /// the stream.
    fn poll_read_into(
        &mut self,
        cx: &mut TaskContext<'_>,
        out: &mut BytesMut,
        max: usize,
    ) -> Poll<Option<Result<(), HandlerError>>> {
        if self.done {
            return Poll::Ready(None);
        }
        let max = max.min(self.limit).max(1);
        out.reserve(max);
        let reader = self.reader.as_mut();
        let read = std::panic::catch_unwind(AssertUnwindSafe(|| {
            tokio_util::io::poll_read_buf(reader, cx, &mut out.limit(max))
        }));
        let polled = match read {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(Ok(0))) => Poll::Ready(None),
            Ok(Poll::Ready(Ok(_))) => return Poll::Ready(Some(Ok(()))),
            Ok(Poll::Ready(Err(error))) => Poll::Ready(Some(Err(HandlerError::new(
                ErrorCode::Internal,
                format!("read failed: {error}"),
            )))),
            Err(panic) => panicked(&*panic),
        };
        self.done = true;
        polled
    }
}

impl<R: AsyncRead + Send> ItemSource for ReadSource<R> {
    fn poll_item(
        &mut self,
        cx: &mut TaskContext<'_>,
        write: WriteItem<'_>,
    ) -> Poll<Option<Result<(), HandlerError>>> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let polled = self.poll_read_into(cx, &mut buf, CHUNK_SIZE);
        if let Poll::Ready(Some(Ok(()))) = polled {
            write(&|out: &mut BytesMut| {
                out.reserve(CHUNK_LEN_ROOM + buf.len());
                put_len(out, buf.len());
                out.extend_from_slice(&buf);
            });
        }
        self.buf = buf;
        polled
    }

    fn reads_bytes(&self) -> bool {
        true
    }

    fn poll_read_chunk(
        &mut self,
        cx: &mut TaskContext<'_>,
        out: &mut BytesMut,
        max: usize,
    ) -> Poll<Option<Result<(), HandlerError>>> {
        let mut polled = Poll::Pending;
        put_chunk_with(out, |out| polled = self.poll_read_into(cx, out, max));
        polled
    }

    fn limit_item_bytes(&mut self, bytes: usize) {
        self.limit = chunk_data_limit(bytes);
    }
}

/// The most data a chunk whose body is kept within `bytes` carries: the
/// body less its length varint.
fn chunk_data_limit(bytes: usize) -> usize {
    bytes.saturating_sub(8).max(1)
}

/// A [`StreamReply`] as the connection polls it: each item encoded straight
/// into the outbound buffer (no allocation per item), the handler's stream
/// polled through its own type (one dynamic call per batch, not per item).
struct Source<S> {
    items: Pin<Box<S>>,
    /// The first error ends the stream: nothing is polled after it.
    done: bool,
    chunk_limit: Option<Arc<AtomicUsize>>,
}

/// What a handler's stream that panicked ends with: `INTERNAL`, as a
/// panicking handler's answer (logged).
fn panicked<T>(panic: &(dyn std::any::Any + Send)) -> Poll<Option<Result<T, HandlerError>>> {
    let message = panic_message(panic);
    tracing::error!(panic = %message, "a handler's stream panicked");
    Poll::Ready(Some(Err(HandlerError::new(
        ErrorCode::Internal,
        "the handler's stream panicked",
    ))))
}

impl<P, S> ItemSource for Source<S>
where
    P: Packet,
    S: Stream<Item = Result<P, HandlerError>> + Send,
{
    fn poll_item(
        &mut self,
        cx: &mut TaskContext<'_>,
        write: WriteItem<'_>,
    ) -> Poll<Option<Result<(), HandlerError>>> {
        if self.done {
            return Poll::Ready(None);
        }
        // A panicking stream ends as a panicking handler does: `INTERNAL`,
        // the connection and its other requests untouched.
        let items = &mut self.items;
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| items.as_mut().poll_next(cx)))
            .unwrap_or_else(|panic| panicked(&*panic));
        match polled {
            Poll::Ready(Some(Ok(item))) => {
                write(&|out: &mut BytesMut| {
                    out.reserve(item.encoded_len());
                    item.encode(out);
                });
                Poll::Ready(Some(Ok(())))
            }
            Poll::Ready(Some(Err(error))) => {
                self.done = true;
                Poll::Ready(Some(Err(error)))
            }
            Poll::Ready(None) => {
                self.done = true;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn poll_batch(
        &mut self,
        cx: &mut TaskContext<'_>,
        max_items: u32,
        max_bytes: usize,
        out: &mut BytesMut,
    ) -> BatchPoll {
        let start = out.len();
        let mut batch = BatchPoll {
            items: 0,
            last: start,
            polled: Poll::Ready(None),
        };
        if self.done {
            return batch;
        }
        let items = &mut self.items;
        // One guard for the whole batch; on a panic, the item being
        // encoded (if any) is taken back out.
        let mut end = start;
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| {
            while batch.items < max_items && out.len() - start < max_bytes {
                match items.as_mut().poll_next(cx) {
                    Poll::Ready(Some(Ok(item))) => {
                        let mark = out.len();
                        put_batch_item(out, |out: &mut BytesMut| {
                            out.reserve(item.encoded_len());
                            item.encode(out);
                        });
                        end = out.len();
                        batch.last = mark;
                        batch.items += 1;
                    }
                    Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error))),
                    Poll::Ready(None) => return Poll::Ready(None),
                    Poll::Pending => return Poll::Pending,
                }
            }
            Poll::Ready(Some(Ok(())))
        }))
        .unwrap_or_else(|panic| panicked(&*panic));
        out.truncate(end);
        if !matches!(polled, Poll::Ready(Some(Ok(()))) | Poll::Pending) {
            self.done = true;
        }
        batch.polled = polled;
        batch
    }

    fn limit_item_bytes(&mut self, bytes: usize) {
        if let Some(limit) = &self.chunk_limit {
            limit.store(chunk_data_limit(bytes), Ordering::Relaxed);
        }
    }
}

impl<P: Packet> IntoReply for StreamReply<P> {
    type Response = ();
    fn describe_stream(schema: &mut SchemaBuilder) -> Option<TypeRef> {
        Some(P::describe(schema))
    }
    fn into_reply<S: ReplySink>(self, sink: S) -> S::Output {
        sink.stream(self.source)
    }
}

/// The items a client uploads with its request (docs/PROTOCOL.md section
/// 4.5), as a handler parameter: a [`Stream`] of `Result<P, HandlerError>`
/// that ends (`None`) when the client's `STREAM_END` says the upload is
/// complete. An `Err` item is the upload's failure: an item that does not
/// decode as `P` (`MALFORMED`), the client's own error code, or the lost
/// link; nothing follows it.
///
/// The server holds at most the credit it granted (32 items to begin
/// with); it grants more as the handler takes items, so a handler that
/// stops reading holds the client at its credit. Only an `async` handler
/// may take an upload. Once the handler answers, the upload ends: items
/// still coming are dropped.
pub struct Upload<P> {
    shared: Arc<UploadShared>,
    _item: PhantomData<fn() -> P>,
}

impl<P> fmt::Debug for Upload<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upload").finish_non_exhaustive()
    }
}

impl<P: Packet> Stream for Upload<P> {
    type Item = Result<P, HandlerError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        let mut state = self.shared.lock();
        if let Some(body) = state.items.pop_front() {
            self.shared.took_one(state);
            return Poll::Ready(Some(P::decode_packet(&body).map_err(|error| {
                // Nothing follows a failure.
                let mut state = self.shared.lock();
                state.items.clear();
                state.end = Some(End::Complete);
                HandlerError::new(ErrorCode::Malformed, format!("an upload item: {error}"))
            })));
        }
        match state.end.take() {
            Some(End::Complete) => {
                state.end = Some(End::Complete);
                Poll::Ready(None)
            }
            Some(End::Failed(error)) => {
                state.end = Some(End::Complete);
                Poll::Ready(Some(Err(error)))
            }
            None => {
                state.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl<P: Packet> FromContext for Upload<P> {
    type Rejection = Rejection;
    const UPLOAD: bool = true;

    fn describe_upload(schema: &mut SchemaBuilder) -> Option<TypeRef> {
        Some(P::describe(schema))
    }

    fn from_context(ctx: &Context) -> Result<Self, Rejection> {
        match ctx.upload() {
            Some(shared) => Ok(Self {
                shared,
                _item: PhantomData,
            }),
            None => Err(Rejection::new(
                ErrorCode::Internal,
                "this request carries no upload",
            )),
        }
    }
}
