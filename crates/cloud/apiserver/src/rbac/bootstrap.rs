//! The default roles and bindings, written at every start as
//! kube-apiserver's `rbac/bootstrap-roles` post-start hook writes them
//! (`plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go`), with the
//! subset of rules that names what this server serves or what Kubernetes
//! clients expect to see.
//!
//! Reconciliation follows Kubernetes' (`pkg/registry/rbac/reconciliation`):
//! a missing object is created; an existing one annotated
//! `rbac.authorization.kubernetes.io/autoupdate: "false"` is left as the
//! user made it; otherwise missing rules, labels, annotations, aggregation
//! selectors and subjects are added and nothing is taken away.

use edgehive_store::resources::{CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, ResourceDef};
use edgehive_store::{Store, StoreError};
use serde_json::{Value, json};

use super::rules::PolicyRule;

/// The label every default object carries.
pub(crate) const BOOTSTRAP_LABEL: (&str, &str) = ("kubernetes.io/bootstrapping", "rbac-defaults");
/// The annotation that lets a user keep an edited default.
pub(crate) const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";
/// The label prefix of the aggregated roles' selectors.
pub(crate) const AGGREGATE_TO: &str = "rbac.authorization.k8s.io/aggregate-to-";

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];
const READ_WRITE: &[&str] = &["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"];

fn r(verbs: &[&str], group: &str, resources: &[&str]) -> PolicyRule {
    PolicyRule::resources(verbs, &[group], resources)
}

fn role(name: &str, labels: &[(&str, &str)], rules: &[PolicyRule], aggregate_from: Option<&str>) -> Value {
    let mut l = serde_json::Map::new();
    l.insert(BOOTSTRAP_LABEL.0.into(), json!(BOOTSTRAP_LABEL.1));
    for (k, v) in labels {
        l.insert((*k).into(), json!(v));
    }
    let mut v = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": l, "annotations": {AUTOUPDATE: "true"}},
        "rules": rules.iter().map(PolicyRule::to_json).collect::<Vec<_>>(),
    });
    if let Some(to) = aggregate_from {
        v["aggregationRule"] =
            json!({"clusterRoleSelectors": [{"matchLabels": {format!("{AGGREGATE_TO}{to}"): "true"}}]});
    }
    v
}

fn aggregate(to: &str) -> (String, &'static str) {
    (format!("{AGGREGATE_TO}{to}"), "true")
}

/// The default ClusterRoles.
pub(crate) fn cluster_roles() -> Vec<Value> {
    let (admin_l, edit_l, view_l) = (aggregate("admin"), aggregate("edit"), aggregate("view"));
    fn label<'a>(l: &'a (String, &'static str)) -> [(&'a str, &'static str); 1] {
        [(l.0.as_str(), l.1)]
    }
    let core = "";
    vec![
        role(
            "cluster-admin",
            &[],
            &[PolicyRule::resources(&["*"], &["*"], &["*"]), PolicyRule::urls(&["*"], &["*"])],
            None,
        ),
        role(
            "system:discovery",
            &[],
            &[PolicyRule::urls(
                &["get"],
                &[
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                ],
            )],
            None,
        ),
        role(
            "system:public-info-viewer",
            &[],
            &[PolicyRule::urls(&["get"], &["/healthz", "/livez", "/readyz", "/version", "/version/"])],
            None,
        ),
        role(
            "system:basic-user",
            &[],
            &[
                r(&["create"], "authorization.k8s.io", &["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
                r(&["create"], "authentication.k8s.io", &["selfsubjectreviews"]),
            ],
            None,
        ),
        role(
            "system:monitoring",
            &[],
            &[PolicyRule::urls(
                &["get"],
                &["/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics", "/metrics/slis", "/readyz", "/readyz/*"],
            )],
            None,
        ),
        role(
            "system:auth-delegator",
            &[],
            &[
                r(&["create"], "authentication.k8s.io", &["tokenreviews"]),
                r(&["create"], "authorization.k8s.io", &["subjectaccessreviews"]),
            ],
            None,
        ),
        role("admin", &[], &[], Some("admin")),
        role("edit", &label(&admin_l), &[], Some("edit")),
        role("view", &label(&edit_l), &[], Some("view")),
        role(
            "system:aggregate-to-admin",
            &label(&admin_l),
            &[
                r(&["create"], "authorization.k8s.io", &["localsubjectaccessreviews"]),
                r(READ_WRITE, "rbac.authorization.k8s.io", &["roles", "rolebindings"]),
            ],
            None,
        ),
        role(
            "system:aggregate-to-edit",
            &label(&edit_l),
            &[
                r(
                    READ,
                    core,
                    &["pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy"],
                ),
                r(&["impersonate"], core, &["serviceaccounts"]),
                r(WRITE, core, &["pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"]),
                r(&["create"], core, &["pods/eviction"]),
                r(
                    WRITE,
                    core,
                    &[
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "serviceaccounts",
                        "services",
                        "services/proxy",
                        "persistentvolumeclaims",
                        "configmaps",
                        "secrets",
                    ],
                ),
                r(&["create"], core, &["serviceaccounts/token"]),
                r(
                    WRITE,
                    "apps",
                    &[
                        "statefulsets",
                        "statefulsets/scale",
                        "daemonsets",
                        "deployments",
                        "deployments/scale",
                        "deployments/rollback",
                        "replicasets",
                        "replicasets/scale",
                    ],
                ),
                r(WRITE, "autoscaling", &["horizontalpodautoscalers"]),
                r(WRITE, "batch", &["jobs", "cronjobs"]),
                r(WRITE, "policy", &["poddisruptionbudgets"]),
                r(WRITE, "networking.k8s.io", &["networkpolicies", "ingresses"]),
            ],
            None,
        ),
        role(
            "system:aggregate-to-view",
            &label(&view_l),
            &[
                r(
                    READ,
                    core,
                    &[
                        "pods",
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "serviceaccounts",
                        "services",
                        "services/status",
                        "endpoints",
                        "persistentvolumeclaims",
                        "persistentvolumeclaims/status",
                        "configmaps",
                    ],
                ),
                r(
                    READ,
                    core,
                    &[
                        "limitranges",
                        "resourcequotas",
                        "bindings",
                        "events",
                        "pods/status",
                        "resourcequotas/status",
                        "namespaces/status",
                        "replicationcontrollers/status",
                        "pods/log",
                    ],
                ),
                r(READ, core, &["namespaces"]),
                r(READ, "discovery.k8s.io", &["endpointslices"]),
                r(
                    READ,
                    "apps",
                    &[
                        "controllerrevisions",
                        "statefulsets",
                        "statefulsets/status",
                        "statefulsets/scale",
                        "daemonsets",
                        "daemonsets/status",
                        "deployments",
                        "deployments/status",
                        "deployments/scale",
                        "replicasets",
                        "replicasets/status",
                        "replicasets/scale",
                    ],
                ),
                r(READ, "autoscaling", &["horizontalpodautoscalers", "horizontalpodautoscalers/status"]),
                r(READ, "batch", &["jobs", "cronjobs", "cronjobs/status", "jobs/status"]),
                r(READ, "policy", &["poddisruptionbudgets", "poddisruptionbudgets/status"]),
                r(READ, "networking.k8s.io", &["networkpolicies", "ingresses", "ingresses/status"]),
                r(READ, "events.k8s.io", &["events"]),
            ],
            None,
        ),
        // What metrics-server installs beside its API, so that `view` (and
        // so `edit` and `admin`) may `kubectl top`.
        role(
            "system:aggregated-metrics-reader",
            &[(view_l.0.as_str(), "true"), (edit_l.0.as_str(), "true"), (admin_l.0.as_str(), "true")],
            &[r(READ, "metrics.k8s.io", &["pods", "nodes"])],
            None,
        ),
    ]
}

fn binding(role: &str, groups: &[&str]) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {
            "name": role,
            "labels": {BOOTSTRAP_LABEL.0: BOOTSTRAP_LABEL.1},
            "annotations": {AUTOUPDATE: "true"},
        },
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": groups
            .iter()
            .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
            .collect::<Vec<_>>(),
    })
}

/// The default ClusterRoleBindings.
pub(crate) fn cluster_role_bindings() -> Vec<Value> {
    vec![
        binding("cluster-admin", &["system:masters"]),
        binding("system:discovery", &["system:authenticated"]),
        binding("system:basic-user", &["system:authenticated"]),
        binding("system:public-info-viewer", &["system:authenticated", "system:unauthenticated"]),
        binding("system:monitoring", &["system:monitoring"]),
    ]
}

/// Adds to `have[key]` (an array) the items of `want[key]` it lacks;
/// whether anything was added.
fn union_array(have: &mut Value, want: &Value, key: &str) -> bool {
    let Some(wanted) = want.get(key).and_then(Value::as_array) else { return false };
    if !have.get(key).is_some_and(Value::is_array) {
        have[key] = json!([]);
    }
    let Some(list) = have.get_mut(key).and_then(Value::as_array_mut) else { return false };
    let mut changed = false;
    for w in wanted {
        if !list.contains(w) {
            list.push(w.clone());
            changed = true;
        }
    }
    changed
}

/// Adds the map entries of `want[/metadata/{key}]` that `have` lacks.
fn union_map(have: &mut Value, want: &Value, key: &str) -> bool {
    let Some(wanted) = want.pointer(&format!("/metadata/{key}")).and_then(Value::as_object) else { return false };
    if !have.pointer(&format!("/metadata/{key}")).is_some_and(Value::is_object) {
        have["metadata"][key] = json!({});
    }
    let Some(map) = have.pointer_mut(&format!("/metadata/{key}")).and_then(Value::as_object_mut) else {
        return false;
    };
    let mut changed = false;
    for (k, v) in wanted {
        if !map.contains_key(k) {
            map.insert(k.clone(), v.clone());
            changed = true;
        }
    }
    changed
}

/// The reconciled form of `current` (`None`: leave it as it is).
pub(crate) fn reconcile(current: &Value, want: &Value) -> Option<Value> {
    let auto = current.pointer(&format!("/metadata/annotations/{}", AUTOUPDATE.replace('/', "~1")));
    if auto.and_then(Value::as_str) == Some("false") {
        return None;
    }
    let mut next = current.clone();
    let mut changed = union_map(&mut next, want, "labels") | union_map(&mut next, want, "annotations");
    if let Some(selectors) = want.get("aggregationRule") {
        if !next.get("aggregationRule").is_some_and(Value::is_object) {
            next["aggregationRule"] = json!({});
        }
        changed |= union_array(&mut next["aggregationRule"], selectors, "clusterRoleSelectors");
    } else if want.get("rules").is_some() {
        // An aggregated role's rules are the aggregation controller's.
        changed |= union_array(&mut next, want, "rules");
    }
    if want.get("subjects").is_some() {
        changed |= union_array(&mut next, want, "subjects");
    }
    changed.then_some(next)
}

async fn ensure(store: &Store, res: &'static ResourceDef, want: Value) -> Result<(), StoreError> {
    let name = want.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
    let reconciled = store
        .update_with(res, "", &name, |cur| -> Result<Option<Value>, StoreError> { Ok(reconcile(cur.value()?, &want)) })
        .await;
    match reconciled {
        Ok(_) => Ok(()),
        Err(StoreError::NotFound { .. }) => match store.create(res, want).await {
            Ok(_) => {
                tracing::info!(kind = res.kind, name, "created a default RBAC object");
                Ok(())
            }
            Err(StoreError::AlreadyExists { .. }) => Ok(()),
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// Writes the default roles and bindings (and fills the aggregated roles).
pub(crate) async fn bootstrap(store: &Store) -> Result<(), StoreError> {
    for mut role in cluster_roles() {
        crate::defaults::apply_defaults("rbac.authorization.k8s.io", "ClusterRole", &mut role);
        ensure(store, &CLUSTER_ROLES, role).await?;
    }
    for mut b in cluster_role_bindings() {
        crate::defaults::apply_defaults("rbac.authorization.k8s.io", "ClusterRoleBinding", &mut b);
        ensure(store, &CLUSTER_ROLE_BINDINGS, b).await?;
    }
    super::aggregation::aggregate_all(store).await
}
