//! The request context: who is calling (a client certificate, or a bearer
//! service account token), what they may do, and one request's way from
//! route to handler, with its deadline and metrics. The transport
//! (`server.rs`) hands every request here.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use edgehive_store::Store;
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use tokio_util::sync::CancellationToken;

use crate::handlers;
use crate::metrics::Metrics;
use crate::response::{Body, error_response, json_response};
use crate::route::{self, Route};
use crate::server::ApiServerConfig;
use crate::status::ApiError;

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// User name (certificate CN).
    pub name: String,
    /// Groups (certificate O's).
    pub groups: Vec<String>,
}

impl User {
    /// Members of `system:masters` may do anything.
    pub fn is_admin(&self) -> bool {
        self.groups.iter().any(|g| g == "system:masters")
    }
}

/// State shared by every request.
#[derive(Debug)]
pub(crate) struct ApiState {
    pub(crate) store: Store,
    pub(crate) config: ApiServerConfig,
    pub(crate) metrics: Metrics,
    pub(crate) address: String,
    pub(crate) stop: CancellationToken,
    pub(crate) sa_tokens: Arc<edgehive_pki::ServiceAccountTokens>,
    /// Nodes' resource usage, for `metrics.k8s.io`.
    pub(crate) usage: crate::metrics_api::UsageCache,
}

/// The verb of a resource request, as Kubernetes names it.
pub(crate) fn verb_of(method: &Method, target: &route::Target, query: &route::Query) -> Option<&'static str> {
    let named = target.name.is_some();
    Some(match *method {
        // Streams: reading a log is `get`; exec, attach and port-forward are
        // `create` whatever the method (a WebSocket upgrade is a GET), as
        // Kubernetes authorizes them.
        Method::GET if named && target.subresource.as_deref() == Some("log") => "get",
        Method::GET | Method::POST
            if named && matches!(target.subresource.as_deref(), Some("exec" | "attach" | "portforward")) =>
        {
            "create"
        }
        Method::GET if target.watch_path || query.flag("watch") => "watch",
        Method::GET if named => "get",
        Method::GET => "list",
        Method::POST if !named => "create",
        Method::POST if target.subresource.as_deref() == Some("eviction") => "create",
        Method::PUT if named => "update",
        Method::PATCH if named => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => return None,
    })
}

pub(crate) async fn handle(
    shared: Arc<ApiState>,
    user: Option<Arc<User>>,
    peer: SocketAddr,
    req: Request<Incoming>,
) -> Response<Body> {
    let started = tokio::time::Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = route::Query::parse(req.uri().query());
    let route = route::parse(&path);
    let (verb, resource_label) = match &route {
        Ok(Route::Resource(t)) => (verb_of(&method, t, &query).unwrap_or("unknown"), t.resource.plural),
        Ok(Route::ResourceMetrics(t)) => {
            (if t.name.is_some() { "get" } else { "list" }, if t.pods { "pods.metrics" } else { "nodes.metrics" })
        }
        Ok(Route::NodeProxy { .. }) => ("proxy", "nodes"),
        _ => (if method == Method::GET { "get" } else { "other" }, ""),
    };
    let response = async {
        let route = route?;
        if matches!(route, Route::Health) {
            return Ok(json_response(StatusCode::OK, Bytes::from_static(b"ok")));
        }
        let user = match user {
            Some(user) => Some(user),
            None => bearer_user(&shared, req.headers()).await,
        };
        let user = user.ok_or_else(ApiError::unauthorized)?;
        if let Route::Resource(target) = route {
            let verb = verb_of(&method, &target, &query).ok_or_else(|| {
                ApiError::method_not_allowed("the server does not allow this method on the requested resource")
            })?;
            authorize(&user, verb, &target)?;
            let span =
                tracing::debug_span!("request", verb, resource = target.resource.plural, user = %user.name, %peer);
            let _enter = span.enter();
            if verb == "watch" {
                return handlers::watch(&shared, &target, &query, req.headers()).await;
            }
            if matches!(target.subresource.as_deref(), Some("log" | "exec" | "attach" | "portforward")) {
                // Bounded by the session's own deadlines (opening, the
                // node's answer), then streamed for as long as it lasts.
                return crate::streams::serve(&shared, &target, &query, req).await;
            }
            let timeout = shared.config.request_timeout;
            return match tokio::time::timeout(timeout, handlers::resource(&shared, verb, &target, &query, req)).await {
                Ok(r) => r,
                Err(_) => {
                    let mut e = ApiError::new(
                        StatusCode::GATEWAY_TIMEOUT,
                        "Timeout",
                        format!("the request did not complete within {}s", timeout.as_secs()),
                    );
                    e.details.retry_after = Some(1);
                    Err(e)
                }
            };
        }
        if let Route::ResourceMetrics(target) = &route {
            return crate::metrics_api::serve(&shared, &user, &method, target, &query).await;
        }
        if let Route::NodeProxy { node, path } = &route {
            return crate::streams::node_proxy(&shared, &user, node, path, req).await;
        }
        handlers::non_resource(&shared, &route, req.headers())
    }
    .await;
    let response = response.unwrap_or_else(|e| {
        if e.code.is_server_error() {
            tracing::warn!(%method, %path, code = e.code.as_u16(), message = %e.message, "request failed");
        }
        error_response(&e)
    });
    shared.metrics.observe(verb, resource_label, response.status().as_u16(), started.elapsed());
    response
}

/// The service account a valid `Authorization: Bearer` token names, if any:
/// a token meant for this server, and, if bound to a pod, while that pod
/// exists with the uid the token names (Kubernetes' bound tokens: deleting
/// or replacing the pod revokes them). A bad token is logged and treated as
/// no credentials (401).
async fn bearer_user(shared: &ApiState, headers: &http::HeaderMap) -> Option<Arc<User>> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let token = value.strip_prefix("Bearer ")?.trim();
    let id = match shared.sa_tokens.verify(token, edgehive_pki::SA_API_AUDIENCES, time::OffsetDateTime::now_utc()) {
        Ok(id) => id,
        Err(e) => {
            tracing::info!(error = %e, "bearer token refused");
            return None;
        }
    };
    if let Some(pod) = &id.pod {
        let found = shared.store.get(&edgehive_store::resources::PODS, &id.namespace, &pod.name).await;
        let refused = match &found {
            Ok(current) if current.uid() == Some(pod.uid.as_str()) => None,
            Ok(_) => Some("its pod was replaced (another uid)"),
            Err(edgehive_store::StoreError::NotFound { .. }) => Some("its pod no longer exists"),
            Err(e) => {
                tracing::warn!(error = %e, "read the pod of a bearer token");
                Some("its pod could not be read")
            }
        };
        if let Some(reason) = refused {
            tracing::info!(user = %id.user(), pod = %pod.name, reason, "bearer token refused");
            return None;
        }
    }
    Some(Arc::new(User { name: id.user(), groups: id.groups() }))
}

fn authorize(user: &User, verb: &str, target: &route::Target) -> Result<(), ApiError> {
    if user.is_admin() {
        return Ok(());
    }
    let res = target.resource;
    let resource = match &target.subresource {
        Some(s) => format!("{}/{s}", res.plural),
        None => res.plural.to_string(),
    };
    let scope = match &target.namespace {
        Some(ns) => format!("in the namespace \"{ns}\""),
        None => "at the cluster scope".to_string(),
    };
    let name = target
        .name
        .as_deref()
        .map(|n| format!("{resource} \"{n}\" is forbidden"))
        .unwrap_or_else(|| format!("{resource} is forbidden"));
    tracing::info!(user = %user.name, verb, resource = %resource, "request refused: not authorized");
    Err(ApiError::forbidden(format!(
        "{name}: User \"{}\" cannot {verb} resource \"{resource}\" in API group \"{}\" {scope}",
        user.name, res.group
    ))
    .details(target.name.as_deref().unwrap_or(""), res.group, res.plural))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn verb(method: Method, path: &str) -> Option<&'static str> {
        let Ok(Route::Resource(t)) = route::parse(path) else { panic!("{path}") };
        verb_of(&method, &t, &route::Query::parse(None))
    }

    #[test]
    fn streams_are_authorized_as_kubernetes_authorizes_them() {
        let pod = "/api/v1/namespaces/default/pods/web";
        assert_eq!(verb(Method::GET, &format!("{pod}/log")), Some("get"));
        for sub in ["exec", "attach", "portforward"] {
            // A WebSocket upgrade is a GET, SPDY a POST: both are `create`.
            assert_eq!(verb(Method::GET, &format!("{pod}/{sub}")), Some("create"), "{sub}");
            assert_eq!(verb(Method::POST, &format!("{pod}/{sub}")), Some("create"), "{sub}");
        }
        let sa =
            User { name: "system:serviceaccount:default:app".into(), groups: vec!["system:serviceaccounts".into()] };
        let Ok(Route::Resource(t)) = route::parse(&format!("{pod}/exec")) else { panic!() };
        let e = authorize(&sa, "create", &t).unwrap_err();
        assert_eq!(e.code, StatusCode::FORBIDDEN);
        assert!(e.message.contains("cannot create resource \"pods/exec\""), "{}", e.message);
    }
}
