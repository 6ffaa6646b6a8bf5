//! A game tick's broadcast: 64 packets to the 100 members of a room, over
//! real sockets, through public APIs only. The server runs on a
//! current-thread runtime in its own thread; the members are blocking
//! sockets that the bench reads until each has all 64 frames. `one_by_one`
//! calls `Hub::broadcast_group` 64 times; `all_at_once` calls
//! `Hub::broadcast_group_all` once (one lookup of the room, and each
//! member's connection locked and woken once for the 64).
//!
//! `cargo bench -p ternio-bench --bench hub`

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use divan::{Bencher, black_box};
use ternio::{Hub, Packet, Server};

fn main() {
    divan::main();
}

/// Members of the room.
const MEMBERS: usize = 100;
/// Packets in one tick.
const TICK: usize = 64;

/// One entity's update, pushed.
#[derive(Clone, Packet)]
#[packet(opcode = 0x0002)]
struct Update {
    entity: u32,
    x: f32,
    y: f32,
}

/// A server on a current-thread runtime in its own thread, with `MEMBERS`
/// connected sockets in the room "room".
fn room() -> (Hub, Vec<TcpStream>) {
    let server = Server::builder()
        .discover_controllers(false)
        .map_tcp("127.0.0.1:0")
        .build()
        .unwrap();
    let address: SocketAddr = server.tcp_addrs()[0];
    let hub = server.handle().hub();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(server.run()).unwrap();
    });
    let members: Vec<TcpStream> = (0..MEMBERS)
        .map(|_| TcpStream::connect(address).unwrap())
        .collect();
    while hub.len() < MEMBERS {
        std::thread::sleep(Duration::from_millis(1));
    }
    for id in hub.connection_ids() {
        hub.join("room", id);
    }
    (hub, members)
}

/// Reads from every member until each has `bytes` more.
fn drain(members: &mut [TcpStream], bytes: usize, buffer: &mut [u8]) {
    let room = buffer.len();
    for member in members {
        let mut left = bytes;
        while left > 0 {
            let read = member.read(&mut buffer[..left.min(room)]).unwrap();
            assert!(read > 0, "the server closed a member");
            left -= read;
        }
    }
}

fn tick() -> Vec<Update> {
    (0..TICK as u32)
        .map(|entity| Update {
            entity,
            x: entity as f32,
            y: 1.5,
        })
        .collect()
}

/// The bytes one member receives for a tick: each frame behind its
/// length prefix.
fn tick_bytes() -> usize {
    TICK * (4 + 7 + 12)
}

/// Times `broadcast` of a tick, until every member has read it.
fn bench_tick(bencher: Bencher, broadcast: impl Fn(&Hub, &[Update])) {
    let (hub, mut members) = room();
    let updates = tick();
    let mut buffer = vec![0u8; 64 * 1024];
    bencher
        .counter(divan::counter::ItemsCount::new(TICK * MEMBERS))
        .bench_local(|| {
            broadcast(&hub, &updates);
            drain(&mut members, tick_bytes(), &mut buffer);
        });
}

#[divan::bench(sample_count = 200)]
fn one_by_one(bencher: Bencher) {
    bench_tick(bencher, |hub, updates| {
        for update in updates {
            black_box(hub.broadcast_group("room", update).unwrap());
        }
    });
}

#[divan::bench(sample_count = 200)]
fn all_at_once(bencher: Bencher) {
    bench_tick(bencher, |hub, updates| {
        black_box(hub.broadcast_group_all("room", updates).unwrap());
    });
}
