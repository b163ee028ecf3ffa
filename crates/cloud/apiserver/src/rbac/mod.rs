//! The RBAC authorizer (Kubernetes' `plugin/pkg/auth/authorizer/rbac`):
//! a request is allowed when a rule of a role bound to its user allows
//! it. `system:masters` is allowed everything before RBAC is asked, as
//! kube-apiserver's privileged-group authorizer does.
//!
//! Roles and bindings are read from an in-memory [`Policy`] kept current
//! by watches of the four RBAC resources ([`run`]), never from the store
//! per request. The policy is loaded once before the server serves
//! ([`Authorizer::load`]), so no request meets an empty cache. A change is
//! seen within a watch event's latency, as in Kubernetes (its informers).
//!
//! `bootstrap.rs` writes the default roles and bindings at start;
//! `aggregation.rs` fills the aggregated ClusterRoles (`admin`, `edit`,
//! `view`); `escalation.rs` refuses roles and bindings that would give
//! more than their author holds.

pub(crate) mod aggregation;
pub(crate) mod bootstrap;
pub(crate) mod escalation;
pub(crate) mod rules;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use edgehive_store::informer::{Change, inform};
use edgehive_store::resources::{CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, ROLE_BINDINGS, ROLES, ResourceDef};
use edgehive_store::{ListOptions, Object, Store, StoreError};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

pub(crate) use rules::{Attributes, Binding, PolicyRule, ResourceAttributes};

/// The group whose members may do anything, unchecked.
pub(crate) const MASTERS: &str = "system:masters";

/// Roles and bindings as last seen.
#[derive(Debug, Default)]
pub(crate) struct Policy {
    cluster_roles: HashMap<String, Arc<Vec<PolicyRule>>>,
    /// By (namespace, name).
    roles: HashMap<(String, String), Arc<Vec<PolicyRule>>>,
    cluster_role_bindings: BTreeMap<String, Binding>,
    /// By (namespace, name): one namespace's are a range.
    role_bindings: BTreeMap<(String, String), Binding>,
}

impl Policy {
    fn apply(&mut self, res: &'static ResourceDef, obj: &Object, present: bool) {
        let value = match obj.value() {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(key = obj.key(), error = %e, "an RBAC object does not parse; ignored");
                return;
            }
        };
        self.apply_value(res, obj.namespace(), obj.name(), present.then_some(value));
    }

    /// Records an object of `res` (`None`: it is gone).
    pub(crate) fn apply_value(
        &mut self,
        res: &'static ResourceDef,
        ns: &str,
        name: &str,
        value: Option<&serde_json::Value>,
    ) {
        let (ns, name) = (ns.to_owned(), name.to_owned());
        let present = value.is_some();
        let value = value.unwrap_or(&serde_json::Value::Null);
        if std::ptr::eq(res, &CLUSTER_ROLES) {
            if present {
                self.cluster_roles.insert(name, Arc::new(PolicyRule::of_role(value)));
            } else {
                self.cluster_roles.remove(&name);
            }
        } else if std::ptr::eq(res, &ROLES) {
            if present {
                self.roles.insert((ns, name), Arc::new(PolicyRule::of_role(value)));
            } else {
                self.roles.remove(&(ns, name));
            }
        } else if std::ptr::eq(res, &CLUSTER_ROLE_BINDINGS) {
            if present {
                self.cluster_role_bindings.insert(name.clone(), Binding::from_json("", &name, value));
            } else {
                self.cluster_role_bindings.remove(&name);
            }
        } else if std::ptr::eq(res, &ROLE_BINDINGS) {
            if present {
                let b = Binding::from_json(&ns, &name, value);
                self.role_bindings.insert((ns, name), b);
            } else {
                self.role_bindings.remove(&(ns, name));
            }
        }
    }

    fn clear(&mut self, res: &'static ResourceDef) {
        if std::ptr::eq(res, &CLUSTER_ROLES) {
            self.cluster_roles.clear();
        } else if std::ptr::eq(res, &ROLES) {
            self.roles.clear();
        } else if std::ptr::eq(res, &CLUSTER_ROLE_BINDINGS) {
            self.cluster_role_bindings.clear();
        } else if std::ptr::eq(res, &ROLE_BINDINGS) {
            self.role_bindings.clear();
        }
    }

    /// The rules a binding gives, or why none (its role is missing):
    /// Kubernetes' message for a missing object.
    fn rules_of(&self, b: &Binding) -> Result<Arc<Vec<PolicyRule>>, String> {
        match b.role_ref.kind.as_str() {
            "ClusterRole" => self
                .cluster_roles
                .get(&b.role_ref.name)
                .cloned()
                .ok_or_else(|| format!("clusterrole.rbac.authorization.k8s.io \"{}\" not found", b.role_ref.name)),
            "Role" => self
                .roles
                .get(&(b.namespace.clone(), b.role_ref.name.clone()))
                .cloned()
                .ok_or_else(|| format!("role.rbac.authorization.k8s.io \"{}\" not found", b.role_ref.name)),
            other => Err(format!("unsupported role reference kind: {other:?}")),
        }
    }

    /// Visits the rules that apply to the user in `namespace` (`""`: only
    /// the cluster-wide ones), ClusterRoleBindings first, as Kubernetes'
    /// `VisitRulesFor`; `visit` returns false to stop. Missing roles are
    /// collected as errors.
    fn visit_rules(
        &self,
        user: &str,
        groups: &[String],
        namespace: &str,
        mut visit: impl FnMut(&Binding, &PolicyRule) -> bool,
    ) -> Vec<String> {
        let mut errors = Vec::new();
        let bindings = self.cluster_role_bindings.values().chain(
            self.role_bindings
                .range((namespace.to_owned(), String::new())..)
                .take_while(|((ns, _), _)| !namespace.is_empty() && ns == namespace)
                .map(|(_, b)| b),
        );
        for b in bindings {
            if !b.applies_to(user, groups) {
                continue;
            }
            match self.rules_of(b) {
                Ok(rules) => {
                    for r in rules.iter() {
                        if !visit(b, r) {
                            return errors;
                        }
                    }
                }
                Err(e) => errors.push(e),
            }
        }
        errors
    }
}

/// Whether a request is allowed, and the detail Kubernetes appends to a
/// refusal (`RBAC: ...` naming missing roles; empty otherwise).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    pub(crate) allowed: bool,
    pub(crate) reason: String,
}

/// The rules a user holds in a namespace (SelfSubjectRulesReview).
#[derive(Debug, Default)]
pub(crate) struct RuleSet {
    pub(crate) rules: Vec<PolicyRule>,
    pub(crate) errors: Vec<String>,
}

/// The authorizer: the policy cache and its decisions.
#[derive(Debug, Default)]
pub(crate) struct Authorizer {
    pub(crate) policy: RwLock<Policy>,
}

impl Authorizer {
    /// Reads every role and binding once (before serving).
    pub(crate) async fn load(&self, store: &Store) -> Result<(), StoreError> {
        let mut fresh = Policy::default();
        for res in [&CLUSTER_ROLES, &ROLES, &CLUSTER_ROLE_BINDINGS, &ROLE_BINDINGS] {
            for obj in store.list(res, &ListOptions::default()).await?.items {
                fresh.apply(res, &obj, true);
            }
        }
        *self.policy.write().unwrap_or_else(|p| p.into_inner()) = fresh;
        Ok(())
    }

    fn change(&self, change: Change, res: &'static ResourceDef) {
        let mut p = self.policy.write().unwrap_or_else(|p| p.into_inner());
        match change {
            Change::Upsert { object, .. } => p.apply(res, &object, true),
            Change::Deleted(object) => p.apply(res, &object, false),
            Change::Relisted { objects, .. } => {
                p.clear(res);
                // Each dropped once applied, with the parse it keeps.
                for o in objects {
                    p.apply(res, &o, true);
                }
            }
        }
    }

    /// Decides `attrs` for `user` in `groups` (the implicit groups are
    /// added here).
    pub(crate) fn authorize(&self, user: &str, groups: &[String], attrs: &Attributes) -> Decision {
        if groups.iter().any(|g| g == MASTERS) {
            return Decision { allowed: true, reason: String::new() };
        }
        let groups = rules::effective_groups(user, groups);
        let namespace = match attrs {
            Attributes::Resource(r) => r.namespace.as_str(),
            Attributes::NonResource { .. } => "",
        };
        let mut by = None;
        let errors =
            self.policy.read().unwrap_or_else(|p| p.into_inner()).visit_rules(user, &groups, namespace, |b, r| {
                if r.allows(attrs) {
                    by = Some(b.describe(user, &groups));
                }
                by.is_none()
            });
        match by {
            Some(source) => Decision { allowed: true, reason: format!("RBAC: allowed by {source}") },
            None if errors.is_empty() => Decision { allowed: false, reason: String::new() },
            None => Decision { allowed: false, reason: format!("RBAC: {}", errors.join(", ")) },
        }
    }

    /// Every rule the user holds in `namespace` (cluster-wide ones too).
    pub(crate) fn rules_for(&self, user: &str, groups: &[String], namespace: &str) -> RuleSet {
        let groups = rules::effective_groups(user, groups);
        let mut rules: Vec<PolicyRule> = Vec::new();
        let errors =
            self.policy.read().unwrap_or_else(|p| p.into_inner()).visit_rules(user, &groups, namespace, |_, r| {
                if !rules.contains(r) {
                    rules.push(r.clone());
                }
                true
            });
        RuleSet { rules, errors }
    }

    /// The ClusterRole's rules as cached (for escalation checks).
    pub(crate) fn cluster_role(&self, name: &str) -> Option<Arc<Vec<PolicyRule>>> {
        self.policy.read().unwrap_or_else(|p| p.into_inner()).cluster_roles.get(name).cloned()
    }

    /// The Role's rules as cached.
    pub(crate) fn role(&self, namespace: &str, name: &str) -> Option<Arc<Vec<PolicyRule>>> {
        self.policy
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .roles
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }
}

/// Keeps `authorizer` current until `stop`: one watch per RBAC resource.
pub(crate) async fn run(store: Store, authorizer: Arc<Authorizer>, stop: CancellationToken) {
    let resources: [&'static ResourceDef; 4] = [&CLUSTER_ROLES, &ROLES, &CLUSTER_ROLE_BINDINGS, &ROLE_BINDINGS];
    let mut tasks = Vec::new();
    for res in resources {
        let (tx, mut rx) = mpsc::channel(256);
        tasks.push(tokio::spawn(inform(store.clone(), "rbac", res, tx, stop.clone())));
        let authorizer = Arc::clone(&authorizer);
        tasks.push(tokio::spawn(
            async move {
                while let Some(change) = rx.recv().await {
                    authorizer.change(change, res);
                }
            }
            .instrument(tracing::info_span!("rbac-cache", resource = res.plural)),
        ));
    }
    for t in tasks {
        let _ = t.await;
    }
}

#[cfg(test)]
mod tests;
