//! Metrics through the Prometheus endpoint: the counters that the server's
//! traffic must move, read over HTTP as Prometheus would.

use std::time::Duration;

use ternio::Server;
use ternio::protocol::ErrorCode;
use ternio_client::Client;
use ternio_tests::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The text the endpoint serves.
async fn scrape(address: std::net::SocketAddr) -> String {
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).await.unwrap();
    text
}

/// The value of the sample whose line starts with `series`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|line| line.starts_with(series) && line[series.len()..].starts_with(' '))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}

#[tokio::test]
async fn the_prometheus_endpoint_counts_the_traffic() {
    let metrics_address = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let server = Server::builder()
        .discover_controllers(false)
        .controller(TestController)
        .state(Counter::default())
        .map_tcp("127.0.0.1:0")
        .prometheus(metrics_address)
        .build()
        .unwrap();
    let address = server.tcp_addrs()[0];
    tokio::spawn(server.run());

    let client = Client::connect_tcp(address).await.unwrap();
    for _ in 0..3 {
        let sum: Sum = client.request_async(&Add { a: 1, b: 2 }).await.unwrap();
        assert_eq!(sum, Sum(3));
    }
    let error = client
        .request_async::<_, Sum>(&Unhandled)
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::UnknownOpcode));
    let error = client
        .request_async::<_, Sum>(&Fail {
            code: 404,
            message: "x".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::Application(404)));
    let mut raw = RawConnection::connect(address).await;
    raw.send_raw(&[0xFF, 0xFF, 0xFF, 0x7F]).await.unwrap();
    while raw.recv().await.is_some() {}

    // The endpoint starts with the server; read until it counts the close
    // (for up to 10 s).
    let mut text = String::new();
    for _ in 0..200 {
        text = scrape(metrics_address).await;
        if sample(
            &text,
            "ternio_disconnects_total{reason=\"FRAME_TOO_LARGE\"}",
        ) == Some(1.0)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        sample(&text, "ternio_connections{transport=\"tcp\"}"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "ternio_requests_total{opcode=\"0x0010\",handler=\"TestController::add\"}"
        ),
        Some(3.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "ternio_errors_total{code=\"1\"}"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "ternio_errors_total{code=\"application\"}"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "ternio_disconnects_total{reason=\"FRAME_TOO_LARGE\"}"
        ),
        Some(1.0),
        "{text}"
    );
    // Five requests in, five replies out (frames and bytes both ways).
    assert_eq!(
        sample(&text, "ternio_frames_received_total{transport=\"tcp\"}"),
        Some(5.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "ternio_frames_sent_total{transport=\"tcp\"}"),
        Some(5.0),
        "{text}"
    );
    assert!(sample(&text, "ternio_bytes_received_total{transport=\"tcp\"}").unwrap_or(0.0) > 0.0);
    assert!(sample(&text, "ternio_bytes_sent_total{transport=\"tcp\"}").unwrap_or(0.0) > 0.0);
    assert!(text.contains("ternio_request_duration_seconds"), "{text}");
}
