//! The well-behaved clients: hand-written frame clients (TCP, or WebSocket
//! with `ternio.v2`), each bound to its own source address of 127.0.0.0/8,
//! sending one `Echo` with a unique payload every interval and checking
//! every answer.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use bytes::{Buf, Bytes, BytesMut};
use futures_util::{SinkExt, StreamExt};
use hdrhistogram::Histogram;
use ternio::protocol::frame::{self, Flags, Framing, Header};
use ternio::protocol::system::{self, Pong};
use ternio::protocol::{Decode, Packet};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::watch;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::participants::ternio::Echo;

/// Longest wait for one echo before it counts as failed.
const ANSWER_LIMIT: Duration = Duration::from_secs(10);
/// Bytes of each echo's payload.
const PAYLOAD_LEN: usize = 32;

/// The source address `index` of a range: `127.<second>.<index / 250>.<index % 250 + 1>`.
pub fn source_ip(second: u8, index: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(
        127,
        second,
        (index / 250) as u8,
        (index % 250 + 1) as u8,
    ))
}

/// A TCP connection to `server` from `source` (port picked by the kernel).
pub async fn connect_from(source: IpAddr, server: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(source, 0))?;
    let stream = socket.connect(server).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// A cheap deterministic spread in `[0, 1)` for `seed` (start offsets, jitter).
pub fn spread(seed: u64) -> f64 {
    let mut x = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// What the well-behaved clients saw, all of them together.
#[derive(Default)]
pub struct ClientStats {
    /// Echo requests written.
    pub sent: AtomicU64,
    /// Answered with the same payload and request id.
    pub answered: AtomicU64,
    /// Answered with something else (another payload, an error, a wrong id).
    pub mismatched: AtomicU64,
    /// In flight when the connection failed or the answer took too long.
    pub failed: AtomicU64,
    /// Answers inside the measurement window.
    pub answered_in_window: AtomicU64,
    /// Connection attempts that failed (refused, upgrade refused, timed out).
    pub connect_failures: AtomicU64,
    /// Connections opened after the first one of a client.
    pub reconnects: AtomicU64,
    /// Clients connected right now.
    pub connected: AtomicU64,
    /// Why connections failed, first few only.
    pub errors: Mutex<Vec<String>>,
}

impl ClientStats {
    fn note_error(&self, error: &anyhow::Error) {
        let mut errors = self.errors.lock().unwrap_or_else(|e| e.into_inner());
        if errors.len() < 20 {
            errors.push(format!("{error:#}"));
        }
    }
}

/// Shared by every client of a phase.
pub struct ClientShared {
    /// The counters.
    pub stats: ClientStats,
    /// Round trips (µs) of echoes sent inside the measurement window.
    pub latency: Mutex<Histogram<u64>>,
    /// Whether the measurement window is open.
    pub measuring: AtomicBool,
}

impl ClientShared {
    /// Empty counters and histogram.
    pub fn new() -> Self {
        Self {
            stats: ClientStats::default(),
            latency: Mutex::new(
                Histogram::new_with_bounds(1, 120_000_000, 3).expect("valid histogram bounds"),
            ),
            measuring: AtomicBool::new(false),
        }
    }
}

/// One well-behaved client's settings.
#[derive(Clone, Copy)]
pub struct ClientPlan {
    /// Its number.
    pub id: u32,
    /// Its source address.
    pub source: IpAddr,
    /// Where to connect.
    pub server: SocketAddr,
    /// Over WebSocket (`server` is then the WebSocket listener).
    pub websocket: bool,
    /// Time between two echoes.
    pub interval: Duration,
    /// When it connects.
    pub start: tokio::time::Instant,
}

/// A connection speaking Ternio frames.
enum Link {
    Tcp { stream: TcpStream, input: BytesMut },
    Ws(Box<WebSocketStream<TcpStream>>),
}

impl Link {
    async fn open(plan: &ClientPlan) -> Result<Self> {
        let stream = tokio::time::timeout(ANSWER_LIMIT, connect_from(plan.source, plan.server))
            .await
            .context("connect timed out")??;
        if !plan.websocket {
            return Ok(Link::Tcp {
                stream,
                input: BytesMut::with_capacity(256),
            });
        }
        let mut request = format!("ws://{}/ws", plan.server).into_client_request()?;
        request.headers_mut().insert(
            "Sec-WebSocket-Protocol",
            frame::WEBSOCKET_SUBPROTOCOL.parse()?,
        );
        let (ws, _) = tokio::time::timeout(
            ANSWER_LIMIT,
            tokio_tungstenite::client_async(request, stream),
        )
        .await
        .context("upgrade timed out")??;
        Ok(Link::Ws(Box::new(ws)))
    }

    fn framing(&self) -> Framing {
        match self {
            Link::Tcp { .. } => Framing::LengthPrefixed,
            Link::Ws(_) => Framing::Message,
        }
    }

    async fn send(&mut self, frame: BytesMut) -> Result<()> {
        match self {
            Link::Tcp { stream, .. } => stream.write_all(&frame).await?,
            Link::Ws(ws) => ws.send(Message::Binary(frame.freeze())).await?,
        }
        Ok(())
    }

    /// The next frame (header and body).
    async fn recv(&mut self) -> Result<Bytes> {
        match self {
            Link::Tcp { stream, input } => loop {
                if input.len() >= 4 {
                    let len = u32::from_le_bytes([input[0], input[1], input[2], input[3]]) as usize;
                    if input.len() >= 4 + len {
                        input.advance(4);
                        return Ok(input.split_to(len).freeze());
                    }
                }
                if stream.read_buf(input).await? == 0 {
                    bail!("the server closed the connection");
                }
            },
            Link::Ws(ws) => loop {
                match ws.next().await {
                    Some(Ok(Message::Binary(frame))) => return Ok(frame),
                    Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                    Some(Ok(other)) => bail!("the server sent {other:?}"),
                    Some(Err(error)) => return Err(error.into()),
                    None => bail!("the server closed the connection"),
                }
            },
        }
    }

    /// Waits for the answer to request `id`, answering the server's PINGs.
    async fn answer(&mut self, id: u32) -> Result<Bytes> {
        loop {
            let frame = self.recv().await?;
            let header = frame::Header::parse(&frame)?;
            if header.opcode == system::PING && header.is_request() {
                let ping = system::Ping::decode_body(&frame.slice(frame::HEADER_LEN..))?;
                let mut out = BytesMut::new();
                frame::write_frame(
                    &mut out,
                    self.framing(),
                    Header::new(Pong::OPCODE, Flags::RESPONSE, header.request_id),
                    &Pong { value: ping.value },
                    usize::MAX,
                )?;
                self.send(out).await?;
                continue;
            }
            if header.opcode == system::DISCONNECT {
                bail!(
                    "the server sent DISCONNECT {:?}",
                    String::from_utf8_lossy(&frame[frame::HEADER_LEN..])
                );
            }
            if header.opcode != Echo::OPCODE
                || !header.flags.is_response()
                || header.flags.is_error()
                || header.request_id != id
            {
                bail!("unexpected answer {header:?}");
            }
            return Ok(Echo::decode_body(&frame.slice(frame::HEADER_LEN..))?.payload);
        }
    }
}

/// The payload of echo `seq` of client `id`: unique to both.
fn payload(id: u32, seq: u32) -> Bytes {
    let mut bytes = Vec::with_capacity(PAYLOAD_LEN);
    bytes.extend_from_slice(&id.to_le_bytes());
    bytes.extend_from_slice(&seq.to_le_bytes());
    let mut state = (u64::from(id) << 32 | u64::from(seq)) | 1;
    while bytes.len() < PAYLOAD_LEN {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        bytes.push(state as u8);
    }
    bytes.into()
}

/// Runs one client until `stop` turns true; it finishes the echo in flight.
pub async fn run(plan: ClientPlan, shared: Arc<ClientShared>, mut stop: watch::Receiver<bool>) {
    tokio::time::sleep_until(plan.start).await;
    let stats = &shared.stats;
    let mut seq: u32 = 0;
    let mut first = true;
    let offset = plan.interval.mul_f64(spread(u64::from(plan.id)));
    'connect: while !*stop.borrow() {
        let mut link = match Link::open(&plan).await {
            Ok(link) => link,
            Err(error) => {
                stats.connect_failures.fetch_add(1, Ordering::Relaxed);
                stats.note_error(&error.context("connect"));
                let pause = Duration::from_secs(1)
                    .mul_f64(1.0 + spread(u64::from(plan.id) ^ u64::from(seq)));
                tokio::select! {
                    _ = tokio::time::sleep(pause) => continue,
                    _ = stop.changed() => break,
                }
            }
        };
        if !first {
            stats.reconnects.fetch_add(1, Ordering::Relaxed);
        }
        first = false;
        stats.connected.fetch_add(1, Ordering::Relaxed);
        let mut ticks =
            tokio::time::interval_at(tokio::time::Instant::now() + offset, plan.interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = stop.changed() => {}
            }
            if *stop.borrow() {
                stats.connected.fetch_sub(1, Ordering::Relaxed);
                break 'connect;
            }
            seq = seq.wrapping_add(1).max(1);
            let sent_payload = payload(plan.id, seq);
            let mut out = BytesMut::with_capacity(64);
            let request = Echo {
                payload: sent_payload.clone(),
            };
            if let Err(error) = frame::write_frame(
                &mut out,
                link.framing(),
                Header::new(Echo::OPCODE, Flags::NONE, seq),
                &request,
                usize::MAX,
            ) {
                stats.note_error(&error.into());
                break 'connect;
            }
            let in_window = shared.measuring.load(Ordering::Relaxed);
            let started = Instant::now();
            stats.sent.fetch_add(1, Ordering::Relaxed);
            let outcome = tokio::time::timeout(ANSWER_LIMIT, async {
                link.send(out).await?;
                link.answer(seq).await
            })
            .await
            .unwrap_or_else(|_| Err(anyhow::anyhow!("no answer within {ANSWER_LIMIT:?}")));
            match outcome {
                Ok(echoed) if echoed == sent_payload => {
                    let micros = started.elapsed().as_micros() as u64;
                    stats.answered.fetch_add(1, Ordering::Relaxed);
                    if in_window {
                        stats.answered_in_window.fetch_add(1, Ordering::Relaxed);
                        let _ = shared
                            .latency
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .record(micros.max(1));
                    }
                }
                Ok(_) => {
                    stats.mismatched.fetch_add(1, Ordering::Relaxed);
                }
                Err(error) => {
                    stats.failed.fetch_add(1, Ordering::Relaxed);
                    stats.note_error(&error);
                    stats.connected.fetch_sub(1, Ordering::Relaxed);
                    continue 'connect;
                }
            }
        }
    }
}
