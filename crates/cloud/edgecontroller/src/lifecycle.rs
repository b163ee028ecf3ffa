//! Node lifecycle: a node is Ready while its heartbeats (node status or
//! Lease renewals) keep coming; after a grace period without one its
//! conditions become Unknown, which `kubectl get nodes` shows as NotReady.
//! A node that never reported (a KubeEdge EdgeCore with edged off, a Node
//! created by hand) gets its conditions Unknown one grace period after its
//! creation, as Kubernetes' node lifecycle controller does.
//! Its pods are NOT evicted — an edge cut off from the cloud keeps running
//! them (edge autonomy) — unless eviction is configured.

use std::time::Duration;

use serde_json::{Value, json};
use time::OffsetDateTime;

/// Settings of the node lifecycle.
#[derive(Debug, Clone)]
pub struct LifecycleConfig {
    /// A node without a heartbeat for this long becomes NotReady
    /// (Kubernetes' node-monitor-grace-period: 40 s).
    pub grace: Duration,
    /// How often nodes are checked.
    pub interval: Duration,
    /// Delete the pods of a node NotReady for this long (`None`: never, the
    /// default: edge autonomy).
    pub evict_after: Option<Duration>,
    /// The heartbeats the cloud writes for nodes whose session proves them
    /// alive ([`crate::heartbeat`]).
    pub heartbeat: crate::heartbeat::HeartbeatConfig,
}

impl Default for LifecycleConfig {
    fn default() -> Self {
        LifecycleConfig {
            grace: Duration::from_secs(40),
            interval: Duration::from_secs(5),
            evict_after: None,
            heartbeat: crate::heartbeat::HeartbeatConfig::default(),
        }
    }
}

fn parse(t: &Value) -> Option<OffsetDateTime> {
    edgehive_store::parse_rfc3339(t.as_str()?)
}

fn ready_condition(node: &Value) -> Option<&Value> {
    node.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == "Ready")
}

/// The node's own heartbeat: its Ready condition's `lastHeartbeatTime`.
pub fn status_heartbeat(node: &Value) -> Option<OffsetDateTime> {
    ready_condition(node).and_then(|c| parse(&c["lastHeartbeatTime"]))
}

/// When the node was created (`metadata.creationTimestamp`).
pub fn created_at(node: &Value) -> Option<OffsetDateTime> {
    node.pointer("/metadata/creationTimestamp").and_then(parse)
}

/// A node Lease's heartbeat: its `renewTime`.
pub fn lease_renewal(lease: &Value) -> Option<OffsetDateTime> {
    lease.pointer("/spec/renewTime").and_then(parse)
}

/// The node with every condition Unknown ("Kubelet stopped posting node
/// status."), or `None` if it has no Ready condition or it is Unknown already.
pub fn mark_unknown(node: &Value, now: &str) -> Option<Value> {
    let ready = ready_condition(node)?;
    if ready["status"] == "Unknown" {
        return None;
    }
    let mut v = node.clone();
    let conds = v.pointer_mut("/status/conditions")?.as_array_mut()?;
    for c in conds.iter_mut() {
        if c["status"] != "Unknown" {
            c["status"] = json!("Unknown");
            c["reason"] = json!("NodeStatusUnknown");
            c["message"] = json!("Kubelet stopped posting node status.");
            c["lastTransitionTime"] = json!(now);
        }
    }
    Some(v)
}

/// The conditions Kubernetes' node lifecycle controller sets Unknown
/// (NetworkUnavailable is the network's to set, not the kubelet's).
const KUBELET_CONDITIONS: [&str; 4] = ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

/// A node that never sent a heartbeat, `grace` after its creation: each of
/// kubelet's conditions it lacks is added Unknown ("NodeStatusNeverUpdated",
/// "Kubelet never posted node status.", heartbeat at its creation), and any
/// it has is set Unknown as by [`mark_unknown`]. `None` while within the
/// grace period, when it has a heartbeat, or when Ready is Unknown already.
pub fn mark_never_updated(node: &Value, now: OffsetDateTime, grace: Duration) -> Option<Value> {
    if status_heartbeat(node).is_some() || ready_status(node) == Some("Unknown") {
        return None;
    }
    let created_at = node.pointer("/metadata/creationTimestamp")?;
    if elapsed(parse(created_at)?, now) <= grace {
        return None;
    }
    let stamp = edgehive_store::rfc3339(now);
    let mut v = node.clone();
    if !v["status"].is_object() {
        v["status"] = json!({});
    }
    if !v["status"]["conditions"].is_array() {
        v["status"]["conditions"] = json!([]);
    }
    let conds = v.pointer_mut("/status/conditions")?.as_array_mut()?;
    for ty in KUBELET_CONDITIONS {
        match conds.iter_mut().find(|c| c["type"] == ty) {
            None => conds.push(json!({
                "type": ty,
                "status": "Unknown",
                "lastHeartbeatTime": created_at,
                "lastTransitionTime": stamp,
                "reason": "NodeStatusNeverUpdated",
                "message": "Kubelet never posted node status.",
            })),
            Some(c) if c["status"] != "Unknown" => {
                c["status"] = json!("Unknown");
                c["reason"] = json!("NodeStatusUnknown");
                c["message"] = json!("Kubelet stopped posting node status.");
                c["lastTransitionTime"] = json!(stamp);
            }
            Some(_) => {}
        }
    }
    Some(v)
}

/// The Ready condition's status (`True`, `False`, `Unknown`).
pub fn ready_status(node: &Value) -> Option<&str> {
    ready_condition(node)?["status"].as_str()
}

/// When the node stopped being Ready (the Ready condition's
/// `lastTransitionTime`); `None` while Ready.
pub fn not_ready_since(node: &Value) -> Option<OffsetDateTime> {
    let ready = ready_condition(node)?;
    if ready["status"] == "True" {
        return None;
    }
    parse(&ready["lastTransitionTime"])
}

/// How long `since` is before `now` (zero if it is not).
pub fn elapsed(since: OffsetDateTime, now: OffsetDateTime) -> Duration {
    (now - since).try_into().unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(status: &str, beat: &str) -> Value {
        json!({"status": {"conditions": [
            {"type": "Ready", "status": status, "lastHeartbeatTime": beat, "lastTransitionTime": beat},
            {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": beat}]}})
    }

    #[test]
    fn heartbeat_is_the_later_of_status_and_lease() {
        let n = node("True", "2026-01-01T00:00:00Z");
        let mut ix = crate::index::Index::default();
        ix.set_node("e1", &n);
        assert_eq!(ix.liveness("e1").unwrap().last_beat(), edgehive_store::parse_rfc3339("2026-01-01T00:00:00Z"));
        let lease = json!({"spec": {"renewTime": "2026-01-01T00:00:30.000000Z"}});
        ix.set_lease("e1", Some(&lease));
        assert_eq!(
            ix.liveness("e1").unwrap().last_beat(),
            edgehive_store::parse_rfc3339("2026-01-01T00:00:30.000000Z")
        );
        assert_eq!(status_heartbeat(&json!({})), None);
        assert_eq!(lease_renewal(&json!({})), None);
    }

    #[test]
    fn a_node_that_never_reported_gets_unknown_conditions_after_the_grace_period() {
        let created = "2026-01-01T00:00:00Z";
        let n = json!({"metadata": {"name": "e1", "creationTimestamp": created}, "status": {}});
        let at = |t: &str| edgehive_store::parse_rfc3339(t).unwrap();
        let grace = Duration::from_secs(40);
        assert!(mark_never_updated(&n, at("2026-01-01T00:00:40Z"), grace).is_none(), "within the grace period");
        let v = mark_never_updated(&n, at("2026-01-01T00:00:41Z"), grace).unwrap();
        let conds = v["status"]["conditions"].as_array().unwrap();
        let types: Vec<&str> = conds.iter().map(|c| c["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"]);
        for c in conds {
            assert_eq!(c["status"], "Unknown");
            assert_eq!(c["reason"], "NodeStatusNeverUpdated");
            assert_eq!(c["message"], "Kubelet never posted node status.");
            assert_eq!(c["lastHeartbeatTime"], created);
        }
        assert_eq!(ready_status(&v), Some("Unknown"));
        assert!(mark_never_updated(&v, at("2026-01-01T00:05:00Z"), grace).is_none(), "once");
        // No status at all, and a condition the edge did set: that one
        // stopped, the rest never came.
        let bare = json!({"metadata": {"creationTimestamp": created}});
        assert!(mark_never_updated(&bare, at("2026-01-01T00:01:00Z"), grace).is_some());
        let partial = json!({"metadata": {"creationTimestamp": created},
            "status": {"conditions": [{"type": "DiskPressure", "status": "False"}]}});
        let v = mark_never_updated(&partial, at("2026-01-01T00:01:00Z"), grace).unwrap();
        let disk = v["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "DiskPressure").unwrap();
        assert_eq!((disk["status"].as_str(), disk["reason"].as_str()), (Some("Unknown"), Some("NodeStatusUnknown")));
        // A node with a heartbeat is the other rule's.
        let beating = node("True", "2026-01-01T00:00:10Z");
        assert!(mark_never_updated(&beating, at("2026-01-01T01:00:00Z"), grace).is_none());
    }

    #[test]
    fn a_silent_node_becomes_unknown_once() {
        let n = node("True", "2026-01-01T00:00:00Z");
        let v = mark_unknown(&n, "2026-01-01T00:01:00Z").unwrap();
        let conds = v["status"]["conditions"].as_array().unwrap();
        assert!(conds.iter().all(|c| c["status"] == "Unknown" && c["reason"] == "NodeStatusUnknown"));
        assert!(mark_unknown(&v, "2026-01-01T00:02:00Z").is_none());
        assert!(mark_unknown(&json!({"status": {}}), "t").is_none());
        let since = not_ready_since(&v).unwrap();
        assert_eq!(
            elapsed(since, edgehive_store::parse_rfc3339("2026-01-01T00:01:30Z").unwrap()),
            Duration::from_secs(30)
        );
        assert_eq!(not_ready_since(&n), None);
        assert_eq!(ready_status(&v), Some("Unknown"));
    }
}
