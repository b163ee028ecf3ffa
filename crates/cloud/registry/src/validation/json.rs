//! Forgiving accessors over `serde_json::Value`: a missing field, a `null` and a field of the wrong type all
//! read as absent (Go's zero value), so the rule code never has to think about shapes and never panics.
//! Wrong types are reported separately, by the decode check in `schema`.

use serde_json::{Map, Value};

/// `v[key]` when `v` is an object and the field is present and not null.
pub(crate) fn get<'a>(v: &'a Value, key: &str) -> &'a Value {
    match v.get(key) {
        Some(found) => found,
        None => &Value::Null,
    }
}

/// True when the field is present and not null.
pub(crate) fn has(v: &Value, key: &str) -> bool {
    !get(v, key).is_null()
}

/// A string field, "" when absent or not a string.
pub(crate) fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    get(v, key).as_str().unwrap_or("")
}

/// A list field, empty when absent or not a list.
pub(crate) fn arr_at<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    get(v, key).as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// An object field, `None` when absent or not an object.
pub(crate) fn obj_at<'a>(v: &'a Value, key: &str) -> Option<&'a Map<String, Value>> {
    get(v, key).as_object()
}

/// An integer field, `None` when absent or not an integer.
pub(crate) fn int_at(v: &Value, key: &str) -> Option<i64> {
    get(v, key).as_i64()
}

/// A boolean field, false when absent or not a boolean.
pub(crate) fn bool_at(v: &Value, key: &str) -> bool {
    get(v, key).as_bool().unwrap_or(false)
}

/// The string values of a map field, in key order, skipping non-strings.
pub(crate) fn string_map<'a>(v: &'a Value, key: &str) -> Vec<(&'a str, &'a str)> {
    obj_at(v, key).map(|m| m.iter().map(|(k, v)| (k.as_str(), v.as_str().unwrap_or(""))).collect()).unwrap_or_default()
}

/// The strings of a list field, skipping non-strings.
pub(crate) fn string_list<'a>(v: &'a Value, key: &str) -> Vec<&'a str> {
    arr_at(v, key).iter().filter_map(Value::as_str).collect()
}

/// `parent.child` (or `child` at the root).
pub(crate) fn child(parent: &str, name: &str) -> String {
    if parent.is_empty() { name.to_string() } else { format!("{parent}.{name}") }
}

/// `parent[i]`.
pub(crate) fn index(parent: &str, i: usize) -> String {
    format!("{parent}[{i}]")
}

/// `parent[key]`, Kubernetes' rendering of a map key in a path.
pub(crate) fn key(parent: &str, k: &str) -> String {
    format!("{parent}[{k}]")
}

/// Absent and null both mean "not set"; otherwise structural equality. Used for immutability checks,
/// where Kubernetes compares decoded Go values (so a null and a missing field are equal).
pub(crate) fn same(a: &Value, b: &Value) -> bool {
    normalize(a) == normalize(b)
}

fn normalize(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let cleaned: Map<String, Value> =
                m.iter().filter(|(_, v)| !is_empty(v)).map(|(k, v)| (k.clone(), normalize(v))).collect();
            Value::Object(cleaned)
        }
        Value::Array(items) => Value::Array(items.iter().map(normalize).collect()),
        other => other.clone(),
    }
}

/// Go's zero values for `omitempty` fields: null, "", 0, false, [] and {} all mean "unset".
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.values().all(is_empty),
    }
}
