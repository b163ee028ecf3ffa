//! rbac.authorization.k8s.io/v1 rules, from Kubernetes 1.32's `pkg/apis/rbac/validation` and the
//! defaults of `pkg/apis/rbac/v1/defaults.go`: names are path segments (no `/`, no `%`, not `.` or
//! `..`); a rule has verbs and either non-resource URLs (ClusterRoles only, nothing else beside them)
//! or groups and resources; an aggregation rule has at least one valid selector; a binding refers to
//! a Role or ClusterRole of this group by a valid name (a ClusterRoleBinding to a ClusterRole only)
//! and may not change it; subjects are a User or Group of this group, or a ServiceAccount (no group;
//! a namespace in a ClusterRoleBinding) with a DNS subdomain name.

use serde_json::{Map, Value, json};

use super::json::{arr_at, get, str_at};
use super::meta::{self, MetaRules};
use super::names::NameRule;
use super::workloads::validate_label_selector;
use super::{FieldError, KindInfo};

/// The API group.
pub(crate) const GROUP: &str = "rbac.authorization.k8s.io";

/// Kubernetes' defaults: a binding's `roleRef.apiGroup` and a User or Group subject's `apiGroup` are
/// this group when empty.
pub(crate) fn apply_defaults(kind: &str, root: &mut Map<String, Value>) {
    if !matches!(kind, "RoleBinding" | "ClusterRoleBinding") {
        return;
    }
    if let Some(role_ref) = root.get_mut("roleRef").and_then(Value::as_object_mut)
        && role_ref.get("apiGroup").and_then(Value::as_str).is_none_or(str::is_empty)
    {
        role_ref.insert("apiGroup".into(), json!(GROUP));
    }
    for subject in root.get_mut("subjects").and_then(Value::as_array_mut).into_iter().flatten() {
        let Some(s) = subject.as_object_mut() else { continue };
        let user_or_group = matches!(s.get("kind").and_then(Value::as_str), Some("User" | "Group"));
        if user_or_group && s.get("apiGroup").and_then(Value::as_str).is_none_or(str::is_empty) {
            s.insert("apiGroup".into(), json!(GROUP));
        }
    }
}

fn strings(v: &Value, key: &str) -> Vec<Value> {
    arr_at(v, key).to_vec()
}

fn policy_rule(rule: &Value, namespaced: bool, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if arr_at(rule, "verbs").is_empty() {
        errs.push(FieldError::required(&format!("{path}.verbs"), "verbs must contain at least one value"));
    }
    let urls = strings(rule, "nonResourceURLs");
    if !urls.is_empty() {
        let field = format!("{path}.nonResourceURLs");
        if namespaced {
            errs.push(FieldError::invalid(&field, urls.clone(), "namespaced rules cannot apply to non-resource URLs"));
        }
        if ["apiGroups", "resources", "resourceNames"].iter().any(|k| !arr_at(rule, k).is_empty()) {
            errs.push(FieldError::invalid(
                &field,
                urls,
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return errs;
    }
    if arr_at(rule, "apiGroups").is_empty() {
        errs.push(FieldError::required(
            &format!("{path}.apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if arr_at(rule, "resources").is_empty() {
        errs.push(FieldError::required(
            &format!("{path}.resources"),
            "resource rules must supply at least one resource",
        ));
    }
    errs
}

fn subject(s: &Value, namespaced: bool, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = str_at(s, "name");
    let group = str_at(s, "apiGroup");
    if name.is_empty() {
        errs.push(FieldError::required(&format!("{path}.name"), ""));
    }
    match str_at(s, "kind") {
        "ServiceAccount" => {
            if !name.is_empty() {
                for msg in NameRule::Subdomain.check(name, false) {
                    errs.push(FieldError::invalid(&format!("{path}.name"), name, msg));
                }
            }
            if !group.is_empty() {
                errs.push(FieldError::not_supported(&format!("{path}.apiGroup"), group, &[""]));
            }
            if !namespaced && str_at(s, "namespace").is_empty() {
                errs.push(FieldError::required(&format!("{path}.namespace"), ""));
            }
        }
        "User" | "Group" => {
            if group != GROUP {
                errs.push(FieldError::not_supported(&format!("{path}.apiGroup"), group, &[GROUP]));
            }
        }
        other => {
            errs.push(FieldError::not_supported(&format!("{path}.kind"), other, &["ServiceAccount", "User", "Group"]));
        }
    }
    errs
}

fn binding(kind: &str, obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let role_ref = get(obj, "roleRef");
    let group = str_at(role_ref, "apiGroup");
    if group != GROUP {
        errs.push(FieldError::not_supported("roleRef.apiGroup", group, &[GROUP]));
    }
    let namespaced = kind == "RoleBinding";
    let ref_kind = str_at(role_ref, "kind");
    let kinds: &[&str] = if namespaced { &["Role", "ClusterRole"] } else { &["ClusterRole"] };
    if !kinds.contains(&ref_kind) {
        errs.push(FieldError::not_supported("roleRef.kind", ref_kind, kinds));
    }
    let name = str_at(role_ref, "name");
    if name.is_empty() {
        errs.push(FieldError::required("roleRef.name", ""));
    } else {
        for msg in NameRule::PathSegment.check(name, false) {
            errs.push(FieldError::invalid("roleRef.name", name, msg));
        }
    }
    for (i, s) in arr_at(obj, "subjects").iter().enumerate() {
        errs.extend(subject(s, namespaced, &format!("subjects[{i}]")));
    }
    errs
}

/// An rbac/v1 object, created or updated (metadata immutability is checked by the caller).
pub(crate) fn validate(kind: &str, obj: &Value, info: KindInfo) -> Vec<FieldError> {
    let rules = MetaRules { namespaced: info.namespaced, name_rule: NameRule::PathSegment, kube_finalizers: false };
    let mut errs = meta::validate(get(obj, "metadata"), rules);
    match kind {
        "Role" | "ClusterRole" => {
            let namespaced = kind == "Role";
            for (i, rule) in arr_at(obj, "rules").iter().enumerate() {
                errs.extend(policy_rule(rule, namespaced, &format!("rules[{i}]")));
            }
            let aggregation = get(obj, "aggregationRule");
            if kind == "ClusterRole" && !aggregation.is_null() {
                let selectors = arr_at(aggregation, "clusterRoleSelectors");
                if selectors.is_empty() {
                    errs.push(FieldError::required(
                        "aggregationRule.clusterRoleSelectors",
                        "at least one clusterRoleSelector required if aggregationRule is non-nil",
                    ));
                }
                for (i, sel) in selectors.iter().enumerate() {
                    errs.extend(validate_label_selector(sel, &format!("aggregationRule.clusterRoleSelectors[{i}]")));
                }
            }
        }
        "RoleBinding" | "ClusterRoleBinding" => errs.extend(binding(kind, obj)),
        _ => {}
    }
    errs
}

/// An update: what [`validate`] checks, and a binding's `roleRef` may not change.
pub(crate) fn validate_update(kind: &str, new: &Value, old: &Value, info: KindInfo) -> Vec<FieldError> {
    let mut errs = validate(kind, new, info);
    if matches!(kind, "RoleBinding" | "ClusterRoleBinding") && get(new, "roleRef") != get(old, "roleRef") {
        let r = get(new, "roleRef");
        let text = format!(
            "rbac.RoleRef{{APIGroup:{:?}, Kind:{:?}, Name:{:?}}}",
            str_at(r, "apiGroup"),
            str_at(r, "kind"),
            str_at(r, "name")
        );
        errs.push(FieldError::invalid("roleRef", r.clone(), "cannot change roleRef").with_value_text(text));
    }
    errs
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::validation::kind_info;

    fn messages(kind: &str, obj: Value) -> Vec<String> {
        let info = kind_info(GROUP, kind).unwrap();
        validate(kind, &obj, info).iter().map(FieldError::message).collect()
    }

    #[test]
    fn rules_need_verbs_and_either_resources_or_urls() {
        let role = json!({"metadata": {"name": "r", "namespace": "default"}, "rules": [
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
            {"apiGroups": [""], "resources": ["pods"]},
            {"verbs": ["get"]},
            {"verbs": ["get"], "nonResourceURLs": ["/healthz"]},
        ]});
        assert_eq!(
            messages("Role", role),
            [
                "rules[1].verbs: Required value: verbs must contain at least one value",
                "rules[2].apiGroups: Required value: resource rules must supply at least one api group",
                "rules[2].resources: Required value: resource rules must supply at least one resource",
                "rules[3].nonResourceURLs: Invalid value: []string{\"/healthz\"}: namespaced rules cannot apply to non-resource URLs",
            ]
        );
        let mixed = json!({"metadata": {"name": "c"}, "rules": [
            {"verbs": ["get"], "nonResourceURLs": ["/x"], "resources": ["pods"]},
        ], "aggregationRule": {}});
        assert_eq!(
            messages("ClusterRole", mixed),
            [
                "rules[0].nonResourceURLs: Invalid value: []string{\"/x\"}: rules cannot apply to both regular resources and non-resource URLs",
                "aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil",
            ]
        );
        assert_eq!(
            messages("ClusterRole", json!({"metadata": {"name": "a/b"}})),
            ["metadata.name: Invalid value: \"a/b\": may not contain '/'"]
        );
    }

    #[test]
    fn bindings_name_a_role_of_this_group_and_valid_subjects() {
        let mut b = json!({"metadata": {"name": "b"}, "roleRef": {"kind": "Role", "name": "view"}, "subjects": [
            {"kind": "User", "name": "alice"},
            {"kind": "ServiceAccount", "name": "builder"},
            {"kind": "Robot", "name": "r2"},
            {"kind": "Group", "name": ""},
        ]});
        apply_defaults("ClusterRoleBinding", b.as_object_mut().unwrap());
        assert_eq!(b["roleRef"]["apiGroup"], GROUP);
        assert_eq!(b["subjects"][0]["apiGroup"], GROUP);
        assert!(b["subjects"][1].get("apiGroup").is_none());
        assert_eq!(
            messages("ClusterRoleBinding", b),
            [
                "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
                "subjects[1].namespace: Required value",
                "subjects[2].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"",
                "subjects[3].name: Required value",
            ]
        );
        let old = json!({"metadata": {"name": "b", "namespace": "d"}, "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "view"}});
        let mut new = old.clone();
        new["roleRef"]["name"] = json!("edit");
        let info = kind_info(GROUP, "RoleBinding").unwrap();
        let errs: Vec<String> =
            validate_update("RoleBinding", &new, &old, info).iter().map(FieldError::message).collect();
        assert_eq!(
            errs,
            [
                "roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef"
            ]
        );
    }
}
