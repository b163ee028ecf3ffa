//! EdgeHub's counters, exported as Prometheus text.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

/// What an operator watches on an edge's link.
#[derive(Debug, Default)]
pub struct EdgeHubMetrics {
    /// 1 while connected to the cloud.
    pub connected: AtomicI64,
    /// Connections made.
    pub connects: AtomicU64,
    /// Dial attempts that failed.
    pub dial_failures: AtomicU64,
    /// Connections lost (any reason but shutdown).
    pub disconnects: AtomicU64,
    /// Reconnects to use a renewed certificate.
    pub cert_reconnects: AtomicU64,
    /// Messages received from the cloud.
    pub downstream: AtomicU64,
    /// Downstream messages with no module to take them.
    pub downstream_undeliverable: AtomicU64,
    /// Messages written to the cloud (keepalives not counted).
    pub upstream: AtomicU64,
    /// Keepalives written.
    pub keepalives: AtomicU64,
    /// Times the upstream rate limit made a message wait.
    pub throttled: AtomicU64,
    /// Status reports kept while disconnected (replacements included).
    pub outbox_kept: AtomicU64,
    /// Status reports replaced by a newer one while disconnected.
    pub outbox_coalesced: AtomicU64,
    /// Status reports refused: the disconnected buffer was full.
    pub outbox_overflow: AtomicU64,
    /// Status reports waiting for the link.
    pub outbox_depth: AtomicI64,
    /// Requests answered "not connected".
    pub refused_disconnected: AtomicU64,
    /// Other messages not sent because the link was down (the cloud re-sends
    /// what they answered: ACKs are for messages it will send again).
    pub dropped_disconnected: AtomicU64,
}

impl EdgeHubMetrics {
    /// Prometheus text exposition.
    pub fn render(&self, out: &mut String) {
        let gauges: [(&str, &str, &AtomicI64); 2] = [
            ("edgehive_edgehub_connected", "1 while the edge is connected to the cloud.", &self.connected),
            ("edgehive_edgehub_outbox_depth", "Status reports waiting for the link.", &self.outbox_depth),
        ];
        for (name, help, v) in gauges {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {}", v.load(Relaxed));
        }
        let counters: [(&str, &str, &AtomicU64); 14] = [
            ("edgehive_edgehub_connects_total", "Connections made to the cloud.", &self.connects),
            ("edgehive_edgehub_dial_failures_total", "Failed connection attempts.", &self.dial_failures),
            ("edgehive_edgehub_disconnects_total", "Connections lost.", &self.disconnects),
            ("edgehive_edgehub_cert_reconnects_total", "Reconnects with a renewed certificate.", &self.cert_reconnects),
            ("edgehive_edgehub_downstream_total", "Messages received from the cloud.", &self.downstream),
            (
                "edgehive_edgehub_downstream_undeliverable_total",
                "Messages from the cloud no module took.",
                &self.downstream_undeliverable,
            ),
            ("edgehive_edgehub_upstream_total", "Messages sent to the cloud.", &self.upstream),
            ("edgehive_edgehub_keepalives_total", "Keepalives sent.", &self.keepalives),
            ("edgehive_edgehub_throttled_total", "Upstream messages delayed by the rate limit.", &self.throttled),
            ("edgehive_edgehub_outbox_kept_total", "Status reports kept while disconnected.", &self.outbox_kept),
            (
                "edgehive_edgehub_outbox_coalesced_total",
                "Status reports replaced by a newer one while disconnected.",
                &self.outbox_coalesced,
            ),
            (
                "edgehive_edgehub_outbox_overflow_total",
                "Status reports refused: the disconnected buffer was full.",
                &self.outbox_overflow,
            ),
            (
                "edgehive_edgehub_refused_disconnected_total",
                "Requests answered 'not connected'.",
                &self.refused_disconnected,
            ),
            (
                "edgehive_edgehub_dropped_disconnected_total",
                "Other upstream messages not sent while disconnected.",
                &self.dropped_disconnected,
            ),
        ];
        for (name, help, v) in counters {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}", v.load(Relaxed));
        }
    }
}
