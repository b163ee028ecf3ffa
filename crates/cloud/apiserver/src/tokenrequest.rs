//! `serviceaccounts/{name}/token`: the TokenRequest API (`kubectl create
//! token`), as Kubernetes' `pkg/registry/core/serviceaccount/storage/token.go`
//! serves it. The answer is the posted `authentication.k8s.io/v1`
//! TokenRequest with `status.token` and `status.expirationTimestamp`: a
//! service account token signed by the server's key, for the audiences
//! asked (the API server's when none), valid for `expirationSeconds`
//! (default one hour, at least 10 minutes, at most 2^32 s asked; the signer
//! caps it at 48 h), and bound to a pod when `boundObjectRef` names one —
//! such a token stops authenticating when that pod is gone or replaced.

use std::time::Duration;

use bytes::Bytes;
use edgehive_store::resources::{PODS, SERVICE_ACCOUNTS};
use http::{HeaderMap, Response, StatusCode};
use serde_json::{Value, json};

use crate::context::ApiState;
use crate::handlers::store_err;
use crate::response::{Body, value_response};
use crate::route::Target;
use crate::status::{ApiError, Cause};

/// The default validity (Kubernetes' `SetDefaults_TokenRequestSpec`).
const DEFAULT_SECONDS: i64 = 3600;
/// The shortest validity asked for (Kubernetes' `MinTokenAgeSec`).
const MIN_SECONDS: i64 = 600;
/// The longest validity asked for (Kubernetes' `MaxTokenAgeSec`).
const MAX_SECONDS: i64 = 1 << 32;

fn invalid(field: &str, value: &Value, detail: &str) -> ApiError {
    let message = format!("{field}: Invalid value: {}: {detail}", crate::validation::render_value(value));
    ApiError::invalid(
        "TokenRequest",
        "authentication.k8s.io",
        "",
        vec![Cause { reason: "FieldValueInvalid".into(), message, field: field.into() }],
    )
}

/// Issues a token for the service account `target` names.
pub(crate) async fn create(
    shared: &ApiState,
    target: &Target,
    headers: &HeaderMap,
    bytes: &Bytes,
) -> Result<Response<Body>, ApiError> {
    let ns = target.namespace.as_deref().unwrap_or_default();
    let name = target.name.as_deref().unwrap_or_default();
    let mut req = crate::body::decode(headers, bytes, "TokenRequest")?;
    let kind = req.get("kind").and_then(Value::as_str).unwrap_or_default();
    if !kind.is_empty() && kind != "TokenRequest" {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind (TokenRequest)"
        )));
    }
    let sa = shared.store.get(&SERVICE_ACCOUNTS, ns, name).await.map_err(store_err(&SERVICE_ACCOUNTS))?;
    let spec = req.get("spec").cloned().unwrap_or_else(|| json!({}));
    let seconds_value =
        spec.get("expirationSeconds").filter(|v| !v.is_null()).cloned().unwrap_or(json!(DEFAULT_SECONDS));
    let seconds =
        seconds_value.as_i64().ok_or_else(|| ApiError::bad_request("spec.expirationSeconds must be an integer"))?;
    if seconds < MIN_SECONDS {
        return Err(invalid(
            "spec.expirationSeconds",
            &seconds_value,
            "may not specify a duration less than 10 minutes",
        ));
    }
    if seconds > MAX_SECONDS {
        return Err(invalid(
            "spec.expirationSeconds",
            &seconds_value,
            "may not specify a duration larger than 2^32 seconds",
        ));
    }
    let audiences: Vec<String> = spec
        .get("audiences")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    let mut bound = None;
    if let Some(r) = spec.get("boundObjectRef").filter(|v| !v.is_null()) {
        let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
        let (kind, api_version, pod_name, uid) = (s("kind"), s("apiVersion"), s("name"), s("uid"));
        let version = if api_version.is_empty() { "v1".to_owned() } else { api_version };
        if kind != "Pod" || version != "v1" {
            return Err(ApiError::bad_request(format!("cannot bind token to object of type {version}, Kind={kind}")));
        }
        let pod = shared.store.get(&PODS, ns, &pod_name).await.map_err(store_err(&PODS))?;
        let pod_uid = pod.uid().unwrap_or_default().to_owned();
        if !uid.is_empty() && uid != pod_uid {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on Pod {pod_name:?}: the UID in the bound object reference ({uid}) \
                     does not match the UID in record. The object might have been deleted and then recreated"
                ),
            ));
        }
        let sa_of_pod = pod.value().ok().and_then(|v| v.pointer("/spec/serviceAccountName")).and_then(Value::as_str);
        if sa_of_pod.is_some_and(|s| s != name) {
            return Err(ApiError::bad_request(format!(
                "cannot bind token for serviceaccount {name:?} to pod {pod_name:?}: pod is bound to serviceaccount {:?}",
                sa_of_pod.unwrap_or_default()
            )));
        }
        let node =
            pod.value().ok().and_then(|v| v.pointer("/spec/nodeName")).and_then(Value::as_str).map(str::to_owned);
        bound = Some((pod_name, pod_uid, node));
    }
    let issued = {
        let for_ = edgehive_pki::TokenFor {
            namespace: ns,
            name,
            uid: sa.uid().unwrap_or_default(),
            pod: bound.as_ref().map(|(n, u, _)| (n.as_str(), u.as_str())),
            node: bound.as_ref().and_then(|(_, _, node)| node.as_deref()),
            audiences: &audiences,
            validity: Duration::from_secs(u64::try_from(seconds).unwrap_or(0)),
        };
        shared.sa_tokens.issue(&for_, time::OffsetDateTime::now_utc())
    };
    let (token, expires) = issued.map_err(|e| ApiError::internal(format!("sign the token: {e}")))?;
    tracing::info!(namespace = ns, service_account = name, bound = bound.is_some(), "issued a service account token");
    let used = if audiences.is_empty() {
        edgehive_pki::SA_API_AUDIENCES.iter().map(|a| (*a).to_owned()).collect()
    } else {
        audiences
    };
    req["apiVersion"] = json!("authentication.k8s.io/v1");
    req["kind"] = json!("TokenRequest");
    if !req.get("metadata").is_some_and(Value::is_object) {
        req["metadata"] = json!({});
    }
    req["metadata"]["name"] = json!(name);
    req["metadata"]["namespace"] = json!(ns);
    req["metadata"]["creationTimestamp"] = Value::Null;
    let mut spec = spec;
    spec["audiences"] = json!(used);
    let cap = i64::try_from(edgehive_pki::SA_MAX_VALIDITY.as_secs()).unwrap_or(i64::MAX);
    spec["expirationSeconds"] = json!(seconds.min(cap));
    req["spec"] = spec;
    req["status"] = json!({"token": token, "expirationTimestamp": edgehive_store::rfc3339(expires)});
    Ok(value_response(StatusCode::CREATED, &req))
}
