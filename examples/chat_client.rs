//! A terminal client for `chat_server`.
//!
//! ```text
//! cargo run --release --example chat_server
//! cargo run --release --example chat_client -- --tcp 127.0.0.1:7101 --nick ann
//! cargo run --release --example chat_client -- --ws ws://127.0.0.1:7102/ws --nick bob
//! ```
//!
//! Type `/join ROOM`, `/leave`, `/nick NAME` or `/quit`; any other line is
//! said to the room you are in. What the server pushes (messages, joins and
//! leaves) is printed as it arrives. The client reconnects when the server
//! goes away, and takes its nickname and room back when it returns (in a
//! cluster, possibly on another node: see `restore`). Ctrl-C or SIGTERM
//! leaves as `/quit` does: it prints `stopping` and exits with code 0.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use ternio_client::{
    Client, ClientError, ConnectionState, ErrorCode, ReconnectPolicy, Subscription,
};
use ternio_examples::chat::{
    ChatMessage, JoinRoom, LeaveRoom, Say, SetNick, UserJoined, UserLeft, errors,
};
use tokio::sync::mpsc;

/// Command line of the chat client.
#[derive(Parser)]
#[command(about = "Ternio chat client")]
struct Args {
    /// The server's TCP address (the default, at 127.0.0.1:7101).
    #[arg(long, conflicts_with = "ws")]
    tcp: Option<String>,
    /// The server's WebSocket URL instead, such as `ws://127.0.0.1:7102/ws`.
    #[arg(long)]
    ws: Option<String>,
    /// The nickname to take at once (or later with `/nick`).
    #[arg(long)]
    nick: Option<String>,
}

const HELP: &str =
    "commands: /join ROOM, /leave, /nick NAME, /quit; anything else is said to your room";

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("chat_client: {error}");
            ExitCode::FAILURE
        }
    }
}

/// What this client has on the server: restored after a reconnect.
#[derive(Default)]
struct Session {
    nick: Option<String>,
    room: Option<String>,
}

/// The pushes the client prints.
struct Pushes {
    messages: Subscription<ChatMessage>,
    joins: Subscription<UserJoined>,
    leaves: Subscription<UserLeft>,
}

async fn run(args: Args) -> Result<(), ClientError> {
    // Ctrl-C or SIGTERM: leave as /quit does, with a line. Installed before
    // anything is printed.
    let stop = ternio::shutdown_signal();
    tokio::pin!(stop);
    let builder = Client::builder().reconnect(ReconnectPolicy::default());
    let builder = match &args.ws {
        Some(url) => builder.websocket(url.as_str()),
        None => builder.tcp(args.tcp.as_deref().unwrap_or("127.0.0.1:7101")),
    };
    let client = builder.connect().await?;
    // Subscribed before anything is asked: no push is missed.
    let mut pushes = Pushes {
        messages: client.subscribe(),
        joins: client.subscribe(),
        leaves: client.subscribe(),
    };
    println!("connected; {HELP}");

    let mut session = Session::default();
    if let Some(nick) = args.nick {
        set_nick(&client, &mut session, &nick).await;
    }

    let mut lines = stdin_lines();
    let mut states = client.state_changes();
    let mut was_reconnecting = false;
    loop {
        tokio::select! {
            () = &mut stop => {
                println!("stopping");
                break;
            }
            line = lines.recv() => match line {
                Some(line) => {
                    if !command(&client, &mut session, line.trim()).await {
                        break;
                    }
                }
                // End of input (ctrl-d): leave as /quit does.
                None => break,
            },
            Some(message) = pushes.messages.next() => {
                println!("[{}] {}: {}", message.room, message.nick, message.text);
            }
            Some(joined) = pushes.joins.next() => {
                println!("[{}] * {} joined", joined.room, joined.nick);
            }
            Some(left) = pushes.leaves.next() => {
                println!("[{}] * {} left", left.room, left.nick);
            }
            changed = states.changed() => {
                if changed.is_err() {
                    break;
                }
                let state = states.borrow_and_update().clone();
                match state {
                    ConnectionState::Reconnecting { attempt } => {
                        if !was_reconnecting {
                            println!("! connection lost; reconnecting");
                        }
                        was_reconnecting = true;
                        if attempt > 1 {
                            println!("! reconnect attempt {attempt}");
                        }
                    }
                    ConnectionState::Connected => {
                        if was_reconnecting {
                            println!("! reconnected");
                            restore(&client, &mut session).await;
                        }
                        was_reconnecting = false;
                    }
                    ConnectionState::Closed(reason) => {
                        println!("! connection closed: {reason}");
                        return Ok(());
                    }
                    // A state of a later version: nothing to show.
                    _ => {}
                }
            }
            else => break,
        }
    }
    client.close().await;
    Ok(())
}

/// Lines typed on stdin, read on a thread of their own (reading a terminal
/// blocks); the channel closes at the end of input.
fn stdin_lines() -> mpsc::UnboundedReceiver<String> {
    let (sender, receiver) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    receiver
}

/// Runs one typed line; `false` to quit.
async fn command(client: &Client, session: &mut Session, line: &str) -> bool {
    let (word, rest) = match line.split_once(char::is_whitespace) {
        Some((word, rest)) => (word, rest.trim()),
        None => (line, ""),
    };
    match word {
        "" => {}
        "/quit" => return false,
        "/help" => println!("{HELP}"),
        "/nick" if !rest.is_empty() => set_nick(client, session, rest).await,
        "/join" if !rest.is_empty() => join(client, session, rest).await,
        "/leave" => leave(client, session).await,
        "/nick" | "/join" => println!("! usage: {word} NAME"),
        _ if word.starts_with('/') => println!("! unknown command {word}; {HELP}"),
        _ => say(client, session, line).await,
    }
    true
}

async fn set_nick(client: &Client, session: &mut Session, nick: &str) {
    let request = SetNick {
        nick: nick.to_owned(),
    };
    match client.request_async(&request).await {
        Ok(()) => {
            println!("! you are {nick}");
            session.nick = Some(nick.to_owned());
        }
        Err(error) => println!("! nickname refused: {}", reason(&error)),
    }
}

async fn join(client: &Client, session: &mut Session, room: &str) {
    let request = JoinRoom {
        room: room.to_owned(),
    };
    match client.request_async(&request).await {
        Ok(info) => {
            println!("! in {}: {}", info.room, info.members.join(", "));
            // One room at a time: leave the one before.
            if let Some(previous) = session.room.replace(info.room.clone())
                && previous != info.room
            {
                let _ = client.request_async(&LeaveRoom { room: previous }).await;
            }
        }
        Err(error) => println!("! cannot join {room}: {}", reason(&error)),
    }
}

async fn leave(client: &Client, session: &mut Session) {
    let Some(room) = session.room.take() else {
        println!("! you are in no room");
        return;
    };
    match client
        .request_async(&LeaveRoom { room: room.clone() })
        .await
    {
        Ok(()) => println!("! you left {room}"),
        Err(error) => println!("! cannot leave {room}: {}", reason(&error)),
    }
}

async fn say(client: &Client, session: &Session, text: &str) {
    let Some(room) = &session.room else {
        println!("! join a room first (/join ROOM)");
        return;
    };
    let request = Say {
        room: room.clone(),
        text: text.to_owned(),
    };
    // The server pushes the message back to every member, this one too.
    if let Err(error) = client.request_async(&request).await {
        println!("! not said: {}", reason(&error));
    }
}

/// How long [`restore`] asks for the nickname again: longer than a
/// cluster's heartbeat TTL (5 s by default).
const NICK_RETRY: Duration = Duration::from_secs(10);

/// After a reconnect the server knows nothing of this client: takes the
/// nickname and the room back.
///
/// In a cluster, the nickname may still be held for a moment by this
/// client's previous connection: until its node has freed it, or, when
/// that node died, until the cluster gives up on the node (the heartbeat
/// TTL). So a nickname refused as taken (or while the node cannot reach
/// Redis) is asked for again, every half second, for [`NICK_RETRY`].
async fn restore(client: &Client, session: &mut Session) {
    if let Some(nick) = session.nick.take() {
        let deadline = Instant::now() + NICK_RETRY;
        let request = SetNick { nick: nick.clone() };
        let mut told = false;
        loop {
            match client.request_async(&request).await {
                Ok(()) => {
                    println!("! you are {nick}");
                    session.nick = Some(nick);
                    break;
                }
                Err(error) if may_pass(&error) && Instant::now() < deadline => {
                    if !told {
                        println!("! {nick}: {}; asking again", reason(&error));
                        told = true;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(error) => {
                    println!("! nickname refused: {}", reason(&error));
                    break;
                }
            }
        }
    }
    if let Some(room) = session.room.take() {
        join(client, session, &room).await;
    }
}

/// Whether a refused nickname may be granted a little later: taken (by
/// this client's previous connection, maybe), or not checked (Redis out
/// of reach).
fn may_pass(error: &ClientError) -> bool {
    matches!(
        error.code(),
        Some(ErrorCode::Application(code)) if code == errors::BAD_NICK || code == errors::UNAVAILABLE
    )
}

/// The server's message for an error it sent, or the whole error.
fn reason(error: &ClientError) -> String {
    match error {
        ClientError::Remote { message, .. } => message.clone(),
        other => other.to_string(),
    }
}
