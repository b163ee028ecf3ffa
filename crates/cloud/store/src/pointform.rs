//! The JSON form of a success point as CloudHub writes it ([`StoredSync`]),
//! and the codec that lets the SQLite backend keep such points compact
//! ([`SyncCodec`], given to the backend by the store: the backend knows
//! nothing of what a success point means).

use serde::{Deserialize, Serialize};

use crate::backend::points::{PointCodec, PointFields};
use crate::object::{parse_rfc3339, rfc3339};
use crate::resources::{CLUSTER_OBJECT_SYNCS, OBJECT_SYNCS};
use crate::uuid::format_uuid;

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

/// [`StoredSync`] as the backend's codec for success points.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SyncCodec;

impl PointCodec for SyncCodec {
    fn compact(&self, cluster: bool, namespace: &str, name: &str, raw: &[u8]) -> Option<PointFields> {
        compact_fields(cluster, namespace, name, raw)
    }

    fn expand(&self, cluster: bool, namespace: &str, name: &str, fields: &PointFields) -> Vec<u8> {
        StoredSync::new(cluster, namespace, name, fields).encode()
    }
}
