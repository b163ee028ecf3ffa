//! A simple scheduler for edge pods: a pod without `spec.nodeName` whose
//! `nodeSelector` matches Ready, schedulable edge nodes is bound to the one
//! with the fewest pods; otherwise it stays Pending with a `PodScheduled`
//! condition that says why.

use serde_json::{Value, json};

use crate::index::{EDGE_LABEL, Index};

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

/// Picks a node: edge, Ready, schedulable, labels matching the selector;
/// among those the one with the fewest pods (then by name, so the choice is
/// stable).
pub fn place(index: &Index, pod: &Value) -> Placement {
    let selector: Vec<(String, String)> = pod
        .pointer("/spec/nodeSelector")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())).collect())
        .unwrap_or_default();
    let (mut total, mut not_ready, mut mismatch, mut cordoned) = (0, 0, 0, 0);
    let mut best: Option<(usize, &String)> = None;
    let mut nodes: Vec<&String> = index.edge_nodes().collect();
    nodes.sort();
    for name in nodes {
        let Some(info) = index.node_info(name) else { continue };
        total += 1;
        if !selector.iter().all(|(k, v)| info.labels.get(k) == Some(v)) {
            mismatch += 1;
            continue;
        }
        if !info.ready {
            not_ready += 1;
            continue;
        }
        if info.unschedulable {
            cordoned += 1;
            continue;
        }
        let count = index.pod_count(name);
        if best.is_none_or(|(c, _)| count < c) {
            best = Some((count, name));
        }
    }
    if let Some((_, name)) = best {
        return Placement::Node(name.clone());
    }
    let mut reasons = Vec::new();
    if mismatch > 0 {
        reasons.push(format!("{mismatch} node(s) didn't match Pod's node affinity/selector"));
    }
    if not_ready > 0 {
        reasons.push(format!("{not_ready} node(s) were not ready"));
    }
    if cordoned > 0 {
        reasons.push(format!("{cordoned} node(s) were unschedulable"));
    }
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
