//! What a controller decides: writes to make and when to look again. A
//! controller's sync is a function of the [`crate::world::World`] and the
//! time; it never writes itself, so its tests compare plans.

use std::time::Duration;

use edgehive_store::Propagation;
use edgehive_store::resources::ResourceDef;
use serde_json::Value;

/// One write.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create `object` (defaulted and validated as the API server would).
    Create {
        /// Its resource.
        res: &'static ResourceDef,
        /// The object; a `generateName` gets its suffix.
        object: Value,
    },
    /// Apply a JSON merge patch to the object, if its uid is still `uid`
    /// (and, when `rev` is given, it is unchanged since the controller read
    /// it); then defaults and validation as an update.
    Patch {
        /// Its resource.
        res: &'static ResourceDef,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The object the decision was about.
        uid: String,
        /// Precondition on the resourceVersion.
        rev: Option<u64>,
        /// The JSON merge patch (status included: controllers own it).
        patch: Value,
    },
    /// Delete the object if its uid is still `uid`.
    Delete {
        /// Its resource.
        res: &'static ResourceDef,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The object the decision was about.
        uid: String,
        /// What becomes of its dependents (`None`: the kind's default).
        propagation: Option<Propagation>,
    },
}

impl Action {
    /// Deletes the object `uid` of `res` with the kind's default propagation.
    pub fn delete(res: &'static ResourceDef, namespace: &str, name: &str, uid: &str) -> Action {
        Action::Delete {
            res,
            namespace: namespace.to_string(),
            name: name.to_string(),
            uid: uid.to_string(),
            propagation: None,
        }
    }

    /// The kind of write, for metrics and logs.
    pub fn verb(&self) -> &'static str {
        match self {
            Action::Create { .. } => "create",
            Action::Patch { .. } => "patch",
            Action::Delete { .. } => "delete",
        }
    }

    /// The resource written.
    pub fn resource(&self) -> &'static ResourceDef {
        match self {
            Action::Create { res, .. } | Action::Patch { res, .. } | Action::Delete { res, .. } => res,
        }
    }
}

/// A sync's outcome.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Plan {
    /// Writes, in order, except that consecutive creates run in slow-start
    /// batches (1, 2, 4, ... at once), and a batch with a failure ends them.
    pub actions: Vec<Action>,
    /// Look again after this long even if nothing changes (minReadySeconds,
    /// progress deadlines).
    pub requeue_after: Option<Duration>,
}

impl Plan {
    /// A plan that writes nothing.
    pub fn none() -> Plan {
        Plan::default()
    }

    /// Adds a write.
    pub fn push(&mut self, a: Action) {
        self.actions.push(a);
    }

    /// Asks to look again within `d` (the earliest of all such asks wins).
    pub fn requeue(&mut self, d: Duration) {
        self.requeue_after = Some(self.requeue_after.map_or(d, |c| c.min(d)));
    }

    /// Adds another plan's writes and requeue.
    pub fn extend(&mut self, other: Plan) {
        self.actions.extend(other.actions);
        if let Some(d) = other.requeue_after {
            self.requeue(d);
        }
    }
}

/// The JSON merge patch that turns `old` into `new` (keys `old` has and
/// `new` lacks become `null`; lists are replaced whole); `None` when equal.
pub fn merge_diff(old: &Value, new: &Value) -> Option<Value> {
    if old == new {
        return None;
    }
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut patch = serde_json::Map::new();
            for (k, nv) in n {
                match o.get(k) {
                    Some(ov) => {
                        if let Some(d) = merge_diff(ov, nv) {
                            patch.insert(k.clone(), d);
                        }
                    }
                    None => {
                        patch.insert(k.clone(), nv.clone());
                    }
                }
            }
            for k in o.keys().filter(|k| !n.contains_key(*k)) {
                patch.insert(k.clone(), Value::Null);
            }
            Some(Value::Object(patch))
        }
        _ => Some(new.clone()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn merge_diffs_null_what_went_and_replace_lists() {
        let old = json!({"a": 1, "b": {"c": 1, "d": 2}, "l": [1, 2], "gone": true});
        let new = json!({"a": 1, "b": {"c": 3}, "l": [1], "new": "x"});
        let d = merge_diff(&old, &new).unwrap();
        assert_eq!(d, json!({"b": {"c": 3, "d": null}, "l": [1], "gone": null, "new": "x"}));
        let mut patched = old.clone();
        edgehive_registry::patch::merge_patch(&mut patched, &d);
        assert_eq!(patched, new);
        assert_eq!(merge_diff(&new, &new), None);
    }
}
