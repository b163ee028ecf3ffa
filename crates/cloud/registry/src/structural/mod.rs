//! Structural schemas: the `openAPIV3Schema` of a CustomResourceDefinition
//! version, and what Kubernetes does with it to a custom object.
//!
//! - [`Schema::parse`] reads a schema (a `JSONSchemaProps` as JSON) once
//!   into a tree with its patterns compiled, so that objects are checked
//!   against it without reading the JSON again;
//! - [`check`] is the CRD's own validation of a schema: that it is
//!   *structural* (every field typed, no `$ref`, `additionalProperties`
//!   and `properties` not together, metadata restricted to name and
//!   generateName, ...), with apiextensions' field paths and messages;
//! - [`Schema::apply_defaults`] applies `default`s (and drops `null`s a
//!   non-nullable field cannot hold), as the API server does on every
//!   decode of a custom object;
//! - [`Schema::prune`] removes fields the schema does not specify (unless
//!   `x-kubernetes-preserve-unknown-fields`), returning their paths, which
//!   are what strict field validation reports as unknown;
//! - [`Schema::validate`] is the OpenAPI validation of an object, its
//!   errors mapped to `field.Error`s as apiextensions maps kube-openapi's
//!   (`spec.replicas: Invalid value: "string": spec.replicas in body must
//!   be of type integer: "string"`, `spec.color: Unsupported value: ...`,
//!   `spec.name: Required value`).
//!
//! The order is Kubernetes': prune, default, then validate.
//!
//! `x-kubernetes-validations` (CEL rules) are not evaluated: a schema that
//! has them is refused by [`check`] with a message saying so, rather than
//! accepted with rules silently ignored.

mod check;
mod defaults;
mod validate;

use std::collections::BTreeMap;

use serde_json::Value;

pub use check::check;

/// A JSON type a schema may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    /// `object`.
    Object,
    /// `array`.
    Array,
    /// `string`.
    String,
    /// `integer`.
    Integer,
    /// `number`.
    Number,
    /// `boolean`.
    Boolean,
}

impl Type {
    fn parse(s: &str) -> Option<Type> {
        Some(match s {
            "object" => Type::Object,
            "array" => Type::Array,
            "string" => Type::String,
            "integer" => Type::Integer,
            "number" => Type::Number,
            "boolean" => Type::Boolean,
            _ => return None,
        })
    }

    /// The schema's name for the type.
    pub fn name(self) -> &'static str {
        match self {
            Type::Object => "object",
            Type::Array => "array",
            Type::String => "string",
            Type::Integer => "integer",
            Type::Number => "number",
            Type::Boolean => "boolean",
        }
    }
}

/// A compiled regular expression and its source.
#[derive(Debug, Clone)]
pub struct Pattern {
    /// As written in the schema.
    pub source: String,
    regex: regex::Regex,
}

/// A parsed structural schema (one node and what is under it).
#[derive(Debug, Clone, Default)]
pub struct Schema {
    /// `type` (none: any, as under int-or-string or preserve-unknown-fields).
    pub ty: Option<Type>,
    /// `format` (int32, int64, date-time, ...).
    pub format: Option<String>,
    /// `nullable`.
    pub nullable: bool,
    /// `properties`, by name.
    pub properties: BTreeMap<String, Schema>,
    /// `additionalProperties` as a schema (maps).
    pub additional: Option<Box<Schema>>,
    /// `additionalProperties: false` was written (the default for a
    /// structural object with `properties`).
    pub additional_forbidden: bool,
    /// `items`.
    pub items: Option<Box<Schema>>,
    /// `required`.
    pub required: Vec<String>,
    /// `enum`.
    pub enumeration: Vec<Value>,
    /// `pattern`.
    pub pattern: Option<Pattern>,
    /// `minLength`, `maxLength`.
    pub min_length: Option<u64>,
    pub max_length: Option<u64>,
    /// `minItems`, `maxItems`.
    pub min_items: Option<u64>,
    pub max_items: Option<u64>,
    /// `minProperties`, `maxProperties`.
    pub min_properties: Option<u64>,
    pub max_properties: Option<u64>,
    /// `minimum` (and `exclusiveMinimum`), `maximum` (and `exclusiveMaximum`).
    pub minimum: Option<(f64, bool)>,
    pub maximum: Option<(f64, bool)>,
    /// `multipleOf`.
    pub multiple_of: Option<f64>,
    /// `uniqueItems`.
    pub unique_items: bool,
    /// `default`.
    pub default: Option<Value>,
    /// `allOf`, `anyOf`, `oneOf`, `not`: value validations only.
    pub all_of: Vec<Schema>,
    pub any_of: Vec<Schema>,
    pub one_of: Vec<Schema>,
    pub not: Option<Box<Schema>>,
    /// `x-kubernetes-preserve-unknown-fields`.
    pub preserve_unknown: bool,
    /// `x-kubernetes-int-or-string`.
    pub int_or_string: bool,
    /// `x-kubernetes-embedded-resource`: an object with its own
    /// apiVersion, kind and metadata.
    pub embedded_resource: bool,
    /// `x-kubernetes-list-type` (atomic, set, map).
    pub list_type: Option<String>,
    /// `x-kubernetes-list-map-keys`.
    pub list_map_keys: Vec<String>,
    /// `description`.
    pub description: Option<String>,
}

/// A schema that could not be read (a pattern that does not compile, a
/// keyword of the wrong JSON type); [`check`] reports these with paths.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ParseError {
    /// Where, e.g. `properties[spec].pattern`.
    pub path: String,
    /// What.
    pub message: String,
}

impl Schema {
    /// Reads a schema (a `JSONSchemaProps` as JSON).
    pub fn parse(v: &Value) -> Result<Schema, ParseError> {
        parse_at(v, "")
    }

    /// The schema of property `name`, if specified.
    pub fn property(&self, name: &str) -> Option<&Schema> {
        self.properties.get(name)
    }
}

fn child(path: &str, seg: &str) -> String {
    if path.is_empty() { seg.to_string() } else { format!("{path}.{seg}") }
}

fn parse_at(v: &Value, path: &str) -> Result<Schema, ParseError> {
    let err = |what: &str, message: String| ParseError { path: child(path, what), message };
    let Some(m) = v.as_object() else {
        return Err(ParseError { path: path.to_string(), message: "must be an object".into() });
    };
    let mut s = Schema::default();
    let text = |key: &str| -> Result<Option<String>, ParseError> {
        match m.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(t)) => Ok(Some(t.clone())),
            Some(_) => Err(err(key, "must be a string".into())),
        }
    };
    let flag = |key: &str| -> Result<bool, ParseError> {
        match m.get(key) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(err(key, "must be a boolean".into())),
        }
    };
    let count = |key: &str| -> Result<Option<u64>, ParseError> {
        match m.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(n) => n.as_u64().map(Some).ok_or_else(|| err(key, "must be a non-negative integer".into())),
        }
    };
    let number = |key: &str| -> Result<Option<f64>, ParseError> {
        match m.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(n) => n.as_f64().map(Some).ok_or_else(|| err(key, "must be a number".into())),
        }
    };
    if let Some(t) = text("type")? {
        s.ty = Some(Type::parse(&t).ok_or_else(|| {
            err(
                "type",
                format!(
                    "must be one of \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\", not {t:?}"
                ),
            )
        })?);
    }
    s.format = text("format")?;
    s.description = text("description")?;
    s.nullable = flag("nullable")?;
    s.unique_items = flag("uniqueItems")?;
    s.preserve_unknown = flag("x-kubernetes-preserve-unknown-fields")?;
    s.int_or_string = flag("x-kubernetes-int-or-string")?;
    s.embedded_resource = flag("x-kubernetes-embedded-resource")?;
    s.list_type = text("x-kubernetes-list-type")?;
    if let Some(keys) = m.get("x-kubernetes-list-map-keys").and_then(Value::as_array) {
        s.list_map_keys = keys.iter().filter_map(Value::as_str).map(str::to_string).collect();
    }
    if let Some(props) = m.get("properties") {
        let props = props.as_object().ok_or_else(|| err("properties", "must be an object".into()))?;
        for (name, p) in props {
            s.properties.insert(name.clone(), parse_at(p, &format!("{}[{name}]", child(path, "properties")))?);
        }
    }
    match m.get("additionalProperties") {
        None | Some(Value::Null) | Some(Value::Bool(true)) => {}
        Some(Value::Bool(false)) => s.additional_forbidden = true,
        Some(a) => s.additional = Some(Box::new(parse_at(a, &child(path, "additionalProperties"))?)),
    }
    if let Some(items) = m.get("items").filter(|i| !i.is_null()) {
        s.items = Some(Box::new(parse_at(items, &child(path, "items"))?));
    }
    if let Some(req) = m.get("required") {
        let req = req.as_array().ok_or_else(|| err("required", "must be a list of strings".into()))?;
        s.required = req.iter().filter_map(Value::as_str).map(str::to_string).collect();
    }
    if let Some(e) = m.get("enum").and_then(Value::as_array) {
        s.enumeration = e.clone();
    }
    if let Some(p) = text("pattern")? {
        // Kubernetes compiles patterns with Go's RE2 engine; the regex
        // crate's syntax is the same family (no backreferences or
        // look-around in either).
        let regex = regex::Regex::new(&p)
            .map_err(|e| err("pattern", format!("must be a valid regular expression, but isn't: {e}")))?;
        s.pattern = Some(Pattern { source: p, regex });
    }
    s.min_length = count("minLength")?;
    s.max_length = count("maxLength")?;
    s.min_items = count("minItems")?;
    s.max_items = count("maxItems")?;
    s.min_properties = count("minProperties")?;
    s.max_properties = count("maxProperties")?;
    s.minimum = number("minimum")?.map(|n| (n, false));
    s.maximum = number("maximum")?.map(|n| (n, false));
    if flag("exclusiveMinimum")? {
        s.minimum = s.minimum.map(|(n, _)| (n, true));
    }
    if flag("exclusiveMaximum")? {
        s.maximum = s.maximum.map(|(n, _)| (n, true));
    }
    s.multiple_of = number("multipleOf")?;
    s.default = m.get("default").cloned();
    for (key, into) in [("allOf", &mut s.all_of), ("anyOf", &mut s.any_of), ("oneOf", &mut s.one_of)] {
        if let Some(list) = m.get(key) {
            let list = list.as_array().ok_or_else(|| err(key, "must be a list of schemas".into()))?;
            for (i, item) in list.iter().enumerate() {
                into.push(parse_at(item, &format!("{}[{i}]", child(path, key)))?);
            }
        }
    }
    if let Some(not) = m.get("not").filter(|n| !n.is_null()) {
        s.not = Some(Box::new(parse_at(not, &child(path, "not"))?));
    }
    Ok(s)
}

/// Whether a JSON value is of `ty` as OpenAPI sees it (an integer is a
/// number too; a whole float is not an integer, as JSON decodes it).
fn is_type(v: &Value, ty: Type) -> bool {
    match ty {
        Type::Object => v.is_object(),
        Type::Array => v.is_array(),
        Type::String => v.is_string(),
        Type::Integer => v.is_i64() || v.is_u64(),
        Type::Number => v.is_number(),
        Type::Boolean => v.is_boolean(),
    }
}

/// The JSON type name of a value, as kube-openapi prints it in a type error.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The fields an object at the root (or an embedded resource) always
/// keeps, whatever its schema says.
const RESOURCE_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

#[cfg(test)]
mod tests;
