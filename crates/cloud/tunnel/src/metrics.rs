//! The tunnel's metrics: tunnels connected and refused, sessions carried,
//! bytes each way. Each is one atomic; [`TunnelMetrics::register`] exports
//! them.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// A label set with one `reason`.
type Reason = [(&'static str, &'static str); 1];

/// The tunnel server's metrics.
#[derive(Debug)]
pub struct TunnelMetrics {
    /// Nodes with a live tunnel.
    pub(crate) connected: Gauge,
    /// Tunnels accepted.
    pub(crate) accepted: Counter,
    /// Tunnels replaced by a newer one of the same node.
    pub(crate) replaced: Counter,
    /// Tunnels closed because the edge broke the framing or sent an
    /// oversize or undecodable message.
    pub(crate) malformed: Counter,
    /// TLS handshakes that failed (no certificate, a foreign one, …).
    pub(crate) tls_failures: Counter,
    /// Tunnel requests refused, by reason.
    refused: Family<Reason, Counter>,
    /// ... the certificate names another node, or none.
    pub(crate) refused_identity: Counter,
    /// ... the certificate was revoked or replaced (or could not be checked).
    pub(crate) refused_revoked: Counter,
    /// ... not a tunnel request (path, method, headers).
    pub(crate) refused_request: Counter,
    /// ... the tunnel limit was reached.
    pub(crate) refused_limit: Counter,
    /// Sessions opened through a tunnel.
    pub(crate) sessions_opened: Counter,
    /// Sessions open now.
    pub(crate) sessions_open: Gauge,
    /// Sessions ended because their reader did not keep up with the edge.
    pub(crate) sessions_stalled: Counter,
    /// Data bytes sent to edges.
    pub(crate) bytes_to_edge: Counter,
    /// Data bytes received from edges.
    pub(crate) bytes_from_edge: Counter,
}

impl Default for TunnelMetrics {
    fn default() -> Self {
        let refused = Family::<Reason, Counter>::default();
        let reason = |reason| refused.get_or_create_owned(&[("reason", reason)]);
        TunnelMetrics {
            connected: Gauge::default(),
            accepted: Counter::default(),
            replaced: Counter::default(),
            malformed: Counter::default(),
            tls_failures: Counter::default(),
            refused_identity: reason("identity"),
            refused_revoked: reason("revoked"),
            refused_request: reason("request"),
            refused_limit: reason("tunnel_limit"),
            refused,
            sessions_opened: Counter::default(),
            sessions_open: Gauge::default(),
            sessions_stalled: Counter::default(),
            bytes_to_edge: Counter::default(),
            bytes_from_edge: Counter::default(),
        }
    }
}

impl TunnelMetrics {
    /// Nodes with a live tunnel now.
    pub fn connected(&self) -> i64 {
        self.connected.get()
    }

    /// Tunnels closed for a malformed or oversize frame.
    pub fn malformed(&self) -> u64 {
        self.malformed.get()
    }

    /// TLS handshakes that failed.
    pub fn tls_failures(&self) -> u64 {
        self.tls_failures.get()
    }

    /// Sessions open now.
    pub fn sessions_open(&self) -> i64 {
        self.sessions_open.get()
    }

    /// Registers the metrics under the prefix `tunnel` (`edgehive_tunnel_`
    /// in a process's registry).
    ///
    /// ```
    /// use prometheus_client::{encoding::text::encode, registry::Registry};
    /// let metrics = edgehive_tunnel::TunnelMetrics::default();
    /// let mut registry = Registry::with_prefix("edgehive");
    /// metrics.register(&mut registry);
    /// let mut text = String::new();
    /// encode(&mut text, &registry).unwrap();
    /// assert!(text.contains("\nedgehive_tunnel_connected_nodes 0\n"));
    /// assert!(text.contains("\nedgehive_tunnel_refused_total{reason=\"identity\"} 0\n"));
    /// ```
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("tunnel");
        r.register("connected_nodes", "Nodes with a live stream tunnel", self.connected.clone());
        r.register("accepted", "Stream tunnels accepted", self.accepted.clone());
        r.register("replaced", "Stream tunnels replaced by a newer one of the node", self.replaced.clone());
        r.register("malformed", "Stream tunnels closed for a malformed or oversize frame", self.malformed.clone());
        r.register("tls_failures", "TLS handshakes of the tunnel port that failed", self.tls_failures.clone());
        r.register("refused", "Stream tunnels refused, by reason", self.refused.clone());
        r.register("sessions_opened", "Sessions carried through stream tunnels", self.sessions_opened.clone());
        r.register("sessions_open", "Sessions open through stream tunnels now", self.sessions_open.clone());
        r.register(
            "sessions_stalled",
            "Sessions ended: their reader fell behind the edge",
            self.sessions_stalled.clone(),
        );
        r.register("sent_bytes", "Data bytes sent to edges through tunnels", self.bytes_to_edge.clone());
        r.register("received_bytes", "Data bytes received from edges through tunnels", self.bytes_from_edge.clone());
    }
}
