//! Node lifecycle: a node is Ready while its heartbeats (node status or
//! Lease renewals) keep coming; after a grace period without one its
//! conditions become Unknown, which `kubectl get nodes` shows as NotReady.
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
}

impl Default for LifecycleConfig {
    fn default() -> Self {
        LifecycleConfig { grace: Duration::from_secs(40), interval: Duration::from_secs(5), evict_after: None }
    }
}

fn parse(t: &Value) -> Option<OffsetDateTime> {
    edgehive_store::parse_rfc3339(t.as_str()?)
}

fn ready_condition(node: &Value) -> Option<&Value> {
    node.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == "Ready")
}

/// The latest heartbeat: the Ready condition's `lastHeartbeatTime`, or the
/// Lease's `renewTime` if later.
pub fn last_heartbeat(node: &Value, lease: Option<&Value>) -> Option<OffsetDateTime> {
    let status = ready_condition(node).and_then(|c| parse(&c["lastHeartbeatTime"]));
    let renew = lease.and_then(|l| l.pointer("/spec/renewTime")).and_then(parse);
    status.max(renew)
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

/// How long the node has been not Ready (from the Ready condition's
/// `lastTransitionTime`); `None` while Ready.
pub fn not_ready_for(node: &Value, now: OffsetDateTime) -> Option<Duration> {
    let ready = ready_condition(node)?;
    if ready["status"] == "True" {
        return None;
    }
    let since = parse(&ready["lastTransitionTime"])?;
    Some((now - since).try_into().unwrap_or(Duration::ZERO))
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
        assert_eq!(last_heartbeat(&n, None), edgehive_store::parse_rfc3339("2026-01-01T00:00:00Z"));
        let lease = json!({"spec": {"renewTime": "2026-01-01T00:00:30.000000Z"}});
        assert_eq!(last_heartbeat(&n, Some(&lease)), edgehive_store::parse_rfc3339("2026-01-01T00:00:30.000000Z"));
        assert_eq!(last_heartbeat(&json!({}), None), None);
    }

    #[test]
    fn a_silent_node_becomes_unknown_once() {
        let n = node("True", "2026-01-01T00:00:00Z");
        let v = mark_unknown(&n, "2026-01-01T00:01:00Z").unwrap();
        let conds = v["status"]["conditions"].as_array().unwrap();
        assert!(conds.iter().all(|c| c["status"] == "Unknown" && c["reason"] == "NodeStatusUnknown"));
        assert!(mark_unknown(&v, "2026-01-01T00:02:00Z").is_none());
        assert!(mark_unknown(&json!({"status": {}}), "t").is_none());
        let since = not_ready_for(&v, edgehive_store::parse_rfc3339("2026-01-01T00:01:30Z").unwrap()).unwrap();
        assert_eq!(since, Duration::from_secs(30));
        assert_eq!(not_ready_for(&n, OffsetDateTime::now_utc()), None);
    }
}
