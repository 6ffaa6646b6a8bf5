//! The TCP transport (contract section 1.1): length-prefixed frames.
//!
//! Frames go out through [`SocketOut`]; the reader task hands every frame
//! to [`Shared::on_frame`].

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use ternio_protocol::BytesMut;
use ternio_protocol::buffers::ReadSize;
use ternio_protocol::frame::FrameDecoder;
use tokio::net::TcpStream;

use crate::error::{ClientError, CloseReason};
use crate::keepalive;
use crate::link::{Link, Out};
use crate::shared::Shared;
use crate::socket::{SocketOut, Wire, io_reason, read_draining, write_loop};
use crate::supervisor::Opened;
use crate::tasks::TaskSet;

/// Connects to the first of `addresses` that answers and starts the link's
/// reader and writer tasks. The caller bounds the time it takes.
pub(crate) async fn open(
    addresses: &[SocketAddr],
    shared: &Arc<Shared>,
) -> Result<Opened, ClientError> {
    let stream = TcpStream::connect(addresses)
        .await
        .map_err(ClientError::Connect)?;
    stream.set_nodelay(true).map_err(ClientError::Connect)?;
    let limit = shared.config().outbound_limit();
    let out = Arc::new(SocketOut::new(stream, Wire::Tcp, limit));
    let link = Arc::new(Link::new(Out::Tcp(Arc::clone(&out))));
    let mut tasks = vec![
        tokio::spawn(read_loop(
            Arc::clone(shared),
            Arc::clone(&link),
            Arc::clone(&out),
        )),
        tokio::spawn(write_loop(
            Arc::clone(shared),
            Arc::clone(&link),
            Arc::clone(&out),
        )),
    ];
    tasks.extend(keepalive::spawn(shared, &link));
    Ok(Opened {
        link,
        tasks: TaskSet::new(tasks),
    })
}

/// The reader task: hands frames to [`Shared::on_frame`] until the link ends.
async fn read_loop(shared: Arc<Shared>, link: Arc<Link>, out: Arc<SocketOut>) {
    let reason = read_until_closed(&shared, &link, &out).await;
    shared.lose(&link, reason);
    link.set_reader_done();
}

async fn read_until_closed(shared: &Shared, link: &Arc<Link>, out: &SocketOut) -> CloseReason {
    let mut decoder = FrameDecoder::new(shared.config().max_frame_size);
    let mut buf = BytesMut::new();
    // The buffer grows with the bytes that arrive, and is given back once
    // a large frame that grew it is out of it.
    let mut read_size = ReadSize::new();
    loop {
        // The socket's own read-readiness slot (the reader is its only
        // reader): cheaper than `readable()`, which queues a waiter.
        if let Err(error) = poll_fn(|cx| out.stream().poll_read_ready(cx)).await {
            return io_reason(&error);
        }
        read_size.reserve(&decoder, &mut buf);
        let room = buf.capacity() - buf.len();
        match read_draining(out.stream(), room, || out.stream().try_read_buf(&mut buf)) {
            Ok(0) => return CloseReason::PeerClosed,
            Ok(_) => out.note_received(),
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => continue,
            Err(error) => return io_reason(&error),
        }
        loop {
            match decoder.decode_mut(&mut buf) {
                Ok(Some((header, body))) => {
                    if let Some(reason) = shared.on_frame_mut(link, header, body) {
                        return reason;
                    }
                }
                Ok(None) => break,
                Err(error) => return CloseReason::Protocol(error.to_string()),
            }
        }
        read_size.give_back(&mut buf);
    }
}
