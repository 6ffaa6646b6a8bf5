//! The Rust client's frame handling driven by arbitrary server input over a
//! real loopback socket: a scripted server answers the client's handshake
//! (or not), then writes plain frames, sealed frames with the right
//! counter, REKEYs and raw bytes, in any order, and closes. The client must
//! not panic, must end up closed (no reconnect policy), and once the
//! session was up, a plain frame from the server must close it with
//! `DecryptFailed`.
#![no_main]

mod script;

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use ternio::protocol::frame::{self, Flags, FrameDecoder, Framing, Header};
use ternio::protocol::secure::Responder;
use ternio::protocol::system;
use ternio_client::{Client, ClientConfig, CloseReason, ConnectionState, SecureConfig};
use ternio_examples::echo::Echo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;

fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    })
}

/// The scripted server: answers the handshake when `secure`, then plays the
/// input; returns whether it sent a plain frame after the session was up.
async fn script(mut stream: TcpStream, secure: bool, input: Vec<u8>) -> bool {
    let mut input = &input[..];
    let mut channel = None;
    let mut decoder = FrameDecoder::new(usize::MAX);
    let mut buf = BytesMut::new();
    if secure {
        let hello = loop {
            if let Some(frame) = decoder.decode(&mut buf).unwrap() {
                break frame;
            }
            match stream.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(_) => {}
            }
        };
        let (reply, secure) = Responder::respond(&hello.body, None).unwrap();
        let mut out = BytesMut::new();
        let answer = Header::new(system::HANDSHAKE, Flags::RESPONSE, hello.header.request_id);
        frame::write_frame_with(
            &mut out,
            Framing::LengthPrefixed,
            answer,
            usize::MAX,
            |out| out.extend_from_slice(&reply),
        )
        .unwrap();
        if stream.write_all(&out).await.is_err() {
            return false;
        }
        channel = Some(secure);
    }
    let mut plain_after = false;
    // A sealed system frame before the first plain one may close the link
    // for its own reason first.
    let mut claim = true;
    let mut out = BytesMut::new();
    while let Some((&op, rest)) = input.split_first() {
        input = rest;
        match op % 5 {
            0 => {
                let header = script::header(&mut input);
                let body = script::body(&mut input);
                frame::write_frame_with(
                    &mut out,
                    Framing::LengthPrefixed,
                    header,
                    usize::MAX,
                    |out| out.extend_from_slice(body),
                )
                .unwrap();
                plain_after |= channel.is_some();
            }
            1 => {
                let header = script::header(&mut input);
                let body = script::body(&mut input);
                if let Some(channel) = &mut channel {
                    claim &= plain_after || !header.is_system();
                    let _ = channel.sealer.write_frame_with(
                        &mut out,
                        Framing::LengthPrefixed,
                        header,
                        usize::MAX,
                        |out| out.extend_from_slice(body),
                    );
                }
            }
            2 => {
                if let Some(channel) = &mut channel {
                    claim &= plain_after;
                    channel
                        .sealer
                        .write_rekey(&mut out, Framing::LengthPrefixed)
                        .unwrap();
                }
            }
            3 => {
                out.extend_from_slice(script::body(&mut input));
                // Raw bytes may hold anything: no claim about them.
                plain_after = false;
                channel = None;
            }
            _ => {
                if stream.write_all(&out).await.is_err() {
                    return plain_after && claim;
                }
                out.clear();
            }
        }
    }
    let _ = stream.write_all(&out).await;
    let _ = stream.shutdown().await;
    // Read what the client still says, until it closes.
    let mut sink = [0u8; 4096];
    while let Ok(Ok(n)) = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut sink)).await
    {
        if n == 0 {
            break;
        }
    }
    plain_after && claim
}

async fn drive(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let secure = first & 1 == 1;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address: SocketAddr = listener.local_addr().unwrap();
    let input = rest.to_vec();
    let server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        script(stream, secure, input).await
    });
    let mut config = ClientConfig::default();
    config.secure = secure.then(SecureConfig::anonymous);
    config.request_timeout = Duration::from_secs(2);
    config.connect_timeout = Duration::from_secs(2);
    config.max_frame_size = 64 * 1024;
    let Ok(client) = Client::connect_tcp_with(address, config).await else {
        let _ = server.await;
        return;
    };
    let mut echoes = client.subscribe::<Echo>();
    let mut states = client.state_changes();
    let closed = tokio::time::timeout(
        Duration::from_secs(10),
        states.wait_for(ConnectionState::is_closed),
    )
    .await;
    assert!(closed.is_ok(), "the client notices the server closed");
    let plain_after = server.await.unwrap();
    if plain_after {
        assert!(
            matches!(client.close_reason(), Some(CloseReason::DecryptFailed(_))),
            "a plain frame on a secure session: {:?}",
            client.close_reason()
        );
    }
    while echoes.try_next().is_some() {}
}

fuzz_target!(|data: &[u8]| {
    runtime().block_on(drive(data));
});
