//! Node Leases whose Node is gone: deleted, as Kubernetes' garbage
//! collector deletes a dependent whose owners are all absent.
//!
//! A Lease in `kube-node-lease` names its Node as its owner (kubelet's
//! ownerReference, and the one this controller writes). The owner is
//! absent when no Node of the reference's name exists with the
//! reference's uid — deleted, or replaced by a new Node of the same name
//! (the collector's `isDangling`: a live read of the owner, its uid
//! compared). A Lease with no owner, or with an owner that is not a Node,
//! is left alone: its owners are not this controller's to judge.
//!
//! Three moments find such Leases: a Node's delete (its Lease of the same
//! name), every fresh list of the Nodes (a delete the controller never saw
//! as one: it happened while it was not watching), and an edge's Lease
//! create that lands after its Node went (`upstream::no_orphan_lease`).
//! Leases are not watched for this: their renewals are most of a fleet's
//! writes.

use std::collections::HashSet;

use edgehive_store::resources::{LEASES, NODES};
use edgehive_store::{DeleteOptions, ListOptions, Object, Store, StoreError};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::heartbeat::NODE_LEASES;

/// Leases read at a time by a sweep.
const SWEEP_PAGE: usize = 1000;

/// What the collector is handed.
#[derive(Debug)]
pub(crate) enum Job {
    /// A Node was deleted: its Lease goes if nothing else owns it.
    Deleted(Object),
    /// The Nodes were listed afresh: these uids were there. Every Node
    /// Lease whose owners are not among them is checked.
    Relisted(HashSet<String>),
}

/// The Nodes a Lease names as its owners (name, uid), when it has owners
/// and all are Nodes; `None` otherwise.
pub(crate) fn node_owners(lease: &Value) -> Option<Vec<(String, String)>> {
    let refs = lease.pointer("/metadata/ownerReferences")?.as_array()?;
    if refs.is_empty() {
        return None;
    }
    refs.iter()
        .map(|r| {
            let node = r["kind"] == "Node" && r["apiVersion"].as_str().is_none_or(|a| a == "v1");
            let (name, uid) = (r["name"].as_str()?, r["uid"].as_str()?);
            node.then(|| (name.to_owned(), uid.to_owned()))
        })
        .collect()
}

/// What became of a Lease checked for a living owner.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// An owner lives, or it has no Node owners: it stays.
    Kept,
    /// Every owner is gone: deleted (or it went meanwhile).
    Deleted,
}

/// Deletes `lease` if it names Nodes as its owners and none of them exists
/// now (a live read of each). The delete is conditional on the Lease's
/// uid: a new Lease of the same name is not touched.
pub(crate) async fn collect_if_orphan(store: &Store, lease: &Object) -> Result<Verdict, StoreError> {
    let Some(owners) = lease.value().ok().and_then(node_owners) else { return Ok(Verdict::Kept) };
    for (name, uid) in &owners {
        match store.get(&NODES, "", name).await {
            Ok(node) if node.uid() == Some(uid.as_str()) => return Ok(Verdict::Kept),
            Ok(_) | Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let only_this = DeleteOptions { uid: lease.uid().map(str::to_owned), ..DeleteOptions::default() };
    match store.delete(&LEASES, lease.namespace(), lease.name(), &only_this).await {
        Ok(_) | Err(StoreError::NotFound { .. } | StoreError::Conflict { .. }) => Ok(Verdict::Deleted),
        Err(e) => Err(e),
    }
}

/// Runs the jobs in the order they come, until the sender goes. Off the
/// controller's loop: a fleet deleted at once must not hold up its
/// informers and edges.
pub(crate) async fn collect(store: Store, mut jobs: mpsc::Receiver<Job>) {
    while let Some(job) = jobs.recv().await {
        match job {
            Job::Deleted(node) => {
                let name = node.name();
                match store.get(&LEASES, NODE_LEASES, name).await {
                    Ok(lease) => check(&store, &lease).await,
                    Err(StoreError::NotFound { .. }) => {}
                    Err(e) => tracing::warn!(node = %name, error = %e, "read the Lease of a deleted node"),
                }
            }
            Job::Relisted(live) => sweep(&store, &live).await,
        }
    }
}

async fn check(store: &Store, lease: &Object) {
    match collect_if_orphan(store, lease).await {
        Ok(Verdict::Deleted) => tracing::debug!(node = %lease.name(), "the Lease of a node that is gone deleted"),
        Ok(Verdict::Kept) => {}
        Err(e) => tracing::warn!(node = %lease.name(), error = %e, "collect the Lease of a node that is gone"),
    }
}

/// Every Node Lease, a page at a time; those whose owners were not in the
/// list are read against the store before they go (a Node created since
/// the list is not absent).
async fn sweep(store: &Store, live: &HashSet<String>) {
    let mut opts = ListOptions { namespace: Some(NODE_LEASES.to_owned()), limit: SWEEP_PAGE, ..Default::default() };
    let mut deleted = 0usize;
    loop {
        let page = match store.list(&LEASES, &opts).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "list Node Leases to find those whose Node is gone");
                return;
            }
        };
        for lease in &page.items {
            let Some(owners) = lease.value().ok().and_then(node_owners) else { continue };
            if owners.iter().any(|(_, uid)| live.contains(uid)) {
                continue;
            }
            match collect_if_orphan(store, lease).await {
                Ok(Verdict::Deleted) => deleted += 1,
                Ok(Verdict::Kept) => {}
                Err(e) => tracing::warn!(node = %lease.name(), error = %e, "collect the Lease of a node that is gone"),
            }
        }
        match page.continue_token {
            Some(t) => opts.continue_token = Some(t),
            None => break,
        }
    }
    if deleted > 0 {
        tracing::info!(deleted, "Leases of nodes that went while nobody watched deleted");
    }
}

#[cfg(test)]
mod tests {
    use edgehive_store::{BackendConfig, StoreConfig};
    use edgehive_testkit::fixtures::TempDir;
    use serde_json::json;

    use super::*;

    fn node(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    }

    fn lease(name: &str, owners: Value) -> Value {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": NODE_LEASES, "ownerReferences": owners},
            "spec": {"holderIdentity": name}})
    }

    fn owner(kind: &str, name: &str, uid: &str) -> Value {
        let api = if kind == "Node" { "v1" } else { "apps/v1" };
        json!({"apiVersion": api, "kind": kind, "name": name, "uid": uid})
    }

    async fn exists(store: &Store, name: &str) -> bool {
        store.get(&LEASES, NODE_LEASES, name).await.is_ok()
    }

    /// A relist finds the Leases of Nodes deleted while nobody watched,
    /// and only those: a Node created after the list is read live, and a
    /// Lease with no owner, a living owner among several, or an owner
    /// that is not a Node stays.
    #[tokio::test]
    async fn a_relist_collects_the_leases_of_nodes_deleted_unseen() {
        let dir = TempDir::new("orphans");
        let path = dir.path().join("state.db");
        let store = Store::open(StoreConfig::new(BackendConfig::Sqlite { path, fsync: false })).await.unwrap();
        let mut uids = std::collections::HashMap::new();
        for n in ["kept", "gone", "replaced", "late", "shared"] {
            let o = store.create(&NODES, node(n)).await.unwrap();
            uids.insert(n, o.uid().unwrap().to_owned());
        }
        let live: HashSet<String> = ["kept", "shared"].iter().map(|n| uids[n].clone()).collect();
        let own = |n: &str| json!([owner("Node", n, &uids[n])]);
        for n in ["kept", "gone", "replaced", "late"] {
            store.create(&LEASES, lease(n, own(n))).await.unwrap();
        }
        // Owned by two Nodes, one gone: it stays while one lives.
        store
            .create(
                &LEASES,
                lease(
                    "shared",
                    json!([owner("Node", "gone", &uids["gone"]), owner("Node", "shared", &uids["shared"])]),
                ),
            )
            .await
            .unwrap();
        store.create(&LEASES, lease("unowned", json!([]))).await.unwrap();
        store.create(&LEASES, lease("foreign", json!([owner("Deployment", "x", "u-x")]))).await.unwrap();
        store.create(&LEASES, lease("stale", json!([owner("Node", "gone", "an-older-uid")]))).await.unwrap();
        // Deleted while nobody watched; replaced by a new Node of its name.
        store.delete(&NODES, "", "gone", &DeleteOptions::default()).await.unwrap();
        store.delete(&NODES, "", "replaced", &DeleteOptions::default()).await.unwrap();
        store.create(&NODES, node("replaced")).await.unwrap();
        // "late" is not in the list (made after it) but exists.

        let (tx, rx) = mpsc::channel(4);
        let collector = tokio::spawn(collect(store.clone(), rx));
        tx.send(Job::Relisted(live)).await.unwrap();
        drop(tx);
        collector.await.unwrap();

        for gone in ["gone", "replaced", "stale"] {
            assert!(!exists(&store, gone).await, "{gone}'s Lease has no living owner");
        }
        for kept in ["kept", "late", "shared", "unowned", "foreign"] {
            assert!(exists(&store, kept).await, "{kept}'s Lease stays");
        }
        store.close().await;
    }

    #[test]
    fn owners_are_nodes_only_when_every_reference_is_a_node() {
        let o = |owners: Value| node_owners(&lease("n", owners));
        assert_eq!(o(json!([owner("Node", "n", "u")])), Some(vec![("n".to_owned(), "u".to_owned())]));
        assert_eq!(o(json!([owner("Node", "n", "u"), owner("Deployment", "d", "v")])), None);
        assert_eq!(o(json!([])), None);
        assert_eq!(o(json!([{"kind": "Node", "name": "n"}])), None, "a reference without a uid names nobody");
    }
}
