//! The controller task: store changes in, downstream messages out.

use std::sync::Arc;
use std::time::Duration;

use edgehive_beehive::{Context, ModuleContext};
use edgehive_events::{Note, ObjectRef, Recorder};
use edgehive_model::{Content, Message, op, source, well_known};
use edgehive_store::informer::{Change, FirstLists, inform};
use edgehive_store::resources::{CONFIGMAPS, LEASES, NODES, PODS, ResourceDef, SECRETS};
use edgehive_store::{Object, Store, StoreError};
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::index::{Index, Ref};
use crate::lifecycle::{self, LifecycleConfig};
use crate::metrics::Metrics;
use crate::orphans;
use crate::scheduler::{self, Placement};

use crate::heartbeat::{self, NODE_LEASES};

/// Longest wait for room in CloudHub's mailbox.
const SEND_DEADLINE: Duration = Duration::from_secs(10);

pub(crate) struct Controller {
    pub(crate) store: Store,
    pub(crate) ctx: Context,
    pub(crate) index: Index,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) lifecycle: LifecycleConfig,
    /// CloudHub sessions: `None` while a node is connected (its keepalives
    /// prove it alive), the time it disconnected afterwards.
    pub(crate) sessions: std::collections::HashMap<String, Option<time::OffsetDateTime>>,
    /// Signs service account tokens for edges' pods (`None`: refused).
    pub(crate) tokens: Option<Arc<edgehive_pki::ServiceAccountTokens>>,
    /// When each (node, taint key, value) `NoExecute` taint was first seen.
    pub(crate) tainted_since: std::collections::HashMap<(String, String, String), time::OffsetDateTime>,
    /// Events of the scheduler and of the taint manager.
    pub(crate) scheduler_events: Recorder,
    pub(crate) taint_events: Recorder,
    /// When the cloud last asked for a heartbeat on a session's behalf.
    pub(crate) beats_asked: heartbeat::Asked,
    /// `PodScheduled=False` writes in flight ([`UNSCHEDULABLE_WRITES`] at most).
    pub(crate) unschedulable_writes: tokio::task::JoinSet<()>,
    /// Upstream requests in flight, in order per node ([`crate::lanes`]).
    pub(crate) lanes: crate::lanes::Lanes,
    /// Whether CloudHub has a session for a node now.
    pub(crate) presence: Option<Presence>,
    /// Nodes gone whose Leases are to go ([`crate::orphans`]), once running.
    pub(crate) leases_to_collect: Option<mpsc::Sender<orphans::Job>>,
    /// Which watched resources have had their first list. Until all have,
    /// the index is partial, and neither requests nor node checks are
    /// taken up: an inventory answered from it had an edge delete the pods
    /// it should hold (a cloud restarted while an edge reconnected at
    /// once), and a node check marked NotReady a node whose fresh Lease was
    /// not listed yet.
    pub(crate) listed: FirstLists,
}

/// What the controller watches; nodes first, so that pods find their
/// node's role known.
pub(crate) static WATCHED: [&ResourceDef; 5] = [&NODES, &PODS, &CONFIGMAPS, &SECRETS, &LEASES];

/// Node deletes and relists waiting for their Leases to be checked.
const LEASES_TO_COLLECT: usize = 1024;
/// Node status marks (NotReady, never reported) a check writes at once.
const MARKS_AT_ONCE: usize = 32;

/// Asks CloudHub whether a node has a session now.
#[derive(Clone)]
pub(crate) struct Presence(pub(crate) Arc<dyn Fn(&str) -> bool + Send + Sync>);

impl std::fmt::Debug for Presence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Presence")
    }
}

/// How many unschedulable pods' condition writes may be in flight at once.
/// Written one at a time, each awaited, the scheduler took a pod per store
/// commit: slower than a ReplicaSet creates them, so in a 20,000-replica
/// rollout its pods watch lagged past the watch history and relisted, twice,
/// and the relists' peak stayed resident (RSS 364–465 MB at rest against
/// 141–145 MB at 10,000). In flight together they share commits.
const UNSCHEDULABLE_WRITES: usize = 64;

/// The KubeEdge resource type of a store resource.
pub(crate) fn type_of(res: &ResourceDef) -> &'static str {
    match res.kind {
        "Pod" => "pod",
        "ConfigMap" => "configmap",
        "Secret" => "secret",
        "Node" => "node",
        _ => "",
    }
}

/// The store resource of a KubeEdge resource type.
pub(crate) fn resource_of(ty: &str) -> Option<&'static ResourceDef> {
    match ty {
        "pod" => Some(&PODS),
        "configmap" => Some(&CONFIGMAPS),
        "secret" => Some(&SECRETS),
        "node" => Some(&NODES),
        _ => None,
    }
}

/// An object's JSON as message content.
pub(crate) fn object_content(obj: &Object) -> Option<Content> {
    Content::from_json(String::from_utf8_lossy(obj.json().ok()?).into_owned()).ok()
}

/// A downstream message: `node/{node}/{namespace|null}/{type}/{name}`.
fn message(node: &str, namespace: &str, ty: &str, name: &str, operation: &'static str, content: Content) -> Message {
    let ns = if namespace.is_empty() { edgehive_model::well_known::NULL_NAMESPACE } else { namespace };
    Message::new()
        .with_route(
            source::EDGECONTROLLER,
            edgehive_model::group::RESOURCE,
            format!("node/{node}/{ns}/{ty}/{name}"),
            operation,
        )
        .with_content(content)
}

/// A downstream message for `node` carrying `obj` (or its shared `content`)
/// at its resourceVersion.
fn object_message(node: &str, operation: &'static str, obj: &Object, content: Content) -> Message {
    let ns = if obj.resource().namespaced { obj.namespace() } else { "" };
    message(node, ns, type_of(obj.resource()), obj.name(), operation, content)
        .with_resource_version(obj.rev().to_string())
}

/// What a `delete` carries, as KubeEdge sends it: the object's identity
/// (apiVersion, kind, name, namespace, uid, and its resourceVersion when
/// known) and nothing of its data, so that a node that no longer needs a
/// secret is not sent its current value.
fn identity(api_version: &str, kind: &str, namespace: &str, name: &str, uid: &str, rv: Option<u64>) -> Content {
    let mut meta = serde_json::json!({"name": name});
    if !uid.is_empty() {
        meta["uid"] = serde_json::json!(uid);
    }
    if !namespace.is_empty() {
        meta["namespace"] = serde_json::json!(namespace);
    }
    if let Some(rv) = rv {
        meta["resourceVersion"] = serde_json::json!(rv.to_string());
    }
    Content::from_serialize(&serde_json::json!({"apiVersion": api_version, "kind": kind, "metadata": meta}))
        .unwrap_or_default()
}

/// A `delete` of `obj` for `node`, carrying its identity. `unneeded`: the
/// object still exists but the node no longer needs it, so CloudHub forgets
/// the node's success point at once ([`well_known::UNNEEDED`]).
fn delete_of(node: &str, obj: &Object, unneeded: bool) -> Message {
    let res = obj.resource();
    let ns = if res.namespaced { obj.namespace() } else { "" };
    let content =
        identity(&res.api_version(), res.kind, ns, obj.name(), obj.uid().unwrap_or_default(), Some(obj.rev()));
    let mut m =
        message(node, ns, type_of(res), obj.name(), op::DELETE, content).with_resource_version(obj.rev().to_string());
    if unneeded {
        m.header.message_type = well_known::UNNEEDED.into();
    }
    m
}

impl Controller {
    pub(crate) async fn run(mut self, mut mctx: ModuleContext, cancel: CancellationToken) {
        let (tx, mut changes) = mpsc::channel(4096);
        let stop = cancel.child_token();
        let mut watches = Vec::new();
        for res in WATCHED {
            watches.push(tokio::spawn(inform(self.store.clone(), "edgecontroller", res, tx.clone(), stop.clone())));
        }
        drop(tx);
        let (beats, beat_writer) =
            heartbeat::Writer::start(self.store.clone(), self.lifecycle.heartbeat, self.metrics.clone(), stop.clone());
        let (collect, to_collect) = mpsc::channel(LEASES_TO_COLLECT);
        self.leases_to_collect = Some(collect);
        let lease_collector = tokio::spawn(orphans::collect(self.store.clone(), to_collect));
        let mut check = tokio::time::interval(self.lifecycle.interval);
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = check.tick(), if self.listed.all() => {
                    self.check_nodes().await;
                    self.beat_for_sessions(&beats);
                }
                c = changes.recv() => match c {
                    Some(c) => self.on_change(c).await,
                    None => break,
                },
                // A request's store work ended: its node's next goes.
                Some(node) = self.lanes.ended(), if self.lanes.in_flight() > 0 => {
                    self.count_in_flight();
                    self.request_ended(node).await;
                }
                m = mctx.receive(), if self.lanes.has_room() && self.listed.all() => match m {
                    Some(m) => self.on_message(m).await,
                    None => break,
                },
            }
        }
        self.lanes.drain(SEND_DEADLINE).await;
        stop.cancel();
        for w in watches {
            let _ = w.await;
        }
        let _ = beat_writer.await;
        // What was asked is done (each store call has its own deadline).
        self.leases_to_collect = None;
        let _ = lease_collector.await;
    }

    /// Hands the Lease collector a job; a collector this far behind (it
    /// works off the loop) leaves those Leases to the next relist.
    async fn collect_leases(&self, job: orphans::Job) {
        if let Some(collect) = &self.leases_to_collect
            && let Err(e) = collect.send_timeout(job, SEND_DEADLINE).await
        {
            let node = match e.into_inner() {
                orphans::Job::Deleted(node) => node.name().to_owned(),
                orphans::Job::Relisted(_) => "(relist)".to_owned(),
            };
            tracing::warn!(%node, "the Lease collector is behind; Leases of nodes that are gone are left");
        }
    }

    async fn send(&self, msg: Message) {
        match self.ctx.send_within(source::CLOUDHUB, msg, SEND_DEADLINE).await {
            Ok(()) => {
                self.metrics.downstream.inc();
            }
            Err(e) => tracing::warn!(error = %e, "downstream message not taken by cloudhub"),
        }
    }

    async fn send_object(&self, node: &str, operation: &'static str, obj: &Object) {
        self.fan_out(&[node.to_owned()], operation, obj).await;
    }

    /// Sends a configmap or secret a node started to need.
    async fn send_ref(&self, node: &str, r: &Ref, operation: &'static str) {
        let Some(res) = resource_of(r.kind) else { return };
        match self.store.get(res, &r.namespace, &r.name).await {
            Ok(obj) => self.send_object(node, operation, &obj).await,
            // Not there yet: it is sent when it is created.
            Err(StoreError::NotFound { .. }) => {}
            Err(e) => tracing::warn!(node, name = %r.name, error = %e, "read object for a node"),
        }
    }

    /// Tells a node to drop a configmap or secret it no longer needs. One
    /// that is gone from the store meanwhile is deleted at the node by
    /// SyncController, which knows its uid from the node's success point (a
    /// delete naming no uid could remove a newer object of the same name).
    async fn delete_ref(&self, node: &str, r: &Ref) {
        let Some(res) = resource_of(r.kind) else { return };
        match self.store.get(res, &r.namespace, &r.name).await {
            Ok(obj) => self.send(delete_of(node, &obj, true)).await,
            Err(StoreError::NotFound { .. }) => {}
            Err(e) => tracing::warn!(node, name = %r.name, error = %e, "read object to delete at a node"),
        }
    }

    /// Makes an edge's store what the node should hold, from the inventory
    /// it sent ([`crate::inventory`]): what it lacks or holds older is sent
    /// again past its success point, what it should not hold is deleted.
    pub(crate) async fn reconcile_inventory(&self, node: &str, held: &[crate::inventory::Item]) {
        use crate::inventory::{self, Wanted};
        if !self.index.is_edge(node) {
            return;
        }
        // Its pods and what they use; one not there yet is sent when it is created.
        let wanted_refs: Vec<(&'static ResourceDef, String, String)> = self
            .index
            .pods_on(node)
            .map(|(ns, name)| (&PODS, ns.clone(), name.clone()))
            .chain(
                self.index.refs_of(node).into_iter().filter_map(|r| Some((resource_of(r.kind)?, r.namespace, r.name))),
            )
            .collect();
        let mut objects = Vec::with_capacity(wanted_refs.len());
        for (res, ns, name) in wanted_refs {
            match self.store.get(res, &ns, &name).await {
                Ok(o) => objects.push(o),
                Err(StoreError::NotFound { .. }) => {}
                Err(e) => {
                    tracing::warn!(node, %name, error = %e, "read an object to reconcile an inventory; not reconciled");
                    return;
                }
            }
        }
        let key = |o: &Object| {
            let ns = if o.resource().namespaced { o.namespace() } else { well_known::NULL_NAMESPACE };
            format!("{ns}/{}/{}", type_of(o.resource()), o.name())
        };
        let wanted: Vec<Wanted> = objects
            .iter()
            .map(|o| Wanted { key: key(o), uid: o.uid().unwrap_or_default().to_owned(), rv: o.rev() })
            .collect();
        let plan = inventory::plan(held, &wanted);
        if !plan.resend.is_empty() || !plan.delete.is_empty() {
            tracing::warn!(
                node,
                held = held.len(),
                resend = plan.resend.len(),
                delete = plan.delete.len(),
                "the edge's store differs from what the node should hold; reconciling"
            );
        }
        for o in objects.iter().filter(|o| plan.resend.contains(&key(o))) {
            let Some(content) = object_content(o) else { continue };
            let mut m = object_message(node, op::UPDATE, o, content);
            inventory::mark_resend(&mut m);
            self.send(m).await;
        }
        for item in &plan.delete {
            let Ok(path) = edgehive_model::ResourcePath::parse_wire(&item.key) else { continue };
            let Some(res) = resource_of(&path.resource_type) else { continue };
            let (ns, name) = (path.namespace.as_deref().unwrap_or_default(), path.name.as_deref().unwrap_or_default());
            let ns = if ns == well_known::NULL_NAMESPACE { "" } else { ns };
            let content = identity(&res.api_version(), res.kind, ns, name, &item.uid, None);
            self.send(message(node, ns, &path.resource_type, name, op::DELETE, content)).await;
        }
    }

    /// Sends everything `node` should have as `update`s; CloudHub sends only
    /// what is newer than the node's success points.
    pub(crate) async fn resync_node(&self, node: &str) {
        if !self.index.is_edge(node) {
            return;
        }
        let pods: Vec<_> = self.index.pods_on(node).cloned().collect();
        for r in self.index.refs_of(node) {
            self.send_ref(node, &r, op::UPDATE).await;
        }
        for (ns, name) in pods {
            match self.store.get(&PODS, &ns, &name).await {
                Ok(obj) => self.send_object(node, op::UPDATE, &obj).await,
                Err(StoreError::NotFound { .. }) => {}
                Err(e) => tracing::warn!(node, pod = %name, error = %e, "read pod for a node"),
            }
        }
    }

    async fn on_change(&mut self, c: Change) {
        match c {
            Change::Upsert { object, added } => self.upsert(&object, added).await,
            Change::Deleted(object) => self.deleted(&object).await,
            Change::Relisted { resource, objects } => {
                self.listed.listed(resource);
                if std::ptr::eq(resource, &NODES) {
                    // Deletes missed while not watching left their Leases.
                    let live = objects.iter().filter_map(|o| o.uid().map(str::to_owned)).collect();
                    self.collect_leases(orphans::Job::Relisted(live)).await;
                }
                if std::ptr::eq(resource, &PODS) {
                    // Pods the controller knew that are gone now.
                    let names: std::collections::HashSet<(&str, &str)> =
                        objects.iter().map(|o| (o.namespace(), o.name())).collect();
                    let gone: Vec<(String, String)> = self
                        .index
                        .pods()
                        .filter(|(ns, n)| !names.contains(&(ns.as_str(), n.as_str())))
                        .cloned()
                        .collect();
                    // Waiting pods that went during the gap wait no more.
                    self.index.unscheduled.retain(|(ns, n), _| names.contains(&(ns.as_str(), n.as_str())));
                    for (ns, name) in gone {
                        let (node, uid) =
                            self.index.pod(&ns, &name).map(|p| (p.node.clone(), p.uid.clone())).unwrap_or_default();
                        let lost = self.index.remove_pod(&ns, &name).lost;
                        if self.index.is_edge(&node) && !uid.is_empty() {
                            let content = identity("v1", "Pod", &ns, &name, &uid, None);
                            self.send(message(&node, &ns, "pod", &name, op::DELETE, content)).await;
                        }
                        for (n, r) in lost.iter().filter(|(n, _)| self.index.is_edge(n)) {
                            self.delete_ref(n, r).await;
                        }
                    }
                }
                // One at a time, each dropped when done: an upsert parses its
                // object, and a parse is ten times its JSON; kept to the end
                // of a relist of 20,000 pods they were ~300 MB at once, a peak
                // that stayed resident.
                for o in objects {
                    self.upsert(&o, true).await;
                }
            }
        }
    }

    async fn upsert(&mut self, obj: &Object, added: bool) {
        let Ok(value) = obj.value() else {
            tracing::warn!(key = obj.key(), "skipping an object that does not parse");
            return;
        };
        let res = obj.resource();
        if std::ptr::eq(res, &LEASES) {
            if obj.namespace() == NODE_LEASES {
                self.index.set_lease(obj.name(), Some(value));
            }
            return;
        }
        if std::ptr::eq(res, &NODES) {
            let was = self.index.is_edge(obj.name());
            let before = self.index.node_info(obj.name()).cloned();
            let edge = self.index.set_node(obj.name(), value);
            if edge && (before.as_ref() != self.index.node_info(obj.name()) || !was) {
                self.retry_unscheduled().await;
            }
            if edge && !was {
                // A node that just became an edge node gets its objects.
                self.resync_node(obj.name()).await;
            }
            // Changes of the Node itself are not pushed to it: CloudCore
            // sends a Node only to delete it, and a stock EdgeCore logs and
            // stores a stray row for anything else (docs/protocol.md).
            return;
        }
        if std::ptr::eq(res, &PODS) {
            let key = (obj.namespace().to_owned(), obj.name().to_owned());
            if scheduler::wants_scheduling(value) {
                // Tried with this spec and waiting: its own condition write is
                // no reason to try again (cluster changes are).
                if self.index.unscheduled.get(&key) != Some(&crate::index::scheduling_fingerprint(value)) {
                    self.schedule(obj.namespace(), obj.name(), value).await;
                }
            } else {
                self.index.unscheduled.remove(&key);
            }
            let before = self.index.pod(obj.namespace(), obj.name()).map(|p| p.node.clone());
            let held = self.index.pod(obj.namespace(), obj.name()).is_some_and(|p| p.requests.pods > 0);
            let changes = self.index.set_pod(obj.namespace(), obj.name(), value);
            let freed = held && self.index.pod(obj.namespace(), obj.name()).is_none_or(|p| p.requests.pods == 0);
            for (node, r) in &changes.gained {
                if self.index.is_edge(node) {
                    self.send_ref(node, r, op::INSERT).await;
                }
            }
            let node = self.index.pod(obj.namespace(), obj.name()).map(|p| p.node.clone());
            if let Some(node) = &node
                && self.index.is_edge(node)
            {
                let operation = if before.as_ref() == Some(node) && !added { op::UPDATE } else { op::INSERT };
                self.send_object(node, operation, obj).await;
            }
            if let Some(old) = before.filter(|b| Some(b) != node.as_ref())
                && self.index.is_edge(&old)
            {
                // Moved to another node: the old one stops it, and sees
                // nothing of the pod's new spec.
                self.send(delete_of(&old, obj, true)).await;
            }
            for (node, r) in &changes.lost {
                if self.index.is_edge(node) {
                    self.delete_ref(node, r).await;
                }
            }
            if freed && !self.index.unscheduled.is_empty() {
                // A pod that ended left room on its node.
                self.retry_unscheduled().await;
            }
            return;
        }
        // A configmap or secret: to every edge node that uses it.
        let users = self.edge_users(obj);
        self.fan_out(&users, if added { op::INSERT } else { op::UPDATE }, obj).await;
    }

    async fn deleted(&mut self, obj: &Object) {
        let res = obj.resource();
        if std::ptr::eq(res, &LEASES) {
            if obj.namespace() == NODE_LEASES {
                self.index.set_lease(obj.name(), None);
            }
            return;
        }
        if std::ptr::eq(res, &NODES) {
            let was_edge = self.index.is_edge(obj.name());
            self.index.remove_node(obj.name());
            self.sessions.remove(obj.name());
            self.metrics.sessions.set(self.sessions.len() as i64);
            self.collect_leases(orphans::Job::Deleted(obj.clone())).await;
            if was_edge {
                // CloudHub ends the session and forgets the node's success points.
                self.send_object(obj.name(), op::DELETE, obj).await;
            }
            return;
        }
        if std::ptr::eq(res, &PODS) {
            self.index.unscheduled.remove(&(obj.namespace().to_owned(), obj.name().to_owned()));
            let node = self.index.pod(obj.namespace(), obj.name()).map(|p| p.node.clone());
            let changes = self.index.remove_pod(obj.namespace(), obj.name());
            if let Some(node) = &node
                && self.index.is_edge(node)
            {
                self.send(delete_of(node, obj, false)).await;
            }
            for (node, r) in &changes.lost {
                if self.index.is_edge(node) {
                    self.delete_ref(node, r).await;
                }
            }
            if node.is_some() && !self.index.unscheduled.is_empty() {
                // Its node has room again.
                self.retry_unscheduled().await;
            }
            return;
        }
        for node in self.edge_users(obj) {
            self.send(delete_of(&node, obj, false)).await;
        }
    }

    /// The edge nodes whose pods use this configmap or secret.
    fn edge_users(&self, obj: &Object) -> Vec<String> {
        let r =
            Ref { kind: type_of(obj.resource()), namespace: obj.namespace().to_owned(), name: obj.name().to_owned() };
        self.index.users(&r).filter(|n| self.index.is_edge(n)).cloned().collect()
    }

    /// One object to one or many nodes: encoded once, the content shared by
    /// every message (only the resource differs).
    async fn fan_out(&self, nodes: &[String], operation: &'static str, obj: &Object) {
        if nodes.is_empty() {
            return;
        }
        let Some(content) = object_content(obj) else {
            tracing::warn!(key = obj.key(), "object does not encode; not sent");
            return;
        };
        for node in nodes {
            self.send(object_message(node, operation, obj, content.clone())).await;
        }
    }
}

impl Controller {
    /// Binds a pod to a node, or says why it cannot be.
    async fn schedule(&mut self, namespace: &str, name: &str, pod: &serde_json::Value) {
        let key = (namespace.to_owned(), name.to_owned());
        let now = edgehive_store::now_rfc3339();
        let placement = scheduler::place(&self.index, pod);
        // Whether this attempt bound the pod, or found it still waiting.
        let mut wrote = false;
        let result = if matches!(placement, Placement::Node(_)) { "scheduled" } else { "unschedulable" };
        self.metrics.schedule_attempts.get_or_create(&crate::metrics::ResultLabel { result }).inc();
        let result = match &placement {
            Placement::Node(node) => {
                self.index.unscheduled.remove(&key);
                tracing::info!(pod = %name, namespace, %node, "scheduled");
                let bound = self
                    .store
                    .update_with(&PODS, namespace, name, |cur| {
                        let v = cur.value()?;
                        let bind = scheduler::wants_scheduling(v).then(|| scheduler::bind(v, node, &now));
                        wrote = bind.is_some();
                        Ok(bind)
                    })
                    .await;
                if let Ok(obj) = &bound
                    && let Ok(v) = obj.value()
                {
                    // Counted at once: the next pod placed sees this one.
                    self.index.assume(namespace, name, v);
                }
                bound
            }
            Placement::Unschedulable(why) => {
                self.index.unscheduled.insert(key, crate::index::scheduling_fingerprint(pod));
                self.mark_unschedulable(namespace, name, why.clone(), now).await;
                return;
            }
        };
        match result {
            Ok(obj) if wrote => {
                // What this attempt decided, about the pod as it now is.
                let v = obj.value().ok();
                let placed = v.and_then(|v| v.pointer("/spec/nodeName")).and_then(|n| n.as_str());
                if let Some(v) = v {
                    let pod = ObjectRef::of(&PODS, v);
                    match (&placement, placed) {
                        (Placement::Node(node), Some(on)) if node == on => self.scheduler_events.record(Note::normal(
                            pod,
                            "Scheduled",
                            format!("Successfully assigned {namespace}/{name} to {node}"),
                        )),
                        (Placement::Unschedulable(why), None) => {
                            self.scheduler_events.record(Note::warning(pod, "FailedScheduling", why.clone()));
                        }
                        _ => {}
                    }
                }
            }
            Ok(_) | Err(StoreError::NotFound { .. }) => {}
            Err(e) => tracing::warn!(pod = %name, namespace, error = %e, "schedule pod"),
        }
    }

    /// Writes a pod's `PodScheduled=False` condition and records its
    /// `FailedScheduling` Event, without waiting for the write (a bound pod
    /// is written inline: the next placement counts it). Nothing waits on
    /// the result: a later attempt for the pod (a node appeared) reads the
    /// pod again, and each write checks that the pod still waits.
    async fn mark_unschedulable(&mut self, namespace: &str, name: &str, why: String, now: String) {
        while self.unschedulable_writes.try_join_next().is_some() {}
        if self.unschedulable_writes.len() >= UNSCHEDULABLE_WRITES {
            let _ = self.unschedulable_writes.join_next().await;
        }
        let (store, events) = (self.store.clone(), self.scheduler_events.clone());
        let (namespace, name) = (namespace.to_owned(), name.to_owned());
        self.unschedulable_writes.spawn(async move {
            let mut wrote = false;
            let result = store
                .update_with(&PODS, &namespace, &name, |cur| {
                    let v = cur.value()?;
                    // Still waiting (not bound or deleted meanwhile): this attempt counts.
                    wrote = scheduler::wants_scheduling(v);
                    Ok(if wrote { scheduler::mark_unschedulable(v, &why, &now) } else { None })
                })
                .await;
            match result {
                Ok(obj) if wrote => {
                    if let Ok(v) = obj.value()
                        && v.pointer("/spec/nodeName").and_then(|n| n.as_str()).is_none()
                    {
                        events.record(Note::warning(ObjectRef::of(&PODS, v), "FailedScheduling", why));
                    }
                }
                Ok(_) | Err(StoreError::NotFound { .. }) => {}
                Err(e) => tracing::warn!(pod = %name, %namespace, error = %e, "schedule pod"),
            }
        });
    }

    /// Tries again the pods no node could take.
    async fn retry_unscheduled(&mut self) {
        let waiting: Vec<(String, String)> = self.index.unscheduled.keys().cloned().collect();
        for (ns, name) in waiting {
            match self.store.get(&PODS, &ns, &name).await {
                Ok(obj) => {
                    if let Ok(v) = obj.value() {
                        let v = v.clone();
                        self.schedule(&ns, &name, &v).await;
                    }
                }
                Err(_) => {
                    self.index.unscheduled.remove(&(ns, name));
                }
            }
        }
    }

    /// Writes `mark`'s change of a Node, counted as a node gone NotReady;
    /// true when it changed anything (false also for a Node gone meanwhile).
    async fn mark_node(
        &self,
        node: &str,
        mark: impl Fn(&serde_json::Value) -> Option<serde_json::Value>,
    ) -> Result<bool, StoreError> {
        let mut marked = false;
        self.metrics.lifecycle_reads.inc();
        let result = self
            .store
            .update_with(&NODES, "", node, |cur| {
                let v = mark(cur.value()?);
                marked = v.is_some();
                Ok(v)
            })
            .await;
        match result {
            Ok(_) if marked => {
                self.metrics.not_ready.inc();
                Ok(true)
            }
            Ok(_) | Err(StoreError::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Renews the Leases and status heartbeats of nodes whose live session
    /// is their heartbeat ([`heartbeat`]), through the writer.
    fn beat_for_sessions(&mut self, writer: &heartbeat::Writer) {
        let now = time::OffsetDateTime::now_utc();
        let sessions = &self.sessions;
        self.beats_asked.retain(|node| matches!(sessions.get(node), Some(None)));
        let live = self.sessions.values().filter(|s| s.is_none()).count();
        let cfg = self.lifecycle.heartbeat.for_sessions(live);
        for (node, session) in &self.sessions {
            if session.is_some() || !self.index.is_edge(node) {
                continue;
            }
            let Some(live) = self.index.liveness(node) else { continue };
            let asked = &self.beats_asked;
            for beat in heartbeat::due(live, |b| asked.at(node, b), now, &cfg) {
                if !writer.offer(node, beat, cfg.lease_duration) {
                    return;
                }
                self.beats_asked.set(node, beat, now);
            }
        }
    }

    /// Marks edge nodes without a recent heartbeat NotReady; evicts their
    /// pods only if configured.
    async fn check_nodes(&mut self) {
        let now = time::OffsetDateTime::now_utc();
        let mut silent_nodes = Vec::new();
        let mut never_reported = Vec::new();
        let mut evict = Vec::new();
        for node in self.index.edge_nodes() {
            let Some(live) = self.index.liveness(node) else { continue };
            // Never a heartbeat (a KubeEdge EdgeCore with edged off keeps a
            // session but reports nothing): its conditions become Unknown a
            // grace period after its creation, session or not, as Kubernetes'
            // node lifecycle controller does. Once marked, Ready is Unknown
            // and the node is not read again.
            if live.last_beat().is_none() && !live.unknown {
                if live.never_reported_past(now, self.lifecycle.grace) {
                    never_reported.push(node.clone());
                }
                continue;
            }
            // A node with a live session is alive: CloudHub ends sessions
            // that stop keeping alive. After one ends, its end is a beat.
            let session = self.sessions.get(node.as_str());
            if matches!(session, Some(None)) {
                continue;
            }
            if let Some(beat) = live.last_beat().max(session.copied().flatten())
                && !live.unknown
                && lifecycle::elapsed(beat, now) > self.lifecycle.grace
                // Connected, though its notice is not read yet.
                && !self.presence.as_ref().is_some_and(|connected| (connected.0)(node))
            {
                silent_nodes.push((node.clone(), lifecycle::elapsed(beat, now)));
            }
            if let (Some(after), Some(since)) = (self.lifecycle.evict_after, live.not_ready_since)
                && lifecycle::elapsed(since, now) > after
            {
                evict.push(node.clone());
            }
        }
        // Marked several at a time: the store commits them together, and a
        // fleet that went silent at once (a cloud cut off) holds the
        // controller's deliveries for a few commits, not one per node.
        let grace = self.lifecycle.grace;
        // Nodes whose Ready condition is Unknown now (marked, or found so):
        // their Node comes back through the watch only after every change
        // before it, and a controller behind on 100,000 of its own marks
        // would otherwise read each again at every check until then.
        let mut unknown = Vec::new();
        let this = &*self;
        let mut marks = futures_util::stream::iter(never_reported)
            .map(|node| async move {
                let r = this.mark_node(&node, |v| lifecycle::mark_never_updated(v, now, grace)).await;
                (node, r)
            })
            .buffer_unordered(MARKS_AT_ONCE);
        while let Some((node, r)) = marks.next().await {
            match r {
                Ok(true) => {
                    tracing::warn!(%node, grace = ?grace, "node never posted its status; its conditions are Unknown (NodeStatusNeverUpdated)");
                    unknown.push(node);
                }
                Ok(false) => unknown.push(node),
                Err(e) => tracing::warn!(%node, error = %e, "mark a node that never reported Unknown"),
            }
        }
        drop(marks);
        let stamp = edgehive_store::rfc3339(now);
        let stamp = stamp.as_str();
        let mut marks = futures_util::stream::iter(silent_nodes)
            .map(|(node, silent)| async move {
                let r = this.mark_node(&node, |v| lifecycle::mark_unknown(v, stamp)).await;
                (node, silent, r)
            })
            .buffer_unordered(MARKS_AT_ONCE);
        while let Some((node, silent, r)) = marks.next().await {
            match r {
                Ok(true) => {
                    tracing::warn!(%node, silent = ?silent, "no heartbeat; node is NotReady (its pods keep running at the edge)");
                    unknown.push(node);
                }
                Ok(false) => unknown.push(node),
                Err(e) => tracing::warn!(%node, error = %e, "mark node NotReady"),
            }
        }
        drop(marks);
        for node in &unknown {
            self.index.set_unknown(node);
        }
        for node in evict {
            let pods: Vec<(String, String)> = self.index.pods_on(&node).cloned().collect();
            for (ns, name) in pods {
                tracing::warn!(%node, pod = %name, namespace = %ns, "evicting a pod of a node NotReady too long");
                let _ = self.store.delete(&PODS, &ns, &name, &Default::default()).await;
            }
        }
        self.no_execute(now).await;
    }

    /// The taint manager: a pod on a node with a `NoExecute` taint it does
    /// not tolerate is deleted, at once or when its least
    /// `tolerationSeconds` has passed since the taint was first seen.
    /// Nodes carry such taints only when someone puts them there (`kubectl
    /// taint node edge-1 maintenance=true:NoExecute`): the lifecycle adds
    /// none to a node that goes offline, so an outage evicts nothing.
    async fn no_execute(&mut self, now: time::OffsetDateTime) {
        let mut due = Vec::new();
        let mut seen = std::collections::HashMap::new();
        for node in self.index.edge_nodes() {
            let Some(info) = self.index.node_info(node) else { continue };
            let taints: Vec<&edgehive_registry::scheduling::Taint> =
                info.taints.iter().filter(|t| t.effect == "NoExecute").collect();
            if taints.is_empty() {
                continue;
            }
            // Since when this node has had its current NoExecute taints (the earliest first seen).
            let since = taints
                .iter()
                .map(|t| {
                    let key = (node.clone(), t.key.clone(), t.value.clone());
                    let at = self.tainted_since.get(&key).copied().unwrap_or(now);
                    seen.insert(key, at);
                    at
                })
                .min()
                .unwrap_or(now);
            for (key, pod) in self.index.placed_on(node) {
                // Ended, or already being stopped: evicted once, not again at every check.
                if pod.requests.pods == 0 || pod.terminating {
                    continue;
                }
                if let Some(grace) =
                    edgehive_registry::scheduling::no_execute_grace(&pod.no_execute_tolerations, &taints)
                    && since + time::Duration::seconds(grace) <= now
                {
                    due.push((node.clone(), key.clone(), pod.uid.clone()));
                }
            }
        }
        self.tainted_since = seen;
        for (node, (ns, name), uid) in due {
            tracing::warn!(%node, pod = %name, namespace = %ns, "evicting a pod that does not tolerate its node's NoExecute taint");
            let opts = edgehive_store::DeleteOptions { uid: Some(uid.clone()), ..Default::default() };
            match self.store.delete(&PODS, &ns, &name, &opts).await {
                Ok(_) => {
                    self.metrics.taint_evictions.inc();
                    let pod = ObjectRef {
                        api_version: "v1".into(),
                        kind: "Pod".into(),
                        namespace: ns.clone(),
                        name: name.clone(),
                        uid,
                        resource_version: String::new(),
                    };
                    self.taint_events.record(Note::normal(
                        pod,
                        "TaintManagerEviction",
                        format!("Marking for deletion Pod {ns}/{name}"),
                    ));
                }
                Err(StoreError::NotFound { .. } | StoreError::Conflict { .. }) => {}
                Err(e) => tracing::warn!(%node, pod = %name, error = %e, "evict a pod"),
            }
        }
    }
}
