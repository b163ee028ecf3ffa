//! RBAC's rule matching, as Kubernetes' `rbac/v1` helpers do it
//! (`plugin/pkg/auth/authorizer/rbac`, `pkg/apis/rbac/v1/evaluation_helpers.go`):
//! which request a `PolicyRule` allows and which subject a binding names.
//! Pure functions over parsed objects; the cache and the requests live in
//! `mod.rs`.

use serde_json::{Value, json};

/// Matches every verb, group, resource or URL.
const ALL: &str = "*";

/// One `PolicyRule`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct PolicyRule {
    pub(crate) verbs: Vec<String>,
    pub(crate) api_groups: Vec<String>,
    pub(crate) resources: Vec<String>,
    pub(crate) resource_names: Vec<String>,
    pub(crate) non_resource_urls: Vec<String>,
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

fn strs(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

impl PolicyRule {
    /// A resource rule.
    pub(crate) fn resources(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
        PolicyRule { verbs: strs(verbs), api_groups: strs(groups), resources: strs(resources), ..Default::default() }
    }

    /// A non-resource rule.
    pub(crate) fn urls(verbs: &[&str], urls: &[&str]) -> PolicyRule {
        PolicyRule { verbs: strs(verbs), non_resource_urls: strs(urls), ..Default::default() }
    }

    /// The same rule limited to `names`.
    #[cfg(test)]
    pub(crate) fn names(mut self, names: &[&str]) -> PolicyRule {
        self.resource_names = strs(names);
        self
    }

    /// From a `PolicyRule` JSON object (missing lists are empty).
    pub(crate) fn from_json(v: &Value) -> PolicyRule {
        PolicyRule {
            verbs: strings(v, "verbs"),
            api_groups: strings(v, "apiGroups"),
            resources: strings(v, "resources"),
            resource_names: strings(v, "resourceNames"),
            non_resource_urls: strings(v, "nonResourceURLs"),
        }
    }

    /// The rules of a Role or ClusterRole object.
    pub(crate) fn of_role(role: &Value) -> Vec<PolicyRule> {
        role.get("rules")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(PolicyRule::from_json).collect())
            .unwrap_or_default()
    }

    /// As JSON, empty lists left out (as Kubernetes' `omitempty`).
    pub(crate) fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("verbs".into(), json!(self.verbs));
        for (k, v) in [
            ("apiGroups", &self.api_groups),
            ("resources", &self.resources),
            ("resourceNames", &self.resource_names),
            ("nonResourceURLs", &self.non_resource_urls),
        ] {
            if !v.is_empty() {
                m.insert(k.into(), json!(v));
            }
        }
        Value::Object(m)
    }

    fn verb_matches(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == ALL || v == verb)
    }

    /// Whether this rule allows `attrs`.
    pub(crate) fn allows(&self, attrs: &Attributes) -> bool {
        match attrs {
            Attributes::Resource(r) => {
                self.verb_matches(&r.verb)
                    && self.api_groups.iter().any(|g| g == ALL || *g == r.group)
                    && resource_matches(&self.resources, &r.resource, r.subresource.as_deref())
                    && (self.resource_names.is_empty() || self.resource_names.contains(&r.name))
            }
            Attributes::NonResource { verb, path } => {
                self.verb_matches(verb) && self.non_resource_urls.iter().any(|u| url_matches(u, path))
            }
        }
    }
}

/// `resources` entries: `*` is all, `pods` is the resource alone, `pods/log`
/// a subresource, `*/scale` one subresource of every resource.
fn resource_matches(rules: &[String], resource: &str, subresource: Option<&str>) -> bool {
    let combined = match subresource {
        Some(s) => format!("{resource}/{s}"),
        None => resource.to_owned(),
    };
    rules.iter().any(|r| {
        r == ALL || *r == combined || subresource.is_some_and(|s| r.strip_prefix("*/").is_some_and(|rs| rs == s))
    })
}

/// `nonResourceURLs` entries: `*` is all, a trailing `*` a prefix, anything
/// else the exact path.
fn url_matches(rule: &str, path: &str) -> bool {
    rule == ALL || rule == path || rule.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix))
}

/// A resource request's attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourceAttributes {
    pub(crate) verb: String,
    pub(crate) group: String,
    pub(crate) resource: String,
    pub(crate) subresource: Option<String>,
    /// `""` at the cluster scope or across namespaces.
    pub(crate) namespace: String,
    /// `""` when the request names no object.
    pub(crate) name: String,
}

/// What is asked, as Kubernetes' `authorizer.Attributes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Attributes {
    Resource(ResourceAttributes),
    NonResource { verb: String, path: String },
}

/// A binding's subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Subject {
    pub(crate) kind: String,
    pub(crate) name: String,
    pub(crate) namespace: String,
}

impl Subject {
    pub(crate) fn from_json(v: &Value) -> Subject {
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
        Subject { kind: s("kind"), name: s("name"), namespace: s("namespace") }
    }

    /// Whether the subject names `user` (with `groups`); a ServiceAccount
    /// without a namespace, in a RoleBinding, is in the binding's
    /// (`binding_namespace`), as Kubernetes' `appliesToUser`.
    pub(crate) fn applies_to(&self, user: &str, groups: &[String], binding_namespace: &str) -> bool {
        match self.kind.as_str() {
            "User" => self.name == user,
            "Group" => groups.contains(&self.name),
            "ServiceAccount" => {
                let ns = if self.namespace.is_empty() { binding_namespace } else { &self.namespace };
                !ns.is_empty() && user == format!("system:serviceaccount:{ns}:{}", self.name)
            }
            _ => false,
        }
    }
}

/// A binding's `roleRef`: `Role` (in the binding's namespace) or `ClusterRole`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RoleRef {
    pub(crate) kind: String,
    pub(crate) name: String,
}

/// A RoleBinding or ClusterRoleBinding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Binding {
    /// `""` for a ClusterRoleBinding.
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) role_ref: RoleRef,
    pub(crate) subjects: Vec<Subject>,
}

impl Binding {
    pub(crate) fn from_json(namespace: &str, name: &str, v: &Value) -> Binding {
        let r = |k: &str| v.pointer(&format!("/roleRef/{k}")).and_then(Value::as_str).unwrap_or_default().to_owned();
        Binding {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            role_ref: RoleRef { kind: r("kind"), name: r("name") },
            subjects: v
                .get("subjects")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(Subject::from_json).collect())
                .unwrap_or_default(),
        }
    }

    /// How Kubernetes names the binding that allowed a request:
    /// `ClusterRoleBinding "x" of ClusterRole "y" to Group "z"`.
    pub(crate) fn describe(&self, user: &str, groups: &[String]) -> String {
        let subject = self
            .subjects
            .iter()
            .find(|s| s.applies_to(user, groups, &self.namespace))
            .map(|s| match s.kind.as_str() {
                "ServiceAccount" => {
                    let ns = if s.namespace.is_empty() { &self.namespace } else { &s.namespace };
                    format!("{} {:?}", s.kind, format!("{}/{ns}", s.name))
                }
                _ => format!("{} {:?}", s.kind, s.name),
            })
            .unwrap_or_default();
        if self.namespace.is_empty() {
            format!(
                "ClusterRoleBinding {:?} of {} {:?} to {subject}",
                self.name, self.role_ref.kind, self.role_ref.name
            )
        } else {
            format!(
                "RoleBinding {:?} of {} {:?} to {subject}",
                format!("{}/{}", self.name, self.namespace),
                self.role_ref.kind,
                self.role_ref.name
            )
        }
    }

    /// Whether any subject names the user.
    pub(crate) fn applies_to(&self, user: &str, groups: &[String]) -> bool {
        self.subjects.iter().any(|s| s.applies_to(user, groups, &self.namespace))
    }
}

/// The groups Kubernetes adds to every authenticated user (and to service
/// accounts theirs), so bindings to them apply: `system:authenticated`;
/// for `system:serviceaccount:{ns}:{name}` also `system:serviceaccounts`
/// and `system:serviceaccounts:{ns}`.
pub(crate) fn effective_groups(user: &str, groups: &[String]) -> Vec<String> {
    let mut out = groups.to_vec();
    let mut add = |g: String| {
        if !out.contains(&g) {
            out.push(g);
        }
    };
    if user != "system:anonymous" {
        add("system:authenticated".into());
    }
    if let Some(rest) = user.strip_prefix("system:serviceaccount:")
        && let Some((ns, _)) = rest.split_once(':')
    {
        add("system:serviceaccounts".into());
        add(format!("system:serviceaccounts:{ns}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(verb: &str, group: &str, resource: &str, sub: Option<&str>, ns: &str, name: &str) -> Attributes {
        Attributes::Resource(ResourceAttributes {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.map(str::to_owned),
            namespace: ns.into(),
            name: name.into(),
        })
    }

    #[test]
    fn verbs_groups_and_resources_match_as_kubernetes_matches_them() {
        let read = PolicyRule::resources(&["get", "list", "watch"], &[""], &["pods", "pods/log"]);
        assert!(read.allows(&res("get", "", "pods", None, "default", "web")));
        assert!(read.allows(&res("list", "", "pods", None, "", "")));
        assert!(!read.allows(&res("create", "", "pods", None, "default", "")));
        assert!(!read.allows(&res("get", "apps", "pods", None, "default", "web")), "another group");
        assert!(!read.allows(&res("get", "", "secrets", None, "default", "s")));
        // A subresource is its own resource: `pods` does not give `pods/exec`.
        assert!(read.allows(&res("get", "", "pods", Some("log"), "default", "web")));
        assert!(!read.allows(&res("get", "", "pods", Some("exec"), "default", "web")));
        let all = PolicyRule::resources(&["*"], &["*"], &["*"]);
        assert!(all.allows(&res("delete", "apps", "deployments", Some("scale"), "x", "y")));
        assert!(!all.allows(&Attributes::NonResource { verb: "get".into(), path: "/version".into() }));
        let scale = PolicyRule::resources(&["update"], &["apps"], &["*/scale"]);
        assert!(scale.allows(&res("update", "apps", "deployments", Some("scale"), "d", "w")));
        assert!(!scale.allows(&res("update", "apps", "deployments", None, "d", "w")));
    }

    #[test]
    fn resource_names_limit_a_rule_to_those_objects() {
        let one = PolicyRule::resources(&["get", "update"], &[""], &["configmaps"]).names(&["settings"]);
        assert!(one.allows(&res("get", "", "configmaps", None, "default", "settings")));
        assert!(!one.allows(&res("get", "", "configmaps", None, "default", "other")));
        // A list names no object, so a rule with names never allows it.
        assert!(!one.allows(&res("list", "", "configmaps", None, "default", "")));
    }

    #[test]
    fn non_resource_urls_match_exactly_or_by_prefix() {
        let r = PolicyRule::urls(&["get"], &["/version", "/apis/*", "/healthz"]);
        let get = |p: &str| Attributes::NonResource { verb: "get".into(), path: p.into() };
        assert!(r.allows(&get("/version")));
        assert!(r.allows(&get("/apis/apps/v1")));
        assert!(r.allows(&get("/apis/")));
        assert!(!r.allows(&get("/apis")), "the prefix is `/apis/`");
        assert!(!r.allows(&get("/healthz/etcd")));
        assert!(!r.allows(&Attributes::NonResource { verb: "post".into(), path: "/version".into() }));
        assert!(!r.allows(&res("get", "", "pods", None, "", "")));
    }

    #[test]
    fn subjects_and_implicit_groups() {
        let sa = "system:serviceaccount:team:builder";
        let groups = effective_groups(sa, &[]);
        assert_eq!(groups, ["system:authenticated", "system:serviceaccounts", "system:serviceaccounts:team"]);
        let s =
            |kind: &str, name: &str, ns: &str| Subject { kind: kind.into(), name: name.into(), namespace: ns.into() };
        assert!(s("ServiceAccount", "builder", "team").applies_to(sa, &groups, ""));
        assert!(s("ServiceAccount", "builder", "").applies_to(sa, &groups, "team"), "the binding's namespace");
        assert!(!s("ServiceAccount", "builder", "").applies_to(sa, &groups, ""));
        assert!(!s("ServiceAccount", "builder", "other").applies_to(sa, &groups, "team"));
        assert!(s("Group", "system:serviceaccounts:team", "").applies_to(sa, &groups, ""));
        assert!(!s("User", "builder", "").applies_to(sa, &groups, ""));
        let alice = effective_groups("alice", &["dev".into()]);
        assert_eq!(alice, ["dev", "system:authenticated"]);
        assert!(s("User", "alice", "").applies_to("alice", &alice, ""));
        assert!(s("Group", "dev", "").applies_to("alice", &alice, ""));
        assert!(!s("Group", "ops", "").applies_to("alice", &alice, ""));
        assert!(!s("Thing", "alice", "").applies_to("alice", &alice, ""));
    }
}
