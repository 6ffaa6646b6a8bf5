//! A whole server connection driven by arbitrary input over a real loopback
//! socket: handshakes (NN, NK, NK with a wrong pin), plain frames, sealed
//! frames with the right counter, REKEYs, and raw bytes, in any order. After
//! the client half-closes, everything the server wrote is read back and
//! checked: valid frames; once the session is up, every frame sealed with
//! exact counters (only `DISCONNECT DECRYPT_FAILED` may come plain), and a
//! clean close. A panic in the server aborts the process (libFuzzer's hook).
#![no_main]

mod script;

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use ternio::protocol::frame::{self, Flags, FrameDecoder, Framing, Header};
use ternio::protocol::secure::{Initiator, SecureChannel, StaticKeypair};
use ternio::protocol::system::{self, Disconnect};
use ternio::protocol::{Decode, Frame};
use ternio::{DisconnectReason, Identity, Server, packet_controller};
use ternio_examples::echo::{Echo, SecureEcho};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::runtime::Runtime;

/// The echo server's handlers.
#[derive(Default)]
struct EchoController;

#[packet_controller]
impl EchoController {
    fn echo(request: Echo) -> Echo {
        request
    }

    #[handler(encrypted)]
    fn secure_echo(request: SecureEcho) -> SecureEcho {
        request
    }
}

const IDENTITY: [u8; 32] = [7; 32];
/// The request id of the target's own handshake.
const OUR_HANDSHAKE: u32 = 0xFFFF_FFF0;

struct Harness {
    runtime: Runtime,
    address: SocketAddr,
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let address = runtime.block_on(async {
            let server = Server::builder()
                .discover_controllers(false)
                .controller(EchoController)
                .identity(Identity::from_private_key(IDENTITY))
                .max_frame_size(64 * 1024)
                .map_tcp("127.0.0.1:0")
                .build()
                .unwrap();
            let address = server.tcp_addrs()[0];
            tokio::spawn(server.run());
            address
        });
        Harness { runtime, address }
    })
}

/// The server's side, read back: frames in order.
struct Incoming {
    stream: TcpStream,
    decoder: FrameDecoder,
    buf: BytesMut,
}

impl Incoming {
    /// The next frame; `None` at the end of the stream or on a reset.
    async fn next(&mut self) -> Option<Frame> {
        self.next_within(Duration::from_secs(5))
            .await
            .expect("the server answers or closes within 5 s")
    }

    /// The next frame, or `Err` when none came within `patience`.
    async fn next_within(&mut self, patience: Duration) -> Result<Option<Frame>, ()> {
        tokio::time::timeout(patience, self.read_frame())
            .await
            .map_err(|_| ())
    }

    async fn read_frame(&mut self) -> Option<Frame> {
        loop {
            if let Some(frame) = self
                .decoder
                .decode(&mut self.buf)
                .expect("the server writes valid frames")
            {
                return Some(frame);
            }
            match self.stream.read_buf(&mut self.buf).await {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }
}

/// What the client knows of the session: the channel once up.
struct Session {
    channel: Option<SecureChannel>,
    /// The server completed a handshake that raw input bytes asked for: its
    /// keys are unknown here, so its frames are checked for sealing only.
    unknown: bool,
    /// Whether the server took the HANDSHAKE cannot be told (raw bytes may
    /// have begun a frame that swallowed it): nothing more is checked.
    blind: bool,
}

impl Session {
    /// Checks one frame from the server against section 5.1.
    fn check(&mut self, frame: &Frame) {
        let header = frame.header;
        if self.blind {
            return;
        }
        if self.channel.is_none() && !self.unknown {
            assert!(!header.flags.is_encrypted(), "sealed before the handshake");
            if header.opcode == system::HANDSHAKE
                && header.flags == Flags::RESPONSE
                && header.request_id != OUR_HANDSHAKE
            {
                self.unknown = true;
            }
            return;
        }
        if !header.flags.is_encrypted() {
            assert_eq!(
                header.opcode,
                system::DISCONNECT,
                "plain frame on a secure session: {header:?}"
            );
            let disconnect = Disconnect::decode_body(&frame.body).unwrap();
            assert_eq!(disconnect.reason, DisconnectReason::DecryptFailed);
            return;
        }
        let Some(channel) = &mut self.channel else {
            return;
        };
        let mut body = BytesMut::from(&frame.body[..]);
        channel
            .opener
            .open(&frame.header, &mut body)
            .expect("every sealed frame from the server opens, in turn");
    }
}

async fn drive(address: SocketAddr, mut input: &[u8]) {
    let stream = TcpStream::connect(address).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let mut server = Incoming {
        stream,
        decoder: FrameDecoder::new(usize::MAX),
        buf: BytesMut::new(),
    };
    let mut session = Session {
        channel: None,
        unknown: false,
        blind: false,
    };
    let mut tried_handshake = false;
    let mut out = BytesMut::new();
    let mut open = true;
    while open {
        let Some((&op, rest)) = input.split_first() else {
            break;
        };
        input = rest;
        match op % 6 {
            // A handshake, once: NN, NK, or NK pinning another key.
            0 if !tried_handshake && !session.unknown && !session.blind => {
                tried_handshake = true;
                let wrong = StaticKeypair::from_private([9; 32]);
                let right = StaticKeypair::from_private(IDENTITY);
                let pin = match op / 6 % 3 {
                    0 => None,
                    1 => Some(*right.public()),
                    _ => Some(*wrong.public()),
                };
                let mut initiator = Initiator::new(pin.as_ref()).unwrap();
                let body = initiator.request_body().unwrap();
                let hello = Header::new(system::HANDSHAKE, Flags::NONE, OUR_HANDSHAKE);
                frame::write_frame_with(
                    &mut out,
                    Framing::LengthPrefixed,
                    hello,
                    usize::MAX,
                    |out| out.extend_from_slice(&body),
                )
                .unwrap();
                open = server.stream.write_all(&out).await.is_ok();
                out.clear();
                // Everything before the answer is plain; then the session is
                // up. Raw bytes may have begun a frame that swallows the
                // HANDSHAKE: no answer then, and no claim about what follows.
                loop {
                    let Ok(next) = server.next_within(Duration::from_millis(500)).await else {
                        session.blind = true;
                        break;
                    };
                    let Some(frame) = next else {
                        break;
                    };
                    session.check(&frame);
                    if frame.header.opcode == system::HANDSHAKE
                        && frame.header.request_id == OUR_HANDSHAKE
                        && frame.header.flags.is_response()
                    {
                        if !frame.header.flags.is_error() {
                            session.channel = Some(initiator.finish(&frame.body).unwrap());
                        }
                        break;
                    }
                }
            }
            // A plain frame.
            1 => {
                let mut header = script::header(&mut input);
                if header.request_id == OUR_HANDSHAKE {
                    header.request_id = 0;
                }
                let body = script::body(&mut input);
                frame::write_frame_with(
                    &mut out,
                    Framing::LengthPrefixed,
                    header,
                    usize::MAX,
                    |out| out.extend_from_slice(body),
                )
                .unwrap();
            }
            // A sealed frame with the right counter.
            2 => {
                let header = script::header(&mut input);
                let body = script::body(&mut input);
                if let Some(channel) = &mut session.channel {
                    let _ = channel.sealer.write_frame_with(
                        &mut out,
                        Framing::LengthPrefixed,
                        header,
                        usize::MAX,
                        |out| out.extend_from_slice(body),
                    );
                }
            }
            // A REKEY.
            3 => {
                if let Some(channel) = &mut session.channel {
                    channel
                        .sealer
                        .write_rekey(&mut out, Framing::LengthPrefixed)
                        .unwrap();
                }
            }
            // Raw bytes.
            4 => {
                out.extend_from_slice(script::body(&mut input));
            }
            // What is queued goes out now.
            _ => {
                open = server.stream.write_all(&out).await.is_ok();
                out.clear();
            }
        }
    }
    if open {
        let _ = server.stream.write_all(&out).await;
    }
    // Half-closed: the server answers what it read, then closes.
    let _ = server.stream.shutdown().await;
    while let Some(frame) = server.next().await {
        session.check(&frame);
    }
}

fuzz_target!(|data: &[u8]| {
    let harness = harness();
    harness.runtime.block_on(drive(harness.address, data));
});
