//! The TCP transport (contract section 1.1): length-prefixed frames.
//!
//! Frames go out through [`SocketOut`]; the reader task hands every frame
//! to the connection through [`LinkEvents`].

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use ternio_protocol::BytesMut;
use ternio_protocol::buffers::ReadSize;
use ternio_protocol::frame::FrameDecoder;
use tokio::net::TcpStream;

use crate::error::{ClientError, CloseReason};
use crate::events::{LinkEvents, read_or_idle};
use crate::outbound::Wire;
use crate::socket::{ReadSpares, SocketOut, io_reason, read_draining};

/// Connects to the first of `addresses` that answers; the socket's
/// outbound buffer holds at most `limit` bytes. The caller bounds the time
/// it takes.
pub(crate) async fn connect(
    addresses: &[SocketAddr],
    limit: usize,
) -> Result<Arc<SocketOut>, ClientError> {
    let stream = TcpStream::connect(addresses)
        .await
        .map_err(ClientError::Connect)?;
    stream.set_nodelay(true).map_err(ClientError::Connect)?;
    Ok(Arc::new(SocketOut::new(stream, Wire::Tcp, limit)))
}

/// The reader task: hands frames to `events` until the link ends.
pub(crate) async fn read_loop(events: impl LinkEvents, out: Arc<SocketOut>, max_frame_size: usize) {
    let reason = read_until_closed(&events, &out, max_frame_size).await;
    events.reading_stopped();
    events.lost(reason);
    events.reader_done();
}

async fn read_until_closed(
    events: &impl LinkEvents,
    out: &SocketOut,
    max_frame_size: usize,
) -> CloseReason {
    let mut decoder = FrameDecoder::new(max_frame_size);
    let mut buf = BytesMut::new();
    // The buffer grows with the bytes that arrive, and is given back once
    // a large frame that grew it is out of it; large frames' allocations
    // are reused while they keep coming.
    let mut read_size = ReadSize::whole_frames();
    let mut spares = ReadSpares::default();
    loop {
        // The socket's own read-readiness slot (the reader is its only
        // reader): cheaper than `readable()`, which queues a waiter.
        let ready = poll_fn(|cx| out.stream().poll_read_ready(cx));
        if let Err(error) = read_or_idle(events, spares.wait(ready)).await {
            return io_reason(&error);
        }
        spares.reserve(&mut read_size, &decoder, &mut buf);
        let room = buf.capacity() - buf.len();
        match read_draining(out.stream(), room, || out.stream().try_read_buf(&mut buf)) {
            Ok(0) => return CloseReason::PeerClosed,
            Ok(got) => {
                read_size.read(got, room);
                out.note_received();
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => continue,
            Err(error) => return io_reason(&error),
        }
        if let Some(reason) = hand_over_frames(&mut decoder, &mut buf, events) {
            return reason;
        }
        spares.give_back(&mut read_size, &mut buf);
    }
}

/// Hands every whole frame in `buf` to `events`, then tells it they were
/// handed over; returns why to stop reading, if it must.
pub(crate) fn hand_over_frames(
    decoder: &mut FrameDecoder,
    buf: &mut BytesMut,
    events: &impl LinkEvents,
) -> Option<CloseReason> {
    let reason = loop {
        match decoder.decode_mut(buf) {
            Ok(Some((header, body))) => {
                if let Some(reason) = events.on_frame_mut(header, body) {
                    break Some(reason);
                }
            }
            Ok(None) => break None,
            Err(error) => break Some(CloseReason::Protocol(error.to_string())),
        }
    };
    events.frames_handed();
    reason
}
