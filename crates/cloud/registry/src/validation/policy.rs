//! policy/v1 rules, from Kubernetes 1.32's `pkg/apis/policy/validation`: a PodDisruptionBudget names at
//! most one of minAvailable and maxUnavailable, each a non-negative count or a percentage up to 100 %;
//! its selector is a valid label selector; `unhealthyPodEvictionPolicy` is one Kubernetes knows; its
//! status counts are never negative. The spec may change on update (since Kubernetes 1.15).

use super::json::{get, int_at, str_at};
use super::meta::{self, MetaRules};
use super::workloads::{not_more_than_100_percent, positive_int_or_percent, validate_label_selector};
use super::{FieldError, KindInfo};
use serde_json::Value;

/// What `unhealthyPodEvictionPolicy` may say.
pub(crate) const UNHEALTHY_POD_EVICTION_POLICIES: &[&str] = &["AlwaysAllow", "IfHealthyBudget"];

/// A policy/v1 object, created or updated (metadata immutability is checked by the caller).
pub(crate) fn validate(kind: &str, obj: &Value, info: KindInfo) -> Vec<FieldError> {
    let rules = MetaRules { namespaced: info.namespaced, name_rule: info.name_rule, kube_finalizers: true };
    let mut errs = meta::validate(get(obj, "metadata"), rules);
    if kind != "PodDisruptionBudget" {
        return errs;
    }
    let spec = get(obj, "spec");
    let (min, max) = (get(spec, "minAvailable"), get(spec, "maxUnavailable"));
    if !min.is_null() && !max.is_null() {
        errs.push(FieldError::invalid_omit("spec", "minAvailable and maxUnavailable cannot be both set"));
    }
    for (value, path) in [(min, "spec.minAvailable"), (max, "spec.maxUnavailable")] {
        if !value.is_null() {
            errs.extend(positive_int_or_percent(value, path));
            errs.extend(not_more_than_100_percent(value, path));
        }
    }
    errs.extend(validate_label_selector(get(spec, "selector"), "spec.selector"));
    let policy = str_at(spec, "unhealthyPodEvictionPolicy");
    if !get(spec, "unhealthyPodEvictionPolicy").is_null() && !UNHEALTHY_POD_EVICTION_POLICIES.contains(&policy) {
        errs.push(FieldError::not_supported(
            "spec.unhealthyPodEvictionPolicy",
            policy,
            UNHEALTHY_POD_EVICTION_POLICIES,
        ));
    }
    let status = get(obj, "status");
    for field in ["disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"] {
        if let Some(n) = int_at(status, field).filter(|n| *n < 0) {
            errs.push(FieldError::invalid(&format!("status.{field}"), n, "must be greater than or equal to 0"));
        }
    }
    errs
}
