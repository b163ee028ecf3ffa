//! A pod's `eviction` subresource (`POST …/pods/{name}/eviction` with a
//! policy/v1 Eviction), which `kubectl drain` uses: the pod is deleted
//! unless that would break its PodDisruptionBudget, as Kubernetes'
//! `EvictionREST` decides it.
//!
//! - A pod that has not started or has ended (Pending, Succeeded, Failed),
//!   or is already being deleted, is deleted whatever the budgets say.
//! - No budget selects it: deleted.
//! - More than one: refused (500), as Kubernetes refuses it.
//! - One: refused with 429 TooManyRequests while the budget's status is
//!   older than its spec or allows no disruption; otherwise the budget's
//!   `disruptionsAllowed` is decremented and the pod recorded in
//!   `disruptedPods` (one write, on the resourceVersion read, retried on a
//!   conflict), then the pod is deleted. A pod that is not Ready is deleted
//!   without using the budget when the budget is healthy
//!   (`IfHealthyBudget`, the default) or always (`AlwaysAllow`).

use bytes::Bytes;
use edgehive_registry::status::{ApiError, Cause};
use edgehive_store::resources::{POD_DISRUPTION_BUDGETS, PODS};
use edgehive_store::selector::LabelSelector;
use edgehive_store::{DeleteOptions, ListOptions, StoreError};
use http::{HeaderMap, Response, StatusCode};
use serde_json::{Value, json};

use crate::body;
use crate::context::ApiState;
use crate::handlers::store_err;
use crate::response::{Body, value_response};
use crate::route::{Query, Target};

/// Kubernetes' message when a budget stands in the way.
pub(crate) const REFUSED: &str = "Cannot evict pod as it would violate the pod's disruption budget.";
/// Evictions recorded in a budget and not yet confirmed by its controller, at most.
const MAX_DISRUPTED_PODS: usize = 2000;
/// Attempts at the budget's write when it keeps changing under us.
const BUDGET_ATTEMPTS: usize = 5;

fn too_many_requests(cause: String) -> ApiError {
    let mut e = ApiError::new(StatusCode::TOO_MANY_REQUESTS, "TooManyRequests", REFUSED);
    e.details.causes = vec![Cause { reason: "DisruptionBudget".into(), message: cause, field: String::new() }];
    e
}

/// The Ready condition is True.
fn ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c.get("type").and_then(Value::as_str) == Some("Ready") && c.get("status") == Some(&json!("True")))
}

/// POST of `…/pods/{name}/eviction`.
pub(crate) async fn create(
    shared: &ApiState,
    target: &Target,
    query: &Query,
    headers: &HeaderMap,
    bytes: &Bytes,
) -> Result<Response<Body>, ApiError> {
    let ns = target.namespace.as_deref().unwrap_or_default();
    let name = target.name.as_deref().unwrap_or_default();
    let eviction = body::decode(headers, bytes, "Eviction")?;
    if eviction.get("kind").and_then(Value::as_str).is_some_and(|k| !k.is_empty() && k != "Eviction") {
        return Err(ApiError::bad_request(format!(
            "the body of the request was not an Eviction (kind {:?})",
            eviction["kind"].as_str().unwrap_or_default()
        )));
    }
    if eviction.pointer("/metadata/name").and_then(Value::as_str).is_some_and(|n| !n.is_empty() && n != name) {
        return Err(ApiError::bad_request("name in URL does not match name in Eviction object"));
    }
    if eviction.pointer("/metadata/namespace").and_then(Value::as_str).is_some_and(|n| !n.is_empty() && n != ns) {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let (opts, dry_run) =
        crate::handlers::delete_options_of(query, eviction.get("deleteOptions").filter(|o| !o.is_null()))?;
    let pod_obj = shared.store.get(&PODS, ns, name).await.map_err(store_err(&PODS))?;
    let pod = pod_obj.value().map_err(store_err(&PODS))?.clone();
    let phase = pod.pointer("/status/phase").and_then(Value::as_str).unwrap_or("Pending");
    let deleting = pod.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
    if deleting || matches!(phase, "Pending" | "Succeeded" | "Failed") {
        return evict(shared, ns, name, &opts, dry_run).await;
    }
    let labels = pod.pointer("/metadata/labels").cloned().unwrap_or(Value::Null);
    let budgets = shared
        .store
        .list(&POD_DISRUPTION_BUDGETS, &ListOptions { namespace: Some(ns.to_string()), ..ListOptions::default() })
        .await
        .map_err(store_err(&POD_DISRUPTION_BUDGETS))?;
    let matching: Vec<&edgehive_store::Object> = budgets
        .items
        .iter()
        .filter(|b| {
            b.value()
                .ok()
                .and_then(|v| v.pointer("/spec/selector"))
                .filter(|s| !s.is_null())
                .and_then(|s| LabelSelector::from_json(s).ok())
                .is_some_and(|s| s.matches(&labels))
        })
        .collect();
    let budget = match matching.as_slice() {
        [] => return evict(shared, ns, name, &opts, dry_run).await,
        [one] => one.name().to_string(),
        _ => {
            return Err(ApiError::internal(
                "Internal error occurred: This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
    };
    let pod_ready = ready(&pod);
    let mut attempts = 0;
    loop {
        attempts += 1;
        match charge(shared, ns, &budget, name, pod_ready, dry_run).await {
            Err(Charge::Refused(e)) => return Err(e),
            Err(Charge::Moved) if attempts < BUDGET_ATTEMPTS => continue,
            Err(Charge::Moved) => {
                return Err(too_many_requests(format!(
                    "The disruption budget {budget} is changing too quickly; try again."
                )));
            }
            Ok(()) => return evict(shared, ns, name, &opts, dry_run).await,
        }
    }
}

enum Charge {
    Refused(ApiError),
    /// The budget changed between the read and the write.
    Moved,
}

/// Takes one disruption from budget `budget` for pod `pod`, or says why not.
async fn charge(
    shared: &ApiState,
    ns: &str,
    budget: &str,
    pod: &str,
    pod_ready: bool,
    dry_run: bool,
) -> Result<(), Charge> {
    let refused = |e| Charge::Refused(e);
    let obj = shared
        .store
        .get(&POD_DISRUPTION_BUDGETS, ns, budget)
        .await
        .map_err(|e| refused(store_err(&POD_DISRUPTION_BUDGETS)(e)))?;
    let pdb = obj.value().map_err(|e| refused(store_err(&POD_DISRUPTION_BUDGETS)(e)))?.clone();
    let int = |p: &str| pdb.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    if int("/status/observedGeneration") < int("/metadata/generation") {
        return Err(refused(too_many_requests(format!(
            "The disruption budget {budget} is still being processed by the server."
        ))));
    }
    let (healthy, desired) = (int("/status/currentHealthy"), int("/status/desiredHealthy"));
    if !pod_ready {
        let always = pdb.pointer("/spec/unhealthyPodEvictionPolicy").and_then(Value::as_str) == Some("AlwaysAllow");
        if always || (healthy >= desired && desired > 0) {
            // An unhealthy pod of a healthy budget costs the budget nothing.
            return Ok(());
        }
    }
    let allowed = int("/status/disruptionsAllowed");
    if allowed < 0 {
        return Err(refused(ApiError::forbidden("pdb disruptions allowed is negative")));
    }
    let disrupted = pdb.pointer("/status/disruptedPods").and_then(Value::as_object).map_or(0, serde_json::Map::len);
    if disrupted > MAX_DISRUPTED_PODS {
        return Err(refused(ApiError::forbidden(
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        )));
    }
    if allowed == 0 {
        return Err(refused(too_many_requests(format!(
            "The disruption budget {budget} needs {desired} healthy pods and has {healthy} currently"
        ))));
    }
    if dry_run {
        return Ok(());
    }
    let rev = obj.rev();
    let now = edgehive_store::now_rfc3339();
    let result = shared
        .store
        .update_with::<_, StoreError>(&POD_DISRUPTION_BUDGETS, ns, budget, |cur| {
            if cur.rev() != rev {
                return Err(StoreError::Conflict {
                    resource: POD_DISRUPTION_BUDGETS.qualified(),
                    name: budget.to_string(),
                    reason: "the object has been modified".into(),
                });
            }
            let mut v = cur.value()?.clone();
            v["status"]["disruptionsAllowed"] = json!(allowed - 1);
            if !v["status"]["disruptedPods"].is_object() {
                v["status"]["disruptedPods"] = json!({});
            }
            v["status"]["disruptedPods"][pod] = json!(now);
            Ok(Some(v))
        })
        .await;
    match result {
        Ok(_) => Ok(()),
        Err(StoreError::Conflict { .. }) => Err(Charge::Moved),
        Err(e) => Err(refused(store_err(&POD_DISRUPTION_BUDGETS)(e))),
    }
}

/// Deletes the pod (gracefully, as a delete does) and answers 201 Success.
async fn evict(
    shared: &ApiState,
    ns: &str,
    name: &str,
    opts: &DeleteOptions,
    dry_run: bool,
) -> Result<Response<Body>, ApiError> {
    if !dry_run {
        shared.store.delete(&PODS, ns, name, opts).await.map_err(store_err(&PODS))?;
    }
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201});
    Ok(value_response(StatusCode::CREATED, &status))
}
