//! `raw-tcp`: the floor. A hand-written tokio echo with a u32 length prefix
//! and no framework, written as lean as a competent engineer would: one
//! read for whatever has arrived, every whole frame answered, one write for
//! all the answers, buffers kept across requests (no allocation per echo),
//! and no buffer at all until a connection first sends (the crowd's idle
//! connections hold none).
//!
//! The same module holds the raw push and fan-out servers of the
//! scenarios beyond the echo, and the length-prefixed frame counter their
//! clients read with (Ternio's TCP frames carry the same u32 prefix).

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Result, bail};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// The largest frame the raw servers and clients accept.
pub const MAX_FRAME: usize = 1024 * 1024;
/// Spare room kept before a read.
const READ_CHUNK: usize = 8 * 1024;
/// Bytes of frames the push server encodes before one write.
const PUSH_BATCH: usize = 64 * 1024;
/// Frames a fan-out subscriber may have waiting before broadcasts skip it.
const SUBSCRIBER_QUEUE: usize = 1024;

/// Open connections of this process's raw server.
pub static CONNECTIONS: AtomicUsize = AtomicUsize::new(0);
/// Frames a raw fan-out broadcast could not queue (subscriber too far behind).
pub static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Counts a connection of a raw server for as long as it lives.
pub struct Counted;

impl Counted {
    /// Counts one more connection, until dropped.
    pub fn new() -> Self {
        CONNECTIONS.fetch_add(1, Ordering::Relaxed);
        Counted
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        CONNECTIONS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Reads whatever has arrived into `input` (one syscall), growing it only
/// when it has little room left. Returns false at the end of the stream.
/// (`read_buf` goes through tokio's `AsyncRead`, which takes a read that
/// leaves room in the buffer as the socket drained: the next call waits for
/// input instead of spending a syscall that finds none.) A buffer with no
/// room at all (a connection that has not sent yet) waits until a byte has
/// arrived (a peek) before it takes any: `readable()` alone is not enough,
/// as a fresh connection reports itself readable at once.
async fn read_some(stream: &mut TcpStream, input: &mut BytesMut) -> io::Result<bool> {
    if input.capacity() == 0 && stream.peek(&mut [0u8; 1]).await? == 0 {
        return Ok(false);
    }
    if input.capacity() - input.len() < READ_CHUNK / 2 {
        input.reserve(READ_CHUNK);
    }
    Ok(stream.read_buf(input).await? > 0)
}

/// The length of the whole frame (prefix included) at the front of
/// `input`, once it has all arrived.
fn whole_frame(input: &[u8]) -> io::Result<Option<usize>> {
    if input.len() < 4 {
        return Ok(None);
    }
    let body = u32::from_le_bytes([input[0], input[1], input[2], input[3]]) as usize;
    if body > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "frame too large",
        ));
    }
    Ok((input.len() >= 4 + body).then_some(4 + body))
}

/// Serves echo connections until the process ends.
pub async fn serve_echo(listener: TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let _counted = Counted::new();
            let _ = echo_connection(stream).await;
        });
    }
}

async fn echo_connection(mut stream: TcpStream) -> io::Result<()> {
    let mut input = BytesMut::new();
    let mut output = BytesMut::new();
    while read_some(&mut stream, &mut input).await? {
        while let Some(len) = whole_frame(&input)? {
            output.extend_from_slice(&input[..len]);
            input.advance(len);
        }
        if !output.is_empty() {
            stream.write_all(&output).await?;
            output.clear();
        }
    }
    Ok(())
}

/// One raw TCP connection doing echoes.
pub struct EchoClient {
    stream: TcpStream,
    output: BytesMut,
    input: BytesMut,
}

impl EchoClient {
    /// Connects with Nagle off.
    pub async fn connect(addr: SocketAddr) -> Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            output: BytesMut::with_capacity(READ_CHUNK),
            input: BytesMut::with_capacity(READ_CHUNK),
        })
    }

    /// One echo, checked.
    pub async fn echo(&mut self, payload: &[u8]) -> Result<()> {
        self.output.clear();
        self.output.put_u32_le(payload.len() as u32);
        self.output.extend_from_slice(payload);
        self.stream.write_all(&self.output).await?;
        loop {
            if let Some(len) = whole_frame(&self.input)? {
                let same = &self.input[4..len] == payload;
                self.input.advance(len);
                if !same {
                    bail!("the raw echo differs from the request");
                }
                return Ok(());
            }
            if !read_some(&mut self.stream, &mut self.input).await? {
                bail!("the raw echo server closed the connection");
            }
        }
    }
}

/// The push server: after a 4-byte request naming the payload size, writes
/// frames of that size to the connection as fast as it drains, encoding
/// each into a batch that goes out in one write.
pub async fn serve_push(listener: TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let _counted = Counted::new();
            let _ = push_connection(stream).await;
        });
    }
}

async fn push_connection(mut stream: TcpStream) -> io::Result<()> {
    let mut input = BytesMut::new();
    let size = loop {
        if let Some(len) = whole_frame(&input)? {
            if len < 8 {
                return Ok(());
            }
            break u32::from_le_bytes([input[4], input[5], input[6], input[7]]) as usize;
        }
        if !read_some(&mut stream, &mut input).await? {
            return Ok(());
        }
    };
    let payload = vec![0xA5u8; size.min(MAX_FRAME)];
    let mut batch = BytesMut::with_capacity(PUSH_BATCH + payload.len() + 4);
    loop {
        batch.clear();
        while batch.len() < PUSH_BATCH {
            batch.put_u32_le(payload.len() as u32);
            batch.extend_from_slice(&payload);
        }
        stream.write_all(&batch).await?;
    }
}

/// The fan-out server. A connection's first frame says what it is: `S`
/// subscribes it (answered `A`), after which it only receives; `B` followed
/// by a payload broadcasts the payload to every subscriber (answered `A`
/// and the u32 count of subscribers that took it), and more `B` may follow.
///
/// Each subscriber has a bounded queue drained by its own writer task, which
/// writes everything waiting in one syscall; a broadcast encodes its frame
/// once and queues a shared reference to it for each subscriber.
pub async fn serve_fanout(listener: TcpListener) {
    let subscribers: Arc<Mutex<Vec<mpsc::Sender<Bytes>>>> = Arc::default();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let subscribers = Arc::clone(&subscribers);
        tokio::spawn(async move {
            let _counted = Counted::new();
            let _ = fanout_connection(stream, subscribers).await;
        });
    }
}

async fn fanout_connection(
    mut stream: TcpStream,
    subscribers: Arc<Mutex<Vec<mpsc::Sender<Bytes>>>>,
) -> io::Result<()> {
    let mut input = BytesMut::new();
    let mut output = BytesMut::new();
    loop {
        let Some(len) = whole_frame(&input)? else {
            if !read_some(&mut stream, &mut input).await? {
                return Ok(());
            }
            continue;
        };
        let frame = input.split_to(len).freeze();
        match frame.get(4) {
            Some(b'S') => return subscriber(stream, subscribers).await,
            Some(b'B') => {
                let mut message = BytesMut::with_capacity(len - 1);
                message.put_u32_le((len - 5) as u32);
                message.extend_from_slice(&frame[5..]);
                let message = message.freeze();
                let mut queued = 0u32;
                subscribers
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .retain(|sender| match sender.try_send(message.clone()) {
                        Ok(()) => {
                            queued += 1;
                            true
                        }
                        Err(mpsc::error::TrySendError::Full(_)) => {
                            DROPPED.fetch_add(1, Ordering::Relaxed);
                            true
                        }
                        Err(mpsc::error::TrySendError::Closed(_)) => false,
                    });
                output.put_u32_le(5);
                output.put_u8(b'A');
                output.put_u32_le(queued);
                stream.write_all(&output).await?;
                output.clear();
            }
            _ => return Ok(()),
        }
    }
}

async fn subscriber(
    mut stream: TcpStream,
    subscribers: Arc<Mutex<Vec<mpsc::Sender<Bytes>>>>,
) -> io::Result<()> {
    let (sender, mut receiver) = mpsc::channel::<Bytes>(SUBSCRIBER_QUEUE);
    subscribers
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(sender);
    let mut output = BytesMut::new();
    output.put_u32_le(1);
    output.put_u8(b'A');
    stream.write_all(&output).await?;
    let (mut reader, mut writer) = stream.into_split();
    // Notice the peer closing, so the subscriber leaves.
    let closed = async move {
        let mut scratch = [0u8; 64];
        loop {
            match tokio::io::AsyncReadExt::read(&mut reader, &mut scratch).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    let forward = async move {
        while let Some(first) = receiver.recv().await {
            output.clear();
            output.extend_from_slice(&first);
            while let Ok(more) = receiver.try_recv() {
                output.extend_from_slice(&more);
            }
            writer.write_all(&output).await?;
        }
        io::Result::Ok(())
    };
    tokio::select! {
        () = closed => Ok(()),
        result = forward => result,
    }
}

/// Reads a stream of u32-length-prefixed frames and counts them.
pub struct FrameCounter {
    stream: TcpStream,
    input: BytesMut,
}

impl FrameCounter {
    /// Counts frames arriving on `stream`.
    pub fn new(stream: TcpStream) -> Self {
        Self {
            stream,
            input: BytesMut::with_capacity(64 * 1024),
        }
    }

    /// Waits for the next whole frame and returns it (prefix included).
    pub async fn next_frame(&mut self) -> Result<Bytes> {
        loop {
            if let Some(len) = whole_frame(&self.input)? {
                return Ok(self.input.split_to(len).freeze());
            }
            if !self.read().await? {
                bail!("the server closed the connection");
            }
        }
    }

    /// Reads once (whatever has arrived) and returns how many whole frames
    /// that completed; fails at the end of the stream.
    pub async fn count_more(&mut self) -> Result<u64> {
        if !self.read().await? {
            bail!("the server closed the connection");
        }
        let mut frames = 0;
        while let Some(len) = whole_frame(&self.input)? {
            self.input.advance(len);
            frames += 1;
        }
        Ok(frames)
    }

    async fn read(&mut self) -> io::Result<bool> {
        if self.input.capacity() - self.input.len() < 16 * 1024 {
            self.input.reserve(64 * 1024);
        }
        loop {
            self.stream.readable().await?;
            match self.stream.try_read_buf(&mut self.input) {
                Ok(0) => return Ok(false),
                Ok(_) => return Ok(true),
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => continue,
                Err(error) => return Err(error),
            }
        }
    }

    /// Writes `bytes` to the stream.
    pub async fn send(&mut self, bytes: &[u8]) -> Result<()> {
        self.stream.write_all(bytes).await?;
        Ok(())
    }
}

/// A length-prefixed frame holding `body`.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
    frame.extend_from_slice(body);
    frame
}
