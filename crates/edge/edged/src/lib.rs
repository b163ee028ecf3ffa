//! Edged: runs the pods the cloud gives this node and reports their status.
//!
//! The beehive module `edged` (group `edged`) takes the pod changes
//! MetaManager passes on after committing them, runs each pod's containers
//! with a [`runtime::Runtime`] — the [`process`] runtime (a supervised host
//! process per container, the default) or the [`cri`] runtime (containerd
//! over CRI) — restarts them by `restartPolicy` with back-off, stops them gracefully on
//! deletion and confirms the deletion to the cloud, and reports each pod's
//! status (`podstatus`) at most once per report interval, so that a
//! crash-looping pod does not flood the link. At start it loads every pod
//! of this node from MetaManager's store: after a reboot with the cloud
//! gone, the pods come back. When MetaManager could not pass it a change
//! (its mailbox was full), MetaManager sends `update podlist` once there is
//! room, and edged reads the store again and reconciles: it starts what is
//! missing, updates what changed and stops what is gone.
//!
//! Pod workers record kubelet's Events (`Pulled`, `Created`, `Started`,
//! `Killing`, `BackOff`, `Unhealthy`, `Failed`); [`events`] coalesces them
//! as client-go does (a crash loop is one counted Event) before they go to
//! the cloud through MetaManager, best effort, from a bounded buffer.
//!
//! The node itself is edged's too ([`node::NodeAgent`], module `nodeagent`):
//! registration with capacity/allocatable from the host, conditions,
//! addresses and nodeInfo with the runtime's version; status reports and
//! Lease heartbeats.
//!
//! **Architecture Invariant:** edged reaches the cloud and the store only
//! through MetaManager.

pub mod cgroup;
mod config;
pub mod cri;
pub mod events;
mod logs;
pub mod node;
pub mod pod;
pub mod probe;
pub mod process;
pub mod runtime;
pub mod streams;
pub mod usage;
mod volume;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use edgehive_beehive::{Context, Module, ModuleContext, ModuleFuture};
use edgehive_model::{Content, Message, ResourcePath, group, op, resource_type as rt, source};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use pod::Backoff;

pub use node::{HostInfo, NodeAgent, NodeAgentConfig};
pub use process::RUNTIME_VERSION;
pub use runtime::Runtime;
pub use streams::SessionServer;

/// Edged's module name.
pub const MODULE: &str = source::EDGED;
const METAMANAGER: &str = source::METAMANAGER;

/// Settings of edged.
#[derive(Debug, Clone)]
pub struct EdgedConfig {
    /// This node.
    pub node_name: String,
    /// The node's address (`hostIP`; also the IP of pods on the host's
    /// network, and of every pod of the process runtime).
    pub node_ip: String,
    /// Pod directories live under `{root}/pods/{uid}`.
    pub root: PathBuf,
    /// Restart back-off.
    pub backoff: Backoff,
    /// Time between two status reports of one pod once its burst of three
    /// is spent.
    pub report_interval: Duration,
}

impl EdgedConfig {
    /// Kubelet's defaults under `root`.
    pub fn new(node_name: impl Into<String>, node_ip: impl Into<String>, root: PathBuf) -> EdgedConfig {
        EdgedConfig {
            node_name: node_name.into(),
            node_ip: node_ip.into(),
            root,
            backoff: Backoff::default(),
            report_interval: Duration::from_millis(500),
        }
    }
}

/// The edged beehive module.
#[derive(Debug)]
pub struct Edged {
    cfg: EdgedConfig,
    runtime: Arc<dyn Runtime>,
    /// The pods running, for the stream sessions.
    table: streams::PodTable,
    /// Resource usage, read when the cloud asks.
    sampler: Arc<usage::Sampler>,
    /// The counters of the Events edged records.
    events: Arc<events::EventMetrics>,
}

impl Edged {
    /// Edged for the node `cfg` names, with the process runtime.
    pub fn new(cfg: EdgedConfig) -> Edged {
        let runtime = Arc::new(process::ProcessRuntime::new(cfg.root.join("pods")));
        Edged::with_runtime(cfg, runtime)
    }

    /// Edged with another runtime.
    pub fn with_runtime(cfg: EdgedConfig, runtime: Arc<dyn Runtime>) -> Edged {
        Edged { cfg, runtime, table: Arc::default(), sampler: Arc::default(), events: Arc::default() }
    }

    /// The counters of the Events edged records (`edgehive_edged_events_*`).
    pub fn event_metrics(&self) -> Arc<events::EventMetrics> {
        Arc::clone(&self.events)
    }

    /// Serves the stream sessions the cloud opens to this node (logs,
    /// exec, attach, port-forward, resource usage and the node's own
    /// endpoints) on the pods this edged runs.
    pub fn sessions(&self) -> SessionServer {
        SessionServer::new(Arc::clone(&self.table), Arc::clone(&self.sampler))
    }
}

fn pod_key(pod: &Value) -> String {
    format!(
        "{}/{}",
        pod["metadata"]["namespace"].as_str().unwrap_or("default"),
        pod["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// The pod's grace period: `metadata.deletionGracePeriodSeconds`, else
/// `spec.terminationGracePeriodSeconds`, else 30 s.
fn grace_of(pod: &Value) -> Duration {
    let secs = pod["metadata"]["deletionGracePeriodSeconds"]
        .as_u64()
        .or_else(|| pod["spec"]["terminationGracePeriodSeconds"].as_u64())
        .unwrap_or(30);
    Duration::from_secs(secs)
}

/// The pod's `metadata.resourceVersion`, when it has a numeric one.
fn resource_version(pod: &Value) -> Option<u64> {
    pod["metadata"]["resourceVersion"].as_str()?.parse().ok()
}

/// A pod edged runs (`pod`: its [`slim`] form).
struct Running {
    handle: pod::PodHandle,
    pod: Value,
}

struct Edge {
    cfg: EdgedConfig,
    ctx: Context,
    pods: HashMap<String, Running>,
    dirty: HashSet<String>,
    /// Each pod's status report budget.
    reported: HashMap<String, ReportBudget>,
    changed_tx: mpsc::Sender<String>,
    runtime: Arc<dyn Runtime>,
    /// Moves whenever edged is passed a configmap or secret: pods and
    /// containers waiting for one try again.
    config_changed: tokio::sync::watch::Sender<u64>,
    /// The pods running, as stream sessions find them.
    table: streams::PodTable,
    /// Where pod workers record Events.
    events: events::Recorder,
    /// Told when the cloud connects: Events waiting for it go at once.
    cloud_connected: Arc<tokio::sync::Notify>,
}

impl Module for Edged {
    fn name(&self) -> &str {
        MODULE
    }

    fn group(&self) -> &str {
        group::EDGED
    }

    fn run(self: Arc<Self>, mut ctx: ModuleContext, cancel: CancellationToken) -> ModuleFuture {
        Box::pin(async move {
            let (changed_tx, mut changed_rx) = mpsc::channel(1024);
            let (recorder, notes) = events::Recorder::channel(Arc::clone(&self.events));
            let cloud_connected = Arc::new(tokio::sync::Notify::new());
            let sender = tokio::spawn(events::send_all(
                ctx.context().clone(),
                self.cfg.node_name.clone(),
                notes,
                Arc::clone(&self.events),
                Arc::clone(&cloud_connected),
                cancel.child_token(),
            ));
            let mut e = Edge {
                cfg: self.cfg.clone(),
                ctx: ctx.context().clone(),
                pods: HashMap::new(),
                dirty: HashSet::new(),
                reported: HashMap::new(),
                changed_tx,
                runtime: Arc::clone(&self.runtime),
                config_changed: tokio::sync::watch::Sender::new(0),
                table: Arc::clone(&self.table),
                events: recorder,
                cloud_connected,
            };
            if !e.load(&cancel).await {
                sender.abort();
                return Ok(());
            }
            // Reports held back by their budget go out as soon as it allows.
            let mut report = tokio::time::interval((e.cfg.report_interval / 5).max(Duration::from_millis(10)));
            report.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = cancel.cancelled() => break,
                    m = ctx.receive() => match m {
                        Some(m) => e.on_message(m).await,
                        None => break,
                    },
                    Some(key) = changed_rx.recv() => e.changed(key),
                    _ = report.tick() => e.report().await,
                }
            }
            // Shutdown: a runtime whose containers outlive edged keeps them
            // running for the next run to adopt; the process runtime's end
            // with edged (stopped here; a restarted edge starts them again
            // from the store).
            let keep = e.runtime.keeps_containers();
            e.table.lock().unwrap_or_else(|p| p.into_inner()).clear();
            for (_, r) in e.pods.drain() {
                if keep {
                    r.handle.detach().await;
                } else {
                    r.handle.stop(Duration::from_secs(2)).await;
                }
            }
            sender.abort();
            Ok(())
        })
    }
}

impl Edge {
    /// Every pod in MetaManager's store.
    async fn read_pods(&self) -> Result<Vec<Value>, String> {
        let q = Message::new().with_route(MODULE, group::META, "default/pod", op::QUERY);
        let r = self.ctx.send_sync(METAMANAGER, q, Duration::from_secs(30)).await.map_err(|e| e.to_string())?;
        if r.route.operation == op::ERROR {
            return Err(r.content.as_text().map(|t| t.into_owned()).unwrap_or_else(|| "refused".into()));
        }
        let rows: Vec<String> = r.content.decode().map_err(|e| format!("the pod list: {e}"))?;
        Ok(rows.iter().filter_map(|s| serde_json::from_str(s).ok()).collect())
    }

    /// The pods of this node, of `pods`.
    fn mine(&self, pods: Vec<Value>) -> Vec<Value> {
        pods.into_iter().filter(|p| p["spec"]["nodeName"].as_str() == Some(self.cfg.node_name.as_str())).collect()
    }

    /// Every pod of this node in MetaManager's store. A store that cannot
    /// be read is not an empty one: nothing is started or stopped (the
    /// containers of an earlier run are left as they are) until a read
    /// succeeds, retried with a back-off; false when cancelled meanwhile.
    async fn load(&mut self, cancel: &CancellationToken) -> bool {
        let mut delay = Duration::from_secs(1);
        let pods = loop {
            match self.read_pods().await {
                Ok(p) => break p,
                Err(e) => {
                    tracing::error!(node = %self.cfg.node_name, error = %e, retry_in_ms = delay.as_millis() as u64,
                        "the local store cannot be read; no pod is started or stopped until it can");
                    tokio::select! {
                        () = cancel.cancelled() => return false,
                        () = tokio::time::sleep(delay) => {}
                    }
                    delay = (delay * 2).min(Duration::from_secs(30));
                }
            }
        };
        let mine = self.mine(pods);
        tracing::info!(node = %self.cfg.node_name, pods = mine.len(), "pods loaded from the local store");
        let keep: HashSet<String> =
            mine.iter().filter_map(|p| p["metadata"]["uid"].as_str()).map(str::to_owned).collect();
        // What an earlier run left of pods deleted meanwhile goes first.
        self.runtime.cleanup(&keep).await;
        for p in mine {
            self.apply(p).await;
        }
        true
    }

    /// MetaManager could not pass on some changes: the store is read again
    /// and the pods reconciled with it — missing ones started, changed ones
    /// updated, gone ones stopped — and the configmaps and secrets of
    /// running pods' volumes read again.
    async fn resync(&mut self) {
        let pods = match self.read_pods().await {
            Ok(p) => self.mine(p),
            Err(e) => {
                // Nothing is stopped on a failed read; MetaManager wakes
                // edged again on its next missed change.
                tracing::warn!(node = %self.cfg.node_name, error = %e, "could not re-read pods from the local store");
                return;
            }
        };
        let keys: HashSet<String> = pods.iter().map(pod_key).collect();
        let gone: Vec<String> = self.pods.keys().filter(|k| !keys.contains(*k)).cloned().collect();
        tracing::info!(node = %self.cfg.node_name, pods = pods.len(), gone = gone.len(), "reconciling pods with the local store");
        for key in gone {
            if let Some(r) = self.pods.remove(&key) {
                tracing::info!(pod = %key, uid = %r.handle.uid, "stopping a pod no longer in the local store");
                r.handle.stop(Duration::from_secs(2)).await;
                self.forget(&r.pod).await;
            }
        }
        for p in pods {
            self.apply(p).await;
        }
        // A configmap or secret change may have been missed too.
        self.config_changed.send_modify(|n| *n = n.wrapping_add(1));
        let mut wanted: Vec<(String, &'static str, String)> = self
            .pods
            .values()
            .flat_map(|r| volume::sources(&r.pod).into_iter().map(|(k, n)| (ns_of(&r.pod).to_owned(), k, n)))
            .collect();
        wanted.sort();
        wanted.dedup();
        let reader = config::ConfigReader::new(self.ctx.clone());
        for (ns, kind, name) in wanted {
            if let config::Fetched::Found(data) = reader.get(&ns, kind, &name).await {
                self.write_volumes(&ns, kind, &name, &data);
            }
        }
    }

    async fn on_message(&mut self, m: Message) {
        if m.route.operation == op::CONNECT {
            if m.content.as_text().as_deref() == Some(edgehive_model::well_known::CLOUD_CONNECTED) {
                self.cloud_connected.notify_one();
            }
            return;
        }
        if m.route.resource == rt::PODLIST {
            self.resync().await;
            return;
        }
        let Ok(path) = ResourcePath::parse_wire(&m.route.resource) else { return };
        if matches!(path.resource_type.as_str(), rt::CONFIGMAP | rt::SECRET)
            && matches!(m.route.operation.as_str(), op::INSERT | op::UPDATE)
        {
            self.refresh_volumes(&path, &m.content.to_value());
            // Whatever waits for a configmap or secret tries again.
            self.config_changed.send_modify(|n| *n = n.wrapping_add(1));
            return;
        }
        if path.resource_type != rt::POD {
            return;
        }
        match m.route.operation.as_str() {
            op::INSERT | op::UPDATE => self.apply(m.content.to_value()).await,
            op::DELETE => {
                let key = format!(
                    "{}/{}",
                    path.namespace.as_deref().unwrap_or("default"),
                    path.name.as_deref().unwrap_or_default()
                );
                // A delete of a pod since replaced under the same name stops
                // nothing of the new one.
                let uid = m.content.to_value().pointer("/metadata/uid").and_then(Value::as_str).map(str::to_owned);
                if let (Some(uid), Some(r)) = (&uid, self.pods.get(&key))
                    && r.handle.uid != *uid
                {
                    tracing::debug!(node = %self.cfg.node_name, pod = %key, %uid, "delete of a replaced pod; ignored");
                    return;
                }
                if let Some(r) = self.pods.remove(&key) {
                    r.handle.stop(Duration::from_secs(2)).await;
                    self.forget(&r.pod).await;
                }
            }
            _ => {}
        }
    }

    /// Runs a pod, or stops one being deleted, or replaces one whose uid changed.
    async fn apply(&mut self, pod: Value) {
        if pod["spec"]["nodeName"].as_str() != Some(self.cfg.node_name.as_str()) {
            return;
        }
        let key = pod_key(&pod);
        let uid = pod["metadata"]["uid"].as_str().unwrap_or_default().to_owned();
        let deleting = !pod["metadata"]["deletionTimestamp"].is_null();
        if let Some(r) = self.pods.get_mut(&key)
            && r.handle.uid == uid
        {
            if let (Some(have), Some(new)) = (resource_version(&r.pod), resource_version(&pod))
                && new < have
            {
                // An older copy (a change passed on after a re-read of the
                // store that saw a newer one): nothing to do.
                tracing::debug!(pod = %key, have, new, "older pod version ignored");
                return;
            }
            if deleting {
                self.delete_gracefully(&key, &pod).await;
            } else {
                r.handle.update(&pod);
                r.pod = slim(&pod);
            }
            return;
        }
        if let Some(old) = self.pods.remove(&key) {
            old.handle.stop(grace_of(&old.pod)).await;
            self.forget(&old.pod).await;
        }
        if deleting {
            // Deleted while this edge was away: confirm at once.
            self.confirm_delete(&pod).await;
            return;
        }
        let env = pod::PodEnv {
            dir: self.cfg.root.join("pods").join(&uid),
            backoff: self.cfg.backoff,
            node: self.cfg.node_name.clone(),
            node_ip: self.cfg.node_ip.clone(),
            runtime: Arc::clone(&self.runtime),
            config: config::ConfigReader::new(self.ctx.clone()),
            config_changed: self.config_changed.subscribe(),
            events: self.events.clone(),
        };
        tracing::info!(pod = %key, uid = %uid, "starting pod");
        let handle = pod::run(&pod, env, self.changed_tx.clone());
        let entry = streams::PodEntry { uid: uid.clone(), state: Arc::clone(&handle.state) };
        self.table.lock().unwrap_or_else(|p| p.into_inner()).insert(key.clone(), entry);
        self.pods.insert(key.clone(), Running { handle, pod: slim(&pod) });
        self.changed(key);
    }

    /// Rewrites the configMap/secret volumes of running pods that use the
    /// object that changed.
    fn refresh_volumes(&self, path: &ResourcePath, obj: &Value) {
        let kind: &'static str = if path.resource_type == rt::CONFIGMAP { rt::CONFIGMAP } else { rt::SECRET };
        let (ns, name) = (path.namespace.as_deref().unwrap_or("default"), path.name.as_deref().unwrap_or_default());
        self.write_volumes(ns, kind, name, &volume::object_data(kind, obj));
    }

    /// Writes `data` into the volumes of running pods of `ns` that mount
    /// the configmap or secret `name`.
    fn write_volumes(&self, ns: &str, kind: &'static str, name: &str, data: &volume::Data) {
        for r in self.pods.values().filter(|r| ns_of(&r.pod) == ns) {
            for v in r.pod["spec"]["volumes"].as_array().into_iter().flatten() {
                let source = match kind {
                    rt::CONFIGMAP => v.get("configMap").filter(|s| s["name"] == name),
                    _ => v.get("secret").filter(|s| s["secretName"] == name),
                };
                let Some(source) = source else { continue };
                let dir = self.cfg.root.join("pods").join(&r.handle.uid);
                match volume::write_object_volume(&dir, v, source, data) {
                    Ok(()) => {
                        tracing::info!(pod = %pod_key(&r.pod), uid = %r.handle.uid, volume = ?v["name"], "volume updated")
                    }
                    Err(e) => {
                        tracing::warn!(pod = %pod_key(&r.pod), uid = %r.handle.uid, error = %e, "volume update failed")
                    }
                }
            }
        }
    }

    async fn delete_gracefully(&mut self, key: &str, pod: &Value) {
        if let Some(r) = self.pods.remove(key) {
            let grace = grace_of(pod);
            tracing::info!(pod = %key, grace_secs = grace.as_secs(), "stopping pod");
            r.handle.stop(grace).await;
            self.forget(&r.pod).await;
        }
        self.confirm_delete(pod).await;
    }

    /// Tells the cloud the pod is gone (it then removes the object).
    async fn confirm_delete(&self, pod: &Value) {
        let m = Message::new()
            .with_route(MODULE, group::META, format!("{}/pod/{}", ns_of(pod), name_of(pod)), op::DELETE)
            .with_content(Content::from_serialize(&json!({"metadata": pod["metadata"]})).unwrap_or_default());
        let _ = tokio::time::timeout(Duration::from_secs(30), self.ctx.send(METAMANAGER, m)).await;
    }

    async fn forget(&self, pod: &Value) {
        {
            let key = pod_key(pod);
            let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
            if table.get(&key).is_some_and(|e| Some(e.uid.as_str()) == pod["metadata"]["uid"].as_str()) {
                table.remove(&key);
            }
        }
        if let Some(uid) = pod["metadata"]["uid"].as_str().filter(|u| !u.is_empty()) {
            let _ = tokio::fs::remove_dir_all(self.cfg.root.join("pods").join(uid)).await;
        }
    }

    /// A pod's state changed: reported at once while its budget allows,
    /// else held (coalesced with later changes) until it does.
    fn changed(&mut self, key: String) {
        if self.budget(&key).take() {
            self.report_one(key);
        } else {
            self.dirty.insert(key);
        }
    }

    fn budget(&mut self, key: &str) -> &mut ReportBudget {
        let every = self.cfg.report_interval;
        self.reported.entry(key.to_owned()).or_insert_with(|| ReportBudget::new(every))
    }

    /// Sends the held-back status of pods whose budget allows it now.
    async fn report(&mut self) {
        for key in std::mem::take(&mut self.dirty) {
            if self.budget(&key).take() {
                self.report_one(key);
            } else {
                self.dirty.insert(key);
            }
        }
        self.reported.retain(|k, _| self.pods.contains_key(k));
    }

    fn report_one(&mut self, key: String) {
        let Some(r) = self.pods.get(&key) else { return };
        let status = r.handle.state.lock().unwrap_or_else(|p| p.into_inner()).status(&self.cfg.node_ip);
        let content = json!({"UID": r.handle.uid, "Status": status});
        let m = Message::new()
            .with_route(MODULE, group::META, format!("{}/podstatus/{}", ns_of(&r.pod), name_of(&r.pod)), op::UPDATE)
            .with_content(Content::from_serialize(&content).unwrap_or_default());
        if self.ctx.try_send(METAMANAGER, m).is_err() {
            // MetaManager is busy: report again next tick.
            self.dirty.insert(key);
        } else {
            self.dirty.remove(&key);
        }
    }
}

/// A pod's status reports: a burst of [`ReportBudget::BURST`] (a new pod's
/// Pending, then Running, then Ready go at once), then one per report
/// interval, so that a crash-looping pod does not flood the link.
#[derive(Debug)]
struct ReportBudget {
    tokens: f64,
    every: Duration,
    at: tokio::time::Instant,
}

impl ReportBudget {
    const BURST: f64 = 3.0;

    fn new(every: Duration) -> ReportBudget {
        ReportBudget { tokens: Self::BURST, every, at: tokio::time::Instant::now() }
    }

    fn take(&mut self) -> bool {
        let now = tokio::time::Instant::now();
        let earned = now.duration_since(self.at).as_secs_f64() / self.every.as_secs_f64().max(1e-3);
        self.tokens = (self.tokens + earned).min(Self::BURST);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// What edged keeps of a running pod: its identity, grace period and
/// volumes (the whole object's JSON tree is several times its text; the
/// runtime has what else it needs).
fn slim(pod: &Value) -> Value {
    let (meta, spec) = (&pod["metadata"], &pod["spec"]);
    json!({
        "metadata": {
            "name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"],
            "deletionGracePeriodSeconds": meta["deletionGracePeriodSeconds"],
        },
        "spec": {"volumes": spec["volumes"], "terminationGracePeriodSeconds": spec["terminationGracePeriodSeconds"]},
    })
}

fn ns_of(pod: &Value) -> &str {
    pod["metadata"]["namespace"].as_str().unwrap_or("default")
}

fn name_of(pod: &Value) -> &str {
    pod["metadata"]["name"].as_str().unwrap_or_default()
}
