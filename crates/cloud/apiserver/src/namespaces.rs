//! Namespace lifecycle, as Kubernetes runs it: deleting a namespace marks it
//! `Terminating` (new content is refused), a controller deletes everything in
//! it, removes the `kubernetes` finalizer, and the namespace goes.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use edgehive_store::resources::{NAMESPACES, ResourceDef};
use edgehive_store::{DeleteOptions, ListOptions, Store, StoreError, WatchFilter, WatchOptions, WatchStart};
use http::{Response, StatusCode};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::body::Format;
use crate::context::ApiState;
use crate::handlers::object_response;
use crate::response::{Body, value_response};
use crate::route::Target;
use crate::status::ApiError;

const PROTECTED: &[&str] = &["default", "kube-system", "kube-public"];

fn err(e: StoreError) -> ApiError {
    ApiError::from_store(e, "namespaces", "")
}

/// DELETE of a namespace.
pub(crate) async fn delete(shared: &ApiState, name: &str, dry_run: bool) -> Result<Response<Body>, ApiError> {
    if PROTECTED.contains(&name) {
        return Err(ApiError::forbidden(format!(
            "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
        ))
        .details(name, "", "namespaces"));
    }
    let store = &shared.store;
    if dry_run {
        let cur = store.get(&NAMESPACES, "", name).await.map_err(err)?;
        return object_response(StatusCode::OK, &cur, &Format::Json);
    }
    // Gone at once, or marked Terminating (in the same write) for the
    // controller to empty and remove.
    let outcome = store.delete(&NAMESPACES, "", name, &DeleteOptions::default()).await.map_err(err)?;
    object_response(StatusCode::OK, outcome.object(), &Format::Json)
}

/// PUT `/api/v1/namespaces/{name}/finalize`: replaces `spec.finalizers`.
pub(crate) async fn finalize(shared: &ApiState, target: &Target, obj: Value) -> Result<Response<Body>, ApiError> {
    let name = target.name.as_deref().unwrap_or_default();
    let finalizers = obj.pointer("/spec/finalizers").cloned().unwrap_or_else(|| json!([]));
    if !finalizers.is_array() {
        return Err(ApiError::bad_request("spec.finalizers must be a list"));
    }
    let updated = shared
        .store
        .update_with(&NAMESPACES, "", name, |cur| {
            let mut v = cur.to_value()?;
            v["spec"]["finalizers"] = finalizers.clone();
            Ok(Some(v))
        })
        .await
        .map_err(err)?;
    match updated.value() {
        Ok(v) => Ok(value_response(StatusCode::OK, v)),
        Err(e) => Err(ApiError::internal(e.to_string())),
    }
}

/// Empties namespace `name` and removes its `kubernetes` finalizer; returns
/// whether it is done.
async fn clean(store: &Store, name: &str) -> Result<bool, StoreError> {
    // Every namespaced storage once (custom resources too; a resource served
    // at several versions, or as a view of another, is one storage).
    let mut storages: Vec<&'static ResourceDef> = Vec::new();
    for res in store.resources().all().into_iter().filter(|r| r.namespaced) {
        if !storages.iter().any(|s| s.storage == res.storage) {
            storages.push(res);
        }
    }
    let mut left = 0usize;
    for &res in &storages {
        let list =
            store.list(res, &ListOptions { namespace: Some(name.to_string()), ..ListOptions::default() }).await?;
        for obj in &list.items {
            left += 1;
            let opts = DeleteOptions { grace_period_seconds: Some(0), ..DeleteOptions::default() };
            match store.delete(res, name, obj.name(), &opts).await {
                Ok(_) | Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
    }
    if left > 0 {
        // Deleted now, or waiting on their own finalizers: look again.
        for &res in &storages {
            let list = store
                .list(res, &ListOptions { namespace: Some(name.to_string()), limit: 1, ..ListOptions::default() })
                .await?;
            if !list.items.is_empty() {
                return Ok(false);
            }
        }
    }
    let done = store
        .update_with(&NAMESPACES, "", name, |cur| {
            let mut v = cur.to_value()?;
            let Some(f) = v.pointer_mut("/spec/finalizers").and_then(Value::as_array_mut) else { return Ok(None) };
            f.retain(|x| x != "kubernetes");
            Ok(Some(v))
        })
        .await;
    match done {
        Ok(_) | Err(StoreError::NotFound { .. }) => Ok(true),
        Err(e) => Err(e),
    }
}

/// The namespace controller: runs until `stop`.
pub(crate) async fn run(store: Store, stop: CancellationToken) {
    let busy: Arc<Mutex<HashSet<String>>> = Arc::default();
    loop {
        let opts = WatchOptions {
            filter: WatchFilter::all(&NAMESPACES),
            start: WatchStart::InitialState { end_bookmark: false },
            bookmarks: false,
        };
        let mut watch = match store.watch(opts).await {
            Ok(w) => w,
            Err(StoreError::Unavailable(_)) => return,
            Err(e) => {
                tracing::warn!(error = %e, "namespace controller cannot watch; retrying");
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                }
            }
        };
        loop {
            let ev = tokio::select! {
                _ = stop.cancelled() => return,
                ev = watch.next() => ev,
            };
            let Ok(ev) = ev else { break };
            let Some(obj) = ev.object() else { continue };
            if ev.ty == edgehive_store::EventType::Deleted || !obj.is_terminating() {
                continue;
            }
            let name = obj.name().to_string();
            if !busy.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(name.clone()) {
                continue;
            }
            let (store, stop, busy) = (store.clone(), stop.clone(), Arc::clone(&busy));
            tokio::spawn(async move {
                let mut backoff = Duration::from_millis(200);
                loop {
                    match clean(&store, &name).await {
                        Ok(true) => {
                            tracing::info!(namespace = %name, "namespace emptied and removed");
                            break;
                        }
                        Ok(false) => {}
                        Err(e) => tracing::warn!(namespace = %name, error = %e, "empty namespace"),
                    }
                    tokio::select! {
                        _ = stop.cancelled() => break,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                }
                busy.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&name);
            });
        }
    }
}
