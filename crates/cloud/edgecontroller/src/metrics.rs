//! EdgeController's metrics: what crosses between the store and the edges,
//! and what is refused. Each counter is one atomic (prometheus-client's);
//! [`Metrics::register`] exports them.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// EdgeController's counters. The controller updates them; read them by
/// registering them ([`Metrics::register`]) and encoding the registry.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Messages handed to CloudHub.
    pub(crate) downstream: Counter,
    /// Upstream messages handled.
    pub(crate) upstream: Counter,
    /// Upstream requests whose store work is running.
    pub(crate) upstream_in_flight: Gauge,
    /// Upstream requests waiting behind a request of the same node.
    pub(crate) upstream_waiting: Gauge,
    /// Nodes with a session, or whose session's end is remembered.
    pub(crate) sessions: Gauge,
    /// Upstream requests refused as busy: their node had its share waiting,
    /// or all nodes together had and theirs had the most.
    pub(crate) upstream_busy: Counter,
    /// Busy answers CloudHub's full mailbox did not take (not waited for:
    /// the controller's loop never stalls on an answer).
    pub(crate) busy_unsent: Counter,
    /// Upstream requests refused by the NodeRestriction rule.
    pub(crate) forbidden: Counter,
    /// Upstream requests refused as malformed or unsupported.
    pub(crate) invalid: Counter,
    /// Nodes marked NotReady for want of heartbeats.
    pub(crate) not_ready: Counter,
    /// Nodes the lifecycle read from the store to mark them (marked, or
    /// found marked already).
    pub(crate) lifecycle_reads: Counter,
    /// Pods deleted for a `NoExecute` taint they do not tolerate.
    pub(crate) taint_evictions: Counter,
    /// Scheduling attempts, by result.
    pub(crate) schedule_attempts: Family<ResultLabel, Counter>,
    /// Heartbeats written on live sessions' behalf, by kind.
    pub(crate) heartbeats: Family<crate::heartbeat::BeatLabel, Counter>,
}

/// How a scheduling attempt ended.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ResultLabel {
    /// `scheduled` or `unschedulable`.
    pub(crate) result: &'static str,
}

impl Metrics {
    /// Registers the counters in `registry` under the prefix
    /// `edgecontroller` (`edgehive_edgecontroller_` in a process's registry).
    ///
    /// ```
    /// use prometheus_client::{encoding::text::encode, registry::Registry};
    /// let metrics = edgehive_edgecontroller::Metrics::default();
    /// let mut registry = Registry::with_prefix("edgehive");
    /// metrics.register(&mut registry);
    /// let mut text = String::new();
    /// encode(&mut text, &registry).unwrap();
    /// assert!(text.contains("\nedgehive_edgecontroller_forbidden_total 0\n"));
    /// ```
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("edgecontroller");
        r.register("downstream", "Messages handed to CloudHub", self.downstream.clone());
        r.register("upstream", "Upstream messages handled", self.upstream.clone());
        r.register(
            "upstream_in_flight",
            "Upstream requests whose store work is running (many nodes at once, one request per node)",
            self.upstream_in_flight.clone(),
        );
        r.register(
            "upstream_waiting",
            "Upstream requests waiting behind a request of the same node",
            self.upstream_waiting.clone(),
        );
        r.register(
            "sessions",
            "Nodes with a CloudHub session, or whose session's end is remembered as their last beat",
            self.sessions.clone(),
        );
        r.register(
            "upstream_busy",
            "Upstream requests refused as busy: 256 of their node's already waited behind a request in flight, or 4,096 in all and their node's the most",
            self.upstream_busy.clone(),
        );
        r.register(
            "busy_answers_unsent",
            "Busy answers not sent: CloudHub's mailbox was full (the edge's own deadline covers the request)",
            self.busy_unsent.clone(),
        );
        r.register("forbidden", "Upstream requests refused: not the node's object", self.forbidden.clone());
        r.register("invalid", "Upstream requests refused as malformed or unsupported", self.invalid.clone());
        r.register("node_not_ready", "Nodes marked NotReady for want of heartbeats", self.not_ready.clone());
        r.register(
            "lifecycle_reads",
            "Nodes the lifecycle read from the store to mark their conditions Unknown (marked, or found marked already)",
            self.lifecycle_reads.clone(),
        );
        r.register(
            "taint_evictions",
            "Pods deleted for a NoExecute taint of their node they do not tolerate",
            self.taint_evictions.clone(),
        );
        r.register(
            "schedule_attempts",
            "Attempts to place a pod without a node, by result (scheduled, unschedulable)",
            self.schedule_attempts.clone(),
        );
        r.register(
            "heartbeats",
            "Heartbeats written on behalf of nodes whose session proves them alive, by kind (lease, status)",
            self.heartbeats.clone(),
        );
    }
}
