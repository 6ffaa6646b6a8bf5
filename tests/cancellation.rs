//! Requests the client gives up, and requests with a deadline
//! (docs/PROTOCOL.md section 4.1): the server drops the handler's future
//! when the client sends `CANCEL` (its timeout passed, or its future was
//! dropped), and bounds a request by the `DEADLINE` announced for it. Each
//! test is what a client that stops waiting does to a server today: the
//! handler ran on, holding whatever it held, until it finished by itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use ternio::protocol::ErrorCode;
use ternio::protocol::frame::{Flags, Header};
use ternio::protocol::system::{self, Cancel, Deadline, ErrorBody};
use ternio::{Packet, Server, State, packet_controller};
use ternio_client::{Client, ClientConfig, ClientError};
use ternio_tests::{Echo, RawConnection};
use tokio::sync::Notify;

/// 0x0700: an asynchronous handler that waits `ms` milliseconds.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0700, response = ())]
struct Hang {
    ms: u32,
}

/// 0x0701: a synchronous handler that counts its runs.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0701, response = ())]
struct Tick;

/// What the handlers did.
#[derive(Default)]
struct Seen {
    started: AtomicU32,
    finished: AtomicU32,
    /// Handler futures dropped before they finished.
    dropped: AtomicU32,
    dropped_notify: Notify,
    ticks: AtomicU32,
}

/// Counts a handler future dropped before it finished.
struct DropSignal {
    seen: Arc<Seen>,
    finished: bool,
}

impl Drop for DropSignal {
    fn drop(&mut self) {
        if !self.finished {
            self.seen.dropped.fetch_add(1, Ordering::SeqCst);
            self.seen.dropped_notify.notify_waiters();
        }
    }
}

#[derive(Default)]
struct Handlers;

#[packet_controller(explicit)]
impl Handlers {
    async fn hang(request: Hang, seen: State<Arc<Seen>>) {
        seen.started.fetch_add(1, Ordering::SeqCst);
        let mut signal = DropSignal {
            seen: Arc::clone(&seen),
            finished: false,
        };
        tokio::time::sleep(Duration::from_millis(u64::from(request.ms))).await;
        signal.finished = true;
        seen.finished.fetch_add(1, Ordering::SeqCst);
    }

    fn tick(_request: Tick, seen: State<Arc<Seen>>) {
        seen.ticks.fetch_add(1, Ordering::SeqCst);
    }

    fn echo(request: Echo) -> Echo {
        request
    }
}

fn start() -> (std::net::SocketAddr, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let server = Server::builder()
        .discover_controllers(false)
        .controller(Handlers)
        .state(Arc::clone(&seen))
        .map_tcp("127.0.0.1:0")
        .build()
        .expect("the server builds");
    let address = server.tcp_addrs()[0];
    tokio::spawn(server.run());
    (address, seen)
}

/// Waits until `count` handler futures were dropped; fails after 5 s.
async fn dropped(seen: &Seen, count: u32) {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let notified = seen.dropped_notify.notified();
            if seen.dropped.load(Ordering::SeqCst) >= count {
                return;
            }
            notified.await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "{count} handler future(s) dropped within 5 s; dropped {}, finished {}",
            seen.dropped.load(Ordering::SeqCst),
            seen.finished.load(Ordering::SeqCst)
        )
    });
}

/// Waits until the server started `count` handlers.
async fn started(seen: &Seen, count: u32) {
    tokio::time::timeout(Duration::from_secs(5), async {
        while seen.started.load(Ordering::SeqCst) < count {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the handler started");
}

#[tokio::test]
async fn a_request_the_client_times_out_is_cancelled_on_the_server() {
    let (address, seen) = start();
    let client = Client::connect_tcp(address).await.unwrap();
    let result = client
        .request_with_timeout(&Hang { ms: 60_000 }, Duration::from_millis(100))
        .await;
    assert!(matches!(result, Err(ClientError::Timeout(_))), "{result:?}");
    dropped(&seen, 1).await;
    assert_eq!(seen.finished.load(Ordering::SeqCst), 0);
    // The connection carries on.
    ternio_tests::assert_echoed(&client, "after".into()).await;
}

#[tokio::test]
async fn a_dropped_request_future_is_cancelled_on_the_server() {
    let (address, seen) = start();
    let client = Client::connect_tcp(address).await.unwrap();
    let request = client.request_async(&Hang { ms: 60_000 });
    tokio::select! {
        result = request => panic!("the request ended: {result:?}"),
        () = started(&seen, 1) => {}
    }
    // The request future is dropped with the select: the client gives up.
    dropped(&seen, 1).await;
    assert_eq!(seen.finished.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn an_answered_request_sends_no_cancel_and_others_are_untouched() {
    let (address, seen) = start();
    let client = Client::connect_tcp(address).await.unwrap();
    // One request is given up while another, on the same connection, runs
    // on: only the first is cancelled.
    let patient = {
        let client = client.clone();
        tokio::spawn(async move { client.request_async(&Hang { ms: 300 }).await })
    };
    started(&seen, 1).await;
    let given_up = client
        .request_with_timeout(&Hang { ms: 60_000 }, Duration::from_millis(50))
        .await;
    assert!(matches!(given_up, Err(ClientError::Timeout(_))));
    dropped(&seen, 1).await;
    patient
        .await
        .unwrap()
        .expect("the other request is answered");
    assert_eq!(seen.finished.load(Ordering::SeqCst), 1);
    assert_eq!(seen.dropped.load(Ordering::SeqCst), 1);
}

/// With deadlines on, the server and the client both time the request
/// out: whichever is first, the client sees a timeout and the handler is
/// dropped. (Its own `CANCEL` races the server's deadline; the test with
/// the raw connection below shows the deadline alone.)
#[tokio::test]
async fn a_client_sending_deadlines_has_the_server_stop_with_it() {
    let (address, seen) = start();
    let client = Client::builder()
        .tcp(address.to_string())
        .send_deadlines(true)
        .request_timeout(Duration::from_millis(200))
        .connect()
        .await
        .unwrap();
    let result = client.request_async(&Hang { ms: 60_000 }).await;
    assert!(
        matches!(
            result,
            Err(ClientError::Timeout(_))
                | Err(ClientError::Remote {
                    code: ErrorCode::Timeout,
                    ..
                })
        ),
        "{result:?}"
    );
    dropped(&seen, 1).await;
}

#[tokio::test]
async fn the_server_answers_timeout_at_the_announced_deadline() {
    let (address, seen) = start();
    let mut raw = RawConnection::connect(address).await;
    let deadline = Deadline {
        request_id: 7,
        budget_ms: 100,
    };
    raw.send(Header::new(system::DEADLINE, Flags::NONE, 0), &deadline)
        .await;
    let started_at = tokio::time::Instant::now();
    raw.request(&Hang { ms: 60_000 }, 7).await;
    let answer = raw.recv().await.expect("an answer");
    let waited = started_at.elapsed();
    assert_eq!(answer.header.request_id, 7);
    assert!(answer.header.flags.is_error());
    let error = ErrorBody::parse(&answer.body).unwrap();
    assert_eq!(error.code, ErrorCode::Timeout, "{error}");
    assert!(waited >= Duration::from_millis(90), "{waited:?}");
    assert!(waited < Duration::from_secs(3), "{waited:?}");
    dropped(&seen, 1).await;
}

#[tokio::test]
async fn a_spent_deadline_answers_timeout_without_running_the_handler() {
    let (address, seen) = start();
    let mut raw = RawConnection::connect(address).await;
    let spent = Deadline {
        request_id: 3,
        budget_ms: 0,
    };
    raw.send(Header::new(system::DEADLINE, Flags::NONE, 0), &spent)
        .await;
    raw.request(&Tick, 3).await;
    let answer = raw.recv().await.expect("an answer");
    assert_eq!(answer.header.request_id, 3);
    assert_eq!(
        ErrorBody::parse(&answer.body).unwrap().code,
        ErrorCode::Timeout
    );
    // The deadline was used once: the same id again runs.
    raw.request(&Tick, 3).await;
    let answer = raw.recv().await.expect("an answer");
    assert_eq!(answer.header.flags, Flags::RESPONSE);
    assert_eq!(seen.ticks.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn cancel_and_deadline_frames_out_of_shape_are_malformed_and_harmless() {
    let (address, seen) = start();
    let mut raw = RawConnection::connect(address).await;
    // With a request id: they are one-way.
    raw.send(
        Header::new(system::CANCEL, Flags::NONE, 5),
        &Cancel { request_id: 1 },
    )
    .await;
    let answer = raw.recv().await.expect("an answer");
    assert_eq!(answer.header.request_id, 5);
    assert_eq!(
        ErrorBody::parse(&answer.body).unwrap().code,
        ErrorCode::Malformed
    );
    // A short body.
    raw.send_body(Header::new(system::DEADLINE, Flags::NONE, 0), &[1, 0, 0])
        .await;
    let answer = raw.recv().await.expect("an answer");
    assert_eq!(answer.header.request_id, 0);
    assert_eq!(
        ErrorBody::parse(&answer.body).unwrap().code,
        ErrorCode::Malformed
    );
    // A CANCEL of nothing, and a flood of deadlines for requests that never
    // come: no answer, and the connection serves on.
    raw.send(
        Header::new(system::CANCEL, Flags::NONE, 0),
        &Cancel { request_id: 99 },
    )
    .await;
    for id in 1..=10_000 {
        let deadline = Deadline {
            request_id: id,
            budget_ms: 1,
        };
        raw.send(Header::new(system::DEADLINE, Flags::NONE, 0), &deadline)
            .await;
    }
    raw.request(
        &Echo {
            payload: "still here".into(),
        },
        20_000,
    )
    .await;
    let answer = raw.recv().await.expect("the echo");
    assert_eq!(answer.header.request_id, 20_000);
    assert_eq!(answer.header.flags, Flags::RESPONSE);
    assert_eq!(seen.started.load(Ordering::SeqCst), 0);
}

/// What the client writes, read by a bare listener standing in for a
/// server that never answers: with deadlines on, a `DEADLINE` for the
/// request just before it, then a `CANCEL` when its timeout passes; with
/// them off, the request and the `CANCEL` only.
#[tokio::test]
async fn the_client_announces_deadlines_and_cancels_on_the_wire() {
    for send_deadlines in [true, false] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let mut config = ClientConfig::default();
        config.send_deadlines = send_deadlines;
        config.request_timeout = Duration::from_millis(300);
        let (client, accepted) =
            tokio::join!(Client::connect_tcp_with(address, config), listener.accept());
        let client = client.unwrap();
        let mut server = RawConnection::over(accepted.unwrap().0);
        let result = client.request_async(&Tick).await;
        assert!(matches!(result, Err(ClientError::Timeout(_))), "{result:?}");

        let mut frame = server.recv().await.expect("a frame");
        if send_deadlines {
            assert_eq!(frame.header, Header::new(system::DEADLINE, Flags::NONE, 0));
            let deadline =
                <Deadline as ternio::protocol::Decode>::decode_body(&frame.body).unwrap();
            assert!(
                (250..=300).contains(&deadline.budget_ms),
                "the time left of 300 ms: {deadline:?}"
            );
            frame = server.recv().await.expect("the request");
            assert_eq!(frame.header.request_id, deadline.request_id);
        }
        assert_eq!(frame.header.opcode, Tick::OPCODE);
        let id = frame.header.request_id;
        let cancel = server.recv().await.expect("a CANCEL");
        assert_eq!(cancel.header, Header::new(system::CANCEL, Flags::NONE, 0));
        assert_eq!(
            <Cancel as ternio::protocol::Decode>::decode_body(&cancel.body).unwrap(),
            Cancel { request_id: id }
        );
    }
}
