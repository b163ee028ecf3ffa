//! The root CA publisher (Kubernetes' `pkg/controller/certificates/rootcacertpublisher`):
//! every namespace that is not terminating has a ConfigMap
//! `kube-root-ca.crt` whose `ca.crt` is the API server's CA, so that pods
//! can verify the API server; one deleted or changed is made again.

use edgehive_store::resources::CONFIGMAPS;
use serde_json::{Value, json};

use crate::plan::{Action, Plan};
use crate::world::{ROOT_CA_CONFIGMAP, World};

/// The ConfigMap's description annotation.
pub const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
/// Kubernetes' description of it.
pub const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// Syncs namespace `ns`'s `kube-root-ca.crt` to `ca_pem`.
pub fn sync(world: &World, ns: &str, ca_pem: &str) -> Plan {
    let mut plan = Plan::none();
    if world.namespaces.get(ns).is_none_or(|terminating| *terminating) {
        return plan;
    }
    let data = json!({"ca.crt": ca_pem});
    match world.root_ca.get(ns, ROOT_CA_CONFIGMAP) {
        None => plan.actions.push(Action::Create {
            res: &CONFIGMAPS,
            object: json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": ROOT_CA_CONFIGMAP, "namespace": ns,
                             "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
                "data": data,
            }),
        }),
        Some(cm) => {
            let described = cm
                .value
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(DESCRIPTION_ANNOTATION))
                .and_then(Value::as_str)
                .is_some_and(|d| !d.is_empty());
            // As Kubernetes: `data` exactly, binaryData gone.
            if cm.value.get("data") == Some(&data) && described && cm.value.get("binaryData").is_none() {
                return plan;
            }
            let mut patch =
                json!({"metadata": {"annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}}, "binaryData": null});
            let mut replaced: serde_json::Map<String, Value> = cm
                .value
                .get("data")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .map(|(k, _)| (k.clone(), Value::Null))
                .collect();
            replaced.insert("ca.crt".into(), json!(ca_pem));
            patch["data"] = Value::Object(replaced);
            plan.actions.push(Action::Patch {
                res: &CONFIGMAPS,
                namespace: ns.to_string(),
                name: ROOT_CA_CONFIGMAP.to_string(),
                uid: cm.uid().to_string(),
                rev: Some(cm.rev),
                patch,
            });
        }
    }
    plan
}
