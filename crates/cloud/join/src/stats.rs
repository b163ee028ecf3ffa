//! Counters of what the join server did and refused, and their
//! registration in a process's metrics registry.

use edgehive_viaduct::admission::Limit;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

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

/// A label set with one label.
type Label = [(&'static str, &'static str); 1];

/// What the join server has done since it started. JoinState with the server
/// ([`crate::JoinServer::stats`]); every method reads the current value, and
/// [`JoinStats::register`] exports them. Each count is one atomic
/// (prometheus-client's [`Counter`] and [`Gauge`]).
#[derive(Debug)]
pub struct JoinStats {
    issued: Counter,
    ca_served: Counter,
    /// Requests refused, by reason (the family of `refused`).
    refused_by_reason: Family<Label, Counter>,
    refused: [Counter; RefusalReason::ALL.len()],
    connections_refused: Counter,
    handshakes_failed: Counter,
    handshakes_timed_out: Counter,
    /// Pending connections evicted, by limit (the family of the two below).
    evicted_by_limit: Family<Label, Counter>,
    evicted_at_source_limit: Counter,
    evicted_at_connection_limit: Counter,
    connections_open: Gauge,
    pending_handshakes: Gauge,
}

impl Default for JoinStats {
    fn default() -> Self {
        let refused_by_reason = Family::<Label, Counter>::default();
        let evicted_by_limit = Family::<Label, Counter>::default();
        JoinStats {
            issued: Counter::default(),
            ca_served: Counter::default(),
            refused: RefusalReason::ALL.map(|r| refused_by_reason.get_or_create_owned(&[("reason", r.as_str())])),
            refused_by_reason,
            connections_refused: Counter::default(),
            handshakes_failed: Counter::default(),
            handshakes_timed_out: Counter::default(),
            evicted_at_source_limit: evicted_by_limit.get_or_create_owned(&[("limit", "source")]),
            evicted_at_connection_limit: evicted_by_limit.get_or_create_owned(&[("limit", "connections")]),
            evicted_by_limit,
            connections_open: Gauge::default(),
            pending_handshakes: Gauge::default(),
        }
    }
}

impl JoinStats {
    /// Node certificates signed and sent.
    pub fn certificates_issued(&self) -> u64 {
        self.issued.get()
    }

    /// Times the CA certificate was served.
    pub fn ca_served(&self) -> u64 {
        self.ca_served.get()
    }

    /// Requests refused for `reason`.
    pub fn refused(&self, reason: RefusalReason) -> u64 {
        self.refused[reason.index()].get()
    }

    /// Requests refused for any reason.
    pub fn refused_total(&self) -> u64 {
        self.refused.iter().map(Counter::get).sum()
    }

    /// Connections closed unserved because the connection limit was reached
    /// with every open connection serving a request (none pending to evict).
    pub fn connections_refused(&self) -> u64 {
        self.connections_refused.get()
    }

    /// TLS handshakes that failed (including client certificates that do
    /// not verify against the CA). Timeouts are
    /// [`JoinStats::handshakes_timed_out`].
    pub fn handshakes_failed(&self) -> u64 {
        self.handshakes_failed.get()
    }

    /// Connections closed because their TLS handshake and first request's
    /// head did not arrive within the handshake timeout.
    pub fn handshakes_timed_out(&self) -> u64 {
        self.handshakes_timed_out.get()
    }

    /// Pending connections (still in their handshake) closed to make room
    /// for a new one, because its source had the most pending connections
    /// allowed ([`crate::JoinConfig::max_pending_handshakes_per_source`]).
    pub fn handshakes_evicted_at_source_limit(&self) -> u64 {
        self.evicted_at_source_limit.get()
    }

    /// Pending connections closed to make room for a new one, because
    /// [`crate::JoinConfig::max_connections`] were open.
    pub fn handshakes_evicted_at_connection_limit(&self) -> u64 {
        self.evicted_at_connection_limit.get()
    }

    /// Pending connections closed to make room, for either limit.
    pub fn handshakes_evicted(&self) -> u64 {
        self.handshakes_evicted_at_source_limit() + self.handshakes_evicted_at_connection_limit()
    }

    /// Connections open now (a gauge).
    pub fn connections_open(&self) -> u64 {
        self.connections_open.get().max(0) as u64
    }

    /// Connections open now that are still in their handshake (a gauge).
    pub fn pending_handshakes(&self) -> u64 {
        self.pending_handshakes.get().max(0) as u64
    }

    pub(crate) fn count_issued(&self) {
        self.issued.inc();
    }

    pub(crate) fn count_ca_served(&self) {
        self.ca_served.inc();
    }

    pub(crate) fn count_refused(&self, reason: RefusalReason) {
        self.refused[reason.index()].inc();
    }

    pub(crate) fn count_connection_refused(&self) {
        self.connections_refused.inc();
    }

    pub(crate) fn count_handshake_failed(&self) {
        self.handshakes_failed.inc();
    }

    pub(crate) fn count_handshake_timed_out(&self) {
        self.handshakes_timed_out.inc();
    }

    pub(crate) fn count_handshake_evicted(&self, limit: Limit) {
        match limit {
            Limit::Source => self.evicted_at_source_limit.inc(),
            Limit::Total => self.evicted_at_connection_limit.inc(),
        };
    }

    pub(crate) fn set_connections(&self, open: usize, pending: usize) {
        self.connections_open.set(open as i64);
        self.pending_handshakes.set(pending as i64);
    }

    /// Registers the counters in `registry` under the prefix `join`
    /// (`edgehive_join_` in a process's registry).
    ///
    /// ```
    /// use prometheus_client::{encoding::text::encode, registry::Registry};
    /// let stats = edgehive_join::JoinStats::default();
    /// let mut registry = Registry::with_prefix("edgehive");
    /// stats.register(&mut registry);
    /// let mut out = String::new();
    /// encode(&mut out, &registry).unwrap();
    /// assert!(out.contains("edgehive_join_certificates_issued_total 0\n"));
    /// assert!(out.contains("edgehive_join_requests_refused_total{reason=\"bad_token\"} 0\n"));
    /// assert!(out.contains("edgehive_join_handshakes_evicted_total{limit=\"source\"} 0\n"));
    /// ```
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("join");
        r.register("certificates_issued", "Node certificates signed", self.issued.clone());
        r.register("ca_served", "Times the CA certificate was downloaded", self.ca_served.clone());
        r.register(
            "connections_refused",
            "Connections closed because the connection limit was reached with none pending to evict",
            self.connections_refused.clone(),
        );
        r.register("tls_handshakes_failed", "TLS handshakes that failed", self.handshakes_failed.clone());
        r.register(
            "handshakes_timed_out",
            "Connections closed because TLS and the first request did not arrive within the handshake timeout",
            self.handshakes_timed_out.clone(),
        );
        r.register("connections_open", "Connections open", self.connections_open.clone());
        r.register(
            "pending_handshakes",
            "Connections open that are still in their handshake",
            self.pending_handshakes.clone(),
        );
        r.register(
            "handshakes_evicted",
            "Pending connections closed to make room, by the limit reached",
            self.evicted_by_limit.clone(),
        );
        r.register("requests_refused", "Requests refused, by reason", self.refused_by_reason.clone());
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
    fn metrics_are_openmetrics_text() {
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
        let mut registry = Registry::with_prefix("edgehive");
        stats.register(&mut registry);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("encode");
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
        for line in out.lines().filter(|l| *l != "# EOF") {
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
