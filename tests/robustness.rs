//! Peers that break the contract: each gets its DISCONNECT and a clean
//! close, and a healthy connection beside them never notices.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ternio::DisconnectReason;
use ternio::protocol::frame::{Flags, Header};
use ternio::protocol::{Encode, Packet};
use ternio_client::{Client, ClientError, CloseReason};
use ternio_tests::*;

/// The server-wide count of `Bump`s and `Tally`s, read on a fresh connection.
async fn count(address: std::net::SocketAddr) -> u64 {
    let client = Client::connect_tcp(address).await.unwrap();
    let count: Count = client.request_async(&GetCount).await.unwrap();
    count.0
}

/// A length-prefixed frame written by hand: `flags` as they are (reserved
/// bits included), and `packet`'s encoding as the body.
fn frame_with_flags<P: Packet>(flags: u8, request_id: u32, packet: &P) -> Vec<u8> {
    let mut body = BytesMut::new();
    packet.encode(&mut body);
    let mut out = ((7 + body.len()) as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&P::OPCODE.to_le_bytes());
    out.push(flags);
    out.extend_from_slice(&request_id.to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// A client that keeps asking while the test misbehaves elsewhere; returns
/// how many answers it got, all of them right.
fn healthy_neighbour(address: std::net::SocketAddr) -> tokio::task::JoinHandle<usize> {
    tokio::spawn(async move {
        let client = Client::connect_tcp(address).await.unwrap();
        let mut answered = 0;
        for i in 0..200i64 {
            let sum: Sum = client.request_async(&Add { a: i, b: 1 }).await.unwrap();
            assert_eq!(sum, Sum(i + 1));
            answered += 1;
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        answered
    })
}

#[tokio::test]
async fn reserved_flag_bits_are_malformed_and_the_frame_is_not_run() {
    let (address, _server) = start_server(|b| b);
    let neighbour = healthy_neighbour(address);
    // Bit 3 (0x08) is COMPRESSED: tests/compression.rs.
    for bits in [0x10u8, 0x40, 0x80] {
        let mut raw = RawConnection::connect(address).await;
        // A whole valid request first: it is answered before the bad frame.
        raw.request(&Add { a: 1, b: 1 }, 1).await;
        raw.send(Header::new(0x0010, Flags::NONE, 2), &[0u8; 16])
            .await;
        // A valid Bump with a reserved bit: refused, never run, unanswered.
        raw.send_raw(&frame_with_flags(bits, 3, &Bump { by: 1000 }))
            .await
            .unwrap();
        let first = raw.recv().await.unwrap();
        assert_eq!(first.header.request_id, 1);
        let second = raw.recv().await.unwrap();
        assert_eq!(second.header.request_id, 2);
        raw.expect_disconnect(DisconnectReason::Malformed).await;
    }
    assert_eq!(count(address).await, 0, "no Bump with reserved bits ran");
    // The same frame without the reserved bit runs: the count can move.
    let mut raw = RawConnection::connect(address).await;
    raw.send_raw(&frame_with_flags(0, 4, &Bump { by: 1 }))
        .await
        .unwrap();
    assert_eq!(raw.recv().await.unwrap().header.request_id, 4);
    assert_eq!(count(address).await, 1);
    assert_eq!(neighbour.await.unwrap(), 200);
}

#[tokio::test]
async fn an_oversized_length_is_refused_before_it_is_read() {
    let (address, _server) = start_server(|b| b);
    let neighbour = healthy_neighbour(address);
    let mut raw = RawConnection::connect(address).await;
    // Announce 4 GiB and send nothing more: the answer must not wait for it.
    raw.send_raw(&[0xF0, 0xFF, 0xFF, 0xFF]).await.unwrap();
    let disconnect = raw.expect_disconnect(DisconnectReason::FrameTooLarge).await;
    assert!(
        disconnect.message.contains("exceeds"),
        "{}",
        disconnect.message
    );
    let mut short = RawConnection::connect(address).await;
    short
        .send_raw(&[6, 0, 0, 0, 1, 2, 3, 4, 5, 6])
        .await
        .unwrap();
    short.expect_disconnect(DisconnectReason::Malformed).await;
    assert_eq!(neighbour.await.unwrap(), 200);
}

#[tokio::test]
async fn the_configured_frame_limit_applies_both_ways() {
    let (address, _server) = start_server(|b| b.max_frame_size(1024));
    // 1024 bytes in all passes: header 7 + varint 2 + 1015.
    let client = Client::connect_tcp(address).await.unwrap();
    assert_echoed(&client, Bytes::from(vec![1; 1015])).await;
    // One more byte is a frame too large: DISCONNECT, and the client learns why.
    let result = client
        .request_async(&Echo {
            payload: Bytes::from(vec![1; 1016]),
        })
        .await;
    match result {
        Err(ClientError::Closed(CloseReason::Disconnected(disconnect))) => {
            assert_eq!(disconnect.reason, DisconnectReason::FrameTooLarge);
        }
        other => panic!("expected FRAME_TOO_LARGE, got {other:?}"),
    }
    // A client held to the same limit refuses to send it at all.
    let careful = Client::builder()
        .tcp(address.to_string())
        .max_frame_size(1024)
        .connect()
        .await
        .unwrap();
    let result = careful
        .request_async(&Echo {
            payload: Bytes::from(vec![1; 1016]),
        })
        .await;
    assert!(
        matches!(result, Err(ClientError::FrameTooLarge(_))),
        "{result:?}"
    );
}

/// A whole request one byte over the limit is refused and not run, as a
/// request and as a send; at the limit, the same request runs.
#[tokio::test]
async fn a_request_over_the_frame_limit_is_refused_and_not_run() {
    let (address, _server) = start_server(|b| b.max_frame_size(1024));
    // Header 7 + `by` 8 + varint 2 + padding.
    let tally = |by, len| Tally {
        by,
        padding: Bytes::from(vec![0; len]),
    };
    assert_eq!(7 + tally(1, 1007).encoded_len(), 1024);
    let mut raw = RawConnection::connect(address).await;
    raw.request(&tally(1000, 1008), 1).await;
    raw.expect_disconnect(DisconnectReason::FrameTooLarge).await;
    let mut raw = RawConnection::connect(address).await;
    raw.request(&tally(1000, 1008), 0).await;
    raw.expect_disconnect(DisconnectReason::FrameTooLarge).await;
    assert_eq!(count(address).await, 0, "no oversized Tally ran");
    let mut raw = RawConnection::connect(address).await;
    raw.request(&tally(1, 1007), 2).await;
    assert_eq!(raw.recv().await.unwrap().header.request_id, 2);
    assert_eq!(count(address).await, 1);
}

#[tokio::test]
async fn a_sealed_frame_before_a_handshake_is_decrypt_failed_and_not_run() {
    let (address, _server) = start_server(|b| b);
    // A Bump whose body is plain, flagged ENCRYPTED: a server that ignored
    // the flag would run it.
    for request_id in [0, 1] {
        let mut raw = RawConnection::connect(address).await;
        raw.send(
            Header::new(Bump::OPCODE, Flags::ENCRYPTED, request_id),
            &Bump { by: 1000 },
        )
        .await;
        raw.expect_disconnect(DisconnectReason::DecryptFailed).await;
    }
    // And one with a body the size of a sealed one.
    let mut raw = RawConnection::connect(address).await;
    raw.send(Header::new(0x0010, Flags::ENCRYPTED, 1), &[0u8; 40])
        .await;
    raw.expect_disconnect(DisconnectReason::DecryptFailed).await;
    assert_eq!(count(address).await, 0);
}

#[tokio::test]
async fn a_stream_that_ends_inside_a_frame_is_malformed() {
    let (address, _server) = start_server(|b| b);
    let mut raw = RawConnection::connect(address).await;
    raw.send_raw(&[20, 0, 0, 0, 0x10, 0x00]).await.unwrap();
    raw.shutdown_write().await;
    raw.expect_disconnect(DisconnectReason::Malformed).await;
}

#[tokio::test]
async fn a_half_closed_client_still_gets_its_answers() {
    let (address, _server) = start_server(|b| b);
    let mut raw = RawConnection::connect(address).await;
    raw.request(&Sleep { ms: 100, tag: 1 }, 1).await;
    raw.request(&Add { a: 2, b: 2 }, 2).await;
    raw.shutdown_write().await;
    let mut ids = Vec::new();
    while let Some(frame) = raw.recv().await {
        ids.push(frame.header.request_id);
    }
    assert_eq!(ids, [2, 1]);
}

#[tokio::test]
async fn a_client_that_vanishes_mid_request_disturbs_nobody() {
    let (address, _server) = start_server(|b| b);
    let neighbour = healthy_neighbour(address);
    for _ in 0..20 {
        let mut raw = RawConnection::connect(address).await;
        raw.request(&Sleep { ms: 50, tag: 1 }, 1).await;
        raw.request(
            &Echo {
                payload: Bytes::from(vec![7; 100_000]),
            },
            2,
        )
        .await;
        drop(raw);
    }
    assert_eq!(neighbour.await.unwrap(), 200);
    let client = Client::connect_tcp(address).await.unwrap();
    let count: Count = client.request_async(&GetCount).await.unwrap();
    assert_eq!(count, Count(0));
}

#[tokio::test]
async fn a_crowd_sending_garbage_beside_a_healthy_client() {
    let (address, _server) = start_server(|b| b);
    let neighbour = healthy_neighbour(address);
    let mut vandals = Vec::new();
    for seed in 0..100u64 {
        vandals.push(tokio::spawn(async move {
            let mut raw = RawConnection::connect(address).await;
            // A cheap deterministic byte soup, different per connection.
            let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let soup: Vec<u8> = (0..4096)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            // The server may close at any point: later writes may fail.
            let _ = raw.send_raw(&soup).await;
        }));
    }
    for vandal in vandals {
        vandal.await.unwrap();
    }
    assert_eq!(neighbour.await.unwrap(), 200);
}
