//! The StatefulSet controller: pods with stable names (`{set}-{ordinal}`),
//! hostnames and subdomains, made and removed in ordinal order
//! (`OrderedReady`: each waits until those before it are Running and
//! available; scale-down removes the highest first, one at a time) or all
//! at once (`Parallel`), and rolled by ordinal from the highest down to the
//! partition, one pod at a time (Kubernetes' `pkg/controller/statefulset`).
//!
//! Templates are kept as ControllerRevisions ([`crate::history`]); a pod
//! carries the name of its revision in `controller-revision-hash`, and a
//! pod below the partition is (re)made from the current revision's
//! template, not the new one. The set never replaces a pod that exists:
//! a pod on an edge node that went offline keeps its name there, as a
//! StatefulSet's identity requires. `volumeClaimTemplates` are refused by
//! validation (no persistent volumes here).

use std::collections::BTreeMap;
use std::time::Duration;

use edgehive_store::resources::{PODS, STATEFUL_SETS};
use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use crate::history::{self, REVISION_HASH};
use crate::plan::{Action, Plan};
use crate::replicaset::{claim_pods, selector_of, status_patch};
use crate::template::{pod_from_template, template_hash};
use crate::world::{OwnerRef, Phase, PodInfo, Stored, World, int_at, str_at};

/// The label with a StatefulSet pod's name (for a Service per pod).
pub const POD_NAME: &str = "statefulset.kubernetes.io/pod-name";
/// The label with a StatefulSet pod's ordinal.
pub const POD_INDEX: &str = "apps.kubernetes.io/pod-index";

/// The ordinal of `pod` when it is named as a member of set `set`.
pub fn ordinal_of(set: &str, pod: &str) -> Option<i64> {
    let digits = pod.strip_prefix(set)?.strip_prefix('-')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || (digits.len() > 1 && digits.starts_with('0'))
    {
        return None;
    }
    digits.parse().ok()
}

/// Running, Ready, and ready for `min_ready` seconds: a pod the set may build on.
fn healthy(p: &PodInfo, min_ready: i64, now: OffsetDateTime) -> bool {
    p.phase == Phase::Running && p.available(min_ready, now)
}

/// The pod of ordinal `ord` made from `template` at revision `revision`.
fn new_pod(set: &Stored, template: &Value, revision: &str, ord: i64) -> Value {
    let ns = str_at(&set.value, "/metadata/namespace");
    let name = format!("{}-{ord}", set.name());
    let mut pod = pod_from_template(template, ns, set.name(), OwnerRef::controller_to(&STATEFUL_SETS, &set.value));
    let meta = pod["metadata"].as_object_mut().map(std::mem::take).unwrap_or_default();
    let mut metadata: Map<String, Value> = meta.into_iter().filter(|(k, _)| k != "generateName").collect();
    metadata.insert("name".into(), json!(name));
    let labels = metadata.entry("labels").or_insert_with(|| json!({}));
    labels[POD_NAME] = json!(name);
    labels[POD_INDEX] = json!(ord.to_string());
    labels[REVISION_HASH] = json!(revision);
    pod["metadata"] = Value::Object(metadata);
    pod["spec"]["hostname"] = json!(name);
    let service = str_at(&set.value, "/spec/serviceName");
    if !service.is_empty() {
        pod["spec"]["subdomain"] = json!(service);
    }
    pod
}

fn revision_of(p: &PodInfo) -> &str {
    p.labels.get(REVISION_HASH).unwrap_or("")
}

fn delete(p: &PodInfo) -> Action {
    Action::delete(&PODS, &p.namespace, &p.name, &p.uid)
}

/// One sync of StatefulSet `ns/name` at `now`.
pub fn sync(world: &World, ns: &str, name: &str, now: OffsetDateTime) -> Plan {
    let mut plan = Plan::none();
    let Some(set) = world.stateful_sets.get(ns, name) else { return plan };
    let set = &set;
    let Some(selector) = selector_of(set) else { return plan };
    let template = set.value.pointer("/spec/template").cloned().unwrap_or_else(|| json!({}));
    // Hashed with a collision count of 0 when there is none, as the status
    // then records (so the hash does not move when it does).
    let hash = template_hash(&template, Some(int_at(&set.value, "/status/collisionCount").unwrap_or(0)));
    let revisions: Vec<Stored> = world.revisions.owned_by(set.uid()).collect();
    let revisions: Vec<&Stored> = revisions.iter().collect();
    let update_rev = format!("{name}-{hash}");
    if !set.deleting()
        && let Err(plan) = history::current(&STATEFUL_SETS, set, &revisions, &template, &hash)
    {
        return plan;
    }
    // The current revision: the one the status names, while it exists.
    let stored_current = str_at(&set.value, "/status/currentRevision");
    let current = revisions.iter().find(|r| r.name() == stored_current && !stored_current.is_empty());
    let current_rev = current.map_or_else(|| update_rev.clone(), |r| r.name().to_string());
    let current_template = current.and_then(|r| history::template_of(r)).unwrap_or_else(|| template.clone());

    let claimed = claim_pods(world, &STATEFUL_SETS, set, &selector, &mut plan);
    let members: Vec<(i64, &PodInfo)> = claimed.iter().filter_map(|p| Some((ordinal_of(name, &p.name)?, *p))).collect();
    let replicas = int_at(&set.value, "/spec/replicas").unwrap_or(1).max(0);
    let start = int_at(&set.value, "/spec/ordinals/start").unwrap_or(0).max(0);
    let end = start + replicas;
    let min_ready = int_at(&set.value, "/spec/minReadySeconds").unwrap_or(0);
    let mut slots: BTreeMap<i64, &PodInfo> = BTreeMap::new();
    let mut condemned: Vec<(i64, &PodInfo)> = Vec::new();
    for (ord, p) in &members {
        if (start..end).contains(ord) {
            slots.insert(*ord, p);
        } else {
            condemned.push((*ord, p));
        }
    }
    condemned.sort_by_key(|c| std::cmp::Reverse(c.0));

    let (mut count, mut ready, mut available, mut at_current, mut updated) = (0i64, 0i64, 0i64, 0i64, 0i64);
    for (_, p) in &members {
        count += 1;
        if p.phase == Phase::Running && p.ready() {
            ready += 1;
            available += i64::from(p.available(min_ready, now));
        }
        if !p.deleting {
            at_current += i64::from(revision_of(p) == current_rev);
            updated += i64::from(revision_of(p) == update_rev);
        }
    }
    let strategy = str_at(&set.value, "/spec/updateStrategy/type");
    let rolling = strategy != "OnDelete";
    if !set.deleting() {
        let partition = int_at(&set.value, "/spec/updateStrategy/rollingUpdate/partition").unwrap_or(0).max(0);
        let monotonic = str_at(&set.value, "/spec/podManagementPolicy") != "Parallel";
        let pods = Pods { set, template: &template, current_template: &current_template, current_rev: &current_rev };
        let step = Step { update_rev: &update_rev, start, end, min_ready, now, monotonic };
        step.run(&pods, &slots, &condemned, rolling.then_some(start + partition), &mut plan);
        plan.extend(history::cleanup(set, &revisions, |r| {
            r.name() == update_rev || r.name() == current_rev || members.iter().any(|(_, p)| revision_of(p) == r.name())
        }));
    }
    // The rollout is complete when every pod is at the new revision and ready.
    let (current_rev, at_current) =
        if count == updated && ready == count { (update_rev.clone(), updated) } else { (current_rev, at_current) };
    let fields = [
        ("replicas", count),
        ("readyReplicas", ready),
        ("currentReplicas", at_current),
        ("updatedReplicas", updated),
        ("availableReplicas", available),
        ("observedGeneration", int_at(&set.value, "/metadata/generation").unwrap_or(0)),
    ];
    let mut patch = status_patch(&set.value, &fields, &["replicas", "availableReplicas"]).unwrap_or_else(|| json!({}));
    for (field, value) in [("currentRevision", &current_rev), ("updateRevision", &update_rev)] {
        if str_at(&set.value, &format!("/status/{field}")) != value.as_str() {
            patch["status"][field] = json!(value);
        }
    }
    if set.value.pointer("/status/collisionCount").is_none_or(Value::is_null) {
        patch["status"]["collisionCount"] = json!(0);
    }
    if patch.as_object().is_some_and(|p| !p.is_empty()) {
        plan.push(Action::Patch {
            res: &STATEFUL_SETS,
            namespace: ns.to_string(),
            name: name.to_string(),
            uid: set.uid().to_string(),
            rev: None,
            patch,
        });
    }
    plan
}

/// How a set's pods are made.
struct Pods<'a> {
    set: &'a Stored,
    template: &'a Value,
    current_template: &'a Value,
    current_rev: &'a str,
}

/// One pass over a set's ordinals.
struct Step<'a> {
    update_rev: &'a str,
    start: i64,
    end: i64,
    min_ready: i64,
    now: OffsetDateTime,
    monotonic: bool,
}

impl Step<'_> {
    /// Adds this pass's writes to `plan`; `roll_to`: the lowest ordinal a
    /// RollingUpdate replaces (`None`: OnDelete).
    fn run(
        &self,
        pods: &Pods<'_>,
        slots: &BTreeMap<i64, &PodInfo>,
        condemned: &[(i64, &PodInfo)],
        roll_to: Option<i64>,
        plan: &mut Plan,
    ) {
        // 1. Every ordinal has a live pod, in order.
        for ord in self.start..self.end {
            let Some(p) = slots.get(&ord) else {
                // Below the partition a pod is remade at the current revision.
                let (template, revision) = if roll_to.is_some_and(|lowest| ord < lowest) {
                    (pods.current_template, pods.current_rev)
                } else {
                    (pods.template, self.update_rev)
                };
                plan.push(Action::Create { res: &PODS, object: new_pod(pods.set, template, revision, ord) });
                if self.monotonic {
                    return;
                }
                continue;
            };
            if !p.deleting && matches!(p.phase, Phase::Failed | Phase::Succeeded) {
                // A pod that ended is deleted and made again, under the same name.
                plan.push(delete(p));
                if self.monotonic {
                    return;
                }
                continue;
            }
            if self.monotonic && !healthy(p, self.min_ready, self.now) {
                self.wait_for(p, plan);
                return;
            }
        }
        // 2. Pods beyond the replicas go, highest first.
        for (_, p) in condemned {
            if p.deleting {
                if self.monotonic {
                    return;
                }
                continue;
            }
            plan.push(delete(p));
            if self.monotonic {
                return;
            }
        }
        // 3. RollingUpdate: from the highest ordinal down to the partition,
        //    one outdated pod at a time, each after the one above is healthy.
        let Some(lowest) = roll_to else { return };
        for ord in (lowest.max(self.start)..self.end).rev() {
            let Some(p) = slots.get(&ord) else { return };
            if revision_of(p) != self.update_rev && !p.deleting {
                plan.push(delete(p));
                return;
            }
            if !healthy(p, self.min_ready, self.now) {
                self.wait_for(p, plan);
                return;
            }
        }
    }

    /// Asks to look again when a ready pod becomes available.
    fn wait_for(&self, p: &PodInfo, plan: &mut Plan) {
        if let Some(since) = p.ready_since.filter(|_| p.phase == Phase::Running) {
            let left = since + time::Duration::seconds(self.min_ready) - self.now;
            if left.is_positive() {
                plan.requeue(Duration::from_millis(u64::try_from(left.whole_milliseconds()).unwrap_or(1).max(1)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals_are_read_only_from_member_names() {
        assert_eq!(ordinal_of("web", "web-0"), Some(0));
        assert_eq!(ordinal_of("web", "web-12"), Some(12));
        for not in ["web", "web-", "web-01", "web-a", "web-1-2", "webx-1", "db-1", "web--1"] {
            assert_eq!(ordinal_of("web", not), None, "{not}");
        }
    }
}
