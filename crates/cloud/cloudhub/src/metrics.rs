//! CloudHub's counters, exported as Prometheus text.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// ACK latency buckets, seconds.
const BUCKETS: [f64; 12] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0];

/// Counters an operator watches.
#[derive(Debug, Default)]
pub struct HubMetrics {
    /// Nodes with a live session.
    pub connected: AtomicI64,
    /// Sessions started.
    pub sessions: AtomicU64,
    /// Connections refused: the certificate names another node.
    pub refused_identity: AtomicU64,
    /// Connections refused: node limit reached.
    pub refused_limit: AtomicU64,
    /// Connections refused: the certificate was revoked or replaced (or
    /// could not be checked).
    pub refused_revoked: AtomicU64,
    /// Sessions ended for want of a keepalive.
    pub keepalive_expired: AtomicU64,
    /// Sessions replaced by a newer connection of the same node.
    pub replaced: AtomicU64,
    /// ACK-mode messages sent the first time.
    pub sent: AtomicU64,
    /// ACK-mode messages sent again.
    pub resent: AtomicU64,
    /// ACKs received.
    pub acked: AtomicU64,
    /// NO-ACK messages written.
    pub sent_no_ack: AtomicU64,
    /// Not sent: the edge already has this version or a newer one is queued.
    pub skipped_stale: AtomicU64,
    /// Dropped: node offline (recovered from the store on reconnect).
    pub dropped_offline: AtomicU64,
    /// Dropped: the node's queue is full (recovered by the next resync).
    pub dropped_full: AtomicU64,
    /// Downstream messages refused as malformed.
    pub malformed: AtomicU64,
    /// Upstream messages passed to the controllers.
    pub upstream: AtomicU64,
    /// Messages waiting or in flight, all nodes.
    pub queued: AtomicI64,
    ack_latency: [AtomicU64; BUCKETS.len() + 1],
    ack_latency_sum_us: AtomicU64,
}

impl HubMetrics {
    /// Records one ACK's latency.
    pub fn observe_ack(&self, latency: Duration) {
        let s = latency.as_secs_f64();
        let i = BUCKETS.iter().position(|b| s <= *b).unwrap_or(BUCKETS.len());
        self.ack_latency[i].fetch_add(1, Ordering::Relaxed);
        self.ack_latency_sum_us.fetch_add(latency.as_micros() as u64, Ordering::Relaxed);
    }

    /// Prometheus text exposition.
    pub fn render(&self, out: &mut String) {
        let g = |a: &AtomicI64| a.load(Ordering::Relaxed);
        let c = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut line = |name: &str, kind: &str, help: &str, value: String| {
            let _ = writeln!(out, "# HELP edgehive_cloudhub_{name} {help}\n# TYPE edgehive_cloudhub_{name} {kind}");
            let _ = writeln!(out, "edgehive_cloudhub_{name} {value}");
        };
        line("connected_nodes", "gauge", "Nodes with a live session.", g(&self.connected).to_string());
        line("queued_messages", "gauge", "ACK-mode messages waiting or in flight.", g(&self.queued).to_string());
        line("sessions_total", "counter", "Sessions started.", c(&self.sessions).to_string());
        line(
            "keepalive_expired_total",
            "counter",
            "Sessions ended without keepalive.",
            c(&self.keepalive_expired).to_string(),
        );
        line("replaced_total", "counter", "Sessions replaced by a newer connection.", c(&self.replaced).to_string());
        line("sent_total", "counter", "ACK-mode messages sent.", c(&self.sent).to_string());
        line("retries_total", "counter", "ACK-mode messages resent.", c(&self.resent).to_string());
        line("acks_total", "counter", "ACKs received.", c(&self.acked).to_string());
        line("sent_noack_total", "counter", "NO-ACK messages written.", c(&self.sent_no_ack).to_string());
        line(
            "skipped_stale_total",
            "counter",
            "Messages not sent: the edge has them.",
            c(&self.skipped_stale).to_string(),
        );
        line("upstream_total", "counter", "Upstream messages passed on.", c(&self.upstream).to_string());
        line("malformed_total", "counter", "Messages refused as malformed.", c(&self.malformed).to_string());
        let _ = writeln!(out, "# HELP edgehive_cloudhub_refused_total Connections refused.");
        let _ = writeln!(out, "# TYPE edgehive_cloudhub_refused_total counter");
        let _ = writeln!(out, "edgehive_cloudhub_refused_total{{reason=\"identity\"}} {}", c(&self.refused_identity));
        let _ = writeln!(out, "edgehive_cloudhub_refused_total{{reason=\"node_limit\"}} {}", c(&self.refused_limit));
        let _ = writeln!(out, "edgehive_cloudhub_refused_total{{reason=\"revoked\"}} {}", c(&self.refused_revoked));
        let _ = writeln!(out, "# HELP edgehive_cloudhub_dropped_total Messages dropped (recovered from the store).");
        let _ = writeln!(out, "# TYPE edgehive_cloudhub_dropped_total counter");
        let _ = writeln!(out, "edgehive_cloudhub_dropped_total{{reason=\"offline\"}} {}", c(&self.dropped_offline));
        let _ = writeln!(out, "edgehive_cloudhub_dropped_total{{reason=\"full\"}} {}", c(&self.dropped_full));
        let _ = writeln!(out, "# HELP edgehive_cloudhub_ack_latency_seconds First send to ACK.");
        let _ = writeln!(out, "# TYPE edgehive_cloudhub_ack_latency_seconds histogram");
        let mut cum = 0;
        for (i, b) in BUCKETS.iter().enumerate() {
            cum += c(&self.ack_latency[i]);
            let _ = writeln!(out, "edgehive_cloudhub_ack_latency_seconds_bucket{{le=\"{b}\"}} {cum}");
        }
        cum += c(&self.ack_latency[BUCKETS.len()]);
        let _ = writeln!(out, "edgehive_cloudhub_ack_latency_seconds_bucket{{le=\"+Inf\"}} {cum}");
        let _ = writeln!(out, "edgehive_cloudhub_ack_latency_seconds_sum {}", c(&self.ack_latency_sum_us) as f64 / 1e6);
        let _ = writeln!(out, "edgehive_cloudhub_ack_latency_seconds_count {cum}");
    }
}
