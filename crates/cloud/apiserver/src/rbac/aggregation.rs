//! The ClusterRole aggregation controller (Kubernetes'
//! `pkg/controller/clusterroleaggregation`): a ClusterRole with an
//! `aggregationRule` gets as `rules` the rules of every other ClusterRole
//! its selectors match, in name order, each rule once. It runs in the API
//! server (beside the service account controller) because the
//! authorizer's bootstrap needs it before the first request: `view` must
//! have its rules when the server starts serving.

use std::collections::BTreeMap;
use std::time::Duration;

use edgehive_store::informer::{Change, inform};
use edgehive_store::resources::CLUSTER_ROLES;
use edgehive_store::selector::LabelSelector;
use edgehive_store::{ListOptions, Store, StoreError};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

/// How long after a failed write the roles are aggregated again.
const RETRY: Duration = Duration::from_secs(1);

/// The rules `name` aggregates from `roles` (every ClusterRole by name), or
/// `None` if it has no aggregation rule. A selector that does not parse
/// matches nothing.
pub(crate) fn aggregated_rules(name: &str, role: &Value, roles: &BTreeMap<String, Value>) -> Option<Vec<Value>> {
    let selectors = role.pointer("/aggregationRule/clusterRoleSelectors")?.as_array()?;
    let selectors: Vec<LabelSelector> = selectors.iter().filter_map(|s| LabelSelector::from_json(s).ok()).collect();
    let mut rules: Vec<Value> = Vec::new();
    for (other, v) in roles {
        if other == name {
            continue;
        }
        let empty = serde_json::Map::new();
        let labels = v.pointer("/metadata/labels").and_then(Value::as_object).unwrap_or(&empty);
        if !selectors.iter().any(|s| s.matches(labels)) {
            continue;
        }
        for rule in v.get("rules").and_then(Value::as_array).into_iter().flatten() {
            if !rules.contains(rule) {
                rules.push(rule.clone());
            }
        }
    }
    Some(rules)
}

/// Brings every aggregated ClusterRole's rules up to date. Aggregated
/// roles may aggregate each other (`admin` takes `edit`'s, which takes
/// `view`'s): the rules are worked out to a fixed point in memory first
/// (a cycle stops after a few rounds), then the roles that changed are
/// written.
pub(crate) async fn aggregate_all(store: &Store) -> Result<(), StoreError> {
    let list = store.list(&CLUSTER_ROLES, &ListOptions::default()).await?;
    let stored: BTreeMap<String, Value> =
        list.items.iter().filter_map(|o| Some((o.name().to_owned(), o.value().ok()?.clone()))).collect();
    let mut roles = stored.clone();
    for _ in 0..8 {
        let mut changed = false;
        let names: Vec<String> = roles.keys().cloned().collect();
        for name in names {
            let Some(role) = roles.get(&name) else { continue };
            let Some(rules) = aggregated_rules(&name, role, &roles) else { continue };
            let rules = Value::Array(rules);
            if role.get("rules") != Some(&rules) {
                if let Some(r) = roles.get_mut(&name) {
                    r["rules"] = rules;
                }
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    for (name, role) in &roles {
        if stored.get(name).and_then(|s| s.get("rules")) == role.get("rules") {
            continue;
        }
        let rules = role.get("rules").cloned().unwrap_or_else(|| json!([]));
        let written = store
            .update_with(&CLUSTER_ROLES, "", name, |cur| -> Result<Option<Value>, StoreError> {
                let mut v = cur.value()?.clone();
                v["rules"] = rules.clone();
                Ok(Some(v))
            })
            .await;
        match written {
            Ok(_) => tracing::info!(role = %name, "aggregated a cluster role's rules"),
            Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The controller: aggregates again whenever a ClusterRole changes, until `stop`.
pub(crate) async fn run(store: Store, stop: CancellationToken) {
    let (tx, mut changes) = mpsc::channel(256);
    let watch = tokio::spawn(inform(store.clone(), "rbac-aggregation", &CLUSTER_ROLES, tx, stop.clone()));
    let mut failed = false;
    async {
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                change = changes.recv() => match change {
                    Some(Change::Upsert { .. } | Change::Deleted(_) | Change::Relisted { .. }) => {}
                    None => break,
                },
                _ = tokio::time::sleep(RETRY), if failed => {}
            }
            // A burst of changes is one pass.
            while changes.try_recv().is_ok() {}
            failed = match aggregate_all(&store).await {
                Ok(()) => false,
                Err(e) => {
                    tracing::warn!(error = %e, "aggregate cluster roles");
                    true
                }
            };
        }
    }
    .instrument(tracing::info_span!("clusterrole-aggregation"))
    .await;
    let _ = watch.await;
}
