//! Nodes as placement sees them, and the predicates Kubernetes' scheduler
//! and DaemonSet controller share: node selector, required node affinity,
//! and taints against tolerations.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::world::{labels_of, str_at};

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
}

impl NodeInfo {
    /// The record of a stored node.
    pub fn of(name: &str, rev: u64, node: &Value) -> NodeInfo {
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
