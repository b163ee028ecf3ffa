//! Pruning and defaulting of custom objects, as apiextensions does on every
//! decode: unknown fields go (and are reported, for strict field
//! validation), a missing field with a `default` gets a copy of it (also
//! inside a default just set), and a `null` in a field that is not
//! `nullable` is replaced by its default or dropped.

use serde_json::{Map, Value};

use super::{RESOURCE_FIELDS, Schema, child};

impl Schema {
    /// Removes from `obj` (a whole custom object) every field its schema
    /// does not specify, unless under `x-kubernetes-preserve-unknown-fields`;
    /// returns their paths (`spec.replica`, `spec.items[0].nmae`), in the
    /// order found. `apiVersion`, `kind` and `metadata` stay at the root and
    /// in embedded resources.
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        let mut pruned = Vec::new();
        if let Value::Object(m) = obj {
            self.prune_object(m, "", true, &mut pruned);
        }
        pruned
    }

    pub(super) fn prune_value(&self, v: &mut Value, path: &str, pruned: &mut Vec<String>) {
        match v {
            Value::Object(m) => self.prune_object(m, path, self.embedded_resource, pruned),
            Value::Array(items) => {
                if let Some(s) = &self.items {
                    for (i, item) in items.iter_mut().enumerate() {
                        s.prune_value(item, &format!("{path}[{i}]"), pruned);
                    }
                }
            }
            _ => {}
        }
    }

    fn prune_object(&self, m: &mut Map<String, Value>, path: &str, resource: bool, pruned: &mut Vec<String>) {
        let keep_unknown =
            self.preserve_unknown || (self.ty.is_none() && self.properties.is_empty() && self.additional.is_none());
        let mut gone = Vec::new();
        for (key, value) in m.iter_mut() {
            // `apiVersion`, `kind` and `metadata` at a resource's root are
            // never pruned by the schema, even one that says `metadata:
            // {type: object}` (KubeEdge's do): the object metadata is the
            // API server's, as apiextensions' pruning skips it.
            if resource && RESOURCE_FIELDS.contains(&key.as_str()) {
                continue;
            }
            let at = child(path, key);
            if let Some(p) = self.properties.get(key) {
                p.prune_value(value, &at, pruned);
            } else if let Some(a) = &self.additional {
                a.prune_value(value, &at, pruned);
            } else if !keep_unknown {
                gone.push(key.clone());
                pruned.push(at);
            }
        }
        for key in gone {
            m.remove(&key);
        }
    }

    /// Applies the schema's defaults to `obj` (a whole custom object).
    pub fn apply_defaults(&self, obj: &mut Value) {
        if let Value::Object(m) = obj {
            self.default_object(m, true);
        }
    }

    fn default_value(&self, v: &mut Value) {
        match v {
            Value::Object(m) => self.default_object(m, false),
            Value::Array(items) => {
                if let Some(s) = &self.items {
                    for item in items {
                        s.default_value(item);
                    }
                }
            }
            _ => {}
        }
    }

    fn default_object(&self, m: &mut Map<String, Value>, root: bool) {
        for (key, p) in &self.properties {
            if root && RESOURCE_FIELDS.contains(&key.as_str()) {
                continue;
            }
            let null = m.get(key).is_some_and(Value::is_null) && !p.nullable;
            match &p.default {
                Some(d) if !m.contains_key(key) || null => {
                    m.insert(key.clone(), d.clone());
                }
                None if null => {
                    m.remove(key);
                }
                _ => {}
            }
        }
        for (key, v) in m.iter_mut() {
            if root && RESOURCE_FIELDS.contains(&key.as_str()) {
                continue;
            }
            if let Some(p) = self.properties.get(key) {
                p.default_value(v);
            } else if let Some(a) = &self.additional {
                a.default_value(v);
            }
        }
    }
}
