//! CloudHub's metrics: what an operator watches of the edges' sessions and
//! of reliable delivery. Every counter and gauge is one atomic
//! (prometheus-client's); [`HubMetrics::register`] exports them.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

/// ACK latency buckets, seconds: from a LAN round trip with a commit on an
/// SSD (0.5 ms) to an edge that answers only after the resend timer fired
/// (30 s).
const ACK_LATENCY_BUCKETS: [f64; 12] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0];

/// A label set with one `reason`.
type Reason = [(&'static str, &'static str); 1];

/// CloudHub's metrics. The hub updates them; read them by registering them
/// ([`HubMetrics::register`]) and encoding the registry.
#[derive(Debug)]
pub struct HubMetrics {
    /// Nodes with a live session.
    pub(crate) connected: Gauge,
    /// Messages waiting or in flight, all nodes.
    pub(crate) queued: Gauge,
    /// Connection notices waiting for a listener's mailbox.
    pub(crate) notices_pending: Gauge,
    /// Sessions started.
    pub(crate) sessions: Counter,
    /// Sessions ended for want of a keepalive.
    pub(crate) keepalive_expired: Counter,
    /// Sessions replaced by a newer connection of the same node.
    pub(crate) replaced: Counter,
    /// ACK-mode messages sent the first time.
    pub(crate) sent: Counter,
    /// ACK-mode messages sent again.
    pub(crate) resent: Counter,
    /// ACKs received.
    pub(crate) acked: Counter,
    /// NO-ACK messages written.
    pub(crate) sent_no_ack: Counter,
    /// Not sent: the edge already has this version or a newer one is queued.
    pub(crate) skipped_stale: Counter,
    /// Upstream messages passed to the controllers.
    pub(crate) upstream: Counter,
    /// Messages refused as malformed.
    pub(crate) malformed: Counter,
    /// Connections refused, by reason.
    refused: Family<Reason, Counter>,
    /// ... the certificate names another node.
    pub(crate) refused_identity: Counter,
    /// ... node limit reached.
    pub(crate) refused_limit: Counter,
    /// ... the certificate was revoked or replaced (or could not be checked).
    pub(crate) refused_revoked: Counter,
    /// Connections refused: the client certificate has expired (a resumed
    /// TLS session).
    pub(crate) refused_expired: Counter,
    /// Messages dropped, by reason.
    dropped: Family<Reason, Counter>,
    /// ... node offline (recovered from the store on reconnect).
    pub(crate) dropped_offline: Counter,
    /// ... the node's queue is full (recovered by the next resync).
    pub(crate) dropped_full: Counter,
    /// First send to ACK.
    ack_latency: Histogram,
}

impl Default for HubMetrics {
    fn default() -> Self {
        let (refused, dropped) = (Family::<Reason, Counter>::default(), Family::<Reason, Counter>::default());
        let reason = |family: &Family<Reason, Counter>, reason| family.get_or_create_owned(&[("reason", reason)]);
        HubMetrics {
            connected: Gauge::default(),
            queued: Gauge::default(),
            notices_pending: Gauge::default(),
            sessions: Counter::default(),
            keepalive_expired: Counter::default(),
            replaced: Counter::default(),
            sent: Counter::default(),
            resent: Counter::default(),
            acked: Counter::default(),
            sent_no_ack: Counter::default(),
            skipped_stale: Counter::default(),
            upstream: Counter::default(),
            malformed: Counter::default(),
            refused_identity: reason(&refused, "identity"),
            refused_limit: reason(&refused, "node_limit"),
            refused_revoked: reason(&refused, "revoked"),
            refused_expired: reason(&refused, "expired"),
            refused,
            dropped_offline: reason(&dropped, "offline"),
            dropped_full: reason(&dropped, "full"),
            dropped,
            ack_latency: Histogram::new(ACK_LATENCY_BUCKETS),
        }
    }
}

impl HubMetrics {
    /// Records one ACK's latency. (prometheus-client's histogram takes a
    /// short lock per observation; the counters beside it are atomics.)
    pub(crate) fn observe_ack(&self, latency: Duration) {
        self.ack_latency.observe(latency.as_secs_f64());
    }

    /// Registers the metrics in `registry` under the prefix `cloudhub`
    /// (`edgehive_cloudhub_` in a process's registry).
    ///
    /// ```
    /// use prometheus_client::{encoding::text::encode, registry::Registry};
    /// let metrics = edgehive_cloudhub::HubMetrics::default();
    /// let mut registry = Registry::with_prefix("edgehive");
    /// metrics.register(&mut registry);
    /// let mut text = String::new();
    /// encode(&mut text, &registry).unwrap();
    /// assert!(text.contains("\nedgehive_cloudhub_connected_nodes 0\n"));
    /// assert!(text.contains("\nedgehive_cloudhub_refused_total{reason=\"node_limit\"} 0\n"));
    /// ```
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("cloudhub");
        r.register("connected_nodes", "Nodes with a live session", self.connected.clone());
        r.register("queued_messages", "ACK-mode messages waiting or in flight", self.queued.clone());
        r.register(
            "connection_notices_pending",
            "Connection notices waiting for a controller's mailbox",
            self.notices_pending.clone(),
        );
        r.register("sessions", "Sessions started", self.sessions.clone());
        r.register("keepalive_expired", "Sessions ended without keepalive", self.keepalive_expired.clone());
        r.register("replaced", "Sessions replaced by a newer connection", self.replaced.clone());
        r.register("sent", "ACK-mode messages sent", self.sent.clone());
        r.register("retries", "ACK-mode messages resent", self.resent.clone());
        r.register("acks", "ACKs received", self.acked.clone());
        r.register("sent_noack", "NO-ACK messages written", self.sent_no_ack.clone());
        r.register("skipped_stale", "Messages not sent: the edge has them", self.skipped_stale.clone());
        r.register("upstream", "Upstream messages passed on", self.upstream.clone());
        r.register("malformed", "Messages refused as malformed", self.malformed.clone());
        r.register("refused", "Connections refused, by reason", self.refused.clone());
        r.register("dropped", "Messages dropped (recovered from the store), by reason", self.dropped.clone());
        r.register_with_unit("ack_latency", "First send to ACK", Unit::Seconds, self.ack_latency.clone());
    }
}
