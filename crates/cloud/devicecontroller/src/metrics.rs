//! DeviceController's metrics; [`Metrics::register`] exports them.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// DeviceController's counters and gauges.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Devices bound to a node.
    pub(crate) bound_devices: Gauge,
    /// Messages handed to CloudHub.
    pub(crate) downstream: Counter,
    /// Reports taken from edges.
    pub(crate) reports: Counter,
    /// `devices/reports` batches taken from edges.
    pub(crate) batches: Counter,
    /// Reports refused: malformed, or of a device not bound to the sender.
    pub(crate) refused: Counter,
    /// Status writes.
    pub(crate) status_writes: Counter,
    /// Status writes that failed (retried later).
    pub(crate) status_write_failures: Counter,
    /// Reports merged into a later write instead of written alone.
    pub(crate) coalesced: Counter,
    /// Devices with reports waiting to be written.
    pub(crate) pending: Gauge,
}

impl Metrics {
    /// Registers them under the prefix `devicecontroller`.
    ///
    /// ```
    /// use prometheus_client::{encoding::text::encode, registry::Registry};
    /// let metrics = edgehive_devicecontroller::Metrics::default();
    /// let mut registry = Registry::with_prefix("edgehive");
    /// metrics.register(&mut registry);
    /// let mut text = String::new();
    /// encode(&mut text, &registry).unwrap();
    /// assert!(text.contains("\nedgehive_devicecontroller_status_writes_total 0\n"));
    /// ```
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("devicecontroller");
        r.register("bound_devices", "Devices bound to a node", self.bound_devices.clone());
        r.register("downstream", "Messages handed to CloudHub", self.downstream.clone());
        r.register("reports", "Device reports taken from edges", self.reports.clone());
        r.register("batches", "devices/reports batches taken from edges", self.batches.clone());
        r.register(
            "refused",
            "Device reports refused: malformed, or of a device not bound to the sender",
            self.refused.clone(),
        );
        r.register("status_writes", "Device status writes", self.status_writes.clone());
        r.register("status_write_failures", "Device status writes that failed", self.status_write_failures.clone());
        r.register("coalesced", "Device reports merged into a later status write", self.coalesced.clone());
        r.register("pending", "Devices with reports waiting to be written", self.pending.clone());
    }
}
