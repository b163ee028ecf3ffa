//! CustomResourceDefinitions: the resources they define, served as the
//! built-in ones are (the same handlers, store and watch cache), and the
//! controller that keeps them current.
//!
//! - A definition's served versions become [`ResourceDef`]s in the store's
//!   [`edgehive_store::resources::Registry`] (routing, discovery, namespace
//!   cleanup read it), each with a [`Served`] entry here: its parsed
//!   structural schema, printer columns and scale paths. All versions of a
//!   definition share one storage (`/registry/{group}/{plural}/`); objects
//!   are stored at the storage version and shown at the version asked for
//!   (conversion `None`: only `apiVersion` changes, as in Kubernetes).
//! - The controller ([`run`]) follows the definitions with a watch and, on
//!   every change, recomputes the whole table (there are tens of
//!   definitions, not thousands), then writes each definition's status
//!   where it differs: `acceptedNames`, `storedVersions` and the
//!   `NamesAccepted` / `Established` conditions of apiextensions' naming
//!   and establishing controllers, with their reasons and messages.
//! - Names are first come, first served within a group: a definition whose
//!   plural, singular, kind, list kind or a short name another accepted
//!   definition of the group already uses is not served, and its
//!   `NamesAccepted` says which name conflicts.
//! - A definition of a resource edgehive serves built in (KubeEdge's
//!   Device, DeviceModel, ObjectSync and ClusterObjectSync, whose edge
//!   delivery the built-ins carry) is accepted and established so that
//!   KubeEdge's install manifests apply, but the built-in keeps serving; its
//!   deletion leaves the objects alone, as apiextensions' finalizer does for
//!   a definition that overlaps a built-in API.
//! - Deleting a definition marks it `Terminating`; the controller deletes
//!   every object of it and then removes the
//!   `customresourcecleanup.apiextensions.k8s.io` finalizer (added at
//!   delete time, as the definition's storage does), which completes the
//!   deletion.

pub(crate) mod admit;
pub(crate) mod columns;
pub(crate) mod openapi;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use edgehive_registry::structural::Schema;
use edgehive_store::informer::{Change, inform};
use edgehive_store::resources::{self, CUSTOM_RESOURCE_DEFINITIONS, ResourceDef, intern, intern_list, intern_str};
use edgehive_store::{DeleteOptions, ListOptions, Object, Store, StoreError};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::context::ApiState;

/// The finalizer that holds a deleted definition until its objects are gone.
pub(crate) const FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// Where a custom resource's `scale` subresource reads and writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScalePaths {
    /// JSON pointer of the desired replicas (`/spec/replicas`).
    pub(crate) spec: String,
    /// JSON pointer of the observed replicas.
    pub(crate) status: String,
    /// JSON pointer of the serialized label selector, when there is one.
    pub(crate) selector: Option<String>,
}

/// One served version of a definition.
#[derive(Debug)]
pub(crate) struct Served {
    /// The resource at this version.
    pub(crate) def: &'static ResourceDef,
    /// The structural schema (`None`: none was given; everything is kept).
    pub(crate) schema: Option<Schema>,
    /// The schema as written, for OpenAPI.
    pub(crate) schema_json: Value,
    /// `additionalPrinterColumns`.
    pub(crate) columns: Vec<columns::PrinterColumn>,
    /// The scale subresource's paths.
    pub(crate) scale: Option<ScalePaths>,
    /// `deprecated` with its warning, sent with every response.
    pub(crate) warning: Option<String>,
    /// The definition is being deleted: no new objects.
    pub(crate) terminating: bool,
}

/// The custom resources served now.
#[derive(Debug, Default)]
pub(crate) struct Crds {
    served: RwLock<Arc<Vec<Arc<Served>>>>,
}

impl Crds {
    /// The served version `res` is, when it is a custom resource.
    pub(crate) fn get(&self, res: &ResourceDef) -> Option<Arc<Served>> {
        if !res.custom {
            return None;
        }
        self.all().iter().find(|s| std::ptr::eq(s.def, res)).cloned()
    }

    /// Every served version.
    pub(crate) fn all(&self) -> Arc<Vec<Arc<Served>>> {
        Arc::clone(&self.served.read().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Serves what `plan` says, in the store's registry and here.
    fn install(&self, store: &Store, plan: &Plan) {
        let defs = plan.served.iter().map(|s| s.def).collect();
        *self.served.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(plan.served.to_vec());
        store.resources().set_custom(defs);
    }

    /// Reads every definition and serves them (before the first request).
    pub(crate) async fn load(&self, store: &Store) -> Result<(), StoreError> {
        let list = store.list(&CUSTOM_RESOURCE_DEFINITIONS, &ListOptions::default()).await?;
        let values: Vec<Value> = list.items.iter().filter_map(|o| o.value().ok().cloned()).collect();
        self.install(store, &plan(&values));
        Ok(())
    }
}

/// Kubernetes' ordering of version names (`v2` > `v1` > `v1beta2` >
/// `v1beta1` > `v1alpha1` > anything else, the rest alphabetically):
/// the first is the preferred version.
pub(crate) fn version_order(a: &str, b: &str) -> std::cmp::Ordering {
    fn key(v: &str) -> (u8, u64, u8, u64, String) {
        let parse = || -> Option<(u64, u8, u64)> {
            let rest = v.strip_prefix('v')?;
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let major: u64 = digits.parse().ok()?;
            let tail = &rest[digits.len()..];
            if tail.is_empty() {
                return Some((major, 3, 0));
            }
            let (stage, n) = if let Some(n) = tail.strip_prefix("beta") {
                (2, n)
            } else if let Some(n) = tail.strip_prefix("alpha") {
                (1, n)
            } else {
                return None;
            };
            Some((major, stage, n.parse().ok()?))
        };
        match parse() {
            Some((major, stage, minor)) => (1, major, stage, minor, String::new()),
            None => (0, 0, 0, 0, v.to_owned()),
        }
    }
    let (ka, kb) = (key(a), key(b));
    // Higher keys first; non-kube versions last, alphabetically.
    kb.0.cmp(&ka.0).then(kb.1.cmp(&ka.1)).then(kb.2.cmp(&ka.2)).then(kb.3.cmp(&ka.3)).then(ka.4.cmp(&kb.4))
}

fn text<'v>(v: &'v Value, pointer: &str) -> &'v str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

fn strings(v: &Value, pointer: &str) -> Vec<String> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

/// JSON pointer of a simple JSON path (`.spec.replicas` → `/spec/replicas`).
fn pointer_of(path: &str) -> String {
    path.replace('.', "/")
}

/// What the definitions ask for: the versions to serve, and each
/// definition's status.
#[derive(Debug, Default)]
struct Plan {
    served: Vec<Arc<Served>>,
    statuses: BTreeMap<String, Value>,
    /// Definitions whose objects a built-in resource holds.
    builtin: HashSet<String>,
}

/// The names a definition claims in its group.
fn claimed(crd: &Value) -> Vec<(&'static str, String)> {
    let mut out = vec![
        ("plural", text(crd, "/spec/names/plural").to_owned()),
        ("singular", text(crd, "/spec/names/singular").to_owned()),
        ("kind", text(crd, "/spec/names/kind").to_owned()),
        ("listKind", text(crd, "/spec/names/listKind").to_owned()),
    ];
    out.extend(strings(crd, "/spec/names/shortNames").into_iter().map(|s| ("shortNames", s)));
    out.retain(|(_, n)| !n.is_empty());
    out
}

/// The condition `ty` as apiextensions writes it, keeping the old
/// `lastTransitionTime` when the status did not change.
fn condition(old: &Value, ty: &str, status: bool, reason: &str, message: &str, now: &str) -> Value {
    let status = if status { "True" } else { "False" };
    let previous = old
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == ty))
        .filter(|c| c["status"] == status)
        .and_then(|c| c.get("lastTransitionTime").cloned());
    json!({
        "type": ty,
        "status": status,
        "lastTransitionTime": previous.unwrap_or_else(|| json!(now)),
        "reason": reason,
        "message": message,
    })
}

fn plan(crds: &[Value]) -> Plan {
    let now = edgehive_store::now_rfc3339();
    let mut ordered: Vec<&Value> = crds.iter().collect();
    // First come, first served: the older definition keeps a name.
    ordered.sort_by(|a, b| {
        text(a, "/metadata/creationTimestamp")
            .cmp(text(b, "/metadata/creationTimestamp"))
            .then(text(a, "/metadata/name").cmp(text(b, "/metadata/name")))
    });
    let mut out = Plan::default();
    let mut taken: BTreeMap<(String, String), String> = BTreeMap::new();
    for crd in ordered {
        let name = text(crd, "/metadata/name").to_owned();
        let group = text(crd, "/spec/group").to_owned();
        let plural = text(crd, "/spec/names/plural");
        let builtin = resources::find(&group, plural).is_some();
        let conflict = claimed(crd).into_iter().find_map(|(what, n)| match taken.get(&(group.clone(), n.clone())) {
            Some(owner) if *owner != name => Some((what, n)),
            _ => None,
        });
        let mut conditions = Vec::new();
        let accepted = conflict.is_none();
        match &conflict {
            None => conditions.push(condition(crd, "NamesAccepted", true, "NoConflicts", "no conflicts found", &now)),
            Some((what, n)) => {
                let reason = match *what {
                    "plural" => "PluralConflict",
                    "singular" => "SingularConflict",
                    "kind" => "KindConflict",
                    "listKind" => "ListKindConflict",
                    _ => "ShortNamesConflict",
                };
                conditions.push(condition(
                    crd,
                    "NamesAccepted",
                    false,
                    reason,
                    &format!("{n:?} is already in use"),
                    &now,
                ));
            }
        }
        if accepted {
            for (_, n) in claimed(crd) {
                taken.insert((group.clone(), n), name.clone());
            }
            conditions.push(condition(
                crd,
                "Established",
                true,
                "InitialNamesAccepted",
                "the initial names have been accepted",
                &now,
            ));
        } else {
            conditions.push(condition(crd, "Established", false, "NotAccepted", "not all names are accepted", &now));
        }
        let terminating = crd.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
        if terminating {
            conditions.push(condition(
                crd,
                "Terminating",
                true,
                "InstanceDeletionInProgress",
                "CustomResource deletion is in progress",
                &now,
            ));
        }
        let versions = crd.pointer("/spec/versions").and_then(Value::as_array).cloned().unwrap_or_default();
        let storage = versions.iter().find(|v| v["storage"] == true).map(|v| text(v, "/name").to_owned());
        let mut stored = strings(crd, "/status/storedVersions");
        if let Some(s) = &storage
            && !stored.contains(s)
        {
            stored.push(s.clone());
        }
        let names = crd.pointer("/spec/names").cloned().unwrap_or_else(|| json!({}));
        let status = json!({
            "conditions": conditions,
            "acceptedNames": if accepted { names } else { crd.pointer("/status/acceptedNames").cloned().unwrap_or_else(|| json!({"plural": "", "kind": ""})) },
            "storedVersions": stored,
        });
        out.statuses.insert(name.clone(), status);
        if builtin {
            out.builtin.insert(name);
            continue;
        }
        let Some(storage) = storage.filter(|_| accepted) else { continue };
        out.served.extend(served_versions(crd, &group, &storage, terminating));
    }
    out
}

/// The served versions of an accepted definition, the storage version first.
fn served_versions(crd: &Value, group: &str, storage: &str, terminating: bool) -> Vec<Arc<Served>> {
    let mut versions: Vec<&Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| vs.iter().filter(|v| v["served"] == true).collect())
        .unwrap_or_default();
    versions.sort_by(|a, b| {
        let (na, nb) = (text(a, "/name"), text(b, "/name"));
        (nb == storage).cmp(&(na == storage)).then(version_order(na, nb))
    });
    versions
        .into_iter()
        .map(|v| {
            let subs = v.get("subresources").cloned().unwrap_or(Value::Null);
            let scale = subs.get("scale").filter(|s| s.is_object()).map(|s| ScalePaths {
                spec: pointer_of(text(s, "/specReplicasPath")),
                status: pointer_of(text(s, "/statusReplicasPath")),
                selector: Some(text(s, "/labelSelectorPath")).filter(|p| !p.is_empty()).map(pointer_of),
            });
            let def = intern(ResourceDef {
                group: intern_str(group),
                version: intern_str(text(v, "/name")),
                kind: intern_str(text(crd, "/spec/names/kind")),
                plural: intern_str(text(crd, "/spec/names/plural")),
                singular: intern_str(text(crd, "/spec/names/singular")),
                short_names: intern_list(&strings(crd, "/spec/names/shortNames")),
                categories: intern_list(&strings(crd, "/spec/names/categories")),
                namespaced: text(crd, "/spec/scope") == "Namespaced",
                status_subresource: subs.get("status").is_some_and(Value::is_object),
                scale_subresource: scale.is_some(),
                graceful: false,
                generation: true,
                fields: &[],
                storage: intern_str(&format!("{group}/{}", text(crd, "/spec/names/plural"))),
                custom: true,
                stored_version: if text(v, "/name") == storage { "" } else { intern_str(storage) },
            });
            let schema_json = v.pointer("/schema/openAPIV3Schema").cloned().unwrap_or(Value::Null);
            let schema = Schema::parse(&schema_json).ok();
            let warning =
                (v["deprecated"] == true).then(|| match v.get("deprecationWarning").and_then(Value::as_str) {
                    Some(w) => w.to_owned(),
                    None => format!("{group}/{} {} is deprecated", def.version, def.kind),
                });
            Arc::new(Served { def, schema, schema_json, columns: columns::of(v), scale, warning, terminating })
        })
        .collect()
}

/// Adds the cleanup finalizer to a definition about to be deleted, as the
/// definition's storage does before its deletion (so the objects go first).
pub(crate) async fn prepare_delete(store: &Store, name: &str) -> Result<(), StoreError> {
    let r = store
        .update_with(&CUSTOM_RESOURCE_DEFINITIONS, "", name, |cur| {
            let mut v = cur.to_value()?;
            if cur.is_terminating() {
                return Ok(None);
            }
            let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) else { return Ok(None) };
            let finalizers = meta.entry("finalizers").or_insert_with(|| json!([]));
            match finalizers.as_array_mut() {
                Some(f) if !f.iter().any(|x| x == FINALIZER) => f.push(json!(FINALIZER)),
                _ => return Ok(None),
            }
            Ok::<_, StoreError>(Some(v))
        })
        .await;
    match r {
        Ok(_) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Deletes every object of a terminating definition, then its finalizer;
/// whether it is done.
async fn clean(store: &Store, crd: &Value, builtin: bool) -> Result<bool, StoreError> {
    let name = text(crd, "/metadata/name");
    if !builtin {
        let group = text(crd, "/spec/group");
        let plural = text(crd, "/spec/names/plural");
        if let Some(res) = store.resources().find(group, plural) {
            let list = store.list(res, &ListOptions::default()).await?;
            for obj in &list.items {
                let opts = DeleteOptions { grace_period_seconds: Some(0), ..DeleteOptions::default() };
                match store.delete(res, obj.namespace(), obj.name(), &opts).await {
                    Ok(_) | Err(StoreError::NotFound { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            let left = store.list(res, &ListOptions { limit: 1, ..ListOptions::default() }).await?;
            if !left.items.is_empty() {
                // Waiting on the objects' own finalizers.
                return Ok(false);
            }
        }
    }
    let done = store
        .update_with(&CUSTOM_RESOURCE_DEFINITIONS, "", name, |cur| {
            let mut v = cur.to_value()?;
            let Some(f) = v.pointer_mut("/metadata/finalizers").and_then(Value::as_array_mut) else { return Ok(None) };
            f.retain(|x| x != FINALIZER);
            Ok::<_, StoreError>(Some(v))
        })
        .await;
    match done {
        Ok(_) | Err(StoreError::NotFound { .. }) => Ok(true),
        Err(e) => Err(e),
    }
}

/// Writes a definition's status when it differs from `want`.
async fn write_status(store: &Store, name: &str, want: &Value) {
    let r = store
        .update_with(&CUSTOM_RESOURCE_DEFINITIONS, "", name, |cur| {
            let mut v = cur.to_value()?;
            if v.get("status") == Some(want) {
                return Ok(None);
            }
            v["status"] = want.clone();
            Ok::<_, StoreError>(Some(v))
        })
        .await;
    match r {
        Ok(_) | Err(StoreError::NotFound { .. }) => {}
        Err(e) => tracing::warn!(crd = %name, error = %e, "write the definition's status"),
    }
}

/// Takes one informer change into the definitions known.
fn absorb(known: &mut BTreeMap<String, Object>, change: Change) {
    match change {
        Change::Upsert { object, .. } => {
            known.insert(object.name().to_owned(), object);
        }
        Change::Deleted(object) => {
            known.remove(object.name());
        }
        Change::Relisted { objects, .. } => {
            *known = objects.into_iter().map(|o| (o.name().to_owned(), o)).collect();
        }
    }
}

/// The controller: serves the definitions and keeps their status, until `stop`.
pub(crate) async fn run(shared: Arc<ApiState>, stop: CancellationToken) {
    let store = shared.store.clone();
    let (tx, mut rx) = mpsc::channel(64);
    let watch = tokio::spawn(inform(store.clone(), "crd", &CUSTOM_RESOURCE_DEFINITIONS, tx, stop.clone()));
    let mut known: BTreeMap<String, Object> = BTreeMap::new();
    let cleaning: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    loop {
        let change = tokio::select! {
            _ = stop.cancelled() => break,
            c = rx.recv() => c,
        };
        let Some(change) = change else { break };
        absorb(&mut known, change);
        // Coalesce a burst (a manifest of many definitions) into one pass.
        while let Ok(more) = rx.try_recv() {
            absorb(&mut known, more);
        }
        let values: Vec<Value> = known.values().filter_map(|o| o.value().ok().cloned()).collect();
        let plan = plan(&values);
        shared.crds.install(&store, &plan);
        for crd in &values {
            let name = text(crd, "/metadata/name");
            if let Some(want) = plan.statuses.get(name) {
                write_status(&store, name, want).await;
            }
            let terminating = crd.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
            let finalizer = crd
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| f.iter().any(|x| x == FINALIZER));
            if terminating
                && finalizer
                && cleaning.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(name.to_owned())
            {
                let (store, stop, cleaning) = (store.clone(), stop.clone(), Arc::clone(&cleaning));
                let (crd, builtin) = (crd.clone(), plan.builtin.contains(name));
                tokio::spawn(async move {
                    let name = text(&crd, "/metadata/name").to_owned();
                    let mut backoff = Duration::from_millis(100);
                    loop {
                        match clean(&store, &crd, builtin).await {
                            Ok(true) => {
                                tracing::info!(crd = %name, "custom resources deleted with their definition");
                                break;
                            }
                            Ok(false) => {}
                            Err(e) => tracing::warn!(crd = %name, error = %e, "delete the definition's objects"),
                        }
                        tokio::select! {
                            _ = stop.cancelled() => break,
                            _ = tokio::time::sleep(backoff) => {}
                        }
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                    }
                    cleaning.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&name);
                });
            }
        }
    }
    let _ = watch.await;
}

#[cfg(test)]
mod tests;
