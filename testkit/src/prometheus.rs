//! Reading a server's Prometheus endpoint (`ServerBuilder::prometheus`).

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The text the endpoint at `address` serves, HTTP head included (empty
/// while it is not up).
pub async fn scrape(address: SocketAddr) -> String {
    let Ok(mut stream) = TcpStream::connect(address).await else {
        return String::new();
    };
    let request = b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    if stream.write_all(request).await.is_err() {
        return String::new();
    }
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text).await;
    text
}

/// The value of the sample whose line is `series` (name and labels as the
/// endpoint writes them) followed by its value.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|line| line.starts_with(series) && line[series.len()..].starts_with(' '))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}
