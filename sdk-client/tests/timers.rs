//! The client's timers (request timeouts, the keepalive, the delays between
//! reconnect attempts) on tokio's paused clock: the client runs over
//! in-memory pipes to peers written with `ternio_protocol`, so no real time
//! passes and the times are exact. (Moved here from the end-to-end tests,
//! which waited for them in real time over loopback sockets.)

mod peer;

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use peer::{Echo, Peer, pipe, pipes};
use ternio_client::protocol::system;
use ternio_client::{
    Bytes, Client, ClientError, CloseReason, ConnectionState, DisconnectReason, Keepalive, Packet,
    ReconnectPolicy,
};
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);

/// Waits up to `limit` (of paused time) for a state that `accept` accepts.
async fn wait_for_state(
    client: &Client,
    limit: Duration,
    accept: impl FnMut(&ConnectionState) -> bool,
) -> ConnectionState {
    let mut states = client.state_changes();
    let state = tokio::time::timeout(limit, states.wait_for(accept))
        .await
        .unwrap_or_else(|_| panic!("state still {:?} after {limit:?}", client.state()));
    state
        .expect("the client's state lives as long as the client")
        .clone()
}

fn echo(text: &'static str) -> Echo {
    Echo {
        payload: Bytes::from_static(text.as_bytes()),
    }
}

// ----------------------------------------------------------- request timeouts

/// A peer that answers an `Echo` of "slow" after 300 ms and never answers
/// any other request.
async fn slow_peer(mut peer: Peer) {
    while let Some(request) = peer.recv_request().await {
        if Echo::decode_packet(&request.body).ok() == Some(echo("slow")) {
            tokio::time::sleep(300 * MS).await;
            let _ = peer.answer(&request, &echo("slow")).await;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_request_times_out_by_default_or_per_call() {
    let (connector, mut peers, _) = pipes();
    let client = Client::builder()
        .stream(connector)
        .request_timeout(100 * MS)
        .connect()
        .await
        .unwrap();
    tokio::spawn(slow_peer(peers.recv().await.unwrap()));

    let started = Instant::now();
    let result = client.request_async(&echo("never")).await;
    assert!(
        matches!(result, Err(ClientError::Timeout(t)) if t == 100 * MS),
        "{result:?}"
    );
    assert_eq!(started.elapsed(), 100 * MS);

    let started = Instant::now();
    let result = client.request_with_timeout(&echo("never"), 30 * MS).await;
    assert!(
        matches!(result, Err(ClientError::Timeout(t)) if t == 30 * MS),
        "{result:?}"
    );
    assert_eq!(started.elapsed(), 30 * MS);

    // A longer per-call timeout lets a slow request through.
    let started = Instant::now();
    let slow: Echo = client
        .request_with_timeout(&echo("slow"), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(slow, echo("slow"));
    assert_eq!(started.elapsed(), 300 * MS);
}

#[tokio::test(start_paused = true)]
async fn a_short_timeout_fires_on_time_behind_a_long_one() {
    let (connector, mut peers, _) = pipes();
    let client = Client::connect_stream(connector).await.unwrap();
    let mut peer = peers.recv().await.unwrap();
    // One timer serves every request: it must move earlier for the short one.
    let long = tokio::spawn({
        let client = client.clone();
        async move {
            client
                .request_with_timeout(&echo("long"), Duration::from_secs(5))
                .await
        }
    });
    let long_request = peer.recv_request().await.unwrap();
    let started = Instant::now();
    let short = echo("short");
    let (short, ()) = tokio::join!(client.request_with_timeout(&short, 80 * MS), async {
        peer.recv_request().await.unwrap();
        tokio::time::sleep(1500 * MS).await;
        peer.answer(&long_request, &echo("long")).await.unwrap();
    });
    assert!(
        matches!(short, Err(ClientError::Timeout(t)) if t == 80 * MS),
        "{short:?}"
    );
    // The long request is still answered.
    assert_eq!(long.await.unwrap().unwrap(), echo("long"));
    assert_eq!(started.elapsed(), 1500 * MS);
}

/// The short request's own timing, without the long answer in the way.
#[tokio::test(start_paused = true)]
async fn a_short_timeout_fires_at_its_deadline_behind_a_long_one() {
    let (connector, mut peers, _) = pipes();
    let client = Client::connect_stream(connector).await.unwrap();
    let mut peer = peers.recv().await.unwrap();
    let long = tokio::spawn({
        let client = client.clone();
        async move {
            client
                .request_with_timeout(&echo("long"), Duration::from_secs(5))
                .await
        }
    });
    peer.recv_request().await.unwrap();
    tokio::spawn(slow_peer(peer));
    let started = Instant::now();
    let short = client.request_with_timeout(&echo("short"), 80 * MS).await;
    assert!(matches!(short, Err(ClientError::Timeout(_))), "{short:?}");
    assert_eq!(started.elapsed(), 80 * MS);
    assert!(!long.is_finished());
}

// ------------------------------------------------------------------ keepalive

fn keepalive(interval_ms: u64, timeout_ms: u64) -> Option<Keepalive> {
    Some(Keepalive::new(
        Duration::from_millis(interval_ms),
        Duration::from_millis(timeout_ms),
    ))
}

/// A peer that never sends a byte (a half-open connection, as after a crash
/// of the server's host); it reports what it receives.
#[tokio::test(start_paused = true)]
async fn a_silent_server_is_noticed_within_interval_and_timeout() {
    let (connector, mut peers, _) = pipes();
    let started = Instant::now();
    let client = Client::builder()
        .stream(connector)
        .keepalive(keepalive(300, 500))
        .connect()
        .await
        .unwrap();
    let mut peer = peers.recv().await.unwrap();
    let (frames, mut received) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(frame) = peer.recv().await {
            let _ = frames.send((frame.header.opcode, frame.header.request_id));
        }
    });
    assert_eq!(client.state(), ConnectionState::Connected);

    let state = wait_for_state(&client, Duration::from_secs(5), ConnectionState::is_closed).await;
    match state {
        ConnectionState::Closed(CloseReason::KeepaliveTimeout { interval, timeout }) => {
            assert_eq!(interval, 300 * MS);
            assert_eq!(timeout, 500 * MS);
        }
        other => panic!("expected a keepalive timeout, got {other:?}"),
    }
    // Silence from the start: the PING at 300 ms, the loss 500 ms later.
    assert_eq!(started.elapsed(), 800 * MS);
    // The client sent a PING as a request (a non-zero id: it wants a PONG).
    let (opcode, id) = received.recv().await.expect("the PING arrived");
    assert_eq!(opcode, system::PING);
    assert_ne!(id, 0);
}

/// A peer that answers every PING keeps the link up through many rounds.
#[tokio::test(start_paused = true)]
async fn an_idle_healthy_connection_stays_up() {
    let (connector, mut peers, _) = pipes();
    let client = Client::builder()
        .stream(connector)
        .keepalive(keepalive(50, 2000))
        .connect()
        .await
        .unwrap();
    tokio::spawn(peers.recv().await.unwrap().echo_until_closed());
    let mut states = client.state_changes();
    states.borrow_and_update();
    // A minute of pings, every 50 to 75 ms.
    let changed = tokio::time::timeout(Duration::from_secs(60), states.changed()).await;
    assert!(changed.is_err(), "the state changed: {:?}", client.state());
    let reply: Echo = client.request_async(&echo("still here")).await.unwrap();
    assert_eq!(reply, echo("still here"));
}

// -------------------------------------------------------------------- backoff

/// Peers that behave like a full server: the first connection works until
/// `refuse` is notified and is then told `reason`; every later one is told
/// `reason` after `after`. Records when each connection was opened.
struct Refusing {
    refuse: Arc<Notify>,
    accepted: Arc<Mutex<Vec<Instant>>>,
}

impl Refusing {
    fn start(
        mut peers: mpsc::UnboundedReceiver<Peer>,
        reason: DisconnectReason,
        after: Duration,
    ) -> Self {
        let refuse = Arc::new(Notify::new());
        let accepted = Arc::new(Mutex::new(Vec::new()));
        let (told, times) = (Arc::clone(&refuse), Arc::clone(&accepted));
        tokio::spawn(async move {
            while let Some(peer) = peers.recv().await {
                let first = {
                    let mut times = times.lock().unwrap();
                    times.push(Instant::now());
                    times.len() == 1
                };
                let told = Arc::clone(&told);
                tokio::spawn(async move {
                    if first {
                        told.notified().await;
                    } else {
                        tokio::time::sleep(after).await;
                    }
                    peer.disconnect(reason).await;
                });
            }
        });
        Self { refuse, accepted }
    }

    fn accepted(&self) -> Vec<Instant> {
        self.accepted.lock().unwrap().clone()
    }
}

/// Each connection that was installed must not start the attempts again
/// at 1: that was about ten connections a second, forever.
#[tokio::test(start_paused = true)]
async fn a_server_that_refuses_every_connection_is_not_hammered() {
    let (connector, peers, _) = pipes();
    let mut policy = ReconnectPolicy::default();
    policy.max_attempts = None;
    let client = Client::builder()
        .stream(connector)
        .reconnect(policy)
        .connect()
        .await
        .unwrap();
    let server = Refusing::start(peers, DisconnectReason::TooManyConnections, Duration::ZERO);
    tokio::task::yield_now().await;
    let started = Instant::now();
    server.refuse.notify_one();
    let window = Duration::from_secs(60);
    tokio::time::sleep(window).await;
    let times: Vec<_> = server
        .accepted()
        .into_iter()
        .filter(|time| *time >= started && *time <= started + window)
        .collect();
    // After TOO_MANY_CONNECTIONS each attempt waits at least busy_delay
    // (1 s), at most 1 s plus the largest base delay (5 s).
    assert!(
        (10..=60).contains(&times.len()),
        "{} connections in {window:?}",
        times.len()
    );
    for pair in times.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= Duration::from_secs(1) && gap <= Duration::from_secs(6),
            "{gap:?} between attempts"
        );
    }
    assert!(matches!(
        client.state(),
        ConnectionState::Reconnecting { attempt } if attempt >= 10
    ));
}

/// Without the floor and the jitter, the delays between connections that
/// are refused at once grow as the policy says, and the attempts run out:
/// installed connections that did not last do not start the count again.
#[tokio::test(start_paused = true)]
async fn delays_grow_across_connections_that_do_not_last() {
    let (connector, peers, _) = pipes();
    let mut policy = ReconnectPolicy::default();
    policy.initial_delay = 50 * MS;
    policy.max_delay = Duration::from_secs(2);
    policy.multiplier = 2.0;
    policy.jitter = 0.0;
    policy.max_attempts = Some(5);
    policy.healthy_after = Duration::from_secs(10);
    policy.busy_delay = Duration::ZERO;
    let client = Client::builder()
        .stream(connector)
        .reconnect(policy.clone())
        .connect()
        .await
        .unwrap();
    let server = Refusing::start(peers, DisconnectReason::TooManyConnections, Duration::ZERO);
    tokio::task::yield_now().await;
    server.refuse.notify_one();
    let state = wait_for_state(&client, Duration::from_secs(10), ConnectionState::is_closed).await;
    match state {
        ConnectionState::Closed(CloseReason::ReconnectFailed { attempts, .. }) => {
            assert_eq!(attempts, 5)
        }
        other => panic!("expected the attempts to run out, got {other:?}"),
    }
    let times = server.accepted();
    assert_eq!(times.len(), 6, "the first connection and 5 attempts");
    // Attempt n waited exactly 50 ms * 2^(n-1) before connecting.
    for (n, pair) in (2..).zip(times[1..].windows(2)) {
        let (delay, _) = policy.delay_range(n, false);
        assert_eq!(pair[1] - pair[0], delay, "attempt {n}");
    }
}

/// Connections that stay up for `healthy_after` start the count again:
/// the client keeps coming back to a server that works for a while each
/// time. With a `healthy_after` they do not reach, the same server makes
/// the client give up after `max_attempts`.
#[tokio::test(start_paused = true)]
async fn only_a_connection_that_stayed_up_starts_the_count_again() {
    for (healthy_after, gives_up) in [(100 * MS, false), (Duration::from_secs(30), true)] {
        let (connector, peers, _) = pipes();
        let mut policy = ReconnectPolicy::default();
        policy.initial_delay = 20 * MS;
        policy.multiplier = 1.0;
        policy.jitter = 0.0;
        policy.max_attempts = Some(2);
        policy.healthy_after = healthy_after;
        let client = Client::builder()
            .stream(connector)
            .reconnect(policy)
            .connect()
            .await
            .unwrap();
        // Every connection is told IDLE_TIMEOUT after 400 ms.
        let server = Refusing::start(peers, DisconnectReason::IdleTimeout, 400 * MS);
        tokio::task::yield_now().await;
        server.refuse.notify_one();
        if gives_up {
            let state =
                wait_for_state(&client, Duration::from_secs(10), ConnectionState::is_closed).await;
            assert!(
                matches!(
                    state,
                    ConnectionState::Closed(CloseReason::ReconnectFailed { attempts: 2, .. })
                ),
                "{state:?}"
            );
            assert_eq!(server.accepted().len(), 3);
        } else {
            // Twenty connections in a row, each lost after 400 ms.
            let deadline = Instant::now() + Duration::from_secs(60);
            while server.accepted().len() < 20 {
                assert!(Instant::now() < deadline, "{:?}", client.state());
                assert!(!client.state().is_closed(), "{:?}", client.state());
                tokio::time::sleep(20 * MS).await;
            }
        }
    }
}

/// The delays of a run of failed attempts add up as the policy says, and
/// then the client gives up.
#[tokio::test(start_paused = true)]
async fn growing_delays_are_visible_in_the_attempt_times() {
    // The first connection is a pipe; every later one is refused.
    let (first, peer) = pipe();
    let first = Arc::new(Mutex::new(Some(first)));
    let calls = Arc::new(AtomicUsize::new(0));
    let connector = {
        let calls = Arc::clone(&calls);
        move || {
            calls.fetch_add(1, Ordering::SeqCst);
            let stream = first.lock().unwrap().take();
            async move { stream.ok_or_else(|| io::Error::from(io::ErrorKind::ConnectionRefused)) }
        }
    };
    let mut policy = ReconnectPolicy::default();
    policy.initial_delay = 50 * MS;
    policy.max_delay = 400 * MS;
    policy.multiplier = 2.0;
    policy.jitter = 0.0;
    policy.max_attempts = Some(5);
    // Not after the SHUTDOWN here: the delays alone.
    policy.busy_delay = Duration::ZERO;
    let client = Client::builder()
        .stream(connector)
        .reconnect(policy)
        .connect()
        .await
        .unwrap();
    let mut states = client.state_changes();
    let started = Instant::now();
    peer.disconnect(DisconnectReason::Shutdown).await;
    // 50 + 100 + 200 + 400 + 400 ms of delays, then it gives up.
    states.wait_for(ConnectionState::is_closed).await.unwrap();
    assert_eq!(started.elapsed(), 1150 * MS);
    assert_eq!(calls.load(Ordering::SeqCst), 6);
}
