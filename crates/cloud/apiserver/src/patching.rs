//! PATCH: JSON patch, JSON merge patch and strategic merge patch applied to
//! the stored object in a read-modify-write that retries on conflicts, then
//! defaulted and validated like an update. A patched custom resource must
//! still name its kind, as Kubernetes decodes it.

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
        other => Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format ({other}) - accepted media types include: \
             application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json"
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
    let directive = crate::fieldvalidation::directive(query, "PatchOptions")?;
    let doc: Value = serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("the patch is not valid JSON: {e}")))?;
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
    let written = rewrite(shared, target, &format, dry_run, |cur, old| {
        let mut patched = apply(old.clone(), res.group, res.kind)?;
        unknown = crate::fieldvalidation::patched(directive, res, old, &mut patched)?;
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
    warnings.append(&mut unknown);
    crate::fieldvalidation::with_warnings(written, &warnings)
}
