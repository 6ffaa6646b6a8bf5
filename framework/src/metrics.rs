//! The server's metrics, through the `metrics` facade: off by default, and
//! then one branch per event; on, every handle is registered once when the
//! server is built, so recording allocates nothing.
//!
//! | name | kind | labels |
//! |---|---|---|
//! | `ternio_connections` | gauge | `transport` |
//! | `ternio_frames_received_total`, `ternio_bytes_received_total` | counter | `transport` |
//! | `ternio_frames_sent_total`, `ternio_bytes_sent_total` | counter | `transport` |
//! | `ternio_requests_total` | counter | `opcode`, `handler` |
//! | `ternio_request_duration_seconds` | histogram | `opcode`, `handler` |
//! | `ternio_errors_total` | counter | `code` (`1`..`10`, or `application`) |
//! | `ternio_handshakes_total` | counter | `result` (`ok`, `failed`) |
//! | `ternio_disconnects_total` | counter | `reason` (the DISCONNECT reason's name, `peer_closed`, `failed`) |
//! | `ternio_refused_connections_total` | counter | `transport`, `reason` (`total`, `per_ip`, `rate`, `pending`, `proxy_header`) |

use metrics::{Counter, Gauge, Histogram, counter, gauge, histogram};
use ternio_protocol::{DisconnectReason, ErrorCode};

use crate::close::CloseCause;
use crate::ids::Transport;

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
            frames_in: counter!("ternio_frames_received_total", "transport" => transport),
            bytes_in: counter!("ternio_bytes_received_total", "transport" => transport),
            frames_out: counter!("ternio_frames_sent_total", "transport" => transport),
            bytes_out: counter!("ternio_bytes_sent_total", "transport" => transport),
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
            duration: histogram!("ternio_request_duration_seconds", "opcode" => opcode, "handler" => handler),
        }
    }
}

/// Every metric handle of a server; `None` when metrics are off.
pub(crate) struct Metrics {
    tcp: TransportMetrics,
    websocket: TransportMetrics,
    /// Errors by code 1 to 10; index 0 counts application codes.
    errors: [Counter; 11],
    handshakes_ok: Counter,
    handshakes_failed: Counter,
    /// Disconnects by reason 1 to 10; index 0 counts other reasons.
    disconnects: [Counter; 11],
    peer_closed: Counter,
    failed: Counter,
}

impl Metrics {
    pub(crate) fn new() -> Self {
        Self {
            tcp: TransportMetrics::new("tcp"),
            websocket: TransportMetrics::new("websocket"),
            errors: std::array::from_fn(|code| match code {
                0 => counter!("ternio_errors_total", "code" => "application"),
                code => counter!("ternio_errors_total", "code" => code.to_string()),
            }),
            handshakes_ok: counter!("ternio_handshakes_total", "result" => "ok"),
            handshakes_failed: counter!("ternio_handshakes_total", "result" => "failed"),
            disconnects: std::array::from_fn(|reason| {
                let name = match reason {
                    0 => "other",
                    reason => DisconnectReason::from_u16(reason as u16).name(),
                };
                counter!("ternio_disconnects_total", "reason" => name)
            }),
            peer_closed: counter!("ternio_disconnects_total", "reason" => "peer_closed"),
            failed: counter!("ternio_disconnects_total", "reason" => "failed"),
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
            ErrorCode::Application(_) | ErrorCode::Unassigned(_) => 0,
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
        }
    }
}
