//! EdgeController's counters, exported as Prometheus text.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters an operator watches.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Messages handed to CloudHub.
    pub downstream: AtomicU64,
    /// Upstream messages handled.
    pub upstream: AtomicU64,
    /// Upstream requests refused by the NodeRestriction rule.
    pub forbidden: AtomicU64,
    /// Upstream requests refused as malformed or unsupported.
    pub invalid: AtomicU64,
    /// Nodes marked NotReady for want of heartbeats.
    pub not_ready: AtomicU64,
}

impl Metrics {
    /// Prometheus text exposition.
    pub fn render(&self, out: &mut String) {
        for (name, help, v) in [
            ("downstream_total", "Messages handed to CloudHub.", &self.downstream),
            ("upstream_total", "Upstream messages handled.", &self.upstream),
            ("forbidden_total", "Upstream requests refused: not the node's object.", &self.forbidden),
            ("invalid_total", "Upstream requests refused as malformed or unsupported.", &self.invalid),
            ("node_not_ready_total", "Nodes marked NotReady for want of heartbeats.", &self.not_ready),
        ] {
            let _ = writeln!(out, "# HELP edgehive_edgecontroller_{name} {help}");
            let _ = writeln!(out, "# TYPE edgehive_edgecontroller_{name} counter");
            let _ = writeln!(out, "edgehive_edgecontroller_{name} {}", v.load(Ordering::Relaxed));
        }
    }
}
