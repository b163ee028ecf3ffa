//! A write as Kubernetes admits it: defaults first, then the decode check
//! and validation of the defaulted object, and a refusal worded as
//! Kubernetes words it. The API server and EdgeController (edges' writes)
//! both go through here, so an edge can write nothing the API would refuse.

use edgehive_store::resources::ResourceDef;
use serde_json::Value;

use crate::defaults::{apply_defaults, prepare_for_create, prepare_for_update};
use crate::status::{ApiError, Cause};
use crate::validation::{self, FieldError, Origin};

/// Gives `obj` a fresh `metadata.uid`, fills in its defaults, lets the kind's strategy prepare it (a Job's
/// generated selector and labels, which need the uid) and checks it as a new object of `res`.
///
/// The uid replaces whatever the client sent, as Kubernetes' `FillObjectMetaSystemFields` does; the
/// store keeps the uid it is given.
pub fn create(res: &ResourceDef, obj: &mut Value) -> Result<(), ApiError> {
    assign_uid(obj);
    apply_defaults(res.group, res.kind, obj);
    prepare_for_create(res.group, res.kind, obj);
    refuse(res, obj, validation::validate_create(res.group, res.kind, obj))
}

/// Sets `metadata.uid` to a fresh UUID (creating `metadata` when absent or null; a `metadata` of another
/// JSON type is left for the decode check to refuse).
fn assign_uid(obj: &mut Value) {
    let Some(root) = obj.as_object_mut() else { return };
    let meta = root.entry("metadata").or_insert(Value::Null);
    if meta.is_null() {
        *meta = Value::Object(serde_json::Map::new());
    }
    if let Some(meta) = meta.as_object_mut() {
        meta.insert("uid".into(), Value::from(edgehive_model::new_msg_id().as_str()));
    }
}

/// Fills in `new`'s defaults and checks it as a change of `old`, the
/// stored object. `old` is compared with its defaults filled in too: an
/// object a controller wrote without them must not look changed.
pub fn update(res: &ResourceDef, new: &mut Value, old: &Value) -> Result<(), ApiError> {
    apply_defaults(res.group, res.kind, new);
    let mut old = old.clone();
    apply_defaults(res.group, res.kind, &mut old);
    prepare_for_update(res.group, res.kind, new, &old);
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
    use edgehive_store::resources::{CONFIGMAPS, JOBS, PODS};
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
    fn a_create_gets_a_fresh_uid_whatever_the_client_sent() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "uid": "mine"}});
        let (mut a, mut b) = (cm.clone(), cm);
        create(&CONFIGMAPS, &mut a).unwrap();
        create(&CONFIGMAPS, &mut b).unwrap();
        let uid = |o: &Value| o["metadata"]["uid"].as_str().unwrap_or_default().to_string();
        assert_ne!(uid(&a), "mine");
        assert_eq!(uid(&a).len(), 36);
        assert_ne!(uid(&a), uid(&b));
        let mut bare = json!({"apiVersion": "v1", "kind": "Pod", "metadata": null,
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
        let _ = create(&PODS, &mut bare);
        assert_eq!(uid(&bare).len(), 36, "metadata is created for the uid");
    }

    #[test]
    fn a_job_create_generates_its_selector_from_the_new_uid() {
        let mut job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi", "namespace": "d", "uid": "mine"},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "perl"}]}}}});
        create(&JOBS, &mut job).unwrap();
        let uid = job["metadata"]["uid"].clone();
        assert_ne!(uid, "mine");
        assert_eq!(job["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"], uid);
        assert_eq!(job["spec"]["template"]["metadata"]["labels"]["controller-uid"], uid);
        assert_eq!(job["metadata"]["labels"]["batch.kubernetes.io/job-name"], "pi");
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
