//! The walks structured-merge-diff makes over typed values, over JSON and
//! [`Shape`]s: the fields an object sets (`ToFieldSet`), what changed
//! between two objects (`Compare`), an applied configuration merged into
//! the live object (`Merge`), and fields taken out (`RemoveItems`).
//! JSON `null` counts as absent, as Kubernetes' Go types drop it.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::fieldset::{FieldSet, field};
use super::shape::{ListKind, Node, Shape, entry_shape, item_element, node};

fn present(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| !v.is_null())
}

/// The items of a non-atomic list with their path elements; a repeated
/// element keeps its first item (structured-merge-diff ignores repeats).
fn items(kind: ListKind, list: &[Value]) -> Vec<(String, &Value)> {
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(list.len());
    for item in list {
        if let Some(pe) = item_element(kind, item)
            && seen.insert(pe.clone())
        {
            out.push((pe, item));
        }
    }
    out
}

/// The fields `v` sets: every leaf, every map entry and list item (as a
/// member), never a struct field that only leads to others.
pub(crate) fn to_field_set(v: &Value, shape: Shape) -> FieldSet {
    let mut set = FieldSet::new();
    to_set(v, shape, &mut Vec::new(), &mut set);
    set
}

fn to_set(v: &Value, shape: Shape, path: &mut Vec<String>, set: &mut FieldSet) {
    match node(shape, v) {
        Node::Leaf => {
            // A struct given null sets nothing; a scalar given null is set.
            if !(v.is_null() && matches!(shape, Shape::Struct(_) | Shape::Map(_))) {
                set.insert(path);
            }
        }
        n @ (Node::Struct(_) | Node::Map(_)) => {
            let Some(obj) = v.as_object() else { return };
            for (k, child) in obj {
                let Some(child_shape) = entry_shape(n, k) else { continue };
                path.push(field(k));
                to_set(child, child_shape, path, set);
                if matches!(n, Node::Map(_)) {
                    set.insert(path);
                }
                path.pop();
            }
        }
        Node::List(elem, kind) => {
            let Some(list) = v.as_array() else { return };
            for (pe, item) in items(kind, list) {
                path.push(pe);
                to_set(item, elem, path, set);
                set.insert(path);
                path.pop();
            }
        }
    }
}

/// What changed from `lhs` to `rhs`.
#[derive(Debug, Default)]
pub(crate) struct Comparison {
    pub(crate) added: FieldSet,
    pub(crate) modified: FieldSet,
    pub(crate) removed: FieldSet,
}

/// Compares two objects as structured-merge-diff does: leaves (and
/// atomic values, and containers empty on both sides) are added, removed
/// or modified; a map entry, list item or struct field present on one side
/// only is added or removed with everything below it. `creating` leaves
/// out struct fields that only lead to others, as Kubernetes' empty Go
/// object already holds its non-pointer structs when it compares on create.
pub(crate) fn compare(lhs: &Value, rhs: &Value, shape: Shape, creating: bool) -> Comparison {
    let mut cmp = Comparison::default();
    let mut w = Compare { cmp: &mut cmp, creating };
    w.walk(Some(lhs), Some(rhs), shape, &mut Vec::new(), false);
    cmp
}

struct Compare<'a> {
    cmp: &'a mut Comparison,
    creating: bool,
}

impl Compare<'_> {
    fn walk(&mut self, lhs: Option<&Value>, rhs: Option<&Value>, shape: Shape, path: &mut Vec<String>, is_field: bool) {
        let (lhs, rhs) = (present(lhs), present(rhs));
        let (l, r) = match (lhs, rhs) {
            (None, None) => return,
            (Some(l), Some(r)) => (node(shape, l), node(shape, r)),
            (Some(l), None) => (node(shape, l), node(shape, l)),
            (None, Some(r)) => (node(shape, r), node(shape, r)),
        };
        let empty = |v: Option<&Value>| match v {
            None => true,
            Some(Value::Object(m)) => m.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            Some(_) => false,
        };
        let both_empty = empty(lhs) && empty(rhs);
        let leaf = matches!(l, Node::Leaf) || matches!(r, Node::Leaf) || both_empty || !same_kind(l, r);
        if leaf {
            match (lhs, rhs) {
                (None, Some(_)) => self.cmp.added.insert(path),
                (Some(_), None) => self.cmp.removed.insert(path),
                (Some(a), Some(b)) if !crate::patch::json_eq(a, b) => self.cmp.modified.insert(path),
                _ => {}
            }
            return;
        }
        match l {
            Node::Struct(_) | Node::Map(_) => {
                let empty_map = Map::new();
                let lm = lhs.and_then(Value::as_object).unwrap_or(&empty_map);
                let rm = rhs.and_then(Value::as_object).unwrap_or(&empty_map);
                let keys: Vec<&String> = lm.keys().chain(rm.keys().filter(|k| !lm.contains_key(*k))).collect();
                for k in keys {
                    let Some(child_shape) = entry_shape(l, k) else { continue };
                    path.push(field(k));
                    self.walk(lm.get(k), rm.get(k), child_shape, path, true);
                    path.pop();
                }
            }
            Node::List(elem, kind) => {
                let empty_list = Vec::new();
                let ll = items(kind, lhs.and_then(Value::as_array).unwrap_or(&empty_list));
                let rl = items(kind, rhs.and_then(Value::as_array).unwrap_or(&empty_list));
                for (pe, r) in &rl {
                    let l = ll.iter().find(|(p, _)| p == pe).map(|(_, v)| *v);
                    path.push(pe.clone());
                    self.walk(l, Some(r), elem, path, false);
                    path.pop();
                }
                for (pe, l) in &ll {
                    if rl.iter().any(|(p, _)| p == pe) {
                        continue;
                    }
                    path.push(pe.clone());
                    self.walk(Some(l), None, elem, path, false);
                    path.pop();
                }
            }
            Node::Leaf => {}
        }
        let skip_self = self.creating && is_field && matches!(l, Node::Struct(_));
        if !skip_self && !path.is_empty() {
            match (lhs, rhs) {
                (None, Some(_)) => self.cmp.added.insert(path),
                (Some(_), None) => self.cmp.removed.insert(path),
                _ => {}
            }
        }
    }
}

fn same_kind(a: Node, b: Node) -> bool {
    matches!(
        (a, b),
        (Node::Struct(_), Node::Struct(_)) | (Node::Map(_), Node::Map(_)) | (Node::List(..), Node::List(..))
    )
}

/// `config` merged into `live`: the configuration's values win, maps and
/// structs merge entry by entry, keyed lists and sets item by item (live
/// items the configuration lacks keep their place, shared and new items
/// follow the configuration's order), anything else is replaced.
pub(crate) fn merge(live: &Value, config: &Value, shape: Shape) -> Value {
    let (l, r) = (node(shape, live), node(shape, config));
    match (l, r, live, config) {
        (Node::Struct(_), Node::Struct(_), Value::Object(lm), Value::Object(rm))
        | (Node::Map(_), Node::Map(_), Value::Object(lm), Value::Object(rm)) => {
            let mut out = Map::new();
            for (k, lv) in lm {
                match (rm.get(k), entry_shape(r, k)) {
                    (Some(rv), Some(s)) => {
                        let merged = merge(lv, rv, s);
                        if !merged.is_null() {
                            out.insert(k.clone(), merged);
                        }
                    }
                    (Some(rv), None) => {
                        if !rv.is_null() {
                            out.insert(k.clone(), rv.clone());
                        }
                    }
                    (None, _) => {
                        out.insert(k.clone(), lv.clone());
                    }
                }
            }
            for (k, rv) in rm {
                if !lm.contains_key(k) && !rv.is_null() {
                    out.insert(k.clone(), strip_nulls(rv));
                }
            }
            Value::Object(out)
        }
        (Node::List(elem, kind), Node::List(..), Value::Array(la), Value::Array(ra)) => {
            Value::Array(merge_lists(&items(kind, la), &items(kind, ra), elem))
        }
        _ => strip_nulls(config),
    }
}

/// A configuration value without the `null`s of its objects.
fn strip_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            Value::Object(m.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), strip_nulls(v))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(strip_nulls).collect()),
        other => other.clone(),
    }
}

/// Merges two keyed lists as structured-merge-diff orders them: walking
/// both, an item only the live list has stays where it is, an item both
/// have comes in the configuration's order, a new item where the
/// configuration puts it.
fn merge_lists(lhs: &[(String, &Value)], rhs: &[(String, &Value)], elem: Shape) -> Vec<Value> {
    let in_rhs = |pe: &str| rhs.iter().find(|(p, _)| p == pe).map(|(_, v)| *v);
    let in_lhs = |pe: &str| lhs.iter().find(|(p, _)| p == pe).map(|(_, v)| *v);
    let mut shared: std::collections::VecDeque<&str> =
        rhs.iter().filter(|(p, _)| in_lhs(p).is_some()).map(|(p, _)| p.as_str()).collect();
    let mut next_shared = shared.pop_front();
    let mut done: HashSet<&str> = HashSet::new();
    let mut out = Vec::with_capacity(lhs.len() + rhs.len());
    let (mut li, mut ri) = (0, 0);
    let item = |l: Option<&Value>, r: &Value| match l {
        Some(l) => merge(l, r, elem),
        None => strip_nulls(r),
    };
    while li < lhs.len() || ri < rhs.len() {
        if li < lhs.len() && ri < rhs.len() {
            let pe = lhs[li].0.as_str();
            if pe == rhs[ri].0 {
                done.insert(pe);
                out.push(item(Some(lhs[li].1), rhs[ri].1));
                li += 1;
                ri += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if in_rhs(pe).is_some() && next_shared.is_some_and(|n| n != pe) {
                li += 1;
                continue;
            }
        }
        if li < lhs.len() {
            let pe = lhs[li].0.as_str();
            if in_rhs(pe).is_none() {
                out.push(lhs[li].1.clone());
                li += 1;
                continue;
            }
            if done.contains(pe) {
                li += 1;
                continue;
            }
        }
        if ri < rhs.len() {
            let pe = rhs[ri].0.as_str();
            done.insert(pe);
            out.push(item(in_lhs(pe), rhs[ri].1));
            ri += 1;
            if next_shared == Some(pe) {
                next_shared = shared.pop_front();
            }
        }
    }
    out
}

/// `v` without the members of `set` (each taken away with everything
/// below it). A map or list left empty is dropped, as structured-merge-diff
/// leaves `null` there.
pub(crate) fn remove_items(v: &Value, set: &FieldSet, shape: Shape) -> Option<Value> {
    match node(shape, v) {
        n @ (Node::Struct(_) | Node::Map(_)) => {
            let obj = v.as_object()?;
            if obj.is_empty() {
                return None;
            }
            let mut out = Map::new();
            for (k, child) in obj {
                let pe = field(k);
                let sub = set.child(&pe);
                if sub.is_some_and(FieldSet::is_member) {
                    continue;
                }
                match (sub, entry_shape(n, k)) {
                    (Some(sub), Some(s)) if !sub.is_empty() => {
                        if let Some(kept) = remove_items(child, sub, s) {
                            out.insert(k.clone(), kept);
                        }
                    }
                    _ => {
                        out.insert(k.clone(), child.clone());
                    }
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        Node::List(elem, kind) => {
            let list = v.as_array()?;
            if list.is_empty() {
                return None;
            }
            let mut out = Vec::new();
            for item in list {
                let Some(pe) = item_element(kind, item) else {
                    out.push(item.clone());
                    continue;
                };
                let sub = set.child(&pe);
                if sub.is_some_and(FieldSet::is_member) {
                    continue;
                }
                match sub {
                    Some(sub) if !sub.is_empty() => {
                        if let Some(kept) = remove_items(item, sub, elem) {
                            out.push(kept);
                        }
                    }
                    _ => out.push(item.clone()),
                }
            }
            (!out.is_empty()).then_some(Value::Array(out))
        }
        Node::Leaf => Some(v.clone()),
    }
}

/// `set` with every struct field on its paths made a member, as
/// structured-merge-diff's `EnsureNamedFieldsAreMembers` (so that pruning
/// takes away a struct field its applier no longer sets).
pub(crate) fn ensure_named_fields(set: &FieldSet, shape: Shape) -> FieldSet {
    let mut out = set.clone();
    ensure(&mut out, shape);
    out
}

fn ensure(set: &mut FieldSet, shape: Shape) {
    for (pe, child) in set.children_mut() {
        let child_shape = match shape {
            Shape::Struct(s) => {
                let Some(name) = pe.strip_prefix("f:") else { continue };
                let Some(cs) = super::shape::field_shape(s, name) else { continue };
                child.set_member();
                cs
            }
            Shape::Map(elem) => super::shape::shape_of(elem),
            Shape::List(elem, _) => super::shape::shape_of(elem),
            Shape::Untyped => Shape::Untyped,
            Shape::Atomic => continue,
        };
        ensure(child, child_shape);
    }
}

/// The first item of a keyed list in `config` that lacks a key field, as
/// structured-merge-diff refuses it: `.spec.containers: element 0:
/// associative list with keys has an element that omits key field "name"
/// (and doesn't have default value)`.
pub(crate) fn missing_key(config: &Value, shape: Shape) -> Option<String> {
    find_missing(config, shape, &mut String::new())
}

fn find_missing(v: &Value, shape: Shape, path: &mut String) -> Option<String> {
    match (shape, v) {
        (Shape::List(elem, ListKind::Map(keys, default)), Value::Array(list)) => {
            for (i, item) in list.iter().enumerate() {
                let Some(obj) = item.as_object() else {
                    return Some(format!("{path}: element {i}: expected map, got {}", kind_name(item)));
                };
                for k in keys {
                    if obj.get(*k).is_none_or(Value::is_null) && default.is_none_or(|(d, _)| d != *k) {
                        return Some(format!(
                            "{path}: element {i}: associative list with keys has an element that omits key field {:?} (and doesn't have default value)",
                            k
                        ));
                    }
                }
                let len = path.len();
                if let Some(e) = find_missing(item, super::shape::shape_of(elem), path) {
                    return Some(e);
                }
                path.truncate(len);
            }
            None
        }
        (Shape::List(elem, _), Value::Array(list)) => {
            for item in list {
                let len = path.len();
                if let Some(e) = find_missing(item, super::shape::shape_of(elem), path) {
                    return Some(e);
                }
                path.truncate(len);
            }
            None
        }
        (_, Value::Object(obj)) => {
            let n = node(shape, v);
            for (k, child) in obj {
                let Some(s) = entry_shape(n, k) else { continue };
                let len = path.len();
                path.push('.');
                path.push_str(k);
                if let Some(e) = find_missing(child, s, path) {
                    return Some(e);
                }
                path.truncate(len);
            }
            None
        }
        _ => None,
    }
}

fn kind_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}
