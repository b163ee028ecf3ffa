//! The verbs: get, list, watch, create, update, patch, delete and
//! deletecollection on every served resource, plus the non-resource
//! endpoints (discovery, OpenAPI, metrics).

use std::sync::Arc;

use bytes::Bytes;
use edgehive_store::resources::{NAMESPACES, ResourceDef};
use edgehive_store::{
    DeleteOptions, DeleteOutcome, ListOptions, Object, Propagation, Store, StoreError, WatchEnd, WatchOptions,
    WatchStart,
};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use serde_json::{Value, json};

use crate::body::{self, Format};
use crate::context::ApiState;
use crate::discovery;
use crate::response::{Body, json_response, value_response};
use crate::route::{Query, Route, Target};
use crate::status::{ApiError, Cause};

/// Namespaces that always exist and may not be deleted.
pub(crate) const SYSTEM_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// Creates the system namespaces if they are missing.
pub(crate) async fn bootstrap(store: &Store) -> Result<(), StoreError> {
    for ns in SYSTEM_NAMESPACES {
        let mut obj = json!({"metadata": {"name": ns}});
        crate::defaults::apply_defaults("", "Namespace", &mut obj);
        match store.create(&NAMESPACES, obj).await {
            Ok(_) | Err(StoreError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e),
        }
        crate::serviceaccounts::ensure_default(store, ns).await?;
    }
    Ok(())
}

pub(crate) fn store_err(res: &ResourceDef) -> impl Fn(StoreError) -> ApiError + '_ {
    move |e| ApiError::from_store(e, res.plural, res.group)
}

/// Discovery, OpenAPI and metrics.
pub(crate) fn non_resource(shared: &ApiState, route: &Route, headers: &HeaderMap) -> Result<Response<Body>, ApiError> {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    let ok = |v: Value| Ok(value_response(StatusCode::OK, &v));
    let cat = || discovery::Catalog::of(shared);
    match route {
        Route::Version => ok(discovery::version()),
        Route::CoreVersions | Route::Groups => {
            if let Some(mt) = discovery::aggregated_media_type(accept) {
                let v = discovery::aggregated(&cat(), matches!(route, Route::CoreVersions), mt);
                let mut r = value_response(StatusCode::OK, &v);
                r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(mt));
                return Ok(r);
            }
            if matches!(route, Route::CoreVersions) {
                ok(discovery::core_versions(&shared.address))
            } else {
                ok(discovery::group_list(&cat()))
            }
        }
        Route::Group(g) => discovery::group(&cat(), g).map_or_else(|| Err(ApiError::no_route()), ok),
        Route::ResourceList { group, version } => ok(discovery::resource_list(&cat(), group, version)),
        Route::OpenApiIndex => ok(discovery::openapi_index(&cat())),
        Route::OpenApiV2 => Ok(crate::fieldvalidation::openapi_v2(accept, &crate::crd::openapi::all(&shared.crds))),
        Route::OpenApiGroupVersion { group, version } => {
            discovery::openapi_group_version(&cat(), group, version).map_or_else(|| Err(ApiError::no_route()), ok)
        }
        Route::Metrics => {
            let mut r = json_response(StatusCode::OK, Bytes::from(shared.metrics.render()));
            r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(crate::metrics::CONTENT_TYPE));
            Ok(r)
        }
        Route::Health | Route::Resource(_) | Route::ResourceMetrics(_) | Route::NodeProxy { .. } | Route::Review(_) => {
            Err(ApiError::no_route())
        }
    }
}

/// Every resource verb but watch.
pub(crate) async fn resource(
    shared: &ApiState,
    verb: &str,
    target: &Target,
    query: &Query,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let format = body::response_format(req.headers(), query)?.for_custom(shared.crds.get(target.resource));
    if target.subresource.as_deref() == Some("eviction") {
        if verb != "create" {
            return Err(ApiError::method_not_allowed(format!(
                "verb {verb} is not supported on the eviction subresource"
            )));
        }
        let (parts, bytes) = crate::body::read_body(req, shared.config.max_body_bytes).await?;
        return crate::eviction::create(shared, target, query, &parts.headers, &bytes).await;
    }
    if target.subresource.as_deref() == Some("token") {
        if verb != "create" {
            return Err(ApiError::method_not_allowed(format!("verb {verb} is not supported on the token subresource")));
        }
        let (parts, bytes) = crate::body::read_body(req, shared.config.max_body_bytes).await?;
        return crate::tokenrequest::create(shared, target, &parts.headers, &bytes).await;
    }
    if target.subresource.as_deref() == Some("scale") {
        return match verb {
            "get" => crate::scale::get(shared, target).await,
            "update" => {
                let (parts, bytes) = crate::body::read_body(req, shared.config.max_body_bytes).await?;
                crate::scale::update(shared, target, query, &parts.headers, &bytes).await
            }
            "patch" => {
                let (parts, bytes) = crate::body::read_body(req, shared.config.max_body_bytes).await?;
                crate::patching::patch(shared, target, query, &parts.headers, &bytes).await
            }
            _ => Err(ApiError::method_not_allowed(format!("verb {verb} is not supported on the scale subresource"))),
        };
    }
    let result = match verb {
        "get" => get(shared, target, query, &format).await,
        "list" => list(shared, target, query, &format).await,
        "create" => {
            let (parts, bytes) = crate::body::read_body(req, shared.config.max_body_bytes).await?;
            create(shared, target, query, &parts.headers, &bytes).await
        }
        "update" => {
            let (parts, bytes) = crate::body::read_body(req, shared.config.max_body_bytes).await?;
            update(shared, target, query, &parts.headers, &bytes).await
        }
        "patch" => {
            let (parts, bytes) = crate::body::read_body(req, shared.config.max_body_bytes).await?;
            crate::patching::patch(shared, target, query, &parts.headers, &bytes).await
        }
        "delete" => {
            let (parts, bytes) = crate::body::read_body(req, shared.config.max_body_bytes).await?;
            delete(shared, target, query, &parts.headers, &bytes).await
        }
        "deletecollection" => {
            let (parts, bytes) = crate::body::read_body(req, shared.config.max_body_bytes).await?;
            delete_collection(shared, target, query, &parts.headers, &bytes).await
        }
        _ => Err(ApiError::method_not_allowed(format!("verb {verb} is not supported"))),
    };
    // A deprecated version of a custom resource says so with every answer.
    match shared.crds.get(target.resource).and_then(|s| s.warning.clone()) {
        Some(w) => crate::fieldvalidation::with_warnings(result, &[w]),
        None => result,
    }
}

/// Responds with one object in the requested format.
pub(crate) fn object_response(code: StatusCode, obj: &Object, format: &Format) -> Result<Response<Body>, ApiError> {
    match format {
        Format::Json => {
            Ok(json_response(code, crate::conversion::object_json(obj).map_err(store_err(obj.resource()))?))
        }
        Format::Table(t) => {
            Ok(value_response(code, &t.table(obj.resource(), std::slice::from_ref(obj), obj.rev(), None)))
        }
    }
}

fn name_of(target: &Target) -> &str {
    target.name.as_deref().unwrap_or_default()
}

fn ns_of(target: &Target) -> &str {
    target.namespace.as_deref().unwrap_or_default()
}

async fn get(shared: &ApiState, target: &Target, query: &Query, format: &Format) -> Result<Response<Body>, ApiError> {
    let res = target.resource;
    if let Some(rv) = query.resource_version()? {
        // At least as fresh as `rv`, as Kubernetes' watch cache serves it.
        shared.store.wait_for_revision(rv).await.map_err(ApiError::too_large_resource_version)?;
    }
    let obj = shared.store.get(res, ns_of(target), name_of(target)).await.map_err(store_err(res))?;
    if let Err(e) = obj.json() {
        tracing::error!(key = obj.key(), error = %e, "stored object is corrupt");
        return Err(ApiError::internal(e.to_string()));
    }
    object_response(StatusCode::OK, &obj, format)
}

/// Label and field selectors from the query; syntax errors are 400s.
pub(crate) fn selectors(
    res: &ResourceDef,
    query: &Query,
) -> Result<(edgehive_store::selector::LabelSelector, edgehive_store::selector::FieldSelector), ApiError> {
    let labels = edgehive_store::selector::LabelSelector::parse(query.get("labelSelector").unwrap_or(""))
        .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?;
    let fields = edgehive_store::selector::FieldSelector::parse(query.get("fieldSelector").unwrap_or(""))
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    for f in fields.fields() {
        if !res.supports_field(f) {
            return Err(ApiError::bad_request(format!("field label not supported: {f}")));
        }
    }
    Ok((labels, fields))
}

async fn list(shared: &ApiState, target: &Target, query: &Query, format: &Format) -> Result<Response<Body>, ApiError> {
    let res = target.resource;
    let (labels, fields) = selectors(res, query)?;
    let limit = query.uint("limit")?.unwrap_or(0);
    let opts = ListOptions {
        namespace: target.namespace.clone(),
        labels,
        fields,
        limit: usize::try_from(limit).unwrap_or(usize::MAX),
        continue_token: query.get("continue").map(str::to_string),
        resource_version: query.resource_version()?,
        exact: query.get("resourceVersionMatch") == Some("Exact"),
    };
    // Not older than `rv` (a continue token carries its own revision): wait
    // for it as Kubernetes' watch cache does, then answer its 504.
    if let Some(rv) = opts.resource_version.filter(|_| !opts.exact && opts.continue_token.is_none()) {
        shared.store.wait_for_revision(rv).await.map_err(ApiError::too_large_resource_version)?;
    }
    let list = shared.store.list(res, &opts).await.map_err(store_err(res))?;
    match format {
        Format::Table(t) => {
            Ok(value_response(StatusCode::OK, &t.table(res, &list.items, list.rev, list.continue_token.as_deref())))
        }
        Format::Json => {
            let mut out = Vec::with_capacity(128 + list.items.iter().map(|o| o.raw().len() + 32).sum::<usize>());
            out.extend_from_slice(b"{\"kind\":\"");
            out.extend_from_slice(res.kind.as_bytes());
            out.extend_from_slice(b"List\",\"apiVersion\":\"");
            out.extend_from_slice(res.api_version().as_bytes());
            out.extend_from_slice(b"\",\"metadata\":{\"resourceVersion\":\"");
            out.extend_from_slice(list.rev.to_string().as_bytes());
            out.push(b'"');
            if let Some(c) = &list.continue_token {
                out.extend_from_slice(b",\"continue\":");
                out.extend_from_slice(&serde_json::to_vec(c).unwrap_or_default());
            }
            out.extend_from_slice(b"},\"items\":[");
            let mut first = true;
            for obj in &list.items {
                // The list already skipped objects that do not encode.
                let Ok(j) = crate::conversion::object_json(obj) else { continue };
                if !first {
                    out.push(b',');
                }
                first = false;
                out.extend_from_slice(&j);
            }
            out.extend_from_slice(b"]}");
            Ok(json_response(StatusCode::OK, Bytes::from(out)))
        }
    }
}

/// Checks the decoded body's apiVersion/kind and namespace against the
/// request, filling them in where absent.
pub(crate) fn check_identity(res: &ResourceDef, target: &Target, obj: &mut Value) -> Result<(), ApiError> {
    let Some(map) = obj.as_object_mut() else {
        return Err(ApiError::bad_request(format!("the body must be a {} object", res.kind)));
    };
    let want = res.api_version();
    // A built-in type takes a missing apiVersion from the URL; a custom
    // resource keeps the empty one it was decoded with, which does not match.
    let given = map.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if given != want && (!given.is_empty() || body::is_custom_resource(res)) {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({given}) does not match the expected API version ({want})"
        )));
    }
    match map.get("kind").and_then(Value::as_str) {
        Some(k) if !k.is_empty() && k != res.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                res.kind
            )));
        }
        _ => {}
    }
    map.insert("apiVersion".into(), Value::String(want));
    map.insert("kind".into(), Value::String(res.kind.into()));
    let meta = map.entry("metadata").or_insert_with(|| json!({}));
    let Some(meta) = meta.as_object_mut() else {
        return Err(ApiError::bad_request("metadata must be an object"));
    };
    if res.namespaced {
        let url_ns = target.namespace.as_deref().unwrap_or("");
        match meta.get("namespace").and_then(Value::as_str) {
            Some(ns) if !ns.is_empty() && ns != url_ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                meta.insert("namespace".into(), Value::String(url_ns.into()));
            }
        }
    } else {
        meta.remove("namespace");
    }
    if let Some(url_name) = &target.name {
        match meta.get("name").and_then(Value::as_str) {
            Some(n) if n != url_name => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({url_name})"
                )));
            }
            _ => {
                meta.insert("name".into(), Value::String(url_name.clone()));
            }
        }
    }
    Ok(())
}

/// Fails unless namespace `ns` exists and is not terminating.
pub(crate) async fn check_namespace(store: &Store, ns: &str) -> Result<(), ApiError> {
    let obj = store.get(&NAMESPACES, "", ns).await.map_err(store_err(&NAMESPACES))?;
    let phase = obj.value().ok().and_then(|v| v.pointer("/status/phase")).and_then(Value::as_str);
    if phase == Some("Terminating") {
        return Err(ApiError::forbidden(format!(
            "unable to create new content in namespace {ns} because it is being terminated"
        )));
    }
    Ok(())
}

async fn create(
    shared: &ApiState,
    target: &Target,
    query: &Query,
    headers: &HeaderMap,
    bytes: &Bytes,
) -> Result<Response<Body>, ApiError> {
    let res = target.resource;
    let format = body::response_format(headers, query)?;
    let (mut obj, mut warnings) = crate::fieldvalidation::decode(res, query, headers, bytes, "CreateOptions")?;
    if let Some(served) = shared.crds.get(res) {
        warnings.extend(crate::fieldvalidation::custom(query, "CreateOptions", &served, bytes, &mut obj)?);
    }
    body::check_type_meta(res, query, headers, bytes, &obj)?;
    check_identity(res, target, &mut obj)?;
    let manager = crate::patching::manager(query, headers, "CreateOptions")?;
    create_object(shared, target, query, format, obj, warnings, Some(manager)).await
}

/// [`create`] of a decoded object whose identity is checked. `manager`
/// records its fields as that manager's update in managedFields; `None`
/// leaves the managedFields it carries (a server-side apply's).
pub(crate) async fn create_object(
    shared: &ApiState,
    target: &Target,
    query: &Query,
    format: Format,
    mut obj: Value,
    warnings: Vec<String>,
    manager: Option<String>,
) -> Result<Response<Body>, ApiError> {
    let res = target.resource;
    let now = edgehive_store::now_rfc3339();
    // As Kubernetes' create strategies: the status of a new pod, service or
    // custom resource is the server's to set (nodes and namespaces keep theirs).
    if res.status_subresource
        && !matches!(res.kind, "Node" | "Namespace")
        && let Some(o) = obj.as_object_mut()
    {
        o.remove("status");
    }
    // As Kubernetes' `RetryGenerateName`: a name asked for with
    // `generateName` is chosen before admission (a Job's labels carry it),
    // and chosen again, up to 8 times, while the one chosen is taken.
    let prefix = obj
        .pointer("/metadata/generateName")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty() && obj.pointer("/metadata/name").and_then(Value::as_str).is_none_or(str::is_empty))
        .map(str::to_string);
    let dry_run = body::dry_run(query)?;
    let mut attempts = 0;
    let created = loop {
        attempts += 1;
        let mut attempt = obj.clone();
        if let (Some(prefix), Some(meta)) = (&prefix, attempt.get_mut("metadata").and_then(Value::as_object_mut)) {
            meta.insert("name".into(), Value::String(edgehive_store::generate_name(prefix)));
        }
        crate::admit::create(res, &mut attempt)?;
        crate::crd::admit::admit(shared, res, &mut attempt, None)?;
        if let Some(m) = &manager {
            let api_version = res.api_version();
            let scope = crate::patching::managed_scope(target, &api_version);
            edgehive_registry::apply::record_update(&scope, None, &mut attempt, m, &now);
        }
        crate::rbac::escalation::check(&shared.authorizer, res, &attempt)?;
        if res.namespaced && attempts == 1 {
            check_namespace(&shared.store, ns_of(target)).await?;
        }
        // A Service's ClusterIP and NodePorts, given back if the write fails.
        let allocation = crate::services::allocate_create(shared, res, &mut attempt, dry_run).await?;
        let attempt = crate::conversion::to_stored(res, attempt)?;
        let retry = |e: &StoreError| matches!(e, StoreError::AlreadyExists { .. }) && prefix.is_some() && attempts < 8;
        if dry_run {
            // Everything create does but the write: uid, creationTimestamp,
            // generation, a generated name, a taken name refused.
            match shared.store.create_dry_run(res, attempt).await {
                Err(e) if retry(&e) => {
                    allocation.settle(shared, false).await;
                    continue;
                }
                r => {
                    let r = r.map_err(store_err(res)).map(|v| crate::conversion::from_stored(res, v));
                    let r = Ok(value_response(StatusCode::CREATED, &r?));
                    return crate::fieldvalidation::with_warnings(r, &warnings);
                }
            }
        }
        let written = shared.store.create(res, attempt).await;
        allocation.settle(shared, written.is_ok()).await;
        match written {
            Err(e) if retry(&e) => continue,
            r => break r.map_err(store_err(res))?,
        }
    };
    // The service account controller would make it too; made here, it is
    // there by the time the client hears of its namespace.
    if std::ptr::eq(res, &NAMESPACES)
        && let Err(e) = crate::serviceaccounts::ensure_default(&shared.store, created.name()).await
    {
        tracing::warn!(namespace = %created.name(), error = %e, "create the namespace's default service account");
    }
    crate::fieldvalidation::with_warnings(object_response(StatusCode::CREATED, &created, &format), &warnings)
}

/// Applies the request's changes to `cur`, as PUT does: the main resource
/// keeps the stored status (when there is a status subresource); `/status`
/// changes only the status.
pub(crate) fn merge_for_subresource(res: &ResourceDef, target: &Target, cur: &Value, mut new: Value) -> Value {
    if !res.status_subresource {
        return new;
    }
    if target.subresource.as_deref() == Some("status") {
        let mut out = cur.clone();
        match new.get_mut("status").map(Value::take) {
            Some(s) => out["status"] = s,
            None => {
                if let Some(o) = out.as_object_mut() {
                    o.remove("status");
                }
            }
        }
        out
    } else {
        match cur.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                if let Some(o) = new.as_object_mut() {
                    o.remove("status");
                }
            }
        }
        new
    }
}

async fn update(
    shared: &ApiState,
    target: &Target,
    query: &Query,
    headers: &HeaderMap,
    bytes: &Bytes,
) -> Result<Response<Body>, ApiError> {
    let res = target.resource;
    let format = body::response_format(headers, query)?;
    let (mut obj, mut warnings) = crate::fieldvalidation::decode(res, query, headers, bytes, "UpdateOptions")?;
    if let Some(served) = shared.crds.get(res) {
        warnings.extend(crate::fieldvalidation::custom(query, "UpdateOptions", &served, bytes, &mut obj)?);
    }
    body::check_type_meta(res, query, headers, bytes, &obj)?;
    check_identity(res, target, &mut obj)?;
    if target.subresource.as_deref() == Some("finalize") {
        return crate::namespaces::finalize(shared, target, obj).await;
    }
    let expected = match obj.pointer("/metadata/resourceVersion").and_then(Value::as_str) {
        Some(rv) if !rv.is_empty() => {
            Some(rv.parse::<u64>().map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv:?}")))?)
        }
        _ => None,
    };
    let dry_run = body::dry_run(query)?;
    let manager = crate::patching::manager(query, headers, "UpdateOptions")?;
    let (api_version, now) = (res.api_version(), edgehive_store::now_rfc3339());
    let scope = crate::patching::managed_scope(target, &api_version);
    let written = rewrite(shared, target, &format, dry_run, |cur, old| {
        if expected.is_some_and(|e| e != cur.rev()) {
            return Err(modified(res, name_of(target)));
        }
        let mut new = obj.clone();
        edgehive_registry::apply::record_update(&scope, Some(old), &mut new, &manager, &now);
        Ok(new)
    })
    .await;
    crate::fieldvalidation::with_warnings(written, &warnings)
}

/// 409: the object changed since the client read it.
pub(crate) fn modified(res: &ResourceDef, name: &str) -> ApiError {
    ApiError::from_store(
        StoreError::Conflict {
            resource: res.qualified(),
            name: name.to_string(),
            reason: "the object has been modified; please apply your changes to the latest version and try again"
                .into(),
        },
        res.plural,
        res.group,
    )
}

/// Why a read-modify-write ended: the store, or the request's own refusal.
enum Refused {
    Store(StoreError),
    Api(ApiError),
}

impl From<StoreError> for Refused {
    fn from(e: StoreError) -> Refused {
        Refused::Store(e)
    }
}

impl From<ApiError> for Refused {
    fn from(e: ApiError) -> Refused {
        Refused::Api(e)
    }
}

/// What a read-modify-write left: the stored object, or (dry run) the
/// object it would have stored.
pub(crate) enum Rewritten {
    Stored(Object),
    Preview(Value),
}

/// What PUT and PATCH share: a read-modify-write of `target` in which
/// `change(current, current value)` gives the object the request asks for;
/// then the status subresource rule, defaults and validation, and dry-run.
/// Conflicting writes are retried with a fresh read.
pub(crate) async fn rewrite(
    shared: &ApiState,
    target: &Target,
    format: &Format,
    dry_run: bool,
    change: impl FnMut(&Object, &Value) -> Result<Value, ApiError>,
) -> Result<Response<Body>, ApiError> {
    match rewrite_object(shared, target, dry_run, change).await? {
        Rewritten::Preview(p) => Ok(value_response(StatusCode::OK, &p)),
        Rewritten::Stored(updated) => object_response(StatusCode::OK, &updated, format),
    }
}

/// [`rewrite`], answering with what was written rather than a response.
pub(crate) async fn rewrite_object(
    shared: &ApiState,
    target: &Target,
    dry_run: bool,
    mut change: impl FnMut(&Object, &Value) -> Result<Value, ApiError>,
) -> Result<Rewritten, ApiError> {
    let res = target.resource;
    if std::ptr::eq(res, &edgehive_store::resources::SERVICES) && target.subresource.is_none() {
        return crate::services::rewrite(shared, target, dry_run, change).await;
    }
    let mut preview = None;
    let updated = shared
        .store
        .update_with(res, ns_of(target), name_of(target), |cur| {
            // The request's version's view of the stored object, changed and admitted, then stored.
            let old_view = crate::conversion::view(res, cur.value()?);
            let old = &*old_view;
            let requested = change(cur, old)?;
            let mut new = merge_for_subresource(res, target, old, requested);
            crate::admit::update(res, &mut new, old)?;
            crate::crd::admit::admit(shared, res, &mut new, Some(old))?;
            crate::rbac::escalation::check(&shared.authorizer, res, &new)?;
            if dry_run {
                preview = Some(new);
                return Ok(None);
            }
            Ok(Some(crate::conversion::to_stored(res, new)?))
        })
        .await
        .map_err(|e| match e {
            Refused::Store(e) => store_err(res)(e),
            Refused::Api(e) => e,
        })?;
    Ok(match preview {
        Some(p) => Rewritten::Preview(p),
        None => Rewritten::Stored(updated),
    })
}

/// DeleteOptions from the body and the query.
fn delete_options(query: &Query, headers: &HeaderMap, bytes: &Bytes) -> Result<(DeleteOptions, bool), ApiError> {
    if bytes.is_empty() {
        return delete_options_of(query, None);
    }
    let v: Value = if body::content_type(headers) == "application/vnd.kubernetes.protobuf" {
        crate::protobuf::decode(bytes)
            .map(|(_, _, v)| v)
            .map_err(|e| ApiError::bad_request(format!("decode DeleteOptions: {e}")))?
    } else {
        serde_json::from_slice(bytes).map_err(|e| ApiError::bad_request(format!("decode DeleteOptions: {e}")))?
    };
    delete_options_of(query, Some(&v))
}

/// DeleteOptions from a decoded body (`None`: none sent) and the query; with whether it is a dry run.
pub(crate) fn delete_options_of(query: &Query, body: Option<&Value>) -> Result<(DeleteOptions, bool), ApiError> {
    let mut opts = DeleteOptions::default();
    let mut dry_run = body::dry_run(query)?;
    let mut orphan_dependents = None;
    if let Some(v) = body {
        if !v.is_object() {
            return Err(ApiError::bad_request("DeleteOptions must be an object"));
        }
        if let Some(g) = v.get("gracePeriodSeconds").filter(|g| !g.is_null()) {
            opts.grace_period_seconds =
                Some(g.as_i64().ok_or_else(|| ApiError::bad_request("gracePeriodSeconds must be an integer"))?);
        }
        if let Some(uid) = v.pointer("/preconditions/uid").and_then(Value::as_str) {
            opts.uid = Some(uid.to_string());
        }
        if let Some(rv) = v.pointer("/preconditions/resourceVersion").and_then(Value::as_str) {
            opts.resource_version =
                Some(rv.parse().map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv:?}")))?);
        }
        if let Some(d) = v.get("dryRun").and_then(Value::as_array) {
            dry_run |= d.iter().any(|x| x == "All");
        }
        if let Some(p) = v.get("propagationPolicy").filter(|p| !p.is_null()) {
            opts.propagation = Some(propagation(p.as_str().unwrap_or_default())?);
        }
        if let Some(orphan) = v.get("orphanDependents").and_then(Value::as_bool) {
            orphan_dependents = Some(orphan);
        }
    }
    if let Some(p) = query.get("propagationPolicy").filter(|p| !p.is_empty()) {
        opts.propagation = Some(propagation(p)?);
    }
    if let Some(o) = query.get("orphanDependents").filter(|o| !o.is_empty()) {
        orphan_dependents = Some(o == "true");
    }
    if let Some(orphan) = orphan_dependents {
        // The deprecated form; both at once is refused, as Kubernetes does.
        if let Some(p) = opts.propagation {
            return Err(ApiError::invalid(
                "DeleteOptions",
                "",
                "",
                vec![Cause {
                    reason: "FieldValueInvalid".into(),
                    message: format!(
                        "Invalid value: {:?}: orphanDependents and deletionPropagation cannot be both set",
                        p.name()
                    ),
                    field: "propagationPolicy".into(),
                }],
            ));
        }
        opts.propagation = Some(if orphan { Propagation::Orphan } else { Propagation::Background });
    }
    if let Some(g) = query.int("gracePeriodSeconds")? {
        opts.grace_period_seconds = Some(g);
    }
    if opts.grace_period_seconds.is_some_and(|g| g < 0) {
        return Err(ApiError::invalid(
            "DeleteOptions",
            "",
            "",
            vec![Cause {
                reason: "FieldValueInvalid".into(),
                message: "gracePeriodSeconds: Invalid value: must be >= 0".into(),
                field: "gracePeriodSeconds".into(),
            }],
        ));
    }
    Ok((opts, dry_run))
}

/// A `propagationPolicy`, or Kubernetes' refusal of another value.
fn propagation(p: &str) -> Result<Propagation, ApiError> {
    Propagation::parse(p).ok_or_else(|| {
        ApiError::invalid(
            "DeleteOptions",
            "",
            "",
            vec![Cause {
                reason: "FieldValueNotSupported".into(),
                message: format!(
                    "Unsupported value: {}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"",
                    crate::validation::go_quote(p)
                ),
                field: "propagationPolicy".into(),
            }],
        )
    })
}

fn success_status(obj: &Object) -> Value {
    let res = obj.resource();
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": {"name": obj.name(), "group": res.group, "kind": res.plural, "uid": obj.uid().unwrap_or_default()},
    })
}

async fn delete(
    shared: &ApiState,
    target: &Target,
    query: &Query,
    headers: &HeaderMap,
    bytes: &Bytes,
) -> Result<Response<Body>, ApiError> {
    let res = target.resource;
    let (opts, dry_run) = delete_options(query, headers, bytes)?;
    if std::ptr::eq(res, &NAMESPACES) {
        return crate::namespaces::delete(shared, name_of(target), dry_run).await;
    }
    if dry_run {
        let cur = shared.store.get(res, ns_of(target), name_of(target)).await.map_err(store_err(res))?;
        return object_response(StatusCode::OK, &cur, &Format::Json);
    }
    if std::ptr::eq(res, &edgehive_store::resources::CUSTOM_RESOURCE_DEFINITIONS) {
        // Its objects go first (the definition's controller deletes them).
        crate::crd::prepare_delete(&shared.store, name_of(target)).await.map_err(store_err(res))?;
    }
    let outcome = shared.store.delete(res, ns_of(target), name_of(target), &opts).await.map_err(store_err(res))?;
    if let DeleteOutcome::Deleted(o) = &outcome {
        crate::services::deleted(shared, o).await;
    }
    match outcome {
        DeleteOutcome::Pending(o) => object_response(StatusCode::OK, &o, &Format::Json),
        DeleteOutcome::Deleted(o) if res.graceful => object_response(StatusCode::OK, &o, &Format::Json),
        DeleteOutcome::Deleted(o) => Ok(value_response(StatusCode::OK, &success_status(&o))),
    }
}

async fn delete_collection(
    shared: &ApiState,
    target: &Target,
    query: &Query,
    headers: &HeaderMap,
    bytes: &Bytes,
) -> Result<Response<Body>, ApiError> {
    let res = target.resource;
    if std::ptr::eq(res, &NAMESPACES) {
        return Err(ApiError::method_not_allowed("namespaces cannot be deleted as a collection"));
    }
    let (opts, dry_run) = delete_options(query, headers, bytes)?;
    let (labels, fields) = selectors(res, query)?;
    let list = shared
        .store
        .list(res, &ListOptions { namespace: target.namespace.clone(), labels, fields, ..ListOptions::default() })
        .await
        .map_err(store_err(res))?;
    let mut items = Vec::new();
    for obj in &list.items {
        if dry_run {
            items.push(obj.clone());
            continue;
        }
        if std::ptr::eq(res, &edgehive_store::resources::CUSTOM_RESOURCE_DEFINITIONS) {
            match crate::crd::prepare_delete(&shared.store, obj.name()).await {
                Ok(()) | Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err(ApiError::from_store(e, res.plural, res.group)),
            }
        }
        match shared.store.delete(res, obj.namespace(), obj.name(), &opts).await {
            Ok(out) => {
                if let DeleteOutcome::Deleted(o) = &out {
                    crate::services::deleted(shared, o).await;
                }
                items.push(out.object().clone());
            }
            Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(ApiError::from_store(e, res.plural, res.group)),
        }
    }
    let values: Vec<Value> =
        items.iter().filter_map(|o| o.value().ok().map(|v| crate::conversion::from_stored(res, v.clone()))).collect();
    Ok(value_response(
        StatusCode::OK,
        &json!({"kind": format!("{}List", res.kind), "apiVersion": res.api_version(), "metadata": {}, "items": values}),
    ))
}

/// A watch, streamed as JSON lines (or Table events) until its timeout.
pub(crate) async fn watch(
    shared: &Arc<ApiState>,
    target: &Target,
    query: &Query,
    headers: &HeaderMap,
) -> Result<Response<Body>, ApiError> {
    let res = target.resource;
    let format = body::response_format(headers, query)?.for_custom(shared.crds.get(res));
    let (labels, mut fields) = selectors(res, query)?;
    let mut name = fields.exact_value("metadata.name").map(str::to_string);
    if let Some(n) = &target.name {
        // The legacy `/watch/.../{name}` form.
        name = Some(n.clone());
        fields = edgehive_store::selector::FieldSelector::default();
    }
    let filter =
        edgehive_store::WatchFilter { resource: res, namespace: target.namespace.clone(), name, labels, fields };
    let bookmarks = query.flag("allowWatchBookmarks");
    let start = if query.flag("sendInitialEvents") {
        if !bookmarks {
            return Err(ApiError::bad_request("sendInitialEvents requires allowWatchBookmarks=true"));
        }
        // The initial state must be at least as fresh as `resourceVersion`:
        // Kubernetes' watch cache waits for it, then fails the watch with an
        // ERROR event (cacher.go `waitUntilWatchCacheFreshAndForceAllEvents`).
        if let Some(rv) = query.resource_version()?
            && let Err(e) = shared.store.wait_for_revision(rv).await
        {
            return Ok(error_event(&ApiError::too_large_resource_version(e)));
        }
        WatchStart::InitialState { end_bookmark: true }
    } else {
        match query.resource_version()? {
            // Kubernetes accepts a plain watch from a revision not reached
            // yet and waits for events, which strands a client whose
            // revision came from before a restore of an older database (it
            // never hears of anything again). Here it gets the same wait and
            // then the same ERROR event as a read "not older than" that
            // revision, so a reflector lists again and recovers.
            Some(rv) => match shared.store.wait_for_revision(rv).await {
                Ok(()) => WatchStart::After(rv),
                Err(e) => return Ok(error_event(&ApiError::too_large_resource_version(e))),
            },
            None => WatchStart::InitialState { end_bookmark: false },
        }
    };
    let timeout = match query.uint("timeoutSeconds")? {
        Some(s) => std::time::Duration::from_secs(s),
        None => {
            let min = shared.config.min_watch_timeout;
            min + min.mul_f64(fastrand::f64())
        }
    };
    let mut watch = match shared.store.watch(WatchOptions { filter, start, bookmarks }).await {
        Ok(w) => w,
        // As Kubernetes: a 200 whose stream carries one ERROR event with the
        // 410 Status.
        Err(StoreError::Expired(m)) => return Ok(error_event(&ApiError::new(StatusCode::GONE, "Expired", m))),
        Err(e) => return Err(ApiError::from_store(e, res.plural, res.group)),
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    let stop = shared.stop.clone();
    let table = match &format {
        crate::body::Format::Table(t) => Some(t.clone()),
        crate::body::Format::Json => None,
    };
    tokio::spawn(async move {
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut first = true;
        loop {
            let ev = tokio::select! {
                _ = &mut deadline => break,
                _ = stop.cancelled() => break,
                _ = tx.closed() => break,
                ev = watch.next() => ev,
            };
            let line = match ev {
                Ok(ev) => {
                    if ev.ty == edgehive_store::EventType::Bookmark && !bookmarks {
                        continue;
                    }
                    match &table {
                        Some(t) => t.watch_line(res, &ev, first),
                        None => crate::conversion::watch_line(res, &ev),
                    }
                }
                Err(WatchEnd::Expired(m)) => {
                    let status = ApiError::new(StatusCode::GONE, "Expired", m).to_status();
                    let _ = tx.send(Bytes::from(json!({"type": "ERROR", "object": status}).to_string() + "\n")).await;
                    break;
                }
                Err(WatchEnd::Lagged | WatchEnd::Closed) => break,
            };
            match line {
                Ok(l) => {
                    first = false;
                    if tx.send(l).await.is_err() {
                        break;
                    }
                }
                Err(e) => tracing::error!(error = %e, "skipping a watch event that does not encode"),
            }
        }
    });
    Ok(streaming_response(rx))
}

/// A watch that ends at once with one ERROR event carrying `e`'s Status.
fn error_event(e: &ApiError) -> Response<Body> {
    let line = json!({"type": "ERROR", "object": e.to_status()}).to_string() + "\n";
    streaming_response(stream_once(Bytes::from(line)))
}

fn stream_once(line: Bytes) -> tokio::sync::mpsc::Receiver<Bytes> {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let _ = tx.try_send(line);
    rx
}

fn streaming_response(rx: tokio::sync::mpsc::Receiver<Bytes>) -> Response<Body> {
    let mut r = Response::new(Body::Stream(rx));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    r
}
