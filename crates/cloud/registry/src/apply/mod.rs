//! Server-side apply and field management, as Kubernetes' fieldmanager
//! (staging/src/k8s.io/apimachinery/pkg/util/managedfields) and
//! structured-merge-diff do them, over JSON.
//!
//! Every write through the API records who set which fields in
//! `metadata.managedFields`: a create, update or patch as an `Update` entry
//! of its manager ([`record_update`]), an `application/apply-patch+yaml`
//! as an `Apply` entry ([`apply`]), which merges the applied configuration
//! into the live object by schema (`shape.rs`), removes what the applier set
//! before and no longer sets unless another manager owns it, and refuses to
//! change fields other managers own (409 with `FieldManagerConflict` causes)
//! unless forced, which takes them over.
//!
//! The pieces: `fieldset.rs` (field paths and `FieldsV1`), `shape.rs` (which
//! lists are keyed or sets, which structs and maps are atomic), `walk.rs`
//! (field sets of objects, comparison, merge, removal), `managed.rs` (the
//! entries). What Kubernetes does that this does not: `ancient-changes`
//! (more than 10 update entries are kept as they are), the
//! `kubectl.kubernetes.io/last-applied-configuration` interplay of client-
//! and server-side apply (`lastappliedmanager.go`), and conversion between
//! versions (each kind is served in one version).
//!
//! **Architecture Invariant:** no HTTP and no clock: the caller gives the
//! time (`now`, RFC 3339) and maps the [`ApiError`]s it gets.

mod fieldset;
mod managed;
mod shape;
mod walk;

#[cfg(test)]
mod tests;

pub use fieldset::{FieldSet, path_string};

use http::StatusCode;
use serde_json::Value;

use crate::status::{ApiError, Cause};
use crate::validation::FieldError;
use managed::{Entry, Operation};
use shape::Shape;

/// `validation.FieldManagerMaxLength`.
pub const FIELD_MANAGER_MAX_LENGTH: usize = 128;

/// The manager Kubernetes records for objects that existed, untracked,
/// before their first apply (skipnonapplied.go).
const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// What is being written: the kind, the version it is served in, and the
/// subresource.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    /// API group ("" for core).
    pub group: &'a str,
    /// Kind, e.g. "Deployment".
    pub kind: &'a str,
    /// `apps/v1`, `v1`.
    pub api_version: &'a str,
    /// `Some("status")` for a write to the status subresource.
    pub subresource: Option<&'a str>,
    /// Whether the resource has a status subresource (then writes to the
    /// resource itself leave `.status` to it).
    pub status_subresource: bool,
}

impl Scope<'_> {
    fn shape(&self) -> Shape {
        shape::root_shape(self.group, self.kind)
    }

    /// Fields this scope never manages (reset-fields strategies): the
    /// status of a resource with a status subresource; the spec for writes
    /// to its status.
    fn ignored(&self) -> FieldSet {
        let mut set = FieldSet::new();
        match self.subresource {
            Some(_) => set.insert(&[fieldset::field("spec")]),
            None if self.status_subresource => set.insert(&[fieldset::field("status")]),
            None => {}
        }
        set
    }
}

/// What the fieldmanager strips from every manager (stripmeta.go): the
/// type, identity and system fields.
fn strip_set() -> FieldSet {
    let mut set = FieldSet::new();
    for p in [
        &["apiVersion"][..],
        &["kind"],
        &["metadata"],
        &["metadata", "name"],
        &["metadata", "namespace"],
        &["metadata", "creationTimestamp"],
        &["metadata", "selfLink"],
        &["metadata", "uid"],
        &["metadata", "clusterName"],
        &["metadata", "generation"],
        &["metadata", "managedFields"],
        &["metadata", "resourceVersion"],
    ] {
        let path: Vec<String> = p.iter().map(|s| fieldset::field(s)).collect();
        set.insert(&path);
    }
    set
}

/// The manager of a request: its `fieldManager`, else the User-Agent up to
/// its first `/`, printable characters only, at most 128 bytes
/// (`prefixFromUserAgent` in handlers/rest.go): `kubectl-client-side-apply`.
pub fn manager_name(field_manager: Option<&str>, user_agent: Option<&str>) -> String {
    if let Some(m) = field_manager.filter(|m| !m.is_empty()) {
        return m.to_string();
    }
    let prefix = user_agent.unwrap_or("").split('/').next().unwrap_or("");
    let mut out = String::new();
    for c in prefix.chars().filter(|c| is_print(*c)) {
        if out.len() + c.len_utf8() > FIELD_MANAGER_MAX_LENGTH {
            break;
        }
        out.push(c);
    }
    out
}

/// Go's `unicode.IsPrint`, near enough: no control characters, and no
/// space but ASCII space.
fn is_print(c: char) -> bool {
    !c.is_control() && (c == ' ' || !c.is_whitespace())
}

/// Checks `fieldManager` and `force` of a write as Kubernetes'
/// `ValidatePatchOptions` / `ValidateCreateOptions` / `ValidateUpdateOptions`
/// do, refusing with 422 `{options}.meta.k8s.io "" is invalid: ...`.
/// `apply` is whether the request is an apply patch; `force` the raw query value.
pub fn check_options(
    options: &str,
    field_manager: Option<&str>,
    apply: bool,
    force: Option<&str>,
) -> Result<(), ApiError> {
    let mut errs = Vec::new();
    let manager = field_manager.unwrap_or("");
    if options == "PatchOptions" {
        if !apply && force.is_some() {
            errs.push(FieldError::forbidden("force", "may not be specified for non-apply patch"));
        }
        if apply && manager.is_empty() {
            errs.push(FieldError::required("fieldManager", "is required for apply patch"));
        }
    }
    if manager.len() > FIELD_MANAGER_MAX_LENGTH {
        errs.push(FieldError::too_long("fieldManager", FIELD_MANAGER_MAX_LENGTH));
    }
    for (i, c) in manager.chars().enumerate() {
        if !is_print(c) {
            errs.push(FieldError::invalid(
                "fieldManager",
                manager,
                format!("invalid character U+{:04X} (at position {i})", u32::from(c)),
            ));
        }
    }
    if errs.is_empty() {
        return Ok(());
    }
    let summary: Vec<String> = errs.iter().map(FieldError::message).collect();
    let causes = errs
        .iter()
        .map(|e| Cause { reason: e.kind.reason().into(), message: e.body(), field: e.field.clone() })
        .collect();
    Err(ApiError::invalid_with_summary(options, "meta.k8s.io", "", causes, &summary))
}

/// Records a create (`live` is `None`), update or non-apply patch by
/// `manager` in `new.metadata.managedFields`, as `FieldManager.UpdateNoErrors`:
///
/// - the managedFields `new` carries are used when they decode and are not
///   empty; a list of none or of one empty entry resets them; absent or
///   undecodable ones are replaced by the live object's (so clients that do
///   not know the field keep it), and undecodable live ones by none;
/// - an existing object with no managedFields stays untracked, as Kubernetes
///   leaves objects created before field management (skipnonapplied.go);
/// - the fields the write set or changed go to the manager's `Update`
///   entry (its time moves then), and no longer belong to anyone else;
///   removed fields belong to nobody.
pub fn record_update(scope: &Scope<'_>, live: Option<&Value>, new: &mut Value, manager: &str, now: &str) {
    let empty = Value::Object(serde_json::Map::new());
    let live_v = live.unwrap_or(&empty);
    let live_mf = live_v.pointer("/metadata/managedFields");
    let from_live = || managed::decode(live_mf).unwrap_or_default();
    let new_mf = new.pointer("/metadata/managedFields");
    let mut entries = if scope.subresource.is_some() {
        from_live()
    } else if managed::is_reset(new_mf) {
        Vec::new()
    } else {
        match managed::decode(new_mf) {
            Ok(e) if !e.is_empty() => e,
            _ => from_live(),
        }
    };
    let old = managed::without(live_v);
    let mut cur = managed::without(new);
    if entries.is_empty() && live.is_some() {
        managed::store(new, &[]);
        return;
    }
    let shape = scope.shape();
    let changed = update_entries(scope, &mut entries, &old, &cur, live.is_none(), shape);
    if !changed.is_empty() {
        let entry = Entry {
            manager: manager.to_string(),
            operation: Operation::Update,
            api_version: scope.api_version.to_string(),
            subresource: scope.subresource.unwrap_or("").to_string(),
            time: Some(now.to_string()),
            set: changed,
        };
        match entries.iter_mut().find(|e| e.same_manager(&entry)) {
            Some(prev) => {
                prev.set = entry.set.union(&prev.set);
                prev.time = entry.time;
            }
            None => entries.push(entry),
        }
    }
    managed::store(&mut cur, &entries);
    if let Some(mf) = cur.pointer("/metadata/managedFields") {
        if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("managedFields".into(), mf.clone());
        }
    } else {
        managed::store(new, &[]);
    }
}

/// The update of `old` to `new`: every entry loses the fields changed or
/// removed; the fields changed (added or modified) are returned, stripped.
fn update_entries(
    scope: &Scope<'_>,
    entries: &mut Vec<Entry>,
    old: &Value,
    new: &Value,
    creating: bool,
    shape: Shape,
) -> FieldSet {
    let ignored = scope.ignored();
    let strip = strip_set();
    let cmp = walk::compare(old, new, shape, creating);
    let added = cmp.added.recursive_difference(&ignored);
    let modified = cmp.modified.recursive_difference(&ignored);
    let removed = cmp.removed.recursive_difference(&ignored);
    let changed = modified.union(&added);
    for e in entries.iter_mut() {
        e.set = e.set.difference(&changed).difference(&removed).difference(&strip);
    }
    entries.retain(|e| !e.set.is_empty());
    changed.difference(&removed).difference(&strip)
}

/// Applies `config` (an apply patch, decoded) by `manager` to `live` (`None`:
/// the object does not exist yet), as `FieldManager.Apply`: checks the
/// configuration's type, merges it, prunes what the manager applied before
/// and no longer does (unless someone else owns it), and refuses fields
/// other managers own with a 409 unless `force`. Gives the object to write,
/// its managedFields set. `name` is the name on the URL.
pub fn apply(
    scope: &Scope<'_>,
    live: Option<&Value>,
    config: &Value,
    name: &str,
    manager: &str,
    force: bool,
    now: &str,
) -> Result<Value, ApiError> {
    check_config(scope, config)?;
    let shape = scope.shape();
    if let Some(m) = walk::missing_key(config, shape) {
        let ns = config.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("");
        let (group, version) = scope.api_version.split_once('/').unwrap_or(("", scope.api_version));
        return Err(ApiError::internal(format!(
            "failed to create typed patch object ({ns}/{name}; {group}/{version}, Kind={}): {m}",
            scope.kind
        )));
    }
    let empty = Value::Object(serde_json::Map::new());
    let creating = live.is_none();
    let live_v = live.unwrap_or(&empty);
    let mut entries = managed::decode(live_v.pointer("/metadata/managedFields"))
        .map_err(|e| ApiError::internal(format!("failed to decode managed fields: {e}")))?;
    let old = managed::without(live_v);
    if entries.is_empty() && !creating {
        // The fields of an untracked object belong to `before-first-apply`.
        let set = update_entries(scope, &mut entries, &empty, &old, true, shape);
        if !set.is_empty() {
            entries.push(Entry {
                manager: BEFORE_FIRST_APPLY.into(),
                operation: Operation::Update,
                api_version: scope.api_version.into(),
                subresource: scope.subresource.unwrap_or("").into(),
                time: Some(now.into()),
                set,
            });
        }
    }
    let ignored = scope.ignored();
    let config = without_ignored(config, &ignored);
    let merged = walk::merge(&old, &config, shape);
    let merged_name = merged.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    if merged_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({merged_name}) does not match the name on the URL ({name})"
        )));
    }
    let applied = walk::to_field_set(&config, shape).recursive_difference(&ignored);
    let me = Entry {
        manager: manager.to_string(),
        operation: Operation::Apply,
        api_version: scope.api_version.to_string(),
        subresource: scope.subresource.unwrap_or("").to_string(),
        time: Some(now.to_string()),
        set: applied,
    };
    let last = entries.iter().position(|e| e.same_manager(&me)).map(|i| entries.remove(i));
    let merged = match &last {
        Some(last) if !last.set.is_empty() => prune(&merged, &entries, &me, &last.set, shape),
        _ => merged,
    };

    // Conflicts: fields of other managers the apply adds or changes.
    let cmp = walk::compare(&old, &merged, shape, creating);
    let changed = cmp.modified.union(&cmp.added).recursive_difference(&ignored);
    let removed = cmp.removed.recursive_difference(&ignored);
    let mut conflicts: Vec<(&Entry, Vec<Vec<String>>)> = Vec::new();
    for e in &entries {
        let c = e.set.intersection(&changed);
        if !c.is_empty() {
            conflicts.push((e, c.paths()));
        }
    }
    if !force && !conflicts.is_empty() {
        return Err(conflict_error(conflicts));
    }
    let strip = strip_set();
    for e in entries.iter_mut() {
        e.set = e.set.difference(&changed).difference(&removed).difference(&strip);
    }
    entries.retain(|e| !e.set.is_empty());
    let mut me = me;
    me.set = me.set.difference(&strip);
    if !me.set.is_empty() {
        // The time moves only when the object or the manager's fields change.
        if let Some(last) = &last
            && last.set == me.set
            && crate::patch::json_eq(&merged, &old)
        {
            me.time.clone_from(&last.time);
        }
        entries.push(me);
    }
    let mut out = merged;
    if !out.is_object() {
        out = empty;
    }
    if out.get("metadata").is_none()
        && let Some(o) = out.as_object_mut()
    {
        o.insert("metadata".into(), Value::Object(serde_json::Map::new()));
    }
    managed::store(&mut out, &entries);
    Ok(out)
}

/// The configuration without the fields this scope ignores (the status
/// of a resource with a status subresource: its strategy resets it).
fn without_ignored(config: &Value, ignored: &FieldSet) -> Value {
    let mut out = config.clone();
    if let Some(o) = out.as_object_mut() {
        for (pe, sub) in ignored.children() {
            if sub.is_member()
                && let Some(name) = pe.strip_prefix("f:")
            {
                o.remove(name);
            }
        }
    }
    out
}

/// Removes from `merged` what the applier applied last time (`last`) and
/// not now, unless another manager (or its new configuration) owns it:
/// structured-merge-diff's `prune`, `addBackOwnedItems` and
/// `addBackDanglingItems`, with named fields made members.
fn prune(merged: &Value, others: &[Entry], me: &Entry, last: &FieldSet, shape: Shape) -> Value {
    let ensure = |s: &FieldSet| walk::ensure_named_fields(s, shape);
    let set_of = |v: &Value| ensure(&walk::to_field_set(v, shape));
    let remove = |v: &Value, s: &FieldSet| {
        walk::remove_items(v, s, shape).unwrap_or_else(|| Value::Object(serde_json::Map::new()))
    };
    let last = ensure(last);
    let pruned = remove(merged, &last);
    let mut owned = me.set.clone();
    for e in others {
        owned = owned.union(&e.set);
    }
    let owned = ensure(&owned);
    let merged_set = set_of(merged);
    let pruned = remove(merged, &merged_set.difference(&set_of(&pruned).union(&owned)));
    remove(merged, &merged_set.difference(&set_of(&pruned)).intersection(&last))
}

/// Checks what an applied configuration must be (versioncheck.go,
/// structuredmerge.go): of the kind and version served, without managedFields.
fn check_config(scope: &Scope<'_>, config: &Value) -> Result<(), ApiError> {
    let api_version = config.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = config.get("kind").and_then(Value::as_str).unwrap_or("");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    if kind != scope.kind || group != scope.group {
        return Err(ApiError::bad_request(format!("invalid object type: {group}/{version}, Kind={kind}")));
    }
    if api_version != scope.api_version {
        return Err(ApiError::bad_request(format!(
            "Incorrect version specified in apply patch. Specified patch version: {api_version}, expected: {}",
            scope.api_version
        )));
    }
    if config.pointer("/metadata/managedFields").is_some_and(|m| !m.is_null()) {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    Ok(())
}

/// The 409 of an apply that would change fields others own
/// (`NewConflictError` in conflict.go).
fn conflict_error(mut conflicts: Vec<(&Entry, Vec<Vec<String>>)>) -> ApiError {
    conflicts.sort_by(|a, b| a.0.sort_key().cmp(&b.0.sort_key()));
    let total: usize = conflicts.iter().map(|(_, p)| p.len()).sum();
    let mut causes = Vec::new();
    for (e, paths) in &conflicts {
        for p in paths {
            causes.push(Cause {
                reason: "FieldManagerConflict".into(),
                message: format!("conflict with {}", e.printed()),
                field: path_string(p),
            });
        }
    }
    let message = if total == 1 {
        format!("Apply failed with 1 conflict: {}: {}", causes[0].message, causes[0].field)
    } else {
        let mut lines = Vec::new();
        for (e, paths) in &conflicts {
            lines.push(format!("conflicts with {}:", e.printed()));
            lines.extend(paths.iter().map(|p| format!("- {}", path_string(p))));
        }
        format!("Apply failed with {total} conflicts: {}", lines.join("\n"))
    };
    let mut err = ApiError::new(StatusCode::CONFLICT, "Conflict", message);
    err.details.causes = causes;
    err
}
