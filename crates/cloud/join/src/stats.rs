//! Counters of what the join server did and refused, and their Prometheus
//! text.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use edgehive_viaduct::admission::Limit;

/// Why a request was refused. Each has its own counter
/// ([`JoinStats::refused`]) and label value in the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RefusalReason {
    /// 404: a path the server does not serve.
    NotFound,
    /// 405: a method the path does not take.
    MethodNotAllowed,
    /// 400: the `NodeName` header is missing or not a DNS-1123 subdomain.
    BadNodeName,
    /// 401: no client certificate and no usable `Authorization: Bearer`.
    Unauthenticated,
    /// 401: a bearer token that does not verify (expired, forged, another
    /// CA's, malformed).
    BadToken,
    /// 403: a client certificate for another node or user.
    Forbidden,
    /// 413: the request body, or the CSR in it, is over the limit.
    TooLarge,
    /// 400: a malformed `ExtKeyUsages` header or a body that could not be
    /// read.
    BadRequest,
    /// 400: the body is not a certificate signing request that can be
    /// signed.
    BadCsr,
    /// 408: the request did not arrive within the request timeout.
    Timeout,
    /// 500: signing failed on our side.
    Internal,
}

impl RefusalReason {
    /// Every reason, in the order of the metrics.
    pub const ALL: [RefusalReason; 11] = [
        RefusalReason::NotFound,
        RefusalReason::MethodNotAllowed,
        RefusalReason::BadNodeName,
        RefusalReason::Unauthenticated,
        RefusalReason::BadToken,
        RefusalReason::Forbidden,
        RefusalReason::TooLarge,
        RefusalReason::BadRequest,
        RefusalReason::BadCsr,
        RefusalReason::Timeout,
        RefusalReason::Internal,
    ];

    /// The label value in the metrics and the `reason` field in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalReason::NotFound => "not_found",
            RefusalReason::MethodNotAllowed => "method_not_allowed",
            RefusalReason::BadNodeName => "bad_node_name",
            RefusalReason::Unauthenticated => "unauthenticated",
            RefusalReason::BadToken => "bad_token",
            RefusalReason::Forbidden => "forbidden",
            RefusalReason::TooLarge => "too_large",
            RefusalReason::BadRequest => "bad_request",
            RefusalReason::BadCsr => "bad_csr",
            RefusalReason::Timeout => "timeout",
            RefusalReason::Internal => "internal",
        }
    }

    fn index(self) -> usize {
        RefusalReason::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }
}

/// What the join server has done since it started. Shared with the server
/// ([`crate::JoinServer::stats`]); every method reads the current value.
#[derive(Debug, Default)]
pub struct JoinStats {
    issued: AtomicU64,
    ca_served: AtomicU64,
    refused: [AtomicU64; RefusalReason::ALL.len()],
    connections_refused: AtomicU64,
    handshakes_failed: AtomicU64,
    handshakes_timed_out: AtomicU64,
    evicted_at_source_limit: AtomicU64,
    evicted_at_connection_limit: AtomicU64,
    connections_open: AtomicU64,
    pending_handshakes: AtomicU64,
}

impl JoinStats {
    /// Node certificates signed and sent.
    pub fn certificates_issued(&self) -> u64 {
        self.issued.load(Ordering::Relaxed)
    }

    /// Times the CA certificate was served.
    pub fn ca_served(&self) -> u64 {
        self.ca_served.load(Ordering::Relaxed)
    }

    /// Requests refused for `reason`.
    pub fn refused(&self, reason: RefusalReason) -> u64 {
        self.refused[reason.index()].load(Ordering::Relaxed)
    }

    /// Requests refused for any reason.
    pub fn refused_total(&self) -> u64 {
        self.refused.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// Connections closed unserved because the connection limit was reached
    /// with every open connection serving a request (none pending to evict).
    pub fn connections_refused(&self) -> u64 {
        self.connections_refused.load(Ordering::Relaxed)
    }

    /// TLS handshakes that failed (including client certificates that do
    /// not verify against the CA). Timeouts are
    /// [`JoinStats::handshakes_timed_out`].
    pub fn handshakes_failed(&self) -> u64 {
        self.handshakes_failed.load(Ordering::Relaxed)
    }

    /// Connections closed because their TLS handshake and first request's
    /// head did not arrive within the handshake timeout.
    pub fn handshakes_timed_out(&self) -> u64 {
        self.handshakes_timed_out.load(Ordering::Relaxed)
    }

    /// Pending connections (still in their handshake) closed to make room
    /// for a new one, because its source had the most pending connections
    /// allowed ([`crate::JoinConfig::max_pending_handshakes_per_source`]).
    pub fn handshakes_evicted_at_source_limit(&self) -> u64 {
        self.evicted_at_source_limit.load(Ordering::Relaxed)
    }

    /// Pending connections closed to make room for a new one, because
    /// [`crate::JoinConfig::max_connections`] were open.
    pub fn handshakes_evicted_at_connection_limit(&self) -> u64 {
        self.evicted_at_connection_limit.load(Ordering::Relaxed)
    }

    /// Pending connections closed to make room, for either limit.
    pub fn handshakes_evicted(&self) -> u64 {
        self.handshakes_evicted_at_source_limit() + self.handshakes_evicted_at_connection_limit()
    }

    /// Connections open now (a gauge).
    pub fn connections_open(&self) -> u64 {
        self.connections_open.load(Ordering::Relaxed)
    }

    /// Connections open now that are still in their handshake (a gauge).
    pub fn pending_handshakes(&self) -> u64 {
        self.pending_handshakes.load(Ordering::Relaxed)
    }

    pub(crate) fn count_issued(&self) {
        self.issued.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_ca_served(&self) {
        self.ca_served.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_refused(&self, reason: RefusalReason) {
        self.refused[reason.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_connection_refused(&self) {
        self.connections_refused.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_handshake_failed(&self) {
        self.handshakes_failed.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_handshake_timed_out(&self) {
        self.handshakes_timed_out.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_handshake_evicted(&self, limit: Limit) {
        let counter = match limit {
            Limit::Source => &self.evicted_at_source_limit,
            Limit::Total => &self.evicted_at_connection_limit,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn set_connections(&self, open: usize, pending: usize) {
        self.connections_open.store(open as u64, Ordering::Relaxed);
        self.pending_handshakes.store(pending as u64, Ordering::Relaxed);
    }

    /// Appends the counters to `out` in the Prometheus text format, names
    /// prefixed `edgehive_join_`.
    ///
    /// ```
    /// let stats = edgehive_join::JoinStats::default();
    /// let mut out = String::new();
    /// stats.render_metrics(&mut out);
    /// assert!(out.contains("edgehive_join_certificates_issued_total 0\n"));
    /// assert!(out.contains("edgehive_join_requests_refused_total{reason=\"bad_token\"} 0\n"));
    /// assert!(out.contains("edgehive_join_handshakes_evicted_total{limit=\"source\"} 0\n"));
    /// ```
    pub fn render_metrics(&self, out: &mut String) {
        let mut metric = |name: &str, kind: &str, help: &str, value: u64| {
            let _ = write!(
                out,
                "# HELP edgehive_join_{name} {help}\n# TYPE edgehive_join_{name} {kind}\nedgehive_join_{name} {value}\n"
            );
        };
        metric("certificates_issued_total", "counter", "Node certificates signed.", self.certificates_issued());
        metric("ca_served_total", "counter", "Times the CA certificate was downloaded.", self.ca_served());
        metric(
            "connections_refused_total",
            "counter",
            "Connections closed because the connection limit was reached with none pending to evict.",
            self.connections_refused(),
        );
        metric("tls_handshakes_failed_total", "counter", "TLS handshakes that failed.", self.handshakes_failed());
        metric(
            "handshakes_timed_out_total",
            "counter",
            "Connections closed because TLS and the first request did not arrive within the handshake timeout.",
            self.handshakes_timed_out(),
        );
        metric("connections_open", "gauge", "Connections open.", self.connections_open());
        metric(
            "pending_handshakes",
            "gauge",
            "Connections open that are still in their handshake.",
            self.pending_handshakes(),
        );
        out.push_str(
            "# HELP edgehive_join_handshakes_evicted_total Pending connections closed to make room, by the limit reached.\n",
        );
        out.push_str("# TYPE edgehive_join_handshakes_evicted_total counter\n");
        for (limit, value) in [
            ("source", self.handshakes_evicted_at_source_limit()),
            ("connections", self.handshakes_evicted_at_connection_limit()),
        ] {
            let _ = writeln!(out, "edgehive_join_handshakes_evicted_total{{limit=\"{limit}\"}} {value}");
        }
        out.push_str("# HELP edgehive_join_requests_refused_total Requests refused, by reason.\n");
        out.push_str("# TYPE edgehive_join_requests_refused_total counter\n");
        for reason in RefusalReason::ALL {
            let _ = writeln!(
                out,
                "edgehive_join_requests_refused_total{{reason=\"{}\"}} {}",
                reason.as_str(),
                self.refused(reason)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reason_has_its_own_counter() {
        let stats = JoinStats::default();
        for (n, reason) in RefusalReason::ALL.into_iter().enumerate() {
            for _ in 0..=n {
                stats.count_refused(reason);
            }
        }
        for (n, reason) in RefusalReason::ALL.into_iter().enumerate() {
            assert_eq!(stats.refused(reason), n as u64 + 1, "{reason:?}");
        }
        assert_eq!(stats.refused_total(), (1..=11).sum::<u64>());
        assert_eq!(stats.certificates_issued(), 0);
    }

    #[test]
    fn metrics_are_prometheus_text() {
        let stats = JoinStats::default();
        stats.count_issued();
        stats.count_issued();
        stats.count_refused(RefusalReason::Forbidden);
        stats.count_connection_refused();
        stats.count_handshake_evicted(Limit::Source);
        stats.count_handshake_evicted(Limit::Source);
        stats.count_handshake_evicted(Limit::Total);
        stats.count_handshake_timed_out();
        stats.set_connections(7, 3);
        let mut out = String::new();
        stats.render_metrics(&mut out);
        assert!(out.contains("\nedgehive_join_certificates_issued_total 2\n"));
        assert!(out.contains("\nedgehive_join_connections_refused_total 1\n"));
        assert!(out.contains("\nedgehive_join_handshakes_evicted_total{limit=\"source\"} 2\n"));
        assert!(out.contains("\nedgehive_join_handshakes_evicted_total{limit=\"connections\"} 1\n"));
        assert!(out.contains("\nedgehive_join_handshakes_timed_out_total 1\n"));
        assert!(out.contains("\n# TYPE edgehive_join_pending_handshakes gauge\nedgehive_join_pending_handshakes 3\n"));
        assert!(out.contains("\nedgehive_join_connections_open 7\n"));
        assert_eq!(stats.handshakes_evicted(), 3);
        assert!(out.contains("\nedgehive_join_requests_refused_total{reason=\"forbidden\"} 1\n"));
        assert!(out.contains("\nedgehive_join_requests_refused_total{reason=\"not_found\"} 0\n"));
        let samples: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(samples.len(), 7 + 2 + RefusalReason::ALL.len());
        for line in out.lines() {
            assert!(
                line.starts_with("# HELP edgehive_join_")
                    || line.starts_with("# TYPE edgehive_join_")
                    || line.starts_with("edgehive_join_"),
                "{line}"
            );
        }
        let mut names: Vec<&str> = RefusalReason::ALL.iter().map(|r| r.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), RefusalReason::ALL.len());
    }
}
