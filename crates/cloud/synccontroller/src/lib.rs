//! SyncController: makes every connected edge converge on the store, by the
//! success points.
//!
//! Every tick (5 s by default) it looks at the objects that changed, were
//! deleted, or belong to a node that reconnected since they were last
//! settled: an object newer than a node's success point is sent again as an
//! `update` — but only to a node that still needs it (a pod bound to it, or
//! a configmap or secret its pods use: the NodeRestriction read set); an
//! object that is gone, or was replaced (another uid), is sent as a
//! `delete`. Points of deleted nodes are removed. A tick's cost follows the
//! number of such objects, not the number stored (KubeEdge scans every
//! ObjectSync on every tick).
//!
//! That a node no longer needs an object is EdgeController's to act on (it
//! sends the delete, and CloudHub forgets the point at once): here an update
//! is only withheld, which is safe even when this view of the pods lags the
//! store's.
//!
//! A Device's status is written by the cloud (DeviceController, from the
//! edge's reports) and never sent down, so a Device is behind at a node only
//! when its spec (its generation) is newer than the node's point: status
//! writes, up to one a second per changing device, send nothing.
//!
//! It learns success points from the store's ObjectSync and
//! ClusterObjectSync objects (written by CloudHub), and connections from
//! CloudHub's `connected`/`disconnected` messages.
//!
//! **Architecture Invariant:** SyncController sends through CloudHub only,
//! by beehive messages, and never writes a success point itself (it only
//! removes those of nodes that no longer exist).

pub mod state;

use std::sync::Arc;
use std::time::Duration;

use edgehive_beehive::{Context, Module, ModuleContext, ModuleFuture};
use edgehive_model::{Content, Message, Text, op, source};
use edgehive_store::informer::{Change, FirstLists, inform};
use edgehive_store::objectsync::{PointWrite, SyncRecord};
use edgehive_store::resources::{
    self, CLUSTER_OBJECT_SYNCS, CONFIGMAPS, DEVICES, NODES, OBJECT_SYNCS, PODS, ResourceDef, SECRETS,
};
use edgehive_store::{Object, Store, StoreError};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::state::{Point, SyncState};
use edgehive_edgecontroller::index::{Index, Ref};

/// Settings of SyncController.
#[derive(Debug, Clone)]
pub struct SyncConfig {
    /// How often dirty objects are checked (KubeEdge: 5 s).
    pub interval: Duration,
}

impl Default for SyncConfig {
    fn default() -> Self {
        SyncConfig { interval: Duration::from_secs(5) }
    }
}

/// SyncController's counters, one atomic each (prometheus-client's). The
/// controller updates them; read them by registering them
/// ([`SyncMetrics::register`]) and encoding the registry.
#[derive(Debug, Default)]
pub struct SyncMetrics {
    /// Ticks run.
    ticks: Counter,
    /// Objects checked, all ticks.
    checked: Counter,
    /// `update`s sent.
    updates: Counter,
    /// `delete`s sent.
    deletes: Counter,
    /// Points of deleted nodes removed.
    node_points_removed: Counter,
    /// Updates withheld: the node no longer needs the object.
    withheld: Counter,
}

impl SyncMetrics {
    /// Registers the counters in `registry` under the prefix
    /// `synccontroller` (`edgehive_synccontroller_` in a process's registry).
    ///
    /// ```
    /// use prometheus_client::{encoding::text::encode, registry::Registry};
    /// let metrics = edgehive_synccontroller::SyncMetrics::default();
    /// let mut registry = Registry::with_prefix("edgehive");
    /// metrics.register(&mut registry);
    /// let mut text = String::new();
    /// encode(&mut text, &registry).unwrap();
    /// assert!(text.contains("\nedgehive_synccontroller_ticks_total 0\n"));
    /// ```
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("synccontroller");
        r.register("ticks", "Sync ticks run", self.ticks.clone());
        r.register("checked", "Objects checked against success points", self.checked.clone());
        r.register("updates", "Objects re-sent as update", self.updates.clone());
        r.register("deletes", "Deletes sent for objects gone or replaced", self.deletes.clone());
        r.register("node_points_removed", "Success points of deleted nodes removed", self.node_points_removed.clone());
        r.register("withheld", "Updates not sent: the node no longer needs the object", self.withheld.clone());
    }
}

/// The SyncController beehive module (name `synccontroller`).
#[derive(Debug)]
pub struct SyncController {
    store: Store,
    cfg: SyncConfig,
    metrics: Arc<SyncMetrics>,
}

impl SyncController {
    /// A controller over `store`.
    pub fn new(store: Store, cfg: SyncConfig) -> SyncController {
        SyncController { store, cfg, metrics: Arc::default() }
    }

    /// Its counters, to register in the process's registry
    /// ([`SyncMetrics::register`]).
    pub fn metrics(&self) -> &Arc<SyncMetrics> {
        &self.metrics
    }
}

impl Module for SyncController {
    fn name(&self) -> &str {
        source::SYNCCONTROLLER
    }

    fn group(&self) -> &str {
        source::SYNCCONTROLLER
    }

    fn run(self: Arc<Self>, ctx: ModuleContext, cancel: CancellationToken) -> ModuleFuture {
        Box::pin(async move {
            Runner {
                store: self.store.clone(),
                ctx: ctx.context().clone(),
                state: SyncState::default(),
                metrics: self.metrics.clone(),
                nodes: std::collections::HashSet::new(),
                listed: FirstLists::new(&NODES_AND_POINTS),
                needs: Index::default(),
                pods_listed: false,
            }
            .run(ctx, cancel, self.cfg.interval)
            .await;
            Ok(())
        })
    }
}

struct Runner {
    store: Store,
    ctx: Context,
    state: SyncState,
    metrics: Arc<SyncMetrics>,
    nodes: std::collections::HashSet<String>,
    /// Which of [`NODES_AND_POINTS`] have been listed once.
    listed: FirstLists,
    /// Which pods are bound where and what they use.
    needs: Index,
    /// The pods have been listed once: until then every node is taken to
    /// need what it holds.
    pods_listed: bool,
}

const SEND_DEADLINE: Duration = Duration::from_secs(10);

/// What orphan collection joins: points of nodes not among the Nodes are
/// collected once all three have been listed.
static NODES_AND_POINTS: [&ResourceDef; 3] = [&NODES, &OBJECT_SYNCS, &CLUSTER_OBJECT_SYNCS];

impl Runner {
    async fn run(mut self, mut mctx: ModuleContext, cancel: CancellationToken, interval: Duration) {
        let (tx, mut changes) = mpsc::channel(4096);
        let stop = cancel.child_token();
        let mut tasks = Vec::new();
        for res in [&NODES, &OBJECT_SYNCS, &CLUSTER_OBJECT_SYNCS, &PODS, &CONFIGMAPS, &SECRETS, &DEVICES] {
            tasks.push(tokio::spawn(inform(self.store.clone(), "synccontroller", res, tx.clone(), stop.clone())));
        }
        drop(tx);
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                c = changes.recv() => match c {
                    Some(c) => self.on_change(c).await,
                    None => break,
                },
                m = mctx.receive() => match m {
                    Some(m) => self.on_message(&m),
                    None => break,
                },
                _ = tick.tick() => self.tick().await,
            }
        }
        stop.cancel();
        for t in tasks {
            let _ = t.await;
        }
    }

    fn on_message(&mut self, m: &Message) {
        if m.route.source != source::CLOUDHUB {
            return;
        }
        let Some(node) = m.route.resource.strip_prefix("node/") else { return };
        match m.route.operation.as_str() {
            op::CONNECTED => self.state.connected(node),
            op::DISCONNECTED => self.state.disconnected(node),
            _ => {}
        }
    }

    async fn on_change(&mut self, c: Change) {
        match c {
            Change::Upsert { object, .. } => self.upsert(&object),
            Change::Deleted(object) => self.deleted(&object).await,
            Change::Relisted { resource, objects } => {
                if std::ptr::eq(resource, &NODES) {
                    self.nodes = objects.iter().map(|o| o.name().to_owned()).collect();
                }
                if std::ptr::eq(resource, &PODS) {
                    self.needs = Index::default();
                    self.pods_listed = true;
                }
                if std::ptr::eq(resource, &DEVICES) {
                    // Devices deleted while the watch was down.
                    let listed: std::collections::HashSet<&str> = objects.iter().filter_map(Object::uid).collect();
                    for uid in self.state.spec_uids() {
                        if !listed.contains(uid.as_str()) {
                            self.state.spec_gone(&uid);
                            self.state.object_changed(&uid);
                        }
                    }
                }
                // One at a time, each dropped when done: an upsert parses
                // its object (a pod's needs, a success point), and parses
                // kept with a whole relist would be ten times its bytes.
                for o in objects {
                    self.upsert(&o);
                }
                if self.listed.listed(resource) && self.listed.all() {
                    self.collect_orphans().await;
                }
            }
        }
    }

    fn upsert(&mut self, obj: &Object) {
        let res = obj.resource();
        if std::ptr::eq(res, &PODS)
            && let Ok(v) = obj.value()
        {
            self.needs.set_pod(obj.namespace(), obj.name(), v);
        }
        if std::ptr::eq(res, &NODES) {
            self.nodes.insert(obj.name().to_owned());
        } else if std::ptr::eq(res, &OBJECT_SYNCS) || std::ptr::eq(res, &CLUSTER_OBJECT_SYNCS) {
            match obj.value().ok().and_then(|v| SyncRecord::parse(res, v)) {
                Some(r) => self.state.set_point(
                    Text::from(r.node),
                    Text::from(r.uid),
                    Point {
                        rv: r.rv,
                        api_version: Text::from(r.api_version),
                        kind: Text::from(r.kind),
                        namespace: Text::from(r.namespace),
                        name: Text::from(r.name),
                    },
                ),
                None => tracing::warn!(key = obj.key(), "skipping a success point that does not parse"),
            }
        } else if std::ptr::eq(res, &DEVICES) {
            // Without a generation, every write counts.
            if let Some(uid) = obj.uid()
                && generation(obj).is_none_or(|g| self.state.spec_seen(uid, g, obj.rev()))
            {
                self.state.object_changed(uid);
            }
        } else if let Some(uid) = obj.uid() {
            self.state.object_changed(uid);
        }
    }

    async fn deleted(&mut self, obj: &Object) {
        let res = obj.resource();
        if std::ptr::eq(res, &PODS) {
            self.needs.remove_pod(obj.namespace(), obj.name());
        }
        if std::ptr::eq(res, &NODES) {
            self.nodes.remove(obj.name());
            let points = self.state.remove_node(obj.name());
            self.remove_points(obj.name(), points).await;
        } else if std::ptr::eq(res, &OBJECT_SYNCS) || std::ptr::eq(res, &CLUSTER_OBJECT_SYNCS) {
            if let Some((node, uid)) = obj.name().rsplit_once('.') {
                self.state.remove_point(node, uid);
            }
        } else if let Some(uid) = obj.uid() {
            if std::ptr::eq(res, &DEVICES) {
                self.state.spec_gone(uid);
            }
            self.state.object_changed(uid);
        }
    }

    /// After the lists: points of nodes that no longer exist (deleted while
    /// the cloud was down, or while a watch was behind).
    ///
    /// The Nodes known here may lag the points: a relist of the points
    /// after a watch fell behind can bring those of a node registered since,
    /// whose Node's event has not arrived. So a node is taken for gone only
    /// when the store says so; removing a live node's points would leave its
    /// edge without the deletes and updates they lead to.
    async fn collect_orphans(&mut self) {
        let unknown: Vec<String> =
            self.state.nodes().filter(|n| !self.nodes.contains(n.as_str())).map(|n| n.to_string()).collect();
        for node in unknown {
            match self.store.get(&NODES, "", &node).await {
                Err(StoreError::NotFound { .. }) => {
                    let points = self.state.remove_node(&node);
                    self.remove_points(&node, points).await;
                }
                Ok(_) => {
                    self.nodes.insert(node);
                }
                Err(e) => tracing::warn!(%node, error = %e, "read a node whose points look orphaned; left for now"),
            }
        }
    }

    async fn remove_points(&self, node: &str, points: Vec<(Text, Point)>) {
        if points.is_empty() {
            return;
        }
        tracing::info!(node, points = points.len(), "node is gone; removing its success points");
        let removals: Vec<PointWrite> = points
            .iter()
            .map(|(uid, p)| PointWrite::Remove {
                node: node.to_owned(),
                uid: uid.to_string(),
                namespace: p.namespace.to_string(),
            })
            .collect();
        for (removed, (uid, _)) in self.store.write_points(&removals).await.into_iter().zip(&points) {
            match removed {
                Ok(()) => {
                    self.metrics.node_points_removed.inc();
                }
                Err(e) => tracing::warn!(node, %uid, error = %e, "remove success point"),
            }
        }
    }

    async fn tick(&mut self) {
        self.metrics.ticks.inc();
        for (uid, holders) in self.state.take_dirty() {
            self.metrics.checked.inc();
            let first = &holders[0].1;
            let Some(res) = resources::by_kind(&first.api_version, &first.kind) else {
                tracing::debug!(kind = %first.kind, "success point of a kind the store does not serve");
                continue;
            };
            let current = match self.store.get(res, &first.namespace, &first.name).await {
                Ok(o) if o.uid() == Some(uid.as_str()) => Some(o),
                Ok(_) | Err(StoreError::NotFound { .. }) => None,
                Err(e) => {
                    tracing::warn!(name = %first.name, error = %e, "read object for sync");
                    self.state.still_dirty(uid.clone());
                    continue;
                }
            };
            // The object's content, made once and shared by every node's
            // message (a configmap behind at 1,000 nodes is one parse).
            let mut content: Option<Option<Content>> = None;
            let mut pending = false;
            for (node, point) in &holders {
                let msg = match &current {
                    None => {
                        self.metrics.deletes.inc();
                        delete_message(node, &uid, point)
                    }
                    // A Device moved to another node while this one was
                    // away: its delete was dropped then, so it is sent now.
                    Some(o) if &*point.kind == "Device" && !bound_to(node, o) => {
                        self.metrics.deletes.inc();
                        delete_message(node, &uid, point)
                    }
                    Some(o) if self.behind(&uid, point, o) && !self.needed(node, &uid, point, o) => {
                        // Not resent, not kept dirty: EdgeController deletes
                        // it at the node; a later change looks again.
                        self.metrics.withheld.inc();
                        tracing::debug!(%node, kind = %point.kind, name = %point.name, "not resent: the node no longer needs it");
                        continue;
                    }
                    Some(o) if self.behind(&uid, point, o) => {
                        self.metrics.updates.inc();
                        match update_message(node, o, content.get_or_insert_with(|| object_content(o))) {
                            Some(m) => m,
                            None => continue,
                        }
                    }
                    Some(_) => continue,
                };
                pending = true;
                match tokio::time::timeout(SEND_DEADLINE, self.ctx.send(source::CLOUDHUB, msg)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::warn!(%node, error = %e, "sync message not taken by cloudhub"),
                    Err(_) => tracing::warn!(%node, "cloudhub did not take a sync message in time"),
                }
            }
            if pending {
                // Settled when the node's point catches up (or goes).
                self.state.still_dirty(uid);
            }
        }
    }
}

impl Runner {
    /// Whether a node's copy at `point` is older than `current`: any newer
    /// version for most kinds; for a Device, only a newer spec (the status
    /// is not sent, see the module's documentation).
    fn behind(&self, uid: &str, point: &Point, current: &Object) -> bool {
        if current.rev() <= point.rv {
            return false;
        }
        if &*point.kind == "Device"
            && let Some(spec_rv) = generation(current).and_then(|g| self.state.spec_rv(uid, g))
        {
            return point.rv < spec_rv;
        }
        true
    }

    /// Whether `node` still needs the object of `point` (`current`): a pod
    /// bound to it (the same pod, by uid), a configmap or secret its pods
    /// use, or a Device bound to it. A
    /// Node is never resent (CloudCore sends a Node only to delete it);
    /// kinds this controller does not know are taken as needed.
    fn needed(&self, node: &str, uid: &str, point: &Point, current: &Object) -> bool {
        // A Device is its bound node's only (one moved away is deleted
        // at its old node, above).
        if &*point.kind == "Device" {
            return bound_to(node, current);
        }
        if !self.pods_listed {
            return true;
        }
        let (ns, name) = (point.namespace.to_string(), point.name.to_string());
        match &*point.kind {
            "Pod" => self.needs.pod(&ns, &name).is_some_and(|p| p.node == node && p.uid == uid),
            "ConfigMap" | "Secret" => {
                let kind = if &*point.kind == "ConfigMap" { "configmap" } else { "secret" };
                self.needs.uses(node, &Ref { kind, namespace: ns, name })
            }
            "Node" => false,
            _ => true,
        }
    }
}

fn resource_type(kind: &str) -> String {
    kind.to_ascii_lowercase()
}

fn path(node: &str, namespace: &str, kind: &str, name: &str) -> String {
    let ns = if namespace.is_empty() { edgehive_model::well_known::NULL_NAMESPACE } else { namespace };
    format!("node/{node}/{ns}/{}/{name}", resource_type(kind))
}

/// KubeEdge's sync delete: the object's namespace, name and uid.
fn delete_message(node: &str, uid: &str, p: &Point) -> Message {
    let content = serde_json::json!({"apiVersion": &*p.api_version, "kind": &*p.kind,
        "metadata": {"namespace": &*p.namespace, "name": &*p.name, "uid": uid}});
    Message::new()
        .with_route(
            source::EDGECONTROLLER,
            edgehive_model::group::RESOURCE,
            path(node, &p.namespace, &p.kind, &p.name),
            op::DELETE,
        )
        .with_content(Content::from_serialize(&content).unwrap_or_default())
}

/// An object's JSON as a message's content (`None`: it cannot be encoded).
fn object_content(o: &Object) -> Option<Content> {
    let json = o.json().ok()?;
    Content::from_json(String::from_utf8_lossy(json).into_owned()).ok()
}

fn update_message(node: &str, o: &Object, content: &Option<Content>) -> Option<Message> {
    let content = content.clone()?;
    Some(
        Message::new()
            .with_route(
                source::EDGECONTROLLER,
                edgehive_model::group::RESOURCE,
                path(node, o.namespace(), o.resource().kind, o.name()),
                op::UPDATE,
            )
            .with_resource_version(o.rev().to_string())
            .with_content(content),
    )
}

/// An object's `metadata.generation`.
fn generation(o: &Object) -> Option<i64> {
    o.value().ok().and_then(|v| v.pointer("/metadata/generation")?.as_i64())
}

/// Whether the Device `device` is bound to `node` (`spec.nodeName`).
fn bound_to(node: &str, device: &Object) -> bool {
    device.value().ok().and_then(|v| v.pointer("/spec/nodeName")?.as_str().map(|n| n == node)) == Some(true)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Points of a node missing from the Nodes seen so far are removed only
    /// if the store has no such Node: a relist of the points can run ahead
    /// of the Node's event.
    #[tokio::test]
    async fn orphan_collection_removes_the_points_of_gone_nodes_only() {
        use edgehive_store::{BackendConfig, StoreConfig};
        let dir = edgehive_testkit::fixtures::TempDir::new("synccontroller-orphans");
        let path = dir.path().join("state.db");
        let store = Store::open(StoreConfig::new(BackendConfig::Sqlite { path, fsync: false })).await.unwrap();
        let node = serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "alive"}});
        store.create(&NODES, node).await.unwrap();
        let mut runner = Runner {
            store: store.clone(),
            ctx: edgehive_beehive::Beehive::builder().build().context(),
            state: SyncState::default(),
            metrics: Arc::default(),
            // The Nodes' list has not brought `alive` (its event is behind).
            nodes: std::collections::HashSet::new(),
            listed: FirstLists::new(&NODES_AND_POINTS),
            needs: Index::default(),
            pods_listed: false,
        };
        for node in ["alive", "gone"] {
            let record = SyncRecord {
                node: node.into(),
                uid: format!("uid-{node}"),
                rv: 3,
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: "default".into(),
                name: "cfg".into(),
            };
            assert!(store.write_points(&[PointWrite::Set(record.clone())]).await[0].is_ok());
            let point = Point {
                rv: record.rv,
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: "default".into(),
                name: "cfg".into(),
            };
            runner.state.set_point(Text::from(record.node), Text::from(record.uid), point);
        }
        runner.collect_orphans().await;
        let mut nodes: Vec<String> = runner.state.nodes().map(|n| n.to_string()).collect();
        nodes.sort();
        assert_eq!(nodes, ["alive"], "the live node keeps its point");
        assert!(runner.nodes.contains("alive"), "and is known from now on");
        let stored = store.get(&OBJECT_SYNCS, "default", "alive.uid-alive").await;
        assert!(stored.is_ok(), "its stored point stays");
        let gone = store.get(&OBJECT_SYNCS, "default", "gone.uid-gone").await;
        assert!(matches!(gone, Err(StoreError::NotFound { .. })), "the gone node's is removed: {gone:?}");
        store.close().await;
    }

    #[test]
    fn a_device_is_needed_only_by_the_node_it_is_bound_to() {
        let device = |node: &str| {
            let raw = serde_json::json!({"apiVersion": "devices.kubeedge.io/v1beta1", "kind": "Device",
                "metadata": {"name": "d", "namespace": "default"}, "spec": {"nodeName": node}});
            Object::from_stored(
                &resources::DEVICES,
                "/registry/devices.kubeedge.io/devices/default/d",
                7,
                serde_json::to_vec(&raw).unwrap().into(),
            )
        };
        assert!(bound_to("edge-1", &device("edge-1")));
        assert!(!bound_to("edge-1", &device("edge-2")), "moved away: not resent to the old node");
        assert!(!bound_to("edge-1", &device("")));
    }
}
