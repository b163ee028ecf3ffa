//! The controllers' loop: informers feed the world and the collector's
//! graph; a work queue (each key at most once) runs syncs; their plans are
//! written through the store with Kubernetes' defaults and validation, and
//! what was written goes straight back into the world.
//!
//! Nothing is decided before the informers' first lists are in: a
//! ReplicaSet synced before its pods are known would create them again.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use edgehive_events::Recorder;
use edgehive_registry::admit;
use edgehive_registry::status::ApiError;
use edgehive_store::informer::{Change, inform};
use edgehive_store::resources::{
    CONFIGMAPS, CONTROLLER_REVISIONS, CRON_JOBS, DAEMON_SETS, DEPLOYMENTS, ENDPOINT_SLICES, ENDPOINTS, JOBS,
    NAMESPACES, NODES, POD_DISRUPTION_BUDGETS, PODS, REPLICA_SETS, ResourceDef, SERVICES, STATEFUL_SETS,
};
use edgehive_store::selector::LabelSelector;
use edgehive_store::{DeleteOptions, DeleteOutcome, Object, Propagation, Store, StoreError};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::events;
use crate::gc::{self, GcAction, Graph};
use crate::metrics::Metrics;
use crate::plan::{Action, Plan};
use crate::world::{Key, OwnerRef, Update, World, str_at};
use crate::{Clock, cronjob, daemonset, deployment, disruption, endpoints, job, replicaset, rootca, statefulset};

/// One unit of work.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Task {
    ReplicaSet(Key),
    Deployment(Key),
    DaemonSet(Key),
    StatefulSet(Key),
    Job(Key),
    CronJob(Key),
    Disruption(Key),
    Collect(String),
    /// A Service's Endpoints and EndpointSlices.
    Endpoints(Key),
    /// A namespace's `kube-root-ca.crt`.
    RootCa(String),
}

impl Task {
    fn controller(&self) -> &'static str {
        match self {
            Task::ReplicaSet(_) => "replicaset",
            Task::Deployment(_) => "deployment",
            Task::DaemonSet(_) => "daemonset",
            Task::StatefulSet(_) => "statefulset",
            Task::Job(_) => "job",
            Task::CronJob(_) => "cronjob",
            Task::Disruption(_) => "disruption",
            Task::Collect(_) => "garbagecollector",
            Task::Endpoints(_) => "endpoint",
            Task::RootCa(_) => "rootcacertpublisher",
        }
    }
}

/// A work queue: each task at most once, and tasks due later (each at
/// most once, at its earliest time), so it holds no more than two entries
/// per object however often a sync asks to look again.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    ready: VecDeque<Task>,
    queued: HashSet<Task>,
    later: BTreeMap<Instant, Vec<Task>>,
    due: HashMap<Task, Instant>,
}

impl Queue {
    pub(crate) fn add(&mut self, t: Task) {
        if self.queued.insert(t.clone()) {
            self.ready.push_back(t);
        }
    }

    pub(crate) fn add_after(&mut self, t: Task, at: Instant) {
        match self.due.get(&t) {
            Some(cur) if *cur <= at => return,
            Some(cur) => {
                let cur = *cur;
                if let Some(v) = self.later.get_mut(&cur) {
                    v.retain(|x| x != &t);
                    if v.is_empty() {
                        self.later.remove(&cur);
                    }
                }
            }
            None => {}
        }
        self.due.insert(t.clone(), at);
        self.later.entry(at).or_default().push(t);
    }

    /// Moves due tasks to the ready queue; the next due time, if any.
    fn promote(&mut self, now: Instant) -> Option<Instant> {
        while let Some(entry) = self.later.first_entry() {
            if *entry.key() > now {
                return Some(*entry.key());
            }
            for t in entry.remove() {
                self.due.remove(&t);
                self.add(t);
            }
        }
        None
    }

    fn pop(&mut self) -> Option<Task> {
        let t = self.ready.pop_front()?;
        self.queued.remove(&t);
        Some(t)
    }

    pub(crate) fn len(&self) -> usize {
        self.ready.len() + self.due.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_asked_for_again_and_again_is_queued_once_at_its_earliest_time() {
        let mut q = Queue::default();
        let t = Task::Job(("ns".into(), "j".into()));
        let now = Instant::now();
        for i in 0..1000u64 {
            q.add_after(t.clone(), now + Duration::from_secs(10 + i % 7));
        }
        q.add_after(t.clone(), now + Duration::from_secs(3));
        assert_eq!(q.len(), 1);
        assert_eq!(q.promote(now + Duration::from_secs(2)), Some(now + Duration::from_secs(3)));
        assert_eq!(q.promote(now + Duration::from_secs(3)), None);
        assert_eq!(q.pop(), Some(t));
        assert_eq!(q.len(), 0);
    }
}

/// Why a write did not happen.
#[derive(Debug)]
enum WriteError {
    Store(StoreError),
    Refused(ApiError),
    /// The object is not the one decided about any more (other uid, moved on).
    Stale,
}

impl From<StoreError> for WriteError {
    fn from(e: StoreError) -> Self {
        WriteError::Store(e)
    }
}

impl From<ApiError> for WriteError {
    fn from(e: ApiError) -> Self {
        WriteError::Refused(e)
    }
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::Store(e) => write!(f, "{e}"),
            WriteError::Refused(e) => write!(f, "{}", e.message),
            WriteError::Stale => f.write_str("the object changed since it was read"),
        }
    }
}

/// What a write left in the store.
enum Written {
    /// The object as stored now.
    Stored(Object),
    /// The object is gone (its last state, at the revision of its deletion).
    Deleted(Object),
}

/// The loop's state.
pub(crate) struct Runner {
    store: Store,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
    events: Recorder,
    pub(crate) world: World,
    pub(crate) graph: Graph,
    pub(crate) queue: Queue,
    listed: HashSet<usize>,
    /// The API server's CA, published as `kube-root-ca.crt` (`None`: not published).
    root_ca: Option<Arc<str>>,
}

fn id(res: &'static ResourceDef) -> usize {
    std::ptr::from_ref(res) as usize
}

impl Runner {
    pub(crate) fn new(
        store: Store,
        clock: Arc<dyn Clock>,
        metrics: Arc<Metrics>,
        events: Recorder,
        root_ca: Option<Arc<str>>,
    ) -> Runner {
        Runner {
            store,
            clock,
            metrics,
            events,
            world: World::default(),
            graph: Graph::default(),
            queue: Queue::default(),
            listed: HashSet::new(),
            root_ca,
        }
    }

    fn endpoints_ready(&self) -> bool {
        [&SERVICES, &PODS, &ENDPOINTS, &ENDPOINT_SLICES, &NODES].iter().all(|r| self.listed.contains(&id(r)))
    }

    fn root_ca_ready(&self) -> bool {
        self.root_ca.is_some() && [&NAMESPACES, &CONFIGMAPS].iter().all(|r| self.listed.contains(&id(r)))
    }

    fn controllers_ready(&self) -> bool {
        [
            &PODS,
            &REPLICA_SETS,
            &DEPLOYMENTS,
            &DAEMON_SETS,
            &STATEFUL_SETS,
            &CONTROLLER_REVISIONS,
            &NODES,
            &JOBS,
            &CRON_JOBS,
        ]
        .iter()
        .all(|r| self.listed.contains(&id(r)))
    }

    fn collector_ready(&self) -> bool {
        gc::watched().all(|r| self.listed.contains(&id(r)))
    }

    /// Runs until `stop`.
    pub(crate) async fn run(mut self, stop: CancellationToken) {
        let (tx, mut rx) = mpsc::channel::<Change>(1024);
        let mut watches = Vec::new();
        for res in gc::watched() {
            watches.push(tokio::spawn(inform(self.store.clone(), "workloads", res, tx.clone(), stop.clone())));
        }
        drop(tx);
        loop {
            let next_due = self.queue.promote(Instant::now());
            if self.queue.ready.is_empty() {
                let wait =
                    next_due.map_or(Duration::from_secs(3600), |at| at.saturating_duration_since(Instant::now()));
                tokio::select! {
                    _ = stop.cancelled() => break,
                    change = rx.recv() => match change {
                        Some(c) => self.take(c),
                        None => break,
                    },
                    _ = tokio::time::sleep(wait) => {}
                }
                continue;
            }
            // Take in what the watches have (without waiting), then work.
            while let Ok(c) = rx.try_recv() {
                self.take(c);
            }
            self.metrics.queue_depth.set(i64::try_from(self.queue.len()).unwrap_or(i64::MAX));
            if let Some(task) = self.queue.pop() {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = self.work(task) => {}
                }
            }
            // Also when the loop goes idle, so the gauge does not keep its last busy value.
            self.metrics.queue_depth.set(i64::try_from(self.queue.len()).unwrap_or(i64::MAX));
        }
        for w in watches {
            w.abort();
        }
    }

    /// Takes in one informer change and queues what it concerns.
    pub(crate) fn take(&mut self, change: Change) {
        match change {
            Change::Relisted { resource, objects } => {
                let (controllers, collector) = (self.controllers_ready(), self.collector_ready());
                let (endpoints, root_ca) = (self.endpoints_ready(), self.root_ca_ready());
                self.listed.insert(id(resource));
                self.world.relist(resource, &objects);
                let wake = self.graph.relist(resource, &objects);
                if !self.collector_ready() {
                    // Nothing is collected before every list is in; then everything is looked at.
                } else if !collector {
                    for uid in self.graph.uids() {
                        self.queue.add(Task::Collect(uid));
                    }
                } else {
                    for uid in wake {
                        self.queue.add(Task::Collect(uid));
                    }
                }
                let all = self.controllers_ready() && !controllers;
                if all || (self.controllers_ready() && std::ptr::eq(resource, &REPLICA_SETS)) {
                    for rs in self.world.replica_sets.keys().cloned().collect::<Vec<_>>() {
                        self.queue.add(Task::ReplicaSet(rs));
                    }
                }
                if all || (self.controllers_ready() && std::ptr::eq(resource, &DEPLOYMENTS)) {
                    for d in self.world.deployments.keys().cloned().collect::<Vec<_>>() {
                        self.queue.add(Task::Deployment(d));
                    }
                }
                let daemons = std::ptr::eq(resource, &DAEMON_SETS)
                    || std::ptr::eq(resource, &NODES)
                    || std::ptr::eq(resource, &CONTROLLER_REVISIONS)
                    || std::ptr::eq(resource, &PODS);
                if all || (self.controllers_ready() && daemons) {
                    for d in self.world.daemon_sets.keys().cloned().collect::<Vec<_>>() {
                        self.queue.add(Task::DaemonSet(d));
                    }
                }
                let sets = std::ptr::eq(resource, &STATEFUL_SETS)
                    || std::ptr::eq(resource, &CONTROLLER_REVISIONS)
                    || std::ptr::eq(resource, &PODS);
                if all || (self.controllers_ready() && sets) {
                    for s in self.world.stateful_sets.keys().cloned().collect::<Vec<_>>() {
                        self.queue.add(Task::StatefulSet(s));
                    }
                }
                if all || (self.controllers_ready() && (std::ptr::eq(resource, &JOBS) || std::ptr::eq(resource, &PODS)))
                {
                    for j in self.world.jobs.keys().cloned().collect::<Vec<_>>() {
                        self.queue.add(Task::Job(j));
                    }
                }
                if all
                    || (self.controllers_ready()
                        && (std::ptr::eq(resource, &CRON_JOBS) || std::ptr::eq(resource, &JOBS)))
                {
                    for c in self.world.cron_jobs.keys().cloned().collect::<Vec<_>>() {
                        self.queue.add(Task::CronJob(c));
                    }
                }
                if all || self.controllers_ready() {
                    for b in self.world.disruption_budgets.keys().cloned().collect::<Vec<_>>() {
                        self.queue.add(Task::Disruption(b));
                    }
                }
                let for_endpoints =
                    [&SERVICES, &PODS, &ENDPOINTS, &ENDPOINT_SLICES].iter().any(|r| std::ptr::eq(resource, *r));
                if self.endpoints_ready() && (!endpoints || for_endpoints) {
                    for k in self.world.services.keys().cloned().collect::<Vec<_>>() {
                        self.queue.add(Task::Endpoints(k));
                    }
                }
                let for_root_ca = std::ptr::eq(resource, &NAMESPACES) || std::ptr::eq(resource, &CONFIGMAPS);
                if self.root_ca_ready() && (!root_ca || for_root_ca) {
                    for ns in self.world.namespaces.keys().cloned().collect::<Vec<_>>() {
                        self.queue.add(Task::RootCa(ns));
                    }
                }
                if self.controllers_ready() && std::ptr::eq(resource, &PODS) && !all {
                    // Pods relisted: every ReplicaSet counts again.
                    for rs in self.world.replica_sets.keys().cloned().collect::<Vec<_>>() {
                        self.queue.add(Task::ReplicaSet(rs));
                    }
                }
            }
            Change::Upsert { object, .. } => self.known(&object, false),
            Change::Deleted(object) => self.known(&object, true),
        }
    }

    /// Records an object (written, watched, or gone) and queues its syncs.
    fn known(&mut self, obj: &Object, deleted: bool) {
        let update = if deleted { self.world.remove(obj, true) } else { self.world.upsert(obj) };
        let wake = if deleted { self.graph.remove(obj) } else { self.graph.upsert(obj) };
        for uid in wake {
            self.queue.add(Task::Collect(uid));
        }
        if let Some(u) = update {
            self.wake_for(&u);
        }
    }

    fn wake_for(&mut self, u: &Update) {
        match u {
            Update::Pod { old, new } => {
                let ns = new.as_ref().or(old.as_ref()).map(|p| p.namespace.clone()).unwrap_or_default();
                self.wake_budgets(&ns);
                let moved = match (old, new) {
                    (Some(o), Some(n)) => endpoints::moves_endpoints(o, n),
                    _ => true,
                };
                if moved {
                    let labels = old.iter().chain(new.iter()).map(|p| &p.labels);
                    for svc in endpoints::services_selecting(&self.world, &ns, labels) {
                        self.queue.add(Task::Endpoints((ns.clone(), svc)));
                    }
                }
                for p in old.iter().chain(new.iter()) {
                    for o in p.owners.iter().filter(|o| o.controller) {
                        match &*o.kind {
                            "ReplicaSet" => self.queue.add(Task::ReplicaSet((ns.clone(), o.name.clone()))),
                            "DaemonSet" => self.queue.add(Task::DaemonSet((ns.clone(), o.name.clone()))),
                            "StatefulSet" => self.queue.add(Task::StatefulSet((ns.clone(), o.name.clone()))),
                            "Job" => self.queue.add(Task::Job((ns.clone(), o.name.clone()))),
                            _ => {}
                        }
                    }
                }
                // A new orphan, or one whose labels changed: who would adopt it?
                if let Some(p) = new
                    && p.controller_uid().is_none()
                    && old.as_ref().is_none_or(|o| o.labels != p.labels)
                {
                    let selecting = |table: &crate::world::Objects| -> Vec<Key> {
                        table
                            .in_namespace(&ns)
                            .filter(|o| selects(&o.value, &p.labels))
                            .map(|o| (ns.clone(), o.name().to_string()))
                            .collect()
                    };
                    let (sets, daemons, stateful) = (
                        selecting(&self.world.replica_sets),
                        selecting(&self.world.daemon_sets),
                        selecting(&self.world.stateful_sets),
                    );
                    for k in sets {
                        self.queue.add(Task::ReplicaSet(k));
                    }
                    for k in daemons {
                        self.queue.add(Task::DaemonSet(k));
                    }
                    for k in stateful {
                        self.queue.add(Task::StatefulSet(k));
                    }
                }
            }
            Update::Node { old, new } => {
                // Readiness moved: the ReplicaSets with pods there count again (offline replacement).
                if old.as_ref().map(|n| n.not_ready_since) != new.as_ref().map(|n| n.not_ready_since) {
                    let node = new.as_ref().or(old.as_ref()).map(|n| n.name.clone()).unwrap_or_default();
                    let sets: Vec<Key> = self
                        .world
                        .pods
                        .on_node(&node)
                        .flat_map(|p| {
                            p.owners
                                .iter()
                                .filter(|o| o.controller && o.kind == "ReplicaSet")
                                .map(|o| (p.namespace.clone(), o.name.clone()))
                        })
                        .collect();
                    for k in sets {
                        self.queue.add(Task::ReplicaSet(k));
                    }
                }
                // A node that joined, left, or changed labels or taints: every DaemonSet looks again.
                let moved = match (old, new) {
                    (Some(o), Some(n)) => o.labels != n.labels || o.taints != n.taints || o.deleting != n.deleting,
                    _ => true,
                };
                if moved {
                    for d in self.world.daemon_sets.keys().cloned().collect::<Vec<_>>() {
                        self.queue.add(Task::DaemonSet(d));
                    }
                }
            }
            Update::Object { res, old, new } => {
                let v = new.as_ref().or(old.as_ref());
                let Some(v) = v else { return };
                let ns = str_at(v, "/metadata/namespace").to_string();
                let name = str_at(v, "/metadata/name").to_string();
                if [&REPLICA_SETS, &DEPLOYMENTS, &STATEFUL_SETS].iter().any(|r| std::ptr::eq(*res, *r)) {
                    // Their scale is what percentage budgets count against.
                    self.wake_budgets(&ns);
                }
                if std::ptr::eq(*res, &SERVICES) || std::ptr::eq(*res, &ENDPOINTS) {
                    self.queue.add(Task::Endpoints((ns, name)));
                } else if std::ptr::eq(*res, &ENDPOINT_SLICES) {
                    let svc = str_at(v, "/metadata/labels/kubernetes.io~1service-name");
                    if !svc.is_empty() {
                        self.queue.add(Task::Endpoints((ns, svc.to_string())));
                    }
                } else if std::ptr::eq(*res, &NAMESPACES) {
                    self.queue.add(Task::RootCa(name));
                } else if std::ptr::eq(*res, &CONFIGMAPS) {
                    self.queue.add(Task::RootCa(ns));
                } else if std::ptr::eq(*res, &POD_DISRUPTION_BUDGETS) {
                    self.queue.add(Task::Disruption((ns, name)));
                } else if std::ptr::eq(*res, &REPLICA_SETS) {
                    self.queue.add(Task::ReplicaSet((ns.clone(), name)));
                    for x in old.iter().chain(new.iter()) {
                        match OwnerRef::controller_of(x) {
                            Some(o) if o.kind == "Deployment" => {
                                self.queue.add(Task::Deployment((ns.clone(), o.name)));
                            }
                            Some(_) => {}
                            None => {
                                let labels = crate::world::labels_of(x, "/metadata/labels");
                                let matching: Vec<Key> = self
                                    .world
                                    .deployments
                                    .in_namespace(&ns)
                                    .filter(|d| selects(&d.value, &labels))
                                    .map(|d| (ns.clone(), d.name().to_string()))
                                    .collect();
                                for k in matching {
                                    self.queue.add(Task::Deployment(k));
                                }
                            }
                        }
                    }
                } else if std::ptr::eq(*res, &DEPLOYMENTS) {
                    self.queue.add(Task::Deployment((ns, name)));
                } else if std::ptr::eq(*res, &DAEMON_SETS) {
                    self.queue.add(Task::DaemonSet((ns, name)));
                } else if std::ptr::eq(*res, &STATEFUL_SETS) {
                    self.queue.add(Task::StatefulSet((ns, name)));
                } else if std::ptr::eq(*res, &JOBS) {
                    self.queue.add(Task::Job((ns.clone(), name)));
                    for x in old.iter().chain(new.iter()) {
                        if let Some(o) = OwnerRef::controller_of(x).filter(|o| o.kind == "CronJob") {
                            self.queue.add(Task::CronJob((ns.clone(), o.name)));
                        }
                    }
                } else if std::ptr::eq(*res, &CRON_JOBS) {
                    self.queue.add(Task::CronJob((ns, name)));
                } else if std::ptr::eq(*res, &CONTROLLER_REVISIONS) {
                    for x in old.iter().chain(new.iter()) {
                        match OwnerRef::controller_of(x) {
                            Some(o) if o.kind == "DaemonSet" => self.queue.add(Task::DaemonSet((ns.clone(), o.name))),
                            Some(o) if o.kind == "StatefulSet" => {
                                self.queue.add(Task::StatefulSet((ns.clone(), o.name)));
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
    }

    /// Queues every PodDisruptionBudget of namespace `ns`.
    fn wake_budgets(&mut self, ns: &str) {
        let keys: Vec<Key> =
            self.world.disruption_budgets.in_namespace(ns).map(|b| (ns.to_string(), b.name().to_string())).collect();
        for k in keys {
            self.queue.add(Task::Disruption(k));
        }
    }

    /// Runs one task.
    pub(crate) async fn work(&mut self, task: Task) {
        let now = self.clock.now();
        let (plan, gc_actions) = match &task {
            Task::ReplicaSet((ns, name)) if self.controllers_ready() => {
                (replicaset::sync(&self.world, ns, name, now), Vec::new())
            }
            Task::Deployment((ns, name)) if self.controllers_ready() => {
                (deployment::sync_all(&self.world, ns, name, now), Vec::new())
            }
            Task::DaemonSet((ns, name)) if self.controllers_ready() => {
                (daemonset::sync(&self.world, ns, name, now), Vec::new())
            }
            Task::StatefulSet((ns, name)) if self.controllers_ready() => {
                (statefulset::sync(&self.world, ns, name, now), Vec::new())
            }
            Task::Job((ns, name)) if self.controllers_ready() => (job::sync(&self.world, ns, name, now), Vec::new()),
            Task::CronJob((ns, name)) if self.controllers_ready() => {
                (cronjob::sync(&self.world, ns, name, now), Vec::new())
            }
            Task::Disruption((ns, name)) if self.controllers_ready() => {
                (disruption::sync(&self.world, ns, name, now), Vec::new())
            }
            Task::Collect(uid) if self.collector_ready() => (Plan::none(), self.graph.sync(uid)),
            Task::Endpoints((ns, name)) if self.endpoints_ready() => {
                (endpoints::sync(&self.world, ns, name, now), Vec::new())
            }
            Task::RootCa(ns) if self.root_ca_ready() => {
                (self.root_ca.as_deref().map_or_else(Plan::none, |pem| rootca::sync(&self.world, ns, pem)), Vec::new())
            }
            _ => {
                // Not everything is listed yet; the relist queues it again.
                return;
            }
        };
        self.metrics.syncs.get_or_create(&crate::metrics::ControllerLabel { controller: task.controller() }).inc();
        let requeue = plan.requeue_after;
        let stale = self.execute(&task, plan).await;
        for a in gc_actions {
            self.collect(a).await;
        }
        if stale {
            // Something moved under the decision: decide again with what is known now.
            self.queue.add_after(task.clone(), Instant::now() + Duration::from_millis(50));
        } else if let Some(d) = requeue {
            self.queue.add_after(task, Instant::now() + d);
        }
    }

    /// Writes a plan; true when a write found its object changed (decide again).
    async fn execute(&mut self, task: &Task, plan: Plan) -> bool {
        let recorder = self.events.named(events::component(task));
        let mut stale = false;
        let mut actions = plan.actions.into_iter().peekable();
        let mut batch_size = 1;
        let mut creates_failed = false;
        while let Some(a) = actions.next() {
            if let Action::Create { .. } = a {
                // Slow start: 1, 2, 4, ... creations at once; a failed batch ends them.
                let mut batch = vec![a];
                while batch.len() < batch_size && matches!(actions.peek(), Some(Action::Create { .. })) {
                    batch.extend(actions.next());
                }
                if creates_failed {
                    continue;
                }
                batch_size *= 2;
                let about = events::subject_of(&self.world, task);
                let intents: Vec<_> = batch
                    .iter()
                    .map(|a| about.as_ref().and_then(|o| events::intent_about(&self.world, task, o, a)))
                    .collect();
                let results = futures_util::future::join_all(batch.into_iter().map(|a| self.write(a))).await;
                for (r, intent) in results.into_iter().zip(intents) {
                    record(&recorder, intent, &r);
                    match r {
                        Ok(Some(w)) => self.written(w),
                        Ok(None) => {}
                        Err(e) => {
                            creates_failed = true;
                            tracing::warn!(module = "workloads", error = %e, "create failed");
                        }
                    }
                }
                continue;
            }
            let verb = a.verb();
            let intent = events::intent(&self.world, task, &a);
            let r = self.write(a).await;
            record(&recorder, intent, &r);
            match r {
                Ok(Some(w)) => self.written(w),
                Ok(None) => {}
                Err(WriteError::Stale) => stale = true,
                Err(WriteError::Store(StoreError::NotFound { .. })) => {}
                Err(WriteError::Store(e @ StoreError::Conflict { .. })) => {
                    tracing::debug!(module = "workloads", verb, error = %e, "write conflicted; deciding again");
                    stale = true;
                }
                Err(e) => tracing::warn!(module = "workloads", verb, error = %e, "write failed"),
            }
        }
        stale
    }

    /// Takes in what a write left.
    fn written(&mut self, w: Written) {
        match w {
            Written::Stored(o) => self.known(&o, false),
            Written::Deleted(o) => {
                // Gone now; the watch's event clears the tombstone.
                if let Some(u) = self.world.remove(&o, false) {
                    self.wake_for(&u);
                }
            }
        }
    }

    /// One write through the store.
    async fn write(&self, a: Action) -> Result<Option<Written>, WriteError> {
        let res = a.resource();
        let verb = a.verb();
        let out = match a {
            Action::Create { res, mut object } => {
                admit::create(res, &mut object)?;
                Ok(Some(Written::Stored(self.store.create(res, object).await?)))
            }
            Action::Patch { res, namespace, name, uid, rev, patch } => {
                let obj = self
                    .store
                    .update_with(res, &namespace, &name, |cur| {
                        let old = cur.value()?;
                        if str_at(old, "/metadata/uid") != uid || rev.is_some_and(|r| r != cur.rev()) {
                            return Err(WriteError::Stale);
                        }
                        let mut new = old.clone();
                        edgehive_registry::patch::merge_patch(&mut new, &patch);
                        admit::update(res, &mut new, old)?;
                        Ok(Some(new))
                    })
                    .await?;
                Ok(Some(Written::Stored(obj)))
            }
            Action::Delete { res, namespace, name, uid, propagation } => {
                let opts = DeleteOptions { uid: Some(uid), propagation, ..DeleteOptions::default() };
                self.delete(res, &namespace, &name, &opts).await
            }
        };
        let result = match &out {
            Ok(_) => "ok",
            Err(WriteError::Stale | WriteError::Store(StoreError::Conflict { .. })) => "conflict",
            Err(_) => "error",
        };
        self.metrics.writes.get_or_create(&crate::metrics::WriteLabels { verb, resource: res.plural, result }).inc();
        out
    }

    async fn delete(
        &self,
        res: &'static ResourceDef,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Option<Written>, WriteError> {
        match self.store.delete(res, ns, name, opts).await {
            Ok(DeleteOutcome::Pending(o)) => Ok(Some(Written::Stored(o))),
            Ok(DeleteOutcome::Deleted(o)) => Ok(Some(Written::Deleted(o))),
            Err(StoreError::Conflict { .. }) if opts.uid.is_some() => Err(WriteError::Stale),
            Err(e) => Err(e.into()),
        }
    }

    /// Carries out one collector decision.
    async fn collect(&mut self, a: GcAction) {
        let result = match a {
            GcAction::Collect { res, namespace, name, uid, owners } => {
                self.collect_dependent(res, &namespace, &name, &uid, &owners).await
            }
            GcAction::Orphan { res, namespace, name, uid, owner_uid } => {
                self.patch_meta(res, &namespace, &name, &uid, |v| gc::without_owners(v, &[&owner_uid])).await
            }
            GcAction::DeleteForeground { res, namespace, name, uid } => {
                let opts = DeleteOptions {
                    uid: Some(uid),
                    propagation: Some(Propagation::Foreground),
                    ..DeleteOptions::default()
                };
                self.store_delete(res, &namespace, &name, &opts).await
            }
            GcAction::Finalized { res, namespace, name, uid, finalizer } => {
                self.patch_meta(res, &namespace, &name, &uid, |v| {
                    let kept: Vec<Value> = v
                        .pointer("/metadata/finalizers")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter(|f| f.as_str() != Some(finalizer))
                        .cloned()
                        .collect();
                    serde_json::json!({"metadata": {"finalizers": if kept.is_empty() { Value::Null } else { Value::Array(kept) }}})
                })
                .await
            }
        };
        if let Err(e) = result {
            tracing::warn!(module = "garbagecollector", error = %e, "collection failed");
        }
    }

    async fn store_delete(
        &mut self,
        res: &'static ResourceDef,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<(), WriteError> {
        let out = self.store.delete(res, ns, name, opts).await;
        let result = if out.is_ok() { "ok" } else { "error" };
        self.metrics
            .writes
            .get_or_create(&crate::metrics::WriteLabels { verb: "delete", resource: res.plural, result })
            .inc();
        match out {
            Ok(DeleteOutcome::Pending(o)) => self.known(&o, false),
            Ok(DeleteOutcome::Deleted(o)) => {
                self.world.remove(&o, false);
            }
            Err(StoreError::NotFound { .. }) => {}
            Err(StoreError::Conflict { .. }) => return Err(WriteError::Stale),
            Err(e) => return Err(e.into()),
        }
        self.metrics.collected.inc();
        Ok(())
    }

    async fn patch_meta(
        &mut self,
        res: &'static ResourceDef,
        ns: &str,
        name: &str,
        uid: &str,
        patch: impl Fn(&Value) -> Value,
    ) -> Result<(), WriteError> {
        let out = self
            .store
            .update_with(res, ns, name, |cur| {
                let old = cur.value()?;
                if str_at(old, "/metadata/uid") != uid {
                    return Err(WriteError::Stale);
                }
                let mut new = old.clone();
                edgehive_registry::patch::merge_patch(&mut new, &patch(old));
                Ok(Some(new))
            })
            .await;
        match out {
            Ok(o) => {
                self.known(&o, false);
                Ok(())
            }
            Err(WriteError::Store(StoreError::NotFound { .. }) | WriteError::Stale) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Deletes a dependent whose owners are verified gone, or lets go of
    /// the gone ones when others remain.
    async fn collect_dependent(
        &mut self,
        res: &'static ResourceDef,
        ns: &str,
        name: &str,
        uid: &str,
        owners: &[OwnerRef],
    ) -> Result<(), WriteError> {
        let mut gone: Vec<&str> = Vec::new();
        let mut waiting_block = false;
        let mut solid = 0;
        for o in owners {
            let Some(owner_res) = self.store.resources().by_kind(&o.api_version, &o.kind) else {
                // An owner of a kind not served here cannot be verified: keep the dependent.
                solid += 1;
                continue;
            };
            let owner_ns = if owner_res.namespaced { ns } else { "" };
            match self.store.get(owner_res, owner_ns, &o.name).await {
                Err(StoreError::NotFound { .. }) => gone.push(&o.uid),
                Err(e) => return Err(e.into()),
                Ok(obj) if obj.uid() != Some(o.uid.as_str()) => gone.push(&o.uid),
                Ok(obj) => {
                    let v = obj.value()?;
                    let fg = v
                        .pointer("/metadata/finalizers")
                        .and_then(Value::as_array)
                        .is_some_and(|f| f.iter().any(|x| x == edgehive_store::FOREGROUND_FINALIZER));
                    if obj.is_terminating() && fg {
                        waiting_block |= o.block;
                        gone.push(&o.uid);
                    } else {
                        solid += 1;
                    }
                }
            }
        }
        if gone.is_empty() {
            return Ok(());
        }
        if solid > 0 {
            return self.patch_meta(res, ns, name, uid, |v| gc::without_owners(v, &gone)).await;
        }
        let propagation = if waiting_block { Some(Propagation::Foreground) } else { Some(Propagation::Background) };
        let opts = DeleteOptions { uid: Some(uid.to_string()), propagation, ..DeleteOptions::default() };
        tracing::debug!(
            module = "garbagecollector",
            resource = res.plural,
            namespace = ns,
            name,
            "owners gone; deleting"
        );
        self.store_delete(res, ns, name, &opts).await
    }
}

/// Records what a write said: its success, or a failure that is the
/// write's own (a conflict, a vanished object or a name taken is decided
/// again, silently).
fn record(recorder: &Recorder, intent: Option<events::Intent>, r: &Result<Option<Written>, WriteError>) {
    let Some(intent) = intent else { return };
    let notes = match r {
        Ok(Some(Written::Stored(o) | Written::Deleted(o))) => intent.notes(Ok(o.name())),
        Ok(None) => intent.notes(Ok("")),
        // (A create of a name that exists is no failure to tell either, as in Kubernetes.)
        Err(
            WriteError::Stale
            | WriteError::Store(
                StoreError::Conflict { .. } | StoreError::NotFound { .. } | StoreError::AlreadyExists { .. },
            ),
        ) => Vec::new(),
        Err(e) => intent.notes(Err(&e.to_string())),
    };
    for n in notes {
        recorder.record(n);
    }
}

/// Whether the workload `v`'s selector selects `labels`.
fn selects(v: &Value, labels: &impl edgehive_store::selector::Labels) -> bool {
    v.pointer("/spec/selector")
        .and_then(|s| LabelSelector::from_json(s).ok())
        .is_some_and(|s| !s.is_empty() && s.matches(labels))
}
