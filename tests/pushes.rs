//! Server pushes in the SDK client, over real sockets: subscriptions as
//! streams and callbacks, several subscribers of one type, unsubscribing by
//! drop, a subscriber that falls behind (dropped and counted, the reader
//! never blocked), pushes nobody wants and pushes that do not decode, and
//! subscriptions ending with the client.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use ternio::Packet;
use ternio_client::{Client, Subscription};
use ternio_tests::*;

/// 0x0061 read as another type: `Note` carries 4 bytes, this wants 8.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0061)]
struct WideNote {
    seq: u64,
}

/// Waits (up to 5 s) until `done` holds.
async fn eventually(done: impl FnMut() -> bool) {
    eventually_within(Duration::from_secs(5), "the pushes", done).await;
}

async fn push(client: &Client, count: u32) {
    client.request_async(&PushMe { count }).await.unwrap();
}

async fn take<P: Packet>(subscription: &mut Subscription<P>, count: usize) -> Vec<P> {
    let mut taken = Vec::with_capacity(count);
    for _ in 0..count {
        let next = tokio::time::timeout(Duration::from_secs(5), subscription.next())
            .await
            .expect("a push within 5 s")
            .expect("the subscription is open");
        taken.push(next);
    }
    taken
}

fn notes(range: std::ops::Range<u32>) -> Vec<Note> {
    range.map(|seq| Note { seq }).collect()
}

#[tokio::test]
async fn a_subscription_is_a_stream_of_its_pushes() {
    let (tcp, ws, _server) = start_server_with_ws(|b| b);
    for client in [
        Client::connect_tcp(tcp).await.unwrap(),
        Client::connect_ws(&format!("ws://{ws}/ws")).await.unwrap(),
    ] {
        let mut subscription = client.subscribe::<Note>();
        push(&client, 10).await;
        // Through the Stream trait...
        let streamed: Vec<Note> = StreamExt::take(&mut subscription, 5).collect().await;
        assert_eq!(streamed, notes(0..5));
        // ...and through next().
        assert_eq!(take(&mut subscription, 5).await, notes(5..10));
        assert_eq!(subscription.try_next(), None);
        assert_eq!(subscription.dropped(), 0);
        assert_eq!(client.unhandled_pushes(), 0);
    }
}

#[tokio::test]
async fn a_callback_gets_every_push_until_its_guard_is_dropped() {
    let (address, _server) = start_server(|b| b);
    let client = Client::connect_tcp(address).await.unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let guard = {
        let seen = Arc::clone(&seen);
        client.on(move |note: Note| seen.lock().unwrap().push(note.seq))
    };
    push(&client, 20).await;
    eventually(|| seen.lock().unwrap().len() == 20).await;
    assert_eq!(*seen.lock().unwrap(), (0..20).collect::<Vec<_>>());
    assert_eq!(client.unhandled_pushes(), 0);

    drop(guard);
    push(&client, 5).await;
    eventually(|| client.unhandled_pushes() == 5).await;
    assert_eq!(seen.lock().unwrap().len(), 20, "no call after the drop");
}

#[tokio::test]
async fn a_panicking_callback_does_not_stop_the_connection() {
    let (address, _server) = start_server(|b| b);
    let client = Client::connect_tcp(address).await.unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let _guard = {
        let calls = Arc::clone(&calls);
        client.on(move |note: Note| {
            calls.fetch_add(1, Ordering::SeqCst);
            assert!(note.seq != 1, "the callback panics on purpose");
        })
    };
    push(&client, 3).await;
    eventually(|| calls.load(Ordering::SeqCst) == 3).await;
    let sum: Sum = client.request_async(&Add { a: 1, b: 1 }).await.unwrap();
    assert_eq!(sum, Sum(2));
}

#[tokio::test]
async fn several_subscribers_of_one_type_each_get_every_push() {
    let (address, _server) = start_server(|b| b);
    let client = Client::connect_tcp(address).await.unwrap();
    let mut first = client.subscribe::<Note>();
    let mut second = client.subscribe::<Note>();
    let count = Arc::new(AtomicU32::new(0));
    let _guard = {
        let count = Arc::clone(&count);
        client.on(move |_: Note| {
            count.fetch_add(1, Ordering::SeqCst);
        })
    };
    push(&client, 30).await;
    assert_eq!(take(&mut first, 30).await, notes(0..30));
    assert_eq!(take(&mut second, 30).await, notes(0..30));
    eventually(|| count.load(Ordering::SeqCst) == 30).await;

    // One dropped: the other goes on alone.
    drop(first);
    push(&client, 3).await;
    assert_eq!(take(&mut second, 3).await, notes(0..3));
    assert_eq!(client.unhandled_pushes(), 0);
}

#[tokio::test]
async fn dropping_a_subscription_unsubscribes_and_later_pushes_are_unhandled() {
    let (address, _server) = start_server(|b| b);
    let client = Client::connect_tcp(address).await.unwrap();
    // Nobody subscribed: counted and dropped, the connection goes on.
    push(&client, 4).await;
    eventually(|| client.unhandled_pushes() == 4).await;

    let mut subscription = client.subscribe::<Note>();
    push(&client, 2).await;
    assert_eq!(take(&mut subscription, 2).await, notes(0..2));
    assert_eq!(client.unhandled_pushes(), 4);

    drop(subscription);
    push(&client, 3).await;
    eventually(|| client.unhandled_pushes() == 7).await;
    assert_eq!(
        client.request_async(&Add { a: 2, b: 2 }).await.unwrap(),
        Sum(4)
    );
}

#[tokio::test]
async fn a_subscriber_that_falls_behind_loses_pushes_without_blocking_the_reader() {
    let (address, _server) = start_server(|b| b);
    let client = Client::builder()
        .tcp(address.to_string())
        .push_buffer(8)
        .connect()
        .await
        .unwrap();
    let mut slow = client.subscribe::<Note>();
    let mut tiny = client.subscribe_with_buffer::<Note>(1);
    let mut fast = client.subscribe_with_buffer::<Note>(1000);
    push(&client, 500).await;
    // Requests are still answered at once: the reader is not held up.
    let started = Instant::now();
    let sum: Sum = client.request_async(&Add { a: 1, b: 2 }).await.unwrap();
    assert_eq!(sum, Sum(3));
    // A held-up reader would leave it unanswered until its 10 s timeout.
    assert!(started.elapsed() < Duration::from_secs(5));

    assert_eq!(take(&mut fast, 500).await, notes(0..500));
    // The slow one kept the first 8 and lost the rest; the tiny one, 1.
    assert_eq!(take(&mut slow, 8).await, notes(0..8));
    assert_eq!(slow.try_next(), None);
    assert_eq!(slow.dropped(), 492);
    assert_eq!(take(&mut tiny, 1).await, notes(0..1));
    assert_eq!(tiny.dropped(), 499);
    assert_eq!(fast.dropped(), 0);

    // Once it has room again, it gets what comes next.
    push(&client, 2).await;
    assert_eq!(take(&mut slow, 2).await, notes(0..2));
    assert_eq!(slow.dropped(), 492);
}

#[tokio::test]
async fn a_push_that_does_not_decode_is_counted_and_dropped() {
    let (address, _server) = start_server(|b| b);
    let client = Client::connect_tcp(address).await.unwrap();
    let mut wide = client.subscribe::<WideNote>();
    let wide_calls = Arc::new(AtomicU32::new(0));
    let wide_guard = {
        let calls = Arc::clone(&wide_calls);
        client.on(move |_: WideNote| {
            calls.fetch_add(1, Ordering::SeqCst);
        })
    };
    let mut right = client.subscribe::<Note>();
    push(&client, 6).await;
    // The subscriber of the right type still gets them all.
    assert_eq!(take(&mut right, 6).await, notes(0..6));
    eventually(|| wide.undecodable() == 6).await;
    assert_eq!(wide_guard.undecodable(), 6);
    assert_eq!(wide_calls.load(Ordering::SeqCst), 0);
    assert_eq!(wide.try_next(), None);
    // Counted once per push on the client, and not as unhandled.
    assert_eq!(client.undecodable_pushes(), 6);
    assert_eq!(client.unhandled_pushes(), 0);
    assert_eq!(right.undecodable(), 0);
    // Never fatal.
    assert_eq!(
        client.request_async(&Add { a: 5, b: 5 }).await.unwrap(),
        Sum(10)
    );
}

#[tokio::test]
async fn subscriptions_end_when_the_client_closes() {
    let (tcp, ws, _server) = start_server_with_ws(|b| b);
    for client in [
        Client::connect_tcp(tcp).await.unwrap(),
        Client::connect_ws(&format!("ws://{ws}/ws")).await.unwrap(),
    ] {
        // Subscribers get a push in the order they subscribed: once the
        // second has taken all three, the first holds them.
        let mut held = client.subscribe::<Note>();
        let mut taken = client.subscribe::<Note>();
        push(&client, 3).await;
        assert_eq!(take(&mut taken, 3).await, notes(0..3));
        client.close().await;
        // What was held is still taken, then the stream ends.
        assert_eq!(take(&mut held, 3).await, notes(0..3));
        assert_eq!(held.next().await, None);
        assert_eq!(taken.next().await, None);
        // Subscribing to a closed client gives an ended subscription.
        let mut late = client.subscribe::<Note>();
        assert_eq!(late.next().await, None);
    }

    // Dropping the last clone of the client ends them too.
    let client = Client::connect_tcp(tcp).await.unwrap();
    let mut subscription = client.subscribe::<Note>();
    drop(client);
    let ended = tokio::time::timeout(Duration::from_secs(5), subscription.next()).await;
    assert_eq!(ended.unwrap(), None);
}
