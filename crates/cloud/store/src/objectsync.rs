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

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::backend::Merged;
use crate::error::Result;
use crate::resources::{CLUSTER_OBJECT_SYNCS, OBJECT_SYNCS, ResourceDef};
use crate::store::{MergeItem, Store, parse_rfc3339, rfc3339};

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

/// A point as CloudHub stores it: these fields and no others, in the order
/// the store encodes objects (`apiVersion`, `kind`, `metadata` first, keys
/// sorted), so that its JSON is the same whichever way it was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredSync {
    /// `reliablesyncs.kubeedge.io/v1alpha1`.
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// `ObjectSync` or `ClusterObjectSync`.
    pub kind: String,
    /// Identity.
    pub metadata: StoredSyncMeta,
    /// The object.
    pub spec: StoredSyncSpec,
    /// The acknowledged version.
    pub status: StoredSyncStatus,
}

/// [`StoredSync`]'s metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredSyncMeta {
    /// RFC 3339, seconds.
    #[serde(rename = "creationTimestamp")]
    pub creation_timestamp: String,
    /// `metadata.generation`.
    pub generation: u64,
    /// `{node}.{uid}`.
    pub name: String,
    /// The object's namespace (absent for a ClusterObjectSync).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// [`derived_uid`] of namespace and name.
    pub uid: String,
}

/// [`StoredSync`]'s spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredSyncSpec {
    /// The object's `apiVersion`.
    #[serde(rename = "objectAPIVersion")]
    pub object_api_version: String,
    /// The object's `kind`.
    #[serde(rename = "objectKind")]
    pub object_kind: String,
    /// The object's name.
    #[serde(rename = "objectName")]
    pub object_name: String,
}

/// [`StoredSync`]'s status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredSyncStatus {
    /// The acknowledged resourceVersion, in decimal.
    #[serde(rename = "objectResourceVersion")]
    pub object_resource_version: String,
}

/// What a stored point holds besides its key (namespace and name): what
/// the compact form keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PointFields {
    /// `creationTimestamp`, Unix seconds.
    pub(crate) created: i64,
    pub(crate) generation: u64,
    /// `status.objectResourceVersion`.
    pub(crate) rv: u64,
    pub(crate) api_version: String,
    pub(crate) kind: String,
    /// `spec.objectName`.
    pub(crate) name: String,
}

impl StoredSync {
    /// The object for a point stored under `namespace`/`name`.
    pub(crate) fn new(cluster: bool, namespace: &str, name: &str, f: &PointFields) -> StoredSync {
        let res = if cluster { &CLUSTER_OBJECT_SYNCS } else { &OBJECT_SYNCS };
        let created = time::OffsetDateTime::from_unix_timestamp(f.created).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
        StoredSync {
            api_version: res.api_version(),
            kind: res.kind.to_owned(),
            metadata: StoredSyncMeta {
                creation_timestamp: rfc3339(created),
                generation: f.generation,
                name: name.to_owned(),
                namespace: (!cluster).then(|| namespace.to_owned()),
                uid: derived_uid(namespace, name),
            },
            spec: StoredSyncSpec {
                object_api_version: f.api_version.clone(),
                object_kind: f.kind.clone(),
                object_name: f.name.clone(),
            },
            status: StoredSyncStatus { object_resource_version: f.rv.to_string() },
        }
    }

    /// Its stored bytes.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// The fields of `raw`, the stored bytes of the point `namespace`/`name`, if
/// [`StoredSync::new`] from them gives back exactly `raw`; `None` for
/// anything else (other fields, another uid, a timestamp with fractions, a
/// kind with a `/`), which is then stored as it is.
pub(crate) fn compact_fields(cluster: bool, namespace: &str, name: &str, raw: &[u8]) -> Option<PointFields> {
    let s: StoredSync = serde_json::from_slice(raw).ok()?;
    let created = parse_rfc3339(&s.metadata.creation_timestamp)?.unix_timestamp();
    let f = PointFields {
        created,
        generation: s.metadata.generation,
        rv: s.status.object_resource_version.parse().ok()?,
        api_version: s.spec.object_api_version,
        kind: s.spec.object_kind,
        name: s.spec.object_name,
    };
    if f.kind.contains('/') {
        return None;
    }
    (StoredSync::new(cluster, namespace, name, &f).encode() == raw).then_some(f)
}

/// The uid of the point `namespace`/`name` (namespace empty for a
/// ClusterObjectSync): a UUID made from a 128-bit FNV-1a hash of both
/// (version nibble 8, RFC 9562's custom version), so that it need not be
/// stored. A point removed and made again gets the same uid.
pub fn derived_uid(namespace: &str, name: &str) -> String {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let mut h = OFFSET;
    for b in namespace.bytes().chain(std::iter::once(b'/')).chain(name.bytes()) {
        h = (h ^ u128::from(b)).wrapping_mul(PRIME);
    }
    let h = (h & !(0xf << 76)) | (0x8 << 76);
    let h = (h & !(0x3 << 62)) | (0x2 << 62);
    format_uuid(h)
}

/// A UUID's 128 bits from its `8-4-4-4-12` hex form (either case).
pub fn uuid_bits(s: &str) -> Option<u128> {
    let b = s.as_bytes();
    if b.len() != 36 || b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
        return None;
    }
    let mut v: u128 = 0;
    for (i, c) in b.iter().enumerate() {
        if matches!(i, 8 | 13 | 18 | 23) {
            continue;
        }
        v = (v << 4) | u128::from((*c as char).to_digit(16)?);
    }
    Some(v)
}

/// A UUID in its lowercase `8-4-4-4-12` form.
pub fn format_uuid(v: u128) -> String {
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        v >> 96,
        (v >> 80) & 0xffff,
        (v >> 64) & 0xffff,
        (v >> 48) & 0xffff,
        v & 0xffff_ffff_ffff
    )
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
