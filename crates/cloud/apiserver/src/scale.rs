//! The `scale` subresource (`autoscaling/v1` Scale) of Deployments,
//! ReplicaSets and StatefulSets: a view of `spec.replicas`, `status.replicas`
//! and the label selector that `kubectl scale` reads and patches. A write
//! changes only the object's `spec.replicas`, through the same
//! read-modify-write, defaults and validation as an update of the object.

use bytes::Bytes;
use edgehive_store::Object;
use edgehive_store::selector::LabelSelector;
use http::{HeaderMap, Response, StatusCode};
use serde_json::{Value, json};

use crate::body;
use crate::context::ApiState;
use crate::crd::ScalePaths;
use crate::handlers::{Rewritten, modified, rewrite_object};
use crate::response::{Body, value_response};
use crate::route::{Query, Target};
use crate::status::{ApiError, Cause};

/// Where a resource keeps what its Scale shows: the built-in workloads'
/// fields, or a custom resource's `subresources.scale` paths.
fn paths_of(shared: &ApiState, res: &edgehive_store::resources::ResourceDef) -> ScalePaths {
    shared.crds.get(res).and_then(|s| s.scale.clone()).unwrap_or_else(|| ScalePaths {
        spec: "/spec/replicas".into(),
        status: "/status/replicas".into(),
        selector: None,
    })
}

/// The Scale of a stored object, as Kubernetes' scale subresources render
/// it. A custom resource's selector is the string at its label selector
/// path (as apiextensions reads it); a built-in's is its `spec.selector`.
pub(crate) fn scale_of(obj: &Value, paths: &ScalePaths) -> Value {
    let meta = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let keep = ["name", "namespace", "uid", "resourceVersion", "creationTimestamp"];
    let metadata: serde_json::Map<String, Value> =
        keep.iter().filter_map(|k| meta.get(*k).map(|v| ((*k).to_string(), v.clone()))).collect();
    let replicas = |p: &str| obj.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    let selector = match &paths.selector {
        Some(p) => obj.pointer(p).and_then(Value::as_str).unwrap_or_default().to_owned(),
        None if paths.spec == "/spec/replicas" && paths.status == "/status/replicas" => obj
            .pointer("/spec/selector")
            .and_then(|s| LabelSelector::from_json(s).ok())
            .map(|s| s.to_string())
            .unwrap_or_default(),
        None => String::new(),
    };
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": {"replicas": replicas(&paths.spec)},
        "status": {"replicas": replicas(&paths.status), "selector": selector},
    })
}

/// GET of `…/scale`.
pub(crate) async fn get(shared: &ApiState, target: &Target) -> Result<Response<Body>, ApiError> {
    let res = target.resource;
    let (ns, name) = names(target);
    let obj = shared.store.get(res, ns, name).await.map_err(|e| ApiError::from_store(e, res.plural, res.group))?;
    Ok(value_response(StatusCode::OK, &scale_of(stored_value(&obj)?, &paths_of(shared, res))))
}

/// Sets the field at JSON pointer `pointer`, making the objects on the way.
fn set_at(obj: &mut Value, pointer: &str, value: Value) {
    let mut cur = obj;
    let parts: Vec<&str> = pointer.split('/').skip(1).collect();
    for (i, part) in parts.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let Some(m) = cur.as_object_mut() else { return };
        if i + 1 == parts.len() {
            m.insert((*part).to_owned(), value);
            return;
        }
        cur = m.entry((*part).to_owned()).or_insert_with(|| json!({}));
    }
}

fn stored_value(obj: &Object) -> Result<&Value, ApiError> {
    let res = obj.resource();
    obj.value().map_err(|e| ApiError::from_store(e, res.plural, res.group))
}

fn names(target: &Target) -> (&str, &str) {
    (target.namespace.as_deref().unwrap_or_default(), target.name.as_deref().unwrap_or_default())
}

/// The replicas a requested Scale asks for, checked as Kubernetes'
/// `ValidateScale` checks it, and its resourceVersion precondition.
fn requested_replicas(scale: &Value, name: &str) -> Result<(i64, Option<String>), ApiError> {
    let replicas = match scale.pointer("/spec/replicas") {
        None | Some(Value::Null) => 0,
        Some(v) => v.as_i64().filter(|n| i32::try_from(*n).is_ok()).ok_or_else(|| {
            ApiError::bad_request(format!(
                "Scale in version \"v1\" cannot be handled as a Scale: json: cannot unmarshal {v} into Go struct field ScaleSpec.spec.replicas of type int32"
            ))
        })?,
    };
    if replicas < 0 {
        let cause = Cause {
            reason: "FieldValueInvalid".into(),
            message: format!("Invalid value: {replicas}: must be greater than or equal to 0"),
            field: "spec.replicas".into(),
        };
        let summary = format!("spec.replicas: {}", cause.message);
        return Err(ApiError::invalid_with_summary("Scale", "autoscaling", name, vec![cause], &[summary]));
    }
    let rv = scale.pointer("/metadata/resourceVersion").and_then(Value::as_str).filter(|s| !s.is_empty());
    Ok((replicas, rv.map(str::to_string)))
}

/// PUT (`change` gives the requested Scale from the current one: the body)
/// or PATCH (the patch applied to the current Scale) of `…/scale`.
pub(crate) async fn write(
    shared: &ApiState,
    target: &Target,
    query: &Query,
    mut change: impl FnMut(Value) -> Result<Value, ApiError>,
) -> Result<Response<Body>, ApiError> {
    let res = target.resource;
    let (_, name) = names(target);
    let dry_run = body::dry_run(query)?;
    let paths = paths_of(shared, res);
    let out = rewrite_object(shared, target, dry_run, |cur, old| {
        let requested = change(scale_of(old, &paths))?;
        let (replicas, rv) = requested_replicas(&requested, name)?;
        if rv.is_some_and(|rv| rv != cur.rev().to_string()) {
            return Err(modified(res, name));
        }
        let mut new = old.clone();
        set_at(&mut new, &paths.spec, json!(replicas));
        Ok(new)
    })
    .await?;
    let scale = match out {
        Rewritten::Stored(obj) => scale_of(stored_value(&obj)?, &paths),
        Rewritten::Preview(v) => scale_of(&v, &paths),
    };
    Ok(value_response(StatusCode::OK, &scale))
}

/// PUT of `…/scale` with a Scale body.
pub(crate) async fn update(
    shared: &ApiState,
    target: &Target,
    query: &Query,
    headers: &HeaderMap,
    bytes: &Bytes,
) -> Result<Response<Body>, ApiError> {
    let requested = body::decode(headers, bytes, "Scale")?;
    if requested.get("kind").and_then(Value::as_str).is_some_and(|k| !k.is_empty() && k != "Scale") {
        return Err(ApiError::bad_request(format!(
            "the body of the request was not a Scale (kind {:?})",
            requested["kind"].as_str().unwrap_or_default()
        )));
    }
    write(shared, target, query, |_| Ok(requested.clone())).await
}
