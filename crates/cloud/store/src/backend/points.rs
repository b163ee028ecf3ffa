//! How the SQLite backend keeps success points (ObjectSync and
//! ClusterObjectSync objects) small: a `points` table instead of `kv`, and
//! the same JSON given back on every read.
//!
//! A row is `(key BLOB PRIMARY KEY, value BLOB, mod_rev)` in a WITHOUT ROWID
//! table, so the key is stored once:
//!
//! - the key is the namespace's and the node's number in `atoms` (a table of
//!   strings, each stored once) and the object's uid, 16 bytes for a UUID:
//!   `ord(namespace) ord(node) tag uid`, where `ord` is an order-preserving
//!   length-prefixed big-endian number, namespace 0 means cluster-scoped, the
//!   "node" is the name up to and including its last `.`, and the uid is the
//!   rest (`tag` 1: a lowercase UUID as 16 bytes; 0: the text);
//! - the value is `0x00` followed by varints (creationTimestamp in Unix
//!   seconds, generation, status.objectResourceVersion, the number of the
//!   atom `{objectAPIVersion}/{objectKind}`) and spec.objectName, when the
//!   stored JSON is exactly what [`StoredSync`] makes of these (what CloudHub
//!   writes); anything else (labels added through the API, another uid) is
//!   `0x01` followed by the JSON as given.
//!
//! Rows are in key order, which is not the order of the string keys; the
//! ranges [`crate::Store::list`] asks for (a resource, a namespace, one key,
//! after a key) are translated by [`bounds`]. A row that does not decode is
//! reported with its key and handed up as stored bytes that are not JSON,
//! so that the store skips it as it skips any corrupt row.
//!
//! The meaning of that JSON is not the backend's: the store gives it a
//! [`PointCodec`] (`crate::pointform::SyncCodec`) that says which JSON is a
//! point's canonical form and makes it again from the compact fields.
//!
//! [`StoredSync`]: crate::objectsync::StoredSync

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use bytes::Bytes;
use rusqlite::{Connection, OptionalExtension};

use super::prefix_end;
use crate::error::{Result, StoreError};
use crate::resources::{CLUSTER_OBJECT_SYNCS, OBJECT_SYNCS};
use crate::uuid::{format_uuid, uuid_bits};

/// Value tag: the compact form.
const COMPACT: u8 = 0;
/// Value tag: the JSON as given.
const RAW: u8 = 1;
/// Key tag: the uid as text.
const UID_TEXT: u8 = 0;
/// Key tag: the uid as a UUID's 16 bytes.
const UID_UUID: u8 = 1;

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

/// Turns a point's stored JSON into the fields of its compact form and back.
pub(crate) trait PointCodec: Send + Sync + std::fmt::Debug {
    /// The fields of `raw`, the stored bytes of the point `namespace`/`name`,
    /// if [`PointCodec::expand`] of them gives back exactly `raw`; `None`
    /// keeps `raw` as it is.
    fn compact(&self, cluster: bool, namespace: &str, name: &str, raw: &[u8]) -> Option<PointFields>;
    /// The stored bytes of the point `namespace`/`name` with these fields.
    fn expand(&self, cluster: bool, namespace: &str, name: &str, fields: &PointFields) -> Vec<u8>;
}

/// The strings of namespaces, nodes and object types, each stored once.
pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS atoms (id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS points (key BLOB PRIMARY KEY, value BLOB NOT NULL, mod_rev INTEGER NOT NULL) WITHOUT ROWID;
";

/// The two key prefixes kept in `points`, and whether each is cluster-scoped.
pub(crate) fn prefixes() -> &'static [(String, bool); 2] {
    static PREFIXES: OnceLock<[(String, bool); 2]> = OnceLock::new();
    PREFIXES.get_or_init(|| [(OBJECT_SYNCS.prefix(), false), (CLUSTER_OBJECT_SYNCS.prefix(), true)])
}

/// A key kept in `points`, in parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PointKey<'k> {
    cluster: bool,
    namespace: &'k str,
    name: &'k str,
}

impl<'k> PointKey<'k> {
    /// The parts of `key` if it is an ObjectSync's or a ClusterObjectSync's.
    pub(crate) fn parse(key: &'k str) -> Option<PointKey<'k>> {
        if let Some((namespace, name)) = OBJECT_SYNCS.parse_key(key) {
            return Some(PointKey { cluster: false, namespace, name });
        }
        CLUSTER_OBJECT_SYNCS.parse_key(key).map(|(_, name)| PointKey { cluster: true, namespace: "", name })
    }

    /// The name up to and including its last `.` (empty if it has none), and the rest.
    fn split(&self) -> (&'k str, &'k str) {
        let at = self.name.rfind('.').map_or(0, |i| i + 1);
        self.name.split_at(at)
    }
}

/// Strings by number and numbers by string, as read from `atoms` (which
/// only grows, so what was read once stays true), and the codec of the
/// points' JSON. Shared by the readers; the lock is held for a map lookup,
/// never across SQL.
#[derive(Debug)]
pub(crate) struct Atoms {
    known: Mutex<Known>,
    codec: Arc<dyn PointCodec>,
}

#[derive(Debug, Default)]
struct Known {
    ids: HashMap<Arc<str>, u64>,
    texts: HashMap<u64, Arc<str>>,
}

impl Atoms {
    /// No atom read yet; points encoded and decoded by `codec`.
    pub(crate) fn new(codec: Arc<dyn PointCodec>) -> Atoms {
        Atoms { known: Mutex::default(), codec }
    }

    fn known(&self) -> MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn remember(&self, id: u64, text: &str) -> Arc<str> {
        let text: Arc<str> = Arc::from(text);
        let mut known = self.known();
        known.ids.insert(Arc::clone(&text), id);
        known.texts.insert(id, Arc::clone(&text));
        text
    }

    /// The number of `text`, if it has one.
    fn find(&self, c: &Connection, text: &str) -> rusqlite::Result<Option<u64>> {
        if let Some(id) = self.known().ids.get(text) {
            return Ok(Some(*id));
        }
        let id: Option<i64> =
            c.prepare_cached("SELECT id FROM atoms WHERE text = ?1")?.query_row([text], |r| r.get(0)).optional()?;
        let id = id.and_then(|i| u64::try_from(i).ok());
        if let Some(id) = id {
            self.remember(id, text);
        }
        Ok(id)
    }

    /// The number of `text`, given one if it has none (the writer only).
    fn intern(&self, c: &Connection, text: &str) -> rusqlite::Result<u64> {
        if let Some(id) = self.find(c, text)? {
            return Ok(id);
        }
        c.prepare_cached("INSERT INTO atoms (text) VALUES (?1)")?.execute([text])?;
        let id = u64::try_from(c.last_insert_rowid()).unwrap_or(0);
        self.remember(id, text);
        Ok(id)
    }

    /// The string numbered `id`.
    fn text(&self, c: &Connection, id: u64) -> rusqlite::Result<Option<Arc<str>>> {
        if let Some(t) = self.known().texts.get(&id) {
            return Ok(Some(Arc::clone(t)));
        }
        let Ok(sql_id) = i64::try_from(id) else { return Ok(None) };
        let text: Option<String> =
            c.prepare_cached("SELECT text FROM atoms WHERE id = ?1")?.query_row([sql_id], |r| r.get(0)).optional()?;
        Ok(text.map(|t| self.remember(id, &t)))
    }

    /// Forgets everything (after a rolled-back transaction that made atoms).
    pub(crate) fn clear(&self) {
        let mut known = self.known();
        known.ids.clear();
        known.texts.clear();
    }
}

fn put_ord(out: &mut Vec<u8>, v: u64) {
    let skip = ((v.leading_zeros() / 8) as usize).min(7);
    out.push((8 - skip) as u8);
    out.extend_from_slice(&v.to_be_bytes()[skip..]);
}

fn take_ord(b: &[u8]) -> Option<(u64, &[u8])> {
    let (&len, rest) = b.split_first()?;
    let len = usize::from(len);
    if !(1..=8).contains(&len) || rest.len() < len {
        return None;
    }
    let v = rest[..len].iter().fold(0u64, |v, &d| (v << 8) | u64::from(d));
    Some((v, &rest[len..]))
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn take_varint(b: &[u8]) -> Option<(u64, &[u8])> {
    let mut v = 0u64;
    for (i, &d) in b.iter().enumerate().take(10) {
        v |= u64::from(d & 0x7f).checked_shl(7 * i as u32)?;
        if d < 0x80 {
            return Some((v, &b[i + 1..]));
        }
    }
    None
}

fn ord(v: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(9);
    put_ord(&mut out, v);
    out
}

/// The `points` key of `key`; `None` when its namespace or node has no atom
/// and `create` is false (then no such row exists).
pub(crate) fn key_blob(
    atoms: &Atoms,
    c: &Connection,
    key: &PointKey<'_>,
    create: bool,
) -> rusqlite::Result<Option<Vec<u8>>> {
    let (node, uid) = key.split();
    let id = |text: &str| if create { atoms.intern(c, text).map(Some) } else { atoms.find(c, text) };
    let ns = if key.cluster {
        0
    } else {
        match id(key.namespace)? {
            Some(n) => n,
            None => return Ok(None),
        }
    };
    let Some(node) = id(node)? else { return Ok(None) };
    let mut out = Vec::with_capacity(24);
    put_ord(&mut out, ns);
    put_ord(&mut out, node);
    match uuid_bits(uid).filter(|_| !uid.bytes().any(|b| b.is_ascii_uppercase())) {
        Some(bits) => {
            out.push(UID_UUID);
            out.extend_from_slice(&bits.to_be_bytes());
        }
        None => {
            out.push(UID_TEXT);
            out.extend_from_slice(uid.as_bytes());
        }
    }
    Ok(Some(out))
}

/// The string key of a `points` key, or why it has none.
pub(crate) fn decode_key(atoms: &Atoms, c: &Connection, blob: &[u8]) -> rusqlite::Result<Result<String, String>> {
    let Some((ns, rest)) = take_ord(blob) else { return Ok(Err("bad namespace number".into())) };
    let Some((node, rest)) = take_ord(rest) else { return Ok(Err("bad node number".into())) };
    let uid = match rest.split_first() {
        Some((&UID_UUID, b)) if b.len() == 16 => format_uuid(u128::from_be_bytes(b.try_into().unwrap_or_default())),
        Some((&UID_TEXT, b)) => match std::str::from_utf8(b) {
            Ok(s) => s.to_owned(),
            Err(_) => return Ok(Err("uid is not UTF-8".into())),
        },
        _ => return Ok(Err("bad uid".into())),
    };
    let Some(node) = atoms.text(c, node)? else { return Ok(Err(format!("no atom {node} (node)"))) };
    if ns == 0 {
        return Ok(Ok(CLUSTER_OBJECT_SYNCS.key("", &format!("{node}{uid}"))));
    }
    let Some(ns_text) = atoms.text(c, ns)? else { return Ok(Err(format!("no atom {ns} (namespace)"))) };
    Ok(Ok(OBJECT_SYNCS.key(&ns_text, &format!("{node}{uid}"))))
}

/// What to store in `points.value` for the object `raw` under `key`.
pub(crate) fn encode_value(atoms: &Atoms, c: &Connection, key: &PointKey<'_>, raw: &[u8]) -> rusqlite::Result<Vec<u8>> {
    let Some(f) = atoms.codec.compact(key.cluster, key.namespace, key.name, raw).filter(|f| f.created >= 0) else {
        let mut out = Vec::with_capacity(raw.len() + 1);
        out.push(RAW);
        out.extend_from_slice(raw);
        return Ok(out);
    };
    let kind = atoms.intern(c, &format!("{}/{}", f.api_version, f.kind))?;
    let mut out = Vec::with_capacity(24 + f.name.len());
    out.push(COMPACT);
    put_varint(&mut out, f.created.unsigned_abs());
    put_varint(&mut out, f.generation);
    put_varint(&mut out, f.rv);
    put_varint(&mut out, kind);
    out.extend_from_slice(f.name.as_bytes());
    Ok(out)
}

/// The object stored as `stored` under `key`, or why it cannot be read.
fn decode(atoms: &Atoms, c: &Connection, key: &PointKey<'_>, stored: &[u8]) -> rusqlite::Result<Result<Bytes, String>> {
    let compact = match stored.split_first() {
        Some((&RAW, raw)) => return Ok(Ok(Bytes::copy_from_slice(raw))),
        Some((&COMPACT, compact)) => compact,
        _ => return Ok(Err("unknown value tag".into())),
    };
    let fields = (|| {
        let (created, b) = take_varint(compact)?;
        let (generation, b) = take_varint(b)?;
        let (rv, b) = take_varint(b)?;
        let (kind, b) = take_varint(b)?;
        Some((i64::try_from(created).ok()?, generation, rv, kind, std::str::from_utf8(b).ok()?))
    })();
    let Some((created, generation, rv, kind, name)) = fields else {
        return Ok(Err("truncated or not UTF-8".into()));
    };
    let Some(type_text) = atoms.text(c, kind)? else { return Ok(Err(format!("no atom {kind} (object type)"))) };
    let (api_version, kind) = type_text.rsplit_once('/').unwrap_or(("", &type_text));
    let f = PointFields {
        created,
        generation,
        rv,
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        name: name.to_owned(),
    };
    Ok(Ok(atoms.codec.expand(key.cluster, key.namespace, key.name, &f).into()))
}

/// The object stored as `stored` under `key`. A row that does not decode is
/// reported with its key and given back as stored: bytes that are not JSON,
/// which the store reports as corrupt (and lists skip).
pub(crate) fn decode_value(atoms: &Atoms, c: &Connection, key: &str, stored: &[u8]) -> rusqlite::Result<Bytes> {
    let decoded = match PointKey::parse(key) {
        Some(pk) => decode(atoms, c, &pk, stored)?,
        None => Err("not a success point key".into()),
    };
    Ok(decoded.unwrap_or_else(|reason| {
        tracing::error!(key, %reason, "corrupt success point row");
        Bytes::copy_from_slice(stored)
    }))
}

/// Whether a range starting at `start` is one of the `points` prefixes, and
/// whether that one is cluster-scoped.
pub(crate) fn region(start: &str) -> Option<(&'static str, bool)> {
    prefixes().iter().find(|(p, _)| start.starts_with(p.as_str())).map(|(p, cluster)| (p.as_str(), *cluster))
}

/// The `points` keys `[lo, hi)` for the string range `[start, end)` in the
/// region `prefix`; `None` when no row can be in it (a namespace or node
/// without an atom). Understands the ranges the store asks for: the whole
/// resource, one namespace, one key, and from just after a key
/// (`{key}\0`, continuing a list) to either end.
pub(crate) fn bounds(
    atoms: &Atoms,
    c: &Connection,
    (prefix, cluster): (&str, bool),
    start: &str,
    end: &str,
) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
    let unsupported = || StoreError::BadRequest(format!("range [{start:?}, {end:?}) is not one the store reads"));
    let first_ns = if cluster { 0 } else { 1 };
    // The `points` key of "{namespace}/{name}" (or "{name}"), from a bound's text.
    let key_of = |atoms: &Atoms, body: &str| -> Result<Option<Vec<u8>>> {
        let (namespace, name) = if cluster { ("", body) } else { body.split_once('/').ok_or_else(unsupported)? };
        key_blob(atoms, c, &PointKey { cluster, namespace, name }, false).map_err(atom_err)
    };
    let rest = start.strip_prefix(prefix).ok_or_else(unsupported)?;
    let (body, after) = rest.strip_suffix('\0').map_or((rest, false), |b| (b, true));
    let lo = if rest.is_empty() {
        Some(ord(first_ns))
    } else if let Some(ns) = body.strip_suffix('/').filter(|ns| !cluster && !after && !ns.contains('/')) {
        atoms.find(c, ns).map_err(atom_err)?.map(ord)
    } else {
        key_of(atoms, body)?.map(|k| with_after(k, after))
    };
    let hi = if end == prefix_end(prefix) {
        Some(if cluster { ord(1) } else { vec![0xff] })
    } else {
        let rest = end.strip_prefix(prefix).ok_or_else(unsupported)?;
        if let Some(body) = rest.strip_suffix('\0') {
            key_of(atoms, body)?.map(|k| with_after(k, true))
        } else {
            // The end of one namespace: prefix_end("{prefix}{ns}/").
            let ns = rest.strip_suffix('0').filter(|ns| !cluster && !ns.contains('/')).ok_or_else(unsupported)?;
            atoms.find(c, ns).map_err(atom_err)?.map(|id| ord(id + 1))
        }
    };
    Ok(lo.zip(hi))
}

fn atom_err(e: rusqlite::Error) -> StoreError {
    StoreError::backend("read atoms", e)
}

/// `key` itself, or (`after`) the first key after it.
fn with_after(mut key: Vec<u8>, after: bool) -> Vec<u8> {
    if after {
        key.push(0);
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pointform::StoredSync;

    fn db() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(SCHEMA).unwrap();
        c
    }

    #[test]
    fn numbers_keep_their_order() {
        let vals = [0u64, 1, 2, 127, 128, 255, 256, 65_535, 65_536, 1 << 40, u64::MAX];
        for w in vals.windows(2) {
            assert!(ord(w[0]) < ord(w[1]), "{} < {}", w[0], w[1]);
        }
        for v in vals {
            assert_eq!(take_ord(&ord(v)), Some((v, &[][..])));
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(take_varint(&b), Some((v, &[][..])));
        }
        assert_eq!(take_ord(&[9, 0]), None);
        assert_eq!(take_varint(&[0x80, 0x80]), None);
        assert_eq!(take_varint(&[0xff; 11]), None);
    }

    #[test]
    fn keys_round_trip() {
        let c = db();
        let atoms = Atoms::new(Arc::new(crate::pointform::SyncCodec));
        for key in [
            "/registry/reliablesyncs.kubeedge.io/objectsyncs/default/edge-1.8d3e4f5a-1234-5678-9abc-def012345678",
            "/registry/reliablesyncs.kubeedge.io/objectsyncs/default/edge.example.com.uid-7",
            "/registry/reliablesyncs.kubeedge.io/objectsyncs/kube-system/no-dot-here",
            "/registry/reliablesyncs.kubeedge.io/objectsyncs/default/edge-9.8D3E4F5A-1234-5678-9ABC-DEF012345678",
            "/registry/reliablesyncs.kubeedge.io/clusterobjectsyncs/edge-c.8d3e4f5a-1234-5678-9abc-def012345678",
        ] {
            let pk = PointKey::parse(key).unwrap();
            assert_eq!(key_blob(&atoms, &c, &pk, false).unwrap(), None, "no atoms yet: {key}");
            let blob = key_blob(&atoms, &c, &pk, true).unwrap().unwrap();
            assert_eq!(
                decode_key(&Atoms::new(Arc::new(crate::pointform::SyncCodec)), &c, &blob).unwrap().as_deref(),
                Ok(key)
            );
        }
        let uuid = PointKey::parse(
            "/registry/reliablesyncs.kubeedge.io/objectsyncs/default/edge-1.8d3e4f5a-1234-5678-9abc-def012345678",
        )
        .unwrap();
        assert_eq!(key_blob(&atoms, &c, &uuid, false).unwrap().unwrap().len(), 2 + 2 + 1 + 16);
        assert!(PointKey::parse("/registry/configmaps/default/x").is_none());
        assert!(decode_key(&atoms, &c, &[1, 1, 1, 99, UID_TEXT]).unwrap().is_err(), "unknown atom");
        assert!(decode_key(&atoms, &c, &[1, 1]).unwrap().is_err(), "truncated");
    }

    #[test]
    fn values_are_compact_when_exact_and_raw_otherwise() {
        let c = db();
        let atoms = Atoms::new(Arc::new(crate::pointform::SyncCodec));
        let key = "/registry/reliablesyncs.kubeedge.io/objectsyncs/default/edge-1.8d3e4f5a-1234-5678-9abc-def012345678";
        let pk = PointKey::parse(key).unwrap();
        let f = PointFields {
            created: 1_790_000_000,
            generation: 1,
            rv: 123_456,
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "app-config".into(),
        };
        let raw = StoredSync::new(false, "default", pk.name, &f).encode();
        let stored = encode_value(&atoms, &c, &pk, &raw).unwrap();
        assert_eq!(stored[0], COMPACT);
        assert!(stored.len() < 25, "{} bytes", stored.len());
        assert_eq!(&decode_value(&atoms, &c, key, &stored).unwrap()[..], &raw[..]);

        let other = br#"{"apiVersion":"reliablesyncs.kubeedge.io/v1alpha1","kind":"ObjectSync","metadata":{"labels":{"a":"b"}}}"#;
        let stored = encode_value(&atoms, &c, &pk, other).unwrap();
        assert_eq!(stored[0], RAW);
        assert_eq!(&decode_value(&atoms, &c, key, &stored).unwrap()[..], &other[..]);

        // Damaged rows come back as they are stored: not JSON.
        for bad in [&[COMPACT, 0x80][..], &[7, 1, 2], &[COMPACT, 1, 1, 1, 99, b'x'], &[]] {
            let got = decode_value(&atoms, &c, key, bad).unwrap();
            assert_eq!(&got[..], bad);
            assert!(serde_json::from_slice::<serde_json::Value>(&got).is_err());
        }
    }

    #[test]
    fn store_ranges_become_key_ranges() {
        let c = db();
        let atoms = Atoms::new(Arc::new(crate::pointform::SyncCodec));
        let p = OBJECT_SYNCS.prefix();
        let region = region(&p).unwrap();
        let k = |ns: &str, name: &str| OBJECT_SYNCS.key(ns, name);
        let blob = |key: &str| key_blob(&atoms, &c, &PointKey::parse(key).unwrap(), true).unwrap().unwrap();
        let a = blob(&k("a", "edge-1.u1"));
        let b = blob(&k("b", "edge-1.u2"));
        let bounds = |s: &str, e: &str| bounds(&atoms, &c, region, s, e);
        let all = bounds(&p, &prefix_end(&p)).unwrap().unwrap();
        assert!(all.0 <= a && a < all.1 && b < all.1);
        let ns_a = bounds(&format!("{p}a/"), &prefix_end(&format!("{p}a/"))).unwrap().unwrap();
        assert!(ns_a.0 <= a && a < ns_a.1 && !(ns_a.0 <= b && b < ns_a.1));
        let one = bounds(&k("a", "edge-1.u1"), &format!("{}\0", k("a", "edge-1.u1"))).unwrap().unwrap();
        assert!(one.0 <= a && a < one.1);
        let after = bounds(&format!("{}\0", k("a", "edge-1.u1")), &prefix_end(&p)).unwrap().unwrap();
        assert!(after.0 > a && after.0 <= b);
        assert_eq!(bounds(&format!("{p}nowhere/"), &prefix_end(&format!("{p}nowhere/"))).unwrap(), None);
        assert!(matches!(bounds(&format!("{p}a"), &prefix_end(&p)), Err(StoreError::BadRequest(_))));
        let cp = CLUSTER_OBJECT_SYNCS.prefix();
        let cluster = super::region(&cp).unwrap();
        let (lo, hi) = super::bounds(&atoms, &c, cluster, &cp, &prefix_end(&cp)).unwrap().unwrap();
        assert!(lo < hi && hi <= ord(1), "cluster-scoped points sort before every namespace");
        assert!(super::region("/registry/configmaps/").is_none());
    }
}
