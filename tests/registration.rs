//! How handlers get into the dispatch table: inventory discovery, explicit
//! registration, and the start-up errors.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ternio::{BuildError, Packet, Server, State, packet_controller};
use ternio_client::Client;

#[derive(Debug, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0100, response = Greeting)]
struct Hello;

#[derive(Debug, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0101)]
struct Greeting(String);

/// Found through inventory, made with `Default`; one test also registers
/// an instance of its own, which answers differently and counts its calls.
struct DiscoveredController {
    greeting: &'static str,
    calls: Arc<AtomicUsize>,
}

impl Default for DiscoveredController {
    fn default() -> Self {
        Self {
            greeting: "found through inventory",
            calls: Arc::default(),
        }
    }
}

#[packet_controller]
impl DiscoveredController {
    fn hello(&self, _request: Hello) -> Greeting {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Greeting(self.greeting.into())
    }
}

/// Answers `Hello` too: a duplicate of the discovered controller.
struct RivalController;

#[packet_controller(explicit)]
impl RivalController {
    fn greet(&self, _request: Hello) -> Greeting {
        Greeting("rival".into())
    }
}

struct Config {
    greeting: String,
}

/// Needs `State<Config>`.
#[derive(Default)]
struct ConfiguredController;

#[packet_controller(explicit)]
impl ConfiguredController {
    fn hello(_request: Hello, config: State<Config>) -> Greeting {
        Greeting(config.greeting.clone())
    }
}

#[tokio::test]
async fn inventory_discovers_controllers() {
    let server = Server::builder().map_tcp("127.0.0.1:0").build().unwrap();
    let address = server.tcp_addrs()[0];
    tokio::spawn(server.run());
    let client = Client::connect_tcp(address).await.unwrap();
    let greeting: Greeting = client.request_async(&Hello).await.unwrap();
    assert_eq!(greeting.0, "found through inventory");
}

/// With discovery on, a controller type registered explicitly is taken
/// once, as the instance given: had the discovered one been added too, the
/// build would fail with a duplicate opcode; had it replaced the explicit
/// one, it would answer. Every request reaches the explicit instance.
#[tokio::test]
async fn an_explicit_registration_of_a_discovered_controller_counts_once() {
    let calls = Arc::new(AtomicUsize::new(0));
    let server = Server::builder()
        .controller(DiscoveredController {
            greeting: "registered explicitly",
            calls: Arc::clone(&calls),
        })
        .map_tcp("127.0.0.1:0")
        .build()
        .unwrap_or_else(|error| panic!("build() counts the controller once: {error}"));
    let address = server.tcp_addrs()[0];
    tokio::spawn(server.run());
    let client = Client::connect_tcp(address).await.unwrap();
    for _ in 0..3 {
        let greeting: Greeting = client.request_async(&Hello).await.unwrap();
        assert_eq!(greeting.0, "registered explicitly");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[test]
fn a_duplicate_opcode_names_both_handlers() {
    let error = Server::builder()
        .controller(RivalController)
        .map_tcp("127.0.0.1:0")
        .build()
        .expect_err("build() refuses a duplicate opcode");
    match &error {
        BuildError::DuplicateOpcode {
            opcode,
            first,
            second,
        } => {
            assert_eq!(*opcode, 0x0100);
            assert_eq!(
                (*first, *second),
                ("RivalController::greet", "DiscoveredController::hello")
            );
        }
        other => panic!("expected DuplicateOpcode, got {other}"),
    }
    let message = error.to_string();
    assert!(
        message.contains("RivalController::greet")
            && message.contains("DiscoveredController::hello"),
        "{message}"
    );
}

#[tokio::test]
async fn state_is_checked_at_build_and_served_after() {
    let error = Server::builder()
        .discover_controllers(false)
        .controller(ConfiguredController)
        .map_tcp("127.0.0.1:0")
        .build()
        .expect_err("build() refuses a handler whose state is missing");
    let message = error.to_string();
    assert!(
        message.contains("ConfiguredController::hello") && message.contains("State<"),
        "{message}"
    );

    let server = Server::builder()
        .discover_controllers(false)
        .controller(ConfiguredController)
        .state(Config {
            greeting: "configured".into(),
        })
        .map_tcp("127.0.0.1:0")
        .build()
        .unwrap();
    let address = server.tcp_addrs()[0];
    tokio::spawn(server.run());
    let client = Client::connect_tcp(address).await.unwrap();
    let greeting: Greeting = client.request_async(&Hello).await.unwrap();
    assert_eq!(greeting.0, "configured");
}

#[test]
fn a_listener_that_cannot_bind_fails_the_build() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let error = Server::builder()
        .discover_controllers(false)
        .map_tcp(taken.local_addr().unwrap())
        .build()
        .err()
        .unwrap();
    assert!(matches!(error, BuildError::Bind { .. }), "{error}");
}

#[tokio::test]
async fn shutdown_stops_accepting() {
    let server = Server::builder().map_tcp("127.0.0.1:0").build().unwrap();
    let address = server.tcp_addrs()[0];
    let handle = server.handle();
    let running = tokio::spawn(server.run());
    Client::connect_tcp(address).await.unwrap();
    handle.shutdown();
    running.await.unwrap().unwrap();
    assert!(Client::connect_tcp(address).await.is_err());
}

/// What `{:?}` shows of a builder, a server and its handle: where it
/// listens and how it is set up, never a key.
#[tokio::test]
async fn builder_server_and_handle_debug_say_what_they_hold() {
    let builder = Server::builder()
        .map_tcp("127.0.0.1:0")
        .map_websocket("127.0.0.1:0", "/ws");
    let shown = format!("{builder:?}");
    assert!(shown.starts_with("ServerBuilder {"), "{shown}");
    assert!(shown.contains("tcp 127.0.0.1:0"), "{shown}");
    assert!(shown.contains("ws /ws 127.0.0.1:0"), "{shown}");
    assert!(shown.contains("max_frame_size"), "the config: {shown}");

    let server = builder.build().expect("the server builds");
    let tcp = server.tcp_addrs()[0];
    let shown = format!("{server:?}");
    assert!(shown.contains(&format!("tcp {tcp}")), "{shown}");
    let handle = server.handle();
    assert_eq!(
        format!("{handle:?}"),
        "ServerHandle { connections: 0, ready: true, .. }"
    );
}
