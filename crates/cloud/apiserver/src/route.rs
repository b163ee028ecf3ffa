//! Request paths and query parameters: which resource, namespace, name and
//! subresource a request is about, and the options Kubernetes clients send.

use std::collections::HashMap;

use edgehive_store::resources::{self, NAMESPACES, PODS, Registry, ResourceDef};

use crate::status::ApiError;

/// What a path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// `/version`.
    Version,
    /// `/healthz`, `/livez`, `/readyz` (and their sub-checks).
    Health,
    /// `/metrics`.
    Metrics,
    /// `/api`.
    CoreVersions,
    /// `/apis`.
    Groups,
    /// `/apis/{group}`.
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`.
    ResourceList {
        /// Group (`""` for core).
        group: String,
        /// Version.
        version: String,
    },
    /// `/openapi/v3`.
    OpenApiIndex,
    /// `/openapi/v2` (Swagger 2.0).
    OpenApiV2,
    /// `/openapi/v3/api/v1`, `/openapi/v3/apis/{group}/{version}`.
    OpenApiGroupVersion {
        /// Group.
        group: String,
        /// Version.
        version: String,
    },
    /// A resource collection or object.
    Resource(Target),
    /// A review of authorization.k8s.io or authentication.k8s.io (create only, no storage).
    Review(crate::reviews::ReviewTarget),
    /// `metrics.k8s.io/v1beta1`: NodeMetrics and PodMetrics.
    ResourceMetrics(crate::metrics_api::MetricsTarget),
    /// `/api/v1/nodes/{name}/proxy[/{path}]`: the node's own endpoints.
    NodeProxy {
        /// The node.
        node: String,
        /// The path asked of it (`/` when none).
        path: String,
    },
}

/// A resource request's target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// The resource.
    pub(crate) resource: &'static ResourceDef,
    /// Namespace from the path (`None` for all namespaces or cluster-scoped).
    pub(crate) namespace: Option<String>,
    /// Object name, when the path names one.
    pub(crate) name: Option<String>,
    /// `status`, when the path ends in it.
    pub(crate) subresource: Option<String>,
    /// The legacy `/watch/` path form.
    pub(crate) watch_path: bool,
}

/// Parses a request path against the resources `reg` serves.
pub(crate) fn parse(path: &str, reg: &Registry) -> Result<Route, ApiError> {
    let trimmed = path.trim_end_matches('/');
    let parts: Vec<&str> = trimmed.split('/').skip(1).collect();
    let parts = if parts == [""] { Vec::new() } else { parts };
    if parts.iter().any(|p| p.is_empty() || *p == "." || *p == "..") && !parts.is_empty() {
        return Err(ApiError::no_route());
    }
    match parts.as_slice() {
        ["version"] => Ok(Route::Version),
        ["healthz" | "livez" | "readyz", ..] => Ok(Route::Health),
        ["metrics"] => Ok(Route::Metrics),
        ["api"] => Ok(Route::CoreVersions),
        ["apis"] => Ok(Route::Groups),
        ["openapi", "v3"] => Ok(Route::OpenApiIndex),
        ["openapi", "v2"] => Ok(Route::OpenApiV2),
        ["openapi", "v3", "api", v] => Ok(Route::OpenApiGroupVersion { group: String::new(), version: (*v).into() }),
        ["openapi", "v3", "apis", g, v] => Ok(Route::OpenApiGroupVersion { group: (*g).into(), version: (*v).into() }),
        ["api", "v1"] => Ok(Route::ResourceList { group: String::new(), version: "v1".into() }),
        ["api", "v1", "nodes", node, "proxy", rest @ ..] => {
            Ok(Route::NodeProxy { node: (*node).into(), path: format!("/{}", rest.join("/")) })
        }
        ["api", "v1", rest @ ..] => resource_route(reg, "", "v1", rest),
        ["apis", g] if reg.serves(g, None) || *g == crate::metrics_api::GROUP || crate::reviews::serves(g, None) => {
            Ok(Route::Group((*g).into()))
        }
        ["apis", g, v]
            if reg.serves(g, Some(v))
                || (*g == crate::metrics_api::GROUP && *v == crate::metrics_api::VERSION)
                || crate::reviews::serves(g, Some(v)) =>
        {
            Ok(Route::ResourceList { group: (*g).into(), version: (*v).into() })
        }
        ["apis", g, v, rest @ ..] if *g == crate::metrics_api::GROUP && *v == crate::metrics_api::VERSION => {
            crate::metrics_api::parse(rest).map(Route::ResourceMetrics).ok_or_else(ApiError::no_route)
        }
        ["apis", g, v, rest @ ..] if crate::reviews::serves(g, Some(v)) => {
            crate::reviews::parse(g, rest).map(Route::Review).ok_or_else(ApiError::no_route)
        }
        ["apis", g, v, rest @ ..] => resource_route(reg, g, v, rest),
        _ => Err(ApiError::no_route()),
    }
}

fn resource_route(reg: &Registry, group: &str, version: &str, rest: &[&str]) -> Result<Route, ApiError> {
    let lookup =
        |group: &str, version: &str, plural: &str| reg.lookup(group, version, plural).ok_or_else(ApiError::no_route);
    let (watch_path, rest) = match rest {
        ["watch", tail @ ..] => (true, tail),
        _ => (false, rest),
    };
    let target =
        |resource, namespace: Option<&str>, name: Option<&str>, sub: Option<&str>| -> Result<Route, ApiError> {
            let resource: &'static ResourceDef = resource;
            if namespace.is_some() && !resource.namespaced {
                return Err(ApiError::no_route());
            }
            let sub_ok = |s: &str| {
                (s == "status" && resource.status_subresource)
                    || (s == "scale" && resource.scale_subresource)
                    || (s == "finalize" && std::ptr::eq(resource, &NAMESPACES))
                    || (s == "token" && std::ptr::eq(resource, &resources::SERVICE_ACCOUNTS))
                    || (matches!(s, "eviction" | "log" | "exec" | "attach" | "portforward")
                        && std::ptr::eq(resource, &PODS))
            };
            if sub.is_some_and(|s| !sub_ok(s)) {
                return Err(ApiError::no_route());
            }
            if watch_path && sub.is_some() {
                return Err(ApiError::no_route());
            }
            Ok(Route::Resource(Target {
                resource,
                namespace: namespace.map(str::to_string),
                name: name.map(str::to_string),
                subresource: sub.map(str::to_string),
                watch_path,
            }))
        };
    match rest {
        // /api/v1/namespaces/{ns}/{resource}[/{name}[/{sub}]]
        ["namespaces", ns, plural, tail @ ..] if group.is_empty() || reg.find(group, plural).is_some() => {
            let res = lookup(group, version, plural)?;
            if !res.namespaced {
                return Err(ApiError::no_route());
            }
            match tail {
                [] => target(res, Some(ns), None, None),
                [name] => target(res, Some(ns), Some(name), None),
                [name, sub] => target(res, Some(ns), Some(name), Some(sub)),
                _ => Err(ApiError::no_route()),
            }
        }
        // /api/v1/namespaces/{name}[/status|/finalize]
        ["namespaces", name] if group.is_empty() => target(&NAMESPACES, None, Some(name), None),
        ["namespaces", name, sub @ ("status" | "finalize")] if group.is_empty() => {
            target(&NAMESPACES, None, Some(name), Some(sub))
        }
        [plural] => target(lookup(group, version, plural)?, None, None, None),
        [plural, name] => {
            let res = lookup(group, version, plural)?;
            if res.namespaced {
                return Err(ApiError::no_route());
            }
            target(res, None, Some(name), None)
        }
        [plural, name, sub] => {
            let res = lookup(group, version, plural)?;
            if res.namespaced {
                return Err(ApiError::no_route());
            }
            target(res, None, Some(name), Some(sub))
        }
        _ => Err(ApiError::no_route()),
    }
}

/// Query parameters, decoded once.
#[derive(Debug, Clone, Default)]
pub(crate) struct Query {
    params: HashMap<String, String>,
    /// Every pair, in order (a parameter may repeat: `command`).
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Parses `a=b&c=d` (percent-decoded).
    pub(crate) fn parse(raw: Option<&str>) -> Query {
        let pairs: Vec<(String, String)> = raw
            .map(|q| form_urlencoded::parse(q.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect())
            .unwrap_or_default();
        let params = pairs.iter().cloned().collect();
        Query { params, pairs }
    }

    /// Every value of a parameter that may repeat, in order.
    pub(crate) fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.pairs.iter().filter(move |(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// A parameter.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.params.get(key).map(String::as_str)
    }

    /// A boolean parameter (`true`/`1`).
    pub(crate) fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1"))
    }

    /// A non-negative integer parameter; a bad value is a 400.
    pub(crate) fn uint(&self, key: &str) -> Result<Option<u64>, ApiError> {
        match self.get(key).filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(v) => v
                .parse::<u64>()
                .map(Some)
                .map_err(|_| ApiError::bad_request(format!("invalid value {v:?} for query parameter {key}"))),
        }
    }

    /// A signed integer parameter; a bad value is a 400.
    pub(crate) fn int(&self, key: &str) -> Result<Option<i64>, ApiError> {
        match self.get(key).filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(v) => v
                .parse::<i64>()
                .map(Some)
                .map_err(|_| ApiError::bad_request(format!("invalid value {v:?} for query parameter {key}"))),
        }
    }

    /// `resourceVersion` as a revision (`""` and `"0"` are `None`).
    pub(crate) fn resource_version(&self) -> Result<Option<u64>, ApiError> {
        match self.get("resourceVersion") {
            None | Some("") | Some("0") => Ok(None),
            Some(v) => v.parse::<u64>().map(Some).map_err(|_| {
                ApiError::bad_request(format!("invalid resource version {v:?}: must be a non-negative integer"))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgehive_store::resources::{DEVICES, NODES, PODS};

    fn parse(path: &str) -> Result<Route, ApiError> {
        super::parse(path, &Registry::default())
    }

    fn target(path: &str) -> Target {
        match parse(path) {
            Ok(Route::Resource(t)) => t,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn resource_paths() {
        let t = target("/api/v1/namespaces/default/pods/web/status");
        assert_eq!(
            (t.resource, t.namespace.as_deref(), t.name.as_deref(), t.subresource.as_deref()),
            (&PODS, Some("default"), Some("web"), Some("status"))
        );
        let t = target("/api/v1/pods");
        assert_eq!((t.resource, t.namespace, t.name), (&PODS, None, None));
        let t = target("/api/v1/nodes/edge-1");
        assert_eq!((t.resource, t.name.as_deref()), (&NODES, Some("edge-1")));
        let t = target("/api/v1/namespaces/kube-system");
        assert_eq!((t.resource, t.name.as_deref()), (&NAMESPACES, Some("kube-system")));
        let t = target("/apis/devices.kubeedge.io/v1beta1/namespaces/default/devices/d1");
        assert_eq!((t.resource, t.name.as_deref()), (&DEVICES, Some("d1")));
        let t = target("/api/v1/watch/namespaces/default/pods");
        assert!(t.watch_path);
        let t = target("/apis/apps/v1/namespaces/default/deployments/web/scale");
        assert_eq!(t.subresource.as_deref(), Some("scale"));
        assert_eq!(
            parse("/apis/devices.kubeedge.io/v1beta1").ok(),
            Some(Route::ResourceList { group: "devices.kubeedge.io".into(), version: "v1beta1".into() })
        );
    }

    #[test]
    fn unknown_paths_are_404() {
        for p in [
            "/api/v2/pods",
            "/api/v1/widgets",
            "/api/v1/namespaces/default/nodes",
            "/api/v1/namespaces/default/pods/web/logs",
            "/api/v1/namespaces/default/configmaps/c/status",
            "/apis/apps/v1/deployments/web",
            "/apis/apps/v1/namespaces/default/daemonsets/ds/scale",
            "/apis/apps/v2/deployments",
            "/apis/devices.kubeedge.io/v1/devices",
            "/api/v1/pods/web",
            "/api/v1/namespaces/default/pods/a/b/c",
            "/nope",
        ] {
            assert!(parse(p).is_err(), "{p}");
        }
    }

    #[test]
    fn query_parsing() {
        let q = Query::parse(Some("labelSelector=app%3Dweb&limit=5&watch=true&resourceVersion=0"));
        assert_eq!(q.get("labelSelector"), Some("app=web"));
        assert_eq!(q.uint("limit").ok().flatten(), Some(5));
        assert!(q.flag("watch"));
        assert_eq!(q.resource_version().ok().flatten(), None);
        assert!(Query::parse(Some("limit=x")).uint("limit").is_err());
        assert!(Query::parse(Some("resourceVersion=abc")).resource_version().is_err());
    }
}
