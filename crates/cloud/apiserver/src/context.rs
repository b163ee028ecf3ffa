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
use crate::rbac::{Attributes, ResourceAttributes};
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
    /// Roles and bindings, and the decisions made from them.
    pub(crate) authorizer: Arc<crate::rbac::Authorizer>,
    /// Nodes' resource usage, for `metrics.k8s.io`.
    pub(crate) usage: crate::metrics_api::UsageCache,
    /// The custom resources served, with their schemas.
    pub(crate) crds: Arc<crate::crd::Crds>,
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
        Method::POST if matches!(target.subresource.as_deref(), Some("eviction" | "token")) => "create",
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
    let route = route::parse(&path, shared.store.resources());
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
        // `/version` is public, as Kubernetes' `system:public-info-viewer`
        // role makes it (anonymous requests included): clients probe it
        // before they present credentials.
        if matches!(route, Route::Version) {
            return handlers::non_resource(&shared, &route, req.headers());
        }
        let user = match user {
            Some(user) => Some(user),
            None => bearer_user(&shared, req.headers()).await,
        };
        let user = user.ok_or_else(ApiError::unauthorized)?;
        let user = impersonate(&shared, user, req.headers())?;
        authorize(&shared, &user, &attributes_of(&method, &path, &route, &query)?)?;
        if let Route::Review(target) = &route {
            let (parts, bytes) = crate::body::read_body(req, shared.config.max_body_bytes).await?;
            return crate::reviews::serve(&shared, &user, &method, target, &parts.headers, &bytes).await;
        }
        if let Route::Resource(target) = route {
            let verb = verb_of(&method, &target, &query).ok_or_else(|| {
                ApiError::method_not_allowed("the server does not allow this method on the requested resource")
            })?;
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
            // The user goes with the request to where RBAC objects are
            // written (escalation checks).
            let served = crate::rbac::escalation::scope(
                Arc::clone(&user),
                handlers::resource(&shared, verb, &target, &query, req),
            );
            return match tokio::time::timeout(timeout, served).await {
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

/// The service account a valid `Authorization: Bearer` token names, if any
/// (see [`service_account_user`]). A bad token is logged and treated as no
/// credentials (401).
async fn bearer_user(shared: &ApiState, headers: &http::HeaderMap) -> Option<Arc<User>> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let token = value.strip_prefix("Bearer ")?.trim();
    match service_account_user(shared, token, edgehive_pki::SA_API_AUDIENCES).await {
        Ok((user, _)) => Some(Arc::new(user)),
        Err(reason) => {
            tracing::info!(reason, "bearer token refused");
            None
        }
    }
}

/// The service account user a token names, with the token's audiences
/// among `audiences`, or why it names none: a token meant for one of
/// `audiences` (the API server's own for a bearer credential), valid now,
/// and, if bound to a pod, while that pod exists with the uid the token
/// names (Kubernetes' bound tokens: deleting or replacing the pod revokes
/// them). TokenReview asks the same question.
pub(crate) async fn service_account_user(
    shared: &ApiState,
    token: &str,
    audiences: &[&str],
) -> Result<(User, Vec<String>), String> {
    let id = shared
        .sa_tokens
        .verify(token, audiences, time::OffsetDateTime::now_utc())
        .map_err(|e| format!("[invalid bearer token, {e}]"))?;
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
            tracing::info!(user = %id.user(), pod = %pod.name, reason, "service account token refused");
            return Err(format!("[invalid bearer token, service account token has been invalidated: {reason}]"));
        }
    }
    // The signature verified: the claims can be read for the audiences.
    let claimed: Vec<String> = token
        .split('.')
        .nth(1)
        .and_then(|p| base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, p).ok())
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|c| match c.get("aud") {
            Some(serde_json::Value::String(a)) => Some(vec![a.clone()]),
            Some(serde_json::Value::Array(a)) => {
                Some(a.iter().filter_map(serde_json::Value::as_str).map(str::to_owned).collect())
            }
            _ => None,
        })
        .unwrap_or_default();
    let matched = claimed.into_iter().filter(|a| audiences.contains(&a.as_str())).collect();
    Ok((User { name: id.user(), groups: id.groups() }, matched))
}

/// What a request asks, as Kubernetes' request info makes it: a resource
/// request (the verb of [`verb_of`]; a node's `proxy`, the group of
/// `metrics.k8s.io`, a review's `create`), or a non-resource one with the
/// method as its verb, in lower case.
fn attributes_of(method: &Method, path: &str, route: &Route, query: &route::Query) -> Result<Attributes, ApiError> {
    let resource =
        |verb: &str, group: &str, resource: &str, sub: Option<&str>, ns: Option<&str>, name: Option<&str>| {
            Attributes::Resource(ResourceAttributes {
                verb: verb.into(),
                group: group.into(),
                resource: resource.into(),
                subresource: sub.map(str::to_owned),
                namespace: ns.unwrap_or_default().into(),
                name: name.unwrap_or_default().into(),
            })
        };
    Ok(match route {
        Route::Resource(t) => {
            let verb = verb_of(method, t, query).ok_or_else(|| {
                ApiError::method_not_allowed("the server does not allow this method on the requested resource")
            })?;
            let r = t.resource;
            resource(verb, r.group, r.plural, t.subresource.as_deref(), t.namespace.as_deref(), t.name.as_deref())
        }
        Route::ResourceMetrics(t) => resource(
            if t.name.is_some() { "get" } else { "list" },
            crate::metrics_api::GROUP,
            if t.pods { "pods" } else { "nodes" },
            None,
            t.namespace.as_deref(),
            t.name.as_deref(),
        ),
        Route::NodeProxy { node, .. } => {
            let verb = match *method {
                Method::POST => "create",
                Method::PUT => "update",
                Method::PATCH => "patch",
                Method::DELETE => "delete",
                _ => "get",
            };
            resource(verb, "", "nodes", Some("proxy"), None, Some(node))
        }
        Route::Review(t) => crate::reviews::attributes(t),
        _ => Attributes::NonResource { verb: method.as_str().to_ascii_lowercase(), path: path.to_owned() },
    })
}

/// Kubernetes' refusal of `attrs` (`responsewriters.Forbidden`): for a
/// resource, `{resource}[.{group}] ["{name}"] is forbidden: User "u" cannot
/// {verb} resource "{resource[/sub]}" in API group "{group}" {scope}`; for
/// a path, `forbidden: User "u" cannot {verb} path "{path}"`; then
/// `: {reason}` when the authorizer gave one.
fn forbidden(user: &User, attrs: &Attributes, reason: &str) -> ApiError {
    let reason = if reason.is_empty() { String::new() } else { format!(": {reason}") };
    match attrs {
        Attributes::NonResource { verb, path } => {
            ApiError::forbidden(format!("forbidden: User {:?} cannot {verb} path {path:?}{reason}", user.name))
        }
        Attributes::Resource(r) => {
            let full = match &r.subresource {
                Some(s) => format!("{}/{s}", r.resource),
                None => r.resource.clone(),
            };
            let scope = if r.namespace.is_empty() {
                "at the cluster scope".to_owned()
            } else {
                format!("in the namespace {:?}", r.namespace)
            };
            let qualified = if r.group.is_empty() { r.resource.clone() } else { format!("{}.{}", r.resource, r.group) };
            let what = if r.name.is_empty() { qualified } else { format!("{qualified} {:?}", r.name) };
            ApiError::forbidden(format!(
                "{what} is forbidden: User {:?} cannot {} resource {full:?} in API group {:?} {scope}{reason}",
                user.name, r.verb, r.group
            ))
            .details(&r.name, &r.group, &r.resource)
        }
    }
}

/// The user a request acts as: its caller, or whom it impersonates
/// (`Impersonate-User`, `Impersonate-Group`, as `kubectl --as --as-group`)
/// if the caller may `impersonate` that user (`users`, or `serviceaccounts`
/// in the account's namespace) and each group (`groups`), as Kubernetes'
/// impersonation filter checks it. The impersonated user is also in
/// `system:authenticated` (a service account without groups asked for:
/// in its own).
fn impersonate(shared: &ApiState, caller: Arc<User>, headers: &http::HeaderMap) -> Result<Arc<User>, ApiError> {
    let values = |name: &str| -> Vec<String> {
        headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).map(str::to_owned).collect()
    };
    let names = values("impersonate-user");
    let groups = values("impersonate-group");
    let Some(name) = names.first() else {
        if groups.is_empty() {
            return Ok(caller);
        }
        return Err(ApiError::internal("requested [{Group ...}] without impersonating a user"));
    };
    let check = |resource: &str, namespace: &str, target: &str| {
        let attrs = Attributes::Resource(ResourceAttributes {
            verb: "impersonate".into(),
            group: String::new(),
            resource: resource.into(),
            subresource: None,
            namespace: namespace.into(),
            name: target.into(),
        });
        authorize(shared, &caller, &attrs)
    };
    let account = name.strip_prefix("system:serviceaccount:").and_then(|r| r.split_once(':'));
    match account {
        Some((ns, sa)) => check("serviceaccounts", ns, sa)?,
        None => check("users", "", name)?,
    }
    for g in &groups {
        check("groups", "", g)?;
    }
    let mut all = groups;
    if all.is_empty()
        && let Some((ns, _)) = account
    {
        all = vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{ns}")];
    }
    if name != "system:anonymous" && !all.iter().any(|g| g == "system:authenticated") {
        all.push("system:authenticated".into());
    }
    tracing::debug!(caller = %caller.name, user = %name, "impersonating");
    Ok(Arc::new(User { name: name.clone(), groups: all }))
}

/// Asks the RBAC authorizer (members of `system:masters` are not asked);
/// a refusal is logged with the user, verb and resource, and counted.
fn authorize(shared: &ApiState, user: &User, attrs: &Attributes) -> Result<(), ApiError> {
    let decision = shared.authorizer.authorize(&user.name, &user.groups, attrs);
    shared.metrics.authorized(decision.allowed);
    if decision.allowed {
        return Ok(());
    }
    match attrs {
        Attributes::Resource(r) => tracing::info!(
            user = %user.name, verb = %r.verb, resource = %r.resource, subresource = r.subresource.as_deref().unwrap_or(""),
            namespace = %r.namespace, "request refused: not authorized"
        ),
        Attributes::NonResource { verb, path } => {
            tracing::info!(user = %user.name, verb = %verb, path = %path, "request refused: not authorized")
        }
    }
    Err(forbidden(user, attrs, &decision.reason))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn verb(method: Method, path: &str) -> Option<&'static str> {
        let Ok(Route::Resource(t)) = route::parse(path, &Default::default()) else { panic!("{path}") };
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
        let path = format!("{pod}/exec");
        let route = route::parse(&path, &Default::default()).unwrap();
        let attrs = attributes_of(&Method::POST, &path, &route, &route::Query::parse(None)).unwrap();
        let e = forbidden(&sa, &attrs, "");
        assert_eq!(e.code, StatusCode::FORBIDDEN);
        assert_eq!(
            e.message,
            "pods \"web\" is forbidden: User \"system:serviceaccount:default:app\" cannot create resource \"pods/exec\" \
             in API group \"\" in the namespace \"default\""
        );
        let attrs = Attributes::NonResource { verb: "get".into(), path: "/metrics".into() };
        assert_eq!(
            forbidden(&sa, &attrs, "").message,
            "forbidden: User \"system:serviceaccount:default:app\" cannot get path \"/metrics\""
        );
        let path = "/apis/apps/v1/namespaces/team/deployments";
        let attrs = attributes_of(
            &Method::GET,
            path,
            &route::parse(path, &Default::default()).unwrap(),
            &route::Query::parse(None),
        )
        .unwrap();
        assert_eq!(
            forbidden(&sa, &attrs, "RBAC: role.rbac.authorization.k8s.io \"x\" not found").message,
            "deployments.apps is forbidden: User \"system:serviceaccount:default:app\" cannot list resource \"deployments\" \
             in API group \"apps\" in the namespace \"team\": RBAC: role.rbac.authorization.k8s.io \"x\" not found"
        );
    }
}
