//! The three PATCH flavours the API server accepts: JSON merge patch, JSON patch and
//! Kubernetes strategic merge patch, applied to objects held as `serde_json::Value`.
//!
//! | content type                               | function                  | spec               |
//! |--------------------------------------------|---------------------------|--------------------|
//! | `application/merge-patch+json`             | [`merge_patch`]           | RFC 7386           |
//! | `application/json-patch+json`              | [`json_patch`]            | RFC 6902, RFC 6901 |
//! | `application/strategic-merge-patch+json`   | [`strategic_merge_patch`] | Kubernetes         |
//!
//! **Architecture Invariant:** this module knows no HTTP, no store and no Rust types of the
//! objects it patches. It sees JSON trees only; what a strategic merge patch needs to know of
//! the built-in kinds lives in the static table of `meta.rs`. The caller maps
//! [`PatchError::Malformed`] to 400 and [`PatchError::Unapplicable`] to 422 (see
//! [`PatchError::http_status`]), and answers 415 for a strategic merge patch on a kind for
//! which [`supports_strategic`] is false.
//!
//! Every function either applies the whole patch or leaves the target as it was.

mod json;
mod merge;
mod meta;
mod order;
mod strategic;

pub use json::json_patch;
pub use merge::merge_patch;
pub use strategic::strategic_merge_patch;

use serde_json::{Number, Value};

/// Why a patch could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The patch document itself is malformed: not the right JSON shape, an unknown op, bad
    /// path syntax, a bad directive. HTTP 400.
    #[error("malformed patch: {0}")]
    Malformed(String),
    /// The patch is well formed but cannot apply to this object: a json-patch `test` failed,
    /// a path does not exist for remove/replace, an index is out of range, a list holds
    /// elements of another type than the patch. HTTP 422.
    #[error("patch cannot be applied: {0}")]
    Unapplicable(String),
}

impl PatchError {
    /// The HTTP status the API server answers with: 400 or 422.
    ///
    /// ```
    /// # use edgehive_registry::patch::PatchError;
    /// assert_eq!(PatchError::Malformed("x".into()).http_status(), 400);
    /// ```
    pub fn http_status(&self) -> u16 {
        match self {
            PatchError::Malformed(_) => 400,
            PatchError::Unapplicable(_) => 422,
        }
    }
}

/// Whether `kind` (e.g. "Pod") of API group `group` ("" for core) has strategic-merge
/// metadata here (built-in types). Custom types (devices.kubeedge.io, reliablesyncs.kubeedge.io)
/// do not: the server answers 415 for them, as Kubernetes does for custom resources.
///
/// ```
/// # use edgehive_registry::patch::supports_strategic;
/// assert!(supports_strategic("", "Pod"));
/// assert!(supports_strategic("coordination.k8s.io", "Lease"));
/// assert!(!supports_strategic("devices.kubeedge.io", "Device"));
/// ```
pub fn supports_strategic(group: &str, kind: &str) -> bool {
    meta::kind_meta(group, kind).is_some()
}

/// JSON equality where numbers compare by value (`1` equals `1.0`), as JSON Patch's `test`
/// requires and as Go's `float64` decoding makes Kubernetes compare merge keys.
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => numbers_eq(x, y),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(v, w)| json_eq(v, w)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

fn numbers_eq(x: &Number, y: &Number) -> bool {
    if let (Some(a), Some(b)) = (x.as_i64(), y.as_i64()) {
        return a == b;
    }
    if let (Some(a), Some(b)) = (x.as_u64(), y.as_u64()) {
        return a == b;
    }
    match (x.as_f64(), y.as_f64()) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// A short rendering of a JSON value for error messages.
pub(crate) fn brief(v: &Value) -> String {
    const MAX: usize = 80;
    let s = v.to_string();
    if s.len() <= MAX {
        return s;
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_compare_by_value() {
        assert!(json_eq(&json!(1), &json!(1.0)));
        assert!(json_eq(&json!({"a": [1, 2.0]}), &json!({"a": [1.0, 2]})));
        assert!(!json_eq(&json!(1), &json!("1")));
        assert!(!json_eq(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
        assert!(json_eq(&json!(u64::MAX), &json!(u64::MAX)));
        assert!(!json_eq(&json!(-1), &json!(u64::MAX)));
    }

    #[test]
    fn brief_cuts_long_values_on_a_char_boundary() {
        let long = Value::String("é".repeat(100));
        let b = brief(&long);
        assert!(b.ends_with('…'));
        assert!(b.len() < 90);
        assert_eq!(brief(&json!({"a": 1})), r#"{"a":1}"#);
    }
}
