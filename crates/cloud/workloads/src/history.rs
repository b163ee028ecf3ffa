//! Template history as ControllerRevisions, shared by the DaemonSet and
//! StatefulSet controllers (Kubernetes' `pkg/controller/history`): one
//! revision per distinct template, named `{owner}-{hash}`, numbered in the
//! order the templates were first (or last, after `rollout undo`) used,
//! holding a patch that puts the template back, and trimmed to
//! `revisionHistoryLimit` among those no pod still runs.

use edgehive_store::resources::{CONTROLLER_REVISIONS, ResourceDef};
use serde_json::{Value, json};

use crate::plan::{Action, Plan};
use crate::world::{OwnerRef, Stored, int_at, str_at};

/// The label of a DaemonSet's (or StatefulSet's) pods and revisions: the
/// template's hash (a StatefulSet's pods carry the revision's name in it).
pub const REVISION_HASH: &str = "controller-revision-hash";

/// The revision a ControllerRevision records.
pub fn number(cr: &Value) -> i64 {
    int_at(cr, "/revision").unwrap_or(0)
}

/// The template hash a ControllerRevision is labelled with.
pub fn hash_of(cr: &Stored) -> Option<&str> {
    cr.value.pointer(&format!("/metadata/labels/{REVISION_HASH}")).and_then(Value::as_str)
}

/// The pod template a revision holds.
pub fn template_of(cr: &Stored) -> Option<Value> {
    let mut t = cr.value.pointer("/data/spec/template")?.clone();
    t.as_object_mut()?.remove("$patch");
    Some(t)
}

/// The revision of `owner` (of `owner_res`) for the template hashed
/// `hash`, when it exists and is the newest. Otherwise the plan that makes
/// it so: a new revision, or an old one renumbered as the newest (an old
/// template came back, as `rollout undo` does).
pub fn current<'a>(
    owner_res: &'static ResourceDef,
    owner: &Stored,
    revisions: &[&'a Stored],
    template: &Value,
    hash: &str,
) -> Result<&'a Stored, Plan> {
    let newest = revisions.iter().map(|r| number(&r.value)).max().unwrap_or(0);
    let mut plan = Plan::none();
    match revisions.iter().find(|r| hash_of(r) == Some(hash)) {
        Some(cr) if number(&cr.value) >= newest => return Ok(cr),
        Some(cr) => plan.push(Action::Patch {
            res: &CONTROLLER_REVISIONS,
            namespace: str_at(&cr.value, "/metadata/namespace").to_string(),
            name: cr.name().to_string(),
            uid: cr.uid().to_string(),
            rev: Some(cr.rev),
            patch: json!({"revision": newest + 1}),
        }),
        None => plan.push(create(owner_res, owner, template, hash, newest + 1)),
    }
    Err(plan)
}

/// A ControllerRevision for `owner`'s template.
fn create(owner_res: &'static ResourceDef, owner: &Stored, template: &Value, hash: &str, revision: i64) -> Action {
    let mut labels = template.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({}));
    labels[REVISION_HASH] = json!(hash);
    let mut data = template.clone();
    data["$patch"] = json!("replace");
    Action::Create {
        res: &CONTROLLER_REVISIONS,
        object: json!({
            "apiVersion": "apps/v1",
            "kind": "ControllerRevision",
            "metadata": {
                "name": format!("{}-{hash}", owner.name()),
                "namespace": str_at(&owner.value, "/metadata/namespace"),
                "labels": labels,
                "annotations": owner.value.pointer("/metadata/annotations").cloned().unwrap_or_else(|| json!({})),
                "ownerReferences": [OwnerRef::controller_to(owner_res, &owner.value)],
            },
            "data": {"spec": {"template": data}},
            "revision": revision,
        }),
    }
}

/// Deletes the oldest revisions beyond `revisionHistoryLimit` among those
/// not `in_use`.
pub fn cleanup(owner: &Stored, revisions: &[&Stored], in_use: impl Fn(&Stored) -> bool) -> Plan {
    let mut plan = Plan::none();
    let limit = int_at(&owner.value, "/spec/revisionHistoryLimit").unwrap_or(10).max(0);
    let mut old: Vec<&&Stored> = revisions.iter().filter(|r| !in_use(r) && !r.deleting()).collect();
    let excess = i64::try_from(old.len()).unwrap_or(0) - limit;
    if excess <= 0 {
        return plan;
    }
    old.sort_by_key(|r| number(&r.value));
    for r in old.into_iter().take(usize::try_from(excess).unwrap_or(0)) {
        plan.push(Action::delete(&CONTROLLER_REVISIONS, str_at(&r.value, "/metadata/namespace"), r.name(), r.uid()));
    }
    plan
}
