//! Tests of validation: for each rule a valid and an invalid object, with Kubernetes' exact path and text.

mod kinds;
mod pod;
mod workloads;

use super::*;
use serde_json::json;

pub(super) const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or \
'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is \
'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
pub(super) const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must \
start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is \
'[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

pub(super) fn pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
}

/// `obj` with the value at JSON pointer `at` replaced (the parent must exist).
pub(super) fn with(mut obj: Value, at: &str, value: Value) -> Value {
    let (parent, last) = at.rsplit_once('/').unwrap();
    let target = if parent.is_empty() { &mut obj } else { obj.pointer_mut(parent).unwrap() };
    match target {
        Value::Object(m) => {
            m.insert(last.to_string(), value);
        }
        Value::Array(a) => a[last.parse::<usize>().unwrap()] = value,
        _ => panic!("no parent at {at}"),
    }
    obj
}

pub(super) fn without(mut obj: Value, at: &str) -> Value {
    let (parent, last) = at.rsplit_once('/').unwrap();
    obj.pointer_mut(parent).unwrap().as_object_mut().unwrap().remove(last);
    obj
}

/// Validation of a new object as a write meets it: defaulted first, as [`crate::admit::create`] does
/// (validation itself never defaults).
pub(super) fn validate_create(group: &str, kind: &str, obj: &Value) -> Vec<FieldError> {
    super::validate_create(group, kind, &stored(group, kind, obj))
}

/// Validation of an update as a write meets it: the new object defaulted first.
pub(super) fn validate_update(group: &str, kind: &str, new: &Value, old: &Value) -> Vec<FieldError> {
    super::validate_update(group, kind, &stored(group, kind, new), old)
}

pub(super) fn core(kind: &str, obj: &Value) -> Vec<String> {
    validate_create("", kind, obj).iter().map(FieldError::message).collect()
}

pub(super) fn core_update(kind: &str, new: &Value, old: &Value) -> Vec<String> {
    validate_update("", kind, new, old).iter().map(FieldError::message).collect()
}

/// The stored form of an object: what Kubernetes keeps after defaulting.
pub(super) fn stored(group: &str, kind: &str, obj: &Value) -> Value {
    let mut o = obj.clone();
    crate::defaults::apply_defaults(group, kind, &mut o);
    o
}
