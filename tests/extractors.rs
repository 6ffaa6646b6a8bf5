//! Handler parameters that may refuse a request (`FromContext` with a
//! `Rejection`), that may await (`FromContextAsync`, async handlers only),
//! and the `Option<T>` and `Result<T, Rejection>` forms, over real TCP.
//! The attacker here is a client that never logged in and calls what needs
//! a user: it gets `UNAUTHORIZED`, and the handler never runs.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use ternio::middleware::{Middleware, Outcome, RequestInfo};
use ternio::protocol::{AppCode, ErrorCode};
use ternio::{
    Context, FromContext, FromContextAsync, Packet, Rejection, Server, State, packet_controller,
};
use ternio_client::{Client, ClientError};
use tokio::sync::Mutex;

/// An application code for "no such user".
const UNKNOWN_USER: AppCode = AppCode::new(140);

/// 0x0800: signs the connection in as `user`.
#[derive(Debug, Packet)]
#[packet(opcode = 0x0800, response = ())]
struct Login {
    user: u32,
}

/// 0x0801: whom the connection is signed in as (a sync handler taking
/// `CurrentUser`).
#[derive(Debug, Packet)]
#[packet(opcode = 0x0801, response = Me)]
struct WhoAmI;

#[derive(Debug, Packet)]
#[packet(opcode = 0x0802)]
struct Me {
    user: u32,
    name: String,
}

/// 0x0803: a greeting for anyone (takes `Option<CurrentUser>`).
#[derive(Debug, Packet)]
#[packet(opcode = 0x0803, response = Greeting)]
struct Greet;

#[derive(Debug, Packet)]
#[packet(opcode = 0x0804)]
struct Greeting(String);

/// 0x0805: the user's profile, loaded by an async extractor.
#[derive(Debug, Packet)]
#[packet(opcode = 0x0805, response = Me)]
struct Profile;

/// 0x0806: takes `Result<Account, Rejection>` and answers the rejection
/// with its own code.
#[derive(Debug, Packet)]
#[packet(opcode = 0x0806, response = Greeting)]
struct Explain;

/// 0x0807: takes `Option<Account>` in an async handler.
#[derive(Debug, Packet)]
#[packet(opcode = 0x0807, response = Greeting)]
struct MaybeProfile;

/// The id a connection signed in with (in its store).
#[derive(Debug, Clone, Copy)]
struct UserId(u32);

/// A sync extractor: the signed-in user, or `UNAUTHORIZED`.
#[derive(Debug)]
struct CurrentUser(u32);

impl FromContext for CurrentUser {
    type Rejection = Rejection;

    fn from_context(ctx: &Context) -> Result<Self, Rejection> {
        ctx.store()
            .get::<UserId>()
            .map(|UserId(id)| CurrentUser(id))
            .ok_or_else(|| Rejection::new(ErrorCode::Unauthorized, "log in first"))
    }
}

/// The users "database": looked up with an await.
#[derive(Default)]
struct Database {
    names: Mutex<HashMap<u32, String>>,
    lookups: AtomicU32,
}

/// An async extractor: the signed-in user's account, loaded from the
/// database; `UNAUTHORIZED` when not signed in, `UNKNOWN_USER` when the
/// database has no such user.
#[derive(Debug)]
struct Account {
    user: u32,
    name: String,
}

impl FromContextAsync for Account {
    type Rejection = Rejection;

    async fn from_context_async(ctx: &Context) -> Result<Self, Rejection> {
        let CurrentUser(user) = CurrentUser::from_context(ctx)?;
        let database = ctx
            .state::<Arc<Database>>()
            .expect("the test gives a database");
        database.lookups.fetch_add(1, Ordering::SeqCst);
        // A real query would take a while: so does this one.
        tokio::time::sleep(Duration::from_millis(5)).await;
        let name = database.names.lock().await.get(&user).cloned();
        name.map(|name| Account { user, name })
            .ok_or_else(|| Rejection::new(UNKNOWN_USER, format!("no user {user}")))
    }
}

/// How many times each handler ran.
#[derive(Default)]
struct Runs {
    who_am_i: AtomicU32,
    profile: AtomicU32,
}

#[derive(Default)]
struct Accounts;

#[packet_controller(explicit)]
impl Accounts {
    fn login(request: Login, ctx: &Context) {
        ctx.store().insert(UserId(request.user));
    }

    fn who_am_i(_request: WhoAmI, user: CurrentUser, runs: State<Arc<Runs>>) -> Me {
        runs.who_am_i.fetch_add(1, Ordering::SeqCst);
        Me {
            user: user.0,
            name: String::new(),
        }
    }

    fn greet(_request: Greet, user: Option<CurrentUser>) -> Greeting {
        Greeting(match user {
            Some(CurrentUser(id)) => format!("hello, user {id}"),
            None => "hello, stranger".into(),
        })
    }

    async fn profile(_request: Profile, account: Account, runs: State<Arc<Runs>>) -> Me {
        runs.profile.fetch_add(1, Ordering::SeqCst);
        Me {
            user: account.user,
            name: account.name,
        }
    }

    async fn explain(
        _request: Explain,
        account: Result<Account, Rejection>,
    ) -> Result<Greeting, Rejection> {
        let account = account.map_err(|rejection| {
            Rejection::new(rejection.code, format!("explained: {}", rejection.message))
        })?;
        Ok(Greeting(format!("hello, {}", account.name)))
    }

    async fn maybe_profile(_request: MaybeProfile, account: Option<Account>) -> Greeting {
        Greeting(account.map_or_else(|| "nobody".into(), |account| account.name))
    }
}

/// Records every outcome middleware sees.
#[derive(Clone, Default)]
struct Outcomes(Arc<std::sync::Mutex<Vec<(&'static str, Outcome)>>>);

impl Middleware for Outcomes {
    fn after(&self, request: &RequestInfo<'_>, outcome: Outcome, _elapsed: Duration) {
        self.0.lock().unwrap().push((request.handler(), outcome));
    }
}

struct Started {
    client: Client,
    runs: Arc<Runs>,
    database: Arc<Database>,
    outcomes: Outcomes,
}

async fn start() -> Started {
    let runs = Arc::new(Runs::default());
    let database = Arc::new(Database::default());
    database.names.lock().await.insert(7, "ann".into());
    let outcomes = Outcomes::default();
    let server = Server::builder()
        .discover_controllers(false)
        .controller(Accounts)
        .state(Arc::clone(&runs))
        .state(Arc::clone(&database))
        .middleware(outcomes.clone())
        .map_tcp("127.0.0.1:0")
        .build()
        .expect("the server builds");
    let address = server.tcp_addrs()[0];
    tokio::spawn(server.run());
    let client = Client::connect_tcp(address).await.unwrap();
    Started {
        client,
        runs,
        database,
        outcomes,
    }
}

fn assert_refused<T: std::fmt::Debug>(
    result: Result<T, ClientError>,
    expected: ErrorCode,
    text: &str,
) {
    match result {
        Err(ClientError::Remote { code, message }) => {
            assert_eq!(code, expected, "{message}");
            assert!(message.contains(text), "{message:?} lacks {text:?}");
        }
        other => panic!("expected error {expected}, got {other:?}"),
    }
}

#[tokio::test]
async fn a_sync_extractor_refuses_a_connection_that_has_not_logged_in() {
    let Started {
        client,
        runs,
        outcomes,
        ..
    } = start().await;
    assert_refused(
        client.request_async(&WhoAmI).await,
        ErrorCode::Unauthorized,
        "log in first",
    );
    assert_eq!(runs.who_am_i.load(Ordering::SeqCst), 0, "the handler ran");
    // Middleware sees a refusal, not a failure of the handler.
    assert!(
        outcomes.0.lock().unwrap().contains(&(
            "Accounts::who_am_i",
            Outcome::Rejected(ErrorCode::Unauthorized)
        )),
        "{:?}",
        outcomes.0.lock().unwrap()
    );

    client.request_async(&Login { user: 7 }).await.unwrap();
    let me = client.request_async(&WhoAmI).await.unwrap();
    assert_eq!(me.user, 7);
    assert_eq!(runs.who_am_i.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn option_turns_a_refusal_into_none() {
    let Started { client, .. } = start().await;
    assert_eq!(
        client.request_async(&Greet).await.unwrap().0,
        "hello, stranger"
    );
    client.request_async(&Login { user: 3 }).await.unwrap();
    assert_eq!(
        client.request_async(&Greet).await.unwrap().0,
        "hello, user 3"
    );
}

#[tokio::test]
async fn an_async_extractor_awaits_and_may_refuse_with_its_own_code() {
    let Started {
        client,
        runs,
        database,
        ..
    } = start().await;
    // Not signed in: refused before the database is asked.
    assert_refused(
        client.request_async(&Profile).await,
        ErrorCode::Unauthorized,
        "log in first",
    );
    assert_eq!(database.lookups.load(Ordering::SeqCst), 0);

    // Signed in as a user the database does not know: its own code.
    client.request_async(&Login { user: 8 }).await.unwrap();
    assert_refused(
        client.request_async(&Profile).await,
        ErrorCode::Application(UNKNOWN_USER),
        "no user 8",
    );
    assert_eq!(runs.profile.load(Ordering::SeqCst), 0, "the handler ran");

    client.request_async(&Login { user: 7 }).await.unwrap();
    let me = client.request_async(&Profile).await.unwrap();
    assert_eq!((me.user, me.name.as_str()), (7, "ann"));
    assert_eq!(runs.profile.load(Ordering::SeqCst), 1);
    assert_eq!(database.lookups.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn result_hands_the_refusal_to_the_handler() {
    let Started { client, .. } = start().await;
    assert_refused(
        client.request_async(&Explain).await,
        ErrorCode::Unauthorized,
        "explained: log in first",
    );
    client.request_async(&Login { user: 7 }).await.unwrap();
    assert_eq!(
        client.request_async(&Explain).await.unwrap().0,
        "hello, ann"
    );
    assert_eq!(
        client.request_async(&MaybeProfile).await.unwrap().0,
        "ann",
        "Option<T> of an async extractor"
    );
    client.request_async(&Login { user: 9 }).await.unwrap();
    assert_eq!(
        client.request_async(&MaybeProfile).await.unwrap().0,
        "nobody"
    );
}

#[tokio::test]
async fn a_refused_request_leaves_the_connection_and_its_neighbours_alone() {
    let Started { client, .. } = start().await;
    let other = start().await.client;
    for _ in 0..50 {
        assert!(client.request_async(&WhoAmI).await.is_err());
        assert!(client.request_async(&Profile).await.is_err());
    }
    client.request_async(&Login { user: 7 }).await.unwrap();
    assert_eq!(client.request_async(&Profile).await.unwrap().name, "ann");
    assert_eq!(
        other.request_async(&Greet).await.unwrap().0,
        "hello, stranger"
    );
}

#[test]
fn handler_unit_tests_extract_refusals_as_results() {
    use ternio::testing::TestServer;

    let server = TestServer::new();
    let ann = server.connect();
    let refused = ann.extract::<Result<CurrentUser, Rejection>>();
    assert_eq!(refused.unwrap_err().code, ErrorCode::Unauthorized);
    assert!(ann.extract::<Option<CurrentUser>>().is_none());
    ann.handle().store().insert(UserId(4));
    assert_eq!(ann.extract::<CurrentUser>().0, 4);
}
