//! The workload controllers of the cloud process: ReplicaSets keep their
//! pods, Deployments roll their ReplicaSets, DaemonSets keep one pod per
//! matching node, StatefulSets keep named pods in ordinal order, Jobs run
//! pods to completion, CronJobs make Jobs on a schedule, PodDisruptionBudgets
//! say how many pods may be evicted, and the garbage collector
//! removes what lost its owners — the part of Kubernetes' controller manager
//! an edge platform needs, in the cloud process, over the store.
//!
//! - [`world`]: what the controllers know (workload objects; a slim record
//!   per pod), fed by informers and by their own writes;
//! - [`replicaset`], [`deployment`], [`daemonset`], [`statefulset`], [`job`],
//!   [`cronjob`], [`disruption`]: each a sync function of the world and
//!   the time that returns a [`plan::Plan`] of writes — state machines that
//!   tests drive with a fake clock and compare plans;
//! - [`endpoints`]: a Service's Endpoints and EndpointSlices from the pods
//!   it selects; [`rootca`]: `kube-root-ca.crt` in every namespace;
//! - [`history`]: template history as ControllerRevisions;
//! - [`gc`]: the garbage collector's graph of owner references;
//! - `run`: the loop — a work queue, the informers, and the executor that
//!   writes plans through the store with Kubernetes' defaults and validation
//!   ([`edgehive_registry::admit`]).
//!
//! **Architecture Invariant:** the controllers never call the API server;
//! they write the store through the registry's object semantics, as API
//! writes do (checked by the architecture test).

pub mod cronjob;
pub mod daemonset;
pub mod deployment;
pub mod disruption;
pub mod endpoints;
mod events;
pub mod gc;
pub mod history;
pub mod job;
mod metrics;
pub mod plan;
pub mod replicaset;
pub mod rootca;
mod run;
pub mod statefulset;
pub mod template;
pub mod world;

use std::sync::Arc;

use edgehive_events::Recorder;
use edgehive_store::Store;
use tokio_util::sync::CancellationToken;

pub use metrics::{ControllerLabel, Metrics, WriteLabels};

/// What time it is; a fake in tests.
pub trait Clock: Send + Sync + 'static {
    /// Now.
    fn now(&self) -> time::OffsetDateTime;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> time::OffsetDateTime {
        time::OffsetDateTime::now_utc()
    }
}

/// The workload controllers and the garbage collector, run as one loop.
#[allow(missing_debug_implementations)] // holds a store and a clock; nothing to show
pub struct Workloads {
    store: Store,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
    events: Recorder,
    root_ca: Option<Arc<str>>,
}

impl Workloads {
    /// Controllers over `store`.
    pub fn new(store: Store) -> Workloads {
        Workloads {
            store,
            clock: Arc::new(SystemClock),
            metrics: Arc::new(Metrics::default()),
            events: Recorder::discard(),
            root_ca: None,
        }
    }

    /// Publishing `ca_pem` (the API server's CA) as the `kube-root-ca.crt`
    /// ConfigMap of every namespace; without it none is published.
    pub fn with_root_ca(mut self, ca_pem: &str) -> Workloads {
        self.root_ca = Some(Arc::from(ca_pem));
        self
    }

    /// With another clock.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Workloads {
        self.clock = clock;
        self
    }

    /// Recording Events with `events` (each controller as its Kubernetes
    /// component: `deployment-controller`, ...); without it none are.
    pub fn with_events(mut self, events: Recorder) -> Workloads {
        self.events = events;
        self
    }

    /// The metrics, to register in the process's registry.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Runs until `stop`.
    pub async fn run(self, stop: CancellationToken) {
        run::Runner::new(self.store, self.clock, self.metrics, self.events, self.root_ca).run(stop).await;
    }
}
