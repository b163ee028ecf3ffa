//! The Deployment controller: one ReplicaSet per pod template (named by the
//! template's hash), rolled from the old to the new one by the strategy
//! (RollingUpdate within maxSurge / maxUnavailable, or Recreate), with
//! revisions, proportional scaling, pause, a progress deadline and the
//! revision history limit, following Kubernetes' `pkg/controller/deployment`.
//!
//! Each sync makes one step (create the new ReplicaSet, or scale up, or
//! scale down, or clean up) and reports status; the step's own writes wake
//! the next sync. `kubectl rollout undo` needs nothing here: kubectl puts an
//! old ReplicaSet's template back into the Deployment, and the ReplicaSet
//! with that template becomes the new one again with the next revision.

use std::time::Duration;

use edgehive_store::resources::{DEPLOYMENTS, REPLICA_SETS};
use edgehive_store::selector::LabelSelector;
use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use crate::plan::{Action, Plan};
use crate::template::{POD_TEMPLATE_HASH, equal_ignoring_hash, template_hash};
use crate::world::{OwnerRef, Stored, World, int_at, str_at};

/// The revision of a ReplicaSet (and of its Deployment).
pub const REVISION: &str = "deployment.kubernetes.io/revision";
/// Revisions a ReplicaSet had before it became new again.
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
/// The Deployment's replicas when the ReplicaSet was last scaled for it.
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
/// The Deployment's replicas plus surge then.
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";

/// Annotations of a Deployment that are not copied to its ReplicaSets.
const NOT_COPIED: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    REVISION_HISTORY,
    DESIRED_REPLICAS,
    MAX_REPLICAS,
    "deprecated.deployment.rollback.to",
];

fn replicas_of(v: &Value) -> i64 {
    int_at(v, "/spec/replicas").unwrap_or(1).max(0)
}

fn status_of(v: &Value, field: &str) -> i64 {
    int_at(v, &format!("/status/{field}")).unwrap_or(0)
}

fn revision_of(rs: &Value) -> i64 {
    str_at(rs, &format!("/metadata/annotations/{}", REVISION.replace('/', "~1"))).parse().unwrap_or(0)
}

fn annotation<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.pointer("/metadata/annotations").and_then(|a| a.get(key)).and_then(Value::as_str)
}

/// An int-or-percent of `total`, rounded up or down (Kubernetes'
/// `GetScaledValueFromIntOrPercent`).
pub fn scaled(v: Option<&Value>, total: i64, round_up: bool, default: &str) -> i64 {
    let v = v.cloned().unwrap_or_else(|| json!(default));
    match v {
        Value::Number(n) => n.as_i64().unwrap_or(0),
        Value::String(s) => match s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) {
            Some(pct) if round_up => (pct * total + 99) / 100,
            Some(pct) => pct * total / 100,
            None => 0,
        },
        _ => 0,
    }
}

/// (maxSurge, maxUnavailable) of a rolling Deployment; both zero is read
/// as one unavailable, as Kubernetes' `ResolveFenceposts` does.
pub fn fenceposts(d: &Value) -> (i64, i64) {
    let replicas = replicas_of(d);
    let ru = d.pointer("/spec/strategy/rollingUpdate");
    let surge = scaled(ru.and_then(|r| r.get("maxSurge")), replicas, true, "25%");
    let unavailable = scaled(ru.and_then(|r| r.get("maxUnavailable")), replicas, false, "25%");
    if surge == 0 && unavailable == 0 { (0, 1) } else { (surge, unavailable) }
}

fn recreate(d: &Value) -> bool {
    str_at(d, "/spec/strategy/type") == "Recreate"
}

fn max_surge(d: &Value) -> i64 {
    if recreate(d) { 0 } else { fenceposts(d).0 }
}

fn max_unavailable(d: &Value) -> i64 {
    if recreate(d) || replicas_of(d) == 0 { 0 } else { fenceposts(d).1.min(replicas_of(d)) }
}

/// The Deployment's ReplicaSets: the new one (template equal to the
/// Deployment's, oldest first if several) and the others, oldest first.
struct Sets<'w> {
    new: Option<&'w Stored>,
    old: Vec<&'w Stored>,
}

impl Sets<'_> {
    fn all(&self) -> impl Iterator<Item = &Stored> {
        self.old.iter().copied().chain(self.new)
    }

    fn total(&self, f: impl Fn(&Value) -> i64) -> i64 {
        self.all().map(|rs| f(&rs.value)).sum()
    }
}

fn created(v: &Value) -> (String, String) {
    (str_at(v, "/metadata/creationTimestamp").to_string(), str_at(v, "/metadata/name").to_string())
}

/// Claims ReplicaSets as the ReplicaSet controller claims pods.
fn claim(world: &World, d: &Stored, selector: &LabelSelector, plan: &mut Plan) -> Vec<Stored> {
    let ns = str_at(&d.value, "/metadata/namespace");
    let labels = |rs: &Stored| crate::world::labels_of(&rs.value, "/metadata/labels");
    let mut out: Vec<Stored> = Vec::new();
    for rs in world.replica_sets.owned_by(d.uid()) {
        if str_at(&rs.value, "/metadata/namespace") != ns {
            continue;
        }
        if selector.matches(&labels(&rs)) || d.deleting() {
            out.push(rs);
        } else if !rs.deleting() {
            let owners: Vec<Value> = OwnerRef::all_of(&rs.value)
                .iter()
                .filter(|o| o.uid != d.uid())
                .map(|o| json!({"apiVersion": o.api_version, "kind": o.kind, "name": o.name, "uid": o.uid}))
                .collect();
            plan.push(patch_rs(&rs, Some(rs.rev), json!({"metadata": {"ownerReferences": owners}})));
        }
    }
    if !d.deleting() {
        for rs in world.replica_sets.orphans_in(ns) {
            if rs.deleting() || !selector.matches(&labels(&rs)) {
                continue;
            }
            let mut owners: Vec<Value> =
                rs.value["metadata"]["ownerReferences"].as_array().cloned().unwrap_or_default();
            owners.push(OwnerRef::controller_to(&DEPLOYMENTS, &d.value));
            plan.push(patch_rs(&rs, Some(rs.rev), json!({"metadata": {"ownerReferences": owners}})));
            out.push(rs);
        }
    }
    out.sort_by_key(|rs| created(&rs.value));
    out
}

fn patch_rs(rs: &Stored, rev: Option<u64>, patch: Value) -> Action {
    Action::Patch {
        res: &REPLICA_SETS,
        namespace: str_at(&rs.value, "/metadata/namespace").to_string(),
        name: rs.name().to_string(),
        uid: rs.uid().to_string(),
        rev,
        patch,
    }
}

/// Sets `rs`'s replicas for Deployment `d`, with the annotations that
/// record the Deployment's size then.
fn scale_rs(d: &Value, rs: &Stored, replicas: i64) -> Action {
    let mut annotations = Map::new();
    annotations.insert(DESIRED_REPLICAS.into(), json!(replicas_of(d).to_string()));
    annotations.insert(MAX_REPLICAS.into(), json!((replicas_of(d) + max_surge(d)).to_string()));
    patch_rs(rs, Some(rs.rev), json!({"metadata": {"annotations": annotations}, "spec": {"replicas": replicas}}))
}

/// A Deployment condition as Kubernetes writes it.
fn condition(ty: &str, status: &str, reason: &str, message: &str, now: &str) -> Value {
    json!({"type": ty, "status": status, "lastUpdateTime": now, "lastTransitionTime": now,
        "reason": reason, "message": message})
}

/// Kubernetes' `SetDeploymentCondition`: the same status and reason is no
/// change; the same status keeps its transition time.
fn set_condition(conditions: &mut Vec<Value>, mut c: Value) {
    let ty = c["type"].as_str().unwrap_or_default().to_string();
    if let Some(i) = conditions.iter().position(|x| x["type"] == ty.as_str()) {
        let cur = &conditions[i];
        if cur["status"] == c["status"] && cur["reason"] == c["reason"] {
            return;
        }
        if cur["status"] == c["status"] {
            c["lastTransitionTime"] = cur["lastTransitionTime"].clone();
        }
        conditions[i] = c;
    } else {
        conditions.push(c);
    }
}

fn find_condition<'a>(conditions: &'a [Value], ty: &str) -> Option<&'a Value> {
    conditions.iter().find(|c| c["type"] == ty)
}

/// One sync of Deployment `ns/name` at `now`.
pub fn sync(world: &World, ns: &str, name: &str, now: OffsetDateTime) -> Plan {
    let mut plan = Plan::none();
    let Some(d) = world.deployments.get(ns, name) else { return plan };
    let d = &d;
    let now_s = edgehive_store::rfc3339(now);
    let selector = d.value.pointer("/spec/selector").and_then(|s| LabelSelector::from_json(s).ok());
    let Some(selector) = selector.filter(|s| !s.is_empty()) else {
        // Selects nothing safely: only record that it was seen.
        let generation = int_at(&d.value, "/metadata/generation").unwrap_or(0);
        if int_at(&d.value, "/status/observedGeneration") != Some(generation) {
            plan.push(patch_deployment(d, json!({"status": {"observedGeneration": generation}})));
        }
        return plan;
    };
    let mut sets = claim(world, d, &selector, &mut plan);
    let new_idx = sets.iter().position(|rs| {
        equal_ignoring_hash(
            rs.value.pointer("/spec/template").unwrap_or(&Value::Null),
            d.value.pointer("/spec/template").unwrap_or(&Value::Null),
        )
    });
    let new = new_idx.map(|i| sets.remove(i));
    let sets = Sets { new: new.as_ref(), old: sets.iter().collect() };
    let mut conditions: Vec<Value> =
        d.value.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let paused = d.value.pointer("/spec/paused").and_then(Value::as_bool) == Some(true);

    if d.deleting() {
        return with_status(plan, d, &sets, conditions, now, false);
    }
    // Pause and resume are recorded on the Progressing condition.
    if has_deadline(&d.value) {
        let progressing = find_condition(&conditions, "Progressing").cloned();
        if paused && progressing.as_ref().is_none_or(|c| c["reason"] != "DeploymentPaused") {
            set_condition(
                &mut conditions,
                condition("Progressing", "Unknown", "DeploymentPaused", "Deployment is paused", &now_s),
            );
        } else if !paused && progressing.as_ref().is_some_and(|c| c["reason"] == "DeploymentPaused") {
            set_condition(
                &mut conditions,
                condition("Progressing", "Unknown", "DeploymentResumed", "Deployment is resumed", &now_s),
            );
        }
    }
    // The Deployment's revision and the new ReplicaSet's.
    let max_old_revision = sets.old.iter().map(|rs| revision_of(&rs.value)).max().unwrap_or(0);
    if let Some(new) = sets.new {
        let rev = revision_of(&new.value);
        if rev <= max_old_revision {
            // An old template came back (`rollout undo`): it is the newest revision now.
            let mut history: Vec<String> = annotation(&new.value, REVISION_HISTORY)
                .map(|h| h.split(',').map(str::to_string).collect())
                .unwrap_or_default();
            if rev > 0 {
                history.push(rev.to_string());
            }
            let mut annotations = copied_annotations(&d.value);
            annotations.insert(REVISION.into(), json!((max_old_revision + 1).to_string()));
            annotations.insert(REVISION_HISTORY.into(), json!(history.join(",")));
            plan.push(patch_rs(new, Some(new.rev), json!({"metadata": {"annotations": annotations}})));
            return plan;
        }
        if annotation(&d.value, REVISION) != Some(rev.to_string().as_str()) {
            plan.push(patch_deployment(d, json!({"metadata": {"annotations": {REVISION: rev.to_string()}}})));
        }
        let min_ready = int_at(&d.value, "/spec/minReadySeconds").unwrap_or(0);
        if int_at(&new.value, "/spec/minReadySeconds").unwrap_or(0) != min_ready {
            plan.push(patch_rs(new, Some(new.rev), json!({"spec": {"minReadySeconds": min_ready}})));
        }
        // The Deployment's own annotations follow to its new ReplicaSet (Kubernetes'
        // SetNewReplicaSetAnnotations), so one added later reaches the pods' controller.
        let held = new.value.pointer("/metadata/annotations");
        let stale: Map<String, Value> =
            copied_annotations(&d.value).into_iter().filter(|(k, v)| held.and_then(|a| a.get(k)) != Some(v)).collect();
        if !stale.is_empty() {
            plan.push(patch_rs(new, Some(new.rev), json!({"metadata": {"annotations": stale}})));
        }
    }

    if paused || scaling_event(&d.value, &sets) {
        plan.extend(scale(&d.value, &sets));
        return with_status(plan, d, &sets, conditions, now, paused);
    }
    let step = if recreate(&d.value) { rollout_recreate(world, d, &sets) } else { rollout_rolling(d, &sets) };
    let stepped = !step.actions.is_empty();
    plan.extend(step);
    if !stepped && sets.new.is_some() && complete(&d.value, &sets) {
        plan.extend(cleanup(&d.value, &sets));
    }
    with_status(plan, d, &sets, conditions, now, false)
}

fn has_deadline(d: &Value) -> bool {
    int_at(d, "/spec/progressDeadlineSeconds").is_some_and(|s| s != i64::from(i32::MAX))
}

fn patch_deployment(d: &Stored, patch: Value) -> Action {
    Action::Patch {
        res: &DEPLOYMENTS,
        namespace: str_at(&d.value, "/metadata/namespace").to_string(),
        name: d.name().to_string(),
        uid: d.uid().to_string(),
        rev: None,
        patch,
    }
}

fn copied_annotations(d: &Value) -> Map<String, Value> {
    d.pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter().filter(|(k, _)| !NOT_COPIED.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect()
        })
        .unwrap_or_default()
}

fn collision_count(d: &Value) -> Option<i64> {
    int_at(d, "/status/collisionCount")
}

fn new_rs_name(d: &Stored) -> String {
    let template = d.value.pointer("/spec/template").cloned().unwrap_or(Value::Null);
    format!("{}-{}", d.name(), template_hash(&template, collision_count(&d.value)))
}

/// The ReplicaSet for the Deployment's current template, with `replicas`.
fn new_replica_set(world: &World, d: &Stored, sets: &Sets<'_>, replicas: i64) -> Action {
    let ns = str_at(&d.value, "/metadata/namespace");
    let mut template = d.value.pointer("/spec/template").cloned().unwrap_or_else(|| json!({}));
    let hash = template_hash(&template, collision_count(&d.value));
    let name = format!("{}-{hash}", d.name());
    if world.replica_sets.contains(ns, &name) {
        // The name is taken by another template (a hash collision): count
        // it, and the next hash differs.
        let count = collision_count(&d.value).unwrap_or(0) + 1;
        return patch_deployment(d, json!({"status": {"collisionCount": count}}));
    }
    template["metadata"]["labels"][POD_TEMPLATE_HASH] = json!(hash);
    let mut selector = d.value.pointer("/spec/selector").cloned().unwrap_or_else(|| json!({}));
    selector["matchLabels"][POD_TEMPLATE_HASH] = json!(hash);
    let mut annotations = copied_annotations(&d.value);
    let max_old_revision = sets.old.iter().map(|rs| revision_of(&rs.value)).max().unwrap_or(0);
    annotations.insert(REVISION.into(), json!((max_old_revision + 1).to_string()));
    annotations.insert(DESIRED_REPLICAS.into(), json!(replicas_of(&d.value).to_string()));
    annotations.insert(MAX_REPLICAS.into(), json!((replicas_of(&d.value) + max_surge(&d.value)).to_string()));
    Action::Create {
        res: &REPLICA_SETS,
        object: json!({
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": template["metadata"]["labels"].clone(),
                "annotations": annotations,
                "ownerReferences": [OwnerRef::controller_to(&DEPLOYMENTS, &d.value)],
            },
            "spec": {
                "replicas": replicas,
                "minReadySeconds": int_at(&d.value, "/spec/minReadySeconds").unwrap_or(0),
                "selector": selector,
                "template": template,
            },
        }),
    }
}

/// Whether the Deployment was resized since its ReplicaSets were: an active
/// ReplicaSet's desired-replicas annotation differs from the Deployment.
fn scaling_event(d: &Value, sets: &Sets<'_>) -> bool {
    let want = replicas_of(d).to_string();
    sets.all()
        .filter(|rs| replicas_of(&rs.value) > 0)
        .any(|rs| annotation(&rs.value, DESIRED_REPLICAS).is_some_and(|a| a != want))
}

/// Resizing: one active ReplicaSet takes the new size; otherwise the sizes
/// move in proportion (Kubernetes' `scale`).
fn scale(d: &Value, sets: &Sets<'_>) -> Plan {
    let mut plan = Plan::none();
    let want = replicas_of(d);
    let active: Vec<&Stored> = sets.all().filter(|rs| replicas_of(&rs.value) > 0).collect();
    let only = match active.len() {
        0 => sets.new.or_else(|| sets.old.last().copied()),
        1 => Some(active[0]),
        _ => None,
    };
    if let Some(rs) = only {
        if replicas_of(&rs.value) != want || annotation(&rs.value, DESIRED_REPLICAS) != Some(want.to_string().as_str())
        {
            plan.push(scale_rs(d, rs, want));
        }
        return plan;
    }
    if let Some(new) = sets.new
        && replicas_of(&new.value) == want
        && status_of(&new.value, "availableReplicas") == want
    {
        for rs in sets.old.iter().filter(|rs| replicas_of(&rs.value) > 0) {
            plan.push(scale_rs(d, rs, 0));
        }
        return plan;
    }
    if recreate(d) {
        return plan;
    }
    let total: i64 = active.iter().map(|rs| replicas_of(&rs.value)).sum();
    let allowed = if want > 0 { want + max_surge(d) } else { 0 };
    let to_add = allowed - total;
    // Larger first; among equals, newer first when growing, older first when shrinking.
    let mut order = active.clone();
    order.sort_by(|a, b| {
        replicas_of(&b.value).cmp(&replicas_of(&a.value)).then_with(|| {
            if to_add > 0 {
                created(&b.value).cmp(&created(&a.value))
            } else {
                created(&a.value).cmp(&created(&b.value))
            }
        })
    });
    let mut sizes: Vec<i64> = order.iter().map(|rs| replicas_of(&rs.value)).collect();
    let mut added = 0;
    if to_add != 0 {
        for (i, rs) in order.iter().enumerate() {
            let annotated = annotation(&rs.value, MAX_REPLICAS).and_then(|a| a.parse::<i64>().ok()).unwrap_or(total);
            let fraction = if want == 0 || annotated == 0 {
                -replicas_of(&rs.value)
            } else {
                let exact = replicas_of(&rs.value) as f64 * (want + max_surge(d)) as f64 / annotated as f64;
                exact.round() as i64 - replicas_of(&rs.value)
            };
            let left = to_add - added;
            let p = if to_add > 0 { fraction.min(left) } else { fraction.max(left) };
            sizes[i] += p;
            added += p;
        }
        if let Some(first) = sizes.first_mut() {
            *first = (*first + to_add - added).max(0);
        }
    }
    for (rs, size) in order.iter().zip(sizes) {
        let size = size.max(0);
        if size != replicas_of(&rs.value) || annotation(&rs.value, DESIRED_REPLICAS) != Some(want.to_string().as_str())
        {
            plan.push(scale_rs(d, rs, size));
        }
    }
    plan
}

/// The replicas a new ReplicaSet may have now (Kubernetes' `NewRSNewReplicas`).
fn new_rs_replicas(d: &Value, sets: &Sets<'_>) -> i64 {
    let want = replicas_of(d);
    if recreate(d) {
        return want;
    }
    let current_new = sets.new.map_or(0, |rs| replicas_of(&rs.value));
    let max_total = want + max_surge(d);
    let current_total = sets.total(replicas_of);
    if current_total >= max_total {
        return current_new;
    }
    current_new + (max_total - current_total).min(want - current_new).max(0)
}

fn rollout_rolling(d: &Stored, sets: &Sets<'_>) -> Plan {
    let mut plan = Plan::none();
    let want = replicas_of(&d.value);
    let Some(new) = sets.new else {
        // No ReplicaSet for this template yet: [`sync_all`] makes it first.
        return plan;
    };
    // Scale the new ReplicaSet up (or down to the Deployment's size).
    let new_replicas = replicas_of(&new.value);
    if new_replicas > want {
        plan.push(scale_rs(&d.value, new, want));
        return plan;
    }
    if new_replicas < want {
        let next = new_rs_replicas(&d.value, sets);
        if next != new_replicas {
            plan.push(scale_rs(&d.value, new, next));
            return plan;
        }
    }
    // Scale old ReplicaSets down as far as availability allows.
    let old_total: i64 = sets.old.iter().map(|rs| replicas_of(&rs.value)).sum();
    if old_total == 0 {
        return plan;
    }
    let all_total = sets.total(replicas_of);
    let min_available = want - max_unavailable(&d.value);
    let new_unavailable = replicas_of(&new.value) - status_of(&new.value, "availableReplicas");
    let max_scaled_down = all_total - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return plan;
    }
    // First the old ReplicaSets' unavailable pods, oldest first.
    let mut sizes: Vec<i64> = sets.old.iter().map(|rs| replicas_of(&rs.value)).collect();
    let mut cleaned = 0;
    for (i, rs) in sets.old.iter().enumerate() {
        if cleaned >= max_scaled_down {
            break;
        }
        if sizes[i] == 0 {
            continue;
        }
        let unhealthy = (sizes[i] - status_of(&rs.value, "availableReplicas")).max(0);
        let down = unhealthy.min(max_scaled_down - cleaned);
        sizes[i] -= down;
        cleaned += down;
    }
    // Then available pods above the minimum.
    let available = sets.total(|v| status_of(v, "availableReplicas"));
    let mut budget = (available - min_available).max(0);
    if budget > 0 {
        for size in sizes.iter_mut() {
            if budget == 0 {
                break;
            }
            let down = (*size).min(budget);
            *size -= down;
            budget -= down;
        }
    }
    for (rs, size) in sets.old.iter().zip(sizes) {
        if size != replicas_of(&rs.value) {
            plan.push(scale_rs(&d.value, rs, size));
        }
    }
    plan
}

fn rollout_recreate(world: &World, d: &Stored, sets: &Sets<'_>) -> Plan {
    let mut plan = Plan::none();
    let active_old: Vec<&&Stored> = sets.old.iter().filter(|rs| replicas_of(&rs.value) > 0).collect();
    if !active_old.is_empty() {
        for rs in active_old {
            plan.push(scale_rs(&d.value, rs, 0));
        }
        return plan;
    }
    // Wait until no old pod runs any more.
    let old_running = sets.old.iter().any(|rs| {
        world
            .pods
            .owned_by(rs.uid())
            .any(|p| !matches!(p.phase, crate::world::Phase::Succeeded | crate::world::Phase::Failed))
    });
    if old_running {
        return plan;
    }
    if let Some(new) = sets.new
        && replicas_of(&new.value) != replicas_of(&d.value)
    {
        plan.push(scale_rs(&d.value, new, replicas_of(&d.value)));
    }
    plan
}

/// The first step of a rollout to a template without a ReplicaSet.
pub(crate) fn create_new_rs(world: &World, ns: &str, name: &str) -> Option<Action> {
    let d = &world.deployments.get(ns, name)?;
    let selector = d.value.pointer("/spec/selector").and_then(|s| LabelSelector::from_json(s).ok())?;
    let mut scratch = Plan::none();
    let owned = claim(world, d, &selector, &mut scratch);
    let paused = d.value.pointer("/spec/paused").and_then(Value::as_bool) == Some(true);
    if d.deleting() || paused || selector.is_empty() {
        return None;
    }
    let template = d.value.pointer("/spec/template").unwrap_or(&Value::Null);
    if owned.iter().any(|rs| equal_ignoring_hash(rs.value.pointer("/spec/template").unwrap_or(&Value::Null), template))
    {
        return None;
    }
    let sets = Sets { new: None, old: owned.iter().collect() };
    if recreate(&d.value) {
        // Recreate makes the new ReplicaSet only once the old pods are gone.
        let old_busy = sets.old.iter().any(|rs| {
            replicas_of(&rs.value) > 0
                || world
                    .pods
                    .owned_by(rs.uid())
                    .any(|p| !matches!(p.phase, crate::world::Phase::Succeeded | crate::world::Phase::Failed))
        });
        if old_busy {
            return None;
        }
    }
    let replicas = new_rs_replicas(&d.value, &sets);
    Some(new_replica_set(world, d, &sets, replicas))
}

/// Kubernetes' `DeploymentComplete` on the status the ReplicaSets give.
fn complete(d: &Value, sets: &Sets<'_>) -> bool {
    let want = replicas_of(d);
    let updated = sets.new.map_or(0, |rs| status_of(&rs.value, "replicas"));
    updated == want
        && sets.total(|v| status_of(v, "replicas")) == want
        && sets.total(|v| status_of(v, "availableReplicas")) == want
}

/// Old ReplicaSets beyond `revisionHistoryLimit` that are scaled to zero
/// and settled, oldest revision first.
fn cleanup(d: &Value, sets: &Sets<'_>) -> Plan {
    let mut plan = Plan::none();
    let Some(limit) = int_at(d, "/spec/revisionHistoryLimit") else { return plan };
    let mut cleanable: Vec<&&Stored> = sets.old.iter().filter(|rs| !rs.deleting()).collect();
    let excess = i64::try_from(cleanable.len()).unwrap_or(0) - limit;
    if excess <= 0 {
        return plan;
    }
    cleanable.sort_by_key(|rs| (revision_of(&rs.value), created(&rs.value)));
    for rs in cleanable.into_iter().take(usize::try_from(excess).unwrap_or(0)) {
        let settled = status_of(&rs.value, "replicas") == 0
            && replicas_of(&rs.value) == 0
            && int_at(&rs.value, "/metadata/generation").unwrap_or(0) <= status_of(&rs.value, "observedGeneration");
        if settled {
            plan.push(Action::delete(&REPLICA_SETS, str_at(&rs.value, "/metadata/namespace"), rs.name(), rs.uid()));
        }
    }
    plan
}

/// Adds the status write (if anything changed) to `plan`.
fn with_status(
    mut plan: Plan,
    d: &Stored,
    sets: &Sets<'_>,
    mut conditions: Vec<Value>,
    now: OffsetDateTime,
    paused: bool,
) -> Plan {
    let v = &d.value;
    let now_s = edgehive_store::rfc3339(now);
    let want = replicas_of(v);
    let available = sets.total(|x| status_of(x, "availableReplicas"));
    let total_spec = sets.total(replicas_of);
    let replicas = sets.total(|x| status_of(x, "replicas"));
    let updated = sets.new.map_or(0, |rs| status_of(&rs.value, "replicas"));
    let ready = sets.total(|x| status_of(x, "readyReplicas"));
    let unavailable = (total_spec - available).max(0);
    if available >= want - max_unavailable(v) {
        set_condition(
            &mut conditions,
            condition("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability.", &now_s),
        );
    } else {
        set_condition(
            &mut conditions,
            condition(
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
                &now_s,
            ),
        );
    }
    let generation = int_at(v, "/metadata/generation").unwrap_or(0);
    if has_deadline(v) && !paused && !d.deleting() {
        let current = find_condition(&conditions, "Progressing").cloned();
        let is_complete =
            replicas == updated && current.as_ref().is_some_and(|c| c["reason"] == "NewReplicaSetAvailable");
        let rs_name = sets.new.map(|rs| rs.name().to_string()).unwrap_or_default();
        let done = updated == want && replicas == want && available == want;
        let progressed = updated > status_of(v, "updatedReplicas")
            || (replicas - updated) < (status_of(v, "replicas") - status_of(v, "updatedReplicas"))
            || ready > status_of(v, "readyReplicas")
            || available > status_of(v, "availableReplicas");
        if !is_complete && sets.new.is_some() {
            if done {
                set_condition(
                    &mut conditions,
                    condition(
                        "Progressing",
                        "True",
                        "NewReplicaSetAvailable",
                        &format!("ReplicaSet {rs_name:?} has successfully progressed."),
                        &now_s,
                    ),
                );
            } else if progressed {
                let mut c = condition(
                    "Progressing",
                    "True",
                    "ReplicaSetUpdated",
                    &format!("ReplicaSet {rs_name:?} is progressing."),
                    &now_s,
                );
                // Progress moves lastUpdateTime even when the reason stays.
                if let Some(cur) = &current
                    && cur["status"] == "True"
                {
                    c["lastTransitionTime"] = cur["lastTransitionTime"].clone();
                }
                conditions.retain(|x| x["type"] != "Progressing");
                conditions.push(c);
            } else if let Some(cur) = &current
                && cur["reason"] != "ProgressDeadlineExceeded"
                && cur["reason"] != "NewReplicaSetAvailable"
            {
                let deadline = int_at(v, "/spec/progressDeadlineSeconds").unwrap_or(600);
                let since = cur["lastUpdateTime"].as_str().and_then(edgehive_store::parse_rfc3339).unwrap_or(now);
                let at = since + time::Duration::seconds(deadline);
                if at < now {
                    set_condition(
                        &mut conditions,
                        condition(
                            "Progressing",
                            "False",
                            "ProgressDeadlineExceeded",
                            &format!("ReplicaSet {rs_name:?} has timed out progressing."),
                            &now_s,
                        ),
                    );
                } else {
                    let left = at - now;
                    plan.requeue(Duration::from_millis(u64::try_from(left.whole_milliseconds()).unwrap_or(0) + 1));
                }
            }
        }
    }
    let mut status = Map::new();
    status.insert("observedGeneration".into(), json!(generation));
    for (k, n) in [
        ("replicas", replicas),
        ("updatedReplicas", updated),
        ("readyReplicas", ready),
        ("availableReplicas", available),
        ("unavailableReplicas", unavailable),
    ] {
        if n != 0 {
            status.insert(k.into(), json!(n));
        }
    }
    if let Some(c) = collision_count(v) {
        status.insert("collisionCount".into(), json!(c));
    }
    status.insert("conditions".into(), Value::Array(conditions));
    let new_status = Value::Object(status);
    let old_status = v.get("status").cloned().unwrap_or_else(|| json!({}));
    if let Some(patch) = crate::plan::merge_diff(&old_status, &new_status) {
        plan.push(patch_deployment(d, json!({"status": patch})));
    }
    plan
}

/// One sync including the first step (a new ReplicaSet) when the
/// Deployment's template has none yet.
pub fn sync_all(world: &World, ns: &str, name: &str, now: OffsetDateTime) -> Plan {
    if let Some(create) = create_new_rs(world, ns, name) {
        let mut plan = Plan::none();
        let d = world.deployments.get(ns, name);
        plan.push(create);
        // The Progressing condition says it at once.
        if let Some(d) = &d
            && has_deadline(&d.value)
        {
            let now_s = edgehive_store::rfc3339(now);
            let mut conditions: Vec<Value> =
                d.value.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
            let rs_name = new_rs_name(d);
            set_condition(
                &mut conditions,
                condition(
                    "Progressing",
                    "True",
                    "NewReplicaSetCreated",
                    &format!("Created new replica set {rs_name:?}"),
                    &now_s,
                ),
            );
            plan.push(patch_deployment(d, json!({"status": {"conditions": conditions}})));
        }
        return plan;
    }
    sync(world, ns, name, now)
}
