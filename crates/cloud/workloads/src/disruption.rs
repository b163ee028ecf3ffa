//! The disruption controller: each PodDisruptionBudget's status — how many
//! of its pods are healthy, how many must be, and so how many may be evicted
//! now — which the API server's `eviction` subresource reads and charges
//! (Kubernetes' `pkg/controller/disruption`).
//!
//! - `minAvailable` as a count: the pods the selector matches are expected;
//!   that many must be healthy.
//! - `maxUnavailable`, or `minAvailable` as a percentage: the expected count
//!   is the scale of the pods' controllers (a ReplicaSet's replicas, or its
//!   Deployment's; a StatefulSet's), and percentages round up.
//! - Healthy: Ready and not being deleted, and not recorded as evicted in
//!   `disruptedPods` (an eviction the pod has not yet shown; forgotten after
//!   two minutes, as Kubernetes forgets it).
//!
//! A pod on an offline edge node that still reports Ready counts as healthy
//! until its node's status says otherwise, as it would in Kubernetes.

use std::collections::BTreeMap;
use std::time::Duration;

use edgehive_store::resources::POD_DISRUPTION_BUDGETS;
use edgehive_store::selector::LabelSelector;
use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use crate::deployment::scaled;
use crate::plan::{Action, Plan, merge_diff};
use crate::world::{PodInfo, World, int_at, str_at};

/// How long an eviction recorded in `disruptedPods` waits for its pod to go.
pub const DELETION_TIMEOUT: Duration = Duration::from_secs(120);

/// The scale of the controllers of `pods`: each distinct controller once.
fn expected_scale(world: &World, ns: &str, pods: &[&PodInfo]) -> Result<i64, String> {
    let mut seen: BTreeMap<&str, i64> = BTreeMap::new();
    for p in pods {
        let Some(owner) = p.owners.iter().find(|o| o.controller) else {
            return Err(format!("found no controllers for pod {:?}", p.name));
        };
        if seen.contains_key(owner.uid.as_str()) {
            continue;
        }
        let replicas = |v: &Value| int_at(v, "/spec/replicas").unwrap_or(1);
        let scale = match &*owner.kind {
            "ReplicaSet" => {
                let rs = world.replica_sets.get(ns, &owner.name).filter(|rs| rs.uid() == owner.uid);
                let rs = rs.ok_or_else(|| format!("replicasets.apps {:?} not found", owner.name))?;
                match crate::world::OwnerRef::controller_of(&rs.value).filter(|o| o.kind == "Deployment") {
                    Some(d) => world
                        .deployments
                        .get(ns, &d.name)
                        .filter(|x| x.uid() == d.uid)
                        .map(|x| replicas(&x.value))
                        .ok_or_else(|| format!("deployments.apps {:?} not found", d.name))?,
                    None => replicas(&rs.value),
                }
            }
            "StatefulSet" => world
                .stateful_sets
                .get(ns, &owner.name)
                .filter(|s| s.uid() == owner.uid)
                .map(|s| replicas(&s.value))
                .ok_or_else(|| format!("statefulsets.apps {:?} not found", owner.name))?,
            other => return Err(format!("{other} {:?} does not implement the scale subresource", owner.name)),
        };
        seen.insert(owner.uid.as_str(), scale);
    }
    Ok(seen.values().sum())
}

/// One sync of PodDisruptionBudget `ns/name` at `now`.
pub fn sync(world: &World, ns: &str, name: &str, now: OffsetDateTime) -> Plan {
    let mut plan = Plan::none();
    let Some(pdb) = world.disruption_budgets.get(ns, name) else { return plan };
    let pdb = &pdb;
    if pdb.deleting() {
        return plan;
    }
    // A null selector selects nothing; an empty one, every pod of the namespace.
    let selector =
        pdb.value.pointer("/spec/selector").filter(|s| !s.is_null()).and_then(|s| LabelSelector::from_json(s).ok());
    let pods: Vec<&PodInfo> = match &selector {
        Some(s) => world.pods.in_namespace(ns).filter(|p| s.matches(&p.labels)).collect(),
        None => Vec::new(),
    };
    let spec = pdb.value.get("spec").cloned().unwrap_or_else(|| json!({}));
    let counted = match (spec.get("maxUnavailable").filter(|v| !v.is_null()), spec.get("minAvailable")) {
        (Some(max), _) => expected_scale(world, ns, &pods)
            .map(|expected| (expected, (expected - scaled(Some(max), expected, true, "0")).max(0))),
        (None, Some(Value::Number(n))) => Ok((i64::try_from(pods.len()).unwrap_or(i64::MAX), n.as_i64().unwrap_or(0))),
        (None, Some(min @ Value::String(_))) => {
            expected_scale(world, ns, &pods).map(|expected| (expected, scaled(Some(min), expected, true, "0")))
        }
        (None, _) => Ok((i64::try_from(pods.len()).unwrap_or(i64::MAX), 0)),
    };
    // Evictions still waiting for their pod to go; expired ones are dropped.
    let recorded = pdb.value.pointer("/status/disruptedPods").and_then(Value::as_object).cloned().unwrap_or_default();
    let mut disrupted = Map::new();
    for p in pods.iter().filter(|p| !p.deleting) {
        let Some(at) = recorded.get(&p.name).and_then(Value::as_str).and_then(edgehive_store::parse_rfc3339) else {
            continue;
        };
        let expires = at + DELETION_TIMEOUT;
        if expires > now {
            disrupted.insert(p.name.clone(), json!(edgehive_store::rfc3339(at)));
            plan.requeue(Duration::from_millis(
                u64::try_from((expires - now).whole_milliseconds()).unwrap_or(1).max(1),
            ));
        }
    }
    let healthy =
        i64::try_from(pods.iter().filter(|p| p.ready() && !p.deleting && !disrupted.contains_key(&p.name)).count())
            .unwrap_or(i64::MAX);
    let generation = int_at(&pdb.value, "/metadata/generation").unwrap_or(0);
    let old_status = pdb.value.get("status").cloned().unwrap_or_else(|| json!({}));
    let (expected, desired, allowed, reason, message) = match counted {
        Ok((expected, desired)) => {
            let allowed = if expected <= 0 { 0 } else { (healthy - desired).max(0) };
            let reason = if allowed > 0 { "SufficientPods" } else { "InsufficientPods" };
            (expected, desired, allowed, reason, String::new())
        }
        Err(e) => (0, 0, 0, "SyncFailed", e),
    };
    let status = if allowed > 0 { "True" } else { "False" };
    let old_cond = old_status
        .get("conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c.get("type").and_then(Value::as_str) == Some("DisruptionAllowed")));
    let same = old_cond.is_some_and(|c| {
        str_at(c, "/status") == status && str_at(c, "/reason") == reason && str_at(c, "/message") == message
    });
    let since = match old_cond {
        Some(c) if same || str_at(c, "/status") == status => {
            c.get("lastTransitionTime").cloned().unwrap_or_else(|| json!(edgehive_store::rfc3339(now)))
        }
        _ => json!(edgehive_store::rfc3339(now)),
    };
    let mut new_status = json!({
        "observedGeneration": generation,
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "conditions": [{
            "type": "DisruptionAllowed", "status": status, "observedGeneration": generation,
            "lastTransitionTime": since, "reason": reason, "message": message,
        }],
    });
    if !disrupted.is_empty() {
        new_status["disruptedPods"] = Value::Object(disrupted);
    }
    if let Some(diff) = merge_diff(&old_status, &new_status) {
        plan.push(Action::Patch {
            res: &POD_DISRUPTION_BUDGETS,
            namespace: ns.to_string(),
            name: name.to_string(),
            uid: pdb.uid().to_string(),
            // On the version read: an eviction charged meanwhile is not undone.
            rev: Some(pdb.rev),
            patch: json!({"status": diff}),
        });
    }
    plan
}
