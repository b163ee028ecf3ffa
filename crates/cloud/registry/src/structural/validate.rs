//! OpenAPI validation of a custom object against its structural schema,
//! each failure as the `field.Error` apiextensions makes of kube-openapi's:
//! `Required value` for `required`, `Unsupported value` for `enum`, `Too
//! long` for `maxLength`, `Too many` for `maxItems`, and otherwise `Invalid
//! value` with kube-openapi's message (`spec.size in body should be less
//! than or equal to 10`). Paths are kube-openapi's: `spec.items[0].name`,
//! map values `spec.labels.key`.

use serde_json::Value;

use super::{RESOURCE_FIELDS, Schema, Type, child, is_type, json_type};
use crate::validation::{FieldError, go_quote};

impl Schema {
    /// Validates `obj` (a whole custom object, already pruned and
    /// defaulted); the root's `apiVersion`, `kind` and `metadata` are the
    /// API server's to check, not the schema's.
    pub fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut out = Vec::new();
        let Some(m) = obj.as_object() else {
            out.push(type_error("", obj, Type::Object));
            return out;
        };
        for (key, value) in m {
            if RESOURCE_FIELDS.contains(&key.as_str()) {
                continue;
            }
            if let Some(p) = self.properties.get(key) {
                p.check_at(value, key, &mut out);
            } else if let Some(a) = &self.additional {
                a.check_at(value, key, &mut out);
            }
        }
        for r in &self.required {
            if !RESOURCE_FIELDS.contains(&r.as_str()) && !m.contains_key(r) {
                out.push(FieldError::required(r, ""));
            }
        }
        out
    }

    /// Validates one value `v` found at `path`.
    pub(super) fn check_at(&self, v: &Value, path: &str, out: &mut Vec<FieldError>) {
        if v.is_null() {
            if !self.nullable && !self.int_or_string && (self.ty.is_some()) {
                out.push(type_error(path, v, self.ty.unwrap_or(Type::Object)));
            }
            return;
        }
        if self.int_or_string {
            if !(v.is_string() || v.is_i64() || v.is_u64()) {
                out.push(type_error(path, v, Type::Integer));
                out.push(type_error(path, v, Type::String));
                return;
            }
        } else if let Some(ty) = self.ty
            && !is_type(v, ty)
        {
            out.push(type_error(path, v, ty));
            return;
        }
        self.check_composition(v, path, out);
        match v {
            Value::String(s) => self.check_string(s, v, path, out),
            Value::Number(_) => self.check_number(v, path, out),
            Value::Array(items) => self.check_array(items, path, out),
            Value::Object(m) => self.check_object(m, path, out),
            Value::Bool(_) | Value::Null => {}
        }
        if !self.enumeration.is_empty() && !self.enumeration.contains(v) {
            let allowed: Vec<String> = self
                .enumeration
                .iter()
                .map(|e| e.as_str().map(str::to_string).unwrap_or_else(|| e.to_string()))
                .collect();
            let allowed: Vec<&str> = allowed.iter().map(String::as_str).collect();
            out.push(FieldError::not_supported(path, v.clone(), &allowed));
        }
    }

    fn check_composition(&self, v: &Value, path: &str, out: &mut Vec<FieldError>) {
        for s in &self.all_of {
            s.check_at(v, path, out);
        }
        let passes = |s: &Schema| {
            let mut errs = Vec::new();
            s.check_at(v, path, &mut errs);
            errs.is_empty()
        };
        if !self.any_of.is_empty() && !self.any_of.iter().any(passes) {
            out.push(invalid(path, v, format!("{} must validate at least one schema (anyOf)", name(path))));
        }
        if !self.one_of.is_empty() {
            let n = self.one_of.iter().filter(|s| passes(s)).count();
            if n != 1 {
                out.push(invalid(path, v, format!("{} must validate one and only one schema (oneOf)", name(path))));
            }
        }
        if let Some(not) = &self.not
            && passes(not)
        {
            out.push(invalid(path, v, format!("{} must not validate the schema (not)", name(path))));
        }
    }

    fn check_string(&self, s: &str, v: &Value, path: &str, out: &mut Vec<FieldError>) {
        let chars = s.chars().count() as u64;
        if let Some(max) = self.max_length
            && chars > max
        {
            out.push(FieldError::too_long(path, max as usize));
        }
        if let Some(min) = self.min_length
            && chars < min
        {
            out.push(invalid(path, v, format!("{} in body should be at least {min} chars long", name(path))));
        }
        if let Some(p) = &self.pattern
            && !p.regex.is_match(s)
        {
            out.push(invalid(path, v, format!("{} in body should match '{}'", name(path), p.source)));
        }
        if let Some(f) = self.format.as_deref()
            && let Some(what) = bad_format(f, s)
        {
            out.push(invalid(path, v, format!("{} in body must be of type {what}: {}", name(path), go_quote(s))));
        }
    }

    fn check_number(&self, v: &Value, path: &str, out: &mut Vec<FieldError>) {
        let Some(n) = v.as_f64() else { return };
        if let Some((max, exclusive)) = self.maximum
            && (n > max || (exclusive && n == max))
        {
            let rel = if exclusive { "less than" } else { "less than or equal to" };
            out.push(invalid(path, v, format!("{} in body should be {rel} {}", name(path), go_number(max))));
        }
        if let Some((min, exclusive)) = self.minimum
            && (n < min || (exclusive && n == min))
        {
            let rel = if exclusive { "greater than" } else { "greater than or equal to" };
            out.push(invalid(path, v, format!("{} in body should be {rel} {}", name(path), go_number(min))));
        }
        if let Some(m) = self.multiple_of
            && m > 0.0
            && ((n / m) - (n / m).round()).abs() > 1e-9
        {
            out.push(invalid(path, v, format!("{} in body should be a multiple of {}", name(path), go_number(m))));
        }
    }

    fn check_array(&self, items: &[Value], path: &str, out: &mut Vec<FieldError>) {
        if let Some(s) = &self.items {
            for (i, item) in items.iter().enumerate() {
                s.check_at(item, &format!("{path}[{i}]"), out);
            }
        }
        let n = items.len() as u64;
        if let Some(max) = self.max_items
            && n > max
        {
            out.push(FieldError::too_many(path, items.len(), max as usize));
        }
        if let Some(min) = self.min_items
            && n < min
        {
            out.push(invalid(
                path,
                &Value::from(n),
                format!("{} in body should have at least {min} items", name(path)),
            ));
        }
        if self.unique_items && has_duplicates(items) {
            out.push(invalid(path, &Value::from(""), format!("{} in body shouldn't contain duplicates", name(path))));
        }
        match self.list_type.as_deref() {
            Some("set") => {
                for (i, item) in items.iter().enumerate() {
                    if items[..i].contains(item) {
                        out.push(FieldError::duplicate(&format!("{path}[{i}]"), item.clone()));
                    }
                }
            }
            Some("map") if !self.list_map_keys.is_empty() => {
                let key_of = |item: &Value| -> Vec<Value> {
                    self.list_map_keys.iter().map(|k| item.get(k).cloned().unwrap_or(Value::Null)).collect()
                };
                for (i, item) in items.iter().enumerate() {
                    let key = key_of(item);
                    if items[..i].iter().any(|earlier| key_of(earlier) == key) {
                        let shown: serde_json::Map<String, Value> =
                            self.list_map_keys.iter().cloned().zip(key.iter().cloned()).collect();
                        let text = format!("map[string]interface {{}}{}", Value::Object(shown));
                        out.push(FieldError::duplicate(&format!("{path}[{i}]"), Value::Null).with_value_text(text));
                    }
                }
            }
            _ => {}
        }
    }

    fn check_object(&self, m: &serde_json::Map<String, Value>, path: &str, out: &mut Vec<FieldError>) {
        for (key, value) in m {
            if self.embedded_resource && RESOURCE_FIELDS.contains(&key.as_str()) && !self.properties.contains_key(key) {
                continue;
            }
            let at = child(path, key);
            if let Some(p) = self.properties.get(key) {
                p.check_at(value, &at, out);
            } else if let Some(a) = &self.additional {
                a.check_at(value, &at, out);
            }
        }
        for r in &self.required {
            if !m.contains_key(r) {
                out.push(FieldError::required(&child(path, r), ""));
            }
        }
        let n = m.len() as u64;
        if let Some(max) = self.max_properties
            && n > max
        {
            out.push(FieldError::too_many(path, m.len(), max as usize));
        }
        if let Some(min) = self.min_properties
            && n < min
        {
            out.push(invalid(
                path,
                &Value::from(min),
                format!("{} in body should have at least {min} properties", name(path)),
            ));
        }
    }
}

/// The path as kube-openapi names the value in its messages.
fn name(path: &str) -> &str {
    if path.is_empty() { "." } else { path }
}

fn invalid(path: &str, v: &Value, detail: String) -> FieldError {
    FieldError::invalid(path, v.clone(), detail)
}

/// `spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"`.
fn type_error(path: &str, v: &Value, want: Type) -> FieldError {
    let actual = json_type(v);
    FieldError::type_invalid(
        path,
        Value::from(actual),
        format!("{} in body must be of type {}: {}", name(path), want.name(), go_quote(actual)),
    )
}

/// A number as Go's `%v` prints a float64: whole numbers without a point.
fn go_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 { format!("{}", n as i64) } else { format!("{n}") }
}

fn has_duplicates(items: &[Value]) -> bool {
    items.iter().enumerate().any(|(i, item)| items[..i].contains(item))
}

/// The formats Kubernetes checks on custom objects (apiextensions' format
/// registry) that a string may fail; `None` when it passes or the format is
/// not one that is checked.
fn bad_format(format: &str, s: &str) -> Option<&'static str> {
    let ok = match format {
        "int32" | "int64" | "float" | "double" | "byte" | "password" | "" => return None,
        "date-time" | "datetime" => edgehive_store::parse_rfc3339(s).is_some(),
        "date" => {
            let b = s.as_bytes();
            b.len() == 10
                && b[4] == b'-'
                && b[7] == b'-'
                && b.iter().enumerate().all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
        }
        "uuid" => {
            let parts: Vec<&str> = s.split('-').collect();
            parts.len() == 5
                && parts
                    .iter()
                    .zip([8, 4, 4, 4, 12])
                    .all(|(p, n)| p.len() == n && p.chars().all(|c| c.is_ascii_hexdigit()))
        }
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => s.split_once('/').is_some_and(|(ip, bits)| {
            ip.parse::<std::net::IpAddr>().is_ok() && bits.parse::<u8>().is_ok_and(|b| b <= 128)
        }),
        _ => return None,
    };
    if ok {
        return None;
    }
    Some(match format {
        "date-time" | "datetime" => "date-time",
        "date" => "date",
        "uuid" => "uuid",
        "ipv4" => "ipv4",
        "ipv6" => "ipv6",
        _ => "cidr",
    })
}
