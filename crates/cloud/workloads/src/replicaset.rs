//! The ReplicaSet controller: keeps `spec.replicas` active pods that match
//! the selector, adopting orphans that match and releasing pods that no
//! longer do, and reports what it sees in `status`.
//!
//! Follows Kubernetes' `pkg/controller/replicaset`: at most
//! [`BURST_REPLICAS`] creations or deletions per sync; when there are too
//! many pods, the ones deleted first are unscheduled, then pending, not
//! ready, ready for a shorter time, restarted more, and newer. A pod on an
//! edge node that went offline stays active (its node keeps it), so an
//! outage does not make replacements.

use std::cmp::Ordering;
use std::time::Duration;

use edgehive_store::resources::{PODS, REPLICA_SETS};
use edgehive_store::selector::LabelSelector;
use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use crate::plan::{Action, Plan};
use crate::template::pod_from_template;
use crate::world::{OwnerRef, Phase, PodInfo, Stored, World, int_at, labels_of, str_at};

/// The annotation (on a ReplicaSet, or on a Deployment, which copies it to
/// its ReplicaSets) that asks for the pods of a node NotReady for this many
/// seconds to be replaced elsewhere. Without it a pod on an offline edge
/// node keeps counting (the edge keeps running it), so an outage makes no
/// replacements; with it, the replacements run beside the offline copies,
/// which are not deleted, and when the node returns the surplus goes as any
/// surplus does.
pub const REPLACE_OFFLINE_AFTER: &str = "workloads.edgehive.io/replace-offline-pods-after-seconds";

/// At most this many pods created or deleted in one sync (Kubernetes' `BurstReplicas`).
pub const BURST_REPLICAS: usize = 500;

/// The pods a ReplicaSet (or any controller of pods by selector) owns after
/// claiming: its own that still match, plus matching orphans. Adoptions and
/// releases are added to `plan`.
pub(crate) fn claim_pods<'w>(
    world: &'w World,
    owner_res: &'static edgehive_store::resources::ResourceDef,
    owner: &Stored,
    selector: &LabelSelector,
    plan: &mut Plan,
) -> Vec<&'w PodInfo> {
    let ns = str_at(&owner.value, "/metadata/namespace");
    let mut claimed = Vec::new();
    for pod in world.pods.owned_by(owner.uid()) {
        if pod.namespace != ns {
            continue;
        }
        if selector.matches(&pod.labels) || owner.deleting() {
            claimed.push(pod);
        } else if !pod.deleting {
            // No longer ours: release it.
            let owners: Vec<Value> = pod.owners.iter().filter(|o| o.uid != owner.uid()).map(owner_json).collect();
            plan.push(owner_patch(pod, owners));
        }
    }
    if !owner.deleting() {
        for pod in world.pods.orphans_in(ns) {
            if pod.deleting || !selector.matches(&pod.labels) {
                continue;
            }
            let mut owners: Vec<Value> = pod.owners.iter().map(owner_json).collect();
            owners.push(OwnerRef::controller_to(owner_res, &owner.value));
            plan.push(owner_patch(pod, owners));
            claimed.push(pod);
        }
    }
    claimed
}

fn owner_json(o: &OwnerRef) -> Value {
    let mut v = json!({"apiVersion": o.api_version, "kind": o.kind, "name": o.name, "uid": o.uid});
    if o.controller {
        v["controller"] = json!(true);
    }
    if o.block {
        v["blockOwnerDeletion"] = json!(true);
    }
    v
}

fn owner_patch(pod: &PodInfo, owners: Vec<Value>) -> Action {
    let refs = if owners.is_empty() { Value::Null } else { Value::Array(owners) };
    Action::Patch {
        res: &PODS,
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
        uid: pod.uid.clone(),
        rev: Some(pod.rev),
        patch: json!({"metadata": {"ownerReferences": refs}}),
    }
}

/// Kubernetes' order of pods to delete first (`ActivePods` ranking): less
/// is deleted sooner.
pub(crate) fn deletion_order(a: &PodInfo, b: &PodInfo) -> Ordering {
    let assigned = |p: &PodInfo| !p.node.is_empty();
    let phase_rank = |p: &PodInfo| match p.phase {
        Phase::Pending => 0,
        Phase::Unknown => 1,
        _ => 2,
    };
    assigned(a)
        .cmp(&assigned(b))
        .then(phase_rank(a).cmp(&phase_rank(b)))
        .then(a.ready().cmp(&b.ready()))
        // Ready for less time first.
        .then_with(|| match (a.ready_since, b.ready_since) {
            (Some(x), Some(y)) => y.cmp(&x),
            _ => Ordering::Equal,
        })
        // More restarts first.
        .then(b.restarts.cmp(&a.restarts))
        // Newer first.
        .then_with(|| b.created.cmp(&a.created))
        .then_with(|| a.name.cmp(&b.name))
}

/// Adds the creations or deletions that bring `active` to `want` pods.
pub(crate) fn scale_pods(
    plan: &mut Plan,
    owner_res: &'static edgehive_store::resources::ResourceDef,
    owner: &Stored,
    active: &[&PodInfo],
    want: usize,
) {
    let ns = str_at(&owner.value, "/metadata/namespace");
    match active.len().cmp(&want) {
        Ordering::Less => {
            let template = owner.value.pointer("/spec/template").cloned().unwrap_or_else(|| json!({}));
            let owner_ref = OwnerRef::controller_to(owner_res, &owner.value);
            for _ in 0..(want - active.len()).min(BURST_REPLICAS) {
                plan.push(Action::Create {
                    res: &PODS,
                    object: pod_from_template(&template, ns, owner.name(), owner_ref.clone()),
                });
            }
        }
        Ordering::Greater => {
            let mut victims: Vec<&PodInfo> = active.to_vec();
            victims.sort_by(|a, b| deletion_order(a, b));
            for pod in victims.into_iter().take((active.len() - want).min(BURST_REPLICAS)) {
                plan.push(Action::delete(&PODS, &pod.namespace, &pod.name, &pod.uid));
            }
        }
        Ordering::Equal => {}
    }
}

/// A status merge patch: `fields` set (zeros omitted, as Kubernetes' JSON
/// omits them), `None` when the stored status already says it.
pub(crate) fn status_patch(obj: &Value, fields: &[(&str, i64)], keep_zero: &[&str]) -> Option<Value> {
    let mut patch = Map::new();
    for (name, value) in fields {
        let stored = obj.pointer(&format!("/status/{name}")).and_then(Value::as_i64).unwrap_or(0);
        let present = obj.pointer(&format!("/status/{name}")).is_some_and(|v| !v.is_null());
        let want_present = *value != 0 || keep_zero.contains(name);
        if stored != *value || present != want_present {
            patch.insert((*name).to_string(), if want_present { json!(value) } else { Value::Null });
        }
    }
    (!patch.is_empty()).then(|| json!({"status": patch}))
}

/// The non-empty label selector of a workload (`None`: absent, invalid, or
/// empty — an empty one would select every pod, and Kubernetes refuses it).
pub(crate) fn selector_of(obj: &Stored) -> Option<LabelSelector> {
    obj.value.pointer("/spec/selector").and_then(|s| LabelSelector::from_json(s).ok()).filter(|s| !s.is_empty())
}

/// One sync of ReplicaSet `ns/name` at `now`.
pub fn sync(world: &World, ns: &str, name: &str, now: OffsetDateTime) -> Plan {
    let mut plan = Plan::none();
    let Some(rs) = world.replica_sets.get(ns, name) else { return plan };
    let rs = &rs;
    let Some(selector) = selector_of(rs) else { return plan };
    let claimed = claim_pods(world, &REPLICA_SETS, rs, &selector, &mut plan);
    let replace_after = rs
        .value
        .pointer(&format!("/metadata/annotations/{}", REPLACE_OFFLINE_AFTER.replace('/', "~1")))
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<i64>().ok())
        .filter(|s| *s >= 0);
    // When a pod of a NotReady node counts as lost (`None`: never).
    let lost_at = |p: &PodInfo| {
        let since = world.nodes.get(&p.node)?.not_ready_since?;
        Some(since + time::Duration::seconds(replace_after?))
    };
    let active: Vec<&PodInfo> =
        claimed.into_iter().filter(|p| p.active() && lost_at(p).is_none_or(|at| at > now)).collect();
    if let Some(next) = active.iter().filter_map(|p| lost_at(p)).min() {
        // Look again when a pod of an offline node is to be replaced.
        plan.requeue(Duration::from_millis(u64::try_from((next - now).whole_milliseconds()).unwrap_or(1).max(1)));
    }
    let want = usize::try_from(int_at(&rs.value, "/spec/replicas").unwrap_or(1).max(0)).unwrap_or(0);
    if !rs.deleting() {
        scale_pods(&mut plan, &REPLICA_SETS, rs, &active, want);
    }
    let min_ready = int_at(&rs.value, "/spec/minReadySeconds").unwrap_or(0);
    let template_labels = labels_of(&rs.value, "/spec/template/metadata/labels");
    let fully_labeled =
        active.iter().filter(|p| template_labels.iter().all(|(k, v)| p.labels.get(k) == Some(v.as_str()))).count();
    let ready = active.iter().filter(|p| p.ready()).count();
    let available = active.iter().filter(|p| p.available(min_ready, now)).count();
    if ready > available {
        // Look again when the next ready pod becomes available.
        if let Some(soonest) = active
            .iter()
            .filter(|p| !p.available(min_ready, now))
            .filter_map(|p| p.ready_since)
            .map(|since| since + time::Duration::seconds(min_ready) - now)
            .min()
        {
            plan.requeue(Duration::from_millis(u64::try_from(soonest.whole_milliseconds().max(1)).unwrap_or(1)));
        }
    }
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    let fields = [
        ("replicas", count(active.len())),
        ("fullyLabeledReplicas", count(fully_labeled)),
        ("readyReplicas", count(ready)),
        ("availableReplicas", count(available)),
        ("observedGeneration", int_at(&rs.value, "/metadata/generation").unwrap_or(0)),
    ];
    if let Some(patch) = status_patch(&rs.value, &fields, &["replicas"]) {
        plan.push(Action::Patch {
            res: &REPLICA_SETS,
            namespace: ns.to_string(),
            name: name.to_string(),
            uid: rs.uid().to_string(),
            rev: None,
            patch,
        });
    }
    plan
}
