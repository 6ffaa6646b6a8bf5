//! Which task a waiting request wakes. With a link ready, a request's slot
//! takes the waker of the poll that registers and sends it, and the first
//! wait for the answer, in that same poll, takes no lock; after a wait for
//! a link, the first wait registers its waker. Either way, a request
//! polled since by another waker (moved into another task, or polled by a
//! combinator) must wake that one. The client runs over in-memory pipes on
//! tokio's paused clock.

mod peer;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use peer::{Echo, Peer, pipe, pipes};
use ternio_client::{Bytes, Client, ConnectionState, Packet, ReconnectPolicy};
use tokio::sync::{Semaphore, mpsc};

/// A waker that counts its wakes.
struct Counter(AtomicUsize);

impl Wake for Counter {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counting_waker() -> (Arc<Counter>, Waker) {
    let counter = Arc::new(Counter(AtomicUsize::new(0)));
    (Arc::clone(&counter), Waker::from(counter))
}

/// Waits (paused time) until `counter` counted more than `seen` wakes.
async fn woken_after(counter: &Counter, seen: usize, what: &str) {
    let limit = tokio::time::Instant::now() + Duration::from_secs(60);
    while counter.0.load(Ordering::SeqCst) <= seen {
        assert!(tokio::time::Instant::now() < limit, "never woken: {what}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn after_a_wait_for_a_link_the_answer_wakes_the_waker_that_polled_last() {
    // Each connection waits for a permit: the test decides when the client
    // reconnects.
    let gate = Arc::new(Semaphore::new(1));
    let (peers_in, mut peers) = mpsc::unbounded_channel::<Peer>();
    let connector = {
        let gate = Arc::clone(&gate);
        move || {
            let (gate, peers_in) = (Arc::clone(&gate), peers_in.clone());
            async move {
                gate.acquire().await.expect("the gate stays open").forget();
                let (client, peer) = pipe();
                peers_in
                    .send(peer)
                    .map_err(|_| std::io::Error::other("the test stopped accepting"))?;
                Ok(client)
            }
        }
    };
    let client = Client::builder()
        .stream(connector)
        .reconnect(ReconnectPolicy::default())
        .connect()
        .await
        .unwrap();
    // The first connection goes: the client waits to reconnect.
    drop(peers.recv().await.unwrap());
    let mut states = client.state_changes();
    states
        .wait_for(|state| matches!(state, ConnectionState::Reconnecting { .. }))
        .await
        .unwrap();

    let echo = Echo {
        payload: Bytes::from_static(b"moved"),
    };
    let mut request = Box::pin(client.request_async(&echo));
    let (_, first_waker) = counting_waker();
    let (last, last_waker) = counting_waker();
    // Polled by the first waker, it waits for a link; then by the last.
    let mut poll_with = |waker: &Waker| {
        let mut cx = Context::from_waker(waker);
        Pin::as_mut(&mut request).poll(&mut cx)
    };
    assert!(poll_with(&first_waker).is_pending());
    assert!(poll_with(&last_waker).is_pending());

    // The link comes up: the last waker hears of it, and its poll registers
    // the request and sends it.
    gate.add_permits(1);
    woken_after(&last, 0, "the link came up").await;
    let woken = last.0.load(Ordering::SeqCst);
    assert!(poll_with(&last_waker).is_pending());
    let mut peer = peers.recv().await.unwrap();
    // (A client with a reconnect policy asks for a resumption ticket too.)
    let sent = loop {
        let frame = peer.recv_request().await.unwrap();
        if frame.header.opcode == Echo::OPCODE {
            break frame;
        }
    };
    peer.answer(&sent, &echo).await.unwrap();

    // The answer wakes the waker that polled last.
    woken_after(&last, woken, "the answer came").await;
    match poll_with(&last_waker) {
        Poll::Ready(answer) => assert_eq!(answer.unwrap(), echo),
        Poll::Pending => panic!("woken, and no answer"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_request_registered_with_one_waker_and_polled_by_another_wakes_the_other() {
    let (connector, mut peers, _) = pipes();
    let client = Client::builder().stream(connector).connect().await.unwrap();
    let mut peer = peers.recv().await.unwrap();
    let echo = Echo {
        payload: Bytes::from_static(b"moved"),
    };
    let mut request = Box::pin(client.request_async(&echo));
    let (_, first_waker) = counting_waker();
    let (last, last_waker) = counting_waker();
    let mut poll_with = |waker: &Waker| {
        let mut cx = Context::from_waker(waker);
        Pin::as_mut(&mut request).poll(&mut cx)
    };
    // The link is ready: the first poll registers the request with its
    // waker and sends it; then another waker polls it.
    assert!(poll_with(&first_waker).is_pending());
    assert!(poll_with(&last_waker).is_pending());
    let sent = peer.recv_request().await.unwrap();
    assert_eq!(sent.header.opcode, Echo::OPCODE);
    peer.answer(&sent, &echo).await.unwrap();

    woken_after(&last, 0, "the answer came").await;
    match poll_with(&last_waker) {
        Poll::Ready(answer) => assert_eq!(answer.unwrap(), echo),
        Poll::Pending => panic!("woken, and no answer"),
    }
}
