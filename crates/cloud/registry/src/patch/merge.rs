//! RFC 7386 JSON merge patch (`application/merge-patch+json`): what `kubectl label`,
//! `kubectl annotate` and `kubectl patch --type merge` send.
//!
//! Objects merge key by key, `null` deletes a key, anything else (lists included) replaces.

use serde_json::{Map, Value};

/// RFC 7386 JSON merge patch (application/merge-patch+json), applied in place.
///
/// Merge patch cannot fail: a patch that is not an object replaces the target, and a target
/// that is not an object is treated as an empty one when the patch is.
///
/// ```
/// # use edgehive_registry::patch::merge_patch;
/// # use serde_json::json;
/// let mut pod = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
/// merge_patch(&mut pod, &json!({"metadata": {"labels": {"tier": null, "env": "prod"}}}));
/// assert_eq!(pod, json!({"metadata": {"labels": {"app": "web", "env": "prod"}}}));
/// ```
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target) = target else {
        return;
    };
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
        } else {
            merge_patch(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn applied(target: Value, patch: Value) -> Value {
        let mut t = target;
        merge_patch(&mut t, &patch);
        t
    }

    #[test]
    fn nested_null_in_a_new_object_is_dropped() {
        assert_eq!(applied(json!({}), json!({"a": {"b": null, "c": 1}})), json!({"a": {"c": 1}}));
    }

    #[test]
    fn lists_are_replaced_not_merged() {
        assert_eq!(applied(json!({"a": [1, 2]}), json!({"a": [3]})), json!({"a": [3]}));
    }

    #[test]
    fn scalar_patch_replaces_the_document() {
        assert_eq!(applied(json!({"a": 1}), json!("x")), json!("x"));
        assert_eq!(applied(json!("x"), json!({"a": 1})), json!({"a": 1}));
    }
}
