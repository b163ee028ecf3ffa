//! PATCH: JSON patch, JSON merge patch and strategic merge patch applied to
//! the stored object in a read-modify-write that retries on conflicts, then
//! defaulted and validated like an update. A patched custom resource must
//! still name its kind, as Kubernetes decodes it.
//!
//! Server-side apply (`application/apply-patch+yaml`) is a PATCH too, as in
//! Kubernetes' `applyPatcher` (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go):
//! the registry's `apply` merges the configuration by field management; an
//! apply to an object that does not exist creates it (201). Every write
//! records its manager's fields in managedFields ([`manager`]).

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode, header};
use serde_json::Value;

use crate::body;
use crate::context::ApiState;
use crate::handlers::{modified, rewrite};
use crate::patch::{self, PatchError};
use crate::response::Body;
use crate::route::{Query, Target};
use crate::status::{ApiError, Cause};
use crate::validation::go_quote;

/// The patch types served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

fn patch_type(headers: &HeaderMap) -> Result<PatchType, ApiError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .unwrap_or_default();
    match ct.as_str() {
        "application/json-patch+json" => Ok(PatchType::Json),
        "application/merge-patch+json" => Ok(PatchType::Merge),
        "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
        "application/apply-patch+yaml" => Ok(PatchType::Apply),
        other => Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format ({other}) - accepted media types include: \
             application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, \
             application/apply-patch+yaml"
        ))),
    }
}

fn patch_error(e: PatchError) -> ApiError {
    match e {
        PatchError::Malformed(m) => ApiError::bad_request(format!("the patch is malformed: {m}")),
        PatchError::Unapplicable(m) => {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", format!("the patch cannot be applied: {m}"))
        }
    }
}

/// A patched custom resource without `kind`: Kubernetes decodes the patched
/// JSON as an unstructured object, which fails, and answers 422 for the field
/// `patch` with that JSON (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go
/// `applyPatchToCurrentObject`). A built-in type takes its kind from the URL.
fn kind_missing(patched: &Value) -> ApiError {
    let json = body::go_json(patched);
    let cause = Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {}: Object 'Kind' is missing in '{json}'", go_quote(&json)),
        field: "patch".into(),
    };
    let summary = format!("patch: {}", cause.message);
    ApiError::invalid_with_summary("", "", "", vec![cause], &[summary])
}

/// Handles a PATCH of `target`.
pub(crate) async fn patch(
    shared: &ApiState,
    target: &Target,
    query: &Query,
    headers: &HeaderMap,
    bytes: &Bytes,
) -> Result<Response<Body>, ApiError> {
    let res = target.resource;
    let format = body::response_format(headers, query)?;
    let ty = patch_type(headers)?;
    let scale = target.subresource.as_deref() == Some("scale");
    if ty == PatchType::Strategic && !scale && !patch::supports_strategic(res.group, res.kind) {
        return Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: \
             application/json-patch+json, application/merge-patch+json (strategic merge patch is not supported for {})",
            res.qualified()
        )));
    }
    let manager = manager_of(query, headers, "PatchOptions", ty == PatchType::Apply)?;
    let force = query.flag("force");
    if ty == PatchType::Apply && scale {
        return Err(ApiError::unsupported_media_type(
            "apply patches are not supported on the scale subresource; use application/merge-patch+json",
        ));
    }
    let directive = crate::fieldvalidation::directive(query, "PatchOptions")?;
    let doc: Value = if ty == PatchType::Apply {
        decode_config(bytes)?
    } else {
        serde_json::from_slice(bytes).map_err(|e| ApiError::bad_request(format!("the patch is not valid JSON: {e}")))?
    };
    let mut warnings = crate::fieldvalidation::patch_body(directive, bytes)?;
    let mut unknown = Vec::new();
    if ty != PatchType::Json && !doc.is_object() {
        return Err(ApiError::bad_request("the patch must be a JSON object"));
    }
    if ty == PatchType::Json && !doc.is_array() {
        return Err(ApiError::bad_request("a JSON patch must be an array of operations"));
    }
    let name = target.name.as_deref().unwrap_or_default();
    let apply = |mut patched: Value, group: &str, kind: &str| -> Result<Value, ApiError> {
        match ty {
            PatchType::Json => patch::json_patch(&mut patched, &doc),
            PatchType::Merge => {
                patch::merge_patch(&mut patched, &doc);
                Ok(())
            }
            PatchType::Strategic => patch::strategic_merge_patch(&mut patched, &doc, group, kind),
            // Merged by field management below, never here.
            PatchType::Apply => Err(PatchError::Malformed("an apply patch is not a merge of documents".into())),
        }
        .map_err(patch_error)?;
        Ok(patched)
    };
    if target.subresource.as_deref() == Some("scale") {
        // The patch applies to the Scale (a struct of scalars: strategic
        // merge is a merge patch there).
        return crate::scale::write(shared, target, query, |scale| apply(scale, "autoscaling", "Scale")).await;
    }
    let dry_run = body::dry_run(query)?;
    let custom = body::is_custom_resource(res);
    let served = shared.crds.get(res);
    let (api_version, now) = (res.api_version(), edgehive_store::now_rfc3339());
    let scope = managed_scope(target, &api_version);
    let written = rewrite(shared, target, &format, dry_run, |cur, old| {
        let mut patched = if ty == PatchType::Apply {
            edgehive_registry::apply::apply(&scope, Some(old), &doc, name, &manager, force, &now)?
        } else {
            let mut patched = apply(old.clone(), res.group, res.kind)?;
            edgehive_registry::apply::record_update(&scope, Some(old), &mut patched, &manager, &now);
            patched
        };
        unknown = match &served {
            Some(s) => crate::fieldvalidation::custom_patched(directive, s, &mut patched)?,
            None => crate::fieldvalidation::patched(directive, res, old, &mut patched)?,
        };
        if custom && patched.get("kind").and_then(Value::as_str).is_none_or(str::is_empty) {
            return Err(kind_missing(&patched));
        }
        // A resourceVersion in the patch is a precondition.
        if patched
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|rv| rv != cur.rev().to_string())
        {
            return Err(modified(res, name));
        }
        if patched.pointer("/metadata/name").and_then(Value::as_str) != Some(name) {
            return Err(ApiError::bad_request("metadata.name may not be changed by a patch"));
        }
        Ok(patched)
    })
    .await;
    let missing = matches!(&written, Err(e) if e.code == StatusCode::NOT_FOUND && e.reason == "NotFound");
    if ty == PatchType::Apply && missing {
        // Apply creates what does not exist (the patcher's `forceAllowCreate`).
        let mut obj = edgehive_registry::apply::apply(&scope, None, &doc, name, &manager, force, &now)?;
        crate::handlers::check_identity(res, target, &mut obj)?;
        let empty = Value::Object(serde_json::Map::new());
        let mut unknown = match &served {
            Some(s) => crate::fieldvalidation::custom_patched(directive, s, &mut obj)?,
            None => crate::fieldvalidation::patched(directive, res, &empty, &mut obj)?,
        };
        warnings.append(&mut unknown);
        return crate::handlers::create_object(shared, target, query, format, obj, warnings, None).await;
    }
    warnings.append(&mut unknown);
    crate::fieldvalidation::with_warnings(written, &warnings)
}

/// The scope of field management for a write to `target`.
pub(crate) fn managed_scope<'a>(target: &'a Target, api_version: &'a str) -> edgehive_registry::apply::Scope<'a> {
    let res = target.resource;
    edgehive_registry::apply::Scope {
        group: res.group,
        kind: res.kind,
        api_version,
        subresource: target.subresource.as_deref(),
        status_subresource: res.status_subresource,
    }
}

/// The field manager of a create or update (`options` names its options
/// kind): checked as Kubernetes checks `fieldManager`, else derived from the
/// User-Agent.
pub(crate) fn manager(query: &Query, headers: &HeaderMap, options: &str) -> Result<String, ApiError> {
    manager_of(query, headers, options, false)
}

fn manager_of(query: &Query, headers: &HeaderMap, options: &str, apply: bool) -> Result<String, ApiError> {
    let field_manager = query.get("fieldManager");
    let force = if options == "PatchOptions" { query.get("force") } else { None };
    edgehive_registry::apply::check_options(options, field_manager, apply, force)?;
    let agent = headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok());
    Ok(edgehive_registry::apply::manager_name(field_manager, agent))
}

/// An apply patch's body: YAML (JSON is YAML) holding one object, refused
/// as Kubernetes' YAML decoder refuses anything else.
fn decode_config(bytes: &[u8]) -> Result<Value, ApiError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| ApiError::bad_request("error decoding YAML: invalid UTF-8 in the patch"))?;
    if text.trim().is_empty() {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    let v: Value =
        serde_saphyr::from_str(text).map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    let what = match &v {
        Value::Object(_) => return Ok(v),
        Value::Null => return Ok(Value::Object(serde_json::Map::new())),
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
    };
    Err(ApiError::bad_request(format!(
        "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {what} into Go value of type map[string]interface {{}}"
    )))
}
