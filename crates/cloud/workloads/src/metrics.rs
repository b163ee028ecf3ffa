//! Metrics of the workload controllers (`edgehive_workloads_*`, docs/metrics.md).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Which controller synced.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabel {
    /// `replicaset`, `deployment`, `garbagecollector`.
    pub controller: &'static str,
}

/// One kind of write.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// `create`, `patch`, `delete`.
    pub verb: &'static str,
    /// The resource written (`pods`, `replicasets`, ...).
    pub resource: &'static str,
    /// `ok`, `conflict` (decided again) or `error`.
    pub result: &'static str,
}

/// The controllers' counters.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Syncs run, by controller.
    pub(crate) syncs: Family<ControllerLabel, Counter>,
    /// Writes to the store, by verb, resource and result.
    pub(crate) writes: Family<WriteLabels, Counter>,
    /// Objects the garbage collector deleted.
    pub(crate) collected: Counter,
    /// Tasks waiting in the work queue.
    pub(crate) queue_depth: Gauge,
}

impl Metrics {
    /// Registers under `workloads` (`edgehive_workloads_` in a process's registry).
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("workloads");
        r.register("syncs", "Controller syncs run, by controller", self.syncs.clone());
        r.register(
            "writes",
            "Writes the controllers made to the store, by verb, resource and result",
            self.writes.clone(),
        );
        r.register("collected", "Objects the garbage collector deleted", self.collected.clone());
        r.register("queue_depth", "Tasks waiting in the controllers' work queue", self.queue_depth.clone());
    }
}
