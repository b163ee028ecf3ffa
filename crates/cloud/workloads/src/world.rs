//! What the controllers know: the workload objects as they are stored, and a
//! slim record of each pod (what choosing, counting and owning pods needs,
//! not the pod's JSON: a fleet's pods stay a few hundred bytes each).
//!
//! The world is fed by informers and by the controllers' own writes (write
//! through: a created pod is known before its watch event arrives, so no
//! controller creates a pod twice while its event is on the way). A record
//! only ever moves forward in resourceVersion; a deletion leaves a tombstone
//! until the watch reports it, so a late event cannot bring it back.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use edgehive_store::Object;
use edgehive_store::resources::{self, ResourceDef};
use edgehive_store::selector::Labels;
use serde_json::Value;
use time::OffsetDateTime;

use edgehive_registry::scheduling::NodeInfo;

/// `namespace/name`.
pub type Key = (String, String);

/// An owner reference as controllers compare them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRef {
    /// `apiVersion` (the workload groups' without an allocation).
    pub api_version: Cow<'static, str>,
    /// `kind` (the workload kinds' without an allocation).
    pub kind: Cow<'static, str>,
    /// `name`.
    pub name: String,
    /// `uid`.
    pub uid: String,
    /// `controller: true`.
    pub controller: bool,
    /// `blockOwnerDeletion: true`.
    pub block: bool,
}

impl OwnerRef {
    /// The owner references in `metadata.ownerReferences` of `obj` (in a
    /// vector of their number: one per pod and per vertex is held for long).
    pub fn all_of(obj: &Value) -> Vec<OwnerRef> {
        let mut all: Vec<OwnerRef> = obj
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|r| {
                let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
                let b = |k: &str| r.get(k).and_then(Value::as_bool).unwrap_or(false);
                OwnerRef {
                    api_version: known(r.get("apiVersion").and_then(Value::as_str).unwrap_or_default()),
                    kind: known(r.get("kind").and_then(Value::as_str).unwrap_or_default()),
                    name: s("name"),
                    uid: s("uid"),
                    controller: b("controller"),
                    block: b("blockOwnerDeletion"),
                }
            })
            .collect();
        all.shrink_to_fit();
        all
    }

    /// The controlling owner of `obj`, if any.
    pub fn controller_of(obj: &Value) -> Option<OwnerRef> {
        OwnerRef::all_of(obj).into_iter().find(|r| r.controller)
    }

    /// A controller reference to `owner` (a stored object of `res`), with
    /// `blockOwnerDeletion`, as Kubernetes' controllers set it.
    pub fn controller_to(res: &ResourceDef, owner: &Value) -> Value {
        serde_json::json!({
            "apiVersion": res.api_version(),
            "kind": res.kind,
            "name": str_at(owner, "/metadata/name"),
            "uid": str_at(owner, "/metadata/uid"),
            "controller": true,
            "blockOwnerDeletion": true,
        })
    }
}

/// `s` without an allocation when it is one of the API versions and kinds
/// that own most objects (every pod of a fleet names one).
fn known(s: &str) -> Cow<'static, str> {
    const KNOWN: &[&str] = &[
        "v1",
        "apps/v1",
        "batch/v1",
        "ReplicaSet",
        "Deployment",
        "DaemonSet",
        "StatefulSet",
        "Job",
        "CronJob",
        "Node",
    ];
    KNOWN.iter().find(|k| **k == s).map_or_else(|| Cow::Owned(s.to_string()), |k| Cow::Borrowed(*k))
}

/// A string field of `v` (`""` when absent or not a string).
pub fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

/// An integer field of `v`.
pub fn int_at(v: &Value, pointer: &str) -> Option<i64> {
    v.pointer(pointer).and_then(Value::as_i64)
}

/// Labels of an object as a sorted map.
pub fn labels_of(v: &Value, pointer: &str) -> BTreeMap<String, String> {
    v.pointer(pointer)
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect())
        .unwrap_or_default()
}

/// An object's labels, compact: a sorted slice of key and value, one
/// allocation per string and one for the slice (a map of two labels would
/// allocate a whole tree node, half a kilobyte, per pod).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSet(Box<[(Box<str>, Box<str>)]>);

impl LabelSet {
    /// The labels at `pointer` in `v` (values that are not strings count as `""`).
    pub fn of(v: &Value, pointer: &str) -> LabelSet {
        let mut pairs: Vec<(Box<str>, Box<str>)> = v
            .pointer(pointer)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.as_str().into(), v.as_str().unwrap_or_default().into()))
            .collect();
        pairs.sort_unstable();
        LabelSet(pairs.into_boxed_slice())
    }

    /// The value of label `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.binary_search_by(|(k, _)| (**k).cmp(key)).ok().map(|i| &*self.0[i].1)
    }

    /// Every label, by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }
}

impl Labels for LabelSet {
    fn get(&self, key: &str) -> Option<&str> {
        LabelSet::get(self, key)
    }
}

/// A pod's phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// `Pending` (or no phase yet).
    Pending,
    /// `Unknown`.
    Unknown,
    /// `Running`.
    Running,
    /// `Succeeded`.
    Succeeded,
    /// `Failed`.
    Failed,
}

/// What the controllers keep of a pod.
#[derive(Debug, Clone, PartialEq)]
pub struct PodInfo {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// uid.
    pub uid: String,
    /// resourceVersion.
    pub rev: u64,
    /// Labels.
    pub labels: LabelSet,
    /// Every owner reference.
    pub owners: Vec<OwnerRef>,
    /// `spec.nodeName`.
    pub node: String,
    /// `status.phase`.
    pub phase: Phase,
    /// Since when the Ready condition is True; `None` when not ready.
    pub ready_since: Option<OffsetDateTime>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// `metadata.creationTimestamp`.
    pub created: Option<OffsetDateTime>,
    /// Sum of the containers' restart counts.
    pub restarts: i64,
    /// Carries the Job controller's tracking finalizer.
    pub tracked: bool,
    /// Its other finalizers (kept when the tracking one is removed; usually none).
    pub other_finalizers: Vec<String>,
    /// When its last container finished (terminal pods).
    pub finished: Option<OffsetDateTime>,
    /// `batch.kubernetes.io/job-completion-index` (Indexed Jobs).
    pub index: Option<u32>,
    /// `status.podIP` (`""` until it has one), for Endpoints.
    pub ip: String,
    /// `spec.hostname` and `spec.subdomain`: an endpoint's DNS name.
    pub hostname: String,
    /// See `hostname`.
    pub subdomain: String,
    /// The containers' named ports (name, protocol, number): what a
    /// Service's `targetPort` names.
    pub named_ports: Vec<(String, String, i64)>,
}

/// The finalizer that keeps a Job's pod until the Job has counted it.
pub const JOB_TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// The annotation (and label) with an Indexed Job pod's completion index.
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

impl PodInfo {
    /// The record of a stored pod.
    pub fn of(namespace: &str, name: &str, rev: u64, pod: &Value) -> PodInfo {
        let phase = match str_at(pod, "/status/phase") {
            "Running" => Phase::Running,
            "Succeeded" => Phase::Succeeded,
            "Failed" => Phase::Failed,
            "Unknown" => Phase::Unknown,
            _ => Phase::Pending,
        };
        let ready_since = pod
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
            .filter(|c| c.get("status").and_then(Value::as_str) == Some("True"))
            .map(|c| {
                c.get("lastTransitionTime")
                    .and_then(Value::as_str)
                    .and_then(edgehive_store::parse_rfc3339)
                    .unwrap_or(OffsetDateTime::UNIX_EPOCH)
            });
        let restarts = pod
            .pointer("/status/containerStatuses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
            .sum();
        PodInfo {
            namespace: namespace.to_string(),
            name: name.to_string(),
            uid: str_at(pod, "/metadata/uid").to_string(),
            rev,
            labels: LabelSet::of(pod, "/metadata/labels"),
            owners: OwnerRef::all_of(pod),
            node: str_at(pod, "/spec/nodeName").to_string(),
            phase,
            ready_since,
            deleting: pod.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null()),
            created: pod
                .pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str)
                .and_then(edgehive_store::parse_rfc3339),
            restarts,
            tracked: pod
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| f.iter().any(|x| x == JOB_TRACKING_FINALIZER)),
            other_finalizers: pod
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .filter(|f| *f != JOB_TRACKING_FINALIZER)
                .map(str::to_string)
                .collect(),
            finished: pod
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|c| c.pointer("/state/terminated/finishedAt").and_then(Value::as_str))
                .filter_map(edgehive_store::parse_rfc3339)
                .max(),
            index: pod
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(COMPLETION_INDEX))
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok()),
            ip: str_at(pod, "/status/podIP").to_string(),
            hostname: str_at(pod, "/spec/hostname").to_string(),
            subdomain: str_at(pod, "/spec/subdomain").to_string(),
            named_ports: pod
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|c| c.get("ports").and_then(Value::as_array))
                .flatten()
                .filter_map(|p| {
                    let name = p.get("name").and_then(Value::as_str).filter(|n| !n.is_empty())?;
                    let protocol = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
                    Some((name.to_string(), protocol.to_string(), p.get("containerPort")?.as_i64()?))
                })
                .collect(),
        }
    }

    /// Not terminal and not being deleted (Kubernetes' `IsPodActive`).
    pub fn active(&self) -> bool {
        !self.deleting && !matches!(self.phase, Phase::Succeeded | Phase::Failed)
    }

    /// Ready.
    pub fn ready(&self) -> bool {
        self.ready_since.is_some()
    }

    /// Ready for at least `min_ready` seconds at `now` (`IsPodAvailable`).
    pub fn available(&self, min_ready: i64, now: OffsetDateTime) -> bool {
        match self.ready_since {
            None => false,
            Some(_) if min_ready <= 0 => true,
            Some(since) => since + time::Duration::seconds(min_ready) <= now,
        }
    }

    /// The uid of the controlling owner.
    pub fn controller_uid(&self) -> Option<&str> {
        self.owners.iter().find(|o| o.controller).map(|o| o.uid.as_str())
    }
}

/// One workload object (Deployment, ReplicaSet, ...) parsed for a sync: the
/// world hands out a fresh parse each time it is asked, and keeps none.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// resourceVersion.
    pub rev: u64,
    /// The object (with `metadata.resourceVersion`).
    pub value: Value,
}

impl Stored {
    /// uid.
    pub fn uid(&self) -> &str {
        str_at(&self.value, "/metadata/uid")
    }

    /// Name.
    pub fn name(&self) -> &str {
        str_at(&self.value, "/metadata/name")
    }

    /// Being deleted.
    pub fn deleting(&self) -> bool {
        self.value.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null())
    }

    fn of(object: &Object) -> Option<Stored> {
        Some(Stored { rev: object.rev(), value: object.parse().ok()? })
    }
}

/// The objects of one workload kind, by key, with their controllers
/// indexed (and those without one, by namespace).
///
/// Each is kept as its stored bytes (shared with the store's copy while the
/// watch history holds it), not as a parsed tree: a parsed object is about
/// ten times its JSON, and a fleet's workloads are held for the process's
/// life while a sync needs a few of them for a moment. The accessors parse.
#[derive(Debug, Default)]
pub struct Objects {
    items: BTreeMap<Key, Object>,
    tombstones: HashMap<Key, u64>,
    by_owner: HashMap<String, BTreeSet<Key>>,
    orphans: BTreeSet<Key>,
}

impl Objects {
    /// One object, parsed.
    pub fn get(&self, ns: &str, name: &str) -> Option<Stored> {
        self.items.get(&(ns.to_string(), name.to_string())).and_then(Stored::of)
    }

    /// Whether `ns/name` is known.
    pub fn contains(&self, ns: &str, name: &str) -> bool {
        self.items.contains_key(&(ns.to_string(), name.to_string()))
    }

    /// Every key, in order.
    pub fn keys(&self) -> impl Iterator<Item = &Key> {
        self.items.keys()
    }

    /// Every object, in key order, parsed.
    pub fn iter(&self) -> impl Iterator<Item = (&Key, Stored)> {
        self.items.iter().filter_map(|(k, o)| Some((k, Stored::of(o)?)))
    }

    /// Objects of namespace `ns`, parsed.
    pub fn in_namespace<'a>(&'a self, ns: &str) -> impl Iterator<Item = Stored> + use<'a> {
        let ns = ns.to_string();
        self.items
            .range((ns.clone(), String::new())..)
            .take_while(move |(k, _)| k.0 == ns)
            .filter_map(|(_, o)| Stored::of(o))
    }

    /// Objects whose controller is `owner_uid`, parsed.
    pub fn owned_by<'a>(&'a self, owner_uid: &str) -> impl Iterator<Item = Stored> + use<'a> {
        self.by_owner.get(owner_uid).into_iter().flatten().filter_map(|k| self.items.get(k)).filter_map(Stored::of)
    }

    /// Objects of namespace `ns` without a controller, parsed.
    pub fn orphans_in<'a>(&'a self, ns: &str) -> impl Iterator<Item = Stored> + use<'a> {
        let ns = ns.to_string();
        self.orphans
            .range((ns.clone(), String::new())..)
            .take_while(move |k| k.0 == ns)
            .filter_map(|k| self.items.get(k))
            .filter_map(Stored::of)
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// No objects.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    fn index(&mut self, key: &Key, value: &Value, add: bool) {
        let Some(owner) = OwnerRef::controller_of(value) else {
            if add {
                self.orphans.insert(key.clone());
            } else {
                self.orphans.remove(key);
            }
            return;
        };
        {
            if add {
                self.by_owner.entry(owner.uid).or_default().insert(key.clone());
            } else if let Some(set) = self.by_owner.get_mut(&owner.uid) {
                set.remove(key);
                if set.is_empty() {
                    self.by_owner.remove(&owner.uid);
                }
            }
        }
    }

    /// Records `object` (parsed: `value`) unless something newer is known;
    /// the parse of what it replaced (`Some(None)`: nothing) when it changed.
    pub fn upsert(&mut self, key: Key, object: &Object, value: &Value) -> Option<Option<Value>> {
        let rev = object.rev();
        if self.tombstones.get(&key).is_some_and(|t| rev <= *t) || self.items.get(&key).is_some_and(|o| o.rev() >= rev)
        {
            return None;
        }
        let old = self.items.remove(&key).and_then(|o| o.parse().ok());
        if let Some(old) = &old {
            self.index(&key, old, false);
        }
        self.index(&key, value, true);
        self.items.insert(key, object.detached());
        Some(old)
    }

    /// Forgets `key`, deleted at `rev`; `watched` when the watch reported it
    /// (no later event about it can come, so no tombstone is needed).
    /// The parse of what it held.
    pub fn remove(&mut self, key: &Key, rev: u64, watched: bool) -> Option<Value> {
        if watched {
            self.tombstones.remove(key);
        } else {
            self.tombstones.insert(key.clone(), rev);
        }
        let old = self.items.remove(key)?.parse().ok()?;
        self.index(key, &old, false);
        Some(old)
    }

    /// Replaces everything with a relist (objects that do not parse are left out).
    pub fn relist(&mut self, objects: &[Object]) {
        self.items.clear();
        self.by_owner.clear();
        self.orphans.clear();
        self.tombstones.clear();
        for o in objects {
            let Ok(value) = o.parse() else { continue };
            let key = (o.namespace().to_string(), o.name().to_string());
            self.index(&key, &value, true);
            self.items.insert(key, o.detached());
        }
    }
}

/// Every pod, as [`PodInfo`], indexed by controlling owner (and those
/// without one, by namespace, for adoption) and by node.
#[derive(Debug, Default)]
pub struct Pods {
    /// Boxed: a B-tree node holds eleven entries whether full or not, and
    /// a record is a few hundred bytes.
    items: BTreeMap<Key, Box<PodInfo>>,
    tombstones: HashMap<Key, u64>,
    by_owner: HashMap<String, BTreeSet<Key>>,
    orphans: BTreeSet<Key>,
    by_node: HashMap<String, BTreeSet<Key>>,
    /// (namespace, label key, value) → pod names: what a Service's
    /// selector looks up instead of scanning the namespace.
    by_label: HashMap<(String, String, String), BTreeSet<String>>,
}

impl Pods {
    /// One pod.
    pub fn get(&self, ns: &str, name: &str) -> Option<&PodInfo> {
        self.items.get(&(ns.to_string(), name.to_string())).map(|p| &**p)
    }

    /// Pods of namespace `ns`.
    pub fn in_namespace<'a>(&'a self, ns: &str) -> impl Iterator<Item = &'a PodInfo> + use<'a> {
        let ns = ns.to_string();
        self.items.range((ns.clone(), String::new())..).take_while(move |(k, _)| k.0 == ns).map(|(_, v)| &**v)
    }

    /// Pods whose controller is `owner_uid`.
    pub fn owned_by<'a>(&'a self, owner_uid: &str) -> impl Iterator<Item = &'a PodInfo> + use<'a> {
        self.by_owner.get(owner_uid).into_iter().flatten().filter_map(|k| self.items.get(k).map(|p| &**p))
    }

    /// Pods of namespace `ns` without a controller.
    pub fn orphans_in<'a>(&'a self, ns: &str) -> impl Iterator<Item = &'a PodInfo> + use<'a> {
        let ns = ns.to_string();
        self.orphans
            .range((ns.clone(), String::new())..)
            .take_while(move |k| k.0 == ns)
            .filter_map(|k| self.items.get(k).map(|p| &**p))
    }

    /// Pods bound to node `node`.
    pub fn on_node<'a>(&'a self, node: &str) -> impl Iterator<Item = &'a PodInfo> + use<'a> {
        self.by_node.get(node).into_iter().flatten().filter_map(|k| self.items.get(k).map(|p| &**p))
    }

    /// Pods of namespace `ns` that carry every label of `selector` (none
    /// for an empty selector), from the label index: the shortest list of
    /// one label's pods, filtered by the others.
    pub fn selected<'a>(&'a self, ns: &str, selector: &'a [(String, String)]) -> Vec<&'a PodInfo> {
        let lists: Vec<Option<&BTreeSet<String>>> =
            selector.iter().map(|(k, v)| self.by_label.get(&(ns.to_string(), k.clone(), v.clone()))).collect();
        if lists.is_empty() || lists.iter().any(Option::is_none) {
            return Vec::new();
        }
        let Some(shortest) = lists.into_iter().flatten().min_by_key(|l| l.len()) else { return Vec::new() };
        shortest
            .iter()
            .filter_map(|name| self.get(ns, name))
            .filter(|p| selector.iter().all(|(k, v)| p.labels.get(k) == Some(v.as_str())))
            .collect()
    }

    /// Every pod.
    pub fn iter(&self) -> impl Iterator<Item = &PodInfo> {
        self.items.values().map(|p| &**p)
    }

    /// Number of pods.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// No pods.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    fn index(&mut self, key: &Key, pod: &PodInfo, add: bool) {
        for (k, v) in pod.labels.iter() {
            let at = (key.0.clone(), k.to_string(), v.to_string());
            if add {
                self.by_label.entry(at).or_default().insert(key.1.clone());
            } else if let Some(set) = self.by_label.get_mut(&at) {
                set.remove(&key.1);
                if set.is_empty() {
                    self.by_label.remove(&at);
                }
            }
        }
        if !pod.node.is_empty() {
            if add {
                self.by_node.entry(pod.node.clone()).or_default().insert(key.clone());
            } else if let Some(set) = self.by_node.get_mut(&pod.node) {
                set.remove(key);
                if set.is_empty() {
                    self.by_node.remove(&pod.node);
                }
            }
        }
        match pod.controller_uid() {
            None if add => {
                self.orphans.insert(key.clone());
            }
            None => {
                self.orphans.remove(key);
            }
            Some(uid) => {
                if add {
                    self.by_owner.entry(uid.to_string()).or_default().insert(key.clone());
                } else if let Some(set) = self.by_owner.get_mut(uid) {
                    set.remove(key);
                    if set.is_empty() {
                        self.by_owner.remove(uid);
                    }
                }
            }
        }
    }

    /// Records a pod unless something newer is known; the old record when it changed.
    pub fn upsert(&mut self, pod: PodInfo) -> Option<Option<PodInfo>> {
        let key = (pod.namespace.clone(), pod.name.clone());
        if self.tombstones.get(&key).is_some_and(|t| pod.rev <= *t)
            || self.items.get(&key).is_some_and(|p| p.rev >= pod.rev)
        {
            return None;
        }
        let old = self.items.remove(&key).map(|p| *p);
        if let Some(o) = &old {
            self.index(&key, o, false);
        }
        self.index(&key, &pod, true);
        self.items.insert(key, Box::new(pod));
        Some(old)
    }

    /// Forgets a pod (see [`Objects::remove`]).
    pub fn remove(&mut self, key: &Key, rev: u64, watched: bool) -> Option<PodInfo> {
        if watched {
            self.tombstones.remove(key);
        } else {
            self.tombstones.insert(key.clone(), rev);
        }
        let old = *self.items.remove(key)?;
        self.index(key, &old, false);
        Some(old)
    }

    /// Replaces everything with a relist.
    pub fn relist(&mut self, pods: impl IntoIterator<Item = PodInfo>) {
        self.items.clear();
        self.by_owner.clear();
        self.orphans.clear();
        self.by_node.clear();
        self.by_label.clear();
        self.tombstones.clear();
        for p in pods {
            let key = (p.namespace.clone(), p.name.clone());
            self.index(&key, &p, true);
            self.items.insert(key, Box::new(p));
        }
    }
}

/// Everything the workload controllers read.
#[derive(Debug, Default)]
pub struct World {
    /// Pods.
    pub pods: Pods,
    /// ReplicaSets.
    pub replica_sets: Objects,
    /// Deployments.
    pub deployments: Objects,
    /// DaemonSets.
    pub daemon_sets: Objects,
    /// StatefulSets.
    pub stateful_sets: Objects,
    /// PodDisruptionBudgets.
    pub disruption_budgets: Objects,
    /// Jobs.
    pub jobs: Objects,
    /// CronJobs.
    pub cron_jobs: Objects,
    /// ControllerRevisions (DaemonSet and StatefulSet template history).
    pub revisions: Objects,
    /// Nodes, by name.
    pub nodes: BTreeMap<String, NodeInfo>,
    /// Services.
    pub services: Objects,
    /// Each Service's label selector (namespace → name → pairs), so a pod's
    /// change finds its Services without parsing them.
    pub service_selectors: HashMap<String, BTreeMap<String, Vec<(String, String)>>>,
    /// Endpoints.
    pub endpoints: Objects,
    /// EndpointSlices (indexed by their controlling Service).
    pub endpoint_slices: Objects,
    /// The `kube-root-ca.crt` ConfigMaps (no others are kept).
    pub root_ca: Objects,
    /// Namespaces, by name: terminating or not.
    pub namespaces: BTreeMap<String, bool>,
}

/// The name of the ConfigMap with the API server's CA in every namespace.
pub const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";

/// A Service's selector as sorted pairs (none when it has no selector).
pub fn selector_of(svc: &Value) -> Vec<(String, String)> {
    labels_of(svc, "/spec/selector").into_iter().collect()
}

impl World {
    /// The object table of a workload resource.
    pub fn objects(&self, res: &ResourceDef) -> Option<&Objects> {
        if std::ptr::eq(res, &resources::REPLICA_SETS) {
            Some(&self.replica_sets)
        } else if std::ptr::eq(res, &resources::DEPLOYMENTS) {
            Some(&self.deployments)
        } else if std::ptr::eq(res, &resources::DAEMON_SETS) {
            Some(&self.daemon_sets)
        } else if std::ptr::eq(res, &resources::STATEFUL_SETS) {
            Some(&self.stateful_sets)
        } else if std::ptr::eq(res, &resources::POD_DISRUPTION_BUDGETS) {
            Some(&self.disruption_budgets)
        } else if std::ptr::eq(res, &resources::CONTROLLER_REVISIONS) {
            Some(&self.revisions)
        } else if std::ptr::eq(res, &resources::JOBS) {
            Some(&self.jobs)
        } else if std::ptr::eq(res, &resources::CRON_JOBS) {
            Some(&self.cron_jobs)
        } else if std::ptr::eq(res, &resources::SERVICES) {
            Some(&self.services)
        } else if std::ptr::eq(res, &resources::ENDPOINTS) {
            Some(&self.endpoints)
        } else if std::ptr::eq(res, &resources::ENDPOINT_SLICES) {
            Some(&self.endpoint_slices)
        } else if std::ptr::eq(res, &resources::CONFIGMAPS) {
            Some(&self.root_ca)
        } else {
            None
        }
    }

    fn objects_mut(&mut self, res: &ResourceDef) -> Option<&mut Objects> {
        if std::ptr::eq(res, &resources::REPLICA_SETS) {
            Some(&mut self.replica_sets)
        } else if std::ptr::eq(res, &resources::DEPLOYMENTS) {
            Some(&mut self.deployments)
        } else if std::ptr::eq(res, &resources::DAEMON_SETS) {
            Some(&mut self.daemon_sets)
        } else if std::ptr::eq(res, &resources::STATEFUL_SETS) {
            Some(&mut self.stateful_sets)
        } else if std::ptr::eq(res, &resources::POD_DISRUPTION_BUDGETS) {
            Some(&mut self.disruption_budgets)
        } else if std::ptr::eq(res, &resources::CONTROLLER_REVISIONS) {
            Some(&mut self.revisions)
        } else if std::ptr::eq(res, &resources::JOBS) {
            Some(&mut self.jobs)
        } else if std::ptr::eq(res, &resources::CRON_JOBS) {
            Some(&mut self.cron_jobs)
        } else if std::ptr::eq(res, &resources::SERVICES) {
            Some(&mut self.services)
        } else if std::ptr::eq(res, &resources::ENDPOINTS) {
            Some(&mut self.endpoints)
        } else if std::ptr::eq(res, &resources::ENDPOINT_SLICES) {
            Some(&mut self.endpoint_slices)
        } else if std::ptr::eq(res, &resources::CONFIGMAPS) {
            Some(&mut self.root_ca)
        } else {
            None
        }
    }

    /// Records a stored object (from a watch or from a write). Returns what
    /// it replaced, for the caller to see what moved; `None` when it was not
    /// news.
    pub fn upsert(&mut self, obj: &Object) -> Option<Update> {
        let res = obj.resource();
        let value = obj.value().ok()?;
        let key = (obj.namespace().to_string(), obj.name().to_string());
        if std::ptr::eq(res, &resources::PODS) {
            let pod = PodInfo::of(&key.0, &key.1, obj.rev(), value);
            return self
                .pods
                .upsert(pod.clone())
                .map(|old| Update::Pod { old: old.map(Box::new), new: Some(Box::new(pod)) });
        }
        if std::ptr::eq(res, &resources::NODES) {
            let node = NodeInfo::of(&key.1, obj.rev(), value);
            if self.nodes.get(&key.1).is_some_and(|n| n.rev >= node.rev) {
                return None;
            }
            let old = self.nodes.insert(key.1, node.clone());
            return Some(Update::Node { old: old.map(Box::new), new: Some(Box::new(node)) });
        }
        if std::ptr::eq(res, &resources::NAMESPACES) {
            let terminating = str_at(value, "/status/phase") == "Terminating";
            let old = self.namespaces.insert(key.1.clone(), terminating);
            return (old != Some(terminating)).then(|| Update::Object { res, old: None, new: Some(value.clone()) });
        }
        if std::ptr::eq(res, &resources::CONFIGMAPS) && key.1 != ROOT_CA_CONFIGMAP {
            return None;
        }
        if std::ptr::eq(res, &resources::SERVICES) {
            self.service_selectors.entry(key.0.clone()).or_default().insert(key.1.clone(), selector_of(value));
        }
        let old = self.objects_mut(res)?.upsert(key, obj, value)?;
        Some(Update::Object { res, old, new: Some(value.clone()) })
    }

    /// Forgets a deleted object.
    pub fn remove(&mut self, obj: &Object, watched: bool) -> Option<Update> {
        let res = obj.resource();
        let key = (obj.namespace().to_string(), obj.name().to_string());
        if std::ptr::eq(res, &resources::PODS) {
            let old = self.pods.remove(&key, obj.rev(), watched)?;
            return Some(Update::Pod { old: Some(Box::new(old)), new: None });
        }
        if std::ptr::eq(res, &resources::NODES) {
            let old = self.nodes.remove(&key.1)?;
            return Some(Update::Node { old: Some(Box::new(old)), new: None });
        }
        if std::ptr::eq(res, &resources::NAMESPACES) {
            self.namespaces.remove(&key.1)?;
            return Some(Update::Object { res, old: obj.value().ok().cloned(), new: None });
        }
        if std::ptr::eq(res, &resources::SERVICES)
            && let Some(m) = self.service_selectors.get_mut(&key.0)
        {
            m.remove(&key.1);
        }
        let old = self.objects_mut(res)?.remove(&key, obj.rev(), watched)?;
        Some(Update::Object { res, old: Some(old), new: None })
    }

    /// Replaces what is known of `res` with a relist. Each object is
    /// parsed without keeping the parse (`Object::parse`): a relist is
    /// every object of the resource, and parses kept with them all would be
    /// ten times their bytes at once (every pod, every Node of a fleet).
    pub fn relist(&mut self, res: &'static ResourceDef, objects: &[Object]) {
        if std::ptr::eq(res, &resources::PODS) {
            self.pods.relist(
                objects.iter().filter_map(|o| Some(PodInfo::of(o.namespace(), o.name(), o.rev(), &o.parse().ok()?))),
            );
        } else if std::ptr::eq(res, &resources::NODES) {
            self.nodes = objects
                .iter()
                .filter_map(|o| Some((o.name().to_string(), NodeInfo::of(o.name(), o.rev(), &o.parse().ok()?))))
                .collect();
        } else if std::ptr::eq(res, &resources::NAMESPACES) {
            self.namespaces = objects
                .iter()
                .filter_map(|o| {
                    Some((o.name().to_string(), str_at(&o.parse().ok()?, "/status/phase") == "Terminating"))
                })
                .collect();
        } else if std::ptr::eq(res, &resources::CONFIGMAPS) {
            let kept: Vec<Object> = objects.iter().filter(|o| o.name() == ROOT_CA_CONFIGMAP).cloned().collect();
            self.root_ca.relist(&kept);
        } else {
            if std::ptr::eq(res, &resources::SERVICES) {
                self.service_selectors.clear();
                for o in objects {
                    if let Ok(v) = o.parse() {
                        let sel = selector_of(&v);
                        self.service_selectors
                            .entry(o.namespace().to_string())
                            .or_default()
                            .insert(o.name().to_string(), sel);
                    }
                }
            }
            if let Some(table) = self.objects_mut(res) {
                table.relist(objects);
            }
        }
    }
}

/// A change the world took in, for deciding which controllers to wake.
#[derive(Debug, Clone)]
pub enum Update {
    /// A pod appeared, changed or went.
    Pod {
        /// Before.
        old: Option<Box<PodInfo>>,
        /// After.
        new: Option<Box<PodInfo>>,
    },
    /// A node appeared, changed or went.
    Node {
        /// Before.
        old: Option<Box<NodeInfo>>,
        /// After.
        new: Option<Box<NodeInfo>>,
    },
    /// A workload object appeared, changed or went.
    Object {
        /// Its resource.
        res: &'static ResourceDef,
        /// Before.
        old: Option<Value>,
        /// After.
        new: Option<Value>,
    },
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(name: &str, rev: u64, node: &str) -> PodInfo {
        PodInfo::of("default", name, rev, &json!({"metadata": {"name": name}, "spec": {"nodeName": node}}))
    }

    fn on(pods: &Pods, node: &str) -> Vec<String> {
        pods.on_node(node).map(|p| p.name.clone()).collect()
    }

    #[test]
    fn workload_objects_are_held_as_stored_bytes_and_parsed_when_asked() {
        use bytes::Bytes;
        use edgehive_store::resources::DEPLOYMENTS;
        let raw = br#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"default","uid":"u1"},"spec":{"replicas":2}}"#;
        let hot = Object::from_stored(&DEPLOYMENTS, "/registry/deployments/default/web", 7, Bytes::from_static(raw));
        let mut world = World::default();
        assert!(world.upsert(&hot).is_some());
        // Others parsing the copy they were given leave the world's alone.
        hot.value().expect("parse");
        let held = world.deployments.items.values().next().expect("held");
        assert!(!held.has_derived() && held.raw().as_ptr() == hot.raw().as_ptr());
        let d = world.deployments.get("default", "web").expect("parsed");
        assert_eq!((d.rev, d.uid(), int_at(&d.value, "/spec/replicas")), (7, "u1", Some(2)));
        assert_eq!(str_at(&d.value, "/metadata/resourceVersion"), "7");
        assert!(!world.deployments.items.values().next().expect("held").has_derived(), "a get keeps no parse");
        assert!(world.deployments.contains("default", "web") && !world.deployments.contains("default", "api"));
        // An older copy is not news; a newer one replaces it and reports the old parse.
        assert!(world.upsert(&hot.at_rev(6)).is_none());
        match world.upsert(&hot.at_rev(8)) {
            Some(Update::Object { old: Some(old), .. }) => assert_eq!(str_at(&old, "/metadata/resourceVersion"), "7"),
            other => panic!("expected the old parse, got {other:?}"),
        }
    }

    /// A relist is every object of a resource (every Node of a fleet, every
    /// pod): the world and the collector's graph take it in without keeping
    /// a parse with any of them, and know what a kept parse would have told.
    #[test]
    fn a_relist_is_taken_in_without_keeping_a_parse_with_its_objects() {
        use bytes::Bytes;
        use edgehive_store::resources::{NAMESPACES, NODES, PODS, SERVICES};
        let stored = |res: &'static ResourceDef, key: String, v: serde_json::Value| {
            Object::from_stored(res, key, 3, Bytes::from(serde_json::to_vec(&v).expect("encode")))
        };
        let nodes: Vec<Object> = (0..3)
            .map(|i| {
                let v = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("n{i}"), "uid": format!("nu{i}")},
                    "status": {"allocatable": {"cpu": "2", "pods": "10"}}});
                stored(&NODES, NODES.key("", &format!("n{i}")), v)
            })
            .collect();
        let pods: Vec<Object> = (0..3)
            .map(|i| {
                let v = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("p{i}"), "namespace": "default",
                    "uid": format!("pu{i}"), "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n0", "uid": "nu0"}]},
                    "spec": {"nodeName": "n0"}});
                stored(&PODS, PODS.key("default", &format!("p{i}")), v)
            })
            .collect();
        let namespaces = vec![stored(
            &NAMESPACES,
            NAMESPACES.key("", "default"),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "uid": "ns"}, "status": {"phase": "Terminating"}}),
        )];
        let services = vec![stored(
            &SERVICES,
            SERVICES.key("default", "web"),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default", "uid": "s"}, "spec": {"selector": {"app": "web"}}}),
        )];
        let mut world = World::default();
        let mut graph = crate::gc::Graph::default();
        for (res, objects) in [(&NODES, &nodes), (&PODS, &pods), (&NAMESPACES, &namespaces), (&SERVICES, &services)] {
            world.relist(res, objects);
            graph.relist(res, objects);
            assert!(objects.iter().all(|o| !o.has_derived()), "a parse kept with a relisted {}", res.plural);
        }
        assert_eq!(world.nodes.len(), 3);
        assert_eq!(on(&world.pods, "n0"), ["p0", "p1", "p2"]);
        assert_eq!(world.namespaces.get("default"), Some(&true), "terminating");
        assert!(world.service_selectors["default"].contains_key("web"));
        // The graph knows every object, and the pods' owner.
        assert_eq!(graph.len(), 8);
        assert!(graph.node("pu1").is_some_and(|v| v.owners.iter().any(|o| o.uid == "nu0")));
    }

    #[test]
    fn label_sets_answer_as_the_map_they_replace() {
        let v = json!({"metadata": {"labels": {"tier": "web", "app": "a", "n": 3}}});
        let l = LabelSet::of(&v, "/metadata/labels");
        assert_eq!((l.get("app"), l.get("tier"), l.get("n"), l.get("x")), (Some("a"), Some("web"), Some(""), None));
        assert_eq!(l.iter().map(|(k, _)| k).collect::<Vec<_>>(), ["app", "n", "tier"]);
        assert_eq!(LabelSet::of(&v, "/metadata/none"), LabelSet::default());
        let sel = edgehive_store::selector::LabelSelector::from_json(&json!({"matchLabels": {"app": "a"}}))
            .expect("selector");
        assert!(sel.matches(&l));
        // Owner references name the common kinds without allocating, and keep the others.
        let o = OwnerRef::all_of(&json!({"metadata": {"ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "u", "controller": true},
            {"apiVersion": "example.com/v1", "kind": "Widget", "name": "w", "uid": "v"}]}}));
        assert!(matches!((&o[0].api_version, &o[0].kind), (Cow::Borrowed("apps/v1"), Cow::Borrowed("ReplicaSet"))));
        assert_eq!(
            (&*o[1].api_version, &*o[1].kind, o[0].controller, o[1].controller),
            ("example.com/v1", "Widget", true, false)
        );
        assert_eq!(o.capacity(), 2, "no room held beyond the references");
    }

    #[test]
    fn pods_are_found_by_node_as_they_are_bound_moved_and_removed() {
        let mut pods = Pods::default();
        pods.upsert(pod("a", 1, "edge-1"));
        pods.upsert(pod("b", 2, "edge-1"));
        pods.upsert(pod("c", 3, ""));
        assert_eq!(on(&pods, "edge-1"), ["a", "b"]);
        // Bound elsewhere (a newer record), then gone.
        pods.upsert(pod("b", 4, "edge-2"));
        assert_eq!((on(&pods, "edge-1"), on(&pods, "edge-2")), (vec!["a".to_string()], vec!["b".to_string()]));
        pods.remove(&("default".into(), "a".into()), 5, true);
        assert!(on(&pods, "edge-1").is_empty());
        assert!(!pods.by_node.contains_key("edge-1"), "an empty node's entry goes");
        pods.relist([pod("d", 6, "edge-3")]);
        assert_eq!((on(&pods, "edge-2").len(), on(&pods, "edge-3")), (0, vec!["d".to_string()]));
    }
}
