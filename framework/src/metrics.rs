//! The server's metrics, for the operators who scrape them.
//!
//! [`ServerBuilder::metrics`](crate::ServerBuilder::metrics) records them
//! through the [`metrics`](https://docs.rs/metrics) facade, to whatever
//! recorder the application installed;
//! `ServerBuilder::prometheus(address)` (feature `prometheus`) installs
//! metrics-exporter-prometheus and serves them at `http://address/metrics`.
//! Off, each event costs one branch; on, every handle is registered once
//! when the server is built, so recording is a call on a handle and
//! allocates nothing.
//!
//! They follow the Prometheus conventions: every family has a `# HELP`
//! line (given through `describe_*`, with its unit), counters end in
//! `_total`, units are in the name (`_seconds`, `_bytes`), and label values
//! are lower-case names (`tcp`, `slow_consumer`), never numeric codes. The
//! exceptions are the labels that identify a handler: `handler` is its name
//! as registered (`Controller::method`) and `opcode` its opcode in hex
//! (`0x0010`), which keeps two handlers of the same name apart.
//!
//! | name | kind | labels | what |
//! |---|---|---|---|
//! | `ternio_connections` | gauge | `transport` | connections open now |
//! | `ternio_received_frames_total` | counter | `transport` | frames received |
//! | `ternio_received_bytes_total` | counter | `transport` | bytes received (over TCP, as read from the socket; over WebSocket, the binary messages' payloads) |
//! | `ternio_sent_frames_total` | counter | `transport` | frames sent: replies and pushes |
//! | `ternio_sent_bytes_total` | counter | `transport` | bytes sent (over TCP, as written to the socket; over WebSocket, the binary messages' payloads) |
//! | `ternio_requests_total` | counter | `opcode`, `handler` | requests handled, whatever their outcome |
//! | `ternio_request_duration_seconds` | histogram | `opcode`, `handler` | from dispatch to reply, buckets [`REQUEST_DURATION_BUCKETS`] |
//! | `ternio_errors_total` | counter | `code` | error replies sent, by the code's name: `unknown_opcode`, `malformed`, `unauthorized`, `rate_limited`, `timeout`, `encryption_required`, `internal`, `overloaded`, `handshake_failed`, `decrypt_failed`, or `application` (codes 100 and above), `unassigned` (0, 11 to 99) |
//! | `ternio_handshakes_total` | counter | `result` | secure handshakes: `ok`, `failed` |
//! | `ternio_disconnects_total` | counter | `reason` | connections closed, by the `DISCONNECT` reason's name either side sent (`normal`, `shutdown`, `malformed`, `frame_too_large`, `idle_timeout`, `handshake_timeout`, `decrypt_failed`, `too_many_connections`, `slow_consumer`, `kicked`, `other`), or `peer_closed` (closed without one), `failed` (an I/O error), `resume_expired` (a suspended session's client did not come back in time), `resume_lost` (a suspended session could no longer be resumed), `resumed` (a link that resumed another session: its own ends) |
//! | `ternio_refused_connections_total` | counter | `transport`, `reason` | connections refused before they were served: `total`, `per_ip`, `rate`, `pending` (the caps of [`ServerConfig`](crate::ServerConfig)), `proxy_header` (a trusted proxy's connection without a valid PROXY header in time) |
//! | `ternio_room_ticks_total` | counter | — | ticks run by the rooms of [`ternio::room`](crate::room), all rooms together |
//! | `ternio_room_skipped_ticks_total` | counter | — | ticks not run because a room's task woke up more than a period late |
//! | `ternio_room_late_ticks_total` | counter | — | ticks that started more than a tenth of a period late |
//! | `ternio_room_overruns_total` | counter | — | ticks whose work took longer than a period |
//! | `ternio_room_tick_duration_seconds` | histogram | — | a tick's work (joins, simulation, sending), buckets [`REQUEST_DURATION_BUCKETS`] |
//! | `ternio_room_snapshots_total` | counter | — | snapshots the members' connections took |
//! | `ternio_room_refused_inputs_total` | counter | — | inputs refused because the member's queue was full |
//!
//! The room families have no `room` label: rooms may be many and short
//! lived, and a label per room would make a series per room. They are
//! recorded whether or not [`ServerBuilder::metrics`](crate::ServerBuilder::metrics)
//! is on, to the recorder installed when the room started (none: nothing).
//!
//! The Redis backplane (`ternio-redis`) adds its own `ternio_backplane_*`
//! family, labelled `node`.
//!
//! **Histograms.** With `prometheus`, the request durations are a
//! Prometheus histogram with the fixed buckets of
//! [`REQUEST_DURATION_BUCKETS`] (`_bucket{le="…"}`, `_sum`, `_count`), so
//! quantiles can be taken over any set of nodes:
//! `histogram_quantile(0.99, sum by (le, handler) (rate(ternio_request_duration_seconds_bucket[5m])))`.
//! An application that installs its own recorder should give that
//! histogram the same buckets
//! (`PrometheusBuilder::set_buckets_for_metric`), since
//! metrics-exporter-prometheus otherwise renders a summary, whose
//! quantiles cannot be added across nodes.
//!
//! **Renamed** (before 1.0): `ternio_frames_received_total`,
//! `ternio_bytes_received_total`, `ternio_frames_sent_total`,
//! `ternio_bytes_sent_total` are now `ternio_received_frames_total`,
//! `ternio_received_bytes_total`, `ternio_sent_frames_total`,
//! `ternio_sent_bytes_total`; the `code` label of `ternio_errors_total`
//! carries names (`unknown_opcode`) instead of numbers (`1`), and
//! codes no one assigned count as `unassigned`, no longer as
//! `application`; the
//! `reason` label of `ternio_disconnects_total` is lower-case
//! (`frame_too_large`, was `FRAME_TOO_LARGE`).
//!
//! `docs/grafana-dashboard.json` is a Grafana dashboard over these names.

use metrics::{
    Counter, Gauge, Histogram, Unit, counter, describe_counter, describe_gauge, describe_histogram,
    gauge, histogram,
};
use ternio_protocol::{DisconnectReason, ErrorCode};

use crate::close::CloseCause;
use crate::ids::Transport;

/// The upper bounds, in seconds, of the request-duration histogram's
/// buckets: from 10 µs to 10 s, three to a decade (1, 2.5, 5), so that a
/// quantile read between two bounds is off by at most that ratio. An
/// inline handler takes a few microseconds (under 10 µs in a debug build
/// on the test machine) and lands in the first buckets, a request that
/// waits on a database or another service from a millisecond up; slower
/// than 10 s, it counts in `+Inf` only. Each handler has 20 series
/// (19 bounds and `+Inf`), plus `_sum` and `_count`.
pub const REQUEST_DURATION_BUCKETS: [f64; 19] = [
    0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025,
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The name of the request-duration histogram.
pub(crate) const REQUEST_DURATION: &str = "ternio_request_duration_seconds";

/// The name of the rooms' tick-duration histogram.
pub(crate) const ROOM_TICK_DURATION: &str = "ternio_room_tick_duration_seconds";

/// The Prometheus exporter's builder with the buckets of the server's
/// histograms.
#[cfg(feature = "prometheus")]
pub(crate) fn prometheus_builder()
-> Result<metrics_exporter_prometheus::PrometheusBuilder, metrics_exporter_prometheus::BuildError> {
    metrics_exporter_prometheus::PrometheusBuilder::new()
        .set_buckets_for_metric(
            metrics_exporter_prometheus::Matcher::Full(REQUEST_DURATION.to_owned()),
            &REQUEST_DURATION_BUCKETS,
        )?
        .set_buckets_for_metric(
            metrics_exporter_prometheus::Matcher::Full(ROOM_TICK_DURATION.to_owned()),
            &REQUEST_DURATION_BUCKETS,
        )
}

/// Gives every metric of the table above its `# HELP` text and unit, in
/// the recorder installed now.
fn describe() {
    describe_gauge!(
        "ternio_connections",
        Unit::Count,
        "Connections open now, by transport."
    );
    describe_counter!(
        "ternio_received_frames_total",
        Unit::Count,
        "Frames received, by transport."
    );
    describe_counter!(
        "ternio_received_bytes_total",
        Unit::Bytes,
        "Bytes received, by transport."
    );
    describe_counter!(
        "ternio_sent_frames_total",
        Unit::Count,
        "Frames sent (replies and pushes), by transport."
    );
    describe_counter!(
        "ternio_sent_bytes_total",
        Unit::Bytes,
        "Bytes sent, by transport."
    );
    describe_counter!(
        "ternio_requests_total",
        Unit::Count,
        "Requests handled, whatever their outcome, by handler."
    );
    describe_histogram!(
        REQUEST_DURATION,
        Unit::Seconds,
        "Time from dispatch to reply, by handler."
    );
    describe_counter!(
        "ternio_errors_total",
        Unit::Count,
        "Error replies sent, by the error code's name."
    );
    describe_counter!(
        "ternio_handshakes_total",
        Unit::Count,
        "Secure handshakes, by result (ok, failed)."
    );
    describe_counter!(
        "ternio_disconnects_total",
        Unit::Count,
        "Connections closed, by reason."
    );
    describe_counter!(
        "ternio_refused_connections_total",
        Unit::Count,
        "Connections refused before they were served, by transport and reason."
    );
}

/// Gives the rooms' metrics their `# HELP` text and unit.
fn describe_rooms() {
    describe_counter!(
        "ternio_room_ticks_total",
        Unit::Count,
        "Ticks run by the rooms, all rooms together."
    );
    describe_counter!(
        "ternio_room_skipped_ticks_total",
        Unit::Count,
        "Room ticks not run because the room's task woke up more than a period late."
    );
    describe_counter!(
        "ternio_room_late_ticks_total",
        Unit::Count,
        "Room ticks that started more than a tenth of a period late."
    );
    describe_counter!(
        "ternio_room_overruns_total",
        Unit::Count,
        "Room ticks whose work took longer than a period."
    );
    describe_histogram!(
        ROOM_TICK_DURATION,
        Unit::Seconds,
        "Time a room's tick took: joins, simulation, sending."
    );
    describe_counter!(
        "ternio_room_snapshots_total",
        Unit::Count,
        "Snapshots the rooms' members' connections took."
    );
    describe_counter!(
        "ternio_room_refused_inputs_total",
        Unit::Count,
        "Room inputs refused because the member's queue was full."
    );
}

/// The handles a room records its metrics on (no labels: see the table).
pub(crate) struct RoomMetrics {
    pub(crate) ticks: Counter,
    pub(crate) skipped: Counter,
    pub(crate) late: Counter,
    pub(crate) overruns: Counter,
    pub(crate) duration: Histogram,
    pub(crate) snapshots: Counter,
    pub(crate) inputs_refused: Counter,
}

impl RoomMetrics {
    /// Registers the handles with the recorder installed now.
    pub(crate) fn new() -> Self {
        describe_rooms();
        Self {
            ticks: counter!("ternio_room_ticks_total"),
            skipped: counter!("ternio_room_skipped_ticks_total"),
            late: counter!("ternio_room_late_ticks_total"),
            overruns: counter!("ternio_room_overruns_total"),
            duration: histogram!(ROOM_TICK_DURATION),
            snapshots: counter!("ternio_room_snapshots_total"),
            inputs_refused: counter!("ternio_room_refused_inputs_total"),
        }
    }
}

/// A name as a label value: lower case (`FRAME_TOO_LARGE` is
/// `frame_too_large`).
fn label(name: &str) -> String {
    name.to_ascii_lowercase()
}

/// Counters of one transport.
pub(crate) struct TransportMetrics {
    pub(crate) connections: Gauge,
    pub(crate) frames_in: Counter,
    pub(crate) bytes_in: Counter,
    pub(crate) frames_out: Counter,
    pub(crate) bytes_out: Counter,
    /// Connections refused before admission, by [`REFUSALS`] index.
    refused: [Counter; REFUSALS.len()],
}

/// The reasons a connection is refused before it is served: the limits
/// ([`Refusal::name`](crate::admission::Refusal::name)), and `proxy_header`
/// for a trusted proxy's connection without a valid PROXY header in time.
pub(crate) const REFUSALS: [&str; 5] = ["total", "per_ip", "rate", "pending", "proxy_header"];

impl TransportMetrics {
    fn new(transport: &'static str) -> Self {
        Self {
            connections: gauge!("ternio_connections", "transport" => transport),
            frames_in: counter!("ternio_received_frames_total", "transport" => transport),
            bytes_in: counter!("ternio_received_bytes_total", "transport" => transport),
            frames_out: counter!("ternio_sent_frames_total", "transport" => transport),
            bytes_out: counter!("ternio_sent_bytes_total", "transport" => transport),
            refused: REFUSALS.map(|reason| {
                counter!("ternio_refused_connections_total", "transport" => transport, "reason" => reason)
            }),
        }
    }

    /// Counts a connection refused for `reason` (one of [`REFUSALS`]).
    pub(crate) fn refused(&self, reason: &str) {
        if let Some(index) = REFUSALS.iter().position(|known| *known == reason) {
            self.refused[index].increment(1);
        }
    }
}

/// Requests and latency of one handler.
pub(crate) struct HandlerMetrics {
    pub(crate) requests: Counter,
    pub(crate) duration: Histogram,
}

impl HandlerMetrics {
    pub(crate) fn new(opcode: u16, handler: &'static str) -> Self {
        let opcode = format!("{opcode:#06x}");
        Self {
            requests: counter!("ternio_requests_total", "opcode" => opcode.clone(), "handler" => handler),
            duration: histogram!(REQUEST_DURATION, "opcode" => opcode, "handler" => handler),
        }
    }
}

/// Every metric handle of a server; `None` when metrics are off.
pub(crate) struct Metrics {
    tcp: TransportMetrics,
    websocket: TransportMetrics,
    /// Errors by code 1 to 10; index 0 counts application codes, index 11
    /// the codes no one assigned.
    errors: [Counter; 12],
    handshakes_ok: Counter,
    handshakes_failed: Counter,
    /// Disconnects by reason 1 to 10; index 0 counts other reasons.
    disconnects: [Counter; 11],
    peer_closed: Counter,
    failed: Counter,
    resume_expired: Counter,
    resume_lost: Counter,
    resumed: Counter,
}

impl Metrics {
    pub(crate) fn new() -> Self {
        describe();
        Self {
            tcp: TransportMetrics::new("tcp"),
            websocket: TransportMetrics::new("websocket"),
            errors: std::array::from_fn(|index| {
                let code = match index {
                    0 => ErrorCode::from_u16(ErrorCode::FIRST_APPLICATION),
                    11 => ErrorCode::Unassigned(0),
                    code => ErrorCode::from_u16(code as u16),
                };
                counter!("ternio_errors_total", "code" => label(code.name()))
            }),
            handshakes_ok: counter!("ternio_handshakes_total", "result" => "ok"),
            handshakes_failed: counter!("ternio_handshakes_total", "result" => "failed"),
            disconnects: std::array::from_fn(|reason| {
                let name = match reason {
                    0 => "other".to_owned(),
                    reason => label(DisconnectReason::from_u16(reason as u16).name()),
                };
                counter!("ternio_disconnects_total", "reason" => name)
            }),
            peer_closed: counter!("ternio_disconnects_total", "reason" => "peer_closed"),
            failed: counter!("ternio_disconnects_total", "reason" => "failed"),
            resume_expired: counter!("ternio_disconnects_total", "reason" => "resume_expired"),
            resume_lost: counter!("ternio_disconnects_total", "reason" => "resume_lost"),
            resumed: counter!("ternio_disconnects_total", "reason" => "resumed"),
        }
    }

    pub(crate) fn transport(&self, transport: Transport) -> &TransportMetrics {
        match transport {
            Transport::Tcp => &self.tcp,
            Transport::WebSocket => &self.websocket,
        }
    }

    pub(crate) fn error(&self, code: u16) {
        let index = match ErrorCode::from_u16(code) {
            ErrorCode::Application(_) => 0,
            ErrorCode::Unassigned(_) => 11,
            known => usize::from(known.to_u16()),
        };
        self.errors[index].increment(1);
    }

    pub(crate) fn handshake(&self, ok: bool) {
        if ok {
            &self.handshakes_ok
        } else {
            &self.handshakes_failed
        }
        .increment(1);
    }

    pub(crate) fn disconnect(&self, cause: &CloseCause) {
        match cause {
            CloseCause::PeerDisconnected(reason) | CloseCause::Disconnected(reason) => {
                let index = match reason.to_u16() {
                    code @ 1..=10 => usize::from(code),
                    _ => 0,
                };
                self.disconnects[index].increment(1);
            }
            CloseCause::PeerClosed => self.peer_closed.increment(1),
            CloseCause::Failed(_) => self.failed.increment(1),
            CloseCause::ResumeExpired => self.resume_expired.increment(1),
            CloseCause::ResumeLost => self.resume_lost.increment(1),
            CloseCause::Resumed => self.resumed.increment(1),
        }
    }
}
