//! apps/v1 rules, from Kubernetes 1.32's `pkg/apis/apps/validation` and the apps strategies
//! (`pkg/registry/apps/*/strategy.go`): Deployment, ReplicaSet, DaemonSet, StatefulSet and
//! ControllerRevision on create and update.
//!
//! Where Kubernetes runs a spec's rules twice on update (the strategies call both `ValidateX` and
//! `ValidateXUpdate`, which validates the spec again), each error is reported once.

use super::json::{self, arr_at, child, get, int_at, str_at, string_map};
use super::meta::{self, MetaRules};
use super::workloads::{
    FIELD_IMMUTABLE, NEGATIVE, Selector, always_restarting, go_int_or_string, go_label_selector, int_or_percent_value,
    invalid_selector, nonnegative, not_more_than_100_percent, object, positive_int_or_percent, template_labels_match,
    validate_label_selector, validate_pod_template,
};
use super::{FieldError, KindInfo, go_quote};
use serde_json::Value;

/// An apps/v1 object on create.
pub(crate) fn validate(kind: &str, obj: &Value, info: KindInfo) -> Vec<FieldError> {
    let rules = MetaRules { namespaced: info.namespaced, name_rule: info.name_rule, kube_finalizers: true };
    let mut errs = meta::validate(get(obj, "metadata"), rules);
    let spec = get(obj, "spec");
    errs.extend(match kind {
        "Deployment" => deployment_spec(spec),
        "ReplicaSet" => replica_set_spec(spec),
        "DaemonSet" => daemon_set_spec(spec),
        "StatefulSet" => stateful_set_spec(spec),
        "ControllerRevision" => controller_revision(obj),
        _ => Vec::new(),
    });
    errs
}

/// An apps/v1 object on update (metadata immutability is checked by the caller): the create rules, then
/// what may not change.
pub(crate) fn validate_update(kind: &str, new: &Value, old: &Value, info: KindInfo) -> Vec<FieldError> {
    let mut errs = validate(kind, new, info);
    let (new_spec, old_spec) = (get(new, "spec"), get(old, "spec"));
    match kind {
        // apps/v1 forbids changing the selector (the strategies' ValidateUpdate).
        "Deployment" | "ReplicaSet" | "DaemonSet" => {
            let sel = get(new_spec, "selector");
            if !json::same(sel, get(old_spec, "selector")) {
                let text = if sel.is_null() { go_quote("null") } else { go_label_selector(sel) };
                errs.push(FieldError::invalid("spec.selector", sel.clone(), FIELD_IMMUTABLE).with_value_text(text));
            }
        }
        "StatefulSet" => errs.extend(stateful_set_spec_update(new_spec, old_spec)),
        "ControllerRevision" => {
            let data = get(new, "data");
            if !json::same(data, get(old, "data")) {
                errs.push(FieldError::invalid("data", data.clone(), FIELD_IMMUTABLE));
            }
        }
        _ => {}
    }
    errs
}

/// A required, non-empty selector (Deployment, ReplicaSet, StatefulSet): `what` names the kind in the
/// empty-selector message, as Kubernetes words it (a ReplicaSet's says "deployment").
fn required_selector(spec: &Value, what: &str) -> Vec<FieldError> {
    let sel = get(spec, "selector");
    if sel.is_null() {
        return vec![FieldError::required("spec.selector", "")];
    }
    let mut errs = validate_label_selector(sel, "spec.selector");
    if string_map(sel, "matchLabels").is_empty() && arr_at(sel, "matchExpressions").is_empty() {
        errs.push(invalid_selector("spec.selector", sel, &format!("empty selector is invalid for {what}")));
    }
    errs
}

/// `ValidatePodTemplateSpecForReplicaSet`, after the selector converted (Deployment, ReplicaSet).
fn replica_set_template(spec: &Value) -> Vec<FieldError> {
    let sel = get(spec, "selector");
    let Some(selector) = Selector::from_label_selector(sel) else {
        return vec![invalid_selector("spec.selector", sel, "invalid label selector")];
    };
    let template = get(spec, "template");
    let mut errs = Vec::new();
    if !selector.is_empty() {
        errs.extend(template_labels_match(&selector, template, "spec.template"));
    }
    errs.extend(validate_pod_template(template, "spec.template", true));
    errs.extend(always_restarting(template, "spec.template", "ReplicaSet"));
    errs
}

/// `ValidateDeploymentSpec`.
fn deployment_spec(spec: &Value) -> Vec<FieldError> {
    let mut errs: Vec<FieldError> = nonnegative(spec, "replicas", "spec").into_iter().collect();
    errs.extend(required_selector(spec, "deployment"));
    errs.extend(replica_set_template(spec));
    errs.extend(deployment_strategy(get(spec, "strategy"), "spec.strategy"));
    errs.extend(nonnegative(spec, "minReadySeconds", "spec"));
    errs.extend(nonnegative(spec, "revisionHistoryLimit", "spec"));
    if let Some(deadline) = int_at(spec, "progressDeadlineSeconds") {
        errs.extend(nonnegative(spec, "progressDeadlineSeconds", "spec"));
        if deadline <= int_at(spec, "minReadySeconds").unwrap_or(0) {
            errs.push(FieldError::invalid(
                "spec.progressDeadlineSeconds",
                deadline,
                "must be greater than minReadySeconds",
            ));
        }
    }
    errs
}

/// Go's `%#v` of a strategy struct with its `RollingUpdate` pointer (an address is shown as Go shows one).
fn go_strategy(go_type: &str, pointer_type: &str, strategy: &Value) -> String {
    let pointer = if json::has(strategy, "rollingUpdate") { "0xc000010000" } else { "nil" };
    format!("{go_type}{{Type:{}, RollingUpdate:(*{pointer_type})({pointer})}}", go_quote(str_at(strategy, "type")))
}

/// `ValidateDeploymentStrategy`.
fn deployment_strategy(strategy: &Value, path: &str) -> Vec<FieldError> {
    let rolling = get(strategy, "rollingUpdate");
    let rolling_path = child(path, "rollingUpdate");
    match str_at(strategy, "type") {
        "Recreate" if !rolling.is_null() => {
            vec![FieldError::forbidden(&rolling_path, "may not be specified when strategy `type` is 'Recreate'")]
        }
        "Recreate" => Vec::new(),
        "RollingUpdate" if rolling.is_null() => {
            vec![FieldError::required(&rolling_path, "this should be defaulted and never be nil")]
        }
        "RollingUpdate" => rolling_update_deployment(rolling, &rolling_path),
        other => {
            vec![FieldError::not_supported(path, other, &["Recreate", "RollingUpdate"]).with_value_text(go_strategy(
                "apps.DeploymentStrategy",
                "apps.RollingUpdateDeployment",
                strategy,
            ))]
        }
    }
}

/// `ValidateRollingUpdateDeployment`.
fn rolling_update_deployment(rolling: &Value, path: &str) -> Vec<FieldError> {
    let (unavailable, surge) = (get(rolling, "maxUnavailable"), get(rolling, "maxSurge"));
    let unavailable_path = child(path, "maxUnavailable");
    let mut errs = positive_int_or_percent(unavailable, &unavailable_path);
    errs.extend(positive_int_or_percent(surge, &child(path, "maxSurge")));
    if int_or_percent_value(unavailable) == 0 && int_or_percent_value(surge) == 0 {
        errs.push(
            FieldError::invalid(&unavailable_path, unavailable.clone(), "may not be 0 when `maxSurge` is 0")
                .with_value_text(go_int_or_string(unavailable)),
        );
    }
    errs.extend(not_more_than_100_percent(unavailable, &unavailable_path));
    errs
}

/// `ValidateReplicaSetSpec`.
fn replica_set_spec(spec: &Value) -> Vec<FieldError> {
    let mut errs: Vec<FieldError> = nonnegative(spec, "replicas", "spec").into_iter().collect();
    errs.extend(nonnegative(spec, "minReadySeconds", "spec"));
    errs.extend(required_selector(spec, "deployment"));
    errs.extend(replica_set_template(spec));
    errs
}

/// `ValidateDaemonSetSpec`: the selector is not required, but without one nothing matches the template.
fn daemon_set_spec(spec: &Value) -> Vec<FieldError> {
    let sel = get(spec, "selector");
    let template = get(spec, "template");
    let mut errs = validate_label_selector(sel, "spec.selector");
    if let Some(selector) = Selector::from_label_selector(sel) {
        errs.extend(template_labels_match(&selector, template, "spec.template"));
    }
    if !sel.is_null() && string_map(sel, "matchLabels").is_empty() && arr_at(sel, "matchExpressions").is_empty() {
        errs.push(invalid_selector("spec.selector", sel, "empty selector is invalid for daemonset"));
    }
    errs.extend(validate_pod_template(template, "spec.template", true));
    errs.extend(always_restarting(template, "spec.template", "DaemonSet"));
    errs.extend(nonnegative(spec, "minReadySeconds", "spec"));
    errs.extend(daemon_set_update_strategy(get(spec, "updateStrategy"), "spec.updateStrategy"));
    errs.extend(nonnegative(spec, "revisionHistoryLimit", "spec"));
    errs
}

/// `ValidateDaemonSetUpdateStrategy`.
fn daemon_set_update_strategy(strategy: &Value, path: &str) -> Vec<FieldError> {
    let rolling = get(strategy, "rollingUpdate");
    match str_at(strategy, "type") {
        "OnDelete" => Vec::new(),
        "RollingUpdate" if rolling.is_null() => vec![FieldError::required(&child(path, "rollingUpdate"), "")],
        "RollingUpdate" => rolling_update_daemon_set(rolling, &child(path, "rollingUpdate")),
        other => {
            vec![FieldError::not_supported(path, other, &["RollingUpdate", "OnDelete"]).with_value_text(go_strategy(
                "apps.DaemonSetUpdateStrategy",
                "apps.RollingUpdateDaemonSet",
                strategy,
            ))]
        }
    }
}

/// `ValidateRollingUpdateDaemonSet`: exactly one of maxSurge and maxUnavailable is non-zero.
fn rolling_update_daemon_set(rolling: &Value, path: &str) -> Vec<FieldError> {
    let (unavailable, surge) = (get(rolling, "maxUnavailable"), get(rolling, "maxSurge"));
    let (unavailable_path, surge_path) = (child(path, "maxUnavailable"), child(path, "maxSurge"));
    let mut errs = positive_int_or_percent(unavailable, &unavailable_path);
    errs.extend(positive_int_or_percent(surge, &surge_path));
    errs.extend(not_more_than_100_percent(unavailable, &unavailable_path));
    errs.extend(not_more_than_100_percent(surge, &surge_path));
    match (int_or_percent_value(unavailable) != 0, int_or_percent_value(surge) != 0) {
        (true, true) => errs.push(
            FieldError::invalid(&surge_path, surge.clone(), "may not be set when maxUnavailable is non-zero")
                .with_value_text(go_int_or_string(surge)),
        ),
        (false, false) => errs.push(FieldError::required(&unavailable_path, "cannot be 0 when maxSurge is 0")),
        _ => {}
    }
    errs
}

/// `ValidateStatefulSetSpec`. As in Kubernetes, the template's pod spec is not validated (only its labels
/// and annotations); `volumeClaimTemplates` are refused: this server has no persistent volumes.
fn stateful_set_spec(spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match str_at(spec, "podManagementPolicy") {
        "" => errs.push(FieldError::required("spec.podManagementPolicy", "")),
        "OrderedReady" | "Parallel" => {}
        other => {
            errs.push(FieldError::invalid("spec.podManagementPolicy", other, "must be 'OrderedReady' or 'Parallel'"))
        }
    }
    let strategy = get(spec, "updateStrategy");
    let rolling = get(strategy, "rollingUpdate");
    match str_at(strategy, "type") {
        "" => errs.push(FieldError::required("spec.updateStrategy", "")),
        "OnDelete" if !rolling.is_null() => errs.push(
            FieldError::invalid(
                "spec.updateStrategy.rollingUpdate",
                rolling.clone(),
                "only allowed for updateStrategy 'RollingUpdate'",
            )
            .with_value_text(go_rolling_update_stateful_set(rolling)),
        ),
        "OnDelete" => {}
        "RollingUpdate" if !rolling.is_null() => {
            errs.extend(rolling_update_stateful_set(rolling, "spec.updateStrategy.rollingUpdate"));
        }
        "RollingUpdate" => {}
        _ => errs.push(
            FieldError::invalid("spec.updateStrategy", strategy.clone(), "must be 'RollingUpdate' or 'OnDelete'")
                .with_value_text(go_strategy(
                    "apps.StatefulSetUpdateStrategy",
                    "apps.RollingUpdateStatefulSetStrategy",
                    strategy,
                )),
        ),
    }
    if let Some(policy) = object(spec, "persistentVolumeClaimRetentionPolicy") {
        for field in ["whenDeleted", "whenScaled"] {
            let value = str_at(policy, field);
            if value != "Retain" && value != "Delete" {
                errs.push(FieldError::not_supported(
                    &child("spec.persistentVolumeClaimRetentionPolicy", field),
                    value,
                    &["Retain", "Delete"],
                ));
            }
        }
    }
    errs.extend(nonnegative(spec, "replicas", "spec"));
    errs.extend(nonnegative(spec, "minReadySeconds", "spec"));
    if let Some(start) = object(spec, "ordinals").and_then(|o| int_at(o, "start")).filter(|s| *s < 0) {
        errs.push(FieldError::invalid("spec.ordinals.start", start, NEGATIVE));
    }
    errs.extend(required_selector(spec, "statefulset"));
    let sel = get(spec, "selector");
    let template = get(spec, "template");
    match Selector::from_label_selector(sel) {
        None => errs.push(invalid_selector("spec.selector", sel, "")),
        Some(selector) => {
            if !selector.is_empty() {
                errs.extend(template_labels_match(&selector, template, "spec.template"));
            }
            errs.extend(validate_pod_template(template, "spec.template", false));
        }
    }
    errs.extend(always_restarting(template, "spec.template", "StatefulSet"));
    if !arr_at(spec, "volumeClaimTemplates").is_empty() {
        errs.push(FieldError::forbidden(
            "spec.volumeClaimTemplates",
            "volumeClaimTemplates are not supported by this server",
        ));
    }
    errs
}

/// `%#v` of an `apps.RollingUpdateStatefulSetStrategy` (the internal partition is a plain int32).
fn go_rolling_update_stateful_set(rolling: &Value) -> String {
    let pointer = if json::has(rolling, "maxUnavailable") { "0xc000010000" } else { "nil" };
    format!(
        "apps.RollingUpdateStatefulSetStrategy{{Partition:{}, MaxUnavailable:(*intstr.IntOrString)({pointer})}}",
        int_at(rolling, "partition").unwrap_or(0)
    )
}

/// `validateRollingUpdateStatefulSet`.
fn rolling_update_stateful_set(rolling: &Value, path: &str) -> Vec<FieldError> {
    let mut errs: Vec<FieldError> = nonnegative(rolling, "partition", path).into_iter().collect();
    let unavailable = get(rolling, "maxUnavailable");
    if !unavailable.is_null() {
        let at = child(path, "maxUnavailable");
        errs.extend(positive_int_or_percent(unavailable, &at));
        if int_or_percent_value(unavailable) == 0 {
            errs.push(
                FieldError::invalid(&at, unavailable.clone(), "cannot be 0")
                    .with_value_text(go_int_or_string(unavailable)),
            );
        }
        errs.extend(not_more_than_100_percent(unavailable, &at));
    }
    errs
}

/// The spec fields a StatefulSet update may change (`ValidateStatefulSetUpdate`).
const STATEFUL_SET_MUTABLE: &[&str] =
    &["replicas", "template", "updateStrategy", "minReadySeconds", "ordinals", "persistentVolumeClaimRetentionPolicy"];

fn stateful_set_spec_update(new: &Value, old: &Value) -> Option<FieldError> {
    let strip = |spec: &Value| {
        let mut s = spec.clone();
        if let Some(m) = s.as_object_mut() {
            for field in STATEFUL_SET_MUTABLE {
                m.remove(*field);
            }
        }
        s
    };
    (!json::same(&strip(new), &strip(old))).then(|| {
        FieldError::forbidden(
            "spec",
            "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', \
             'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
        )
    })
}

/// `ValidateControllerRevision` (after the metadata).
fn controller_revision(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if !json::has(obj, "data") {
        errs.push(FieldError::required("data", "data is mandatory"));
    }
    errs.extend(nonnegative(obj, "revision", ""));
    errs
}
