//! A stored object: its canonical JSON (without `resourceVersion`), its
//! revision, and what is derived from them once and shared (the JSON a
//! client sees, labels and selectable fields for filtering).
//!
//! Objects are stored as `{"apiVersion":..,"kind":..,"metadata":{..},..}`
//! with `metadata.resourceVersion` left out: the revision is the backend's
//! (SQLite's log position, etcd's mod_revision), as in Kubernetes. The JSON a
//! client sees is made by splicing `"resourceVersion":"N"` in right after
//! `"metadata":{`, which needs no parse; a stored value not in this layout
//! (written by someone else, or damaged) is parsed and re-encoded instead.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::{Map, Value};

use crate::error::{Result, StoreError};
use crate::resources::ResourceDef;

/// One object as stored, at one revision. Cheap to clone.
#[derive(Clone)]
pub struct Object {
    inner: Arc<Inner>,
}

struct Inner {
    resource: &'static ResourceDef,
    key: Box<str>,
    rev: u64,
    raw: Bytes,
    /// The stored bytes were found to be JSON ([`Object::check`]).
    checked: AtomicBool,
    json: OnceLock<Bytes>,
    value: OnceLock<Result<Value>>,
}

impl std::fmt::Debug for Object {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Object").field("key", &self.inner.key).field("rev", &self.inner.rev).finish_non_exhaustive()
    }
}

impl Object {
    /// An object of `resource` stored under `key` at revision `rev` with the
    /// stored bytes `raw`.
    pub fn from_stored(resource: &'static ResourceDef, key: impl Into<Box<str>>, rev: u64, raw: Bytes) -> Object {
        Object {
            inner: Arc::new(Inner {
                resource,
                key: key.into(),
                rev,
                raw,
                checked: AtomicBool::new(false),
                json: OnceLock::new(),
                value: OnceLock::new(),
            }),
        }
    }

    /// The same stored bytes at another revision (a deleted object reported
    /// at the revision of its deletion).
    pub fn at_rev(&self, rev: u64) -> Object {
        let o = Object::from_stored(self.inner.resource, self.inner.key.clone(), rev, self.inner.raw.clone());
        o.inner.checked.store(self.inner.checked.load(Ordering::Relaxed), Ordering::Relaxed);
        o
    }

    /// The same object with nothing derived yet: the stored bytes are
    /// shared, the parse and the client JSON are not. For holders that keep
    /// an object for long (the watch history, a controller's cache): what
    /// others derive from a shared copy would otherwise live as long as the
    /// holder keeps it (a parsed tree is about ten times the stored bytes).
    pub fn detached(&self) -> Object {
        self.at_rev(self.inner.rev)
    }

    /// Its type.
    pub fn resource(&self) -> &'static ResourceDef {
        self.inner.resource
    }

    /// Storage key.
    pub fn key(&self) -> &str {
        &self.inner.key
    }

    /// Revision (`metadata.resourceVersion`).
    pub fn rev(&self) -> u64 {
        self.inner.rev
    }

    /// Namespace, from the key (`""` for cluster-scoped objects).
    pub fn namespace(&self) -> &str {
        self.inner.resource.parse_key(&self.inner.key).map_or("", |(ns, _)| ns)
    }

    /// Name, from the key.
    pub fn name(&self) -> &str {
        self.inner.resource.parse_key(&self.inner.key).map_or("", |(_, n)| n)
    }

    /// The stored bytes (no `resourceVersion`).
    pub fn raw(&self) -> &Bytes {
        &self.inner.raw
    }

    /// Whether the stored bytes are JSON: a syntax check that allocates
    /// nothing and keeps nothing but its success, so that a damaged row is
    /// reported (and never spliced into something that is not JSON) without
    /// making the client JSON of every object a list reads.
    pub fn check(&self) -> Result<()> {
        if self.inner.checked.load(Ordering::Relaxed) {
            return Ok(());
        }
        if in_metadata(&self.inner.raw).is_some() {
            serde_json::from_slice::<serde::de::IgnoredAny>(&self.inner.raw).map_err(|e| self.corrupt(e))?;
        } else {
            // Not in the storage layout (written by someone else, or
            // damaged): only a parse tells whether it is an object with a
            // metadata object, as everything made from it needs.
            parse_stored(&self.inner.raw, self.inner.rev).map_err(|e| self.corrupt(e))?;
        }
        self.inner.checked.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// The JSON a client sees, with `metadata.resourceVersion`; made once.
    pub fn json(&self) -> Result<&Bytes> {
        if let Some(j) = self.inner.json.get() {
            return Ok(j);
        }
        self.check()?;
        let made = match splice_rv(&self.inner.raw, self.inner.rev) {
            Some(b) => b,
            None => {
                let mut v = self.value()?.clone();
                set_resource_version(&mut v, self.inner.rev);
                Bytes::from(serde_json::to_vec(&v).map_err(|e| self.corrupt(e))?)
            }
        };
        Ok(self.inner.json.get_or_init(|| made))
    }

    /// The parsed object, with `metadata.resourceVersion` set; parsed once.
    pub fn value(&self) -> Result<&Value> {
        let v =
            self.inner.value.get_or_init(|| parse_stored(&self.inner.raw, self.inner.rev).map_err(|e| self.corrupt(e)));
        v.as_ref().map_err(Clone::clone)
    }

    /// An owned copy of the parsed object, to modify.
    pub fn to_value(&self) -> Result<Value> {
        self.value().cloned()
    }

    /// The object parsed (with `metadata.resourceVersion`) without keeping
    /// the parse: each call parses again unless a parse is already kept.
    pub fn parse(&self) -> Result<Value> {
        if let Some(v) = self.inner.value.get() {
            return v.clone();
        }
        parse_stored(&self.inner.raw, self.inner.rev).map_err(|e| self.corrupt(e))
    }

    /// `metadata.uid`. Read from the stored bytes unless a parse is kept
    /// already, so that asking every object of a list for its uid does not
    /// keep a parse (ten times the bytes) with each of them.
    pub fn uid(&self) -> Option<&str> {
        if let Some(v) = self.inner.value.get() {
            return v.as_ref().ok()?.pointer("/metadata/uid")?.as_str();
        }
        #[derive(serde::Deserialize)]
        struct Stored<'a> {
            #[serde(borrow)]
            metadata: Meta<'a>,
        }
        #[derive(serde::Deserialize)]
        struct Meta<'a> {
            #[serde(borrow, default)]
            uid: Option<&'a str>,
        }
        // Only for bytes in the storage layout (an object whose metadata is
        // an object); an escape in the uid (it cannot be borrowed), a uid
        // that is not a string, a repeated field, a damaged row: the whole
        // parse decides, as for every other field.
        let lent =
            in_metadata(&self.inner.raw).and_then(|_| serde_json::from_slice::<Stored<'_>>(&self.inner.raw).ok());
        match lent {
            Some(s) => s.metadata.uid,
            None => self.value().ok()?.pointer("/metadata/uid")?.as_str(),
        }
    }

    /// `metadata.labels`, if any.
    pub fn labels(&self) -> Option<&Map<String, Value>> {
        self.value().ok()?.pointer("/metadata/labels")?.as_object()
    }

    /// Whether `metadata.deletionTimestamp` is set.
    pub fn is_terminating(&self) -> bool {
        self.value().ok().and_then(|v| v.pointer("/metadata/deletionTimestamp")).is_some_and(|t| !t.is_null())
    }

    /// The value of a selectable field.
    pub fn field(&self, name: &str) -> Option<String> {
        self.inner.resource.field_value(self.value().ok()?, name)
    }

    /// Whether a parse or the client JSON is kept with this copy (for
    /// holders to check that they keep the stored bytes alone).
    pub fn has_derived(&self) -> bool {
        self.inner.value.get().is_some() || self.inner.json.get().is_some()
    }

    fn corrupt(&self, reason: impl std::fmt::Display) -> StoreError {
        StoreError::Corrupt { key: self.inner.key.to_string(), reason: reason.to_string() }
    }
}

/// Stored bytes parsed, with `metadata.resourceVersion` set to `rev`; the
/// reason when they are not an object with a metadata object.
fn parse_stored(raw: &[u8], rev: u64) -> std::result::Result<Value, String> {
    let mut v: Value = serde_json::from_slice(raw).map_err(|e| e.to_string())?;
    if !v.get("metadata").is_some_and(Value::is_object) {
        return Err("no metadata object".into());
    }
    set_resource_version(&mut v, rev);
    Ok(v)
}

/// Sets `metadata.resourceVersion` to `rev` (a string, as Kubernetes sends it).
pub fn set_resource_version(v: &mut Value, rev: u64) {
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rev.to_string()));
    }
}

/// Encodes an object for storage: `apiVersion`, `kind`, `metadata` (without
/// `resourceVersion`) first, then the other fields.
pub fn encode_for_storage(v: &Value) -> Result<Bytes> {
    let obj = v.as_object().ok_or_else(|| StoreError::BadRequest("object must be a JSON object".into()))?;
    let mut out = Vec::with_capacity(512);
    out.push(b'{');
    let mut first = true;
    let mut put = |out: &mut Vec<u8>, k: &str, val: &Value| -> Result<()> {
        if !first {
            out.push(b',');
        }
        first = false;
        serde_json::to_writer(&mut *out, k).map_err(|e| StoreError::backend("encode object", e))?;
        out.push(b':');
        serde_json::to_writer(&mut *out, val).map_err(|e| StoreError::backend("encode object", e))
    };
    for k in ["apiVersion", "kind"] {
        if let Some(val) = obj.get(k) {
            put(&mut out, k, val)?;
        }
    }
    if let Some(meta) = obj.get("metadata") {
        match meta.as_object() {
            Some(m) if m.contains_key("resourceVersion") => {
                let mut m = m.clone();
                m.remove("resourceVersion");
                put(&mut out, "metadata", &Value::Object(m))?;
            }
            _ => put(&mut out, "metadata", meta)?,
        }
    }
    for (k, val) in obj {
        if !matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            put(&mut out, k, val)?;
        }
    }
    out.push(b'}');
    // Stored bytes are kept for long (the watch history, informers): not
    // with up to twice their size in spare capacity.
    out.shrink_to_fit();
    Ok(Bytes::from(out))
}

/// Inserts `"resourceVersion":"rev"` after `"metadata":{` when `raw` has the
/// storage layout (`{"apiVersion":"…","kind":"…","metadata":{…`, the two
/// strings without escapes); `None` otherwise.
fn splice_rv(raw: &[u8], rev: u64) -> Option<Bytes> {
    let at = in_metadata(raw)?;
    let rest = &raw[at..];
    let rv = rev.to_string();
    let mut out = Vec::with_capacity(raw.len() + rv.len() + 22);
    out.extend_from_slice(&raw[..at]);
    out.extend_from_slice(b"\"resourceVersion\":\"");
    out.extend_from_slice(rv.as_bytes());
    out.push(b'"');
    if rest.first() != Some(&b'}') {
        out.push(b',');
    }
    out.extend_from_slice(rest);
    Some(Bytes::from(out))
}

/// Where the metadata object's body starts, when `raw` begins in the
/// storage layout (`{"apiVersion":"…","kind":"…","metadata":{`, without
/// escapes): then `raw`, if it is JSON at all, is an object with a metadata
/// object, which is what [`parse_stored`] asks of it.
fn in_metadata(raw: &[u8]) -> Option<usize> {
    let mut rest = raw.strip_prefix(b"{\"apiVersion\":\"")?;
    rest = skip_plain_string(rest)?;
    rest = rest.strip_prefix(b",\"kind\":\"")?;
    rest = skip_plain_string(rest)?;
    rest = rest.strip_prefix(b",\"metadata\":{")?;
    Some(raw.len() - rest.len())
}

/// Skips a JSON string body up to and including its closing quote; `None` if
/// it has an escape (the caller then takes the slow path).
fn skip_plain_string(s: &[u8]) -> Option<&[u8]> {
    let end = s.iter().position(|&b| b == b'"' || b == b'\\')?;
    (s[end] == b'"').then(|| &s[end + 1..])
}

/// Now, as Kubernetes writes timestamps (RFC 3339, seconds, UTC).
pub fn now_rfc3339() -> String {
    rfc3339(time::OffsetDateTime::now_utc())
}

/// `t` as Kubernetes writes timestamps.
pub fn rfc3339(t: time::OffsetDateTime) -> String {
    edgehive_model::timestamp::rfc3339(t)
}

/// Parses a Kubernetes timestamp.
pub fn parse_rfc3339(s: &str) -> Option<time::OffsetDateTime> {
    time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::PODS;
    use serde_json::json;

    fn obj(v: &Value, rev: u64) -> Object {
        Object::from_stored(&PODS, "/registry/pods/default/p", rev, encode_for_storage(v).expect("encode"))
    }

    #[test]
    fn storage_layout_puts_metadata_first_without_rv() {
        let v = json!({"spec": {"a": 1}, "kind": "Pod", "metadata": {"name": "p", "resourceVersion": "9"}, "apiVersion": "v1"});
        let raw = encode_for_storage(&v).expect("encode");
        assert_eq!(&raw[..], br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"a":1}}"#);
    }

    #[test]
    fn splice_gives_the_same_json_as_a_parse() {
        let v = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}}, "spec": {}});
        let o = obj(&v, 42);
        let spliced: Value = serde_json::from_slice(o.json().expect("json")).expect("valid json");
        let mut expect = v.clone();
        set_resource_version(&mut expect, 42);
        assert_eq!(spliced, expect);
        assert_eq!(o.value().expect("value"), &expect);
        assert_eq!(o.name(), "p");
        assert_eq!(o.namespace(), "default");
    }

    #[test]
    fn a_detached_copy_shares_the_bytes_and_nothing_derived() {
        let v = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}});
        let o = obj(&v, 5);
        o.value().expect("value");
        o.json().expect("json");
        let d = o.detached();
        assert_eq!(d.raw().as_ptr(), o.raw().as_ptr(), "the stored bytes are shared");
        assert!(d.inner.value.get().is_none() && d.inner.json.get().is_none());
        assert_eq!((d.rev(), d.key()), (5, o.key()));
        // A parse that keeps nothing gives what a kept parse gives.
        assert_eq!(&d.parse().expect("parse"), o.value().expect("value"));
        assert!(d.inner.value.get().is_none());
    }

    #[test]
    fn a_uid_is_read_without_keeping_a_parse_and_agrees_with_the_parse() {
        let cases = [
            (
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "uid": "u-1"}, "spec": {"x": [1, {"uid": "no"}]}}),
                Some("u-1"),
            ),
            (json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}), None),
            (json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "uid": null}}), None),
            (json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "uid": 7}}), None),
            (json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "uid": "a\"b"}}), Some("a\"b")),
        ];
        for (v, uid) in cases {
            let o = obj(&v, 3);
            assert_eq!(o.uid(), uid, "{v}");
            let plain = match v.pointer("/metadata/uid") {
                None | Some(Value::Null) => true,
                Some(Value::String(s)) => !s.contains('"'),
                Some(_) => false,
            };
            assert_eq!(o.has_derived(), !plain, "a parse is kept only for what the bytes cannot lend: {v}");
            // Once parsed, the kept parse answers alike.
            o.value().expect("value");
            assert_eq!(o.uid(), uid, "{v}");
        }
        // Bytes not in the storage layout are answered by the full parse: a
        // damaged row or one of the wrong shape has no uid, as it has no
        // other field; a valid object written in another order has its own.
        let rows: [(&'static [u8], Option<&str>); 5] = [
            (b"{\"metadata\":{\"uid\":\"u\"", None),
            (b"[{\"metadata\":{\"uid\":\"u\"}}]", None),
            (b"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":[\"u\"]}", None),
            (b"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":null}", None),
            (b"{\"metadata\":{\"uid\":\"u\"},\"kind\":\"Pod\"}", Some("u")),
        ];
        for (raw, uid) in rows {
            let o = Object::from_stored(&PODS, "/registry/pods/default/p", 1, Bytes::from_static(raw));
            assert_eq!(o.uid(), uid, "{}", String::from_utf8_lossy(raw));
        }
    }

    #[test]
    fn a_check_keeps_nothing_but_its_success_and_finds_a_damaged_row() {
        let o = obj(&json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}), 4);
        o.check().expect("json");
        assert!(!o.has_derived(), "a check makes no client JSON");
        assert!(o.inner.checked.load(Ordering::Relaxed) && o.at_rev(5).inner.checked.load(Ordering::Relaxed));
        assert!(!o.detached().has_derived());
        assert_eq!(
            &o.json().expect("json")[..],
            br#"{"apiVersion":"v1","kind":"Pod","metadata":{"resourceVersion":"4","name":"p"}}"#
        );
        // Damaged, or JSON of another shape than an object with a metadata
        // object: refused, and again (a failure is not kept as a success).
        let rows: [&'static [u8]; 4] =
            [b"{\"metadata\":{\"na", b"[1,2]", b"{\"apiVersion\":\"v1\",\"kind\":\"Pod\"}", b"{\"metadata\":null}"];
        for raw in rows {
            let bad = Object::from_stored(&PODS, "/registry/pods/default/p", 1, Bytes::from_static(raw));
            for _ in 0..2 {
                assert!(matches!(bad.check(), Err(StoreError::Corrupt { .. })), "{}", String::from_utf8_lossy(raw));
            }
            assert!(matches!(bad.json(), Err(StoreError::Corrupt { .. })));
        }
        // Valid, in another order than the storage layout: checked by a parse.
        let other = Object::from_stored(
            &PODS,
            "/registry/pods/default/p",
            1,
            Bytes::from_static(b"{\"metadata\":{},\"kind\":\"Pod\"}"),
        );
        other.check().expect("an object with a metadata object");
    }

    #[test]
    fn empty_metadata_splices_without_a_trailing_comma() {
        let o = obj(&json!({"apiVersion": "v1", "kind": "Pod", "metadata": {}}), 7);
        assert_eq!(
            &o.json().expect("json")[..],
            br#"{"apiVersion":"v1","kind":"Pod","metadata":{"resourceVersion":"7"}}"#
        );
    }

    #[test]
    fn foreign_layout_takes_the_slow_path() {
        let raw = Bytes::from_static(br#"{"metadata":{"name":"p"},"kind":"Pod","apiVersion":"v\u0031"}"#);
        let o = Object::from_stored(&PODS, "/registry/pods/default/p", 3, raw);
        let v: Value = serde_json::from_slice(o.json().expect("json")).expect("valid");
        assert_eq!(v["metadata"]["resourceVersion"], "3");
        assert_eq!(v["apiVersion"], "v1");
    }

    #[test]
    fn corrupt_rows_are_errors_naming_the_key() {
        for raw in [&b"{not json"[..], b"[1,2]", b"{\"apiVersion\":\"v1\",\"kind\":\"Pod\"}"] {
            let o = Object::from_stored(&PODS, "/registry/pods/default/bad", 3, Bytes::copy_from_slice(raw));
            match o.value() {
                Err(StoreError::Corrupt { key, .. }) => assert_eq!(key, "/registry/pods/default/bad"),
                other => panic!("expected Corrupt, got {other:?}"),
            }
        }
        // Parsing without keeping reports the same, and keeps nothing.
        let o = Object::from_stored(&PODS, "/registry/pods/default/bad", 3, Bytes::from_static(b"{not json"));
        assert!(matches!(o.parse(), Err(StoreError::Corrupt { .. })));
        // A damaged row whose prefix still looks right is reported, not spliced.
        let o = Object::from_stored(
            &PODS,
            "/registry/pods/default/bad",
            3,
            Bytes::from_static(b"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"),
        );
        assert!(matches!(o.json(), Err(StoreError::Corrupt { .. })));
        assert!(splice_rv(b"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":[", 1).is_none());
    }
}
