//! `ServerBuilder::reuse_port`: servers on separate current-thread
//! runtimes, one per thread, listening on the same port (Linux only), and
//! the bind that fails without it.

#![cfg(target_os = "linux")]

use std::net::SocketAddr;
use std::sync::mpsc;
use std::thread::JoinHandle;

use ternio::{BuildError, ServerHandle};
use ternio_tests::*;

/// Starts, on a thread of its own with a current-thread runtime, a test
/// server on `address` with `reuse_port` set; returns where it listens,
/// its handle and the thread (which ends once the server shut down).
fn start_on_own_runtime(address: SocketAddr) -> (SocketAddr, ServerHandle, JoinHandle<()>) {
    let (sender, receiver) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let server = test_server_builder()
                .map_tcp(address)
                .reuse_port(true)
                .build()
                .expect("a server with reuse_port binds a shared port");
            sender
                .send((server.tcp_addrs()[0], server.handle()))
                .unwrap();
            server.run().await.unwrap();
        });
    });
    let (address, handle) = receiver.recv().expect("the server thread started");
    (address, handle, thread)
}

/// Two servers, each on its own current-thread runtime, bound to one port
/// with `reuse_port`: connections to that port are all served, and the
/// kernel spreads them over both servers.
#[tokio::test]
async fn two_servers_on_their_own_runtimes_share_a_port() {
    let (first, first_handle, first_thread) = start_on_own_runtime("127.0.0.1:0".parse().unwrap());
    let (second, second_handle, second_thread) = start_on_own_runtime(first);
    assert_eq!(first, second);

    let mut connections = Vec::new();
    // Request id 0 asks for no answer: ids from 1.
    for id in 1..=32u32 {
        let mut raw = RawConnection::connect(first).await;
        raw.request(&Add { a: 2, b: 3 }, id).await;
        let frame = raw.recv().await.expect("every connection is served");
        assert_eq!(frame.header.request_id, id);
        connections.push(raw);
    }
    let counts = (
        first_handle.connection_count(),
        second_handle.connection_count(),
    );
    assert_eq!(counts.0 + counts.1, 32, "{counts:?}");
    assert!(
        counts.0 > 0 && counts.1 > 0,
        "the kernel spread 32 connections over both servers: {counts:?}"
    );

    drop(connections);
    assert!(first_handle.shutdown_and_wait().await);
    assert!(second_handle.shutdown_and_wait().await);
    for thread in [first_thread, second_thread] {
        tokio::task::spawn_blocking(move || thread.join().unwrap())
            .await
            .unwrap();
    }
}

/// Whether building a server on `address` failed because the address is
/// in use.
fn in_use(result: Result<ternio::Server, BuildError>) -> bool {
    match result {
        Err(BuildError::Bind { source, .. }) => source.kind() == std::io::ErrorKind::AddrInUse,
        Err(other) => panic!("unexpected error {other}"),
        Ok(_) => false,
    }
}

/// Without `reuse_port`, a second server cannot bind a port a first one
/// listens on; nor with it, when the first did not set it too.
#[tokio::test]
async fn without_reuse_port_the_second_bind_fails() {
    let first = test_server_builder()
        .map_tcp("127.0.0.1:0")
        .build()
        .unwrap();
    let address = first.tcp_addrs()[0];
    assert!(in_use(test_server_builder().map_tcp(address).build()));
    assert!(in_use(
        test_server_builder()
            .map_tcp(address)
            .reuse_port(true)
            .build()
    ));

    let shared = test_server_builder()
        .map_tcp("127.0.0.1:0")
        .reuse_port(true)
        .build()
        .unwrap();
    let address = shared.tcp_addrs()[0];
    assert!(in_use(test_server_builder().map_tcp(address).build()));
    let joined = test_server_builder()
        .map_tcp(address)
        .reuse_port(true)
        .build()
        .expect("a second server with reuse_port binds the same port");
    assert_eq!(joined.tcp_addrs()[0], address);
    drop((first, shared, joined));
}

/// The option is off by default.
#[test]
fn reuse_port_is_off_by_default() {
    assert!(!ternio::ServerConfig::default().reuse_port);
}
