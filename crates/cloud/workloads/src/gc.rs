//! The garbage collector: objects whose owners are gone are deleted; owners
//! deleted in the foreground wait for their dependents; owners deleted with
//! `orphan` let go of theirs (Kubernetes' `pkg/controller/garbagecollector`,
//! as `kubectl delete --cascade=background|foreground|orphan` asks).
//!
//! The collector keeps a graph of every watched object's uid, owner
//! references and deletion state. What the graph says is absent may only not
//! have been seen yet (each resource has its own watch), so a dependent is
//! never deleted on the graph's word alone: the executor reads each owner
//! from the store first ([`Action`] `Collect`, see [`crate::run`]).

use std::collections::{BTreeSet, HashMap};

use edgehive_store::resources::{self, ResourceDef};
use edgehive_store::{FOREGROUND_FINALIZER, ORPHAN_FINALIZER, Object};
use serde_json::{Value, json};

use crate::world::{OwnerRef, str_at};

/// The resources the collector watches: everything served but the
/// high-volume records nothing owns (events, leases, success points).
pub fn watched() -> impl Iterator<Item = &'static ResourceDef> {
    resources::ALL.iter().copied().filter(|r| {
        !std::ptr::eq(*r, &resources::EVENTS)
            && !std::ptr::eq(*r, &resources::LEASES)
            && !std::ptr::eq(*r, &resources::OBJECT_SYNCS)
            && !std::ptr::eq(*r, &resources::CLUSTER_OBJECT_SYNCS)
    })
}

/// One object in the graph (a vertex: "node" means a Kubernetes Node here).
#[derive(Debug, Clone, PartialEq)]
pub struct Vertex {
    /// Its resource.
    pub res: &'static ResourceDef,
    /// Namespace (`""` when cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Its owners.
    pub owners: Vec<OwnerRef>,
    /// Being deleted.
    pub deleting: bool,
    /// Carries the `foregroundDeletion` finalizer.
    pub foreground: bool,
    /// Carries the `orphan` finalizer.
    pub orphan: bool,
    /// Its finalizers (kept to write them back without the collector's).
    pub finalizers: Vec<String>,
}

impl Vertex {
    fn of(obj: &Object) -> Option<(String, Vertex)> {
        Some(Vertex::of_parsed(obj, obj.value().ok()?))
    }

    /// The vertex of `obj`, parsed as `v`.
    fn of_parsed(obj: &Object, v: &Value) -> (String, Vertex) {
        let uid = str_at(v, "/metadata/uid").to_string();
        let finalizers: Vec<String> = v
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect();
        (
            uid,
            Vertex {
                res: obj.resource(),
                namespace: obj.namespace().to_string(),
                name: obj.name().to_string(),
                owners: OwnerRef::all_of(v),
                deleting: v.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null()),
                foreground: finalizers.iter().any(|f| f == FOREGROUND_FINALIZER),
                orphan: finalizers.iter().any(|f| f == ORPHAN_FINALIZER),
                finalizers,
            },
        )
    }
}

/// What the collector asks the executor to do.
#[derive(Debug, Clone, PartialEq)]
pub enum GcAction {
    /// Delete the dependent if every owner named in `owners` is verified
    /// gone from the store (absent, or another uid); owners that are there
    /// and being deleted in the foreground count as gone for this purpose,
    /// and then the delete is itself in the foreground. When some but not
    /// all are gone, the gone ones are removed from its references instead.
    Collect {
        /// The dependent.
        res: &'static ResourceDef,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// uid.
        uid: String,
        /// Its owner references.
        owners: Vec<OwnerRef>,
    },
    /// Remove the references to `owner_uid` from the dependent.
    Orphan {
        /// The dependent.
        res: &'static ResourceDef,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// uid.
        uid: String,
        /// The owner let go of.
        owner_uid: String,
    },
    /// Delete a dependent of an owner deleted in the foreground, itself in
    /// the foreground (so chains go bottom up).
    DeleteForeground {
        /// The dependent.
        res: &'static ResourceDef,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// uid.
        uid: String,
    },
    /// Remove a collector finalizer from an owner whose work is done.
    Finalized {
        /// The owner.
        res: &'static ResourceDef,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// uid.
        uid: String,
        /// `foregroundDeletion` or `orphan`.
        finalizer: &'static str,
    },
}

/// The collector's graph.
#[derive(Debug, Default)]
pub struct Graph {
    nodes: HashMap<String, Vertex>,
    dependents: HashMap<String, BTreeSet<String>>,
    keys: HashMap<(usize, String, String), String>,
}

fn res_id(res: &'static ResourceDef) -> usize {
    std::ptr::from_ref(res) as usize
}

impl Graph {
    /// Number of objects known.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Nothing known.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Every uid known.
    pub fn uids(&self) -> Vec<String> {
        self.nodes.keys().cloned().collect()
    }

    /// A node by uid.
    pub fn node(&self, uid: &str) -> Option<&Vertex> {
        self.nodes.get(uid)
    }

    /// Records an object; returns the uids to look at (it, its owners, and
    /// its dependents if its deletion state changed).
    pub fn upsert(&mut self, obj: &Object) -> Vec<String> {
        let Some((uid, node)) = Vertex::of(obj) else { return Vec::new() };
        self.put(uid, node)
    }

    /// Takes in the vertex `node` of the object `uid`; what to look at.
    fn put(&mut self, uid: String, node: Vertex) -> Vec<String> {
        let key = (res_id(node.res), node.namespace.clone(), node.name.clone());
        if let Some(old_uid) = self.keys.get(&key).cloned()
            && old_uid != uid
        {
            self.remove_uid(&old_uid);
        }
        let old = self.nodes.get(&uid).cloned();
        if let Some(o) = &old {
            for r in &o.owners {
                if let Some(set) = self.dependents.get_mut(&r.uid) {
                    set.remove(&uid);
                }
            }
        }
        for r in &node.owners {
            self.dependents.entry(r.uid.clone()).or_default().insert(uid.clone());
        }
        let mut wake = vec![uid.clone()];
        wake.extend(node.owners.iter().map(|o| o.uid.clone()));
        if old
            .as_ref()
            .is_none_or(|o| o.deleting != node.deleting || o.foreground != node.foreground || o.orphan != node.orphan)
        {
            wake.extend(self.dependents.get(&uid).into_iter().flatten().cloned());
        }
        self.keys.insert(key, uid.clone());
        self.nodes.insert(uid, node);
        wake
    }

    /// Forgets a deleted object; returns the uids to look at (its owners and dependents).
    pub fn remove(&mut self, obj: &Object) -> Vec<String> {
        let Some((uid, _)) = Vertex::of(obj) else { return Vec::new() };
        self.remove_uid(&uid)
    }

    fn remove_uid(&mut self, uid: &str) -> Vec<String> {
        let Some(node) = self.nodes.remove(uid) else { return Vec::new() };
        self.keys.remove(&(res_id(node.res), node.namespace.clone(), node.name.clone()));
        let mut wake: Vec<String> = Vec::new();
        for r in &node.owners {
            if let Some(set) = self.dependents.get_mut(&r.uid) {
                set.remove(uid);
                if set.is_empty() {
                    self.dependents.remove(&r.uid);
                }
            }
            wake.push(r.uid.clone());
        }
        wake.extend(self.dependents.get(uid).into_iter().flatten().cloned());
        wake
    }

    /// Replaces what is known of `res` with a relist; returns every uid to look at.
    pub fn relist(&mut self, res: &'static ResourceDef, objects: &[Object]) -> Vec<String> {
        let stale: Vec<String> =
            self.nodes.iter().filter(|(_, n)| std::ptr::eq(n.res, res)).map(|(u, _)| u.clone()).collect();
        let mut wake = Vec::new();
        for uid in stale {
            wake.extend(self.remove_uid(&uid));
        }
        // Each parse dropped once its vertex is made: a relist is every
        // object of the resource, and parses kept with them all would be
        // ten times their bytes at once (every Node of a fleet).
        for o in objects {
            if let Ok(v) = o.parse() {
                let (uid, node) = Vertex::of_parsed(o, &v);
                drop(v);
                wake.extend(self.put(uid, node));
            }
        }
        wake
    }

    /// What to do about the object `uid` (as a dependent and as an owner).
    pub fn sync(&self, uid: &str) -> Vec<GcAction> {
        let mut out = Vec::new();
        let Some(node) = self.nodes.get(uid) else { return out };
        // As an owner being deleted with a collector finalizer.
        let dependents: Vec<(&String, &Vertex)> =
            self.dependents.get(uid).into_iter().flatten().filter_map(|d| self.nodes.get(d).map(|n| (d, n))).collect();
        if node.deleting && node.orphan {
            for (duid, d) in &dependents {
                out.push(GcAction::Orphan {
                    res: d.res,
                    namespace: d.namespace.clone(),
                    name: d.name.clone(),
                    uid: (*duid).clone(),
                    owner_uid: uid.to_string(),
                });
            }
            if dependents.is_empty() {
                out.push(finalized(node, uid, ORPHAN_FINALIZER));
            }
        } else if node.deleting && node.foreground {
            let mut blocking = 0;
            for (duid, d) in &dependents {
                let blocks = d.owners.iter().any(|o| o.uid == uid && o.block);
                blocking += usize::from(blocks);
                if !d.deleting || (blocks && !d.foreground && has_dependents(self, duid)) {
                    out.push(GcAction::DeleteForeground {
                        res: d.res,
                        namespace: d.namespace.clone(),
                        name: d.name.clone(),
                        uid: (*duid).clone(),
                    });
                }
            }
            if blocking == 0 {
                out.push(finalized(node, uid, FOREGROUND_FINALIZER));
            }
        }
        // As a dependent: owners that are not there (or are going in the foreground).
        let collecting_itself = node.deleting && node.foreground;
        if !node.owners.is_empty() && !collecting_itself {
            let gone = |o: &OwnerRef| match self.nodes.get(&o.uid) {
                None => true,
                Some(owner) => owner.deleting && owner.foreground,
            };
            if node.owners.iter().any(gone) {
                out.push(GcAction::Collect {
                    res: node.res,
                    namespace: node.namespace.clone(),
                    name: node.name.clone(),
                    uid: uid.to_string(),
                    owners: node.owners.clone(),
                });
            }
        }
        out
    }
}

fn has_dependents(g: &Graph, uid: &str) -> bool {
    g.dependents.get(uid).is_some_and(|s| !s.is_empty())
}

fn finalized(node: &Vertex, uid: &str, finalizer: &'static str) -> GcAction {
    GcAction::Finalized {
        res: node.res,
        namespace: node.namespace.clone(),
        name: node.name.clone(),
        uid: uid.to_string(),
        finalizer,
    }
}

/// The owner references of `obj` without those to `gone` (uids), as a merge
/// patch of `metadata.ownerReferences`.
pub fn without_owners(obj: &Value, gone: &[&str]) -> Value {
    let kept: Vec<Value> = obj
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|r| !gone.contains(&r.get("uid").and_then(Value::as_str).unwrap_or_default()))
        .cloned()
        .collect();
    json!({"metadata": {"ownerReferences": if kept.is_empty() { Value::Null } else { Value::Array(kept) }}})
}
