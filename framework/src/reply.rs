//! Writing replies: straight into the connection's outbound buffer for a
//! handler that finished inline, or kept for later for one that was pending.

use std::fmt;

use ternio_protocol::frame::{self, Flags, Framing, Header};
use ternio_protocol::replay::ReplayBuffer;
use ternio_protocol::secure::Sealer;
use ternio_protocol::stream::ItemSource;
use ternio_protocol::system::ErrorBody;
use ternio_protocol::{BytesMut, ErrorCode, FrameError, Packet, ReplySink};

use crate::ids::Transport;
use crate::metrics::Metrics;
use crate::middleware::{Outcome, Rejection};

/// The server's metrics and the connection's transport, for a reply to count itself.
#[derive(Clone, Copy)]
pub(crate) struct ReplyMetrics<'a> {
    pub(crate) server: &'a Metrics,
    pub(crate) transport: Transport,
}

/// Writes the reply to one request as a frame at the end of `out`, sealed
/// when a sealer is given (the answer to a sealed request).
///
/// A request with id 0 (fire-and-forget) gets no reply on success, and an
/// error with id 0 on failure (section 2).
pub(crate) struct FrameReply<'a> {
    out: &'a mut BytesMut,
    framing: Framing,
    request: Header,
    max_frame_size: usize,
    sealer: Option<&'a mut Sealer>,
    /// Counts the frames and errors written, when metrics are on.
    metrics: Option<ReplyMetrics<'a>>,
    /// Keeps a plain copy of each counted frame (an application opcode, or
    /// a stream frame), on a resumable session.
    replay: Option<&'a mut ReplayBuffer>,
    /// The server's compression threshold, if it compresses (section 6).
    compression: Option<usize>,
    /// Where a stream reply goes: the connection opens the stream once the
    /// handler returned (none: the reply cannot stream here).
    stream: Option<&'a mut Option<Box<dyn ItemSource>>>,
}

impl<'a> FrameReply<'a> {
    /// The reply to `request`, as a length-prefixed frame at the end of `out`.
    pub(crate) fn new(
        out: &'a mut BytesMut,
        request: Header,
        max_frame_size: usize,
        sealer: Option<&'a mut Sealer>,
        metrics: Option<ReplyMetrics<'a>>,
    ) -> Self {
        Self {
            out,
            framing: Framing::LengthPrefixed,
            request,
            max_frame_size,
            sealer,
            metrics,
            replay: None,
            compression: None,
            stream: None,
        }
    }

    /// Keeps a stream reply in `slot`, for the connection to open.
    pub(crate) fn streaming(mut self, slot: &'a mut Option<Box<dyn ItemSource>>) -> Self {
        self.stream = Some(slot);
        self
    }

    /// Compresses the packets written (not errors) whose body reaches
    /// `threshold`, when that makes them smaller.
    pub(crate) fn compressing(mut self, threshold: Option<usize>) -> Self {
        self.compression = threshold;
        self
    }

    /// Records every counted frame written (an application opcode, or a
    /// stream frame) in `replay` (on a resumable session).
    pub(crate) fn recording(mut self, replay: Option<&'a mut ReplayBuffer>) -> Self {
        self.replay = replay;
        self
    }

    /// Writes one frame, sealed or not, whose body `body` writes;
    /// compressed when `compress` and the reply compresses (the replay
    /// keeps the uncompressed body).
    fn write(
        &mut self,
        header: Header,
        compress: bool,
        body: impl FnOnce(&mut BytesMut),
    ) -> Result<usize, FrameError> {
        // System frames (PONG, TIME) are never compressed.
        let compression = self.compression.filter(|_| compress && !header.is_system());
        let replay = self.replay.as_deref_mut().filter(|_| header.is_counted());
        let written = match (self.sealer.as_deref_mut(), replay) {
            (Some(sealer), None) => sealer.write_frame_compressing(
                self.out,
                self.framing,
                header,
                self.max_frame_size,
                compression,
                body,
                |_| {},
            ),
            (Some(sealer), Some(replay)) => sealer.write_frame_compressing(
                self.out,
                self.framing,
                header,
                self.max_frame_size,
                compression,
                body,
                |plain| {
                    replay.record(header, plain);
                },
            ),
            (None, replay) => {
                let start = self.out.len();
                let written = frame::write_frame_with(
                    self.out,
                    self.framing,
                    header,
                    self.max_frame_size,
                    body,
                );
                if let (Ok(_), Some(replay)) = (&written, replay) {
                    let body_at = start + self.framing.prefix_len() + frame::HEADER_LEN;
                    replay.record(header, &self.out[body_at..]);
                }
                match (written, compression) {
                    (Ok(_), Some(threshold)) => Ok(frame::compress_written(
                        self.out,
                        start,
                        self.framing,
                        threshold,
                    )),
                    (written, _) => written,
                }
            }
        };
        if let (Ok(_), Some(metrics)) = (&written, &self.metrics) {
            metrics
                .server
                .transport(metrics.transport)
                .frames_out
                .increment(1);
        }
        written
    }

    /// Writes one frame of the engine's own under `header` (a stream
    /// frame), uncompressed, recorded like a reply when it is counted.
    pub(crate) fn own_frame(
        mut self,
        header: Header,
        body: impl FnOnce(&mut BytesMut),
    ) -> Result<usize, FrameError> {
        self.write(header, false, body)
    }

    fn header(&self, opcode: u16, flags: Flags) -> Header {
        Header::new(opcode, flags, self.request.request_id)
    }

    /// The error of a request refused before its handler ran.
    pub(crate) fn reject(self, rejection: &Rejection) -> Outcome {
        match self.error(rejection.code.to_u16(), &rejection.message) {
            Outcome::Failed(code) => Outcome::Rejected(code),
            outcome => outcome,
        }
    }

    /// A reply already encoded as `opcode` + `body`; compressed when
    /// `compress` (its type allows it) and the reply compresses.
    pub(crate) fn encoded(mut self, opcode: u16, body: &[u8], compress: bool) -> Outcome {
        if self.request.request_id == 0 {
            return Outcome::Replied;
        }
        let header = self.header(opcode, Flags::RESPONSE);
        match self.write(header, compress, |out| out.extend_from_slice(body)) {
            Ok(_) => Outcome::Replied,
            Err(error) => self.error(
                ErrorCode::Internal.to_u16(),
                &format_args!("reply not sent: {error}"),
            ),
        }
    }
}

/// The code sent for a handler's error: codes 0 and 11 to 99 are not the
/// application's to use and become `INTERNAL`.
fn wire_code(code: u16) -> u16 {
    match ErrorCode::from_u16(code) {
        ErrorCode::Unassigned(_) => ErrorCode::Internal.to_u16(),
        _ => code,
    }
}

impl ReplySink for FrameReply<'_> {
    type Output = Outcome;

    fn packet<P: Packet>(mut self, packet: &P) -> Outcome {
        if self.request.request_id == 0 {
            return Outcome::Replied;
        }
        let header = self.header(P::OPCODE, Flags::RESPONSE);
        let written = self.write(header, P::COMPRESS, |out| {
            out.reserve(packet.encoded_len());
            packet.encode(out);
        });
        match written {
            Ok(_) => Outcome::Replied,
            Err(error) => self.error(
                ErrorCode::Internal.to_u16(),
                &format_args!("reply not sent: {error}"),
            ),
        }
    }

    fn ack(self) -> Outcome {
        let opcode = self.request.opcode;
        self.encoded(opcode, &[], false)
    }

    fn stream(self, items: Box<dyn ItemSource>) -> Outcome {
        if self.request.request_id == 0 {
            // Nobody reads a stream sent with no id: it never starts.
            return Outcome::Replied;
        }
        match self.stream {
            Some(slot) => {
                *slot = Some(items);
                Outcome::Replied
            }
            None => self.error(
                ErrorCode::Internal.to_u16(),
                &"a stream reply cannot be sent here",
            ),
        }
    }

    fn error(mut self, code: u16, message: &dyn fmt::Display) -> Outcome {
        let code = wire_code(code);
        if let Some(metrics) = &self.metrics {
            metrics.server.error(code);
        }
        let header = self.header(self.request.opcode, Flags::RESPONSE_ERROR);
        if self
            .write(header, false, |out| ErrorBody::write(out, code, message))
            .is_err()
        {
            // Only the message can be that long: send the code alone.
            let _ = self.write(header, false, |out| {
                ErrorBody::write(out, code, &"(message too long)")
            });
        }
        Outcome::Failed(ErrorCode::from_u16(code))
    }
}

/// The reply of an asynchronous handler, kept until the connection's task
/// writes it.
pub(crate) enum DeferredReply {
    Packet {
        opcode: u16,
        body: BytesMut,
        /// The type's `Packet::COMPRESS`.
        compress: bool,
    },
    Ack,
    Error {
        code: u16,
        message: String,
    },
    /// The handler panicked; the payload's text is logged, not sent.
    Panicked(String),
    /// The handler ran past its time limit; its future was dropped.
    TimedOut,
    /// The peer cancelled the request (`CANCEL`); its future was dropped
    /// and nothing is sent.
    Cancelled,
    /// A parameter (an extractor) refused the request; the handler did not run.
    Rejected(Rejection),
    /// A stream of items (docs/PROTOCOL.md section 4.5), which the
    /// connection opens instead of writing a reply.
    Stream(Box<dyn ItemSource>),
}

impl DeferredReply {
    /// Writes the reply into `sink`; a panic is logged under `handler`.
    pub(crate) fn write(self, sink: FrameReply<'_>, handler: &'static str) -> Outcome {
        match self {
            Self::Packet {
                opcode,
                body,
                compress,
            } => sink.encoded(opcode, &body, compress),
            Self::Ack => sink.ack(),
            Self::Error { code, message } => sink.error(code, &message),
            Self::Panicked(message) => {
                tracing::error!(handler, panic = %message, "handler panicked");
                sink.error(
                    ErrorCode::Internal.to_u16(),
                    &format_args!("{handler} failed"),
                )
            }
            Self::TimedOut => sink.error(
                ErrorCode::Timeout.to_u16(),
                &format_args!("{handler} ran past its time limit"),
            ),
            Self::Cancelled => Outcome::Cancelled,
            Self::Rejected(rejection) => sink.reject(&rejection),
            Self::Stream(items) => sink.stream(items),
        }
    }
}

/// A [`ReplySink`] that keeps the reply as a [`DeferredReply`].
pub(crate) struct DeferredSink;

impl ReplySink for DeferredSink {
    type Output = DeferredReply;

    fn packet<P: Packet>(self, packet: &P) -> DeferredReply {
        let mut body = BytesMut::with_capacity(packet.encoded_len());
        packet.encode(&mut body);
        DeferredReply::Packet {
            opcode: P::OPCODE,
            body,
            compress: P::COMPRESS,
        }
    }

    fn ack(self) -> DeferredReply {
        DeferredReply::Ack
    }

    fn stream(self, items: Box<dyn ItemSource>) -> DeferredReply {
        DeferredReply::Stream(items)
    }

    fn error(self, code: u16, message: &dyn fmt::Display) -> DeferredReply {
        DeferredReply::Error {
            code,
            message: message.to_string(),
        }
    }
}
