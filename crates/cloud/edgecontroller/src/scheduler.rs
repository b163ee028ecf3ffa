//! The scheduler for edge pods: a pod without `spec.nodeName` is bound to
//! the best edge node that passes Kubernetes' filters, in Kubernetes'
//! order (NodeUnschedulable, TaintToleration, NodeAffinity,
//! NodeResourcesFit, InterPodAffinity; and, for edge nodes, Ready), or left
//! Pending with `PodScheduled=False` and Kubernetes' message counting why
//! each node refused (`0/3 nodes are available: 1 Insufficient cpu, 2
//! node(s) didn't match Pod's node affinity/selector.`).
//!
//! Among the nodes that fit, the best has the highest preferred node
//! affinity weight, then the fewest untolerated `PreferNoSchedule` taints,
//! then the fewest pods (then the name, so the choice is stable).

use std::collections::BTreeMap;

use edgehive_registry::scheduling::{
    NodeInfo, Placed, Resources, anti_affinity_conflict, pod_requests, preferred_affinity_score, selects_node,
    untolerated,
};
use serde_json::{Value, json};

use crate::index::{EDGE_LABEL, Index};

/// The taint a cordoned node carries (tolerating it lets a pod past `unschedulable`).
pub const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// Where a pod goes, or why nowhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// Bind to this node.
    Node(String),
    /// No node fits; the message for the condition.
    Unschedulable(String),
}

/// Whether the scheduler should place this pod.
pub fn wants_scheduling(pod: &Value) -> bool {
    let unbound = pod.pointer("/spec/nodeName").and_then(Value::as_str).is_none_or(str::is_empty);
    let alive = pod.pointer("/metadata/deletionTimestamp").is_none_or(Value::is_null);
    let ours = pod
        .pointer("/spec/schedulerName")
        .and_then(Value::as_str)
        .is_none_or(|s| s.is_empty() || s == "default-scheduler");
    unbound && alive && ours
}

/// The pod being placed.
struct Candidate<'a> {
    namespace: &'a str,
    labels: BTreeMap<String, String>,
    spec: &'a Value,
    requests: Resources,
}

/// Why `node` cannot take the pod (the first filter that refuses, as
/// Kubernetes stops at it; resources may name several), or its score.
fn fit(index: &Index, node: &NodeInfo, pod: &Candidate<'_>) -> Result<(i64, i64, i64), Vec<String>> {
    let tolerates_cordon = pod.spec.get("tolerations").and_then(Value::as_array).into_iter().flatten().any(|t| {
        edgehive_registry::scheduling::tolerates(
            t,
            &edgehive_registry::scheduling::Taint {
                key: UNSCHEDULABLE_TAINT.into(),
                value: String::new(),
                effect: "NoSchedule".into(),
            },
        )
    });
    if node.unschedulable && !tolerates_cordon {
        return Err(vec!["node(s) were unschedulable".into()]);
    }
    if !node.ready {
        return Err(vec!["node(s) were not ready".into()]);
    }
    if let Some(t) = untolerated(pod.spec, node, &["NoSchedule", "NoExecute"]).first() {
        return Err(vec![format!("node(s) had untolerated taint {{{}: {}}}", t.key, t.value)]);
    }
    if !selects_node(pod.spec, node) {
        return Err(vec!["node(s) didn't match Pod's node affinity/selector".into()]);
    }
    let used = index.requested(&node.name);
    if let Some(alloc) = node.allocatable {
        let mut short = Vec::new();
        if used.pods + 1 > alloc.pods {
            short.push("Too many pods".to_string());
        }
        if pod.requests.cpu > 0 && used.cpu + pod.requests.cpu > alloc.cpu {
            short.push("Insufficient cpu".to_string());
        }
        if pod.requests.memory > 0 && used.memory + pod.requests.memory > alloc.memory {
            short.push("Insufficient memory".to_string());
        }
        if !short.is_empty() {
            return Err(short);
        }
    }
    let placed: Vec<Placed<'_>> = index
        .placed_on(&node.name)
        .filter(|(_, p)| p.requests.pods > 0)
        .map(|((ns, _), p)| Placed { namespace: ns, labels: &p.labels, anti_affinity: &p.anti_affinity })
        .collect();
    if let Some(why) = anti_affinity_conflict(pod.namespace, &pod.labels, pod.spec, &placed) {
        return Err(vec![why.to_string()]);
    }
    let soft_taints = i64::try_from(untolerated(pod.spec, node, &["PreferNoSchedule"]).len()).unwrap_or(i64::MAX);
    Ok((preferred_affinity_score(pod.spec, node), -soft_taints, -used.pods))
}

/// Picks a node among the edge nodes (see the module's documentation).
pub fn place(index: &Index, pod: &Value) -> Placement {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let candidate = Candidate {
        namespace: pod.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default"),
        labels: pod
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())).collect())
            .unwrap_or_default(),
        spec,
        requests: pod_requests(spec),
    };
    let mut total = 0;
    let mut refusals: BTreeMap<String, usize> = BTreeMap::new();
    let mut best: Option<((i64, i64, i64), &String)> = None;
    let mut nodes: Vec<&String> = index.edge_nodes().collect();
    nodes.sort();
    for name in nodes {
        let Some(info) = index.node_info(name) else { continue };
        total += 1;
        match fit(index, info, &candidate) {
            Ok(score) => {
                if best.as_ref().is_none_or(|(b, _)| score > *b) {
                    best = Some((score, name));
                }
            }
            Err(reasons) => {
                for r in reasons {
                    *refusals.entry(r).or_default() += 1;
                }
            }
        }
    }
    if let Some((_, name)) = best {
        return Placement::Node(name.clone());
    }
    let mut reasons: Vec<String> = refusals.into_iter().map(|(r, n)| format!("{n} {r}")).collect();
    reasons.sort();
    if total == 0 {
        reasons.push(format!("no node is labelled {EDGE_LABEL}"));
    }
    Placement::Unschedulable(format!("0/{total} nodes are available: {}.", reasons.join(", ")))
}

/// The pod bound to `node`, with `PodScheduled=True`.
pub fn bind(pod: &Value, node: &str, now: &str) -> Value {
    let mut v = pod.clone();
    v["spec"]["nodeName"] = json!(node);
    set_condition(
        &mut v,
        json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now}),
    );
    v
}

/// The pod left Pending with `PodScheduled=False`, reason Unschedulable;
/// `None` when it already says exactly that.
pub fn mark_unschedulable(pod: &Value, message: &str, now: &str) -> Option<Value> {
    let current = conditions(pod).into_iter().find(|c| c["type"] == "PodScheduled");
    if current.as_ref().is_some_and(|c| c["status"] == "False" && c["message"] == message) {
        return None;
    }
    let mut v = pod.clone();
    if v.pointer("/status/phase").is_none_or(Value::is_null) {
        v["status"]["phase"] = json!("Pending");
    }
    set_condition(
        &mut v,
        json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
            "lastProbeTime": null, "lastTransitionTime": now}),
    );
    Some(v)
}

fn conditions(pod: &Value) -> Vec<Value> {
    pod.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default()
}

fn set_condition(pod: &mut Value, cond: Value) {
    let mut list: Vec<Value> = conditions(pod).into_iter().filter(|c| c["type"] != cond["type"]).collect();
    list.push(cond);
    if !pod.get("status").is_some_and(Value::is_object) {
        pod["status"] = json!({});
    }
    pod["status"]["conditions"] = Value::Array(list);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(ix: &mut Index, name: &str, ready: bool, zone: &str) {
        let status = if ready { "True" } else { "False" };
        ix.set_node(
            name,
            &json!({"metadata": {"labels": {EDGE_LABEL: "", "zone": zone}}, "status": {"conditions": [{"type": "Ready", "status": status}]}}),
        );
    }

    fn full_node(ix: &mut Index, name: &str, spec: Value, allocatable: Value) {
        ix.set_node(
            name,
            &json!({"metadata": {"labels": {EDGE_LABEL: "", "kubernetes.io/hostname": name}}, "spec": spec,
                "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": allocatable}}),
        );
    }

    fn why(ix: &Index, pod: &Value) -> String {
        match place(ix, pod) {
            Placement::Unschedulable(why) => why,
            Placement::Node(n) => panic!("placed on {n}"),
        }
    }

    #[test]
    fn every_filter_refuses_with_kubernetes_words_counted_per_node() {
        let mut ix = Index::default();
        let alloc = json!({"cpu": "1", "memory": "1Gi", "pods": "110"});
        full_node(&mut ix, "cordoned", json!({"unschedulable": true}), alloc.clone());
        full_node(
            &mut ix,
            "tainted",
            json!({"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}),
            alloc.clone(),
        );
        full_node(&mut ix, "small", json!({}), json!({"cpu": "500m", "memory": "64Mi", "pods": "110"}));
        full_node(&mut ix, "full", json!({}), json!({"cpu": "4", "memory": "4Gi", "pods": "1"}));
        ix.set_pod("default", "resident", &json!({"spec": {"nodeName": "full"}}));
        let pod = json!({"metadata": {"namespace": "default"}, "spec": {"containers": [{"resources": {"requests": {"cpu": "750m", "memory": "128Mi"}}}]}});
        assert_eq!(
            why(&ix, &pod),
            "0/4 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 1 Too many pods, \
             1 node(s) had untolerated taint {dedicated: gpu}, 1 node(s) were unschedulable."
        );
        // Tolerating the taint and the cordon opens those two nodes.
        let mut tolerant = pod.clone();
        tolerant["spec"]["tolerations"] = json!([{"key": "dedicated", "operator": "Exists"}]);
        assert_eq!(place(&ix, &tolerant), Placement::Node("tainted".into()));
        tolerant["spec"]["tolerations"] = json!([{"key": UNSCHEDULABLE_TAINT, "operator": "Exists"}]);
        assert_eq!(place(&ix, &tolerant), Placement::Node("cordoned".into()));
        // Requests add up: a second pod does not fit where the first went.
        ix.set_pod(
            "default",
            "a",
            &json!({"spec": {"nodeName": "tainted", "containers": [{"resources": {"requests": {"cpu": "750m"}}}]}}),
        );
        let mut tolerant = pod.clone();
        tolerant["spec"]["tolerations"] = json!([{"key": "dedicated", "operator": "Exists"}]);
        assert!(why(&ix, &tolerant).contains("2 Insufficient cpu"), "{}", why(&ix, &tolerant));
        // A pod that ended holds nothing.
        ix.set_pod(
            "default",
            "a",
            &json!({"spec": {"nodeName": "tainted", "containers": [{"resources": {"requests": {"cpu": "750m"}}}]},
            "status": {"phase": "Succeeded"}}),
        );
        assert_eq!(place(&ix, &tolerant), Placement::Node("tainted".into()));
    }

    #[test]
    fn preferred_affinity_and_soft_taints_rank_anti_affinity_spreads() {
        let mut ix = Index::default();
        let alloc = json!({"cpu": "4", "memory": "4Gi", "pods": "110"});
        full_node(&mut ix, "a", json!({"taints": [{"key": "soft", "effect": "PreferNoSchedule"}]}), alloc.clone());
        full_node(&mut ix, "b", json!({}), alloc.clone());
        full_node(&mut ix, "c", json!({}), alloc);
        ix.set_pod("default", "x", &json!({"spec": {"nodeName": "b"}}));
        let plain = json!({"spec": {}});
        assert_eq!(place(&ix, &plain), Placement::Node("c".into()), "fewest pods, no soft taint");
        let prefer_a = json!({"spec": {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}}]}}}});
        assert_eq!(place(&ix, &prefer_a), Placement::Node("a".into()));
        // Three replicas that refuse each other's hosts: one per node, then no room.
        let web = |i: usize| {
            json!({"metadata": {"namespace": "default", "name": format!("web-{i}"), "labels": {"app": "web"}},
                "spec": {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}}})
        };
        let mut placed = Vec::new();
        for i in 0..3 {
            let Placement::Node(n) = place(&ix, &web(i)) else { panic!("web-{i} not placed") };
            let mut bound = web(i);
            bound["spec"]["nodeName"] = json!(n);
            // Bound but not yet seen through the watch: still counted.
            ix.assume("default", &format!("web-{i}"), &bound);
            placed.push(n);
        }
        placed.sort();
        assert_eq!(placed, ["a", "b", "c"]);
        assert_eq!(why(&ix, &web(3)), "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules.");
        // The watch brings web-0 unbound first (the create), then bound: still counted.
        ix.set_pod("default", "web-0", &web(0));
        assert!(matches!(place(&ix, &web(3)), Placement::Unschedulable(_)));
    }

    #[test]
    fn fewest_pods_among_ready_matching_nodes() {
        let mut ix = Index::default();
        node(&mut ix, "a", true, "x");
        node(&mut ix, "b", true, "x");
        node(&mut ix, "c", false, "x");
        node(&mut ix, "d", true, "y");
        ix.set_pod("default", "p0", &json!({"spec": {"nodeName": "a"}}));
        let pod = json!({"spec": {"nodeSelector": {"zone": "x"}}});
        assert_eq!(place(&ix, &pod), Placement::Node("b".into()));
        ix.set_pod("default", "p1", &json!({"spec": {"nodeName": "b"}}));
        assert_eq!(place(&ix, &pod), Placement::Node("a".into()), "ties go by name");
    }

    #[test]
    fn unschedulable_says_why() {
        let mut ix = Index::default();
        node(&mut ix, "a", false, "x");
        node(&mut ix, "b", true, "y");
        let pod = json!({"spec": {"nodeSelector": {"zone": "x"}}});
        let Placement::Unschedulable(why) = place(&ix, &pod) else { panic!("placed") };
        assert_eq!(
            why,
            "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) were not ready."
        );
        let v = mark_unschedulable(&json!({"spec": {}}), &why, "t").unwrap();
        assert_eq!(v["status"]["phase"], "Pending");
        assert_eq!(v["status"]["conditions"][0]["reason"], "Unschedulable");
        assert!(mark_unschedulable(&v, &why, "t2").is_none(), "no rewrite when nothing changed");
        let Placement::Unschedulable(none) = place(&Index::default(), &pod) else { panic!("placed") };
        assert!(none.contains("no node is labelled"), "{none}");
    }

    #[test]
    fn only_unbound_live_default_pods_are_scheduled() {
        assert!(wants_scheduling(&json!({"spec": {}})));
        assert!(!wants_scheduling(&json!({"spec": {"nodeName": "a"}})));
        assert!(!wants_scheduling(&json!({"spec": {}, "metadata": {"deletionTimestamp": "t"}})));
        assert!(!wants_scheduling(&json!({"spec": {"schedulerName": "other"}})));
        let bound = bind(&json!({"spec": {}}), "a", "t");
        assert_eq!(bound["spec"]["nodeName"], "a");
        assert_eq!(bound["status"]["conditions"][0]["status"], "True");
    }
}
