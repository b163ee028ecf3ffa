//! Counters of what the join server did and refused, and their Prometheus
//! text.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

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

    /// Connections closed unserved because the connection limit was reached.
    pub fn connections_refused(&self) -> u64 {
        self.connections_refused.load(Ordering::Relaxed)
    }

    /// TLS handshakes that failed or timed out (including client
    /// certificates that do not verify against the CA).
    pub fn handshakes_failed(&self) -> u64 {
        self.handshakes_failed.load(Ordering::Relaxed)
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

    /// Appends the counters to `out` in the Prometheus text format, names
    /// prefixed `edgehive_join_`.
    ///
    /// ```
    /// let stats = edgehive_join::JoinStats::default();
    /// let mut out = String::new();
    /// stats.render_metrics(&mut out);
    /// assert!(out.contains("edgehive_join_certificates_issued_total 0\n"));
    /// assert!(out.contains("edgehive_join_requests_refused_total{reason=\"bad_token\"} 0\n"));
    /// ```
    pub fn render_metrics(&self, out: &mut String) {
        let mut counter = |name: &str, help: &str, value: u64| {
            let _ = write!(
                out,
                "# HELP edgehive_join_{name} {help}\n# TYPE edgehive_join_{name} counter\nedgehive_join_{name} {value}\n"
            );
        };
        counter("certificates_issued_total", "Node certificates signed.", self.certificates_issued());
        counter("ca_served_total", "Times the CA certificate was downloaded.", self.ca_served());
        counter(
            "connections_refused_total",
            "Connections closed because the connection limit was reached.",
            self.connections_refused(),
        );
        counter("tls_handshakes_failed_total", "TLS handshakes that failed or timed out.", self.handshakes_failed());
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
        let mut out = String::new();
        stats.render_metrics(&mut out);
        assert!(out.contains("\nedgehive_join_certificates_issued_total 2\n"));
        assert!(out.contains("\nedgehive_join_connections_refused_total 1\n"));
        assert!(out.contains("\nedgehive_join_requests_refused_total{reason=\"forbidden\"} 1\n"));
        assert!(out.contains("\nedgehive_join_requests_refused_total{reason=\"not_found\"} 0\n"));
        let samples: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(samples.len(), 4 + RefusalReason::ALL.len());
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
