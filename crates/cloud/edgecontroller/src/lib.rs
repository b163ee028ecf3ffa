//! EdgeController: the bridge between the store and the edges.
//!
//! Downstream, it watches nodes, pods, configmaps and secrets and sends each
//! edge node (a node labelled `node-role.kubernetes.io/edge`) the pods bound
//! to it and the configmaps and secrets those pods use, with KubeEdge's
//! resource strings (`node/{node}/{namespace}/{type}/{name}`) and the
//! object's resourceVersion. A pod being deleted goes as an `update` with
//! its deletionTimestamp; the pod is removed when the edge confirms. When a
//! node (re)connects, everything it should have is offered again and
//! CloudHub sends only what is newer than the node's success points.
//!
//! Upstream, it applies what edges report (registration, node status, pod
//! status, leases, deletion confirmations) and answers their queries, under
//! the NodeRestriction rule ([`restriction`]): a node touches only its own
//! Node (status, kubelet labels, annotations) and Lease (in
//! `kube-node-lease`) and only the status of its own pods, and reads only
//! the configmaps and secrets its pods use. Every write an edge makes gets
//! the API server's defaults and validation. Anything else gets an error
//! reply, is logged and counted, and the session goes on.
//!
//! It also runs the node lifecycle ([`lifecycle`]: NotReady after a grace
//! period without heartbeats, no eviction unless configured) and a simple
//! scheduler ([`scheduler`]) for pods that name no node.
//!
//! **Architecture Invariant:** the controller never talks to a connection;
//! it reaches edges only through CloudHub, by beehive messages.

mod controller;
pub mod heartbeat;
pub mod index;
pub mod inventory;
mod lanes;
pub mod lifecycle;
mod metrics;
mod orphans;
pub mod restriction;
pub mod scheduler;
mod upstream;

use std::sync::Arc;

use edgehive_beehive::{Module, ModuleContext, ModuleFuture};
use edgehive_model::source;
use edgehive_store::Store;
use tokio_util::sync::CancellationToken;

pub use lifecycle::LifecycleConfig;
pub use metrics::Metrics;

/// The EdgeController beehive module (name `edgecontroller`).
#[derive(Debug)]
pub struct EdgeController {
    store: Store,
    lifecycle: LifecycleConfig,
    metrics: Arc<Metrics>,
    tokens: Option<Arc<edgehive_pki::ServiceAccountTokens>>,
    events: edgehive_events::Recorder,
    presence: Option<controller::Presence>,
}

impl EdgeController {
    /// A controller over `store` with the default node lifecycle.
    pub fn new(store: Store) -> EdgeController {
        EdgeController::with_lifecycle(store, LifecycleConfig::default())
    }

    /// A controller over `store` with the given node lifecycle.
    pub fn with_lifecycle(store: Store, lifecycle: LifecycleConfig) -> EdgeController {
        EdgeController {
            store,
            lifecycle,
            metrics: Arc::default(),
            tokens: None,
            events: edgehive_events::Recorder::discard(),
            presence: None,
        }
    }

    /// Answers edges' service account token requests with tokens signed by
    /// `tokens` (the key the API server verifies them with).
    pub fn with_service_account_tokens(mut self, tokens: Arc<edgehive_pki::ServiceAccountTokens>) -> EdgeController {
        self.tokens = Some(tokens);
        self
    }

    /// Records the scheduler's Events (`Scheduled`, `FailedScheduling`, as
    /// `default-scheduler`) and the taint manager's (`TaintManagerEviction`,
    /// as `taint-eviction-controller`) with `events`; without it none are.
    pub fn with_events(mut self, events: edgehive_events::Recorder) -> EdgeController {
        self.events = events;
        self
    }

    /// Asks `connected` whether a node has a session before marking it
    /// NotReady (CloudHub's `presence`). The connection notices tell the
    /// controller the same, but in its mailbox's order: a controller that
    /// is behind would mark a node whose `connected` waits there.
    pub fn with_presence(mut self, connected: impl Fn(&str) -> bool + Send + Sync + 'static) -> EdgeController {
        self.presence = Some(controller::Presence(Arc::new(connected)));
        self
    }

    /// Its counters, to register in the process's registry
    /// ([`Metrics::register`]).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }
}

impl Module for EdgeController {
    fn name(&self) -> &str {
        source::EDGECONTROLLER
    }

    fn group(&self) -> &str {
        source::EDGECONTROLLER
    }

    fn mailbox_capacity(&self) -> Option<usize> {
        Some(8192)
    }

    fn run(self: Arc<Self>, ctx: ModuleContext, cancel: CancellationToken) -> ModuleFuture {
        Box::pin(async move {
            let controller = controller::Controller {
                store: self.store.clone(),
                ctx: ctx.context().clone(),
                index: index::Index::default(),
                metrics: self.metrics.clone(),
                lifecycle: self.lifecycle.clone(),
                sessions: std::collections::HashMap::new(),
                tokens: self.tokens.clone(),
                tainted_since: std::collections::HashMap::new(),
                scheduler_events: self.events.named("default-scheduler"),
                taint_events: self.events.named("taint-eviction-controller"),
                beats_asked: heartbeat::Asked::default(),
                unschedulable_writes: tokio::task::JoinSet::new(),
                lanes: lanes::Lanes::default(),
                presence: self.presence.clone(),
                leases_to_collect: None,
                listed: edgehive_store::informer::FirstLists::new(&controller::WATCHED),
            };
            controller.run(ctx, cancel).await;
            Ok(())
        })
    }
}
