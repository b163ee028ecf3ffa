//! DeviceController: the bridge between the store's Devices and the edges'
//! DeviceTwin (docs/devices.md).
//!
//! Downstream, it watches `devices.kubeedge.io/v1beta1` Devices and
//! DeviceModels. A Device bound to a node (`spec.nodeName`) is sent to that
//! node as KubeEdge v1.15 sends it: a `membership` update (group `twin`,
//! added or removed devices; KubeEdge sends these without ACK), then its
//! DeviceModel and the Device itself as objects (group `resource`,
//! `node/{node}/{namespace}/devicemodel|device/{name}`), which CloudHub
//! delivers with ACKs and success points like pods. A change of the spec,
//! desired values included, goes down as an `update` of the Device; a move
//! to another node removes it from the old one. When a node connects,
//! everything it should hold is offered again and CloudHub sends only what
//! is newer than its success points.
//!
//! Upstream, it takes the edges' `device/{id}/twin/edge_updated` and
//! `device/{id}/state/update` reports, refuses any for a device not bound to
//! the reporting node, and writes the reported values and state into the
//! Device's `status` ([`status`]). Writes are coalesced per device: a
//! changed value is written at most once per `min_write_interval`, and a
//! report that changes nothing but timestamps at most once per
//! `refresh_interval`, so a fleet of devices reporting every second costs
//! the API a write per device only when its values change.
//!
//! **Architecture Invariant:** the controller never talks to a connection;
//! it reaches edges only through CloudHub, by beehive messages.

mod controller;
mod metrics;
pub mod status;

use std::sync::Arc;
use std::time::Duration;

use edgehive_beehive::{Module, ModuleContext, ModuleFuture};
use edgehive_model::source;
use edgehive_store::Store;
use tokio_util::sync::CancellationToken;

pub use metrics::Metrics;

/// How often reported values may reach the store.
#[derive(Debug, Clone)]
pub struct DeviceControllerConfig {
    /// Least time between two status writes of one device whose reported
    /// values or state changed (reports in between are merged).
    pub min_write_interval: Duration,
    /// Least time between two status writes of one device whose reports
    /// changed only timestamps.
    pub refresh_interval: Duration,
    /// Status writes in flight at once.
    pub writes_in_flight: usize,
}

impl Default for DeviceControllerConfig {
    fn default() -> Self {
        DeviceControllerConfig {
            min_write_interval: Duration::from_secs(1),
            refresh_interval: Duration::from_secs(60),
            writes_in_flight: 32,
        }
    }
}

/// The DeviceController beehive module (name `devicecontroller`).
#[derive(Debug)]
pub struct DeviceController {
    store: Store,
    cfg: DeviceControllerConfig,
    metrics: Arc<Metrics>,
}

impl DeviceController {
    /// A controller over `store`.
    pub fn new(store: Store, cfg: DeviceControllerConfig) -> DeviceController {
        DeviceController { store, cfg, metrics: Arc::default() }
    }

    /// Its counters, to register in the process's registry
    /// ([`Metrics::register`]).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }
}

impl Module for DeviceController {
    fn name(&self) -> &str {
        source::DEVICECONTROLLER
    }

    fn group(&self) -> &str {
        source::DEVICECONTROLLER
    }

    fn mailbox_capacity(&self) -> Option<usize> {
        Some(8192)
    }

    fn run(self: Arc<Self>, ctx: ModuleContext, cancel: CancellationToken) -> ModuleFuture {
        Box::pin(async move {
            let c = controller::Controller::new(
                self.store.clone(),
                ctx.context().clone(),
                self.cfg.clone(),
                self.metrics.clone(),
            );
            c.run(ctx, cancel).await;
            Ok(())
        })
    }
}
