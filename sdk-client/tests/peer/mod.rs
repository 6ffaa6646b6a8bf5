//! A server end written with `ternio_protocol` alone, for tests that run the
//! client over an in-memory pipe (`tokio::io::duplex`) instead of a socket:
//! with no socket involved, tokio's paused clock can run their timers.

#![allow(dead_code, unreachable_pub)]

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ternio_client::protocol::frame::{self, Flags, Frame, FrameDecoder, Framing, Header};
use ternio_client::protocol::system::{self, Disconnect, Ping};
use ternio_client::protocol::{BytesMut, DEFAULT_MAX_FRAME_SIZE, Encode};
use ternio_client::{Bytes, Connector, DisconnectReason, Packet};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;

/// 0x0001: echoed back by the peers of these tests.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0001, response = Echo)]
pub struct Echo {
    /// The bytes.
    pub payload: Bytes,
}

/// 0x0101: pushed by the peers of these tests.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0101)]
pub struct Note {
    /// What it says.
    pub text: String,
}

/// The server's end of one connection.
pub struct Peer {
    stream: DuplexStream,
    decoder: FrameDecoder,
    buf: BytesMut,
}

impl Peer {
    fn new(stream: DuplexStream) -> Self {
        Self {
            stream,
            decoder: FrameDecoder::new(DEFAULT_MAX_FRAME_SIZE),
            buf: BytesMut::new(),
        }
    }

    /// The next frame from the client; `None` once it closed the pipe.
    pub async fn recv(&mut self) -> Option<Frame> {
        loop {
            if let Some(frame) = self.decoder.decode(&mut self.buf).expect("a valid frame") {
                return Some(frame);
            }
            match self.stream.read_buf(&mut self.buf).await {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }

    /// The next frame that is not a `PING`, answering those on the way.
    pub async fn recv_request(&mut self) -> Option<Frame> {
        loop {
            let frame = self.recv().await?;
            if frame.header.opcode != system::PING {
                return Some(frame);
            }
            self.answer_ping(&frame).await;
        }
    }

    /// Writes one frame.
    pub async fn send(&mut self, header: Header, body: &(impl Encode + ?Sized)) -> io::Result<()> {
        let mut out = BytesMut::new();
        frame::write_frame(
            &mut out,
            Framing::LengthPrefixed,
            header,
            body,
            DEFAULT_MAX_FRAME_SIZE,
        )
        .expect("a frame that fits");
        self.stream.write_all(&out).await
    }

    /// Answers `request` with `reply`.
    pub async fn answer<P: Packet>(&mut self, request: &Frame, reply: &P) -> io::Result<()> {
        let header = Header::new(P::OPCODE, Flags::RESPONSE, request.header.request_id);
        self.send(header, reply).await
    }

    /// Pushes `push`.
    pub async fn push<P: Packet>(&mut self, push: &P) -> io::Result<()> {
        self.send(Header::new(P::OPCODE, Flags::NONE, 0), push)
            .await
    }

    /// Answers a `PING` with its `PONG`.
    pub async fn answer_ping(&mut self, ping: &Frame) {
        let (header, pong) = Ping::answer(ping.header, &ping.body)
            .expect("a PING")
            .expect("a readable PING");
        let _ = self.send(header, &pong).await;
    }

    /// Says `DISCONNECT reason` and goes away.
    pub async fn disconnect(mut self, reason: DisconnectReason) {
        let header = Header::new(system::DISCONNECT, Flags::NONE, 0);
        let _ = self
            .send(header, &Disconnect::new(reason, "scripted"))
            .await;
    }

    /// Answers every `Echo` and `PING` until the client goes.
    pub async fn echo_until_closed(mut self) {
        while let Some(frame) = self.recv().await {
            match frame.header.opcode {
                system::PING => self.answer_ping(&frame).await,
                Echo::OPCODE => {
                    let echo = Echo::decode_packet(&frame.body).expect("an Echo");
                    let _ = self.answer(&frame, &echo).await;
                }
                _ => {}
            }
        }
    }
}

/// A pipe: the client's end, and the peer at the other.
pub fn pipe() -> (DuplexStream, Peer) {
    let (client, server) = tokio::io::duplex(64 * 1024);
    (client, Peer::new(server))
}

/// A connector that gives the client a fresh pipe on each call and hands
/// the other end, as a [`Peer`], to the test; and how many calls it had.
pub fn pipes() -> (
    impl Connector,
    mpsc::UnboundedReceiver<Peer>,
    Arc<AtomicUsize>,
) {
    let (peers, accepted) = mpsc::unbounded_channel();
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let connector = move || {
        let peers = peers.clone();
        counted.fetch_add(1, Ordering::SeqCst);
        async move {
            let (client, peer) = pipe();
            peers
                .send(peer)
                .map_err(|_| io::Error::other("the test stopped accepting"))?;
            Ok(client)
        }
    };
    (connector, accepted, calls)
}
