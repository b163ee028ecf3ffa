//! Strict decoding: the fields a body has that its kind's Go structs do not, and the JSON keys it repeats.
//!
//! Kubernetes decodes a built-in object into its Go type, which drops every unknown field; with
//! `fieldValidation=Strict` the decoder's strict errors make the request fail (400, `strict decoding error:
//! unknown field "spec.containers[0].comand", duplicate field "metadata.name"`), with `Warn` (the default)
//! each becomes a `Warning` header, with `Ignore` nothing is said. The paths are the decoder's
//! (sigs.k8s.io/json): fields joined with `.`, list items as `[i]`.
//!
//! Where a table says `Any` (raw extensions, `FieldsV1`) everything is known, as for the Go decoder. Custom
//! (KubeEdge) kinds are not checked here: their tables list only the fields their validation reads.
//!
//! A body's repeated keys are invisible once parsed into a [`Value`] (the last one wins, as in Go), so
//! [`duplicate_fields`] reads the raw JSON once more with a serde visitor that sees every key.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::{Struct, Ty, root};

/// `fieldValidation`: what to do with unknown and duplicate fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them and say so in `Warning` headers (Kubernetes' default since 1.27).
    Warn,
    /// Refuse the request (400 BadRequest).
    Strict,
}

impl FieldValidation {
    /// The directive of a `fieldValidation` query value (absent or empty: `Warn`); `Err` with the value for
    /// anything else (Kubernetes answers 422 naming the supported values).
    pub fn parse(value: Option<&str>) -> Result<FieldValidation, String> {
        match value.unwrap_or("") {
            "" | "Warn" => Ok(FieldValidation::Warn),
            "Ignore" => Ok(FieldValidation::Ignore),
            "Strict" => Ok(FieldValidation::Strict),
            other => Err(other.to_string()),
        }
    }
}

/// The paths of the fields of `obj` that the Go structs of `group`/`kind` do not have, in document order
/// (`spec.containers[0].comand`). Empty for a kind without a Go-type table (custom kinds) and for
/// fields of the wrong JSON type (the decode check reports those).
///
/// This is the check to run on a request body of a built-in kind that is not stored (a
/// `SelfSubjectAccessReview`, a `TokenRequest`): `check_unknown("authorization.k8s.io",
/// "SelfSubjectAccessReview", &body)`.
pub fn check_unknown(group: &str, kind: &str, obj: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(def) = root(group, kind).filter(|d| !d.go.is_empty()) {
        walk(obj, def, "", &mut out);
    }
    out
}

/// Removes the fields [`check_unknown`] finds from `obj`, as Kubernetes' decoder drops them, and returns
/// their paths.
pub fn prune_unknown(group: &str, kind: &str, obj: &mut Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(def) = root(group, kind).filter(|d| !d.go.is_empty()) {
        prune(obj, def, "", &mut out);
    }
    out
}

fn child(path: &str, name: &str) -> String {
    if path.is_empty() { name.to_string() } else { format!("{path}.{name}") }
}

fn field<'a>(def: &'a Struct, name: &str) -> Option<&'a Ty> {
    def.fields.iter().find(|(f, _)| *f == name).map(|(_, t)| t)
}

fn walk(v: &Value, def: &Struct, path: &str, out: &mut Vec<String>) {
    let Some(map) = v.as_object() else { return };
    for (name, value) in map {
        match field(def, name) {
            None => out.push(child(path, name)),
            Some(ty) => walk_ty(value, ty, &child(path, name), out),
        }
    }
}

fn walk_ty(v: &Value, ty: &Ty, path: &str, out: &mut Vec<String>) {
    match (ty, v) {
        (Ty::Obj(def), Value::Object(_)) => walk(v, def, path, out),
        (Ty::List(inner), Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                walk_ty(item, inner, &format!("{path}[{i}]"), out);
            }
        }
        (Ty::Map(inner), Value::Object(map)) => {
            for (k, item) in map {
                walk_ty(item, inner, &child(path, k), out);
            }
        }
        _ => {}
    }
}

fn prune(v: &mut Value, def: &Struct, path: &str, out: &mut Vec<String>) {
    let Some(map) = v.as_object_mut() else { return };
    let unknown: Vec<String> = map.keys().filter(|k| field(def, k).is_none()).cloned().collect();
    // Document order: known fields' unknown children and unknown fields interleave as the keys do.
    for (name, value) in map.iter_mut() {
        match field(def, name) {
            None => out.push(child(path, name)),
            Some(ty) => prune_ty(value, ty, &child(path, name), out),
        }
    }
    for k in unknown {
        map.remove(&k);
    }
}

fn prune_ty(v: &mut Value, ty: &Ty, path: &str, out: &mut Vec<String>) {
    match (ty, v) {
        (Ty::Obj(def), v @ Value::Object(_)) => prune(v, def, path, out),
        (Ty::List(inner), Value::Array(items)) => {
            for (i, item) in items.iter_mut().enumerate() {
                prune_ty(item, inner, &format!("{path}[{i}]"), out);
            }
        }
        (Ty::Map(inner), Value::Object(map)) => {
            for (k, item) in map.iter_mut() {
                prune_ty(item, inner, &child(path, k), out);
            }
        }
        _ => {}
    }
}

/// The paths of the keys a JSON document repeats within one object (`metadata.name`), in document order;
/// `Err` if it is not JSON.
pub fn duplicate_fields(bytes: &[u8]) -> Result<Vec<String>, serde_json::Error> {
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    Dups { path: String::new(), out: &mut out }.deserialize(&mut de)?;
    de.end()?;
    Ok(out)
}

/// A visitor that walks any JSON value, noting repeated keys under `path`.
struct Dups<'a> {
    path: String,
    out: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Dups<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Dups<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while seq.next_element_seed(Dups { path: format!("{}[{i}]", self.path), out: &mut *self.out })?.is_some() {
            i += 1;
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = child(&self.path, &key);
            if !seen.insert(key) {
                self.out.push(path.clone());
            }
            map.next_value_seed(Dups { path, out: &mut *self.out })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_are_found_at_any_depth() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "nmae": "x"},
            "spec": {
                "containers": [{"name": "c", "image": "i", "comand": ["x"]}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "In", "valuez": []}]}]}}},
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "k", "whenUnsatisfiable": "x", "foo": 1}],
            },
            "extra": true,
        });
        let mut found = check_unknown("", "Pod", &pod);
        found.sort();
        assert_eq!(
            found,
            [
                "extra",
                "metadata.nmae",
                "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].valuez",
                "spec.containers[0].comand",
                "spec.topologySpreadConstraints[0].foo",
            ]
        );
        let mut pruned = pod.clone();
        assert_eq!(prune_unknown("", "Pod", &mut pruned).len(), 5);
        assert!(check_unknown("", "Pod", &pruned).is_empty());
        assert_eq!(pruned["spec"]["containers"][0], json!({"name": "c", "image": "i"}));
    }

    #[test]
    fn raw_and_map_values_are_not_checked_as_structs() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"anything": "x"}, "metadata": {
            "labels": {"a": "b"}, "managedFields": [{"manager": "m", "fieldsV1": {"f:data": {}}}]}});
        assert!(check_unknown("", "ConfigMap", &cm).is_empty());
        let rev =
            json!({"apiVersion": "apps/v1", "kind": "ControllerRevision", "revision": 1, "data": {"x": {"y": 1}}});
        assert!(check_unknown("apps", "ControllerRevision", &rev).is_empty());
        // Custom kinds and unknown kinds are not checked here.
        assert!(check_unknown("devices.kubeedge.io", "Device", &json!({"zzz": 1})).is_empty());
        assert!(check_unknown("example.com", "Thing", &json!({"zzz": 1})).is_empty());
    }

    #[test]
    fn request_kinds_have_tables() {
        let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": "get", "resource": "pods", "verbb": "x"}}});
        assert_eq!(
            check_unknown("authorization.k8s.io", "SelfSubjectAccessReview", &review),
            ["spec.resourceAttributes.verbb"]
        );
        let token = json!({"spec": {"audiences": ["a"], "expirationSeconds": 600, "boundObjectRef": {"kind": "Pod", "name": "p", "x": 1}}});
        assert_eq!(check_unknown("authentication.k8s.io", "TokenRequest", &token), ["spec.boundObjectRef.x"]);
    }

    #[test]
    fn duplicate_keys_are_found_where_serde_json_keeps_the_last() {
        let body = br#"{"metadata": {"name": "a", "name": "b"}, "spec": {"containers": [{"name": "c", "image": "i", "image": "j"}]}, "kind": "Pod", "kind": "Pod"}"#;
        assert_eq!(duplicate_fields(body).unwrap(), ["metadata.name", "spec.containers[0].image", "kind"]);
        assert!(duplicate_fields(br#"{"a": [1, {"b": 2}], "c": null}"#).unwrap().is_empty());
        assert!(duplicate_fields(b"{\"a\": ").is_err());
        assert!(duplicate_fields(b"{} x").is_err());
    }

    #[test]
    fn directives() {
        assert_eq!(FieldValidation::parse(None), Ok(FieldValidation::Warn));
        assert_eq!(FieldValidation::parse(Some("")), Ok(FieldValidation::Warn));
        assert_eq!(FieldValidation::parse(Some("Strict")), Ok(FieldValidation::Strict));
        assert_eq!(FieldValidation::parse(Some("Ignore")), Ok(FieldValidation::Ignore));
        assert_eq!(FieldValidation::parse(Some("strict")), Err("strict".to_string()));
    }
}
