//! Pod templates: the pods a controller makes from them, the hash that
//! names a template's ReplicaSet, and template equality that ignores it.

use serde_json::{Map, Value, json};

/// The label a Deployment's ReplicaSets and their pods carry.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// Characters Kubernetes uses for generated suffixes (no vowels, no
/// look-alikes), so a hash never spells a word.
const SAFE: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The hash of a pod template (and the Deployment's collision count), in
/// Kubernetes' form: the decimal digits of a 32-bit FNV-1a hash, each mapped
/// into [`SAFE`]. The template is hashed as canonical JSON (sorted keys).
pub fn template_hash(template: &Value, collision_count: Option<i64>) -> String {
    let mut h: u32 = 0x811c_9dc5;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            h ^= u32::from(*b);
            h = h.wrapping_mul(0x0100_0193);
        }
    };
    feed(template.to_string().as_bytes());
    if let Some(c) = collision_count {
        feed(&(c as u32).to_le_bytes());
    }
    h.to_string().bytes().map(|b| SAFE[usize::from(b) % SAFE.len()] as char).collect()
}

/// `template` without the pod-template-hash label, and without empty
/// values: Kubernetes compares templates with semantic equality, for which
/// an empty map or list is the same as none.
fn without_hash(template: &Value) -> Value {
    let mut t = template.clone();
    if let Some(labels) = t.pointer_mut("/metadata/labels").and_then(Value::as_object_mut) {
        labels.remove(POD_TEMPLATE_HASH);
    }
    prune_empty(&mut t);
    t
}

/// Removes nulls and empty objects and lists, recursively.
fn prune_empty(v: &mut Value) {
    let empty = |v: &Value| match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    };
    match v {
        Value::Object(m) => {
            for x in m.values_mut() {
                prune_empty(x);
            }
            m.retain(|_, x| !empty(x));
        }
        Value::Array(a) => a.iter_mut().for_each(prune_empty),
        _ => {}
    }
}

/// Whether two pod templates are the same but for the pod-template-hash label.
pub fn equal_ignoring_hash(a: &Value, b: &Value) -> bool {
    without_hash(a) == without_hash(b)
}

/// A pod made from `template` for the owner whose controller reference is
/// `owner_ref`, named `{prefix}` plus a generated suffix.
pub fn pod_from_template(template: &Value, namespace: &str, prefix: &str, owner_ref: Value) -> Value {
    let meta = template.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let mut metadata = Map::new();
    for k in ["labels", "annotations", "finalizers"] {
        if let Some(v) = meta.get(k).filter(|v| !v.is_null()) {
            metadata.insert(k.into(), v.clone());
        }
    }
    metadata.insert("generateName".into(), json!(format!("{prefix}-")));
    metadata.insert("namespace".into(), json!(namespace));
    metadata.insert("ownerReferences".into(), json!([owner_ref]));
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": template.get("spec").cloned().unwrap_or_else(|| json!({})),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_stable_safe_and_move_with_the_template_and_the_collision_count() {
        let t = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "a"}]}});
        let h = template_hash(&t, None);
        assert_eq!(h, template_hash(&t.clone(), None));
        assert!(!h.is_empty() && h.len() <= 10 && h.bytes().all(|b| SAFE.contains(&b)), "{h}");
        let mut other = t.clone();
        other["spec"]["containers"][0]["image"] = json!("b");
        assert_ne!(h, template_hash(&other, None));
        assert_ne!(h, template_hash(&t, Some(1)));
    }

    #[test]
    fn equality_ignores_only_the_hash_label() {
        let a = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"x": 1}});
        let mut b = a.clone();
        b["metadata"]["labels"][POD_TEMPLATE_HASH] = json!("abc");
        assert!(equal_ignoring_hash(&a, &b));
        b["metadata"]["labels"]["app"] = json!("db");
        assert!(!equal_ignoring_hash(&a, &b));
        let bare = json!({"spec": {"x": 1}});
        let hashed_only = json!({"metadata": {"labels": {POD_TEMPLATE_HASH: "z"}}, "spec": {"x": 1}});
        assert!(equal_ignoring_hash(&bare, &hashed_only));
    }

    #[test]
    fn pods_take_the_templates_metadata_and_spec() {
        let t = json!({"metadata": {"labels": {"app": "web"}, "annotations": {"a": "b"}, "name": "ignored"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
        let p = pod_from_template(&t, "ns", "web-5d8f", json!({"uid": "u", "controller": true}));
        assert_eq!(p["metadata"]["generateName"], "web-5d8f-");
        assert_eq!(p["metadata"]["namespace"], "ns");
        assert_eq!(p["metadata"]["labels"]["app"], "web");
        assert_eq!(p["metadata"]["annotations"]["a"], "b");
        assert!(p["metadata"].get("name").is_none());
        assert_eq!(p["metadata"]["ownerReferences"][0]["uid"], "u");
        assert_eq!(p["spec"]["containers"][0]["image"], "busybox");
    }
}
