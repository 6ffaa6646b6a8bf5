//! The client over any byte stream (`Client::connect_stream`): here an
//! in-memory pipe whose other end is a peer written with `ternio_protocol`.

mod peer;

use std::io;
use std::sync::atomic::Ordering;
use std::time::Duration;

use peer::{Echo, Note, pipes};
use ternio_client::protocol::system;
use ternio_client::{
    Bytes, Client, ClientError, CloseReason, ConnectionState, DisconnectReason, ReconnectPolicy,
};
use tokio::io::DuplexStream;

fn echo(text: &'static str) -> Echo {
    Echo {
        payload: Bytes::from_static(text.as_bytes()),
    }
}

/// A request answered, a push received, and a peer that goes away: the
/// client reconnects through the connector and carries on.
#[tokio::test(start_paused = true)]
async fn a_stream_carries_requests_and_pushes_and_is_opened_again_after_a_loss() {
    let (connector, mut peers, calls) = pipes();
    let mut policy = ReconnectPolicy::default();
    policy.initial_delay = Duration::from_millis(100);
    policy.jitter = 0.0;
    // (This peer scripts every frame: no resumption ticket asked for.)
    let client = Client::builder()
        .stream(connector)
        .reconnect(policy)
        .resume(false)
        .connect()
        .await
        .unwrap();
    let mut peer = peers.recv().await.expect("the first pipe");
    assert_eq!(client.state(), ConnectionState::Connected);

    // A request, answered.
    let hello = echo("hello");
    let (reply, ()) = tokio::join!(client.request_async(&hello), async {
        let request = peer.recv_request().await.expect("the request");
        assert_eq!(request.header.opcode, 0x0001);
        assert_ne!(request.header.request_id, 0);
        peer.answer(&request, &echo("hello")).await.unwrap();
    });
    assert_eq!(reply.unwrap(), echo("hello"));

    // A push, received.
    let mut notes = client.subscribe::<Note>();
    let note = Note {
        text: "pushed".to_owned(),
    };
    peer.push(&note).await.unwrap();
    assert_eq!(notes.next().await, Some(note));

    // The peer goes away: the client reconnects through the connector.
    let mut states = client.state_changes();
    drop(peer);
    let state = states
        .wait_for(|state| !state.is_connected())
        .await
        .unwrap()
        .clone();
    assert_eq!(state, ConnectionState::Reconnecting { attempt: 1 });
    let peer = peers.recv().await.expect("a second pipe");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    tokio::spawn(peer.echo_until_closed());
    let reply: Echo = client.request_async(&echo("again")).await.unwrap();
    assert_eq!(reply, echo("again"));
    assert_eq!(client.state(), ConnectionState::Connected);
}

/// `close` says `DISCONNECT NORMAL` on the stream, then ends it.
#[tokio::test(start_paused = true)]
async fn close_says_goodbye_and_ends_the_stream() {
    let (connector, mut peers, _) = pipes();
    let client = Client::connect_stream(connector).await.unwrap();
    let mut peer = peers.recv().await.unwrap();
    client.close().await;
    let goodbye = peer.recv().await.expect("the DISCONNECT");
    assert_eq!(goodbye.header.opcode, system::DISCONNECT);
    assert!(peer.recv().await.is_none(), "the stream ended");
    assert_eq!(client.state(), ConnectionState::Closed(CloseReason::Local));
}

/// A `DISCONNECT` from the peer reaches the request in flight, as on TCP.
#[tokio::test(start_paused = true)]
async fn a_disconnect_fails_the_request_in_flight() {
    let (connector, mut peers, _) = pipes();
    let client = Client::connect_stream(connector).await.unwrap();
    let mut peer = peers.recv().await.unwrap();
    tokio::spawn(async move {
        peer.recv_request().await.expect("the request");
        peer.disconnect(DisconnectReason::Kicked).await;
    });
    let result = client.request_async(&echo("x")).await;
    match result {
        Err(ClientError::Closed(CloseReason::Disconnected(disconnect))) => {
            assert_eq!(disconnect.reason, DisconnectReason::Kicked)
        }
        other => panic!("expected the DISCONNECT, got {other:?}"),
    }
}

/// The connector's error is the connection's.
#[tokio::test]
async fn a_connector_that_fails_fails_the_connection() {
    let refused =
        || async { Err::<DuplexStream, _>(io::Error::new(io::ErrorKind::ConnectionRefused, "no")) };
    match Client::connect_stream(refused).await {
        Err(ClientError::Connect(error)) => {
            assert_eq!(error.kind(), io::ErrorKind::ConnectionRefused)
        }
        other => panic!("expected a connect error, got {other:?}"),
    }
}

/// Frames larger than the pipe holds: the caller writes what fits, the
/// writer task the rest, and the reader takes the answer in many reads.
#[tokio::test(start_paused = true)]
async fn frames_larger_than_the_pipe_go_through() {
    let (connector, mut peers, _) = pipes();
    let client = Client::connect_stream(connector).await.unwrap();
    tokio::spawn(peers.recv().await.unwrap().echo_until_closed());
    for len in [1, 64 * 1024, 300 * 1024] {
        let large = Echo {
            payload: Bytes::from(vec![7u8; len]),
        };
        let (a, b) = tokio::join!(client.request_async(&large), client.request_async(&large));
        assert_eq!(a.unwrap(), large);
        assert_eq!(b.unwrap(), large);
    }
}
