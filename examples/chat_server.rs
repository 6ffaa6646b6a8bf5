//! The chat server: rooms and nicknames over TCP and WebSocket at once.
//!
//! ```text
//! cargo run --example chat_server -- --tcp 127.0.0.1:7101 --ws 127.0.0.1:7102
//! cargo run --example chat_client -- --tcp 127.0.0.1:7101 --nick ann
//! ```
//!
//! Everything the chat needs comes from the framework: the hub's groups are
//! the rooms, the connection store keeps each connection's nickname and
//! rooms, and the disconnect hook tells the rooms when someone leaves.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Mutex;

use clap::Parser;
use ternio::{
    AuditLog, ConnectionHandle, Context, HandlerError, Hub, Server, State, Stored,
    packet_controller,
};
use ternio_examples::chat::{
    ChatMessage, JoinRoom, LeaveRoom, RoomInfo, Say, SetNick, UserJoined, UserLeft, errors,
};

/// Command line of the chat server.
#[derive(Parser)]
#[command(about = "Ternio chat server")]
struct Args {
    /// Address of the TCP listener.
    #[arg(long, default_value = "127.0.0.1:7101")]
    tcp: SocketAddr,
    /// Address of the WebSocket listener (path /ws).
    #[arg(long, default_value = "127.0.0.1:7102")]
    ws: SocketAddr,
    /// Log every request (the audit-log middleware).
    #[arg(long)]
    audit: bool,
}

/// A connection's nickname, kept in its store.
#[derive(Debug, Clone)]
struct Nickname(String);

/// The rooms a connection is in, kept in its store.
#[derive(Debug, Clone, Default)]
struct Rooms(Vec<String>);

/// Nicknames in use, across the server.
#[derive(Default)]
struct Nicknames(Mutex<HashSet<String>>);

/// Serves the chat packets.
#[derive(Default)]
struct ChatController;

fn error(code: u16, message: impl Into<String>) -> HandlerError {
    HandlerError::new(code, message)
}

/// The room names and nicknames of a room's members.
fn member_nicks(hub: &Hub, room: &str) -> Vec<String> {
    let mut nicks: Vec<String> = hub
        .members(room)
        .into_iter()
        .filter_map(|id| hub.connection(id))
        .filter_map(|member| member.store().get::<Nickname>())
        .map(|nick| nick.0)
        .collect();
    nicks.sort();
    nicks
}

#[packet_controller]
impl ChatController {
    fn set_nick(
        request: SetNick,
        ctx: &Context,
        taken: State<Nicknames>,
    ) -> Result<(), HandlerError> {
        let nick = request.nick.trim().to_owned();
        if nick.is_empty() || nick.chars().count() > 32 {
            return Err(error(errors::BAD_NICK, "a nickname has 1 to 32 characters"));
        }
        let mut in_use = taken.0.0.lock().expect("nicknames");
        if !in_use.insert(nick.clone()) {
            return Err(error(errors::BAD_NICK, format!("{nick} is taken")));
        }
        if let Some(Nickname(old)) = ctx.store().insert(Nickname(nick)) {
            in_use.remove(&old);
        }
        Ok(())
    }

    fn join_room(
        request: JoinRoom,
        ctx: &Context,
        nick: Stored<Nickname>,
    ) -> Result<RoomInfo, HandlerError> {
        let Some(Nickname(nick)) = nick.0 else {
            return Err(error(errors::NO_NICK, "set a nickname first"));
        };
        let room = request.room.trim().to_owned();
        if room.is_empty() || room.chars().count() > 64 {
            return Err(error(
                errors::BAD_TEXT,
                "a room name has 1 to 64 characters",
            ));
        }
        let hub = ctx.hub();
        if !hub.members(&room).contains(&ctx.connection_id()) {
            hub.join(&room, ctx.connection_id());
            if !ctx.store().contains::<Rooms>() {
                ctx.store().insert(Rooms::default());
            }
            ctx.store()
                .with(|rooms: &mut Rooms| rooms.0.push(room.clone()));
            let _ = hub.broadcast_group(
                &room,
                &UserJoined {
                    room: room.clone(),
                    nick,
                },
            );
        }
        Ok(RoomInfo {
            members: member_nicks(&hub, &room),
            room,
        })
    }

    fn leave_room(
        request: LeaveRoom,
        ctx: &Context,
        nick: Stored<Nickname>,
    ) -> Result<(), HandlerError> {
        let hub = ctx.hub();
        if !hub.leave(&request.room, ctx.connection_id()) {
            return Err(error(
                errors::NOT_IN_ROOM,
                format!("you are not in {}", request.room),
            ));
        }
        ctx.store()
            .with(|rooms: &mut Rooms| rooms.0.retain(|room| room != &request.room));
        let nick = nick.0.map(|nick| nick.0).unwrap_or_default();
        let left = UserLeft {
            room: request.room,
            nick,
        };
        let _ = hub.broadcast_group(&left.room, &left);
        Ok(())
    }

    fn say(request: Say, ctx: &Context, nick: Stored<Nickname>) -> Result<(), HandlerError> {
        let Some(Nickname(nick)) = nick.0 else {
            return Err(error(errors::NO_NICK, "set a nickname first"));
        };
        if request.text.is_empty() || request.text.chars().count() > 2000 {
            return Err(error(
                errors::BAD_TEXT,
                "a message has 1 to 2,000 characters",
            ));
        }
        let hub = ctx.hub();
        if !hub.members(&request.room).contains(&ctx.connection_id()) {
            return Err(error(
                errors::NOT_IN_ROOM,
                format!("join {} first", request.room),
            ));
        }
        let message = ChatMessage {
            room: request.room,
            nick,
            text: request.text,
        };
        let _ = hub.broadcast_group(&message.room, &message);
        Ok(())
    }
}

/// Tells the rooms of a closed connection that it left, and frees its nickname.
fn on_disconnect(connection: &ConnectionHandle) {
    let Some(Nickname(nick)) = connection.store().get::<Nickname>() else {
        return;
    };
    if let Some(nicknames) = connection.state::<Nicknames>() {
        nicknames.0.lock().expect("nicknames").remove(&nick);
    }
    let hub = connection.hub();
    for room in connection.store().get::<Rooms>().unwrap_or_default().0 {
        let _ = hub.broadcast_group(
            &room,
            &UserLeft {
                room: room.clone(),
                nick: nick.clone(),
            },
        );
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let mut builder = Server::builder()
        .state(Nicknames::default())
        .map_tcp(args.tcp)
        .map_websocket(args.ws, "/ws")
        .on_disconnect(|connection, _cause| on_disconnect(connection));
    if args.audit {
        builder = builder.middleware(AuditLog);
    }
    let server = builder.build()?;
    for address in server.tcp_addrs() {
        println!("chat over tcp on {address}");
    }
    for address in server.websocket_addrs() {
        println!("chat over websocket on ws://{address}/ws");
    }
    let handle = server.handle();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            handle.shutdown();
        }
    });
    server.run().await?;
    Ok(())
}
