//! Escalation prevention, as Kubernetes' RBAC storage does it
//! (`pkg/registry/rbac/{role,clusterrole,rolebinding,clusterrolebinding}/policybased`,
//! `pkg/registry/rbac/validation/rule.go` `ConfirmNoEscalation`): a user may
//! write a Role or ClusterRole only with rules they hold themselves (in
//! the role's namespace) or with the `escalate` verb on it, and a binding
//! only to a role whose rules they hold or with the `bind` verb on it.
//! `system:masters` may do either.
//!
//! The request's user reaches the handlers as a task-local ([`scope`]), so
//! the check runs on the object the write would store (after a patch is
//! applied), inside the same read-modify-write.

use std::sync::Arc;

use edgehive_store::resources::{CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, ROLE_BINDINGS, ROLES, ResourceDef};
use serde_json::Value;

use super::rules::{Attributes, PolicyRule, ResourceAttributes};
use super::{Authorizer, MASTERS};
use crate::context::User;
use crate::status::ApiError;

tokio::task_local! {
    static USER: Arc<User>;
}

/// Runs `fut` with `user` as the request's user.
pub(crate) async fn scope<F: std::future::Future>(user: Arc<User>, fut: F) -> F::Output {
    USER.scope(user, fut).await
}

/// The atoms of a rule: one rule per verb × group × resource × name (or
/// per verb × URL), as Kubernetes' `BreakdownRule`.
fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let mut out = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                let one = |names: Vec<String>| PolicyRule {
                    verbs: vec![verb.clone()],
                    api_groups: vec![group.clone()],
                    resources: vec![resource.clone()],
                    resource_names: names,
                    non_resource_urls: Vec::new(),
                };
                if rule.resource_names.is_empty() {
                    out.push(one(Vec::new()));
                }
                for name in &rule.resource_names {
                    out.push(one(vec![name.clone()]));
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            out.push(PolicyRule {
                verbs: vec![verb.clone()],
                non_resource_urls: vec![url.clone()],
                ..Default::default()
            });
        }
    }
    out
}

fn has(list: &[String], item: &str) -> bool {
    list.iter().any(|x| x == "*" || x == item)
}

/// Whether `owner` covers the atom `sub` (Kubernetes' `ruleCovers`).
fn covers(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let verb = sub.verbs.first().map(String::as_str).unwrap_or_default();
    if !has(&owner.verbs, verb) {
        return false;
    }
    if let Some(url) = sub.non_resource_urls.first() {
        return owner
            .non_resource_urls
            .iter()
            .any(|o| o == "*" || o == url || o.strip_suffix('*').is_some_and(|prefix| url.starts_with(prefix)));
    }
    let group = sub.api_groups.first().map(String::as_str).unwrap_or_default();
    let resource = sub.resources.first().map(String::as_str).unwrap_or_default();
    let resource_ok = owner.resources.iter().any(|o| {
        o == "*"
            || o == resource
            || o.strip_prefix("*/").is_some_and(|s| resource.split_once('/').is_some_and(|(_, rs)| rs == s))
    });
    let names_ok = owner.resource_names.is_empty()
        || sub.resource_names.first().is_some_and(|n| owner.resource_names.iter().any(|o| o == n));
    has(&owner.api_groups, group) && resource_ok && names_ok
}

/// `{APIGroups:["apps"], Resources:["deployments"], Verbs:["get"]}`, as
/// Kubernetes' `CompactString` prints a rule.
fn compact(rule: &PolicyRule) -> String {
    let list = |v: &[String]| format!("[{}]", v.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(" "));
    let mut parts = Vec::new();
    for (label, v) in [
        ("APIGroups", &rule.api_groups),
        ("Resources", &rule.resources),
        ("ResourceNames", &rule.resource_names),
        ("NonResourceURLs", &rule.non_resource_urls),
        ("Verbs", &rule.verbs),
    ] {
        // The group list is printed even when it is [""].
        if !v.is_empty() {
            parts.push(format!("{label}:{}", list(v)));
        }
    }
    format!("{{{}}}", parts.join(", "))
}

/// The atoms of `rules` that `owned` does not cover.
pub(crate) fn missing(owned: &[PolicyRule], rules: &[PolicyRule]) -> Vec<PolicyRule> {
    let mut out = Vec::new();
    for rule in rules {
        for atom in breakdown(rule) {
            if !owned.iter().any(|o| covers(o, &atom)) && !out.contains(&atom) {
                out.push(atom);
            }
        }
    }
    out
}

fn refused(res: &ResourceDef, name: &str, user: &User, missing: &[PolicyRule], errors: &[String]) -> ApiError {
    let mut groups = user.groups.clone();
    if !groups.iter().any(|g| g == "system:authenticated") {
        groups.push("system:authenticated".into());
    }
    let groups = format!("[{}]", groups.iter().map(|g| format!("{g:?}")).collect::<Vec<_>>().join(" "));
    let mut msg = format!(
        "{}.{} \"{name}\" is forbidden: user {:?} (groups={groups}) is attempting to grant RBAC permissions not currently held:\n{}",
        res.plural,
        res.group,
        user.name,
        missing.iter().map(compact).collect::<Vec<_>>().join("\n")
    );
    if !errors.is_empty() {
        msg.push_str(&format!("; resolution errors: [{}]", errors.join(" ")));
    }
    ApiError::forbidden(msg).details(name, res.group, res.plural)
}

fn verb_allowed(authorizer: &Authorizer, user: &User, verb: &str, resource: &str, ns: &str, name: &str) -> bool {
    let attrs = Attributes::Resource(ResourceAttributes {
        verb: verb.into(),
        group: "rbac.authorization.k8s.io".into(),
        resource: resource.into(),
        subresource: None,
        namespace: ns.into(),
        name: name.into(),
    });
    authorizer.authorize(&user.name, &user.groups, &attrs).allowed
}

/// Refuses writing `obj` (a role or binding of `res`) if it would grant
/// more than the request's user holds. Other resources, and requests with
/// no user in scope (the server's own writes), pass.
pub(crate) fn check(authorizer: &Authorizer, res: &'static ResourceDef, obj: &Value) -> Result<(), ApiError> {
    let is = |r: &ResourceDef| std::ptr::eq(res, r);
    if !(is(&ROLES) || is(&CLUSTER_ROLES) || is(&ROLE_BINDINGS) || is(&CLUSTER_ROLE_BINDINGS)) {
        return Ok(());
    }
    let Ok(user) = USER.try_with(Arc::clone) else { return Ok(()) };
    if user.groups.iter().any(|g| g == MASTERS) {
        return Ok(());
    }
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let ns = if res.namespaced {
        obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default()
    } else {
        ""
    };
    let wanted: Vec<PolicyRule> = if is(&ROLES) || is(&CLUSTER_ROLES) {
        if verb_allowed(authorizer, &user, "escalate", res.plural, ns, name) {
            return Ok(());
        }
        PolicyRule::of_role(obj)
    } else {
        let kind = obj.pointer("/roleRef/kind").and_then(Value::as_str).unwrap_or_default();
        let role = obj.pointer("/roleRef/name").and_then(Value::as_str).unwrap_or_default();
        let (plural, rules) = match kind {
            "ClusterRole" => ("clusterroles", authorizer.cluster_role(role)),
            "Role" => ("roles", authorizer.role(ns, role)),
            // Validation refuses it with Kubernetes' message.
            _ => return Ok(()),
        };
        if verb_allowed(authorizer, &user, "bind", plural, ns, role) {
            return Ok(());
        }
        match rules {
            Some(r) => r.to_vec(),
            None => {
                let singular = if plural == "roles" { "role" } else { "clusterrole" };
                return Err(ApiError::forbidden(format!(
                    "{}.{} \"{name}\" is forbidden: {singular}.rbac.authorization.k8s.io \"{role}\" not found",
                    res.plural, res.group
                ))
                .details(name, res.group, res.plural));
            }
        }
    };
    let owned = authorizer.rules_for(&user.name, &user.groups, ns);
    let gap = missing(&owned.rules, &wanted);
    if gap.is_empty() {
        return Ok(());
    }
    tracing::info!(user = %user.name, kind = res.kind, name, "refused: would grant permissions not held");
    Err(refused(res, name, &user, &gap, &owned.errors))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coverage_is_checked_atom_by_atom() {
        let owned = vec![
            PolicyRule::resources(&["get", "list", "watch"], &[""], &["pods", "pods/log"]),
            PolicyRule::resources(&["*"], &["apps"], &["*/scale"]),
            PolicyRule::resources(&["get"], &[""], &["configmaps"]).names(&["settings"]),
            PolicyRule::urls(&["get"], &["/apis/*"]),
        ];
        assert!(missing(&owned, &[PolicyRule::resources(&["get", "list"], &[""], &["pods"])]).is_empty());
        assert!(missing(&owned, &[PolicyRule::resources(&["update"], &["apps"], &["deployments/scale"])]).is_empty());
        assert!(
            missing(&owned, &[PolicyRule::resources(&["get"], &[""], &["configmaps"]).names(&["settings"])]).is_empty()
        );
        assert!(missing(&owned, &[PolicyRule::urls(&["get"], &["/apis/apps"])]).is_empty());
        let gap = missing(&owned, &[PolicyRule::resources(&["get", "create"], &[""], &["pods", "secrets"])]);
        assert_eq!(
            gap.iter().map(compact).collect::<Vec<_>>(),
            [
                r#"{APIGroups:[""], Resources:["pods"], Verbs:["create"]}"#,
                r#"{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}"#,
                r#"{APIGroups:[""], Resources:["secrets"], Verbs:["create"]}"#,
            ]
        );
        // All configmaps is more than one of them; `*` is more than `pods`.
        assert_eq!(missing(&owned, &[PolicyRule::resources(&["get"], &[""], &["configmaps"])]).len(), 1);
        assert_eq!(missing(&owned, &[PolicyRule::resources(&["get"], &[""], &["*"])]).len(), 1);
        assert_eq!(missing(&owned, &[PolicyRule::urls(&["get"], &["/version"])]).len(), 1);
    }
}
