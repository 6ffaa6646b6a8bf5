//! Admission, as an attacker's client meets it: WebSocket floods refused
//! with HTTP 503 before any upgrade work, the cap on upgrades in progress,
//! per-IP limits on loopback by default, IPv4-mapped loopback, IPv6 keyed
//! by its /64, and the PROXY protocol (v1 and v2, TCP and WebSocket) from
//! trusted proxies only. Peers come from several addresses of 127.0.0.0/8.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use futures_util::{SinkExt, StreamExt};
use ternio::DisconnectReason;
use ternio::protocol::frame::{self, Flags, Framing, Header};
use ternio::protocol::system::{self, Disconnect};
use ternio::protocol::{Decode, Packet};
use ternio_tests::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::Message;

/// A TCP connection to `address` from the loopback address `source`.
async fn connect_from(source: [u8; 4], address: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind((Ipv4Addr::from(source), 0).into()).unwrap();
    let stream = socket.connect(address).await.expect("connects");
    stream.set_nodelay(true).unwrap();
    stream
}

/// An HTTP WebSocket upgrade request for `/ws`.
fn upgrade_request(address: SocketAddr) -> String {
    format!(
        "GET /ws HTTP/1.1\r\nHost: {address}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
}

/// Reads what the server sends until it closes (end of stream or reset),
/// within `within`; returns it, or fails the test if the server kept the
/// connection open that long.
async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> Vec<u8> {
    let mut got = Vec::new();
    let read = tokio::time::timeout(within, async {
        let mut buf = [0u8; 1024];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    });
    assert!(
        read.await.is_ok(),
        "the server still held the connection after {within:?}; it sent {:?}",
        String::from_utf8_lossy(&got)
    );
    got
}

/// Sends an upgrade from `source` and returns the status line of the answer.
async fn upgrade_status(source: [u8; 4], address: SocketAddr) -> (TcpStream, String) {
    let mut stream = connect_from(source, address).await;
    stream
        .write_all(upgrade_request(address).as_bytes())
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    tokio::time::timeout(Duration::from_secs(5), async {
        while !head.ends_with(b"\r\n") {
            if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                break;
            }
            head.push(byte[0]);
        }
    })
    .await
    .expect("an answer to the upgrade");
    (stream, String::from_utf8_lossy(&head).trim().to_owned())
}

/// Whether a WebSocket client from `source` is upgraded and answered.
async fn ws_served(source: [u8; 4], address: SocketAddr) -> bool {
    let stream = connect_from(source, address).await;
    let Ok((ws, _)) = tokio_tungstenite::client_async(format!("ws://{address}/ws"), stream).await
    else {
        return false;
    };
    ws_request_answered(ws).await
}

/// Sends an `Add` over `ws` and says whether the sum comes back.
async fn ws_request_answered(mut ws: tokio_tungstenite::WebSocketStream<TcpStream>) -> bool {
    ws.send(ws_request(&Add { a: 2, b: 3 }, 9)).await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(5), ws.next()).await;
    matches!(answer, Ok(Some(Ok(Message::Binary(bytes)))) if {
        let frame = ternio::protocol::Frame::parse(bytes.clone(), usize::MAX).unwrap();
        frame.header.request_id == 9 && Sum::decode_body(&frame.body).unwrap() == Sum(5)
    })
}

/// A length-prefixed request frame.
fn request_frame<P: Packet>(packet: &P, request_id: u32) -> Vec<u8> {
    let mut out = BytesMut::new();
    frame::write_frame(
        &mut out,
        Framing::LengthPrefixed,
        Header::new(P::OPCODE, Flags::NONE, request_id),
        packet,
        usize::MAX,
    )
    .unwrap();
    out.to_vec()
}

/// What the server answers on a TCP connection: `Ok(frame)` for the first
/// non-PING frame, `Err(reason)` for a DISCONNECT, `Err(None)` when it
/// closed without one.
async fn tcp_answer(
    stream: &mut TcpStream,
) -> Result<ternio::protocol::Frame, Option<DisconnectReason>> {
    let mut decoder = frame::FrameDecoder::default();
    let mut buf = BytesMut::new();
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Ok(Some(frame)) = decoder.decode(&mut buf) {
                if frame.header.opcode == system::DISCONNECT {
                    return Err(Some(Disconnect::decode_body(&frame.body).unwrap().reason));
                }
                if frame.header.opcode != system::PING {
                    return Ok(frame);
                }
                continue;
            }
            match stream.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return Err(None),
                Ok(_) => {}
            }
        }
    })
    .await
    .expect("an answer within 5 s")
}

/// The peer address a TCP connection's server sees (WhoAmI), after `prefix`.
async fn who_am_i_tcp(
    source: [u8; 4],
    address: SocketAddr,
    prefix: &[u8],
) -> Result<String, Option<DisconnectReason>> {
    let mut stream = connect_from(source, address).await;
    let mut out = prefix.to_vec();
    out.extend_from_slice(&request_frame(&WhoAmI, 1));
    stream.write_all(&out).await.unwrap();
    let frame = tcp_answer(&mut stream).await?;
    let you = YouAre::decode_body(&frame.body).unwrap();
    // Keep the connection open while the caller counts: leak it into a task
    // that ends with the runtime.
    tokio::spawn(async move {
        let mut buf = [0u8; 64];
        while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
    });
    Ok(you.peer)
}

/// A PROXY v2 header for a TCP connection from `source` to 127.0.0.1:80.
fn proxy_v2(source: SocketAddr) -> Vec<u8> {
    let mut out = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    match source {
        SocketAddr::V4(v4) => {
            out.extend_from_slice(&[0x21, 0x11, 0, 12]);
            out.extend_from_slice(&v4.ip().octets());
            out.extend_from_slice(&[127, 0, 0, 1]);
        }
        SocketAddr::V6(v6) => {
            out.extend_from_slice(&[0x21, 0x21, 0, 36]);
            out.extend_from_slice(&v6.ip().octets());
            out.extend_from_slice(&std::net::Ipv6Addr::LOCALHOST.octets());
        }
    }
    out.extend_from_slice(&source.port().to_be_bytes());
    out.extend_from_slice(&80u16.to_be_bytes());
    out
}

/// Polls `condition` every 20 ms until it holds, for at most 10 s.
async fn eventually(condition: impl AsyncFnMut() -> bool, what: &str) {
    eventually_async(Duration::from_secs(10), what, condition).await;
}

#[tokio::test]
async fn an_upgrade_flood_from_one_address_gets_503_at_once_and_others_are_served() {
    let (_tcp, ws, server) = start_server_with_ws(|b| {
        b.max_connections_per_ip(4)
            .accept_rate_per_ip(10_000, Duration::from_secs(1))
    });
    // The attacker holds its 4 connections in stalled upgrades...
    let mut stalled = Vec::new();
    for _ in 0..4 {
        stalled.push(connect_from([127, 0, 0, 2], ws).await);
    }
    // ...and floods: every further upgrade is refused at once with 503 and
    // closed by the server, long before the 10 s upgrade timeout.
    let started = Instant::now();
    for _ in 0..40 {
        let (mut refused, status) = upgrade_status([127, 0, 0, 2], ws).await;
        assert!(status.starts_with("HTTP/1.1 503"), "{status}");
        read_until_closed(&mut refused, Duration::from_secs(3)).await;
    }
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "refusals took {:?}",
        started.elapsed()
    );
    // Nothing of the flood is held: a client from another address is served,
    // and the server holds no connection for the attacker.
    assert!(ws_served([127, 0, 0, 3], ws).await);
    eventually(
        async || server.connection_count() == 0,
        "no connection left once the served client is gone",
    )
    .await;
    // The accept rate refuses before the upgrade too.
    let (_tcp, ws, _server) =
        start_server_with_ws(|b| b.accept_rate_per_ip(3, Duration::from_secs(60)));
    for _ in 0..3 {
        assert!(ws_served([127, 0, 0, 4], ws).await);
    }
    let (_stream, status) = upgrade_status([127, 0, 0, 4], ws).await;
    assert!(status.starts_with("HTTP/1.1 503"), "{status}");
    assert!(ws_served([127, 0, 0, 5], ws).await);
}

#[tokio::test]
async fn upgrades_in_progress_are_capped() {
    let (_tcp, ws, _server) = start_server_with_ws(|b| b.max_pending_upgrades(8));
    // Eight stalled upgrades, from eight addresses (no per-IP limit in play).
    let mut stalled = Vec::new();
    for host in 0..8u8 {
        stalled.push(connect_from([127, 0, 1, 10 + host], ws).await);
    }
    // Wait until the server accepted all eight: then a ninth is refused.
    let mut status = String::new();
    eventually(
        async || {
            let (_stream, answer) = upgrade_status([127, 0, 1, 100], ws).await;
            status = answer;
            status.starts_with("HTTP/1.1 503")
        },
        "an upgrade beyond the cap refused with 503",
    )
    .await;
    // Places come back as the stalled upgrades go away.
    drop(stalled);
    eventually(
        async || ws_served([127, 0, 1, 101], ws).await,
        "served once the stalled upgrades are gone",
    )
    .await;
}

#[tokio::test]
async fn loopback_is_limited_by_default_per_address() {
    let (address, _server) = start_server(|b| b.max_connections_per_ip(2));
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(who_am_i_tcp([127, 0, 2, 1], address, b"").await.unwrap());
    }
    assert_eq!(
        who_am_i_tcp([127, 0, 2, 1], address, b"").await,
        Err(Some(DisconnectReason::TooManyConnections))
    );
    // Another loopback address has its own count.
    assert!(who_am_i_tcp([127, 0, 2, 2], address, b"").await.is_ok());
}

#[tokio::test]
async fn ipv4_mapped_loopback_is_loopback_and_reported_as_ipv4() {
    // A listener on ::ffff:127.0.0.1 sees IPv4 peers as IPv4-mapped IPv6.
    let built = test_server_builder()
        .map_tcp("[::ffff:127.0.0.1]:0")
        .exempt_loopback(true)
        .max_connections_per_ip(1)
        .build();
    let Ok(server) = built else {
        eprintln!("skipped: cannot listen on ::ffff:127.0.0.1 here");
        return;
    };
    let port = server.tcp_addrs()[0].port();
    let _handle = server.handle();
    tokio::spawn(server.run());
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    for _ in 0..3 {
        let peer = who_am_i_tcp([127, 0, 3, 1], address, b"")
            .await
            .expect("mapped loopback is exempt like loopback");
        assert!(peer.starts_with("127.0.3.1:"), "{peer}");
    }
}

/// A server that trusts 127.0.4.1 as a proxy, on TCP and WebSocket.
fn proxied_server(per_ip: usize) -> (SocketAddr, SocketAddr, ternio::ServerHandle) {
    start_server_with_ws(|b| {
        b.trusted_proxies([IpAddr::from([127, 0, 4, 1])])
            .max_connections_per_ip(per_ip)
    })
}

const PROXY: [u8; 4] = [127, 0, 4, 1];

#[tokio::test]
async fn proxy_headers_from_a_trusted_proxy_name_the_peer_and_its_limits() {
    let (tcp, _ws, _server) = proxied_server(2);
    // v1, IPv4.
    let v1 = b"PROXY TCP4 192.0.2.7 127.0.0.1 4000 80\r\n";
    assert_eq!(
        who_am_i_tcp(PROXY, tcp, v1).await.unwrap(),
        "192.0.2.7:4000"
    );
    // v2, IPv6 and IPv4.
    let client = "[2001:db8::1]:5000".parse().unwrap();
    assert_eq!(
        who_am_i_tcp(PROXY, tcp, &proxy_v2(client)).await.unwrap(),
        "[2001:db8::1]:5000"
    );
    let client = "198.51.100.3:6000".parse().unwrap();
    assert_eq!(
        who_am_i_tcp(PROXY, tcp, &proxy_v2(client)).await.unwrap(),
        "198.51.100.3:6000"
    );
    // v1 with an IPv4-mapped client: it is that IPv4 client.
    let mapped = b"PROXY TCP6 ::ffff:192.0.2.8 ::1 4001 80\r\n";
    assert_eq!(
        who_am_i_tcp(PROXY, tcp, mapped).await.unwrap(),
        "192.0.2.8:4001"
    );

    // The per-IP limit counts the proxied client, and an IPv6 client by its
    // /64: rotating addresses within it does not help.
    let second = "[2001:db8::2]:5001".parse().unwrap();
    assert!(who_am_i_tcp(PROXY, tcp, &proxy_v2(second)).await.is_ok());
    let rotated = "[2001:db8::ffff:1:2:3]:5002".parse().unwrap();
    assert_eq!(
        who_am_i_tcp(PROXY, tcp, &proxy_v2(rotated)).await,
        Err(Some(DisconnectReason::TooManyConnections))
    );
    let other_network = "[2001:db8:0:1::1]:5003".parse().unwrap();
    assert!(
        who_am_i_tcp(PROXY, tcp, &proxy_v2(other_network))
            .await
            .is_ok()
    );
    // 192.0.2.7 holds one; one more fits, a third does not.
    assert!(who_am_i_tcp(PROXY, tcp, v1).await.is_ok());
    assert_eq!(
        who_am_i_tcp(PROXY, tcp, v1).await,
        Err(Some(DisconnectReason::TooManyConnections))
    );

    // From the trusted proxy the header is required: without it, nothing
    // is served.
    assert_eq!(who_am_i_tcp(PROXY, tcp, b"").await, Err(None));
    // From anyone else a PROXY header is bad bytes: refused as malformed.
    let untrusted = who_am_i_tcp([127, 0, 4, 2], tcp, v1).await;
    assert!(
        matches!(
            untrusted,
            Err(Some(
                DisconnectReason::Malformed | DisconnectReason::FrameTooLarge
            ))
        ),
        "{untrusted:?}"
    );
}

#[tokio::test]
async fn proxy_headers_work_on_the_websocket_listener() {
    let (_tcp, ws, _server) = proxied_server(1);
    let upgrade = async |header: &[u8]| {
        let mut stream = connect_from(PROXY, ws).await;
        stream.write_all(header).await.unwrap();
        tokio_tungstenite::client_async(format!("ws://{ws}/ws"), stream).await
    };
    let v1 = b"PROXY TCP4 192.0.2.9 127.0.0.1 4100 80\r\n";
    let (mut socket, _) = upgrade(v1).await.expect("upgraded");
    socket.send(ws_request(&WhoAmI, 1)).await.unwrap();
    let Some(Ok(Message::Binary(bytes))) = socket.next().await else {
        panic!("no answer");
    };
    let frame = ternio::protocol::Frame::parse(bytes, usize::MAX).unwrap();
    assert_eq!(
        YouAre::decode_body(&frame.body).unwrap().peer,
        "192.0.2.9:4100"
    );
    // The proxied client holds its one connection: a second gets 503.
    assert!(upgrade(v1).await.is_err());
    // Another proxied client is served (v2).
    let (socket2, _) = upgrade(&proxy_v2("192.0.2.10:4200".parse().unwrap()))
        .await
        .expect("upgraded");
    assert!(ws_request_answered(socket2).await);
    drop(socket);
}

#[tokio::test]
async fn refusals_are_counted_by_reason() {
    let metrics_address = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (tcp, ws, _server) = start_server_with_ws(|b| {
        b.prometheus(metrics_address)
            .max_connections_per_ip(1)
            .max_pending_upgrades(1)
    });
    let _held = who_am_i_tcp([127, 0, 5, 1], tcp, b"").await.unwrap();
    assert!(who_am_i_tcp([127, 0, 5, 1], tcp, b"").await.is_err());
    let _stalled = connect_from([127, 0, 5, 2], ws).await;
    let mut status = String::new();
    eventually(
        async || {
            let (_stream, answer) = upgrade_status([127, 0, 5, 3], ws).await;
            status = answer;
            status.starts_with("HTTP/1.1 503")
        },
        "refused beyond the pending cap",
    )
    .await;
    let series = |transport: &str, reason: &str| {
        format!(
            "ternio_refused_connections_total{{transport=\"{transport}\",reason=\"{reason}\"}} "
        )
    };
    eventually(
        async || {
            let text = scrape(metrics_address).await;
            text.contains(&format!("{}1", series("tcp", "per_ip")))
                && text
                    .lines()
                    .any(|line| line.starts_with(&series("websocket", "pending")))
        },
        "the refusals in the metrics",
    )
    .await;
}
