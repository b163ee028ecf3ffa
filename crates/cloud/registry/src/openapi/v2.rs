//! The OpenAPI v2 (Swagger 2.0) document Kubernetes serves at `/openapi/v2`, from the same tables as the v3
//! documents, in JSON and in the protobuf form kubectl asks for.
//!
//! kubectl reads v2 where it validates on the client: the items of a `kind: List` (`kubectl apply -f` of a
//! List checks each item against its kind's definition, found by `x-kubernetes-group-version-kind`) and
//! kinds whose group-version does not declare `fieldValidation` in v3; and `kubectl explain
//! --output=plaintext-openapiv2`. Its discovery client asks for
//! `application/com.github.proto-openapi.spec.v2@v1.0+protobuf` only and decodes the answer as protobuf
//! (gnostic's `openapi.v2.Document`), so a JSON answer would fail to decode and a 404 or 406 sends it to
//! the pre-1.10 `/swagger-2.0.0.pb-v1`: the protobuf form is the one that matters.
//!
//! `definitions` hold every struct of every served kind (and the request kinds, [`super::REQUEST_KINDS`]),
//! named as Kubernetes names them; references are `#/definitions/...`. `IntOrString` and `Quantity` are
//! strings with a format, as in Kubernetes' v2 document (v2 has no `oneOf`). `paths` is empty: kubectl
//! finds operations (and `fieldValidation` support) in the v3 documents.

use serde_json::{Map, Value, json};

use super::{INT_OR_STRING, QUANTITY};

/// The Swagger 2.0 document, as JSON.
pub fn document() -> Value {
    let mut v3 = Map::new();
    for r in edgehive_store::resources::ALL.iter() {
        super::add_kind(r.group, r.version, r.kind, &mut v3);
    }
    for (g, v, k) in super::REQUEST_KINDS {
        super::add_kind(g, v, k, &mut v3);
    }
    let mut definitions = Map::new();
    for (name, schema) in v3 {
        let converted = match name.as_str() {
            INT_OR_STRING => json!({"type": "string", "format": "int-or-string",
                                    "description": schema.get("description").cloned().unwrap_or_default()}),
            QUANTITY => {
                json!({"type": "string", "description": schema.get("description").cloned().unwrap_or_default()})
            }
            _ => to_v2(&schema),
        };
        definitions.insert(name, converted);
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": edgehive_model::well_known::KUBERNETES_VERSION},
        "paths": {},
        "definitions": definitions,
    })
}

/// `doc` with more definitions (the custom resources' schemas, in v3 form, by name).
pub fn with_definitions(doc: &Value, extra: impl IntoIterator<Item = (String, Value)>) -> Value {
    let mut doc = doc.clone();
    if let Some(defs) = doc.get_mut("definitions").and_then(Value::as_object_mut) {
        for (name, schema) in extra {
            defs.insert(name, to_v2(&schema));
        }
    }
    doc
}

/// A v3 schema in v2 form: `allOf: [$ref]` becomes a plain `$ref`, references point into `definitions`.
fn to_v2(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            if let Some(Value::Array(all)) = m.get("allOf")
                && let [one] = all.as_slice()
                && let Some(r) = one.get("$ref").and_then(Value::as_str)
            {
                out.insert("$ref".into(), json!(v2_ref(r)));
                if let Some(d) = m.get("description") {
                    out.insert("description".into(), d.clone());
                }
                return Value::Object(out);
            }
            for (k, val) in m {
                match k.as_str() {
                    "$ref" => {
                        out.insert(k.clone(), json!(val.as_str().map(v2_ref).unwrap_or_default()));
                    }
                    // v2 has no oneOf; the scalar types that use it are replaced by name.
                    "oneOf" => {}
                    "properties" => {
                        let props = val
                            .as_object()
                            .map(|p| p.iter().map(|(n, s)| (n.clone(), to_v2(s))).collect::<Map<_, _>>())
                            .unwrap_or_default();
                        out.insert(k.clone(), Value::Object(props));
                    }
                    "items" | "additionalProperties" => {
                        out.insert(k.clone(), to_v2(val));
                    }
                    _ => {
                        out.insert(k.clone(), val.clone());
                    }
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

fn v2_ref(r: &str) -> String {
    format!("#/definitions/{}", r.rsplit('/').next().unwrap_or(r))
}

/// The media type clients ask for the protobuf form with.
pub const PROTOBUF_MEDIA_TYPE: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// The media type the protobuf form is answered with (Kubernetes' spelling, without the `@` that Go's
/// `mime` package refuses).
pub const PROTOBUF_CONTENT_TYPE: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// The document in gnostic's `openapi.v2.Document` protobuf encoding (the fields kubectl reads: swagger,
/// info, paths, definitions; in a schema `$ref`, format, description, default, required, enum,
/// additionalProperties, type, items, allOf, properties and `x-` extensions, whose values are YAML
/// text, which JSON is).
pub fn protobuf(doc: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(s) = doc.get("swagger").and_then(Value::as_str) {
        string_field(&mut out, 1, s);
    }
    if let Some(info) = doc.get("info") {
        let mut m = Vec::new();
        for (n, key) in [(1, "title"), (2, "version")] {
            if let Some(s) = info.get(key).and_then(Value::as_str) {
                string_field(&mut m, n, s);
            }
        }
        message_field(&mut out, 2, &m);
    }
    // Paths { repeated NamedAny vendor_extension = 1; repeated NamedPathItem path = 2; }: none.
    message_field(&mut out, 8, &[]);
    if let Some(defs) = doc.get("definitions").and_then(Value::as_object) {
        let mut m = Vec::new();
        for (name, schema) in defs {
            named_schema(&mut m, 1, name, schema);
        }
        message_field(&mut out, 9, &m);
    }
    out
}

fn named_schema(out: &mut Vec<u8>, field: u32, name: &str, schema: &Value) {
    let mut m = Vec::new();
    string_field(&mut m, 1, name);
    message_field(&mut m, 2, &schema_message(schema));
    message_field(out, field, &m);
}

/// gnostic's `Schema` message.
fn schema_message(s: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let Some(m) = s.as_object() else { return out };
    let text = |k: &str| m.get(k).and_then(Value::as_str);
    if let Some(r) = text("$ref") {
        string_field(&mut out, 1, r);
    }
    if let Some(f) = text("format") {
        string_field(&mut out, 2, f);
    }
    if let Some(d) = text("description") {
        string_field(&mut out, 4, d);
    }
    if let Some(d) = m.get("default") {
        message_field(&mut out, 5, &any_message(d));
    }
    for r in m.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        string_field(&mut out, 19, r);
    }
    for e in m.get("enum").and_then(Value::as_array).into_iter().flatten() {
        message_field(&mut out, 20, &any_message(e));
    }
    match m.get("additionalProperties") {
        Some(Value::Bool(b)) => {
            let mut a = Vec::new();
            varint_field(&mut a, 2, u64::from(*b));
            message_field(&mut out, 21, &a);
        }
        Some(schema @ Value::Object(_)) => {
            let mut a = Vec::new();
            message_field(&mut a, 1, &schema_message(schema));
            message_field(&mut out, 21, &a);
        }
        _ => {}
    }
    if let Some(t) = text("type") {
        let mut a = Vec::new();
        string_field(&mut a, 1, t);
        message_field(&mut out, 22, &a);
    }
    if let Some(items) = m.get("items") {
        let mut a = Vec::new();
        message_field(&mut a, 1, &schema_message(items));
        message_field(&mut out, 23, &a);
    }
    for one in m.get("allOf").and_then(Value::as_array).into_iter().flatten() {
        message_field(&mut out, 24, &schema_message(one));
    }
    if let Some(props) = m.get("properties").and_then(Value::as_object) {
        let mut a = Vec::new();
        for (name, schema) in props {
            named_schema(&mut a, 1, name, schema);
        }
        message_field(&mut out, 25, &a);
    }
    for (k, v) in m.iter().filter(|(k, _)| k.starts_with("x-")) {
        let mut named = Vec::new();
        string_field(&mut named, 1, k);
        message_field(&mut named, 2, &any_message(v));
        message_field(&mut out, 31, &named);
    }
    out
}

/// gnostic's `Any`: the value as YAML text (`yaml = 2`); JSON is YAML.
fn any_message(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    string_field(&mut out, 2, &v.to_string());
    out
}

fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn varint_field(out: &mut Vec<u8>, field: u32, n: u64) {
    varint(out, u64::from(field) << 3);
    varint(out, n);
}

fn bytes_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    varint(out, (u64::from(field) << 3) | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn string_field(out: &mut Vec<u8>, field: u32, s: &str) {
    bytes_field(out, field, s.as_bytes());
}

fn message_field(out: &mut Vec<u8>, field: u32, message: &[u8]) {
    bytes_field(out, field, message);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(m) => {
                for (k, val) in m {
                    if k == "$ref" {
                        out.extend(val.as_str());
                    } else {
                        refs(val, out);
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
            _ => {}
        }
    }

    #[test]
    fn every_reference_resolves_and_every_kind_is_found() {
        let doc = document();
        let defs = doc["definitions"].as_object().unwrap();
        let mut all = Vec::new();
        refs(&doc, &mut all);
        assert!(all.len() > 300, "{}", all.len());
        for r in all {
            let name = r.strip_prefix("#/definitions/").unwrap_or_else(|| panic!("{r}"));
            assert!(defs.contains_key(name), "{r} does not resolve");
        }
        let kinds: Vec<(String, String, String)> = defs
            .values()
            .filter_map(|d| d.get("x-kubernetes-group-version-kind"))
            .flat_map(|g| g.as_array().cloned().unwrap_or_default())
            .map(|g| {
                (
                    g["group"].as_str().unwrap().into(),
                    g["version"].as_str().unwrap().into(),
                    g["kind"].as_str().unwrap().into(),
                )
            })
            .collect();
        for r in edgehive_store::resources::ALL.iter() {
            assert!(kinds.contains(&(r.group.into(), r.version.into(), r.kind.into())), "{} missing", r.kind);
        }
        for (g, v, k) in crate::openapi::REQUEST_KINDS {
            assert!(kinds.contains(&((*g).into(), (*v).into(), (*k).into())), "{k} missing");
        }
        // Typed to any depth: what `kubectl explain deployment.spec.template.spec.affinity.nodeAffinity` walks.
        let affinity = &defs["io.k8s.api.core.v1.Affinity"]["properties"]["nodeAffinity"];
        assert_eq!(affinity["$ref"], "#/definitions/io.k8s.api.core.v1.NodeAffinity");
        assert_eq!(defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"], "int-or-string");
        // No schema uses the keyword (JSONSchemaProps has a field of that name).
        fn uses_one_of(v: &Value) -> bool {
            match v {
                Value::Object(m) => m.iter().any(|(k, x)| {
                    k == "oneOf"
                        || if k == "properties" {
                            x.as_object().is_some_and(|p| p.values().any(uses_one_of))
                        } else {
                            uses_one_of(x)
                        }
                }),
                Value::Array(a) => a.iter().any(uses_one_of),
                _ => false,
            }
        }
        assert!(!uses_one_of(&doc));
    }

    /// A minimal protobuf reader: the (field, bytes) pairs of length-delimited fields.
    fn fields(mut b: &[u8]) -> Vec<(u64, Vec<u8>)> {
        fn varint(b: &mut &[u8]) -> u64 {
            let mut n = 0;
            let mut shift = 0;
            loop {
                let byte = b[0];
                *b = &b[1..];
                n |= u64::from(byte & 0x7f) << shift;
                shift += 7;
                if byte < 0x80 {
                    return n;
                }
            }
        }
        let mut out = Vec::new();
        while !b.is_empty() {
            let key = varint(&mut b);
            match key & 7 {
                0 => out.push((key >> 3, varint(&mut b).to_le_bytes().to_vec())),
                2 => {
                    let len = varint(&mut b) as usize;
                    out.push((key >> 3, b[..len].to_vec()));
                    b = &b[len..];
                }
                other => panic!("wire type {other}"),
            }
        }
        out
    }

    #[test]
    fn protobuf_carries_definitions_with_their_extensions() {
        let doc = document();
        let pb = protobuf(&doc);
        let top = fields(&pb);
        assert_eq!(top[0], (1, b"2.0".to_vec()));
        let defs = &top.iter().find(|(f, _)| *f == 9).unwrap().1;
        let named = fields(defs);
        assert_eq!(named.len(), doc["definitions"].as_object().unwrap().len());
        let pod = named.iter().map(|(_, b)| fields(b)).find(|f| f[0].1 == b"io.k8s.api.core.v1.Pod").unwrap();
        let schema = fields(&pod[1].1);
        let ext = schema.iter().find(|(f, _)| *f == 31).unwrap();
        let ext = fields(&ext.1);
        assert_eq!(ext[0].1, b"x-kubernetes-group-version-kind");
        let yaml = fields(&ext[1].1);
        let v: Value = serde_json::from_slice(&yaml[0].1).unwrap();
        assert_eq!(v, json!([{"group": "", "kind": "Pod", "version": "v1"}]));
        // type = 22 (TypeItem), properties = 25.
        assert_eq!(fields(&schema.iter().find(|(f, _)| *f == 22).unwrap().1)[0].1, b"object");
        assert!(schema.iter().any(|(f, _)| *f == 25));
    }
}
