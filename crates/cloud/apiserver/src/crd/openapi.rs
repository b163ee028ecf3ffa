//! The OpenAPI v3 schema of a custom resource's version, as apiextensions
//! publishes it: the definition's `openAPIV3Schema` with `apiVersion`,
//! `kind` and `metadata` described and the group-version-kind named, under
//! the name Kubernetes gives it (the group reversed, then the version and
//! kind: `com.example.v1.Widget`), so that `kubectl explain` finds it.

use edgehive_store::resources::ResourceDef;
use serde_json::{Value, json};

use super::Served;

/// The component name of `def`'s schema.
pub(crate) fn schema_name(def: &ResourceDef) -> String {
    let reversed: Vec<&str> = def.group.split('.').rev().collect();
    format!("{}.{}.{}", reversed.join("."), def.version, def.kind)
}

/// The component schema of a served version.
pub(crate) fn schema(served: &Served) -> Value {
    let def = served.def;
    let mut s = match &served.schema_json {
        Value::Object(_) => served.schema_json.clone(),
        _ => json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    };
    let props =
        s.as_object_mut().map(|m| m.entry("properties").or_insert_with(|| json!({}))).and_then(Value::as_object_mut);
    if let Some(props) = props {
        props.insert(
            "apiVersion".into(),
            json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values."}),
        );
        props.insert(
            "kind".into(),
            json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase."}),
        );
        props.insert("metadata".into(), json!({"type": "object", "description": "Standard object's metadata."}));
    }
    s["x-kubernetes-group-version-kind"] = json!([{"group": def.group, "version": def.version, "kind": def.kind}]);
    s
}

/// Every served version's component schema, by name (for `/openapi/v2`).
pub(crate) fn all(crds: &super::Crds) -> Vec<(String, Value)> {
    crds.all().iter().map(|s| (schema_name(s.def), schema(s))).collect()
}
