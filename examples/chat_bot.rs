//! A chat bot for `chat_server`: joins a room over TCP and answers every
//! message said there by someone else, with what it heard.
//!
//! ```text
//! cargo run --release --example chat_server
//! cargo run --release --example chat_bot -- --tcp 127.0.0.1:7101 --nick echo-bot --room lobby
//! ```
//!
//! Then say something in `lobby` from the chat page (<http://127.0.0.1:7103/>)
//! or from `chat_client`. The bot prints one line per event, which the
//! browser end-to-end test (`tests/browser/`) reads:
//!
//! ```text
//! ready: echo-bot in lobby with ann, echo-bot
//! joined [lobby] bob
//! heard [lobby] bob: hello
//! said [lobby]: bob, you said: hello
//! left [lobby] bob
//! ```
//!
//! `said` is printed when the server pushes the bot's own answer back to
//! it, so the room got it. With `--replies N` the bot leaves (exit status 0)
//! after N answers came back; it exits with status 1 if the connection
//! closes first or a request fails.

use std::process::ExitCode;

use clap::Parser;
use ternio_client::{Client, ClientError, CloseReason};
use ternio_examples::chat::{ChatMessage, JoinRoom, RoomInfo, Say, SetNick, UserJoined, UserLeft};

/// Command line of the chat bot.
#[derive(Parser)]
#[command(about = "Ternio chat bot: answers every message in a room")]
struct Args {
    /// The server's TCP address.
    #[arg(long, default_value = "127.0.0.1:7101")]
    tcp: String,
    /// The bot's nickname.
    #[arg(long, default_value = "echo-bot")]
    nick: String,
    /// The room to join.
    #[arg(long, default_value = "lobby")]
    room: String,
    /// Leave after this many answers reached the room (default: never).
    #[arg(long)]
    replies: Option<u64>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    // Ctrl-C or SIGTERM ends the bot with success; dropping its client
    // closes the connection.
    let stop = ternio::shutdown_signal();
    let result = tokio::select! {
        result = run(args) => result,
        () = stop => {
            println!("stopping");
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("chat_bot: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), ClientError> {
    let client = Client::connect_tcp(&args.tcp).await?;
    // Subscribed before joining: no push of the room is missed.
    let mut messages = client.subscribe::<ChatMessage>();
    let mut joins = client.subscribe::<UserJoined>();
    let mut leaves = client.subscribe::<UserLeft>();
    client
        .request_async(&SetNick {
            nick: args.nick.clone(),
        })
        .await?;
    let info: RoomInfo = client
        .request_async(&JoinRoom {
            room: args.room.clone(),
        })
        .await?;
    println!(
        "ready: {} in {} with {}",
        args.nick,
        info.room,
        info.members.join(", ")
    );
    let room = info.room;
    let mut replies = 0;
    loop {
        if args.replies.is_some_and(|wanted| replies >= wanted) {
            client.close().await;
            return Ok(());
        }
        tokio::select! {
            Some(message) = messages.next() => {
                if message.room != room {
                    continue;
                }
                if message.nick == args.nick {
                    // Our own answer, pushed back to every member.
                    println!("said [{}]: {}", message.room, message.text);
                    replies += 1;
                    continue;
                }
                println!("heard [{}] {}: {}", message.room, message.nick, message.text);
                let answer = Say {
                    room: room.clone(),
                    text: format!("{}, you said: {}", message.nick, message.text),
                };
                client.request_async(&answer).await?;
            }
            Some(joined) = joins.next() => {
                if joined.room == room && joined.nick != args.nick {
                    println!("joined [{}] {}", joined.room, joined.nick);
                }
            }
            Some(left) = leaves.next() => {
                if left.room == room {
                    println!("left [{}] {}", left.room, left.nick);
                }
            }
            else => {
                // Every subscription ended: the client closed for good.
                let reason = client.close_reason().unwrap_or(CloseReason::PeerClosed);
                return Err(ClientError::Closed(reason));
            }
        }
    }
}
