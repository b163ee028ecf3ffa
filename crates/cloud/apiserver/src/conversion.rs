//! The conversion seam: between the form a resource's objects are stored in
//! and the version a request names, as kube-apiserver converts between a
//! version and its storage version.
//!
//! An [`Object`] read through a view keeps its stored bytes and carries the
//! view's [`ResourceDef`]; the responses convert it here when they encode it.
//! For every resource that is its own storage (all built-ins but
//! events.k8s.io/v1 Events) the functions hand back what they were given:
//! the stored JSON is answered as it is, never parsed or re-encoded.
//!
//! The conversions themselves are the registry's (object semantics shared
//! with the controllers); this module picks one by resource and deals with
//! objects, watch events and their bytes.

use std::borrow::Cow;

use bytes::Bytes;
use edgehive_registry::conversion::{event_core_to_v1, event_v1_to_core};
use edgehive_store::resources::{EVENTS_V1, ResourceDef};
use edgehive_store::{Object, StoreError, WatchEvent};
use serde_json::Value;

use crate::status::ApiError;

/// Whether objects of `res` are stored in another resource's form.
pub(crate) fn needed(res: &ResourceDef) -> bool {
    !std::ptr::eq(res.stored_as(), res) || !res.stored_version.is_empty()
}

/// A request's object in `res`'s version, as its storage form.
pub(crate) fn to_stored(res: &ResourceDef, obj: Value) -> Result<Value, ApiError> {
    if !needed(res) {
        return Ok(obj);
    }
    if std::ptr::eq(res, &EVENTS_V1) {
        return Ok(event_v1_to_core(obj));
    }
    if !res.stored_version.is_empty() {
        // A custom resource's other version (conversion `None`).
        let mut obj = obj;
        if let Some(m) = obj.as_object_mut() {
            m.insert("apiVersion".into(), Value::String(format!("{}/{}", res.group, res.stored_version)));
        }
        return Ok(obj);
    }
    // No conversion but the version: the objects are the same but for apiVersion.
    Ok(with_api_version(obj, res.stored_as()))
}

/// A stored object in the form of `res`'s version.
pub(crate) fn from_stored(res: &ResourceDef, obj: Value) -> Value {
    if !needed(res) {
        return obj;
    }
    if std::ptr::eq(res, &EVENTS_V1) {
        return event_core_to_v1(obj);
    }
    with_api_version(obj, res)
}

/// [`from_stored`] of a borrowed object: borrowed back when no conversion is needed.
pub(crate) fn view<'a>(res: &ResourceDef, stored: &'a Value) -> Cow<'a, Value> {
    if needed(res) { Cow::Owned(from_stored(res, stored.clone())) } else { Cow::Borrowed(stored) }
}

fn with_api_version(mut obj: Value, res: &ResourceDef) -> Value {
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(res.api_version()));
    }
    obj
}

/// The JSON of `obj` in the version of the resource it was read through: its stored JSON (a cheap clone
/// of shared bytes) when that is the same.
pub(crate) fn object_json(obj: &Object) -> Result<Bytes, StoreError> {
    let res = obj.resource();
    if !needed(res) {
        return obj.json().cloned();
    }
    let converted = from_stored(res, obj.value()?.clone());
    serde_json::to_vec(&converted).map(Bytes::from).map_err(|e| StoreError::Backend(e.to_string()))
}

/// One line of a JSON watch stream of `res`: the event's shared encoded line when `res` is its own
/// storage, else the event's object converted.
pub(crate) fn watch_line(res: &ResourceDef, ev: &WatchEvent) -> Result<Bytes, String> {
    let object = match ev.object() {
        Some(o) if needed(res) => o,
        _ => return ev.line(res).map_err(|e| e.to_string()),
    };
    let value = object.value().map_err(|e| e.to_string())?;
    let line = serde_json::json!({"type": ev.ty.as_str(), "object": from_stored(res, value.clone())});
    let mut out = serde_json::to_vec(&line).map_err(|e| e.to_string())?;
    out.push(b'\n');
    Ok(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgehive_store::resources::{EVENTS, PODS};
    use serde_json::json;

    fn stored_event() -> Bytes {
        Bytes::from_static(
            br#"{"apiVersion":"v1","kind":"Event","metadata":{"name":"e","namespace":"default"},"involvedObject":{"kind":"Pod","name":"p"},"message":"hi","reportingComponent":"c","source":{"component":"kubelet"}}"#,
        )
    }

    #[test]
    fn a_resource_that_is_its_own_storage_is_answered_as_stored() {
        assert!(!needed(&PODS) && !needed(&EVENTS) && needed(&EVENTS_V1));
        let obj = Object::from_stored(&EVENTS, "/registry/events/default/e", 5, stored_event());
        let json = object_json(&obj).expect("encodes");
        // The very bytes the object holds (no parse, no re-encode).
        assert_eq!(json.as_ptr(), obj.json().expect("encodes").as_ptr());
        let v = json!({"a": 1});
        assert!(matches!(view(&PODS, &v), Cow::Borrowed(_)));
        assert_eq!(to_stored(&PODS, v.clone()).ok(), Some(v.clone()));
        assert_eq!(from_stored(&PODS, v.clone()), v);
    }

    #[test]
    fn events_read_through_events_k8s_io_are_converted() {
        // The store reads through the view: the stored bytes, with the view's resource.
        let obj = Object::from_stored(&EVENTS_V1, "/registry/events/default/e", 5, stored_event());
        let v: Value = serde_json::from_slice(&object_json(&obj).expect("encodes")).expect("json");
        assert_eq!(v["apiVersion"], "events.k8s.io/v1");
        assert_eq!(v["kind"], "Event");
        assert_eq!(v["metadata"]["resourceVersion"], "5");
        assert_eq!(v["regarding"]["name"], "p");
        assert_eq!(v["note"], "hi");
        assert_eq!(v["reportingController"], "c");
        assert_eq!(v["deprecatedSource"]["component"], "kubelet");
        let back = to_stored(&EVENTS_V1, v).expect("converts");
        assert_eq!(back["apiVersion"], "v1");
        assert_eq!(back["message"], "hi");
        assert_eq!(back["involvedObject"]["kind"], "Pod");
    }
}
