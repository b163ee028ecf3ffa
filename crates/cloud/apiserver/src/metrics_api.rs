//! The resource metrics API, `metrics.k8s.io/v1beta1` (what metrics-server
//! serves in Kubernetes), for `kubectl top node` and `kubectl top pod`.
//!
//! There is no scraper: a request asks the nodes it needs, each through a
//! `metrics` stream session over the node's own connection
//! ([`SessionKind::Metrics`]), within [`FETCH_DEADLINE`], all at once. A
//! node's answer is kept for [`FRESH`], and requests for one node while it
//! is being asked wait for that one answer, so a busy `watch kubectl top`
//! costs each node one summary per [`FRESH`] however many ask, and nothing
//! when nobody asks. A node that is offline, silent or not an edgehive edge
//! has no metrics: lists leave it out and a get of it is NotFound, as
//! metrics-server does for a node it could not scrape.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use edgehive_model::session::{MAX_SUMMARY, SessionKind, SessionRequest, UsageSummary};
use edgehive_store::ListOptions;
use edgehive_store::resources::{NODES, PODS};
use http::StatusCode;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::context::{ApiState, User};
use crate::handlers::{selectors, store_err};
use crate::response::{Body, value_response};
use crate::route::Query;
use crate::status::ApiError;
use crate::streams::open_session;

/// The API group.
pub(crate) const GROUP: &str = "metrics.k8s.io";
/// Its one version.
pub(crate) const VERSION: &str = "v1beta1";

/// Longest wait for one node's summary.
pub(crate) const FETCH_DEADLINE: Duration = Duration::from_secs(5);
/// How long a node's summary answers requests.
pub(crate) const FRESH: Duration = Duration::from_secs(10);
/// How old a kept summary may be for a pod asked by name that it lacks.
const RECHECK: Duration = Duration::from_secs(1);
/// Summaries kept at most (a fleet larger than this asks again).
const MAX_CACHED: usize = 10_000;

/// What a path of the group addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MetricsTarget {
    /// `nodes` (NodeMetrics) or `pods` (PodMetrics).
    pub(crate) pods: bool,
    pub(crate) namespace: Option<String>,
    pub(crate) name: Option<String>,
}

/// Parses the part of a path after `/apis/metrics.k8s.io/v1beta1/`.
pub(crate) fn parse(rest: &[&str]) -> Option<MetricsTarget> {
    let t = |pods, ns: Option<&str>, name: Option<&str>| {
        Some(MetricsTarget { pods, namespace: ns.map(str::to_owned), name: name.map(str::to_owned) })
    };
    match rest {
        ["nodes"] => t(false, None, None),
        ["nodes", name] => t(false, None, Some(name)),
        ["pods"] => t(true, None, None),
        ["namespaces", ns, "pods"] => t(true, Some(ns), None),
        ["namespaces", ns, "pods", name] => t(true, Some(ns), Some(name)),
        _ => None,
    }
}

/// The two resources, for discovery: (plural, kind, namespaced).
pub(crate) const RESOURCES: [(&str, &str, &str, bool); 2] =
    [("nodes", "NodeMetrics", "nodemetrics", false), ("pods", "PodMetrics", "podmetrics", true)];

/// One node's last answer (when, and the summary if there was one); held
/// while the node is asked.
type Slot = Arc<tokio::sync::Mutex<Option<(Instant, Option<Arc<UsageSummary>>)>>>;

/// Summaries by node, and the one fetch of each in flight.
#[derive(Debug, Default)]
pub(crate) struct UsageCache {
    nodes: Mutex<HashMap<String, Slot>>,
}

impl UsageCache {
    fn slot(&self, node: &str) -> Slot {
        let mut map = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_CACHED && !map.contains_key(node) {
            map.clear();
        }
        Arc::clone(map.entry(node.to_owned()).or_default())
    }
}

/// A node's summary: kept if younger than `fresh`, else asked for (once
/// for everyone asking at the same time). `None`: the node has none to
/// give now.
async fn summary(shared: &ApiState, node: &str, fresh: Duration) -> Option<Arc<UsageSummary>> {
    let slot = shared.usage.slot(node);
    let mut held = slot.lock().await;
    if let Some((at, s)) = held.as_ref()
        && at.elapsed() < fresh
    {
        return s.clone();
    }
    let fetched = match tokio::time::timeout(FETCH_DEADLINE, fetch(shared, node)).await {
        Ok(Ok(s)) => Some(Arc::new(s)),
        Ok(Err(e)) => {
            tracing::debug!(node, error = %e.message, "no resource usage from the node");
            None
        }
        Err(_) => {
            tracing::info!(node, "no resource usage from the node in time");
            None
        }
    };
    *held = Some((Instant::now(), fetched.clone()));
    fetched
}

async fn fetch(shared: &ApiState, node: &str) -> Result<UsageSummary, ApiError> {
    let streams = shared.config.edge_streams.as_ref().ok_or_else(|| {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", "no edge connections are served here")
    })?;
    let request = SessionRequest { kind: Some(SessionKind::Metrics), ..SessionRequest::default() };
    let header = Bytes::from(serde_json::to_vec(&request).map_err(|e| ApiError::internal(e.to_string()))?);
    let (session, _) = open_session(streams.as_ref(), node, header).await?;
    let body = crate::streams::read_body(session, MAX_SUMMARY, node).await?;
    serde_json::from_slice(&body)
        .map_err(|e| ApiError::internal(format!("node {node:?} sent a usage summary that does not parse: {e}")))
}

/// Serves a read of the group.
pub(crate) async fn serve(
    shared: &Arc<ApiState>,
    _user: &User,
    method: &http::Method,
    target: &MetricsTarget,
    query: &Query,
) -> Result<http::Response<Body>, ApiError> {
    let (plural, kind, _, _) = RESOURCES[usize::from(target.pods)];
    if !matches!(*method, http::Method::GET) {
        return Err(ApiError::method_not_allowed(format!(
            "{plural}.{GROUP} can only be read (get, list), not with {method}"
        )));
    }
    if query.flag("watch") {
        return Err(ApiError::method_not_allowed(format!("{plural}.{GROUP} cannot be watched")));
    }
    let res = if target.pods { &PODS } else { &NODES };
    let (labels, fields) = selectors(res, query)?;
    let objects = match &target.name {
        Some(name) => {
            let ns = target.namespace.as_deref().unwrap_or("");
            match shared.store.get(res, ns, name).await {
                Ok(o) => vec![o],
                Err(edgehive_store::StoreError::NotFound { .. }) => Vec::new(),
                Err(e) => return Err(store_err(res)(e)),
            }
        }
        None => {
            let opts = ListOptions { namespace: target.namespace.clone(), labels, fields, ..ListOptions::default() };
            shared.store.list(res, &opts).await.map_err(store_err(res))?.items
        }
    };
    let objects: Vec<Value> = objects.iter().filter_map(|o| o.parse().ok()).collect();
    // Every node needed, asked at once.
    let mut nodes: Vec<String> = objects
        .iter()
        .filter_map(|o| {
            if target.pods { o["spec"]["nodeName"].as_str() } else { o["metadata"]["name"].as_str() }
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
        })
        .collect();
    nodes.sort();
    nodes.dedup();
    let mut summaries: HashMap<String, Arc<UsageSummary>> = futures_util::future::join_all(
        nodes.iter().map(|n| async move { (n.clone(), summary(shared, n, FRESH).await) }),
    )
    .await
    .into_iter()
    .filter_map(|(n, s)| Some((n, s?)))
    .collect();
    // One pod asked for by name that its node's kept summary does not have
    // (started since): asked again, unless the summary is brand new.
    if target.pods
        && target.name.is_some()
        && let Some(pod) = objects.first()
        && let Some(node) = pod["spec"]["nodeName"].as_str()
        && summaries.get(node).is_some_and(|s| pod_metrics(pod, &summaries_of(node, s), "").is_none())
        && let Some(s) = summary(shared, node, RECHECK).await
    {
        summaries.insert(node.to_owned(), s);
    }
    let now = time::OffsetDateTime::now_utc();
    let now = now
        .replace_nanosecond(0)
        .unwrap_or(now)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let items: Vec<Value> = objects
        .iter()
        .filter_map(|o| if target.pods { pod_metrics(o, &summaries, &now) } else { node_metrics(o, &summaries, &now) })
        .collect();
    match &target.name {
        Some(name) => match items.into_iter().next() {
            Some(item) => Ok(value_response(StatusCode::OK, &item)),
            None => {
                let shown = match &target.namespace {
                    Some(ns) => format!("{ns}/{name}"),
                    None => name.clone(),
                };
                Err(ApiError::not_found(RESOURCES[usize::from(target.pods)].2, GROUP, &shown))
            }
        },
        None => Ok(value_response(
            StatusCode::OK,
            &json!({
                "kind": format!("{kind}List"),
                "apiVersion": format!("{GROUP}/{VERSION}"),
                "metadata": {},
                "items": items,
            }),
        )),
    }
}

fn summaries_of(node: &str, s: &Arc<UsageSummary>) -> HashMap<String, Arc<UsageSummary>> {
    HashMap::from([(node.to_owned(), Arc::clone(s))])
}

fn metadata(o: &Value, now: &str) -> Value {
    let mut m = json!({"name": o["metadata"]["name"], "creationTimestamp": now});
    if let Some(ns) = o["metadata"]["namespace"].as_str() {
        m["namespace"] = json!(ns);
    }
    if let Some(labels) = o["metadata"]["labels"].as_object() {
        m["labels"] = Value::Object(labels.clone());
    }
    m
}

fn usage(u: &edgehive_model::session::Usage) -> Value {
    json!({"cpu": format!("{}n", u.cpu_nano_cores), "memory": memory_quantity(u.memory_bytes)})
}

/// Bytes as metrics-server writes them: `Ki` when whole.
fn memory_quantity(bytes: u64) -> String {
    if bytes > 0 && bytes.is_multiple_of(1024) { format!("{}Ki", bytes / 1024) } else { bytes.to_string() }
}

/// A Go duration (`metav1.Duration`) of milliseconds: `1.5s`, `10s`.
fn window(ms: u64) -> String {
    let (s, rest) = (ms / 1000, ms % 1000);
    if rest == 0 { format!("{s}s") } else { format!("{s}.{}s", format!("{rest:03}").trim_end_matches('0')) }
}

fn node_metrics(node: &Value, summaries: &HashMap<String, Arc<UsageSummary>>, now: &str) -> Option<Value> {
    let s = summaries.get(node["metadata"]["name"].as_str()?)?;
    Some(json!({
        "kind": "NodeMetrics",
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "metadata": metadata(node, now),
        "timestamp": s.timestamp,
        "window": window(s.window_ms),
        "usage": usage(&s.node),
    }))
}

fn pod_metrics(pod: &Value, summaries: &HashMap<String, Arc<UsageSummary>>, now: &str) -> Option<Value> {
    let s = summaries.get(pod["spec"]["nodeName"].as_str()?)?;
    let (ns, name) = (pod["metadata"]["namespace"].as_str()?, pod["metadata"]["name"].as_str()?);
    let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
    let found = s
        .pods
        .iter()
        .find(|p| p.namespace == ns && p.name == name && (p.uid.is_empty() || uid.is_empty() || p.uid == uid))?;
    if found.containers.is_empty() {
        return None;
    }
    let containers: Vec<Value> =
        found.containers.iter().map(|c| json!({"name": c.name, "usage": usage(&c.usage)})).collect();
    Some(json!({
        "kind": "PodMetrics",
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "metadata": metadata(pod, now),
        "timestamp": s.timestamp,
        "window": window(s.window_ms),
        "containers": containers,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_quantities_and_windows_are_as_metrics_server_writes_them() {
        assert_eq!(parse(&["nodes"]), Some(MetricsTarget { pods: false, namespace: None, name: None }));
        assert_eq!(
            parse(&["namespaces", "default", "pods", "web"]),
            Some(MetricsTarget { pods: true, namespace: Some("default".into()), name: Some("web".into()) })
        );
        assert_eq!(parse(&["namespaces", "default", "nodes"]), None);
        assert_eq!(parse(&["services"]), None);
        assert_eq!(memory_quantity(2048), "2Ki");
        assert_eq!(memory_quantity(1000), "1000");
        assert_eq!(memory_quantity(0), "0");
        assert_eq!(window(10_000), "10s");
        assert_eq!(window(1_500), "1.5s");
        assert_eq!(window(503), "0.503s");
    }
}
