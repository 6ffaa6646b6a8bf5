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
use ternio_client::{Bytes, Client, ClientError, ConnectionState, Packet, ReconnectPolicy};
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

/// The echo both tests send.
fn moved() -> Echo {
    Echo {
        payload: Bytes::from_static(b"moved"),
    }
}

/// A request polled by one waker, then by another, the last (which counts
/// its wakes).
struct TwoWakers<F> {
    request: Pin<Box<F>>,
    first: Waker,
    last: Arc<Counter>,
    last_waker: Waker,
}

impl<F: Future<Output = Result<Echo, ClientError>>> TwoWakers<F> {
    fn new(request: F) -> Self {
        let (last, last_waker) = counting_waker();
        Self {
            request: Box::pin(request),
            first: counting_waker().1,
            last,
            last_waker,
        }
    }

    fn poll(&mut self, last: bool) -> Poll<F::Output> {
        let waker = if last { &self.last_waker } else { &self.first };
        self.request.as_mut().poll(&mut Context::from_waker(waker))
    }

    /// Polls with the first waker, then with the last: both wait.
    fn poll_first_then_last(&mut self) {
        assert!(self.poll(false).is_pending());
        assert!(self.poll(true).is_pending());
    }

    /// How many times the last waker was woken.
    fn wakes(&self) -> usize {
        self.last.0.load(Ordering::SeqCst)
    }

    /// Waits until the last waker is woken after `seen` wakes, and polls
    /// with it: the echo must be there.
    async fn answered_by_last(&mut self, seen: usize) {
        woken_after(&self.last, seen, "the answer came").await;
        match self.poll(true) {
            Poll::Ready(answer) => assert_eq!(answer.unwrap(), moved()),
            Poll::Pending => panic!("woken, and no answer"),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_request_registered_with_one_waker_and_polled_by_another_wakes_the_other() {
    let (connector, mut peers, _) = pipes();
    let client = Client::builder().stream(connector).connect().await.unwrap();
    let mut peer = peers.recv().await.unwrap();
    // The link is ready: the first poll registers the request with its
    // waker and sends it; then another waker polls it.
    let echo = moved();
    let mut request = TwoWakers::new(client.request_async(&echo));
    request.poll_first_then_last();
    let sent = peer.recv_request().await.unwrap();
    assert_eq!(sent.header.opcode, Echo::OPCODE);
    peer.answer(&sent, &moved()).await.unwrap();
    request.answered_by_last(0).await;
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

    // Polled by the first waker, it waits for a link; then by the last.
    let echo = moved();
    let mut request = TwoWakers::new(client.request_async(&echo));
    request.poll_first_then_last();

    // The link comes up: the last waker hears of it, and its poll registers
    // the request and sends it.
    gate.add_permits(1);
    woken_after(&request.last, 0, "the link came up").await;
    let seen = request.wakes();
    assert!(request.poll(true).is_pending());
    let mut peer = peers.recv().await.unwrap();
    // (A client with a reconnect policy asks for a resumption ticket too.)
    let sent = loop {
        let frame = peer.recv_request().await.unwrap();
        if frame.header.opcode == Echo::OPCODE {
            break frame;
        }
    };
    peer.answer(&sent, &moved()).await.unwrap();
    request.answered_by_last(seen).await;
}
