//! ObjectMeta rules (apimachinery's `ValidateObjectMeta` and `ValidateObjectMetaUpdate`, plus core's extra
//! finalizer rule): name, generateName, namespace, generation, labels, annotations, owner references and
//! finalizers on create; the fields that may never change on update.

use super::json::{self, arr_at, get, int_at, str_at, string_map};
use super::names::{self, NameRule};
use super::{FieldError, go_quote};
use serde_json::Value;

/// Kubernetes' cap on the summed size of annotation keys and values.
pub(crate) const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

const FIELD_IMMUTABLE: &str = "field is immutable";
const STANDARD_FINALIZERS: &[&str] = &["kubernetes", "orphan", "foregroundDeletion"];

/// How a kind's metadata is checked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MetaRules {
    pub(crate) namespaced: bool,
    pub(crate) name_rule: NameRule,
    /// Core kinds also require unqualified finalizers to be one of Kubernetes' standard ones.
    pub(crate) kube_finalizers: bool,
}

/// ObjectMeta on create, under `metadata`.
pub(crate) fn validate(meta: &Value, rules: MetaRules) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let generate_name = str_at(meta, "generateName");
    if !generate_name.is_empty() {
        for msg in rules.name_rule.check(generate_name, true) {
            errs.push(FieldError::invalid("metadata.generateName", generate_name, msg));
        }
    }
    let name = str_at(meta, "name");
    if name.is_empty() {
        // With a generateName the server generates the name before Kubernetes would validate it.
        if generate_name.is_empty() {
            errs.push(FieldError::required("metadata.name", "name or generateName is required"));
        }
    } else {
        for msg in rules.name_rule.check(name, false) {
            errs.push(FieldError::invalid("metadata.name", name, msg));
        }
    }
    if rules.namespaced {
        let ns = str_at(meta, "namespace");
        if ns.is_empty() {
            errs.push(FieldError::required("metadata.namespace", ""));
        } else {
            for msg in names::dns1123_label(ns) {
                errs.push(FieldError::invalid("metadata.namespace", ns, msg));
            }
        }
    }
    if let Some(generation) = int_at(meta, "generation").filter(|g| *g < 0) {
        errs.push(FieldError::invalid("metadata.generation", generation, "must be greater than or equal to 0"));
    }
    errs.extend(validate_labels(&string_map(meta, "labels"), "metadata.labels"));
    errs.extend(validate_annotations(&string_map(meta, "annotations"), "metadata.annotations"));
    errs.extend(validate_owner_references(arr_at(meta, "ownerReferences")));
    errs.extend(validate_finalizers(&json::string_list(meta, "finalizers"), rules.kube_finalizers));
    errs
}

/// `ValidateLabels`: errors name the map, not the key (as Kubernetes does).
pub(crate) fn validate_labels(labels: &[(&str, &str)], path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (k, v) in labels {
        for msg in names::qualified_name(k) {
            errs.push(FieldError::invalid(path, *k, msg));
        }
        for msg in names::label_value(v) {
            errs.push(FieldError::invalid(path, *v, msg));
        }
    }
    errs
}

/// `ValidateAnnotations`: keys are qualified names (case-insensitively), total size at most 256 KiB.
pub(crate) fn validate_annotations(annotations: &[(&str, &str)], path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (k, _) in annotations {
        for msg in names::qualified_name(&k.to_lowercase()) {
            errs.push(FieldError::invalid(path, *k, msg));
        }
    }
    let total: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
    errs
}

/// Go's `%#v` of a `metav1.OwnerReference`.
fn owner_reference_text(r: &Value) -> String {
    let ptr_bool = |k: &str| match get(r, k).as_bool() {
        Some(b) => format!("(*bool)({b})"),
        None => "(*bool)(nil)".to_string(),
    };
    format!(
        "v1.OwnerReference{{APIVersion:{}, Kind:{}, Name:{}, UID:{}, Controller:{}, BlockOwnerDeletion:{}}}",
        go_quote(str_at(r, "apiVersion")),
        go_quote(str_at(r, "kind")),
        go_quote(str_at(r, "name")),
        go_quote(str_at(r, "uid")),
        ptr_bool("controller"),
        ptr_bool("blockOwnerDeletion"),
    )
}

/// (group, version) as `schema.ParseGroupVersion` splits an apiVersion; both empty when it does not parse.
fn parse_group_version(api_version: &str) -> (&str, &str) {
    match api_version.split('/').collect::<Vec<_>>().as_slice() {
        [""] => ("", ""),
        [version] => ("", version),
        [group, version] => (group, version),
        _ => ("", ""),
    }
}

fn validate_owner_references(refs: &[Value]) -> Vec<FieldError> {
    let path = "metadata.ownerReferences";
    let mut errs = Vec::new();
    let mut first_controller: Option<String> = None;
    for r in refs {
        let api_version = str_at(r, "apiVersion");
        let kind = str_at(r, "kind");
        let (group, version) = parse_group_version(api_version);
        if version.is_empty() {
            errs.push(FieldError::invalid(&json::child(path, "apiVersion"), api_version, "version must not be empty"));
        }
        if kind.is_empty() {
            errs.push(FieldError::invalid(&json::child(path, "kind"), kind, "must not be empty"));
        }
        let name = str_at(r, "name");
        if name.is_empty() {
            errs.push(FieldError::invalid(&json::child(path, "name"), name, "must not be empty"));
        }
        let uid = str_at(r, "uid");
        if uid.is_empty() {
            errs.push(FieldError::invalid(&json::child(path, "uid"), uid, "must not be empty"));
        }
        if group.is_empty() && version == "v1" && kind == "Event" {
            errs.push(
                FieldError::invalid(path, r.clone(), "/v1, Kind=Event is disallowed from being an owner")
                    .with_value_text(owner_reference_text(r)),
            );
        }
        if get(r, "controller").as_bool() == Some(true) {
            let current = format!("{kind}/{name}");
            match &first_controller {
                Some(first) => {
                    let all: Vec<String> = refs.iter().map(owner_reference_text).collect();
                    errs.push(
                        FieldError::invalid(
                            path,
                            Value::Array(refs.to_vec()),
                            format!(
                                "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {current}"
                            ),
                        )
                        .with_value_text(format!("[]v1.OwnerReference{{{}}}", all.join(", "))),
                    );
                }
                None => first_controller = Some(current),
            }
        }
    }
    errs
}

fn validate_finalizers(finalizers: &[&str], kube: bool) -> Vec<FieldError> {
    let path = "metadata.finalizers";
    let mut errs = Vec::new();
    for f in finalizers {
        for msg in names::qualified_name(f) {
            errs.push(FieldError::invalid(path, *f, msg));
        }
    }
    if finalizers.contains(&"orphan") && finalizers.contains(&"foregroundDeletion") {
        let all: Vec<Value> = finalizers.iter().map(|f| Value::from(*f)).collect();
        errs.push(FieldError::invalid(path, all, "finalizer orphan and foregroundDeletion cannot be both set"));
    }
    if kube {
        for (i, f) in finalizers.iter().enumerate() {
            errs.extend(kube_finalizer_name(f, &json::index(path, i)));
        }
    }
    errs
}

/// Core's rule: a finalizer without a '/' must be one of Kubernetes' standard names.
pub(crate) fn kube_finalizer_name(name: &str, path: &str) -> Option<FieldError> {
    (!name.contains('/') && !STANDARD_FINALIZERS.contains(&name))
        .then(|| FieldError::invalid(path, name, "name is neither a standard finalizer name nor is it fully qualified"))
}

/// Go's `time.Time.String()` of an RFC 3339 timestamp (as metav1.Time prints in messages).
fn go_time_text(v: &Value) -> String {
    let Some(s) = v.as_str() else { return "0001-01-01 00:00:00 +0000 UTC".to_string() };
    match s.strip_suffix('Z').and_then(|t| t.split_once('T')) {
        Some((date, time)) => format!("{date} {time} +0000 UTC"),
        None => s.to_string(),
    }
}

/// ObjectMeta on update: what may not change. `old` is the stored metadata.
///
/// Like Kubernetes' `BeforeUpdate`, an empty uid and any creationTimestamp when the stored one is set are
/// taken from the stored object rather than rejected, and generation is the server's to manage; the server
/// should copy those fields before storing.
pub(crate) fn validate_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if json::has(old, "deletionTimestamp") {
        let old_f = json::string_list(old, "finalizers");
        let mut extra: Vec<&str> =
            json::string_list(new, "finalizers").into_iter().filter(|f| !old_f.contains(f)).collect();
        extra.sort_unstable();
        extra.dedup();
        if !extra.is_empty() {
            let quoted: Vec<String> = extra.iter().map(|f| go_quote(f)).collect();
            errs.push(FieldError::forbidden(
                "metadata.finalizers",
                format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                    quoted.join(", ")
                ),
            ));
        }
    }
    for field in ["name", "namespace"] {
        if str_at(new, field) != str_at(old, field) {
            errs.push(FieldError::invalid(&json::child("metadata", field), str_at(new, field), FIELD_IMMUTABLE));
        }
    }
    let new_uid = str_at(new, "uid");
    if !new_uid.is_empty() && new_uid != str_at(old, "uid") {
        errs.push(FieldError::invalid("metadata.uid", new_uid, FIELD_IMMUTABLE));
    }
    let old_created = get(old, "creationTimestamp");
    let new_created = get(new, "creationTimestamp");
    if old_created.is_null() && !new_created.is_null() {
        errs.push(
            FieldError::invalid("metadata.creationTimestamp", new_created.clone(), FIELD_IMMUTABLE)
                .with_value_text(go_time_text(new_created)),
        );
    }
    let (new_del, old_del) = (get(new, "deletionTimestamp"), get(old, "deletionTimestamp"));
    if new_del != old_del {
        let text = if new_del.is_null() { "null".to_string() } else { go_time_text(new_del) };
        errs.push(
            FieldError::invalid("metadata.deletionTimestamp", new_del.clone(), FIELD_IMMUTABLE).with_value_text(text),
        );
    }
    let (new_grace, old_grace) = (get(new, "deletionGracePeriodSeconds"), get(old, "deletionGracePeriodSeconds"));
    if !new_grace.is_null() && new_grace != old_grace {
        errs.push(FieldError::invalid("metadata.deletionGracePeriodSeconds", new_grace.clone(), FIELD_IMMUTABLE));
    }
    errs
}
