//! Around-middleware (`ServerBuilder::around`), over real TCP: the order of
//! the layers, a layer that awaits before letting a request through, one
//! that answers on its own, one that sees the handler's error, one that
//! panics; time limits that cover the layers; a body that does not decode.
//! The attacker is a client that has not logged in: an async check in a
//! layer refuses it on synchronous and asynchronous handlers alike.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ternio::around::Reply;
use ternio::middleware::{Middleware, Outcome, RequestInfo};
use ternio::protocol::frame::{Flags, Header};
use ternio::protocol::system::ErrorBody;
use ternio::protocol::{AppCode, ErrorCode};
use ternio::{Context, HandlerError, Packet, Rejection, Server, ServerBuilder, packet_controller};
use ternio_client::{Client, ClientError};
use ternio_tests::RawConnection;

const NOT_EVEN: AppCode = AppCode::new(150);

/// 0x0900: signs the connection in.
#[derive(Debug, Packet)]
#[packet(opcode = 0x0900, response = ())]
struct Login;

/// 0x0901: a synchronous handler; an even `n` is refused by the handler.
#[derive(Debug, Packet)]
#[packet(opcode = 0x0901, response = Number)]
struct Half {
    n: u32,
}

#[derive(Debug, Packet)]
#[packet(opcode = 0x0902)]
struct Number(u32);

/// 0x0903: an asynchronous handler that waits `ms`, with a 200 ms limit.
#[derive(Debug, Packet)]
#[packet(opcode = 0x0903, response = Number)]
struct Slow {
    ms: u32,
}

/// The test's log, and how many times each handler ran.
#[derive(Default)]
struct Log {
    lines: Mutex<Vec<String>>,
    runs: AtomicU32,
}

impl Log {
    fn push(&self, line: impl Into<String>) {
        self.lines.lock().unwrap().push(line.into());
    }

    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.lines.lock().unwrap())
    }
}

#[derive(Default)]
struct Numbers;

#[packet_controller(explicit)]
impl Numbers {
    fn login(_request: Login, ctx: &Context) {
        ctx.store().insert(SignedIn);
    }

    fn half(request: Half, log: ternio::State<Arc<Log>>) -> Result<Number, HandlerError> {
        log.runs.fetch_add(1, Ordering::SeqCst);
        log.push("half");
        if request.n % 2 == 1 {
            Err(HandlerError::new(NOT_EVEN, "odd"))
        } else {
            Ok(Number(request.n / 2))
        }
    }

    #[handler(timeout_ms = 200)]
    async fn slow(request: Slow, log: ternio::State<Arc<Log>>) -> Number {
        log.runs.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(u64::from(request.ms))).await;
        Number(request.ms)
    }
}

/// In a connection's store once it logged in.
#[derive(Debug, Clone)]
struct SignedIn;

/// Records every outcome middleware sees.
#[derive(Clone, Default)]
struct Outcomes(Arc<Mutex<Vec<Outcome>>>);

impl Middleware for Outcomes {
    fn after(&self, _request: &RequestInfo<'_>, outcome: Outcome, _elapsed: Duration) {
        self.0.lock().unwrap().push(outcome);
    }
}

fn builder(log: &Arc<Log>) -> ServerBuilder {
    Server::builder()
        .discover_controllers(false)
        .controller(Numbers)
        .state(Arc::clone(log))
        .map_tcp("127.0.0.1:0")
}

async fn start(builder: ServerBuilder) -> (Client, std::net::SocketAddr) {
    let server = builder.build().expect("the server builds");
    let address = server.tcp_addrs()[0];
    tokio::spawn(server.run());
    (Client::connect_tcp(address).await.unwrap(), address)
}

fn code<T: std::fmt::Debug>(result: Result<T, ClientError>) -> ErrorCode {
    match result {
        Err(ClientError::Remote { code, .. }) => code,
        other => panic!("expected an error answer, got {other:?}"),
    }
}

#[tokio::test]
async fn layers_run_outermost_first_and_see_the_reply_on_the_way_out() {
    let log = Arc::new(Log::default());
    let (outer, inner) = (Arc::clone(&log), Arc::clone(&log));
    let (client, _) = start(
        builder(&log)
            .around(move |request, next| {
                let log = Arc::clone(&outer);
                async move {
                    log.push(format!("outer in {}", request.handler()));
                    let reply = next.run(request).await;
                    log.push(format!("outer out {:?}", reply.error_code()));
                    reply
                }
            })
            .around(move |request, next| {
                let log = Arc::clone(&inner);
                async move {
                    log.push("inner in");
                    // The layer awaits before the handler runs.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    let reply = next.run(request).await;
                    log.push(format!("inner out {}", reply.is_error()));
                    reply
                }
            }),
    )
    .await;
    assert_eq!(client.request_async(&Half { n: 8 }).await.unwrap().0, 4);
    assert_eq!(
        log.take(),
        [
            "outer in Numbers::half",
            "inner in",
            "half",
            "inner out false",
            "outer out None"
        ]
    );
    assert_eq!(
        code(client.request_async(&Half { n: 7 }).await),
        ErrorCode::Application(NOT_EVEN)
    );
    assert_eq!(
        log.take(),
        [
            "outer in Numbers::half",
            "inner in",
            "half",
            "inner out true",
            "outer out Some(Application(150))"
        ]
    );
}

#[tokio::test]
async fn an_async_check_in_a_layer_refuses_sync_and_async_handlers_alike() {
    let log = Arc::new(Log::default());
    let outcomes = Outcomes::default();
    let (client, _) = start(builder(&log).middleware(outcomes.clone()).around(
        |request, next| async move {
            // A token service would be asked here.
            tokio::task::yield_now().await;
            let signed_in = request.context().store().get::<SignedIn>().is_some();
            if signed_in || request.handler() == "Numbers::login" {
                next.run(request).await
            } else {
                Reply::from(Rejection::new(ErrorCode::Unauthorized, "log in first"))
            }
        },
    ))
    .await;
    let refused = client.request_async(&Half { n: 2 }).await;
    assert_eq!(code(refused), ErrorCode::Unauthorized);
    let refused = client.request_async(&Slow { ms: 1 }).await;
    assert_eq!(code(refused), ErrorCode::Unauthorized);
    assert_eq!(log.runs.load(Ordering::SeqCst), 0, "a handler ran");
    assert_eq!(
        *outcomes.0.lock().unwrap(),
        [
            Outcome::Rejected(ErrorCode::Unauthorized),
            Outcome::Rejected(ErrorCode::Unauthorized)
        ]
    );

    client.request_async(&Login).await.unwrap();
    assert_eq!(client.request_async(&Half { n: 2 }).await.unwrap().0, 1);
    assert_eq!(client.request_async(&Slow { ms: 1 }).await.unwrap().0, 1);
    assert_eq!(log.runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_layer_may_answer_without_the_handler() {
    let log = Arc::new(Log::default());
    let (client, _) = start(builder(&log).around(|request, next| async move {
        // A cache of one answer.
        if request.handler() == "Numbers::half" {
            Reply::packet(&Number(42))
        } else {
            next.run(request).await
        }
    }))
    .await;
    assert_eq!(client.request_async(&Half { n: 8 }).await.unwrap().0, 42);
    assert_eq!(client.request_async(&Slow { ms: 1 }).await.unwrap().0, 1);
    assert_eq!(log.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_panicking_layer_answers_internal_and_the_connection_carries_on() {
    let log = Arc::new(Log::default());
    let (client, _) = start(builder(&log).around(|request, next| async move {
        if request.header().opcode == Slow::OPCODE {
            panic!("a layer's bug");
        }
        next.run(request).await
    }))
    .await;
    assert_eq!(
        code(client.request_async(&Slow { ms: 1 }).await),
        ErrorCode::Internal
    );
    assert_eq!(client.request_async(&Half { n: 4 }).await.unwrap().0, 2);
}

#[tokio::test]
async fn the_time_limit_covers_the_layers() {
    let log = Arc::new(Log::default());
    let dropped = Arc::new(AtomicU32::new(0));
    let seen = Arc::clone(&dropped);
    let (client, _) = start(builder(&log).around(move |request, next| {
        let dropped = Arc::clone(&seen);
        async move {
            // Counts this layer's future dropped before it finished.
            struct Guard(Arc<AtomicU32>);
            impl Drop for Guard {
                fn drop(&mut self) {
                    self.0.fetch_add(1, Ordering::SeqCst);
                }
            }
            let guard = Guard(dropped);
            tokio::time::sleep(Duration::from_secs(30)).await;
            std::mem::forget(guard);
            next.run(request).await
        }
    }))
    .await;
    let started = std::time::Instant::now();
    assert_eq!(
        code(client.request_async(&Slow { ms: 1 }).await),
        ErrorCode::Timeout
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "the layer was not dropped"
    );
    assert_eq!(log.runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_body_that_does_not_decode_is_malformed_behind_the_layers() {
    let log = Arc::new(Log::default());
    let (_, address) = start(builder(&log).around(|request, next| next.run(request))).await;
    let mut raw = RawConnection::connect(address).await;
    // `Half` is a u32: two bytes are too few.
    raw.send_body(Header::new(Half::OPCODE, Flags::NONE, 5), &[1, 2])
        .await;
    let answer = raw.recv().await.expect("an answer");
    assert_eq!(answer.header.request_id, 5);
    let error = ErrorBody::parse(&answer.body).unwrap();
    assert_eq!(error.code, ErrorCode::Malformed, "{}", error.message);
    assert_eq!(log.runs.load(Ordering::SeqCst), 0);
}
