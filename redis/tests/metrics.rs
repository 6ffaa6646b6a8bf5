//! The backplane's metrics reach the server's Prometheus endpoint, though
//! the backplane connects before `build` installs the recorder: its
//! handles are registered when the server attaches it, with the counts
//! made before, and every family has a `# HELP` text.
//!
//! Its own binary: the Prometheus recorder is global to the process. It
//! starts and owns a `redis-server` (or uses `TERNIO_REDIS_URL`'s).

use std::time::{Duration, Instant};

use ternio::{Packet, Server};
use ternio_redis::{ClusterSecret, RedisBackplane, RedisConfig};
use ternio_testkit::prometheus::{sample, scrape};
use ternio_testkit::redis_server::RedisServer;

/// 0x0600, broadcast to every node.
#[derive(Debug, Clone, PartialEq, Eq, Packet)]
#[packet(opcode = 0x0600)]
struct Note(u32);

#[tokio::test]
async fn the_backplane_metrics_reach_the_servers_prometheus_endpoint() {
    let (url, _server) = match std::env::var("TERNIO_REDIS_URL") {
        Ok(url) if !url.is_empty() => (url, None),
        _ => {
            let server = RedisServer::start();
            (server.url(), Some(server))
        }
    };
    let secret = ClusterSecret::new("the metrics test's secret, 32 B.").unwrap();
    let config = RedisConfig::new(&url, secret)
        .prefix(format!("ternio-test-{}-metrics", std::process::id()));
    let backplane = RedisBackplane::connect(config)
        .await
        .expect("the backplane connects");
    // Up before the recorder exists: the gauge must still read 1.
    assert!(backplane.wait_connected(Duration::from_secs(5)).await);
    let node = backplane.node_id();

    let metrics_address = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let server = Server::builder()
        .discover_controllers(false)
        .backplane(backplane.clone())
        .map_tcp("127.0.0.1:0")
        .prometheus(metrics_address)
        .build()
        .expect("the node builds");
    let hub = server.handle().hub();
    tokio::spawn(server.run());
    hub.broadcast(&Note(1)).expect("broadcast");

    let published = format!("ternio_backplane_published_total{{node=\"{node}\"}}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut text = String::new();
    while Instant::now() < deadline {
        text = scrape(metrics_address).await;
        if sample(&text, &published).unwrap_or(0.0) >= 1.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(sample(&text, &published).unwrap_or(0.0) >= 1.0, "{text}");
    assert_eq!(
        sample(
            &text,
            &format!("ternio_backplane_connected{{node=\"{node}\"}}")
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            &format!("ternio_backplane_rejected_total{{node=\"{node}\",reason=\"forged\"}}")
        ),
        Some(0.0),
        "{text}"
    );
    for (family, kind) in [
        ("ternio_backplane_connected", "gauge"),
        ("ternio_backplane_published_total", "counter"),
        ("ternio_backplane_received_total", "counter"),
        ("ternio_backplane_dropped_total", "counter"),
        ("ternio_backplane_skipped_total", "counter"),
        ("ternio_backplane_disconnects_total", "counter"),
        ("ternio_backplane_reconnects_total", "counter"),
        ("ternio_backplane_rejected_total", "counter"),
    ] {
        assert!(
            text.lines()
                .any(|line| line.starts_with(&format!("# HELP {family} "))),
            "no # HELP for {family}: {text}"
        );
        assert!(
            text.lines()
                .any(|line| line == format!("# TYPE {family} {kind}")),
            "{family} is not a {kind}: {text}"
        );
    }
    backplane.shutdown().await;
}
