//! Handler policies, middleware, the connection store and the connect and
//! disconnect hooks, over real sockets; the time limit and the concurrency
//! limit over in-memory pipes on paused time, to the millisecond.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use std::time::{Duration, Instant};

use ternio::middleware::{AuditLog, Middleware, Outcome, Rejection, RequestInfo};
use ternio::protocol::ErrorCode;
use ternio::{
    AppCode, BuildError, CloseCause, Context, DisconnectReason, HandlerError, Packet, Server,
    ServerBuilder, ServerHandle, Stored, packet_controller,
};
use ternio_client::{Client, ClientConfig, ClientError};
use ternio_tests::{PATIENCE, RawConnection, client_in_memory, eventually};

#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0200, response = ())]
struct Login {
    level: u32,
    nick: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0201, response = Done)]
struct AdminOnly;

#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0202, response = Done)]
struct SlowJob {
    ms: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0203, response = Done)]
struct Limited;

#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0204, response = Done)]
struct Scarce {
    ms: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0205, response = Nick)]
struct WhoAmI;

#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0206)]
struct Nick(Option<String>);

#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0207, response = Done)]
struct Blocked;

#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0208)]
struct Done;

#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0209, response = Done)]
struct Fails;

#[derive(Debug, Clone)]
struct Nickname(String);

/// Counts the slow jobs whose future was dropped before it finished.
static ABANDONED: AtomicUsize = AtomicUsize::new(0);

/// Counts a drop unless the job finished.
struct CountOnDrop(bool);

impl Drop for CountOnDrop {
    fn drop(&mut self) {
        if !self.0 {
            ABANDONED.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[derive(Default)]
struct PolicyController;

#[packet_controller(explicit)]
impl PolicyController {
    fn login(request: Login, ctx: &Context) {
        ctx.set_permission(request.level);
        ctx.store().insert(Nickname(request.nick));
    }

    #[handler(permission = 2)]
    fn admin_only(_request: AdminOnly) -> Done {
        Done
    }

    // Wide enough that a 1 ms job never hits it on a loaded machine.
    #[handler(timeout_ms = 500)]
    async fn slow_job(request: SlowJob) -> Done {
        let mut guard = CountOnDrop(false);
        tokio::time::sleep(Duration::from_millis(u64::from(request.ms))).await;
        guard.0 = true;
        Done
    }

    // One a second with bursts of 5: a refill never lands inside the test's
    // six quick requests, however slow the machine.
    #[handler(rate_limit(1, 5))]
    fn limited(_request: Limited) -> Done {
        Done
    }

    #[handler(concurrency = 2)]
    async fn scarce(request: Scarce) -> Done {
        tokio::time::sleep(Duration::from_millis(u64::from(request.ms))).await;
        Done
    }

    fn who_am_i(_request: WhoAmI, nick: Stored<Nickname>) -> Nick {
        Nick(nick.0.map(|nick| nick.0))
    }

    fn blocked(_request: Blocked) -> Done {
        Done
    }

    fn fails(_request: Fails) -> Result<Done, HandlerError> {
        Err(HandlerError::new(AppCode::new(150), "no"))
    }
}

fn start(
    configure: impl FnOnce(ServerBuilder) -> ServerBuilder,
) -> (std::net::SocketAddr, ServerHandle) {
    let builder = Server::builder()
        .discover_controllers(false)
        .controller(PolicyController)
        .map_tcp("127.0.0.1:0");
    let server = configure(builder).build().expect("builds");
    let address = server.tcp_addrs()[0];
    let handle = server.handle();
    tokio::spawn(server.run());
    (address, handle)
}

/// The policy test server with no listener: clients come through
/// [`client_in_memory`], and the tests may run on paused time.
fn start_in_memory() -> ServerHandle {
    let server = Server::builder()
        .discover_controllers(false)
        .controller(PolicyController)
        .build()
        .expect("builds");
    let handle = server.handle();
    tokio::spawn(server.run());
    handle
}

fn code<T: std::fmt::Debug>(result: Result<T, ClientError>) -> ErrorCode {
    result
        .expect_err("an error")
        .code()
        .expect("a remote error code")
}

#[tokio::test]
async fn a_permission_level_is_checked_and_raised_by_a_login() {
    let (address, _server) = start(|b| b);
    let client = Client::connect_tcp(address).await.unwrap();
    assert_eq!(
        code(client.request_async(&AdminOnly).await),
        ErrorCode::Unauthorized
    );
    let () = client
        .request_async(&Login {
            level: 1,
            nick: "ann".into(),
        })
        .await
        .unwrap();
    assert_eq!(
        code(client.request_async(&AdminOnly).await),
        ErrorCode::Unauthorized
    );
    let () = client
        .request_async(&Login {
            level: 2,
            nick: "ann".into(),
        })
        .await
        .unwrap();
    let Done = client.request_async(&AdminOnly).await.unwrap();
    // Another connection has its own level.
    let other = Client::connect_tcp(address).await.unwrap();
    assert_eq!(
        code(other.request_async(&AdminOnly).await),
        ErrorCode::Unauthorized
    );
    // Lowering it works the same way.
    let () = client
        .request_async(&Login {
            level: 0,
            nick: "ann".into(),
        })
        .await
        .unwrap();
    assert_eq!(
        code(client.request_async(&AdminOnly).await),
        ErrorCode::Unauthorized
    );
}

#[tokio::test(start_paused = true)]
async fn a_time_limit_answers_error_5_and_drops_the_handler() {
    let server = start_in_memory();
    let client = client_in_memory(&server, ClientConfig::default()).await;
    let Done = client.request_async(&SlowJob { ms: 1 }).await.unwrap();
    assert_eq!(ABANDONED.load(Ordering::SeqCst), 0);
    let started = tokio::time::Instant::now();
    assert_eq!(
        code(client.request_async(&SlowJob { ms: 5_000 }).await),
        ErrorCode::Timeout
    );
    // The limit is 500 ms (`timeout_ms = 500`), to the timer's millisecond.
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(500) && waited <= Duration::from_millis(505),
        "{waited:?}"
    );
    // The handler's future was dropped when its limit passed, not left running.
    assert_eq!(ABANDONED.load(Ordering::SeqCst), 1);
    let Done = client.request_async(&SlowJob { ms: 1 }).await.unwrap();
    assert_eq!(ABANDONED.load(Ordering::SeqCst), 1);
}

#[test]
fn a_time_limit_on_a_synchronous_handler_fails_the_build() {
    struct SyncTimeout;
    #[packet_controller(explicit)]
    impl SyncTimeout {
        #[handler(timeout_ms = 10)]
        fn blocked(_request: Blocked) -> Done {
            Done
        }
    }
    let error = Server::builder()
        .discover_controllers(false)
        .controller(SyncTimeout)
        .map_tcp("127.0.0.1:0")
        .build()
        .expect_err("refused");
    assert!(
        matches!(&error, BuildError::Handler { handler, .. } if *handler == "SyncTimeout::blocked"),
        "{error}"
    );
    assert!(error.to_string().contains("async"), "{error}");
}

#[tokio::test]
async fn a_rate_limit_applies_per_connection_and_opcode() {
    let (address, _server) = start(|b| b);
    let client = Client::connect_tcp(address).await.unwrap();
    let burst = Instant::now();
    for _ in 0..5 {
        let Done = client.request_async(&Limited).await.unwrap();
    }
    assert_eq!(
        code(client.request_async(&Limited).await),
        ErrorCode::RateLimited
    );
    // Other opcodes, and other connections, are not limited by it.
    let Nick(_) = client.request_async(&WhoAmI).await.unwrap();
    let other = Client::connect_tcp(address).await.unwrap();
    let Done = other.request_async(&Limited).await.unwrap();
    // The bucket refills (one a second): a refused request takes no token,
    // so asking until it is served ends a second after the burst.
    loop {
        match client.request_async(&Limited).await {
            Ok(Done) => break,
            Err(error) => {
                assert_eq!(error.code(), Some(ErrorCode::RateLimited));
                assert!(burst.elapsed() < PATIENCE, "never refilled");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    assert!(
        burst.elapsed() >= Duration::from_millis(900),
        "refilled {:?} after the burst, not at one a second",
        burst.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn a_concurrency_limit_sheds_at_once() {
    let server = start_in_memory();
    let first = client_in_memory(&server, ClientConfig::default()).await;
    let second = client_in_memory(&server, ClientConfig::default()).await;
    let mut calls = Vec::new();
    for i in 0..6 {
        let client = if i % 2 == 0 {
            first.clone()
        } else {
            second.clone()
        };
        calls.push(tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            let result = client.request_async(&Scarce { ms: 3_000 }).await;
            (result.map_err(|error| error.code()), started.elapsed())
        }));
        tokio::task::yield_now().await;
    }
    let mut served = 0;
    for call in calls {
        match call.await.unwrap() {
            (Ok(Done), waited) => {
                served += 1;
                assert!(waited >= Duration::from_secs(3), "{waited:?}");
            }
            (Err(Some(ErrorCode::Overloaded)), waited) => {
                // Not queued behind a 3 s request: shed before any time passed.
                assert!(waited < Duration::from_millis(5), "shed after {waited:?}")
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(served, 2, "the limit is server-wide across connections");
    // Once they finish, the slots are free again.
    let Done = first.request_async(&Scarce { ms: 1 }).await.unwrap();
}

/// Records what it sees; rejects `Blocked` with code 120.
struct Recorder {
    name: &'static str,
    log: Arc<Mutex<Vec<String>>>,
}

impl Middleware for Recorder {
    fn before(&self, request: &RequestInfo<'_>) -> Result<(), Rejection> {
        self.log
            .lock()
            .unwrap()
            .push(format!("{} before {}", self.name, request.handler()));
        if self.name == "inner" && request.header().opcode == Blocked::OPCODE {
            return Err(Rejection::new(
                ErrorCode::from_u16(120),
                "blocked by middleware",
            ));
        }
        Ok(())
    }

    fn after(&self, request: &RequestInfo<'_>, outcome: Outcome, _elapsed: Duration) {
        self.log.lock().unwrap().push(format!(
            "{} after {} {:?}",
            self.name,
            request.handler(),
            outcome
        ));
    }
}

#[tokio::test]
async fn middleware_runs_in_order_around_every_dispatch() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (outer, inner) = (Arc::clone(&log), Arc::clone(&log));
    let (address, _server) = start(move |b| {
        b.middleware(AuditLog)
            .middleware(Recorder {
                name: "outer",
                log: outer,
            })
            .middleware(Recorder {
                name: "inner",
                log: inner,
            })
    });
    let client = Client::connect_tcp(address).await.unwrap();
    let Nick(None) = client.request_async(&WhoAmI).await.unwrap() else {
        panic!()
    };
    let error = client.request_async(&Blocked).await.unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::from_u16(120)));
    assert_eq!(
        code(client.request_async(&Fails).await),
        ErrorCode::from_u16(150)
    );
    assert_eq!(
        code(client.request_async(&AdminOnly).await),
        ErrorCode::Unauthorized
    );
    let log = log.lock().unwrap().clone();
    assert_eq!(
        log,
        [
            "outer before PolicyController::who_am_i",
            "inner before PolicyController::who_am_i",
            "inner after PolicyController::who_am_i Replied",
            "outer after PolicyController::who_am_i Replied",
            "outer before PolicyController::blocked",
            "inner before PolicyController::blocked",
            "outer after PolicyController::blocked Rejected(Application(120))",
            "outer before PolicyController::fails",
            "inner before PolicyController::fails",
            "inner after PolicyController::fails Failed(Application(150))",
            "outer after PolicyController::fails Failed(Application(150))",
            // The built-in policies sit innermost: both see their rejection.
            "outer before PolicyController::admin_only",
            "inner before PolicyController::admin_only",
            "inner after PolicyController::admin_only Rejected(Unauthorized)",
            "outer after PolicyController::admin_only Rejected(Unauthorized)",
        ]
    );
}

#[tokio::test]
async fn the_connection_store_keeps_values_per_connection() {
    let (address, _server) = start(|b| b);
    let ann = Client::connect_tcp(address).await.unwrap();
    let bob = Client::connect_tcp(address).await.unwrap();
    assert_eq!(ann.request_async(&WhoAmI).await.unwrap(), Nick(None));
    let () = ann
        .request_async(&Login {
            level: 0,
            nick: "ann".into(),
        })
        .await
        .unwrap();
    let () = bob
        .request_async(&Login {
            level: 0,
            nick: "bob".into(),
        })
        .await
        .unwrap();
    assert_eq!(
        ann.request_async(&WhoAmI).await.unwrap(),
        Nick(Some("ann".into()))
    );
    assert_eq!(
        bob.request_async(&WhoAmI).await.unwrap(),
        Nick(Some("bob".into()))
    );
}

#[tokio::test]
async fn connect_and_disconnect_hooks_see_every_connection_and_cause() {
    let events = Arc::new(Mutex::new(Vec::new()));
    let (on_open, on_close) = (Arc::clone(&events), Arc::clone(&events));
    let (address, server) = start(move |b| {
        b.on_connect(move |connection| on_open.lock().unwrap().push((connection.id(), None)))
            .on_disconnect(move |connection, cause| {
                on_close
                    .lock()
                    .unwrap()
                    .push((connection.id(), Some(cause.clone())))
            })
    });
    let polite = Client::connect_tcp(address).await.unwrap();
    let () = polite
        .request_async(&Login {
            level: 0,
            nick: "p".into(),
        })
        .await
        .unwrap();
    polite.close().await;
    // The hooks run on the server after the client saw its link close:
    // each departure is awaited, so that the causes come in this order
    // and the one connection left is the one to kick.
    let events_reach = |count| {
        let events = Arc::clone(&events);
        move || events.lock().unwrap().len() == count
    };
    eventually("the polite client's disconnect event", events_reach(2)).await;
    let rude = RawConnection::connect(address).await;
    drop(rude);
    eventually("the rude client's disconnect event", events_reach(4)).await;
    let kicked = Client::connect_tcp(address).await.unwrap();
    let Nick(_) = kicked.request_async(&WhoAmI).await.unwrap();
    let hub = server.hub();
    let id = *hub.connection_ids().first().expect("one open connection");
    assert!(hub.kick(id, "be nice"));
    eventually("six connect and disconnect events", || {
        events.lock().unwrap().len() == 6
    })
    .await;
    let events = events.lock().unwrap().clone();
    let causes: Vec<_> = events
        .iter()
        .filter_map(|(_, cause)| cause.clone())
        .collect();
    assert_eq!(
        events.iter().filter(|(_, cause)| cause.is_none()).count(),
        3,
        "{events:?}"
    );
    assert_eq!(
        causes,
        [
            CloseCause::PeerDisconnected(DisconnectReason::Normal),
            CloseCause::PeerClosed,
            CloseCause::Disconnected(DisconnectReason::Kicked),
        ]
    );
    match kicked.request_async(&WhoAmI).await {
        Err(ClientError::Closed(ternio_client::CloseReason::Disconnected(disconnect))) => {
            assert_eq!(disconnect.reason, DisconnectReason::Kicked);
            assert_eq!(disconnect.message, "be nice");
        }
        other => panic!("expected KICKED, got {other:?}"),
    }
}
