//! Sets of field paths, as structured-merge-diff's `fieldpath.Set` holds
//! them, and their wire form `FieldsV1` (`{"f:spec":{"f:replicas":{}}}`).
//!
//! A path is a list of elements, each written as `FieldsV1` writes it:
//! `f:<name>` (a struct field or map key), `k:<json object>` (an item of a
//! list keyed by some of its fields, the keys sorted), `v:<json>` (an item
//! of a set of scalars) and `i:<index>` (an item of a list without keys).
//! The set is a tree: a node is a *member* when its own path is in the
//! set (written `".": {}` when it also has children, `{}` when it has
//! none); other nodes only lead to members.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// A set of field paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    member: bool,
    children: BTreeMap<String, FieldSet>,
}

/// The element naming struct field or map key `name`.
pub(crate) fn field(name: &str) -> String {
    format!("f:{name}")
}

/// The element naming a keyed list item: `keys` as a JSON object with its
/// keys sorted (Go's encoding of structured-merge-diff's sorted key list).
pub(crate) fn key(keys: &[(&str, &Value)]) -> String {
    let mut sorted: Vec<_> = keys.to_vec();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = String::from("k:{");
    for (i, (k, v)) in sorted.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::String((*k).to_string()).to_string());
        out.push(':');
        out.push_str(&canonical(v));
    }
    out.push('}');
    out
}

/// The element naming the item `v` of a set of scalars.
pub(crate) fn value(v: &Value) -> String {
    format!("v:{}", canonical(v))
}

/// JSON with object keys sorted, whatever order `serde_json` keeps.
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> =
                keys.iter().map(|k| format!("{}:{}", Value::String((*k).clone()), canonical(&m[k.as_str()]))).collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(canonical).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

impl FieldSet {
    /// The empty set.
    pub fn new() -> FieldSet {
        FieldSet::default()
    }

    /// Whether the set holds no path.
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }

    /// Adds `path` (elements as [`field`], [`key`], [`value`] make them).
    pub fn insert(&mut self, path: &[String]) {
        match path.split_first() {
            None => self.member = true,
            Some((first, rest)) => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Whether `path` is a member.
    pub fn has(&self, path: &[String]) -> bool {
        match path.split_first() {
            None => self.member,
            Some((first, rest)) => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    /// Whether this node is itself a member.
    pub(crate) fn is_member(&self) -> bool {
        self.member
    }

    pub(crate) fn set_member(&mut self) {
        self.member = true;
    }

    /// The subtree under element `pe`.
    pub(crate) fn child(&self, pe: &str) -> Option<&FieldSet> {
        self.children.get(pe)
    }

    pub(crate) fn children(&self) -> impl Iterator<Item = (&String, &FieldSet)> {
        self.children.iter()
    }

    pub(crate) fn children_mut(&mut self) -> impl Iterator<Item = (&String, &mut FieldSet)> {
        self.children.iter_mut()
    }

    /// Paths in either set.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.member |= other.member;
        for (pe, c) in &other.children {
            let merged = match out.children.get(pe) {
                Some(mine) => mine.union(c),
                None => c.clone(),
            };
            out.children.insert(pe.clone(), merged);
        }
        out
    }

    /// Paths in `self` that are not in `other` (path by path: a member of
    /// `other` does not take the paths below it away).
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet { member: self.member && !other.member, children: BTreeMap::new() };
        for (pe, c) in &self.children {
            let d = match other.children.get(pe) {
                Some(o) => c.difference(o),
                None => c.clone(),
            };
            if !d.is_empty() {
                out.children.insert(pe.clone(), d);
            }
        }
        out
    }

    /// Paths in both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet { member: self.member && other.member, children: BTreeMap::new() };
        for (pe, c) in &self.children {
            if let Some(o) = other.children.get(pe) {
                let i = c.intersection(o);
                if !i.is_empty() {
                    out.children.insert(pe.clone(), i);
                }
            }
        }
        out
    }

    /// Paths in `self` that neither are in `other` nor lie below one of its members.
    pub fn recursive_difference(&self, other: &FieldSet) -> FieldSet {
        if other.member {
            return FieldSet::new();
        }
        let mut out = FieldSet { member: self.member, children: BTreeMap::new() };
        for (pe, c) in &self.children {
            let d = match other.children.get(pe) {
                Some(o) => c.recursive_difference(o),
                None => c.clone(),
            };
            if !d.is_empty() {
                out.children.insert(pe.clone(), d);
            }
        }
        out
    }

    /// Every member path, in order.
    pub fn paths(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        if self.member {
            out.push(prefix.clone());
        }
        for (pe, c) in &self.children {
            prefix.push(pe.clone());
            c.collect(prefix, out);
            prefix.pop();
        }
    }

    /// The `FieldsV1` JSON of the set.
    pub fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        if self.member && !self.children.is_empty() {
            m.insert(".".into(), Value::Object(Map::new()));
        }
        for (pe, c) in &self.children {
            m.insert(pe.clone(), c.to_fields_v1());
        }
        Value::Object(m)
    }

    /// Reads `FieldsV1` JSON; what is not a valid set is an error (the
    /// caller treats the managedFields holding it as garbage).
    pub fn from_fields_v1(v: &Value) -> Result<FieldSet, String> {
        let mut set = FieldSet::new();
        set.read(v, true)?;
        Ok(set)
    }

    fn read(&mut self, v: &Value, root: bool) -> Result<(), String> {
        let Value::Object(m) = v else {
            return Err(format!("expected an object, got {v}"));
        };
        if m.is_empty() && !root {
            self.member = true;
        }
        for (k, c) in m {
            if k == "." {
                self.member = true;
                continue;
            }
            let pe = parse_element(k)?;
            let mut child = FieldSet::new();
            child.read(c, false)?;
            self.children.insert(pe, child);
        }
        Ok(())
    }
}

/// Checks a `FieldsV1` key and gives it in canonical form.
fn parse_element(k: &str) -> Result<String, String> {
    let (prefix, rest) = k.split_at(k.len().min(2));
    match prefix {
        "f:" => Ok(k.to_string()),
        "i:" if rest.parse::<u64>().is_ok() => Ok(k.to_string()),
        "v:" => {
            let v: Value = serde_json::from_str(rest).map_err(|e| format!("invalid value element {k:?}: {e}"))?;
            Ok(value(&v))
        }
        "k:" => {
            let v: Value = serde_json::from_str(rest).map_err(|e| format!("invalid key element {k:?}: {e}"))?;
            let Value::Object(m) = &v else { return Err(format!("invalid key element {k:?}: not an object")) };
            let pairs: Vec<(&str, &Value)> = m.iter().map(|(a, b)| (a.as_str(), b)).collect();
            Ok(key(&pairs))
        }
        _ => Err(format!("unknown path element {k:?}")),
    }
}

/// A path as structured-merge-diff prints it in conflicts:
/// `.spec.template.spec.containers[name="app"].image`.
pub fn path_string(path: &[String]) -> String {
    let mut out = String::new();
    for pe in path {
        let (prefix, rest) = pe.split_at(pe.len().min(2));
        match prefix {
            "f:" => {
                out.push('.');
                out.push_str(rest);
            }
            "k:" => {
                let parsed: Option<Map<String, Value>> = serde_json::from_str(rest).ok();
                let mut keys: Vec<(String, Value)> = parsed.map(|m| m.into_iter().collect()).unwrap_or_default();
                keys.sort_by(|a, b| a.0.cmp(&b.0));
                let parts: Vec<String> = keys.iter().map(|(k, v)| format!("{k}={v}")).collect();
                out.push_str(&format!("[{}]", parts.join(",")));
            }
            "v:" => out.push_str(&format!("[={rest}]")),
            "i:" => out.push_str(&format!("[{rest}]")),
            _ => out.push_str(pe),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn fields_v1_round_trips_with_dot_for_members_that_have_children() {
        let v = json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {}}}},
            "f:finalizers": {"v:\"a\"": {}},
        });
        let set = FieldSet::from_fields_v1(&v).expect("valid");
        assert!(set.has(&p(&["f:metadata", "f:labels"])));
        assert!(!set.has(&p(&["f:metadata"])));
        assert!(set.has(&p(&["f:spec", "f:containers", "k:{\"name\":\"app\"}", "f:image"])));
        assert_eq!(set.to_fields_v1(), v);
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(FieldSet::from_fields_v1(&json!({"x:spec": {}})).is_err());
        assert!(FieldSet::from_fields_v1(&json!({"f:spec": 3})).is_err());
        assert!(FieldSet::from_fields_v1(&json!({"k:[1]": {}})).is_err());
        assert!(FieldSet::from_fields_v1(&json!([])).is_err());
    }

    #[test]
    fn keys_are_sorted_and_canonical() {
        assert_eq!(
            key(&[("protocol", &json!("TCP")), ("containerPort", &json!(80))]),
            r#"k:{"containerPort":80,"protocol":"TCP"}"#
        );
        let set = FieldSet::from_fields_v1(&json!({r#"k:{"protocol":"TCP","containerPort":80}"#: {}})).expect("valid");
        assert!(set.has(&p(&[r#"k:{"containerPort":80,"protocol":"TCP"}"#])));
    }

    #[test]
    fn set_operations() {
        let mut a = FieldSet::new();
        a.insert(&p(&["f:spec", "f:replicas"]));
        a.insert(&p(&["f:spec", "f:paused"]));
        let mut b = FieldSet::new();
        b.insert(&p(&["f:spec", "f:replicas"]));
        b.insert(&p(&["f:data"]));
        assert_eq!(a.intersection(&b).paths(), vec![p(&["f:spec", "f:replicas"])]);
        assert_eq!(a.difference(&b).paths(), vec![p(&["f:spec", "f:paused"])]);
        assert_eq!(a.union(&b).paths().len(), 3);
        let mut spec = FieldSet::new();
        spec.insert(&p(&["f:spec"]));
        assert!(a.recursive_difference(&spec).is_empty());
        assert_eq!(a.difference(&spec), a);
    }

    #[test]
    fn paths_print_as_structured_merge_diff_prints_them() {
        assert_eq!(path_string(&p(&["f:spec", "f:replicas"])), ".spec.replicas");
        assert_eq!(
            path_string(&p(&["f:spec", "f:containers", r#"k:{"name":"app"}"#, "f:image"])),
            r#".spec.containers[name="app"].image"#
        );
        assert_eq!(path_string(&p(&["f:metadata", "f:finalizers", r#"v:"x""#])), r#".metadata.finalizers[="x"]"#);
    }
}
