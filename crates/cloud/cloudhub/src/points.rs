//! Success points: for each (node, object) the resourceVersion the node has
//! acknowledged. They decide what a (re)connecting node still needs, so a
//! node offline for a day gets only what changed.
//!
//! Kept in memory as small as a pair can be — the uid (16 bytes for the
//! UUIDs Kubernetes assigns) and the version (8 bytes), in a per-node hash
//! table — and persisted behind the hot path as KubeEdge's `ObjectSync`
//! (namespaced objects) and `ClusterObjectSync` (cluster-scoped objects),
//! named `{node}.{uid}`, so they are visible with `kubectl get objectsyncs`.
//! They are written in batches ([`Store::write_points`]: one store call per
//! flush, no read per point), which on SQLite keeps each in about 70 bytes.
//! Persisting lags an ACK by at most one flush; a point lost in a crash only
//! makes the object be sent once more, which the edge applies idempotently.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use edgehive_model::Text;
use edgehive_store::objectsync::{PointWrite, SyncRecord, uuid_bits};
use edgehive_store::resources::{CLUSTER_OBJECT_SYNCS, OBJECT_SYNCS};
use edgehive_store::{ListOptions, Store, StoreError};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::pool::PointRef;

/// An object uid as a hash key: a UUID as its 128 bits, anything else as text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum UidKey {
    /// A UUID (what Kubernetes assigns), its 128 bits as two halves (a
    /// `u128` would align the entry to 16 bytes and make it 48).
    Uuid(u64, u64),
    /// Any other uid.
    Other(Text),
}

impl UidKey {
    /// The key of a uid string.
    pub fn of(uid: &str) -> UidKey {
        uuid_bits(uid).map_or_else(|| UidKey::Other(Text::copy_from(uid)), |v| UidKey::Uuid((v >> 64) as u64, v as u64))
    }
}

/// One acknowledged object, as written to the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Point {
    /// resourceVersion the node has.
    pub rv: u64,
    /// Namespace (empty: cluster-scoped).
    pub namespace: Text,
    /// Object name.
    pub name: Text,
    /// Object `apiVersion`.
    pub api_version: Text,
    /// Object `kind`.
    pub kind: Text,
}

/// One node's points: acknowledged resourceVersion by object uid.
pub type NodePoints = HashMap<UidKey, u64>;

#[derive(Debug, Clone)]
enum Change {
    Set(Point),
    Remove(Point),
}

/// All success points, and their write-behind to the store.
#[derive(Debug)]
pub struct SuccessPoints {
    store: Store,
    nodes: RwLock<HashMap<Text, Arc<Mutex<NodePoints>>>>,
    dirty: Mutex<HashMap<(Text, Text), Change>>,
    wake: Notify,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl SuccessPoints {
    /// Loads every stored point. A stored object that does not read as a
    /// point is reported with its key and skipped.
    pub async fn load(store: Store) -> Result<Arc<SuccessPoints>, StoreError> {
        let points = SuccessPoints { store, nodes: RwLock::default(), dirty: Mutex::default(), wake: Notify::new() };
        let mut loaded = 0usize;
        for res in [&OBJECT_SYNCS, &CLUSTER_OBJECT_SYNCS] {
            let mut opts = ListOptions { limit: 1000, ..ListOptions::default() };
            loop {
                let page = points.store.list(res, &opts).await?;
                for obj in &page.items {
                    match obj.value().ok().and_then(|v| SyncRecord::parse(res, v)) {
                        Some(r) => {
                            lock(&points.node(&r.node)).insert(UidKey::of(&r.uid), r.rv);
                            loaded += 1;
                        }
                        None => tracing::warn!(key = obj.key(), "skipping a success point that does not parse"),
                    }
                }
                match page.continue_token {
                    Some(t) => opts.continue_token = Some(t),
                    None => break,
                }
            }
        }
        tracing::info!(points = loaded, "loaded success points");
        Ok(Arc::new(points))
    }

    /// The points of `node` (created empty if it has none).
    pub fn node(&self, node: &str) -> Arc<Mutex<NodePoints>> {
        if let Some(p) = self.nodes.read().unwrap_or_else(|p| p.into_inner()).get(node) {
            return p.clone();
        }
        self.nodes.write().unwrap_or_else(|p| p.into_inner()).entry(Text::copy_from(node)).or_default().clone()
    }

    /// The acknowledged version of an object on a node.
    pub fn get(&self, node: &str, uid: &str) -> Option<u64> {
        let n = self.nodes.read().unwrap_or_else(|p| p.into_inner()).get(node).cloned()?;
        lock(&n).get(&UidKey::of(uid)).copied()
    }

    /// Records that `node` has `point` at `rv` (an ACK of an insert or update).
    pub fn record(&self, node: &Text, point: &PointRef, rv: u64) {
        let p = Point {
            rv,
            namespace: point.namespace.clone(),
            name: point.name.clone(),
            api_version: point.api_version.clone(),
            kind: point.kind.clone(),
        };
        {
            let n = self.node(node);
            let mut n = lock(&n);
            let key = UidKey::of(&point.uid);
            if n.get(&key).is_some_and(|old| *old >= rv) {
                return;
            }
            n.insert(key, rv);
        }
        self.mark(node, &point.uid, Change::Set(p));
    }

    /// Forgets an object on `node` (an ACK of its delete).
    pub fn remove(&self, node: &Text, point: &PointRef) {
        let removed = lock(&self.node(node)).remove(&UidKey::of(&point.uid));
        if removed.is_some() {
            let p = Point {
                rv: 0,
                namespace: point.namespace.clone(),
                name: point.name.clone(),
                api_version: point.api_version.clone(),
                kind: point.kind.clone(),
            };
            self.mark(node, &point.uid, Change::Remove(p));
        }
    }

    /// What the node's store holds says its points are wrong: forgets, in
    /// memory, every point of `node` whose object `held` does not list at
    /// that version or newer (a store restored, emptied or rebuilt; a point
    /// whose removal a crash kept from the store). Those objects are then
    /// sent again when the node needs them. Returns how many went. The
    /// stored copies stay until the node acknowledges or deletes those
    /// objects again; every new session starts with an inventory, so they
    /// are corrected again after a restart.
    pub fn retain_held(&self, node: &str, held: &HashMap<UidKey, u64>) -> usize {
        let n = self.node(node);
        let mut n = lock(&n);
        let before = n.len();
        n.retain(|uid, rv| held.get(uid).is_some_and(|have| have >= rv));
        before - n.len()
    }

    /// Forgets every point of a deleted node, and its unwritten changes.
    /// The stored ones are SyncController's to remove: it keeps the full
    /// records, and removes the points of every node that no longer exists.
    pub fn remove_node(&self, node: &str) {
        self.nodes.write().unwrap_or_else(|p| p.into_inner()).remove(node);
        lock(&self.dirty).retain(|(n, _), _| n.as_str() != node);
    }

    /// Pairs known (all nodes).
    pub fn len(&self) -> usize {
        self.nodes.read().unwrap_or_else(|p| p.into_inner()).values().map(|n| lock(n).len()).sum()
    }

    /// True when no node has a point.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Changes not yet written to the store.
    pub fn unflushed(&self) -> usize {
        lock(&self.dirty).len()
    }

    fn mark(&self, node: &Text, uid: &Text, change: Change) {
        lock(&self.dirty).insert((node.clone(), uid.clone()), change);
        self.wake.notify_one();
    }

    /// Writes changes to the store until `cancel`, then flushes what is left.
    /// Changes to one pair are coalesced (only the latest is written), at
    /// most `max_rate` writes per second, so that persisting success points
    /// never takes the CPU that delivery needs: under a higher ACK rate more
    /// changes coalesce and the store lags a little further behind memory
    /// (a crash then costs more re-sends, never data). Failed writes are
    /// retried.
    pub async fn run_writer(self: Arc<Self>, cancel: CancellationToken, interval: Duration, max_rate: usize) {
        let per_round = ((max_rate as f64 * interval.as_secs_f64()).ceil() as usize).max(1);
        loop {
            if self.unflushed() == 0 {
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    _ = self.wake.notified() => {}
                }
            }
            // Let a burst of ACKs gather; pace the writes.
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep(interval) => {}
            }
            if !self.flush_some(per_round).await {
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
        self.flush().await;
    }

    /// Writes every pending change; true if all were written.
    pub async fn flush(&self) -> bool {
        self.flush_some(usize::MAX).await
    }

    /// Writes up to `limit` pending changes in one batch (one store call, no
    /// read per point); true if all of those were written.
    async fn flush_some(&self, limit: usize) -> bool {
        let batch: Vec<_> = {
            let mut dirty = lock(&self.dirty);
            if limit >= dirty.len() {
                dirty.drain().collect()
            } else {
                let keys: Vec<_> = dirty.keys().take(limit).cloned().collect();
                keys.into_iter().filter_map(|k| dirty.remove_entry(&k)).collect()
            }
        };
        if batch.is_empty() {
            return true;
        }
        let writes: Vec<PointWrite> = batch.iter().map(|((node, uid), change)| change.to_write(node, uid)).collect();
        let results = self.store.write_points(&writes).await;
        let mut failed = Vec::new();
        for (r, item) in results.into_iter().zip(batch) {
            if let Err(e) = r {
                tracing::warn!(node = %item.0.0, uid = %item.0.1, error = %e, "persist success point");
                failed.push(item);
            }
        }
        let ok = failed.is_empty();
        if !ok {
            let mut dirty = lock(&self.dirty);
            for (k, c) in failed {
                // A newer change made meanwhile wins.
                dirty.entry(k).or_insert(c);
            }
        }
        ok
    }
}

impl Change {
    fn to_write(&self, node: &str, uid: &str) -> PointWrite {
        match self {
            Change::Set(p) => PointWrite::Set(SyncRecord {
                node: node.to_owned(),
                uid: uid.to_owned(),
                rv: p.rv,
                api_version: p.api_version.to_string(),
                kind: p.kind.to_string(),
                namespace: p.namespace.to_string(),
                name: p.name.to_string(),
            }),
            Change::Remove(p) => {
                PointWrite::Remove { node: node.to_owned(), uid: uid.to_owned(), namespace: p.namespace.to_string() }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_become_128_bit_keys_and_others_stay_text() {
        let k = UidKey::of("8d3e4f5a-1234-5678-9abc-def012345678");
        assert_eq!(k, UidKey::Uuid(0x8d3e_4f5a_1234_5678, 0x9abc_def0_1234_5678));
        assert_eq!(UidKey::of("8D3E4F5A-1234-5678-9ABC-DEF012345678"), k);
        assert_eq!(UidKey::of("not-a-uuid"), UidKey::Other(Text::from("not-a-uuid")));
        assert_eq!(
            UidKey::of("8d3e4f5a-1234-5678-9abc-def01234567g"),
            UidKey::Other(Text::from("8d3e4f5a-1234-5678-9abc-def01234567g"))
        );
        assert_eq!(std::mem::size_of::<(UidKey, u64)>(), 32);
    }
}
