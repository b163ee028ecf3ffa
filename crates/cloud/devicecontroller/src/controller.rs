//! The controller task: device changes down, reports up.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use edgehive_beehive::{Context, ModuleContext};
use edgehive_model::resource::split_node_prefix;
use edgehive_model::resource_type::{DEVICE, DEVICE_MODEL};
use edgehive_model::{Content, Message, group, op, source};
use edgehive_store::informer::{Change, FirstLists, inform};
use edgehive_store::resources::{DEVICE_MODELS, DEVICES, ResourceDef};
use edgehive_store::{Object, Store, StoreError};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::DeviceControllerConfig;
use crate::metrics::Metrics;
use crate::status::{self, Change as StatusChange, Pending};

/// Longest wait for room in CloudHub's mailbox.
const SEND_DEADLINE: Duration = Duration::from_secs(10);
/// How often waiting reports are looked at.
const FLUSH_TICK: Duration = Duration::from_millis(100);

type Key = (String, String);
/// A finished status write: the device, the status it left (by
/// resourceVersion) or why it failed, and the reports it carried.
type Written = (Key, Result<Option<(u64, Value)>, WriteFailure>, Pending);

/// What the controller remembers of a Device.
struct Dev {
    node: String,
    model: String,
    /// The spec as JSON text: a change of it goes down to the node.
    spec: String,
    description: String,
    obj: Object,
}

/// A device's reports waiting to be written.
struct Waiting {
    pending: Pending,
    /// The strongest change they make to the status last seen.
    change: StatusChange,
    reports: u64,
}

pub(crate) struct Controller {
    store: Store,
    ctx: Context,
    cfg: DeviceControllerConfig,
    metrics: Arc<Metrics>,
    devices: HashMap<Key, Dev>,
    models: HashMap<Key, Object>,
    by_node: HashMap<String, BTreeSet<Key>>,
    /// Which device holds a name on a node: ids on the edge are names
    /// (KubeEdge v1.15), so one device per (node, name) is sent there; a
    /// same-name device of another namespace waits until the place is free.
    holders: HashMap<(String, String), Key>,
    waiting: HashMap<Key, Waiting>,
    last_write: HashMap<Key, Instant>,
    /// The status each device's last write left, by resourceVersion: the
    /// informer's copy lags behind writes, and a report compared with a
    /// stale status could look unchanged and wait a refresh interval.
    written: HashMap<Key, (u64, Value)>,
    writing: JoinSet<Written>,
    in_flight: std::collections::HashSet<Key>,
    /// Which of [`WATCHED`] have been listed once. Until both have, no
    /// report is taken: edges reconnecting to a restarted cloud report every
    /// device again, and before the Devices' list no device holds their
    /// names, so the reports were refused and their values lost until the
    /// next change.
    listed: FirstLists,
}

/// What the controller watches; models first, so that a device finds its
/// model known.
static WATCHED: [&ResourceDef; 2] = [&DEVICE_MODELS, &DEVICES];

fn key_of(o: &Object) -> Key {
    (o.namespace().to_owned(), o.name().to_owned())
}

fn object_content(obj: &Object) -> Option<Content> {
    Content::from_json(String::from_utf8_lossy(obj.json().ok()?).into_owned()).ok()
}

/// KubeEdge's downstream object message: `node/{node}/{ns}/{type}/{name}`.
fn object_message(node: &str, ty: &str, obj: &Object, operation: &'static str, content: Content) -> Message {
    Message::new()
        .with_route(
            source::DEVICECONTROLLER,
            group::RESOURCE,
            format!("node/{node}/{}/{ty}/{}", obj.namespace(), obj.name()),
            operation,
        )
        .with_resource_version(obj.rev().to_string())
        .with_content(content)
}

/// A delete naming the object (apiVersion, kind, name, namespace, uid).
fn delete_message(node: &str, ty: &str, obj: &Object) -> Message {
    let res = obj.resource();
    let content = json!({"apiVersion": res.api_version(), "kind": res.kind,
        "metadata": {"name": obj.name(), "namespace": obj.namespace(), "uid": obj.uid().unwrap_or_default(),
            "resourceVersion": obj.rev().to_string()}});
    object_message(node, ty, obj, op::DELETE, Content::from_serialize(&content).unwrap_or_default())
}

/// KubeEdge's membership update (`types.MembershipUpdate`); ids are names.
fn membership(node: &str, added: &[&Dev], removed: &[&Dev]) -> Message {
    let entry = |d: &&Dev| {
        let mut e = json!({"id": d.obj.name(), "name": d.obj.name()});
        if !d.description.is_empty() {
            e["description"] = json!(d.description);
        }
        e
    };
    let content = json!({
        "event_id": edgehive_model::new_msg_id().as_str(),
        "timestamp": edgehive_model::now_millis(),
        "added_devices": added.iter().map(entry).collect::<Vec<_>>(),
        "removed_devices": removed.iter().map(entry).collect::<Vec<_>>(),
    });
    Message::new()
        .with_route(source::DEVICECONTROLLER, group::TWIN, format!("node/{node}/membership"), op::UPDATE)
        .with_content(Content::from_serialize(&content).unwrap_or_default())
}

fn dev_of(obj: &Object) -> Option<Dev> {
    let v = obj.value().ok()?;
    let s = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or_default().to_owned();
    Some(Dev {
        node: s("/spec/nodeName"),
        model: s("/spec/deviceModelRef/name"),
        spec: v.get("spec").map(Value::to_string).unwrap_or_default(),
        description: s("/metadata/labels/description"),
        obj: obj.clone(),
    })
}

impl Controller {
    pub(crate) fn new(store: Store, ctx: Context, cfg: DeviceControllerConfig, metrics: Arc<Metrics>) -> Controller {
        Controller {
            store,
            ctx,
            cfg,
            metrics,
            devices: HashMap::new(),
            models: HashMap::new(),
            by_node: HashMap::new(),
            holders: HashMap::new(),
            waiting: HashMap::new(),
            last_write: HashMap::new(),
            written: HashMap::new(),
            writing: JoinSet::new(),
            in_flight: std::collections::HashSet::new(),
            listed: FirstLists::new(&WATCHED),
        }
    }

    pub(crate) async fn run(mut self, mut mctx: ModuleContext, cancel: CancellationToken) {
        let (tx, mut changes) = mpsc::channel(1024);
        let stop = cancel.child_token();
        let watches = WATCHED
            .map(|res| tokio::spawn(inform(self.store.clone(), "devicecontroller", res, tx.clone(), stop.clone())));
        drop(tx);
        let mut tick = tokio::time::interval(FLUSH_TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = cancel.cancelled() => break,
                _ = tick.tick() => self.flush(),
                Some(done) = self.writing.join_next(), if !self.writing.is_empty() => self.written(done),
                c = changes.recv() => match c {
                    Some(c) => self.on_change(c).await,
                    None => break,
                },
                m = mctx.receive(), if self.listed.all() => match m {
                    Some(m) => self.on_message(m).await,
                    None => break,
                },
            }
        }
        stop.cancel();
        for w in watches {
            let _ = w.await;
        }
        // Reports taken but not yet written are written before the end.
        self.flush_all();
        while let Some(done) = self.writing.join_next().await {
            self.written(done);
        }
    }

    async fn send(&self, msg: Message) {
        match self.ctx.send_within(source::CLOUDHUB, msg, SEND_DEADLINE).await {
            Ok(()) => {
                self.metrics.downstream.inc();
            }
            Err(e) => {
                tracing::warn!(module = "devicecontroller", error = %e, "downstream message not taken by cloudhub")
            }
        }
    }

    async fn on_change(&mut self, c: Change) {
        match c {
            Change::Upsert { object, .. } => self.upsert(&object).await,
            Change::Deleted(object) => self.deleted(&object).await,
            Change::Relisted { resource, objects } => {
                self.listed.listed(resource);
                let keep: std::collections::HashSet<Key> = objects.iter().map(key_of).collect();
                let gone: Vec<Object> = if std::ptr::eq(resource, &DEVICES) {
                    self.devices.iter().filter(|(k, _)| !keep.contains(*k)).map(|(_, d)| d.obj.clone()).collect()
                } else {
                    self.models.iter().filter(|(k, _)| !keep.contains(*k)).map(|(_, o)| o.clone()).collect()
                };
                for o in gone {
                    self.deleted(&o).await;
                }
                for o in objects {
                    self.upsert(&o).await;
                }
            }
        }
    }

    async fn upsert(&mut self, obj: &Object) {
        if std::ptr::eq(obj.resource(), &DEVICE_MODELS) {
            let key = key_of(obj);
            let changed = self.models.get(&key).is_none_or(|o| o.rev() != obj.rev());
            // A model seen for the first time after its devices (the two
            // informers race) is an insert at their nodes too.
            let operation = if self.models.contains_key(&key) { op::UPDATE } else { op::INSERT };
            self.models.insert(key.clone(), obj.clone());
            if changed {
                // Every node holding a device of this model gets it.
                let nodes: BTreeSet<String> = self
                    .devices
                    .iter()
                    .filter(|((ns, _), d)| *ns == key.0 && d.model == key.1 && !d.node.is_empty())
                    .map(|(_, d)| d.node.clone())
                    .collect();
                for node in nodes {
                    if let Some(c) = object_content(obj) {
                        self.send(object_message(&node, DEVICE_MODEL, obj, operation, c)).await;
                    }
                }
            }
            return;
        }
        let Some(new) = dev_of(obj) else {
            tracing::warn!(module = "devicecontroller", name = obj.name(), "device that does not parse; ignored");
            return;
        };
        let key = key_of(obj);
        if self.written.get(&key).is_some_and(|(rev, _)| *rev <= obj.rev()) {
            self.written.remove(&key);
        }
        let old = self.devices.remove(&key);
        let spec_changed = old.as_ref().is_none_or(|o| o.spec != new.spec || o.description != new.description);
        let node_changed = old.as_ref().is_some_and(|o| o.node != new.node);
        if let Some(o) = &old
            && node_changed
            && !o.node.is_empty()
        {
            self.remove_from_node(&key, o).await;
        }
        let added = old.as_ref().is_none_or(|o| o.node != new.node);
        if !new.node.is_empty() {
            self.by_node.entry(new.node.clone()).or_default().insert(key.clone());
            // A second Device of the same name on one node would overwrite
            // the first there: it waits for the place.
            let holder = self.holders.entry((new.node.clone(), key.1.clone())).or_insert_with(|| key.clone()).clone();
            if holder != key {
                if added {
                    self.metrics.refused.inc();
                    tracing::warn!(module = "devicecontroller", node = %new.node, namespace = %key.0, device = %key.1,
                        other_namespace = %holder.0, "not sent: the node has a device of this name from another namespace; sent when that one leaves");
                }
            } else if spec_changed {
                self.send_device(&new, added).await;
            }
        }
        self.devices.insert(key, new);
        self.metrics.bound_devices.set(self.by_node.values().map(|s| s.len() as i64).sum());
    }

    /// Sends a device to its node: membership (when newly added), its
    /// model, then the Device.
    async fn send_device(&self, d: &Dev, added: bool) {
        if added {
            self.send(membership(&d.node, &[d], &[])).await;
        }
        if let Some(model) = self.models.get(&(d.obj.namespace().to_owned(), d.model.clone()))
            && let Some(c) = object_content(model)
        {
            let operation = if added { op::INSERT } else { op::UPDATE };
            self.send(object_message(&d.node, DEVICE_MODEL, model, operation, c)).await;
        }
        if let Some(c) = object_content(&d.obj) {
            let operation = if added { op::INSERT } else { op::UPDATE };
            self.send(object_message(&d.node, DEVICE, &d.obj, operation, c)).await;
        }
    }

    async fn deleted(&mut self, obj: &Object) {
        let key = key_of(obj);
        if std::ptr::eq(obj.resource(), &DEVICE_MODELS) {
            // As KubeEdge: nodes keep a model until their last device of it goes.
            self.models.remove(&key);
            return;
        }
        if let Some(d) = self.devices.remove(&key) {
            if !d.node.is_empty() {
                self.remove_from_node(&key, &d).await;
            }
            self.waiting.remove(&key);
            self.last_write.remove(&key);
            self.written.remove(&key);
            self.metrics.pending.set(self.waiting.len() as i64);
        }
        self.metrics.bound_devices.set(self.by_node.values().map(|s| s.len() as i64).sum());
    }

    /// Takes a device off a node: membership, the Device, and its model if
    /// no other device of the node uses it.
    async fn remove_from_node(&mut self, key: &Key, d: &Dev) {
        if let Some(set) = self.by_node.get_mut(&d.node) {
            set.remove(key);
            if set.is_empty() {
                self.by_node.remove(&d.node);
            }
        }
        let place = (d.node.clone(), key.1.clone());
        if self.holders.get(&place) != Some(key) {
            // It waited for a name another device holds: never sent there.
            return;
        }
        self.holders.remove(&place);
        self.send(membership(&d.node, &[], &[d])).await;
        self.send(delete_message(&d.node, DEVICE, &d.obj)).await;
        let model_used = self.by_node.get(&d.node).is_some_and(|keys| {
            keys.iter().any(|k| k.0 == key.0 && self.devices.get(k).is_some_and(|o| o.model == d.model))
        });
        if !model_used && let Some(model) = self.models.get(&(key.0.clone(), d.model.clone())) {
            self.send(delete_message(&d.node, DEVICE_MODEL, model)).await;
        }
        // A device of the same name that waited takes the place.
        let next = self.by_node.get(&d.node).and_then(|keys| keys.iter().find(|k| k.1 == key.1)).cloned();
        if let Some(next) = next {
            self.holders.insert(place, next.clone());
            if let Some(dev) = self.devices.get(&next) {
                tracing::info!(module = "devicecontroller", node = %d.node, namespace = %next.0, device = %next.1, "the name is free on the node: sent");
                self.send_device(dev, true).await;
            }
        }
    }

    /// A node (re)connected: offer it everything it should hold; CloudHub
    /// sends only what is newer than its success points.
    async fn resync_node(&self, node: &str) {
        let Some(keys) = self.by_node.get(node) else { return };
        let devs: Vec<&Dev> = keys
            .iter()
            .filter(|k| self.holders.get(&(node.to_owned(), k.1.clone())) == Some(*k))
            .filter_map(|k| self.devices.get(k))
            .collect();
        if devs.is_empty() {
            return;
        }
        self.send(membership(node, &devs, &[])).await;
        for d in devs {
            self.send_device(d, false).await;
        }
    }

    async fn on_message(&mut self, m: Message) {
        if m.route.source == source::CLOUDHUB {
            if let Some(node) = m.route.resource.strip_prefix("node/")
                && m.route.operation == op::CONNECTED
            {
                let node = node.to_owned();
                self.resync_node(&node).await;
            }
            return;
        }
        let Ok((node, rest)) = split_node_prefix(&m.route.resource) else {
            self.refuse("", &m, "resource without node/{node}/");
            return;
        };
        let (node, rest) = (node.to_owned(), rest.to_owned());
        // `device/{id}/twin/edge_updated`, `device/{id}/state/update`,
        // `membership/detail` (KubeEdge v1.15 takes no action on it).
        let parts: Vec<&str> = rest.split('/').collect();
        let parsed = match parts.as_slice() {
            ["devices", "reports"] => {
                self.batch(&node, &m);
                return;
            }
            ["device", id, "twin", "edge_updated"] => Some((*id, status::parse_twin_report(&m.content.to_value()))),
            ["device", id, "state", "update"] => Some((*id, status::parse_state_report(&m.content.to_value()))),
            ["membership", "detail"] => None,
            _ => {
                self.refuse(&node, &m, "not a device report");
                return;
            }
        };
        let Some((id, report)) = parsed else { return };
        let report = match report {
            Ok(r) => r,
            Err(e) => {
                self.refuse(&node, &m, &e);
                return;
            }
        };
        let Some(key) = self.device_of(&node, id, &m) else { return };
        self.metrics.reports.inc();
        self.take(key, report);
    }

    /// A batch of reports (the `device-reports` feature): each entry is
    /// taken as its own twin and state reports would be, and a bad entry is
    /// refused alone.
    fn batch(&mut self, node: &str, m: &Message) {
        let entries = match status::parse_batch(&m.content.to_value()) {
            Ok(e) => e,
            Err(e) => {
                self.refuse(node, m, &e);
                return;
            }
        };
        self.metrics.batches.inc();
        for entry in entries {
            let (id, report) = match entry {
                Ok(e) => e,
                Err(e) => {
                    self.refuse(node, m, &e);
                    continue;
                }
            };
            let Some(key) = self.device_of(node, &id, m) else { continue };
            self.metrics.reports.inc();
            self.take(key, report);
        }
    }

    /// The device `id` (a name, as KubeEdge v1.15's ids are) the node
    /// holds: the one of that name sent to it.
    fn device_of(&self, node: &str, id: &str, m: &Message) -> Option<Key> {
        let held = self.holders.get(&(node.to_owned(), id.to_owned())).cloned();
        if held.is_none() {
            self.refuse(node, m, &format!("no device {id:?} is bound to node {node}"));
        }
        held
    }

    fn refuse(&self, node: &str, m: &Message, why: &str) {
        self.metrics.refused.inc();
        tracing::warn!(module = "devicecontroller", node, resource = %m.route.resource, reason = why, "device report refused");
    }

    /// Merges a report into what waits for the device.
    fn take(&mut self, key: Key, mut report: Pending) {
        let Some(d) = self.devices.get(&key) else { return };
        let obj = d.obj.value().ok().cloned().unwrap_or(Value::Null);
        let props = status::properties(&obj);
        // Twins the spec does not declare are not kept (they would not be
        // written; kept, a report could grow the waiting set without end).
        report.twins.retain(|name, _| props.contains(&name.as_str()));
        let w = self.waiting.entry(key.clone()).or_insert_with(|| Waiting {
            pending: Pending::default(),
            change: StatusChange::None,
            reports: 0,
        });
        w.pending.merge(report);
        w.reports += 1;
        self.reassess(&key);
    }

    /// Compares what waits for a device with the newest status known (the
    /// controller's own last write or the informer's copy, whichever is
    /// later). While a write is in flight the answer is provisional: the
    /// entry is kept even if it changes nothing, and compared again with
    /// the status that write leaves (`written`). Otherwise an entry that
    /// changes nothing is forgotten.
    fn reassess(&mut self, key: &Key) {
        let change = self.devices.get(key).and_then(|d| {
            let w = self.waiting.get(key)?;
            let obj = d.obj.value().ok()?;
            let current = match self.written.get(key) {
                Some((rev, st)) if *rev > d.obj.rev() => st,
                _ => obj.get("status").unwrap_or(&Value::Null),
            };
            Some(status::apply(current, &status::properties(obj), &w.pending).1)
        });
        match change {
            Some(c) if c != StatusChange::None || self.in_flight.contains(key) => {
                if let Some(w) = self.waiting.get_mut(key) {
                    w.change = c;
                }
            }
            _ => {
                self.waiting.remove(key);
            }
        }
        self.metrics.pending.set(self.waiting.len() as i64);
    }

    /// Starts the writes that are due.
    fn flush(&mut self) {
        let now = Instant::now();
        let mut due: Vec<(Option<Instant>, Key)> = self
            .waiting
            .iter()
            .filter(|(k, w)| {
                let wait = match w.change {
                    StatusChange::None => return false,
                    StatusChange::Timestamps => self.cfg.refresh_interval,
                    StatusChange::Values => self.cfg.min_write_interval,
                };
                !self.in_flight.contains(*k) && self.last_write.get(*k).is_none_or(|t| now.duration_since(*t) >= wait)
            })
            .map(|(k, _)| (self.last_write.get(k).copied(), k.clone()))
            .collect();
        // More due than may be in flight: the longest unwritten go first
        // (never written, then the oldest write), so none is starved.
        if due.len() > self.cfg.writes_in_flight.saturating_sub(self.in_flight.len()) {
            due.sort_unstable();
        }
        for (_, key) in due {
            if self.in_flight.len() >= self.cfg.writes_in_flight {
                break;
            }
            self.start_write(key, now);
        }
        self.metrics.pending.set(self.waiting.len() as i64);
    }

    /// Starts every waiting write (at shutdown).
    fn flush_all(&mut self) {
        let now = Instant::now();
        let keys: Vec<Key> = self
            .waiting
            .iter()
            .filter(|(k, w)| w.change != StatusChange::None && !self.in_flight.contains(*k))
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.start_write(key, now);
        }
    }

    fn start_write(&mut self, key: Key, now: Instant) {
        let Some(w) = self.waiting.remove(&key) else { return };
        if w.reports > 1 {
            self.metrics.coalesced.inc_by(w.reports - 1);
        }
        self.in_flight.insert(key.clone());
        self.last_write.insert(key.clone(), now);
        let store = self.store.clone();
        self.writing.spawn(async move {
            let r = write_status(&store, &key, &w.pending).await;
            (key, r, w.pending)
        });
    }

    fn written(&mut self, done: Result<Written, tokio::task::JoinError>) {
        let Ok((key, result, pending)) = done else { return };
        self.in_flight.remove(&key);
        match result {
            Ok(after) => {
                self.metrics.status_writes.inc();
                if let Some(after) = after {
                    self.written.insert(key.clone(), after);
                }
                // What came during the write was compared with the status
                // before it; the status it left is what counts now.
                self.reassess(&key);
            }
            Err(WriteFailure::Gone) => self.reassess(&key),
            Err(WriteFailure::Invalid(e)) => {
                // The API refuses it: trying again would be refused again.
                self.metrics.status_write_failures.inc();
                tracing::warn!(module = "devicecontroller", namespace = %key.0, device = %key.1, error = %e,
                    "device status refused by validation; the reports are dropped");
                self.reassess(&key);
            }
            Err(WriteFailure::Store(e)) => {
                self.metrics.status_write_failures.inc();
                tracing::warn!(module = "devicecontroller", namespace = %key.0, device = %key.1, error = %e,
                    "device status not written; retried");
                // Kept, under what came since, for the next flush.
                let mut again = pending;
                if let Some(w) = self.waiting.remove(&key) {
                    again.merge(w.pending);
                }
                self.waiting.insert(key, Waiting { pending: again, change: StatusChange::Values, reports: 1 });
            }
        }
    }
}

/// Why a status write failed.
enum WriteFailure {
    /// The device is gone.
    Gone,
    /// Validation refused the status.
    Invalid(String),
    /// The store failed (retried).
    Store(String),
}

/// Writes a device's merged reports into its status (defaults and update
/// validation as the API applies them); the status and resourceVersion it
/// left, or `None` when there was nothing to write.
async fn write_status(store: &Store, key: &Key, pending: &Pending) -> Result<Option<(u64, Value)>, WriteFailure> {
    let r = store
        .update_with(&DEVICES, &key.0, &key.1, |cur| {
            let old = cur.value()?;
            let props = status::properties(old);
            let (status, change) = status::apply(old.get("status").unwrap_or(&Value::Null), &props, pending);
            if change == StatusChange::None {
                return Ok(None);
            }
            let mut new = old.clone();
            new["status"] = status;
            edgehive_registry::admit::update(&DEVICES, &mut new, old)
                .map_err(|e| WriteError::Invalid(e.to_string()))?;
            Ok(Some(new))
        })
        .await;
    match r {
        Ok(o) => Ok(o.value().ok().map(|v| (o.rev(), v.get("status").cloned().unwrap_or(Value::Null)))),
        Err(WriteError::Store(StoreError::NotFound { .. })) => Err(WriteFailure::Gone),
        Err(WriteError::Store(e)) => Err(WriteFailure::Store(e.to_string())),
        Err(WriteError::Invalid(e)) => Err(WriteFailure::Invalid(e)),
    }
}

enum WriteError {
    Store(StoreError),
    Invalid(String),
}

impl From<StoreError> for WriteError {
    fn from(e: StoreError) -> Self {
        WriteError::Store(e)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use edgehive_store::{BackendConfig, StoreConfig};
    use serde_json::json;

    fn report(value: &str) -> Pending {
        // The same moment every time: a report equal to the status changes nothing.
        status::parse_twin_report(&json!({"event_id": "e", "timestamp": 1700, "twin": {"temperature": {
            "actual": {"value": value, "metadata": {"timestamp": 1700}}, "metadata": {"type": "int"}}}}))
        .unwrap()
    }

    /// A report that matches the status a write in flight is about to
    /// replace is compared again with what that write left, and written
    /// without waiting a refresh interval.
    #[tokio::test]
    async fn a_report_met_by_a_write_in_flight_is_judged_by_what_the_write_left() {
        let dir = edgehive_testkit::fixtures::TempDir::new("devicecontroller-unit");
        let store =
            Store::open(StoreConfig::new(BackendConfig::Sqlite { path: dir.path().join("state.db"), fsync: false }))
                .await
                .unwrap();
        let ctx = edgehive_beehive::Beehive::builder().build().context();
        let cfg = DeviceControllerConfig { refresh_interval: Duration::from_secs(3600), ..Default::default() };
        let mut c = Controller::new(store.clone(), ctx, cfg, Arc::default());
        let device = json!({"apiVersion": "devices.kubeedge.io/v1beta1", "kind": "Device",
            "metadata": {"name": "thermo", "namespace": "default"},
            "spec": {"nodeName": "edge-1", "deviceModelRef": {"name": "m"}, "protocol": {"protocolName": "modbus"},
                "properties": [{"name": "temperature", "desired": {"value": "20"}}]},
            "status": {"twins": [{"propertyName": "temperature",
                "reported": {"value": "21", "metadata": {"timestamp": "1700", "type": "int"}}}]}});
        let obj = store.create(&DEVICES, device).await.unwrap();
        let key = key_of(&obj);
        c.devices.insert(key.clone(), dev_of(&obj).unwrap());

        // 21 again, against a status of 21: nothing to write.
        c.take(key.clone(), report("21"));
        c.flush();
        assert!(!c.waiting.contains_key(&key) && c.in_flight.is_empty(), "a report equal to the status is forgotten");

        // 22 goes out; 21 comes while that write is in flight, and the
        // informer's copy (21) has not seen the write.
        c.take(key.clone(), report("22"));
        c.flush();
        assert!(c.in_flight.contains(&key));
        c.take(key.clone(), report("21"));
        c.flush();
        assert!(c.waiting.contains_key(&key), "kept while the write it met is in flight");

        let done = c.writing.join_next().await.unwrap();
        c.written(done);
        let w = c.waiting.get(&key).expect("still waiting after the write of 22");
        assert_eq!(w.change, StatusChange::Values, "21 differs from the 22 just written");

        // Written once due, and then nothing waits.
        c.last_write.clear();
        c.flush();
        let done = c.writing.join_next().await.unwrap();
        c.written(done);
        assert!(c.waiting.is_empty());
        let st = store.get(&DEVICES, "default", "thermo").await.unwrap();
        assert_eq!(st.value().unwrap().pointer("/status/twins/0/reported/value"), Some(&json!("21")));
    }
}
