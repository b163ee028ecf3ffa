//! The CustomResourceDefinition's own check of a version's schema: that it
//! is structural, as apiextensions requires of every `apiextensions.k8s.io/v1`
//! CRD, with apiextensions' field paths
//! (`spec.versions[0].schema.openAPIV3Schema.properties[spec].type`) and
//! messages.

use serde_json::Value;

use super::{Schema, Type};
use crate::validation::FieldError;

/// The errors of `schema` (a version's `openAPIV3Schema`, as JSON) found at
/// `path`; none means it is structural and every default fits its field.
pub fn check(schema: &Value, path: &str) -> Vec<FieldError> {
    let mut out = Vec::new();
    let Some(m) = schema.as_object() else {
        out.push(FieldError::required(path, ""));
        return out;
    };
    match m.get("type").and_then(Value::as_str) {
        None | Some("") => out.push(FieldError::required(&format!("{path}.type"), "must not be empty at the root")),
        Some("object") => {}
        Some(other) => out.push(FieldError::invalid(&format!("{path}.type"), other, "must be object at the root")),
    }
    if let Some(meta) = m.get("properties").and_then(|p| p.get("metadata")) {
        let only_names = meta
            .get("properties")
            .and_then(Value::as_object)
            .is_none_or(|p| p.keys().all(|k| k == "name" || k == "generateName"));
        let other_keys =
            meta.as_object().is_some_and(|o| o.keys().any(|k| !matches!(k.as_str(), "type" | "properties")));
        if !only_names || other_keys {
            out.push(FieldError::forbidden(
                &format!("{path}.properties[metadata]"),
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
    node(schema, path, Place::Root, &mut out);
    if out.is_empty()
        && let Err(e) = Schema::parse(schema)
    {
        out.push(FieldError::invalid(&format!("{path}.{}", e.path), Value::Null, e.message).with_value_text(""));
    }
    out
}

/// Where a schema node sits, which decides the words of a missing type.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Root,
    Property,
    Items,
    Additional,
}

fn node(v: &Value, path: &str, place: Place, out: &mut Vec<FieldError>) {
    let Some(m) = v.as_object() else {
        out.push(FieldError::invalid(path, v.clone(), "must be a schema object"));
        return;
    };
    let at = |k: &str| format!("{path}.{k}");
    let flag = |k: &str| m.get(k).and_then(Value::as_bool);
    let int_or_string = flag("x-kubernetes-int-or-string") == Some(true);
    let preserve = flag("x-kubernetes-preserve-unknown-fields");
    let ty = m.get("type").and_then(Value::as_str).filter(|t| !t.is_empty());
    if m.contains_key("$ref") {
        out.push(FieldError::forbidden(&at("$ref"), "$ref is not supported"));
    }
    if preserve == Some(false) {
        out.push(FieldError::invalid(&at("x-kubernetes-preserve-unknown-fields"), false, "must be true or undefined"));
    }
    if int_or_string {
        if let Some(t) = ty {
            out.push(FieldError::invalid(&at("type"), t, "must be empty if x-kubernetes-int-or-string is true"));
        }
    } else if ty.is_none() && preserve != Some(true) && place != Place::Root {
        let detail = match place {
            Place::Items => "must not be empty for specified array items",
            _ => "must not be empty for specified object fields",
        };
        out.push(FieldError::required(&at("type"), detail));
    }
    if let Some(t) = ty
        && Type::parse(t).is_none()
    {
        out.push(FieldError::not_supported(
            &at("type"),
            t,
            &["array", "boolean", "integer", "number", "object", "string"],
        ));
    }
    if flag("uniqueItems") == Some(true) {
        out.push(FieldError::forbidden(
            &at("uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if m.contains_key("x-kubernetes-validations") {
        out.push(FieldError::forbidden(
            &at("x-kubernetes-validations"),
            "CEL validation rules are not supported by this server; remove them or enforce the rules elsewhere",
        ));
    }
    if flag("x-kubernetes-embedded-resource") == Some(true) && ty != Some("object") {
        out.push(FieldError::invalid(&at("x-kubernetes-embedded-resource"), true, "must be used with type object"));
    }
    if m.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map")
        && m.get("x-kubernetes-list-map-keys").and_then(Value::as_array).is_none_or(Vec::is_empty)
    {
        out.push(FieldError::required(
            &at("x-kubernetes-list-map-keys"),
            "must not be empty if x-kubernetes-list-type is map",
        ));
    }
    let props = m.get("properties").and_then(Value::as_object);
    let additional = m.get("additionalProperties").filter(|a| !a.is_null());
    if props.is_some_and(|p| !p.is_empty()) && additional.is_some_and(|a| a != &Value::Bool(false)) {
        out.push(FieldError::forbidden(
            &at("additionalProperties"),
            "additionalProperties and properties are mutual exclusive",
        ));
    }
    if let Some(props) = props {
        for (name, p) in props {
            node(p, &format!("{path}.properties[{name}]"), Place::Property, out);
        }
    }
    if let Some(a) = additional.filter(|a| a.is_object()) {
        node(a, &at("additionalProperties"), Place::Additional, out);
    }
    match m.get("items") {
        Some(Value::Array(_)) => {
            out.push(FieldError::forbidden(&at("items"), "items must be a schema object and not an array"));
        }
        Some(items @ Value::Object(_)) => node(items, &at("items"), Place::Items, out),
        _ if ty == Some("array") => {
            out.push(FieldError::required(&at("items"), "must be specified"));
        }
        _ => {}
    }
    // An int-or-string may say so the way OpenAPI generators write it,
    // `anyOf: [{type: integer}, {type: string}]` (also as the first item of
    // an `allOf`): apiextensions allows those two types there.
    let int_or_string = m.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let is_pattern = |v: Option<&Value>| {
        v.and_then(Value::as_array).is_some_and(|l| {
            l.len() == 2
                && l[0].as_object().is_some_and(|o| o.len() == 1 && o.get("type") == Some(&Value::from("integer")))
                && l[1].as_object().is_some_and(|o| o.len() == 1 && o.get("type") == Some(&Value::from("string")))
        })
    };
    let skip_any_of = int_or_string && is_pattern(m.get("anyOf"));
    let skip_first_all_of = int_or_string
        && m.get("allOf")
            .and_then(Value::as_array)
            .and_then(|l| l.first())
            .is_some_and(|first| first.as_object().is_some_and(|o| o.len() == 1) && is_pattern(first.get("anyOf")));
    for key in ["allOf", "anyOf", "oneOf"] {
        if key == "anyOf" && skip_any_of {
            continue;
        }
        if let Some(list) = m.get(key).and_then(Value::as_array) {
            for (i, s) in list.iter().enumerate() {
                if key == "allOf" && i == 0 && skip_first_all_of {
                    continue;
                }
                value_validation_only(s, &format!("{path}.{key}[{i}]"), out);
            }
        }
    }
    if let Some(not) = m.get("not") {
        value_validation_only(not, &at("not"), out);
    }
    // A default must be what the field may hold, and keep nothing pruning
    // would remove.
    if let (Some(d), Ok(schema)) = (m.get("default"), Schema::parse(v)) {
        let mut copy = d.clone();
        let mut gone = Vec::new();
        schema.prune_value(&mut copy, "", &mut gone);
        if !gone.is_empty() {
            out.push(FieldError::invalid(&at("default"), d.clone(), "must not have unknown fields"));
        } else {
            schema.check_at(d, &at("default"), out);
        }
    }
}

/// Inside `allOf`/`anyOf`/`oneOf`/`not` a structural schema may only
/// validate values: no types, properties' own types, defaults or
/// `additionalProperties` of its own.
fn value_validation_only(v: &Value, path: &str, out: &mut Vec<FieldError>) {
    let Some(m) = v.as_object() else { return };
    for key in ["type", "default", "additionalProperties", "nullable", "x-kubernetes-preserve-unknown-fields"] {
        if m.contains_key(key) {
            out.push(FieldError::forbidden(&format!("{path}.{key}"), "must be empty to be structural"));
        }
    }
}
