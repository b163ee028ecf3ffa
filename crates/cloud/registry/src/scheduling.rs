//! Placement semantics of pods on nodes, as Kubernetes' scheduler, its
//! taint manager and the DaemonSet controller share them: node selector,
//! node affinity (required and preferred), taints against tolerations,
//! resource requests against allocatable, and pod anti-affinity by
//! hostname. Pure functions of JSON and small records; the edge
//! controller's scheduler and the workload controllers both build on them.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::quantity::parse_quantity;

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

fn labels_of(v: &Value, pointer: &str) -> BTreeMap<String, String> {
    v.pointer(pointer)
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect())
        .unwrap_or_default()
}

/// The label every node carries with its own name (the topology key of
/// per-node anti-affinity).
pub const HOSTNAME: &str = "kubernetes.io/hostname";

/// A taint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    /// Key.
    pub key: String,
    /// Value.
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// CPU, memory and pod count, in billionths of their units (as
/// [`crate::quantity::Quantity`] holds them; pods in whole pods).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resources {
    /// CPU, in billionths of a core.
    pub cpu: i128,
    /// Memory, in billionths of a byte.
    pub memory: i128,
    /// Pods.
    pub pods: i64,
}

impl Resources {
    /// The `cpu`, `memory` and `pods` of a resource list (`status.allocatable`, `requests`).
    pub fn of(list: Option<&Value>) -> Resources {
        let q = |k: &str| {
            list.and_then(|l| l.get(k))
                .and_then(|v| match v {
                    Value::String(s) => parse_quantity(s).ok(),
                    Value::Number(n) => parse_quantity(&n.to_string()).ok(),
                    _ => None,
                })
                .map_or(0, |q| q.nanos)
        };
        Resources { cpu: q("cpu"), memory: q("memory"), pods: i64::try_from(q("pods") / 1_000_000_000).unwrap_or(0) }
    }

    fn max(self, o: Resources) -> Resources {
        Resources { cpu: self.cpu.max(o.cpu), memory: self.memory.max(o.memory), pods: self.pods.max(o.pods) }
    }
}

impl std::ops::Add for Resources {
    type Output = Resources;
    fn add(self, o: Resources) -> Resources {
        Resources { cpu: self.cpu + o.cpu, memory: self.memory + o.memory, pods: self.pods + o.pods }
    }
}

impl std::ops::Sub for Resources {
    type Output = Resources;
    fn sub(self, o: Resources) -> Resources {
        Resources { cpu: self.cpu - o.cpu, memory: self.memory - o.memory, pods: self.pods - o.pods }
    }
}

/// What a pod asks of its node (Kubernetes' `PodRequests`): the larger of
/// its containers' requests summed and its largest init container's, plus
/// its overhead; one pod.
pub fn pod_requests(spec: &Value) -> Resources {
    let list = |k: &str| spec.get(k).and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let requests = |c: &Value| Resources::of(c.pointer("/resources/requests"));
    let mut sum = Resources::default();
    let mut init_sidecars = Resources::default();
    let mut init = Resources::default();
    for c in list("initContainers") {
        if str_at(c, "/restartPolicy") == "Always" {
            // A sidecar keeps running beside the containers.
            init_sidecars = init_sidecars + requests(c);
            init = init.max(init_sidecars);
        } else {
            init = init.max(init_sidecars + requests(c));
        }
    }
    for c in list("containers") {
        sum = sum + requests(c);
    }
    let mut total = (sum + init_sidecars).max(init) + Resources::of(spec.get("overhead"));
    total.pods = 1;
    total
}

/// What placement keeps of a node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeInfo {
    /// Name.
    pub name: String,
    /// resourceVersion.
    pub rev: u64,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Taints.
    pub taints: Vec<Taint>,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// Being deleted.
    pub deleting: bool,
    /// The Ready condition is True.
    pub ready: bool,
    /// Since when the Ready condition is not True (its `lastTransitionTime`), if it is not.
    pub not_ready_since: Option<time::OffsetDateTime>,
    /// `status.allocatable`; `None` when the node reports none (nothing is then checked).
    pub allocatable: Option<Resources>,
}

impl NodeInfo {
    /// The record of a stored node.
    pub fn of(name: &str, rev: u64, node: &Value) -> NodeInfo {
        let ready = node
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready"));
        let taints = node
            .pointer("/spec/taints")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|t| Taint {
                key: str_at(t, "/key").to_string(),
                value: str_at(t, "/value").to_string(),
                effect: str_at(t, "/effect").to_string(),
            })
            .collect();
        NodeInfo {
            name: name.to_string(),
            rev,
            labels: labels_of(node, "/metadata/labels"),
            taints,
            unschedulable: node.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true),
            deleting: node.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null()),
            ready: ready.is_some_and(|c| c["status"] == "True"),
            not_ready_since: ready
                .filter(|c| c["status"] != "True")
                .and_then(|c| c.get("lastTransitionTime"))
                .and_then(Value::as_str)
                .and_then(edgehive_store::parse_rfc3339),
            allocatable: node.pointer("/status/allocatable").filter(|a| a.is_object()).map(|a| Resources::of(Some(a))),
        }
    }
}

/// Whether the pod spec's `nodeSelector` and required node affinity admit `node`.
pub fn selects_node(spec: &Value, node: &NodeInfo) -> bool {
    let selector_ok = spec
        .get("nodeSelector")
        .and_then(Value::as_object)
        .is_none_or(|m| m.iter().all(|(k, v)| node.labels.get(k).map(String::as_str) == v.as_str()));
    selector_ok && required_affinity(spec, node)
}

/// `affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`:
/// any term matches (a term: all its expressions and fields match); no
/// terms, or no requirement, admits every node.
fn required_affinity(spec: &Value, node: &NodeInfo) -> bool {
    let Some(terms) = spec
        .pointer("/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
        .and_then(Value::as_array)
    else {
        return true;
    };
    terms.iter().any(|t| term_matches(t, node))
}

/// One node selector term.
pub fn term_matches(term: &Value, node: &NodeInfo) -> bool {
    let exprs = term.get("matchExpressions").and_then(Value::as_array);
    let fields = term.get("matchFields").and_then(Value::as_array);
    if exprs.is_none_or(Vec::is_empty) && fields.is_none_or(Vec::is_empty) {
        // An empty term matches nothing (Kubernetes' `nodeSelectorTerms` semantics).
        return false;
    }
    exprs.into_iter().flatten().all(|e| requirement(e, node.labels.get(str_at(e, "/key")).map(String::as_str)))
        && fields.into_iter().flatten().all(|f| {
            let value = (str_at(f, "/key") == "metadata.name").then_some(node.name.as_str());
            requirement(f, value)
        })
}

fn requirement(e: &Value, have: Option<&str>) -> bool {
    let values: Vec<&str> =
        e.get("values").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let number = |s: &str| s.parse::<i64>().ok();
    match str_at(e, "/operator") {
        "In" => have.is_some_and(|h| values.contains(&h)),
        "NotIn" => have.is_none_or(|h| !values.contains(&h)),
        "Exists" => have.is_some(),
        "DoesNotExist" => have.is_none(),
        "Gt" => matches!((have.and_then(number), values.first().and_then(|v| number(v))), (Some(h), Some(v)) if h > v),
        "Lt" => matches!((have.and_then(number), values.first().and_then(|v| number(v))), (Some(h), Some(v)) if h < v),
        _ => false,
    }
}

/// Whether `toleration` tolerates `taint` (Kubernetes' `ToleratesTaint`).
pub fn tolerates(toleration: &Value, taint: &Taint) -> bool {
    let effect = str_at(toleration, "/effect");
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = str_at(toleration, "/key");
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match str_at(toleration, "/operator") {
        "Exists" => true,
        "" | "Equal" => str_at(toleration, "/value") == taint.value,
        _ => false,
    }
}

/// The sum of the weights of the preferred node affinity terms that `node` matches.
pub fn preferred_affinity_score(spec: &Value, node: &NodeInfo) -> i64 {
    spec.pointer("/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|p| p.get("preference").is_some_and(|t| term_matches(t, node)))
        .filter_map(|p| p.get("weight").and_then(Value::as_i64))
        .sum()
}

/// A pod already on a node, as anti-affinity looks at it.
#[derive(Debug, Clone, Copy)]
pub struct Placed<'a> {
    /// Namespace.
    pub namespace: &'a str,
    /// Labels.
    pub labels: &'a BTreeMap<String, String>,
    /// Its own required anti-affinity terms.
    pub anti_affinity: &'a [Value],
}

/// The `requiredDuringSchedulingIgnoredDuringExecution` pod anti-affinity
/// terms of a pod spec.
pub fn anti_affinity_terms(spec: &Value) -> Vec<Value> {
    spec.pointer("/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// Whether an anti-affinity `term` of a pod in `owner_ns` selects a pod in
/// `ns` with `labels` (namespaces: the term's list, else the owner's own;
/// a `namespaceSelector` of `{}` means every namespace).
fn term_selects(term: &Value, owner_ns: &str, ns: &str, labels: &BTreeMap<String, String>) -> bool {
    let namespaces: Vec<&str> =
        term.get("namespaces").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let all_namespaces =
        term.get("namespaceSelector").and_then(Value::as_object).is_some_and(serde_json::Map::is_empty);
    let in_scope = all_namespaces || if namespaces.is_empty() { ns == owner_ns } else { namespaces.contains(&ns) };
    in_scope && term.get("labelSelector").is_some_and(|s| !s.is_null() && selector_matches(s, labels))
}

/// A `metav1.LabelSelector` against labels (an empty selector matches all).
pub fn selector_matches(selector: &Value, labels: &BTreeMap<String, String>) -> bool {
    let match_labels = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| m.iter().all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str()));
    match_labels
        && selector
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .all(|e| requirement(e, labels.get(str_at(e, "/key")).map(String::as_str)))
}

/// Why pod anti-affinity keeps a pod (`namespace`, `labels`, `spec`) off a
/// node that already runs `placed` (only per-node terms, topology key
/// [`HOSTNAME`], are honoured; others are refused by nothing and ignored).
pub fn anti_affinity_conflict(
    namespace: &str,
    labels: &BTreeMap<String, String>,
    spec: &Value,
    placed: &[Placed<'_>],
) -> Option<&'static str> {
    let per_node = |t: &&Value| str_at(t, "/topologyKey") == HOSTNAME;
    let own = anti_affinity_terms(spec);
    if own.iter().filter(per_node).any(|t| placed.iter().any(|p| term_selects(t, namespace, p.namespace, p.labels))) {
        return Some("node(s) didn't match pod anti-affinity rules");
    }
    if placed
        .iter()
        .any(|p| p.anti_affinity.iter().filter(per_node).any(|t| term_selects(t, p.namespace, namespace, labels)))
    {
        return Some("node(s) didn't satisfy existing pods anti-affinity rules");
    }
    None
}

/// How long a pod with `tolerations` may stay on a node with the
/// `NoExecute` taints `taints` (Kubernetes' taint manager): `None` for as
/// long as it likes (every taint tolerated without `tolerationSeconds`),
/// `Some(0)` not at all (a taint it does not tolerate), otherwise the least
/// `tolerationSeconds` of the tolerations used.
pub fn no_execute_grace(tolerations: &[Value], taints: &[&Taint]) -> Option<i64> {
    let mut least: Option<i64> = None;
    for taint in taints.iter().filter(|t| t.effect == "NoExecute") {
        let used: Vec<&Value> = tolerations.iter().filter(|t| tolerates(t, taint)).collect();
        if used.is_empty() {
            return Some(0);
        }
        for t in used {
            if let Some(secs) = t.get("tolerationSeconds").and_then(Value::as_i64) {
                least = Some(least.map_or(secs.max(0), |l| l.min(secs.max(0))));
            }
        }
    }
    least
}

/// The taints of `node` with an effect in `effects` that no toleration in
/// `spec` tolerates.
pub fn untolerated<'n>(spec: &Value, node: &'n NodeInfo, effects: &[&str]) -> Vec<&'n Taint> {
    let tolerations: &[Value] = spec.get("tolerations").and_then(Value::as_array).map_or(&[], Vec::as_slice);
    node.taints
        .iter()
        .filter(|t| effects.contains(&t.effect.as_str()))
        .filter(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(labels: Value, taints: Value) -> NodeInfo {
        NodeInfo::of("n1", 1, &json!({"metadata": {"name": "n1", "labels": labels}, "spec": {"taints": taints}}))
    }

    #[test]
    fn selectors_and_required_affinity() {
        let n = node(json!({"tier": "edge", "zone": "3"}), json!([]));
        assert!(selects_node(&json!({"nodeSelector": {"tier": "edge"}}), &n));
        assert!(!selects_node(&json!({"nodeSelector": {"tier": "cloud"}}), &n));
        let aff = |exprs: Value| {
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": exprs}]}}}})
        };
        assert!(selects_node(&aff(json!([{"key": "tier", "operator": "In", "values": ["edge", "x"]}])), &n));
        assert!(!selects_node(&aff(json!([{"key": "tier", "operator": "NotIn", "values": ["edge"]}])), &n));
        assert!(selects_node(&aff(json!([{"key": "gpu", "operator": "DoesNotExist"}])), &n));
        assert!(selects_node(&aff(json!([{"key": "zone", "operator": "Gt", "values": ["2"]}])), &n));
        assert!(!selects_node(&aff(json!([{"key": "zone", "operator": "Lt", "values": ["2"]}])), &n));
        let by_name = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}});
        assert!(selects_node(&by_name, &n));
        let empty_term = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{}]}}}});
        assert!(!selects_node(&empty_term, &n));
    }

    #[test]
    fn requests_sum_containers_take_the_largest_init_and_add_overhead() {
        let spec = json!({
            "initContainers": [{"resources": {"requests": {"cpu": "2"}}},
                {"restartPolicy": "Always", "resources": {"requests": {"memory": "1Mi"}}}],
            "containers": [{"resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}},
                {"resources": {"requests": {"cpu": "0.5"}}}, {}],
            "overhead": {"cpu": "10m"},
        });
        let r = pod_requests(&spec);
        assert_eq!(r.cpu, 2_010_000_000, "the init container's 2 cores, plus overhead");
        assert_eq!(r.memory, (65 << 20) * 1_000_000_000, "the containers' memory and the sidecar's");
        assert_eq!(r.pods, 1);
        let n = NodeInfo::of("n", 1, &json!({"status": {"allocatable": {"cpu": "4", "memory": "1Gi", "pods": "110"}}}));
        assert_eq!(n.allocatable, Some(Resources { cpu: 4_000_000_000, memory: (1 << 30) * 1_000_000_000, pods: 110 }));
        assert_eq!(NodeInfo::of("n", 1, &json!({})).allocatable, None);
    }

    #[test]
    fn anti_affinity_by_hostname_both_ways() {
        let web: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
        let db: BTreeMap<String, String> = [("app".to_string(), "db".to_string())].into();
        let term = json!({"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOSTNAME});
        let spec = json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term.clone()]}}});
        let on_node = [Placed { namespace: "default", labels: &web, anti_affinity: &[] }];
        assert_eq!(
            anti_affinity_conflict("default", &web, &spec, &on_node),
            Some("node(s) didn't match pod anti-affinity rules")
        );
        assert_eq!(anti_affinity_conflict("other", &web, &spec, &on_node), None, "another namespace");
        let db_on_node = [Placed { namespace: "default", labels: &db, anti_affinity: &[] }];
        assert_eq!(anti_affinity_conflict("default", &web, &spec, &db_on_node), None);
        // The pod on the node refuses newcomers labelled web.
        let guard = [term];
        let guarded = [Placed { namespace: "default", labels: &db, anti_affinity: &guard }];
        assert_eq!(
            anti_affinity_conflict("default", &web, &json!({}), &guarded),
            Some("node(s) didn't satisfy existing pods anti-affinity rules")
        );
        let zone = json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            [{"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}]}}});
        assert_eq!(anti_affinity_conflict("default", &web, &zone, &on_node), None);
    }

    #[test]
    fn no_execute_taints_evict_at_once_after_the_least_toleration_or_never() {
        let maintenance = Taint { key: "maintenance".into(), value: "true".into(), effect: "NoExecute".into() };
        let soft = Taint { key: "soft".into(), value: String::new(), effect: "NoSchedule".into() };
        assert_eq!(no_execute_grace(&[], &[&soft]), None, "only NoExecute taints evict");
        assert_eq!(no_execute_grace(&[], &[&maintenance]), Some(0));
        let forever = json!({"key": "maintenance", "operator": "Exists", "effect": "NoExecute"});
        assert_eq!(no_execute_grace(std::slice::from_ref(&forever), &[&maintenance]), None);
        let brief = json!({"key": "maintenance", "operator": "Exists", "tolerationSeconds": 30});
        let briefer = json!({"operator": "Exists", "tolerationSeconds": 10});
        assert_eq!(no_execute_grace(&[forever, brief.clone(), briefer], &[&maintenance]), Some(10));
        let other = Taint { key: "other".into(), value: String::new(), effect: "NoExecute".into() };
        assert_eq!(no_execute_grace(&[brief], &[&maintenance, &other]), Some(0), "one taint not tolerated");
    }

    #[test]
    fn preferred_affinity_weights_add_up() {
        let n = node(json!({"tier": "edge", "gpu": "yes"}), json!([]));
        let spec = json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "preference": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["edge"]}]}},
            {"weight": 5, "preference": {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}},
            {"weight": 50, "preference": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["cloud"]}]}}]}}});
        assert_eq!(preferred_affinity_score(&spec, &n), 15);
    }

    #[test]
    fn taints_and_tolerations() {
        let n = node(
            json!({}),
            json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
            {"key": "soft", "effect": "PreferNoSchedule"}]),
        );
        let spec = |tols: Value| json!({"tolerations": tols});
        assert_eq!(untolerated(&spec(json!([])), &n, &["NoSchedule", "NoExecute"]).len(), 1);
        assert!(
            untolerated(&spec(json!([{"key": "dedicated", "operator": "Equal", "value": "gpu"}])), &n, &["NoSchedule"])
                .is_empty()
        );
        assert!(
            untolerated(
                &spec(json!([{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}])),
                &n,
                &["NoSchedule"]
            )
            .is_empty()
        );
        assert_eq!(untolerated(&spec(json!([{"key": "dedicated", "value": "cpu"}])), &n, &["NoSchedule"]).len(), 1);
        assert!(untolerated(&spec(json!([{"operator": "Exists"}])), &n, &["NoSchedule"]).is_empty());
        assert_eq!(
            untolerated(
                &spec(json!([{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}])),
                &n,
                &["NoSchedule"]
            )
            .len(),
            1
        );
    }
}
