//! KubeEdge's success points as stored objects: `ObjectSync` (for a
//! namespaced object, in its namespace) and `ClusterObjectSync` (for a
//! cluster-scoped one), named `{node}.{objectUID}`, with
//! `status.objectResourceVersion` the version the node acknowledged
//! (docs/protocol.md §4).
//!
//! CloudHub writes them in batches with [`Store::write_points`]: each write
//! is a read-modify-write done by the backend itself (on SQLite inside the
//! writer's transaction), so there is no read round trip per point. A point
//! CloudHub creates has exactly the fields of [`StoredSync`] and a uid
//! derived from its namespace and name ([`derived_uid`]); the SQLite backend
//! keeps such objects in a compact form (`backend/points.rs`) and gives them
//! back byte for byte as they were written.

use serde_json::{Value, json};

use crate::backend::Merged;
use crate::backend::points::PointFields;
use crate::error::Result;
pub use crate::pointform::{StoredSync, StoredSyncMeta, StoredSyncSpec, StoredSyncStatus, derived_uid};
use crate::resources::{CLUSTER_OBJECT_SYNCS, OBJECT_SYNCS, ResourceDef};
use crate::store::{MergeItem, Store};
pub use crate::uuid::{format_uuid, uuid_bits};

/// One success point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncRecord {
    /// The node.
    pub node: String,
    /// The object's uid.
    pub uid: String,
    /// The acknowledged resourceVersion.
    pub rv: u64,
    /// The object's `apiVersion`.
    pub api_version: String,
    /// The object's `kind`.
    pub kind: String,
    /// The object's namespace (empty: cluster-scoped).
    pub namespace: String,
    /// The object's name.
    pub name: String,
}

/// The stored object's name: `{node}.{uid}`.
pub fn sync_name(node: &str, uid: &str) -> String {
    format!("{node}.{uid}")
}

/// Where a point for an object in `namespace` is stored.
pub fn sync_resource(namespace: &str) -> &'static ResourceDef {
    if namespace.is_empty() { &CLUSTER_OBJECT_SYNCS } else { &OBJECT_SYNCS }
}

impl SyncRecord {
    /// Reads a stored ObjectSync / ClusterObjectSync; `None` if it is not one
    /// (the caller reports it with its key). The node is everything before
    /// the last `.` of the name, as KubeEdge reads it.
    pub fn parse(res: &ResourceDef, v: &Value) -> Option<SyncRecord> {
        let name = v.pointer("/metadata/name")?.as_str()?;
        let (node, uid) = name.rsplit_once('.')?;
        if node.is_empty() || uid.is_empty() {
            return None;
        }
        let s = |p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_owned);
        let rv = v.pointer("/status/objectResourceVersion").and_then(Value::as_str).unwrap_or("0").parse().ok()?;
        let namespace = if res.namespaced { s("/metadata/namespace")? } else { String::new() };
        Some(SyncRecord {
            node: node.to_owned(),
            uid: uid.to_owned(),
            rv,
            api_version: s("/spec/objectAPIVersion").unwrap_or_default(),
            kind: s("/spec/objectKind").unwrap_or_default(),
            namespace,
            name: s("/spec/objectName")?,
        })
    }

    /// The object CloudHub stores for a new point, created now.
    pub fn to_stored(&self) -> StoredSync {
        let fields = PointFields {
            created: time::OffsetDateTime::now_utc().unix_timestamp(),
            generation: 1,
            rv: self.rv,
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
            name: self.name.clone(),
        };
        StoredSync::new(self.namespace.is_empty(), &self.namespace, &sync_name(&self.node, &self.uid), &fields)
    }
}

/// A change to one success point, for [`Store::write_points`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PointWrite {
    /// The node has the object at `rv`: create the point, or move its
    /// `status.objectResourceVersion` (other fields stay as they are).
    Set(SyncRecord),
    /// The node no longer has the object: remove the point if it exists.
    Remove {
        /// The node.
        node: String,
        /// The object's uid.
        uid: String,
        /// The object's namespace (empty: cluster-scoped).
        namespace: String,
    },
}

impl PointWrite {
    fn item(&self) -> MergeItem {
        match self {
            PointWrite::Set(r) => {
                let name = sync_name(&r.node, &r.uid);
                let rv = r.rv.to_string();
                let record = r.clone();
                let key = sync_resource(&r.namespace).key(&r.namespace, &name);
                MergeItem {
                    res: sync_resource(&r.namespace),
                    namespace: r.namespace.clone(),
                    name,
                    f: Box::new(move |cur| set_rv(&key, cur, &rv, &record)),
                }
            }
            PointWrite::Remove { node, uid, namespace } => MergeItem {
                res: sync_resource(namespace),
                namespace: namespace.clone(),
                name: sync_name(node, uid),
                f: Box::new(|cur| if cur.is_some() { Merged::Delete } else { Merged::Keep }),
            },
        }
    }
}

/// The stored point `cur` (if any) with `status.objectResourceVersion` = `rv`.
fn set_rv(key: &str, cur: Option<&[u8]>, rv: &str, record: &SyncRecord) -> Merged {
    let Some(raw) = cur else { return Merged::Put(record.to_stored().encode().into()) };
    if let Ok(mut s) = serde_json::from_slice::<StoredSync>(raw) {
        if s.status.object_resource_version == rv {
            return Merged::Keep;
        }
        s.status.object_resource_version = rv.to_owned();
        return Merged::Put(s.encode().into());
    }
    // Changed through the API (labels, say): keep what is there.
    if let Ok(mut v) = serde_json::from_slice::<Value>(raw)
        && v.get("metadata").is_some_and(Value::is_object)
    {
        if v.pointer("/status/objectResourceVersion").and_then(Value::as_str) == Some(rv) {
            return Merged::Keep;
        }
        if !v.get("status").is_some_and(Value::is_object) {
            v["status"] = json!({});
        }
        v["status"]["objectResourceVersion"] = json!(rv);
        if let Ok(raw) = crate::object::encode_for_storage(&v) {
            return Merged::Put(raw);
        }
    }
    tracing::warn!(key, "replacing a stored success point that does not parse");
    Merged::Put(record.to_stored().encode().into())
}

impl Store {
    /// Writes success points in one batch and returns, in order, whether
    /// each was written. Each write is a read-modify-write done by the
    /// backend (on SQLite all of them in one transaction of the writer, on
    /// etcd compare-and-swap per key), so no point costs a read round trip;
    /// each change still gets its own revision and watch event.
    pub async fn write_points(&self, writes: &[PointWrite]) -> Vec<Result<()>> {
        self.merge_many(writes.iter().map(PointWrite::item).collect())
            .await
            .into_iter()
            .map(|r| r.map(|_| ()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pointform::compact_fields;

    fn record() -> SyncRecord {
        SyncRecord {
            node: "edge.example.com".into(),
            uid: "8d3e4f5a-1234-5678-9abc-def012345678".into(),
            rv: 42,
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: "default".into(),
            name: "web".into(),
        }
    }

    #[test]
    fn round_trip_and_node_names_with_dots() {
        let r = record();
        let v: Value = serde_json::from_slice(&r.to_stored().encode()).unwrap();
        assert_eq!(v["metadata"]["name"], "edge.example.com.8d3e4f5a-1234-5678-9abc-def012345678");
        assert_eq!(v["apiVersion"], "reliablesyncs.kubeedge.io/v1alpha1");
        assert_eq!(SyncRecord::parse(&OBJECT_SYNCS, &v), Some(r.clone()));
        let cluster = SyncRecord { namespace: String::new(), kind: "Node".into(), ..r };
        let v: Value = serde_json::from_slice(&cluster.to_stored().encode()).unwrap();
        assert_eq!(v["kind"], "ClusterObjectSync");
        assert!(v["metadata"].get("namespace").is_none());
        assert_eq!(SyncRecord::parse(&CLUSTER_OBJECT_SYNCS, &v), Some(cluster));
        assert_eq!(SyncRecord::parse(&OBJECT_SYNCS, &json!({"metadata": {"name": "nodot"}})), None);
        let bad_rv = json!({"metadata": {"name": "a.b", "namespace": "d"}, "spec": {"objectName": "x"}, "status": {"objectResourceVersion": "x1"}});
        assert_eq!(SyncRecord::parse(&OBJECT_SYNCS, &bad_rv), None);
    }

    #[test]
    fn stored_points_are_what_the_store_encodes() {
        // The same object made as a Value and encoded by the store has the
        // same bytes, so points written either way can be kept compact.
        let s = record().to_stored();
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(&crate::object::encode_for_storage(&v).unwrap()[..], &s.encode()[..]);
        let raw = s.encode();
        let f = compact_fields(false, "default", &s.metadata.name, &raw).expect("compact");
        assert_eq!((f.rv, f.generation, f.kind.as_str(), f.name.as_str()), (42, 1, "Pod", "web"));
    }

    #[test]
    fn only_exact_points_are_compact() {
        let s = record().to_stored();
        let name = s.metadata.name.clone();
        let compact = |v: &Value| compact_fields(false, "default", &name, &serde_json::to_vec(v).unwrap());
        let base = serde_json::to_value(&s).unwrap();
        assert!(compact(&base).is_some());
        let mut labelled = base.clone();
        labelled["metadata"]["labels"] = json!({"a": "b"});
        assert!(compact(&labelled).is_none(), "other fields");
        let mut other_uid = base.clone();
        other_uid["metadata"]["uid"] = json!("11111111-2222-3333-4444-555555555555");
        assert!(compact(&other_uid).is_none(), "a uid not derived from the name");
        let mut fraction = base.clone();
        fraction["metadata"]["creationTimestamp"] = json!("2026-01-02T03:04:05.5Z");
        assert!(compact(&fraction).is_none(), "a timestamp that does not round-trip");
        let mut slash = base.clone();
        slash["spec"]["objectKind"] = json!("a/b");
        assert!(compact(&slash).is_none());
        let mut rv = base.clone();
        rv["status"]["objectResourceVersion"] = json!("07");
        assert!(compact(&rv).is_none(), "a version that is not canonical");
        assert!(compact_fields(false, "other", &name, &serde_json::to_vec(&base).unwrap()).is_none());
    }

    #[test]
    fn merging_moves_the_version_and_keeps_the_rest() {
        let r = record();
        let Merged::Put(first) = set_rv("k", None, "42", &r) else { panic!("a new point is written") };
        assert!(matches!(set_rv("k", Some(&first), "42", &r), Merged::Keep));
        let Merged::Put(moved) = set_rv("k", Some(&first), "43", &r) else { panic!("moved") };
        let (a, b): (StoredSync, StoredSync) =
            (serde_json::from_slice(&first).unwrap(), serde_json::from_slice(&moved).unwrap());
        assert_eq!(b.status.object_resource_version, "43");
        assert_eq!((a.metadata, a.spec), (b.metadata, b.spec));
        // One changed through the API keeps its labels.
        let mut v: Value = serde_json::from_slice(&first).unwrap();
        v["metadata"]["labels"] = json!({"a": "b"});
        let raw = serde_json::to_vec(&v).unwrap();
        let Merged::Put(kept) = set_rv("k", Some(&raw), "44", &r) else { panic!("moved") };
        let v: Value = serde_json::from_slice(&kept).unwrap();
        assert_eq!(
            (v["metadata"]["labels"]["a"].as_str(), v["status"]["objectResourceVersion"].as_str()),
            (Some("b"), Some("44"))
        );
        // A damaged one is replaced.
        assert!(matches!(set_rv("k", Some(b"{not json"), "45", &r), Merged::Put(_)));
    }

    #[test]
    fn uids() {
        let u = derived_uid("default", "edge-1.abc");
        assert_eq!(u, derived_uid("default", "edge-1.abc"));
        assert_ne!(u, derived_uid("", "edge-1.abc"));
        assert_eq!(&u[14..15], "8");
        assert!(matches!(&u[19..20], "8" | "9" | "a" | "b"));
        let bits = uuid_bits(&u).unwrap();
        assert_eq!(format_uuid(bits), u);
        assert_eq!(
            uuid_bits("8D3E4F5A-1234-5678-9ABC-DEF012345678"),
            uuid_bits("8d3e4f5a-1234-5678-9abc-def012345678")
        );
        assert_eq!(uuid_bits("8d3e4f5a-1234-5678-9abc-def01234567g"), None);
        assert_eq!(uuid_bits("not-a-uuid"), None);
    }
}
