//! WebSocket, section 1.2 of the contract, point by point: one frame per
//! binary message, the subprotocol, text messages, the size limit, pings,
//! the close handshake both ways; the same handlers as TCP; and a client
//! built on another WebSocket crate.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::{SinkExt, StreamExt};
use ternio::DisconnectReason;
use ternio::protocol::frame::{self, Flags, Frame, Framing, Header};
use ternio::protocol::system::{self, Disconnect};
use ternio::protocol::{DEFAULT_MAX_FRAME_SIZE, Decode, Encode, Packet};
use ternio_client::Client;
use ternio_tests::*;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Connects to `path` offering `protocols` (a `Sec-WebSocket-Protocol` value).
async fn connect(
    address: std::net::SocketAddr,
    path: &str,
    protocols: Option<&str>,
) -> Result<(Ws, Option<String>), WsError> {
    let mut request = format!("ws://{address}{path}")
        .into_client_request()
        .unwrap();
    if let Some(protocols) = protocols {
        request.headers_mut().insert(
            "Sec-WebSocket-Protocol",
            HeaderValue::from_str(protocols).unwrap(),
        );
    }
    let (ws, response) = tokio_tungstenite::connect_async(request).await?;
    let selected = response
        .headers()
        .get("Sec-WebSocket-Protocol")
        .map(|value| value.to_str().unwrap().to_owned());
    Ok((ws, selected))
}

/// The next binary message as a frame; fails on anything but binary and pongs.
async fn next_frame(ws: &mut Ws) -> Frame {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .expect("an answer within 5 s")
            .expect("the stream is open")
            .expect("no error");
        match message {
            Message::Binary(bytes) => return Frame::parse(bytes, DEFAULT_MAX_FRAME_SIZE).unwrap(),
            Message::Pong(_) => continue,
            other => panic!("expected a binary message, got {other:?}"),
        }
    }
}

/// Reads to the server's Close: returns the DISCONNECT seen before it and
/// the close code. Nothing but a DISCONNECT may come first (no answer to
/// the offending message, and no pong: the tests send no ping), and the
/// stream must then end (the handshake completed).
async fn expect_close(ws: &mut Ws) -> (Option<Disconnect>, CloseCode) {
    let mut disconnect = None;
    loop {
        let message = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .expect("a close within 5 s")
            .expect("a Close frame before the end")
            .expect("no error before the Close");
        match message {
            Message::Binary(bytes) => {
                let frame = Frame::parse(bytes, DEFAULT_MAX_FRAME_SIZE).unwrap();
                assert_eq!(
                    frame.header,
                    Header::new(system::DISCONNECT, Flags::NONE, 0),
                    "only a DISCONNECT comes before the Close"
                );
                assert!(disconnect.is_none(), "a second DISCONNECT");
                disconnect = Some(Disconnect::decode_body(&frame.body).unwrap());
            }
            Message::Close(frame) => {
                let code = frame.expect("a close code").code;
                // tungstenite answers the Close; the stream then ends cleanly.
                let end = tokio::time::timeout(Duration::from_secs(5), ws.next())
                    .await
                    .unwrap();
                assert!(
                    end.is_none(),
                    "the stream ends after the close handshake: {end:?}"
                );
                return (disconnect, code);
            }
            other => panic!("expected a DISCONNECT or the Close, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn one_frame_per_binary_message_through_the_same_handlers() {
    let (_, ws_address, _server) = start_server_with_ws(|b| b);
    let (mut ws, _) = connect(ws_address, "/ws", Some("ternio.v2")).await.unwrap();
    ws.send(ws_request(&Add { a: 20, b: 22 }, 1)).await.unwrap();
    ws.send(ws_request(&WhoAmI, 2)).await.unwrap();
    let sum = next_frame(&mut ws).await;
    assert_eq!(sum.header, Header::new(Sum::OPCODE, Flags::RESPONSE, 1));
    assert_eq!(Sum::decode_body(&sum.body).unwrap(), Sum(42));
    let who = next_frame(&mut ws).await;
    assert_eq!(
        YouAre::decode_body(&who.body).unwrap().transport,
        "WebSocket"
    );

    // Several frames sent at once each come back in a message of their own.
    for id in 10..20 {
        ws.feed(ws_request(
            &Echo {
                payload: Bytes::from(vec![id as u8; 3000]),
            },
            id,
        ))
        .await
        .unwrap();
    }
    ws.flush().await.unwrap();
    for id in 10..20 {
        let echo = next_frame(&mut ws).await;
        assert_eq!(echo.header.request_id, id);
        assert_eq!(
            Echo::decode_body(&echo.body).unwrap().payload,
            vec![id as u8; 3000]
        );
    }
}

#[tokio::test]
async fn the_subprotocol_is_selected_when_offered_and_optional() {
    let (_, ws_address, _server) = start_server_with_ws(|b| b);
    let (_, selected) = connect(ws_address, "/ws", Some("ternio.v2")).await.unwrap();
    assert_eq!(selected.as_deref(), Some("ternio.v2"));
    let (_, selected) = connect(ws_address, "/ws", Some("chat.v9, ternio.v2"))
        .await
        .unwrap();
    assert_eq!(selected.as_deref(), Some("ternio.v2"));
    let (mut ws, selected) = connect(ws_address, "/ws", None).await.unwrap();
    assert_eq!(selected, None);
    ws.send(ws_request(&Add { a: 1, b: 1 }, 1)).await.unwrap();
    assert_eq!(
        Sum::decode_body(&next_frame(&mut ws).await.body).unwrap(),
        Sum(2)
    );
    // Offering only other protocols, or another path, is refused.
    match connect(ws_address, "/ws", Some("chat.v9")).await {
        Err(WsError::Http(response)) => assert_eq!(response.status(), 400),
        other => panic!("expected a 400, got {:?}", other.map(|(_, p)| p)),
    }
    match connect(ws_address, "/elsewhere", None).await {
        Err(WsError::Http(response)) => assert_eq!(response.status(), 404),
        other => panic!("expected a 404, got {:?}", other.map(|(_, p)| p)),
    }
}

#[tokio::test]
async fn a_text_message_closes_with_1003() {
    let (tcp, ws_address, _server) = start_server_with_ws(|b| b);
    let (mut ws, _) = connect(ws_address, "/ws", Some("ternio.v2")).await.unwrap();
    // The bytes of a whole Bump frame, valid UTF-8: sent as text, refused,
    // and not run.
    let Message::Binary(bump) = ws_request(&Bump { by: 65 }, 0) else {
        unreachable!()
    };
    ws.send(Message::text(String::from_utf8(bump.to_vec()).unwrap()))
        .await
        .unwrap();
    let (disconnect, code) = expect_close(&mut ws).await;
    assert_eq!(code, CloseCode::Unsupported);
    assert_eq!(disconnect.unwrap().reason, DisconnectReason::Malformed);
    assert_eq!(count(tcp).await, 0, "the text message ran");
}

/// The server-wide count of `Bump`s and `Tally`s, read on a fresh TCP connection.
async fn count(tcp: std::net::SocketAddr) -> u64 {
    let client = Client::connect_tcp(tcp).await.unwrap();
    let count: Count = client.request_async(&GetCount).await.unwrap();
    count.0
}

#[tokio::test]
async fn the_maximum_message_size_is_the_maximum_frame_size() {
    let (tcp, ws_address, _server) = start_server_with_ws(|b| b.max_frame_size(4096));
    let (mut ws, _) = connect(ws_address, "/ws", Some("ternio.v2")).await.unwrap();
    // 4096 bytes in all passes: header 7 + varint 2 + 4087.
    ws.send(ws_request(
        &Echo {
            payload: Bytes::from(vec![1; 4087]),
        },
        1,
    ))
    .await
    .unwrap();
    assert_eq!(next_frame(&mut ws).await.body.len(), 4089);
    // One byte more is refused, and does not run: a Tally of 4097 bytes.
    let tally = Tally {
        by: 1000,
        padding: Bytes::from(vec![1; 4080]),
    };
    assert_eq!(7 + tally.encoded_len(), 4097);
    ws.send(ws_request(&tally, 2)).await.unwrap();
    let (disconnect, code) = expect_close(&mut ws).await;
    assert_eq!(code, CloseCode::Size);
    assert_eq!(disconnect.unwrap().reason, DisconnectReason::FrameTooLarge);
    assert_eq!(count(tcp).await, 0, "the oversized Tally ran");
}

#[tokio::test]
async fn a_message_far_above_the_limit_still_closes_cleanly() {
    // The server reads a few KiB at a time, so most of this message is still
    // in its socket when it refuses it; the close must not become a reset.
    let (_, ws_address, _server) = start_server_with_ws(|b| b.max_frame_size(4096));
    let (mut ws, _) = connect(ws_address, "/ws", Some("ternio.v2")).await.unwrap();
    ws.send(ws_request(
        &Echo {
            payload: Bytes::from(vec![1; 256 * 1024]),
        },
        1,
    ))
    .await
    .unwrap();
    let (disconnect, code) = expect_close(&mut ws).await;
    assert_eq!(code, CloseCode::Size);
    assert_eq!(disconnect.unwrap().reason, DisconnectReason::FrameTooLarge);
}

#[tokio::test]
async fn a_malformed_frame_in_a_message_closes_with_1002() {
    let (_, ws_address, _server) = start_server_with_ws(|b| b);
    let (mut ws, _) = connect(ws_address, "/ws", Some("ternio.v2")).await.unwrap();
    ws.send(Message::Binary(Bytes::from_static(&[
        0x10, 0, 0x40, 1, 0, 0, 0,
    ])))
    .await
    .unwrap();
    let (disconnect, code) = expect_close(&mut ws).await;
    assert_eq!(code, CloseCode::Protocol);
    assert_eq!(disconnect.unwrap().reason, DisconnectReason::Malformed);
    let (mut short, _) = connect(ws_address, "/ws", None).await.unwrap();
    short
        .send(Message::Binary(Bytes::from_static(&[1, 0, 0])))
        .await
        .unwrap();
    let (disconnect, _) = expect_close(&mut short).await;
    assert_eq!(disconnect.unwrap().reason, DisconnectReason::Malformed);
}

#[tokio::test]
async fn websocket_pings_are_answered() {
    let (_, ws_address, _server) = start_server_with_ws(|b| b);
    let (mut ws, _) = connect(ws_address, "/ws", Some("ternio.v2")).await.unwrap();
    ws.send(Message::Ping(Bytes::from_static(b"are you there")))
        .await
        .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(5), ws.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(answer, Message::Pong(Bytes::from_static(b"are you there")));
}

#[tokio::test]
async fn a_client_close_completes_the_handshake() {
    let (_, ws_address, server) = start_server_with_ws(|b| b);
    let (mut ws, _) = connect(ws_address, "/ws", Some("ternio.v2")).await.unwrap();
    ws.send(ws_request(&Add { a: 1, b: 1 }, 1)).await.unwrap();
    next_frame(&mut ws).await;
    ws.close(None).await.unwrap();
    // The server's reply to our Close ends the stream.
    let rest = tokio::time::timeout(Duration::from_secs(5), ws.next())
        .await
        .unwrap();
    assert!(
        rest.is_none() || matches!(rest, Some(Ok(Message::Close(_)))),
        "{rest:?}"
    );
    eventually("the server lets the closed connection go", || {
        server.connection_count() == 0
    })
    .await;
}

#[tokio::test]
async fn a_server_shutdown_closes_with_1001_after_disconnect() {
    let (_, ws_address, server) = start_server_with_ws(|b| b);
    let (mut ws, _) = connect(ws_address, "/ws", Some("ternio.v2")).await.unwrap();
    ws.send(ws_request(&Sleep { ms: 100, tag: 7 }, 1))
        .await
        .unwrap();
    // Answered once the sleep was read: the sleep is running.
    ws.send(ws_request(&Add { a: 1, b: 1 }, 2)).await.unwrap();
    assert_eq!(next_frame(&mut ws).await.header.request_id, 2);
    server.shutdown();
    // The running request is answered first.
    let slept = next_frame(&mut ws).await;
    assert_eq!(Slept::decode_body(&slept.body).unwrap().tag, 7);
    let (disconnect, code) = expect_close(&mut ws).await;
    assert_eq!(code, CloseCode::Away);
    assert_eq!(disconnect.unwrap().reason, DisconnectReason::Shutdown);
}

#[tokio::test]
async fn tcp_and_websocket_clients_share_one_server() {
    let (tcp_address, ws_address, _server) = start_server_with_ws(|b| b);
    let tcp = Client::connect_tcp(tcp_address).await.unwrap();
    let (mut ws, _) = connect(ws_address, "/ws", Some("ternio.v2")).await.unwrap();
    let () = tcp.request_async(&Bump { by: 5 }).await.unwrap();
    ws.send(ws_request(&Bump { by: 3 }, 1)).await.unwrap();
    assert_eq!(
        next_frame(&mut ws).await.header,
        Header::new(Bump::OPCODE, Flags::RESPONSE, 1)
    );
    ws.send(ws_request(&GetCount, 2)).await.unwrap();
    assert_eq!(
        Count::decode_body(&next_frame(&mut ws).await.body).unwrap(),
        Count(8)
    );
    let count: Count = tcp.request_async(&GetCount).await.unwrap();
    assert_eq!(count, Count(8));
}

#[tokio::test]
async fn a_client_on_another_websocket_crate() {
    use tokio_websockets::{ClientBuilder, Message as OtherMessage};

    let (_, ws_address, _server) = start_server_with_ws(|b| b);
    let uri = format!("ws://{ws_address}/ws").parse().unwrap();
    let (mut ws, response) = ClientBuilder::from_uri(uri)
        .add_header(
            "Sec-WebSocket-Protocol".try_into().unwrap(),
            "ternio.v2".try_into().unwrap(),
        )
        .unwrap()
        .connect()
        .await
        .unwrap();
    assert_eq!(response.headers()["sec-websocket-protocol"], "ternio.v2");
    for id in 1..=50u32 {
        let payload = Bytes::from(format!("message {id}").into_bytes());
        let mut out = BytesMut::new();
        let header = Header::new(Echo::OPCODE, Flags::NONE, id);
        frame::write_frame(
            &mut out,
            Framing::Message,
            header,
            &Echo {
                payload: payload.clone(),
            },
            usize::MAX,
        )
        .unwrap();
        ws.send(OtherMessage::binary(out.freeze())).await.unwrap();
        let answer = ws.next().await.unwrap().unwrap();
        assert!(answer.is_binary());
        let frame = Frame::parse(
            Bytes::copy_from_slice(&answer.into_payload()),
            DEFAULT_MAX_FRAME_SIZE,
        )
        .unwrap();
        assert_eq!(frame.header, Header::new(Echo::OPCODE, Flags::RESPONSE, id));
        assert_eq!(Echo::decode_body(&frame.body).unwrap().payload, payload);
    }
    ws.close().await.unwrap();
}

/// A binary client frame written by hand: FIN, masked, the shortest length.
fn masked_binary(payload: &[u8]) -> Vec<u8> {
    let mask = [0x37, 0xFA, 0x21, 0x3D];
    let mut out = vec![0x82];
    match payload.len() {
        len if len < 126 => out.push(0x80 | len as u8),
        len if len <= 0xFFFF => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        len => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(&mask);
    out.extend(
        payload
            .iter()
            .enumerate()
            .map(|(at, byte)| byte ^ mask[at % 4]),
    );
    out
}

fn echo_of(len: usize, fill: u8) -> Echo {
    Echo {
        payload: Bytes::from(vec![fill; len]),
    }
}

async fn expect_echo(ws: &mut Ws, id: u32, len: usize, fill: u8) {
    let frame = next_frame(ws).await;
    assert_eq!(frame.header, Header::new(Echo::OPCODE, Flags::RESPONSE, id));
    assert_eq!(Echo::decode_body(&frame.body).unwrap(), echo_of(len, fill));
}

/// After a large message, a quiet connection gets fresh buffers (see
/// `memory.rs`); it goes on working, and a frame that was half in
/// when the connection went quiet is not lost.
#[tokio::test]
async fn a_quiet_spell_after_a_large_message_loses_nothing() {
    use tokio::io::AsyncWriteExt;
    use tokio_tungstenite::tungstenite::protocol::Role;

    const LARGE: usize = 64 * 1024;
    const QUIET: Duration = Duration::from_millis(1600);
    let (_, ws_address, _server) = start_server_with_ws(|b| b);
    let (mut ws, _) = connect(ws_address, "/ws", None).await.unwrap();
    ws.send(ws_request(&echo_of(LARGE, 1), 1)).await.unwrap();
    expect_echo(&mut ws, 1, LARGE, 1).await;
    // Quiet: the server renews its buffers; the connection goes on.
    tokio::time::sleep(QUIET).await;
    ws.send(ws_request(&echo_of(LARGE, 2), 2)).await.unwrap();
    expect_echo(&mut ws, 2, LARGE, 2).await;

    // Half a frame goes in, the connection goes quiet, the rest follows.
    let MaybeTlsStream::Plain(mut tcp) = ws.into_inner() else {
        unreachable!("a plain ws:// connection")
    };
    let Message::Binary(third) = ws_request(&echo_of(LARGE, 3), 3) else {
        unreachable!()
    };
    let Message::Binary(fourth) = ws_request(&echo_of(100, 4), 4) else {
        unreachable!()
    };
    let third = masked_binary(&third);
    let (head, rest) = third.split_at(third.len() / 2);
    tcp.write_all(head).await.unwrap();
    tokio::time::sleep(QUIET).await;
    tcp.write_all(rest).await.unwrap();
    tcp.write_all(&masked_binary(&fourth)).await.unwrap();
    let mut ws =
        WebSocketStream::from_raw_socket(MaybeTlsStream::Plain(tcp), Role::Client, None).await;
    expect_echo(&mut ws, 3, LARGE, 3).await;
    expect_echo(&mut ws, 4, 100, 4).await;
    ws.close(None).await.unwrap();
}
