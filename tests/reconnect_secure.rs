//! Secure sessions and subscriptions across reconnects, over real sockets:
//! a server with an identity restarted under TCP and WebSocket clients whose
//! session was secure (by `ClientConfig::secure` or by an explicit
//! `handshake()`); the handshake runs again before requests flow, sealed
//! pushes keep arriving through the same subscriptions, and a server that
//! comes back with another key is refused.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use ternio::{Identity, ServerBuilder, ServerHandle};
use ternio_client::{
    Client, ClientConfig, ClientError, CloseReason, ConnectionState, ReconnectPolicy, SecureConfig,
    Subscription,
};
use ternio_tests::*;

#[derive(Debug, Clone, Copy)]
enum Transport {
    Tcp,
    Ws,
}

const BOTH: [Transport; 2] = [Transport::Tcp, Transport::Ws];

/// A server with both listeners that requires encryption for every
/// application opcode (so a request that is answered was sealed), with
/// `identity`.
fn secure_server(identity: Identity) -> impl Fn(ServerBuilder) -> ServerBuilder {
    move |b| {
        b.identity(identity.clone())
            .require_encryption(true)
            .handshake_timeout(Duration::from_secs(5))
    }
}

struct Setup {
    tcp: SocketAddr,
    ws: SocketAddr,
    server: ServerHandle,
}

impl Setup {
    fn start(configure: impl FnOnce(ServerBuilder) -> ServerBuilder) -> Self {
        let (tcp, ws, server) = start_server_with_ws(configure);
        Self { tcp, ws, server }
    }

    async fn client(&self, transport: Transport, config: ClientConfig) -> Client {
        match transport {
            Transport::Tcp => Client::connect_tcp_with(self.tcp, config).await.unwrap(),
            Transport::Ws => Client::connect_ws_with(&format!("ws://{}/ws", self.ws), config)
                .await
                .unwrap(),
        }
    }

    /// Shuts the server down, waits for `client` to notice, and starts
    /// another on the same ports with `configure`.
    async fn restart(
        &mut self,
        client: &Client,
        configure: impl Fn(ServerBuilder) -> ServerBuilder,
    ) {
        self.server.shutdown();
        wait_for_state(client, |state| !state.is_connected()).await;
        self.server = restart_server(self.tcp, Some(self.ws), configure).await;
    }
}

fn reconnecting(secure: Option<SecureConfig>, max_attempts: Option<u32>) -> ClientConfig {
    reconnecting_every(30, secure, max_attempts)
}

fn reconnecting_every(
    delay_ms: u64,
    secure: Option<SecureConfig>,
    max_attempts: Option<u32>,
) -> ClientConfig {
    let mut reconnect = ReconnectPolicy::default();
    reconnect.initial_delay = Duration::from_millis(delay_ms);
    reconnect.max_delay = Duration::from_millis(delay_ms);
    reconnect.multiplier = 1.0;
    reconnect.jitter = 0.0;
    reconnect.max_attempts = max_attempts;
    reconnect.healthy_after = Duration::ZERO;
    reconnect.busy_delay = Duration::ZERO;
    let mut config = ClientConfig::default();
    config.reconnect = Some(reconnect);
    config.secure = secure;
    config
}

async fn wait_for_state(client: &Client, accept: impl FnMut(&ConnectionState) -> bool) {
    let mut states = client.state_changes();
    tokio::time::timeout(Duration::from_secs(5), states.wait_for(accept))
        .await
        .unwrap_or_else(|_| panic!("state still {:?} after 5 s", client.state()))
        .unwrap();
}

async fn take(subscription: &mut Subscription<Note>, count: u32) -> Vec<u32> {
    let mut seqs = Vec::new();
    for _ in 0..count {
        let note = tokio::time::timeout(Duration::from_secs(5), subscription.next())
            .await
            .expect("a push within 5 s")
            .expect("the subscription is open");
        seqs.push(note.seq);
    }
    seqs
}

/// Pushes, a callback and sealed requests before a restart and after it.
async fn exercise(client: &Client, notes: &mut Subscription<Note>, calls: &AtomicU32) {
    let before = calls.load(Ordering::SeqCst);
    client.request_async(&PushMe { count: 5 }).await.unwrap();
    assert_eq!(take(notes, 5).await, [0, 1, 2, 3, 4]);
    eventually("the callback saw 5 notes", || {
        calls.load(Ordering::SeqCst) >= before + 5
    })
    .await;
    assert_eq!(client.request_async(&Secret).await.unwrap(), Secret);
    assert!(client.is_secure());
    assert_eq!(notes.dropped(), 0);
}

async fn a_secure_config_session_survives_restarts(transport: Transport) {
    let identity = Identity::generate();
    let public = *identity.public_key();
    let mut setup = Setup::start(secure_server(identity.clone()));
    let client = setup
        .client(
            transport,
            reconnecting(Some(SecureConfig::pinned(public)), Some(100)),
        )
        .await;
    let mut notes = client.subscribe::<Note>();
    let calls = Arc::new(AtomicU32::new(0));
    let _guard = {
        let calls = Arc::clone(&calls);
        client.on(move |_: Note| {
            calls.fetch_add(1, Ordering::SeqCst);
        })
    };
    exercise(&client, &mut notes, &calls).await;
    for _ in 0..2 {
        setup
            .restart(&client, secure_server(identity.clone()))
            .await;
        exercise(&client, &mut notes, &calls).await;
    }
    assert_eq!(client.unhandled_pushes(), 0);
    assert_eq!(setup.server.connection_count(), 1);
}

#[tokio::test]
async fn a_tcp_session_secured_by_config_survives_restarts() {
    a_secure_config_session_survives_restarts(Transport::Tcp).await;
}

#[tokio::test]
async fn a_websocket_session_secured_by_config_survives_restarts() {
    a_secure_config_session_survives_restarts(Transport::Ws).await;
}

#[tokio::test]
async fn an_explicit_handshake_runs_again_after_a_reconnect() {
    let identity = Identity::generate();
    let public = *identity.public_key();
    // Encryption is required per handler (Secret), not for everything:
    // the client connects in plain, then secures its session.
    let plain_with_identity = {
        let identity = identity.clone();
        move |b: ServerBuilder| b.identity(identity.clone())
    };
    for transport in BOTH {
        let mut setup = Setup::start(plain_with_identity.clone());
        let client = setup.client(transport, reconnecting(None, Some(100))).await;
        let mut notes = client.subscribe::<Note>();
        let refused = client.request_async(&Secret).await;
        assert!(refused.is_err());
        client.handshake(Some(&public)).await.unwrap();
        assert_eq!(client.request_async(&Secret).await.unwrap(), Secret);

        setup.restart(&client, plain_with_identity.clone()).await;
        // Sealed at once on the new connection: the handshake ran before
        // this request could go out.
        assert_eq!(
            client.request_async(&Secret).await.unwrap(),
            Secret,
            "{transport:?}"
        );
        assert!(client.is_secure());
        client.request_async(&PushMe { count: 3 }).await.unwrap();
        assert_eq!(take(&mut notes, 3).await, [0, 1, 2]);
        // Still one session per client: no second handshake.
        assert!(matches!(
            client.handshake(Some(&public)).await,
            Err(ClientError::HandshakeAlreadyRan(_))
        ));
    }
}

#[tokio::test]
async fn requests_waiting_for_a_reconnect_go_out_sealed() {
    let identity = Identity::generate();
    let public = *identity.public_key();
    for transport in BOTH {
        let mut setup = Setup::start(secure_server(identity.clone()));
        let client = setup
            .client(
                transport,
                reconnecting(Some(SecureConfig::pinned(public)), Some(200)),
            )
            .await;
        setup.server.shutdown();
        wait_for_state(&client, |state| !state.is_connected()).await;
        let waiting: Vec<_> = (0..20i64)
            .map(|i| {
                let client = client.clone();
                tokio::spawn(async move { client.request_async(&Add { a: i, b: i }).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(100)).await;
        setup.server =
            restart_server(setup.tcp, Some(setup.ws), secure_server(identity.clone())).await;
        // The server requires encryption for everything: each answer
        // proves its request was sealed.
        for (i, task) in (0..20i64).zip(waiting) {
            assert_eq!(task.await.unwrap().unwrap(), Sum(2 * i), "{transport:?}");
        }
    }
}

#[tokio::test]
async fn a_server_back_with_another_key_is_refused_on_every_attempt() {
    let identity = Identity::generate();
    let public = *identity.public_key();
    for transport in BOTH {
        let mut setup = Setup::start(secure_server(identity.clone()));
        let client = setup
            .client(
                transport,
                // Slow enough for the impostor to be up by the first attempt.
                reconnecting_every(200, Some(SecureConfig::pinned(public)), Some(3)),
            )
            .await;
        let mut notes = client.subscribe::<Note>();
        let impostor = Identity::generate();
        setup
            .restart(&client, secure_server(impostor.clone()))
            .await;
        wait_for_state(&client, ConnectionState::is_closed).await;
        match client.state() {
            ConnectionState::Closed(CloseReason::ReconnectFailed {
                attempts,
                last_error,
            }) => {
                assert_eq!(attempts, 3);
                assert!(
                    last_error.contains("refused the NK handshake"),
                    "{last_error}"
                );
            }
            other => panic!("expected ReconnectFailed, got {other:?}"),
        }
        // The subscription ends with the client.
        assert_eq!(notes.next().await, None);
    }
}

#[tokio::test]
async fn plain_subscriptions_survive_a_restart() {
    for transport in BOTH {
        let mut setup = Setup::start(|b| b);
        let client = setup.client(transport, reconnecting(None, Some(100))).await;
        let mut notes = client.subscribe::<Note>();
        client.request_async(&PushMe { count: 2 }).await.unwrap();
        assert_eq!(take(&mut notes, 2).await, [0, 1]);
        setup.restart(&client, |b| b).await;
        client.request_async(&PushMe { count: 2 }).await.unwrap();
        assert_eq!(take(&mut notes, 2).await, [0, 1]);
        assert!(!client.is_secure());
        assert_eq!(client.unhandled_pushes(), 0);
    }
}
