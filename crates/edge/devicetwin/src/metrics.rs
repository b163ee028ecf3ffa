//! DeviceTwin's metrics.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// DeviceTwin's counters and gauges.
#[derive(Debug, Default)]
pub struct TwinMetrics {
    pub(crate) devices: Gauge,
    pub(crate) requests: Counter,
    pub(crate) refused: Counter,
    pub(crate) published: Counter,
    pub(crate) publish_dropped: Counter,
    pub(crate) reports_sent: Counter,
    pub(crate) batches_sent: Counter,
    pub(crate) pending_reports: Gauge,
    pub(crate) flushes: Counter,
    pub(crate) flush_failures: Counter,
}

impl TwinMetrics {
    /// Registers them under the prefix `twin`.
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("twin");
        r.register("devices", "Devices this node keeps", self.devices.clone());
        r.register("requests", "Requests on $hw/events topics (MQTT or DMI)", self.requests.clone());
        r.register("refused", "Requests and messages refused as malformed or not this node's", self.refused.clone());
        r.register("published", "Answers and events handed to EventBus", self.published.clone());
        r.register(
            "publish_dropped",
            "Answers and events dropped: 1,024 or 4 MiB waited for EventBus",
            self.publish_dropped.clone(),
        );
        r.register(
            "reports_sent",
            "Twin and state reports sent to the cloud (a device's entry in a batch counts once)",
            self.reports_sent.clone(),
        );
        r.register("batches_sent", "devices/reports messages sent to the cloud", self.batches_sent.clone());
        r.register("pending_reports", "Devices with reports waiting for the cloud", self.pending_reports.clone());
        r.register("flushes", "Writes of changed devices to the device tables", self.flushes.clone());
        r.register("flush_failures", "Failed writes of the device tables", self.flush_failures.clone());
    }
}
