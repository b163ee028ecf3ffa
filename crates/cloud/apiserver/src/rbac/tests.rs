//! The authorizer over hand-made policies: bindings, implicit groups,
//! namespaces, missing roles, the bootstrap policy and aggregation.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::bootstrap::{cluster_role_bindings, cluster_roles};
use super::*;

fn authorizer(objects: &[(&'static ResourceDef, &str, Value)]) -> Authorizer {
    let a = Authorizer::default();
    {
        let mut p = a.policy.write().unwrap();
        for (res, ns, v) in objects {
            let name = v.pointer("/metadata/name").and_then(Value::as_str).unwrap();
            p.apply_value(res, ns, name, Some(v));
        }
    }
    a
}

/// The bootstrap policy with aggregated rules filled, as the server has it.
fn bootstrapped(extra: &[(&'static ResourceDef, &str, Value)]) -> Authorizer {
    let mut roles: BTreeMap<String, Value> =
        cluster_roles().into_iter().map(|r| (r["metadata"]["name"].as_str().unwrap().to_owned(), r)).collect();
    for _ in 0..3 {
        let names: Vec<String> = roles.keys().cloned().collect();
        for n in names {
            if let Some(rules) = aggregation::aggregated_rules(&n, &roles[&n], &roles) {
                roles.get_mut(&n).unwrap()["rules"] = json!(rules);
            }
        }
    }
    let mut all: Vec<(&'static ResourceDef, &str, Value)> =
        roles.into_values().map(|r| (&CLUSTER_ROLES as &'static ResourceDef, "", r)).collect();
    all.extend(cluster_role_bindings().into_iter().map(|b| (&CLUSTER_ROLE_BINDINGS as &'static ResourceDef, "", b)));
    all.extend(extra.iter().cloned());
    authorizer(&all)
}

fn req(verb: &str, group: &str, resource: &str, ns: &str) -> Attributes {
    let (resource, sub) = match resource.split_once('/') {
        Some((r, s)) => (r, Some(s.to_owned())),
        None => (resource, None),
    };
    Attributes::Resource(ResourceAttributes {
        verb: verb.into(),
        group: group.into(),
        resource: resource.into(),
        subresource: sub,
        namespace: ns.into(),
        name: String::new(),
    })
}

fn url(path: &str) -> Attributes {
    Attributes::NonResource { verb: "get".into(), path: path.into() }
}

fn role_binding(
    ns: &str,
    name: &str,
    kind: &str,
    role: &str,
    subjects: Value,
) -> (&'static ResourceDef, &'static str, Value) {
    let ns: &'static str = Box::leak(ns.to_owned().into_boxed_str());
    (
        &ROLE_BINDINGS,
        ns,
        json!({"metadata": {"name": name, "namespace": ns}, "roleRef": {"kind": kind, "name": role}, "subjects": subjects}),
    )
}

#[test]
fn a_user_with_no_bindings_may_only_discover_and_ask_about_themselves() {
    let a = bootstrapped(&[]);
    let alice = |attrs: &Attributes| a.authorize("alice", &["dev".into()], attrs).allowed;
    assert!(alice(&url("/version")));
    assert!(alice(&url("/apis/apps/v1")));
    assert!(alice(&url("/openapi/v3")));
    assert!(!alice(&url("/metrics")), "system:monitoring only");
    assert!(alice(&req("create", "authorization.k8s.io", "selfsubjectaccessreviews", "")));
    assert!(alice(&req("create", "authentication.k8s.io", "selfsubjectreviews", "")));
    assert!(!alice(&req("list", "", "pods", "default")));
    assert!(!alice(&req("create", "authorization.k8s.io", "subjectaccessreviews", "")));
    let d = a.authorize("alice", &[], &req("get", "", "pods", "default"));
    assert_eq!(d, Decision { allowed: false, reason: String::new() });
    // Masters are not asked about.
    assert!(a.authorize("root", &["system:masters".into()], &req("delete", "", "nodes", "")).allowed);
}

#[test]
fn view_in_a_namespace_reads_but_does_not_write_or_see_secrets() {
    let a = bootstrapped(&[role_binding(
        "team",
        "alice-view",
        "ClusterRole",
        "view",
        json!([{"kind": "User", "name": "alice"}]),
    )]);
    let alice = |attrs: &Attributes| a.authorize("alice", &[], attrs).allowed;
    assert!(alice(&req("get", "", "pods", "team")));
    assert!(alice(&req("list", "", "pods", "team")));
    assert!(alice(&req("watch", "apps", "deployments", "team")));
    assert!(alice(&req("get", "", "pods/log", "team")));
    assert!(alice(&req("list", "metrics.k8s.io", "pods", "team")), "aggregated from the metrics reader");
    assert!(!alice(&req("get", "", "secrets", "team")));
    assert!(!alice(&req("create", "", "pods", "team")));
    assert!(!alice(&req("create", "", "pods/exec", "team")));
    assert!(!alice(&req("get", "", "pods", "other")), "another namespace");
    assert!(!alice(&req("list", "", "pods", "")), "all namespaces");
}

#[test]
fn aggregation_makes_edit_contain_view_and_admin_contain_edit() {
    let a = bootstrapped(&[
        role_binding("team", "e", "ClusterRole", "edit", json!([{"kind": "Group", "name": "devs"}])),
        role_binding("team", "adm", "ClusterRole", "admin", json!([{"kind": "User", "name": "boss"}])),
    ]);
    let dev = |attrs: &Attributes| a.authorize("bob", &["devs".into()], attrs).allowed;
    assert!(dev(&req("get", "", "pods", "team")), "view's");
    assert!(dev(&req("create", "", "pods", "team")));
    assert!(dev(&req("get", "", "secrets", "team")));
    assert!(dev(&req("create", "", "serviceaccounts/token", "team")));
    assert!(!dev(&req("create", "rbac.authorization.k8s.io", "rolebindings", "team")));
    let boss = |attrs: &Attributes| a.authorize("boss", &[], attrs).allowed;
    assert!(boss(&req("create", "rbac.authorization.k8s.io", "rolebindings", "team")));
    assert!(boss(&req("delete", "apps", "deployments", "team")), "edit's");
    assert!(boss(&req("list", "", "configmaps", "team")), "view's through edit");
}

#[test]
fn service_accounts_are_matched_by_subject_and_implicit_groups() {
    let a = bootstrapped(&[
        role_binding("team", "sa", "ClusterRole", "view", json!([{"kind": "ServiceAccount", "name": "builder"}])),
        role_binding(
            "ops",
            "all-sa",
            "ClusterRole",
            "edit",
            json!([{"kind": "Group", "name": "system:serviceaccounts:ops"}]),
        ),
    ]);
    let groups = vec!["system:serviceaccounts".to_owned(), "system:serviceaccounts:team".to_owned()];
    let builder = |attrs: &Attributes| a.authorize("system:serviceaccount:team:builder", &groups, attrs).allowed;
    assert!(builder(&req("list", "", "pods", "team")), "the binding's namespace is the account's");
    assert!(!builder(&req("create", "", "pods", "ops")));
    // No groups from the token: the implicit ones are added.
    assert!(a.authorize("system:serviceaccount:ops:deployer", &[], &req("create", "", "pods", "ops")).allowed);
    assert!(!a.authorize("system:serviceaccount:team:deployer", &[], &req("list", "", "pods", "team")).allowed);
}

#[test]
fn roles_resource_names_and_missing_roles() {
    let a = authorizer(&[
        (
            &ROLES,
            "team",
            json!({"metadata": {"name": "one-config", "namespace": "team"}, "rules": [
                {"verbs": ["get", "update"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["settings"]},
            ]}),
        ),
        role_binding("team", "ok", "Role", "one-config", json!([{"kind": "User", "name": "carol"}])),
        role_binding("team", "dangling", "ClusterRole", "gone", json!([{"kind": "User", "name": "carol"}])),
        role_binding("team", "wrong-ns", "Role", "elsewhere", json!([{"kind": "User", "name": "dave"}])),
    ]);
    let named = |verb: &str, name: &str| {
        Attributes::Resource(ResourceAttributes {
            verb: verb.into(),
            group: String::new(),
            resource: "configmaps".into(),
            subresource: None,
            namespace: "team".into(),
            name: name.into(),
        })
    };
    assert!(a.authorize("carol", &[], &named("get", "settings")).allowed);
    assert!(a.authorize("carol", &[], &named("update", "settings")).allowed);
    let d = a.authorize("carol", &[], &named("get", "other"));
    assert!(!d.allowed);
    assert_eq!(d.reason, "RBAC: clusterrole.rbac.authorization.k8s.io \"gone\" not found");
    let d = a.authorize("dave", &[], &named("get", "settings"));
    assert_eq!(d.reason, "RBAC: role.rbac.authorization.k8s.io \"elsewhere\" not found");
    let rules = a.rules_for("carol", &[], "team");
    assert_eq!(rules.rules.len(), 1);
    assert_eq!(rules.errors.len(), 1);
}

#[test]
fn an_edited_default_is_kept_when_autoupdate_is_false() {
    let want = cluster_roles().into_iter().find(|r| r["metadata"]["name"] == "system:basic-user").unwrap();
    let mut edited = want.clone();
    edited["rules"] = json!([]);
    assert!(super::bootstrap::reconcile(&edited, &want).is_some_and(|v| v["rules"] == want["rules"]), "rules restored");
    edited["metadata"]["annotations"][super::bootstrap::AUTOUPDATE] = json!("false");
    assert_eq!(super::bootstrap::reconcile(&edited, &want), None);
    assert_eq!(super::bootstrap::reconcile(&want, &want), None, "nothing to do");
    let mut more = want.clone();
    more["rules"].as_array_mut().unwrap().push(json!({"verbs": ["get"], "nonResourceURLs": ["/x"]}));
    assert_eq!(super::bootstrap::reconcile(&more, &want), None, "extra rules stay");
}
