//! A write as Kubernetes admits it: defaults first, then the decode check
//! and validation of the defaulted object, and a refusal worded as
//! Kubernetes words it. The API server and EdgeController (edges' writes)
//! both go through here, so an edge can write nothing the API would refuse.

use edgehive_store::resources::ResourceDef;
use serde_json::Value;

use crate::defaults::apply_defaults;
use crate::status::{ApiError, Cause};
use crate::validation::{self, FieldError, Origin};

/// Fills in `obj`'s defaults and checks it as a new object of `res`.
pub fn create(res: &ResourceDef, obj: &mut Value) -> Result<(), ApiError> {
    apply_defaults(res.group, res.kind, obj);
    refuse(res, obj, validation::validate_create(res.group, res.kind, obj))
}

/// Fills in `new`'s defaults and checks it as a change of `old`, the
/// stored object. `old` is compared with its defaults filled in too: an
/// object a controller wrote without them must not look changed.
pub fn update(res: &ResourceDef, new: &mut Value, old: &Value) -> Result<(), ApiError> {
    apply_defaults(res.group, res.kind, new);
    let mut old = old.clone();
    apply_defaults(res.group, res.kind, &mut old);
    refuse(res, new, validation::validate_update(res.group, res.kind, new, &old))
}

/// Nothing when `errors` is empty; otherwise the refusal Kubernetes gives:
/// 400 for a wrong JSON type (the decoder's words) or a KubeEdge admission
/// webhook's denial, else 422 `{Kind} "{name}" is invalid: ...` with one
/// cause per error.
pub fn refuse(res: &ResourceDef, obj: &Value, errors: Vec<FieldError>) -> Result<(), ApiError> {
    if errors.is_empty() {
        return Ok(());
    }
    if let Some(e) = errors.iter().find(|e| e.is_decode_error()) {
        let kind = res.kind;
        return Err(ApiError::bad_request(format!(
            "{kind} in version {:?} cannot be handled as a {kind}: {}",
            res.api_version(),
            e.message()
        )));
    }
    let denial = errors.iter().find_map(|e| match e.origin {
        Origin::Webhook(hook) => Some((hook, e)),
        _ => None,
    });
    if let Some((hook, e)) = denial {
        return Err(ApiError::bad_request(format!("admission webhook {hook:?} denied the request: {}", e.body())));
    }
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let causes = errors
        .iter()
        .map(|e| Cause { reason: e.kind.reason().to_owned(), message: e.body(), field: e.field.clone() })
        .collect();
    let summary: Vec<String> = errors.iter().map(FieldError::message).collect();
    Err(ApiError::invalid_with_summary(res.kind, res.group, name, causes, &summary))
}

#[cfg(test)]
mod tests {
    use edgehive_store::resources::{CONFIGMAPS, PODS};
    use serde_json::json;

    use super::*;

    #[test]
    fn a_create_is_defaulted_before_it_is_validated() {
        // A port without a protocol is valid: the default fills it in.
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox", "ports": [{"containerPort": 80}]}]}});
        create(&PODS, &mut pod).unwrap();
        assert_eq!(pod["spec"]["containers"][0]["ports"][0]["protocol"], "TCP");
        assert_eq!(pod["spec"]["restartPolicy"], "Always");
    }

    #[test]
    fn validation_alone_neither_defaults_nor_changes_the_object() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox", "ports": [{"containerPort": 80}]}]}});
        let before = pod.clone();
        let errors: Vec<String> =
            validation::validate_create("", "Pod", &pod).iter().map(FieldError::message).collect();
        assert!(errors.iter().any(|e| e.contains("protocol: Required value")), "{errors:?}");
        assert_eq!(pod, before);
    }

    #[test]
    fn refusals_are_worded_as_kubernetes_words_them() {
        let mut bad = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": []}});
        let e = create(&PODS, &mut bad).unwrap_err();
        assert_eq!((e.code.as_u16(), e.reason), (422, "Invalid"));
        assert!(e.message.starts_with("Pod \"p\" is invalid: spec.containers: Required value"), "{}", e.message);
        let mut typed = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d"}, "data": {"k": 1}});
        let e = create(&CONFIGMAPS, &mut typed).unwrap_err();
        assert_eq!(e.code.as_u16(), 400);
        assert!(
            e.message.starts_with(
                "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal number"
            ),
            "{}",
            e.message
        );
    }

    #[test]
    fn an_update_compares_with_the_defaulted_stored_object() {
        // Stored without defaults (as a controller may write it): an update
        // that only adds the defaults is no change of the immutable spec.
        let old = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default", "uid": "u", "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
        let mut new = old.clone();
        new["metadata"]["labels"] = json!({"a": "b"});
        update(&PODS, &mut new, &old).unwrap();
        let mut moved = old.clone();
        moved["spec"]["containers"][0]["image"] = json!("other");
        moved["spec"]["nodeName"] = json!("elsewhere");
        let e = update(&PODS, &mut moved, &old).unwrap_err();
        assert_eq!(e.code.as_u16(), 422, "{}", e.message);
    }
}
