//! What an edge may write, decided on the object before and after the
//! change: Kubernetes' NodeRestriction admission
//! (`plugin/pkg/admission/noderestriction` in kubernetes/kubernetes), made
//! stricter where an edge could otherwise steer workloads or secrets to
//! itself.
//!
//! - A pod (bound to the node): only `status` may change. Kubernetes' status
//!   endpoint silently keeps the spec and owner references and refuses label
//!   changes; an edge's change to anything outside `status` is refused here,
//!   so that a node can never add a secret volume to its pod (and then read
//!   the secret), move the pod to another node or change what it runs.
//!   `status.resourceClaimStatuses` may not change either, as in Kubernetes.
//! - Its own Node: `status`, annotations (except the cloud's reserved
//!   prefixes) and the labels [`edge_may_set_label`] allows. The spec (taints,
//!   `unschedulable`, ...), owner references and finalizers stay as they are.
//!   At registration the spec is the node's to set, except `configSource`.
//! - Its own Lease, only in `kube-node-lease`.
//!
//! Every function is pure: the controller reads the stored object, applies
//! the edge's change to a copy, asks here, then validates the result as the
//! API server validates a write.

use serde_json::{Map, Value};

/// Where node Leases live.
pub(crate) const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// Metadata the store or the server keeps, never compared.
const SERVER_METADATA: [&str; 2] = ["resourceVersion", "managedFields"];

/// Annotation and label prefixes reserved for the cloud.
const RESERVED_PREFIXES: [&str; 2] = ["node-restriction.kubernetes.io", "edgehive.io"];

/// True when `prefix` is `domain` or a subdomain of it.
fn in_domain(prefix: &str, domain: &str) -> bool {
    prefix == domain || prefix.strip_suffix(domain).is_some_and(|rest| rest.ends_with('.'))
}

fn prefix_of(key: &str) -> &str {
    key.split_once('/').map_or("", |(p, _)| p)
}

fn reserved(key: &str) -> bool {
    let prefix = prefix_of(key);
    RESERVED_PREFIXES.iter().any(|d| in_domain(prefix, d))
}

/// Whether an edge may set (add, change or remove) label `key` with `value`
/// on its own Node: the labels kubelet owns in Kubernetes
/// (`kubernetes.io/hostname`, `kubernetes.io/os`, `kubernetes.io/arch`,
/// `topology.kubernetes.io/*`, `node.kubernetes.io/*`,
/// `kubelet.kubernetes.io/*`, `beta.kubernetes.io/*`,
/// `failure-domain.beta.kubernetes.io/{zone,region}`) and the role labels an
/// edge registers with (`node-role.kubernetes.io/edge` and `/agent`, empty).
/// Nothing else: unlike Kubernetes, an unprefixed label such as `zone=secure`
/// is an admin's to set, because pods select nodes by it.
/// `node-restriction.kubernetes.io/*` and `edgehive.io/*` never.
///
/// ```
/// use edgehive_edgecontroller::restriction::edge_may_set_label;
/// assert!(edge_may_set_label("topology.kubernetes.io/zone", "a"));
/// assert!(edge_may_set_label("node-role.kubernetes.io/edge", ""));
/// assert!(!edge_may_set_label("zone", "secure"));
/// assert!(!edge_may_set_label("node-restriction.kubernetes.io/secure", "true"));
/// ```
pub fn edge_may_set_label(key: &str, value: &str) -> bool {
    if reserved(key) {
        return false;
    }
    match key {
        "kubernetes.io/hostname"
        | "kubernetes.io/os"
        | "kubernetes.io/arch"
        | "failure-domain.beta.kubernetes.io/zone"
        | "failure-domain.beta.kubernetes.io/region" => true,
        "node-role.kubernetes.io/edge" | "node-role.kubernetes.io/agent" => value.is_empty(),
        _ => {
            let prefix = prefix_of(key);
            prefix == "beta.kubernetes.io"
                || ["topology.kubernetes.io", "node.kubernetes.io", "kubelet.kubernetes.io"]
                    .iter()
                    .any(|d| in_domain(prefix, d))
        }
    }
}

/// The paths (`spec.nodeName`, `metadata.labels`) at which `old` and `new`
/// differ, down to `depth` levels of objects; lists and values compare whole.
fn changed_paths(old: &Value, new: &Value, depth: usize) -> Vec<String> {
    let mut out = Vec::new();
    diff(old, new, "", depth, &mut out);
    out
}

fn diff(old: &Value, new: &Value, path: &str, depth: usize, out: &mut Vec<String>) {
    if old == new {
        return;
    }
    match (old, new) {
        (Value::Object(a), Value::Object(b)) if depth > 0 => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))).collect();
            keys.sort();
            for k in keys {
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                diff(a.get(k).unwrap_or(&Value::Null), b.get(k).unwrap_or(&Value::Null), &p, depth - 1, out);
            }
        }
        _ => out.push(if path.is_empty() { "(the whole object)".to_owned() } else { path.to_owned() }),
    }
}

/// `v` without `status` and without the metadata the server keeps, for
/// comparing what else changed.
fn without_status(v: &Value) -> Value {
    without(v, &[])
}

/// A copy of `v` without its status, the metadata the server sets, and the
/// metadata fields `also`. The status (a Node's is most of it) is never
/// copied: each status report of every edge passes here.
fn without(v: &Value, also: &[&str]) -> Value {
    let Some(o) = v.as_object() else { return v.clone() };
    let kept = o.iter().filter(|(k, _)| *k != "status").map(|(k, field)| {
        let field = match (k.as_str(), field) {
            ("metadata", Value::Object(meta)) => Value::Object(
                meta.iter()
                    .filter(|(m, _)| !SERVER_METADATA.contains(&m.as_str()) && !also.contains(&m.as_str()))
                    .map(|(m, x)| (m.clone(), x.clone()))
                    .collect(),
            ),
            _ => field.clone(),
        };
        (k.clone(), field)
    });
    Value::Object(kept.collect())
}

fn string_map(v: &Value, pointer: &str) -> Map<String, Value> {
    v.pointer(pointer).and_then(Value::as_object).cloned().unwrap_or_default()
}

/// The keys whose values differ between two string maps.
fn modified_keys(old: &Map<String, Value>, new: &Map<String, Value>) -> Vec<(String, String)> {
    let mut keys: Vec<(String, String)> = Vec::new();
    for (k, v) in new {
        if old.get(k) != Some(v) {
            keys.push((k.clone(), v.as_str().unwrap_or_default().to_owned()));
        }
    }
    for k in old.keys() {
        if !new.contains_key(k) {
            keys.push((k.clone(), String::new()));
        }
    }
    keys.sort();
    keys
}

/// A change by node `node` of its own pod, from `old` to `new`: only the
/// status may change.
pub(crate) fn pod_status_update(node: &str, old: &Value, new: &Value) -> Result<(), String> {
    let changed = changed_paths(&without_status(old), &without_status(new), 2);
    if !changed.is_empty() {
        return Err(format!(
            "node {node:?} may change only the status of its pods; the request changes {}",
            changed.join(", ")
        ));
    }
    let claims = "/status/resourceClaimStatuses";
    if old.pointer(claims) != new.pointer(claims) {
        return Err(format!("node {node:?} cannot update resource claim statuses"));
    }
    Ok(())
}

/// The labels among `changes` that an edge may not set.
fn forbidden_labels(changes: &[(String, String)]) -> Vec<String> {
    changes.iter().filter(|(k, v)| !edge_may_set_label(k, v)).map(|(k, _)| k.clone()).collect()
}

fn forbidden_annotations(changes: &[(String, String)]) -> Vec<String> {
    changes.iter().filter(|(k, _)| reserved(k)).map(|(k, _)| k.clone()).collect()
}

/// A new Node registered by the edge `node`.
pub(crate) fn node_create(node: &str, new: &Value) -> Result<(), String> {
    if new.pointer("/spec/configSource").is_some_and(|c| !c.is_null()) {
        return Err(format!("node {node:?} is not allowed to create its Node with a non-nil configSource"));
    }
    let labels = modified_keys(&Map::new(), &string_map(new, "/metadata/labels"));
    let bad = forbidden_labels(&labels);
    if !bad.is_empty() {
        return Err(format!(
            "node {node:?} is not allowed to set the following labels: {} (an admin sets them with kubectl label)",
            bad.join(", ")
        ));
    }
    let bad = forbidden_annotations(&modified_keys(&Map::new(), &string_map(new, "/metadata/annotations")));
    if !bad.is_empty() {
        return Err(format!("node {node:?} is not allowed to set the following annotations: {}", bad.join(", ")));
    }
    for field in ["ownerReferences", "finalizers"] {
        if new.pointer(&format!("/metadata/{field}")).is_some_and(|v| v.as_array().is_some_and(|a| !a.is_empty())) {
            return Err(format!("node {node:?} is not allowed to set metadata.{field} on its Node"));
        }
    }
    Ok(())
}

/// A change by the edge `node` of its own Node, from `old` to `new`.
pub(crate) fn node_update(node: &str, old: &Value, new: &Value) -> Result<(), String> {
    let bad =
        forbidden_labels(&modified_keys(&string_map(old, "/metadata/labels"), &string_map(new, "/metadata/labels")));
    if !bad.is_empty() {
        return Err(format!("node {node:?} is not allowed to modify labels: {}", bad.join(", ")));
    }
    let bad = forbidden_annotations(&modified_keys(
        &string_map(old, "/metadata/annotations"),
        &string_map(new, "/metadata/annotations"),
    ));
    if !bad.is_empty() {
        return Err(format!("node {node:?} is not allowed to modify annotations: {}", bad.join(", ")));
    }
    if old.pointer("/spec/taints") != new.pointer("/spec/taints") {
        return Err(format!("node {node:?} is not allowed to modify taints"));
    }
    // Everything but status, labels and annotations stays as it is.
    let rest = |v: &Value| without(v, &["labels", "annotations"]);
    let changed = changed_paths(&rest(old), &rest(new), 2);
    if !changed.is_empty() {
        return Err(format!(
            "node {node:?} may change only the status, kubelet labels and annotations of its Node; the request changes {}",
            changed.join(", ")
        ));
    }
    Ok(())
}

/// A Lease written by the edge `node` at `namespace/name`.
pub(crate) fn lease(node: &str, namespace: &str, name: &str) -> Result<(), String> {
    if namespace != NODE_LEASE_NAMESPACE {
        return Err(format!("node {node:?} can only access leases in the {NODE_LEASE_NAMESPACE:?} system namespace"));
    }
    if name != node {
        return Err(format!("node {node:?} can only access the node lease with the same name as the node"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A named change to an object.
    type Change = (&'static str, Box<dyn Fn(&mut Value)>);

    fn pod() -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "uid": "u1", "resourceVersion": "7", "labels": {"app": "a"}},
            "spec": {"nodeName": "edge-1", "containers": [{"name": "c", "image": "i", "command": ["sleep", "1"]}]},
            "status": {"phase": "Pending"}})
    }

    #[test]
    fn a_pod_status_change_is_allowed() {
        let mut new = pod();
        new["status"] = json!({"phase": "Running", "podIP": "10.0.0.2"});
        new["metadata"]["resourceVersion"] = json!("8");
        assert_eq!(pod_status_update("edge-1", &pod(), &new), Ok(()));
    }

    #[test]
    fn every_change_outside_status_is_refused_and_named() {
        let cases: Vec<Change> = vec![
            (
                "spec.volumes",
                Box::new(|p| p["spec"]["volumes"] = json!([{"name": "s", "secret": {"secretName": "x"}}])),
            ),
            ("spec.nodeName", Box::new(|p| p["spec"]["nodeName"] = json!("edge-2"))),
            ("spec.containers", Box::new(|p| p["spec"]["containers"][0]["command"] = json!(["sh", "-c", "evil"]))),
            ("metadata.labels", Box::new(|p| p["metadata"]["labels"]["app"] = json!("b"))),
            ("metadata.annotations", Box::new(|p| p["metadata"]["annotations"] = json!({"a": "b"}))),
            ("metadata.ownerReferences", Box::new(|p| p["metadata"]["ownerReferences"] = json!([]))),
            ("metadata.finalizers", Box::new(|p| p["metadata"]["finalizers"] = json!(["x"]))),
            (
                "metadata.deletionTimestamp",
                Box::new(|p| p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z")),
            ),
            ("metadata.uid", Box::new(|p| p["metadata"]["uid"] = json!("u2"))),
            ("kind", Box::new(|p| p["kind"] = json!("Secret"))),
        ];
        for (field, change) in cases {
            let mut new = pod();
            change(&mut new);
            new["status"]["phase"] = json!("Running");
            let err = pod_status_update("edge-1", &pod(), &new).unwrap_err();
            assert!(err.contains(field) && err.contains("only the status"), "{field}: {err}");
        }
        let mut new = pod();
        new["status"]["resourceClaimStatuses"] = json!([{"name": "x"}]);
        assert!(pod_status_update("edge-1", &pod(), &new).unwrap_err().contains("resource claim"));
    }

    #[test]
    fn kubelet_labels_only() {
        for (k, v) in [
            ("kubernetes.io/hostname", "h"),
            ("kubernetes.io/arch", "arm64"),
            ("topology.kubernetes.io/zone", "z"),
            ("topology.kubernetes.io/region", "r"),
            ("node.kubernetes.io/instance-type", "t"),
            ("x.node.kubernetes.io/thing", "t"),
            ("kubelet.kubernetes.io/anything", "t"),
            ("beta.kubernetes.io/os", "linux"),
            ("failure-domain.beta.kubernetes.io/zone", "z"),
            ("node-role.kubernetes.io/edge", ""),
            ("node-role.kubernetes.io/agent", ""),
        ] {
            assert!(edge_may_set_label(k, v), "{k}");
        }
        for (k, v) in [
            ("zone", "secure"),
            ("example.com/gpu", "yes"),
            ("node-role.kubernetes.io/control-plane", ""),
            ("node-role.kubernetes.io/edge", "x"),
            ("node-restriction.kubernetes.io/secure", "true"),
            ("a.node-restriction.kubernetes.io/secure", "true"),
            ("edgehive.io/trusted", "true"),
            ("kubernetes.io/role", "master"),
            ("k8s.io/x", "y"),
            ("notnode.kubernetes.io/x", "y"),
        ] {
            assert!(!edge_may_set_label(k, v), "{k}");
        }
    }

    fn node() -> Value {
        json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "edge-1", "uid": "n1", "labels": {"node-role.kubernetes.io/edge": "", "zone": "plain"},
                "annotations": {"x": "y"}},
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}], "unschedulable": true},
            "status": {"conditions": []}})
    }

    #[test]
    fn node_updates() {
        let old = node();
        let mut ok = old.clone();
        ok["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
        ok["metadata"]["labels"]["kubernetes.io/hostname"] = json!("edge-1");
        ok["metadata"]["annotations"]["kubeedge.io/x"] = json!("1");
        assert_eq!(node_update("edge-1", &old, &ok), Ok(()));

        let refused: Vec<Change> = vec![
            ("labels: zone", Box::new(|n| n["metadata"]["labels"]["zone"] = json!("secure"))),
            ("labels: zone", Box::new(|n| n["metadata"]["labels"].as_object_mut().unwrap().clear())),
            ("annotations: edgehive.io/x", Box::new(|n| n["metadata"]["annotations"]["edgehive.io/x"] = json!("1"))),
            ("taints", Box::new(|n| n["spec"]["taints"] = json!([]))),
            ("spec.unschedulable", Box::new(|n| n["spec"]["unschedulable"] = json!(false))),
            ("metadata.ownerReferences", Box::new(|n| n["metadata"]["ownerReferences"] = json!([{"kind": "X"}]))),
        ];
        for (what, change) in refused {
            let mut new = old.clone();
            change(&mut new);
            let err = node_update("edge-1", &old, &new).unwrap_err();
            assert!(err.contains(what), "{what}: {err}");
        }
    }

    #[test]
    fn node_registration() {
        let new = json!({"metadata": {"name": "edge-1", "labels": {"node-role.kubernetes.io/edge": "", "kubernetes.io/os": "linux"}},
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}});
        assert_eq!(node_create("edge-1", &new), Ok(()));
        let mut bad = new.clone();
        bad["metadata"]["labels"]["zone"] = json!("secure");
        assert!(node_create("edge-1", &bad).unwrap_err().contains("following labels: zone"));
        let mut bad = new.clone();
        bad["spec"]["configSource"] = json!({"configMap": {}});
        assert!(node_create("edge-1", &bad).unwrap_err().contains("configSource"));
        let mut bad = new;
        bad["metadata"]["finalizers"] = json!(["x"]);
        assert!(node_create("edge-1", &bad).unwrap_err().contains("finalizers"));
    }

    #[test]
    fn leases_only_in_kube_node_lease() {
        assert_eq!(lease("edge-1", "kube-node-lease", "edge-1"), Ok(()));
        assert!(lease("edge-1", "default", "edge-1").unwrap_err().contains("kube-node-lease"));
        assert!(lease("edge-1", "kube-node-lease", "edge-2").is_err());
    }

    #[test]
    fn diff_names_nested_fields_and_whole_lists() {
        let a = json!({"spec": {"x": {"y": 1}, "l": [1]}});
        let b = json!({"spec": {"x": {"y": 2}, "l": [1, 2]}, "z": 1});
        assert_eq!(changed_paths(&a, &b, 2), vec!["spec.l", "spec.x", "z"]);
        assert_eq!(changed_paths(&a, &b, 3), vec!["spec.l", "spec.x.y", "z"]);
        assert_eq!(changed_paths(&json!(1), &json!(2), 2), vec!["(the whole object)"]);
    }
}
