//! `metadata.managedFields`: its entries read and written as Kubernetes'
//! fieldmanager does (staging/src/k8s.io/apimachinery/pkg/util/managedfields/internal/managedfields.go).
//!
//! An entry is identified by its manager, operation and subresource, and,
//! for updates, its API version (`BuildManagerIdentifier`); entries are
//! written sorted by operation, time (seconds), manager, API version and
//! subresource (`sortEncodedManagedFields`).

use serde_json::{Map, Value, json};

use super::fieldset::FieldSet;

/// `Apply` or `Update`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Operation {
    Apply,
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One managedFields entry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    pub(crate) manager: String,
    pub(crate) operation: Operation,
    pub(crate) api_version: String,
    pub(crate) subresource: String,
    pub(crate) time: Option<String>,
    pub(crate) set: FieldSet,
}

impl Entry {
    /// Whether `self` and `other` are the same manager (`BuildManagerIdentifier`).
    pub(crate) fn same_manager(&self, other: &Entry) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == Operation::Apply || self.api_version == other.api_version)
    }

    /// The manager as a conflict names it (`printManager` in conflict.go):
    /// `"kubectl-client-side-apply" using apps/v1` for an updater (the
    /// identifier has no time), `"other"` for an applier.
    pub(crate) fn printed(&self) -> String {
        let mut s = crate::validation::go_quote(&self.manager);
        if !self.subresource.is_empty() {
            s = format!("{s} with subresource {}", crate::validation::go_quote(&self.subresource));
        }
        if self.operation == Operation::Update {
            s = format!("{s} using {}", self.api_version);
        }
        s
    }

    /// The key conflicts are grouped and sorted by (the identifier's JSON order).
    pub(crate) fn sort_key(&self) -> (String, &'static str, String, String) {
        let version = if self.operation == Operation::Update { self.api_version.clone() } else { String::new() };
        (self.manager.clone(), self.operation.as_str(), version, self.subresource.clone())
    }
}

/// Whether the list a client sent asks to reset managedFields: an empty
/// list, or a list of one empty entry (`isResetManagedFields`).
pub(crate) fn is_reset(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Array(a)) => a.is_empty() || (a.len() == 1 && a[0].as_object().is_some_and(Map::is_empty)),
        _ => false,
    }
}

/// The entries of a managedFields list; `Ok(empty)` when there is none
/// (absent or `null`); an error for anything `DecodeManagedFields` refuses.
pub(crate) fn decode(v: Option<&Value>) -> Result<Vec<Entry>, String> {
    let list = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(other) => return Err(format!("managedFields must be a list, not {other}")),
    };
    let mut out: Vec<Entry> = Vec::with_capacity(list.len());
    for (i, e) in list.iter().enumerate() {
        let Some(e) = e.as_object() else { return Err(format!("managed fields entry {i} is not an object")) };
        let text = |k: &str| -> Result<String, String> {
            match e.get(k) {
                None | Some(Value::Null) => Ok(String::new()),
                Some(Value::String(s)) => Ok(s.clone()),
                Some(other) => Err(format!("{k} of managed fields entry {i} is not a string: {other}")),
            }
        };
        let operation = match text("operation")?.as_str() {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            _ => return Err("operation must be `Apply` or `Update`".into()),
        };
        let api_version = text("apiVersion")?;
        if api_version.is_empty() {
            return Err("apiVersion must not be empty".into());
        }
        match text("fieldsType")?.as_str() {
            "FieldsV1" => {}
            "" => return Err(format!("missing fieldsType in managed fields entry {i}")),
            other => return Err(format!("invalid fieldsType {other:?} in managed fields entry {i}")),
        }
        let set = match e.get("fieldsV1") {
            None | Some(Value::Null) => FieldSet::new(),
            Some(v) => FieldSet::from_fields_v1(v).map_err(|m| format!("error decoding set: {m}"))?,
        };
        let time = Some(text("time")?).filter(|t| !t.is_empty());
        let entry =
            Entry { manager: text("manager")?, operation, api_version, subresource: text("subresource")?, time, set };
        // A repeated manager: the later entry wins, as in Go's map.
        out.retain(|o| !o.same_manager(&entry));
        out.push(entry);
    }
    Ok(out)
}

/// The managedFields list of `entries`, sorted; `None` when there are none.
pub(crate) fn encode(entries: &[Entry]) -> Option<Value> {
    if entries.is_empty() {
        return None;
    }
    let mut sorted: Vec<&Entry> = entries.iter().collect();
    sorted.sort_by(|p, q| {
        p.operation
            .cmp(&q.operation)
            .then_with(|| p.time.as_deref().unwrap_or("").cmp(q.time.as_deref().unwrap_or("")))
            .then_with(|| p.manager.cmp(&q.manager))
            .then_with(|| p.api_version.cmp(&q.api_version))
            .then_with(|| p.subresource.cmp(&q.subresource))
    });
    Some(Value::Array(
        sorted
            .into_iter()
            .map(|e| {
                let mut m = Map::new();
                m.insert("manager".into(), json!(e.manager));
                m.insert("operation".into(), json!(e.operation.as_str()));
                m.insert("apiVersion".into(), json!(e.api_version));
                if let Some(t) = &e.time {
                    m.insert("time".into(), json!(t));
                }
                m.insert("fieldsType".into(), json!("FieldsV1"));
                m.insert("fieldsV1".into(), e.set.to_fields_v1());
                if !e.subresource.is_empty() {
                    m.insert("subresource".into(), json!(e.subresource));
                }
                Value::Object(m)
            })
            .collect(),
    ))
}

/// Writes `entries` into `obj.metadata.managedFields` (removing it when empty).
pub(crate) fn store(obj: &mut Value, entries: &[Entry]) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else { return };
    match encode(entries) {
        Some(v) => {
            meta.insert("managedFields".into(), v);
        }
        None => {
            meta.remove("managedFields");
        }
    }
}

/// `obj` without `metadata.managedFields`.
pub(crate) fn without(obj: &Value) -> Value {
    let mut out = obj.clone();
    if let Some(meta) = out.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    out
}
