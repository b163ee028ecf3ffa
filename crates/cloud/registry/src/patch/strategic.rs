//! Kubernetes strategic merge patch (`application/strategic-merge-patch+json`) for the
//! built-in kinds: what `kubectl apply`, `kubectl edit` and `kubectl patch` send.
//!
//! It is a JSON merge patch in which some lists merge instead of being replaced (see
//! `meta.rs`), plus directives:
//!
//! - `"$patch": "replace" | "delete" | "merge"` in an object, or as an element of a merging
//!   list of objects;
//! - `"$retainKeys": [..]` in an object: drop the live keys that are not listed;
//! - `"$setElementOrder/<list>": [..]`: the order of the merged list;
//! - `"$deleteFromPrimitiveList/<list>": [..]`: values to remove from a merging list of scalars.
//!
//! The behaviour follows `mergeMap` and `mergeSlice` of apimachinery's `strategicpatch`
//! (v1.32), including where merged list elements land (see `order.rs`). Where Kubernetes would
//! leave a directive or a `null` in the stored JSON and rely on decoding into a Go struct to
//! drop it, this module drops it itself, so directive keys never reach the result.
//!
//! Deliberate differences, none of which affects a patch kubectl generates:
//!
//! - a field absent from the table is merged as an untyped map or replaced as a list, where
//!   Kubernetes would know every field of the Go struct (and reject unknown ones);
//! - a field the table knows given a value of the wrong JSON type (a list where the struct
//!   has an object, or the reverse) is [`PatchError::Malformed`] here, where Kubernetes fails
//!   later when decoding; and so is any `$`-key that is not a directive;
//! - a patch document that is not an object is malformed, `null` included (Kubernetes takes
//!   `null` as an empty patch);
//! - `$patch: merge` is accepted as a no-op (Kubernetes rejects it);
//! - a new value holding `$patch: replace` keeps its content (Kubernetes drops the value);
//!   directives inside new list elements are applied rather than stored;
//! - `$setElementOrder` on a list the table does not know merges by the key its elements
//!   name (Kubernetes fails there); empty lists never fail.

use serde_json::{Map, Value};

use super::meta::{FieldMeta, ListStrategy, Shape, TypeMeta, kind_meta};
use super::order::{self, Identity};
use super::{PatchError, brief, json_eq};

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ORDER: &str = "$setElementOrder/";
const DELETE_FROM: &str = "$deleteFromPrimitiveList/";

type Object = Map<String, Value>;
type Ty = Option<&'static TypeMeta>;
type Field = Option<&'static FieldMeta>;

/// Kubernetes strategic merge patch (application/strategic-merge-patch+json) for built-in
/// kinds. Applied atomically.
///
/// `group`/`kind` select the patch metadata; a kind for which [`super::supports_strategic`]
/// is false gives [`PatchError::Malformed`] (the server answers 415 before calling this).
///
/// ```
/// # use edgehive_registry::patch::strategic_merge_patch;
/// # use serde_json::json;
/// let mut pod = json!({"spec": {"containers": [
///     {"name": "app", "image": "app:1"},
///     {"name": "proxy", "image": "envoy:1"},
/// ]}});
/// // What `kubectl apply` sends after the image of `app` changed.
/// let patch = json!({"spec": {
///     "$setElementOrder/containers": [{"name": "app"}, {"name": "proxy"}],
///     "containers": [{"name": "app", "image": "app:2"}],
/// }});
/// strategic_merge_patch(&mut pod, &patch, "", "Pod")?;
/// assert_eq!(pod, json!({"spec": {"containers": [
///     {"name": "app", "image": "app:2"},
///     {"name": "proxy", "image": "envoy:1"},
/// ]}}));
/// # Ok::<(), edgehive_registry::patch::PatchError>(())
/// ```
pub fn strategic_merge_patch(target: &mut Value, patch: &Value, group: &str, kind: &str) -> Result<(), PatchError> {
    let Some(ty) = kind_meta(group, kind) else {
        let gk = if group.is_empty() { kind.to_owned() } else { format!("{kind}.{group}") };
        return Err(PatchError::Malformed(format!("strategic merge patch is not supported for {gk}")));
    };
    let Value::Object(patch) = patch else {
        return Err(PatchError::Malformed(format!("a strategic merge patch must be an object, got {}", brief(patch))));
    };
    let Value::Object(original) = target else {
        return Err(PatchError::Unapplicable("the target object is not a JSON object".to_owned()));
    };
    let merged = patch_object(original.clone(), patch, Some(ty))?;
    *target = Value::Object(merged);
    Ok(())
}

fn malformed(msg: impl Into<String>) -> PatchError {
    PatchError::Malformed(msg.into())
}

fn unapplicable(msg: impl Into<String>) -> PatchError {
    PatchError::Unapplicable(msg.into())
}

/// A key of a patch object, sorted into data and directives.
enum Key<'a> {
    Field(&'a str),
    Patch,
    RetainKeys,
    SetOrder(&'a str),
    DeleteFrom(&'a str),
}

fn classify(key: &str) -> Result<Key<'_>, PatchError> {
    if !key.starts_with('$') {
        return Ok(Key::Field(key));
    }
    if key == PATCH {
        return Ok(Key::Patch);
    }
    if key == RETAIN_KEYS {
        return Ok(Key::RetainKeys);
    }
    if let Some(field) = key.strip_prefix(SET_ORDER) {
        return if field.is_empty() {
            Err(malformed(format!("{key:?} names no list")))
        } else {
            Ok(Key::SetOrder(field))
        };
    }
    if let Some(field) = key.strip_prefix(DELETE_FROM) {
        return if field.is_empty() {
            Err(malformed(format!("{key:?} names no list")))
        } else {
            Ok(Key::DeleteFrom(field))
        };
    }
    Err(malformed(format!("unknown directive {key:?}")))
}

/// What a `$patch` directive asks of the object holding it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Directive {
    Replace,
    Delete,
    Merge,
}

fn directive_of(obj: &Object) -> Result<Option<Directive>, PatchError> {
    match obj.get(PATCH) {
        None => Ok(None),
        Some(Value::String(s)) if s == "replace" => Ok(Some(Directive::Replace)),
        Some(Value::String(s)) if s == "delete" => Ok(Some(Directive::Delete)),
        Some(Value::String(s)) if s == "merge" => Ok(Some(Directive::Merge)),
        Some(other) => Err(malformed(format!("unknown {PATCH} directive {}", brief(other)))),
    }
}

fn child_ty(field: Field) -> Ty {
    field.and_then(|f| f.ty)
}

fn field_of(ty: Ty, name: &str) -> Field {
    ty.and_then(|t| t.field(name))
}

/// Applies the patch object `patch` to the live object `original` of type `ty`.
fn patch_object(mut original: Object, patch: &Object, ty: Ty) -> Result<Object, PatchError> {
    match directive_of(patch)? {
        // The patch's content, cleaned of directives, replaces the object.
        Some(Directive::Replace) => {
            let mut content = patch.clone();
            content.remove(PATCH);
            return patch_object(Object::new(), &content, ty);
        }
        // Kubernetes leaves an empty object where the deleted one was.
        Some(Directive::Delete) => return Ok(Object::new()),
        Some(Directive::Merge) | None => {}
    }

    let mut fields = Vec::new();
    let mut orders = Vec::new();
    let mut deletions = Vec::new();
    let mut retain = None;
    for (key, value) in patch {
        match classify(key)? {
            Key::Field(name) => fields.push((name, value)),
            Key::Patch => {}
            Key::RetainKeys => retain = Some(value),
            Key::SetOrder(name) => orders.push((name, value)),
            Key::DeleteFrom(name) => deletions.push((name, value)),
        }
    }

    if let Some(list) = retain {
        retain_keys(&mut original, list, &fields)?;
    }

    let mut ordered = Vec::new();
    for (name, order) in orders {
        if set_element_order(&mut original, patch, name, order, field_of(ty, name))? {
            ordered.push(name);
        }
    }

    for (name, value) in fields {
        if ordered.contains(&name) {
            continue;
        }
        if value.is_null() {
            original.remove(name);
            continue;
        }
        let field = field_of(ty, name);
        check_shape(name, value, field)?;
        let merged = match (original.remove(name), value) {
            (Some(Value::Object(live)), Value::Object(p)) => {
                Some(Value::Object(patch_object(live, p, child_ty(field))?))
            }
            (Some(Value::Array(live)), Value::Array(p)) => Some(Value::Array(patch_list(live, p, field)?)),
            // Absent, or of another type: the patch value is taken, cleaned of directives.
            _ => materialize(value, field)?,
        };
        if let Some(v) = merged {
            original.insert(name.to_owned(), v);
        }
    }

    for (name, values) in deletions {
        delete_from_primitive_list(&mut original, name, values)?;
    }
    Ok(original)
}

/// A field the table knows must get an object or a list as the Go type has it.
fn check_shape(name: &str, value: &Value, field: Field) -> Result<(), PatchError> {
    let (fits, wanted) = match field.map(|f| f.shape) {
        None => return Ok(()),
        Some(Shape::Object) => (value.is_object(), "an object"),
        Some(Shape::List) => (value.is_array(), "a list"),
    };
    if fits || value.is_null() {
        return Ok(());
    }
    Err(malformed(format!("field {name:?} must be {wanted}, got {}", brief(value))))
}

/// `$retainKeys`: every non-null field of the patch must be listed, and live keys that are
/// not listed are dropped.
fn retain_keys(original: &mut Object, list: &Value, fields: &[(&str, &Value)]) -> Result<(), PatchError> {
    let Value::Array(items) = list else {
        return Err(malformed(format!("{RETAIN_KEYS} must be a list of field names, got {}", brief(list))));
    };
    let keys = items
        .iter()
        .map(|v| v.as_str().ok_or_else(|| malformed(format!("{RETAIN_KEYS} holds {}, not a field name", brief(v)))))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some((name, _)) = fields.iter().find(|(name, value)| !value.is_null() && !keys.contains(name)) {
        return Err(malformed(format!("field {name:?} is patched but not listed in {RETAIN_KEYS}")));
    }
    original.retain(|k, _| keys.contains(&k.as_str()));
    Ok(())
}

/// A value taken from the patch where there is nothing to merge it with: nulls dropped,
/// directives applied to an empty value. `None` means the value is not to be stored.
fn materialize(value: &Value, field: Field) -> Result<Option<Value>, PatchError> {
    match value {
        Value::Null => Ok(None),
        Value::Object(obj) => materialize_object(obj, child_ty(field)),
        Value::Array(list) => Ok(Some(Value::Array(patch_list(Vec::new(), list, field)?))),
        scalar => Ok(Some(scalar.clone())),
    }
}

fn materialize_object(obj: &Object, ty: Ty) -> Result<Option<Value>, PatchError> {
    if directive_of(obj)? == Some(Directive::Delete) {
        return Ok(None);
    }
    Ok(Some(Value::Object(patch_object(Object::new(), obj, ty)?)))
}

/// An element of a list that is replaced whole; `None` drops it (`$patch: delete`).
fn materialize_element(value: &Value, ty: Ty) -> Result<Option<Value>, PatchError> {
    match value {
        Value::Object(obj) => materialize_object(obj, ty),
        Value::Array(list) => Ok(Some(Value::Array(patch_list(Vec::new(), list, None)?))),
        scalar => Ok(Some(scalar.clone())),
    }
}

/// How a list is patched: [`ListStrategy`] with the merge key borrowed, so that a key read
/// off a `$setElementOrder` directive can be used like one from the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode<'a> {
    Replace,
    Scalars,
    Keyed(&'a str),
}

fn mode_of(field: Field) -> Mode<'static> {
    match field.map_or(ListStrategy::Replace, |f| f.strategy) {
        ListStrategy::Replace => Mode::Replace,
        ListStrategy::Merge { key: None } => Mode::Scalars,
        ListStrategy::Merge { key: Some(key) } => Mode::Keyed(key),
    }
}

/// Applies a patch list to a live list according to the field's strategy.
fn patch_list(live: Vec<Value>, patch: &[Value], field: Field) -> Result<Vec<Value>, PatchError> {
    patch_list_as(live, patch, mode_of(field), child_ty(field))
}

fn patch_list_as(live: Vec<Value>, patch: &[Value], mode: Mode<'_>, ty: Ty) -> Result<Vec<Value>, PatchError> {
    match mode {
        Mode::Replace => {
            let mut out = Vec::with_capacity(patch.len());
            for item in patch {
                out.extend(materialize_element(item, ty)?);
            }
            Ok(out)
        }
        Mode::Scalars => merge_scalars(live, patch),
        Mode::Keyed(key) => merge_objects(live, patch, key, ty),
    }
}

/// The JSON type of a list element, for the "all elements alike" rule.
fn element_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

/// Checks that the patch list's elements are all `expected` (or all alike when `None`), and
/// that the live list's elements are of that same kind.
fn check_kinds(live: &[Value], patch: &[Value], expected: Option<&str>) -> Result<(), PatchError> {
    let kind = expected.or_else(|| patch.first().map(element_kind));
    let Some(kind) = kind else {
        return Ok(());
    };
    if let Some(bad) = patch.iter().find(|v| element_kind(v) != kind || kind == "list") {
        return Err(malformed(format!("a merging list of {kind}s holds {}", brief(bad))));
    }
    if let Some(bad) = live.iter().find(|v| element_kind(v) != kind) {
        return Err(unapplicable(format!("the live list holds {}, the patch {kind}s", brief(bad))));
    }
    Ok(())
}

/// `patchStrategy:"merge"` on scalars: a set union; patch values keep the patch's order and
/// live-only values keep their place as far as [`order`] allows.
fn merge_scalars(live: Vec<Value>, patch: &[Value]) -> Result<Vec<Value>, PatchError> {
    if let Some(bad) = patch.iter().find(|v| v.is_object()) {
        return Err(malformed(format!("a merging list of scalars holds {}", brief(bad))));
    }
    check_kinds(&live, patch, None)?;
    let live_ids = live.clone();
    let mut merged: Vec<Value> = Vec::with_capacity(live.len() + patch.len());
    for v in live.into_iter().chain(patch.iter().cloned()) {
        if !merged.iter().any(|m| json_eq(m, &v)) {
            merged.push(v);
        }
    }
    let patch_ids: Vec<&Value> = patch.iter().collect();
    Ok(order::arrange(merged, &patch_ids, &live_ids, Identity::Scalar))
}

/// `patchStrategy:"merge"` on objects, by merge key.
fn merge_objects(live: Vec<Value>, patch: &[Value], key: &str, ty: Ty) -> Result<Vec<Value>, PatchError> {
    let merged = merge_objects_unordered(live, patch, key, ty)?;
    if merged.replaced {
        return Ok(merged.list);
    }
    Ok(order::arrange(merged.list, &merged.patch_ids, &merged.live_ids, Identity::Key(key)))
}

/// A list of objects merged by key, not yet put in order.
struct KeyedMerge<'p> {
    /// The merged elements: live ones in place, new ones appended.
    list: Vec<Value>,
    /// Whether a `$patch: replace` element made the patch's elements the whole list.
    replaced: bool,
    /// The merge keys of the patch's elements, in patch order.
    patch_ids: Vec<&'p Value>,
    /// The merge keys of the live elements left after `$patch: delete`.
    live_ids: Vec<Value>,
    /// The live order as Kubernetes' `$setElementOrder` handling sees it. Kubernetes deletes
    /// elements by shifting the live slice in place and appends new elements to the shortened
    /// slice, so both show through the live slice it later orders by: deleting `d` from
    /// `[d, b, e]` and adding `a` makes that order `[b, e, a]`. Kept so that server-only
    /// elements land where Kubernetes puts them.
    aliased_live_ids: Vec<Value>,
}

fn merge_objects_unordered<'p>(
    live: Vec<Value>,
    patch: &'p [Value],
    key: &str,
    ty: Ty,
) -> Result<KeyedMerge<'p>, PatchError> {
    check_kinds(&live, patch, Some("object"))?;
    let id = Identity::Key(key);
    if let Some(bad) = live.iter().find(|v| id.of(v).is_none()) {
        return Err(unapplicable(format!("a live element lacks the merge key {key:?}: {}", brief(bad))));
    }

    let mut list = live;
    let mut aliased = order::live_ids(&list, id);
    let mut replace = false;
    let mut items = Vec::with_capacity(patch.len());
    for obj in patch.iter().filter_map(Value::as_object) {
        match directive_of(obj)? {
            None | Some(Directive::Merge) => items.push(obj),
            Some(Directive::Replace) => replace = true,
            Some(Directive::Delete) => {
                let Some(k) = obj.get(key) else {
                    return Err(malformed(format!("{PATCH}: delete without the merge key {key:?}")));
                };
                while let Some(i) = list.iter().position(|v| id.of(v).is_some_and(|vk| json_eq(vk, k))) {
                    list.remove(i);
                    // Go's `append(s[:i], s[i+1:]...)`: the tail moves down one slot in
                    // place and the old last slot keeps its value.
                    for j in i..list.len() {
                        if let Some(next) = aliased.get(j + 1).cloned() {
                            aliased[j] = next;
                        }
                    }
                }
            }
        }
    }
    if let Some(bad) = items.iter().find(|o| !o.contains_key(key)) {
        return Err(malformed(format!(
            "a patch element lacks the merge key {key:?}: {}",
            brief(&Value::Object((*bad).clone()))
        )));
    }
    let patch_ids: Vec<&Value> = items.iter().filter_map(|o| o.get(key)).collect();

    // `$patch: replace` as an element: the other elements are the whole list.
    if replace {
        let mut out = Vec::with_capacity(items.len());
        for obj in items {
            out.extend(materialize_object(obj, ty)?);
        }
        return Ok(KeyedMerge {
            list: out,
            replaced: true,
            patch_ids,
            live_ids: Vec::new(),
            aliased_live_ids: aliased,
        });
    }

    let live_ids = order::live_ids(&list, id);
    for obj in &items {
        let k = obj.get(key);
        match list.iter().position(|v| id.of(v).zip(k).is_some_and(|(a, b)| json_eq(a, b))) {
            Some(i) => {
                let live = match std::mem::take(&mut list[i]) {
                    Value::Object(o) => o,
                    _ => Object::new(),
                };
                list[i] = Value::Object(patch_object(live, obj, ty)?);
            }
            None => {
                if let (Some(slot), Some(k)) = (aliased.get_mut(list.len()), k) {
                    *slot = k.clone();
                }
                list.push(Value::Object(patch_object(Object::new(), obj, ty)?));
            }
        }
    }
    Ok(KeyedMerge { list, replaced: false, patch_ids, live_ids, aliased_live_ids: aliased })
}

/// `$setElementOrder/<name>`: merges the list `name` (if the patch has it) and orders the
/// result. Returns whether the list was handled here.
fn set_element_order(
    original: &mut Object,
    patch: &Object,
    name: &str,
    order: &Value,
    field: Field,
) -> Result<bool, PatchError> {
    let Value::Array(order) = order else {
        return Err(malformed(format!("{SET_ORDER}{name} must be a list, got {}", brief(order))));
    };
    let patch_list = match patch.get(name) {
        None => None,
        // The list is deleted; there is nothing to order.
        Some(Value::Null) => return Ok(false),
        Some(Value::Array(list)) => Some(list),
        Some(other) => return Err(malformed(format!("{name:?} must be a list, got {}", brief(other)))),
    };
    let mode = match mode_of(field) {
        Mode::Replace => infer_mode(order),
        known => known,
    };
    let id = match mode {
        Mode::Keyed(key) => Identity::Key(key),
        Mode::Scalars => Identity::Scalar,
        // Not a merging list and no way to tell: a plain field.
        Mode::Replace => return Ok(false),
    };
    let order_ids = order::ids(order, id)
        .ok_or_else(|| malformed(format!("{SET_ORDER}{name} holds an element without the merge key")))?;
    if let Some(list) = patch_list {
        order::check_patch_follows(list, &order_ids, id, name)?;
    }

    let live = match original.remove(name) {
        None => None,
        Some(Value::Array(list)) => Some(list),
        Some(other) => return Err(unapplicable(format!("{name:?} is {} in the object, not a list", brief(&other)))),
    };
    let mut live_ids = live.as_deref().map(|l| order::live_ids(l, id)).unwrap_or_default();
    let merged = match (live, patch_list, mode) {
        (Some(live), Some(p), Mode::Keyed(key)) => {
            let merged = merge_objects_unordered(live, p, key, child_ty(field))?;
            live_ids = merged.aliased_live_ids;
            merged.list
        }
        (Some(live), Some(p), _) => patch_list_as(live, p, mode, child_ty(field))?,
        (Some(live), None, _) => live,
        (None, Some(p), _) => patch_list_as(Vec::new(), p, mode, child_ty(field))?,
        (None, None, _) => return Ok(true),
    };
    let arranged = order::arrange(merged, &order_ids, &live_ids, id);
    original.insert(name.to_owned(), Value::Array(arranged));
    Ok(true)
}

/// For a list the table does not know: `kubectl` sends `$setElementOrder` only for merging
/// lists, and its elements are `{<mergeKey>: value}` for lists of objects, so the strategy
/// can be read off the directive.
fn infer_mode(order: &[Value]) -> Mode<'_> {
    let Some(first) = order.first() else {
        return Mode::Replace;
    };
    if order.iter().all(|v| !v.is_object() && !v.is_array()) {
        return Mode::Scalars;
    }
    fn single_key(v: &Value) -> Option<&String> {
        v.as_object().filter(|o| o.len() == 1).and_then(|o| o.keys().next())
    }
    match single_key(first) {
        Some(key) if order.iter().all(|v| single_key(v) == Some(key)) => Mode::Keyed(key.as_str()),
        _ => Mode::Replace,
    }
}

/// `$deleteFromPrimitiveList/<name>`: removes the listed values from the live list.
fn delete_from_primitive_list(original: &mut Object, name: &str, values: &Value) -> Result<(), PatchError> {
    let Value::Array(values) = values else {
        return Err(malformed(format!("{DELETE_FROM}{name} must be a list, got {}", brief(values))));
    };
    if let Some(bad) = values.iter().find(|v| v.is_object() || v.is_array()) {
        return Err(malformed(format!("{DELETE_FROM}{name} holds {}, not a scalar", brief(bad))));
    }
    if let Some(Value::Array(list)) = original.get_mut(name) {
        list.retain(|v| !values.iter().any(|d| json_eq(d, v)));
    }
    Ok(())
}
