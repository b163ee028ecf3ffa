//! Which objects each edge node must have: the pods bound to it and the
//! configmaps and secrets those pods use. A plain struct; the controller
//! task turns its answers into messages.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use edgehive_registry::scheduling::{self, NodeInfo, Resources};
use serde_json::Value;

/// A configmap or secret a pod uses.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ref {
    /// `configmap` or `secret` (KubeEdge's resource type).
    pub kind: &'static str,
    /// Namespace (the pod's).
    pub namespace: String,
    /// Name.
    pub name: String,
}

/// A pod as the index keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodEntry {
    /// `spec.nodeName`.
    pub node: String,
    /// `metadata.uid`: a delete names the object it removes.
    pub uid: String,
    /// `metadata.deletionTimestamp` is set (its node is stopping it).
    pub terminating: bool,
    /// What it uses.
    pub refs: BTreeSet<Ref>,
    /// Labels (for anti-affinity).
    pub labels: std::collections::BTreeMap<String, String>,
    /// What it asks of its node; zero once it ended (a finished pod holds nothing).
    pub requests: Resources,
    /// Its required pod anti-affinity terms.
    pub anti_affinity: Vec<Value>,
    /// Its tolerations that can tolerate `NoExecute` taints (the taint manager's).
    pub no_execute_tolerations: Vec<Value>,
}

/// Label that marks an edge node.
pub const EDGE_LABEL: &str = "node-role.kubernetes.io/edge";

/// What the node lifecycle needs of a node, kept from the informers so that
/// a check reads nothing from the store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Liveness {
    /// The Ready condition's `lastHeartbeatTime`.
    pub status_beat: Option<time::OffsetDateTime>,
    /// The node's Lease `renewTime` (namespace `kube-node-lease`).
    pub lease_renew: Option<time::OffsetDateTime>,
    /// The Ready condition is Unknown already.
    pub unknown: bool,
    /// Not Ready since (the Ready condition's `lastTransitionTime`).
    pub not_ready_since: Option<time::OffsetDateTime>,
    /// When the Node was created (`metadata.creationTimestamp`).
    pub created: Option<time::OffsetDateTime>,
}

impl Liveness {
    /// The latest heartbeat of either kind.
    pub fn last_beat(&self) -> Option<time::OffsetDateTime> {
        self.status_beat.max(self.lease_renew)
    }

    /// A node that never sent a heartbeat and is not marked yet, past the
    /// grace period after its creation (or of unknown creation): its
    /// conditions are to be marked Unknown. Within the grace period there
    /// is nothing to mark, so a check reads nothing of it from the store
    /// (1,000 nodes joining at once were 1,000 store reads every check,
    /// while deliveries waited).
    pub fn never_reported_past(&self, now: time::OffsetDateTime, grace: std::time::Duration) -> bool {
        self.last_beat().is_none()
            && !self.unknown
            && self.created.is_none_or(|c| crate::lifecycle::elapsed(c, now) > grace)
    }
}

/// A fingerprint of what decides a pod's placement: its uid, labels (pod
/// anti-affinity) and spec. A waiting pod whose fingerprint is the one it
/// was last tried with is not tried again for its own status writes (the
/// scheduler's condition), only when the cluster changes; any other change
/// of the pod (as Kubernetes requeues on any update but a status one) or a
/// new pod under the same name is tried at once.
pub fn scheduling_fingerprint(pod: &serde_json::Value) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    pod["metadata"]["uid"].as_str().unwrap_or_default().hash(&mut h);
    serde_json::to_string(&pod["metadata"]["labels"]).unwrap_or_default().hash(&mut h);
    serde_json::to_string(&pod["spec"]).unwrap_or_default().hash(&mut h);
    h.finish()
}

/// The per-node view.
#[derive(Debug, Default)]
pub struct Index {
    edge_nodes: HashSet<String>,
    nodes: HashMap<String, NodeInfo>,
    liveness: HashMap<String, Liveness>,
    /// Pods waiting for a node, with a fingerprint of what they were last
    /// tried with ([`scheduling_fingerprint`]).
    pub unscheduled: BTreeMap<(String, String), u64>,
    pods: HashMap<(String, String), PodEntry>,
    pods_by_node: HashMap<String, BTreeSet<(String, String)>>,
    requested: HashMap<String, Resources>,
    /// Pods the scheduler bound whose bound state the watch has not brought
    /// yet: placement counts them, so pods scheduled one after another see
    /// each other.
    assumed: HashMap<(String, String), PodEntry>,
    users: HashMap<Ref, HashMap<String, u32>>,
}

/// What changed for nodes when a pod changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RefChanges {
    /// (node, ref) pairs the node needs from now on.
    pub gained: Vec<(String, Ref)>,
    /// (node, ref) pairs the node no longer needs.
    pub lost: Vec<(String, Ref)>,
}

impl Index {
    /// Whether `node` is an edge node.
    pub fn is_edge(&self, node: &str) -> bool {
        self.edge_nodes.contains(node)
    }

    /// Records a node's labels; true if it is an edge node.
    pub fn set_node(&mut self, name: &str, node: &Value) -> bool {
        let edge =
            node.pointer("/metadata/labels").and_then(Value::as_object).is_some_and(|l| l.contains_key(EDGE_LABEL));
        if edge {
            self.edge_nodes.insert(name.to_owned());
        } else {
            self.edge_nodes.remove(name);
        }
        self.nodes.insert(name.to_owned(), NodeInfo::of(name, 0, node));
        let live = self.liveness.entry(name.to_owned()).or_default();
        live.status_beat = crate::lifecycle::status_heartbeat(node);
        live.unknown = crate::lifecycle::ready_status(node) == Some("Unknown");
        live.not_ready_since = crate::lifecycle::not_ready_since(node);
        live.created = crate::lifecycle::created_at(node);
        edge
    }

    /// Records a node Lease's renewal (`None`: the Lease is gone).
    pub fn set_lease(&mut self, node: &str, lease: Option<&Value>) {
        self.liveness.entry(node.to_owned()).or_default().lease_renew = lease.and_then(crate::lifecycle::lease_renewal);
    }

    /// Lifecycle facts of a node.
    pub fn liveness(&self, node: &str) -> Option<&Liveness> {
        self.liveness.get(node)
    }

    /// The lifecycle marked `node`'s Ready condition Unknown (or found it
    /// so): known before the watch brings the Node back, so that the next
    /// checks do not read it again meanwhile. The Node's own changes, this
    /// one among them, set it from then on.
    pub fn set_unknown(&mut self, node: &str) {
        if let Some(live) = self.liveness.get_mut(node) {
            live.unknown = true;
        }
    }

    /// Forgets a node.
    pub fn remove_node(&mut self, name: &str) {
        self.edge_nodes.remove(name);
        self.nodes.remove(name);
        self.liveness.remove(name);
    }

    /// Scheduling facts of a node.
    pub fn node_info(&self, name: &str) -> Option<&NodeInfo> {
        self.nodes.get(name)
    }

    /// Pods bound to `node`, counted.
    pub fn pod_count(&self, node: &str) -> usize {
        self.pods_by_node.get(node).map_or(0, BTreeSet::len)
    }

    /// What the pods bound to `node` (or just bound by the scheduler) that
    /// have not ended ask of it.
    pub fn requested(&self, node: &str) -> Resources {
        self.assumed
            .values()
            .filter(|p| p.node == node)
            .fold(self.requested.get(node).copied().unwrap_or_default(), |sum, p| sum + p.requests)
    }

    /// The pods on `node`, with those the scheduler just bound there.
    pub fn placed_on<'a>(&'a self, node: &'a str) -> impl Iterator<Item = (&'a (String, String), &'a PodEntry)> + 'a {
        self.pods_on(node)
            .filter_map(|k| Some((k, self.pods.get(k)?)))
            .chain(self.assumed.iter().filter(move |(_, p)| p.node == node))
    }

    /// Counts a pod the scheduler bound (`pod`, as written) until its
    /// bound state arrives through [`Index::set_pod`].
    pub fn assume(&mut self, namespace: &str, name: &str, pod: &Value) {
        let node = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or_default();
        let key = (namespace.to_owned(), name.to_owned());
        if !node.is_empty() && !self.pods.contains_key(&key) {
            self.assumed.insert(key, entry_of(namespace, node, pod));
        }
    }

    /// Edge nodes known.
    pub fn edge_nodes(&self) -> impl Iterator<Item = &String> {
        self.edge_nodes.iter()
    }

    /// The pod entry, if bound.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<&PodEntry> {
        self.pods.get(&(namespace.to_owned(), name.to_owned()))
    }

    /// Every bound pod, as (namespace, name).
    pub fn pods(&self) -> impl Iterator<Item = &(String, String)> {
        self.pods.keys()
    }

    /// Pods bound to `node`.
    pub fn pods_on(&self, node: &str) -> impl Iterator<Item = &(String, String)> {
        self.pods_by_node.get(node).into_iter().flatten()
    }

    /// Objects `node` needs besides its pods.
    pub fn refs_of(&self, node: &str) -> BTreeSet<Ref> {
        self.pods_on(node).filter_map(|k| self.pods.get(k)).flat_map(|p| p.refs.iter().cloned()).collect()
    }

    /// Nodes that use `r`.
    pub fn users(&self, r: &Ref) -> impl Iterator<Item = &String> {
        self.users.get(r).into_iter().flat_map(|m| m.keys())
    }

    /// Whether `node` uses `r` (NodeRestriction for reads).
    pub fn uses(&self, node: &str, r: &Ref) -> bool {
        self.users.get(r).is_some_and(|m| m.contains_key(node))
    }

    /// Records a pod (bound or not); says which refs nodes gained or lost.
    pub fn set_pod(&mut self, namespace: &str, name: &str, pod: &Value) -> RefChanges {
        let node = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or_default();
        if node.is_empty() {
            // Not bound (yet): a binding the scheduler just wrote stays assumed.
            return self.unbind(namespace, name);
        }
        let entry = entry_of(namespace, node, pod);
        let key = (namespace.to_owned(), name.to_owned());
        self.assumed.remove(&key);
        let old = self.pods.insert(key.clone(), entry.clone());
        let mut changes = RefChanges::default();
        if let Some(old) = &old {
            self.unuse(old, &key, &mut changes);
        }
        self.pods_by_node.entry(entry.node.clone()).or_default().insert(key);
        let sum = self.requested.entry(entry.node.clone()).or_default();
        *sum = *sum + entry.requests;
        for r in &entry.refs {
            let n = self.users.entry(r.clone()).or_default().entry(entry.node.clone()).or_insert(0);
            *n += 1;
            if *n == 1 {
                changes.gained.push((entry.node.clone(), r.clone()));
            }
        }
        // A ref dropped and re-gained in the same change is neither.
        changes.lost.retain(|l| !changes.gained.contains(l));
        let gained_again: Vec<_> = changes
            .gained
            .iter()
            .filter(|g| old.as_ref().is_some_and(|o| o.node == g.0 && o.refs.contains(&g.1)))
            .cloned()
            .collect();
        changes.gained.retain(|g| !gained_again.contains(g));
        changes
    }

    /// Forgets a pod; says which refs its node lost.
    pub fn remove_pod(&mut self, namespace: &str, name: &str) -> RefChanges {
        self.assumed.remove(&(namespace.to_owned(), name.to_owned()));
        self.unbind(namespace, name)
    }

    fn unbind(&mut self, namespace: &str, name: &str) -> RefChanges {
        let key = (namespace.to_owned(), name.to_owned());
        let mut changes = RefChanges::default();
        if let Some(old) = self.pods.remove(&key) {
            self.unuse(&old, &key, &mut changes);
        }
        changes
    }

    fn unuse(&mut self, old: &PodEntry, key: &(String, String), changes: &mut RefChanges) {
        if let Some(set) = self.pods_by_node.get_mut(&old.node) {
            set.remove(key);
            if set.is_empty() {
                self.pods_by_node.remove(&old.node);
                self.requested.remove(&old.node);
            } else if let Some(sum) = self.requested.get_mut(&old.node) {
                *sum = *sum - old.requests;
            }
        }
        for r in &old.refs {
            if let Some(m) = self.users.get_mut(r) {
                if let Some(n) = m.get_mut(&old.node) {
                    *n -= 1;
                    if *n == 0 {
                        m.remove(&old.node);
                        changes.lost.push((old.node.clone(), r.clone()));
                    }
                }
                if m.is_empty() {
                    self.users.remove(r);
                }
            }
        }
    }
}

/// The index's record of a pod bound to `node`.
fn entry_of(namespace: &str, node: &str, pod: &Value) -> PodEntry {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let ended = matches!(pod.pointer("/status/phase").and_then(Value::as_str), Some("Succeeded" | "Failed"));
    PodEntry {
        node: node.to_owned(),
        uid: pod.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_owned(),
        terminating: pod.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null()),
        refs: pod_refs(namespace, pod),
        labels: pod
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .map(|l| l.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())).collect())
            .unwrap_or_default(),
        requests: if ended { Resources::default() } else { scheduling::pod_requests(spec) },
        anti_affinity: scheduling::anti_affinity_terms(spec),
        no_execute_tolerations: spec
            .get("tolerations")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|t| t.get("effect").and_then(Value::as_str).is_none_or(|e| e.is_empty() || e == "NoExecute"))
            .cloned()
            .collect(),
    }
}

/// The configmaps and secrets a pod uses: volumes (also projected), env
/// `valueFrom` and `envFrom` of every container, image pull secrets.
pub fn pod_refs(namespace: &str, pod: &Value) -> BTreeSet<Ref> {
    let mut refs = BTreeSet::new();
    let mut add = |kind: &'static str, name: Option<&Value>| {
        if let Some(name) = name.and_then(Value::as_str).filter(|n| !n.is_empty()) {
            refs.insert(Ref { kind, namespace: namespace.to_owned(), name: name.to_owned() });
        }
    };
    let spec = pod.get("spec");
    let arr = |v: Option<&Value>, k: &str| -> Vec<Value> {
        v.and_then(|v| v.get(k)).and_then(Value::as_array).cloned().unwrap_or_default()
    };
    for vol in arr(spec, "volumes") {
        add("configmap", vol.pointer("/configMap/name"));
        add("secret", vol.pointer("/secret/secretName"));
        for src in arr(vol.get("projected"), "sources") {
            add("configmap", src.pointer("/configMap/name"));
            add("secret", src.pointer("/secret/name"));
        }
    }
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for c in arr(spec, list) {
            for env in arr(Some(&c), "env") {
                add("configmap", env.pointer("/valueFrom/configMapKeyRef/name"));
                add("secret", env.pointer("/valueFrom/secretKeyRef/name"));
            }
            for from in arr(Some(&c), "envFrom") {
                add("configmap", from.pointer("/configMapRef/name"));
                add("secret", from.pointer("/secretRef/name"));
            }
        }
    }
    for s in arr(spec, "imagePullSecrets") {
        add("secret", s.get("name"));
    }
    refs
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn r(kind: &'static str, name: &str) -> Ref {
        Ref { kind, namespace: "default".into(), name: name.into() }
    }

    fn pod(node: &str, cm: &str) -> Value {
        json!({"spec": {"nodeName": node, "volumes": [{"name": "v", "configMap": {"name": cm}}],
            "containers": [{"name": "c", "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
                "envFrom": [{"configMapRef": {"name": "env-cm"}}]}],
            "imagePullSecrets": [{"name": "pull"}]}})
    }

    #[test]
    fn refs_cover_volumes_env_and_pull_secrets() {
        let refs = pod_refs("default", &pod("e1", "cfg"));
        let want: BTreeSet<_> =
            [r("configmap", "cfg"), r("configmap", "env-cm"), r("secret", "s"), r("secret", "pull")].into();
        assert_eq!(refs, want);
        let projected = json!({"spec": {"volumes": [{"projected": {"sources": [{"configMap": {"name": "a"}}, {"secret": {"name": "b"}}]}}]}});
        assert_eq!(pod_refs("default", &projected), [r("configmap", "a"), r("secret", "b")].into());
    }

    #[test]
    fn nodes_gain_and_lose_refs_with_their_pods() {
        let mut ix = Index::default();
        let c = ix.set_pod("default", "p1", &pod("e1", "cfg"));
        assert_eq!(c.gained.len(), 4);
        assert!(ix.uses("e1", &r("configmap", "cfg")));
        assert!(!ix.uses("e2", &r("configmap", "cfg")));
        // A second pod with the same refs gains nothing new.
        let c = ix.set_pod("default", "p2", &pod("e1", "cfg"));
        assert!(c.gained.is_empty() && c.lost.is_empty());
        // Changing p2's configmap: gains the new one, loses nothing (p1 still uses cfg).
        let c = ix.set_pod("default", "p2", &pod("e1", "other"));
        assert_eq!(c.gained, vec![("e1".to_string(), r("configmap", "other"))]);
        assert!(c.lost.is_empty());
        ix.remove_pod("default", "p1");
        let c = ix.remove_pod("default", "p2");
        assert_eq!(c.lost.len(), 4, "{c:?}");
        assert_eq!(ix.pods_on("e1").count(), 0);
        assert!(!ix.uses("e1", &r("secret", "s")));
    }

    #[test]
    fn an_unchanged_pod_update_changes_no_refs() {
        let mut ix = Index::default();
        ix.set_pod("default", "p", &pod("e1", "cfg"));
        let c = ix.set_pod("default", "p", &pod("e1", "cfg"));
        assert_eq!(c, RefChanges::default());
    }

    #[test]
    fn a_node_that_never_reported_is_due_for_marking_only_past_its_grace() {
        let grace = std::time::Duration::from_secs(40);
        let created = edgehive_store::parse_rfc3339("2026-11-29T10:00:00Z").unwrap();
        let mut ix = Index::default();
        ix.set_node(
            "e1",
            &json!({"metadata": {"labels": {EDGE_LABEL: ""}, "creationTimestamp": "2026-11-29T10:00:00Z"}}),
        );
        let live = ix.liveness("e1").unwrap();
        assert_eq!(live.created, Some(created));
        assert!(!live.never_reported_past(created + time::Duration::seconds(40), grace), "within its grace");
        assert!(live.never_reported_past(created + time::Duration::seconds(41), grace));
        // Of unknown creation: looked at (the store's copy decides).
        ix.set_node("e2", &json!({"metadata": {"labels": {EDGE_LABEL: ""}}}));
        assert!(ix.liveness("e2").unwrap().never_reported_past(created, grace));
        // One that reported, or is marked already, is not this case.
        let beat = json!({"metadata": {"labels": {EDGE_LABEL: ""}, "creationTimestamp": "2026-11-29T10:00:00Z"},
            "status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-11-29T10:00:05Z"}]}});
        ix.set_node("e3", &beat);
        assert!(!ix.liveness("e3").unwrap().never_reported_past(created + time::Duration::hours(1), grace));
        let marked = json!({"metadata": {"labels": {EDGE_LABEL: ""}, "creationTimestamp": "2026-11-29T10:00:00Z"},
            "status": {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusNeverUpdated"}]}});
        ix.set_node("e4", &marked);
        assert!(!ix.liveness("e4").unwrap().never_reported_past(created + time::Duration::hours(1), grace));
    }

    #[test]
    fn edge_label_marks_edge_nodes() {
        let mut ix = Index::default();
        assert!(ix.set_node("e1", &json!({"metadata": {"labels": {EDGE_LABEL: ""}}})));
        assert!(!ix.set_node("w1", &json!({"metadata": {"labels": {}}})));
        assert!(ix.is_edge("e1") && !ix.is_edge("w1"));
    }
}
