//! Metrics through the Prometheus endpoint, read over HTTP as Prometheus
//! would: the counters that the server's traffic must move, the Prometheus
//! conventions they follow (`# HELP` for every family, `_total` counters,
//! a request-duration histogram with buckets, label values that are
//! lower-case names), the table of `ternio::metrics` and the Grafana
//! dashboard of docs/ against what the endpoint exports.
//!
//! The Prometheus recorder is global to the process: this binary has one
//! test, which builds the one server that installs it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ternio::metrics::REQUEST_DURATION_BUCKETS;
use ternio::protocol::ErrorCode;
use ternio_client::Client;
use ternio_tests::*;

/// One sample line of the exposition format.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

/// The sample lines of `text` (the HTTP head and the `#` lines skipped).
fn samples(text: &str) -> Vec<Sample> {
    let body = text.split_once("\r\n\r\n").map_or(text, |(_, body)| body);
    body.lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("a value");
            let (name, labels) = match series.split_once('{') {
                Some((name, labels)) => (name, labels.strip_suffix('}').expect("a closing brace")),
                None => (series, ""),
            };
            Sample {
                name: name.to_owned(),
                labels: parse_labels(labels),
                value: value
                    .parse()
                    .unwrap_or_else(|_| panic!("a number in {line:?}")),
            }
        })
        .collect()
}

/// `a="x",b="y"` as pairs (values without quotes or escapes, as the
/// server's are).
fn parse_labels(labels: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    let mut rest = labels;
    while !rest.is_empty() {
        let (key, after) = rest.split_once("=\"").expect("key=\"value\"");
        let (value, after) = after.split_once('"').expect("a closing quote");
        pairs.push((key.to_owned(), value.to_owned()));
        rest = after.strip_prefix(',').unwrap_or(after);
    }
    pairs
}

/// The `# TYPE` lines of `text`: each family and its kind.
fn families(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .map(|line| {
            let (name, kind) = line.split_once(' ').expect("# TYPE name kind");
            (name.to_owned(), kind.to_owned())
        })
        .collect()
}

/// The family a sample belongs to: its name, or a histogram's name for its
/// `_bucket`, `_sum` and `_count` series.
fn family_of<'a>(name: &'a str, families: &BTreeMap<String, String>) -> &'a str {
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix)
            && families.get(base).map(String::as_str) == Some("histogram")
        {
            return base;
        }
    }
    name
}

/// Every `ternio_…` name in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(start) = rest.find("ternio_") {
        let tail = &rest[start..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_owned());
        rest = &tail[end..];
    }
    names
}

#[tokio::test]
async fn the_prometheus_endpoint_counts_the_traffic_by_the_conventions() {
    let metrics_address = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let server = test_server_builder()
        .map_tcp("127.0.0.1:0")
        .prometheus(metrics_address)
        .build()
        .unwrap();
    let address = server.tcp_addrs()[0];
    let handle = server.handle();
    tokio::spawn(server.run());

    let client = Client::connect_tcp(address).await.unwrap();
    for _ in 0..3 {
        let sum: Sum = client.request_async(&Add { a: 1, b: 2 }).await.unwrap();
        assert_eq!(sum, Sum(3));
    }
    rooms_count_their_ticks(&handle.hub(), metrics_address).await;
    let error = client.request_as::<()>(&Unhandled).await.unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::UnknownOpcode));
    let error = client
        .request_async(&Fail {
            code: 404,
            message: "x".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::from_u16(404)));
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
            "ternio_disconnects_total{reason=\"frame_too_large\"}",
        ) == Some(1.0)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    counts_the_traffic(&text);
    durations_are_a_histogram_with_buckets(&text);
    follows_the_conventions(&text);
    the_table_lists_what_is_exported(&text);
    the_dashboard_queries_what_is_exported(&text);
}

/// A room of one member (the client's connection): ticks, an overrun (a
/// tick that sleeps past its period), an input refused (a bound of one);
/// read back from the endpoint. It sends no snapshot: the traffic counted
/// below is the requests' alone.
async fn rooms_count_their_ticks(hub: &ternio::Hub, metrics_address: std::net::SocketAddr) {
    use ternio::room::{InputError, Inputs, Room, RoomConfig, Simulation, Snapshots, TickRate};

    struct Slow;
    impl Simulation for Slow {
        type Input = ();
        type Snapshot = Sum;
        fn tick(&mut self, tick: u64, _: &mut Inputs<()>, _: &mut Snapshots<Sum>) {
            if tick == 3 {
                std::thread::sleep(Duration::from_millis(30));
            }
        }
    }

    let member = hub.connection_ids()[0];
    let room = Room::start_with(
        hub.clone(),
        "metrics",
        TickRate::hz(50),
        RoomConfig { max_inputs: 1 },
        Slow,
    );
    assert!(room.join(member));
    eventually("an input refused", || {
        let _ = room.input(member, ());
        room.input(member, ()) == Err(InputError::Full)
    })
    .await;
    eventually("an overrun", || room.stats().overruns >= 1).await;
    room.stop();
    eventually("the room stopped", || !room.is_running()).await;
    let text = scrape(metrics_address).await;
    let stats_after = room.stats();
    assert_eq!(
        sample(&text, "ternio_room_ticks_total"),
        Some(stats_after.ticks as f64),
        "{text}"
    );
    assert!(sample(&text, "ternio_room_overruns_total") >= Some(1.0));
    assert_eq!(
        sample(&text, "ternio_room_refused_inputs_total"),
        Some(stats_after.inputs_refused as f64)
    );
    assert_eq!(sample(&text, "ternio_room_snapshots_total"), Some(0.0));
    assert_eq!(
        sample(&text, "ternio_room_tick_duration_seconds_count"),
        Some(stats_after.ticks as f64),
        "{text}"
    );
    assert!(sample(&text, "ternio_room_late_ticks_total").is_some());
    assert!(sample(&text, "ternio_room_skipped_ticks_total").is_some());
}

fn counts_the_traffic(text: &str) {
    assert_eq!(
        sample(text, "ternio_connections{transport=\"tcp\"}"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            text,
            "ternio_requests_total{opcode=\"0x0010\",handler=\"TestController::add\"}"
        ),
        Some(3.0),
        "{text}"
    );
    assert_eq!(
        sample(text, "ternio_errors_total{code=\"unknown_opcode\"}"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(text, "ternio_errors_total{code=\"application\"}"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(text, "ternio_disconnects_total{reason=\"frame_too_large\"}"),
        Some(1.0),
        "{text}"
    );
    // Five requests in, five replies out (frames and bytes both ways).
    assert_eq!(
        sample(text, "ternio_received_frames_total{transport=\"tcp\"}"),
        Some(5.0),
        "{text}"
    );
    assert_eq!(
        sample(text, "ternio_sent_frames_total{transport=\"tcp\"}"),
        Some(5.0),
        "{text}"
    );
    assert!(sample(text, "ternio_received_bytes_total{transport=\"tcp\"}").unwrap_or(0.0) > 0.0);
    assert!(sample(text, "ternio_sent_bytes_total{transport=\"tcp\"}").unwrap_or(0.0) > 0.0);
}

/// A histogram, not a summary: one `_bucket` line per bound of
/// `REQUEST_DURATION_BUCKETS` and `+Inf`, counts that never go down, and
/// `+Inf` equal to `_count`.
fn durations_are_a_histogram_with_buckets(text: &str) {
    let name = "ternio_request_duration_seconds";
    assert_eq!(
        families(text).get(name).map(String::as_str),
        Some("histogram"),
        "{text}"
    );
    let add = |sample: &Sample| {
        sample
            .labels
            .iter()
            .any(|(key, value)| key == "handler" && value == "TestController::add")
    };
    let samples = samples(text);
    let buckets: Vec<(f64, f64)> = samples
        .iter()
        .filter(|sample| sample.name == format!("{name}_bucket") && add(sample))
        .map(|sample| {
            let (_, le) = sample
                .labels
                .iter()
                .find(|(key, _)| key == "le")
                .expect("an le label");
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            };
            (le, sample.value)
        })
        .collect();
    let bounds: Vec<f64> = buckets.iter().map(|(le, _)| *le).collect();
    let expected: Vec<f64> = REQUEST_DURATION_BUCKETS
        .iter()
        .copied()
        .chain([f64::INFINITY])
        .collect();
    assert_eq!(bounds, expected, "{text}");
    assert!(
        buckets.windows(2).all(|pair| pair[0].1 <= pair[1].1),
        "{buckets:?}"
    );
    assert_eq!(buckets.last().map(|(_, count)| *count), Some(3.0), "{text}");
    let count = samples
        .iter()
        .find(|sample| sample.name == format!("{name}_count") && add(sample))
        .map(|sample| sample.value);
    assert_eq!(count, Some(3.0), "{text}");
    assert!(!text.contains("quantile="), "a summary: {text}");
}

/// Every family has `# HELP` and `# TYPE`, every sample a family; counters
/// end in `_total`; label values are lower-case names, but a handler's name
/// and its opcode in hex.
fn follows_the_conventions(text: &str) {
    let families = families(text);
    assert!(families.len() >= 11, "{text}");
    let helped: BTreeSet<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("# HELP "))
        .filter(|line| {
            line.split_once(' ')
                .is_some_and(|(_, help)| !help.is_empty())
        })
        .map(|line| line.split_once(' ').unwrap().0)
        .collect();
    for (name, kind) in &families {
        assert!(name.starts_with("ternio_"), "{name}");
        assert!(helped.contains(name.as_str()), "no # HELP for {name}");
        if kind == "counter" {
            assert!(name.ends_with("_total"), "the counter {name}");
        } else {
            assert!(!name.ends_with("_total"), "the {kind} {name}");
        }
    }
    let name_rule = |value: &str| {
        value.starts_with(|c: char| c.is_ascii_lowercase())
            && value
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    for sample in samples(text) {
        let family = family_of(&sample.name, &families);
        assert!(families.contains_key(family), "no # TYPE for {sample:?}");
        for (key, value) in &sample.labels {
            let ok = match key.as_str() {
                "le" => value == "+Inf" || value.parse::<f64>().is_ok(),
                "opcode" => {
                    value.len() == 6
                        && value.starts_with("0x")
                        && value[2..]
                            .chars()
                            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
                }
                "handler" => value.split("::").all(|part| {
                    part.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                        && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                }),
                _ => name_rule(value),
            };
            assert!(ok, "{key}={value:?} in {sample:?}");
        }
    }
}

/// The table at the top of `ternio::metrics` names every family exported,
/// and no other; README's names each.
fn the_table_lists_what_is_exported(text: &str) {
    let source = include_str!("../framework/src/metrics.rs");
    let documented: BTreeSet<String> = source
        .lines()
        .filter_map(|line| line.strip_prefix("//! | `"))
        .filter_map(|line| line.split_once('`'))
        .map(|(name, _)| name.to_owned())
        .collect();
    let exported: BTreeSet<String> = families(text).into_keys().collect();
    assert_eq!(documented, exported);
    let readme = include_str!("../README.md");
    for name in &exported {
        assert!(readme.contains(&format!("`{name}`")), "README lacks {name}");
    }
}

/// docs/grafana-dashboard.json is JSON, and every `ternio_…` name it
/// holds (its queries, its variables) is a family the endpoint exports, or
/// a histogram's `_bucket` series.
fn the_dashboard_queries_what_is_exported(text: &str) {
    let json = include_str!("../docs/grafana-dashboard.json");
    let dashboard: serde_json::Value = serde_json::from_str(json).expect("valid JSON");
    let mut exprs = Vec::new();
    collect_exprs(&dashboard, &mut exprs);
    assert!(exprs.len() >= 10, "{exprs:?}");
    let families = families(text);
    let queried = metric_names(&exprs.join("\n"));
    for name in metric_names(json) {
        let family = family_of(&name, &families);
        assert!(
            families.contains_key(family),
            "the dashboard names {name}, which the server does not export"
        );
    }
    // The panels the dashboard exists for.
    for wanted in [
        "ternio_requests_total",
        "ternio_request_duration_seconds_bucket",
        "ternio_connections",
        "ternio_disconnects_total",
        "ternio_received_bytes_total",
        "ternio_sent_bytes_total",
        "ternio_refused_connections_total",
    ] {
        assert!(queried.contains(wanted), "no panel queries {wanted}");
    }
}

/// The `expr` of every target in `value`.
fn collect_exprs(value: &serde_json::Value, exprs: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("expr", serde_json::Value::String(expr)) => exprs.push(expr.clone()),
                    _ => collect_exprs(value, exprs),
                }
            }
        }
        serde_json::Value::Array(values) => {
            for value in values {
                collect_exprs(value, exprs);
            }
        }
        _ => {}
    }
}
