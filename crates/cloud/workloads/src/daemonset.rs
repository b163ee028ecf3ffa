//! The DaemonSet controller: one pod on every node the template admits
//! (node selector, required node affinity, taints it tolerates), none
//! elsewhere; a node that joins gets its pod in the same sync that sees it.
//! Templates are kept as ControllerRevisions and pods carry their
//! revision's hash, so RollingUpdate replaces old pods node by node within
//! maxUnavailable, and `kubectl rollout history|undo` work (Kubernetes'
//! `pkg/controller/daemon`).
//!
//! Pods are made bound (`spec.nodeName`) as well as carrying the node
//! affinity Kubernetes gives them: placing them needs no scheduler round
//! trip, so a DaemonSet over 1,000 edge nodes is 1,000 creations and
//! nothing more, and a sync with nothing to change writes nothing.

use std::collections::BTreeMap;

use edgehive_store::resources::{DAEMON_SETS, PODS};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::deployment::scaled;
use crate::history;
pub use crate::history::REVISION_HASH;
use crate::plan::{Action, Plan};
use crate::replicaset::{claim_pods, selector_of, status_patch};
use crate::template::{pod_from_template, template_hash};
use crate::world::{OwnerRef, PodInfo, Stored, World, int_at, str_at};
use edgehive_registry::scheduling::{NodeInfo, selects_node, untolerated};

/// The legacy label with the DaemonSet's generation at the pod's creation.
pub const TEMPLATE_GENERATION: &str = "pod-template-generation";
/// At most this many pods created or deleted per sync (Kubernetes' `BurstReplicas` for DaemonSets).
pub const BURST: usize = 250;

/// The tolerations Kubernetes adds to every DaemonSet pod, so that node
/// conditions and cordoning do not take a daemon off its node.
fn daemon_tolerations(host_network: bool) -> Vec<Value> {
    let mut t = vec![
        json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}),
        json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}),
        json!({"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}),
    ];
    if host_network {
        t.push(json!({"key": "node.kubernetes.io/network-unavailable", "operator": "Exists", "effect": "NoSchedule"}));
    }
    t
}

/// The template's pod spec with the daemon tolerations added (those it lacks).
fn daemon_spec(template: &Value) -> Value {
    let mut spec = template.get("spec").cloned().unwrap_or_else(|| json!({}));
    let host_network = spec.get("hostNetwork").and_then(Value::as_bool) == Some(true);
    let mut tolerations: Vec<Value> = spec.get("tolerations").and_then(Value::as_array).cloned().unwrap_or_default();
    for t in daemon_tolerations(host_network) {
        if !tolerations.iter().any(|x| x.get("key") == t.get("key") && x.get("effect") == t.get("effect")) {
            tolerations.push(t);
        }
    }
    spec["tolerations"] = Value::Array(tolerations);
    spec
}

/// Whether a daemon pod of `spec` should run on `node`.
pub fn should_run(spec: &Value, node: &NodeInfo) -> bool {
    !node.deleting && selects_node(spec, node) && untolerated(spec, node, &["NoSchedule", "NoExecute"]).is_empty()
}

fn hash_of(pod: &PodInfo) -> Option<&str> {
    pod.labels.get(REVISION_HASH)
}

/// One sync of DaemonSet `ns/name` at `now`.
pub fn sync(world: &World, ns: &str, name: &str, now: OffsetDateTime) -> Plan {
    let mut plan = Plan::none();
    let Some(ds) = world.daemon_sets.get(ns, name) else { return plan };
    let ds = &ds;
    let Some(selector) = selector_of(ds) else { return plan };
    let template = ds.value.pointer("/spec/template").cloned().unwrap_or_else(|| json!({}));
    let collision = int_at(&ds.value, "/status/collisionCount");
    let hash = template_hash(&template, collision);
    let revisions: Vec<Stored> = world.revisions.owned_by(ds.uid()).collect();
    let revisions: Vec<&Stored> = revisions.iter().collect();
    if !ds.deleting()
        && let Err(plan) = history::current(&DAEMON_SETS, ds, &revisions, &template, &hash)
    {
        return plan;
    }

    let claimed = claim_pods(world, &DAEMON_SETS, ds, &selector, &mut plan);
    let spec = daemon_spec(&template);
    let mut by_node: BTreeMap<&str, Vec<&PodInfo>> = BTreeMap::new();
    for p in &claimed {
        by_node.entry(p.node.as_str()).or_default().push(p);
    }
    let min_ready = int_at(&ds.value, "/spec/minReadySeconds").unwrap_or(0);
    let mut creates: Vec<&NodeInfo> = Vec::new();
    let mut deletes: Vec<&PodInfo> = Vec::new();
    let (mut desired, mut scheduled, mut misscheduled, mut ready, mut available, mut updated) = (0, 0, 0, 0, 0, 0);
    // Per node: its live daemon pod (for the rolling update).
    let mut placed: Vec<(&NodeInfo, Option<&PodInfo>)> = Vec::new();
    for node in world.nodes.values() {
        let pods: Vec<&PodInfo> = by_node.remove(node.name.as_str()).unwrap_or_default();
        let (failed, mut live): (Vec<&PodInfo>, Vec<&PodInfo>) =
            pods.into_iter().filter(|p| !p.deleting).partition(|p| p.phase == crate::world::Phase::Failed);
        // A failed daemon pod is replaced.
        deletes.extend(failed);
        if should_run(&spec, node) {
            desired += 1;
            live.sort_by_key(|p| (p.created, p.name.clone()));
            match live.split_first() {
                None => creates.push(node),
                Some((keep, extra)) => {
                    scheduled += 1;
                    deletes.extend(extra.iter().copied());
                    ready += usize::from(keep.ready());
                    available += usize::from(keep.available(min_ready, now));
                    updated += usize::from(hash_of(keep) == Some(hash.as_str()));
                    placed.push((node, Some(keep)));
                    continue;
                }
            }
            placed.push((node, None));
        } else if !live.is_empty() {
            misscheduled += 1;
            deletes.extend(live);
        }
    }
    // Pods on nodes that no longer exist.
    for pods in by_node.into_values() {
        deletes.extend(pods.into_iter().filter(|p| !p.deleting && !p.node.is_empty()));
    }
    if !ds.deleting() {
        let owner_ref = OwnerRef::controller_to(&DAEMON_SETS, &ds.value);
        let mut labelled = template.clone();
        labelled["metadata"]["labels"][REVISION_HASH] = json!(hash);
        labelled["metadata"]["labels"][TEMPLATE_GENERATION] =
            json!(int_at(&ds.value, "/metadata/generation").unwrap_or(1).to_string());
        for node in creates.iter().take(BURST) {
            let mut pod = pod_from_template(&labelled, ns, ds.name(), owner_ref.clone());
            let mut spec = spec.clone();
            bind(&mut spec, &node.name);
            pod["spec"] = spec;
            plan.push(Action::Create { res: &PODS, object: pod });
        }
        for p in deletes.iter().take(BURST) {
            plan.push(delete(p));
        }
        if deletes.is_empty() && creates.is_empty() && rolling(&ds.value) {
            plan.extend(roll(&ds.value, &placed, &hash, min_ready, now, desired));
        }
        plan.extend(history::cleanup(ds, &revisions, |r| {
            let h = history::hash_of(r);
            h == Some(hash.as_str()) || claimed.iter().any(|p| h.is_some() && hash_of(p) == h)
        }));
    }
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    let fields = [
        ("currentNumberScheduled", count(scheduled)),
        ("numberMisscheduled", count(misscheduled)),
        ("desiredNumberScheduled", count(desired)),
        ("numberReady", count(ready)),
        ("observedGeneration", int_at(&ds.value, "/metadata/generation").unwrap_or(0)),
        ("updatedNumberScheduled", count(updated)),
        ("numberAvailable", count(available)),
        ("numberUnavailable", count(desired.saturating_sub(available))),
    ];
    if let Some(patch) = status_patch(
        &ds.value,
        &fields,
        &["currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady"],
    ) {
        plan.push(Action::Patch {
            res: &DAEMON_SETS,
            namespace: ns.to_string(),
            name: name.to_string(),
            uid: ds.uid().to_string(),
            rev: None,
            patch,
        });
    }
    plan
}

/// Binds a daemon pod to `node`: its name, and the node affinity
/// Kubernetes gives daemon pods (replacing any `metadata.name` field term).
fn bind(spec: &mut Value, node: &str) {
    spec["nodeName"] = json!(node);
    let term = json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]});
    spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] =
        json!({"nodeSelectorTerms": [term]});
}

fn delete(p: &PodInfo) -> Action {
    Action::delete(&PODS, &p.namespace, &p.name, &p.uid)
}

fn rolling(ds: &Value) -> bool {
    str_at(ds, "/spec/updateStrategy/type") != "OnDelete"
}

/// RollingUpdate: old pods go while no more than maxUnavailable nodes are
/// without an available pod (an old pod that is not available goes at once).
fn roll(
    ds: &Value,
    placed: &[(&NodeInfo, Option<&PodInfo>)],
    hash: &str,
    min_ready: i64,
    now: OffsetDateTime,
    desired: usize,
) -> Plan {
    let mut plan = Plan::none();
    let total = i64::try_from(desired).unwrap_or(0);
    let max_unavailable =
        scaled(ds.pointer("/spec/updateStrategy/rollingUpdate/maxUnavailable"), total, true, "1").max(1);
    let mut unavailable = placed.iter().filter(|(_, p)| p.is_none_or(|p| !p.available(min_ready, now))).count() as i64;
    let mut old: Vec<&PodInfo> = placed.iter().filter_map(|(_, p)| *p).filter(|p| hash_of(p) != Some(hash)).collect();
    // Unavailable ones first, then by node name.
    old.sort_by_key(|p| (p.available(min_ready, now), p.node.clone()));
    for p in old {
        if !p.available(min_ready, now) {
            plan.push(delete(p));
        } else if unavailable < max_unavailable {
            plan.push(delete(p));
            unavailable += 1;
        }
    }
    plan
}
